/*
 * file/container.c - reading and writing cg files (a tar archive of tensors).
 *
 * A cg file is a ustar/pax archive: "cg.json" first (the manifest, with each
 * tensor's name, dtype, shape, byte length and SHA-256), then one member per
 * tensor in manifest order, then optionally "cg.sig".  Readers accept plain,
 * gzip and zstd input from a file or a pipe and trust nothing: every size is
 * checked against limits and against the member's real length before memory
 * is committed, and every digest is verified.  Writers produce the same bytes
 * for the same tensors: no time, owner or host goes into the archive.
 */
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "cg.h"
#include "file/format.h"
#include "file/magic.h"
#include "file/seal.h"
#include "file/sign.h"

#define MANIFEST_NAME "cg.json"
#define SIG_NAME CG_SIG_MEMBER

uint64_t
cg_max_bytes(void)
{
	const char *s = getenv("CG_MAX_BYTES");
	char *end;
	unsigned long long v;

	if (s && *s) {
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno == 0 && *end == '\0' && v > 0)
			return v;
	}
	return 8ULL << 30;
}

/* --------------------------------------------------------- a late digest */

/*
 * One tensor's digest, verified by a thread of its own (cg_file_read_late).
 * It hashes in steps and looks at stop between them, so that a file freed
 * before the end (another input refused) waits one step, not the whole.
 */
struct cg_late {
	pthread_t thread;
	const struct cg_tensor *t;
	int mapped; /* t lies in the file's mapping */
	atomic_int stop;
	atomic_int verdict; /* 0 running, 1 matched, -1 not */
	int joined;
};

#define LATE_STEP (4u << 20)

/* Drop this process's copy of the whole pages of p [n] of a mapped file
 * (a page shared with a neighbour is the neighbour's too); the bytes
 * stay in the page cache, and a later touch maps them again. */
static void
page_out(const void *p, size_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)p + n) & ~(page - 1);

	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void *
late_run(void *arg)
{
	struct cg_late *l = arg;
	const unsigned char *p = l->t->data;
	uint64_t left = l->t->nbytes;
	unsigned char dg[32];
	unsigned int len = 32;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok = c != NULL && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1;

	while (ok && left > 0 && !atomic_load(&l->stop)) {
		size_t n = left > LATE_STEP ? LATE_STEP : (size_t)left;
		ok = EVP_DigestUpdate(c, p, n) == 1;
		/* hashed pages are not kept: a tensor larger than memory
		 * is read through, not held */
		if (l->mapped)
			page_out(p, n);
		p += n;
		left -= n;
	}
	ok = ok && left == 0 && EVP_DigestFinal_ex(c, dg, &len) == 1 &&
	     memcmp(dg, l->t->sha256, 32) == 0;
	EVP_MD_CTX_free(c);
	atomic_store(&l->verdict, ok ? 1 : -1);
	return NULL;
}

/* Verify t's digest on a thread of f's; -1 (nothing begun) if no thread
 * can be had. */
static int
late_begin(struct cg_file *f, const struct cg_tensor *t, int mapped)
{
	struct cg_late *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return -1;
	l->t = t;
	l->mapped = mapped;
	atomic_init(&l->stop, 0);
	atomic_init(&l->verdict, 0);
	if (pthread_create(&l->thread, NULL, late_run, l) != 0) {
		free(l);
		return -1;
	}
	f->late = l;
	return 0;
}

int
cg_file_late(struct cg_file *f, int wait)
{
	struct cg_late *l = f->late;

	if (l == NULL)
		return 0;
	if (!l->joined) {
		if (!wait && atomic_load(&l->verdict) == 0)
			return 1;
		pthread_join(l->thread, NULL);
		l->joined = 1;
	}
	if (atomic_load(&l->verdict) > 0)
		return 0;
	return cg_seterr("tensor %s: digest mismatch (file truncated or "
			 "altered)",
			 l->t->name);
}

/* Stop f's thread, if any, before its tensors go. */
static void
late_end(struct cg_file *f)
{
	struct cg_late *l = f->late;

	if (l == NULL)
		return;
	atomic_store(&l->stop, 1);
	if (!l->joined)
		pthread_join(l->thread, NULL);
	free(l);
	f->late = NULL;
}

/* ------------------------------------------------------------ in memory */

struct cg_file *
cg_file_new(const char *kind)
{
	struct cg_file *f = calloc(1, sizeof(*f));

	if (f == NULL || (f->manifest = cJSON_CreateObject()) == NULL) {
		free(f);
		cg_seterr("out of memory");
		return NULL;
	}
	cJSON_AddStringToObject(f->manifest, "format", CG_FORMAT);
	cJSON_AddStringToObject(f->manifest, "kind", kind);
	return f;
}

void
cg_file_free(struct cg_file *f)
{
	if (f == NULL)
		return;
	late_end(f);
	for (size_t i = 0; i < f->ntensors; i++) {
		if (!f->tensors[i]->borrowed)
			free(f->tensors[i]->data);
		free(f->tensors[i]);
	}
	free(f->tensors);
	free(f->index);
	if (f->blob)
		munmap(f->blob, f->blob_anon ? cg_unsealed_len(f->blob_size)
					     : f->blob_size);
	cJSON_Delete(f->manifest);
	free(f);
}

void
cg_file_drop_blob(struct cg_file *f)
{
	if (f == NULL || f->blob == NULL)
		return;
	for (size_t i = 0; i < f->ntensors; i++) {
		const char *d = f->tensors[i]->data;
		if (d >= (const char *)f->blob &&
		    d < (const char *)f->blob + f->blob_size)
			return;
	}
	munmap(f->blob, f->blob_anon ? cg_unsealed_len(f->blob_size)
				     : f->blob_size);
	f->blob = NULL;
	f->blob_size = 0;
	f->blob_anon = 0;
}

int
cg_file_page_out(const struct cg_file *f, const struct cg_tensor *t)
{
	const char *d = t->data, *b = f->blob;

	if (d == NULL || !t->borrowed || b == NULL || f->blob_anon || d < b ||
	    t->nbytes > f->blob_size ||
	    (size_t)(d - b) > f->blob_size - t->nbytes)
		return 0;
	page_out(d, t->nbytes);
	return 1;
}

void
cg_file_let_go(const struct cg_file *f, struct cg_tensor *t)
{
	if (t->data == NULL)
		return;
	if (!t->borrowed)
		free(t->data);
	else
		cg_file_page_out(f, t);
	t->data = NULL;
	t->borrowed = 0;
}

const char *
cg_file_kind(const struct cg_file *f)
{
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(f->manifest, "kind");

	return cJSON_IsString(k) ? k->valuestring : "";
}

/*
 * A member name must be a plain relative name: no "/", no leading ".", no
 * control bytes, not the manifest's or the signature's name.  Tensor names
 * use dots for structure ("enc.0.w"), so nothing legitimate is lost.
 */
static int
valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CG_MAX_NAME || s[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= ' ' || c == '/' || c == '\\' || c >= 0x7f)
			return 0;
	}
	return strcmp(s, MANIFEST_NAME) != 0 && strcmp(s, SIG_NAME) != 0;
}

