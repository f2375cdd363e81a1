/*
 * test_seal.c - sealed files (file/seal.h): the chunked format itself.
 *
 * Bytes of many lengths (none, one, a chunk less one, a chunk, a chunk
 * and one, several chunks and a part) are sealed in small chunks and
 * opened again, from a regular file (the chunks in parallel) and from a
 * pipe (one at a time), to the same bytes.  Then a sealed file of three
 * chunks and a part is damaged every way seal.h says a tag catches: each
 * byte flipped (every header byte, and bytes through every chunk and
 * tag), cut at every chunk's end and inside chunks, extended by a byte
 * and by a chunk, two chunks swapped, one dropped or repeated; each must
 * be refused, by both readers, with a message, and the memory file never
 * handed out.  Through a pipe, a plaintext of megabytes in small chunks
 * and in whole ones opens to its bytes as the stream's memory grows, and
 * a last tag that lies, a chunk altered or a cut inside the last chunk
 * hands nothing out.  No key, another key, and an Ed25519 key are
 * refused with the message each has.  Exit 0 pass, 1 fail (automake
 * convention).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cg.h"
#include "file/seal.h"
#include "file/sign.h"

#define TEST_NAME "test_seal"
#include "check.h"

#define CHUNK 4096

static char dir[64];

static const char *
tmp(const char *name)
{
	static char buf[4][256];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

/* A growing buffer the sealer writes into. */
struct buf {
	unsigned char *p;
	size_t n, cap;
};

static int
buf_write(void *ctx, const void *data, size_t n)
{
	struct buf *b = ctx;

	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
		if (b->p == NULL)
			abort();
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
	return 0;
}

/* data [n] sealed to pub in CHUNK-byte chunks, written in pieces of
 * piece bytes; the caller frees out->p. */
static int
seal(struct buf *out, const unsigned char pub[32], const unsigned char *data,
     size_t n, size_t piece)
{
	struct cg_sealer *s;
	int rc;

	memset(out, 0, sizeof(*out));
	s = cg_sealer_new_to(pub, CHUNK, buf_write, out);
	rc = s == NULL ? -1 : 0;
	for (size_t off = 0; rc == 0 && off < n; off += piece)
		rc = cg_sealer_write(s, data + off,
		                     n - off < piece ? n - off : piece);
	if (rc == 0)
		rc = cg_sealer_close(s);
	cg_sealer_free(s);
	return rc;
}

/*
 * Open sealed bytes b [n] as a regular file (mapped == 1: a memfd) or as
 * a stream (0: the bytes handed over as already read, fd -1).  The
 * plaintext into *out (malloc'd) and its length; -1 with a message.
 */
static long
unseal(const unsigned char *b, size_t n, int mapped, unsigned char **out)
{
	int in = -1, pfd;
	long len;

	*out = NULL;
	if (mapped) {
		in = memfd_create("sealed", 0);
		if (in < 0 || write(in, b, n) != (ssize_t)n ||
		    lseek(in, 0, SEEK_SET) != 0)
			abort();
		pfd = cg_unseal_fd(in, NULL, 0, 1 << 30);
	} else
		pfd = cg_unseal_fd(-1, b, n, 1 << 30);
	if (in >= 0)
		close(in);
	if (pfd < 0)
		return -1;
	len = lseek(pfd, 0, SEEK_END);
	lseek(pfd, 0, SEEK_SET);
	*out = malloc(len ? (size_t)len : 1);
	if (*out == NULL || read(pfd, *out, (size_t)len) != len)
		abort();
	close(pfd);
	return len;
}

static void
round_trips(const unsigned char pub[32])
{
	static const size_t lens[] = {0,         1,         CHUNK - 1,    CHUNK,
	                              CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 5};
	unsigned char *data = malloc(3 * CHUNK + 5);
	char what[96];

	for (size_t i = 0; i < 3 * CHUNK + 5; i++)
		data[i] = (unsigned char)(i * 7 + 3);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (int mapped = 0; mapped < 2; mapped++) {
			struct buf b;
			unsigned char *got;
			long n;
			int ok = seal(&b, pub, data, lens[i], 1000) == 0;
			size_t chunks = lens[i] / CHUNK + 1;
			if (lens[i] && lens[i] % CHUNK == 0)
				chunks--; /* a whole last chunk */
			ok = ok && b.n == CG_SEAL_HEAD + lens[i] + 16 * chunks;
			n = ok ? unseal(b.p, b.n, mapped, &got) : -1;
			snprintf(what, sizeof(what),
			         "%zu bytes sealed and opened (%s)", lens[i],
			         mapped ? "mapped" : "a stream");
			expect(n == (long)lens[i] &&
			           memcmp(got, data, lens[i]) == 0,
			       what);
			if (n < 0)
				fprintf(stderr, "%s\n", cg_errmsg());
			free(got);
			free(b.p);
		}
	free(data);
}

