/*
 * reduce.c - combining gradients and deltas: the operations and the
 * reducer that runs them, streaming or slice by slice.
 *
 * A weighted mean uses each input's weight (the examples, or for text the
 * scored tokens: a text model's gradient is a mean per token); keeping
 * the running weighted sum and the total weight makes any tree of
 * reductions equal to one flat reduction, up to float rounding.  Which
 * inputs may be combined is the update module's rule (update.c); this
 * file only adds them up.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "reduce.h"

/* ------------------------------------------------------- operations */

/*
 * acc = k x in double then rounded (the first input), acc += (float)k x
 * (the others): the arithmetic every weighted fold has used, kept so
 * that outputs stay byte for byte what they were.
 */
static void
scale_into(float *acc, const float *x, size_t n, double k)
{
#pragma omp simd
	for (size_t j = 0; j < n; j++)
		acc[j] = (float)(x[j] * k);
}

static void
add_scaled(float *acc, const float *x, size_t n, double k)
{
	const float kf = (float)k;

#pragma omp simd
	for (size_t j = 0; j < n; j++)
		acc[j] += kf * x[j];
}

static void
mean_finish(float *acc, size_t n, double wsum)
{
	const float inv = (float)(1.0 / wsum);

	for (size_t j = 0; j < n; j++)
		acc[j] *= inv;
}

static void
sum_init(float *acc, const float *x, size_t n, double w)
{
	(void)w;
	scale_into(acc, x, n, 1.0);
}

static void
sum_add(float *acc, const float *x, size_t n, double w)
{
	(void)w;
	add_scaled(acc, x, n, 1.0);
}

const struct cg_reduce_op cg_reduce_ops[] = {
    {"mean", "the mean weighted by each input's weight", 1, scale_into,
     add_scaled, mean_finish, NULL},
    {"sum", "the plain sum", 1, sum_init, sum_add, NULL, NULL},
    {NULL, NULL, 0, NULL, NULL, NULL, NULL},
};

const struct cg_reduce_op *
cg_reduce_op_find(const char *name)
{
	char list[256] = "";
	size_t len = 0;

	for (const struct cg_reduce_op *op = cg_reduce_ops; op->name; op++) {
		if (strcmp(op->name, name) == 0)
			return op;
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
		                        len ? ", " : "", op->name);
		if (len >= sizeof(list))
			len = sizeof(list) - 1;
	}
	cg_seterr("unknown operation '%.32s' (%s)", name, list);
	return NULL;
}

/* ---------------------------------------------------------- reducer */

/* Elements a thread takes at a time. */
#define FOLD_CHUNK 16384

void
cg_reducer_init(struct cg_reducer *r, const struct cg_reduce_op *op)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->sliced = !op->streams;
	r->slice = CG_REDUCE_SLICE;
}

void
cg_reducer_free(struct cg_reducer *r)
{
	for (size_t i = 0; i < r->nkept; i++)
		if (r->kept[i] != r->first)
			cg_update_free(r->kept[i]);
	free(r->kept);
	cg_update_free(r->first);
	r->kept = NULL;
	r->first = NULL;
	r->nkept = r->capkept = 0;
}

/*
 * Fold src[i] into acc[i] for every tensor (init when first) in one
 * parallel region: the threads share each tensor's chunks and go on to
 * the next without waiting, so the small tensors cost no fork of their
 * own.
 */
static void
fold_all(const struct cg_reduce_op *op, struct cg_tensor *acc,
         const float *const *src, size_t nt, double w, int first)
{
	void (*fn)(float *, const float *, size_t, double) =
	    first ? op->init : op->add;

#pragma omp parallel
	for (size_t i = 0; i < nt; i++) {
		float *a = acc[i].data;
		const uint64_t n = acc[i].nelem;
		const uint64_t nc = (n + FOLD_CHUNK - 1) / FOLD_CHUNK;
#pragma omp for schedule(dynamic) nowait
		for (uint64_t c = 0; c < nc; c++) {
			uint64_t lo = c * FOLD_CHUNK;
			uint64_t len =
			    n - lo < FOLD_CHUNK ? n - lo : FOLD_CHUNK;
			fn(a + lo, src[i] + lo, len, w);
		}
	}
}

