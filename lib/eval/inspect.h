/*
 * eval/inspect.h - what is inside a cg file: tensor statistics, text dumps, and
 * the table and JSON summaries that cg-inspect prints.
 *
 * Every dtype is read as double on the fly through the codec table
 * (cg_tensor_decode_f64 in cg.h), a chunk at a time, so nothing here
 * allocates in proportion to a tensor; comparing two files tensor by
 * tensor (cg_diff_new, for cg-inspect --diff) sees the same values.
 */
#ifndef CG_INSPECT_H
#define CG_INSPECT_H

#include <stdint.h>
#include <stdio.h>

#include "cg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CG_HIST_BINS 16
/* Bytes cg_hist_draw may write: a 3-byte UTF-8 character per bin and NUL. */
#define CG_HIST_DRAWN (3 * CG_HIST_BINS + 1)

/*
 * Statistics of one tensor.  Moments, extremes and the histogram are over
 * the finite elements only (nan and inf are counted apart); when there are
 * none, nfinite is 0 and the doubles are 0.
 */
struct cg_stats {
	uint64_t count;   /* all elements */
	uint64_t nfinite; /* elements that are neither nan nor inf */
	uint64_t nan;
	uint64_t inf;
	uint64_t zeros; /* elements equal to 0 (either sign) */
	double min, max;
	double mean, std; /* std is the population one (divide by n) */
	uint64_t hist[CG_HIST_BINS]; /* equal-width bins from min to max */
};

/* Fill s for t (two passes over the data).  Returns 0, or -1 with a
 * message for a tensor whose dtype is unknown. */
int cg_tensor_stats(struct cg_stats *s, const struct cg_tensor *t);

/*
 * Draw s->hist as CG_HIST_BINS characters into out (CG_HIST_DRAWN bytes):
 * Unicode block elements when utf8, else the ASCII ramp " .:-=+*#%@".  An
 * empty bin is a space and any non-empty bin shows at least the lowest
 * mark, so a lone outlier stays visible.
 */
void cg_hist_draw(char *out, const struct cg_stats *s, int utf8);

/*
 * Write t as text to fp: one value per line, or when rows is set one line
 * per run of the last dimension, values separated by a space.  Integers
 * are printed exactly, everything else with %.9g (which gives back the
 * same f32).  Returns 0, or -1 with a message on a write error.
 */
int cg_tensor_dump(FILE *fp, const struct cg_tensor *t, int rows);

/* "784x512" ("scalar" for no dimensions) into out, cut to n bytes. */
void cg_shape_str(char *out, size_t n, const struct cg_tensor *t);
/* "512 B", "1.5 MiB", ... into out[16]. */
void cg_human_size(char out[16], uint64_t bytes);

struct cg_inspect_opts {
	int stats; /* compute per-tensor statistics (reads every element) */
	int utf8;  /* the output can show Unicode block elements */
};

/*
 * The human summary of f to fp: the manifest fields one per line (file,
 * kind, format, arch, config, step, ...; for a data shard the examples,
 * payload and each condition's count), then a table with one row per
 * tensor.  display names the file.  Strings from the file are written
 * with control bytes replaced, so a hostile manifest cannot drive the
 * terminal.  Returns 0, or -1 with a message (write error, no memory).
 */
int cg_inspect_table(FILE *fp, const char *display, const struct cg_file *f,
                     const struct cg_inspect_opts *o);

/*
 * The same summary as one JSON object: "path", then every manifest field,
 * then "tensors" (name, dtype, shape, bytes, sha256 and, with stats,
 * count, min, max, mean, std, zeros, zero_frac, nan, inf, hist) and for a
 * data shard "cond_counts" ([{"cond", "name", "count"}]).  Returns a new
 * object the caller frees with cJSON_Delete, or NULL with a message.
 */
struct cJSON *cg_inspect_json(const char *display, const struct cg_file *f,
                              const struct cg_inspect_opts *o);

/* ----------------------------------------------------------------- diff */