/* Whether both readers refuse b [n] with a message matching want. */
static int
refused(const unsigned char *b, size_t n, const char *want)
{
	for (int mapped = 0; mapped < 2; mapped++) {
		unsigned char *got;
		long r = unseal(b, n, mapped, &got);
		free(got);
		if (r >= 0 || strstr(cg_errmsg(), want) == NULL) {
			fprintf(stderr, "not refused (%s): %s\n",
			        mapped ? "mapped" : "stream",
			        r >= 0 ? "opened" : cg_errmsg());
			return 0;
		}
	}
	return 1;
}

static void
hostile(const unsigned char pub[32])
{
	size_t plain = 3 * CHUNK + 100, step = CHUNK + 16;
	unsigned char *data = malloc(plain), *bad;
	struct buf b;
	int ok = 1;

	for (size_t i = 0; i < plain; i++)
		data[i] = (unsigned char)(i ^ (i >> 8));
	if (seal(&b, pub, data, plain, plain) != 0)
		abort();
	bad = malloc(b.n + step);
	/* one byte flipped: every byte of the header, then every 61st */
	for (size_t i = 0; i < b.n; i += i < CG_SEAL_HEAD ? 1 : 61) {
		memcpy(bad, b.p, b.n);
		bad[i] ^= 0x20;
		if (!refused(bad, b.n, "sealed")) {
			fprintf(stderr, "  byte %zu flipped\n", i);
			ok = 0;
		}
	}
	for (size_t i = b.n - 16; i < b.n; i++) { /* the last tag */
		memcpy(bad, b.p, b.n);
		bad[i] ^= 1;
		ok &= refused(bad, b.n, "fails authentication");
	}
	expect(ok, "a flipped byte anywhere is refused");
	ok = 1;
	/* cut short: at every chunk's end, inside chunks and the header */
	for (size_t k = 1; k <= 3; k++)
		ok &= refused(b.p, CG_SEAL_HEAD + k * step,
		              "fails authentication");
	ok &= refused(b.p, CG_SEAL_HEAD + step + 100, "fails authentication");
	/* a last chunk shorter than a tag: within the tag of the one
	 * before, or a few bytes past it */
	ok &= refused(b.p, CG_SEAL_HEAD + step - 5, "fails authentication");
	ok &= refused(b.p, CG_SEAL_HEAD + step + 5, "cut short");
	ok &= refused(b.p, CG_SEAL_HEAD + 2 * step + 15, "cut short");
	ok &= refused(b.p, b.n - 1, "fails authentication");
	ok &= refused(b.p, CG_SEAL_HEAD + 3, "cut short");
	ok &= refused(b.p, CG_SEAL_HEAD + 10, "cut short");
	ok &= refused(b.p, CG_SEAL_HEAD - 1, "cut short");
	expect(ok, "a file cut short is refused");
	ok = 1;
	/* extended: a byte, a copy of the last chunk, a copy of a chunk */
	memcpy(bad, b.p, b.n);
	bad[b.n] = 0;
	ok &= refused(bad, b.n + 1, "fails authentication");
	memcpy(bad + b.n, b.p + CG_SEAL_HEAD, step);
	ok &= refused(bad, b.n + step, "fails authentication");
	expect(ok, "bytes after the end are refused");
	ok = 1;
	/* chunks swapped, dropped, repeated */
	memcpy(bad, b.p, b.n);
	memcpy(bad + CG_SEAL_HEAD, b.p + CG_SEAL_HEAD + step, step);
	memcpy(bad + CG_SEAL_HEAD + step, b.p + CG_SEAL_HEAD, step);
	ok &= refused(bad, b.n, "chunk 0 fails authentication");
	memcpy(bad, b.p, CG_SEAL_HEAD + step);
	memcpy(bad + CG_SEAL_HEAD + step, b.p + CG_SEAL_HEAD + 2 * step,
	       b.n - CG_SEAL_HEAD - 2 * step);
	ok &= refused(bad, b.n - step, "chunk 1 fails authentication");
	memcpy(bad, b.p, CG_SEAL_HEAD + 2 * step);
	memcpy(bad + CG_SEAL_HEAD + 2 * step, b.p + CG_SEAL_HEAD + step,
	       b.n - CG_SEAL_HEAD - step);
	ok &= refused(bad, b.n + step, "chunk 2 fails authentication");
	/* the last chunk of another file sealed to the same key */
	{
		struct buf o;
		if (seal(&o, pub, data, plain, plain) != 0)
			abort();
		memcpy(bad, b.p, b.n);
		memcpy(bad + b.n - 116, o.p + o.n - 116, 116);
		ok &= refused(bad, b.n, "chunk 3 fails authentication");
		free(o.p);
	}
	expect(ok, "chunks swapped, dropped, repeated or from another file "
	           "are refused");
	free(bad);
	free(b.p);
	free(data);
}

