/*
 * exchange/op/op.h - what the reduce operations share: the weighted
 * fold, the coordinate median, and sorting the few values of an element.
 *
 * Each operation is one row (struct cg_reduce_op, exchange/reduce.h) in
 * a file of its own, lib/exchange/op/NAME_op.c defining `const struct
 * cg_reduce_op cg_reduce_op_NAME`, and one X() in the list of
 * lib/exchange/reduce.c; an operation outside the list (a test's) joins
 * with cg_reduce_op_register().
 */
#ifndef CG_OP_OP_H
#define CG_OP_OP_H

#include <stddef.h>
#include <stdlib.h>

#include "exchange/reduce.h"

/*
 * acc [n] = k x in double then rounded (the first input), acc += (float)k
 * x (the others): the arithmetic every weighted fold has used, kept so
 * that outputs stay byte for byte what they were.
 */
void cg_op_scale_into(float *acc, const float *x, size_t n, double k);
void cg_op_add_scaled(float *acc, const float *x, size_t n, double k);

/* The median of each element over p->k inputs (median_op.c says how),
 * out [n] from in[0..k) [n]; clip-mean starts from it. */
void cg_op_median_slice(struct cg_reduce_pass *p, float *out,
                        const float *const *in, size_t n);

/* Ascending, for qsort (the values are finite: the reducer checked). */
static inline int
cg_op_cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* v [k] in ascending order: by insertion for the few inputs of a
 * round, qsort beyond. */
static inline void
cg_op_sort_values(float *v, size_t k)
{
	if (k > 16) {
		qsort(v, k, sizeof(*v), cg_op_cmp_float);
		return;
	}
	for (size_t i = 1; i < k; i++) {
		float x = v[i];
		size_t t = i;
		for (; t > 0 && v[t - 1] > x; t--)
			v[t] = v[t - 1];
		v[t] = x;
	}
}

#endif
