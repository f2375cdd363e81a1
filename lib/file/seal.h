/*
 * file/seal.h - sealed files: a cg file's whole bytes encrypted to an
 * X25519 public key, so that a file at rest says nothing without the
 * private key.
 *
 * A sealed file is a header of CG_SEAL_HEAD bytes, then the plaintext
 * (the cg file as it would be written unsealed, compressed or not) in
 * chunks, each encrypted and authenticated on its own:
 *
 *   0   8  magic "CGSEAL\0\1" (the last byte is the version)
 *   8   4  chunk size, little-endian: plaintext bytes of every chunk
 *          but the last (2^20; a reader takes 2^12 to 2^24)
 *   12  4  suite, little-endian: 1 = X25519, HKDF-SHA256, AES-256-GCM
 *   16 32  the file's ephemeral X25519 public key
 *   48 32  the recipient's fingerprint: SHA-256 of its public key
 *   80 ..  chunks: ciphertext and a 16-byte tag; every chunk holds the
 *          chunk size but the last, which holds 0 to chunk size bytes
 *
 * The key of a file: X25519 of its ephemeral private key (made for this
 * file alone, then forgotten) and the recipient's public key, through
 * HKDF-SHA256 (salt: the ephemeral and the recipient's public keys;
 * info: "cg seal v1").  Chunk i's nonce is i as 8 bytes big-endian,
 * three zero bytes, and 1 for the last chunk or 0 for any other; its
 * associated data is the header.  So a chunk moved, dropped, repeated
 * or altered, a file cut at a chunk's end or one with bytes after its
 * last chunk, and a header altered all fail a tag.
 *
 * What shows: that the file is sealed, to which key (its fingerprint,
 * so that a reader with the wrong key can say so), and the plaintext's
 * length to the byte (the sum of the tensors' sizes, give or take the
 * tar headers).  The manifest, the names, the shapes and every value are
 * inside.  A sealed file's bytes differ at every write (the ephemeral
 * key); what it opens to is the same.
 *
 * The key to seal to and the key to open with are the process's, set by
 * the programs' --encrypt-to and --seal-key options (cli.c answers them)
 * or named by CG_ENCRYPT_TO and CG_SEAL_KEY.  The container (container.c)
 * seals every cg file it writes while a key to seal to is set, and opens
 * every sealed file it reads.  A file being read was opened whole, into
 * memory, before its first byte was believed.
 */
#ifndef CG_SEAL_H
#define CG_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "file/magic.h" /* CG_SEAL_MAGIC, cg_seal_probe */

#define CG_SEAL_HEAD 80
#define CG_SEAL_CHUNK (1u << 20)

/* ---------------------------------------------------------------- keys */

/*
 * Seal every cg file this process writes from now on to the X25519
 * public key of path (a .pub line "x25519 HEX", or the private key);
 * NULL: seal none, CG_ENCRYPT_TO ignored.  0, or -1 with a message.
 */
int cg_seal_to(const char *path);
/*
 * Whether files are to be sealed: 1, 0, or -1 with a message where
 * CG_ENCRYPT_TO names a key that cannot be used.  Without cg_seal_to,
 * the key of CG_ENCRYPT_TO (where set and not empty) is read on first
 * call.
 */
int cg_seal_active(void);
/*
 * Open sealed files with the X25519 private key at path (PEM, cg-key
 * --x25519); NULL: no key, CG_SEAL_KEY ignored.  0, or -1 with a
 * message.  Without it, CG_SEAL_KEY's key is read at the first sealed
 * file.
 */
int cg_seal_key_use(const char *path);

/* ------------------------------------------------------------- sealing */

/* Where a sealer's bytes go: write(ctx, buf, n), 0 or -1 with a
 * message. */
typedef int (*cg_seal_write_fn)(void *ctx, const void *buf, size_t n);

struct cg_sealer;
/*
 * A sealer to the key in use (cg_seal_active), its header already
 * handed to write.  NULL with a message.
 */
struct cg_sealer *cg_sealer_new(cg_seal_write_fn write, void *ctx);
/* The same to the raw public key pub, chunks of chunk bytes (a power of
 * two from 2^12 to 2^24): for tests. */
struct cg_sealer *cg_sealer_new_to(const unsigned char pub[32], size_t chunk,
                                   cg_seal_write_fn write, void *ctx);
/* Seal buf [n], the next bytes of the plaintext.  0 or -1 with a
 * message. */
int cg_sealer_write(struct cg_sealer *s, const void *buf, size_t n);
/* Seal what is left as the last chunk; nothing more may be written.
 * 0 or -1 with a message. */
int cg_sealer_close(struct cg_sealer *s);
void cg_sealer_free(struct cg_sealer *s);

/* ------------------------------------------------------------- opening */

/*
 * Open the sealed file whose bytes are pre [npre] and then the rest of fd
 * (fd -1: pre is all of it) with the key in use (cg_seal_key_use, else
 * CG_SEAL_KEY), and check it whole: every chunk's tag, the last chunk
 * last.  Returns a memory file (memfd, at offset 0; the caller closes
 * it) that holds the plaintext, of at most max bytes; or -1 with a
 * message: no key ("sealed (to key FP...): no key to open it (--seal-key
 * KEY or CG_SEAL_KEY)"), another key's, a header cut short or not
 * understood, a chunk that fails its tag.
 */
int cg_unseal_fd(int fd, const void *pre, size_t npre, uint64_t max);

/*
 * The same, opened into memory: u->mem [u->size] holds the plaintext,
 * in anonymous memory on 2 MiB boundaries, cg_unsealed_len(u->size)
 * long.  A regular file (npre 0) has its chunks opened in parallel,
 * each straight to its place, which the file's size tells; a stream
 * (a pipe, or pre alone) a chunk at a time, in order, each from one
 * buffer straight to its place in memory that grows as they come.
 * Nothing is kept of a file whose chunk fails a tag, the last one's
 * included.  0, or -1 with the same messages.  cg_unsealed_free frees
 * the memory; munmap(u->mem, cg_unsealed_len(u->size)) does too.
 */
struct cg_unsealed {
	void *mem;
	size_t size;
};
int cg_unseal(int fd, const void *pre, size_t npre, uint64_t max,
              struct cg_unsealed *u);
void cg_unsealed_free(struct cg_unsealed *u);
/* The length of the memory that holds n opened bytes. */
size_t cg_unsealed_len(size_t n);

#endif
