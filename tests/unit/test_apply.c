/*
 * test_apply.c - applying updates, and parameter groups.
 *
 * A gradient applied with each optimizer (and with a clip) must give the
 * bits cg_optim_step_views gives on the same data, moments and step count
 * included; a delta applied as it is must be p + d, and through the outer
 * Nesterov step a direct transcription of its formula, both in float and
 * in the same order, so bit for bit.  With two parameter groups each
 * steps with its own count (Adam's bias correction tells the counts
 * apart), a frozen group and its moments stay bit-identical, in cg-apply's
 * step and in cg_train_run's inner steps (a toy arch whose loss is
 * |p - target|^2 / 2); the groups' counts survive a model file, one group
 * being stored as it always was ("opt_t", no "groups").  Exit 0 pass, 1
 * fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "cg.h"
#include "exchange/apply.h"
#include "exchange/update.h"
#include "model/model.h"
#include "train/state.h"
#include "train/train.h"

#define TEST_NAME "test_apply"
#include "check.h"
#include "toy.h"

/* An update of kind k for model m holding buf (copied into the file). */
static struct cg_update *
update_of(const struct cg_model *m, enum cg_update_kind k, const float *buf)
{
	struct cg_file *f = cg_update_new(m, k, buf, 8, 8, 0.5);
	struct cg_file *g = cg_file_new(cg_update_kind_name(k));

	if (f == NULL || g == NULL)
		die("cg_update_new");
	/* A copy, so that buf may change while the update lives. */
	cJSON_Delete(g->manifest);
	g->manifest = cJSON_Duplicate(f->manifest, 1);
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		if (!cg_file_add(g, t->name, t->dtype, t->ndim, t->shape,
		                 t->data))
			die("cg_file_add");
	}
	cg_file_free(f);
	return cg_update_from_file(g, "u.cgg");
}

static void
grad_each_optimizer(void)
{
	static const enum cg_opt_kind kinds[] = {CG_OPT_SGD, CG_OPT_MOMENTUM,
	                                         CG_OPT_ADAM, CG_OPT_ADAMW};
	for (size_t k = 0; k < 4; k++)
		for (int clip = 0; clip < 2; clip++) {
			struct cg_model *m = toy_model(11, 0, 1, 0);
			struct cg_apply_opts o;
			float p[TOY_P], g[TOY_P], mm[TOY_P] = {0},
			                          vv[TOY_P] = {0};
			int ok = 1;
			char what[96];

			cg_apply_defaults(&o);
			cg_optim_defaults(&o.opt, kinds[k]);
			o.opt.wd = 0.05f; /* decay on weights, not biases */
			o.opt.warmup = 3;
			o.clip = clip ? 0.5 : 0;
			memcpy(p, m->params, sizeof(p));
			for (uint64_t t = 1; t <= 3; t++) {
				toy_fill(g, TOY_P, 100 + t, 1);
				struct cg_update *u =
				    update_of(m, CG_UPDATE_GRAD, g);
				if (u == NULL ||
				    cg_apply_update(m, "m", u, &o) != 0)
					die("cg_apply_update");
				cg_update_free(u);
				if (clip)
					cg_clip_norm(g, TOY_P, o.clip);
				cg_optim_step_views(&o.opt, t, p, g, mm, vv,
				                    toy_views, 4, 0);
				ok &= same_bits(p, m->params, TOY_P);
				ok &= !cg_optim_needs_m(kinds[k]) ||
				      same_bits(mm, m->opt_m, TOY_P);
				ok &= !cg_optim_needs_v(kinds[k]) ||
				      same_bits(vv, m->opt_v, TOY_P);
				ok &= m->groups[0].opt_t == t && m->step == t;
			}
			ok &= cg_optim_needs_m(kinds[k]) == (m->opt_m != NULL);
			ok &= cg_optim_needs_v(kinds[k]) == (m->opt_v != NULL);
			snprintf(what, sizeof(what),
			         "grad, %s%s: three steps are cg_optim's, bit "
			         "for bit",
			         cg_optim_name(kinds[k]),
			         clip ? " with a clip" : "");
			expect(ok, what);
			cg_model_free(m);
		}
}

