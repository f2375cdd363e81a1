/*
 * file/safetensors.c - safetensors files in and out of cg files.
 *
 * The reader takes the whole file as bytes (mapped, or read from a pipe) and
 * trusts none of them: the header length is checked against the limit and the
 * file, the header must be one JSON object and nothing after it but white
 * space, its values are counted before cJSON parses it, each tensor's dtype,
 * shape and offsets are checked, and the offsets, sorted, must tile the buffer
 * exactly (from 0, no gap, no overlap, nothing after the last), all before the
 * first tensor is allocated.  The writer emits what the reference
 * implementation does for the same tensors and metadata, so either can read the
 * other's files.  See safetensors.h for the dtypes and the manifest.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "file/safetensors.h"
#include "file/seal.h"
#include "file/sign.h"

/* The largest number a header may hold: a double counts exactly to here,
 * and no real shape or offset comes near it. */
#define MAX_EXACT 9007199254740992.0

/* ---------------------------------------------------------------- dtypes */

/*
 * The dtypes both formats know.  rank is the place of the dtype in the
 * reference implementation's enum (its writer sorts by it, largest
 * first); only the order matters.
 */
static const struct {
	const char *name;
	enum cg_dtype dtype;
	int rank;
} dtypes[] = {
    {"U8", CG_U8, 1},    {"I8", CG_I8, 2},     {"U16", CG_U16, 6},
    {"F16", CG_F16, 7},  {"BF16", CG_BF16, 8}, {"U32", CG_U32, 10},
    {"F32", CG_F32, 11}, {"U64", CG_U64, 14},
};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

/* The safetensors dtypes cg has no row for: refused by name. */
static const char *const foreign[] = {
    "BOOL", "F4",  "F6_E2M3", "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "I16",  "I32", "I64",     "F64",     "C64",     NULL,
};

/* The row of safetensors dtype s, or -1. */
static int
st_dtype(const char *s)
{
	for (size_t i = 0; i < NDTYPES; i++)
		if (strcmp(dtypes[i].name, s) == 0)
			return (int)i;
	return -1;
}

/* The row of cg dtype t, or -1 when safetensors lacks it. */
static int
cg_row(enum cg_dtype t)
{
	for (size_t i = 0; i < NDTYPES; i++)
		if (dtypes[i].dtype == t)
			return (int)i;
	return -1;
}

static uint64_t
le64(const unsigned char *b)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

/* ------------------------------------------------------------- reading */

/* One tensor of the header, checked but not yet read. */
struct entry {
	const char *name; /* in the parsed header */
	int row;          /* in dtypes[] */
	int ndim;
	uint64_t shape[CG_MAX_DIMS];
	uint64_t begin, end; /* offsets into the buffer */
};

/*
 * At most how many JSON values a header may hold: a tensor needs at most
 * 14 (its object, dtype, shape and 8 dimensions, offsets and 2 numbers),
 * and the metadata is one object of strings (cg.json is one of them, and
 * is held to a cg file's limits).  cJSON spends some 80 bytes on each
 * value, so 100 MB of "[0,0,0,..." would cost it 4 GB: they are counted
 * on the text before it is parsed.
 */
#define MAX_VALUES (16ull * CG_MAX_TENSORS)

/* An upper bound on the JSON values in text [n]: one, and one more for
 * each ',', '[' and '{' outside strings. */
static uint64_t
json_values(const char *text, size_t n)
{
	uint64_t count = 1;
	int in_string = 0;

	for (size_t i = 0; i < n; i++) {
		char c = text[i];
		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = 0;
		} else if (c == '"') {
			in_string = 1;
		} else if (c == ',' || c == '[' || c == '{') {
			count++;
		}
	}
	return count;
}

/* A whole number in [0, 2^53] into *out; -1 otherwise. */
static int
json_count(const cJSON *j, uint64_t *out)
{
	if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0) ||
	    j->valuedouble > MAX_EXACT ||
	    j->valuedouble != (double)(uint64_t)j->valuedouble)
		return -1;
	*out = (uint64_t)j->valuedouble;
	return 0;
}

/* The header's entry for one tensor into e; buflen bytes follow the
 * header.  -1 with a message naming the tensor. */
