/*
 * wset-rows.c - where a weight set (nn/qlinear.h) should stop multiplying
 * a q8_0 (f16, q4_0) matrix as stored and decode it for the f32 product:
 * the time of one [N, K] layer on B rows each way.
 *
 * usage: wset-rows [K N [DTYPE]]  (default 1024 1024 q8_0)
 *
 * For B = 1, 2, 4, ..., 128: the stored product (cg_qlinear_forward) and
 * the decode-then-f32 one (the codec's decode of the whole layer, then
 * cg_linear_forward), each the median of 21 runs, in microseconds, on
 * the threads OMP_NUM_THREADS gives.  Built against libcg.a by hand
 * (bench/RESULTS.md has the line).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cg.h"
#include "nn/nn.h"
#include "nn/qlinear.h"

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int K = argc > 2 ? atoi(argv[1]) : 1024,
	    N = argc > 2 ? atoi(argv[2]) : 1024;
	enum cg_dtype dt = CG_Q8_0;
	struct cg_rng r;

	if (argc > 3 && cg_dtype_parse(argv[3], &dt) != 0)
		return 2;
	const struct cg_codec *c = cg_codec(dt);
	size_t n = (size_t)K * N;
	float *w = malloc(n * 4), *dec = malloc(n * 4);
	void *q = malloc(n / c->block * c->bytes);
	float *x = malloc((size_t)128 * K * 4),
	      *y = malloc((size_t)128 * N * 4);
	void *scr = malloc(cg_qlinear_scratch(128, K));
	cg_rng_seed(&r, 1);
	for (size_t i = 0; i < n; i++)
		w[i] = cg_rng_uniform(&r) - 0.5f;
	for (size_t i = 0; i < (size_t)128 * K; i++)
		x[i] = cg_rng_uniform(&r) - 0.5f;
	if (c->encode(q, w, n) != 0)
		return 1;
	struct cg_wmat m = {dt, q};
	printf("%s [%d, %d]\n%5s %12s %12s\n", c->name, N, K, "B", "stored_us",
	       "decode_us");
	for (int B = 1; B <= 128; B *= 2) {
		double ts[21], td[21];
		for (int k = 0; k < 21; k++) {
			double t0 = now();
			cg_qlinear_forward(y, x, &m, NULL, B, K, N, scr);
			double t1 = now();
			c->decode(dec, q, n);
			cg_linear_forward(y, x, dec, NULL, B, K, N);
			double t2 = now();
			ts[k] = t1 - t0;
			td[k] = t2 - t1;
		}
		qsort(ts, 21, sizeof(double), cmp);
		qsort(td, 21, sizeof(double), cmp);
		printf("%5d %12.0f %12.0f\n", B, ts[10], td[10]);
	}
	return 0;
}
