/*
 * file/seal.c - sealing a file's bytes to an X25519 key, and opening them
 * (OpenSSL 3: X25519, HKDF-SHA256, AES-256-GCM).
 *
 * seal.h gives the format.  The sealer and the opener work a chunk at a
 * time and never hold more than one: a file of any size streams through
 * a pipe sealed.  The opener hands out a chunk's bytes only after its tag
 * is checked, and knows the last chunk by the end of its input (it reads
 * one byte ahead), so that a file cut at a chunk's end, or one with bytes
 * after its end, fails a tag instead of passing for whole.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "core/error.h"
#include "core/util.h"
#include "file/magic.h"
#include "file/seal.h"
#include "file/sign.h"

#define TAG 16
#define SUITE 1 /* X25519, HKDF-SHA256, AES-256-GCM */
#define INFO "cg seal v1"
#define CHUNK_MIN (1u << 12)
#define CHUNK_MAX (1u << 24)

static void
put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t
get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* ---------------------------------------------------------------- keys */

static int to_set; /* cg_seal_to was called */
static int to_on;  /* and a key is in use */
static unsigned char to_pub[32];
static int key_set;        /* cg_seal_key_use was called */
static EVP_PKEY *key_priv; /* the key to open with, or NULL */
static unsigned char key_pub[32];

/* The first X25519 key of a key file. */
static int
first_key(void *ctx, const unsigned char pub[32], const char *comment)
{
	(void)comment;
	memcpy(ctx, pub, 32);
	return 1;
}

int
cg_seal_to(const char *path)
{
	to_set = 1;
	to_on = 0;
	if (path == NULL)
		return 0;
	switch (cg_key_each_alg(path, CG_KEY_X25519, first_key, to_pub)) {
	case 1:
		break;
	case 0:
		return cg_seterr("%s: no x25519 key", path);
	default:
		return -1;
	}
	to_on = 1;
	return 0;
}

int
cg_seal_active(void)
{
	const char *env;

	if (!to_set) {
		env = getenv("CG_ENCRYPT_TO");
		if (cg_seal_to(env && *env ? env : NULL) != 0) {
			cg_errprefix("CG_ENCRYPT_TO");
			to_set = 0; /* said again at the next write */
			return -1;
		}
	}
	return to_on;
}

int
cg_seal_key_use(const char *path)
{
	size_t n = 32;

	key_set = 1;
	EVP_PKEY_free(key_priv);
	key_priv = NULL;
	if (path == NULL)
		return 0;
	if ((key_priv = cg_key_read_private(path, CG_KEY_X25519)) == NULL)
		return -1;
	if (EVP_PKEY_get_raw_public_key(key_priv, key_pub, &n) != 1 ||
	    n != 32) {
		EVP_PKEY_free(key_priv);
		key_priv = NULL;
		return cg_seterr("%s: cannot get the public key", path);
	}
	return 0;
}

/* The key to open with: 1, 0 (none), or -1 with a message. */
static int
key_active(void)
{
	const char *env;

	if (!key_set) {
		env = getenv("CG_SEAL_KEY");
		if (cg_seal_key_use(env && *env ? env : NULL) != 0) {
			cg_errprefix("CG_SEAL_KEY");
			key_set = 0;
			return -1;
		}
	}
	return key_priv != NULL;
}

/*
 * The AES key of a file whose header is head: HKDF-SHA256 of the X25519
 * secret of mine and peer's public key, salted with the ephemeral and the
 * recipient's public keys.  0, or -1 with a message.
 */
