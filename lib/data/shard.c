/*
 * data/shard.c - reading a data shard (a cg file of kind "data", written
 * by data/split.c): the reader trusts nothing in it and checks every count,
 * offset and condition before handing out pointers, so training code can
 * index a shard without further checks.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "data/shard.h"

/* An integer member of a manifest object, within [lo, hi]. */
static int
get_int(const cJSON *o, const char *what, const char *name, double lo,
        double hi, double *out)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) ||
	    j->valuedouble < lo || j->valuedouble > hi)
		return cg_seterr("manifest: %s\"%s\" is missing or not an "
		                 "integer in [%.0f, %.0f]",
		                 what, name, lo, hi);
	*out = j->valuedouble;
	return 0;
}

static struct cg_tensor *
need_vector(const struct cg_file *f, const char *name, enum cg_dtype t,
            uint64_t len, int check_len)
{
	struct cg_tensor *x = cg_file_need(f, name, t);

	if (x == NULL)
		return NULL;
	if (x->ndim != 1) {
		cg_seterr("tensor %s: %d dimensions, expected 1", name,
		          x->ndim);
		return NULL;
	}
	if (check_len && x->shape[0] != len) {
		cg_seterr("tensor %s: %llu elements, expected %llu", name,
		          (unsigned long long)x->shape[0],
		          (unsigned long long)len);
		return NULL;
	}
	return x;
}

/* Manifest checks: everything but the tensors' contents. */
static int
shard_manifest(struct cg_shard *s)
{
	const cJSON *m = s->file->manifest, *j, *o;
	const char *dup;
	double v, lim = (double)CG_SHARD_MAX_EXAMPLES;
	int err, i = 0;

	if (strcmp(cg_file_kind(s->file), "data") != 0)
		return cg_seterr("kind \"%.32s\", not a data shard",
		                 cg_file_kind(s->file));
	if (get_int(m, "", "examples", 0, lim, &v) != 0)
		return -1;
	s->n = (uint64_t)v;

	j = cJSON_GetObjectItemCaseSensitive(m, "conditions");
	if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) < 1 ||
	    cJSON_GetArraySize(j) > CG_SHARD_MAX_CONDITIONS)
		return cg_seterr("manifest: \"conditions\" is not an array of "
		                 "1 to %d names",
		                 CG_SHARD_MAX_CONDITIONS);
	s->nconditions = (size_t)cJSON_GetArraySize(j);
	if ((s->conditions = calloc(s->nconditions, sizeof(char *))) == NULL)
		return cg_seterr("out of memory");
	cJSON_ArrayForEach(o, j)
	{
		const char *why;
		if (!cJSON_IsString(o))
			return cg_seterr("manifest: condition %d is not a "
			                 "string",
			                 i);
		if ((why = cg_condition_name_check(o->valuestring)) != NULL)
			return cg_seterr("manifest: condition %d: %s", i, why);
		s->conditions[i++] = o->valuestring;
	}
	if ((dup = cg_condition_name_twice(s->conditions, s->nconditions, &err)))
		return cg_seterr("manifest: condition \"%.64s\" listed twice",
		                 dup);
	if (err)
		return -1;

	j = cJSON_GetObjectItemCaseSensitive(m, "payload");
	if (cJSON_IsString(j) && strcmp(j->valuestring, "image") == 0) {
		s->kind = CG_PAYLOAD_IMAGE;
		o = cJSON_GetObjectItemCaseSensitive(m, "image");
		if (!cJSON_IsObject(o))
			return cg_seterr("manifest: \"image\" missing");
		if (get_int(o, "image.", "height", 1, 65536, &v) != 0)
			return -1;
		s->height = (uint32_t)v;
		if (get_int(o, "image.", "width", 1, 65536, &v) != 0)
			return -1;
		s->width = (uint32_t)v;
		if (get_int(o, "image.", "channels", 1, 4, &v) != 0)
			return -1;
		s->channels = (uint32_t)v;
	} else if (cJSON_IsString(j) && strcmp(j->valuestring, "text") == 0) {
		s->kind = CG_PAYLOAD_TEXT;
	} else {
		return cg_seterr("manifest: \"payload\" is not \"image\" or "
		                 "\"text\"");
	}

	o = cJSON_GetObjectItemCaseSensitive(m, "shard");
	if (!cJSON_IsObject(o))
		return cg_seterr("manifest: \"shard\" missing");
	if (get_int(o, "shard.", "count", 1, CG_SHARD_MAX_SHARDS, &v) != 0)
		return -1;
	s->nshards = (int)v;
	if (get_int(o, "shard.", "index", -1, s->nshards - 1, &v) != 0)
		return -1;
	s->shard = (int)v;
	j = cJSON_GetObjectItemCaseSensitive(o, "holdout");
	if (!cJSON_IsBool(j) || cJSON_IsTrue(j) != (s->shard < 0))
		return cg_seterr("manifest: \"shard.holdout\" missing or "
		                 "inconsistent with shard.index");

	o = cJSON_GetObjectItemCaseSensitive(m, "source");
	if (!cJSON_IsObject(o) ||
	    get_int(o, "source.", "examples", 0, lim, &v) != 0)
		return cg_seterr("manifest: \"source.examples\" missing or "
		                 "not an integer");
	s->source_examples = (uint64_t)v;
	if (s->n > s->source_examples)
		return cg_seterr("manifest: %llu examples, more than the "
		                 "source's %llu",
		                 (unsigned long long)s->n,
		                 (unsigned long long)s->source_examples);
	return 0;
}

