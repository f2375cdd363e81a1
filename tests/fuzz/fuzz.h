/*
 * fuzz.h - what the libFuzzer targets of tests/fuzz/ share.
 *
 * Readers that take a path are given the fuzzer's bytes in a memfd (a
 * file in memory, no file system) named by /proc/self/fd/N; the memfd is
 * made once and rewritten for each input.  The structure-aware targets
 * (fuzz_shard, fuzz_update) build a tar archive from a manifest and the
 * bytes after it, with the digests that the manifest's tensors need, so
 * that the fuzzer's changes reach the kind's own checks instead of
 * stopping at a digest mismatch or a tar header's checksum.  Every
 * target treats a refusal as the expected outcome: only a crash, a leak
 * or a sanitizer report is a finding.
 */
#ifndef CG_FUZZ_H
#define CG_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "data/shard.h"
#include "eval/inspect.h"
#include "exchange/ucodec.h"
#include "exchange/update.h"
#include "model/model.h"
#include "train/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The i-th memfd (i < 4) holding data [n]; its path into path [32].
 * Aborts when memory runs out: no input can cause that. */
static inline void
fuzz_memfd(int i, const void *data, size_t n, char path[32])
{
	static int fds[4] = {-1, -1, -1, -1};

	if (fds[i] < 0 && (fds[i] = memfd_create("fuzz", 0)) < 0)
		abort();
	if (ftruncate(fds[i], 0) != 0 ||
	    (n && pwrite(fds[i], data, n, 0) != (ssize_t)n))
		abort();
	snprintf(path, 32, "/proc/self/fd/%d", fds[i]);
}

/* ------------------------------------------------------------ tar writer */

/* A growing byte buffer. */
struct fuzz_buf {
	unsigned char *p;
	size_t len, cap;
};

static inline void
fuzz_put(struct fuzz_buf *b, const void *src, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		if ((b->p = realloc(b->p, cap)) == NULL)
			abort();
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, src, n);
	b->len += n;
}

/* One ustar member: name (cut at 99 bytes), n bytes, padded to 512. */
static inline void
fuzz_tar_member(struct fuzz_buf *b, const char *name, const void *src, size_t n)
{
	unsigned char h[512] = {0};
	unsigned sum = 0;
	static const unsigned char zero[512];

	snprintf((char *)h, 100, "%s", name);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)n);
	memcpy(h + 136, "00000000000", 12);
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	fuzz_put(b, h, 512);
	fuzz_put(b, src, n);
	fuzz_put(b, zero, (512 - n % 512) % 512);
}

/* The bytes dtype and shape of tensor entry t say, into *out; -1 where
 * they say nothing (no dtype, a shape that is not one). */
static inline int
fuzz_entry_bytes(const cJSON *t, uint64_t *out)
{
	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
	const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
	const cJSON *d;
	enum cg_dtype dtype;
	uint64_t n = 1;

	if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) ||
	    cg_dtype_parse(dt->valuestring, &dtype) != 0)
		return -1;
	cJSON_ArrayForEach(d, sh)
	{
		if (!cJSON_IsNumber(d) || d->valuedouble < 0 ||
		    d->valuedouble > 1e15 ||
		    d->valuedouble != (double)(uint64_t)d->valuedouble)
			return -1;
		if (d->valuedouble != 0 &&
		    n > UINT64_MAX / (uint64_t)d->valuedouble)
			return -1;
		n *= (uint64_t)d->valuedouble;
	}
	return cg_dtype_bytes(dtype, n, out);
}

/*
 * A cg file's bytes made from input data [n]: the text up to the first
 * NUL is the manifest, the bytes after it the tensors' members, in the
 * manifest's order, each taking the "bytes" that its dtype and shape
 * say, or where they say nothing the "bytes" it claims (the last one
 * what is left, when too little is).  Where the manifest parses, each
 * tensor's "bytes" is made what its dtype and shape say and its
 * "sha256" that of its member, and the manifest is written out again
 * (so that a changed shape or dtype reaches the kind's checks, past
 * the container's); otherwise it goes in as it is.  Members the
 * manifest does not list follow as "extra".  The caller frees out->p.
 */
