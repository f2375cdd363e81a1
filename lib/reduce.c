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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "progress.h"
#include "reduce.h"
#include "secagg.h"
#include "sign.h"

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

/* Ascending, for qsort (the values are finite: finish_sliced checks). */
static int
cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/*
 * The median of each element over the k inputs, their weights ignored:
 * the middle value, or the mean of the two middle values (in double) for
 * an even k.  One input far off, or a few (fewer than half), cannot move
 * it past the others' values.
 */
static void
median_slice(float *out, const float *const *in, const double *w, size_t k,
             size_t n)
{
	(void)w;
#pragma omp parallel for schedule(static)
	for (size_t j = 0; j < n; j++) {
		float v[CG_REDUCE_MAX_MEDIAN];
		v[0] = v[1] = 0; /* k >= 1; this only quiets a warning */
		for (size_t i = 0; i < k; i++)
			v[i] = in[i][j];
		if (k <= 16) {
			for (size_t i = 1; i < k; i++) {
				float x = v[i];
				size_t t = i;
				for (; t > 0 && v[t - 1] > x; t--)
					v[t] = v[t - 1];
				v[t] = x;
			}
		} else {
			qsort(v, k, sizeof(*v), cmp_float);
		}
		out[j] = k % 2 ? v[k / 2]
		               : (float)(((double)v[k / 2 - 1] + v[k / 2]) / 2);
	}
}

const struct cg_reduce_op cg_reduce_ops[] = {
    {"mean", "the mean weighted by each input's weight", 1, scale_into,
     add_scaled, mean_finish, NULL},
    {"sum", "the plain sum", 1, sum_init, sum_add, NULL, NULL},
    {"median", "each element's median, unweighted (robust)", 0, NULL,
     NULL, NULL, median_slice},
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
	cg_mask_sum_free(r->masked);
	r->masked = NULL;
	free(r->signers);
	r->signers = NULL;
	r->nsigners = r->capsigners = 0;
	cg_update_free(r->first);
	cg_file_free(r->acc);
	r->acc = NULL;
	r->kept = NULL;
	r->first = NULL;
	r->nkept = r->capkept = 0;
}

/* Values decoded at a time by a thread, on its stack. */
#define DECODE_CHUNK 2048

/*
 * Fold u's views into acc's tensors (init when first) in one parallel
 * region: the threads share each view's chunks and go on to the next
 * without waiting, so the small views cost no fork of their own.  A view
 * stored as f32 is folded where it lies; any other is decoded through
 * its codec a few thousand values at a time, never whole.
 */
static void
fold_all(const struct cg_reduce_op *op, struct cg_file *acc,
         const struct cg_update *u, double w, int first)
{
	void (*fn)(float *, const float *, size_t, double) =
	    first ? op->init : op->add;
	const int nv = u->nviews;

#pragma omp parallel
	{
		float tmp[DECODE_CHUNK];
		for (int i = 0; i < nv; i++) {
			float *a = acc->tensors[i].data;
			const float *x = cg_update_view_f32(u, i);
			const uint64_t n = u->views[i].n;
			const uint64_t nc = (n + FOLD_CHUNK - 1) / FOLD_CHUNK;
#pragma omp for schedule(dynamic) nowait
			for (uint64_t c = 0; c < nc; c++) {
				uint64_t lo = c * FOLD_CHUNK;
				uint64_t len =
				    n - lo < FOLD_CHUNK ? n - lo : FOLD_CHUNK;
				if (x) {
					fn(a + lo, x + lo, len, w);
					continue;
				}
				for (uint64_t d = 0; d < len; d += DECODE_CHUNK) {
					size_t m = len - d < DECODE_CHUNK
					               ? (size_t)(len - d)
					               : DECODE_CHUNK;
					cg_update_decode(u, i, lo + d, m, tmp);
					fn(a + lo + d, tmp, m, w);
				}
			}
		}
	}
}

