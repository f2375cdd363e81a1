/*
 * test_stale.c - stale updates: the weighting rules, a reduction for a
 * model of inputs computed from older ones, and DC-ASGD.
 *
 * Each rule of cg_stale_rules is checked against factors worked out by
 * hand (FedAsync's formulas at a few staleness values), and its parser
 * against bad specs; cg-reduce(1) must name each one.  A reduction told its
 * model (step 3) of inputs computed from steps 3, 2, 1 and 0 under
 * --max-staleness 2 leaves the step-0 input out (return 1, its message, listed
 * as dropped) and gives, on the streaming and the sliced path, sum_i w_i f(s_i)
 * x_i / sum_i w_i computed in double, with weight sum_i w_i and each input's
 * staleness and factor in the manifest; reducing two partial results again
 * gives the flat reduction; an input from a later step or from another model of
 * the same step is refused.  DC-ASGD is checked on a real cvae: its gradient at
 * a base model, applied to that model after three SGD steps of other real
 * gradients, against g + lambda g g (w_now - w_base) in double (the kernel:
 * within half an ulp of f32; through cg_apply_update and SGD, within the two
 * roundings of p - lr g), and a wrong base model is refused.  Every comparison
 * prints its largest difference.  Exit 0 pass, 1 fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "arch/cvae/cvae.h"
#include "cg.h"
#include "cli/cli.h"
#include "exchange/apply.h"
#include "exchange/reduce.h"
#include "exchange/stale.h"
#include "exchange/update.h"
#include "model/model.h"

#define TEST_NAME "test_stale"
#include "check.h"
#include "toy.h"

/* ------------------------------------------------------------ rules */

/* A rule's factor at staleness s, worked out by hand from FedAsync's
 * formulas (Xie et al. 2019, section 5.2). */
static const struct {
	const char *spec;
	uint64_t s;
	double want;
} hand[] = {
    {"constant", 0, 1},        {"constant", 17, 1},
    {"poly:0.5", 0, 1},        {"poly:0.5", 3, 0.5}, /* 4^-1/2 */
    {"poly:0.5", 8, 1.0 / 3},  {"poly:1", 4, 0.2},   /* 5^-1 */
    {"poly:2", 1, 0.25},                             /* 2^-2 */
    {"poly:0", 9, 1},          {"hinge:0.5,4", 0, 1},
    {"hinge:0.5,4", 4, 1},   /* s <= b */
    {"hinge:0.5,4", 6, 0.5}, /* 1 / (0.5 * 2 + 1) */
    {"hinge:0.5,4", 10, 0.25}, {"hinge:10,0", 1, 1.0 / 11},
    {"hinge:1,1", 2, 0.5},
};

