/*
 * test_quantize.c - lib/eval/quantize.c: which views take the type, the values
 * they come back as, and what stays as it was.
 *
 * A small cgpt (with optimizer moments, so that a file holds tensors
 * besides the views) is quantized to every float type; each quantized
 * view must decode to what the codec row makes of its values, within the
 * error its format promises for every block (computed here in double
 * from the block's own extremes), and every other tensor must keep its
 * bytes.
 */
#define TEST_NAME "test_quantize"

#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "check.h"
#include "eval/quantize.h"
#include "model/model.h"

static struct cg_model *
make_model(int width)
{
	cJSON *cfg = cJSON_CreateObject();
	struct cg_model *m;

	cJSON_AddNumberToObject(cfg, "ncond", 3);
	cJSON_AddNumberToObject(cfg, "context", 8);
	cJSON_AddNumberToObject(cfg, "width", width);
	cJSON_AddNumberToObject(cfg, "layers", 2);
	cJSON_AddNumberToObject(cfg, "heads", 2);
	cJSON_AddNumberToObject(cfg, "tied", 0);
	if ((m = cg_model_create("cgpt", cfg, NULL, 5)) == NULL)
		die("cg_model_create");
	if (cg_model_ensure_opt(m, 1, 1) != 0)
		die("moments");
	for (size_t i = 0; i < m->nparams; i++) {
		m->opt_m[i] = 1e-3f * (float)(i % 17);
		m->opt_v[i] = 1e-6f * (float)(i % 5);
	}
	return m;
}

/*
 * The bound on |y - x| that dtype t promises for an element of the
 * block b[32] (cg.h): the rounding step, the f16 rounding of the scale
 * (e) and of q4_1's minimum, and float arithmetic (2^-21 of the block's
 * magnitude).  d is the scale in exact arithmetic.
 */
static double
bound(enum cg_dtype t, const float *b)
{
	double amax = 0, max = 0, mn = b[0], mx = b[0], d, e;

	for (int j = 0; j < 32; j++) {
		if (fabs(b[j]) > amax) {
			amax = fabs(b[j]);
			max = b[j];
		}
		mn = fmin(mn, b[j]);
		mx = fmax(mx, b[j]);
	}
	switch (t) {
	case CG_Q8_0:
		d = amax / 127;
		e = fmax(d * 0x1p-11, 0x1p-25);
		return d / 2 + 127 * e + 0x1p-21 * amax;
	case CG_Q4_0:
		d = fabs(max) / 8;
		e = fmax(d * 0x1p-11, 0x1p-25);
		return d + 8 * e + 0x1p-21 * amax;
	case CG_Q2_0:
		d = fabs(max) / 2;
		e = fmax(d * 0x1p-11, 0x1p-25);
		return d + 2 * e + 0x1p-21 * amax;
	case CG_Q4_1:
		d = (mx - mn) / 15;
		e = fmax(d * 0x1p-11, 0x1p-25);
		return d / 2 + 15 * e + fmax(fabs(mn) * 0x1p-11, 0x1p-25) +
		       0x1p-21 * 2 * amax;
	default:
		return 0;
	}
}

/* Per-element bound of the half types: half an ulp, relative. */
static double
half_bound(enum cg_dtype t, float x)
{
	return fabs(x) * (t == CG_F16 ? 0x1p-11 : 0x1p-8) + 0x1p-25;
}

static const char *
why_of(const struct cg_quant_view *rep, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(rep[i].name, name) == 0)
			return rep[i].why ? rep[i].why : "(quantized)";
	return "(absent)";
}

/* The weight of element x of block b in the fitted encoders' error
 * (cg.h: |x| + the block's root mean square). */
static double
fit_w(const float *b, float x)
{
	double ms = 0;

	for (int j = 0; j < 32; j++)
		ms += (double)b[j] * b[j];
	return fabsf(x) + (float)sqrt(ms / 32);
}

/*
 * Every view of q (made from m, to type, by the reference encoder or
 * with ref 0 the fitted one where the type has it) checked against m's
 * values: the codec's bytes, and each element within its block's bound,
 * or for a fitted block its weighted squared error within what the
 * bounds allow (a fitted block is no further than the reference's).
 */
static void
check_values(const struct cg_model *m, const struct cg_file *q,
             enum cg_dtype type, const struct cg_quant_view *rep, int ref)
{
	const struct cg_codec *c = cg_codec(type);
	int fit = c->encode_fit != NULL && !ref;
	int (*encode)(void *, const float *, size_t) =
	    fit ? c->encode_fit : c->encode;
	int bad = 0;

	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		const struct cg_tensor *t = cg_file_find(q, v->name);
		const float *x = m->params + v->off;
		float *y = xcalloc(v->n, sizeof(float));
		unsigned char *enc;
		uint64_t nb;

