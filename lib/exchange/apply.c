/*
 * exchange/apply.c - applying a gradient or a delta to a model.
 *
 * A gradient goes through the optimizer (SGD, momentum, Adam, AdamW, with
 * a learning-rate schedule and an optional norm clip), one step per
 * parameter group that is not frozen, each counting its own steps.  A
 * delta is added as it is (model averaging) or through DiLoCo's outer
 * Nesterov step.  The optimizer's state lives in the model, so the next
 * call continues it.  The update's numbers are read through the update
 * module (cg_update_get), the one place that knows their dtype.  A
 * pruned model's mask is applied after every step, to the weights and
 * to the optimizer's arrays: pruned weights stay exactly 0.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exchange/apply.h"
#include "exchange/feedback.h"
#include "exchange/stale.h"
#include "model/privacy.h"
#include "model/stage.h"

int
cg_outer_parse(const char *s, enum cg_outer *out)
{
	if (strcmp(s, "avg") == 0)
		*out = CG_OUTER_AVG;
	else if (strcmp(s, "nesterov") == 0)
		*out = CG_OUTER_NESTEROV;
	else
		return cg_seterr("--outer: '%s' is not avg or nesterov", s);
	return 0;
}

void
cg_apply_defaults(struct cg_apply_opts *o)
{
	memset(o, 0, sizeof(*o));
	cg_optim_defaults(&o->opt, CG_OPT_ADAM);
	o->outer = CG_OUTER_AVG;
	o->outer_lr = 0.7f;
	o->outer_mu = 0.9f;
}

static void add_unfrozen(const struct cg_model *m, float *p, const float *x);

/*
 * One step of m's groups that are not frozen over their views where
 * present [nviews] (NULL: every view) is set: the views a partial
 * update leaves out are frozen, and no decay, moment or step count
 * moves them.  0, or -1 with a message.
 */
static int
step_present(struct cg_model *m, float *g, const struct cg_apply_opts *o,
             const uint8_t *present)
{
	struct cg_view *sel;

	if (present == NULL) {
		cg_optim_step_groups(&o->opt, m->groups, m->ngroups, m->params,
		                     g, m->opt_m, m->opt_v, m->views, 0);
		return 0;
	}
	if ((sel = cg_alloc((size_t)m->nviews * sizeof(*sel))) == NULL)
		return -1;
	for (int i = 0; i < m->ngroups; i++) {
		struct cg_group *gr = &m->groups[i];
		int k = 0;
		if (gr->frozen)
			continue;
		for (int v = gr->view0; v < gr->view0 + gr->nviews; v++)
			if (present[v])
				sel[k++] = m->views[v];
		if (k == 0)
			continue;
		gr->opt_t++;
		cg_optim_step_views(&o->opt, gr->opt_t, m->params, g, m->opt_m,
		                    m->opt_v, sel, k, 0);
	}
	free(sel);
	return 0;
}

static int
apply_grad(struct cg_model *m, float *g, const struct cg_apply_opts *o,
           const uint8_t *present)
{
	/* DC-ASGD corrects the gradient as computed, before anything else
	 * of this step touches it */
	if (o->base != NULL && o->delay_comp > 0)
		cg_delay_comp(g, m->params, o->base->params, m->nparams,
		              o->delay_comp);
	cg_model_mask(m, g);
	if (m->ngroups > 1)
		cg_optim_mask_frozen(g, m->groups, m->ngroups);
	if (o->clip > 0)
		cg_clip_norm(g, m->nparams, o->clip);
	if (cg_model_ensure_opt(m, cg_optim_needs_m(o->opt.kind),
	                        cg_optim_needs_v(o->opt.kind)) != 0)
		return -1;
	if (step_present(m, g, o, present) != 0)
		return -1;
	/* weight decay of a pruned zero is zero, but moments loaded from
	 * elsewhere are not: the weights are set back */
	cg_model_mask_all(m);
	return 0;
}

