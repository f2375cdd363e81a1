/*
 * exchange/secagg.c - pairwise masks for secure aggregation (X25519,
 * HKDF-SHA256, ChaCha20; OpenSSL 3) and the exact integer sum that removes
 * them.
 *
 * secagg.h states the scheme.  The worker's side derives one key per
 * peer and adds or subtracts that peer's ChaCha20 stream, word for word,
 * to its fixed-point update; the coordinator's side adds the masked
 * words of every peer modulo 2^64, which leaves the weighted sum of the
 * true values, and refuses to say anything before every peer is in.
 * A round of a threshold adds the self-mask, its Shamir shares sealed
 * for each peer (ChaCha20-Poly1305) and the commitments on the worker's
 * side; a survivor's reveal; and on the coordinator's side the checks of
 * the reveals against the commitments, the self-masks rebuilt and every
 * mask of the round taken off.  Nothing here is a cipher of its own: the
 * streams are ChaCha20, the seals ChaCha20-Poly1305, and the keys come
 * from X25519 and HKDF as OpenSSL gives them; the field arithmetic is
 * core/shamir.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "core/shamir.h"
#include "exchange/secagg.h"
#include "file/sign.h"

#define SEG ((uint64_t)1 << 16) /* elements a thread masks at a time */

/* --------------------------------------------------------------- keys */

static int
cmp_pub(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

struct peers_ctx {
	unsigned char (*pub)[32];
	int n;
};

static int
add_peer(void *ctx, const unsigned char pub[32], const char *comment)
{
	struct peers_ctx *p = ctx;

	(void)comment;
	if (p->n >= CG_MASK_MAX_PEERS)
		return cg_seterr("more than %d peers", CG_MASK_MAX_PEERS);
	memcpy(p->pub[p->n++], pub, 32);
	return 0;
}

/* The X25519 keys of path (a file of .pub lines or a directory of .pub
 * files) into p, sorted; 0 or -1 with a message naming path. */
static int
read_peers(const char *path, struct peers_ctx *p)
{
	struct stat st;
	int nn, rc = 0;

	if ((p->pub = calloc(CG_MASK_MAX_PEERS, 32)) == NULL)
		return cg_seterr("out of memory");
	if (stat(path, &st) != 0)
		return cg_seterr("%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		rc = cg_key_each_alg(path, CG_KEY_X25519, add_peer, p);
	else {
		/* in name order, so that an error names the same file
		 * every time; the keys are sorted afterwards */
		struct dirent **ent;
		nn = scandir(path, &ent, NULL, alphasort);
		if (nn < 0)
			return cg_seterr("%s: %s", path, strerror(errno));
		for (int i = 0; i < nn; i++) {
			const char *d = ent[i]->d_name;
			size_t len = strlen(d);
			char *full;
			if (rc == 0 && len > 4 && d[0] != '.' &&
			    strcmp(d + len - 4, ".pub") == 0) {
				if ((full = malloc(strlen(path) + len + 2)) ==
				    NULL)
					rc = cg_seterr("out of memory");
				else {
					sprintf(full, "%s/%s", path, d);
					rc = cg_key_each_alg(
					    full, CG_KEY_X25519, add_peer, p);
					free(full);
				}
			}
			free(ent[i]);
		}
		free(ent);
	}
	if (rc != 0) {
		if (strncmp(cg_errmsg(), path, strlen(path)) != 0)
			cg_errprefix(path);
		return -1;
	}
	qsort(p->pub, (size_t)p->n, 32, cmp_pub);
	for (int i = 1; i < p->n; i++)
		if (memcmp(p->pub[i - 1], p->pub[i], 32) == 0) {
			char fp[65];
			cg_key_fingerprint(fp, p->pub[i]);
			return cg_seterr("%s: key %.16s... twice", path, fp);
		}
	if (p->n < 2)
		return cg_seterr(
		    "%s: %d peer%s; a masked round needs 2 at least", path,
		    p->n, p->n == 1 ? "" : "s");
	return 0;
}

void
cg_mask_free(struct cg_mask *m)
{
	if (m == NULL)
		return;
	EVP_PKEY_free(m->key);
	if (m->pair)
		OPENSSL_cleanse(m->pair, (size_t)m->npeers * 32);
	free(m->pair);
	free(m->peers);
	free(m->fpo);
	free(m->share_ct);
	free(m->share_commit);
	free(m->pair_commit);
	OPENSSL_cleanse(m->selfkey, sizeof(m->selfkey));
	memset(m, 0, sizeof(*m));
}

int
cg_mask_init(struct cg_mask *m, const char *keypath, const char *peers,
             const char *round, int frac_bits)
{
	struct peers_ctx p = {0};
	size_t n = 32;

	memset(m, 0, sizeof(*m));
	if (round && strlen(round) > CG_MASK_ROUND_MAX) {
		cg_seterr("round text longer than %d bytes", CG_MASK_ROUND_MAX);
		return -1;
	}
	if (frac_bits < CG_MASK_MIN_FRAC || frac_bits > CG_MASK_MAX_FRAC)
		return cg_seterr("fraction bits %d not in [%d, %d]", frac_bits,
		                 CG_MASK_MIN_FRAC, CG_MASK_MAX_FRAC);
	snprintf(m->round, sizeof(m->round), "%s", round ? round : "");
	m->frac_bits = frac_bits;
	if ((m->key = cg_key_read_private(keypath, CG_KEY_X25519)) == NULL)
		goto fail;
	if (EVP_PKEY_get_raw_public_key(m->key, m->self, &n) != 1 || n != 32) {
		cg_seterr("%s: cannot get the public key", keypath);
		goto fail;
	}
	if (read_peers(peers, &p) != 0)
		goto fail;
	m->peers = p.pub;
	m->npeers = p.n;
	p.pub = NULL;
	m->me = -1;
	for (int i = 0; i < m->npeers; i++)
		if (memcmp(m->peers[i], m->self, 32) == 0)
			m->me = i;
	if (m->me < 0) {
		cg_seterr("%s: its public key is not among the peers of %s",
		          keypath, peers);
		goto fail;
	}
	return 0;
fail:
	free(p.pub);
	cg_mask_free(m);
	return -1;
}

/* The round's seed (secagg.h) for base. */
static void
round_seed(const struct cg_mask *m, const unsigned char base[32],
           unsigned char seed[32])
{
	static const char tag[] = "cg-mask/1";
	const size_t rl = strlen(m->round); /* capped: buf holds it */
	unsigned char set[32],
	    buf[sizeof(tag) + 32 + 4 + CG_MASK_ROUND_MAX + 32];
	size_t len = sizeof(tag) + 32 + 4 + rl + 32, at = 0;

	cg_sha256(set, m->peers, (size_t)m->npeers * 32);
	memcpy(buf, tag, sizeof(tag)); /* with its NUL */
	at += sizeof(tag);
	memcpy(buf + at, base, 32);
	at += 32;
	for (int b = 0; b < 4; b++)
		buf[at++] = (unsigned char)(rl >> (8 * b));
	memcpy(buf + at, m->round, rl);
	at += rl;
	memcpy(buf + at, set, 32);
	cg_sha256(seed, buf, len);
}

/* X25519(key, pub) into out; 0, or -1 with a message naming pub. */
static int
shared_secret(EVP_PKEY *key, const unsigned char pub[32], unsigned char out[32])
{
	unsigned char zero[32] = {0};
	EVP_PKEY *peer = NULL;
	EVP_PKEY_CTX *c = NULL;
	size_t n = 32;
	int rc = -1;

	if ((peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, pub,
	                                        32)) == NULL ||
	    (c = EVP_PKEY_CTX_new(key, NULL)) == NULL ||
	    EVP_PKEY_derive_init(c) != 1 ||
	    EVP_PKEY_derive_set_peer(c, peer) != 1 ||
	    EVP_PKEY_derive(c, out, &n) != 1 || n != 32 ||
	    memcmp(out, zero, 32) == 0) {
		char fp[65];
		cg_key_fingerprint(fp, pub);
		cg_seterr("peer %.16s...: no shared secret with this key", fp);
	} else
		rc = 0;
	EVP_PKEY_CTX_free(c);
	EVP_PKEY_free(peer);
	return rc;
}

/* HKDF-SHA256 of ikm [ikmlen] with salt [32] and info [infolen] into
 * out [outlen]; 0, or -1 with a message. */
static int
hkdf(const unsigned char *ikm, size_t ikmlen, const unsigned char salt[32],
     const unsigned char *info, size_t infolen, unsigned char *out,
     size_t outlen)
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	size_t n = outlen;
	int rc = -1;

	if (c != NULL && EVP_PKEY_derive_init(c) == 1 &&
	    EVP_PKEY_CTX_set_hkdf_md(c, EVP_sha256()) == 1 &&
	    EVP_PKEY_CTX_set1_hkdf_salt(c, salt, 32) == 1 &&
	    EVP_PKEY_CTX_set1_hkdf_key(c, ikm, (int)ikmlen) == 1 &&
	    EVP_PKEY_CTX_add1_hkdf_info(c, info, (int)infolen) == 1 &&
	    EVP_PKEY_derive(c, out, &n) == 1 && n == outlen)
		rc = 0;
	else
		cg_seterr("HKDF failed");
	EVP_PKEY_CTX_free(c);
	return rc;
}