		CHECK(t != NULL && t->dtype == rep[i].to, "%s: dtype %s",
		      v->name, t ? cg_dtype_name(t->dtype) : "missing");
		if (t == NULL || cg_tensor_to_f32(t, y) != 0) {
			bad++;
			free(y);
			continue;
		}
		if (t->dtype == CG_F32) {
			CHECK(memcmp(x, y, v->n * sizeof(float)) == 0,
			      "%s: f32 values kept", v->name);
			free(y);
			continue;
		}
		/* the bytes are the codec row's of these values */
		if (cg_dtype_bytes(t->dtype, v->n, &nb) != 0)
			die("bytes");
		enc = xcalloc(nb, 1);
		CHECK(encode(enc, x, v->n) == 0 &&
		          memcmp(enc, t->data, nb) == 0,
		      "%s: the codec's bytes", v->name);
		free(enc);
		for (size_t j = 0; fit && j < v->n; j += 32) {
			double e = 0, lim = 0, l = bound(type, x + j);
			for (int k = 0; k < 32; k++) {
				double w = fit_w(x + j, x[j + k]);
				double d = (double)y[j + k] - x[j + k];
				e += w * d * d;
				lim += w * l * l;
			}
			if (e > lim && bad++ < 5)
				CHECK(0, "%s %s block %zu: weighted error %g, "
				         "bound %g",
				      c->name, v->name, j / 32, e, lim);
		}
		for (size_t j = 0; !fit && j < v->n; j++) {
			double lim = c->block == 32
			                 ? bound(type, x + j / 32 * 32)
			                 : half_bound(type, x[j]);
			if (fabs((double)y[j] - x[j]) > lim) {
				if (bad++ < 5)
					CHECK(0,
					      "%s %s[%zu]: %g for %g, bound %g",
					      c->name, v->name, j, (double)y[j],
					      (double)x[j], lim);
			}
		}
		free(y);
	}
	char what[96];
	snprintf(what, sizeof(what), "%s%s: every %s within its bound",
	         c->name, fit ? " fitted" : "", fit ? "block" : "element");
	expect(bad == 0, what);
}

static void
test_rule_and_values(void)
{
	static const enum cg_dtype types[] = {CG_F16, CG_BF16, CG_Q8_0,
	                                      CG_Q4_1, CG_Q4_0, CG_Q2_0};
	struct cg_model *m = make_model(64);
	struct cg_file *f = cg_model_file(m);
	struct cg_quant_view *rep = xcalloc(m->nviews, sizeof(*rep));

	if (f == NULL)
		die("model file");
	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		struct cg_quant_rule r = {.type = types[k]};
		struct cg_file *q = cg_quantize(f, m, &r, rep);

		if (q == NULL)
			die("cg_quantize");
		check_values(m, q, types[k], rep, 0);
		if (cg_codec(types[k])->encode_fit) {
			struct cg_quant_rule rr = {.type = types[k],
			                           .reference = 1};
			cg_file_free(q);
			if ((q = cg_quantize(f, m, &rr, rep)) == NULL)
				die("cg_quantize --reference");
			check_values(m, q, types[k], rep, 1);
		}
		/* the moments keep their bytes */
		const struct cg_tensor *a = cg_file_find(f, "opt.m"),
		                       *b = cg_file_find(q, "opt.m");
		CHECK(a && b && b->dtype == CG_F32 && b->nbytes == a->nbytes &&
		          memcmp(a->data, b->data, a->nbytes) == 0,
		      "%s: opt.m as it was", cg_dtype_name(types[k]));
		cg_file_free(q);
	}
	struct cg_quant_rule r = {.type = CG_Q8_0};
	struct cg_file *q = cg_quantize(f, m, &r, rep);
	expect(q != NULL &&
	           strcmp(why_of(rep, m->nviews, "wte"), "an embedding") == 0 &&
	           strcmp(why_of(rep, m->nviews, "wpe"), "an embedding") == 0 &&
	           strcmp(why_of(rep, m->nviews, "h.0.ln1.w"),
	                  "a norm or a bias") == 0 &&
	           strcmp(why_of(rep, m->nviews, "h.1.mlp.fc.b"),
	                  "a norm or a bias") == 0 &&
	           strcmp(why_of(rep, m->nviews, "h.0.attn.qkv.w"),
	                  "(quantized)") == 0 &&
	           strcmp(why_of(rep, m->nviews, "lm_head.w"), "(quantized)") ==
	               0,
	       "q8_0: matrices and the head quantized; embeddings, norms, "
	       "biases f32");
	/* the same type again: the bytes of each view are kept */
	struct cg_model *m8 = q ? cg_model_from_file(q, "q8") : NULL;
	struct cg_file *q2 = m8 ? cg_quantize(q, m8, &r, rep) : NULL;
	int same = q2 != NULL && q2->ntensors == q->ntensors;
	for (size_t i = 0; same && i < q->ntensors; i++)
		same = q->tensors[i]->nbytes == q2->tensors[i]->nbytes &&
		       memcmp(q->tensors[i]->data, q2->tensors[i]->data,
		              q->tensors[i]->nbytes) == 0;
	expect(same, "q8_0 to q8_0 keeps every byte");
	cg_file_free(q2);
	/* another block type: refused, unless asked */
	struct cg_quant_rule r4 = {.type = CG_Q4_0};
	q2 = m8 ? cg_quantize(q, m8, &r4, rep) : NULL;
	expect(q2 == NULL && strstr(cg_errmsg(), "already q8_0") &&
	           strstr(cg_errmsg(), "--allow-requantize"),
	       "q8_0 to q4_0 refused without --allow-requantize");
	r4.allow_requantize = 1;
	q2 = m8 ? cg_quantize(q, m8, &r4, rep) : NULL;
	expect(q2 != NULL, "and done with it");
	cg_file_free(q2);
	/* back to f32: every view f32, the decoded values */
	struct cg_quant_rule r32 = {.type = CG_F32};
	q2 = m8 ? cg_quantize(q, m8, &r32, rep) : NULL;
	int ok = q2 != NULL;
	for (int i = 0; ok && i < m8->nviews; i++) {
		const struct cg_tensor *t = cg_file_find(q2, m8->views[i].name);
		ok = t && t->dtype == CG_F32 &&
		     memcmp(t->data, m8->params + m8->views[i].off,
		            t->nbytes) == 0;
	}
	expect(ok, "f32 takes every view back, as its decoded values");
	cg_file_free(q2);
	/* --keep and --all */
	const char *keep[] = {"h.1.*", "lm_head.w"};
	struct cg_quant_rule rk = {.type = CG_Q4_1, .keep = keep, .nkeep = 2};
	q2 = cg_quantize(f, m, &rk, rep);
	expect(q2 != NULL &&
	           strcmp(why_of(rep, m->nviews, "h.1.attn.proj.w"), "--keep") ==
	               0 &&
	           strcmp(why_of(rep, m->nviews, "lm_head.w"), "--keep") == 0 &&
	           strcmp(why_of(rep, m->nviews, "h.0.attn.proj.w"),
	                  "(quantized)") == 0,
	       "--keep: matching views stay f32, others do not");
	cg_file_free(q2);
	struct cg_quant_rule ra = {.type = CG_Q4_1, .all = 1};
	q2 = cg_quantize(f, m, &ra, rep);
	expect(q2 != NULL &&
	           strcmp(why_of(rep, m->nviews, "wte"), "(quantized)") == 0 &&
	           strcmp(why_of(rep, m->nviews, "h.0.ln1.w"), "(quantized)") ==
	               0,
	       "--all: embeddings and norms too");
	cg_file_free(q2);
	cg_model_free(m8);
	cg_file_free(q);
	cg_file_free(f);
	cg_model_free(m);
	free(rep);
}

