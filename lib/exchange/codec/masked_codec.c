/*
 * exchange/codec/masked_codec.c - the masked update codec of secure
 * aggregation: 64-bit fixed point plus the pairwise masks.
 *
 * A view is NAME u64 of its shape: the fixed-point value times the
 * weight plus the worker's masks, mod 2^64 (secagg.h), with the
 * manifest's "mask".  It has no decoder: only the sum of every peer's
 * masked update means anything, and only cg_mask_sum reads it.
 */
#include <math.h>

#include <cjson/cJSON.h>

#include "exchange/codec/codec.h"
#include "exchange/secagg.h"

static int
masked_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	(void)s;
	return cg_dtype_bytes(CG_U64, v->n, b);
}

static int
masked_encode(const struct cg_uspec *s, const struct cg_uview *v,
              const float *x, struct cg_file *f, struct cg_uenc *e, float *warm)
{
	struct cg_tensor *t;
	uint64_t *y;

	(void)s;
	(void)warm;
	if (e == NULL || e->mask == NULL)
		return cg_seterr("no masking key (cg-train-step --mask)");
	if ((t = cg_file_add_zero(f, v->name, CG_U64, v->ndim, v->shape)) ==
	    NULL)
		return -1;
	y = t->data; /* 64-byte aligned */
	/* host words: the file's writer makes them little-endian */
	if (cg_mask_encode(e->mask, e->mask_weight, x, v->off, v->n, y) != 0)
		return -1;
	if (cJSON_GetObjectItemCaseSensitive(f->manifest, "mask") == NULL) {
		cJSON *o = cg_mask_manifest(e->mask);
		if (o == NULL)
			return -1;
		cJSON_AddItemToObject(f->manifest, "mask", o);
	}
	return 0;
}

static int
masked_bind(const struct cg_uspec *s, struct cg_uview *v,
            const struct cg_file *f)
{
	(void)s;
	v->t[0] = cg_ucodec_need(f, v->name, "", CG_U64, v->ndim, v->shape);
	return v->t[0] ? 0 : -1;
}

/* A masked word alone is noise: a reader that decodes one gets NaN, never
 * numbers that look like an update. */
static void
masked_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
              size_t n, float *out)
{
	(void)s;
	(void)v;
	(void)lo;
	for (size_t j = 0; j < n; j++)
		out[j] = NAN;
}

const struct cg_ucodec cg_ucodec_masked = {
    .name = "masked",
    .help = "masked: 64-bit fixed point plus pairwise masks (--mask)",
    .names = {{"masked", CG_U64}},
    .flags = CG_UCODEC_SUM_ONLY,
    .size = masked_size,
    .encode = masked_encode,
    .bind = masked_bind,
    .decode = masked_decode,
};
