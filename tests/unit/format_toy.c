/*
 * format_toy.c - a test-only file format: "TOYF", then per tensor a name
 * and its f32 values.
 *
 * It shows that a file format is its own file and nothing else: it is
 * not in lib/file/format.c's list and no program names it, yet the
 * copies of cg-convert and cg-inspect that the suite links with this file
 * (tests/toy/, never installed) read it, because the constructor below
 * registers it with cg_format_register().
 *
 * The bytes, all little-endian: "TOYF", a u32 count, then per tensor a
 * u8 name length, the name, a u32 element count and the f32 values.  It
 * reads as a cg file of kind "model" whose tensors are 1-D f32, and is
 * read as hostile as any: every length against what is left, names as
 * the container takes them.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg.h"
#include "file/format.h"

#define MAGIC "TOYF"
#define MAX_BYTES ((size_t)1 << 30)

static int
toy_probe(const void *buf, size_t n)
{
	return n >= 4 && memcmp(buf, MAGIC, 4) == 0;
}

static uint32_t
le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* All of fd after the npre bytes of pre, into a new buffer *out [*n]. */
static int
slurp(int fd, const void *pre, size_t npre, unsigned char **out, size_t *n)
{
	size_t cap = npre + 4096, have = npre;
	unsigned char *b = malloc(cap);

	if (b == NULL)
		return cg_seterr("out of memory");
	if (npre > 0)
		memcpy(b, pre, npre);
	for (;;) {
		ssize_t r;
		if (have == cap) {
			unsigned char *nb;
			if (cap >= MAX_BYTES || (nb = realloc(b, 2 * cap)) == NULL) {
				free(b);
				return cg_seterr("too large");
			}
			b = nb;
			cap *= 2;
		}
		r = read(fd, b + have, cap - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(b);
			return cg_seterr("%s", strerror(errno));
		}
		if (r == 0)
			break;
		have += (size_t)r;
	}
	*out = b;
	*n = have;
	return 0;
}

static struct cg_file *
toy_read_fd(int fd, const char *display, const void *pre, size_t npre)
{
	unsigned char *b = NULL;
	size_t n = 0, at = 8;
	struct cg_file *f = NULL;
	uint32_t count;

	if (slurp(fd, pre, npre, &b, &n) != 0)
		goto bad;
	if (n < 8 || !toy_probe(b, n)) {
		cg_seterr("not a toy file");
		goto bad;
	}
	count = le32(b + 4);
	if ((f = cg_file_new("model")) == NULL)
		goto bad;
	for (uint32_t i = 0; i < count; i++) {
		char name[CG_MAX_NAME];
		uint64_t shape[1];
		size_t len;

		if (n - at < 1 || (len = b[at]) == 0 || n - at - 1 < len + 4) {
			cg_seterr("tensor %u: past the end", i);
			goto bad;
		}
		memcpy(name, b + at + 1, len);
		name[len] = '\0';
		shape[0] = le32(b + at + 1 + len);
		at += 1 + len + 4;
		if ((n - at) / 4 < shape[0]) {
			cg_seterr("tensor %s: past the end", name);
			goto bad;
		}
		struct cg_tensor *t =
		    cg_file_add(f, name, CG_F32, 1, shape, b + at);
		if (t == NULL)
			goto bad;
		/* host words in memory, as every reader leaves them */
		cg_le_words(t->data, t->nbytes, 4);
		at += shape[0] * 4;
	}
	if (at != n) {
		cg_seterr("%zu bytes after the last tensor", n - at);
		goto bad;
	}
	free(b);
	return f;
bad:
	cg_errprefix(display);
	cg_file_free(f);
	free(b);
	return NULL;
}

static void
put32(FILE *fp, uint32_t v)
{
	unsigned char b[4] = {v & 255, v >> 8 & 255, v >> 16 & 255, v >> 24};
	fwrite(b, 1, 4, fp);
}

static int
toy_write(struct cg_file *f, const char *path, enum cg_compress c)
{
	struct cg_out o;

	(void)c;
	for (size_t i = 0; i < f->ntensors; i++)
		if (f->tensors[i]->dtype != CG_F32 ||
		    strlen(f->tensors[i]->name) > 255 ||
		    f->tensors[i]->nelem > UINT32_MAX)
			return cg_seterr("tensor %s: not one a toy file holds",
			                 f->tensors[i]->name);
	if (cg_out_open(&o, path) != 0)
		return -1;
	fwrite(MAGIC, 1, 4, o.fp);
	put32(o.fp, (uint32_t)f->ntensors);
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		const float *x = t->data;
		putc((int)strlen(t->name), o.fp);
		fputs(t->name, o.fp);
		put32(o.fp, (uint32_t)t->nelem);
		for (uint64_t k = 0; k < t->nelem; k++) {
			uint32_t u;
			memcpy(&u, &x[k], 4);
			put32(o.fp, u);
		}
	}
	if (ferror(o.fp) || cg_out_commit(&o) != 0) {
		cg_out_abort(&o);
		return cg_seterr("%s: write failed", path);
	}
	return 0;
}

const struct cg_format cg_format_toy = {
    .name = "toy",
    .probe_bytes = 4,
    .probe = toy_probe,
    .read_fd = toy_read_fd,
    .write = toy_write,
};

/* The registration hook: runs before main, so the program reads toy
 * files like those of any format of the list. */
__attribute__((constructor)) static void
register_toy(void)
{
	if (cg_format_register(&cg_format_toy) != 0) {
		fprintf(stderr, "format_toy: %s\n", cg_errmsg());
		abort();
	}
}