static void
rules(void)
{
	static const char *bad[] = {
	    "",         "bogus",      "poly",      "poly:",
	    "poly:-1",  "poly:nan",   "poly:inf",  "poly:1,2",
	    "poly:1x",  "hinge:1",    "hinge:1,",  "hinge:1,2,3",
	    "hinge:,1", "constant:1", "constant:", "poly:1e999",
	};
	struct cg_stale_weight w;
	double worst = 0;
	char name[64];

	for (size_t i = 0; i < sizeof(hand) / sizeof(hand[0]); i++) {
		if (cg_stale_weight_parse(hand[i].spec, &w) != 0) {
			CHECK(0, "%s: %s", hand[i].spec, cg_errmsg());
			continue;
		}
		double got = cg_stale_factor(&w, hand[i].s);
		double d = fabs(got - hand[i].want);
		worst = d > worst ? d : worst;
		CHECK(d <= 1e-15, "%s at s=%llu: %.17g, want %.17g",
		      hand[i].spec, (unsigned long long)hand[i].s, got,
		      hand[i].want);
		cg_stale_weight_name(&w, name, sizeof(name));
		CHECK(strcmp(name, hand[i].spec) == 0, "%s named back as %s",
		      hand[i].spec, name);
	}
	printf("     largest difference of a factor from the hand value: "
	       "%.3g\n",
	       worst);
	expect(worst <= 1e-15, "every rule's factor is FedAsync's, by hand");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = cg_stale_weight_parse(bad[i], &w);
		CHECK(rc == -1, "'%s' accepted", bad[i]);
		CHECK(strchr(cg_errmsg(), '\n') == NULL, "'%s': two lines",
		      bad[i]);
	}
	expect(cg_stale_weight_parse("bogus", &w) == -1 &&
	           strstr(cg_errmsg(), "constant, poly, hinge") != NULL,
	       "an unknown rule's message lists the table");
	/* the default is the first row, and every factor is in (0, 1] */
	cg_stale_weight_default(&w);
	expect(w.rule == &cg_stale_rules[0] &&
	           strcmp(w.rule->name, "constant") == 0,
	       "the default rule is constant");
	int inrange = 1;
	for (const struct cg_stale_rule *r = cg_stale_rules; r->name; r++)
		for (uint64_t s = 0; s < 1000; s += 7) {
			struct cg_stale_weight x = {r, {0.7, 3}};
			double f = cg_stale_factor(&x, s);
			inrange &= f > 0 && f <= 1;
		}
	expect(inrange, "every rule's factor is in (0, 1]");

	/* the manual names every rule of the table: ".It Cm poly : Ns Ar
	 * a" for a row that takes parameters, ".It Cm constant" */
	const char *src = getenv("CG_SRCDIR");
	char path[4096];
	if (src == NULL)
		return;
	snprintf(path, sizeof(path), "%s/man/cg-reduce.1", src);
	FILE *fp = fopen(path, "r");
	static char text[1 << 17];
	size_t len = fp ? fread(text, 1, sizeof(text) - 1, fp) : 0;
	if (fp)
		fclose(fp);
	text[len] = '\0';
	int ok = len > 0;
	for (const struct cg_stale_rule *r = cg_stale_rules; r->name; r++) {
		char want[96];
		snprintf(want, sizeof(want), ".It Cm %s%s", r->name,
		         r->nparams ? " : Ns Ar " : "\n");
		ok &= strstr(text, want) != NULL;
	}
	expect(ok, "cg-reduce(1) has an entry for each rule");
}

/* ----------------------------------------------------------- reduce */

#define NIN 4

/* The models the inputs come from: models[i] at step 3 - i (models[0]
 * is the one the reduction is for). */
static struct cg_model *models[NIN];
static float bufs[NIN][TOY_P];
static const double weights[NIN] = {8, 3, 16, 5};

static struct cg_update *
input(int i, const char *name)
{
	struct cg_file *f = cg_update_new(models[i], CG_UPDATE_DELTA, bufs[i],
	                                  weights[i], weights[i], 1.0 + i);

	if (f == NULL)
		die("cg_update_new");
	return cg_update_from_file(f, name);
}

/* sum_i w_i f(s_i) x_i / sum_i w_i over inputs 0..2 (input 3 is too
 * stale), in double, f transcribed by hand for the rule: want [TOY_P],
 * and a bound on |x| weighed the same way (for the tolerance). */
static void
reference(const double f[3], double *want, double *scale)
{
	double W = weights[0] + weights[1] + weights[2];

	for (int j = 0; j < TOY_P; j++) {
		double s = 0, a = 0;
		for (int i = 0; i < 3; i++) {
			s += weights[i] * f[i] * bufs[i][j];
			a += weights[i] * f[i] * fabs(bufs[i][j]);
		}
		want[j] = s / W;
		scale[j] = a / W;
	}
}

/* Reduce inputs [lo, hi) for models[0] (max staleness 2) under spec;
 * slice > 0: the sliced path.  Returns the result; *rc3 the add's
 * return for input 3 when it is among them. */