static int
parse_entry(struct entry *e, const cJSON *o, uint64_t buflen)
{
	const char *name = o->string;
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
	const cJSON *off = cJSON_GetObjectItemCaseSensitive(o, "data_offsets");
	uint64_t n = 1, nbytes;
	const cJSON *d;

	e->name = name;
	if (!cJSON_IsObject(o))
		return cg_seterr("tensor %.64s: not an object", name);
	if (!cJSON_IsString(dt))
		return cg_seterr("tensor %.64s: no dtype", name);
	if ((e->row = st_dtype(dt->valuestring)) < 0) {
		for (int i = 0; foreign[i]; i++)
			if (strcmp(foreign[i], dt->valuestring) == 0)
				return cg_seterr(
				    "tensor %.64s: dtype %s has no cg "
				    "equivalent (cg reads F32, F16, BF16, I8, "
				    "U8, U16, U32, U64)",
				    name, foreign[i]);
		return cg_seterr("tensor %.64s: unknown dtype '%.32s'", name,
		                 dt->valuestring);
	}
	if (!cJSON_IsArray(sh))
		return cg_seterr("tensor %.64s: bad shape", name);
	if (cJSON_GetArraySize(sh) > CG_MAX_DIMS)
		return cg_seterr("tensor %.64s: %d dimensions (at most %d)",
		                 name, cJSON_GetArraySize(sh), CG_MAX_DIMS);
	e->ndim = 0;
	cJSON_ArrayForEach(d, sh)
	{
		uint64_t v;
		if (json_count(d, &v) != 0)
			return cg_seterr("tensor %.64s: bad shape", name);
		if (v != 0 && n > UINT64_MAX / v)
			return cg_seterr("tensor %.64s: shape overflows", name);
		n *= v;
		e->shape[e->ndim++] = v;
	}
	if (cg_dtype_bytes(dtypes[e->row].dtype, n, &nbytes) != 0)
		return cg_seterr("tensor %.64s: shape overflows", name);
	if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
	    json_count(cJSON_GetArrayItem(off, 0), &e->begin) != 0 ||
	    json_count(cJSON_GetArrayItem(off, 1), &e->end) != 0)
		return cg_seterr("tensor %.64s: bad data_offsets", name);
	if (e->end < e->begin)
		return cg_seterr("tensor %.64s: data_offsets [%llu, %llu] "
		                 "run backwards",
		                 name, (unsigned long long)e->begin,
		                 (unsigned long long)e->end);
	if (e->end - e->begin != nbytes)
		return cg_seterr("tensor %.64s: %llu bytes, but dtype and "
		                 "shape make %llu",
		                 name, (unsigned long long)(e->end - e->begin),
		                 (unsigned long long)nbytes);
	if (e->end > buflen)
		return cg_seterr("tensor %.64s: data_offsets [%llu, %llu] "
		                 "past the end of the file (%llu bytes of "
		                 "data)",
		                 name, (unsigned long long)e->begin,
		                 (unsigned long long)e->end,
		                 (unsigned long long)buflen);
	return 0;
}

