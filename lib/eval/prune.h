/*
 * eval/prune.h - choosing which weights of a model to prune: importance
 * scores, the rankings that turn them into a mask, and the calibration
 * pass that Wanda's scores need.
 *
 * The mask itself, and how it keeps pruned weights at zero, is the
 * model's (model.h, lib/model/mask.c); this module only decides it.
 */
#ifndef CG_PRUNE_H
#define CG_PRUNE_H

#include <stdint.h>

#include "data/shard.h"
#include "model/model.h"
#include "model/registry.h"

/* What a weight's score is; the lowest scores are pruned. */
enum cg_importance {
	CG_IMPORTANCE_MAGNITUDE, /* |w| */
	CG_IMPORTANCE_WANDA,     /* |w_ij| * ||x_j||, within each row */
	CG_IMPORTANCE_GRAD       /* |w * g| */
};

/* "magnitude", "wanda", "grad"; -1 with a message otherwise. */
/* The names of enum cg_importance, in its order, NULL-terminated. */
extern const char *const cg_importance_names[];
int cg_importance_parse(const char *s, enum cg_importance *out);
const char *cg_importance_name(enum cg_importance i);

struct cg_prune_opts {
	double sparsity; /* the fraction to prune, in [0, 1] (nm_m 0) */
	int global;      /* one ranking over every chosen view */
	int per_row;     /* a ranking per output row: each loses the same */
	int nm_n, nm_m;  /* N:M: keep at most nm_n of each nm_m; 0: none */
};

/*
 * The score of every weight of the prunable views into score [nparams]
 * (the other entries are left alone): |w| for magnitude; for wanda
 * |w_ij| * sqrt(sq[off_i + j]) with sq laid out as cg_model_input_cols
 * says (cg_prune_input_sq); for grad |w * g| with g [nparams].  A score
 * that is not a number counts as 0.  sq or g may be NULL when imp does
 * not use them.  Returns 0, or -1 with a message (no memory).
 */
int cg_prune_scores(const struct cg_model *m, enum cg_importance imp,
                    const float *g, const double *sq, float *score);

/*
 * Wanda's calibration: the arch's input_sq over n examples of s (drawn
 * without replacement from seed; n 0 or n >= s->n: all of them, in
 * order) in batches of at most B.  *sq gets a new array [the sum of IC]
 * the caller frees, *rows the rows of input counted per layer.  Returns
 * 0, or -1 with a message (no input_sq in the arch, data that does not
 * fit the model, no memory).
 */
int cg_prune_input_sq(struct cg_model *m, const struct cg_shard *s, uint64_t n,
                      int B, uint64_t seed, double **sq, uint64_t *rows);

/*
 * Prune the views i with chosen[i] != 0 (each must be prunable) by score
 * [nparams] as o says, lowest scores first, ties to the lower position:
 *
 *   sparsity, per view: round(sparsity * n) of each view's n weights;
 *   sparsity, global: round(sparsity * N) of all N weights of the views;
 *   sparsity, per_row: round(sparsity * IC) of each row of IC weights;
 *   N:M: in each row, each run of M consecutive weights from the row's
 *     start (the last run may be shorter) keeps at most N.
 *
 * round() is to the nearest, halves up.  Weights m already prunes stay
 * pruned and come first in every ranking, so they count towards it.
 * Then m's parameters and optimizer arrays are masked.  Returns 0, or -1
 * with a message (bad options, no memory; m then unchanged).
 */
int cg_prune_apply(struct cg_model *m, const struct cg_prune_opts *o,
                   const unsigned char *chosen, const float *score);

/*
 * The views to prune into chosen [m->nviews] (1: prune it, 0: not): the
 * prunable ones (cg_model_prunable) that none of the fnmatch(3) patterns
 * exclude [nexclude] names.  Returns nexclude when each pattern names a
 * prunable view that no pattern before it names, else the index of the
 * first that names none (chosen is then not to be used).
 */
int cg_prune_choose(const struct cg_model *m, const char *const *exclude,
                    int nexclude, unsigned char *chosen);

/*
 * Record in m's manifest how it was pruned, replacing a record there:
 * "pruning": {"importance": imp's name, then "nm": "N:M", or "sparsity",
 * "global" and, unless global, "group" ("row" or "tensor"); "pruned":
 * how many weights m prunes}.  What cg(7) shows people; readers take the
 * mask.  Out of memory, the record is left out.
 */
void cg_prune_record(struct cg_model *m, enum cg_importance imp,
                     const struct cg_prune_opts *o);

/* ------------------------------------------------ structured pruning */

/*
 * The fraction remove of each structure named in list (commas between
 * names of a->structures) into out [CG_ARCH_MAX_STRUCTURES] (0 for the
 * others).  Returns 0, or -1 with a message (an arch without
 * structures, a name it lacks, remove not in [0, 1)).
 */
int cg_prune_structures(const struct cg_arch *a, const char *list,
                        double remove, double *out);

/*
 * Structured pruning (struct cg_arch's shrink): the structures remove
 * [CG_ARCH_MAX_STRUCTURES] says taken out of every layer of m, the
 * least important first.  Returns a new, smaller model of m's arch (a
 * config with the smaller sizes, m's manifest otherwise, step 0, no
 * optimizer state, and a "pruning" record: "structures" {name:
 * fraction}, "params" m's count) that the caller frees; or, with
 * keep_shape, m itself with the removed structures' weights zeroed (the
 * dense model that computes what the smaller one computes; its record
 * says "zeroed": true).  NULL with a message: an arch that cannot
 * shrink, a model with adapters or a mask, no memory.
 */
struct cg_model *cg_prune_shrink(struct cg_model *m, const double *remove,
                                 int keep_shape);

#endif
