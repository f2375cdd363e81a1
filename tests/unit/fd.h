/*
 * fd.h - the finite-difference checker of the kernel tests (test_nn,
 * test_transformer): a gradient against central differences of a loss.
 *
 * The including test defines FD_H (the step), FD_TOL (largest relative
 * error accepted) and FD_FLOOR (absolute floor of the relative error),
 * and includes check.h first.
 */
#ifndef CG_TEST_FD_H
#define CG_TEST_FD_H

#include <math.h>
#include <stdio.h>

/* A zeroed float array of n (never NULL). */
static inline float *
falloc(size_t n)
{
	return xcalloc(n, sizeof(float));
}

/* sum of a[i] r[i] in double: a random weighting that makes a loss. */
static inline double
dot(const float *a, const float *r, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * r[i];
	return s;
}

typedef double (*lossfn)(void *ctx);

/*
 * Compare g [n] with central differences of f with respect to p [n].
 * Returns the largest relative error |g - fd| / (FD_FLOOR + |fd|); prints
 * it with the largest absolute difference, and counts a failure above
 * FD_TOL, unless quiet.
 */
static inline double
fdcheck(const char *name, float *p, const float *g, size_t n, lossfn f,
        void *ctx, int quiet)
{
	double maxrel = 0, maxabs = 0;

	for (size_t i = 0; i < n; i++) {
		float orig = p[i];
		float hi = orig + (float)FD_H, lo = orig - (float)FD_H;

		p[i] = hi;
		double lp = f(ctx);
		p[i] = lo;
		double lm = f(ctx);
		p[i] = orig;
		/* The step actually taken, after rounding to float. */
		double fd = (lp - lm) / ((double)hi - (double)lo);
		double ad = fabs(g[i] - fd);
		double rel = ad / (FD_FLOOR + fabs(fd));

		if (!(rel <= maxrel))
			maxrel = rel;
		if (ad > maxabs)
			maxabs = ad;
	}
	if (!quiet) {
		int ok = maxrel <= FD_TOL;
		printf("%-4s %-28s n=%-5zu max rel err %.3g  max abs diff "
		       "%.3g\n",
		       ok ? "ok" : "FAIL", name, n, maxrel, maxabs);
		if (!ok)
			failures++;
	}
	return maxrel;
}

#endif