static int
by_offset(const void *pa, const void *pb)
{
	const struct entry *a = *(const struct entry *const *)pa;
	const struct entry *b = *(const struct entry *const *)pb;

	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	if (a->end != b->end)
		return a->end < b->end ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The entries sorted by offset must cover [0, buflen) exactly: -1 with
 * a message naming the first tensor out of place. */
static int
check_tiling(struct entry **sorted, size_t n, uint64_t buflen)
{
	uint64_t at = 0;

	qsort(sorted, n, sizeof(*sorted), by_offset);
	for (size_t i = 0; i < n; i++) {
		const struct entry *e = sorted[i];
		if (e->begin < at)
			return cg_seterr("tensor %.64s: data_offsets [%llu, "
			                 "%llu] overlap tensor %.64s",
			                 e->name, (unsigned long long)e->begin,
			                 (unsigned long long)e->end,
			                 sorted[i - 1]->name);
		if (e->begin > at)
			return cg_seterr("tensor %.64s: a gap of %llu bytes "
			                 "before its data",
			                 e->name,
			                 (unsigned long long)(e->begin - at));
		at = e->end;
	}
	if (at != buflen)
		return cg_seterr("bytes after the last tensor's data (%llu)",
		                 (unsigned long long)(buflen - at));
	return 0;
}

/* cg's manifest from the header's __metadata__ (meta, may be NULL): a new
 * object, or NULL with a message. */
static cJSON *
make_manifest(const cJSON *meta)
{
	const cJSON *kv, *cgj = NULL;
	cJSON *m, *extra = NULL;

	if (meta != NULL && !cJSON_IsObject(meta)) {
		cg_seterr("__metadata__: not an object");
		return NULL;
	}
	cJSON_ArrayForEach(kv, meta)
	{
		if (!cJSON_IsString(kv)) {
			cg_seterr("__metadata__: the value of '%.64s' is not a "
			          "string",
			          kv->string);
			return NULL;
		}
		if (strcmp(kv->string, CG_SAFETENSORS_KEY) == 0) {
			if (cgj) {
				cg_seterr("__metadata__: " CG_SAFETENSORS_KEY
				          " given twice");
				return NULL;
			}
			cgj = kv;
		}
	}
	if (cgj == NULL) {
		if ((m = cJSON_CreateObject()) == NULL ||
		    !cJSON_AddStringToObject(m, "format", CG_FORMAT) ||
		    !cJSON_AddStringToObject(m, "kind", "model") ||
		    (meta && cJSON_GetArraySize(meta) > 0 &&
		     ((extra = cJSON_Duplicate(meta, 1)) == NULL ||
		      !cJSON_AddItemToObject(m, "safetensors_metadata",
		                             extra)))) {
			cJSON_Delete(m);
			cg_seterr("out of memory");
			return NULL;
		}
		return m;
	}
	if (strlen(cgj->valuestring) > CG_MAX_MANIFEST) {
		cg_seterr(CG_SAFETENSORS_KEY ": too large (limit %u bytes)",
		          CG_MAX_MANIFEST);
		return NULL;
	}
	if ((m = cJSON_Parse(cgj->valuestring)) == NULL || !cJSON_IsObject(m)) {
		cJSON_Delete(m);
		cg_seterr(CG_SAFETENSORS_KEY " in __metadata__: not valid "
		                             "JSON");
		return NULL;
	}
	/* the head a cg file's reader checks: a kind the format defines */
	if (cg_kind_check_manifest(m) != 0) {
		cJSON_Delete(m);
		return NULL;
	}
	return m;
}

/* Whether t has the dtype, shape and digest the listing o says. */
static int
check_listed(const struct cg_tensor *t, const cJSON *o)
{
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
	const cJSON *dg = cJSON_GetObjectItemCaseSensitive(o, "sha256");
	unsigned char want[32];
	const cJSON *d;
	int i = 0;

	if (!cJSON_IsString(dt) ||
	    strcmp(dt->valuestring, cg_dtype_name(t->dtype)) != 0)
		return cg_seterr("tensor %s: dtype %s, but " CG_SAFETENSORS_KEY
		                 " says otherwise",
		                 t->name, cg_dtype_name(t->dtype));
	if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) != t->ndim)
		goto shape;
	cJSON_ArrayForEach(d, sh)
	{
		uint64_t v;
		if (json_count(d, &v) != 0 || v != t->shape[i++])
			goto shape;
	}
	if (!cJSON_IsString(dg) || cg_hex_parse(want, dg->valuestring) != 0)
		return cg_seterr("tensor %s: bad sha256 in " CG_SAFETENSORS_KEY,
		                 t->name);
	if (memcmp(want, t->sha256, 32) != 0)
		return cg_seterr(
		    "tensor %s: digest mismatch with " CG_SAFETENSORS_KEY
		    " (altered since it was "
		    "written)",
		    t->name);
	return 0;
shape:
	return cg_seterr("tensor %s: shape differs from " CG_SAFETENSORS_KEY,
	                 t->name);
}

/*
 * Put f's tensors in the order of the manifest's listing arr, checking
 * that it lists each of them once with its dtype, shape and digest.
 */
static int
by_address(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (struct cg_tensor *const *)a;
	uintptr_t y = (uintptr_t) * (struct cg_tensor *const *)b;

	return (x > y) - (x < y);
}

