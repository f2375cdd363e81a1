/*
 * file/frame.c - tensors framed one after another on a byte stream.
 *
 * The format is frame.h's.  Reads and writes go straight to the
 * descriptor (no stdio buffer: a frame is often a few megabytes, and a
 * peer must see each one whole when it is written); a big-endian host
 * turns the payload's words around through a small buffer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/util.h"
#include "file/frame.h"

static const char magic[4] = {'C', 'G', 'F', '1'};

/* ------------------------------------------------------------------ I/O */

/* All of buf [n] to fd; 0, or -1 with a message. */
static int
put(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return cg_seterr("pipe: %s", k < 0 ? strerror(errno)
			                                   : "short write");
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* buf [n] from fd: n, or fewer at the end of the stream, or -1 with a
 * message. */
static ssize_t
get(int fd, void *buf, size_t n)
{
	char *p = buf;
	size_t got = 0;

	while (got < n) {
		ssize_t k = read(fd, p + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return cg_seterr("pipe: %s", strerror(errno));
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

/* Exactly buf [n] of a frame begun; -1 with "truncated" if it ends. */
static int
get_all(int fd, void *buf, size_t n, const char *what)
{
	ssize_t k = get(fd, buf, n);

	if (k < 0)
		return -1;
	if ((size_t)k != n)
		return cg_seterr("frame %s: truncated", what);
	return 0;
}

static void
put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> 8 * i);
}

/* The payload's host words [n] of w bytes to fd, little-endian. */
static int
put_words(int fd, const void *data, size_t n, unsigned w)
{
	unsigned char tmp[1 << 16];
	const unsigned char *p = data;

	if (!CG_BIG_ENDIAN || w < 2)
		return put(fd, data, n);
	while (n > 0) {
		size_t k = n < sizeof(tmp) ? n : sizeof(tmp);
		memcpy(tmp, p, k);
		cg_le_words(tmp, k, w);
		if (put(fd, tmp, k) != 0)
			return -1;
		p += k;
		n -= k;
	}
	return 0;
}

/* ---------------------------------------------------------------- frames */

static int
name_ok(const char *s, size_t n)
{
	if (n < 1 || n > CG_FRAME_NAME)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		      s[i] == '_'))
			return 0;
	return 1;
}

int
cg_frame_write(int fd, const char *name, enum cg_dtype dt, int ndim,
               const uint64_t *shape, const void *data)
{
	unsigned char head[4 + 1 + CG_FRAME_NAME + 4 + 8 * CG_FRAME_DIMS + 8];
	size_t len = strlen(name), at = 0;
	uint64_t nelem = 1, nbytes;

	if (!name_ok(name, len) || (unsigned)dt >= CG_NDTYPES || ndim < 0 ||
	    ndim > CG_FRAME_DIMS)
		return cg_seterr("frame %s: bad name, dtype or rank", name);
	for (int i = 0; i < ndim; i++) {
		if (shape[i] != 0 && nelem > UINT64_MAX / shape[i])
			return cg_seterr("frame %s: too large", name);
		nelem *= shape[i];
	}
	if (cg_dtype_bytes(dt, nelem, &nbytes) != 0 || nbytes > SIZE_MAX)
		return cg_seterr("frame %s: too large", name);
	memcpy(head, magic, 4);
	at = 4;
	head[at++] = (unsigned char)len;
	memcpy(head + at, name, len);
	at += len;
	head[at++] = (unsigned char)dt;
	head[at++] = (unsigned char)ndim;
	head[at++] = 0;
	head[at++] = 0;
	for (int i = 0; i < ndim; i++, at += 8)
		put_le64(head + at, shape[i]);
	put_le64(head + at, nbytes);
	at += 8;
	if (put(fd, head, at) != 0 ||
	    put_words(fd, data, (size_t)nbytes, cg_dtype_word(dt)) != 0)
		return -1;
	return 0;
}

void
cg_frame_clear(struct cg_frame *f)
{
	if (f == NULL)
		return;
	free(f->data);
	memset(f, 0, sizeof(*f));
}

