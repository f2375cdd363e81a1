/*
 * model/qat.c - fake quantization of a model's weight matrices around its
 * forward pass (see qat.h).
 *
 * Like the adapters' merge, the quantized weights are formed in place, so
 * every arch kernel, engine and precision runs unchanged; the masters'
 * copy costs the chosen views' size again, and the encoded bytes of the
 * largest view once more.  A view is encoded in chunks of blocks on
 * OpenMP's threads: each block's bytes are a function of the block
 * alone, so the weights are the same at any thread count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/lora.h"
#include "model/model.h"
#include "model/qat.h"

/* Blocks a thread encodes at a time. */
#define QAT_CHUNK 1024

struct cg_qat {
	int n;               /* views quantized */
	int *view;           /* [n] their indices */
	enum cg_dtype *type; /* [n] the type of each */
	int reference;
	float *saved; /* [sum of their sizes] the masters while applied */
	void *bytes;  /* the encoded largest view */
	int applied;
};

const char *
cg_quant_why(const struct cg_view *v, enum cg_dtype type, int all)
{
	const struct cg_codec *c = cg_codec(type);

	if (!all && v->ndim < 2)
		return "a norm or a bias";
	if (!all && !v->decay)
		return "an embedding";
	if (c == NULL || v->n % c->block != 0)
		return "not a whole number of blocks";
	return NULL;
}

/* An encoder of the codec table (core/dtype.h). */
typedef int (*encode_fn)(void *, const float *, size_t);

/* The encoder cg-quantize uses for type (quantize.c's put_view). */
static encode_fn
encoder(enum cg_dtype type, int reference)
{
	const struct cg_codec *c = cg_codec(type);

	return c->encode_fit && !reference ? c->encode_fit : c->encode;
}

int
cg_qat_roundtrip(float *dst, const float *src, size_t n, enum cg_dtype type,
                 int reference, void *scratch)
{
	const struct cg_codec *c = cg_codec(type);
	encode_fn enc = encoder(type, reference);
	const size_t step = (size_t)QAT_CHUNK * c->block;
	const long nchunks = (long)((n + step - 1) / step);
	unsigned char *b = scratch;
	long bad = -1;

#pragma omp parallel for schedule(static) if (nchunks > 1)
	for (long k = 0; k < nchunks; k++) {
		size_t at = (size_t)k * step,
		       len = n - at < step ? n - at : step;
		unsigned char *o = b + at / c->block * c->bytes;
		if (enc(o, src + at, len) != 0) {
#pragma omp critical
			if (bad < 0 || k < bad)
				bad = k;
		}
	}
	if (bad >= 0) {
		/* again on this thread, for its message */
		size_t at = (size_t)bad * step;
		size_t len = n - at < step ? n - at : step;
		if (enc(b, src + at, len) == 0)
			cg_seterr("cannot be encoded as %s", c->name);
		return -1;
	}
#pragma omp parallel for schedule(static) if (nchunks > 1)
	for (long k = 0; k < nchunks; k++) {
		size_t at = (size_t)k * step,
		       len = n - at < step ? n - at : step;
		c->decode(dst + at, b + at / c->block * c->bytes, len);
	}
	return 0;
}

void
cg_qat_free(struct cg_qat *q)
{
	if (q == NULL)
		return;
	free(q->view);
	free(q->type);
	free(q->saved);
	free(q->bytes);
	free(q);
}

struct cg_qat *
cg_qat_new(const struct cg_model *m, enum cg_dtype type,
           const enum cg_dtype *types, int reference)
{
	const struct cg_codec *c = cg_codec(type);
	struct cg_qat *q = NULL;
	size_t total = 0, most = 0;

	if (types == NULL &&
	    (c == NULL || c->kind != CG_KIND_FLOAT || type == CG_F32)) {
		cg_seterr("%s is no type to quantize weights to",
		          cg_dtype_name(type));
		return NULL;
	}
	if (m->lora) {
		cg_seterr("a model with adapters trains them alone: its "
		          "matrices cannot be trained quantized");
		return NULL;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL ||
	    (q->view = calloc((size_t)m->nviews, sizeof(int))) == NULL ||
	    (q->type = calloc((size_t)m->nviews, sizeof(*q->type))) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	q->reference = reference;
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		enum cg_dtype t = types ? types[i] : type;
		uint64_t bytes;
		if (t == CG_F32 ||
		    (types == NULL && cg_quant_why(v, type, 0) != NULL))
			continue;
		c = cg_codec(t);
		if (c == NULL || c->kind != CG_KIND_FLOAT) {
			cg_seterr("tensor %s: %s is no type for weights",
			          v->name, cg_dtype_name(t));
			goto fail;
		}
		if (cg_dtype_bytes(t, v->n, &bytes) != 0) {
			cg_errprefix(v->name);
			goto fail;
		}
		q->view[q->n] = i;
		q->type[q->n++] = t;
		total += v->n;
		if (bytes > most)
			most = bytes;
	}
	if (q->n == 0) {
		cg_seterr("no tensor of the %s model takes %s (cg-quantize's "
		          "rule: weight matrices of whole blocks)",
		          m->arch->name, cg_dtype_name(type));
		goto fail;
	}
	if ((q->saved = cg_alloc(total * sizeof(float))) == NULL ||
	    (q->bytes = cg_alloc(most)) == NULL)
		goto fail;
	return q;
fail:
	cg_qat_free(q);
	return NULL;
}

int
cg_qat_apply(struct cg_qat *q, struct cg_model *m)
{
	size_t at = 0;

	if (q->applied)
		return 0;
	for (int k = 0; k < q->n; k++) {
		const struct cg_view *v = &m->views[q->view[k]];
		float *w = m->params + v->off;
		memcpy(q->saved + at, w, v->n * sizeof(float));
		if (cg_qat_roundtrip(w, q->saved + at, v->n, q->type[k],
		                     q->reference, q->bytes) != 0) {
			char why[200];
			snprintf(why, sizeof(why), "%s", cg_errmsg());
			/* the views done so far, and this one, back */
			size_t a = 0;
			for (int j = 0; j <= k; j++) {
				const struct cg_view *u = &m->views[q->view[j]];
				memcpy(m->params + u->off, q->saved + a,
				       u->n * sizeof(float));
				a += u->n;
			}
			q->applied = 0;
			return cg_seterr("tensor %s: %s", v->name, why);
		}
		at += v->n;
	}
	/* pruned weights read as 0, as in a quantized model read back */
	cg_model_mask(m, m->params);
	q->applied = 1;
	return 0;
}

void
cg_qat_restore(struct cg_qat *q, struct cg_model *m)
{
	size_t at = 0;

	if (q == NULL || !q->applied)
		return;
	for (int k = 0; k < q->n; k++) {
		const struct cg_view *v = &m->views[q->view[k]];
		memcpy(m->params + v->off, q->saved + at, v->n * sizeof(float));
		at += v->n;
	}
	q->applied = 0;
}