static int
apply_listing(struct cg_file *f, const cJSON *arr)
{
	struct cg_tensor **out, **seen = NULL;
	const cJSON *o;
	size_t k = 0;
	int rc = -1;

	if (!cJSON_IsArray(arr))
		return cg_seterr(CG_SAFETENSORS_KEY ": \"tensors\" is not an "
		                                    "array");
	if ((size_t)cJSON_GetArraySize(arr) != f->ntensors)
		return cg_seterr(CG_SAFETENSORS_KEY ": lists %d tensors, the "
		                                    "header %zu",
		                 cJSON_GetArraySize(arr), f->ntensors);
	out = calloc(f->cap ? f->cap : 1, sizeof(*out));
	seen = calloc(f->ntensors ? f->ntensors : 1, sizeof(*seen));
	if (out == NULL || seen == NULL) {
		cg_seterr("out of memory");
		goto done;
	}
	cJSON_ArrayForEach(o, arr)
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
		struct cg_tensor *t;
		if (!cJSON_IsString(name) ||
		    (t = cg_file_find(f, name->valuestring)) == NULL) {
			cg_seterr("tensor %.64s: in " CG_SAFETENSORS_KEY
			          ", not in the header",
			          cJSON_IsString(name) ? name->valuestring
			                               : "?");
			goto done;
		}
		if (check_listed(t, o) != 0)
			goto done;
		out[k++] = t;
	}
	/* As many names as tensors, each found: a name listed twice is
	 * the same tensor twice, next to itself once sorted. */
	memcpy(seen, out, k * sizeof(*out));
	qsort(seen, k, sizeof(*seen), by_address);
	for (size_t i = 1; i < k; i++)
		if (seen[i] == seen[i - 1]) {
			cg_seterr(
			    "tensor %s: listed twice in " CG_SAFETENSORS_KEY,
			    seen[i]->name);
			goto done;
		}
	free(f->tensors);
	f->tensors = out;
	out = NULL;
	rc = 0;
done:
	free(out);
	free(seen);
	return rc;
}

/* The tensors of the checked entries e [n] into f, copied from data, in
 * offset order (sorted), and their digests. */
static int
add_tensors(struct cg_file *f, struct entry **sorted, size_t n,
            const unsigned char *data)
{
	for (size_t i = 0; i < n; i++) {
		const struct entry *e = sorted[i];
		if (cg_file_add(f, e->name, dtypes[e->row].dtype, e->ndim,
		                e->shape, data + e->begin) == NULL)
			return -1;
	}
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
	for (size_t i = 0; i < f->ntensors; i++) {
		struct cg_tensor *t = f->tensors[i];
		cg_sha256(t->sha256, t->data, t->nbytes);
		/* the file's little-endian words as host words */
		cg_le_words(t->data, t->nbytes, cg_dtype_word(t->dtype));
	}
	return 0;
}

