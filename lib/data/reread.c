/*
 * data/reread.c - an input read again at the offsets of its bytes.
 *
 * A plain file is read with pread.  A gzip file has no offsets but its
 * decompressed stream's: read alone, it is inflated once more into an
 * unlinked temporary file, which then stands for it (disk the size of
 * the decompressed input, in $TMPDIR, else /tmp); one of many (a fortune
 * directory's files, closed between reads) is inflated forward from
 * where the last read ended, and from the start again when a read goes
 * back.  Standard input cannot be read again: it is copied to an
 * unlinked temporary file first, which then stands for it.
 *
 * A file that changes between the reads would give the shards other
 * bytes than those the first pass counted: each read checks the file's
 * inode, size and modification time against those of the first open,
 * and a stream that ends early is the same error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "data/reread.h"

#include "cg.h"

#define SKIP_CHUNK (1u << 16)

struct cg_reread {
	char *path;   /* NULL for standard input's copy */
	char *name;   /* for messages */
	int fd;       /* -1 while resting */
	int gzip;     /* the input is a gzip stream */
	gzFile gz;    /* gzip: the stream being read, or NULL */
	uint64_t pos; /* gzip: the decompressed offset gz is at */
	int rested;   /* one of many files, closed between reads */
	unsigned char *skip;
	struct stat st; /* as first opened */
};

static int
changed(const struct cg_reread *r)
{
	return cg_seterr("%s: changed while it was read", r->name);
}

/* Whether the file behind fd is still the one first opened. */
static int
same_file(const struct cg_reread *r, int fd)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return cg_seterr("%s: %s", r->name, strerror(errno));
	if (st.st_dev != r->st.st_dev || st.st_ino != r->st.st_ino ||
	    st.st_size != r->st.st_size ||
	    st.st_mtim.tv_sec != r->st.st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != r->st.st_mtim.tv_nsec)
		return changed(r);
	return 0;
}

/* An unlinked temporary file in $TMPDIR (else /tmp): its descriptor,
 * or -1 with a message naming name. */
static int
tmpfile_in(const char *name)
{
	const char *dir = getenv("TMPDIR");
	char *tmp = NULL;
	int fd;

	if (dir == NULL || *dir == '\0')
		dir = "/tmp";
	if (asprintf(&tmp, "%s/cg-input.XXXXXX", dir) < 0) {
		cg_seterr("%s: out of memory", name);
		return -1;
	}
	if ((fd = mkstemp(tmp)) < 0)
		cg_seterr("%s: a copy in %s: %s", name, dir, strerror(errno));
	else
		unlink(tmp);
	free(tmp);
	return fd;
}

