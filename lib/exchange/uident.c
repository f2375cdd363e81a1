/*
 * exchange/uident.c - an update's identity, and the set of those a reduction
 * took.
 *
 * The identity is read from the manifest and the tensors' digests as
 * the container verified them (a file made in memory, never written,
 * has none: its tensors are hashed here).  The set is a hash table of
 * 32-byte keys, open addressing: an update's content digest, and for
 * each of its (worker, base) pairs the SHA-256 of the two, so that a
 * look-up costs the same for the thousandth input as for the second.
 * The rules (uident.h) say what counts as one worker.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "exchange/uident.h"
#include "file/sign.h"

struct cg_uident_slot {
	unsigned char key[32];
	size_t name; /* index into names, plus 1; 0: the slot is empty */
};

/* ------------------------------------------------------------- record */

int
cg_uident_record(cJSON *manifest, const unsigned char shard[32], uint64_t seed)
{
	char hex[65], s[24];
	cJSON *w;

	cg_hex(hex, shard);
	/* a string: a u64 does not fit a JSON number */
	snprintf(s, sizeof(s), "%llu", (unsigned long long)seed);
	cJSON_DeleteItemFromObjectCaseSensitive(manifest, "worker");
	if ((w = cJSON_AddObjectToObject(manifest, "worker")) == NULL ||
	    cJSON_AddStringToObject(w, "shard", hex) == NULL ||
	    cJSON_AddStringToObject(w, "seed", s) == NULL)
		return cg_seterr("out of memory");
	return 0;
}

/* ----------------------------------------------------------- identity */

static void
hash_str(EVP_MD_CTX *c, const char *s)
{
	EVP_DigestUpdate(c, s, strlen(s) + 1); /* with its NUL: unambiguous */
}

/* SHA-256 over f's tensors: name, dtype, shape and member digest each.
 * 0, or -1 with a message. */
static int
content_of(const struct cg_file *f, unsigned char out[32])
{
	static const unsigned char none[32];
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned int len = 32;
	char buf[32];

	if (c == NULL || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(c);
		return cg_seterr("out of memory");
	}
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		unsigned char d[32];
		hash_str(c, t->name);
		hash_str(c, cg_dtype_name(t->dtype));
		for (int k = 0; k < t->ndim; k++) {
			snprintf(buf, sizeof(buf), "%llu",
			         (unsigned long long)t->shape[k]);
			hash_str(c, buf);
		}
		/* read: the digest verified; made in memory: none yet */
		if (memcmp(t->sha256, none, 32) != 0 || t->data == NULL)
			memcpy(d, t->sha256, 32);
		else
			cg_sha256_le(d, t->data, t->nbytes,
			             cg_dtype_word(t->dtype));
		EVP_DigestUpdate(c, d, 32);
	}
	EVP_DigestFinal_ex(c, out, &len);
	EVP_MD_CTX_free(c);
	return 0;
}

/* Whether s is 64 lower-case hex digits. */
static int
is_hex64(const char *s)
{
	unsigned char d[32];

	return strlen(s) == 64 && cg_unhex(d, s, 32, 0) == 0;
}

/* The seed s, a u64 in decimal without leading zeros, into *out: 0 or
 * -1. */
static int
parse_seed(const char *s, unsigned long long *out)
{
	char *end;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] != '\0') ||
	    strlen(s) > 20)
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return *end != '\0' || errno == ERANGE ? -1 : 0;
}

/* Whether w is a worker as this module writes one. */
static int
valid_worker(const char *w)
{
	unsigned long long seed;
	char hex[65];

	if (strncmp(w, "key:", 4) == 0)
		return is_hex64(w + 4);
	if (strncmp(w, "shard:", 6) != 0 || strlen(w) < 6 + 64 + 6 + 1)
		return 0;
	memcpy(hex, w + 6, 64);
	hex[64] = '\0';
	return is_hex64(hex) && strncmp(w + 70, ",seed:", 6) == 0 &&
	       parse_seed(w + 76, &seed) == 0;
}

/* The leaf worker of f's "worker" record w into c->worker: 0, or -1. */
static int
record_worker(const cJSON *w, struct cg_contrib *c)
{
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(w, "shard");
	const cJSON *sd = cJSON_GetObjectItemCaseSensitive(w, "seed");
	unsigned long long seed;

	if (!cJSON_IsObject(w) || !cJSON_IsString(sh) ||
	    !is_hex64(sh->valuestring) || !cJSON_IsString(sd) ||
	    parse_seed(sd->valuestring, &seed) != 0)
		return -1;
	snprintf(c->worker, sizeof(c->worker), "shard:%s,seed:%llu",
	         sh->valuestring, seed);
	return 0;
}

/* A reduction's "contributors" arr into id: 0, or -1 (id->who then
 * the caller's to free). */
