/*
 * core/shamir.h - Shamir's secret sharing over the prime field of
 * p = 2^61 - 1.
 *
 * A secret s (an element of the field) and t - 1 coefficients drawn
 * uniformly from it make the polynomial f(x) = s + c_1 x + ... +
 * c_{t-1} x^{t-1}; share k is (x_k, f(x_k)) for a nonzero x_k.  Any t
 * shares of distinct x give s back by Lagrange's interpolation at 0;
 * t - 1 shares say nothing about it.  The caller draws the
 * coefficients (this file holds no randomness) and splits a longer
 * secret into elements (a 32-byte key: eight 32-bit words, each shared
 * alone).  Pure integer arithmetic: no allocation, no state.
 */
#ifndef CG_SHAMIR_H
#define CG_SHAMIR_H

#include <stdint.h>

#define CG_SHAMIR_P ((UINT64_C(1) << 61) - 1)

/* a b mod p (a, b < p). */
uint64_t cg_shamir_mul(uint64_t a, uint64_t b);

/* f(x) mod p for coef [t] (coef[0] the secret; each < p) and x < p. */
uint64_t cg_shamir_eval(const uint64_t *coef, int t, uint64_t x);

/*
 * The secret of the t shares (x [t], y [t]) into *s: 0, or -1 when an
 * x is 0, not below p or given twice, or a y is not below p (nothing to
 * interpolate).  t >= 1.
 */
int cg_shamir_combine(const uint64_t *x, const uint64_t *y, int t, uint64_t *s);

/*
 * The Lagrange weights at 0 of the points x [t] into w [t]: the secret
 * of shares (x_k, y_k) is sum_k w_k y_k mod p, so that many secrets
 * shared at the same points cost one set of weights.  0, or -1 as
 * cg_shamir_combine for the x.
 */
int cg_shamir_weights(const uint64_t *x, int t, uint64_t *w);
/* sum_k w [k] y [k] mod p (y each < p). */
uint64_t cg_shamir_dot(const uint64_t *w, const uint64_t *y, int t);

#endif