static int
file_key(unsigned char out[32], EVP_PKEY *mine, const unsigned char peer[32],
         const unsigned char eph[32], const unsigned char rcpt[32])
{
	unsigned char secret[32], salt[64], zero[32] = {0};
	EVP_PKEY *p = NULL;
	EVP_PKEY_CTX *c = NULL;
	size_t n = sizeof(secret), outn = 32;
	int rc = -1;

	if ((p = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer,
	                                     32)) == NULL ||
	    (c = EVP_PKEY_CTX_new(mine, NULL)) == NULL ||
	    EVP_PKEY_derive_init(c) != 1 ||
	    EVP_PKEY_derive_set_peer(c, p) != 1 ||
	    EVP_PKEY_derive(c, secret, &n) != 1 || n != 32 ||
	    CRYPTO_memcmp(secret, zero, 32) == 0) {
		cg_seterr("sealed: no shared secret with this key");
		goto out;
	}
	EVP_PKEY_CTX_free(c);
	memcpy(salt, eph, 32);
	memcpy(salt + 32, rcpt, 32);
	if ((c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL)) == NULL ||
	    EVP_PKEY_derive_init(c) != 1 ||
	    EVP_PKEY_CTX_set_hkdf_md(c, EVP_sha256()) != 1 ||
	    EVP_PKEY_CTX_set1_hkdf_salt(c, salt, sizeof(salt)) != 1 ||
	    EVP_PKEY_CTX_set1_hkdf_key(c, secret, sizeof(secret)) != 1 ||
	    EVP_PKEY_CTX_add1_hkdf_info(c, (const unsigned char *)INFO,
	                                sizeof(INFO) - 1) != 1 ||
	    EVP_PKEY_derive(c, out, &outn) != 1 || outn != 32) {
		cg_seterr("sealed: HKDF failed");
		goto out;
	}
	rc = 0;
out:
	OPENSSL_cleanse(secret, sizeof(secret));
	EVP_PKEY_CTX_free(c);
	EVP_PKEY_free(p);
	return rc;
}

/* Chunk i's nonce. */
static void
nonce(unsigned char iv[12], uint64_t i, int last)
{
	for (int k = 0; k < 8; k++)
		iv[k] = (unsigned char)(i >> (56 - 8 * k));
	iv[8] = iv[9] = iv[10] = 0;
	iv[11] = last ? 1 : 0;
}

/* A cipher context keyed with key for enc (1) or dec (0); NULL with a
 * message. */
static EVP_CIPHER_CTX *
cipher(const unsigned char key[32], int enc)
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();

	if (c == NULL || EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, key,
	                                   NULL, enc) != 1) {
		EVP_CIPHER_CTX_free(c);
		cg_seterr("sealed: AES-256-GCM unavailable");
		return NULL;
	}
	return c;
}

/* ------------------------------------------------------------- sealing */

struct cg_sealer {
	cg_seal_write_fn write;
	void *ctx;
	EVP_CIPHER_CTX *c;
	unsigned char head[CG_SEAL_HEAD];
	size_t chunk;
	uint64_t index;    /* of the next chunk */
	unsigned char *pt; /* [chunk]: what waits to be sealed */
	size_t npt;
	unsigned char *ct; /* [chunk + TAG] */
	int closed, failed;
};

struct cg_sealer *
cg_sealer_new(cg_seal_write_fn write, void *ctx)
{
	int on = cg_seal_active();

	if (on <= 0) {
		if (on == 0)
			cg_seterr("no key to seal to");
		return NULL;
	}
	return cg_sealer_new_to(to_pub, CG_SEAL_CHUNK, write, ctx);
}