static int
apply_delta(struct cg_model *m, const float *d, const struct cg_apply_opts *o,
            const uint8_t *present)
{
	if (o->outer == CG_OUTER_NESTEROV && cg_model_ensure_outer(m) != 0)
		return -1;
	if (o->outer != CG_OUTER_NESTEROV && o->stage) {
		/* a stage's range alone: the rest is no part of it */
		for (size_t j = o->stage->lo; j < o->stage->hi; j++)
			m->params[j] += d[j];
		return 0;
	}
	if (o->outer != CG_OUTER_NESTEROV) {
		add_unfrozen(m, m->params, d);
		cg_model_mask_all(m);
		return 0;
	}
	for (int i = 0; i < m->ngroups; i++) {
		const struct cg_group *gr = &m->groups[i];
		if (gr->frozen)
			continue;
		if (present == NULL) {
			cg_outer_nesterov(m->params + gr->off, d + gr->off,
			                  m->outer_mom + gr->off, gr->n,
			                  o->outer_lr, o->outer_mu);
			continue;
		}
		/* a view the update leaves out keeps its momentum too */
		for (int v = gr->view0; v < gr->view0 + gr->nviews; v++) {
			const struct cg_view *w = &m->views[v];
			if (present[v])
				cg_outer_nesterov(m->params + w->off,
				                  d + w->off,
				                  m->outer_mom + w->off, w->n,
				                  o->outer_lr, o->outer_mu);
		}
	}
	/* a pruned weight stays 0, and so does its outer momentum */
	cg_model_mask_all(m);
	return 0;
}

/*
 * u, stale, against m and the model it was computed from, o->base: the
 * staleness (>= 0), or -1 with a message.
 */
static int64_t
check_stale(const struct cg_model *m, const char *mname,
            const struct cg_update *u, const struct cg_apply_opts *o)
{
	const struct cg_model *b = o->base;
	unsigned char d[32];
	char hex[65];
	int64_t s;

	cg_model_digest(m, d);
	cg_hex(hex, d);
	if ((s = cg_update_staleness(u, hex, m->step, mname)) < 0)
		return -1;
	cg_model_digest(b, d);
	cg_hex(hex, d);
	if (strcmp(hex, u->base) != 0)
		return cg_seterr(
		    "%s: computed from another model (step %llu, "
		    "sha256 %.12s...) than the base model %s (step "
		    "%llu, %.12s...)",
		    u->name, (unsigned long long)u->base_step, u->base,
		    o->base_name, (unsigned long long)b->step, hex);
	if (b->nparams != m->nparams || b->nviews != m->nviews)
		goto differs;
	for (int i = 0; i < m->nviews; i++)
		if (strcmp(b->views[i].name, m->views[i].name) != 0 ||
		    b->views[i].n != m->views[i].n)
			goto differs;
	return s;
differs:
	return cg_seterr("%s: not of %s's tensors", o->base_name, mname);
}

/* The manifest's "stale": how the stale update u, s steps old, was
 * applied; 0 or -1. */
static int
put_stale(struct cg_model *m, const struct cg_update *u, int64_t s,
          const struct cg_apply_opts *o)
{
	cJSON *st, *b;

	if ((st = cJSON_AddObjectToObject(m->manifest, "stale")) == NULL ||
	    (b = cJSON_AddObjectToObject(st, "base")) == NULL)
		return cg_seterr("out of memory");
	cJSON_AddNumberToObject(st, "staleness", (double)s);
	cJSON_AddStringToObject(b, "sha256", u->base);
	cJSON_AddNumberToObject(b, "step", (double)u->base_step);
	cJSON_AddNumberToObject(st, "delay_comp",
	                        u->kind == CG_UPDATE_GRAD ? o->delay_comp : 0);
	return 0;
}

/*
 * The privacy record m will carry once u is applied, into *next: m's,
 * with u's release after it.  1 when u has one, 0 when not (m's record
 * stays as it is), -1 with a message: a record not sound, another
 * delta, or a budget o->target_epsilon that the release would pass.
 */
