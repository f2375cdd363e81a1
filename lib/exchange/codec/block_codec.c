/*
 * exchange/codec/block_codec.c - the block-quantized update codec: q8,
 * q4 and q2, blocks of 32 with an f16 scale.
 *
 * A view is one tensor NAME of the block dtype, padded with zeros to a
 * multiple of 32 elements; ":sr" rounds stochastically, drawing from the
 * encoder's generator in element order.  Fitting a budget keeps the
 * family and takes the most bits that fit.
 */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exchange/codec/codec.h"

#define QK 32 /* elements of a quantization block */

static uint64_t
padded(uint64_t n)
{
	return (n + QK - 1) / QK * QK;
}

static int
block_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	return cg_dtype_bytes(s->dtype, padded(v->n), b);
}

static int
block_encode(const struct cg_uspec *s, const struct cg_uview *v, const float *x,
             struct cg_file *f, struct cg_uenc *e, float *warm)
{
	const struct cg_codec *c = cg_codec(s->dtype);
	const uint64_t np = padded(v->n), whole = v->n / QK * QK;
	struct cg_tensor *t;
	unsigned char *dst;
	float tail[QK] = {0};
	int rc = 0;

	(void)warm;
	if ((t = cg_file_add_zero(f, v->name, s->dtype, 1, &np)) == NULL)
		return -1;
	dst = t->data;
	/* the whole blocks where they lie, the last one padded with zeros
	 * on the stack; stochastic rounding draws in element order */
	if (whole)
		rc = s->sr ? c->encode_sr(dst, x, whole, &e->rng)
		           : c->encode(dst, x, whole);
	if (rc == 0 && whole < v->n) {
		memcpy(tail, x + whole, (v->n - whole) * sizeof(float));
		dst += whole / QK * c->bytes;
		rc = s->sr ? c->encode_sr(dst, tail, QK, &e->rng)
		           : c->encode(dst, tail, QK);
	}
	return rc;
}

static int
block_bind(const struct cg_uspec *s, struct cg_uview *v,
           const struct cg_file *f)
{
	const uint64_t np = padded(v->n);

	/* the block scales were checked on reading (codec row's check) */
	v->t[0] = cg_ucodec_need(f, v->name, "", s->dtype, 1, &np);
	return v->t[0] ? 0 : -1;
}

static void
block_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
             size_t n, float *out)
{
	(void)s;
	/* bound: the range is inside the tensor, which cannot fail */
	cg_tensor_decode(v->t[0], lo, n, out);
}

static int
block_param(struct cg_uspec *s, const char *p)
{
	if (strcmp(p, "sr") != 0)
		return -1;
	s->sr = 1;
	return 0;
}

static void
block_format(const struct cg_uspec *s, const char *name, char *buf, size_t n)
{
	snprintf(buf, n, "%s%s", name, s->sr ? ":sr" : "");
}

static int
block_manifest(const struct cg_uspec *s, cJSON *c)
{
	cJSON_AddBoolToObject(c, "stochastic", s->sr);
	return 0;
}

static int
block_fit(struct cg_uspec *s, const struct cg_uview *v, int nv, uint64_t budget)
{
	static const enum cg_dtype q[] = {CG_Q8_0, CG_Q4_0, CG_Q2_0};
	uint64_t b;

	for (int i = 0; i < 3; i++) {
		s->dtype = q[i];
		if (cg_ucodec_bytes(s, v, nv, &b) != 0)
			return -1;
		if (b <= budget)
			return 0;
	}
	return 1;
}

const struct cg_ucodec cg_ucodec_block = {
    .name = "q",
    .help = "q8, q4, q2[:sr]: blocks of 32 with an f16 scale; sr: "
            "stochastic rounding",
    .names = {{"q8", CG_Q8_0}, {"q4", CG_Q4_0}, {"q2", CG_Q2_0}},
    .param = block_param,
    .format = block_format,
    .manifest = block_manifest,
    .fit = block_fit,
    .size = block_size,
    .encode = block_encode,
    .bind = block_bind,
    .decode = block_decode,
};