struct cg_sealer *
cg_sealer_new_to(const unsigned char pub[32], size_t chunk,
                 cg_seal_write_fn write, void *ctx)
{
	struct cg_sealer *s = calloc(1, sizeof(*s));
	EVP_PKEY *eph = NULL;
	EVP_PKEY_CTX *kc = NULL;
	unsigned char key[32], epub[32];
	size_t n = 32;

	if (chunk < CHUNK_MIN || chunk > CHUNK_MAX || (chunk & (chunk - 1))) {
		cg_seterr("sealed: chunk size %zu not a power of two in "
		          "[%u, %u]",
		          chunk, CHUNK_MIN, CHUNK_MAX);
		free(s);
		return NULL;
	}
	if (s == NULL || (s->pt = malloc(chunk)) == NULL ||
	    (s->ct = malloc(chunk + TAG)) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	s->write = write;
	s->ctx = ctx;
	s->chunk = chunk;
	if ((kc = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, NULL)) == NULL ||
	    EVP_PKEY_keygen_init(kc) != 1 || EVP_PKEY_keygen(kc, &eph) != 1 ||
	    EVP_PKEY_get_raw_public_key(eph, epub, &n) != 1 || n != 32) {
		cg_seterr("sealed: cannot make an X25519 key");
		goto fail;
	}
	memcpy(s->head, CG_SEAL_MAGIC, CG_SEAL_MAGIC_LEN);
	put32(s->head + 8, (uint32_t)chunk);
	put32(s->head + 12, SUITE);
	memcpy(s->head + 16, epub, 32);
	cg_sha256(s->head + 48, pub, 32);
	if (file_key(key, eph, pub, epub, pub) != 0 ||
	    (s->c = cipher(key, 1)) == NULL)
		goto fail;
	OPENSSL_cleanse(key, sizeof(key));
	EVP_PKEY_free(eph); /* forgotten: only the recipient can open it */
	EVP_PKEY_CTX_free(kc);
	if (write(ctx, s->head, CG_SEAL_HEAD) != 0) {
		cg_sealer_free(s);
		return NULL;
	}
	return s;
fail:
	OPENSSL_cleanse(key, sizeof(key));
	EVP_PKEY_free(eph);
	EVP_PKEY_CTX_free(kc);
	cg_sealer_free(s);
	return NULL;
}

