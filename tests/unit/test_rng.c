/*
 * test_rng.c - cg_rng_normals: a standard normal, the same bits on every
 * machine.
 *
 * Sixteen million values from one stream: mean, variance, skewness and
 * kurtosis within a few standard errors of N(0, 1)'s; the largest gap
 * between their empirical distribution and Phi (Kolmogorov-Smirnov, on a
 * million of them) under the 1% critical value; the share beyond 4
 * sigma and beyond 5 within 15% and 40% of Phi's (the tails come from
 * u1 near 0, where too few bits would show).  Pairs are independent:
 * the correlation of the two halves of a pair, and of neighbouring
 * pairs, within 5 standard errors of 0.  An odd count gives the first
 * value of its last pair, and a split call the same values as one call
 * of the same even lengths.  The first values of seed 1 are stored as
 * bits, and a hash of 65 537 values of seed 2: the polynomials use
 * IEEE's basic operations only, so every machine (and every vector
 * width: the AVX-512 build and the portable one agree) must give
 * exactly these.  Exit 0
 * pass, 1 fail.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define TEST_NAME "test_rng"
#include "check.h"

static int
cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

static double
phi(double x)
{
	return 0.5 * erfc(-x / sqrt(2.0));
}

static void
test_moments(void)
{
	const size_t N = (size_t)1 << 24;
	float *v = malloc(N * sizeof(float));
	struct cg_rng r;
	double s1 = 0, s2 = 0, s3 = 0, s4 = 0, c01 = 0, c02 = 0;
	size_t over4 = 0, over5 = 0, bad = 0;
	char what[200];

	if (v == NULL)
		exit(2);
	cg_rng_seed(&r, 12345);
	cg_rng_normals(&r, v, N);
	for (size_t i = 0; i < N; i++) {
		double x = v[i];
		bad += !isfinite(x);
		s1 += x;
		s2 += x * x;
		s3 += x * x * x;
		s4 += x * x * x * x;
		over4 += fabs(x) > 4;
		over5 += fabs(x) > 5;
		if (i % 2 == 0) /* the two halves of a pair; the next pair */
			c01 += x * v[i + 1];
		if (i + 2 < N)
			c02 += x * v[i + 2];
	}
	expect(bad == 0, "every value is finite");
	double n = (double)N, mean = s1 / n, var = s2 / n - mean * mean;
	double skew = s3 / n / pow(var, 1.5), kurt = s4 / n / (var * var);
	snprintf(what, sizeof(what),
	         "moments of 2^24 values: mean %.5f, variance %.5f, "
	         "skewness %.5f, kurtosis %.4f",
	         mean, var, skew, kurt);
	/* standard errors: 1/sqrt(n), sqrt(2/n), sqrt(6/n), sqrt(24/n) */
	expect(fabs(mean) < 5 / sqrt(n) && fabs(var - 1) < 5 * sqrt(2 / n) &&
	           fabs(skew) < 5 * sqrt(6 / n) &&
	           fabs(kurt - 3) < 5 * sqrt(24 / n),
	       what);
	double r01 = c01 / (n / 2), r02 = c02 / (n - 2);
	snprintf(what, sizeof(what),
	         "a pair's halves and neighbouring pairs uncorrelated "
	         "(%.5f, %.5f)",
	         r01, r02);
	expect(fabs(r01) < 5 / sqrt(n / 2) && fabs(r02) < 5 / sqrt(n), what);
	double p4 = 2 * phi(-4) * n, p5 = 2 * phi(-5) * n;
	snprintf(what, sizeof(what),
	         "tails: %zu beyond 4 sigma (Phi: %.0f), %zu beyond 5 (%.0f)",
	         over4, p4, over5, p5);
	expect(fabs(over4 - p4) < 0.15 * p4 && fabs(over5 - p5) < 0.4 * p5,
	       what);

	/* Kolmogorov-Smirnov on the first million */
	const size_t M = 1000000;
	qsort(v, M, sizeof(float), cmp_float);
	double d = 0;
	for (size_t i = 0; i < M; i++) {
		double f = phi(v[i]);
		double lo = f - (double)i / M, hi = (double)(i + 1) / M - f;
		d = fmax(d, fmax(lo, hi));
	}
	snprintf(what, sizeof(what),
	         "Kolmogorov-Smirnov distance to Phi over 10^6 values %.6f "
	         "(1%% critical value %.6f)",
	         d, 1.628 / sqrt((double)M));
	expect(d < 1.628 / sqrt((double)M), what);
	free(v);
}

static void
test_bits(void)
{
	/* seed 1's first 7 values (an odd count: the last is a pair's
	 * first), as float bits */
	static const uint32_t want[7] = {0xbf552e8d, 0xbddc3423, 0xbf513bf0,
	                                 0x3f2a2bf3, 0x3f06ce42, 0x3f2a9b84,
	                                 0xbfd81449};
	float v[7], w[8], a[8];
	struct cg_rng r;
	uint32_t got[7];
	char what[200];

	cg_rng_seed(&r, 1);
	cg_rng_normals(&r, v, 7);
	memcpy(got, v, sizeof(got));
	if (memcmp(got, want, sizeof(got)) != 0)
		for (int i = 0; i < 7; i++)
			printf("  got 0x%08x (%.9g), want 0x%08x\n",
			       (unsigned)got[i], v[i], (unsigned)want[i]);
	snprintf(what, sizeof(what),
	         "seed 1's first values are the stored bits (every machine)");
	expect(memcmp(got, want, sizeof(got)) == 0, what);

	/* and 65 537 values' bits through FNV-1a: the vector loop's lanes */
	{
		enum { L = 65537 };
		float *x = malloc(L * sizeof(float));
		uint64_t h = 0xcbf29ce484222325ULL;
		if (x == NULL)
			exit(2);
		cg_rng_seed(&r, 2);
		cg_rng_normals(&r, x, L);
		for (size_t i = 0; i < L; i++) {
			uint32_t bits;
			memcpy(&bits, &x[i], 4);
			for (int k = 0; k < 4; k++)
				h = (h ^ ((bits >> (8 * k)) & 0xff)) *
				    0x100000001b3ULL;
		}
		free(x);
		snprintf(what, sizeof(what),
		         "seed 2's first 65 537 values hash to the stored "
		         "FNV-1a (0x%016llx)",
		         (unsigned long long)h);
		expect(h == 0xe4dc21b56687b589ULL, what);
	}

	cg_rng_seed(&r, 1);
	cg_rng_normals(&r, w, 8);
	expect(memcmp(v, w, 6 * sizeof(float)) == 0 && v[6] == w[6],
	       "an odd count gives the first value of its last pair");
	cg_rng_seed(&r, 1);
	cg_rng_normals(&r, a, 2);
	cg_rng_normals(&r, a + 2, 6);
	expect(memcmp(a, w, sizeof(a)) == 0,
	       "calls of even lengths give the values of one call");
}

int
main(void)
{
	test_bits();
	test_moments();
	if (failures) {
		printf(TEST_NAME ": %d check(s) FAILED\n", failures);
		return 1;
	}
	printf(TEST_NAME ": all checks passed\n");
	return 0;
}
