/*
 * bf16-peak.c - the arithmetic peak of this CPU's f32 FMA against its
 * bf16 dot-product instruction, the ceiling of any --precision bf16, and
 * where built with -mavx512fp16, against its f16 FMA, the ceiling of any
 * --precision f16 product.
 *
 *   cc -O2 -fopenmp -mavx512f -mavx512bf16 bench/bf16-peak.c -o bf16-peak
 *   cc -O2 -fopenmp -mavx512f -mavx512bf16 -mavx512fp16 \
 *      bench/bf16-peak.c -o bf16-peak
 *   ./bf16-peak [threads]
 *
 * Each thread runs 24 independent accumulator chains (more than either
 * instruction's latency times its throughput), so the loop measures
 * throughput: vfmadd231ps zmm does 16 multiply-adds, vdpbf16ps zmm 32
 * (pairs of bf16 products summed into 16 f32 lanes).  Prints GFLOP/s of
 * each (a multiply-add is 2 FLOPs) and their ratio; the best of 5.
 *
 * With -mavx512fp16 (and a CPU that has it), one more: vfmadd231ph
 * zmm, 32 multiply-adds of halves summed in half precision, the only
 * f16 arithmetic faster than f32's.  A product of halves summed in f32
 * (as --precision f16 sums) widens its operands once, as it packs them,
 * and then runs at the f32 FMA's rate.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 24
#define ITERS 20000000L

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Seconds for ITERS rounds of CHAINS FMAs on every thread. */
static double
run_fma(float *sink)
{
	double t0 = now();
#pragma omp parallel
	{
		__m512 acc[CHAINS];
		__m512 a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(0.9999f);
		for (int j = 0; j < CHAINS; j++)
			acc[j] = _mm512_setzero_ps();
		for (long i = 0; i < ITERS; i++) {
#pragma GCC unroll 24
			for (int j = 0; j < CHAINS; j++)
				acc[j] = _mm512_fmadd_ps(a, b, acc[j]);
			__asm__ volatile("" : "+v"(a));
		}
		float s = 0;
		for (int j = 0; j < CHAINS; j++)
			s += _mm512_reduce_add_ps(acc[j]);
#pragma omp atomic
		*sink += s;
	}
	return now() - t0;
}

static double
run_bf16(float *sink)
{
	double t0 = now();
#pragma omp parallel
	{
		__m512 acc[CHAINS];
		__m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);
		__m512bh b = (__m512bh)_mm512_set1_epi32(0x3f7f3f7f);
		for (int j = 0; j < CHAINS; j++)
			acc[j] = _mm512_setzero_ps();
		for (long i = 0; i < ITERS; i++) {
#pragma GCC unroll 24
			for (int j = 0; j < CHAINS; j++)
				acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
			__asm__ volatile("" : "+v"(a));
		}
		float s = 0;
		for (int j = 0; j < CHAINS; j++)
			s += _mm512_reduce_add_ps(acc[j]);
#pragma omp atomic
		*sink += s;
	}
	return now() - t0;
}

#ifdef __AVX512FP16__
static double
run_f16(float *sink)
{
	double t0 = now();
#pragma omp parallel
	{
		__m512h acc[CHAINS];
		__m512h a = _mm512_set1_ph((_Float16)1.0001f);
		__m512h b = _mm512_set1_ph((_Float16)0.9999f);
		for (int j = 0; j < CHAINS; j++)
			acc[j] = _mm512_setzero_ph();
		for (long i = 0; i < ITERS; i++) {
#pragma GCC unroll 24
			for (int j = 0; j < CHAINS; j++)
				acc[j] = _mm512_fmadd_ph(a, b, acc[j]);
			__asm__ volatile("" : "+v"(a));
		}
		float s = 0;
		for (int j = 0; j < CHAINS; j++)
			s += (float)_mm512_reduce_add_ph(acc[j]);
#pragma omp atomic
		*sink += s;
	}
	return now() - t0;
}

#endif

int
main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 1;
	double best_f = 1e30, best_b = 1e30;
	float sink = 0;

	if (threads < 1)
		threads = 1;
	omp_set_num_threads(threads);
	for (int r = 0; r < 5; r++) {
		double f = run_fma(&sink), b = run_bf16(&sink);
		best_f = f < best_f ? f : best_f;
		best_b = b < best_b ? b : best_b;
	}
	double n = (double)ITERS * CHAINS * threads;
	double gf = n * 16 * 2 / best_f / 1e9, gb = n * 32 * 2 / best_b / 1e9;
	printf("{\"threads\": %d, \"f32_fma_gflops\": %.1f, "
	       "\"bf16_dot_gflops\": %.1f, \"bf16_over_f32\": %.3f, ",
	       threads, gf, gb, gb / gf);
#ifdef __AVX512FP16__
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512fp16")) {
		double best_h = 1e30;
		for (int r = 0; r < 5; r++) {
			double h = run_f16(&sink);
			best_h = h < best_h ? h : best_h;
		}
		double gh = n * 32 * 2 / best_h / 1e9;
		printf("\"f16_fma_gflops\": %.1f, \"f16_over_f32\": %.3f, ",
		       gh, gh / gf);
	}
#endif
	printf("\"sink\": %g}\n", sink);
	return 0;
}
