/*
 * test_qat.c - quantization-aware training (model/qat.h): the weights the
 * arch runs are the codec's encode-then-decode of the masters, bit for
 * bit, and the step moves the f32 masters by the gradient taken at those
 * weights (the straight-through estimator), for a cvae and a cgpt and
 * the block types cg-quantize writes.
 *
 * The reference here is built apart from model/qat.c: the views chosen
 * by cg-quantize's rule as written in quantize.h (matrices with weight
 * decay, whole blocks), each encoded with the codec row's own encoder
 * and decoded into a second model, whose plain gradient call gives the
 * gradient the QAT step must have used.
 */
#define TEST_NAME "test_qat"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "check.h"
#include "shards.h"
#include "model/model.h"
#include "model/qat.h"
#include "train/train.h"

static struct cg_model *
perturbed(struct cg_model *m, uint64_t seed)
{
	struct cg_rng r;

	if (m == NULL)
		die("cg_model_create");
	/* away from the init: every block holds a spread of values */
	cg_rng_seed(&r, seed + 100);
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] += 0.05f * cg_rng_normal(&r);
	return m;
}

static struct cg_model *
cgpt_model(uint64_t seed)
{
	cJSON *cfg = cJSON_CreateObject();

	cJSON_AddNumberToObject(cfg, "ncond", 3);
	cJSON_AddNumberToObject(cfg, "context", 16);
	cJSON_AddNumberToObject(cfg, "width", 32);
	cJSON_AddNumberToObject(cfg, "layers", 1);
	cJSON_AddNumberToObject(cfg, "heads", 2);
	cJSON_AddNumberToObject(cfg, "tied", 1);
	return perturbed(cg_model_create("cgpt", cfg, NULL, seed), seed);
}

static struct cg_model *
cvae_model(uint64_t seed)
{
	cJSON *cfg = cJSON_CreateObject();

	cJSON_AddNumberToObject(cfg, "in_dim", 64);
	cJSON_AddNumberToObject(cfg, "ncond", 3);
	cJSON_AddNumberToObject(cfg, "hidden", 32);
	cJSON_AddNumberToObject(cfg, "layers", 1);
	cJSON_AddNumberToObject(cfg, "latent", 4);
	return perturbed(cg_model_create("cvae", cfg, NULL, seed), seed);
}

/* m's views as quantize.h's rule and the codec table make them, into w. */
static int
reference_weights(const struct cg_model *m, enum cg_dtype t, float *w)
{
	const struct cg_codec *c = cg_codec(t);
	int n = 0;

	memcpy(w, m->params, m->nparams * sizeof(float));
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		uint64_t bytes;
		if (v->ndim < 2 || !v->decay || v->n % c->block != 0)
			continue;
		if (cg_dtype_bytes(t, v->n, &bytes) != 0)
			die("bytes");
		void *b = xcalloc(bytes, 1);
		int (*enc)(void *, const float *, size_t) =
		    c->encode_fit ? c->encode_fit : c->encode;
		if (enc(b, m->params + v->off, v->n) != 0)
			die("encode");
		c->decode(w + v->off, b, v->n);
		free(b);
		n++;
	}
	return n;
}

static void
check_model(const char *arch, struct cg_model *a, struct cg_model *b,
            struct cg_shard *s, enum cg_dtype t)
{
	const size_t P = a->nparams;
	float *master = xcalloc(P, sizeof(float));
	float *gq = xcalloc(P, sizeof(float));
	float *g = xcalloc(P, sizeof(float));
	float *g32 = xcalloc(P, sizeof(float));
	struct cg_train_opts o = {.steps = 1, .batch = 4, .seed = 3};
	struct cg_train_result res;
	char what[160];
	int nq;

	cg_optim_defaults(&o.opt, CG_OPT_SGD);
	o.opt.lr = 0.5f;
	memcpy(master, a->params, P * sizeof(float));
	nq = reference_weights(a, t, b->params);
	snprintf(what, sizeof(what), "%s %s: some views quantized", arch,
	         cg_dtype_name(t));
	expect(nq > 0, what);

	/* the gradient at the quantized weights, from the second model */
	o.emit = CG_EMIT_GRAD;
	if (cg_train_run(b, s, &o, NULL, g, &res) != 0)
		die(cg_errmsg());
	/* the QAT gradient call: the same bytes */
	o.qat = t;
	if (cg_train_run(a, s, &o, NULL, gq, &res) != 0)
		die(cg_errmsg());
	snprintf(what, sizeof(what),
	         "%s %s: the gradient under QAT is the gradient at the "
	         "quantized weights, bit for bit",
	         arch, cg_dtype_name(t));
	expect(memcmp(g, gq, P * sizeof(float)) == 0, what);
	snprintf(what, sizeof(what), "%s %s: the masters are put back", arch,
	         cg_dtype_name(t));
	expect(memcmp(master, a->params, P * sizeof(float)) == 0, what);
	/* and it is not the f32 gradient (else the test proves nothing) */
	o.qat = CG_F32;
	if (cg_train_run(a, s, &o, NULL, g32, &res) != 0)
		die(cg_errmsg());
	snprintf(what, sizeof(what), "%s %s: the f32 gradient differs", arch,
	         cg_dtype_name(t));
	expect(memcmp(g32, g, P * sizeof(float)) != 0, what);

