/*
 * engines.c - cg_sgemm on every engine built into libcg, in f32 and in
 * bf16, on square products and on the products the models make: the
 * figures behind gemm.c's choice of engine.
 *
 *   bench/engines.sh [BUILD-DIR]   (builds this against BUILD-DIR's libcg)
 *   engines [reps]
 *
 * One JSON line per engine, precision and shape: GFLOP/s (2 M N K per
 * product) of the median of reps timed calls after one untimed one, and
 * the engine's bf16 implementation ("emulated" where the CPU or the build
 * has no bf16 products).  OpenMP's threads: OMP_NUM_THREADS, else every
 * core.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nn/gemm.h"

struct shape {
	const char *name;
	int ta, tb, M, N, K;
};

/* The models' products at bench/speed.sh's sizes. */
static const struct shape shapes[] = {
    {"square 256", 0, 0, 256, 256, 256},
    {"square 512", 0, 0, 512, 512, 512},
    {"square 1024", 0, 0, 1024, 1024, 1024},
    {"square 2048", 0, 0, 2048, 2048, 2048},
    /* cvae: batch 128, 784 + 10 inputs, 512 wide */
    {"cvae enc.0 forward", 0, 1, 128, 512, 794},
    {"cvae enc.0 dW", 1, 0, 512, 794, 128},
    /* cgpt: 16 x 128 positions, width 256 */
    {"cgpt qkv forward", 0, 1, 2048, 768, 256},
    {"cgpt mlp.fc forward", 0, 1, 2048, 1024, 256},
    {"cgpt mlp.proj dX", 0, 0, 2048, 256, 1024},
    {"cgpt mlp.fc dW", 1, 0, 1024, 256, 2048},
    {"cgpt attention block", 0, 1, 32, 128, 64},
};

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
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
	static const enum cg_engine engines[] = {
	    CG_ENGINE_BLAS, CG_ENGINE_BUILTIN, CG_ENGINE_DNNL};
	int reps = argc > 1 ? atoi(argv[1]) : 9;
	size_t big = (size_t)2048 * 2048;
	float *A = malloc(big * 4), *B = malloc(big * 4), *C = malloc(big * 4);
	double *t = malloc((size_t)(reps > 0 ? reps : 1) * sizeof(*t));

	if (A == NULL || B == NULL || C == NULL || t == NULL || reps < 1) {
		fprintf(stderr, "engines: out of memory or reps < 1\n");
		return 1;
	}
	srand(1);
	for (size_t i = 0; i < big; i++) {
		A[i] = (float)rand() / RAND_MAX - 0.5f;
		B[i] = (float)rand() / RAND_MAX - 0.5f;
	}
	/* Half a second of products first: the threads started, the clock
	 * up; the first row measured a fortieth of its rate without it. */
	for (double t0 = now(); now() - t0 < 0.5;)
		cg_sgemm(0, 0, 512, 512, 512, 1, A, 512, B, 512, 0, C, 512);
	for (size_t e = 0; e < sizeof(engines) / sizeof(engines[0]); e++) {
		if (cg_set_engine(engines[e]) != 0)
			continue;
		for (int p = 0; p < 2; p++) {
			cg_set_precision(p ? CG_PREC_BF16 : CG_PREC_F32);
			for (size_t s = 0; s < sizeof(shapes) / sizeof(*shapes);
			     s++) {
				const struct shape *h = &shapes[s];
				int lda = h->ta ? h->M : h->K;
				int ldb = h->tb ? h->K : h->N;

				cg_sgemm(h->ta, h->tb, h->M, h->N, h->K, 1, A,
				         lda, B, ldb, 0, C, h->N);
				for (int r = 0; r < reps; r++) {
					double t0 = now();
					cg_sgemm(h->ta, h->tb, h->M, h->N, h->K,
					         1, A, lda, B, ldb, 0, C, h->N);
					t[r] = now() - t0;
				}
				qsort(t, (size_t)reps, sizeof(*t), cmp);
				printf("{\"engine\": \"%s\", \"precision\": "
				       "\"%s\", \"impl\": \"%s\", \"shape\": "
				       "\"%s\", \"M\": %d, \"N\": %d, \"K\": %d, "
				       "\"gflops\": %.1f}\n",
				       cg_engine_name(engines[e]),
				       p ? "bf16" : "f32",
				       p ? cg_bf16_impl() : cg_sgemm_backend(),
				       h->name, h->M, h->N, h->K,
				       2.0 * h->M * h->N * h->K / t[reps / 2] *
				           1e-9);
				fflush(stdout);
			}
		}
	}
	free(A);
	free(B);
	free(C);
	free(t);
	return 0;
}
