/*
 * lowp.h - what the bf16 and f16 kernel tests (test_nn, test_transformer)
 * share: the precisions they run, a value rounded as the products round
 * their operands, and the relative distance of a result from a double
 * reference.
 */
#ifndef CG_TEST_LOWP_H
#define CG_TEST_LOWP_H

#include <math.h>
#include <stddef.h>

#include "cg.h"
#include "nn/gemm.h"

/* The precisions the tests run: bf16 as the CPU runs it (oneDNN where
 * it can), and deterministic bf16 and f16 (emulated, the same bytes on
 * every CPU). */
struct lowp_mode {
	int prec, det;
	const char *name;
};
#define LOWP_MODES 3
static const struct lowp_mode lowp_modes[LOWP_MODES] = {
    {CG_PREC_BF16, 0, "bf16"},
    {CG_PREC_BF16, 1, "deterministic bf16"},
    {CG_PREC_F16, 1, "deterministic f16"}};

/* x rounded to bf16 (prec CG_PREC_BF16) or f16, to nearest even. */
static inline double
lowp_round(int prec, double x)
{
	float f = (float)x;

	return prec == CG_PREC_F16 ? cg_f16_to_f32(cg_f32_to_f16(f))
	                           : cg_bf16_to_f32(cg_f32_to_bf16(f));
}

/* |a - b| / |b| over n, in L2. */
static inline double
lowp_rel2(const float *a, const double *b, size_t n)
{
	double e = 0, r = 0;

	for (size_t i = 0; i < n; i++) {
		e += (a[i] - b[i]) * (a[i] - b[i]);
		r += b[i] * b[i];
	}
	return sqrt(e / (r > 0 ? r : 1e-300));
}

#endif