/* Fill the shape fields of t; -1 with a message if they make no sense. */
static int
set_shape(struct cg_tensor *t, enum cg_dtype dtype, int ndim,
	  const uint64_t *shape)
{
	uint64_t n = 1;

	if (ndim < 0 || ndim > CG_MAX_DIMS)
		return cg_seterr("tensor %s: %d dimensions (at most %d)",
				 t->name, ndim, CG_MAX_DIMS);
	for (int i = 0; i < ndim; i++) {
		if (shape[i] != 0 && n > UINT64_MAX / shape[i])
			return cg_seterr("tensor %s: shape overflows", t->name);
		n *= shape[i];
		t->shape[i] = shape[i];
	}
	t->dtype = dtype;
	t->ndim = ndim;
	t->nelem = n;
	if (cg_dtype_bytes(dtype, n, &t->nbytes) != 0) {
		char why[128];
		snprintf(why, sizeof(why), "%s", cg_errmsg());
		return cg_seterr("tensor %s: %s", t->name, why);
	}
	return 0;
}

/* ----------------------------------------------------- the tensor table */

/*
 * f->tensors holds a pointer to each tensor, and each tensor is allocated
 * once: its address holds until the file is freed, however many tensors
 * are added after it.  f->index finds a tensor by name: open addressing
 * over FNV-1a hashes, a power of two of slots at most half full, each
 * slot a tensor pointer or NULL.  Reading or making a file of n tensors
 * is then O(n), where a search of the list made it O(n^2).
 */
static uint64_t
name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* Put t in the index, which has room; no check for its name. */
static void
index_put(struct cg_tensor **index, size_t nindex, struct cg_tensor *t)
{
	size_t i = (size_t)name_hash(t->name) & (nindex - 1);

	while (index[i] != NULL)
		i = (i + 1) & (nindex - 1);
	index[i] = t;
}

/* Room in f's table and index for one more tensor; -1 with a message. */
static int
table_reserve(struct cg_file *f)
{
	if (f->ntensors == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 16;
		void *p = realloc(f->tensors, cap * sizeof(*f->tensors));
		if (p == NULL)
			return cg_seterr("out of memory");
		f->tensors = p;
		f->cap = cap;
	}
	if (2 * (f->ntensors + 1) > f->nindex) {
		size_t n = f->nindex ? 2 * f->nindex : 32;
		struct cg_tensor **index;
		while (2 * (f->ntensors + 1) > n)
			n *= 2;
		if ((index = calloc(n, sizeof(*index))) == NULL)
			return cg_seterr("out of memory");
		for (size_t i = 0; i < f->ntensors; i++)
			index_put(index, n, f->tensors[i]);
		free(f->index);
		f->index = index;
		f->nindex = n;
	}
	return 0;
}

/*
 * A new tensor called name at the end of f's table, its shape unset and
 * its data NULL; NULL with a message for a bad or repeated name.  The
 * tensor is f's from here on, to fill or to leave as it is.
 */
static struct cg_tensor *
table_add(struct cg_file *f, const char *name)
{
	struct cg_tensor *t;

	if (!valid_name(name)) {
		cg_seterr("bad tensor name '%.64s'", name);
		return NULL;
	}
	if (cg_file_find(f, name)) {
		cg_seterr("tensor %s: defined twice", name);
		return NULL;
	}
	if (table_reserve(f) != 0)
		return NULL;
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	snprintf(t->name, sizeof(t->name), "%s", name);
	f->tensors[f->ntensors++] = t;
	index_put(f->index, f->nindex, t);
	return t;
}

/* Take back the tensor table_add made last (its shape was refused). */
static void
table_drop_last(struct cg_file *f)
{
	struct cg_tensor *t = f->tensors[--f->ntensors];
	size_t i = (size_t)name_hash(t->name) & (f->nindex - 1);

	while (f->index[i] != t)
		i = (i + 1) & (f->nindex - 1);
	f->index[i] = NULL;
	/* Slots after it in its run move up if their home allows
	 * (deletion from linear probing without tombstones). */
	for (size_t j = (i + 1) & (f->nindex - 1); f->index[j] != NULL;
	     j = (j + 1) & (f->nindex - 1)) {
		struct cg_tensor *u = f->index[j];
		size_t home = (size_t)name_hash(u->name) & (f->nindex - 1);
		/* u may move to i when i lies cyclically in [home, j) */
		if (((j - home) & (f->nindex - 1)) >=
		    ((j - i) & (f->nindex - 1))) {
			f->index[i] = u;
			f->index[j] = NULL;
			i = j;
		}
	}
	free(t);
}

/* A new tensor at the end of f, its data not yet set; NULL on error. */
static struct cg_tensor *
new_tensor(struct cg_file *f, const char *name, enum cg_dtype dtype, int ndim,
	   const uint64_t *shape)
{
	struct cg_tensor *t = table_add(f, name);

	if (t == NULL)
		return NULL;
	if (set_shape(t, dtype, ndim, shape) != 0) {
		table_drop_last(f);
		return NULL;
	}
	return t;
}

struct cg_tensor *
cg_file_add_zero(struct cg_file *f, const char *name, enum cg_dtype dtype,
		 int ndim, const uint64_t *shape)
{
	struct cg_tensor *t = new_tensor(f, name, dtype, ndim, shape);

	if (t == NULL)
		return NULL;
	if ((t->data = cg_alloc(t->nbytes)) == NULL) {
		table_drop_last(f);
		return NULL;
	}
	return t;
}

struct cg_tensor *
cg_file_add_ref(struct cg_file *f, const char *name, enum cg_dtype dtype,
		int ndim, const uint64_t *shape, const void *data)
{
	struct cg_tensor *t = new_tensor(f, name, dtype, ndim, shape);

	if (t == NULL)
		return NULL;
	t->data = (void *)data;
	t->borrowed = 1;
	return t;
}

struct cg_tensor *
cg_file_add_source(struct cg_file *f, const char *name, enum cg_dtype dtype,
		   int ndim, const uint64_t *shape,
		   int (*read)(void *ctx, uint64_t off, void *buf, size_t n),
		   void *ctx)
{
	struct cg_tensor *t = new_tensor(f, name, dtype, ndim, shape);

	if (t == NULL)
		return NULL;
	t->read = read;
	t->read_ctx = ctx;
	return t;
}

struct cg_tensor *
cg_file_add(struct cg_file *f, const char *name, enum cg_dtype dtype,
	    int ndim, const uint64_t *shape, const void *data)
{
	struct cg_tensor *t = cg_file_add_zero(f, name, dtype, ndim, shape);

	if (t && t->nbytes)
		memcpy(t->data, data, t->nbytes);
	return t;
}

struct cg_tensor *
cg_file_find(const struct cg_file *f, const char *name)
{
	if (f->nindex == 0)
		return NULL;
	for (size_t i = (size_t)name_hash(name) & (f->nindex - 1);
	     f->index[i] != NULL; i = (i + 1) & (f->nindex - 1))
		if (strcmp(f->index[i]->name, name) == 0)
			return f->index[i];
	return NULL;
}

struct cg_tensor *
cg_file_need(const struct cg_file *f, const char *name, enum cg_dtype dtype)
{
	struct cg_tensor *t = cg_file_find(f, name);

	if (t == NULL)
		cg_seterr("tensor %s: missing", name);
	else if (t->dtype != dtype) {
		cg_seterr("tensor %s: dtype %s, expected %s", name,
			  cg_dtype_name(t->dtype), cg_dtype_name(dtype));
		t = NULL;
	}
	return t;
}