static struct cg_file *
reduce_for(const char *spec, int lo, int hi, size_t slice, int *rc3, char *msg3,
           size_t nmsg)
{
	struct cg_stale_weight w;
	struct cg_reducer r;
	struct cg_file *f;

	if (cg_stale_weight_parse(spec, &w) != 0)
		die(spec);
	cg_reducer_init(&r, cg_reduce_op_at(0), 0);
	if (slice) {
		r.sliced = 1;
		r.slice = slice;
	}
	if (cg_reducer_set_model(&r, models[0], "now.cgm", 2, &w) != 0)
		die("cg_reducer_set_model");
	for (int i = lo; i < hi; i++) {
		char name[24];
		snprintf(name, sizeof(name), "d%d.cgg", i);
		int rc = cg_reducer_add(&r, input(i, name));
		if (i == 3) {
			*rc3 = rc;
			snprintf(msg3, nmsg, "%s", cg_errmsg());
		} else if (rc != 0) {
			die("cg_reducer_add");
		}
	}
	/* the one too stale is noted by name, for cg-reduce --log */
	int out = lo <= 3 && 3 < hi && *rc3 == 1;
	CHECK(r.nleft_out == (size_t)out &&
	          (!out || strcmp(r.left_out[0], "d3.cgg") == 0),
	      "%s: %zu inputs noted as left out", spec, r.nleft_out);
	if ((f = cg_reducer_finish(&r)) == NULL)
		die("cg_reducer_finish");
	cg_reducer_free(&r);
	return f;
}

/* The largest |got - want| over the result's tensors, and whether every
 * element is within 8 f32 roundings of the weighted values' size. */
static int
close_to(const struct cg_file *f, const double *want, const double *scale,
         double *worst)
{
	int ok = 1, j = 0;

	*worst = 0;
	for (size_t t = 0; t < f->ntensors; t++) {
		const float *x = f->tensors[t]->data;
		for (uint64_t e = 0; e < f->tensors[t]->nelem; e++, j++) {
			double d = fabs(x[e] - want[j]);
			*worst = d > *worst ? d : *worst;
			ok &= d <= 8 * 0x1p-24 * scale[j] + 1e-30;
		}
	}
	return ok && j == TOY_P;
}

static void
reduced(void)
{
	/* the factors at staleness 0, 1, 2, by hand */
	static const struct {
		const char *spec;
		double f[3];
	} cases[] = {
	    {"constant", {1, 1, 1}},
	    {"poly:0.5", {1, 0.70710678118654752, 0.57735026918962576}},
	    {"hinge:1,1", {1, 1, 0.5}},
	};
	double want[TOY_P], scale[TOY_P];
	char msg[512], what[160];
	const int f0 = failures;

	for (int i = 0; i < NIN; i++) {
		models[i] = toy_model(100 + (uint64_t)i, 3 - (uint64_t)i, 1, 0);
		toy_fill(bufs[i], TOY_P, 200 + (uint64_t)i, 0.5f + (float)i);
	}
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		reference(cases[c].f, want, scale);
		for (int sliced = 0; sliced < 2; sliced++) {
			int rc3 = 99;
			struct cg_file *f =
			    reduce_for(cases[c].spec, 0, NIN, sliced ? 7 : 0,
			               &rc3, msg, sizeof(msg));
			double worst;
			int ok = close_to(f, want, scale, &worst);
			printf("     %s, %s: largest difference from the "
			       "weighted mean in double %.3g\n",
			       cases[c].spec, sliced ? "sliced" : "streaming",
			       worst);
			snprintf(what, sizeof(what),
			         "%s (%s): sum w f(s) x / sum w, as the rule "
			         "says",
			         cases[c].spec,
			         sliced ? "sliced" : "streaming");
			expect(ok, what);
			/* weight: the inputs' own; base: the model's */
			const cJSON *m = f->manifest;
			const cJSON *b = cJSON_GetObjectItem(m, "base");
			unsigned char d[32];
			char hex[65];
			cg_model_digest(models[0], d);
			cg_hex(hex, d);
			CHECK(cg_json_num(m, "weight", 0) == 27 &&
			          cg_json_num(m, "samples", 0) == 27 &&
			          cg_json_num(m, "inputs", 0) == 3,
			      "%s: weight %g samples %g", cases[c].spec,
			      cg_json_num(m, "weight", 0),
			      cg_json_num(m, "samples", 0));
			const cJSON *sha = cJSON_GetObjectItem(b, "sha256");
			CHECK(cJSON_IsString(sha) &&
			          strcmp(sha->valuestring, hex) == 0 &&
			          cg_json_u64(b, "step", 0) == 3,
			      "%s: the result's base is not the model's",
			      cases[c].spec);
			/* the input too stale: left out, said, listed */
			CHECK(rc3 == 1, "%s: the step-0 input: %d",
			      cases[c].spec, rc3);
			CHECK(strcmp(msg,
			             "d3.cgg: stale by 3 steps (computed "
			             "from step 0, now.cgm is at 3), more "
			             "than --max-staleness 2; left out") == 0,
			      "message: %s", msg);
			const cJSON *st = cJSON_GetObjectItem(m, "staleness");
			const cJSON *in = cJSON_GetObjectItem(st, "inputs");
			const cJSON *dr = cJSON_GetObjectItem(st, "dropped");
			int listed = cJSON_GetArraySize(in) == 3 &&
			             cJSON_GetArraySize(dr) == 1;
			for (int i = 0; listed && i < 3; i++) {
				const cJSON *e = cJSON_GetArrayItem(in, i);
				listed &= cg_json_u64(e, "staleness", 99) ==
				              (uint64_t)i &&
				          cg_json_u64(e, "step", 99) ==
				              3 - (uint64_t)i &&
				          fabs(cg_json_num(e, "factor", 0) -
				               cases[c].f[i]) < 1e-15;
			}
			listed = listed &&
			         cg_json_u64(cJSON_GetArrayItem(dr, 0),
			                     "staleness", 0) == 3 &&
			         cg_json_u64(st, "max", 0) == 2;
			const cJSON *rule = cJSON_GetObjectItem(st, "rule");
			CHECK(listed && cJSON_IsString(rule) &&
			          strcmp(rule->valuestring, cases[c].spec) == 0,
			      "%s: the manifest's staleness list",
			      cases[c].spec);
			cg_file_free(f);
		}
	}
	expect(failures == f0, "each input's staleness, factor and the one "
	                       "left out in the manifest; weight sum w");
}