static int
read_contributors(const cJSON *arr, struct cg_uident *id)
{
	const cJSON *e;
	size_t n = 0;

	if (arr == NULL)
		return 0;
	if (!cJSON_IsArray(arr))
		return -1;
	n = (size_t)cJSON_GetArraySize(arr);
	if (n == 0)
		return 0;
	if ((id->who = calloc(n, sizeof(*id->who))) == NULL)
		return -1;
	cJSON_ArrayForEach(e, arr)
	{
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(e, "worker");
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "base");
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "step");
		struct cg_contrib *c = &id->who[id->n];
		if (!cJSON_IsString(w) ||
		    strlen(w->valuestring) >= CG_WORKER_MAX ||
		    !valid_worker(w->valuestring) || !cJSON_IsString(b) ||
		    !is_hex64(b->valuestring) || !cJSON_IsNumber(s) ||
		    !(s->valuedouble >= 0 &&
		      s->valuedouble <= 9007199254740992.0))
			return -1;
		snprintf(c->worker, sizeof(c->worker), "%s", w->valuestring);
		memcpy(c->base, b->valuestring, 65);
		c->step = (uint64_t)s->valuedouble;
		id->n++;
	}
	return 0;
}

int
cg_uident_of(const struct cg_update *u, struct cg_uident *id)
{
	const cJSON *man = u->file->manifest;
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(man, "worker");
	struct cg_contrib c = {.step = 0};

	memset(id, 0, sizeof(*id));
	if (content_of(u->file, id->content) != 0)
		return -1;
	if (cJSON_GetObjectItemCaseSensitive(man, "reduce") != NULL) {
		if (read_contributors(
		        cJSON_GetObjectItemCaseSensitive(man, "contributors"),
		        id) != 0) {
			cg_uident_free(id);
			return cg_seterr("%s: manifest: \"contributors\" is "
			                 "not a list of {\"worker\", \"base\", "
			                 "\"step\"}",
			                 u->name);
		}
		return 0;
	}
	if (u->file->is_signed) {
		char fp[65];
		cg_key_fingerprint(fp, u->file->signer);
		snprintf(c.worker, sizeof(c.worker), "key:%s", fp);
	} else if (w == NULL) {
		return 0; /* by hand, or an older cg's: its content alone */
	} else if (record_worker(w, &c) != 0) {
		return cg_seterr("%s: manifest: \"worker\" is not {\"shard\": "
		                 "SHA-256, \"seed\": \"N\"}",
		                 u->name);
	}
	memcpy(c.base, u->base, 65);
	c.step = u->base_step;
	if ((id->who = malloc(sizeof(*id->who))) == NULL)
		return cg_seterr("out of memory");
	id->who[0] = c;
	id->n = 1;
	return 0;
}

void
cg_uident_free(struct cg_uident *id)
{
	free(id->who);
	id->who = NULL;
	id->n = 0;
}

/* ---------------------------------------------------------------- set */

void
cg_uident_set_init(struct cg_uident_set *s)
{
	memset(s, 0, sizeof(*s));
}

void
cg_uident_set_free(struct cg_uident_set *s)
{
	for (size_t i = 0; i < s->nnames; i++)
		free(s->names[i]);
	free(s->names);
	free(s->pending);
	free(s->slot);
	free(s->who);
	memset(s, 0, sizeof(*s));
}

