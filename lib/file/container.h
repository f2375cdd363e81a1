/*
 * file/container.h - the cg file: a tar archive of a manifest and tensors, each
 * with its SHA-256, read as hostile input, written atomically.
 */
#ifndef CG_CONTAINER_H
#define CG_CONTAINER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/tensor.h"

#define CG_FORMAT "cg/1"
#define CG_MAX_TENSORS 65536
#define CG_MAX_MANIFEST (16u << 20)



/*
 * A whole cg file in memory: the manifest (cJSON, owned) and the tensors in
 * manifest order.  Reading verifies every digest.  A tensor of a plain
 * multi-byte type (f32, f16, bf16, u16, u32, u64) holds host words in
 * memory and little-endian words in the file: on a big-endian host the
 * reader turns them around once the digest is checked, and the writer
 * as it hashes and writes (core/util.h; nothing on a little-endian host).  Each tensor is
 * allocated once and stays where it is until the file is freed: a
 * pointer from cg_file_add* or cg_file_find holds across later adds (the
 * table of pointers grows, the tensors do not move).
 */
struct cJSON;
struct cg_file {
	struct cJSON *manifest; /* everything of cg.json but "tensors" */
	size_t ntensors;
	struct cg_tensor **tensors; /* [ntensors], in manifest order */
	size_t cap;
	struct cg_tensor **index; /* by name: a hash table (container.c) */
	size_t nindex;
	void *blob; /* a plain file mapped whole: its members lie in it */
	size_t blob_size;
	int blob_anon; /* blob is memory of its own (an opened sealed file),
	                * not a file's pages: never paged out */
	/* Read from a signed file: is_signed is 1 and signer its key, the
	 * signature checked against the manifest (lib/file/sign.h). */
	int is_signed;
	unsigned char signer[32];
	/* The digest cg_file_read_late left to a thread, or NULL. */
	struct cg_late *late;
};

/* A new empty file with a manifest {"format":"cg/1","kind":kind}. */
struct cg_file *cg_file_new(const char *kind);
void cg_file_free(struct cg_file *f);
/* Manifest "kind", or "" if absent. */
const char *cg_file_kind(const struct cg_file *f);

/*
 * Add a tensor; the file takes a copy of data (nbytes as the dtype and
 * shape say).  Returns the new tensor, or NULL on error.
 */
struct cg_tensor *cg_file_add(struct cg_file *f, const char *name,
			      enum cg_dtype dtype, int ndim,
			      const uint64_t *shape, const void *data);
/*
 * Like cg_file_add but without a copy: the file points at data, which
 * must stay unchanged until the file is written and freed (saving a model
 * needs no second copy of it).
 */
struct cg_tensor *cg_file_add_ref(struct cg_file *f, const char *name,
				  enum cg_dtype dtype, int ndim,
				  const uint64_t *shape, const void *data);
/*
 * A tensor that is never held whole: the writer asks read(ctx, off, buf,
 * n) for its bytes [off, off + n) (host words, as data would hold), in
 * order from 0 to the end, once to
 * compute its digest and once to write it, a chunk at a time (read
 * returns 0, or -1 with a message).  The two passes must give the same
 * bytes: a write whose second pass differs fails ("changed while it was
 * read") and its output is left uncommitted.  For files made only to be
 * written (cg_file_write); data stays NULL.  Returns the new tensor, or
 * NULL on error.
 */
struct cg_tensor *cg_file_add_source(struct cg_file *f, const char *name,
				     enum cg_dtype dtype, int ndim,
				     const uint64_t *shape,
				     int (*read)(void *ctx, uint64_t off,
						 void *buf, size_t n),
				     void *ctx);
/* Like cg_file_add but the data is left zeroed for the caller to fill. */
struct cg_tensor *cg_file_add_zero(struct cg_file *f, const char *name,
				   enum cg_dtype dtype, int ndim,
				   const uint64_t *shape);
