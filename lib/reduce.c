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
#include <stdlib.h>
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

/* Elements a thread takes at a time where an input is folded in. */
#define FOLD_CHUNK 16384

/*
 * a = k t (first) or a += k t, one tensor of n elements; the caller's
 * thread, or its share of the tensor inside fold_all's parallel region.
 */
static void
fold(float *a, const float *t, uint64_t n, double k, int first)
{
	const float kf = (float)k;

	if (first) {
#pragma omp for simd schedule(simd : dynamic, FOLD_CHUNK) nowait
		for (uint64_t j = 0; j < n; j++)
			a[j] = (float)(t[j] * k);
	} else {
#pragma omp for simd schedule(simd : dynamic, FOLD_CHUNK) nowait
		for (uint64_t j = 0; j < n; j++)
			a[j] += kf * t[j];
	}
}

/*
 * fold src[i] into acc[i] for every tensor in one parallel region: the
 * threads share each tensor's chunks and go on to the next without
 * waiting, so the small tensors cost no fork of their own.
 */
static void
fold_all(struct cg_tensor *acc, const float *const *src, size_t nt, double k,
	 int first)
{
#pragma omp parallel
	for (size_t i = 0; i < nt; i++)
		fold(acc[i].data, src[i], acc[i].nelem, k, first);
}

int
cg_reducer_add(struct cg_reducer *r, struct cg_file *f)
{
	const char *kind = cg_file_kind(f);
	const float **src = NULL;
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
		/*
		 * The running sum starts as k times the first input, in
		 * memory of its own where the input lies in a mapped file:
		 * writing the mapping would copy it page by page, each copy
		 * a TLB flush on every core.
		 */
		if ((src = cg_alloc(f->ntensors * sizeof(*src))) == NULL)
			goto out;
		for (size_t i = 0; i < f->ntensors; i++) {
			struct cg_tensor *t = &f->tensors[i];
			src[i] = t->data;
			if (t->borrowed) {
				if ((t->data = cg_alloc(t->nbytes)) == NULL) {
					t->data = (void *)src[i];
					goto out;
				}
				t->borrowed = 0;
			}
		}
		fold_all(f->tensors, src, f->ntensors, k, 1);
		/* The mapping is spent: the sum has memory of its own. */
		cg_file_drop_blob(f);
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
		if ((src = cg_alloc(f->ntensors * sizeof(*src))) == NULL)
			goto out;
		for (size_t i = 0; i < f->ntensors; i++)
			src[i] = f->tensors[i].data;
		fold_all(r->acc->tensors, src, f->ntensors, k, 0);
	}
	r->weight += w;
	r->samples += ns;
	r->loss += w * cg_json_num(f ? f->manifest : r->acc->manifest, "loss",
				   0);
	r->inputs += cg_json_u64(f ? f->manifest : r->acc->manifest,
				 "inputs", 1);
	rc = 0;
out:
	free((void *)src);
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
