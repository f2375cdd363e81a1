/*
 * mkcg.c - write a small, known cg file for the shell tests.
 *
 * usage: mkcg [-k model|data] OUT [none|gzip|zstd]   (OUT "-": stdout)
 *        mkcg -t DTYPE IN OUT [none|gzip|zstd]
 *        mkcg -x HOW IN OUT
 *
 * "model" (the default) holds one tensor of every dtype with values the
 * tests can check by hand, including nan, inf, a scalar and an empty
 * tensor, for an architecture "demo" that no build has (so no layout
 * says which tensors it must hold); "data" is a ten-example shard with
 * three named conditions, laid out as lib/data/shard.c writes one.  -t
 * copies the cg file IN with every tensor of a float dtype (f32, f16,
 * bf16, q8_0, q4_0) whose element count is a whole number of DTYPE's
 * blocks decoded and re-encoded as DTYPE through the codec table (a
 * model stored in f16, say); the others are copied as they are.
 * -x copies the cg file IN (a coded update, a quantized model) with one
 * thing broken, its digests made again so that only the codec's checks
 * can tell: HOW is idx-range (the
 * first index of the first ".idx" tensor past every view), idx-repeat
 * (its second index equal to the first), scale-nan (the first block
 * scale of the first tensor of a block dtype a NaN), scale-big (that
 * scale 65504, the largest finite half: a scale that lies but passes
 * every check), min-nan (the first
 * block minimum of the first q4_1 tensor a NaN), lut-nan (the first table
 * entry of the first u8 ".val" of a topk:...,val=lut2 update a NaN), rows
 * (the first matrix
 * of a block dtype one row shorter, its bytes as they were), blocks (the
 * first layout view 32 elements longer, so its block count no longer
 * matches) or row-blocks (a model's first 2-D q8_0/q4_0 tensor one zero
 * block longer a row: a tensor whole in itself, of more blocks than the
 * view it stands for).  HOW:NAME breaks tensor NAME only.  kind (or
 * kind:NAME) makes the manifest's kind "frob" (or NAME), one the format
 * does not define.  nudge makes the first element of the first f32
 * tensor the next float above it (one weight of an update changed by one
 * ulp, a file valid in every other way); huge sets every element of the
 * first f32 tensor to 1e30 (a model a step of training sends past the
 * floats while its loss stays finite); short makes the first 1-D f32
 * tensor one element shorter (a state's array of another model's size).
 * For a coded update IN (a "layout" in its manifest) HOW may also be
 * idx-far (the last index of the first u32 ".idx" tensor 10^7 past its
 * view's end, so that only the range check can tell), idx-count (that
 * tensor one index shorter than its ".val"), codec (the codec's spec
 * and name "rocket", a codec that does not exist), no-layout (the
 * manifest's "layout" gone) or layout-name (the first layout view
 * renamed "rocket.w", a name no member has).  In any file, drop leaves
 * the first tensor out (drop:NAME, tensor NAME).
 * For a pruned model IN, HOW may also break its first mask tensor:
 * mask-dtype (stored as i8), mask-short (one byte shorter) or mask-name
 * (renamed mask.wte, a view that cannot be pruned).
 * Output is a pure function of the arguments, so a test may compare bytes.
 * Exit 0 on success, 1 on failure, 2 on a usage error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"

static int
add_model(struct cg_file *f)
{
	float w[32], b[8] = {0}, odd[4] = {NAN, INFINITY, -INFINITY, 1.0f};
	float half[6] = {-1.5f, 0, 0.5f, 1, 2, 65504}, bh[3] = {1, -2, 0.5f};
	float scalar = 3.5f;
	uint16_t h[6], bf[3], u16[3] = {0, 1, 65535};
	unsigned char q8[2 * 34], q4[18], mask[16];
	int8_t i8[4] = {-128, -1, 0, 127};
	uint32_t idx[7];
	uint64_t u64[2] = {0, UINT64_MAX};
	cJSON *cfg;

	for (int i = 0; i < 32; i++)
		w[i] = (float)(i - 8) * 0.25f; /* -2 .. 5.75, one zero */
	for (int i = 0; i < 6; i++)
		h[i] = cg_f32_to_f16(half[i]);
	for (int i = 0; i < 3; i++)
		bf[i] = cg_f32_to_bf16(bh[i]);
	/* q8_0: block 0 scale 0.5, q = j - 16; block 1 scale 0.25, q = j */
	for (int k = 0; k < 2; k++) {
		uint16_t s = cg_f32_to_f16(k ? 0.25f : 0.5f);
		memcpy(q8 + 34 * k, &s, 2);
		for (int j = 0; j < 32; j++)
			q8[34 * k + 2 + j] =
			    (unsigned char)(int8_t)(k ? j : j - 16);
	}
	/* q4_0: scale 1; elements 0..15 are -8..7 (low nibbles), 16..31
	 * are 7..-8 (high nibbles) */
	{
		uint16_t s = cg_f32_to_f16(1.0f);
		memcpy(q4, &s, 2);
		for (int j = 0; j < 16; j++)
			q4[2 + j] = (unsigned char)(j | (15 - j) << 4);
	}
	for (int i = 0; i < 16; i++)
		mask[i] = (unsigned char)(i % 2);
	for (int i = 0; i < 7; i++)
		idx[i] = (uint32_t)i * 1000003u;

	/* an arch no build has: a model of one is shown and verified as a
	 * cg file, its tensors checked against no layout */
	cJSON_AddStringToObject(f->manifest, "arch", "demo");
	cfg = cJSON_AddObjectToObject(f->manifest, "config");
	cJSON_AddNumberToObject(cfg, "in", 32);
	cJSON_AddNumberToObject(cfg, "hidden", 8);
	cJSON_AddNumberToObject(cfg, "latent", 4);
	cJSON_AddNumberToObject(f->manifest, "step", 1200);
	cJSON_AddNumberToObject(f->manifest, "seed", 42);
	cJSON_AddNumberToObject(f->manifest, "samples", 64);
	cJSON_AddNumberToObject(f->manifest, "loss", 0.5);

	if (!cg_file_add(f, "enc.0.w", CG_F32, 2, (uint64_t[]){4, 8}, w) ||
	    !cg_file_add(f, "enc.0.b", CG_F32, 1, (uint64_t[]){8}, b) ||
	    !cg_file_add(f, "dec.w", CG_F16, 2, (uint64_t[]){2, 3}, h) ||
	    !cg_file_add(f, "dec.b", CG_BF16, 1, (uint64_t[]){3}, bf) ||
	    !cg_file_add(f, "q8", CG_Q8_0, 1, (uint64_t[]){64}, q8) ||
	    !cg_file_add(f, "q4", CG_Q4_0, 1, (uint64_t[]){32}, q4) ||
	    !cg_file_add(f, "mask", CG_U8, 2, (uint64_t[]){4, 4}, mask) ||
	    !cg_file_add(f, "i8", CG_I8, 1, (uint64_t[]){4}, i8) ||
	    !cg_file_add(f, "u16", CG_U16, 1, (uint64_t[]){3}, u16) ||
	    !cg_file_add(f, "idx", CG_U32, 1, (uint64_t[]){7}, idx) ||
	    !cg_file_add(f, "u64", CG_U64, 1, (uint64_t[]){2}, u64) ||
	    !cg_file_add(f, "odd", CG_F32, 1, (uint64_t[]){4}, odd) ||
	    !cg_file_add(f, "scalar", CG_F32, 0, NULL, &scalar) ||
	    !cg_file_add_zero(f, "empty", CG_F32, 1, (uint64_t[]){0}))
		return -1;
	return 0;
}