/* Partial results reduce again into the flat reduction; an input of a
 * later step, or of another model at the same step, is refused. */
static void
tree_and_refusals(void)
{
	static const double f[3] = {1, 0.70710678118654752,
	                            0.57735026918962576};
	double want[TOY_P], scale[TOY_P], worst;
	struct cg_stale_weight w;
	struct cg_reducer r;
	struct cg_file *part, *all;
	char msg[8];
	int rc3;

	reference(f, want, scale);
	part = reduce_for("poly:0.5", 0, 2, 0, &rc3, msg, sizeof(msg));
	cg_stale_weight_parse("poly:0.5", &w);
	cg_reducer_init(&r, cg_reduce_op_at(0), 0);
	if (cg_reducer_set_model(&r, models[0], "now.cgm", 2, &w) != 0 ||
	    cg_reducer_add(&r, cg_update_from_file(part, "part.cgg")) != 0 ||
	    cg_reducer_add(&r, input(2, "d2.cgg")) != 0 ||
	    (all = cg_reducer_finish(&r)) == NULL)
		die("the tree");
	int ok = close_to(all, want, scale, &worst);
	printf("     (d0 d1) then d2: largest difference from the flat "
	       "weighted mean %.3g\n",
	       worst);
	expect(ok && cg_json_num(all->manifest, "weight", 0) == 27,
	       "a reduction of partial results is the flat one");
	cg_file_free(all);
	cg_reducer_free(&r);

	const int f0 = failures;
	struct cg_model *later = toy_model(300, 5, 1, 0);
	struct cg_model *other = toy_model(301, 3, 1, 0);
	const struct {
		struct cg_model *m;
		const char *what;
	} bad[] = {{later, "computed from a later model (step 5"},
	           {other, "computed from another model (step 3"}};
	for (int i = 0; i < 2; i++) {
		struct cg_file *g =
		    cg_update_new(bad[i].m, CG_UPDATE_DELTA, bufs[0], 1, 1, 0);
		cg_reducer_init(&r, cg_reduce_op_at(0), 0);
		cg_reducer_set_model(&r, models[0], "now.cgm", 2, &w);
		int rc = cg_reducer_add(&r, cg_update_from_file(g, "x.cgg"));
		CHECK(rc == -1 && strstr(cg_errmsg(), bad[i].what) &&
		          strncmp(cg_errmsg(), "x.cgg: ", 7) == 0,
		      "%d: %s", rc, cg_errmsg());
		cg_reducer_free(&r);
	}
	expect(failures == f0, "an input of a later step or of another model "
	                       "at the model's step is refused");
	/* a rule that weighs needs an operation that weighs */
	cg_reducer_init(&r, cg_reduce_op_find("median"), 0);
	expect(cg_reducer_set_model(&r, models[0], "now.cgm", 2, &w) == -1,
	       "poly:0.5 with the median is refused");
	cg_reducer_free(&r);
	cg_model_free(later);
	cg_model_free(other);
}

