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

#endif