/* Whether u may join the reduction whose first input is r->first. */
static int
check_input(const struct cg_reducer *r, const struct cg_update *u)
{
	const struct cg_update *a = r->first;

	if (u->kind != a->kind) {
		cg_seterr("a %s among %ss", cg_update_kind_name(u->kind),
		          cg_update_kind_name(a->kind));
		goto fail;
	}
	if (cg_update_check_base_of(u, a->base, a->base_step,
	                            "the first input's") < 0)
		return -1;
	if (u->nviews != a->nviews) {
		cg_seterr("%d tensors, the first input has %d", u->nviews,
		          a->nviews);
		goto fail;
	}
	for (int i = 0; i < u->nviews; i++) {
		const struct cg_uview *x = &a->views[i], *t = &u->views[i];
		if (strcmp(x->name, t->name) != 0 || x->n != t->n ||
		    x->ndim != t->ndim ||
		    memcmp(x->shape, t->shape,
		           (size_t)x->ndim * sizeof(uint64_t)) != 0) {
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

/*
 * The result's file from the first input u: its manifest (less its
 * codec and layout: the result is dense f32) and one f32 tensor per
 * view, zeroed for the fold.
 */
static struct cg_file *
new_result(const struct cg_update *u)
{
	struct cg_file *f = cg_file_new(cg_update_kind_name(u->kind));
	cJSON *man;

	if (f == NULL)
		return NULL;
	if ((man = cJSON_Duplicate(u->file->manifest, 1)) == NULL) {
		cg_file_free(f);
		cg_seterr("out of memory");
		return NULL;
	}
	cJSON_Delete(f->manifest);
	f->manifest = man;
	cJSON_DeleteItemFromObjectCaseSensitive(man, "codec");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "layout");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "downlink");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "signers");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "mask");
	for (int i = 0; i < u->nviews; i++) {
		const struct cg_uview *v = &u->views[i];
		if (cg_file_add_zero(f, v->name, CG_F32, v->ndim, v->shape) ==
		    NULL) {
			cg_file_free(f);
			return NULL;
		}
	}
	return f;
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

/* Note who signed u's file, once a key. */
static int
add_signer(struct cg_reducer *r, const struct cg_update *u)
{
	if (u->file == NULL || !u->file->is_signed)
		return 0;
	for (size_t i = 0; i < r->nsigners; i++)
		if (memcmp(r->signers[i], u->file->signer, 32) == 0)
			return 0;
	if (r->nsigners == r->capsigners) {
		size_t cap = r->capsigners ? 2 * r->capsigners : 8;
		void *p = realloc(r->signers, cap * sizeof(*r->signers));
		if (p == NULL)
			return cg_seterr("out of memory");
		r->signers = p;
		r->capsigners = cap;
	}
	memcpy(r->signers[r->nsigners++], u->file->signer, 32);
	return 0;
}