/* Seal p [n] as the next chunk and write it. */
static int
seal_chunk(struct cg_sealer *s, const unsigned char *p, size_t n, int last)
{
	unsigned char iv[12];
	int len;

	nonce(iv, s->index, last);
	if (EVP_EncryptInit_ex(s->c, NULL, NULL, NULL, iv) != 1 ||
	    EVP_EncryptUpdate(s->c, NULL, &len, s->head, CG_SEAL_HEAD) != 1 ||
	    (n && EVP_EncryptUpdate(s->c, s->ct, &len, p, (int)n) != 1) ||
	    EVP_EncryptFinal_ex(s->c, s->ct + n, &len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(s->c, EVP_CTRL_GCM_GET_TAG, TAG, s->ct + n) !=
	        1) {
		s->failed = 1;
		return cg_seterr("sealed: AES-256-GCM failed");
	}
	s->index++;
	if (s->write(s->ctx, s->ct, n + TAG) != 0) {
		s->failed = 1;
		return -1;
	}
	return 0;
}

int
cg_sealer_write(struct cg_sealer *s, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	if (s->closed || s->failed)
		return cg_seterr("sealed: written after its end or a failure");
	while (n > 0) {
		size_t k;
		/* a full chunk goes out only once more follows it: the
		 * last chunk may be a full one */
		if (s->npt == s->chunk) {
			if (seal_chunk(s, s->pt, s->npt, 0) != 0)
				return -1;
			s->npt = 0;
		}
		if (s->npt == 0 && n > s->chunk) {
			/* straight from the caller's bytes */
			if (seal_chunk(s, p, s->chunk, 0) != 0)
				return -1;
			p += s->chunk;
			n -= s->chunk;
			continue;
		}
		k = s->chunk - s->npt < n ? s->chunk - s->npt : n;
		memcpy(s->pt + s->npt, p, k);
		s->npt += k;
		p += k;
		n -= k;
	}
	return 0;
}

int
cg_sealer_close(struct cg_sealer *s)
{
	if (s->closed || s->failed)
		return cg_seterr("sealed: closed twice or after a failure");
	s->closed = 1;
	return seal_chunk(s, s->pt, s->npt, 1);
}

void
cg_sealer_free(struct cg_sealer *s)
{
	if (s == NULL)
		return;
	EVP_CIPHER_CTX_free(s->c);
	if (s->pt)
		OPENSSL_cleanse(s->pt, s->chunk);
	free(s->pt);
	free(s->ct);
	free(s);
}

/* ------------------------------------------------------------- opening */

/*
 * An opener: the header's checks, the key, and the chunks one by one from
 * a stream (a pipe: the last chunk is known by the end of its input, so
 * it reads one byte ahead).
 */
struct opener {
	int fd;
	const unsigned char *pre; /* bytes read before, still to hand out */
	size_t npre;
	unsigned char head[CG_SEAL_HEAD];
	unsigned char key[32];
	size_t chunk;
	int eof;
};

/* Up to n bytes of the input into buf: pre first, then fd; the count,
 * 0 at the end, -1 with a message. */
static ssize_t
src_read(struct opener *o, void *buf, size_t n)
{
	ssize_t r;

	if (o->npre) {
		size_t k = o->npre < n ? o->npre : n;
		memcpy(buf, o->pre, k);
		o->pre += k;
		o->npre -= k;
		return (ssize_t)k;
	}
	if (o->fd < 0)
		return 0;
	while ((r = read(o->fd, buf, n)) < 0 && errno == EINTR)
		;
	if (r < 0)
		cg_seterr("%s", strerror(errno));
	return r;
}

/* Fill buf from have to n bytes, or to the end of the input: the count,
 * or -1. */
static ssize_t
src_fill(struct opener *o, unsigned char *buf, size_t have, size_t n)
{
	while (have < n && !o->eof) {
		ssize_t r = src_read(o, buf + have, n - have);
		if (r < 0)
			return -1;
		if (r == 0)
			o->eof = 1;
		have += (size_t)r;
	}
	return (ssize_t)have;
}

/* Check the header o->head [got] and derive the file's key: 0, or -1
 * with a message. */
static int
open_head(struct opener *o, size_t got)
{
	unsigned char mine[32];
	char fp[65], fm[65];
	EVP_PKEY *k;
	int on;

	if (!cg_seal_probe(o->head, got))
		return cg_seterr("sealed: not a sealed file (its first bytes)");
	if (got < CG_SEAL_HEAD)
		return cg_seterr("sealed: header cut short (%zu of %d bytes)",
		                 got, CG_SEAL_HEAD);
	if (get32(o->head + 12) != SUITE)
		return cg_seterr("sealed: unknown suite %u (this cg knows 1)",
		                 (unsigned)get32(o->head + 12));
	o->chunk = get32(o->head + 8);
	if (o->chunk < CHUNK_MIN || o->chunk > CHUNK_MAX ||
	    (o->chunk & (o->chunk - 1)))
		return cg_seterr("sealed: bad chunk size %zu", o->chunk);
	cg_tohex(fp, o->head + 48, 32);
	if ((on = key_active()) < 0)
		return -1;
	if (on == 0)
		return cg_seterr("sealed (to key %.16s...): no key to open it "
		                 "(--seal-key KEY or CG_SEAL_KEY)",
		                 fp);
	k = key_priv;
	cg_sha256(mine, key_pub, 32);
	if (memcmp(mine, o->head + 48, 32) != 0) {
		cg_tohex(fm, mine, 32);
		return cg_seterr("sealed to key %.16s..., not to the key "
		                 "given (%.16s...)",
		                 fp, fm);
	}
	return file_key(o->key, k, o->head + 16, o->head + 16, key_pub);
}

/* Open chunk i, n bytes of ciphertext and tag at ct, into pt with c:
 * 0, or -1 with a message. */
static int
open_chunk(EVP_CIPHER_CTX *c, const unsigned char *head, uint64_t i, int last,
           const unsigned char *ct, size_t n, unsigned char *pt)
{
	unsigned char iv[12];
	int len;

	if (n < TAG || n - TAG > INT_MAX)
		return cg_seterr("sealed: chunk %llu: bad length",
		                 (unsigned long long)i);
	nonce(iv, i, last);
	n -= TAG;
	if (EVP_DecryptInit_ex(c, NULL, NULL, NULL, iv) == 1 &&
	    EVP_DecryptUpdate(c, NULL, &len, head, CG_SEAL_HEAD) == 1 &&
	    (n == 0 || EVP_DecryptUpdate(c, pt, &len, ct, (int)n) == 1) &&
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG,
	                        (void *)(ct + n)) == 1 &&
	    EVP_DecryptFinal_ex(c, pt + n, &len) == 1)
		return 0;
	return cg_seterr("sealed: chunk %llu fails authentication (the file "
	                 "was altered, cut short, extended or reordered)",
	                 (unsigned long long)i);
}