/*
 * Sealed bytes b [n] opened from a pipe (a child writes them) with
 * cg_unseal: the stream's reader, whose memory grows as chunks come.
 * 0 with the plaintext in *u, or -1 with a message.
 */
static int
unseal_pipe(const unsigned char *b, size_t n, struct cg_unsealed *u)
{
	int p[2], rc, st;
	pid_t pid;

	if (pipe(p) != 0 || (pid = fork()) < 0)
		abort();
	if (pid == 0) {
		close(p[0]);
		for (size_t off = 0; off < n;) {
			ssize_t w = write(p[1], b + off, n - off);
			if (w <= 0)
				_exit(1);
			off += (size_t)w;
		}
		_exit(0);
	}
	close(p[1]);
	rc = cg_unseal(p[0], NULL, 0, 1 << 30, u);
	close(p[0]);
	waitpid(pid, &st, 0);
	return rc;
}

/*
 * Through a pipe, the stream's reader grows its memory (2 MiB at first)
 * past several doublings: a plaintext of 9 MiB and 3 bytes in chunks of
 * 4 KiB and of 1 MiB opens to its bytes, in memory on a 2 MiB boundary;
 * its last tag altered, a chunk's body altered, or cut inside its last
 * chunk, it is refused and nothing handed out.
 */
static void
streams(const unsigned char pub[32])
{
	const size_t plain = (9u << 20) + 3, chunks[] = {CHUNK, 1u << 20};
	unsigned char *data = malloc(plain);
	char what[96];

	for (size_t i = 0; i < plain; i++)
		data[i] = (unsigned char)(i * 13 + (i >> 12));
	for (size_t c = 0; c < 2; c++) {
		struct buf b = {0};
		struct cg_unsealed u;
		struct cg_sealer *s =
		    cg_sealer_new_to(pub, chunks[c], buf_write, &b);
		int ok = s && cg_sealer_write(s, data, plain) == 0 &&
		         cg_sealer_close(s) == 0;
		cg_sealer_free(s);
		if (!ok)
			abort();
		ok = unseal_pipe(b.p, b.n, &u) == 0;
		snprintf(what, sizeof(what),
		         "9 MiB and 3 bytes in chunks of %zu through a pipe",
		         chunks[c]);
		expect(ok && u.size == plain &&
		           memcmp(u.mem, data, plain) == 0 &&
		           ((uintptr_t)u.mem & ((2u << 20) - 1)) == 0,
		       what);
		if (!ok)
			fprintf(stderr, "%s\n", cg_errmsg());
		cg_unsealed_free(&u);
		b.p[b.n - 1] ^= 1; /* the last tag: known bad at the end */
		ok = unseal_pipe(b.p, b.n, &u) != 0 && u.mem == NULL &&
		     strstr(cg_errmsg(), "fails authentication") != NULL;
		b.p[b.n - 1] ^= 1;
		b.p[CG_SEAL_HEAD + 2 * (chunks[c] + 16) + 100] ^= 1;
		ok = ok && unseal_pipe(b.p, b.n, &u) != 0 && u.mem == NULL &&
		     strstr(cg_errmsg(), "chunk 2 fails authentication");
		b.p[CG_SEAL_HEAD + 2 * (chunks[c] + 16) + 100] ^= 1;
		ok = ok && unseal_pipe(b.p, b.n - 20, &u) != 0 &&
		     u.mem == NULL &&
		     strstr(cg_errmsg(), "fails authentication") != NULL;
		snprintf(
		    what, sizeof(what),
		    "through a pipe, chunks of %zu: a lying tag, an altered "
		    "chunk, a cut are refused",
		    chunks[c]);
		expect(ok, what);
		free(b.p);
	}
	free(data);
}

