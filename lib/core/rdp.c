/*
 * core/rdp.c - the privacy accountant: Renyi differential privacy of the
 * subsampled Gaussian mechanism, and its (epsilon, delta).
 *
 * log A_alpha (Mironov et al. 2019, section 3.3) is a sum of positive
 * terms at an integer order, a two-sided series of terms of both signs at
 * a fractional one; both are summed in the log domain, as Opacus does,
 * so that the figures agree with its to the last few digits rather than
 * to the tolerance of another method.
 */
#include <math.h>
#include <stddef.h>

#include "core/rdp.h"

double
cg_rdp_order(int i)
{
	/* 99 orders 1 + x/10, x = 1..99, then 12..63 */
	return i < 99 ? 1 + (i + 1) / 10.0 : (double)(i - 99 + 12);
}

/* log(e^x + e^y) */
static double
log_add(double x, double y)
{
	double a = x < y ? x : y, b = x < y ? y : x;

	if (a == -INFINITY)
		return b;
	return log1p(exp(a - b)) + b;
}

/* log(e^x - e^y), x >= y; nan when x < y (the series went negative) */
static double
log_sub(double x, double y)
{
	if (x < y)
		return NAN;
	if (y == -INFINITY)
		return x;
	if (x == y)
		return -INFINITY;
	if (x - y > 700) /* e^(x-y) - 1 overflows: it is e^(x-y) */
		return x;
	return log(expm1(x - y)) + y;
}

/* log(erfc(x)), accurate far into the tail where erfc underflows */
static double
log_erfc(double x)
{
	if (x < 25)
		return log(erfc(x));
	/* erfc(x) = e^(-x^2) / (x sqrt(pi)) (1 - 1/2x^2 + 3/4x^4 - 15/8x^6) */
	double r = 1 / (x * x);
	return -x * x - log(x) - 0.57236494292470008 /* log(pi) / 2 */ +
	       log1p(r * (-0.5 + r * (0.75 - r * 1.875)));
}

/* log A_alpha at an integer order a */
static double
log_a_int(double q, double sigma, int a)
{
	double la = -INFINITY;
	const double lq = log(q), l1q = log1p(-q), s2 = 2 * sigma * sigma;

	for (int i = 0; i <= a; i++) {
		double lc =
		    lgamma(a + 1.0) - lgamma(i + 1.0) - lgamma(a - i + 1.0);
		double s =
		    lc + i * lq + (a - i) * l1q + (double)i * (i - 1) / s2;
		la = log_add(la, s);
	}
	return la;
}

/* Terms of the fractional series summed at most. */
#define FRAC_MAX_TERMS 100000

/* log A_alpha at a fractional order a: two series, A0 below z0 and A1
 * above, until both terms fall under e^-30 */
static double
log_a_frac(double q, double sigma, double a)
{
	double la0 = -INFINITY, la1 = -INFINITY, coef = 1;
	const double lq = log(q), l1q = log1p(-q), s2 = 2 * sigma * sigma;
	const double z0 = sigma * sigma * log(1 / q - 1) + 0.5;
	const double rs = sqrt(2) * sigma;

	for (int i = 0; i < FRAC_MAX_TERMS; i++) {
		/* coef = binom(a, i), by the running product */
		if (i > 0)
			coef *= (a - (i - 1)) / i;
		double lc = log(fabs(coef)), j = a - i;
		double lt0 = lc + i * lq + j * l1q;
		double lt1 = lc + j * lq + i * l1q;
		double le0 = log(0.5) + log_erfc((i - z0) / rs);
		double le1 = log(0.5) + log_erfc((z0 - j) / rs);
		double ls0 = lt0 + (double)i * (i - 1) / s2 + le0;
		double ls1 = lt1 + (j * j - j) / s2 + le1;
		if (coef > 0) {
			la0 = log_add(la0, ls0);
			la1 = log_add(la1, ls1);
		} else {
			la0 = log_sub(la0, ls0);
			la1 = log_sub(la1, ls1);
		}
		if (isnan(la0) || isnan(la1))
			return NAN;
		if ((ls0 > ls1 ? ls0 : ls1) < -30)
			return log_add(la0, la1);
	}
	return NAN;
}

double
cg_rdp_sgm(double q, double sigma, double alpha)
{
	if (q == 0)
		return 0;
	if (sigma == 0)
		return INFINITY;
	if (q == 1)
		return alpha / (2 * sigma * sigma);
	if (isinf(alpha))
		return INFINITY;
	if (alpha == floor(alpha))
		return log_a_int(q, sigma, (int)alpha) / (alpha - 1);
	return log_a_frac(q, sigma, alpha) / (alpha - 1);
}

void
cg_rdp_add(double *rdp, double q, double sigma, double steps)
{
	for (int i = 0; i < CG_RDP_NORDERS; i++)
		rdp[i] += steps * cg_rdp_sgm(q, sigma, cg_rdp_order(i));
}

double
cg_rdp_epsilon(const double *rdp, double delta, double *order)
{
	double best = NAN, best_a = NAN;

	for (int i = 0; i < CG_RDP_NORDERS; i++) {
		double a = cg_rdp_order(i);
		double e =
		    rdp[i] - (log(delta) + log(a)) / (a - 1) + log((a - 1) / a);
		if (!isnan(e) && (isnan(best) || e < best)) {
			best = e;
			best_a = a;
		}
	}
	if (order)
		*order = best_a;
	return isnan(best) ? INFINITY : best;
}

double
cg_rdp_epsilon_of(double q, double sigma, double steps, double delta)
{
	double rdp[CG_RDP_NORDERS] = {0};

	cg_rdp_add(rdp, q, sigma, steps);
	return cg_rdp_epsilon(rdp, delta, NULL);
}

double
cg_rdp_sigma_for(double epsilon, double q, double steps, double delta)
{
	double lo = 0, hi = 1;

	/* epsilon falls as sigma grows: bracket, then halve */
	while (cg_rdp_epsilon_of(q, hi, steps, delta) > epsilon) {
		lo = hi;
		if ((hi *= 2) > CG_RDP_MAX_SIGMA)
			return -1;
	}
	while (hi - lo > 1e-6 * hi) {
		double mid = 0.5 * (lo + hi);
		if (cg_rdp_epsilon_of(q, mid, steps, delta) > epsilon)
			lo = mid;
		else
			hi = mid;
	}
	return hi;
}