int
cg_tensor_make_f32(struct cg_tensor *t)
{
	float *x;

	if (t->dtype == CG_F32)
		return 0;
	if (t->nelem > SIZE_MAX / sizeof(float))
		return cg_seterr("tensor %s: too large", t->name);
	if ((x = cg_alloc(t->nelem ? t->nelem * sizeof(float) : 1)) == NULL)
		return -1;
	if (cg_tensor_to_f32(t, x) != 0) {
		free(x);
		return -1;
	}
	if (!t->borrowed)
		free(t->data);
	t->data = x;
	t->borrowed = 0;
	t->dtype = CG_F32;
	t->nbytes = t->nelem * sizeof(float);
	return 0;
}

/* -------------------------------------------------------------- writing */

/* The chunk a source tensor (cg_file_add_source) is read in. */
#define SOURCE_CHUNK (1u << 20)

/* Whether t's stored bytes are made a chunk at a time (stored_pass):
 * a source tensor's, and on a big-endian host those of a type whose
 * words are turned around; else they are t->data as it lies. */
static int
by_chunks(const struct cg_tensor *t)
{
	return t->read != NULL || (CG_BIG_ENDIAN && t->data != NULL &&
	                           cg_dtype_word(t->dtype) > 1);
}

/*
 * Pass the stored bytes of t (by_chunks) through SHA-256 into dg, and,
 * with a non-NULL a, write them to a as they come: a source tensor's as
 * its source gives them, a tensor in memory's copied a chunk at a time;
 * the words of either turned to little-endian.  Returns 0, or -1 with a
 * message ("tensor NAME: ...").
 */
static int
stored_pass(struct cg_tensor *t, struct archive *a, unsigned char dg[32])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned char *buf = malloc(SOURCE_CHUNK);
	unsigned int len = 32;
	uint64_t off = 0;
	int rc = -1;

	if (c == NULL || buf == NULL ||
	    EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		cg_seterr("tensor %s: out of memory", t->name);
		goto out;
	}
	while (off < t->nbytes) {
		size_t n = t->nbytes - off > SOURCE_CHUNK
			       ? SOURCE_CHUNK
			       : (size_t)(t->nbytes - off);
		if (t->read == NULL)
			memcpy(buf, (const unsigned char *)t->data + off, n);
		else if (t->read(t->read_ctx, off, buf, n) != 0) {
			cg_errprefix(t->name);
			cg_errprefix("tensor");
			goto out;
		}
		/* a chunk is a whole number of words: SOURCE_CHUNK is */
		cg_le_words(buf, n, cg_dtype_word(t->dtype));
		if (EVP_DigestUpdate(c, buf, n) != 1) {
			cg_seterr("tensor %s: SHA-256 failed", t->name);
			goto out;
		}
		for (size_t k = 0; a != NULL && k < n;) {
			la_ssize_t w = archive_write_data(a, buf + k, n - k);
			if (w <= 0) {
				cg_seterr("%s: %s", t->name,
					  archive_error_string(a)
					      ? archive_error_string(a)
					      : "write failed");
				goto out;
			}
			k += (size_t)w;
		}
		off += n;
	}
	if (EVP_DigestFinal_ex(c, dg, &len) != 1) {
		cg_seterr("tensor %s: SHA-256 failed", t->name);
		goto out;
	}
	rc = 0;
out:
	EVP_MD_CTX_free(c);
	free(buf);
	return rc;
}

cJSON *
cg_file_manifest(struct cg_file *f)
{
	cJSON *m = cJSON_Duplicate(f->manifest, 1), *arr;
	char hex[65];

	if (m == NULL)
		return NULL;
	/* The digests first, shared among threads: the bulk of a write;
	 * a source tensor's by a pass over its source. */
#pragma omp parallel for schedule(dynamic, 1)
	for (size_t i = 0; i < f->ntensors; i++)
		if (!by_chunks(f->tensors[i]))
			cg_sha256(f->tensors[i]->sha256, f->tensors[i]->data,
				  f->tensors[i]->nbytes);
	for (size_t i = 0; i < f->ntensors; i++)
		if (by_chunks(f->tensors[i]) &&
		    stored_pass(f->tensors[i], NULL, f->tensors[i]->sha256) !=
		        0)
			goto fail_said;
	cJSON_DeleteItemFromObjectCaseSensitive(m, "tensors");
	if ((arr = cJSON_AddArrayToObject(m, "tensors")) == NULL)
		goto fail;
	for (size_t i = 0; i < f->ntensors; i++) {
		struct cg_tensor *t = f->tensors[i];
		cJSON *o = cJSON_CreateObject(), *sh;
		if (o == NULL)
			goto fail;
		cJSON_AddItemToArray(arr, o);
		cg_hex(hex, t->sha256);
		cJSON_AddStringToObject(o, "name", t->name);
		cJSON_AddStringToObject(o, "dtype", cg_dtype_name(t->dtype));
		if ((sh = cJSON_AddArrayToObject(o, "shape")) == NULL)
			goto fail;
		for (int d = 0; d < t->ndim; d++)
			cJSON_AddItemToArray(
			    sh, cJSON_CreateNumber((double)t->shape[d]));
		cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
		cJSON_AddStringToObject(o, "sha256", hex);
	}
	return m;
fail:
	cg_seterr("out of memory");
fail_said:
	cJSON_Delete(m);
	return NULL;
}

/* A member's header and its n bytes from data; with data NULL, the
 * header only, and the caller writes the n bytes. */
static int
write_member(struct archive *a, const char *name, const void *data,
	     uint64_t n)
{
	struct archive_entry *e = archive_entry_new();
	const char *p = data;
	int rc = -1;

	if (e == NULL)
		return cg_seterr("out of memory");
	archive_entry_set_pathname(e, name);
	archive_entry_set_size(e, (la_int64_t)n);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_mtime(e, 0, 0);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	if (archive_write_header(a, e) != ARCHIVE_OK) {
		cg_seterr("%s: %s", name, archive_error_string(a));
		goto out;
	}
	while (data != NULL && n > 0) {
		size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
		la_ssize_t w = archive_write_data(a, p, chunk);
		if (w <= 0) {
			cg_seterr("%s: %s", name,
				  archive_error_string(a)
				      ? archive_error_string(a)
				      : "write failed");
			goto out;
		}
		p += w;
		n -= (uint64_t)w;
	}
	rc = 0;
out:
	archive_entry_free(e);
	return rc;
}

/* libarchive's output: whole blocks to out (cg_out_write). */
static la_ssize_t
archive_out(struct archive *a, void *data, const void *buf, size_t n)
{
	if (cg_out_write(data, buf, n) != 0) {
		/* the member and the path are said by the caller */
		archive_set_error(a, errno, "write failed: %s", strerror(errno));
		return -1;
	}
	return (la_ssize_t)n;
}

/* The sealer's output (file/seal.h): out's descriptor. */
static int
sealed_write(void *ctx, const void *buf, size_t n)
{
	if (cg_out_write(ctx, buf, n) != 0)
		return cg_seterr("write failed: %s", strerror(errno));
	return 0;
}

