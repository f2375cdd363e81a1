/*
 * exchange/codec/codec.c - what the update codecs share: the names of
 * their tensors, the checks a reader makes of one, and sizes.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exchange/codec/codec.h"

#define CHUNK 256 /* values checked at a time on the stack */

int
cg_ucodec_suffixed(char *out, const char *name, const char *suffix)
{
	if ((size_t)snprintf(out, CG_MAX_NAME, "%s%s", name, suffix) >=
	    CG_MAX_NAME)
		return cg_seterr("tensor %s: name too long", name);
	return 0;
}

const struct cg_tensor *
cg_ucodec_need(const struct cg_file *f, const char *name, const char *suffix,
               enum cg_dtype dt, int ndim, const uint64_t *shape)
{
	char full[CG_MAX_NAME];
	const struct cg_tensor *t;

	if (cg_ucodec_suffixed(full, name, suffix) != 0)
		return NULL;
	if ((t = cg_file_find(f, full)) == NULL) {
		cg_seterr("tensor %s: missing", full);
		return NULL;
	}
	if (dt == CG_NDTYPES ? cg_codec(t->dtype)->kind != CG_KIND_FLOAT
	                     : t->dtype != dt) {
		cg_seterr("tensor %s: dtype %s, not %s", full,
		          cg_dtype_name(t->dtype),
		          dt == CG_NDTYPES ? "a float type"
		                           : cg_dtype_name(dt));
		return NULL;
	}
	if (t->ndim != ndim ||
	    memcmp(t->shape, shape, (size_t)ndim * sizeof(uint64_t)) != 0) {
		cg_seterr("tensor %s: its shape is not the layout's", full);
		return NULL;
	}
	return t;
}

int
cg_ucodec_check_finite(const struct cg_tensor *t)
{
	float buf[CHUNK];

	for (uint64_t i = 0; i < t->nelem; i += CHUNK) {
		size_t n =
		    t->nelem - i < CHUNK ? (size_t)(t->nelem - i) : CHUNK;
		if (cg_tensor_decode(t, i, n, buf) != 0)
			return -1;
		for (size_t j = 0; j < n; j++)
			if (!isfinite(buf[j]))
				return cg_seterr("tensor %s: element %" PRIu64
				                 " is not finite",
				                 t->name, i + j);
	}
	return 0;
}

int
cg_ucodec_refuse_nonfinite(const struct cg_uview *v, const float *x)
{
	uint64_t i = cg_first_nonfinite(x, v->n);

	if (i < v->n)
		return cg_seterr("tensor %s: element %" PRIu64 " is not finite",
		                 v->name, i);
	return 0;
}

int
cg_ucodec_bytes(const struct cg_uspec *s, const struct cg_uview *v, int nv,
                uint64_t *bytes)
{
	uint64_t sum = 0;

	for (int i = 0; i < nv; i++) {
		uint64_t b;
		if (s->codec->size(s, &v[i], &b) != 0)
			return -1;
		if (b > UINT64_MAX - sum)
			return cg_seterr("update size overflows");
		sum += b;
	}
	*bytes = sum;
	return 0;
}