/* Whether u may join the reduction whose first input is r->first. */
static int
check_input(const struct cg_reducer *r, const struct cg_update *u)
{
	const struct cg_file *f = u->file, *a = r->first->file;

	if (u->kind != r->first->kind) {
		cg_seterr("a %s among %ss", cg_update_kind_name(u->kind),
		          cg_update_kind_name(r->first->kind));
		goto fail;
	}
	if (cg_update_check_base_of(u, r->first->base, r->first->base_step,
	                            "the first input's") < 0)
		return -1;
	if (f->ntensors != a->ntensors) {
		cg_seterr("%zu tensors, the first input has %zu", f->ntensors,
		          a->ntensors);
		goto fail;
	}
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *x = &a->tensors[i], *t = &f->tensors[i];
		if (strcmp(x->name, t->name) != 0 || x->nelem != t->nelem) {
			cg_seterr("tensor %s: differs from the first input's "
			          "%s",
			          t->name, x->name);
			goto fail;
		}
	}
	return 0;
fail:
	cg_errprefix(u->name);
	return -1;
}

/* The f32 data of each of u's tensors into src [ntensors]. */
static int
input_floats(const struct cg_update *u, const float **src)
{
	for (size_t i = 0; i < u->file->ntensors; i++)
		if ((src[i] = cg_update_f32(&u->file->tensors[i])) == NULL) {
			cg_errprefix(u->name);
			return -1;
		}
	return 0;
}

/* Start the streaming fold with u: its tensors become the running
 * result, in memory of their own. */
static int
stream_first(struct cg_reducer *r, struct cg_update *u, const float **src)
{
	struct cg_file *f = u->file;

	/*
	 * Where the input lies in a mapped file the sum gets memory of its
	 * own: writing the mapping would copy it page by page, each copy a
	 * TLB flush on every core.
	 */
	for (size_t i = 0; i < f->ntensors; i++) {
		struct cg_tensor *t = &f->tensors[i];
		if (t->borrowed) {
			if ((t->data = cg_alloc(t->nbytes)) == NULL) {
				t->data = (void *)src[i];
				return -1;
			}
			t->borrowed = 0;
		}
	}
	fold_all(r->op, f->tensors, src, f->ntensors, u->weight, 1);
	/* The mapping is spent: the sum has memory of its own. */
	cg_file_drop_blob(f);
	return 0;
}

static int
keep(struct cg_reducer *r, struct cg_update *u)
{
	if (r->nkept == r->capkept) {
		size_t cap = r->capkept ? 2 * r->capkept : 16;
		void *p = realloc(r->kept, cap * sizeof(*r->kept));
		if (p == NULL)
			return cg_seterr("out of memory");
		r->kept = p;
		r->capkept = cap;
	}
	r->kept[r->nkept++] = u;
	return 0;
}

int
cg_reducer_add(struct cg_reducer *r, struct cg_update *u)
{
	const float **src = NULL;
	const double w = u->weight, ns = u->samples, loss = u->loss;
	const uint64_t inputs = u->inputs;
	int rc = -1;

	if (cg_update_check_weight(u) != 0)
		goto out;
	if ((src = cg_alloc((u->file->ntensors + 1) * sizeof(*src))) == NULL ||
	    input_floats(u, src) != 0)
		goto out;
	if (r->first != NULL && check_input(r, u) != 0)
		goto out;
	if (r->sliced) {
		if (keep(r, u) != 0)
			goto out;
		if (r->first == NULL)
			r->first = u;
		u = NULL;
	} else if (r->first == NULL) {
		if (stream_first(r, u, src) != 0)
			goto out;
		r->first = u;
		u = NULL;
	} else {
		fold_all(r->op, r->first->file->tensors, src, u->file->ntensors,
		         w, 0);
	}
	r->weight += w;
	r->samples += ns;
	r->loss += w * loss;
	r->inputs += inputs;
	rc = 0;
out:
	free((void *)src);
	cg_update_free(u);
	return rc;
}

