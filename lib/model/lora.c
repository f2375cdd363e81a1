/*
 * model/lora.c - low-rank adapters: their views, their first values, and
 * the merge around an arch's passes.
 *
 * The merge trades memory for simplicity: W' is formed in place (one
 * product of R inner terms per target), so every arch kernel, engine and
 * precision runs unchanged, and the saved copy of the targets' W costs
 * their size again.  The backward pass computes dW' as it always does,
 * and two products of rank R turn it into the adapters' gradients; W
 * itself trains not (its place in the gradient is zeroed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model/lora.h"
#include "model/model.h"
#include "nn/gemm.h"

void
cg_lora_free(struct cg_lora *l)
{
	if (l == NULL)
		return;
	free(l->w);
	free(l->a);
	free(l->b);
	free(l->saved);
	free(l);
}

/* The number j of manifest object o, an integer in [lo, hi]; -1 with a
 * message otherwise. */
static int
get_int(const cJSON *o, const char *key, double lo, double hi, double *out)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(j) || !(j->valuedouble >= lo) ||
	    !(j->valuedouble <= hi))
		return cg_seterr("manifest: \"lora\": \"%s\" is no number in "
		                 "[%g, %g]",
		                 key, lo, hi);
	*out = j->valuedouble;
	return 0;
}

int
cg_lora_layout(struct cg_model *m)
{
	const cJSON *lo = cJSON_GetObjectItemCaseSensitive(m->manifest, "lora");
	const cJSON *tg, *it;
	struct cg_lora *l;
	struct cg_view *v;
	const int nv = m->nviews;
	double r = 0, alpha = 0;
	int n;

	if (lo == NULL)
		return 0;
	if (!cJSON_IsObject(lo))
		return cg_seterr("manifest: \"lora\" is no object");
	if (m->ngroups > 0)
		return cg_seterr("%s models take no adapters (their parameter "
		                 "groups)",
		                 m->arch->name);
	tg = cJSON_GetObjectItemCaseSensitive(lo, "targets");
	if (get_int(lo, "r", 1, 65536, &r) != 0 ||
	    get_int(lo, "alpha", 1e-6, 1e6, &alpha) != 0)
		return -1;
	if (r != floor(r))
		return cg_seterr("manifest: \"lora\": \"r\" is no integer");
	n = cJSON_GetArraySize(tg);
	if (!cJSON_IsArray(tg) || n < 1 || n > CG_LORA_MAX_TARGETS)
		return cg_seterr("manifest: \"lora\": \"targets\" is no list "
		                 "of 1 to %d names",
		                 CG_LORA_MAX_TARGETS);
	if ((l = calloc(1, sizeof(*l))) == NULL ||
	    (l->w = calloc((size_t)n, sizeof(int))) == NULL ||
	    (l->a = calloc((size_t)n, sizeof(int))) == NULL ||
	    (l->b = calloc((size_t)n, sizeof(int))) == NULL ||
	    (v = realloc(m->views, (size_t)(nv + 2 * n) * sizeof(*v))) ==
	        NULL) {
		cg_lora_free(l);
		return cg_seterr("out of memory");
	}
	m->views = v;
	l->r = (int)r;
	l->alpha = alpha;
	l->scale = alpha / r;
	l->n = n;
	int k = 0;
	cJSON_ArrayForEach(it, tg)
	{
		int w = -1;
		if (!cJSON_IsString(it))
			goto bad;
		for (int i = 0; i < nv; i++)
			if (strcmp(v[i].name, it->valuestring) == 0)
				w = i;
		if (w < 0 || v[w].ndim != 2) {
			cg_seterr("manifest: \"lora\": \"%.64s\" is no matrix "
			          "of the model",
			          it->valuestring);
			goto fail;
		}
		for (int j = 0; j < k; j++)
			if (l->w[j] == w) {
				cg_seterr("manifest: \"lora\": \"%.64s\" twice",
				          it->valuestring);
				goto fail;
			}
		const uint64_t out = v[w].shape[0], in = v[w].shape[1];
		if ((uint64_t)l->r > out || (uint64_t)l->r > in) {
			cg_seterr("manifest: \"lora\": rank %d above %s's "
			          "%llux%llu",
			          l->r, v[w].name, (unsigned long long)out,
			          (unsigned long long)in);
			goto fail;
		}
		char name[sizeof(v->name)];
		l->w[k] = w;
		l->a[k] = m->nviews;
		if (snprintf(name, sizeof(name), "%s%s", v[w].name,
		             CG_LORA_A) >= (int)sizeof(name))
			goto long_name;
		cg_view_set(&v[m->nviews++], name, m->nparams, (size_t)l->r,
		            (size_t)in, 0);
		m->nparams += (size_t)l->r * in;
		l->b[k] = m->nviews;
		if (snprintf(name, sizeof(name), "%s%s", v[w].name,
		             CG_LORA_B) >= (int)sizeof(name))
			goto long_name;
		cg_view_set(&v[m->nviews++], name, m->nparams, (size_t)out,
		            (size_t)l->r, 0);
		m->nparams += (size_t)out * l->r;
		k++;
	}
	m->lora = l;
	return 0;
long_name:
	cg_seterr("manifest: \"lora\": \"%.64s\": name too long",
	          v[l->w[k]].name);
	goto fail;
bad:
	cg_seterr("manifest: \"lora\": a target is no string");
fail:
	m->nviews = nv;
	cg_lora_free(l);
	return -1;
}