/* k_ij for peer j: HKDF-SHA256 of the X25519 secret; 0 or -1. */
static int
pair_key(const struct cg_mask *m, int j, const unsigned char seed[32],
         unsigned char out[32])
{
	static const char label[] = "cg-mask pair";
	unsigned char secret[32], info[sizeof(label) - 1 + 64];
	const unsigned char *lo = m->peers[j < m->me ? j : m->me];
	const unsigned char *hi = m->peers[j < m->me ? m->me : j];
	int rc;

	if (shared_secret(m->key, m->peers[j], secret) != 0)
		return -1;
	memcpy(info, label, sizeof(label) - 1);
	memcpy(info + sizeof(label) - 1, lo, 32);
	memcpy(info + sizeof(label) - 1 + 32, hi, 32);
	rc = hkdf(secret, 32, seed, info, sizeof(info), out, 32);
	OPENSSL_cleanse(secret, sizeof(secret));
	return rc;
}

/* ------------------------------------------------- threshold: shares */

/* SHA-256(tag, its NUL | seed | a [an] | b [bn]) into out. */
static void
commit(unsigned char out[32], const char *tag, const unsigned char seed[32],
       const void *a, size_t an, const void *b, size_t bn)
{
	unsigned char buf[64 + 32 + 8 + CG_MASK_SHARE];
	size_t tl = strlen(tag) + 1, at = 0;

	/* every caller's pieces fit: tags of 32 bytes at most, 8 + 64 */
	memcpy(buf, tag, tl);
	at += tl;
	memcpy(buf + at, seed, 32);
	at += 32;
	memcpy(buf + at, a, an);
	at += an;
	if (bn)
		memcpy(buf + at, b, bn);
	cg_sha256(out, buf, at + bn);
}

#define SELF_COMMIT "cg-mask self commit"
#define SHARE_COMMIT "cg-mask share commit"
#define PAIR_COMMIT "cg-mask pair commit"

/* The commitment to the share of peer i's self-mask at peer q (both by
 * fingerprint order). */
static void
share_commit(unsigned char out[32], const unsigned char seed[32], int i, int q,
             const unsigned char share[CG_MASK_SHARE])
{
	unsigned char iq[8];

	for (int b = 0; b < 4; b++) {
		iq[b] = (unsigned char)((unsigned)i >> (8 * b));
		iq[4 + b] = (unsigned char)((unsigned)q >> (8 * b));
	}
	commit(out, SHARE_COMMIT, seed, iq, 8, share, CG_MASK_SHARE);
}

/* The key that seals a share from the holder of key (public from) to
 * to, or opens it at to (then key is to's and pub from's): 0 or -1. */
static int
share_key(EVP_PKEY *key, const unsigned char pub[32],
          const unsigned char from[32], const unsigned char to[32],
          const unsigned char seed[32], unsigned char out[32])
{
	static const char label[] = "cg-mask share";
	unsigned char secret[32], info[sizeof(label) - 1 + 64];
	int rc;

	if (shared_secret(key, pub, secret) != 0)
		return -1;
	memcpy(info, label, sizeof(label) - 1);
	memcpy(info + sizeof(label) - 1, from, 32);
	memcpy(info + sizeof(label) - 1 + 32, to, 32);
	rc = hkdf(secret, 32, seed, info, sizeof(info), out, 32);
	OPENSSL_cleanse(secret, sizeof(secret));
	return rc;
}

/* ChaCha20-Poly1305 under key, a zero nonce, seed the associated data:
 * seal share [CG_MASK_SHARE] into ct [CG_MASK_SEALED] (enc), or open
 * ct into share.  0, or -1 (no message: a share that does not open). */
static int
aead(int enc, const unsigned char key[32], const unsigned char seed[32],
     unsigned char *share, unsigned char *ct)
{
	static const unsigned char nonce[12];
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n, rc = -1;

	if (c == NULL ||
	    EVP_CipherInit_ex(c, EVP_chacha20_poly1305(), NULL, key, nonce,
	                      enc) != 1 ||
	    EVP_CipherUpdate(c, NULL, &n, seed, 32) != 1)
		goto out;
	if (enc) {
		if (EVP_CipherUpdate(c, ct, &n, share, CG_MASK_SHARE) != 1 ||
		    EVP_CipherFinal_ex(c, ct + n, &n) != 1 ||
		    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16,
		                        ct + CG_MASK_SHARE) != 1)
			goto out;
	} else {
		if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, 16,
		                        ct + CG_MASK_SHARE) != 1 ||
		    EVP_CipherUpdate(c, share, &n, ct, CG_MASK_SHARE) != 1 ||
		    EVP_CipherFinal_ex(c, share + n, &n) != 1)
			goto out;
	}
	rc = 0;
out:
	EVP_CIPHER_CTX_free(c);
	return rc;
}

static void
put64(unsigned char *p, uint64_t v)
{
	for (int b = 0; b < 8; b++)
		p[b] = (unsigned char)(v >> (8 * b));
}

static uint64_t
get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int b = 7; b >= 0; b--)
		v = v << 8 | p[b];
	return v;
}

/* The fingerprint order of m's peers into m->fpo (key index -> place). */
static int
fp_order(struct cg_mask *m)
{
	char(*fp)[65] = malloc((size_t)m->npeers * sizeof(*fp));

	if (fp == NULL ||
	    (m->fpo == NULL &&
	     (m->fpo = malloc((size_t)m->npeers * sizeof(int))) == NULL)) {
		free(fp);
		return cg_seterr("out of memory");
	}
	for (int i = 0; i < m->npeers; i++)
		cg_key_fingerprint(fp[i], m->peers[i]);
	for (int i = 0; i < m->npeers; i++) {
		int r = 0;
		for (int j = 0; j < m->npeers; j++)
			r += strcmp(fp[j], fp[i]) < 0;
		m->fpo[i] = r;
	}
	free(fp);
	return 0;
}

