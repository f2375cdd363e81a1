/*
 * gemm-peak.c - the single-precision GEMM rate OpenBLAS reaches here.
 *
 * Times cblas_sgemm on square N x N matrices (C = A B, row-major) with a
 * fixed thread count and prints the best and median GFLOP/s of REPS calls,
 * after one untimed warm-up call, with the kernel set OpenBLAS chose
 * (openblas_get_corename), as one JSON object on stdout.  It is the
 * denominator of the model FLOP utilisation that bench/speed.sh reports:
 * what the machine's BLAS does on the friendliest possible shapes.
 *
 * The program sets nothing in the environment: run it with
 * OPENBLAS_CORETYPE unset to see what OpenBLAS picks by itself, or set it
 * to compare kernel sets.
 *
 * usage: gemm-peak [N [THREADS [REPS]]]   (defaults 2048, 2, 5)
 * build: cc -O2 bench/gemm-peak.c $(pkg-config --cflags --libs openblas)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cblas.h>

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static long
arg(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "gemm-peak: %s: want %s in %ld..%ld\n", s,
		    what, lo, hi);
		exit(2);
	}
	return v;
}

int
main(int argc, char **argv)
{
	long n = argc > 1 ? arg(argv[1], 16, 16384, "N") : 2048;
	long threads = argc > 2 ? arg(argv[2], 1, 1024, "THREADS") : 2;
	long reps = argc > 3 ? arg(argv[3], 1, 1000, "REPS") : 5;
	float *a, *b, *c;
	double *gf, flop = 2.0 * n * n * n;
	size_t nn = (size_t)n * n;

	if (argc > 4) {
		fprintf(stderr, "usage: gemm-peak [N [THREADS [REPS]]]\n");
		return 2;
	}
	a = malloc(nn * sizeof(*a));
	b = malloc(nn * sizeof(*b));
	c = malloc(nn * sizeof(*c));
	gf = malloc(reps * sizeof(*gf));
	if (a == NULL || b == NULL || c == NULL || gf == NULL) {
		fprintf(stderr, "gemm-peak: out of memory\n");
		return 1;
	}
	/* Values in [-0.5, 0.5): no denormals, no overflow. */
	for (size_t i = 0; i < nn; i++) {
		a[i] = (float)((i * 7919 % 1000) / 1000.0 - 0.5);
		b[i] = (float)((i * 104729 % 997) / 997.0 - 0.5);
	}
	openblas_set_num_threads((int)threads);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
	    a, n, b, n, 0.0f, c, n);
	for (long r = 0; r < reps; r++) {
		double t0 = now();

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n,
		    1.0f, a, n, b, n, 0.0f, c, n);
		gf[r] = flop / (now() - t0) / 1e9;
	}
	qsort(gf, reps, sizeof(*gf), cmp_double);
	printf("{\"core\":\"%s\",\"n\":%ld,\"threads\":%ld,\"reps\":%ld,"
	       "\"gflops_best\":%.1f,\"gflops_median\":%.1f,"
	       "\"gflops_min\":%.1f,\"check\":%g}\n",
	    openblas_get_corename(), n, threads, reps, gf[reps - 1],
	    gf[reps / 2], gf[0], (double)c[nn / 2 + 1]);
	free(a);
	free(b);
	free(c);
	free(gf);
	return fflush(stdout) == 0 ? 0 : 1;
}