static void
deltas(void)
{
	struct cg_model *m = toy_model(12, 4, 1, 0);
	struct cg_apply_opts o;
	float p[TOY_P], d[TOY_P], mom[TOY_P] = {0};
	int ok = 1;

	cg_apply_defaults(&o);
	memcpy(p, m->params, sizeof(p));
	toy_fill(d, TOY_P, 13, 0.1f);
	struct cg_update *u = update_of(m, CG_UPDATE_DELTA, d);
	if (cg_apply_update(m, "m", u, &o) != 0)
		die("apply avg");
	cg_update_free(u);
	for (int i = 0; i < TOY_P; i++)
		p[i] += d[i];
	expect(same_bits(p, m->params, TOY_P) && m->step == 5 &&
	           m->opt_m == NULL && m->outer_mom == NULL &&
	           m->groups[0].opt_t == 0,
	       "delta, avg: p + d, no optimizer state");

	o.outer = CG_OUTER_NESTEROV;
	o.outer_lr = 0.7f;
	o.outer_mu = 0.9f;
	for (int r = 0; r < 3; r++) {
		toy_fill(d, TOY_P, 14 + (uint64_t)r, 0.1f);
		u = update_of(m, CG_UPDATE_DELTA, d);
		if (cg_apply_update(m, "m", u, &o) != 0)
			die("apply nesterov");
		cg_update_free(u);
		/* PyTorch's SGD(nesterov=True) on the gradient -d. */
		for (int i = 0; i < TOY_P; i++) {
			float gi = -d[i];
			mom[i] = 0.9f * mom[i] + gi;
			p[i] -= 0.7f * (gi + 0.9f * mom[i]);
		}
		ok &= same_bits(p, m->params, TOY_P) &&
		      same_bits(mom, m->outer_mom, TOY_P);
	}
	expect(ok && m->step == 8,
	       "delta, nesterov: three outer steps as transcribed, bit for "
	       "bit, outer.mom too");

	/* a stale delta: refused, the model as it was */
	memcpy(p, m->params, sizeof(p));
	u = update_of(m, CG_UPDATE_DELTA, d);
	m->params[0] += 1;
	p[0] = m->params[0];
	expect(cg_apply_update(m, "m.cgm", u, &o) == -1 &&
	           strstr(cg_errmsg(), "computed from another model") &&
	           same_bits(p, m->params, TOY_P) && m->step == 8,
	       "an update of another model: refused, nothing changed");
	cg_update_free(u);
	cg_model_free(m);
}

/* ------------------------------------------------------------ groups */

static void
groups_apply(void)
{
	struct cg_model *m = toy_model(21, 0, 2, 1);
	struct cg_apply_opts o;
	float p[TOY_P], g[TOY_P], mm[TOY_P] = {0}, vv[TOY_P] = {0};
	int ok = 1;

	expect(m->ngroups == 2 && m->groups[0].view0 == 0 &&
	           m->groups[0].nviews == 2 && m->groups[1].view0 == 2 &&
	           m->groups[1].nviews == 2,
	       "two groups: two views each");
	cg_apply_defaults(&o);
	memcpy(p, m->params, sizeof(p));
	for (uint64_t t = 1; t <= 2; t++) {
		toy_fill(g, TOY_P, 30 + t, 1);
		struct cg_update *u = update_of(m, CG_UPDATE_GRAD, g);
		if (cg_apply_update(m, "m", u, &o) != 0)
			die("apply");
		cg_update_free(u);
		cg_optim_step_views(&o.opt, t, p, g, mm, vv, toy_views, 2, 0);
		ok &= same_bits(p, m->params, TOY_P) &&
		      same_bits(mm, m->opt_m, TOY_P) &&
		      same_bits(vv, m->opt_v, TOY_P);
	}
	expect(ok, "a frozen group: its weights and moments stay as they "
	           "were, bit for bit");
	expect(m->groups[0].opt_t == 2 && m->groups[1].opt_t == 0,
	       "a frozen group takes no step");

	/* thawed, the groups step with counts of their own */
	m->groups[1].frozen = 0;
	toy_fill(g, TOY_P, 40, 1);
	struct cg_update *u = update_of(m, CG_UPDATE_GRAD, g);
	if (cg_apply_update(m, "m", u, &o) != 0)
		die("apply");
	cg_update_free(u);
	cg_optim_step_views(&o.opt, 3, p, g, mm, vv, toy_views, 2, 0);
	cg_optim_step_views(&o.opt, 1, p, g, mm, vv, toy_views + 2, 2, 0);
	expect(same_bits(p, m->params, TOY_P) &&
	           same_bits(mm, m->opt_m, TOY_P) &&
	           same_bits(vv, m->opt_v, TOY_P) && m->groups[0].opt_t == 3 &&
	           m->groups[1].opt_t == 1,
	       "two groups step at t = 3 and t = 1: each its own count");

	/* a delta leaves a frozen group alone too */
	m->groups[1].frozen = 1;
	toy_fill(g, TOY_P, 41, 0.1f);
	u = update_of(m, CG_UPDATE_DELTA, g);
	o.outer = CG_OUTER_NESTEROV;
	memcpy(p, m->params, sizeof(p));
	if (cg_apply_update(m, "m", u, &o) != 0)
		die("apply delta");
	cg_update_free(u);
	expect(same_bits(p + 20, m->params + 20, 20) &&
	           !same_bits(p, m->params, 20),
	       "a delta moves the open group only");
	cg_model_free(m);
}