/* libarchive's output when the file is sealed: through the sealer. */
static la_ssize_t
archive_sealed(struct archive *a, void *data, const void *buf, size_t n)
{
	if (cg_sealer_write(data, buf, n) != 0) {
		archive_set_error(a, EIO, "%s", cg_errmsg());
		return -1;
	}
	return (la_ssize_t)n;
}

/*
 * libarchive's block: whole blocks go out straight from our buffers, only
 * the ends of members are copied.  Its default, 10240 bytes, not a whole
 * number of pages, made the writes of a 16 MB model three times as long
 * as in 64 KiB blocks (12 ms against 4); with the last block unpadded,
 * the bytes written are the same.
 */
#define WRITE_BLOCK (1 << 20)

int
cg_file_write_to(struct cg_file *f, struct cg_out *out, enum cg_compress c)
{
	const char *path = out->path ? out->path : "(stdout)";
	struct archive *a = NULL;
	struct cg_sealer *s = NULL;
	cJSON *m = NULL;
	char *json = NULL;
	int rc = -1, seal;

	if ((seal = cg_seal_active()) < 0) {
		cg_errprefix(path);
		goto done;
	}
	if ((m = cg_file_manifest(f)) == NULL) {
		cg_errprefix(path);
		goto done;
	}
	if ((json = cJSON_Print(m)) == NULL) {
		cg_seterr("%s: out of memory", path);
		goto done;
	}
	if ((a = archive_write_new()) == NULL) {
		cg_seterr("out of memory");
		goto done;
	}
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_per_block(a, WRITE_BLOCK);
	archive_write_set_bytes_in_last_block(a, 1);
	if (c == CG_COMPRESS_GZIP) {
		archive_write_add_filter_gzip(a);
		/* no name or time in the gzip header: same input, same bytes */
		archive_write_set_filter_option(a, "gzip", "timestamp", NULL);
	} else if (c == CG_COMPRESS_ZSTD) {
		archive_write_add_filter_zstd(a);
	}
	fflush(out->fp);
	/* sealed: the whole archive's bytes go through the sealer */
	if (seal && (s = cg_sealer_new(sealed_write, out)) == NULL)
		goto fail_prefix;
	if ((s ? archive_write_open(a, s, NULL, archive_sealed, NULL)
	       : archive_write_open(a, out, NULL, archive_out, NULL)) !=
	    ARCHIVE_OK) {
		cg_seterr("%s: %s", path, archive_error_string(a));
		goto done;
	}
	if (write_member(a, MANIFEST_NAME, json, strlen(json)) != 0)
		goto fail_prefix;
	for (size_t i = 0; i < f->ntensors; i++) {
		struct cg_tensor *t = f->tensors[i];
		unsigned char dg[32];

		if (!by_chunks(t)) {
			if (write_member(a, t->name, t->data, t->nbytes) != 0)
				goto fail_prefix;
			continue;
		}
		/* its header, then its bytes from a second pass, which
		 * must give the digest the manifest holds */
		if (write_member(a, t->name, NULL, t->nbytes) != 0 ||
		    stored_pass(t, a, dg) != 0)
			goto fail_prefix;
		if (memcmp(dg, t->sha256, 32) != 0) {
			cg_seterr("tensor %s: changed while it was read",
				  t->name);
			goto fail_prefix;
		}
	}
	if (cg_sign_active()) {
		char *sig;
		size_t nsig;
		int w;
		if (cg_sign_member(json, strlen(json), &sig, &nsig) != 0)
			goto fail_prefix;
		w = write_member(a, SIG_NAME, sig, nsig);
		free(sig);
		if (w != 0)
			goto fail_prefix;
	}
	if (archive_write_close(a) != ARCHIVE_OK) {
		cg_seterr("%s: %s", path, archive_error_string(a));
		goto done;
	}
	if (s && cg_sealer_close(s) != 0)
		goto fail_prefix;
	rc = 0;
	goto done;
fail_prefix:
	cg_errprefix(path);
done:
	if (a)
		archive_write_free(a);
	cg_sealer_free(s);
	cJSON_Delete(m);
	free(json);
	return rc;
}

int
cg_file_write(struct cg_file *f, const char *path, enum cg_compress c)
{
	struct cg_out out;

	if (cg_out_open(&out, path) != 0)
		return -1;
	if (cg_file_write_to(f, &out, c) != 0) {
		cg_out_abort(&out);
		return -1;
	}
	return cg_out_commit(&out);
}

int
cg_file_write_free(struct cg_file *f, const char *path, enum cg_compress c)
{
	int rc;

	if (f == NULL)
		return -1;
	rc = cg_file_write(f, path, c);
	cg_file_free(f);
	return rc;
}

/* ------------------------------------------------------ manifest values */

uint64_t
cg_json_u64(const cJSON *obj, const char *key, uint64_t dflt)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(j) || j->valuedouble < 0 ||
	    j->valuedouble > 9007199254740992.0)
		return dflt;
	return (uint64_t)j->valuedouble;
}

double
cg_json_num(const cJSON *obj, const char *key, double dflt)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNumber(j) ? j->valuedouble : dflt;
}

void
cg_json_set_num(cJSON *obj, const char *key, double v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
	cJSON_AddNumberToObject(obj, key, v);
}

/* -------------------------------------------------------------- reading */

int
cg_kind_known(const char *kind)
{
	static const char *const kinds[] = {"model", "grad", "delta", "data",
					    "state"};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kind, kinds[i]) == 0)
			return 1;
	return 0;
}

int
cg_kind_check_manifest(const cJSON *m)
{
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(m, "kind");

	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CG_FORMAT) != 0)
		return cg_seterr("cg.json: unsupported format (want \"%s\")",
				 CG_FORMAT);
	if (!cJSON_IsString(kind))
		return cg_seterr("cg.json: no \"kind\"");
	if (!cg_kind_known(kind->valuestring))
		return cg_seterr("cg.json: unknown kind '%.32s' (not model, "
				 "grad, delta, data or state)",
				 kind->valuestring);
	return 0;
}

struct reader {
	struct archive *a;
	const char *name; /* for messages */
	uint64_t avail;	  /* most tensor bytes the input may hold */
	uint64_t fsize;	  /* size of a regular input file, else 0 */
	int compressed;
	const char *blob; /* the whole plain file, when read in place */
	size_t blob_size;
	int blob_anon; /* blob is anonymous memory: never paged out */
	const char *late; /* the tensor whose digest a thread verifies */
};

/*
 * Read exactly n bytes of the current member into a fresh aligned buffer,
 * the first npre of them already read (pre, may be NULL when npre is 0).
 * Plain regular files are bounded by their size already, so the buffer is
 * taken whole; a compressed stream or a pipe may lie about sizes, so the
 * buffer grows only as data really arrives and memory stays proportional
 * to real content.
 */
