/*
 * core/par.h - the loop pragmas of the kernels: threads over a loop, SIMD
 * lanes within one.
 *
 * nn.c and transformer.c split their loops the same way and under the
 * same size, so they take the macros from here.  Each expands to nothing
 * without OpenMP (the SIMD ones also before OpenMP 4.0), and the kernels
 * are then plain serial loops.
 */
#ifndef CG_PAR_H
#define CG_PAR_H

/* Element counts under which OpenMP costs more than it saves. */
#define PAR_MIN 32768
/* Multiply-adds of a matrix product or convolution under which threads
 * cost more than they save (nn/gemm.c, nn/dnnl.c). */
#define PAR_MIN_WORK (64 * 64 * 64)

/* Split the next for loop over threads when n is large enough; _DYN
 * hands out one iteration at a time, for iterations of uneven cost. */
#ifdef _OPENMP
#define PRAGMA(x) _Pragma(#x)
#define PAR_FOR(n) PRAGMA(omp parallel for schedule(static) if ((n) >= PAR_MIN))
#define PAR_FOR_DYN(n)                                                         \
	PRAGMA(omp parallel for schedule(dynamic, 1) if ((n) >= PAR_MIN))
/* Threads over the loop and SIMD lanes within each thread's part. */
#define PAR_FOR_SIMD(n)                                                        \
	PRAGMA(omp parallel for simd schedule(static)                          \
	       if (parallel : (n) >= PAR_MIN))
#else
#define PAR_FOR(n)
#define PAR_FOR_DYN(n)
#define PAR_FOR_SIMD(n)
#endif

/* Vectorize the next loop (no reduction: see LANES for sums). */
#if defined(_OPENMP) && _OPENMP >= 201307
#define SIMD() PRAGMA(omp simd)
#define SIMD_MAX(v) PRAGMA(omp simd reduction(max : v))
#else
#define SIMD()
#define SIMD_MAX(v)
#endif

/*
 * Sums in one order whatever the vector width.  An "omp simd" reduction
 * sums in as many lanes as the CPU's vectors hold (4 with SSE2, 8 with
 * AVX2, 16 with AVX-512), so its bits depend on the machine.  The kernels
 * keep LANES partial sums instead, element i of the whole multiples of
 * LANES into lane i % LANES, fold them in the fixed order of cg_fold_f
 * and add the rest one by one: the compiler vectorizes the lane loop at
 * any width with each lane's additions unchanged, and the bits are those
 * of every x86-64 (tests/090-golden.bats, 092-deterministic.bats).  The
 * maximum needs no such care: it is the same in any order.
 */
#define LANES 8

static inline float
cg_fold_f(const float s[LANES])
{
	return ((s[0] + s[4]) + (s[2] + s[6])) +
	       ((s[1] + s[5]) + (s[3] + s[7]));
}

static inline double
cg_fold_d(const double s[LANES])
{
	return ((s[0] + s[4]) + (s[2] + s[6])) +
	       ((s[1] + s[5]) + (s[3] + s[7]));
}

#endif
