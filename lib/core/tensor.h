/*
 * core/tensor.h - one named tensor: its dtype, shape and bytes, and its values
 * read through its dtype's row.
 */
#ifndef CG_TENSOR_H
#define CG_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

#define CG_MAX_DIMS 8
#define CG_MAX_NAME 128

struct cg_tensor {
	char name[CG_MAX_NAME];
	enum cg_dtype dtype;
	int ndim;
	uint64_t shape[CG_MAX_DIMS];
	uint64_t nelem;  /* product of shape */
	uint64_t nbytes; /* length of the member */
	unsigned char sha256[32];
	void *data; /* nbytes, 64-byte aligned; owned by the cg_file */
	int borrowed; /* data is the caller's (cg_file_add_ref) */
	/* A tensor written from a source (cg_file_add_source): data is
	 * NULL and read(ctx, off, buf, n) gives bytes [off, off + n). */
	int (*read)(void *ctx, uint64_t off, void *buf, size_t n);
	void *read_ctx;
};

/*
 * The values of a tensor (struct cg_tensor, below) of any dtype, through
 * its row.  Each first checks that t->nbytes is what dtype and shape say,
 * that t->data is there and that [first, first + n) lies in t, and
 * returns -1 with a message ("tensor NAME: ...") otherwise; 0 on success.  t is only read, nothing
 * is allocated (a few KiB of stack), and any number of threads may
 * decode the same tensor at once.  No cost is paid for f32 beyond a copy.
 *
 * cg_tensor_to_f32: all t->nelem elements into out[nelem].
 * cg_tensor_decode: elements [first, first + n) into out[n], for reading
 *   a large tensor a slice at a time.  first and n need not be multiples
 *   of a block: a block cut by either end is decoded whole on the stack
 *   and the wanted part copied, so slices decode to exactly the values
 *   cg_tensor_to_f32 gives.
 * cg_tensor_decode_f64: the same as doubles: the f32 value widened for
 *   float kinds, the exact integer for integer kinds up to 2^53 (beyond,
 *   the nearest double).
 * cg_tensor_get_u64: integer dtypes only (-1 for a float kind): the exact
 *   values, a signed one as its two's complement.
 */
int cg_tensor_to_f32(const struct cg_tensor *t, float *out);
int cg_tensor_decode(const struct cg_tensor *t, uint64_t first, size_t n,
		     float *out);
int cg_tensor_decode_f64(const struct cg_tensor *t, uint64_t first, size_t n,
			 double *out);
int cg_tensor_get_u64(const struct cg_tensor *t, uint64_t first, size_t n,
		      uint64_t *out);

#endif