static void *
read_member(struct reader *r, const char *what, uint64_t n, const void *pre,
	    size_t npre)
{
	size_t cap, have = npre;
	char *buf;

	if (n > SIZE_MAX - 64) {
		cg_seterr("%s: too large", what);
		return NULL;
	}
	cap = (r->compressed || r->fsize == 0) && n > (64u << 20)
		  ? (64u << 20)
		  : (size_t)n;
	if (cap < npre)
		cap = npre;
	if ((buf = cg_alloc(cap)) == NULL)
		return NULL;
	if (npre)
		memcpy(buf, pre, npre);
	while (have < n) {
		if (have == cap) {
			size_t ncap = cap * 2 > n ? (size_t)n : cap * 2;
			char *nb = cg_alloc(ncap);
			if (nb == NULL)
				goto fail;
			memcpy(nb, buf, have);
			free(buf);
			buf = nb;
			cap = ncap;
		}
		la_ssize_t got = archive_read_data(r->a, buf + have, cap - have);
		if (got < 0) {
			cg_seterr("%s: %s", what, archive_error_string(r->a));
			goto fail;
		}
		if (got == 0) {
			cg_seterr("%s: truncated (%zu of %llu bytes)", what,
				  have, (unsigned long long)n);
			goto fail;
		}
		have += (size_t)got;
	}
	return buf;
fail:
	free(buf);
	return NULL;
}

/*
 * The current member of n bytes: where it lies in r->blob (*borrowed set)
 * when the file is mapped and copy is 0, else in a buffer of its own.  The
 * memory reader hands a member out as one block into the blob, and tar puts
 * members at multiples of 512 bytes, so they are as aligned as the blob; a
 * block that is not the whole member is copied and the rest read after it.
 */
static void *
member_data(struct reader *r, const char *what, uint64_t n, int copy,
            int *borrowed)
{
	const void *p;
	size_t sz;
	la_int64_t off;
	int rc;

	*borrowed = 0;
	if (copy || r->blob == NULL || r->compressed || n == 0)
		return read_member(r, what, n, NULL, 0);
	rc = archive_read_data_block(r->a, &p, &sz, &off);
	if (rc == ARCHIVE_EOF) {
		cg_seterr("%s: truncated (0 of %llu bytes)", what,
			  (unsigned long long)n);
		return NULL;
	}
	if (rc != ARCHIVE_OK || off != 0 || sz > n) {
		const char *msg = archive_error_string(r->a);
		cg_seterr("%s: %s", what, msg ? msg : "unreadable");
		return NULL;
	}
	if (sz == n && (const char *)p >= r->blob &&
	    (const char *)p + n <= r->blob + r->blob_size &&
	    ((uintptr_t)p & 63) == 0) {
		*borrowed = 1;
		return (void *)p;
	}
	return read_member(r, what, n, p, sz);
}

/* Whether t's words are turned around between the file and memory: on
 * a big-endian host, for a plain type of more than a byte (never on a
 * little-endian one, where this is 0 and what it guards compiles away). */
static int
turned(const struct cg_tensor *t)
{
	return CG_BIG_ENDIAN && cg_dtype_word(t->dtype) > 1;
}

/* Next member header; -1 with a message on error, 1 at the end. */
static int
next_header(struct reader *r, struct archive_entry **e, const char *want)
{
	int rc = archive_read_next_header(r->a, e);

	if (rc == ARCHIVE_EOF)
		return 1;
	if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
		const char *msg = archive_error_string(r->a);
		return cg_seterr("%s%s%s", want ? want : "",
				 want ? ": " : "",
				 msg ? msg : "not a cg file");
	}
	if (archive_entry_filetype(*e) != AE_IFREG)
		return cg_seterr("member '%.64s' is not a regular file",
				 archive_entry_pathname(*e)
				     ? archive_entry_pathname(*e)
				     : "?");
	if (archive_entry_pathname(*e) == NULL)
		return cg_seterr("member without a name");
	return 0;
}

static int
parse_u64(const cJSON *j, uint64_t *out)
{
	if (!cJSON_IsNumber(j) || j->valuedouble < 0 ||
	    j->valuedouble >= 18446744073709551616.0 ||
	    j->valuedouble != (double)(uint64_t)j->valuedouble)
		return -1;
	*out = (uint64_t)j->valuedouble;
	return 0;
}

/* Check the manifest's tensor table and fill f->tensors (no data yet). */
static int
parse_tensors(struct cg_file *f, cJSON *arr, uint64_t avail)
{
	int n = cJSON_GetArraySize(arr);
	uint64_t total = 0;
	const cJSON *o;

	if (!cJSON_IsArray(arr))
		return cg_seterr("manifest: \"tensors\" is not an array");
	if (n > CG_MAX_TENSORS)
		return cg_seterr("manifest: %d tensors (at most %d)", n,
				 CG_MAX_TENSORS);
	cJSON_ArrayForEach(o, arr)
	{
		struct cg_tensor *t;
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
		const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
		const cJSON *by = cJSON_GetObjectItemCaseSensitive(o, "bytes");
		const cJSON *dg = cJSON_GetObjectItemCaseSensitive(o, "sha256");
		uint64_t shape[CG_MAX_DIMS], bytes;
		enum cg_dtype dtype;
		const cJSON *d;
		int nd = 0;

		if (!cJSON_IsString(name) || !valid_name(name->valuestring))
			return cg_seterr("manifest: tensor %zu: bad or "
					 "unsafe name",
					 f->ntensors);
		if (cg_file_find(f, name->valuestring))
			return cg_seterr("tensor %.64s: listed twice",
					 name->valuestring);
		if ((t = table_add(f, name->valuestring)) == NULL)
			return -1;
		if (!cJSON_IsString(dt))
			return cg_seterr("tensor %s: bad dtype", t->name);
		if (cg_dtype_parse(dt->valuestring, &dtype) != 0)
			return cg_seterr("tensor %s: bad dtype: unknown "
					 "'%.32s'",
					 t->name, dt->valuestring);
		if (!cJSON_IsArray(sh) ||
		    cJSON_GetArraySize(sh) > CG_MAX_DIMS)
			return cg_seterr("tensor %s: bad shape", t->name);
		cJSON_ArrayForEach(d, sh)
		{
			if (parse_u64(d, &shape[nd]) != 0)
				return cg_seterr("tensor %s: bad shape",
						 t->name);
			nd++;
		}
		if (set_shape(t, dtype, nd, shape) != 0)
			return -1;
		if (parse_u64(by, &bytes) != 0 || bytes != t->nbytes)
			return cg_seterr("tensor %s: byte length does not "
					 "match dtype and shape",
					 t->name);
		if (!cJSON_IsString(dg) ||
		    cg_hex_parse(t->sha256, dg->valuestring) != 0)
			return cg_seterr("tensor %s: bad sha256", t->name);
		if (t->nbytes > avail || total + t->nbytes > avail)
			return cg_seterr("tensor %s: %llu bytes claimed, more "
					 "than the file can hold",
					 t->name,
					 (unsigned long long)t->nbytes);
		total += t->nbytes;
	}
	return 0;
}

/*
 * The signature member e, checked against the manifest's bytes json
 * [mlen]: f's signer set, or -1 with a message.
 */
static int
read_signature(struct reader *r, struct archive_entry *e, struct cg_file *f,
	       const char *json, size_t mlen)
{
	char *sig;
	int rc;

	if (!archive_entry_size_is_set(e) || archive_entry_size(e) <= 0 ||
	    archive_entry_size(e) > CG_SIG_MAX)
		return cg_seterr("%s: malformed (empty, or over %d bytes)",
				 SIG_NAME, CG_SIG_MAX);
	if ((sig = read_member(r, SIG_NAME, (uint64_t)archive_entry_size(e),
			       NULL, 0)) == NULL)
		return -1;
	rc = cg_sign_check(json, mlen, sig, (size_t)archive_entry_size(e),
			   f->signer);
	free(sig);
	f->is_signed = rc == 0;
	return rc;
}

