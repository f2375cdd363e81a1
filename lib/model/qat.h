/*
 * model/qat.h - quantization-aware training: a model's weight matrices
 * run as the weights of the model quantized to a block type, while the
 * f32 master weights keep training.
 *
 * Around a forward pass each chosen view W is replaced in place by
 * decode(encode(W)), the same encoder cg-quantize uses (the fitted one
 * where the type has it, else the reference rule), W kept aside
 * (cg_qat_apply); the backward pass leaves dL/dW at those weights in W's
 * place, and W is put back (cg_qat_restore), so the optimizer steps the
 * master with the gradient taken at its quantized value: the
 * straight-through estimator.  The arch never learns of it, as with
 * adapters (model/lora.h).  A model trained so and then quantized by
 * cg-quantize to the same type holds exactly the weights it was trained
 * against.  Pruned weights read as 0 afterwards, as a quantized model's
 * do on reading.
 *
 * Which views take a type is cg-quantize's rule (cg_quant_why): weight
 * matrices whose size is whole blocks; norms, biases and embeddings stay
 * f32.  The encoding is per block, so the result does not depend on the
 * thread count.
 */
#ifndef CG_QAT_H
#define CG_QAT_H

#include <stddef.h>

#include "core/dtype.h"

struct cg_model;
struct cg_view;

/*
 * Why view v stays f32 when a model is quantized to the float type
 * type (cg-quantize's rule; all: norms, biases and embeddings take it
 * too), or NULL when v takes it.
 */
const char *cg_quant_why(const struct cg_view *v, enum cg_dtype type, int all);

/*
 * dst [n] = src [n] encoded to type and decoded again, n a multiple of
 * the type's block; reference: the reference rule where the type has a
 * fitted encoder too.  scratch holds the encoded bytes (cg_dtype_bytes of
 * n).  dst may be src.  Returns 0, or -1 with a message when the type
 * cannot hold a value (nan, inf, beyond f16's range).
 */
int cg_qat_roundtrip(float *dst, const float *src, size_t n, enum cg_dtype type,
                     int reference, void *scratch);

struct cg_qat;

/*
 * The quantization of m's views to types [nviews] (CG_F32: a view left
 * as it is; copied), or, with types NULL, of every view type takes by
 * cg_quant_why.  Returns a new handle (cg_qat_free), or NULL with a
 * message: type not a float type or f32, no view takes it, a model with
 * adapters (the merged weights would be quantized, not W), a view's size
 * not whole blocks.
 */
struct cg_qat *cg_qat_new(const struct cg_model *m, enum cg_dtype type,
                          const enum cg_dtype *types, int reference);
/* The chosen views' masters kept, the views replaced by their quantized
 * values.  0, or -1 with a message naming the tensor (m then as it
 * was). */
int cg_qat_apply(struct cg_qat *q, struct cg_model *m);
/* The masters back in place (nothing unless applied). */
void cg_qat_restore(struct cg_qat *q, struct cg_model *m);
void cg_qat_free(struct cg_qat *q);

#endif