/* ----------------------------------------------------- sliced path */

/*
 * out [n] from the slices in[0..k) [n]: the operation's own slice, or a
 * streaming operation's init, add... and finish on the slice, in chunks
 * shared among threads.
 */
static void
run_slice(const struct cg_reduce_op *op, float *out, const float *const *in,
          const double *w, size_t k, size_t n, double wsum)
{
	if (op->slice) {
		op->slice(out, in, w, k, n);
		return;
	}
	const size_t nc = (n + FOLD_CHUNK - 1) / FOLD_CHUNK;
#pragma omp parallel for schedule(dynamic)
	for (size_t c = 0; c < nc; c++) {
		size_t lo = c * FOLD_CHUNK;
		size_t len = n - lo < FOLD_CHUNK ? n - lo : FOLD_CHUNK;
		op->init(out + lo, in[0] + lo, len, w[0]);
		for (size_t i = 1; i < k; i++)
			op->add(out + lo, in[i] + lo, len, w[i]);
		if (op->finish)
			op->finish(out + lo, len, wsum);
	}
}

/* Reduce every kept input into the first one's tensors, slice by slice;
 * each tensor's result replaces the first input's data once made. */
static int
finish_sliced(struct cg_reducer *r)
{
	struct cg_file *f = r->first->file;
	const size_t k = r->nkept, step = r->slice ? r->slice : 1;
	const float **in = cg_alloc(k * sizeof(*in));
	const float **base = cg_alloc(k * sizeof(*base));
	double *w = cg_alloc(k * sizeof(*w));
	int rc = -1;

	if (in == NULL || base == NULL || w == NULL)
		goto out;
	for (size_t i = 0; i < k; i++)
		w[i] = r->kept[i]->weight;
	for (size_t t = 0; t < f->ntensors; t++) {
		struct cg_tensor *x = &f->tensors[t];
		float *out = cg_alloc(x->nbytes ? x->nbytes : 1);
		if (out == NULL)
			goto out;
		for (size_t i = 0; i < k; i++)
			if ((base[i] = cg_update_f32(
			         &r->kept[i]->file->tensors[t])) == NULL) {
				free(out);
				goto out;
			}
		for (uint64_t lo = 0; lo < x->nelem; lo += step) {
			size_t n = x->nelem - lo < step ? x->nelem - lo : step;
			for (size_t i = 0; i < k; i++)
				in[i] = base[i] + lo;
			run_slice(r->op, out + lo, in, w, k, n, r->weight);
		}
		if (!x->borrowed)
			free(x->data);
		x->data = out;
		x->borrowed = 0;
	}
	cg_file_drop_blob(f);
	rc = 0;
out:
	free((void *)in);
	free((void *)base);
	free(w);
	return rc;
}

/* ---------------------------------------------------------- result */

struct cg_file *
cg_reducer_finish(struct cg_reducer *r)
{
	struct cg_file *f;

	if (r->first == NULL) {
		cg_seterr("no inputs");
		return NULL;
	}
	if (r->sliced) {
		if (finish_sliced(r) != 0)
			return NULL;
	} else if (r->op->finish) {
		f = r->first->file;
		for (size_t i = 0; i < f->ntensors; i++)
			r->op->finish(f->tensors[i].data, f->tensors[i].nelem,
			              r->weight);
	}
	f = r->first->file;
	r->first->file = NULL;
	cg_reducer_free(r);
	cg_json_set_num(f->manifest, "samples", r->samples);
	cg_json_set_num(f->manifest, "weight", r->weight);
	cg_json_set_num(f->manifest, "loss", r->loss / r->weight);
	cg_json_set_num(f->manifest, "inputs", (double)r->inputs);
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "reduce");
	cJSON_AddStringToObject(f->manifest, "reduce", r->op->name);
	return f;
}