static int
add_data(struct cg_file *f)
{
	static const char *const names[] = {"zero", "one", "two"};
	uint32_t cond[10] = {0, 1, 2, 0, 1, 0, 2, 0, 1, 0};
	uint64_t index[10], off[11];
	unsigned char payload[40];
	cJSON *v;

	/* the layout of lib/data/shard.c: 2x2 one-channel images */
	for (int i = 0; i < 10; i++)
		index[i] = (uint64_t)i * 3;
	for (int i = 0; i < 11; i++)
		off[i] = (uint64_t)i * 4;
	for (int i = 0; i < 40; i++)
		payload[i] = (unsigned char)(i * 7);
	cJSON_AddNumberToObject(f->manifest, "examples", 10);
	v = cJSON_AddArrayToObject(f->manifest, "conditions");
	for (int i = 0; i < 3; i++)
		cJSON_AddItemToArray(v, cJSON_CreateString(names[i]));
	cJSON_AddStringToObject(f->manifest, "payload", "image");
	v = cJSON_AddObjectToObject(f->manifest, "image");
	cJSON_AddNumberToObject(v, "height", 2);
	cJSON_AddNumberToObject(v, "width", 2);
	cJSON_AddNumberToObject(v, "channels", 1);
	v = cJSON_AddObjectToObject(f->manifest, "shard");
	cJSON_AddNumberToObject(v, "index", 0);
	cJSON_AddNumberToObject(v, "count", 1);
	cJSON_AddStringToObject(v, "strategy", "contiguous");
	cJSON_AddNumberToObject(v, "seed", 0);
	cJSON_AddBoolToObject(v, "holdout", 0);
	v = cJSON_AddObjectToObject(f->manifest, "source");
	cJSON_AddNumberToObject(v, "examples", 30);
	if (!cg_file_add(f, "cond", CG_U32, 1, (uint64_t[]){10}, cond) ||
	    !cg_file_add(f, "index", CG_U64, 1, (uint64_t[]){10}, index) ||
	    !cg_file_add(f, "offset", CG_U64, 1, (uint64_t[]){11}, off) ||
	    !cg_file_add(f, "payload", CG_U8, 1, (uint64_t[]){40}, payload))
		return -1;
	return 0;
}