#define HUGE_PAGE ((size_t)2 << 20)

size_t
cg_unsealed_len(size_t n)
{
	return n ? (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE : HUGE_PAGE;
}

/*
 * Anonymous memory for n bytes, cg_unsealed_len(n) of it, on a 2 MiB
 * boundary and marked for huge pages: the pages of a fresh buffer are
 * what an opened file costs, and a huge page is one fault (and one
 * zeroing) for 512 small ones.  The length is whole huge pages, so that
 * the tail is one too.  NULL with a message.
 */
static unsigned char *
plain_alloc(size_t n)
{
	size_t need, len, lo;
	unsigned char *p, *a;

	if (n > SIZE_MAX / 2 - 2 * HUGE_PAGE) {
		cg_seterr("sealed: out of memory");
		return NULL;
	}
	need = cg_unsealed_len(n);
	len = need + HUGE_PAGE;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	         -1, 0);
	if (p == MAP_FAILED) {
		cg_seterr("sealed: %s", strerror(errno));
		return NULL;
	}
	a = (unsigned char *)(((uintptr_t)p + HUGE_PAGE - 1) &
	                      ~(uintptr_t)(HUGE_PAGE - 1));
	lo = (size_t)(a - p);
	if (lo)
		munmap(p, lo);
	if (len - lo > need)
		munmap(a + need, len - lo - need);
	madvise(a, need, MADV_HUGEPAGE); /* a hint: without it, small pages */
	return a;
}

/*
 * Memory for at least need bytes (plain_alloc's) that holds the used
 * bytes of old, plain_alloc's memory of maplen bytes, which goes: its
 * pages moved, not copied, to the start of the new run (mremap), huge
 * pages and all.  NULL with a message, and old as it was.
 */
static unsigned char *
plain_grow(unsigned char *old, size_t maplen, size_t used, size_t need)
{
	unsigned char *p = plain_alloc(need);

	if (p == NULL)
		return NULL;
	if (mremap(old, maplen, maplen, MREMAP_MAYMOVE | MREMAP_FIXED, p) ==
	    MAP_FAILED) {
		/* not moved: copied */
		memcpy(p, old, used);
		munmap(old, maplen);
	}
	return p;
}

