/*
 * eval/quantize.c - a model's views in other dtypes (see quantize.h).
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "eval/quantize.h"
#include "model/qat.h"

int
cg_quant_choose(const struct cg_model *m, const struct cg_view *v,
                const struct cg_quant_rule *r, enum cg_dtype *to,
                const char **why)
{
	const struct cg_codec *c = cg_codec(r->type);

	if (c == NULL)
		return -1;
	if (c->kind != CG_KIND_FLOAT)
		return cg_seterr("%s holds integers, not weights", c->name);
	*to = CG_F32;
	*why = NULL;
	if (r->type == CG_F32)
		return 0;
	for (int i = 0; i < r->nkeep; i++)
		if (fnmatch(r->keep[i], v->name, 0) == 0) {
			*why = "--keep";
			return 0;
		}
	if ((*why = cg_quant_why(v, r->type, r->all)) != NULL)
		return 0;
	/* an allocation's choice among the views the rule lets in */
	*to = r->types ? r->types[v - m->views] : r->type;
	return 0;
}

/* The optimizer's state in a model file (lib/model/model.c). */
static int
is_state(const char *name)
{
	static const char *const names[] = {"opt.m", "opt.v", "outer.mom",
	                                    "ef.down"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return 1;
	return 0;
}

/* The manifest of in into out, but "format" and "kind" (out has them);
 * with strip, the optimizer's step counts are 0 (one group: no
 * "opt_t"; several: each group's "opt_t" 0). */
static int
copy_manifest(struct cg_file *out, const struct cg_file *in, int strip)
{
	for (const cJSON *it = in->manifest->child; it; it = it->next) {
		cJSON *d, *g;
		if (strcmp(it->string, "format") == 0 ||
		    strcmp(it->string, "kind") == 0 ||
		    (strip && strcmp(it->string, "opt_t") == 0))
			continue;
		if ((d = cJSON_Duplicate(it, 1)) == NULL)
			return cg_seterr("out of memory");
		if (strip && strcmp(it->string, "groups") == 0)
			cJSON_ArrayForEach(g, d)
			{
				cJSON *t = cJSON_GetObjectItemCaseSensitive(
				    g, "opt_t");
				if (cJSON_IsNumber(t))
					cJSON_SetNumberValue(t, 0);
			}
		cJSON_AddItemToObject(out->manifest, it->string, d);
	}
	return 0;
}

static int
is_block(enum cg_dtype t)
{
	return cg_codec(t)->block > 1;
}

/* View t of in (v of m) as dtype to into out; rep filled in. */
static int
put_view(struct cg_file *out, const struct cg_tensor *t,
         const struct cg_model *m, const struct cg_view *v, enum cg_dtype to,
         const struct cg_quant_rule *r, struct cg_quant_view *rep)
{
	const float *x = m->params + v->off;
	struct cg_tensor *o;

	rep->from = t->dtype;
	rep->to = to;
	rep->nelem = t->nelem;
	rep->bytes_from = t->nbytes;
	if (to == t->dtype) {
		o = cg_file_add_ref(out, t->name, t->dtype, t->ndim, t->shape,
		                    t->data);
	} else if (to == CG_F32) {
		o = cg_file_add_ref(out, t->name, CG_F32, t->ndim, t->shape, x);
	} else {
		if (is_block(t->dtype) && is_block(to) && !r->allow_requantize)
			return cg_seterr("tensor %s: already %s; quantizing "
			                 "it again to %s compounds the error "
			                 "(--allow-requantize does it)",
			                 t->name, cg_dtype_name(t->dtype),
			                 cg_dtype_name(to));
		const struct cg_codec *c = cg_codec(to);
		int (*enc)(void *, const float *, size_t) =
		    c->encode_fit && !r->reference ? c->encode_fit : c->encode;
		o = cg_file_add_zero(out, t->name, to, t->ndim, t->shape);
		if (o && enc(o->data, x, v->n) != 0) {
			char why[200];
			snprintf(why, sizeof(why), "%s", cg_errmsg());
			return cg_seterr("tensor %s: %s", t->name, why);
		}
	}
	if (o == NULL)
		return -1;
	rep->bytes_to = o->nbytes;
	return 0;
}

struct cg_file *
cg_quantize(const struct cg_file *in, const struct cg_model *m,
            const struct cg_quant_rule *r, struct cg_quant_view *rep)
{
	struct cg_file *out = cg_file_new("model");

	if (out == NULL || copy_manifest(out, in, r->strip) != 0)
		goto fail;
	for (int i = 0; i < m->nviews; i++) {
		rep[i].name = m->views[i].name;
		if (cg_quant_choose(m, &m->views[i], r, &rep[i].to,
		                    &rep[i].why) != 0)
			goto fail;
	}
	for (size_t k = 0; k < in->ntensors; k++) {
		const struct cg_tensor *t = in->tensors[k];
		int i = 0;

		while (i < m->nviews && strcmp(m->views[i].name, t->name) != 0)
			i++;
		if (i < m->nviews) {
			if (put_view(out, t, m, &m->views[i], rep[i].to, r,
			             &rep[i]) != 0)
				goto fail;
		} else if (r->strip && is_state(t->name)) {
			continue;
		} else if (cg_file_add_ref(out, t->name, t->dtype, t->ndim,
		                           t->shape, t->data) == NULL) {
			goto fail;
		}
	}
	return out;
fail:
	cg_file_free(out);
	return NULL;
}