static int
cmp_hex(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* "signers" of f's manifest: the fingerprints of r's signers, sorted
 * (the order of the inputs does not show); none where no input was
 * signed.  0 or -1. */
static int
put_signers(struct cg_file *f, const struct cg_reducer *r)
{
	char (*fp)[65];
	cJSON *arr;

	if (r->nsigners == 0)
		return 0;
	if ((fp = malloc(r->nsigners * sizeof(*fp))) == NULL)
		return cg_seterr("out of memory");
	for (size_t i = 0; i < r->nsigners; i++)
		cg_key_fingerprint(fp[i], r->signers[i]);
	qsort(fp, r->nsigners, sizeof(*fp), cmp_hex);
	if ((arr = cJSON_AddArrayToObject(f->manifest, "signers")) == NULL) {
		free(fp);
		return cg_seterr("out of memory");
	}
	for (size_t i = 0; i < r->nsigners; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(fp[i]));
	free(fp);
	return 0;
}

/*
 * Masked u into r's integer sum (the first makes it): the mean only,
 * never mixed with plain inputs, one round's peers each once.  u's
 * numbers are spent; r keeps the first input for its layout.  0 or -1.
 */
static int
add_masked(struct cg_reducer *r, struct cg_update *u)
{
	uint64_t P = 0;

	if (r->op != &cg_reduce_ops[0])
		return cg_seterr("%s: masked: --op %s cannot read masked values "
		                 "(the mean of every peer's update can)",
		                 u->name, r->op->name);
	if (r->first == NULL) {
		for (int i = 0; i < u->nviews; i++)
			P += u->views[i].n;
		if ((r->masked = cg_mask_sum_new(u->mask, P)) == NULL)
			return -1;
	}
	if (cg_mask_sum_join(r->masked, u->mask, u->name) != 0)
		return -1;
	for (int i = 0; i < u->nviews; i++)
		if (cg_mask_sum_add(r->masked, &u->views[i]) != 0) {
			cg_errprefix(u->name);
			return -1;
		}
	return 0;
}

int
cg_reducer_add(struct cg_reducer *r, struct cg_update *u)
{
	const double w = u->weight, ns = u->samples, loss = u->loss;
	const uint64_t inputs = u->inputs;
	int rc = -1;

	if (cg_update_check_weight(u) != 0)
		goto out;
	if (r->first != NULL && check_input(r, u) != 0)
		goto out;
	if (add_signer(r, u) != 0)
		goto out;
	if (r->first != NULL && (u->mask != NULL) != (r->masked != NULL)) {
		cg_seterr("%s: a %s input among %s ones", u->name,
		          u->mask ? "masked" : "plain",
		          u->mask ? "plain" : "masked");
		goto out;
	}
	if (r->first == NULL && (r->acc = new_result(u)) == NULL)
		goto out;
	if (u->mask) {
		double t0 = cg_now();
		if (add_masked(r, u) != 0) {
			if (r->first == NULL) {
				/* the next input starts afresh */
				cg_file_free(r->acc);
				r->acc = NULL;
				cg_mask_sum_free(r->masked);
				r->masked = NULL;
			}
			goto out;
		}
		r->fold_seconds += cg_now() - t0;
		if (r->first == NULL) {
			cg_file_free(u->file);
			u->file = NULL;
			for (int i = 0; i < u->nviews; i++)
				u->views[i].t[0] = u->views[i].t[1] = NULL;
			r->first = u;
			u = NULL;
		}
	} else if (r->sliced) {
		if (r->op->slice == median_slice &&
		    r->nkept >= CG_REDUCE_MAX_MEDIAN) {
			cg_seterr("%s: more than %d inputs for the median", u->name,
			          CG_REDUCE_MAX_MEDIAN);
			goto out;
		}
		if (keep(r, u) != 0)
			goto out;
		if (r->first == NULL)
			r->first = u;
		u = NULL;
	} else {
		double t0 = cg_now();
		fold_all(r->op, r->acc, u, w, r->first == NULL);
		r->fold_seconds += cg_now() - t0;
		if (r->first == NULL) {
			/* kept for its layout; its numbers are spent */
			cg_file_free(u->file);
			u->file = NULL;
			for (int i = 0; i < u->nviews; i++)
				u->views[i].t[0] = u->views[i].t[1] = NULL;
			r->first = u;
			u = NULL;
		}
	}
	r->weight += w;
	r->samples += ns;
	r->loss += w * loss;
	r->inputs += inputs;
	rc = 0;
out:
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

/* Reduce every kept input into the result's tensors, slice by slice;
 * an input not stored as f32 is decoded a slice at a time. */
static int
finish_sliced(struct cg_reducer *r)
{
	struct cg_file *f = r->acc;
	const size_t k = r->nkept, step = r->slice ? r->slice : 1;
	const float **in = cg_alloc(k * sizeof(*in));
	float **dec = calloc(k, sizeof(*dec));
	double *w = cg_alloc(k * sizeof(*w));
	int rc = -1;

	if (in == NULL || dec == NULL || w == NULL)
		goto out;
	for (size_t i = 0; i < k; i++)
		w[i] = r->kept[i]->weight;
	for (int t = 0; t < r->first->nviews; t++) {
		float *out = f->tensors[t].data;
		const uint64_t n = f->tensors[t].nelem;
		for (uint64_t lo = 0; lo < n; lo += step) {
			size_t m = n - lo < step ? (size_t)(n - lo) : step;
			for (size_t i = 0; i < k; i++) {
				const struct cg_update *u = r->kept[i];
				const float *x = cg_update_view_f32(u, t);
				if (x) {
					in[i] = x + lo;
					continue;
				}
				if (dec[i] == NULL &&
				    (dec[i] = cg_alloc(step * sizeof(float))) ==
				        NULL)
					goto out;
				cg_update_decode(u, t, lo, m, dec[i]);
				in[i] = dec[i];
			}
			/* an order statistic of a nan is no number: refused */
			for (size_t i = 0; !r->op->streams && i < k; i++)
				for (size_t j = 0; j < m; j++)
					if (!isfinite(in[i][j])) {
						cg_seterr("%s: element %llu of %s is "
						          "not finite",
						          r->kept[i]->name,
						          (unsigned long long)(lo + j),
						          f->tensors[t].name);
						goto out;
					}
			run_slice(r->op, out + lo, in, w, k, m, r->weight);
		}
	}
	rc = 0;
out:
	for (size_t i = 0; dec && i < k; i++)
		free(dec[i]);
	free(dec);
	free((void *)in);
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
	if (r->masked) {
		/* every peer in, and the masks gone: the mean, or nothing */
		f = r->acc;
		for (int i = 0; i < r->first->nviews; i++)
			if (cg_mask_sum_mean(r->masked, &r->first->views[i],
			                     f->tensors[i].data) != 0)
				return NULL;
		cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "masked");
		cJSON_AddNumberToObject(f->manifest, "masked",
		                        cg_mask_sum_peers(r->masked));
	} else if (r->sliced) {
		double t0 = cg_now();
		if (finish_sliced(r) != 0)
			return NULL;
		r->fold_seconds += cg_now() - t0;
	} else if (r->op->finish) {
		f = r->acc;
		for (size_t i = 0; i < f->ntensors; i++)
			r->op->finish(f->tensors[i].data, f->tensors[i].nelem,
			              r->weight);
	}
	f = r->acc;
	r->acc = NULL;
	if (put_signers(f, r) != 0) {
		cg_file_free(f);
		cg_reducer_free(r);
		return NULL;
	}
	cg_reducer_free(r);
	cg_json_set_num(f->manifest, "samples", r->samples);
	cg_json_set_num(f->manifest, "weight", r->weight);
	cg_json_set_num(f->manifest, "loss", r->loss / r->weight);
	cg_json_set_num(f->manifest, "inputs", (double)r->inputs);
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "reduce");
	cJSON_AddStringToObject(f->manifest, "reduce", r->op->name);
	return f;
}