static int
next_dp(const struct cg_model *m, const char *mname, const struct cg_update *u,
        const struct cg_apply_opts *o, struct cg_dp *next)
{
	struct cg_dp ud;
	int rc;

	if ((rc = cg_dp_read(u->file->manifest, &ud)) < 0)
		return cg_errprefix(u->name), -1;
	if (rc == 0 && o->target_epsilon > 0)
		return cg_seterr("%s: --target-epsilon: no noise was added to "
		                 "it (no \"dp\" record)",
		                 u->name);
	if (rc == 0)
		return 0;
	if (ud.clip <= 0)
		return cg_seterr("%s: dp: a record without the release that "
		                 "made it",
		                 u->name);
	if (cg_dp_read(m->manifest, next) < 0)
		return cg_errprefix(mname), -1;
	if (next->nhist == 0)
		next->delta = ud.delta;
	else if (next->delta != ud.delta)
		return cg_seterr("%s: noised at delta %g, the budget of the "
		                 "model %s at %g",
		                 u->name, ud.delta, mname, next->delta);
	double before = next->epsilon;
	/* a parallel release (DP-SGD on disjoint shards) adds its max */
	if (cg_dp_append_max(next, ud.release, ud.nrelease) != 0)
		return -1;
	if (o->target_epsilon > 0 && next->epsilon > o->target_epsilon)
		return cg_seterr("%s: would bring epsilon to %.4g at delta %g "
		                 "(%.4g so far), past --target-epsilon %g",
		                 u->name, next->epsilon, next->delta, before,
		                 o->target_epsilon);
	return 1;
}

/*
 * Whether u is an update of what m is, a whole model or the stage
 * o->stage: 0, or -1 with a message.
 */
static int
check_stage(const char *mname, const struct cg_update *u,
            const struct cg_apply_opts *o)
{
	const struct cg_stage *st = o->stage;
	char x[32];

	if (st == NULL && u->stage.count)
		return cg_seterr("%s: an update of %s: apply it to that "
		                 "stage (cg-convert --stage), not to the whole "
		                 "model %s",
		                 u->name, cg_update_stage_name(u, x, sizeof(x)),
		                 mname);
	if (st == NULL)
		return 0;
	if (u->stage.count != st->count || u->stage.index != st->index ||
	    u->stage.a != st->a || u->stage.b != st->b)
		return cg_seterr("%s: an update of %s, but %s is stage %d of "
		                 "%d",
		                 u->name, cg_update_stage_name(u, x, sizeof(x)),
		                 mname, st->index + 1, st->count);
	if (o->base || o->clip > 0)
		return cg_seterr("%s: a pipeline stage takes no %s", mname,
		                 o->base
		                     ? "stale update (--base-model)"
		                     : "--clip (the whole gradient's norm)");
	return 0;
}

int
cg_apply_update(struct cg_model *m, const char *mname,
                const struct cg_update *u, const struct cg_apply_opts *o)
{
	int64_t s = 0;
	float *g;
	uint8_t *present = NULL;
	int rc = -1, dp;
	struct cg_dp next;

	if (check_stage(mname, u, o) != 0)
		return -1;
	if (o->stage) {
		unsigned char d[32];
		char hex[65];
		cg_stage_digest(m, o->stage, d);
		cg_hex(hex, d);
		if (cg_update_check_base_of(u, hex, m->step, mname) < 0)
			return -1;
	} else if (o->base == NULL ? cg_update_check_base(u, m, mname) < 0
	                           : (s = check_stale(m, mname, u, o)) < 0)
		return -1;
	if ((dp = next_dp(m, mname, u, o, &next)) < 0)
		return -1;
	/* a stage's: zero pages outside its range, never written */
	if ((g = o->stage ? calloc(m->nparams ? m->nparams : 1, sizeof(float))
	                  : cg_alloc(m->nparams * sizeof(float))) == NULL) {
		cg_seterr("out of memory");
		return -1;
	}
	if (cg_update_get(u, m, g) != 0)
		goto out;
	if (u->partial || o->stage) {
		if ((present = cg_alloc((size_t)m->nviews)) == NULL)
			goto out;
		int n = cg_update_present(u, m, present), in = 0;
		/* a stage's update: its views, every one */
		for (int i = o->stage ? o->stage->v0 : 0;
		     o->stage && i < o->stage->v1; i++)
			in += present[i];
		if (o->stage &&
		    (n != in || in != o->stage->v1 - o->stage->v0)) {
			cg_seterr("%s: %d tensors, %d of them the stage's (it "
			          "has %d)",
			          u->name, n, in, o->stage->v1 - o->stage->v0);
			goto out;
		}
	}
	if ((u->kind == CG_UPDATE_GRAD ? apply_grad(m, g, o, present)
	                               : apply_delta(m, g, o, present)) != 0)
		goto out;
	/* a finite update can still overflow a weight or a moment: no
	 * reader takes such a model, so none is made */
	if (cg_model_check_all_finite(m) != 0) {
		char why[256];
		snprintf(why, sizeof(why), "%s", cg_errmsg());
		cg_seterr("the new model is not finite: %s (the update or the "
		          "learning rate too large?)",
		          why);
		goto out;
	}
	m->step++;
	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "stale");
	if (o->base != NULL && put_stale(m, u, s, o) != 0)
		goto out;
	cg_json_set_num(m->manifest, "loss", u->loss);
	/* "samples" counts the examples the model has learnt from. */
	cg_json_set_num(m->manifest, "samples",
	                cg_json_num(m->manifest, "samples", 0) + u->samples);
	if (dp && cg_dp_write(m->manifest, &next) != 0)
		goto out;
	rc = 0;
