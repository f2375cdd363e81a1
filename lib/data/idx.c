/*
 * data/idx.c - reading IDX image and label files (MNIST, Fashion-MNIST) into a
 * dataset.
 *
 * Only unsigned-byte IDX files are read: images of 3 dimensions (N, H, W) or
 * 4 (N, H, W, C), labels of one.  Files may be plain or gzip (zlib reads
 * both).  Input is hostile: the magic, the dimensions and the counts are
 * checked against sane limits and, for a plain file, against its size
 * before anything is allocated; a gzip stream, whose real length is unknown
 * up front, is read into a buffer that grows only as data arrives.  A short
 * file, a corrupt stream and trailing bytes are all errors.
 *
 * A directory of IDX files is searched for a pair under MNIST's names
 * (train-images-idx3-ubyte, ...), and a Fashion-MNIST pair gets its class
 * names: what a dataset's files say about it, beyond their bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "data/idx.h"
#include "data/reread.h"

#define IDX_U8 0x08
#define IDX_MAX_SIDE 16384 /* pixels along one image side */
#define IDX_MAX_CHANNELS 4
#define IDX_MAX_IMAGE (64u << 20)   /* bytes of one image */
#define IDX_FIRST_ALLOC (16u << 20) /* before a gzip stream proves longer */

/* An open IDX file: the stream, its name, and its size if plain. */
struct idx {
	gzFile gz;
	const char *name;
	uint64_t fsize; /* bytes of a regular, uncompressed file; else 0 */
	int ndim;
	uint32_t dim[4];
};

/* Open fd (taken, closed on failure too) as the IDX file name. */
static int
idx_open_fd(struct idx *x, int fd, const char *name)
{
	struct stat st;

	memset(x, 0, sizeof(*x));
	x->name = name;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return cg_seterr("%s: is a directory", x->name);
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		x->fsize = (uint64_t)st.st_size;
	if ((x->gz = gzdopen(fd, "rb")) == NULL) {
		close(fd);
		return cg_seterr("%s: out of memory", x->name);
	}
	gzbuffer(x->gz, 1u << 17);
	return 0;
}

static int
idx_open(struct idx *x, const char *path)
{
	const char *name = strcmp(path, "-") == 0 ? "(stdin)" : path;
	int fd =
	    strcmp(path, "-") == 0 ? dup(STDIN_FILENO) : open(path, O_RDONLY);

	if (fd < 0) {
		memset(x, 0, sizeof(*x));
		return cg_seterr("%s: %s", name, strerror(errno));
	}
	return idx_open_fd(x, fd, name);
}

static void
idx_close(struct idx *x)
{
	if (x->gz)
		gzclose_r(x->gz);
	x->gz = NULL;
}

/*
 * Read up to n bytes; returns the count read (short only at the end of the
 * stream) or -1 with a message on a read or decompression error.
 */
static int64_t
idx_read(struct idx *x, void *buf, uint64_t n)
{
	uint64_t have = 0;
	int errnum;

	while (have < n) {
		unsigned chunk =
		    n - have > (1u << 30) ? (1u << 30) : (unsigned)(n - have);
		int got = gzread(x->gz, (char *)buf + have, chunk);
		if (got < 0) {
			const char *msg = gzerror(x->gz, &errnum);
			return cg_seterr("%s: %s", x->name,
			                 errnum == Z_ERRNO ? strerror(errno)
			                                   : msg);
		}
		if (got == 0) {
			/* zlib reports a cut-off gzip stream only here */
			const char *msg = gzerror(x->gz, &errnum);
			if (errnum != Z_OK && errnum != Z_BUF_ERROR)
				return cg_seterr("%s: %s", x->name, msg);
			if (errnum == Z_BUF_ERROR)
				return cg_seterr("%s: truncated gzip stream",
				                 x->name);
			break;
		}
		have += (uint64_t)got;
	}
	return (int64_t)have;
}

/*
 * Read and check the header: magic 0 0 type ndim, then ndim big-endian
 * 32-bit sizes.  want is the number of dimensions allowed (3 also allows 4
 * for images with channels).
 */