/*
 * The self-mask b of m's round, its Shamir shares sealed for every peer
 * and the commitments (secagg.h).  The coefficients come from c's
 * ChaCha20 stream, each a 61-bit draw below p.  0, or -1.
 */
static int
deal(struct cg_mask *m)
{
	static const char label[] = "cg-mask self";
	const int n = m->npeers, t = m->threshold;
	unsigned char raw[32], bc[64], key[32], share[CG_MASK_SHARE];
	unsigned char buf[8 * 64], zeros[sizeof(buf)] = {0};
	uint64_t coef[8][CG_MASK_MAX_PEERS];
	size_t len = 32, used = sizeof(buf);
	EVP_CIPHER_CTX *c = NULL;
	unsigned char iv[16] = {0};
	int rc = -1, outl;

	if (fp_order(m) != 0)
		return -1;
	if ((m->share_ct == NULL &&
	     (m->share_ct = calloc((size_t)n, CG_MASK_SEALED)) == NULL) ||
	    (m->share_commit == NULL &&
	     (m->share_commit = calloc((size_t)n, 32)) == NULL) ||
	    (m->pair_commit == NULL &&
	     (m->pair_commit = calloc((size_t)n, 32)) == NULL))
		return cg_seterr("out of memory");
	if (EVP_PKEY_get_raw_private_key(m->key, raw, &len) != 1 || len != 32) {
		cg_seterr("cannot read the private key's bytes");
		goto out;
	}
	if (hkdf(raw, 32, m->seed, (const unsigned char *)label,
	         sizeof(label) - 1, bc, 64) != 0)
		goto out;
	memcpy(m->selfkey, bc, 32);
	commit(m->self_commit, SELF_COMMIT, m->seed, m->selfkey, 32, NULL, 0);
	if ((c = EVP_CIPHER_CTX_new()) == NULL ||
	    EVP_EncryptInit_ex(c, EVP_chacha20(), NULL, bc + 32, iv) != 1) {
		cg_seterr("ChaCha20 is not available");
		goto out;
	}
	for (int k = 0; k < 8; k++) {
		coef[k][0] = (uint64_t)m->selfkey[4 * k] |
		             (uint64_t)m->selfkey[4 * k + 1] << 8 |
		             (uint64_t)m->selfkey[4 * k + 2] << 16 |
		             (uint64_t)m->selfkey[4 * k + 3] << 24;
		for (int d = 1; d < t; d++) {
			uint64_t v;
			do {
				if (used == sizeof(buf)) {
					if (EVP_EncryptUpdate(
					        c, buf, &outl, zeros,
					        sizeof(buf)) != 1) {
						cg_seterr("ChaCha20 failed");
						goto out;
					}
					used = 0;
				}
				v = get64(buf + used) >> 3;
				used += 8;
			} while (v >= CG_SHAMIR_P);
			coef[k][d] = v;
		}
	}
	for (int j = 0; j < n; j++) {
		const int q = m->fpo[j], me = m->fpo[m->me];
		for (int k = 0; k < 8; k++)
			put64(share + 8 * k,
			      cg_shamir_eval(coef[k], t, (uint64_t)q + 1));
		share_commit(m->share_commit[q], m->seed, me, q, share);
		if (share_key(m->key, m->peers[j], m->self, m->peers[j],
		              m->seed, key) != 0)
			goto out;
		if (aead(1, key, m->seed, share, m->share_ct[q]) != 0) {
			cg_seterr("ChaCha20-Poly1305 failed");
			goto out;
		}
		if (j == m->me)
			memset(m->pair_commit[q], 0, 32);
		else
			commit(m->pair_commit[q], PAIR_COMMIT, m->seed,
			       m->pair[j], 32, NULL, 0);
	}
	rc = 0;
out:
	OPENSSL_cleanse(raw, sizeof(raw));
	OPENSSL_cleanse(bc, sizeof(bc));
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(share, sizeof(share));
	OPENSSL_cleanse(coef, sizeof(coef));
	OPENSSL_cleanse(buf, sizeof(buf));
	EVP_CIPHER_CTX_free(c);
	return rc;
}

int
cg_mask_round(struct cg_mask *m, const unsigned char base[32])
{
	if (m->threshold != 0 && (m->threshold < 2 || m->threshold > m->npeers))
		return cg_seterr("threshold %d not in [2, %d peers]",
		                 m->threshold, m->npeers);
	if (m->pair == NULL &&
	    (m->pair = calloc((size_t)m->npeers, 32)) == NULL)
		return cg_seterr("out of memory");
	round_seed(m, base, m->seed);
	memcpy(m->base, base, 32);
	for (int j = 0; j < m->npeers; j++)
		if (j != m->me && pair_key(m, j, m->seed, m->pair[j]) != 0)
			return -1;
	return m->threshold ? deal(m) : 0;
}

/* ------------------------------------------------------------- masking */

/*
 * y [n] += (or -= when sub) PRG[p] for p in [p0, p0 + n): the ChaCha20
 * stream of key from word p0 on.  0, or -1 with a message.
 */
static int
add_stream(const unsigned char key[32], uint64_t p0, uint64_t n, uint64_t *y,
           int sub)
{
	unsigned char iv[16] = {0}, buf[8 * 1024];
	static const unsigned char zeros[sizeof(buf)];
	const uint64_t block = p0 / 8;
	uint64_t skip = p0 % 8, done = 0;
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int rc = -1, outl;

	/* the IV is the 32-bit block counter, little-endian, then a zero
	 * nonce: 2^32 blocks of 8 words cover any view */
	if (block > UINT32_MAX) {
		cg_seterr("element %" PRIu64 ": past the stream", p0);
		goto out;
	}
	for (int b = 0; b < 4; b++)
		iv[b] = (unsigned char)(block >> (8 * b));
	if (c == NULL ||
	    EVP_EncryptInit_ex(c, EVP_chacha20(), NULL, key, iv) != 1) {
		cg_seterr("ChaCha20 is not available");
		goto out;
	}
	while (done < n) {
		uint64_t words = n - done + skip;
		if (words > sizeof(buf) / 8)
			words = sizeof(buf) / 8;
		if (EVP_EncryptUpdate(c, buf, &outl, zeros, (int)(8 * words)) !=
		        1 ||
		    outl != (int)(8 * words)) {
			cg_seterr("ChaCha20 failed");
			goto out;
		}
		for (uint64_t w = skip; w < words; w++) {
			const unsigned char *q = buf + 8 * w;
			uint64_t v;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			memcpy(&v, q, 8);
#else
			v = 0;
			for (int b = 7; b >= 0; b--)
				v = v << 8 | q[b];
#endif
			if (sub)
				y[done++] -= v;
			else
				y[done++] += v;
		}
		skip = 0;
	}
	rc = 0;
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	EVP_CIPHER_CTX_free(c);
	return rc;
}

/* Every pair's stream into y [n], elements [off, off + n), in segments
 * shared among threads.  0 or -1. */
static int
add_masks(const struct cg_mask *m, uint64_t off, uint64_t n, uint64_t *y)
{
	const uint64_t nseg = (n + SEG - 1) / SEG;
	int bad = 0;

	if (m->pair == NULL)
		return cg_seterr("no round: cg_mask_round first");
#pragma omp parallel for schedule(dynamic) reduction(| : bad)
	for (uint64_t s = 0; s < nseg; s++) {
		uint64_t lo = s * SEG, len = n - lo < SEG ? n - lo : SEG;
		for (int j = 0; j < m->npeers && !bad; j++)
			if (j != m->me && add_stream(m->pair[j], off + lo, len,
			                             y + lo, j < m->me) != 0)
				bad = 1;
		if (m->threshold && !bad &&
		    add_stream(m->selfkey, off + lo, len, y + lo, 0) != 0)
			bad = 1;
	}
	/* the message of one failing thread is as good as another's */
	return bad ? -1 : 0;
}

