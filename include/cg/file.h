/*
 * cg/file.h - cg files (libcg's public interface; libcg(3),
 * cg_file_read(3)).
 *
 * A cg file is a tar archive: a manifest, cg.json, then one member per
 * tensor with its SHA-256 (cg(7)).  Models, updates, worker states and
 * data shards are all cg files; this reads any of them, and writes new
 * ones.  Reading checks every size, name and digest: a damaged or
 * hostile file is refused with a message, never half read.
 */
#ifndef CG_FILE_PUBLIC_H
#define CG_FILE_PUBLIC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cg_file;

/*
 * Read the cg file at path ("-": standard input): plain, gzip or zstd.
 * Returns the file, which the caller frees with cg_file_free, or NULL
 * with a message naming the file (and the tensor at fault).
 */
struct cg_file *cg_file_read(const char *path);
/* A new empty file of kind ("model", "grad", "delta", "data" or
 * "state"); NULL with a message (out of memory). */
struct cg_file *cg_file_new(const char *kind);
/* Release f and everything it holds; f may be NULL. */
void cg_file_free(struct cg_file *f);

/* The manifest's kind, or "" where it has none; owned by f. */
const char *cg_file_kind(const struct cg_file *f);
/*
 * The manifest as JSON text, one line, with its "tensors" array as a
 * writer would write it.  Returns a string the caller frees with free(),
 * or NULL with a message.
 */
char *cg_file_manifest_json(struct cg_file *f);
/* Set the manifest's number key (for example "step") to v.  Returns 0,
 * or -1 with a message. */
int cg_file_set_number(struct cg_file *f, const char *key, double v);

/* How many tensors f holds; they are numbered from 0 in file order. */
size_t cg_file_ntensors(const struct cg_file *f);
/* Tensor i's name, or NULL (with a message) where i is out of range;
 * owned by f. */
const char *cg_file_tensor_name(const struct cg_file *f, size_t i);
/* Tensor i's dtype ("f32", "f16", "bf16", "q8_0", ...; cg(7)), or NULL
 * (with a message) where i is out of range; static. */
const char *cg_file_tensor_dtype(const struct cg_file *f, size_t i);
/*
 * Tensor i's shape: its dimensions into shape [max] (as many as fit)
 * and its number of dimensions returned (at most 8), or -1 with a
 * message where i is out of range.
 */
int cg_file_tensor_shape(const struct cg_file *f, size_t i, uint64_t *shape,
                         int max);
/* Tensor i's raw bytes and their count in *nbytes: a plain dtype's
 * elements as host words (the file's little-endian words, turned around
 * on a big-endian host), a block dtype's blocks as the file holds them;
 * *nbytes (unless nbytes is NULL); owned by f, valid until cg_file_free.
 * NULL (with a message) where i is out of range. */
const void *cg_file_tensor_data(const struct cg_file *f, size_t i,
                                size_t *nbytes);
/*
 * Tensor i's values decoded to floats into out [n], where n is its
 * number of elements (the product of its shape); a quantized tensor is
 * dequantized.  Returns 0, or -1 with a message where i is out of range,
 * n is not its size, or the dtype holds no numbers to decode.
 */
int cg_file_tensor_f32(const struct cg_file *f, size_t i, float *out, size_t n);

/*
 * Add an f32 tensor called name of shape [ndim] (1 to 8 dimensions),
 * its values copied from data.  Returns 0, or -1 with a message (a name
 * taken or not allowed, a bad shape, out of memory).
 */
int cg_file_add_f32(struct cg_file *f, const char *name, int ndim,
                    const uint64_t *shape, const float *data);

/*
 * Write f to path ("-": standard output), the manifest first, then the
 * tensors, each with its digest; compress is NULL or "none", "gzip" or
 * "zstd".  A path is written to a temporary file in its directory and
 * renamed: no reader sees half a file.  Returns 0, or -1 with a message
 * (nothing then left at path).
 */
int cg_file_save(struct cg_file *f, const char *path, const char *compress);

#ifdef __cplusplus
}
#endif
#endif