/* Write all n bytes of buf to fd: 0, or -1 with a message. */
static int
put(int fd, const unsigned char *buf, size_t n, const char *name)
{
	while (n > 0) {
		ssize_t k = write(fd, buf, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return cg_seterr("%s: a temporary copy: %s", name,
			                 strerror(errno));
		buf += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Copy what is left of in to an unlinked temporary file: its descriptor,
 * or -1 with a message. */
static int
spool(int in, const char *name)
{
	unsigned char *buf = malloc(SKIP_CHUNK);
	int fd = -1;
	ssize_t got;

	if (buf == NULL) {
		cg_seterr("%s: out of memory", name);
		return -1;
	}
	if ((fd = tmpfile_in(name)) < 0)
		goto out;
	for (;;) {
		got = read(in, buf, SKIP_CHUNK);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			cg_seterr("%s: %s", name, strerror(errno));
			goto fail;
		}
		if (got == 0)
			break;
		if (put(fd, buf, (size_t)got, name) != 0)
			goto fail;
	}
	goto out;
fail:
	close(fd);
	fd = -1;
out:
	free(buf);
	return fd;
}

struct cg_reread *
cg_reread_open(const char *path, const char *name)
{
	struct cg_reread *r = calloc(1, sizeof(*r));
	unsigned char magic[2];

	if (r != NULL)
		r->fd = -1;
	if (r == NULL || (r->name = strdup(name)) == NULL ||
	    (strcmp(path, "-") != 0 && (r->path = strdup(path)) == NULL)) {
		cg_seterr("%s: out of memory", name);
		goto fail;
	}
	r->fd = r->path ? open(path, O_RDONLY | O_CLOEXEC)
	                : spool(STDIN_FILENO, name);
	if (r->fd < 0) {
		if (r->path)
			cg_seterr("%s: %s", name, strerror(errno));
		goto fail;
	}
	if (fstat(r->fd, &r->st) != 0) {
		cg_seterr("%s: %s", name, strerror(errno));
		goto fail;
	}
	if (S_ISDIR(r->st.st_mode)) {
		cg_seterr("%s: is a directory", name);
		goto fail;
	}
	if (!S_ISREG(r->st.st_mode)) {
		/* a pipe or a device is read once: a copy of it, as stdin */
		int fd = r->fd;
		r->fd = spool(fd, name);
		close(fd);
		if (r->fd < 0)
			goto fail;
		if (fstat(r->fd, &r->st) != 0) {
			cg_seterr("%s: %s", name, strerror(errno));
			goto fail;
		}
		free(r->path);
		r->path = NULL;
	}
	r->gzip = pread(r->fd, magic, 2, 0) == 2 && magic[0] == 0x1f &&
	          magic[1] == 0x8b;
	return r;
fail:
	cg_reread_free(r);
	return NULL;
}

int
cg_reread_fd(struct cg_reread *r)
{
	int fd;

	if (r->fd < 0 && r->path) {
		/* a resting input: opened again, as the first time */
		if ((r->fd = open(r->path, O_RDONLY | O_CLOEXEC)) < 0)
			return cg_seterr("%s: %s", r->name, strerror(errno));
		if (same_file(r, r->fd) != 0)
			return -1;
	}
	if ((fd = dup(r->fd)) < 0 || lseek(fd, 0, SEEK_SET) != 0) {
		cg_seterr("%s: %s", r->name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Read exactly n bytes at offset off of a plain file. */
static int
plain_at(struct cg_reread *r, uint64_t off, unsigned char *buf, size_t n)
{
	while (n > 0) {
		ssize_t k = pread(r->fd, buf, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return cg_seterr("%s: %s", r->name, strerror(errno));
		if (k == 0)
			return changed(r);
		buf += k;
		off += (uint64_t)k;
		n -= (size_t)k;
	}
	return 0;
}

/* Up to n decompressed bytes into buf (NULL: into the skip buffer, n at
 * most its size); the count, short only at the end, or -1. */
static int64_t
gz_get(struct cg_reread *r, unsigned char *buf, size_t n)
{
	size_t have = 0;
	int errnum;

	while (have < n) {
		unsigned chunk =
		    n - have > (1u << 30) ? (1u << 30) : (unsigned)(n - have);
		int got = gzread(r->gz, (buf ? buf : r->skip) + have, chunk);
		if (got < 0) {
			const char *msg = gzerror(r->gz, &errnum);
			return cg_seterr("%s: %s", r->name,
			                 errnum == Z_ERRNO ? strerror(errno)
			                                   : msg);
		}
		if (got == 0)
			break;
		have += (size_t)got;
	}
	r->pos += have;
	return (int64_t)have;
}

/*
 * The gzip input r inflated once into an unlinked temporary file, which
 * then stands for it as a plain file: later reads are preads, not
 * passes over the stream from its start.  0, or -1 with a message.
 */
static int
inflate_copy(struct cg_reread *r)
{
	int fd = cg_reread_fd(r), out = -1;
	int64_t got;

	if (fd < 0)
		return -1;
	if ((r->gz = gzdopen(fd, "rb")) == NULL) {
		close(fd);
		return cg_seterr("%s: out of memory", r->name);
	}
	gzbuffer(r->gz, 1u << 17);
	r->pos = 0;
	if ((r->skip == NULL && (r->skip = malloc(SKIP_CHUNK)) == NULL)) {
		cg_seterr("%s: out of memory", r->name);
		goto fail;
	}
	if ((out = tmpfile_in(r->name)) < 0)
		goto fail;
	while ((got = gz_get(r, NULL, SKIP_CHUNK)) > 0)
		if (put(out, r->skip, (size_t)got, r->name) != 0)
			goto fail;
	if (got < 0 || same_file(r, r->fd) != 0 || fstat(out, &r->st) != 0)
		goto fail;
	gzclose_r(r->gz);
	r->gz = NULL;
	close(r->fd);
	r->fd = out;
	r->gzip = 0;
	free(r->path);
	r->path = NULL;
	return 0;
fail:
	if (out >= 0)
		close(out);
	gzclose_r(r->gz);
	r->gz = NULL;
	return -1;
}

static int
gzip_at(struct cg_reread *r, uint64_t off, unsigned char *buf, size_t n)
{
	int64_t got;

	/* An input read alone is inflated once more, into a copy; one of
	 * many files (a fortune directory) is not, or every one would
	 * hold a descriptor and a copy. */
	if (r->gz == NULL && !r->rested) {
		if (inflate_copy(r) != 0)
			return -1;
		return plain_at(r, off, buf, n);
	}

	if (r->gz != NULL && off < r->pos) {
		gzclose_r(r->gz);
		r->gz = NULL;
	}
	if (r->gz == NULL) {
		int fd = cg_reread_fd(r);
		if (fd < 0)
			return -1;
		if ((r->gz = gzdopen(fd, "rb")) == NULL) {
			close(fd);
			return cg_seterr("%s: out of memory", r->name);
		}
		gzbuffer(r->gz, 1u << 17);
		r->pos = 0;
	}
	if (r->skip == NULL && (r->skip = malloc(SKIP_CHUNK)) == NULL)
		return cg_seterr("%s: out of memory", r->name);
	while (r->pos < off) {
		uint64_t k =
		    off - r->pos < SKIP_CHUNK ? off - r->pos : SKIP_CHUNK;
		if ((got = gz_get(r, NULL, (size_t)k)) < 0)
			return -1;
		if ((uint64_t)got < k)
			return changed(r);
	}
	if ((got = gz_get(r, buf, n)) < 0)
		return -1;
	if ((size_t)got < n)
		return changed(r);
	return 0;
}

int
cg_reread_at(struct cg_reread *r, uint64_t off, void *buf, size_t n)
{
	if (r->fd < 0 && r->path) {
		if ((r->fd = open(r->path, O_RDONLY | O_CLOEXEC)) < 0)
			return cg_seterr("%s: %s", r->name, strerror(errno));
	}
	if (same_file(r, r->fd) != 0)
		return -1;
	return r->gzip ? gzip_at(r, off, buf, n) : plain_at(r, off, buf, n);
}

void
cg_reread_rest(struct cg_reread *r)
{
	if (r == NULL || r->path == NULL)
		return;
	r->rested = 1;
	if (r->gz)
		gzclose_r(r->gz);
	r->gz = NULL;
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	free(r->skip);
	r->skip = NULL;
}

void
cg_reread_free(struct cg_reread *r)
{
	if (r == NULL)
		return;
	if (r->gz)
		gzclose_r(r->gz);
	if (r->fd >= 0)
		close(r->fd);
	free(r->skip);
	free(r->path);
	free(r->name);
	free(r);
}