/* Width 36: qkv.w holds 108 x 36 = 3888 elements, not whole blocks;
 * mlp.proj.w 36 x 144 = 5184, whole blocks (that span rows). */
static void
test_rows(void)
{
	struct cg_model *m = make_model(36);
	struct cg_file *f = cg_model_file(m);
	struct cg_quant_view *rep = xcalloc(m->nviews, sizeof(*rep));
	struct cg_quant_rule r = {.type = CG_Q8_0};
	struct cg_file *q = f ? cg_quantize(f, m, &r, rep) : NULL;

	expect(q != NULL &&
	           strcmp(why_of(rep, m->nviews, "h.0.attn.qkv.w"),
	                  "not a whole number of blocks") == 0 &&
	           strcmp(why_of(rep, m->nviews, "h.0.mlp.proj.w"),
	                  "(quantized)") == 0,
	       "3888 elements stay f32, 5184 take q8_0 (blocks across rows)");
	if (q)
		check_values(m, q, CG_Q8_0, rep, 0);
	cg_file_free(q);
	/* a value q8_0 cannot hold: refused, naming the tensor */
	int at = 0;
	while (strcmp(m->views[at].name, "h.0.mlp.proj.w") != 0)
		at++;
	m->params[m->views[at].off + 3] = NAN;
	cg_file_free(f);
	f = cg_model_file(m);
	q = f ? cg_quantize(f, m, &(struct cg_quant_rule){.type = CG_Q8_0},
	                    rep)
	      : NULL;
	expect(q == NULL && strstr(cg_errmsg(), "h.0.mlp.proj.w") &&
	           strstr(cg_errmsg(), "not finite"),
	       "a nan weight: refused, naming the tensor");
	struct cg_quant_rule ri = {.type = CG_U8};
	q = f ? cg_quantize(f, m, &ri, rep) : NULL;
	expect(q == NULL && strstr(cg_errmsg(), "integers"),
	       "an integer type refused");
	cg_file_free(f);
	cg_model_free(m);
	free(rep);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	test_rule_and_values();
	test_rows();
	return failures ? 1 : 0;
}
