/*
 * core/shamir.c - Shamir's secret sharing over GF(2^61 - 1).
 *
 * The Mersenne prime keeps every product in one 128-bit multiply and a
 * reduction of two shifts and adds; inverses are Fermat's, x^(p-2).
 * Nothing here is secret-dependent in its branches but the equality
 * checks of combine's x, which are public.
 */
#include "core/shamir.h"

#define P CG_SHAMIR_P

static uint64_t
reduce(unsigned __int128 v)
{
	/* v < 2^122: fold 61 bits at a time, then one subtraction */
	uint64_t lo = (uint64_t)v & P, hi = (uint64_t)(v >> 61);
	uint64_t r = lo + (hi & P) + (hi >> 61);

	r = (r & P) + (r >> 61);
	return r >= P ? r - P : r;
}

static uint64_t
add(uint64_t a, uint64_t b)
{
	uint64_t r = a + b; /* < 2^62: no wrap */

	return r >= P ? r - P : r;
}

static uint64_t
sub(uint64_t a, uint64_t b)
{
	return a >= b ? a - b : a + P - b;
}

uint64_t
cg_shamir_mul(uint64_t a, uint64_t b)
{
	return reduce((unsigned __int128)a * b);
}

static uint64_t
inverse(uint64_t a)
{
	uint64_t r = 1, e = P - 2;

	while (e) {
		if (e & 1)
			r = cg_shamir_mul(r, a);
		a = cg_shamir_mul(a, a);
		e >>= 1;
	}
	return r;
}

uint64_t
cg_shamir_eval(const uint64_t *coef, int t, uint64_t x)
{
	uint64_t r = 0;

	for (int k = t - 1; k >= 0; k--)
		r = add(cg_shamir_mul(r, x), coef[k]);
	return r;
}

/* Lagrange's weight of point i of x [t] at 0:
 * w_i = prod_{j != i} x_j / (x_j - x_i); the points checked distinct. */
static uint64_t
lagrange(const uint64_t *x, int t, int i)
{
	uint64_t num = 1, den = 1;

	for (int j = 0; j < t; j++) {
		if (j == i)
			continue;
		num = cg_shamir_mul(num, x[j]);
		den = cg_shamir_mul(den, sub(x[j], x[i]));
	}
	return cg_shamir_mul(num, inverse(den));
}

int
cg_shamir_weights(const uint64_t *x, int t, uint64_t *w)
{
	for (int i = 0; i < t; i++) {
		if (x[i] == 0 || x[i] >= P)
			return -1;
		for (int j = 0; j < i; j++)
			if (x[j] == x[i])
				return -1;
	}
	for (int i = 0; i < t; i++)
		w[i] = lagrange(x, t, i);
	return 0;
}

uint64_t
cg_shamir_dot(const uint64_t *w, const uint64_t *y, int t)
{
	uint64_t acc = 0;

	for (int i = 0; i < t; i++)
		acc = add(acc, cg_shamir_mul(w[i], y[i]));
	return acc;
}

int
cg_shamir_combine(const uint64_t *x, const uint64_t *y, int t, uint64_t *s)
{
	uint64_t acc = 0;

	for (int i = 0; i < t; i++) {
		if (x[i] == 0 || x[i] >= P || y[i] >= P)
			return -1;
		for (int j = 0; j < i; j++)
			if (x[j] == x[i])
				return -1;
	}
	/* s = sum_i y_i w_i */
	for (int i = 0; i < t; i++)
		acc = add(acc, cg_shamir_mul(y[i], lagrange(x, t, i)));
	*s = acc;
	return 0;
}