static int
idx_header(struct idx *x, int want)
{
	unsigned char m[4], b[16];
	int64_t got;

	if ((got = idx_read(x, m, 4)) < 0)
		return -1;
	if (got < 4)
		return cg_seterr("%s: too short for an IDX file", x->name);
	if (m[0] != 0 || m[1] != 0)
		return cg_seterr("%s: bad magic %02x%02x%02x%02x (not an IDX "
		                 "file)",
		                 x->name, m[0], m[1], m[2], m[3]);
	if (m[2] != IDX_U8)
		return cg_seterr("%s: IDX element type 0x%02x, only unsigned "
		                 "bytes (0x08) are supported",
		                 x->name, m[2]);
	if (!(m[3] == want || (want == 3 && m[3] == 4)))
		return cg_seterr("%s: %d dimensions, expected %s", x->name,
		                 m[3],
		                 want == 1 ? "1 (labels)" : "3 or 4 (images)");
	x->ndim = m[3];
	if ((got = idx_read(x, b, 4 * (uint64_t)x->ndim)) < 0)
		return -1;
	if (got < 4 * x->ndim)
		return cg_seterr("%s: truncated IDX header", x->name);
	for (int i = 0; i < x->ndim; i++)
		x->dim[i] = (uint32_t)b[4 * i] << 24 |
		            (uint32_t)b[4 * i + 1] << 16 |
		            (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
	/* The size on disk bounds the data only when it is not compressed. */
	if (!gzdirect(x->gz))
		x->fsize = 0;
	return 0;
}

/*
 * Read exactly n bytes of body into a new buffer.  A plain file's size was
 * checked already, so the buffer is taken whole; a compressed stream gets
 * a buffer that doubles as data really arrives, so a lying header costs no
 * more memory than the stream holds.  what names the data in messages.
 */
static uint8_t *
idx_body(struct idx *x, uint64_t n, const char *what)
{
	uint64_t cap, have = 0;
	uint8_t *buf, *nb;
	int64_t got;

	cap = x->fsize == 0 && n > IDX_FIRST_ALLOC ? IDX_FIRST_ALLOC : n;
	if ((buf = malloc(cap ? cap : 1)) == NULL) {
		cg_seterr("%s: out of memory", x->name);
		return NULL;
	}
	while (have < n) {
		if (have == cap) {
			cap = cap * 2 > n ? n : cap * 2;
			if ((nb = realloc(buf, cap)) == NULL) {
				cg_seterr("%s: out of memory", x->name);
				goto fail;
			}
			buf = nb;
		}
		if ((got = idx_read(x, buf + have, cap - have)) < 0)
			goto fail;
		have += (uint64_t)got;
		if (have < cap) {
			cg_seterr("%s: truncated (%llu of %llu bytes of %s)",
			          x->name, (unsigned long long)have,
			          (unsigned long long)n, what);
			goto fail;
		}
	}
	return buf;
fail:
	free(buf);
	return NULL;
}

/* After the last wanted byte: the stream must end here. */
static int
idx_end(struct idx *x)
{
	unsigned char c;
	int64_t got = idx_read(x, &c, 1);

	if (got < 0)
		return -1;
	if (got > 0)
		return cg_seterr("%s: trailing bytes after the data", x->name);
	return 0;
}

/* A plain file must be exactly header + body long. */
static int
idx_check_size(const struct idx *x, uint64_t body)
{
	uint64_t want = 4 + 4 * (uint64_t)x->ndim + body;

	if (x->fsize == 0)
		return 0;
	if (x->fsize < want)
		return cg_seterr("%s: truncated (%llu bytes, the header "
		                 "promises %llu)",
		                 x->name, (unsigned long long)x->fsize,
		                 (unsigned long long)want);
	if (x->fsize > want)
		return cg_seterr("%s: %llu trailing bytes after the data",
		                 x->name,
		                 (unsigned long long)(x->fsize - want));
	return 0;
}

static int
default_names(struct cg_dataset *d)
{
	uint32_t max = 9;
	char buf[16];

	for (uint64_t i = 0; i < d->n; i++)
		if (d->cond[i] > max)
			max = d->cond[i];
	if ((d->conditions = calloc(max + 1, sizeof(char *))) == NULL)
		return cg_seterr("out of memory");
	d->nconditions = max + 1;
	for (uint32_t c = 0; c <= max; c++) {
		snprintf(buf, sizeof(buf), "%u", c);
		if ((d->conditions[c] = strdup(buf)) == NULL)
			return cg_seterr("out of memory");
	}
	return 0;
}

/* ------------------------------------------------------ reading again */

/* What a streamed IDX dataset reads its images again from. */
struct idx_fetch {
	struct cg_reread *rr;
	uint64_t head; /* bytes of the header */
	uint64_t per;  /* bytes of one image */
};

static int
idx_refetch(void *ctx, uint64_t i, uint8_t *out)
{
	struct idx_fetch *x = ctx;

	return cg_reread_at(x->rr, x->head + i * x->per, out, (size_t)x->per);
}

static void
idx_fetch_free(void *ctx)
{
	struct idx_fetch *x = ctx;

	if (x) {
		cg_reread_free(x->rr);
		free(x);
	}
}

/*
 * The pixels of a streamed dataset's n images, read once through: a
 * gzip stream must prove its length and its checksum, and a hashed split
 * wants each image's hash (hash [n], or NULL), which only the bytes
 * give.  A plain file whose size was checked and no hashes: nothing to
 * read.
 */
static int
idx_pass(struct idx *x, uint64_t n, uint64_t per, uint64_t *hash, uint64_t seed)
{
	uint8_t *buf;
	int64_t got;
	int rc = -1;

	if (gzdirect(x->gz) && hash == NULL)
		return 0;
	if ((buf = malloc(per)) == NULL)
		return cg_seterr("%s: out of memory", x->name);
	for (uint64_t i = 0; i < n; i++) {
		if ((got = idx_read(x, buf, per)) < 0)
			goto out;
		if ((uint64_t)got < per) {
			cg_seterr("%s: truncated (%llu of %llu bytes of "
			          "pixels)",
			          x->name,
			          (unsigned long long)(i * per + (uint64_t)got),
			          (unsigned long long)(n * per));
			goto out;
		}
		if (hash)
			hash[i] = cg_payload_hash(buf, per, seed);
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

/*
 * cg_idx_load, or with rr (the images opened to be read again) a
 * dataset that leaves its pixels in the file (fetch), with each image's
 * hash of seed *hash_seed where hash_seed is not NULL.
 */
static int
idx_load(const char *images, const char *labels, uint64_t limit,
         struct cg_reread *rr, const uint64_t *hash_seed,
         struct cg_dataset *out)
{
	const char *imname = strcmp(images, "-") == 0 ? "(stdin)" : images;
	struct idx im = {0}, lb = {0};
	struct cg_dataset d = {0};
	struct idx_fetch *fx = NULL;
	uint64_t n, total, per, h, w, c;
	uint8_t *lab = NULL;
	int fd;

	memset(out, 0, sizeof(*out));
	if (strcmp(images, "-") == 0 && strcmp(labels, "-") == 0) {
		cg_seterr("images and labels cannot both be standard input");
		goto fail;
	}
	if (rr) {
		if ((fd = cg_reread_fd(rr)) < 0 ||
		    idx_open_fd(&im, fd, imname) != 0)
			goto fail;
	} else if (idx_open(&im, images) != 0) {
		goto fail;
	}
	if (idx_header(&im, 3) != 0)
		goto fail;
	if (idx_open(&lb, labels) != 0 || idx_header(&lb, 1) != 0)
		goto fail;

	total = im.dim[0];
	h = im.dim[1];
	w = im.dim[2];
	c = im.ndim == 4 ? im.dim[3] : 1;
	if (h == 0 || w == 0 || h > IDX_MAX_SIDE || w > IDX_MAX_SIDE ||
	    c == 0 || c > IDX_MAX_CHANNELS || h * w * c > IDX_MAX_IMAGE) {
		cg_seterr("%s: image shape %llux%llux%llu out of range",
		          im.name, (unsigned long long)h, (unsigned long long)w,
		          (unsigned long long)c);
		goto fail;
	}
	per = h * w * c;
	if (lb.dim[0] != total) {
		cg_seterr("%s: %u labels for %llu images in %s", lb.name,
		          lb.dim[0], (unsigned long long)total, im.name);
		goto fail;
	}
	if (idx_check_size(&im, total * per) != 0 ||
	    idx_check_size(&lb, total) != 0)
		goto fail;
	n = limit > 0 && limit < total ? limit : total;
	if (n == 0) {
		cg_seterr("%s: no examples", im.name);
		goto fail;
	}
	if (n > CG_SHARD_MAX_EXAMPLES ||
	    (rr == NULL && n * per > cg_max_bytes())) {
		cg_seterr("%s: %llu images of %llu bytes exceed the limit "
		          "(CG_MAX_BYTES)",
		          im.name, (unsigned long long)n,
		          (unsigned long long)per);
		goto fail;
	}

	/* Labels first: they are small and catch a mismatched pair early. */
	if ((lab = idx_body(&lb, n, "labels")) == NULL)
		goto fail;
	if (rr) {
		if (hash_seed &&
		    (d.hash = malloc(n * sizeof(*d.hash))) == NULL) {
			cg_seterr("%s: out of memory", im.name);
			goto fail;
		}
		if (idx_pass(&im, n, per, d.hash, hash_seed ? *hash_seed : 0) !=
		    0)
			goto fail;
		d.hash_seed = hash_seed ? *hash_seed : 0;
	} else if ((d.payload = idx_body(&im, n * per, "pixels")) == NULL) {
		goto fail;
	}
	/* (a plain file whose pixels the pass left unread was measured) */
	if (n == total && (idx_end(&lb) != 0 ||
	                   ((rr == NULL || !gzdirect(im.gz) || hash_seed) &&
	                    idx_end(&im) != 0)))
		goto fail;
	/* the first pass is over: the file is read again from here on */
	idx_close(&im);

	d.n = n;
	d.kind = CG_PAYLOAD_IMAGE;
	d.height = (uint32_t)h;
	d.width = (uint32_t)w;
	d.channels = (uint32_t)c;
	d.cond = malloc(n * sizeof(*d.cond));
	d.index = malloc(n * sizeof(*d.index));
	d.offset = malloc((n + 1) * sizeof(*d.offset));
	if (d.cond == NULL || d.index == NULL || d.offset == NULL) {
		cg_seterr("%s: out of memory", im.name);
		goto fail;
	}
	for (uint64_t i = 0; i < n; i++) {
		d.cond[i] = lab[i];
		d.index[i] = i;
		d.offset[i] = i * per;
	}
	d.offset[n] = n * per;
	if (default_names(&d) != 0)
		goto fail;
	if (rr) {
		if ((fx = malloc(sizeof(*fx))) == NULL) {
			cg_seterr("%s: out of memory", im.name);
			goto fail;
		}
		fx->rr = rr;
		fx->head = 4 + 4 * (uint64_t)im.ndim;
		fx->per = per;
		d.fetch = idx_refetch;
		d.fetch_free = idx_fetch_free;
		d.fetch_ctx = fx;
		rr = NULL;
	}
	free(lab);
	idx_close(&lb);
	*out = d;
	return 0;
fail:
	free(lab);
	idx_close(&im);
	idx_close(&lb);
	cg_dataset_free(&d);
	cg_reread_free(rr);
	return -1;
}

int
cg_idx_load(const char *images, const char *labels, uint64_t limit,
            struct cg_dataset *out)
{
	return idx_load(images, labels, limit, NULL, NULL, out);
}

int
cg_idx_stream(const char *images, const char *labels, uint64_t limit,
              const uint64_t *hash_seed, struct cg_dataset *out)
{
	struct cg_reread *rr;

	memset(out, 0, sizeof(*out));
	if (strcmp(images, "-") == 0 && strcmp(labels, "-") == 0)
		return cg_seterr("images and labels cannot both be standard "
		                 "input");
	if ((rr = cg_reread_open(images, strcmp(images, "-") == 0 ? "(stdin)"
	                                                          : images)) ==
	    NULL)
		return -1;
	return idx_load(images, labels, limit, rr, hash_seed, out);
}

/* ------------------------------------------------- pairs in a directory */

/*
 * DIR/SET-WHAT-idxD-ubyte, or the same with ".gz", or with ".idx" for
 * "-idx" (and ".gz"): the first that is a regular file, in *path (a new
 * string), or NULL when none is.  Returns 0, or -1 with a message when
 * out of memory.
 */
static int
find_one(const char *dir, const char *set, const char *what, char **path)
{
	int dims = strcmp(what, "images") == 0 ? 3 : 1;
	struct stat st;

	*path = NULL;
	for (int i = 0; i < 4; i++) {
		char *p;
		if (asprintf(&p, "%s/%s-%s%cidx%d-ubyte%s", dir, set, what,
		             i < 2 ? '-' : '.', dims, i % 2 ? ".gz" : "") < 0)
			return cg_seterr("out of memory");
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			*path = p;
			return 0;
		}
		free(p);
	}
	return 0;
}

int
cg_idx_find(const char *dir, const char *set, char *pair[2])
{
	pair[0] = pair[1] = NULL;
	if (find_one(dir, set, "images", &pair[0]) != 0 ||
	    find_one(dir, set, "labels", &pair[1]) != 0)
		goto fail;
	if (pair[0] == NULL || pair[1] == NULL) {
		cg_seterr("%s: no %s-%s-idx%d-ubyte[.gz] here", dir, set,
		          pair[0] ? "labels" : "images", pair[0] ? 1 : 3);
		goto fail;
	}
	return 0;
fail:
	free(pair[0]);
	free(pair[1]);
	pair[0] = pair[1] = NULL;
	return -1;
}

int
cg_idx_dir(const char *dir)
{
	static const char *const sets[] = {"train", "t10k"};
	char *p = NULL;
	int found;

	for (int i = 0; i < 2 && p == NULL; i++)
		if (find_one(dir, sets[i], "images", &p) != 0)
			return 0;
	found = p != NULL;
	free(p);
	return found;
}

int
cg_idx_name_conditions(struct cg_dataset *d, const char *images)
{
	if (strcasestr(images, "fashion") == NULL || d->nconditions != 10)
		return 0;
	return cg_dataset_set_conditions(d, cg_fashion_mnist_names, 10);
}
