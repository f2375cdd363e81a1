/*
 * core/rdp.h - the privacy accountant: Renyi differential privacy of the
 * subsampled Gaussian mechanism, and its (epsilon, delta).
 *
 * A release that adds Gaussian noise of standard deviation sigma times
 * the sensitivity, to a sum over a random subset drawn with rate q (each
 * member in with probability q; q = 1: everyone), is (alpha, rdp)-RDP at
 * every order alpha; T releases compose by adding their rdp.  The
 * orders, the mechanism's rdp and the conversion to (epsilon, delta) are
 * those of Opacus' RDPAccountant (its default orders, compute_rdp and
 * get_privacy_spent; Mironov, Talwar and Zhang 2019, "Renyi differential
 * privacy of the sampled Gaussian mechanism"; Balle et al. 2020, theorem
 * 21, for the conversion), so that a budget said by cg is the budget
 * Opacus says for the same run: tests/unit/test_rdp holds it to a table
 * of Opacus' figures (tests/rdp-vectors).
 *
 * Pure arithmetic in double: no allocation, no state, libm only.
 */
#ifndef CG_RDP_H
#define CG_RDP_H

/* The orders: 1.1, 1.2 ... 10.9, then 12, 13 ... 63. */
#define CG_RDP_NORDERS 151

/* Order i (0 <= i < CG_RDP_NORDERS). */
double cg_rdp_order(int i);

/* The rdp at order alpha (> 1) of one release of the Gaussian mechanism
 * of noise multiplier sigma (> 0) subsampled at rate q (0 < q <= 1): may
 * be inf; nan where the series does not settle. */
double cg_rdp_sgm(double q, double sigma, double alpha);

/* rdp [CG_RDP_NORDERS] += steps releases of (q, sigma), at every order. */
void cg_rdp_add(double *rdp, double q, double sigma, double steps);

/* The epsilon of rdp [CG_RDP_NORDERS] at delta (0 < delta < 1): the
 * least over the orders (nan ones ignored), its order into *order
 * (unless NULL); inf where every order is nan or inf. */
double cg_rdp_epsilon(const double *rdp, double delta, double *order);

/* The epsilon of steps releases of (q, sigma) at delta. */
double cg_rdp_epsilon_of(double q, double sigma, double steps, double delta);

/* The largest noise multiplier cg accepts (Opacus' too). */
#define CG_RDP_MAX_SIGMA 1e6

/*
 * The least noise multiplier (to a relative 1e-6, never under it) whose
 * steps releases at rate q spend at most epsilon at delta; -1 where
 * none up to CG_RDP_MAX_SIGMA does.
 */
double cg_rdp_sigma_for(double epsilon, double q, double steps, double delta);

#endif