/* in, its float tensors re-encoded as dt (see the top); NULL on error. */
static struct cg_file *
convert(const char *in, enum cg_dtype dt)
{
	const struct cg_codec *c = cg_codec(dt);
	struct cg_file *src = cg_file_read(in), *f = NULL;
	float *x = NULL;

	if (src == NULL || (f = cg_file_new(cg_file_kind(src))) == NULL)
		goto fail;
	for (cJSON *it = src->manifest->child; it; it = it->next)
		if (strcmp(it->string, "format") != 0 &&
		    strcmp(it->string, "kind") != 0)
			cJSON_AddItemToObject(f->manifest, it->string,
					      cJSON_Duplicate(it, 1));
	for (size_t i = 0; i < src->ntensors; i++) {
		const struct cg_tensor *t = src->tensors[i];
		struct cg_tensor *o;

		if (cg_codec(t->dtype)->kind != CG_KIND_FLOAT ||
		    t->nelem % c->block != 0) {
			if (!cg_file_add(f, t->name, t->dtype, t->ndim,
					 t->shape, t->data))
				goto fail;
			continue;
		}
		free(x);
		if ((x = malloc(t->nelem ? t->nelem * sizeof(float) : 1)) ==
		    NULL) {
			cg_seterr("out of memory");
			goto fail;
		}
		if (cg_tensor_to_f32(t, x) != 0 ||
		    (o = cg_file_add_zero(f, t->name, dt, t->ndim, t->shape)) ==
			NULL ||
		    c->encode(o->data, x, (size_t)t->nelem) != 0) {
			char why[200];
			snprintf(why, sizeof(why), "%s", cg_errmsg());
			cg_seterr("tensor %s: %s", t->name, why);
			goto fail;
		}
	}
	free(x);
	cg_file_free(src);
	return f;
fail:
	free(x);
	cg_file_free(src);
	cg_file_free(f);
	return NULL;
}

/* The elements of layout view name in f's manifest, or 0 when none. */
static uint64_t
layout_elems(const struct cg_file *f, const char *name)
{
	const cJSON *lay =
	    cJSON_GetObjectItemCaseSensitive(f->manifest, "layout");
	const cJSON *v, *d;

	cJSON_ArrayForEach(v, lay)
	{
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(v, "name");
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(v, "shape");
		uint64_t n = 1;
		if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name) != 0)
			continue;
		cJSON_ArrayForEach(d, sh)
		{
			n *= (uint64_t)d->valuedouble;
		}
		return n;
	}
	return 0;
}

/* f (freed) without its tensor skip, or NULL with a message. */
static struct cg_file *
without(struct cg_file *f, const struct cg_tensor *skip)
{
	struct cg_file *g = cg_file_new(cg_file_kind(f));

	if (g == NULL)
		goto fail;
	cJSON_Delete(g->manifest);
	if ((g->manifest = cJSON_Duplicate(f->manifest, 1)) == NULL)
		goto fail;
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		if (t != skip && !cg_file_add(g, t->name, t->dtype, t->ndim,
		                              t->shape, t->data))
			goto fail;
	}
	cg_file_free(f);
	return g;
fail:
	cg_file_free(g);
	cg_file_free(f);
	return NULL;
}

/* The coded-update breakages of -x (see the top): 1 done, 0 not one of
 * them or nothing to break. */