/* -1 with a message when a trust list is in force and f's signer is not
 * in it; else 0. */
static int
check_trust(const struct cg_file *f)
{
	char fp[65];
	int t = cg_trust_active();

	if (t < 0)
		return -1;
	if (t == 0)
		return 0;
	if (!f->is_signed)
		return cg_seterr("unsigned (a trust list is in force)");
	if (!cg_trusted(f->signer)) {
		cg_key_fingerprint(fp, f->signer);
		return cg_seterr("signed by key %s, not in the trust list",
				 fp);
	}
	return 0;
}

static struct cg_file *
read_archive(struct reader *r)
{
	struct cg_file *f = NULL;
	struct archive_entry *e;
	cJSON *m = NULL;
	char *json = NULL;
	int rc;

	if ((f = calloc(1, sizeof(*f))) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	rc = next_header(r, &e, NULL);
	if (rc == 1) {
		cg_seterr("empty archive, not a cg file");
		goto fail;
	}
	if (rc != 0)
		goto fail;
	r->compressed = archive_filter_count(r->a) > 1;
	/* An uncompressed regular file cannot hold more than its size. */
	if (!r->compressed && r->fsize && r->fsize < r->avail)
		r->avail = r->fsize;
	if (strcmp(archive_entry_pathname(e), MANIFEST_NAME) != 0) {
		cg_seterr("not a cg file (first member is '%.64s', not "
			  "cg.json)",
			  archive_entry_pathname(e));
		goto fail;
	}
	if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0 ||
	    archive_entry_size(e) > (la_int64_t)CG_MAX_MANIFEST) {
		cg_seterr("cg.json: too large (limit %u bytes)",
			  CG_MAX_MANIFEST);
		goto fail;
	}
	size_t mlen = (size_t)archive_entry_size(e);
	if ((json = read_member(r, "cg.json", mlen, NULL, 0)) == NULL)
		goto fail;
	if ((m = cJSON_ParseWithLength(json, mlen)) == NULL ||
	    !cJSON_IsObject(m)) {
		cg_seterr("cg.json: not valid JSON");
		goto fail;
	}
	if (cg_kind_check_manifest(m) != 0)
		goto fail;
	cJSON *arr = cJSON_DetachItemFromObjectCaseSensitive(m, "tensors");
	if (arr == NULL) {
		cg_seterr("cg.json: no \"tensors\"");
		goto fail;
	}
	rc = parse_tensors(f, arr, r->avail);
	cJSON_Delete(arr);
	if (rc != 0)
		goto fail;
	f->manifest = m;
	m = NULL;
	for (size_t i = 0; i < f->ntensors; i++) {
		struct cg_tensor *t = f->tensors[i];
		char what[CG_MAX_NAME + 8];

		snprintf(what, sizeof(what), "tensor %s", t->name);
		rc = next_header(r, &e, what);
		if (rc == 1) {
			cg_seterr("tensor %s: missing (file truncated)",
				  t->name);
			goto fail;
		}
		if (rc != 0)
			goto fail;
		if (strcmp(archive_entry_pathname(e), t->name) != 0) {
			cg_seterr("tensor %s: found member '%.64s' in its "
				  "place",
				  t->name, archive_entry_pathname(e));
			goto fail;
		}
		if (!archive_entry_size_is_set(e) ||
		    (uint64_t)archive_entry_size(e) != t->nbytes) {
			cg_seterr("tensor %s: member length differs from the "
				  "manifest",
				  t->name);
			goto fail;
		}
		/* a tensor whose words a big-endian host turns around is
		 * in a buffer of its own: a mapping's pages may be dropped
		 * and read again (page_out) */
		if ((t->data = member_data(r, what, t->nbytes, turned(t),
		                           &t->borrowed)) == NULL)
			goto fail;
	}
	/* The late tensor's digest begins on a thread of its own, the
	 * rest's are shared out among ours; the first mismatch in file
	 * order is the one reported. */
	struct cg_tensor *lt = r->late ? cg_file_find(f, r->late) : NULL;
	if (lt != NULL && turned(lt))
		lt = NULL; /* its words are turned once its digest is known */
	if (lt != NULL &&
	    late_begin(f, lt,
		       lt->borrowed && r->blob != NULL && !r->blob_anon &&
			   (const char *)lt->data >= r->blob &&
			   lt->nbytes <= r->blob_size &&
			   (size_t)((const char *)lt->data - r->blob) <=
			       r->blob_size - lt->nbytes) != 0)
		lt = NULL; /* no thread: verified with the rest */
	size_t bad = f->ntensors;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) reduction(min : bad)
#endif
	for (size_t i = 0; i < f->ntensors; i++) {
		unsigned char dg[32];
		if (f->tensors[i] == lt)
			continue;
		cg_sha256(dg, f->tensors[i]->data, f->tensors[i]->nbytes);
		if (memcmp(dg, f->tensors[i]->sha256, 32) != 0 && i < bad)
			bad = i;
	}
	if (bad < f->ntensors) {
		cg_seterr("tensor %s: digest mismatch (file truncated or "
			  "altered)",
			  f->tensors[bad]->name);
		goto fail;
	}
	/* the file's little-endian words as host words */
	for (size_t i = 0; i < f->ntensors; i++)
		if (turned(f->tensors[i]))
			cg_le_words(f->tensors[i]->data, f->tensors[i]->nbytes,
			            cg_dtype_word(f->tensors[i]->dtype));
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		const struct cg_codec *c = cg_codec(t->dtype);
		if (c->check && c->check(t->data, t->nelem) != 0) {
			char who[CG_MAX_NAME + 8];
			snprintf(who, sizeof(who), "tensor %s", t->name);
			cg_errprefix(who);
			goto fail;
		}
	}
	rc = next_header(r, &e, "after the tensors");
	if (rc == 0 && strcmp(archive_entry_pathname(e), SIG_NAME) == 0) {
		if (read_signature(r, e, f, json, mlen) != 0)
			goto fail;
		rc = next_header(r, &e, "after the signature");
	}
	if (rc == 0) {
		cg_seterr("unexpected member '%.64s'", archive_entry_pathname(e));
		goto fail;
	}
	if (rc < 0)
		goto fail;
	if (check_trust(f) != 0)
		goto fail;
	free(json);
	return f;
fail:
	free(json);
	cJSON_Delete(m);
	cg_file_free(f);
	return NULL;
}

/*
 * Regular file fd from offset pos, size bytes, mapped private, its pages
 * read in now where populate is set; NULL with a message.  Populated
 * read-only, the mapping shares the page cache's pages (a writable one
 * would copy them all); it is then made writable, so that only pages
 * written to are copied.  Unpopulated (a file with a late digest: the
 * thread that hashes the bulk of it reads it in), pages are shared as
 * they are first read.
 */