	/* one SGD step: the masters move by lr times that gradient */
	o.emit = CG_EMIT_MODEL;
	o.qat = t;
	if (cg_train_run(a, s, &o, NULL, NULL, &res) != 0)
		die(cg_errmsg());
	double worst = 0;
	size_t at_q = 0; /* how far the step is from quantized + update */
	for (size_t i = 0; i < P; i++) {
		float want = master[i] - o.opt.lr * g[i];
		double tol =
		    4 * FLT_EPSILON * (fabs(master[i]) + fabs(o.opt.lr * g[i]));
		double d = fabs((double)a->params[i] - want);
		if (d > tol && d > worst)
			worst = d;
		if (b->params[i] != master[i] &&
		    a->params[i] != b->params[i] - o.opt.lr * g[i])
			at_q++;
	}
	snprintf(what, sizeof(what),
	         "%s %s: step = master - lr * (gradient at the quantized "
	         "weights) (largest miss %.3g)",
	         arch, cg_dtype_name(t), worst);
	expect(worst == 0, what);
	snprintf(what, sizeof(what),
	         "%s %s: the step starts from the masters, not the quantized "
	         "weights (%zu of %zu differ)",
	         arch, cg_dtype_name(t), at_q, P);
	expect(at_q > 0, what);
	free(master);
	free(gq);
	free(g);
	free(g32);
}

static void
test_training(void)
{
	static const char *const texts[] = {"abcab", "hello",   "q",
	                                    "xyz!",  "cabbage", "quantized"};
	static const enum cg_dtype types[] = {CG_Q8_0, CG_Q4_0, CG_Q4_1,
	                                      CG_Q2_0, CG_F16};
	struct cg_shard *ts = text_shard(texts, 6, 3, "text");
	struct cg_shard *is = image_shard(8, 8, 8, "images", NULL);

	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		struct cg_model *a = cgpt_model(1), *b = cgpt_model(1);
		check_model("cgpt", a, b, ts, types[k]);
		cg_model_free(a);
		cg_model_free(b);
		a = cvae_model(2);
		b = cvae_model(2);
		check_model("cvae", a, b, is, types[k]);
		cg_model_free(a);
		cg_model_free(b);
	}
	cg_shard_free(ts);
	cg_shard_free(is);
}

/* The round trip is the codec's, whatever the thread count and chunks. */
static void
test_roundtrip(void)
{
	const size_t n = 32 * 3000; /* several chunks of blocks */
	float *x = xcalloc(n, sizeof(float)), *y = xcalloc(n, sizeof(float));
	float *z = xcalloc(n, sizeof(float));
	void *b = xcalloc(n * 2, 1);
	struct cg_rng r;

	cg_rng_seed(&r, 7);
	for (size_t i = 0; i < n; i++)
		x[i] = cg_rng_normal(&r);
	for (int ref = 0; ref < 2; ref++) {
		const struct cg_codec *c = cg_codec(CG_Q4_0);
		if (cg_qat_roundtrip(y, x, n, CG_Q4_0, ref, b) != 0)
			die(cg_errmsg());
		(ref ? c->encode : c->encode_fit)(b, x, n);
		c->decode(z, b, n);
		expect(memcmp(y, z, n * sizeof(float)) == 0,
		       ref ? "q4_0 --reference: decode(encode(x))"
		           : "q4_0: decode(encode_fit(x))");
	}
	x[n - 5] = NAN;
	expect(cg_qat_roundtrip(y, x, n, CG_Q8_0, 0, b) != 0 &&
	           strstr(cg_errmsg(), "not finite") != NULL,
	       "a nan is refused, with the codec's message");
	printf("     (%s)\n", cg_errmsg());
	free(x);
	free(y);
	free(z);
	free(b);
}

static void
test_refusals(void)
{
	struct cg_model *m = cgpt_model(1);
	struct cg_qat *q;

	expect(cg_qat_new(m, CG_F32, NULL, 0) == NULL,
	       "f32 is no type to train against");
	expect(cg_qat_new(m, CG_U8, NULL, 0) == NULL, "u8 is refused");
	expect((q = cg_qat_new(m, CG_Q4_0, NULL, 0)) != NULL, "q4_0 taken");
	cg_qat_free(q);
	cg_qat_free(NULL);
	cg_model_free(m);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	test_roundtrip();
	test_refusals();
	test_training();
	return failures ? 1 : 0;
}