/* ----------------------------------------------------------- DC-ASGD */

/* The gradient of a real cvae m on a batch drawn from seed, into g
 * [nparams] (zeroed first). */
static void
cvae_grad(const struct cg_model *m, uint64_t seed, float *g)
{
	const struct cg_cvae_config c = {
	    (int)cg_json_u64(m->config, "in_dim", 0),
	    (int)cg_json_u64(m->config, "ncond", 0),
	    (int)cg_json_u64(m->config, "hidden", 0),
	    (int)cg_json_u64(m->config, "layers", 0),
	    (int)cg_json_u64(m->config, "latent", 0),
	    (int)cg_json_u64(m->config, "class-prior", 0),
	    (int)cg_json_u64(m->config, "cond-every", 0), 0, 0, 0, 0};
	enum { B = 16 };
	float *x = xcalloc((size_t)B * c.in_dim, sizeof(float));
	float *eps = xcalloc((size_t)B * c.latent, sizeof(float));
	int cond[B];
	struct cg_cvae_ws *ws = cg_cvae_ws_new(&c, B, 0);
	struct cg_rng r;
	double loss, rec, kl;

	cg_rng_seed(&r, seed);
	for (int i = 0; i < B * c.in_dim; i++) {
		float u = cg_rng_uniform(&r);
		x[i] = i % 2 ? u : (u < 0.5f ? 0.0f : 1.0f);
	}
	for (int i = 0; i < B * c.latent; i++)
		eps[i] = cg_rng_normal(&r);
	for (int b = 0; b < B; b++)
		cond[b] = b % c.ncond;
	memset(g, 0, m->nparams * sizeof(float));
	if (ws == NULL ||
	    cg_cvae_forward_backward(&c, m->params, ws, x, cond, eps, B, g,
	                             &loss, &rec, &kl) != 0)
		die("cg_cvae_forward_backward");
	cg_cvae_ws_free(ws);
	free(x);
	free(eps);
}

/* A cvae as cg-init makes one. */
static struct cg_model *
cvae_model(void)
{
	cJSON *cfg = cJSON_CreateObject();
	struct cg_model *m;

	cJSON_AddNumberToObject(cfg, "in_dim", 784);
	cJSON_AddNumberToObject(cfg, "ncond", 10);
	cJSON_AddNumberToObject(cfg, "hidden", 64);
	cJSON_AddNumberToObject(cfg, "layers", 1);
	cJSON_AddNumberToObject(cfg, "latent", 8);
	if ((m = cg_model_create("cvae", cfg, NULL, 7)) == NULL)
		die("cg_model_create");
	return m;
}