/* The tensor called name, or NULL (no message recorded); a hash
 * look-up, not a search. */
struct cg_tensor *cg_file_find(const struct cg_file *f, const char *name);
/*
 * Turn t into an f32 tensor in memory of its own, its values decoded
 * through its dtype's codec row (cg_tensor_to_f32); an f32 tensor is left
 * as it is.  The digest in t no longer describes t->data afterwards: for
 * readers that go on to compute, not for files to write again.  Returns
 * 0 or -1 with a message ("tensor NAME: ...").
 */
int cg_tensor_make_f32(struct cg_tensor *t);
/* Like cg_file_find, but records "tensor NAME: missing" or a dtype
 * mismatch message and returns NULL. */
struct cg_tensor *cg_file_need(const struct cg_file *f, const char *name,
			       enum cg_dtype dtype);

/*
 * The kinds of file the format defines ("model", "grad", "delta",
 * "data", "state"): 1 when kind is one, else 0.
 */
int cg_kind_known(const char *kind);
/*
 * The head of manifest m, as every reader of a cg file checks it (the
 * archive's cg.json, a safetensors file's "cg.json" metadata): format
 * "cg/1" and a kind the format defines.  Returns 0, or -1 with a message
 * starting "cg.json: ".
 */
int cg_kind_check_manifest(const struct cJSON *m);

/*
 * Read a cg file from path ("-" is stdin): plain, gzip or zstd tar.  Every
 * size is checked against limits before allocation and every digest is
 * verified (the digests in parallel); a manifest of a kind the format
 * does not define is refused.  A signature member (cg.sig, last) is
 * checked against the manifest whenever there is one; where a trust list
 * is in force (lib/file/sign.h), a file that is unsigned or signed by a key
 * not in it is refused too.  A plain (uncompressed) regular file
 * is mapped whole (private: writing to a tensor changes only this
 * process's copy) and its tensors are used where they lie (f->blob; the
 * tensors are marked borrowed), so reading copies nothing; compressed
 * files and pipes are read member by member; on a big-endian host a
 * tensor whose words are turned around is a copy.  Returns NULL with a
 * message naming the file (and tensor).
 */
struct cg_file *cg_file_read(const char *path);
/* The same, but every tensor in a buffer of its own (no blob), which a
 * caller may take over (set data to NULL) and the rest free early. */
struct cg_file *cg_file_read_copy(const char *path);
/*
 * cg_file_read, but for the digest of the tensor called late (where the
 * file has one): a thread of its own verifies it, begun before this
 * returns, so that the bulk of a large file is hashed while the caller
 * goes on with other work.  Until cg_file_late(f, 1) has returned 0,
 * that tensor's bytes are unchecked: the caller may compute with them,
 * never size, index or allocate by them, and must hand out nothing made
 * from them.  Its data stays where it is until cg_file_free, which stops
 * the thread.  (On a big-endian host a late tensor whose words are turned
 * around is verified before this returns, as the rest.)  Returns as
 * cg_file_read does.
 */
struct cg_file *cg_file_read_late(const char *path, const char *late);
/*
 * cg_file_read_late, but a file that is compressed or not a regular file
 * (a pipe) is first decompressed into an unlinked temporary file in
 * $TMPDIR (else /tmp), which is then mapped as a plain file is: its
 * tensors lie in the mapping, and cg_file_page_out gives back what of
 * them was read, so that no tensor is held whole in memory.  It costs
 * the disk the decompressed file takes, and the time to write it.
 * Returns as cg_file_read does (and "PATH: a copy in DIR: ..." where the
 * copy cannot be written).
 */
struct cg_file *cg_file_read_spooled(const char *path, const char *late);
/*
 * The verdict on f's late digest (cg_file_read_late): 0 when it matched
 * or none was late; -1 with the message "tensor NAME: digest mismatch
 * (file truncated or altered)", not naming the file; with wait 0, 1
 * while the thread is still at it.
 */
