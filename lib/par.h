/*
 * par.h - the loop pragmas of the kernels: threads over a loop, SIMD
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

/* Vectorize the next loop; a reduction may then be summed in lanes. */
#if defined(_OPENMP) && _OPENMP >= 201307
#define SIMD() PRAGMA(omp simd)
#define SIMD_SUM(v) PRAGMA(omp simd reduction(+ : v))
#define SIMD_SUM2(v, w) PRAGMA(omp simd reduction(+ : v, w))
#define SIMD_MAX(v) PRAGMA(omp simd reduction(max : v))
#else
#define SIMD()
#define SIMD_SUM(v)
#define SIMD_SUM2(v, w)
#define SIMD_MAX(v)
#endif

#endif