/* A frame's header into f (no payload); 1, 0 at the end of the stream
 * before it, -1 with a message. */
static int
read_head(int fd, struct cg_frame *f, uint64_t max_bytes)
{
	unsigned char b[8 * CG_FRAME_DIMS];
	uint64_t nelem = 1, want;
	ssize_t k;

	memset(f, 0, sizeof(*f));
	if ((k = get(fd, b, 5)) < 0)
		return -1;
	if (k == 0)
		return 0;
	if (k < 5)
		return cg_seterr("frame: truncated");
	if (memcmp(b, magic, 4) != 0)
		return cg_seterr("frame: bad magic (not a stream of frames)");
	size_t len = b[4];
	if (len < 1 || len > CG_FRAME_NAME)
		return cg_seterr("frame: name of %zu bytes", len);
	if (get_all(fd, f->name, len, "name") != 0)
		return -1;
	f->name[len] = '\0';
	if (!name_ok(f->name, len))
		return cg_seterr("frame: a name not of [a-z0-9._]");
	if (get_all(fd, b, 4, f->name) != 0)
		return -1;
	if (b[0] >= CG_NDTYPES || b[1] > CG_FRAME_DIMS || b[2] || b[3])
		return cg_seterr("frame %s: bad dtype or rank", f->name);
	f->dtype = (enum cg_dtype)b[0];
	f->ndim = b[1];
	if (get_all(fd, b, 8 * (size_t)f->ndim, f->name) != 0)
		return -1;
	for (int i = 0; i < f->ndim; i++) {
		f->shape[i] = cg_get_le64(b + 8 * i);
		if (f->shape[i] != 0 && nelem > UINT64_MAX / f->shape[i])
			return cg_seterr("frame %s: shape too large", f->name);
		nelem *= f->shape[i];
	}
	if (get_all(fd, b, 8, f->name) != 0)
		return -1;
	f->nbytes = cg_get_le64(b);
	if (cg_dtype_bytes(f->dtype, nelem, &want) != 0 || want != f->nbytes)
		return cg_seterr("frame %s: %llu bytes, not what its shape "
		                 "says",
		                 f->name, (unsigned long long)f->nbytes);
	if (f->nbytes > max_bytes || f->nbytes > SIZE_MAX / 2)
		return cg_seterr("frame %s: %llu bytes, more than %llu",
		                 f->name, (unsigned long long)f->nbytes,
		                 (unsigned long long)max_bytes);
	return 1;
}

/* The payload of a frame whose header is f into buf [f->nbytes]. */
static int
read_body(int fd, const struct cg_frame *f, void *buf)
{
	if (get_all(fd, buf, (size_t)f->nbytes, f->name) != 0)
		return -1;
	cg_le_words(buf, (size_t)f->nbytes, cg_dtype_word(f->dtype));
	return 0;
}

int
cg_frame_read(int fd, struct cg_frame *f, uint64_t max_bytes)
{
	int rc = read_head(fd, f, max_bytes);

	if (rc <= 0)
		return rc;
	if (f->nbytes > 0) {
		if ((f->data = malloc((size_t)f->nbytes)) == NULL)
			return cg_seterr("frame %s: out of memory", f->name);
		if (read_body(fd, f, f->data) != 0) {
			cg_frame_clear(f);
			return -1;
		}
	}
	return 1;
}

int
cg_frame_expect(int fd, const char *name, enum cg_dtype dt, int ndim,
                const uint64_t *shape, void *out)
{
	struct cg_frame f;
	int rc = read_head(fd, &f, UINT64_MAX);

	if (rc < 0)
		return -1;
	if (rc == 0)
		return cg_seterr("frame %s expected: the stream ended", name);
	if (strcmp(f.name, name) != 0)
		return cg_seterr("frame %s expected: came %s", name, f.name);
	int same = f.dtype == dt && f.ndim == ndim;
	for (int i = 0; same && i < ndim; i++)
		same = f.shape[i] == shape[i];
	if (!same)
		return cg_seterr("frame %s: not of the dtype and shape "
		                 "expected",
		                 name);
	return f.nbytes ? read_body(fd, &f, out) : 0;
}
