/*
 * kernel.h - what the kernel tests (test_transformer, test_conv) share:
 * their generator, random fills, gradient buffers that start non-zero
 * (so that a backward's += is checked), and the forward check against
 * a double reference.
 *
 * Define FWD_ATOL and FWD_RTOL (a forward output passes when |got - ref|
 * <= FWD_ATOL + FWD_RTOL |ref|) and include after fd.h.
 */
#ifndef CG_TEST_KERNEL_H
#define CG_TEST_KERNEL_H

#include <math.h>
#include <string.h>

#include "cg.h"

static struct cg_rng rng;

/* p [n] uniform in [lo, hi). */
static inline void
fill(float *p, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		p[i] = lo + (hi - lo) * cg_rng_uniform(&rng);
}

/* Gradient buffers start at a known random state g0; gdelta leaves
 * g - g0. */
static inline float *
gstart(size_t n, float **g0)
{
	float *g = falloc(n);

	*g0 = falloc(n);
	fill(*g0, n, -1, 1);
	memcpy(g, *g0, n * sizeof(float));
	return g;
}

static inline void
gdelta(float *g, const float *g0, size_t n)
{
	for (size_t i = 0; i < n; i++)
		g[i] -= g0[i];
}

/* Largest |a - ref| / (FWD_ATOL + FWD_RTOL |ref|): at most 1 passes. */
static inline double
fwdcheck(const float *a, const double *ref, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++) {
		double d =
		    fabs(a[i] - ref[i]) / (FWD_ATOL + FWD_RTOL * fabs(ref[i]));
		if (!(d <= m))
			m = d;
	}
	return m;
}

#endif
