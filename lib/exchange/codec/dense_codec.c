/*
 * exchange/codec/dense_codec.c - the dense update codec: every element
 * of a view, in f32, f16 or bf16.
 *
 * A view is one tensor of its own name and shape (no layout); a reader
 * takes any float dtype, and an f32 view's floats where they lie.
 */
#include "exchange/codec/codec.h"

static int
dense_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	return cg_dtype_bytes(s->dtype, v->n, b);
}

static int
dense_encode(const struct cg_uspec *s, const struct cg_uview *v, const float *x,
             struct cg_file *f, struct cg_uenc *e, float *warm)
{
	struct cg_tensor *t;

	(void)e;
	(void)warm;
	if ((t = cg_file_add_zero(f, v->name, s->dtype, v->ndim, v->shape)) ==
	    NULL)
		return -1;
	return cg_codec(s->dtype)->encode(t->data, x, v->n);
}

static int
dense_bind(const struct cg_uspec *s, struct cg_uview *v,
           const struct cg_file *f)
{
	(void)s;
	v->t[0] = cg_ucodec_need(f, v->name, "", CG_NDTYPES, v->ndim, v->shape);
	return v->t[0] ? 0 : -1;
}

static void
dense_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
             size_t n, float *out)
{
	(void)s;
	/* bound: the range is inside the tensor, which cannot fail */
	cg_tensor_decode(v->t[0], lo, n, out);
}

const struct cg_ucodec cg_ucodec_dense = {
    .name = "dense",
    .help = "f32, f16, bf16: every element, in that dtype",
    .names = {{"f32", CG_F32}, {"f16", CG_F16}, {"bf16", CG_BF16}},
    .flags = CG_UCODEC_PLAIN,
    .size = dense_size,
    .encode = dense_encode,
    .bind = dense_bind,
    .decode = dense_decode,
};