/* Tensor checks: shapes, then every offset, condition and index. */
static int
shard_tensors(struct cg_shard *s)
{
	const struct cg_file *f = s->file;
	struct cg_tensor *tc, *ti, *to, *tp, *tl = NULL;
	uint64_t per = (uint64_t)s->height * s->width * s->channels;

	if ((tc = need_vector(f, "cond", CG_U32, s->n, 1)) == NULL ||
	    (ti = need_vector(f, "index", CG_U64, s->n, 1)) == NULL ||
	    (to = need_vector(f, "offset", CG_U64, s->n + 1, 1)) == NULL ||
	    (tp = need_vector(f, "payload", CG_U8, 0, 0)) == NULL)
		return -1;
	s->cond = tc->data;
	s->index = ti->data;
	s->offset = to->data;
	s->payload = tp->data;
	s->payload_bytes = tp->nbytes;
	/* Optional: only text with prompts has it. */
	if (cg_file_find(f, "prompt_len") != NULL) {
		if (s->kind != CG_PAYLOAD_TEXT)
			return cg_seterr("tensor prompt_len: in a shard that "
			                 "is not text");
		if ((tl = need_vector(f, "prompt_len", CG_U32, s->n, 1)) ==
		    NULL)
			return -1;
		s->prompt_len = tl->data;
	}
	if (s->offset[0] != 0)
		return cg_seterr("tensor offset: does not start at 0");
	for (uint64_t i = 0; i < s->n; i++) {
		uint64_t len = s->offset[i + 1] - s->offset[i];
		if (s->offset[i + 1] < s->offset[i] ||
		    s->offset[i + 1] > s->payload_bytes)
			return cg_seterr("tensor offset: entry %llu out of "
			                 "order or past the payload",
			                 (unsigned long long)i + 1);
		if (s->kind == CG_PAYLOAD_IMAGE && len != per)
			return cg_seterr("example %llu: %llu payload bytes, "
			                 "an image has %llu",
			                 (unsigned long long)i,
			                 (unsigned long long)len,
			                 (unsigned long long)per);
		if (s->prompt_len && s->prompt_len[i] > len)
			return cg_seterr("tensor prompt_len: example %llu has "
			                 "a prompt of %u bytes in %llu",
			                 (unsigned long long)i,
			                 s->prompt_len[i],
			                 (unsigned long long)len);
		if (s->cond[i] >= s->nconditions)
			return cg_seterr("tensor cond: example %llu has "
			                 "condition %u of %zu",
			                 (unsigned long long)i, s->cond[i],
			                 s->nconditions);
		if (s->index[i] >= s->source_examples ||
		    (i > 0 && s->index[i] <= s->index[i - 1]))
			return cg_seterr("tensor index: entry %llu out of "
			                 "order or past source.examples",
			                 (unsigned long long)i);
	}
	if (s->offset[s->n] != s->payload_bytes)
		return cg_seterr("tensor offset: ends at %llu, the payload has "
		                 "%llu bytes",
		                 (unsigned long long)s->offset[s->n],
		                 (unsigned long long)s->payload_bytes);
	return 0;
}

/* The rules of a shard, once: its manifest, then its tensors. */
static int
shard_check(struct cg_shard *s)
{
	return shard_manifest(s) != 0 || shard_tensors(s) != 0 ? -1 : 0;
}

int
cg_shard_file_check(const struct cg_file *f)
{
	/* the checks only read the file and point into it */
	struct cg_shard s = {.file = (struct cg_file *)f};
	int rc = shard_check(&s);

	free(s.conditions);
	return rc;
}

struct cg_shard *
cg_shard_from_file(struct cg_file *f, const char *display)
{
	struct cg_shard *s;

	if (f == NULL)
		return NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		cg_file_free(f);
		cg_seterr("%s: out of memory", display);
		return NULL;
	}
	s->file = f;
	if (shard_check(s) != 0) {
		cg_errprefix(display);
		cg_shard_free(s);
		return NULL;
	}
	return s;
}

struct cg_shard *
cg_shard_open(const char *path)
{
	struct cg_file *f = cg_file_read(path);

	if (f == NULL)
		return NULL;
	return cg_shard_from_file(f, strcmp(path, "-") == 0 ? "(stdin)" : path);
}

int
cg_shard_page_out(const struct cg_shard *s)
{
	const struct cg_tensor *t =
	    s->file ? cg_file_find(s->file, "payload") : NULL;

	return t ? cg_file_page_out(s->file, t) : 0;
}

struct cg_shard *
cg_shard_open_late(const char *path)
{
	struct cg_file *f = cg_file_read_late(path, "payload");

	if (f == NULL)
		return NULL;
	return cg_shard_from_file(f, strcmp(path, "-") == 0 ? "(stdin)" : path);
}

struct cg_shard *
cg_shard_open_spooled(const char *path)
{
	struct cg_file *f = cg_file_read_spooled(path, "payload");

	if (f == NULL)
		return NULL;
	return cg_shard_from_file(f, strcmp(path, "-") == 0 ? "(stdin)" : path);
}

int
cg_shard_verified(const struct cg_shard *s, int wait)
{
	/* a shard made in memory (the tests') has no file to verify */
	return s->file ? cg_file_late(s->file, wait) : 0;
}

void
cg_shard_free(struct cg_shard *s)
{
	if (s == NULL)
		return;
	free(s->conditions);
	cg_file_free(s->file);
	free(s);
}