out:
	free(g);
	free(present);
	return rc;
}

/* p += x over the groups that are not frozen: how a delta is added as it
 * is (apply_delta's avg), on both ends of the downlink. */
static void
add_unfrozen(const struct cg_model *m, float *p, const float *x)
{
	for (int i = 0; i < m->ngroups; i++) {
		const struct cg_group *gr = &m->groups[i];
		if (gr->frozen)
			continue;
		for (size_t j = 0; j < gr->n; j++)
			p[gr->off + j] += x[gr->off + j];
	}
}

int
cg_apply_publish(struct cg_model *m, const char *mname,
                 const struct cg_update *u, const struct cg_apply_opts *o,
                 const struct cg_uspec *s, uint64_t budget, int feedback,
                 struct cg_file **change)
{
	const size_t P = m->nparams;
	const uint64_t step0 = m->step;
	struct cg_uspec spec = *s;
	struct cg_uview *v = NULL;
	struct cg_uenc e = {0};
	float *old = cg_alloc(P * sizeof(float));
	float *d = cg_alloc(P * sizeof(float));
	float *sent = cg_alloc(P * sizeof(float));
	struct cg_file *f = NULL;
	int rc = -1;

	*change = NULL;
	if (old == NULL || d == NULL || sent == NULL ||
	    (feedback && cg_model_ensure_ef_down(m) != 0) ||
	    cg_update_model_views(m, &v) != 0)
		goto out;
	if (budget && cg_uspec_fit(&spec, v, m->nviews, budget) != 0)
		goto out;
	memcpy(old, m->params, P * sizeof(float));
	if (cg_apply_update(m, mname, u, o) != 0)
		goto out;
	for (size_t i = 0; i < P; i++)
		d[i] = m->params[i] - old[i];
	if (feedback) /* the rest of earlier changes: cg_feedback_add */
		cg_feedback_add(d, m->ef_down, P, 1);
	/* the change is computed from the model as it was */
	float *now = m->params;
	m->params = old;
	m->step = step0;
	cg_rng_derive(&e.rng, step0, 0x646f776eULL, 0);
	/* with feedback, the residual becomes what the change did not carry */
	f = cg_update_encode(m, NULL, CG_UPDATE_DELTA, d, u->samples, u->weight,
	                     u->loss, &spec, &e, sent,
	                     feedback ? m->ef_down : NULL);
	m->params = now;
	m->step = step0 + 1;
	if (f == NULL)
		goto out;
	cg_json_set_num(f->manifest, "inputs", (double)u->inputs);
	cJSON_AddBoolToObject(f->manifest, "downlink", 1);
	/* a noised release: the workers' models record it as this one */
	const cJSON *dpr =
	    cJSON_GetObjectItemCaseSensitive(u->file->manifest, "dp");
	if (dpr && !cJSON_AddItemToObject(f->manifest, "dp",
	                                  cJSON_Duplicate(dpr, 1))) {
		cg_seterr("out of memory");
		goto out;
	}
	/* the model becomes what a worker rebuilds */
	memcpy(m->params, old, P * sizeof(float));
	add_unfrozen(m, m->params, sent);
	/* as a worker's cg_apply_update masks what it adds */
	cg_model_mask_all(m);
	*change = f;
	f = NULL;
	rc = 0;
out:
	cg_file_free(f);
	free(v);
	free(old);
	free(d);
	free(sent);
	return rc;
}
