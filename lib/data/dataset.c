/*
 * data/dataset.c - datasets in memory and their vocabularies of condition
 * names.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"

const char *const cg_fashion_mnist_names[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot",
};

void
cg_dataset_free(struct cg_dataset *d)
{
	if (d == NULL)
		return;
	free(d->cond);
	free(d->index);
	free(d->offset);
	free(d->payload);
	free(d->prompt_len);
	free(d->hash);
	if (d->fetch_free)
		d->fetch_free(d->fetch_ctx);
	if (d->conditions)
		for (size_t i = 0; i < d->nconditions; i++)
			free(d->conditions[i]);
	free(d->conditions);
	memset(d, 0, sizeof(*d));
}

uint64_t
cg_payload_hash(const uint8_t *p, uint64_t n, uint64_t seed)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (seed * 0x9e3779b97f4a7c15ULL);

	for (uint64_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

/* Well-formed UTF-8 (no overlong forms, surrogates or values past
 * U+10FFFF), so that names come out of cJSON as valid JSON. */
static int
valid_utf8(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s++;
		int more;
		unsigned v, min;

		if (c < 0x80)
			continue;
		if ((c & 0xe0) == 0xc0)
			more = 1, v = c & 0x1f, min = 0x80;
		else if ((c & 0xf0) == 0xe0)
			more = 2, v = c & 0x0f, min = 0x800;
		else if ((c & 0xf8) == 0xf0)
			more = 3, v = c & 0x07, min = 0x10000;
		else
			return 0;
		while (more-- > 0) {
			if ((*s & 0xc0) != 0x80)
				return 0;
			v = v << 6 | (*s++ & 0x3f);
		}
		if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
			return 0;
	}
	return 1;
}

const char *
cg_condition_name_check(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return "empty name";
	if (len > CG_SHARD_MAX_NAME)
		return "name too long";
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return "control character in name";
	if (!valid_utf8((const unsigned char *)name))
		return "name is not valid UTF-8";
	return NULL;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *
cg_condition_name_twice(const char *const *names, size_t n, int *err)
{
	const char **tmp;
	const char *dup = NULL;

	*err = 0;
	if (n < 2)
		return NULL;
	if ((tmp = malloc(n * sizeof(*tmp))) == NULL) {
		*err = cg_seterr("out of memory");
		return NULL;
	}
	memcpy(tmp, names, n * sizeof(*tmp));
	qsort(tmp, n, sizeof(*tmp), cmp_str);
	for (size_t i = 1; i < n && dup == NULL; i++)
		if (strcmp(tmp[i - 1], tmp[i]) == 0)
			dup = tmp[i];
	free(tmp);
	return dup;
}

int
cg_dataset_set_conditions(struct cg_dataset *d, const char *const *names,
                          size_t n)
{
	const char *why, *dup;
	char **copy;
	int err;

	if (n == 0 || n > CG_SHARD_MAX_CONDITIONS)
		return cg_seterr("%zu condition names (1 to %d allowed)", n,
		                 CG_SHARD_MAX_CONDITIONS);
	for (size_t i = 0; i < n; i++)
		if ((why = cg_condition_name_check(names[i])) != NULL)
			return cg_seterr("condition %zu: %s", i, why);
	if ((dup = cg_condition_name_twice(names, n, &err)) != NULL)
		return cg_seterr("condition name \"%.64s\" given twice", dup);
	if (err)
		return -1;
	for (uint64_t i = 0; i < d->n; i++)
		if (d->cond[i] >= n)
			return cg_seterr(
			    "%zu condition names, but example %llu "
			    "has condition %u",
			    n, (unsigned long long)i, d->cond[i]);
	if ((copy = calloc(n, sizeof(*copy))) == NULL)
		return cg_seterr("out of memory");
	for (size_t i = 0; i < n; i++)
		if ((copy[i] = strdup(names[i])) == NULL) {
			while (i-- > 0)
				free(copy[i]);
			free(copy);
			return cg_seterr("out of memory");
		}
	for (size_t i = 0; i < d->nconditions; i++)
		free(d->conditions[i]);
	free(d->conditions);
	d->conditions = copy;
	d->nconditions = n;
	return 0;
}

/*
 * The next line of fp into line [cap] without its newline, NUL-ended:
 * its length (NUL bytes in it count), -1 at the end of the input, or
 * cap when it does not fit (the rest of it is not read): a line is
 * never held longer than a name can be.
 */
static ssize_t
name_line(FILE *fp, char *line, size_t cap)
{
	size_t n = 0;
	int c;

	while ((c = getc(fp)) != EOF && c != '\n') {
		if (n + 1 == cap)
			return (ssize_t)cap;
		line[n++] = (char)c;
	}
	if (c == EOF && n == 0)
		return -1;
	line[n] = '\0';
	return (ssize_t)n;
}

int
cg_dataset_read_conditions(struct cg_dataset *d, const char *path)
{
	FILE *fp;
	/* a name, a carriage return and the NUL */
	char line[CG_SHARD_MAX_NAME + 3], **names = NULL;
	size_t n = 0, ncap = 0, lineno = 0;
	ssize_t len;
	int rc = -1;

	if ((fp = fopen(path, "r")) == NULL)
		return cg_seterr("%s: %s", path, strerror(errno));
	while ((len = name_line(fp, line, sizeof(line))) >= 0) {
		const char *why;

		lineno++;
		if ((size_t)len == sizeof(line)) {
			cg_seterr("%s: line %zu: name too long", path, lineno);
			goto out;
		}
		if (len > 0 && line[len - 1] == '\r')
			line[--len] = '\0';
		if ((size_t)len != strlen(line)) {
			cg_seterr("%s: line %zu: NUL byte in name", path,
			          lineno);
			goto out;
		}
		if ((why = cg_condition_name_check(line)) != NULL) {
			cg_seterr("%s: line %zu: %s", path, lineno, why);
			goto out;
		}
		if (n == CG_SHARD_MAX_CONDITIONS) {
			cg_seterr("%s: more than %d names", path,
			          CG_SHARD_MAX_CONDITIONS);
			goto out;
		}
		if (n == ncap) {
			size_t nc = ncap ? 2 * ncap : 64;
			char **p = realloc(names, nc * sizeof(*names));
			if (p == NULL) {
				cg_seterr("out of memory");
				goto out;
			}
			names = p;
			ncap = nc;
		}
		if ((names[n] = strdup(line)) == NULL) {
			cg_seterr("out of memory");
			goto out;
		}
		n++;
	}
	if (ferror(fp)) {
		cg_seterr("%s: %s", path, strerror(errno));
		goto out;
	}
	if (n == 0) {
		cg_seterr("%s: no names", path);
		goto out;
	}
	if ((rc = cg_dataset_set_conditions(d, (const char *const *)names,
	                                    n)) != 0)
		cg_errprefix(path);
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	fclose(fp);
	return rc;
}