static char *
map_whole(int fd, off_t pos, size_t size, int populate)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	if (page <= 0 || pos % page != 0) {
		cg_seterr("cannot map from offset %lld", (long long)pos);
		return NULL;
	}
	cg_guard_mapped_reads();
	p = mmap(NULL, size, PROT_READ,
		 MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, pos);
	if (p == MAP_FAILED) {
		cg_seterr("%s", strerror(errno));
		return NULL;
	}
	if (mprotect(p, size, PROT_READ | PROT_WRITE) != 0) {
		cg_seterr("%s", strerror(errno));
		munmap(p, size);
		return NULL;
	}
	return p;
}

/* Whether buf [n] starts as a gzip or zstd stream. */
static int
is_compressed(const unsigned char *buf, size_t n)
{
	return (n >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) ||
	       (n >= 4 && buf[0] == 0x28 && buf[1] == 0xb5 && buf[2] == 0x2f &&
		buf[3] == 0xfd);
}

/*
 * A stream whose first bytes were already read by somebody else (who
 * looked at them to tell a cg file from another format): libarchive is
 * given those first, then the rest of fd.
 */
struct prefixed {
	int fd;
	const void *pre;
	size_t npre;
	char buf[1 << 16];
};

static la_ssize_t
prefixed_read(struct archive *a, void *data, const void **out)
{
	struct prefixed *s = data;
	ssize_t n;

	if (s->npre) {
		*out = s->pre;
		n = (ssize_t)s->npre;
		s->npre = 0;
		return n;
	}
	while ((n = read(s->fd, s->buf, sizeof(s->buf))) < 0 && errno == EINTR)
		;
	if (n < 0)
		archive_set_error(a, errno, "%s", strerror(errno));
	*out = s->buf;
	return n;
}

/*
 * The sealed file whose bytes are pre [npre] and the rest of fd
 * (file/seal.h): opened whole into memory, every tag checked, which is
 * then read in place as a mapped plain file is.
 */
static struct cg_file *
read_sealed(int fd, const char *display, const void *pre, size_t npre,
	    int in_place, const char *late)
{
	struct reader r = {.name = display, .avail = cg_max_bytes(),
			   .late = late};
	struct cg_unsealed u;
	struct cg_file *f = NULL;

	if (cg_unseal(fd, pre, npre, r.avail, &u) != 0) {
		cg_errprefix(display);
		return NULL;
	}
	/* Opened into memory: read in place, the members left where they
	 * lie and the memory handed to the file, as a mapped plain file's
	 * are; anything else (empty, compressed, not a tar, sealed again)
	 * read as bytes in memory are, and the memory let go. */
	if (!in_place || u.size < 4 ||
	    is_compressed(u.mem, u.size) ||
	    cg_safetensors_probe(u.mem, u.size) ||
	    cg_seal_probe(u.mem, u.size)) {
		f = u.size ? cg_file_read_mem(u.mem, u.size, display) : NULL;
		if (u.size == 0)
			cg_seterr("%s: empty file, not a cg file", display);
		cg_unsealed_free(&u);
		return f;
	}
	r.fsize = u.size;
	r.blob = u.mem;
	r.blob_size = u.size;
	r.blob_anon = 1;
	if ((r.a = archive_read_new()) == NULL) {
		cg_unsealed_free(&u);
		cg_seterr("%s: out of memory", display);
		return NULL;
	}
	archive_read_support_format_tar(r.a);
	if (archive_read_open_memory(r.a, u.mem, u.size) != ARCHIVE_OK)
		cg_seterr("%s", archive_error_string(r.a)
				    ? archive_error_string(r.a)
				    : "cannot read");
	else if ((f = read_archive(&r)) != NULL) {
		f->blob = u.mem;
		f->blob_size = u.size;
		f->blob_anon = 1;
		u.mem = NULL;
	}
	if (f == NULL)
		cg_errprefix(display);
	archive_read_free(r.a);
	cg_unsealed_free(&u);
	return f;
}

static struct cg_file *
read_fd_pre(int fd, const char *display, int in_place, const void *pre,
	    size_t npre, const char *late)
{
	struct reader r = {.name = display, .avail = cg_max_bytes(),
			   .late = late};
	struct cg_file *f = NULL;
	struct prefixed *src = NULL;
	struct stat st;
	char *blob = NULL;
	unsigned char peek[CG_SEAL_MAGIC_LEN];
	size_t got = 0;
	int rc;

	if (npre == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		if (st.st_size == 0) {
			cg_seterr("%s: empty file, not a cg file", display);
			return NULL;
		}
		r.fsize = (uint64_t)st.st_size;
		/* A plain file within the limit is mapped whole; the read
		 * position tells where it starts (stdin may be a file that
		 * someone has read from), and must be on a page. */
		off_t pos = lseek(fd, 0, SEEK_CUR);
		unsigned char head[CG_SAFETENSORS_PROBE];
		ssize_t nhead = pos < 0 ? -1 : pread(fd, head, sizeof(head), pos);
		if (nhead > 0 && cg_safetensors_probe(head, (size_t)nhead)) {
			cg_seterr("%s: a safetensors file, not a cg file "
				  "(cg-convert makes one of it)",
				  display);
			return NULL;
		}
		if (nhead > 0 && cg_seal_probe(head, (size_t)nhead))
			return read_sealed(fd, display, NULL, 0, in_place,
					   late);
		if (in_place && pos >= 0 && pos < st.st_size &&
		    pos % sysconf(_SC_PAGESIZE) == 0 &&
		    (uint64_t)(st.st_size - pos) <= r.avail &&
		    (uint64_t)(st.st_size - pos) <= SIZE_MAX) {
			size_t size = (size_t)(st.st_size - pos);
			unsigned char magic[4] = {0};
			if (pread(fd, magic, sizeof(magic), pos) >= 2 &&
			    !is_compressed(magic, sizeof(magic)) &&
			    (blob = map_whole(fd, pos, size, late == NULL)) !=
				NULL) {
				r.blob = blob;
				r.blob_size = got = size;
				/* as if read: a stream moves past it */
				lseek(fd, (off_t)size, SEEK_CUR);
			}
			/* Else read as a stream (and the error, if any,
			 * comes from there). */
		}
	}
	else if (npre == 0) {
		/* a pipe: its first bytes say whether it is sealed, and are
		 * handed on as a caller's would be */
		ssize_t k = 0;
		while (npre < sizeof(peek) &&
		       ((k = read(fd, peek + npre, sizeof(peek) - npre)) > 0 ||
			(k < 0 && errno == EINTR)))
			npre += k > 0 ? (size_t)k : 0;
		if (k < 0) {
			cg_seterr("%s: %s", display, strerror(errno));
			return NULL;
		}
		pre = peek;
	}
	if (cg_seal_probe(pre, npre))
		return read_sealed(fd, display, pre, npre, in_place, late);
	if ((r.a = archive_read_new()) == NULL) {
		if (blob)
			munmap(blob, got);
		cg_seterr("out of memory");
		return NULL;
	}
	archive_read_support_filter_gzip(r.a);
	archive_read_support_filter_zstd(r.a);
	archive_read_support_format_tar(r.a);
	if (blob)
		rc = archive_read_open_memory(r.a, blob, got);
	else if (npre == 0)
		rc = archive_read_open_fd(r.a, fd, 1 << 16);
	else if ((src = malloc(sizeof(*src))) == NULL)
		rc = ARCHIVE_FATAL;
	else {
		*src = (struct prefixed){.fd = fd, .pre = pre, .npre = npre};
		rc = archive_read_open(r.a, src, NULL, prefixed_read, NULL);
	}
	if (rc != ARCHIVE_OK) {
		cg_seterr("%s", archive_error_string(r.a)
				    ? archive_error_string(r.a)
				    : "cannot read");
		goto out;
	}
	f = read_archive(&r);
	if (f && blob) {
		f->blob = blob;
		f->blob_size = got;
		blob = NULL;
	}
out:
	if (f == NULL)
		cg_errprefix(display);
	archive_read_free(r.a);
	free(src);
	if (blob)
		munmap(blob, got);
	return f;
}

