/*
 * exchange/op/op.c - what the reduce operations share: the weighted
 * fold and the coordinate median.
 */
#include "exchange/op/op.h"

void
cg_op_scale_into(float *acc, const float *x, size_t n, double k)
{
#pragma omp simd
	for (size_t j = 0; j < n; j++)
		acc[j] = (float)(x[j] * k);
}

void
cg_op_add_scaled(float *acc, const float *x, size_t n, double k)
{
	const float kf = (float)k;

#pragma omp simd
	for (size_t j = 0; j < n; j++)
		acc[j] += kf * x[j];
}

/*
 * The median of each element over the k inputs, their weights ignored:
 * the middle value, or the mean of the two middle values (in double) for
 * an even k.  One input far off, or a few (fewer than half), cannot move
 * it past the others' values.
 */
void
cg_op_median_slice(struct cg_reduce_pass *p, float *out, const float *const *in,
                   size_t n)
{
	const size_t k = p->k;

#pragma omp parallel for schedule(static)
	for (size_t j = 0; j < n; j++) {
		float v[CG_REDUCE_MAX_KEPT];
		v[0] = v[1] = 0; /* k >= 1; this only quiets a warning */
		for (size_t i = 0; i < k; i++)
			v[i] = in[i][j];
		cg_op_sort_values(v, k);
		out[j] = k % 2 ? v[k / 2]
		               : (float)(((double)v[k / 2 - 1] + v[k / 2]) / 2);
	}
}
