/*
 * exchange/codec/sign_codec.c - the sign update codec (EF-signSGD): one
 * bit an element and the mean magnitude.
 *
 * A view is NAME.sign u8 [ceil(n/8)], bit j%8 of byte j/8 set for a
 * negative element, no bit set past the view's end, and NAME.scale f32
 * [1], the mean magnitude; it decodes as +-scale.
 */
#include <inttypes.h>
#include <math.h>

#include "exchange/codec/codec.h"

static int
sign_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	(void)s;
	*b = (v->n + 7) / 8 + 4;
	return 0;
}

static int
sign_encode(const struct cg_uspec *s, const struct cg_uview *v, const float *x,
            struct cg_file *f, struct cg_uenc *e, float *warm)
{
	const uint64_t nb = (v->n + 7) / 8, one = 1;
	char name[CG_MAX_NAME];
	struct cg_tensor *tb, *ts;
	unsigned char *bits;
	double sum = 0;
	float scale;

	(void)s;
	(void)e;
	(void)warm;
	if (cg_ucodec_refuse_nonfinite(v, x) != 0)
		return -1;
	if (cg_ucodec_suffixed(name, v->name, ".sign") != 0 ||
	    (tb = cg_file_add_zero(f, name, CG_U8, 1, &nb)) == NULL ||
	    cg_ucodec_suffixed(name, v->name, ".scale") != 0 ||
	    (ts = cg_file_add_zero(f, name, CG_F32, 1, &one)) == NULL)
		return -1;
	bits = tb->data;
	for (uint64_t i = 0; i < v->n; i++)
		sum += fabs((double)x[i]);
	for (uint64_t i = 0; i < v->n; i += 8) {
		unsigned byte = 0;
		for (uint64_t k = 0; k < 8 && i + k < v->n; k++)
			byte |= (unsigned)(x[i + k] < 0) << k;
		bits[i / 8] = (unsigned char)byte;
	}
	scale = (float)(sum / (double)v->n);
	return cg_codec(CG_F32)->encode(ts->data, &scale, 1);
}

static int
sign_bind(const struct cg_uspec *s, struct cg_uview *v, const struct cg_file *f)
{
	const uint64_t nb = (v->n + 7) / 8, one = 1;
	const struct cg_tensor *tb, *ts;
	float scale;

	(void)s;
	if ((tb = cg_ucodec_need(f, v->name, ".sign", CG_U8, 1, &nb)) == NULL ||
	    (ts = cg_ucodec_need(f, v->name, ".scale", CG_F32, 1, &one)) ==
	        NULL)
		return -1;
	cg_tensor_decode(ts, 0, 1, &scale);
	if (!isfinite(scale) || scale < 0)
		return cg_seterr("tensor %s: scale %g is not a magnitude",
		                 ts->name, (double)scale);
	if (v->n % 8 && ((const unsigned char *)tb->data)[nb - 1] >> (v->n % 8))
		return cg_seterr("tensor %s: bits set past its %" PRIu64
		                 " elements",
		                 tb->name, v->n);
	v->t[0] = tb;
	v->t[1] = ts;
	return 0;
}

static void
sign_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
            size_t n, float *out)
{
	const unsigned char *bits = v->t[0]->data;
	float scale;

	(void)s;
	cg_tensor_decode(v->t[1], 0, 1, &scale);
	size_t j = 0;
	/* to a whole byte, then a byte (8 elements) at a time */
	for (; j < n && (lo + j) % 8; j++) {
		uint64_t i = lo + j;
		out[j] = bits[i / 8] >> (i % 8) & 1 ? -scale : scale;
	}
	for (; j + 8 <= n; j += 8) {
		unsigned byte = bits[(lo + j) / 8];
		for (int k = 0; k < 8; k++)
			out[j + k] = byte >> k & 1 ? -scale : scale;
	}
	for (; j < n; j++) {
		uint64_t i = lo + j;
		out[j] = bits[i / 8] >> (i % 8) & 1 ? -scale : scale;
	}
}

const struct cg_ucodec cg_ucodec_sign = {
    .name = "sign",
    .help = "sign: one bit an element and the mean magnitude",
    .names = {{"sign", CG_F32}},
    .size = sign_size,
    .encode = sign_encode,
    .bind = sign_bind,
    .decode = sign_decode,
};
