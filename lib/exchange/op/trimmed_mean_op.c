/*
 * exchange/op/trimmed_mean_op.c - the reduce operation "trimmed-mean:F":
 * each element's mean once its F k lowest and highest values are
 * dropped, all at once.
 */
#include "exchange/op/op.h"

/*
 * The trimmed mean (Yin, Chen, Ramchandran and Bartlett, ICML 2018):
 * each element's mean over the inputs once the b smallest and the b
 * largest of its values are dropped, b = F k rounded down (F =
 * p->param, in [0, 0.5): one value at least is left; 4 inputs drop one
 * at each end from F = 0.25 on, and none below), in double, rounded
 * once.  Unweighted, as the median: a weight is what the input says of
 * itself, and a hostile input that said a large one would carry a
 * weighted statistic with it.
 */
static void
trimmed_slice(struct cg_reduce_pass *p, float *out, const float *const *in,
              size_t n)
{
	const size_t k = p->k;
	/* a fraction written in decimal (0.3 of 10) may fall a hair
	 * below the whole number it means */
	size_t b = (size_t)(p->param * (double)k + 1e-9);

	if (2 * b >= k)
		b = (k - 1) / 2;
#pragma omp parallel for schedule(static)
	for (size_t j = 0; j < n; j++) {
		float v[CG_REDUCE_MAX_KEPT];
		double s = 0;
		v[0] = 0; /* k >= 1; this only quiets a warning */
		for (size_t i = 0; i < k; i++)
			v[i] = in[i][j];
		cg_op_sort_values(v, k);
		for (size_t i = b; i < k - b; i++)
			s += v[i];
		out[j] = (float)(s / (double)(k - 2 * b));
	}
}

const struct cg_reduce_op cg_reduce_op_trimmed_mean = {
    .name = "trimmed-mean",
    .help = "each element's mean less its F*k lowest and highest (robust)",
    .param = "F",
    .pmin = 0,
    .pmax = 0.5,
    .popen = 2,
    .slice = trimmed_slice,
};