void
cg_lora_init(struct cg_model *m, struct cg_rng *r)
{
	const struct cg_lora *l = m->lora;

	for (int k = 0; l && k < l->n; k++) {
		const struct cg_view *a = &m->views[l->a[k]];
		const struct cg_view *b = &m->views[l->b[k]];
		const float bound = 1.0f / sqrtf((float)a->shape[1]);
		for (size_t i = 0; i < a->n; i++)
			m->params[a->off + i] =
			    bound * (2.0f * cg_rng_uniform(r) - 1.0f);
		memset(m->params + b->off, 0, b->n * sizeof(float));
	}
}

int
cg_lora_merge(struct cg_model *m, int for_good)
{
	struct cg_lora *l = m->lora;
	size_t at = 0;

	if (l == NULL || l->merged)
		return 0;
	if (!for_good && l->saved == NULL) {
		size_t total = 0;
		for (int k = 0; k < l->n; k++)
			total += m->views[l->w[k]].n;
		if ((l->saved = cg_alloc(total * sizeof(float))) == NULL)
			return -1;
	}
	for (int k = 0; k < l->n; k++) {
		const struct cg_view *w = &m->views[l->w[k]];
		const int out = (int)w->shape[0], in = (int)w->shape[1];
		if (!for_good)
			memcpy(l->saved + at, m->params + w->off,
			       w->n * sizeof(float));
		at += w->n;
		/* W [out, in] += s B [out, r] A [r, in] */
		cg_sgemm(0, 0, out, in, l->r, (float)l->scale,
		         m->params + m->views[l->b[k]].off, l->r,
		         m->params + m->views[l->a[k]].off, in, 1.0f,
		         m->params + w->off, in);
	}
	l->merged = for_good ? 2 : 1;
	return 0;
}

void
cg_lora_grad(const struct cg_model *m, float *g)
{
	const struct cg_lora *l = m->lora;

	for (int k = 0; l && k < l->n; k++) {
		const struct cg_view *w = &m->views[l->w[k]];
		const struct cg_view *a = &m->views[l->a[k]];
		const struct cg_view *b = &m->views[l->b[k]];
		const int out = (int)w->shape[0], in = (int)w->shape[1];
		const float s = (float)l->scale;
		float *dw = g + w->off;
		/* dA [r, in] += s B^T [r, out] dW' [out, in] */
		cg_sgemm(1, 0, l->r, in, out, s, m->params + b->off, l->r, dw,
		         in, 1.0f, g + a->off, in);
		/* dB [out, r] += s dW' [out, in] A^T [in, r] */
		cg_sgemm(0, 1, out, l->r, in, s, dw, in, m->params + a->off, in,
		         1.0f, g + b->off, l->r);
		memset(dw, 0, w->n * sizeof(float));
	}
}

void
cg_lora_unmerge(struct cg_model *m)
{
	struct cg_lora *l = m->lora;
	size_t at = 0;

	if (l == NULL || l->merged != 1)
		return;
	for (int k = 0; k < l->n; k++) {
		const struct cg_view *w = &m->views[l->w[k]];
		memcpy(m->params + w->off, l->saved + at, w->n * sizeof(float));
		at += w->n;
	}
	l->merged = 0;
}

int
cg_lora_is_adapter(const struct cg_model *m, int i)
{
	const struct cg_lora *l = m->lora;

	for (int k = 0; l && k < l->n; k++)
		if (l->a[k] == i || l->b[k] == i)
			return 1;
	return 0;
}