/* Write buf [n] whole to fd: 0 or -1 with a message. */
static int
write_all(int fd, const unsigned char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return cg_seterr("sealed: %s", w < 0 ? strerror(errno)
			                                     : "write failed");
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * The chunks of a stream (a pipe, or bytes in memory) opened one at a
 * time, in order, each read into one buffer and opened from there
 * straight to its place in fresh memory (plain_alloc), which grows as
 * they come (plain_grow: its pages moved, never copied); hint is the
 * plaintext's length where known, else 0.  A chunk's bytes are kept
 * only once its tag is checked, and the memory is handed out only once
 * the last chunk's is: the memory and its length in *mem and *n, 0; or
 * -1 with the failing chunk's message, and nothing kept.
 */
static int
open_stream(struct opener *o, uint64_t max, size_t hint, unsigned char **mem,
            size_t *n)
{
	size_t want = o->chunk + TAG + 1, nct = 0, len = 0, cap;
	unsigned char *ct = malloc(want), *dst = NULL;
	EVP_CIPHER_CTX *c = cipher(o->key, 0);
	int rc = -1;

	if (ct == NULL) {
		cg_seterr("sealed: out of memory");
		goto out;
	}
	if (c == NULL)
		goto out;
	cap = hint && hint <= max ? hint : 4 * o->chunk;
	if ((dst = plain_alloc(cap)) == NULL)
		goto out;
	cap = cg_unsealed_len(cap);
	for (uint64_t i = 0;; i++) {
		ssize_t have = src_fill(o, ct, nct, want);
		int last;
		size_t k;
		if (have < 0)
			goto out;
		/* a byte past a whole chunk: this one is not the last */
		last = (size_t)have < want;
		k = last ? (size_t)have : want - 1;
		if (k < TAG) {
			cg_seterr("sealed: cut short (chunk %llu has %zu "
			          "bytes, less than its tag)",
			          (unsigned long long)i, k);
			goto out;
		}
		if (len + (k - TAG) > max) {
			cg_seterr("sealed: more than %llu bytes inside (the "
			          "limit, CG_MAX_BYTES)",
			          (unsigned long long)max);
			goto out;
		}
		if (len + (k - TAG) > cap) {
			/* doubled, within the limit (checked above) */
			size_t need = len + (k - TAG);
			size_t next = cap * 2 > need ? cap * 2 : need;
			unsigned char *p;
			if (next > max)
				next = (size_t)max;
			if ((p = plain_grow(dst, cap, len, next)) == NULL)
				goto out;
			dst = p;
			cap = cg_unsealed_len(next);
		}
		if (open_chunk(c, o->head, i, last, ct, k, dst + len) != 0)
			goto out;
		len += k - TAG;
		if (last)
			break;
		ct[0] = ct[want - 1];
		nct = 1;
	}
	/* what was grown past the plaintext's huge pages goes */
	if (cap > cg_unsealed_len(len))
		munmap(dst + cg_unsealed_len(len), cap - cg_unsealed_len(len));
	*mem = dst;
	*n = len;
	dst = NULL;
	rc = 0;
out:
	if (dst)
		munmap(dst, cap);
	free(ct);
	EVP_CIPHER_CTX_free(c);
	return rc;
}

/*
 * The chunks of a regular file, mapped (the body of body [nb] bytes),
 * opened in parallel straight into fresh memory (plain_alloc), every
 * chunk to its place, which is known from the file's size.  The memory
 * and its size are left in *mem and *n; 0, or -1 with the first failing
 * chunk's message (and nothing kept).
 */
static int
open_mapped(struct opener *o, const unsigned char *body, size_t nb,
            uint64_t max, unsigned char **mem, size_t *n)
{
	size_t step = o->chunk + TAG, nchunks, plain;
	uint64_t bad = UINT64_MAX;
	unsigned char *dst;
	int oom = 0;

	if (nb < TAG)
		return cg_seterr("sealed: cut short (chunk 0 has %zu bytes, "
		                 "less than its tag)",
		                 nb);
	nchunks = (nb + o->chunk + TAG - 1) / step;
	/* the last chunk holds 1 to chunk + TAG bytes: at least its tag */
	if (nb - (nchunks - 1) * step < TAG)
		return cg_seterr("sealed: cut short (chunk %zu has %zu bytes, "
		                 "less than its tag)",
		                 nchunks - 1, nb - (nchunks - 1) * step);
	plain = nb - nchunks * TAG;
	if (plain > max)
		return cg_seterr("sealed: more than %llu bytes inside (the "
		                 "limit, CG_MAX_BYTES)",
		                 (unsigned long long)max);
	if ((dst = plain_alloc(plain)) == NULL)
		return -1;
#pragma omp parallel
	{
		EVP_CIPHER_CTX *c = cipher(o->key, 0);
		if (c == NULL) {
#pragma omp atomic write
			oom = 1;
		}
#pragma omp for schedule(dynamic, 1)
		for (size_t i = 0; i < nchunks; i++) {
			int last = i == nchunks - 1;
			size_t k = last ? nb - i * step : step;
			if (c == NULL)
				continue;
			if (open_chunk(c, o->head, i, last, body + i * step, k,
			               dst + i * o->chunk) != 0) {
#pragma omp critical(cg_seal_bad)
				if (i < bad)
					bad = i;
			}
		}
		EVP_CIPHER_CTX_free(c);
	}
	if (oom || bad != UINT64_MAX) {
		/* nothing of it kept: what failed a tag is not believed */
		munmap(dst, cg_unsealed_len(plain));
		if (oom)
			return cg_seterr("sealed: out of memory");
		return cg_seterr("sealed: chunk %llu fails authentication (the "
		                 "file was altered, cut short, extended or "
		                 "reordered)",
		                 (unsigned long long)bad);
	}
	*mem = dst;
	*n = plain;
	return 0;
}

int
cg_unseal(int fd, const void *pre, size_t npre, uint64_t max,
          struct cg_unsealed *u)
{
	struct opener o = {.fd = fd, .pre = pre, .npre = npre};
	unsigned char *mem = NULL;
	struct stat st = {0};
	size_t hint = 0;
	ssize_t got;
	off_t pos = -1;
	int rc = -1;

	*u = (struct cg_unsealed){.mem = NULL};
	if ((got = src_fill(&o, o.head, 0, CG_SEAL_HEAD)) < 0 ||
	    open_head(&o, (size_t)got) != 0)
		goto done;
	/* a regular file read from where the header ended, mapped whole
	 * from a page: its chunks in parallel; else a chunk at a time, its
	 * length, where known, sizing the memory */
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (pos = lseek(fd, 0, SEEK_CUR)) >= 0 && st.st_size > pos)
		hint = (size_t)(st.st_size - pos) + o.npre;
	else if (fd < 0)
		hint = o.npre;
	if (o.npre == 0 && pos == CG_SEAL_HEAD && st.st_size > pos) {
		size_t size = (size_t)st.st_size;
		unsigned char *map = mmap(NULL, size, PROT_READ,
		                          MAP_PRIVATE | MAP_POPULATE, fd, 0);
		if (map == MAP_FAILED) {
			cg_seterr("sealed: %s", strerror(errno));
			goto done;
		}
		rc = open_mapped(&o, map + pos, size - (size_t)pos, max, &mem,
		                 &u->size);
		munmap(map, size);
		lseek(fd, 0, SEEK_END);
	} else
		rc = open_stream(&o, max, hint, &mem, &u->size);
	u->mem = mem;
done:
	OPENSSL_cleanse(o.key, sizeof(o.key));
	if (rc != 0)
		*u = (struct cg_unsealed){.mem = NULL};
	return rc;
}

void
cg_unsealed_free(struct cg_unsealed *u)
{
	if (u->mem)
		munmap(u->mem, cg_unsealed_len(u->size));
	*u = (struct cg_unsealed){.mem = NULL};
}

int
cg_unseal_fd(int fd, const void *pre, size_t npre, uint64_t max)
{
	struct cg_unsealed u;
	int out;

	if (cg_unseal(fd, pre, npre, max, &u) != 0)
		return -1;
	/* opened into memory: copied into a memory file */
	if ((out = memfd_create("cg-unsealed", MFD_CLOEXEC)) < 0)
		cg_seterr("sealed: %s", strerror(errno));
	else if (write_all(out, u.mem, u.size) != 0 ||
	         (lseek(out, 0, SEEK_SET) != 0 &&
	          cg_seterr("sealed: %s", strerror(errno)))) {
		close(out);
		out = -1;
	}
	cg_unsealed_free(&u);
	return out;
}