static void
delay_comp(void)
{
	const double lambda = 2, lr = 0.05;
	struct cg_model *base = cvae_model(), *now = cvae_model();
	const size_t P = base->nparams;
	float *g = xcalloc(P, sizeof(float)), *h = xcalloc(P, sizeof(float));
	float *w0 = xcalloc(P, sizeof(float));
	struct cg_apply_opts o;
	double worst = 0, moved = 0;
	int ok = 1;

	/* the stale worker's gradient, at the base model; the model moved
	 * on by three SGD steps of other workers' gradients */
	cvae_grad(base, 1, g);
	for (int k = 0; k < 3; k++) {
		cvae_grad(now, 2 + (uint64_t)k, h);
		for (size_t j = 0; j < P; j++)
			now->params[j] -= (float)lr * h[j];
		now->step++;
	}
	memcpy(w0, now->params, P * sizeof(float));
	memcpy(h, g, P * sizeof(float));
	cg_delay_comp(h, now->params, base->params, P, lambda);
	for (size_t j = 0; j < P; j++) {
		double x = g[j], dw = (double)w0[j] - (double)base->params[j];
		double want = x + lambda * (x * x) * dw;
		double d = fabs(h[j] - want);
		worst = d > worst ? d : worst;
		moved = fmax(moved, fabs(want - x));
		/* one rounding to f32 of a value computed in double */
		ok &= d <= 0x1p-24 * fabs(want) + 0x1p-149;
	}
	printf("     DC-ASGD on a cvae of %zu parameters, lambda %g: largest "
	       "difference from the formula in double %.3g (largest "
	       "correction %.3g)\n",
	       P, lambda, worst, moved);
	expect(ok && moved > 0, "cg_delay_comp is g + lambda g g (w - w_base) "
	                        "within half an ulp");

	/* through cg_apply_update: SGD on the corrected gradient */
	struct cg_file *f = cg_update_new(base, CG_UPDATE_GRAD, g, 16, 16, 1);
	struct cg_update *u = cg_update_from_file(f, "g.cgg");
	cg_apply_defaults(&o);
	cg_optim_defaults(&o.opt, CG_OPT_SGD);
	o.opt.lr = (float)lr;
	o.base = base;
	o.base_name = "base.cgm";
	o.delay_comp = lambda;
	if (u == NULL || cg_apply_update(now, "now.cgm", u, &o) != 0)
		die("cg_apply_update");
	worst = 0;
	ok = 1;
	for (size_t j = 0; j < P; j++) {
		double x = g[j], dw = (double)w0[j] - (double)base->params[j];
		double gc = x + lambda * (x * x) * dw;
		double want = w0[j] - lr * gc;
		double d = fabs(now->params[j] - want);
		worst = d > worst ? d : worst;
		/* g_comp rounded, lr rounded to f32, lr g rounded, the
		 * difference rounded: 2^-24 each, of the sizes involved */
		ok &= d <= 0x1p-22 * (fabs(w0[j]) + lr * fabs(gc)) + 0x1p-149;
	}
	printf("     SGD step on it (lr %g): largest difference from "
	       "w - lr (g + lambda g g (w - w_base)) in double %.3g\n",
	       lr, worst);
	expect(ok, "cg_apply_update --delay-comp is the SGD step on the "
	           "corrected gradient");
	const cJSON *st = cJSON_GetObjectItem(now->manifest, "stale");
	expect(cg_json_u64(st, "staleness", 0) == 3 &&
	           cg_json_num(st, "delay_comp", 0) == lambda &&
	           cg_json_u64(cJSON_GetObjectItem(st, "base"), "step", 9) ==
	               0 &&
	           now->step == 4,
	       "the model's manifest records staleness 3 and lambda");

	/* a wrong base model: refused, the model untouched */
	memcpy(w0, now->params, P * sizeof(float));
	o.base = now;
	o.base_name = "wrong.cgm";
	int rc = cg_apply_update(now, "now.cgm", u, &o);
	expect(rc == -1 &&
	           strstr(cg_errmsg(), "than the base model wrong.cgm") &&
	           memcmp(w0, now->params, P * sizeof(float)) == 0,
	       "a gradient with a wrong base model is refused");
	printf("     (%s)\n", cg_errmsg());
	/* without a base model, a stale gradient is refused as ever */
	o.base = NULL;
	expect(cg_apply_update(now, "now.cgm", u, &o) == -1,
	       "a stale gradient without its base model is refused");
	cg_update_free(u);
	cg_model_free(base);
	cg_model_free(now);
	free(g);
	free(h);
	free(w0);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	cg_set_threads(2);
	rules();
	reduced();
	tree_and_refusals();
	delay_comp();
	for (int i = 0; i < NIN; i++)
		cg_model_free(models[i]);
	return failures ? 1 : 0;
}