int cg_file_late(struct cg_file *f, int wait);
/* Same, from an open stream (display name used in messages). */
struct cg_file *cg_file_read_fp(FILE *fp, const char *display);
/* The same from fd, whose first npre bytes the caller has already read
 * (to tell a cg file from another format) and hands over in pre; the
 * rest is read from fd.  npre 0 is cg_file_read_fp's behaviour. */
struct cg_file *cg_file_read_fd(int fd, const char *display, const void *pre,
				size_t npre);
/* The same from the bytes buf [n], plain or compressed, which are only
 * read: every tensor is copied into a buffer of its own.  The same
 * checks and messages as a file's (display names it). */
struct cg_file *cg_file_read_mem(const void *buf, size_t n,
				 const char *display);
/* Unmap f's file once no tensor lies in it any more (all copied out and
 * marked not borrowed); otherwise nothing. */
void cg_file_drop_blob(struct cg_file *f);
/*
 * Give back this process's copy of the pages of tensor t of f where t
 * lies in f's mapped file (cg_file_read of a plain file): t->data stays
 * valid, and a later read maps the bytes again from the page cache, or
 * the disk.  So a tensor larger than memory is read a part at a time, as
 * the caller goes, and never held whole.  Returns 1, or 0 (nothing done)
 * where t has memory of its own.
 */
int cg_file_page_out(const struct cg_file *f, const struct cg_tensor *t);
/*
 * Done with tensor t of f: its memory is given back (its own buffer
 * freed, or the pages it has alone in f's mapped file returned, so that
 * they count no more in this process's memory) and t->data is NULL.
 */
void cg_file_let_go(const struct cg_file *f, struct cg_tensor *t);

enum cg_compress { CG_COMPRESS_NONE, CG_COMPRESS_GZIP, CG_COMPRESS_ZSTD };

/*
 * Write f to path ("-" is stdout): digests are computed, cg.json comes
 * first, then the tensors in order, then, where a signing key is in use
 * (lib/file/sign.h), the signature member cg.sig.  A path is written atomically
 * (temporary file in the same directory, fsync, rename).  Output is a pure
 * function of f (no time, owner or host inside).  Returns 0 or -1.
 */
int cg_file_write(struct cg_file *f, const char *path, enum cg_compress c);
/* cg_file_write, then cg_file_free(f), for a file made only to be
 * written: f NULL (its maker failed, with a message) returns -1. */
int cg_file_write_free(struct cg_file *f, const char *path, enum cg_compress c);

/*
 * The cg.json that cg_file_write writes for f: a copy of f->manifest with
 * "tensors" (name, dtype, shape, bytes, sha256) made from f's tensors,
 * whose digests are computed into them on the way.  Returns a new object
 * the caller frees with cJSON_Delete, or NULL (out of memory).
 */
struct cJSON *cg_file_manifest(struct cg_file *f);

/*
 * Write f into an output already opened with cg_out_open, without
 * committing it: a program that writes several files commits them all
 * only once every one is written.  Returns 0 or -1 (o is left open; the
 * caller aborts it).
 */
struct cg_out;
int cg_file_write_to(struct cg_file *f, struct cg_out *o, enum cg_compress c);

/* Bytes of the largest file a reader accepts (CG_MAX_BYTES in the
 * environment overrides; default 8 GiB). */
uint64_t cg_max_bytes(void);

/* The number under key of a manifest object obj, or dflt where there is
 * none: cg_json_u64 takes one in [0, 2^53] (its whole part), cg_json_num
 * any.  obj may be NULL. */
uint64_t cg_json_u64(const struct cJSON *obj, const char *key, uint64_t dflt);
double cg_json_num(const struct cJSON *obj, const char *key, double dflt);
/* Set key of obj to the number v, replacing what was there. */
void cg_json_set_num(struct cJSON *obj, const char *key, double v);

#endif