/* The key of a (worker, base) pair. */
static void
pair_key(const struct cg_contrib *c, unsigned char out[32])
{
	EVP_MD_CTX *x = EVP_MD_CTX_new();
	unsigned int len = 32;

	/* out of memory: a key no pair has, so nothing matches */
	memset(out, 0, 32);
	if (x == NULL || EVP_DigestInit_ex(x, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(x);
		return;
	}
	hash_str(x, "worker and base");
	hash_str(x, c->worker);
	hash_str(x, c->base);
	EVP_DigestFinal_ex(x, out, &len);
	EVP_MD_CTX_free(x);
}

/* The slot of key in s: the one holding it, or the empty one where it
 * would go (s->cap > s->used). */
static struct cg_uident_slot *
probe(struct cg_uident_slot *slot, size_t cap, const unsigned char key[32])
{
	size_t h;

	memcpy(&h, key, sizeof(h));
	for (h &= cap - 1;; h = (h + 1) & (cap - 1))
		if (slot[h].name == 0 || memcmp(slot[h].key, key, 32) == 0)
			return &slot[h];
}

/* The name of the input that brought key into s, or NULL. */
static const char *
holder(const struct cg_uident_set *s, const unsigned char key[32])
{
	const struct cg_uident_slot *e;

	if (s->cap == 0)
		return NULL;
	e = probe(s->slot, s->cap, key);
	return e->name ? s->names[e->name - 1] : NULL;
}

/* A worker for people: "key 1a2b3c4d5e6f..." or "shard 1a2b3c4d5e6f...,
 * seed N". */
static void
describe(char *out, size_t n, const char *w)
{
	if (strncmp(w, "key:", 4) == 0)
		snprintf(out, n, "key %.12s...", w + 4);
	else
		snprintf(out, n, "shard %.12s..., seed %s", w + 6, w + 76);
}

int
cg_uident_set_check(const struct cg_uident_set *s, const struct cg_uident *id,
                    const char *name)
{
	unsigned char key[32];
	const char *first;
	char hex[65], who[64];

	if ((first = holder(s, id->content)) != NULL) {
		cg_hex(hex, id->content);
		return cg_seterr("%s: the same update as %s (tensors sha256 "
		                 "%.12s...)",
		                 name, first, hex);
	}
	for (size_t i = 0; i < id->n; i++) {
		pair_key(&id->who[i], key);
		if ((first = holder(s, key)) == NULL)
			continue;
		describe(who, sizeof(who), id->who[i].worker);
		return cg_seterr("%s: the same worker (%s) and base (step "
		                 "%llu) as %s",
		                 name, who, (unsigned long long)id->who[i].step,
		                 first);
	}
	return 0;
}

/* Grow *p [*cap] of size-byte items to hold want: 0 or -1. */
static int
grow(void **p, size_t *cap, size_t want, size_t size)
{
	size_t c = *cap ? *cap : 8;
	void *q;

	if (want <= *cap)
		return 0;
	while (c < want)
		c *= 2;
	if ((q = realloc(*p, c * size)) == NULL)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

int
cg_uident_set_reserve(struct cg_uident_set *s, const struct cg_uident *id,
                      const char *name)
{
	const size_t want = 2 * (s->used + 1 + id->n);

	free(s->pending);
	if ((s->pending = strdup(name)) == NULL ||
	    grow((void **)&s->names, &s->capnames, s->nnames + 1,
	         sizeof(*s->names)) != 0 ||
	    grow((void **)&s->who, &s->capwho, s->nwho + id->n,
	         sizeof(*s->who)) != 0)
		return cg_seterr("out of memory");
	if (want > s->cap) {
		size_t cap = s->cap ? s->cap : 16;
		struct cg_uident_slot *t;
		while (cap < want)
			cap *= 2;
		if ((t = calloc(cap, sizeof(*t))) == NULL)
			return cg_seterr("out of memory");
		for (size_t i = 0; i < s->cap; i++)
			if (s->slot[i].name)
				*probe(t, cap, s->slot[i].key) = s->slot[i];
		free(s->slot);
		s->slot = t;
		s->cap = cap;
	}
	return 0;
}

/* Key into s under the name of index name (plus 1): 1 if it was new. */
static int
insert(struct cg_uident_set *s, const unsigned char key[32], size_t name)
{
	struct cg_uident_slot *e = probe(s->slot, s->cap, key);

	if (e->name)
		return 0;
	memcpy(e->key, key, 32);
	e->name = name;
	s->used++;
	return 1;
}

void
cg_uident_set_add(struct cg_uident_set *s, const struct cg_uident *id)
{
	unsigned char key[32];
	size_t name;

	s->names[s->nnames++] = s->pending;
	s->pending = NULL;
	name = s->nnames;
	insert(s, id->content, name);
	for (size_t i = 0; i < id->n; i++) {
		pair_key(&id->who[i], key);
		if (insert(s, key, name))
			s->who[s->nwho++] = id->who[i];
	}
}

static int
cmp_contrib(const void *a, const void *b)
{
	const struct cg_contrib *x = a, *y = b;
	int c = strcmp(x->worker, y->worker);

	return c ? c : strcmp(x->base, y->base);
}

int
cg_uident_set_put(const struct cg_uident_set *s, cJSON *manifest)
{
	struct cg_contrib *v;
	cJSON *arr;
	int rc = -1;

	cJSON_DeleteItemFromObjectCaseSensitive(manifest, "contributors");
	if (s->nwho == 0)
		return 0;
	if ((v = malloc(s->nwho * sizeof(*v))) == NULL)
		return cg_seterr("out of memory");
	memcpy(v, s->who, s->nwho * sizeof(*v));
	qsort(v, s->nwho, sizeof(*v), cmp_contrib);
	if ((arr = cJSON_AddArrayToObject(manifest, "contributors")) == NULL)
		goto out;
	for (size_t i = 0; i < s->nwho; i++) {
		cJSON *o = cJSON_CreateObject();
		if (o != NULL && !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			o = NULL;
		}
		if (o == NULL ||
		    cJSON_AddStringToObject(o, "worker", v[i].worker) == NULL ||
		    cJSON_AddStringToObject(o, "base", v[i].base) == NULL ||
		    cJSON_AddNumberToObject(o, "step", (double)v[i].step) ==
		        NULL)
			goto out;
	}
	rc = 0;
out:
	free(v);
	return rc ? cg_seterr("out of memory") : 0;
}