struct cg_file *
cg_safetensors_read_mem(const void *buf, size_t n, const char *display)
{
	const unsigned char *b = buf;
	struct cg_file *f = NULL;
	struct entry *ents = NULL, **sorted = NULL;
	cJSON *hdr = NULL, *listing = NULL;
	const cJSON *meta = NULL, *it;
	const char *end;
	char *text = NULL;
	uint64_t hlen, buflen;
	size_t nent = 0, k = 0;

	if (n < 8) {
		cg_seterr("truncated (%zu bytes, not even a header length)", n);
		goto fail;
	}
	hlen = le64(b);
	if (hlen > CG_SAFETENSORS_MAX_HEADER) {
		cg_seterr("header of %llu bytes (at most %llu)",
		          (unsigned long long)hlen, CG_SAFETENSORS_MAX_HEADER);
		goto fail;
	}
	if (hlen > n - 8) {
		cg_seterr("header length %llu past the end of the file (%zu "
		          "bytes)",
		          (unsigned long long)hlen, n);
		goto fail;
	}
	buflen = n - 8 - hlen;
	if (buflen > cg_max_bytes()) {
		cg_seterr("%llu bytes of tensors, more than the limit of %llu "
		          "(CG_MAX_BYTES)",
		          (unsigned long long)buflen,
		          (unsigned long long)cg_max_bytes());
		goto fail;
	}
	/* a copy that ends in NUL, whatever the file holds */
	if ((text = malloc(hlen + 1)) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	memcpy(text, b + 8, hlen);
	text[hlen] = '\0';
	if (json_values(text, hlen) > MAX_VALUES) {
		cg_seterr("header: more than %llu JSON values", MAX_VALUES);
		goto fail;
	}
	if (hlen < 2 || text[0] != '{' ||
	    (hdr = cJSON_ParseWithLengthOpts(text, hlen, &end, 0)) == NULL ||
	    !cJSON_IsObject(hdr)) {
		cg_seterr("header: not a JSON object");
		goto fail;
	}
	for (; end < text + hlen; end++)
		if (*end != ' ' && *end != '\t' && *end != '\n' &&
		    *end != '\r') {
			cg_seterr("header: bytes after the JSON object");
			goto fail;
		}
	cJSON_ArrayForEach(it, hdr)
	{
		if (strcmp(it->string, "__metadata__") != 0) {
			nent++;
			continue;
		}
		if (meta) {
			cg_seterr("header: __metadata__ given twice");
			goto fail;
		}
		meta = it;
	}
	if (nent > CG_MAX_TENSORS) {
		cg_seterr("header: %zu tensors (at most %d)", nent,
		          CG_MAX_TENSORS);
		goto fail;
	}
	ents = calloc(nent ? nent : 1, sizeof(*ents));
	sorted = calloc(nent ? nent : 1, sizeof(*sorted));
	if (ents == NULL || sorted == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	cJSON_ArrayForEach(it, hdr)
	{
		if (it == meta)
			continue;
		if (parse_entry(&ents[k], it, buflen) != 0)
			goto fail;
		sorted[k] = &ents[k];
		k++;
	}
	if (check_tiling(sorted, nent, buflen) != 0)
		goto fail;
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	if ((f->manifest = make_manifest(meta)) == NULL)
		goto fail;
	listing =
	    cJSON_DetachItemFromObjectCaseSensitive(f->manifest, "tensors");
	if (add_tensors(f, sorted, nent, b + 8 + hlen) != 0)
		goto fail;
	if (listing && apply_listing(f, listing) != 0)
		goto fail;
	cJSON_Delete(listing);
	cJSON_Delete(hdr);
	free(text);
	free(ents);
	free(sorted);
	return f;
fail:
	cg_errprefix(display);
	cJSON_Delete(listing);
	cJSON_Delete(hdr);
	free(text);
	free(ents);
	free(sorted);
	cg_file_free(f);
	return NULL;
}

/* The rest of the pipe fd after pre [npre] into a new buffer (*out,
 * *n): it grows as bytes arrive, and stops with a message once the
 * header length (in the first 8 bytes) or the whole passes the limits. */
static int
read_stream(int fd, const void *pre, size_t npre, unsigned char **out,
            size_t *n)
{
	size_t cap = npre > (1u << 16) ? npre : (1u << 16), have = npre;
	uint64_t limit = 0;
	unsigned char *buf = malloc(cap);

	if (buf == NULL)
		return cg_seterr("out of memory");
	memcpy(buf, pre, npre);
	for (;;) {
		ssize_t got;
		if (limit == 0 && have >= 8) {
			uint64_t hlen = le64(buf);
			if (hlen > CG_SAFETENSORS_MAX_HEADER)
				break; /* the parser says so */
			limit = cg_max_bytes() > UINT64_MAX - 8 - hlen
			            ? UINT64_MAX
			            : 8 + hlen + cg_max_bytes();
		}
		if (limit && have > limit) {
			free(buf);
			return cg_seterr("more than the limit of %llu bytes "
			                 "(CG_MAX_BYTES)",
			                 (unsigned long long)limit);
		}
		if (have == cap) {
			unsigned char *nb;
			if (cap > SIZE_MAX / 2 ||
			    (nb = realloc(buf, cap * 2)) == NULL) {
				free(buf);
				return cg_seterr("out of memory");
			}
			buf = nb;
			cap *= 2;
		}
		got = read(fd, buf + have, cap - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;
			free(buf);
			return cg_seterr("%s", strerror(e));
		}
		if (got == 0)
			break;
		have += (size_t)got;
	}
	*out = buf;
	*n = have;
	return 0;
}

struct cg_file *
cg_safetensors_read_fd(int fd, const char *display, const void *pre,
                       size_t npre)
{
	struct cg_file *f;
	unsigned char *buf = NULL;
	struct stat st;
	off_t pos;
	size_t n = 0;

	if (npre == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (pos = lseek(fd, 0, SEEK_CUR)) >= 0 && pos < st.st_size &&
	    (uint64_t)(st.st_size - pos) <= SIZE_MAX) {
		size_t size = (size_t)(st.st_size - pos);
		off_t at = pos - pos % sysconf(_SC_PAGESIZE);
		char *p;

		cg_guard_mapped_reads();
		p = mmap(NULL, size + (size_t)(pos - at), PROT_READ,
		         MAP_PRIVATE, fd, at);
		if (p == MAP_FAILED) {
			cg_seterr("%s: %s", display, strerror(errno));
			return NULL;
		}
		f = cg_safetensors_read_mem(p + (pos - at), size, display);
		munmap(p, size + (size_t)(pos - at));
		lseek(fd, st.st_size, SEEK_SET);
		return f;
	}
	if (read_stream(fd, pre, npre, &buf, &n) != 0) {
		cg_errprefix(display);
		return NULL;
	}
	f = cg_safetensors_read_mem(buf, n, display);
	free(buf);
	return f;
}

/* ------------------------------------------------------------- writing */

/* s as a JSON string (quotes included), escaped as the reference
 * writer's JSON library does: only quote, backslash and control bytes. */
static void
put_string(FILE *fp, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	putc('"', fp);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", fp);
			break;
		case '\\':
			fputs("\\\\", fp);
			break;
		case '\b':
			fputs("\\b", fp);
			break;
		case '\f':
			fputs("\\f", fp);
			break;
		case '\n':
			fputs("\\n", fp);
			break;
		case '\r':
			fputs("\\r", fp);
			break;
		case '\t':
			fputs("\\t", fp);
			break;
		default:
			if (*p < 0x20)
				fprintf(fp, "\\u00%c%c", hex[*p >> 4],
				        hex[*p & 15]);
			else
				putc(*p, fp);
		}
	}
	putc('"', fp);
}