static int
tamper_update(struct cg_file *f, const char *how)
{
	cJSON *m = f->manifest;
	cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "codec");
	cJSON *lay = cJSON_GetObjectItemCaseSensitive(m, "layout");

	if (strcmp(how, "codec") == 0 && c) {
		cJSON_ReplaceItemInObjectCaseSensitive(
		    c, "spec", cJSON_CreateString("rocket"));
		cJSON_ReplaceItemInObjectCaseSensitive(
		    c, "name", cJSON_CreateString("rocket"));
		return 1;
	}
	if (strcmp(how, "no-layout") == 0 && lay) {
		cJSON_DeleteItemFromObjectCaseSensitive(m, "layout");
		return 1;
	}
	if (strcmp(how, "layout-name") == 0 && cJSON_GetArraySize(lay) > 0) {
		cJSON_ReplaceItemInObjectCaseSensitive(
		    cJSON_GetArrayItem(lay, 0), "name",
		    cJSON_CreateString("rocket.w"));
		return 1;
	}
	for (size_t i = 0; i < f->ntensors; i++) {
		struct cg_tensor *t = f->tensors[i];
		size_t len = strlen(t->name);
		int idx = len > 4 && strcmp(t->name + len - 4, ".idx") == 0;
		if (!idx || t->dtype != CG_U32 || t->nelem == 0)
			continue;
		if (strcmp(how, "idx-far") == 0) {
			char view[CG_MAX_NAME];
			snprintf(view, sizeof(view), "%.*s", (int)len - 4,
			         t->name);
			uint32_t at =
			    (uint32_t)(layout_elems(f, view) + 10000000);
			memcpy((unsigned char *)t->data + 4 * (t->nelem - 1),
			       &at, 4);
			return 1;
		}
		if (strcmp(how, "idx-count") == 0) {
			t->shape[0]--;
			t->nelem--;
			t->nbytes -= 4;
			return 1;
		}
	}
	return 0;
}

/* IN with one thing broken (see -x above), or NULL with a message. */
static struct cg_file *
tamper(const char *in, const char *how)
{
	struct cg_file *f = cg_file_read_copy(in);
	char kind[32];
	const char *only = strchr(how, ':');

	if (f == NULL)
		return NULL;
	snprintf(kind, sizeof(kind), "%.*s",
	         only ? (int)(only - how) : (int)strlen(how), how);
	how = kind;
	if (strcmp(how, "kind") == 0) {
		cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "kind");
		cJSON_AddStringToObject(f->manifest, "kind",
		                        only ? only + 1 : "frob");
		return f;
	}
	if (tamper_update(f, how))
		return f;
	for (size_t i = 0; i < f->ntensors; i++) {
		struct cg_tensor *t = f->tensors[i];
		if (only && strcmp(t->name, only + 1) != 0)
			continue;
		unsigned char *p = t->data;
		size_t len = strlen(t->name);
		int idx = len > 4 && strcmp(t->name + len - 4, ".idx") == 0;
		int blk = cg_codec(t->dtype)->block > 1;
		if (strcmp(how, "idx-range") == 0 && idx && t->nelem > 0) {
			memset(p, 0xff, 4);
			return f;
		}
		if (strcmp(how, "idx-repeat") == 0 && idx && t->nelem > 1) {
			memcpy(p + 4, p, 4);
			return f;
		}
		if (strcmp(how, "row-blocks") == 0 && blk && t->ndim == 2 &&
		    t->dtype != CG_Q2_0 && t->shape[1] % 32 == 0) {
			const struct cg_codec *c = cg_codec(t->dtype);
			size_t row = t->shape[1] / 32 * c->bytes;
			unsigned char *q = cg_alloc(t->nbytes + t->shape[0] *
			                                            c->bytes);
			if (q == NULL)
				break;
			for (uint64_t r = 0; r < t->shape[0]; r++)
				memcpy(q + r * (row + c->bytes), p + r * row,
				       row);
			free(t->data);
			t->data = q;
			t->shape[1] += 32;
			t->nelem = t->shape[0] * t->shape[1];
			t->nbytes += t->shape[0] * c->bytes;
			return f;
		}
		if (strncmp(how, "mask-", 5) == 0 &&
		    strncmp(t->name, "mask.", 5) == 0) {
			if (strcmp(how, "mask-dtype") == 0)
				t->dtype = CG_I8;
			else if (strcmp(how, "mask-short") == 0 &&
			         t->nbytes > 1) {
				t->shape[0]--;
				t->nelem--;
				t->nbytes--;
			} else if (strcmp(how, "mask-name") == 0)
				snprintf(t->name, sizeof(t->name), "mask.wte");
			else
				break;
			return f;
		}
		if (strcmp(how, "nudge") == 0 && t->dtype == CG_F32 &&
		    t->nelem > 0) {
			float x;
			memcpy(&x, p, 4);
			x = nextafterf(x, INFINITY);
			memcpy(p, &x, 4);
			return f;
		}
		if (strcmp(how, "drop") == 0)
			return without(f, t);
		if (strcmp(how, "short") == 0 && t->dtype == CG_F32 &&
		    t->ndim == 1 && t->nelem > 1) {
			t->shape[0]--;
			t->nelem--;
			t->nbytes -= 4;
			return f;
		}
		if (strcmp(how, "huge") == 0 && t->dtype == CG_F32 &&
		    t->nelem > 0) {
			float *x = t->data;
			for (uint64_t j = 0; j < t->nelem; j++)
				x[j] = 1e30f;
			return f;
		}
		if (strcmp(how, "scale-nan") == 0 && blk) {
			p[0] = 0x00;
			p[1] = 0x7e;
			return f;
		}
		if (strcmp(how, "scale-big") == 0 && blk) {
			p[0] = 0xff; /* 65504, the largest finite half */
			p[1] = 0x7b;
			return f;
		}
		if (strcmp(how, "lut-nan") == 0 && t->dtype == CG_U8 &&
		    t->nelem >= 16 && len > 4 &&
		    strcmp(t->name + len - 4, ".val") == 0) {
			memcpy(p, "\0\0\xc0\x7f", 4); /* little-endian NaN */
			return f;
		}
		if (strcmp(how, "min-nan") == 0 && t->dtype == CG_Q4_1) {
			p[2] = 0x00;
			p[3] = 0x7e;
			return f;
		}
		if (strcmp(how, "rows") == 0 && blk && t->ndim == 2 &&
		    t->shape[0] > 1) {
			t->shape[0]--;
			t->nelem -= t->shape[1];
			return f;
		}
	}
	if (strcmp(how, "blocks") == 0) {
		cJSON *lay = cJSON_GetObjectItemCaseSensitive(f->manifest,
		                                              "layout");
		cJSON *sh = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetArrayItem(lay, 0), "shape");
		cJSON *d0 = cJSON_GetArrayItem(sh, 0);
		if (cJSON_IsNumber(d0)) {
			cJSON_SetNumberValue(d0, d0->valuedouble + 32);
			return f;
		}
	}
	cg_file_free(f);
	cg_seterr("%s: nothing to break with -x %s", in, how);
	return NULL;
}