int
cg_mask_check_weight(double w, int frac_bits, uint64_t *out)
{
	/* w CLIP 2^F <= 2^62: one update's words cannot wrap */
	const double room = ldexp(1, 62 - frac_bits) / CG_MASK_CLIP;

	if (!(w >= 1) || w != floor(w))
		return cg_seterr("weight %g is not a whole number of samples",
		                 w);
	if (w > room)
		return cg_seterr("weight %g leaves no room in 64 bits at %d "
		                 "fraction bits (%.0f at most)",
		                 w, frac_bits, room);
	*out = (uint64_t)w;
	return 0;
}

int
cg_mask_encode(const struct cg_mask *m, uint64_t w, const float *x,
               uint64_t off, uint64_t n, uint64_t *y)
{
	const double scale = ldexp(1, m->frac_bits);

	for (uint64_t i = 0; i < n; i++) {
		if (!(fabsf(x[i]) <= (float)CG_MASK_CLIP))
			return cg_seterr("element %" PRIu64 ": %g is %s", i,
			                 (double)x[i],
			                 isfinite(x[i]) ? "past the masked "
			                                  "range of +-256"
			                                : "not finite");
		/* |q| <= 2^(8+F) and w q within 2^62 (the weight rule) */
		int64_t q = llrint((double)x[i] * scale);
		y[i] = (uint64_t)q * w;
	}
	return add_masks(m, off, n, y);
}

int
cg_mask_words(const struct cg_mask *m, uint64_t off, uint64_t n, uint64_t *y)
{
	memset(y, 0, n * sizeof(*y));
	return add_masks(m, off, n, y);
}

static int
cmp_fp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* p [n] as 2n lower-case hex digits into out [2n + 1]. */
static void
hexn(char *out, const unsigned char *p, size_t n)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[p[i] >> 4];
		out[2 * i + 1] = d[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/* s as exactly 2n lower-case hex digits into out [n]: 0, or -1. */
static int
unhexn(unsigned char *out, const char *s, size_t n)
{
	if (s == NULL || strlen(s) != 2 * n)
		return -1;
	for (size_t i = 0; i < 2 * n; i++) {
		int c = s[i], v = c >= '0' && c <= '9'   ? c - '0'
		                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
		                                         : -1;
		if (v < 0)
			return -1;
		if (i % 2 == 0)
			out[i / 2] = (unsigned char)(v << 4);
		else
			out[i / 2] |= (unsigned char)v;
	}
	return 0;
}

/* An array of n strings, the hex of rows [n] of size bytes, into o. */
static int
add_hex_rows(cJSON *o, const char *name, const unsigned char *rows, size_t size,
             int n)
{
	cJSON *arr = cJSON_AddArrayToObject(o, name);
	char h[2 * CG_MASK_SEALED + 1];

	if (arr == NULL)
		return -1;
	for (int i = 0; i < n; i++) {
		hexn(h, rows + (size_t)i * size, size);
		if (!cJSON_AddItemToArray(arr, cJSON_CreateString(h)))
			return -1;
	}
	return 0;
}

struct cJSON *
cg_mask_manifest(const struct cg_mask *m)
{
	cJSON *o = cJSON_CreateObject(), *arr;
	char(*fp)[65] = calloc((size_t)m->npeers, sizeof(*fp));
	char self[65];

	if (o == NULL || fp == NULL)
		goto fail;
	cg_key_fingerprint(self, m->self);
	for (int i = 0; i < m->npeers; i++)
		cg_key_fingerprint(fp[i], m->peers[i]);
	qsort(fp, (size_t)m->npeers, sizeof(*fp), cmp_fp);
	cJSON_AddStringToObject(o, "scheme", CG_MASK_SCHEME);
	cJSON_AddStringToObject(o, "key", self);
	if ((arr = cJSON_AddArrayToObject(o, "peers")) == NULL)
		goto fail;
	for (int i = 0; i < m->npeers; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(fp[i]));
	cJSON_AddStringToObject(o, "round", m->round);
	cJSON_AddNumberToObject(o, "frac_bits", m->frac_bits);
	cJSON_AddNumberToObject(o, "clip", CG_MASK_CLIP);
	if (m->threshold) {
		char h[65];
		cJSON_AddNumberToObject(o, "threshold", m->threshold);
		hexn(h, m->seed, 32);
		cJSON_AddStringToObject(o, "round_id", h);
		hexn(h, m->self_commit, 32);
		cJSON_AddStringToObject(o, "self_commit", h);
		if (add_hex_rows(o, "shares", m->share_ct[0], CG_MASK_SEALED,
		                 m->npeers) != 0 ||
		    add_hex_rows(o, "share_commits", m->share_commit[0], 32,
		                 m->npeers) != 0 ||
		    add_hex_rows(o, "pair_commits", m->pair_commit[0], 32,
		                 m->npeers) != 0)
			goto fail;
	}
	free(fp);
	return o;
fail:
	free(fp);
	cJSON_Delete(o);
	cg_seterr("out of memory");
	return NULL;
}

/* ------------------------------------------------------------- reader */

void
cg_mask_info_free(struct cg_mask_info *i)
{
	if (i == NULL)
		return;
	free(i->peers);
	free(i->share_ct);
	free(i->share_commit);
	free(i->pair_commit);
	free(i);
}

static int
is_hex64(const char *s)
{
	if (strlen(s) != 64)
		return 0;
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* n rows of size bytes from the array name of o, each its hex; 0 or -1
 * (rows allocated, kept by the caller either way). */
static int
read_hex_rows(const cJSON *o, const char *name, size_t size, int n,
              unsigned char **rows)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, name);
	int k = 0;

	if ((*rows = calloc((size_t)n, size)) == NULL)
		return cg_seterr("out of memory");
	if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n)
		return cg_seterr("manifest: mask: %s not a list of %d", name,
		                 n);
	for (const cJSON *e = arr->child; e; e = e->next, k++)
		if (!cJSON_IsString(e) ||
		    unhexn(*rows + (size_t)k * size, e->valuestring, size) != 0)
			return cg_seterr("manifest: mask: %s %d not %zu hex "
			                 "digits",
			                 name, k, 2 * size);
	return 0;
}

/* The threshold round's part of mask object o into i (none: 0). */
static int
read_threshold(const cJSON *o, struct cg_mask_info *i)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "threshold");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "round_id");
	const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "self_commit");

	if (t == NULL)
		return 0;
	if (!cJSON_IsNumber(t) || t->valuedouble < 2 ||
	    t->valuedouble > i->npeers ||
	    t->valuedouble != floor(t->valuedouble))
		return cg_seterr("manifest: mask: threshold not a whole number "
		                 "in [2, %d peers]",
		                 i->npeers);
	i->threshold = (int)t->valuedouble;
	if (!cJSON_IsString(id) || unhexn(i->round_id, id->valuestring, 32) ||
	    !cJSON_IsString(sc) || unhexn(i->self_commit, sc->valuestring, 32))
		return cg_seterr("manifest: mask: round_id or self_commit not "
		                 "64 hex digits");
	if (read_hex_rows(o, "shares", CG_MASK_SEALED, i->npeers,
	                  (unsigned char **)&i->share_ct) != 0 ||
	    read_hex_rows(o, "share_commits", 32, i->npeers,
	                  (unsigned char **)&i->share_commit) != 0 ||
	    read_hex_rows(o, "pair_commits", 32, i->npeers,
	                  (unsigned char **)&i->pair_commit) != 0)
		return -1;
	return 0;
}

