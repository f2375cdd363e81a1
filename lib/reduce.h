/*
 * reduce.h - combining gradients and deltas: a table of operations and a
 * reducer that runs any of them with bounded memory.
 *
 * An operation is one row of cg_reduce_ops, of one of two kinds.
 *
 * A streaming operation (streams = 1: mean, sum) folds the inputs into
 * one accumulator as they come, each input read, folded and released:
 * memory is one accumulator plus one input whatever their number.  It
 * gives
 *
 *     init(acc, x, n, w)     acc = what the first input x [n] of weight
 *                            w contributes,
 *     add(acc, x, n, w)      acc += what each next input contributes,
 *     finish(acc, n, wsum)   the result from the fold, wsum being the
 *                            inputs' total weight (NULL: acc is it).
 *
 * An operation that needs every input at once (streams = 0: a coordinate
 * median or a trimmed mean) gives instead
 *
 *     slice(out, in, w, k, n)   out [n] from in[0..k), the same slice of
 *                               each of the k inputs (in[i] [n]), and
 *                               their weights w [k].
 *
 * The reducer then keeps every input, mapped where it lies (cg_file_read
 * maps a plain file whole: a kept input costs address space and page
 * cache, not a copy of its own), and at the end walks the parameter
 * vector tensor by tensor in slices of at most r->slice elements, calling
 * slice once per slice.  Memory of its own is the output plus, where an
 * input has to be decoded to f32, k slices; inputs that come through a
 * pipe or compressed are held in memory whole, so an all-at-once
 * reduction of many inputs wants plain files.
 *
 * Masked updates (secagg.h) are summed apart, exactly, as integers
 * modulo 2^64, whatever the path: only the mean takes them, and only all
 * of one round's peers at once; the result is their weighted mean, in
 * f32, like any other.
 *
 * A streaming operation runs on the sliced path too (r->sliced = 1): each
 * slice is then init, add for every next input, and finish, on that
 * slice.  Every element sees the same operations in the same order as
 * when streaming, so both paths give the same bits (test_reduce checks
 * it); the path exists for operations to come, and this is its test.
 */
#ifndef CG_REDUCE_H
#define CG_REDUCE_H

#include <stddef.h>

#include "cg.h"
#include "update.h"

struct cg_reduce_op {
	const char *name;
	const char *help; /* a few words for --help */
	int streams;      /* 1: init/add/finish; 0: slice */
	void (*init)(float *acc, const float *x, size_t n, double w);
	void (*add)(float *acc, const float *x, size_t n, double w);
	void (*finish)(float *acc, size_t n, double wsum);
	void (*slice)(float *out, const float *const *in, const double *w,
	              size_t k, size_t n);
};

/* Every operation, in the order --help lists them; ends with a row whose
 * name is NULL.  The first is the default. */
extern const struct cg_reduce_op cg_reduce_ops[];

/* The operation called name, or NULL with a message listing them. */
const struct cg_reduce_op *cg_reduce_op_find(const char *name);

/* The most inputs the median takes (its values sit on the stack). */
#define CG_REDUCE_MAX_MEDIAN 1024

/* Elements per slice on the all-at-once path: 1 MiB of f32 per input. */
#define CG_REDUCE_SLICE ((size_t)1 << 18)

/*
 * A running reduction.  Every input must be of one kind (all grads or
 * all deltas), computed from one base model (cg_update_check_base_of
 * against the first input's base), with the first input's tensors and a
 * positive weight (cg_update_check_weight).  The result is a valid input
 * again: it carries the total weight and sample count, so reducing
 * partial means gives the mean of everything.
 */
struct cg_reducer {
	const struct cg_reduce_op *op;
	int sliced;   /* keep the inputs and reduce them slice by slice */
	size_t slice; /* elements per slice on that path */
	/* The first input, whose views and manifest the result takes,
	 * and the result: one dense f32 tensor per view, the running fold
	 * when streaming. */
	struct cg_update *first;
	struct cg_file *acc;
	struct cg_update **kept; /* sliced: every input, first included */
	size_t nkept, capkept;
	double weight;  /* total weight */
	double samples; /* total samples */
	double loss;    /* weighted loss sum */
	uint64_t inputs;
	/* The keys that signed the inputs, each once: the result's
	 * manifest lists their fingerprints under "signers". */
	unsigned char (*signers)[32];
	size_t nsigners, capsigners;
	double fold_seconds; /* folding the inputs in: decoding, adding */
	/* Masked inputs: their integer sum (NULL with plain inputs). */
	struct cg_mask_sum *masked;
};

/* A reducer running op: streaming when op streams (set r->sliced
 * afterwards to force the sliced path), sliced otherwise. */
void cg_reducer_init(struct cg_reducer *r, const struct cg_reduce_op *op);
/*
 * Add u (taken over: freed now when streaming, at the end otherwise).
 * Returns 0, or -1 with a message starting with u's name when u breaks a
 * rule above.
 */
int cg_reducer_add(struct cg_reducer *r, struct cg_update *u);
/* The result (the reducer gives it up; the caller frees it), or NULL with
 * a message when nothing was added. */
struct cg_file *cg_reducer_finish(struct cg_reducer *r);
void cg_reducer_free(struct cg_reducer *r);

#endif
