/*
 * exchange/secagg.h - secure aggregation: updates masked so that only their sum
 * can be read.
 *
 * Each worker of a round has an X25519 key pair (cg-key --x25519) and
 * knows every peer's public key (a list of .pub lines, or a directory of
 * .pub files: the shape of a trust list).  Peers are ordered by the bytes
 * of their public keys.  For every pair (i, j) both ends derive the same
 * 32-byte key from their X25519 shared secret,
 *
 *     seed  = SHA-256("cg-mask/1\0" | base | len(round) | round |
 *                     SHA-256(the peers' public keys, in order))
 *     k_ij  = HKDF-SHA256(ikm = X25519(sk_i, pk_j), salt = seed,
 *                         info = "cg-mask pair" | pk_lo | pk_hi)
 *
 * base being the 32-byte digest of the round's model (cg_model_digest:
 * every worker of a round shares it) and round an optional text that
 * tells apart two rounds from one base.  Element p of the flat parameter
 * vector gets from k_ij the 64-bit little-endian word p mod 8 of ChaCha20
 * block p / 8 (key k_ij, a zero nonce): PRG_ij[p].
 *
 * The masked value of element p at worker i is, modulo 2^64,
 *
 *     y_i[p] = w_i round(x_i[p] 2^F) + sum_{j > i} PRG_ij[p]
 *                                    - sum_{j < i} PRG_ij[p]
 *
 * with w_i the update's weight (a whole number: its sample count) and F
 * the fraction bits (CG_MASK_FRAC_BITS unless chosen).  Every pair's
 * word is added once and subtracted once, so the sum over all peers is
 * exactly sum_i w_i round(x_i 2^F) modulo 2^64, and the weighted mean is
 * that over (sum_i w_i) 2^F: within 2^-(F+1) of the true mean before the
 * result is rounded to f32.  A value must satisfy |x| <= CG_MASK_CLIP
 * (refused otherwise), and the sum is read only when its total weight W
 * keeps W CG_MASK_CLIP 2^F below 2^62: then no sum can wrap, and a sum
 * element past that bound proves that some masks did not cancel (an
 * input masked with another key, round or peer set), which is refused.
 *
 * One masked update alone is 64-bit words indistinguishable from random
 * to whoever lacks its pairwise keys.  Its sample count and weight stay
 * in its manifest, in the clear.  The mean can be unmasked only with the
 * update of every peer: a round that loses a worker is run again with
 * the peers that remain (a new peer set, hence new masks).
 */
#ifndef CG_SECAGG_H
#define CG_SECAGG_H

#include <stdint.h>

#include "cg.h"
#include "exchange/ucodec.h"

#define CG_MASK_SCHEME "x25519-hkdf-sha256-chacha20/1"
#define CG_MASK_FRAC_BITS 32 /* default fraction bits F */
#define CG_MASK_MIN_FRAC 8
#define CG_MASK_MAX_FRAC 48
#define CG_MASK_CLIP 256.0 /* the largest |value| an update may carry */
#define CG_MASK_MAX_PEERS 1024
#define CG_MASK_ROUND_MAX 256 /* bytes of a round text */

/* ------------------------------------------------------------- worker */

/* What a worker masks with: its key and the round's peers. */
struct cg_mask {
	unsigned char self[32];     /* its public key */
	unsigned char (*peers)[32]; /* [npeers], sorted, self included */
	int npeers, me;             /* me: self's place in peers */
	char round[CG_MASK_ROUND_MAX + 1];
	int frac_bits;
	struct evp_pkey_st *key; /* the private key */
	/* cg_mask_round: the pairwise keys k_ij [npeers] (me's unused) */
	unsigned char (*pair)[32];
	unsigned char base[32];
};

/*
 * Read the X25519 private key at keypath and the peers' public keys at
 * peers (a file of "x25519 HEX COMMENT" lines, or a directory of .pub
 * files); round (may be NULL) and frac_bits as above.  The key's public
 * key must be among the peers, which must be 2 to CG_MASK_MAX_PEERS
 * different keys.  0 (the caller frees m with cg_mask_free), or -1
 * with a message naming the file and m left empty.
 */
int cg_mask_init(struct cg_mask *m, const char *keypath, const char *peers,
                 const char *round, int frac_bits);
void cg_mask_free(struct cg_mask *m);
/* Derive the pairwise keys of the round of base (a model's digest).
 * 0, or -1 with a message (a peer's key that gives no shared secret). */
int cg_mask_round(struct cg_mask *m, const unsigned char base[32]);

/*
 * The masked words y [n] of elements [off, off + n) of the flat vector,
 * x [n] their values, w the update's weight (whole, checked by
 * cg_mask_check_weight).  -1 with a message naming the element when a
 * value is not finite or past CG_MASK_CLIP.  cg_mask_round first.
 */
int cg_mask_encode(const struct cg_mask *m, uint64_t w, const float *x,
                   uint64_t off, uint64_t n, uint64_t *y);
/* The same words with no value: only the masks (what the codec's tests
 * sum to show that they cancel). */
int cg_mask_words(const struct cg_mask *m, uint64_t off, uint64_t n,
                  uint64_t *y);
/* w as a whole weight (the sample count) that frac_bits leave room for:
 * into *out, or -1 with a message. */
int cg_mask_check_weight(double w, int frac_bits, uint64_t *out);
/* The manifest object "mask" of an update m masks: scheme, its key and
 * the peers (fingerprints), the round text, F and the clip. */
struct cJSON *cg_mask_manifest(const struct cg_mask *m);

/* ------------------------------------------------------------- reader */

/* A masked update's "mask" object, checked. */
struct cg_mask_info {
	char key[65];      /* the fingerprint of its worker's key */
	char (*peers)[65]; /* [npeers], strictly increasing */
	int npeers;
	char round[CG_MASK_ROUND_MAX + 1];
	int frac_bits;
	uint64_t weight; /* the update's weight, whole */
};

/*
 * The "mask" object of manifest man, whose update weighs weight: NULL
 * with a message when it is missing or anything in it is off (another
 * scheme, F or clip, peers not 64 hex digits in increasing order, its
 * key not among them, a weight that is not whole or leaves no room).
 */
struct cg_mask_info *cg_mask_info_read(const struct cJSON *man, double weight);
void cg_mask_info_free(struct cg_mask_info *i);

/* The integer sum of the masked updates of one round. */
struct cg_mask_sum;

/* A sum of updates like info over P elements; NULL with a message. */
struct cg_mask_sum *cg_mask_sum_new(const struct cg_mask_info *info,
                                    uint64_t P);
/*
 * Add the masked words of view v (bound, of a masked update whose mask
 * is info; name: the update's, for messages) at its offset.  Call
 * cg_mask_sum_join once per update first: it checks info against the
 * sum's (same round, F and peers; a key not seen yet).  Each 0, or -1
 * with a message starting with name.
 */
int cg_mask_sum_join(struct cg_mask_sum *s, const struct cg_mask_info *info,
                     const char *name);
int cg_mask_sum_add(struct cg_mask_sum *s, const struct cg_uview *v);
/*
 * The weighted mean of view v's elements into out [v->n]: -1 with a
 * message while a peer's update is missing (naming them), or when the
 * masks do not cancel.  cg_mask_sum_complete checks the first alone.
 */
int cg_mask_sum_complete(const struct cg_mask_sum *s);
int cg_mask_sum_mean(const struct cg_mask_sum *s, const struct cg_uview *v,
                     float *out);
/* Peers of the round. */
int cg_mask_sum_peers(const struct cg_mask_sum *s);
void cg_mask_sum_free(struct cg_mask_sum *s);

#endif