struct cg_mask_info *
cg_mask_info_read(const struct cJSON *man, double weight)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(man, "mask");
	const cJSON *sch = cJSON_GetObjectItemCaseSensitive(o, "scheme");
	const cJSON *key = cJSON_GetObjectItemCaseSensitive(o, "key");
	const cJSON *peers = cJSON_GetObjectItemCaseSensitive(o, "peers");
	const cJSON *round = cJSON_GetObjectItemCaseSensitive(o, "round");
	const cJSON *fb = cJSON_GetObjectItemCaseSensitive(o, "frac_bits");
	const cJSON *clip = cJSON_GetObjectItemCaseSensitive(o, "clip");
	struct cg_mask_info *i = calloc(1, sizeof(*i));
	const int np = cJSON_GetArraySize(peers);
	int k = 0, mine = 0;

	if (i == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	if (!cJSON_IsObject(o)) {
		cg_seterr("manifest: a masked update without \"mask\"");
		goto fail;
	}
	if (!cJSON_IsString(sch) || strcmp(sch->valuestring, CG_MASK_SCHEME)) {
		cg_seterr("manifest: mask scheme not %s", CG_MASK_SCHEME);
		goto fail;
	}
	if (!cJSON_IsNumber(fb) || fb->valuedouble < CG_MASK_MIN_FRAC ||
	    fb->valuedouble > CG_MASK_MAX_FRAC ||
	    fb->valuedouble != floor(fb->valuedouble) ||
	    !cJSON_IsNumber(clip) || clip->valuedouble != CG_MASK_CLIP) {
		cg_seterr("manifest: mask: frac_bits not in [%d, %d] or clip "
		          "not %g",
		          CG_MASK_MIN_FRAC, CG_MASK_MAX_FRAC, CG_MASK_CLIP);
		goto fail;
	}
	i->frac_bits = (int)fb->valuedouble;
	if (!cJSON_IsString(round) ||
	    strlen(round->valuestring) > CG_MASK_ROUND_MAX) {
		cg_seterr("manifest: mask: round not a text of %d bytes at "
		          "most",
		          CG_MASK_ROUND_MAX);
		goto fail;
	}
	strcpy(i->round, round->valuestring);
	if (!cJSON_IsString(key) || !is_hex64(key->valuestring)) {
		cg_seterr("manifest: mask: key not a fingerprint");
		goto fail;
	}
	strcpy(i->key, key->valuestring);
	if (!cJSON_IsArray(peers) || np < 2 || np > CG_MASK_MAX_PEERS ||
	    (i->peers = calloc((size_t)np, sizeof(*i->peers))) == NULL) {
		cg_seterr("manifest: mask: peers not a list of 2 to %d",
		          CG_MASK_MAX_PEERS);
		goto fail;
	}
	for (const cJSON *e = peers->child; e; e = e->next, k++) {
		if (!cJSON_IsString(e) || !is_hex64(e->valuestring) ||
		    (k > 0 && strcmp(i->peers[k - 1], e->valuestring) >= 0)) {
			cg_seterr("manifest: mask: peer %d not a fingerprint "
			          "after the one before",
			          k);
			goto fail;
		}
		strcpy(i->peers[k], e->valuestring);
		mine |= strcmp(e->valuestring, i->key) == 0;
	}
	i->npeers = np;
	if (!mine) {
		cg_seterr("manifest: mask: its key is not among its peers");
		goto fail;
	}
	if (cg_mask_check_weight(weight, i->frac_bits, &i->weight) != 0) {
		cg_errprefix("manifest");
		goto fail;
	}
	if (read_threshold(o, i) != 0)
		goto fail;
	return i;
fail:
	cg_mask_info_free(i);
	return NULL;
}

/* ---------------------------------------------------------------- sum */

struct cg_mask_sum {
	struct cg_mask_info round; /* the first input's (its key unused) */
	unsigned char *seen;       /* [npeers]: that peer's update is in */
	uint64_t *acc;             /* [P]: the words, summed mod 2^64 */
	uint64_t P;
	uint64_t weight; /* total; no wrap: each <= 2^62, few peers */
	int present, closed;
	/* a threshold round: each input's commitments, by its place i:
	 * self [np], shares and pairs [np * np] (row i) */
	unsigned char (*self_commit)[32];
	unsigned char (*share_commit)[32];
	unsigned char (*pair_commit)[32];
	/* the reveals: by revealer q, its public key, its share of i's
	 * self-mask at [q np + i], its key with a lost d at [q np + d];
	 * the lost peers' public keys (from the reveals) */
	unsigned char *revealed; /* [np] */
	int nreveals;
	unsigned char (*pub)[32];     /* [np] */
	uint64_t (*share)[8];         /* [np * np] */
	unsigned char (*pairkey)[32]; /* [np * np] */
};

void
cg_mask_sum_free(struct cg_mask_sum *s)
{
	if (s == NULL)
		return;
	free(s->round.peers);
	free(s->seen);
	free(s->acc);
	free(s->self_commit);
	free(s->share_commit);
	free(s->pair_commit);
	free(s->revealed);
	free(s->pub);
	if (s->share)
		OPENSSL_cleanse(s->share, (size_t)s->round.npeers *
		                              (size_t)s->round.npeers *
		                              sizeof(*s->share));
	free(s->share);
	if (s->pairkey)
		OPENSSL_cleanse(s->pairkey, (size_t)s->round.npeers *
		                                (size_t)s->round.npeers * 32);
	free(s->pairkey);
	free(s);
}

struct cg_mask_sum *
cg_mask_sum_new(const struct cg_mask_info *info, uint64_t P)
{
	struct cg_mask_sum *s = calloc(1, sizeof(*s));
	const size_t np = (size_t)info->npeers;

	if (s == NULL)
		goto oom;
	s->round = *info;
	s->round.peers = NULL;
	s->round.share_ct = NULL;
	s->round.share_commit = NULL;
	s->round.pair_commit = NULL;
	s->P = P;
	if ((s->round.peers = malloc(np * 65)) == NULL ||
	    (s->seen = calloc(np, 1)) == NULL ||
	    (s->acc = calloc(P ? P : 1, sizeof(*s->acc))) == NULL)
		goto oom;
	if (info->threshold &&
	    ((s->self_commit = calloc(np, 32)) == NULL ||
	     (s->share_commit = calloc(np * np, 32)) == NULL ||
	     (s->pair_commit = calloc(np * np, 32)) == NULL ||
	     (s->revealed = calloc(np, 1)) == NULL ||
	     (s->pub = calloc(np, 32)) == NULL ||
	     (s->share = calloc(np * np, sizeof(*s->share))) == NULL ||
	     (s->pairkey = calloc(np * np, 32)) == NULL))
		goto oom;
	memcpy(s->round.peers, info->peers, np * 65);
	return s;
oom:
	cg_mask_sum_free(s);
	cg_seterr("out of memory");
	return NULL;
}

