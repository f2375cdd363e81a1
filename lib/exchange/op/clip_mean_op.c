/*
 * exchange/op/clip_mean_op.c - the reduce operation "clip-mean:TAU":
 * centred clipping from the coordinate median, in two passes over the
 * inputs.
 */
#include <math.h>

#include "exchange/op/op.h"

/*
 * sum[i] += the squared distance of in[i] [n] from v [n], in double.
 * Each input's sum is one thread's, in eight lanes of a fixed order, so
 * it is the same bits whatever the number of threads.
 */
static void
add_sq_dist(double *sum, const float *v, const float *const *in, size_t k,
            size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < k; i++) {
		const float *x = in[i];
		double lane[8] = {0};
		size_t j = 0;
		for (; j + 8 <= n; j += 8)
			for (int l = 0; l < 8; l++) {
				double d = (double)x[j + l] - v[j + l];
				lane[l] += d * d;
			}
		for (; j < n; j++) {
			double d = (double)x[j] - v[j];
			lane[0] += d * d;
		}
		sum[i] += ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
		          ((lane[4] + lane[5]) + (lane[6] + lane[7]));
	}
}

/*
 * Centred clipping (Karimireddy, He and Jaggi, "Learning from History
 * for Byzantine Robust Optimization", ICML 2021): from a centre v,
 *
 *     v + 1/k sum_i (x_i - v) min(1, tau / |x_i - v|),
 *
 * tau = p->param, |.| the L2 norm over the whole update (every tensor),
 * as the paper clips each worker's whole vector: an input far from the
 * centre moves the result by tau / k at most, however far it is.
 * Unweighted, as the paper's (and for the trimmed mean's reason).  The
 * paper starts from the previous round's result, which a reduction that
 * keeps nothing between calls does not have; this one starts from the
 * coordinate median, robust by itself, and takes one clipping step from
 * it.  Two passes: the first writes the median into out and adds up
 * each input's squared distance from it over every slice; the second,
 * with those whole-update distances, clips.
 */
static void
clip_slice(struct cg_reduce_pass *p, float *out, const float *const *in,
           size_t n)
{
	const size_t k = p->k;
	double c[CG_REDUCE_MAX_KEPT];

	if (p->pass == 0) {
		cg_op_median_slice(p, out, in, n);
		add_sq_dist(p->sum, out, in, k, n);
		return;
	}
	for (size_t i = 0; i < k; i++) {
		double d = sqrt(p->last[i]);
		c[i] = (d > p->param ? p->param / d : 1.0) / (double)k;
	}
#pragma omp parallel for schedule(static)
	for (size_t j = 0; j < n; j++) {
		const double v = out[j];
		double s = 0;
		for (size_t i = 0; i < k; i++)
			s += c[i] * ((double)in[i][j] - v);
		out[j] = (float)(v + s);
	}
}

const struct cg_reduce_op cg_reduce_op_clip_mean = {
    .name = "clip-mean",
    .help = "centred clipping at L2 norm TAU from the median (robust)",
    .param = "TAU",
    .pmin = 0,
    .pmax = HUGE_VAL,
    .popen = 3,
    .passes = 2,
    .slice = clip_slice,
};
