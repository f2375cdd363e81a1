/*
 * model/mask.h - which weights of a model are pruned, kept exactly zero
 * through any later training, and stored as "mask.VIEW" tensors.
 */
#ifndef CG_MASK_H
#define CG_MASK_H

#include <stddef.h>
#include <stdint.h>

struct cg_file;
struct cg_model;

/*
 * Whether view i of m may be pruned: a matrix (2-D) that takes weight
 * decay, which is how the archs lay out the weights of Linear layers;
 * never a bias, a norm's gain or an embedding (decay 0), nor wte when it
 * is tied to the output.
 */
int cg_model_prunable(const struct cg_model *m, int i);
/*
 * The start of each prunable view's input columns in an array of them
 * all (what input_sq fills): off [m->nviews], SIZE_MAX for the views that
 * are not prunable.  Returns the total (the sum of IC).
 */
size_t cg_model_input_cols(const struct cg_model *m, size_t *off);

/* Allocate an all-kept mask if m has none.  Returns 0 or -1. */
int cg_model_ensure_mask(struct cg_model *m);
/* Whether parameter i is pruned (0 without a mask). */
int cg_model_pruned_at(const struct cg_model *m, size_t i);
/* How many parameters of view i (of all views: i < 0) are pruned. */
uint64_t cg_model_pruned(const struct cg_model *m, int i);
/*
 * Set x [nparams] (parameters, a gradient, a moment, a delta) to zero
 * where m prunes: what keeps pruned weights at zero.  Nothing without a
 * mask.
 */
void cg_model_mask(const struct cg_model *m, float *x);
/* cg_model_mask on m's parameters and every optimizer array it holds. */
void cg_model_mask_all(struct cg_model *m);
/*
 * The mask tensors "mask.VIEW" of f into m (replacing its mask): each a
 * u8 bitset [(n + 7) / 8] of a prunable view of n weights, bit j of byte
 * j / 8 set where weight j is kept, the bits past n clear.  A mask of
 * another dtype, shape or length, one with bits past n set, one naming a
 * tensor that is no view or a view that cannot be pruned is refused: -1
 * with a message naming it.  Then m's parameters and optimizer arrays
 * are masked (cg_model_mask_all), so a weight whose stored dtype does
 * not keep an exact zero (q4_0) reads as 0.  No mask tensor: m has none.
 */
int cg_model_load_mask(struct cg_model *m, const struct cg_file *f);
/* The same checks into m->mask, nothing masked (the inference reader
 * masks only the views it decoded). */
int cg_model_read_mask(struct cg_model *m, const struct cg_file *f);
/* The mask tensors of model file f checked as cg_model_load_mask checks
 * them, against the layout its config makes (no weight is read).
 * Returns 0, or -1 with a message. */
int cg_model_file_check_mask(const struct cg_file *f);
/* The mask as tensors of f, one per view with a pruned weight, in view
 * order (copies).  Returns 0 or -1. */
int cg_model_put_mask(const struct cg_model *m, struct cg_file *f);

#endif