int
cg_mask_sum_join(struct cg_mask_sum *s, const struct cg_mask_info *info,
                 const char *name)
{
	const struct cg_mask_info *r = &s->round;
	const size_t np = (size_t)r->npeers;
	int at = -1;

	if (info->frac_bits != r->frac_bits || strcmp(info->round, r->round)) {
		cg_seterr("masked with %d fraction bits, round '%.32s'; the "
		          "first input with %d, '%.32s'",
		          info->frac_bits, info->round, r->frac_bits, r->round);
		goto fail;
	}
	if (info->npeers != r->npeers ||
	    memcmp(info->peers, r->peers, (size_t)r->npeers * 65) != 0) {
		cg_seterr("masked among other peers than the first input");
		goto fail;
	}
	if (info->threshold != r->threshold ||
	    memcmp(info->round_id, r->round_id, 32) != 0) {
		cg_seterr("masked with threshold %d, or of another round or "
		          "base; the first input with threshold %d",
		          info->threshold, r->threshold);
		goto fail;
	}
	for (int i = 0; i < r->npeers; i++)
		if (strcmp(r->peers[i], info->key) == 0)
			at = i;
	if (s->seen[at]) {
		cg_seterr("a second masked update of key %.16s...", info->key);
		goto fail;
	}
	if (s->closed || s->nreveals) {
		cg_seterr("an update after the round's reveals");
		goto fail;
	}
	s->seen[at] = 1;
	s->present++;
	s->weight += info->weight;
	if (r->threshold) {
		memcpy(s->self_commit[at], info->self_commit, 32);
		memcpy(s->share_commit[at * np], info->share_commit, np * 32);
		memcpy(s->pair_commit[at * np], info->pair_commit, np * 32);
	}
	return 0;
fail:
	cg_errprefix(name);
	return -1;
}

int
cg_mask_sum_add(struct cg_mask_sum *s, const struct cg_uview *v)
{
	const uint64_t CH = 4096;
	int bad = 0;

	if (v->off > s->P || v->n > s->P - v->off)
		return cg_seterr("tensor %s: outside the update", v->name);
#pragma omp parallel for schedule(static) reduction(| : bad)
	for (uint64_t lo = 0; lo < v->n; lo += CH) {
		uint64_t w[4096], *a = s->acc + v->off + lo;
		size_t n = v->n - lo < CH ? (size_t)(v->n - lo) : CH;
		/* bound: cannot fail (an integer tensor, in range) */
		if (cg_tensor_get_u64(v->t[0], lo, n, w) != 0) {
			bad = 1;
			continue;
		}
		for (size_t j = 0; j < n; j++)
			a[j] += w[j];
	}
	return bad ? -1 : 0;
}

/* The peers whose update is missing, as "N of M peers missing (fp...,
 * ...)"-ready text into list [size]; their number. */
static int
missing_list(const struct cg_mask_sum *s, char *list, size_t size)
{
	const struct cg_mask_info *r = &s->round;
	size_t len = 0;
	int missing = 0;

	list[0] = '\0';
	for (int i = 0; i < r->npeers; i++) {
		if (s->seen[i])
			continue;
		if (missing++ < 4)
			len += (size_t)snprintf(
			    list + len, size - len, "%s%.16s...",
			    missing > 1 ? ", " : "", r->peers[i]);
		if (len >= size)
			len = size - 1;
	}
	if (missing > 4)
		snprintf(list + len, size - len, ", ...");
	return missing;
}

/* The place of fingerprint fp among s's peers, or -1. */
static int
peer_at(const struct cg_mask_sum *s, const char *fp)
{
	for (int i = 0; i < s->round.npeers; i++)
		if (strcmp(s->round.peers[i], fp) == 0)
			return i;
	return -1;
}

/* Reveal j's checks and its numbers into s (cg_mask_sum_reveal). */
static int
take_reveal(struct cg_mask_sum *s, const cJSON *j, unsigned char *lost)
{
	const struct cg_mask_info *r = &s->round;
	const int np = r->npeers;
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "round_id");
	const cJSON *key = cJSON_GetObjectItemCaseSensitive(j, "key");
	const cJSON *pres = cJSON_GetObjectItemCaseSensitive(j, "present");
	const cJSON *shares = cJSON_GetObjectItemCaseSensitive(j, "shares");
	const cJSON *pairs = cJSON_GetObjectItemCaseSensitive(j, "pairs");
	unsigned char rid[32], pk[32], sh[CG_MASK_SHARE], c[32];
	char fp[65];
	int q, i = 0, nlost = 0;
	const cJSON *e;

	if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CG_MASK_REVEAL))
		return cg_seterr("not a reveal (format %s)", CG_MASK_REVEAL);
	if (!cJSON_IsString(id) || unhexn(rid, id->valuestring, 32) != 0 ||
	    memcmp(rid, r->round_id, 32) != 0)
		return cg_seterr("a reveal of another round");
	if (!cJSON_IsString(key) || unhexn(pk, key->valuestring, 32) != 0)
		return cg_seterr("key not 64 hex digits");
	cg_key_fingerprint(fp, pk);
	if ((q = peer_at(s, fp)) < 0)
		return cg_seterr("key %.16s... is not among the round's peers",
		                 fp);
	if (!s->seen[q])
		return cg_seterr("key %.16s...: its update is not in (only a "
		                 "survivor reveals)",
		                 fp);
	if (s->revealed[q])
		return cg_seterr("a second reveal of key %.16s...", fp);
	/* made for the updates that are in, no more, no fewer */
	e = cJSON_IsArray(pres) ? pres->child : NULL;
	for (i = 0; i < np; i++) {
		if (!s->seen[i])
			continue;
		if (e == NULL || !cJSON_IsString(e) ||
		    strcmp(e->valuestring, r->peers[i]) != 0)
			break;
		e = e->next;
	}
	if (i < np || e != NULL)
		return cg_seterr("made for another set of updates than the %d "
		                 "in",
		                 s->present);
	if (!cJSON_IsArray(shares) || cJSON_GetArraySize(shares) != s->present)
		return cg_seterr("shares not a list of %d", s->present);
	e = shares->child;
	for (i = 0; i < np; i++) {
		if (!s->seen[i])
			continue;
		if (!cJSON_IsString(e) ||
		    unhexn(sh, e->valuestring, CG_MASK_SHARE) != 0)
			return cg_seterr("share of peer %.16s... not %d hex "
			                 "digits",
			                 r->peers[i], 2 * CG_MASK_SHARE);
		share_commit(c, r->round_id, i, q, sh);
		if (memcmp(c, s->share_commit[(size_t)i * np + q], 32) != 0)
			return cg_seterr("its share of peer %.16s...'s "
			                 "self-mask does not match that peer's "
			                 "commitment",
			                 r->peers[i]);
		for (int k = 0; k < 8; k++)
			s->share[(size_t)q * np + i][k] = get64(sh + 8 * k);
		e = e->next;
	}
	if (!cJSON_IsArray(pairs) ||
	    cJSON_GetArraySize(pairs) != np - s->present)
		return cg_seterr("pairs not a list of the %d peers lost",
		                 np - s->present);
	memset(lost, 0, (size_t)np);
	cJSON_ArrayForEach(e, pairs)
	{
		const cJSON *pp = cJSON_GetObjectItemCaseSensitive(e, "peer");
		const cJSON *kk = cJSON_GetObjectItemCaseSensitive(e, "key");
		unsigned char dpk[32], k[32];
		char dfp[65];
		int d;
		if (!cJSON_IsString(pp) || !cJSON_IsString(kk) ||
		    unhexn(dpk, pp->valuestring, 32) != 0 ||
		    unhexn(k, kk->valuestring, 32) != 0)
			return cg_seterr("pair %d: peer and key not 64 hex "
			                 "digits",
			                 nlost);
		cg_key_fingerprint(dfp, dpk);
		if ((d = peer_at(s, dfp)) < 0 || s->seen[d] || lost[d])
			return cg_seterr("pair %d: peer %.16s... is not one "
			                 "lost",
			                 nlost, dfp);
		lost[d] = 1;
		commit(c, PAIR_COMMIT, r->round_id, k, 32, NULL, 0);
		if (memcmp(c, s->pair_commit[(size_t)q * np + d], 32) != 0)
			return cg_seterr("its key with lost peer %.16s... does "
			                 "not match its commitment",
			                 dfp);
		memcpy(s->pub[d], dpk, 32);
		memcpy(s->pairkey[(size_t)q * np + d], k, 32);
		OPENSSL_cleanse(k, sizeof(k));
		nlost++;
	}
	memcpy(s->pub[q], pk, 32);
	s->revealed[q] = 1;
	s->nreveals++;
	return 0;
}