static inline void
fuzz_cg_file(const uint8_t *data, size_t n, struct fuzz_buf *out)
{
	const uint8_t *nul = memchr(data, 0, n);
	size_t mlen = nul ? (size_t)(nul - data) : n;
	const uint8_t *rest = nul ? nul + 1 : data + n;
	size_t left = (size_t)(data + n - rest);
	cJSON *m = cJSON_ParseWithLength((const char *)data, mlen);
	cJSON *arr = cJSON_GetObjectItemCaseSensitive(m, "tensors");
	struct fuzz_buf mem = {0};
	char *text = NULL;
	cJSON *t;

	memset(out, 0, sizeof(*out));
	if (cJSON_IsArray(arr)) {
		cJSON_ArrayForEach(t, arr)
		{
			const cJSON *nm =
			    cJSON_GetObjectItemCaseSensitive(t, "name");
			const cJSON *by =
			    cJSON_GetObjectItemCaseSensitive(t, "bytes");
			size_t k = left;
			unsigned char d[32];
			char hex[65];
			uint64_t want;

			if (cJSON_IsObject(t) &&
			    fuzz_entry_bytes(t, &want) == 0) {
				cJSON_DeleteItemFromObjectCaseSensitive(
				    t, "bytes");
				cJSON_AddNumberToObject(t, "bytes",
				                        (double)want);
				if (want < left)
					k = (size_t)want;
			} else if (cJSON_IsNumber(by) && by->valuedouble >= 0 &&
			           by->valuedouble < (double)left)
				k = (size_t)by->valuedouble;
			cg_sha256(d, rest, k);
			cg_hex(hex, d);
			if (cJSON_IsObject(t)) {
				cJSON_DeleteItemFromObjectCaseSensitive(
				    t, "sha256");
				cJSON_AddStringToObject(t, "sha256", hex);
			}
			fuzz_tar_member(
			    &mem, cJSON_IsString(nm) ? nm->valuestring : "?",
			    rest, k);
			rest += k;
			left -= k;
		}
		text = cJSON_PrintUnformatted(m);
	}
	if (left)
		fuzz_tar_member(&mem, "extra", rest, left);
	if (text)
		fuzz_tar_member(out, "cg.json", text, strlen(text));
	else
		fuzz_tar_member(out, "cg.json", data, mlen);
	fuzz_put(out, mem.p, mem.len);
	fuzz_put(out, (const unsigned char[1024]){0}, 1024);
	free(mem.p);
	free(text);
	cJSON_Delete(m);
}

/* ------------------------------------------------------------ the kinds */

/* Every element of every view of u decoded, a bounded number from each
 * end of a view (a view may claim far more than a test should walk). */
static inline void
fuzz_decode_update(const struct cg_update *u)
{
	float buf[256];

	for (int i = 0; i < u->nviews; i++) {
		uint64_t n = u->views[i].n;
		size_t k = n < 256 ? (size_t)n : 256;
		cg_update_decode(u, i, 0, k, buf);
		if (n > k)
			cg_update_decode(u, i, n - k, k, buf);
	}
	(void)cg_update_check_weight(u);
}

/* What cg-inspect makes of f, with statistics, as a table (to
 * /dev/null) and as JSON. */
static inline void
fuzz_inspect(const struct cg_file *f)
{
	static FILE *null;
	struct cg_inspect_opts o = {.stats = 1, .utf8 = 1};

	if (null == NULL && (null = fopen("/dev/null", "w")) == NULL)
		abort();
	(void)cg_inspect_table(null, "fuzz", f, &o);
	cJSON_Delete(cg_inspect_json("fuzz", f, &o));
}

/* The cg file bytes [n], a model, read as cg-eval and cg-sample read one
 * (cg_model_read_infer: quantized views kept as stored, their blocks
 * checked), from a memfd. */
static inline void
fuzz_infer(const void *bytes, size_t n)
{
	char path[32];

	fuzz_memfd(3, bytes, n, path);
	cg_model_free(cg_model_read_infer(path));
}

/* What a program does with a file of each kind once it is read: f is
 * taken (freed here). */
static inline void
fuzz_use_file(struct cg_file *f)
{
	const char *kind = cg_file_kind(f);
	struct cg_state *st;

	if (strcmp(kind, "data") == 0) {
		cg_shard_free(cg_shard_from_file(f, "fuzz"));
		return;
	}
	if (strcmp(kind, "grad") == 0 || strcmp(kind, "delta") == 0) {
		struct cg_update *u = cg_update_from_file(f, "fuzz");
		if (u)
			fuzz_decode_update(u);
		cg_update_free(u);
		return;
	}
	if (strcmp(kind, "state") == 0) {
		if (cg_state_from_file(&st, f, "fuzz") == 0)
			cg_state_free(st);
		return;
	}
	if (strcmp(kind, "model") == 0)
		cg_model_free(cg_model_from_file(f, "fuzz"));
	cg_file_free(f);
}

#endif
