/*
 * data/idx.h - datasets from IDX files (as MNIST's).
 */
#ifndef CG_IDX_H
#define CG_IDX_H

#include <stdint.h>

#include "data/dataset.h"

/*
 * Load IDX files (as in MNIST): images of type u8 with 3 dimensions
 * (N, H, W) or 4 (N, H, W, C), labels of type u8 with one dimension N.
 * Either file may be gzip-compressed and either (not both) may be "-" for
 * standard input.  limit > 0 keeps the first limit examples only.  Headers
 * are checked against the file size and sane limits before anything is
 * allocated; the label count must equal the image count.  Conditions are
 * named "0", "1", ... up to at least "9" (cg_dataset_set_conditions renames
 * them).  On success *out holds the dataset (the caller frees it with
 * cg_dataset_free) and 0 is returned; on error -1, a message naming the
 * file, and *out zeroed.
 */
int cg_idx_load(const char *images, const char *labels, uint64_t limit,
                struct cg_dataset *out);

/*
 * cg_idx_load for images larger than memory: the pixels stay in the
 * file (the dataset's fetch reads each image again, data/dataset.h;
 * data/reread.h says how for gzip and standard input, which is copied
 * to a temporary file), and only the labels and each example's place
 * are held, about 20 bytes an example.  A gzip file is read through
 * once to prove its length and checksum; the hashes a hashed split
 * needs (cg_payload_hash of each image with *hash_seed) are computed
 * then where hash_seed is not NULL, which reads a plain file once too.
 * The checks, the errors and the examples are cg_idx_load's, but that
 * CG_MAX_BYTES does not bound the pixels.  Returns as cg_idx_load.
 */
int cg_idx_stream(const char *images, const char *labels, uint64_t limit,
                  const uint64_t *hash_seed, struct cg_dataset *out);

/*
 * The IDX pair of set ("train" or "t10k", as MNIST names them) in
 * directory dir: for the images, the first regular file of
 * SET-images-idx3-ubyte, the same with ".gz", SET-images.idx3-ubyte and
 * the same with ".gz"; for the labels likewise with "labels" and "idx1".
 * Returns 0 with the paths in pair[0] (images) and pair[1] (labels), new
 * strings the caller frees; or -1 with a message naming dir and the
 * file not found ("DIR: no train-labels-idx1-ubyte[.gz] here"), and
 * pair[] NULL.
 */
int cg_idx_find(const char *dir, const char *set, char *pair[2]);
/*
 * Whether dir holds the images of an IDX pair, of either set: what tells
 * a directory of MNIST files from a directory of text.
 */
int cg_idx_dir(const char *dir);
/*
 * Name d's conditions as the path of its IDX images implies:
 * Fashion-MNIST's ten (cg_fashion_mnist_names) where the path says
 * "fashion", in any case, and d has ten conditions; else d is left as
 * it is.  Returns 0, or -1 with a message and d unchanged.
 */
int cg_idx_name_conditions(struct cg_dataset *d, const char *images);

#endif
