/*
 * codec_toy.c - a test-only update codec: every element as f32 with its
 * sign flipped.
 *
 * It shows that an update codec is its own file and nothing else: it is
 * not in lib/exchange/ucodec.c's list and no program names it, yet the
 * copies of cg-train-step and cg-reduce that the suite links with this
 * file (tests/toy/, never installed) write and read it through --codec,
 * because the constructor below registers it with cg_ucodec_register().
 *
 * --codec toy-neg: a view is NAME.neg, f32 of the view's shape, holding
 * -x; it decodes to x again, bit for bit, so a reduction of toy-neg
 * updates is the reduction of their f32 copies.  The manifest's "codec"
 * adds "negated": true.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "exchange/codec/codec.h"

#define RUN 256 /* values negated at a time on the stack */

static int
neg_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	(void)s;
	return cg_dtype_bytes(CG_F32, v->n, b);
}

static int
neg_encode(const struct cg_uspec *s, const struct cg_uview *v, const float *x,
           struct cg_file *f, struct cg_uenc *e, float *warm)
{
	const struct cg_codec *c = cg_codec(CG_F32);
	char name[CG_MAX_NAME];
	struct cg_tensor *t;
	unsigned char *dst;
	float buf[RUN];

	(void)s;
	(void)e;
	(void)warm;
	if (cg_ucodec_refuse_nonfinite(v, x) != 0 ||
	    cg_ucodec_suffixed(name, v->name, ".neg") != 0 ||
	    (t = cg_file_add_zero(f, name, CG_F32, v->ndim, v->shape)) == NULL)
		return -1;
	dst = t->data;
	for (uint64_t i = 0; i < v->n; i += RUN) {
		size_t n = v->n - i < RUN ? (size_t)(v->n - i) : RUN;
		for (size_t j = 0; j < n; j++)
			buf[j] = -x[i + j];
		if (c->encode(dst + 4 * i, buf, n) != 0)
			return -1;
	}
	return 0;
}

static int
neg_bind(const struct cg_uspec *s, struct cg_uview *v, const struct cg_file *f)
{
	(void)s;
	v->t[0] = cg_ucodec_need(f, v->name, ".neg", CG_F32, v->ndim, v->shape);
	if (v->t[0] == NULL || cg_ucodec_check_finite(v->t[0]) != 0)
		return -1;
	return 0;
}

static void
neg_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
           size_t n, float *out)
{
	(void)s;
	cg_tensor_decode(v->t[0], lo, n, out);
	for (size_t j = 0; j < n; j++)
		out[j] = -out[j];
}

static int
neg_manifest(const struct cg_uspec *s, cJSON *c)
{
	(void)s;
	return cJSON_AddBoolToObject(c, "negated", 1) ? 0 : -1;
}

static const struct cg_ucodec cg_ucodec_toy = {
    .name = "toy-neg",
    .help = "toy-neg: every element as f32, its sign flipped (a test's)",
    .names = {{"toy-neg", CG_F32}},
    .manifest = neg_manifest,
    .size = neg_size,
    .encode = neg_encode,
    .bind = neg_bind,
    .decode = neg_decode,
};

__attribute__((constructor)) static void
register_toy(void)
{
	if (cg_ucodec_register(&cg_ucodec_toy) != 0) {
		fprintf(stderr, "codec_toy: %s\n", cg_errmsg());
		abort();
	}
}
