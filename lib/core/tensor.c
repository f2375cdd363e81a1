/*
 * core/tensor.c - a tensor's values read through its dtype's row, after
 * checking that its bytes are what its dtype and shape say.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

/* Elements decoded at a time onto the stack by cg_tensor_decode_f64 and
 * for the partial blocks of a slice: a multiple of every block size. */
#define CHUNK 256

/* t's row, after checking that [first, first + n) lies in t and that its
 * byte length is what its dtype and shape say; NULL with a message. */
static const struct cg_codec *
check_range(const struct cg_tensor *t, uint64_t first, size_t n)
{
	const struct cg_codec *c = cg_codec(t->dtype);
	uint64_t need;

	if (c == NULL || cg_dtype_bytes(t->dtype, t->nelem, &need) != 0) {
		char why[128];
		snprintf(why, sizeof(why), "%s", cg_errmsg());
		cg_seterr("tensor %s: %s", t->name, why);
		return NULL;
	}
	if (need != t->nbytes) {
		cg_seterr("tensor %s: %" PRIu64 " bytes, but %s [%" PRIu64
		          "] takes %" PRIu64,
		          t->name, t->nbytes, c->name, t->nelem, need);
		return NULL;
	}
	if (t->data == NULL && t->nbytes > 0) { /* given up (stolen) */
		cg_seterr("tensor %s: its data was released", t->name);
		return NULL;
	}
	if (first > t->nelem || n > t->nelem - first) {
		cg_seterr("tensor %s: elements %" PRIu64 "+%zu outside its "
		          "%" PRIu64,
		          t->name, first, n, t->nelem);
		return NULL;
	}
	return c;
}

int
cg_tensor_decode(const struct cg_tensor *t, uint64_t first, size_t n,
                 float *out)
{
	const struct cg_codec *c = check_range(t, first, n);
	const unsigned char *p = t->data;
	float part[CHUNK];
	uint64_t b0, b1, end = first + n;

	if (c == NULL)
		return -1;
	if (n == 0)
		return 0;
	/* whole blocks [b0, b1) straight into out; a partial block at
	 * either end through part[] */
	b0 = (first + c->block - 1) / c->block;
	b1 = end / c->block;
	if (b0 > b1) { /* the range lies inside one block */
		uint64_t b = first / c->block;
		c->decode(part, p + b * c->bytes, c->block);
		memcpy(out, part + (first - b * c->block), n * sizeof(float));
		return 0;
	}
	if (first < b0 * c->block) {
		size_t k = (size_t)(b0 * c->block - first);
		c->decode(part, p + (b0 - 1) * c->bytes, c->block);
		memcpy(out, part + (c->block - k), k * sizeof(float));
	}
	c->decode(out + (b0 * c->block - first), p + b0 * c->bytes,
	          (size_t)((b1 - b0) * c->block));
	if (end > b1 * c->block) {
		c->decode(part, p + b1 * c->bytes, c->block);
		memcpy(out + (b1 * c->block - first), part,
		       (size_t)(end - b1 * c->block) * sizeof(float));
	}
	return 0;
}

int
cg_tensor_to_f32(const struct cg_tensor *t, float *out)
{
	if (t->nelem > SIZE_MAX)
		return cg_seterr("tensor %s: too large", t->name);
	return cg_tensor_decode(t, 0, (size_t)t->nelem, out);
}

int
cg_tensor_decode_f64(const struct cg_tensor *t, uint64_t first, size_t n,
                     double *out)
{
	const struct cg_codec *c = check_range(t, first, n);
	const unsigned char *p = t->data;

	if (c == NULL)
		return -1;
	if (c->to_u64) {
		/* integers: exact through u64 (a signed value comes as its
		 * two's complement), then to double, exact up to 2^53 */
		uint64_t v[CHUNK];
		for (size_t i = 0; i < n; i += CHUNK) {
			size_t k = n - i < CHUNK ? n - i : CHUNK;
			c->to_u64(v, p + (first + i) * c->bytes, k);
			for (size_t j = 0; j < k; j++)
				out[i + j] = c->kind == CG_KIND_SINT
				                 ? (double)(int64_t)v[j]
				                 : (double)v[j];
		}
		return 0;
	}
	/* float kinds: the f32 decode, widened (exact) */
	for (size_t i = 0; i < n; i += CHUNK) {
		float v[CHUNK];
		size_t k = n - i < CHUNK ? n - i : CHUNK;
		if (cg_tensor_decode(t, first + i, k, v) != 0)
			return -1;
		for (size_t j = 0; j < k; j++)
			out[i + j] = v[j];
	}
	return 0;
}

int
cg_tensor_get_u64(const struct cg_tensor *t, uint64_t first, size_t n,
                  uint64_t *out)
{
	const struct cg_codec *c = check_range(t, first, n);

	if (c == NULL)
		return -1;
	if (c->to_u64 == NULL)
		return cg_seterr("tensor %s: %s is not an integer dtype",
		                 t->name, c->name);
	c->to_u64(out, (const unsigned char *)t->data + first * c->bytes, n);
	return 0;
}
