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
 * in its manifest, in the clear.  Without a threshold the mean can be
 * unmasked only with the update of every peer: a round that loses a
 * worker is run again with the peers that remain.
 *
 * A round of threshold t (2 <= t <= n peers) survives the loss of up to
 * n - t of them (the recovery of Bonawitz et al. 2017, "Practical secure
 * aggregation", with the pairwise keys revealed by the survivors rather
 * than rebuilt from shared private keys: the X25519 keys outlive the
 * round, and k_ij is the round's alone).  Worker i draws a self-mask key
 *
 *     b_i | c_i = HKDF-SHA256(ikm = its raw private key, salt = seed,
 *                             info = "cg-mask self"), 64 bytes
 *
 * adds b_i's ChaCha20 stream (as PRG_ij) to every word as well, and
 * splits b_i, as eight 32-bit words, with Shamir's scheme of threshold t
 * over GF(2^61 - 1) (core/shamir.h; the coefficients are c_i's ChaCha20
 * stream, so a worker's file is the same bytes every time).  Peer q (its
 * place in the round's peer list, by fingerprint) gets the share at
 * x = q + 1, 64 bytes sealed with ChaCha20-Poly1305 under
 *
 *     HKDF-SHA256(ikm = X25519(sk_i, pk_q), salt = seed,
 *                 info = "cg-mask share" | pk_i | pk_q)
 *
 * (a zero nonce: the key is of one round, one sender, one receiver;
 * the seed is the associated data).  The manifest carries them, with
 * commitments that let the coordinator check what survivors reveal:
 * SHA-256 of b_i, of each share and of each k_ij, each with a tag and
 * the seed.  When the round closes, every surviving peer q (whose
 * update is in) reads the updates that are in and reveals (cg-reduce
 * --reveal) its share of each survivor's b_i and, for each peer d that
 * is missing, its k_qd: the coordinator takes the survivors' self-masks
 * off with t shares each and the lost peers' pairwise masks with the
 * revealed keys, and the sum is the survivors' exact fixed-point sum.
 *
 * Why the self-mask: once the keys k_qd of a lost peer d are revealed,
 * d's pairwise masks are known; were its update to arrive late, it
 * would be read in the clear.  Its self-mask stays on it: an honest
 * peer reveals, for one round, either its share of b_d (d in) or k_qd
 * (d out), never both, so the coordinator cannot hold both halves of
 * d's masks unless t peers collude with it.  A worker must therefore
 * reveal once per round.  Fewer than t updates in, or fewer than t
 * reveals (every survivor's where a peer is lost), and the round does
 * not close.
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
#define CG_MASK_SHARE 64      /* bytes of a share: 8 field elements */
#define CG_MASK_SEALED (CG_MASK_SHARE + 16) /* a share and its tag */
#define CG_MASK_REVEAL "cg-mask-reveal/1"

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
	/* A round that survives dropouts: threshold t (0: none), set
	 * before cg_mask_round, which fills the rest (arrays by the
	 * peers' fingerprint order). */
	int threshold;
	unsigned char seed[32];
	unsigned char selfkey[32]; /* b */
	int *fpo; /* [npeers]: key order -> fingerprint order */
	unsigned char self_commit[32];
	unsigned char (*share_ct)[CG_MASK_SEALED]; /* [npeers] */
	unsigned char (*share_commit)[32];         /* [npeers] */
	unsigned char (*pair_commit)[32];          /* [npeers] (own: zero) */
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
/* Derive the pairwise keys of the round of base (a model's digest),
 * and with a threshold the self-mask, its shares and commitments.
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
	/* a round of a threshold (0: none): what the manifest adds, by
	 * the peers' order */
	int threshold;
	unsigned char round_id[32]; /* the seed */
	unsigned char self_commit[32];
	unsigned char (*share_ct)[CG_MASK_SEALED]; /* [npeers] */
	unsigned char (*share_commit)[32];         /* [npeers] */
	unsigned char (*pair_commit)[32];          /* [npeers] */
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
 * A surviving peer's reveal (the text of a cg_mask_reveal file, len
 * bytes; name for messages) into a sum of a threshold round, after
 * every update: checked against the round, the updates in and their
 * commitments.  0, or -1 with a message starting with name.
 */
int cg_mask_sum_reveal(struct cg_mask_sum *s, const char *text, size_t len,
                       const char *name);
/*
 * Close the round: without a threshold, -1 with a message while a
 * peer's update is missing (naming them); with one, -1 when fewer than
 * t updates or reveals are in (every survivor's where a peer is
 * missing), else the self-masks and the lost peers' masks taken off
 * the sum.  0 once closed.
 */
int cg_mask_sum_close(struct cg_mask_sum *s);
/* -1 with a message when s is of a threshold round and fewer than t
 * updates are in (the round cannot close), else 0. */
int cg_mask_sum_quorum(const struct cg_mask_sum *s);
/* The weighted mean of view v's elements into out [v->n], once closed:
 * -1 with a message when the masks do not cancel. */
int cg_mask_sum_mean(const struct cg_mask_sum *s, const struct cg_uview *v,
                     float *out);
/* Peers of the round, and those whose update is in. */
int cg_mask_sum_peers(const struct cg_mask_sum *s);
int cg_mask_sum_present(const struct cg_mask_sum *s);

/* ------------------------------------------------------------- reveal */

/*
 * What surviving peer m (cg_mask_init; no round needed) reveals to
 * close a threshold round, from the masked updates that are in, in
 * [n] (their names [n] for messages, base [n] their base models'
 * digests): its share of each one's self-mask, opened and checked, and
 * its pairwise key with each peer missing; a JSON object (the caller
 * frees it), or NULL with a message (inputs of two rounds, its own
 * update not among them, a share that does not open).  Reveal once
 * per round: secagg.h says why.
 */
struct cJSON *cg_mask_reveal(struct cg_mask *m,
                             const struct cg_mask_info *const *in,
                             const unsigned char (*base)[32],
                             const char *const *names, int n);
void cg_mask_sum_free(struct cg_mask_sum *s);

#endif
