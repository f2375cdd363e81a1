/*
 * apply.c - applying a gradient or a delta to a model.
 *
 * A gradient goes through the optimizer (SGD, momentum, Adam, AdamW, with
 * a learning-rate schedule and an optional norm clip), one step per
 * parameter group that is not frozen, each counting its own steps.  A
 * delta is added as it is (model averaging) or through DiLoCo's outer
 * Nesterov step.  The optimizer's state lives in the model, so the next
 * call continues it.  The update's numbers are read through the update
 * module (cg_update_get), the one place that knows their dtype.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "apply.h"

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

static int
apply_grad(struct cg_model *m, float *g, const struct cg_apply_opts *o)
{
	if (m->ngroups > 1)
		cg_optim_mask_frozen(g, m->groups, m->ngroups);
	if (o->clip > 0)
		cg_clip_norm(g, m->nparams, o->clip);
	if (cg_model_ensure_opt(m, cg_optim_needs_m(o->opt.kind),
	                        cg_optim_needs_v(o->opt.kind)) != 0)
		return -1;
	cg_optim_step_groups(&o->opt, m->groups, m->ngroups, m->params, g,
	                     m->opt_m, m->opt_v, m->views, 0);
	return 0;
}

static int
apply_delta(struct cg_model *m, const float *d, const struct cg_apply_opts *o)
{
	if (o->outer == CG_OUTER_NESTEROV && cg_model_ensure_outer(m) != 0)
		return -1;
	for (int i = 0; i < m->ngroups; i++) {
		const struct cg_group *gr = &m->groups[i];
		float *p = m->params + gr->off;
		const float *x = d + gr->off;
		if (gr->frozen)
			continue;
		if (o->outer == CG_OUTER_NESTEROV)
			cg_outer_nesterov(p, x, m->outer_mom + gr->off, gr->n,
			                  o->outer_lr, o->outer_mu);
		else
			for (size_t j = 0; j < gr->n; j++)
				p[j] += x[j];
	}
	return 0;
}

int
cg_apply_update(struct cg_model *m, const char *mname,
                const struct cg_update *u, const struct cg_apply_opts *o)
{
	float *g;
	int rc = -1;

	if (cg_update_check_base(u, m, mname) < 0)
		return -1;
	if ((g = cg_alloc(m->nparams * sizeof(float))) == NULL)
		return -1;
	if (cg_update_get(u, m, g) != 0)
		goto out;
	if ((u->kind == CG_UPDATE_GRAD ? apply_grad(m, g, o)
	                               : apply_delta(m, g, o)) != 0)
		goto out;
	m->step++;
	cg_json_set_num(m->manifest, "loss", u->loss);
	/* "samples" counts the examples the model has learnt from. */
	cg_json_set_num(m->manifest, "samples",
	                cg_json_num(m->manifest, "samples", 0) + u->samples);
	rc = 0;
out:
	free(g);
	return rc;
}
