/*
 * inspect.h - what is inside a cg file: tensor statistics, text dumps, and
 * the table and JSON summaries that cg-inspect prints.
 *
 * Every dtype is read as double on the fly, a chunk at a time, so nothing
 * here allocates in proportion to a tensor.  The element decoder is public
 * because comparing two files tensor by tensor (cg-inspect --diff) needs
 * the same view of the values.
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

/*
 * Decode elements [first, first + n) of t into out[n] as doubles: halves
 * through cg_f16_to_f32/cg_bf16_to_f32, q8_0 and q4_0 as ggml does
 * (scale * q, scale * (nibble - 8)).  Integers above 2^53 round.  Returns
 * 0, or -1 with a message if the range is outside the tensor.
 */
int cg_tensor_decode(double *out, const struct cg_tensor *t, uint64_t first,
                     size_t n);

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

#ifdef __cplusplus
}
#endif
#endif
