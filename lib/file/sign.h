/*
 * file/sign.h - Ed25519 keys, the signature member of a cg file, and the
 * list of keys a reader trusts.
 *
 * A signed cg file ends with a member "cg.sig": one JSON object
 * {"alg":"ed25519","key":HEX32,"sig":HEX64} and a newline, the
 * signature made over the exact bytes of the file's cg.json member,
 * whose digests pin every tensor.  The container (container.c) is the
 * one caller: it writes the member when a signing key is in use and
 * checks it on every read, so no program signs or verifies by itself.
 *
 * The signing key and the trust list are the process's, set once by
 * the programs' --sign and --trust options (cli.c answers them); the
 * trust list defaults to the file or directory named by CG_TRUST.
 */
#ifndef CG_SIGN_H
#define CG_SIGN_H

#include <stddef.h>

#define CG_SIG_MEMBER "cg.sig"
#define CG_SIG_MAX 4096 /* bytes a signature member may have */
#define CG_KEY_PUB_ALG "ed25519"

/* ---------------------------------------------------------------- keys */

/* What a key file holds: an Ed25519 key signs, an X25519 key masks
 * (secagg.h).  CG_KEY_ANY: either, where a key is only listed. */
enum cg_key_alg { CG_KEY_ED25519, CG_KEY_X25519, CG_KEY_ANY };

/* "ed25519" or "x25519", as a .pub line starts. */
const char *cg_key_alg_name(enum cg_key_alg alg);

/*
 * Make a new key pair: the private key at path (PEM PKCS#8, mode 0600)
 * and its public line "ed25519 HEX COMMENT" at path.pub, both written
 * atomically and renamed together.  An existing file is refused unless
 * force.  Returns 0, or -1 with a message.
 */
int cg_key_generate(const char *path, const char *comment, int force);
/* The same for a key of algorithm alg: its .pub line "x25519 HEX
 * COMMENT" for an X25519 key. */
int cg_key_generate_alg(const char *path, const char *comment, int force,
                        enum cg_key_alg alg);
/*
 * The private key of the PEM file at path when it is of algorithm alg
 * (an OpenSSL EVP_PKEY: the caller frees it with EVP_PKEY_free), or
 * NULL with a message naming path.
 */
struct evp_pkey_st *cg_key_read_private(const char *path, enum cg_key_alg alg);
/*
 * The raw public key of the key file at path: a .pub line, or a
 * private key (PEM).  *comment (may be NULL) gets the comment of a .pub
 * line, or "" (a static buffer, valid until the next call).  Returns 0,
 * or -1 with a message naming path.
 */
int cg_key_read_public(const char *path, unsigned char pub[32],
                       const char **comment);
/*
 * Call fn(ctx, pub, comment) for each key line of the file at path, in
 * order (blank lines and '#' lines skipped), until fn returns non-zero,
 * which is returned; for a private key, once, with its public key and
 * the comment ""  A line that is not a key is -1 with a message
 * naming path and the line; 0 at the end.
 */
typedef int (*cg_key_fn)(void *ctx, const unsigned char pub[32],
                         const char *comment);
int cg_key_each(const char *path, cg_key_fn fn, void *ctx);
/* The same for keys of algorithm alg (CG_KEY_ANY: a file may mix both,
 * for listing). */
int cg_key_each_alg(const char *path, enum cg_key_alg alg, cg_key_fn fn,
                    void *ctx);
/* The fingerprint of pub: lower-case hex of SHA-256 of its 32 bytes. */
void cg_key_fingerprint(char out[65], const unsigned char pub[32]);

/* -------------------------------------------------------------- signing */

/* Sign every file this process writes from now on with the private key
 * at path (NULL: sign no more).  Returns 0, or -1 with a message. */
int cg_sign_use(const char *path);
/* Whether a signing key is in use. */
int cg_sign_active(void);
/*
 * The signature member for manifest bytes json [n] made with the key in
 * use: *out (malloc'd, the caller frees) of *outn bytes.  Returns 0, or
 * -1 with a message.
 */
int cg_sign_member(const void *json, size_t n, char **out, size_t *outn);
/*
 * Check the signature member sig [sn] against manifest bytes json [n].
 * Returns 0 with the signer's key in pub, or -1 with a message that says
 * whether the member is malformed or the manifest was altered.
 */
int cg_sign_check(const void *json, size_t n, const void *sig, size_t sn,
                  unsigned char pub[32]);

/* ---------------------------------------------------------------- trust */

/*
 * Trust the keys of path from now on: a file of .pub lines (blank lines
 * and lines starting with '#' skipped), or a directory whose *.pub files
 * are read so; NULL: no trust list, CG_TRUST ignored.  Returns 0, or -1
 * with a message (a line that is not a key is an error, not skipped).
 */
int cg_trust_use(const char *path);
/*
 * Whether a trust list is in force: 1, 0, or -1 with a message where
 * CG_TRUST names one that cannot be read.  Without cg_trust_use, the
 * list of CG_TRUST (where set and not empty) is loaded on first call.
 */
int cg_trust_active(void);
/* Whether pub is in the trust list. */
int cg_trusted(const unsigned char pub[32]);

#endif