/* For sorting tensor pointers as the reference writer: dtype rank
 * descending, then name. */
static int
by_rank(const void *pa, const void *pb)
{
	const struct cg_tensor *a = *(const struct cg_tensor *const *)pa;
	const struct cg_tensor *b = *(const struct cg_tensor *const *)pb;
	int ra = dtypes[cg_row(a->dtype)].rank;
	int rb = dtypes[cg_row(b->dtype)].rank;

	if (ra != rb)
		return rb - ra;
	return strcmp(a->name, b->name);
}

/* The header for f's tensors in order [n] and the manifest text into a
 * new buffer (*out, *len), padded with spaces to a multiple of 8. */
static int
make_header(const struct cg_tensor *const *order, size_t n,
            const char *manifest, const cJSON *extra, char **out, size_t *len)
{
	FILE *fp = open_memstream(out, len);
	const cJSON *kv, *pairs = cJSON_IsObject(extra) ? extra : NULL;
	uint64_t at = 0;

	if (fp == NULL)
		return cg_seterr("out of memory");
	fputs("{\"__metadata__\":{", fp);
	put_string(fp, CG_SAFETENSORS_KEY);
	putc(':', fp);
	put_string(fp, manifest);
	cJSON_ArrayForEach(kv, pairs)
	{
		if (!cJSON_IsString(kv) ||
		    strcmp(kv->string, CG_SAFETENSORS_KEY) == 0)
			continue;
		putc(',', fp);
		put_string(fp, kv->string);
		putc(':', fp);
		put_string(fp, kv->valuestring);
	}
	putc('}', fp);
	for (size_t i = 0; i < n; i++) {
		const struct cg_tensor *t = order[i];
		putc(',', fp);
		put_string(fp, t->name);
		fprintf(fp, ":{\"dtype\":\"%s\",\"shape\":[",
		        dtypes[cg_row(t->dtype)].name);
		for (int d = 0; d < t->ndim; d++)
			fprintf(fp, "%s%llu", d ? "," : "",
			        (unsigned long long)t->shape[d]);
		fprintf(fp, "],\"data_offsets\":[%llu,%llu]}",
		        (unsigned long long)at,
		        (unsigned long long)(at + t->nbytes));
		at += t->nbytes;
	}
	putc('}', fp);
	/* the tensors' bytes then start on a multiple of 8 */
	while (ftell(fp) % 8 != 0)
		putc(' ', fp);
	if (ferror(fp) | fclose(fp)) {
		free(*out);
		*out = NULL;
		return cg_seterr("out of memory");
	}
	return 0;
}