int
cg_mask_sum_reveal(struct cg_mask_sum *s, const char *text, size_t len,
                   const char *name)
{
	cJSON *j = NULL;
	unsigned char *lost = NULL;
	int rc = -1;

	if (!s->round.threshold)
		cg_seterr("a reveal, but the round has no threshold (masked "
		          "without --mask-threshold)");
	else if (cg_mask_sum_quorum(s) != 0)
		return -1;
	else if (s->closed)
		cg_seterr("a reveal after the round closed");
	else if ((lost = malloc((size_t)s->round.npeers)) == NULL)
		cg_seterr("out of memory");
	else if ((j = cJSON_ParseWithLength(text, len)) == NULL ||
	         !cJSON_IsObject(j))
		cg_seterr("not a JSON object");
	else
		rc = take_reveal(s, j, lost);
	if (rc != 0)
		cg_errprefix(name);
	free(lost);
	cJSON_Delete(j);
	return rc;
}

/* The self-masks of the peers in (t shares each) into key [np], checked
 * against their commitments; 0 or -1. */
static int
rebuild_self(const struct cg_mask_sum *s, unsigned char (*key)[32])
{
	const struct cg_mask_info *r = &s->round;
	const int np = r->npeers, t = r->threshold;
	uint64_t x[CG_MASK_MAX_PEERS] = {0}, w[CG_MASK_MAX_PEERS];
	uint64_t y[CG_MASK_MAX_PEERS], v;
	int who[CG_MASK_MAX_PEERS], n = 0, bad = 0;
	unsigned char c[32];

	for (int q = 0; q < np && n < t; q++)
		if (s->revealed[q]) {
			x[n] = (uint64_t)q + 1;
			who[n++] = q;
		}
	/* the same t revealers for every peer: one set of weights */
	if (n < t || cg_shamir_weights(x, t, w) != 0)
		return cg_seterr("reveals: two at one point");
	for (int i = 0; i < np; i++) {
		if (!s->seen[i])
			continue;
		for (int k = 0; k < 8; k++) {
			for (int m = 0; m < t; m++) {
				y[m] = s->share[(size_t)who[m] * np + i][k];
				bad |= y[m] >= CG_SHAMIR_P;
			}
			v = bad ? UINT64_MAX : cg_shamir_dot(w, y, t);
			if (v > UINT32_MAX)
				v = UINT64_MAX; /* caught by the commitment */
			for (int b = 0; b < 4; b++)
				key[i][4 * k + b] =
				    (unsigned char)(v >> (8 * b));
		}
		commit(c, SELF_COMMIT, r->round_id, key[i], 32, NULL, 0);
		if (memcmp(c, s->self_commit[i], 32) != 0)
			return cg_seterr("the shares of peer %.16s...'s "
			                 "self-mask do not open its commitment "
			                 "(it dealt them amiss)",
			                 r->peers[i]);
	}
	return 0;
}

/* Take the self-masks of the peers in and the pairwise masks of the
 * lost ones off s's sum; 0 or -1. */
static int
unmask(struct cg_mask_sum *s)
{
	const struct cg_mask_info *r = &s->round;
	const int np = r->npeers;
	const uint64_t nseg = (s->P + SEG - 1) / SEG;
	unsigned char(*key)[32] = calloc((size_t)np, 32);
	int bad = 0;

	if (key == NULL)
		return cg_seterr("out of memory");
	if (rebuild_self(s, key) != 0) {
		OPENSSL_cleanse(key, (size_t)np * 32);
		free(key);
		return -1;
	}
#pragma omp parallel for schedule(dynamic) reduction(| : bad)
	for (uint64_t g = 0; g < nseg; g++) {
		uint64_t lo = g * SEG, len = s->P - lo < SEG ? s->P - lo : SEG;
		for (int i = 0; i < np && !bad; i++) {
			if (!s->seen[i])
				continue;
			if (add_stream(key[i], lo, len, s->acc + lo, 1) != 0)
				bad = 1;
			/* survivor i added +PRG_id where d comes after it in
			 * key order, subtracted it where before */
			for (int d = 0; d < np && !bad; d++)
				if (!s->seen[d] &&
				    add_stream(s->pairkey[(size_t)i * np + d],
				               lo, len, s->acc + lo,
				               memcmp(s->pub[d], s->pub[i],
				                      32) > 0) != 0)
					bad = 1;
		}
	}
	OPENSSL_cleanse(key, (size_t)np * 32);
	free(key);
	return bad ? -1 : 0;
}

int
cg_mask_sum_quorum(const struct cg_mask_sum *s)
{
	const struct cg_mask_info *r = &s->round;
	char list[160];

	missing_list(s, list, sizeof(list));
	if (r->threshold && s->present < r->threshold)
		return cg_seterr("%d of %d peers' updates in (missing: %s), "
		                 "fewer than the threshold %d: the round "
		                 "cannot close",
		                 s->present, r->npeers, list, r->threshold);
	return 0;
}

int
cg_mask_sum_close(struct cg_mask_sum *s)
{
	const struct cg_mask_info *r = &s->round;
	char list[160];
	int missing;

	if (s->closed)
		return 0;
	missing = missing_list(s, list, sizeof(list));
	if (r->threshold == 0) {
		if (missing)
			return cg_seterr(
			    "%d of %d peers missing (%s): a masked round is "
			    "unmasked only with every peer's update",
			    missing, r->npeers, list);
		s->closed = 1;
		return 0;
	}
	if (cg_mask_sum_quorum(s) != 0)
		return -1;
	if (s->nreveals < r->threshold)
		return cg_seterr("%d reveal%s of the %d peers in, fewer than "
		                 "the threshold %d (cg-reduce --reveal at each "
		                 "survivor, then --unmask)",
		                 s->nreveals, s->nreveals == 1 ? "" : "s",
		                 s->present, r->threshold);
	if (missing && s->nreveals < s->present) {
		int q = 0;
		while (!s->seen[q] || s->revealed[q])
			q++;
		return cg_seterr("%d peer%s lost (%s), and the reveal of "
		                 "survivor %.16s... is missing: a round that "
		                 "lost peers needs every survivor's",
		                 missing, missing == 1 ? "" : "s", list,
		                 r->peers[q]);
	}
	if (unmask(s) != 0)
		return -1;
	s->closed = 1;
	return 0;
}