int
main(void)
{
	unsigned char pub[32], other[32], *got;
	struct buf b;
	const char *msg;

	snprintf(dir, sizeof(dir), "/tmp/test_seal.XXXXXX");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	unsetenv("CG_SEAL_KEY");
	unsetenv("CG_ENCRYPT_TO");
	if (cg_key_generate_alg(tmp("k"), "k", 0, CG_KEY_X25519) != 0 ||
	    cg_key_generate_alg(tmp("o"), "o", 0, CG_KEY_X25519) != 0 ||
	    cg_key_generate_alg(tmp("e"), "e", 0, CG_KEY_ED25519) != 0) {
		fprintf(stderr, "keys: %s\n", cg_errmsg());
		return 1;
	}
	{
		EVP_PKEY *k = cg_key_read_private(tmp("k"), CG_KEY_X25519);
		EVP_PKEY *o = cg_key_read_private(tmp("o"), CG_KEY_X25519);
		size_t n = 32, m = 32;
		if (k == NULL || o == NULL ||
		    EVP_PKEY_get_raw_public_key(k, pub, &n) != 1 ||
		    EVP_PKEY_get_raw_public_key(o, other, &m) != 1) {
			fprintf(stderr, "keys: %s\n", cg_errmsg());
			return 1;
		}
		EVP_PKEY_free(k);
		EVP_PKEY_free(o);
	}

	/* no key given */
	expect(cg_seal_active() == 0, "nothing sealed without a key");
	if (seal(&b, pub, (const unsigned char *)"x", 1, 1) != 0)
		return 1;
	expect(unseal(b.p, b.n, 0, &got) < 0 &&
	           strstr(cg_errmsg(), "no key to open it") != NULL,
	       "no key: said");
	free(got);
	expect(cg_seal_key_use(tmp("e")) != 0 &&
	           strstr(cg_errmsg(), "not an X25519 key") != NULL,
	       "an Ed25519 key is not a sealing key");
	expect(cg_seal_to(tmp("e.pub")) != 0 && cg_seal_active() == 0,
	       "nor is an Ed25519 public key");
	if (cg_seal_key_use(tmp("o")) != 0)
		return 1;
	msg = unseal(b.p, b.n, 1, &got) < 0 ? cg_errmsg() : "";
	expect(strstr(msg, "not to the key given") != NULL,
	       "another key: said");
	free(got);
	free(b.p);

	if (cg_seal_key_use(tmp("k")) != 0 || cg_seal_to(tmp("k.pub")) != 0 ||
	    cg_seal_active() != 1)
		return 1;
	round_trips(pub);
	hostile(pub);
	streams(pub);
	(void)other;

	/* a sealed cg file, written and read by the container */
	{
		struct cg_file *f = cg_file_new("model"), *g;
		float x[3] = {1, 2, 3};
		uint64_t shape[1] = {3};
		cg_file_add(f, "w", CG_F32, 1, shape, x);
		expect(cg_file_write(f, tmp("m.cgm"), CG_COMPRESS_NONE) == 0,
		       "a sealed cg file written");
		g = cg_file_read(tmp("m.cgm"));
		expect(g != NULL && g->ntensors == 1 &&
		           memcmp(g->tensors[0]->data, x, sizeof(x)) == 0,
		       "and read back");
		cg_file_free(g);
		cg_seal_key_use(NULL);
		g = cg_file_read(tmp("m.cgm"));
		expect(g == NULL && strstr(cg_errmsg(), "m.cgm: sealed (to "
		                                        "key") != NULL,
		       "without the key: the file named, no key said");
		cg_file_free(g);
		cg_file_free(f);
	}
	if (system(NULL)) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return failures ? 1 : 0;
}
