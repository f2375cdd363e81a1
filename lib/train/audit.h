/*
 * train/audit.h - the record a deterministic call keeps of itself, and the
 * recomputation that checks an update against it.
 *
 * cg-train-step --deterministic writes into its grad or delta a "call"
 * object: every option that changes the update's bytes, and the identity
 * of the shard and of the state the call started from (cg(7), "call").
 * With the base model (named by the update's "base"), the shard and that
 * state, the update can be made again; deterministic mode (gemm.h) makes
 * it again with the same bits on any x86-64 at any thread count, so a
 * coordinator that recomputes it learns whether the worker sent what its
 * inputs give.  cg-audit is the program; the rules are here.
 */
#ifndef CG_AUDIT_H
#define CG_AUDIT_H

#include <stdio.h>

#include "data/shard.h"
#include "exchange/update.h"
#include "model/model.h"
#include "train/state.h"
#include "train/train.h"

/* A call as its update records it. */
struct cg_call {
	struct cg_train_opts o; /* steps, batch, seed, emit, order, opt, clip */
	unsigned char data[32]; /* the shard's identity (cg_state_identity) */
	int has_state;          /* it started from a state read from a file: */
	unsigned char state[32]; /* that state's identity (cg_state_digest) */
	int chunk, checkpoint;   /* its memory plan (cg_train_plan) */
	int distilled;           /* it learned from a teacher */
	int precision;           /* its products' operands: enum cg_precision
	                            (f16: c->o's loss_scale, scale_growth) */
};

/*
 * Add the "call" record of a deterministic call with options o on shard s
 * to manifest (a grad's or delta's): state is the identity of the state
 * it started from (cg_state_digest, taken before the call), or NULL when
 * there was none or it was not read from a file; m's chunk and
 * checkpoint are the plan it ran with.  0, or -1 with a message.
 */
int cg_call_record(struct cJSON *manifest, const struct cg_train_opts *o,
                   const struct cg_shard *s, const unsigned char *state,
                   const struct cg_model *m);

/*
 * u's call record into c: 0, or -1 with a message starting with u's name
 * when u has none (it was not made in deterministic mode) or it is not
 * well formed (a figure out of range, a name not known).
 */
int cg_call_read(const struct cg_update *u, struct cg_call *c);

/* One view of an audited update. */
struct cg_audit_view {
	char name[CG_MAX_NAME];
	uint64_t n;     /* elements */
	uint64_t ndiff; /* elements whose bits differ */
	double maxdiff; /* largest |sent - recomputed| (inf: a NaN) */
};

/* What an audit found. */
struct cg_audit {
	int match;        /* every view's bits and every figure as recomputed */
	int nviews, nbad; /* views, and those that differ */
	struct cg_audit_view *v;
	/* The figures a reduction weighs by, sent and recomputed, and
	 * whether each is what the manifest would hold (cJSON prints 15
	 * digits where they read back within a few ulp). */
	double samples[2], weight[2], loss[2];
	int fig_ok[3]; /* samples, weight, loss */
	int figures_ok;
};

/*
 * Recompute update u (named in messages by u->name) from base model m,
 * shard s and st, the state the worker's call started from (NULL: none),
 * in deterministic mode (turned on for the process), and compare: a
 * with the result (the caller frees it with cg_audit_free).  Returns 0
 * when the audit ran (a->match says whether u is what its inputs give),
 * or -1 with a message when it cannot: u was not made in deterministic
 * mode, or with a teacher or a codec; m, s or st is not the one u names
 * (each said); the recomputation failed.  m is trained in place (delta:
 * restored) and st changed: the caller discards both.
 */
int cg_audit_update(const struct cg_update *u, struct cg_model *m,
                    const char *mname, const struct cg_shard *s,
                    const char *sname, struct cg_state *st, const char *stname,
                    struct cg_audit *a);
void cg_audit_free(struct cg_audit *a);

/*
 * Read update upath, base model mpath, shard spath and, unless stpath is
 * NULL, the state the worker's call started from, and audit the update
 * against them (cg_audit_update) into a (the caller frees it with
 * cg_audit_free).  Returns 0 when the audit ran (a->match says whether
 * the update is what its inputs give), or -1 with a message: a file
 * that cannot be read, a state file that holds no state ("STATE: no such
 * state"), or what cg_audit_update refuses.
 */
int cg_audit_files(const char *upath, const char *mpath, const char *spath,
                   const char *stpath, struct cg_audit *a);

/*
 * What audit a of update name found, for people, on fp: "NAME: match (N
 * tensors)", or "NAME: mismatch: K of N tensors differ" (", and its
 * figures") and a line per tensor and per figure that differs.  Write
 * errors are fp's (ferror).
 */
void cg_audit_table(FILE *fp, const char *name, const struct cg_audit *a);
/*
 * The same as one JSON object: {"update": name, "result": result} and,
 * with a (NULL for an update skipped or not audited), "differ" (an object
 * per tensor that differs: "tensor", "elements", "differ", "max_diff",
 * null for a NaN's), "tensors" and "figures_match".  result is "match",
 * "mismatch", "skipped" or "error".  A new object the caller frees, or
 * NULL when out of memory.
 */
struct cJSON *cg_audit_json(const char *name, const char *result,
                            const struct cg_audit *a);

/* ------------------------------------------------------------ a round */

/* The most updates a round's list holds, and bytes of one of its lines. */
#define CG_AUDIT_MAX_UPDATES 65536
#define CG_AUDIT_MAX_LINE 16384

/* One update of a round, and where its inputs are. */
struct cg_audit_item {
	char *update, *shard, *state; /* state NULL: none */
};

/*
 * The round's list at path ("-": standard input): lines of UPDATE SHARD
 * [STATE] separated by blanks, blank lines and lines whose first word
 * starts with # skipped.  Returns the count, at least one, with *out
 * [count] a new array (free it with cg_audit_round_free), or -1 with *out
 * NULL and a message naming the file (and the line): a line longer than
 * CG_AUDIT_MAX_LINE bytes or not of two or three words, more than
 * CG_AUDIT_MAX_UPDATES updates, none at all, a failed read.
 */
int cg_audit_round_read(const char *path, struct cg_audit_item **out);
/* Free it [n] and its strings; it may be NULL. */
void cg_audit_round_free(struct cg_audit_item *it, int n);

/*
 * Which of n updates of a round to audit: ceil(fraction * n) of them (at
 * least one when fraction > 0), drawn without replacement from seed, into
 * pick [n] (1: audit it, 0: skip it).  Every update is drawn with the
 * same chance, so a changed update is among those audited with
 * probability at least fraction.  Returns how many are picked.
 */
int cg_audit_draw(int n, double fraction, uint64_t seed, unsigned char *pick);

#endif