int
cg_mask_sum_mean(const struct cg_mask_sum *s, const struct cg_uview *v,
                 float *out)
{
	const double W = (double)s->weight;
	const double inv = 1 / ldexp(W, s->round.frac_bits);
	/* the largest |sum| that true values can give: past it, masks are
	 * left over */
	const double lim = W * ldexp(CG_MASK_CLIP, s->round.frac_bits);
	int64_t bad = -1;

	if (!s->closed)
		return cg_seterr("a masked round read before it closed");
	if (!(lim < ldexp(1, 62)))
		return cg_seterr(
		    "total weight %.0f leaves no room in 64 bits at "
		    "%d fraction bits",
		    W, s->round.frac_bits);
	if (v->off > s->P || v->n > s->P - v->off)
		return cg_seterr("tensor %s: outside the update", v->name);
	const uint64_t *a = s->acc + v->off;
	for (uint64_t j = 0; j < v->n; j++) {
		int64_t q = (int64_t)a[j];
		if (fabs((double)q) > lim && bad < 0)
			bad = (int64_t)j;
		out[j] = (float)((double)q * inv);
	}
	if (bad >= 0)
		return cg_seterr(
		    "tensor %s: element %" PRId64 ": the masks do "
		    "not cancel (an update masked with another key, "
		    "base, round or peer list)",
		    v->name, bad);
	return 0;
}

int
cg_mask_sum_peers(const struct cg_mask_sum *s)
{
	return s->round.npeers;
}

int
cg_mask_sum_present(const struct cg_mask_sum *s)
{
	return s->present;
}

/* ------------------------------------------------------------- reveal */

/* Input k's checks against m's round (cg_mask_reveal); its place among
 * the peers by fingerprint into *at.  0, or -1 with a message. */
static int
reveal_check(const struct cg_mask *m, const struct cg_mask_info *in,
             char (*fp)[65], int *at)
{
	if (in->threshold == 0)
		return cg_seterr("masked without a threshold: nothing to "
		                 "reveal");
	if (memcmp(in->round_id, m->seed, 32) != 0 || in->npeers != m->npeers ||
	    memcmp(in->peers, fp, (size_t)m->npeers * 65) != 0 ||
	    in->threshold != m->threshold)
		return cg_seterr("of another round than this key's (its round "
		                 "text, base, threshold or peers differ)");
	*at = -1;
	for (int q = 0; q < m->npeers; q++)
		if (strcmp(fp[q], in->key) == 0)
			*at = q;
	return 0; /* its key is among its peers: cg_mask_info_read */
}

/* What peer m reveals of input in (of place i): its share, opened and
 * checked, as hex into h.  0, or -1 with a message. */
static int
reveal_share(const struct cg_mask *m, const struct cg_mask_info *in, int i,
             const unsigned char pub[32], char *h)
{
	const int me = m->fpo[m->me];
	unsigned char key[32], sh[CG_MASK_SHARE], c[32];
	int rc = -1;

	if (share_key(m->key, pub, pub, m->self, m->seed, key) != 0)
		return -1;
	if (aead(0, key, m->seed, sh, in->share_ct[me]) != 0) {
		cg_seterr("its share for this key does not open (sealed for "
		          "another key, or altered)");
		goto out;
	}
	share_commit(c, m->seed, i, me, sh);
	if (memcmp(c, in->share_commit[me], 32) != 0) {
		cg_seterr("its share for this key does not match its "
		          "commitment");
		goto out;
	}
	for (int k = 0; k < 8; k++)
		if (get64(sh + 8 * k) >= CG_SHAMIR_P) {
			cg_seterr("its share for this key is not of the field");
			goto out;
		}
	hexn(h, sh, CG_MASK_SHARE);
	rc = 0;
out:
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(sh, sizeof(sh));
	return rc;
}

/* The reveal of m over the inputs in at their places at [n]; by index
 * of fingerprint, byfp [np] the key index of each. */
static cJSON *
reveal_json(const struct cg_mask *m, const struct cg_mask_info *const *in,
            const char *const *names, const int *at, const int *byfp,
            char (*fp)[65], int n)
{
	const int np = m->npeers;
	cJSON *o = cJSON_CreateObject(), *pres, *shares, *pairs;
	char h[2 * CG_MASK_SHARE + 1];
	int *who = malloc((size_t)np * sizeof(int));

	if (o == NULL || who == NULL)
		goto oom;
	for (int q = 0; q < np; q++)
		who[q] = -1;
	for (int k = 0; k < n; k++)
		who[at[k]] = k;
	cJSON_AddStringToObject(o, "format", CG_MASK_REVEAL);
	hexn(h, m->seed, 32);
	cJSON_AddStringToObject(o, "round_id", h);
	hexn(h, m->self, 32);
	cJSON_AddStringToObject(o, "key", h);
	if ((pres = cJSON_AddArrayToObject(o, "present")) == NULL ||
	    (shares = cJSON_AddArrayToObject(o, "shares")) == NULL ||
	    (pairs = cJSON_AddArrayToObject(o, "pairs")) == NULL)
		goto oom;
	for (int q = 0; q < np; q++) {
		const int j = byfp[q];
		if (who[q] >= 0) {
			if (reveal_share(m, in[who[q]], q, m->peers[j], h) !=
			    0) {
				cg_errprefix(names[who[q]]);
				goto fail;
			}
			cJSON_AddItemToArray(pres, cJSON_CreateString(fp[q]));
			cJSON_AddItemToArray(shares, cJSON_CreateString(h));
		} else {
			cJSON *e = cJSON_CreateObject();
			if (e == NULL)
				goto oom;
			cJSON_AddItemToArray(pairs, e);
			hexn(h, m->peers[j], 32);
			cJSON_AddStringToObject(e, "peer", h);
			hexn(h, m->pair[j], 32);
			cJSON_AddStringToObject(e, "key", h);
		}
	}
	OPENSSL_cleanse(h, sizeof(h));
	free(who);
	return o;
oom:
	cg_seterr("out of memory");
fail:
	free(who);
	cJSON_Delete(o);
	return NULL;
}

struct cJSON *
cg_mask_reveal(struct cg_mask *m, const struct cg_mask_info *const *in,
               const unsigned char (*base)[32], const char *const *names, int n)
{
	const int np = m->npeers;
	char(*fp)[65] = calloc((size_t)np, sizeof(*fp));
	int *at = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
	int *byfp = calloc((size_t)np, sizeof(int));
	cJSON *o = NULL;

	if (fp == NULL || at == NULL || byfp == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	if (n < 1) {
		cg_seterr("no masked updates to reveal for");
		goto out;
	}
	if (in[0]->threshold == 0) {
		cg_seterr("%s: masked without a threshold: nothing to reveal",
		          names[0]);
		goto out;
	}
	snprintf(m->round, sizeof(m->round), "%s", in[0]->round);
	m->threshold = in[0]->threshold;
	if (cg_mask_round(m, base[0]) != 0)
		goto out;
	for (int j = 0; j < np; j++) {
		cg_key_fingerprint(fp[m->fpo[j]], m->peers[j]);
		byfp[m->fpo[j]] = j;
	}
	for (int k = 0; k < n; k++) {
		if (memcmp(base[k], base[0], 32) != 0) {
			cg_seterr("%s: of another base model than %s", names[k],
			          names[0]);
			goto out;
		}
		if (reveal_check(m, in[k], fp, &at[k]) != 0) {
			cg_errprefix(names[k]);
			goto out;
		}
		for (int l = 0; l < k; l++)
			if (at[l] == at[k]) {
				cg_seterr("%s: a second masked update of key "
				          "%.16s...",
				          names[k], in[k]->key);
				goto out;
			}
	}
	int mine = 0;
	for (int k = 0; k < n; k++)
		mine |= at[k] == m->fpo[m->me];
	if (!mine)
		cg_seterr("this key's own update is not among the inputs: only "
		          "a survivor reveals");
	else
		o = reveal_json(m, in, names, at, byfp, fp, n);
out:
	free(fp);
	free(at);
	free(byfp);
	return o;
}