/* The bytes of t to fp, its words little-endian: as they lie on a
 * little-endian host, a copy turned around a chunk at a time on a
 * big-endian one.  0, or -1 with errno set. */
static int
write_data(const struct cg_tensor *t, FILE *fp)
{
	enum { CHUNK = 1 << 16 }; /* a whole number of words */
	const unsigned w = cg_dtype_word(t->dtype);
	const unsigned char *p = t->data;
	unsigned char buf[CHUNK];

	if (!CG_BIG_ENDIAN || w == 1)
		return t->nbytes == 0 ||
		               fwrite(p, 1, t->nbytes, fp) == t->nbytes
		           ? 0
		           : -1;
	for (uint64_t off = 0; off < t->nbytes; off += CHUNK) {
		size_t k =
		    t->nbytes - off < CHUNK ? (size_t)(t->nbytes - off) : CHUNK;
		memcpy(buf, p + off, k);
		cg_le_words(buf, k, w);
		if (fwrite(buf, 1, k, fp) != k)
			return -1;
	}
	return 0;
}

int
cg_safetensors_write_to(struct cg_file *f, struct cg_out *o)
{
	const char *path = o->path ? o->path : "standard output";
	const struct cg_tensor **order = NULL;
	cJSON *m = NULL;
	char *text = NULL, *hdr = NULL;
	unsigned char len[8];
	size_t hlen = 0;
	int rc = -1, seal = cg_seal_active();

	/* other tools read safetensors: never written in the clear where
	 * files are to be sealed */
	if (seal != 0) {
		if (seal > 0)
			cg_seterr("a safetensors file cannot be sealed "
			          "(--encrypt-to seals cg files)");
		goto fail;
	}
	for (size_t i = 0; i < f->ntensors; i++)
		if (cg_row(f->tensors[i]->dtype) < 0 &&
		    cg_tensor_make_f32(f->tensors[i]) != 0)
			goto fail;
	if ((m = cg_file_manifest(f)) == NULL ||
	    (text = cJSON_PrintUnformatted(m)) == NULL ||
	    (order = calloc(f->ntensors ? f->ntensors : 1, sizeof(*order))) ==
	        NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	for (size_t i = 0; i < f->ntensors; i++)
		order[i] = f->tensors[i];
	qsort(order, f->ntensors, sizeof(*order), by_rank);
	if (make_header(order, f->ntensors, text,
	                cJSON_GetObjectItemCaseSensitive(
	                    f->manifest, "safetensors_metadata"),
	                &hdr, &hlen) != 0)
		goto fail;
	if (hlen > CG_SAFETENSORS_MAX_HEADER) {
		cg_seterr("a header of %zu bytes, more than a reader takes "
		          "(%llu)",
		          hlen, CG_SAFETENSORS_MAX_HEADER);
		goto fail;
	}
	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	if (fwrite(len, 1, 8, o->fp) != 8 ||
	    fwrite(hdr, 1, hlen, o->fp) != hlen)
		goto write_error;
	for (size_t i = 0; i < f->ntensors; i++)
		if (write_data(order[i], o->fp) != 0)
			goto write_error;
	rc = 0;
	goto done;
write_error:
	cg_seterr("%s: write failed: %s", path, strerror(errno));
	goto done;
fail:
	cg_errprefix(path);
done:
	cJSON_Delete(m);
	free(text);
	free(hdr);
	free(order);
	return rc;
}

int
cg_safetensors_write(struct cg_file *f, const char *path)
{
	struct cg_out out;

	if (cg_out_open(&out, path) != 0)
		return -1;
	if (cg_safetensors_write_to(f, &out) != 0) {
		cg_out_abort(&out);
		return -1;
	}
	return cg_out_commit(&out);
}

/* ------------------------------------------------------- the format row */

static int
write_row(struct cg_file *f, const char *path, enum cg_compress c)
{
	(void)c; /* the row says it is written uncompressed */
	return cg_safetensors_write(f, path);
}

const struct cg_format cg_format_safetensors = {
    .name = "safetensors",
    .probe_bytes = CG_SAFETENSORS_PROBE,
    .probe = cg_safetensors_probe,
    .read_fd = cg_safetensors_read_fd,
    .write = write_row,
};