/* What the manifest of m's file says about opt_t and groups. */
static cJSON *
manifest_of(struct cg_model *m, struct cg_file **out)
{
	struct cg_file *f = cg_model_file(m);

	if (f == NULL)
		die("cg_model_file");
	*out = f;
	return f->manifest;
}

static void
groups_on_disk(void)
{
	struct cg_model *one = toy_model(50, 0, 1, 0);
	struct cg_model *two = toy_model(50, 0, 2, 0);
	struct cg_model *back = toy_model(51, 0, 2, 0);
	struct cg_file *f;
	cJSON *j;

	one->groups[0].opt_t = 5;
	j = manifest_of(one, &f);
	expect(cg_json_u64(j, "opt_t", 0) == 5 &&
	           !cJSON_GetObjectItemCaseSensitive(j, "groups"),
	       "one group on disk: opt_t as always, no groups");
	cg_file_free(f);

	two->groups[0].opt_t = 7;
	two->groups[1].opt_t = 3;
	if (cg_model_ensure_opt(two, 1, 1) != 0)
		die("ensure_opt");
	toy_fill(two->opt_m, TOY_P, 52, 1);
	j = manifest_of(two, &f);
	const cJSON *gs = cJSON_GetObjectItemCaseSensitive(j, "groups");
	char *text = cJSON_PrintUnformatted(gs);
	printf("     (groups: %s)\n", text ? text : "?");
	expect(text &&
	           strcmp(text, "[{\"name\":\"gen\",\"offset\":0,\"size\":"
	                        "20,\"frozen\":false,\"opt_t\":7},{"
	                        "\"name\":\"disc\",\"offset\":20,\"size\":"
	                        "20,\"frozen\":false,\"opt_t\":3}]") == 0 &&
	           !cJSON_GetObjectItemCaseSensitive(j, "opt_t"),
	       "two groups on disk: one object each, no opt_t");
	free(text);
	expect(cg_model_load_opt(back, f) == 0 && back->groups[0].opt_t == 7 &&
	           back->groups[1].opt_t == 3 && back->opt_m &&
	           same_bits(back->opt_m, two->opt_m, TOY_P),
	       "two groups read back: counts and moments");
	/* a file whose groups are not the layout's is refused */
	cJSON *g1 = cJSON_GetArrayItem(
	    cJSON_GetObjectItemCaseSensitive(f->manifest, "groups"), 1);
	cJSON_ReplaceItemInObjectCaseSensitive(g1, "size",
	                                       cJSON_CreateNumber(19));
	expect(cg_model_load_opt(back, f) == -1 &&
	           strstr(cg_errmsg(), "group 1 differs from the layout's "
	                               "disc") != NULL,
	       "groups not the layout's: refused");
	cg_file_free(f);

	/* groups that do not tile the views are no layout */
	struct cg_group bad[2] = {{.name = "x", .off = 0, .n = 17},
	                          {.name = "y", .off = 17, .n = 23}};
	expect(cg_model_set_groups(back, bad, 2) == -1 && back->ngroups == 2,
	       "a group that cuts a view is refused");
	cg_model_free(one);
	cg_model_free(two);
	cg_model_free(back);
}

/* --------------------------------------------- groups in the trainer */

/* A toy arch: loss |p - target|^2 / 2 per example, target_i = i / 10. */
static int
toy_check(struct cg_model *m, const struct cg_shard *s)
{
	(void)m;
	(void)s;
	return 0;
}

static int
toy_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
          int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	double loss = 0;

	(void)s;
	(void)ex;
	(void)noise_seed;
	for (size_t i = 0; i < m->nparams; i++) {
		float r = m->params[i] - (float)i / 10.0f;
		loss += 0.5 * (double)r * r;
		if (grad)
			grad[i] += r;
	}
	memset(out, 0, sizeof(*out));
	out->loss = loss;
	out->n = (uint64_t)B;
	return 0;
}

