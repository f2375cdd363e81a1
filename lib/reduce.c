/*
 * reduce.c - combining gradients and deltas, one input at a time.
 *
 * Every input must be of one kind (all grads or all deltas) and computed
 * from one base model (the digest in "base").  A weighted mean uses each
 * input's "weight" (the examples, or for text the scored tokens: a text
 * model's gradient is a mean per token) or, missing, its "samples";
 * keeping the running weighted sum and the total weight makes any tree of
 * reductions equal to one flat reduction, up to float rounding.
 */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model.h"
#include "reduce.h"

void
cg_reducer_init(struct cg_reducer *r, enum cg_reduce_op op)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
}

void
cg_reducer_free(struct cg_reducer *r)
{
	cg_file_free(r->acc);
	r->acc = NULL;
}

int
cg_update_base(const struct cg_file *f, char hex[65], uint64_t *step)
{
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(f->manifest, "base");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(b, "sha256");

	if (!cJSON_IsString(d) || strlen(d->valuestring) != 64)
		return -1;
	memcpy(hex, d->valuestring, 65);
	*step = cg_json_u64(b, "step", 0);
	return 0;
}

int
cg_reducer_add(struct cg_reducer *r, struct cg_file *f)
{
	const char *kind = cg_file_kind(f);
	char hex[65];
	uint64_t step;
	double w;
	int rc = -1;

	if (strcmp(kind, "grad") != 0 && strcmp(kind, "delta") != 0) {
		cg_seterr("a %s file, not a grad or delta", kind);
		goto out;
	}
	if (cg_update_base(f, hex, &step) != 0) {
		cg_seterr("no base model digest");
		goto out;
	}
	double ns = cg_json_num(f->manifest, "samples", 0);
	w = cg_json_num(f->manifest, "weight", ns);
	if (!(ns > 0) || !(w > 0) || !isfinite(w)) {
		cg_seterr("no positive sample count and weight");
		goto out;
	}
	for (size_t i = 0; i < f->ntensors; i++)
		if (f->tensors[i].dtype != CG_F32) {
			cg_seterr("tensor %s: dtype %s (only f32 updates can "
				  "be reduced)",
				  f->tensors[i].name,
				  cg_dtype_name(f->tensors[i].dtype));
			goto out;
		}
	double k = r->op == CG_REDUCE_MEAN ? w : 1.0;
	if (r->acc == NULL) {
		snprintf(r->kind, sizeof(r->kind), "%s", kind);
		memcpy(r->base, hex, 65);
		r->base_step = step;
		for (size_t i = 0; i < f->ntensors; i++) {
			float *p = f->tensors[i].data;
			for (uint64_t j = 0; j < f->tensors[i].nelem; j++)
				p[j] = (float)(p[j] * k);
		}
		r->acc = f;
		f = NULL;
	} else {
		if (strcmp(kind, r->kind) != 0) {
			cg_seterr("a %s among %ss", kind, r->kind);
			goto out;
		}
		if (strcmp(hex, r->base) != 0) {
			cg_seterr("computed from another model (step %llu, "
				  "sha256 %.12s...), not the first input's "
				  "(step %llu, %.12s...)",
				  (unsigned long long)step, hex,
				  (unsigned long long)r->base_step, r->base);
			goto out;
		}
		if (f->ntensors != r->acc->ntensors) {
			cg_seterr("%zu tensors, the first input has %zu",
				  f->ntensors, r->acc->ntensors);
			goto out;
		}
		for (size_t i = 0; i < f->ntensors; i++) {
			struct cg_tensor *a = &r->acc->tensors[i];
			struct cg_tensor *t = &f->tensors[i];
			if (strcmp(a->name, t->name) != 0 ||
			    a->nelem != t->nelem) {
				cg_seterr("tensor %s: differs from the first "
					  "input's %s",
					  t->name, a->name);
				goto out;
			}
		}
		for (size_t i = 0; i < f->ntensors; i++) {
			float *a = r->acc->tensors[i].data;
			const float *t = f->tensors[i].data;
			const float kf = (float)k;
			const uint64_t n = f->tensors[i].nelem;
#pragma omp parallel for simd if (parallel : n > 262144) schedule(static)
			for (uint64_t j = 0; j < n; j++)
				a[j] += kf * t[j];
		}
	}
	r->weight += w;
	r->samples += ns;
	r->loss += w * cg_json_num(f ? f->manifest : r->acc->manifest, "loss",
				   0);
	r->inputs += cg_json_u64(f ? f->manifest : r->acc->manifest,
				 "inputs", 1);
	rc = 0;
out:
	cg_file_free(f);
	return rc;
}

static void
set_num(cJSON *o, const char *key, double v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	cJSON_AddNumberToObject(o, key, v);
}

struct cg_file *
cg_reducer_finish(struct cg_reducer *r)
{
	struct cg_file *f = r->acc;

	if (f == NULL) {
		cg_seterr("no inputs");
		return NULL;
	}
	r->acc = NULL;
	if (r->op == CG_REDUCE_MEAN) {
		const float inv = (float)(1.0 / r->weight);
		for (size_t i = 0; i < f->ntensors; i++) {
			float *a = f->tensors[i].data;
			for (uint64_t j = 0; j < f->tensors[i].nelem; j++)
				a[j] *= inv;
		}
	}
	set_num(f->manifest, "samples", r->samples);
	set_num(f->manifest, "weight", r->weight);
	set_num(f->manifest, "loss", r->loss / r->weight);
	set_num(f->manifest, "inputs", (double)r->inputs);
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "reduce");
	cJSON_AddStringToObject(f->manifest, "reduce",
				r->op == CG_REDUCE_MEAN ? "mean" : "sum");
	return f;
}