int
main(int argc, char **argv)
{
	const char *kind = "model", *to = NULL, *in = NULL, *how = NULL;
	enum cg_dtype dt = CG_F32;
	enum cg_compress comp = CG_COMPRESS_NONE;
	struct cg_file *f;
	int c, rc;

	while ((c = getopt(argc, argv, "k:t:x:")) != -1) {
		if (c == 'k')
			kind = optarg;
		else if (c == 'x')
			how = optarg;
		else if (c == 't')
			to = optarg;
		else
			goto usage;
	}
	if (how) {
		if (argc - optind != 2)
			goto usage;
		f = tamper(argv[optind], how);
		rc = f && cg_file_write(f, argv[optind + 1], comp) == 0 ? 0 : 1;
		if (rc)
			fprintf(stderr, "mkcg: %s\n", cg_errmsg());
		cg_file_free(f);
		return rc;
	}
	if (to && argc - optind >= 2) {
		in = argv[optind++];
		if (cg_dtype_parse(to, &dt) != 0) {
			fprintf(stderr, "mkcg: %s\n", cg_errmsg());
			return 2;
		}
	}
	if (argc - optind < 1 || argc - optind > 2 || (to && !in) ||
	    (strcmp(kind, "model") != 0 && strcmp(kind, "data") != 0))
		goto usage;
	if (argc - optind == 2) {
		const char *z = argv[optind + 1];
		if (strcmp(z, "gzip") == 0)
			comp = CG_COMPRESS_GZIP;
		else if (strcmp(z, "zstd") == 0)
			comp = CG_COMPRESS_ZSTD;
		else if (strcmp(z, "none") != 0)
			goto usage;
	}
	if (in)
		f = convert(in, dt);
	else if ((f = cg_file_new(kind)) != NULL &&
		 (strcmp(kind, "data") == 0 ? add_data(f) : add_model(f)) != 0) {
		cg_file_free(f);
		f = NULL;
	}
	if (f == NULL || cg_file_write(f, argv[optind], comp) != 0) {
		fprintf(stderr, "mkcg: %s\n", cg_errmsg());
		rc = 1;
	} else {
		rc = 0;
	}
	cg_file_free(f);
	return rc;
usage:
	fputs("usage: mkcg [-k model|data] OUT [none|gzip|zstd]\n"
	      "       mkcg -t DTYPE IN OUT [none|gzip|zstd]\n"
	      "       mkcg -x HOW IN OUT\n",
	      stderr);
	return 2;
}