static const struct cg_arch toy_arch = {
    .name = "toy", .check_data = toy_check, .batch = toy_batch};

static void
groups_train(void)
{
	struct cg_shard s = {.n = 4, .kind = CG_PAYLOAD_IMAGE};
	struct cg_train_opts o = {.steps = 3, .batch = 2, .seed = 1};
	struct cg_train_result res;
	struct cg_state *st = cg_state_new();
	float p0[TOY_P], out[TOY_P];
	uint64_t st_t = 0;

	if (st == NULL || cg_state_put_u64(st, "opt.t", 10) != 0)
		die("cg_state_new");

	cg_optim_defaults(&o.opt, CG_OPT_ADAM);
	/* model mode: the open group steps three times, the frozen none */
	struct cg_model *m = toy_model(60, 0, 2, 1);
	m->arch = &toy_arch;
	memcpy(p0, m->params, sizeof(p0));
	o.emit = CG_EMIT_MODEL;
	if (cg_train_run(m, &s, &o, NULL, out, &res) != 0)
		die("cg_train_run model");
	float want[TOY_P], g[TOY_P], mm[TOY_P] = {0}, vv[TOY_P] = {0};
	memcpy(want, p0, sizeof(want));
	for (uint64_t t = 1; t <= 3; t++) {
		for (int i = 0; i < TOY_P; i++)
			g[i] = want[i] - (float)i / 10.0f;
		cg_optim_step_views(&o.opt, t, want, g, mm, vv, toy_views, 2,
		                    0);
	}
	expect(same_bits(want, m->params, 20) &&
	           same_bits(p0 + 20, m->params + 20, 20) &&
	           same_bits(mm, m->opt_m, TOY_P) && m->groups[0].opt_t == 3 &&
	           m->groups[1].opt_t == 0 && m->step == 3,
	       "inner steps, model mode: the open group as cg_optim, the "
	       "frozen one untouched");

	/* delta mode with a state: one count, the frozen group's delta 0 */
	memcpy(m->params, p0, sizeof(p0));
	o.emit = CG_EMIT_DELTA;
	if (cg_train_run(m, &s, &o, st, out, &res) != 0 ||
	    cg_state_get_u64(st, "opt.t", &st_t) != 1)
		die("cg_train_run delta");
	int zero = 1;
	for (int i = 20; i < TOY_P; i++)
		zero &= out[i] == 0.0f;
	expect(zero && st_t == 13 && same_bits(p0, m->params, TOY_P) &&
	           m->groups[0].opt_t == 3,
	       "inner steps, delta mode: frozen delta 0, the state counts "
	       "13, the model's counts alone");
	cg_state_free(st);
	cg_model_free(m);
}

/* ------------------------------------------ the evaluation's progress */

struct calls {
	int n, done[8], total[8], loss_nan;
};

static void
record(void *ctx, int done, int total, double loss)
{
	struct calls *c = ctx;

	if (c->n < 8) {
		c->done[c->n] = done;
		c->total[c->n] = total;
	}
	c->n++;
	c->loss_nan += isnan(loss) != 0;
}

static void
eval_progress(void)
{
	struct cg_shard s = {.n = 5, .kind = CG_PAYLOAD_IMAGE};
	struct cg_metrics r, quiet;
	struct calls c = {0};
	struct cg_model *m = toy_model(60, 0, 2, 1);

	m->arch = &toy_arch;
	if (cg_eval_shard(m, &s, 2, 1, &r, record, &c) != 0 ||
	    cg_eval_shard(m, &s, 2, 1, &quiet, NULL, NULL) != 0)
		die("cg_eval_shard");
	expect(c.n == 3 && c.done[0] == 2 && c.done[1] == 4 && c.done[2] == 5 &&
	           c.total[0] == 5 && c.total[2] == 5 && c.loss_nan == 3,
	       "cg_eval_shard: progress after each batch (2, 4, 5 of 5), no "
	       "loss");
	expect(memcmp(&r, &quiet, sizeof(r)) == 0,
	       "cg_eval_shard: the same figures with no callback");
	cg_model_free(m);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	grad_each_optimizer();
	deltas();
	groups_apply();
	groups_on_disk();
	groups_train();
	eval_progress();
	return failures ? 1 : 0;
}
