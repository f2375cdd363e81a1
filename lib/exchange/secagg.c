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
 * Nothing here is a cipher of its own: the stream is ChaCha20 and the
 * keys come from X25519 and HKDF as OpenSSL gives them.
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

/* k_ij for peer j: HKDF-SHA256 of the X25519 secret; 0 or -1. */
static int
pair_key(const struct cg_mask *m, int j, const unsigned char seed[32],
         unsigned char out[32])
{
	static const char label[] = "cg-mask pair";
	unsigned char secret[32], info[sizeof(label) - 1 + 64], zero[32] = {0};
	const unsigned char *lo = m->peers[j < m->me ? j : m->me];
	const unsigned char *hi = m->peers[j < m->me ? m->me : j];
	EVP_PKEY *peer = NULL;
	EVP_PKEY_CTX *c = NULL;
	size_t n = sizeof(secret), outn = 32;
	int rc = -1;

	if ((peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL,
	                                        m->peers[j], 32)) == NULL ||
	    (c = EVP_PKEY_CTX_new(m->key, NULL)) == NULL ||
	    EVP_PKEY_derive_init(c) != 1 ||
	    EVP_PKEY_derive_set_peer(c, peer) != 1 ||
	    EVP_PKEY_derive(c, secret, &n) != 1 || n != 32 ||
	    memcmp(secret, zero, 32) == 0) {
		char fp[65];
		cg_key_fingerprint(fp, m->peers[j]);
		cg_seterr("peer %.16s...: no shared secret with this key", fp);
		goto out;
	}
	EVP_PKEY_CTX_free(c);
	memcpy(info, label, sizeof(label) - 1);
	memcpy(info + sizeof(label) - 1, lo, 32);
	memcpy(info + sizeof(label) - 1 + 32, hi, 32);
	if ((c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL)) == NULL ||
	    EVP_PKEY_derive_init(c) != 1 ||
	    EVP_PKEY_CTX_set_hkdf_md(c, EVP_sha256()) != 1 ||
	    EVP_PKEY_CTX_set1_hkdf_salt(c, seed, 32) != 1 ||
	    EVP_PKEY_CTX_set1_hkdf_key(c, secret, 32) != 1 ||
	    EVP_PKEY_CTX_add1_hkdf_info(c, info, sizeof(info)) != 1 ||
	    EVP_PKEY_derive(c, out, &outn) != 1 || outn != 32) {
		cg_seterr("HKDF failed");
		goto out;
	}
	rc = 0;
out:
	OPENSSL_cleanse(secret, sizeof(secret));
	EVP_PKEY_CTX_free(c);
	EVP_PKEY_free(peer);
	return rc;
}

int
cg_mask_round(struct cg_mask *m, const unsigned char base[32])
{
	unsigned char seed[32];

	if (m->pair == NULL &&
	    (m->pair = calloc((size_t)m->npeers, 32)) == NULL)
		return cg_seterr("out of memory");
	round_seed(m, base, seed);
	memcpy(m->base, base, 32);
	for (int j = 0; j < m->npeers; j++)
		if (j != m->me && pair_key(m, j, seed, m->pair[j]) != 0)
			return -1;
	return 0;
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
};

void
cg_mask_sum_free(struct cg_mask_sum *s)
{
	if (s == NULL)
		return;
	free(s->round.peers);
	free(s->seen);
	free(s->acc);
	free(s);
}

struct cg_mask_sum *
cg_mask_sum_new(const struct cg_mask_info *info, uint64_t P)
{
	struct cg_mask_sum *s = calloc(1, sizeof(*s));

	if (s == NULL)
		goto oom;
	s->round = *info;
	s->round.peers = NULL;
	s->P = P;
	if ((s->round.peers = malloc((size_t)info->npeers * 65)) == NULL ||
	    (s->seen = calloc((size_t)info->npeers, 1)) == NULL ||
	    (s->acc = calloc(P ? P : 1, sizeof(*s->acc))) == NULL)
		goto oom;
	memcpy(s->round.peers, info->peers, (size_t)info->npeers * 65);
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
	for (int i = 0; i < r->npeers; i++)
		if (strcmp(r->peers[i], info->key) == 0)
			at = i;
	if (s->seen[at]) {
		cg_seterr("a second masked update of key %.16s...", info->key);
		goto fail;
	}
	s->seen[at] = 1;
	s->weight += info->weight;
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

int
cg_mask_sum_complete(const struct cg_mask_sum *s)
{
	const struct cg_mask_info *r = &s->round;
	char list[160] = "";
	size_t len = 0;
	int missing = 0;

	for (int i = 0; i < r->npeers; i++) {
		if (s->seen[i])
			continue;
		if (missing++ < 4)
			len += (size_t)snprintf(
			    list + len, sizeof(list) - len, "%s%.16s...",
			    missing > 1 ? ", " : "", r->peers[i]);
		if (len >= sizeof(list))
			len = sizeof(list) - 1;
	}
	if (missing == 0)
		return 0;
	return cg_seterr("%d of %d peers missing (%s%s): a masked round is "
	                 "unmasked only with every peer's update",
	                 missing, r->npeers, list, missing > 4 ? ", ..." : "");
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

	if (cg_mask_sum_complete(s) != 0)
		return -1;
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
