/*
 * test_ema.c - the moving average of the parameters (cg_train_opts' ema):
 * its value after each step against the formula computed here from the
 * parameters of one-step calls, the training it leaves untouched, the
 * state that carries it from call to call, the calls that refuse it, and
 * the model file written of it.  Exit 0 pass, 1 fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "cg.h"
#include "model/model.h"
#include "train/state.h"
#include "train/train.h"

#define TEST_NAME "test_ema"
#include "check.h"
#include "shards.h"

#define DECAY 0.3 /* the warm-up rules steps 1-2, the decay 3 on */
#define K 6

static const char *const texts[] = {"abcab", "hello",   "q",
                                    "xyz!",  "cabbage", "average"};

static struct cg_model *
cgpt_model(uint64_t seed)
{
	cJSON *cfg = cJSON_CreateObject();
	struct cg_model *m;

	cJSON_AddNumberToObject(cfg, "ncond", 3);
	cJSON_AddNumberToObject(cfg, "context", 12);
	cJSON_AddNumberToObject(cfg, "width", 8);
	cJSON_AddNumberToObject(cfg, "layers", 1);
	cJSON_AddNumberToObject(cfg, "heads", 2);
	cJSON_AddNumberToObject(cfg, "tied", 0);
	if ((m = cg_model_create("cgpt", cfg, NULL, seed)) == NULL)
		die("cg_model_create cgpt");
	return m;
}

static struct cg_train_opts
opts(int steps, double ema)
{
	struct cg_train_opts o = {.steps = steps, .batch = 4, .seed = 3,
	                          .emit = CG_EMIT_MODEL, .ema = ema};

	cg_optim_defaults(&o.opt, CG_OPT_ADAM);
	o.opt.lr = 0.05f; /* steps that move the weights far */
	return o;
}

/* The largest |a - b| over n. */
static double
maxdiff(const float *a, const double *b, size_t n)
{
	double w = 0;

	for (size_t i = 0; i < n; i++)
		if (fabs(a[i] - b[i]) > w)
			w = fabs(a[i] - b[i]);
	return w;
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	struct cg_shard *s = text_shard(texts, 6, 3, "ema");
	struct cg_model *a = cgpt_model(1), *b = cgpt_model(1),
	                *c = cgpt_model(1);
	const size_t P = a->nparams;
	float *avg = xcalloc(P, sizeof(float)), *avg2 = xcalloc(P, sizeof(float));
	double *want = xcalloc(P, sizeof(double));
	struct cg_train_result res;
	struct cg_train_opts o;
	double far = 0;

	/* ---- the average after each step, one call against K of one */
	for (size_t i = 0; i < P; i++)
		want[i] = b->params[i];
	o = opts(1, 0);
	for (int k = 0; k < K; k++) {
		if (cg_train_run(b, s, &o, NULL, NULL, &res) != 0)
			die("train b");
		const double n = (double)b->step;
		const double d = fmin(DECAY, (1 + n) / (10 + n));
		for (size_t i = 0; i < P; i++)
			want[i] += (1 - d) * (b->params[i] - want[i]);
	}
	o = opts(K, DECAY);
	if (cg_train_run(a, s, &o, NULL, avg, &res) != 0)
		die("train a");
	expect(memcmp(a->params, b->params, P * sizeof(float)) == 0,
	       "the average leaves the training as it was, bit for bit");
	for (size_t i = 0; i < P; i++)
		if (fabs(b->params[i] - want[i]) > far)
			far = fabs(b->params[i] - want[i]);
	printf("     average %.3g from the last weights; %.3g from the "
	       "formula\n",
	       far, maxdiff(avg, want, P));
	expect(far > 1e-2, "the steps moved the weights off their average");
	expect(maxdiff(avg, want, P) < 1e-5,
	       "the average is the formula's: d = min(decay, (1+n)/(10+n))");

	/* ---- a state carries it: 2 calls with one state = 1 call */
	struct cg_state *st = cg_state_new();
	if (st == NULL)
		die("cg_state_new");
	o = opts(2, DECAY);
	if (cg_train_run(c, s, &o, st, avg2, &res) != 0)
		die("train c, 2 steps");
	o = opts(K - 2, DECAY);
	if (cg_train_run(c, s, &o, st, avg2, &res) != 0)
		die("train c, the rest");
	expect(memcmp(avg2, avg, P * sizeof(float)) == 0,
	       "two calls on one state: the average of one call, bit for bit");
	void *p;
	expect(cg_state_get(st, "ema", CG_F32, P, &p) == 1 &&
	           memcmp(p, avg, P * sizeof(float)) == 0,
	       "the state keeps it as \"ema\"");
	o = opts(1, DECAY);
	expect(cg_train_run(c, s, &o, st, NULL, &res) == 0 &&
	           memcmp(p, avg, P * sizeof(float)) != 0,
	       "with a state, no output array: the state's average moves on");

	/* ---- refused */
	o = opts(1, 0);
	expect(cg_train_run(c, s, &o, st, NULL, &res) != 0 &&
	           strstr(cg_errmsg(), "ema") != NULL,
	       "a call without an average refuses a state that keeps one");
	o = opts(1, DECAY);
	o.emit = CG_EMIT_DELTA;
	expect(cg_train_run(c, s, &o, NULL, avg2, &res) != 0,
	       "a delta call keeps no average");
	o = opts(1, 1.0);
	expect(cg_train_run(c, s, &o, NULL, avg2, &res) != 0,
	       "decay 1 is refused");
	o = opts(1, DECAY);
	expect(cg_train_run(c, s, &o, NULL, NULL, &res) != 0,
	       "no array to leave it in: refused, not written through NULL");

	/* ---- its file: a model of the average, no moments */
	struct cg_file *f = cg_model_file_ema(a, avg, DECAY);
	struct cg_model *r = f ? cg_model_from_file(f, "ema") : NULL;
	expect(r && memcmp(r->params, avg, P * sizeof(float)) == 0,
	       "the file's model is the average");
	expect(f && cg_file_find(f, "opt.m") == NULL &&
	           cg_file_find(f, "opt.v") == NULL &&
	           cJSON_GetObjectItem(f->manifest, "opt_t") == NULL,
	       "with no optimizer moments or step count");
	expect(f && cJSON_GetNumberValue(cJSON_GetObjectItem(f->manifest,
	                                                     "ema")) == DECAY,
	       "its manifest names the decay");
	expect(r && r->step == a->step, "at the trained model's step");
	struct cg_file *g = r ? cg_model_file(r) : NULL;
	expect(g && cJSON_GetObjectItem(g->manifest, "ema") == NULL,
	       "a model trained on from it is not called an average");

	cg_file_free(g);
	cg_model_free(r);
	cg_file_free(f);
	cg_state_free(st);
	cg_model_free(a);
	cg_model_free(b);
	cg_model_free(c);
	cg_shard_free(s);
	free(avg);
	free(avg2);
	free(want);
	return failures ? 1 : 0;
}