static struct cg_file *
read_fd(int fd, const char *display, int in_place, const char *late)
{
	return read_fd_pre(fd, display, in_place, NULL, 0, late);
}

struct cg_file *
cg_file_read_fd(int fd, const char *display, const void *pre, size_t npre)
{
	return read_fd_pre(fd, display, 1, pre, npre, NULL);
}

struct cg_file *
cg_file_read_mem(const void *buf, size_t n, const char *display)
{
	struct reader r = {.name = display, .avail = cg_max_bytes()};
	struct cg_file *f = NULL;

	if (n == 0) {
		cg_seterr("%s: empty file, not a cg file", display);
		return NULL;
	}
	if (cg_safetensors_probe(buf, n)) {
		cg_seterr("%s: a safetensors file, not a cg file "
			  "(cg-convert makes one of it)",
			  display);
		return NULL;
	}
	if (cg_seal_probe(buf, n))
		return read_sealed(-1, display, buf, n, 0, NULL);
	/* bounded as a regular file is, by its size; members are copied
	 * (r.blob stays NULL), so buf is only read */
	r.fsize = n;
	if ((r.a = archive_read_new()) == NULL) {
		cg_seterr("%s: out of memory", display);
		return NULL;
	}
	archive_read_support_filter_gzip(r.a);
	archive_read_support_filter_zstd(r.a);
	archive_read_support_format_tar(r.a);
	if (archive_read_open_memory(r.a, buf, n) != ARCHIVE_OK)
		cg_seterr("%s", archive_error_string(r.a)
				    ? archive_error_string(r.a)
				    : "cannot read");
	else
		f = read_archive(&r);
	if (f == NULL)
		cg_errprefix(display);
	archive_read_free(r.a);
	return f;
}

struct cg_file *
cg_file_read_fp(FILE *fp, const char *display)
{
	return read_fd(fileno(fp), display, 1, NULL);
}

static struct cg_file *
read_path(const char *path, int in_place, const char *late)
{
	struct cg_file *f;
	int fd;

	if (strcmp(path, "-") == 0)
		return read_fd(STDIN_FILENO, "(stdin)", in_place, late);
	if ((fd = open(path, O_RDONLY)) < 0) {
		cg_seterr("%s: %s", path, strerror(errno));
		return NULL;
	}
	f = read_fd(fd, path, in_place, late);
	close(fd);
	return f;
}

struct cg_file *
cg_file_read(const char *path)
{
	return read_path(path, 1, NULL);
}

struct cg_file *
cg_file_read_copy(const char *path)
{
	return read_path(path, 0, NULL);
}

struct cg_file *
cg_file_read_late(const char *path, const char *late)
{
	return read_path(path, 1, late);
}

/*
 * What is left of fd, a cg file compressed or from a pipe, decompressed
 * into an unlinked temporary file in $TMPDIR (else /tmp): its descriptor
 * at offset 0, or -1 with a message.  No more than the largest file the
 * tensor limit allows (cg_max_bytes() and room for the manifest and the
 * archive's headers) is written, so that a stream that inflates without
 * end fills no disk.
 */
static int
spool_plain(int fd, const char *display)
{
	const char *dir = getenv("TMPDIR");
	uint64_t most = cg_max_bytes() + (64u << 20), have = 0;
	struct archive *a = NULL;
	struct archive_entry *e;
	char *tmp = NULL, *buf = NULL;
	int out = -1;

	if (dir == NULL || *dir == '\0')
		dir = "/tmp";
	if (asprintf(&tmp, "%s/cg-plain.XXXXXX", dir) < 0) {
		tmp = NULL;
		goto oom;
	}
	if ((buf = malloc(1u << 16)) == NULL || (a = archive_read_new()) == NULL)
		goto oom;
	if ((out = mkstemp(tmp)) < 0) {
		cg_seterr("%s: a copy in %s: %s", display, dir, strerror(errno));
		goto out;
	}
	unlink(tmp);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_raw(a);
	if (archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK)
		goto bad;
	for (;;) {
		la_ssize_t got = archive_read_data(a, buf, 1u << 16);
		if (got < 0)
			goto bad;
		if (got == 0)
			break;
		if ((have += (uint64_t)got) > most) {
			cg_seterr("%s: more than %llu bytes decompressed (the "
				  "limit is CG_MAX_BYTES)",
				  display, (unsigned long long)most);
			goto fail;
		}
		for (la_ssize_t done = 0; done < got;) {
			ssize_t k = write(out, buf + done, (size_t)(got - done));
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0) {
				cg_seterr("%s: a copy in %s: %s", display, dir,
					  strerror(errno));
				goto fail;
			}
			done += k;
		}
	}
	if (lseek(out, 0, SEEK_SET) != 0) {
		cg_seterr("%s: %s", display, strerror(errno));
		goto fail;
	}
	goto out;
bad:
	cg_seterr("%s: %s", display,
		  archive_error_string(a) ? archive_error_string(a)
					  : "cannot read");
	goto fail;
oom:
	cg_seterr("%s: out of memory", display);
fail:
	if (out >= 0)
		close(out);
	out = -1;
out:
	if (a)
		archive_read_free(a);
	free(buf);
	free(tmp);
	return out;
}

struct cg_file *
cg_file_read_spooled(const char *path, const char *late)
{
	const char *display = strcmp(path, "-") == 0 ? "(stdin)" : path;
	unsigned char magic[4] = {0};
	struct cg_file *f = NULL;
	struct stat st;
	off_t pos;
	int fd, plain;

	fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY);
	if (fd < 0) {
		cg_seterr("%s: %s", path, strerror(errno));
		return NULL;
	}
	/* A plain file is mapped where it is, as cg_file_read_late does. */
	plain = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		(pos = lseek(fd, 0, SEEK_CUR)) >= 0 &&
		pread(fd, magic, sizeof(magic), pos) >= 2 &&
		!is_compressed(magic, sizeof(magic));
	if (plain) {
		f = read_fd(fd, display, 1, late);
	} else {
		int tmp = spool_plain(fd, display);
		if (tmp >= 0) {
			f = read_fd(tmp, display, 1, late);
			close(tmp);
		}
	}
	if (fd != STDIN_FILENO)
		close(fd);
	return f;
}

/* ------------------------------------------------------- the format row */

const struct cg_format cg_format_cg = {
    .name = "cg",
    .read_fd = cg_file_read_fd,
    .write = cg_file_write,
    .compresses = 1,
    .signs = 1,
};