/* What became of one tensor name between files A and B. */
enum cg_diff_status {
	CG_DIFF_IDENTICAL, /* same dtype, shape and bytes */
	CG_DIFF_EQUAL,     /* same shape, every |a - b| <= the tolerance */
	CG_DIFF_DIFFERS,
	CG_DIFF_ONLY_A,
	CG_DIFF_ONLY_B,
	CG_DIFF_NSTATUS
};

/*
 * One tensor compared.  When both sides have the same element count the
 * values are compared in storage order, whatever the dtypes and shapes,
 * and "compared" is set.  A nan facing a nan is no difference; a nan or
 * an infinity facing anything else is an infinite one.  The sums behind
 * rel_l2 and cosine are over the elements finite on both sides.
 */
struct cg_tensor_diff {
	const struct cg_tensor *a, *b; /* NULL on the side that lacks it */
	enum cg_diff_status status;
	int compared;
	uint64_t ndiff; /* elements with |a - b| > the tolerance (or 0) */
	double max_abs; /* largest |a - b| */
	double rel_l2;  /* ||a - b|| / ||a||: 0 for 0/0, inf for x/0 */
	double cosine;  /* a.b / (||a|| ||b||), nan if a norm is 0 */
};

/* A top-level manifest field whose values differ (cJSON_Compare). */
struct cg_field_diff {
	const char *key;
	const struct cJSON *a, *b; /* NULL on the side that lacks it */
};

/*
 * Two files compared: every tensor name of either (A's in A's order,
 * then those only in B in B's order) and every manifest field that
 * differs (likewise).  The entries point into the two files, which must
 * outlive it.
 */
struct cg_diff {
	double tolerance; /* < 0: none, only identical bytes are equal */
	size_t ntensors;
	struct cg_tensor_diff *tensors;
	size_t nfields;
	struct cg_field_diff *fields;
	size_t count[CG_DIFF_NSTATUS]; /* tensors per status */
	size_t na, nb;                 /* tensors in A and in B */
};

/*
 * Compare a with b.  tolerance < 0 asks for identical bytes; a tolerance
 * >= 0 compares values, so that a tensor whose dtype changed but whose
 * values did not (or moved by at most the tolerance) counts as equal.
 * Each pair is decoded a chunk at a time; nothing is allocated per
 * element.  Returns a new diff the caller frees with cg_diff_free, or
 * NULL with a message.
 */
struct cg_diff *cg_diff_new(const struct cg_file *a, const struct cg_file *b,
                            double tolerance);
void cg_diff_free(struct cg_diff *d);
/* 1 if some tensor differs or is in one file only, else 0. */
int cg_diff_differs(const struct cg_diff *d);
/* Compare one pair (both non-NULL) into *td.  Returns 0, or -1 with a
 * message for a dtype it cannot decode. */
int cg_tensor_diff(struct cg_tensor_diff *td, const struct cg_tensor *a,
                   const struct cg_tensor *b, double tolerance);

/*
 * The diff for people: the two names (da, db), each manifest field that
 * differs with its value in A and in B, a count of tensors by status,
 * then one row per tensor.  Returns 0, or -1 with a message.
 */
int cg_diff_table(FILE *fp, const char *da, const char *db,
                  const struct cg_diff *d);

/*
 * The diff as JSON: cg_diff_json_tensor gives one tensor's object
 * ("tensor", "status", "a" and "b" each {dtype, shape} or null, and when
 * both exist "same_dtype", "same_shape" and, when compared, "count",
 * "max_abs", "rel_l2", "ndiff", "cosine", null where not finite);
 * cg_diff_json_summary the summary ("a", "b", "tolerance", "differ",
 * "tensors_a", "tensors_b", a count per status, "fields").  Each returns
 * a new object to free with cJSON_Delete, or NULL with a message.
 */
struct cJSON *cg_diff_json_tensor(const struct cg_tensor_diff *td);
struct cJSON *cg_diff_json_summary(const char *da, const char *db,
                                   const struct cg_diff *d);

#ifdef __cplusplus
}
#endif
#endif
