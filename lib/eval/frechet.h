/*
 * eval/frechet.h - the Fréchet distance between Gaussians fitted to two sets
 * of feature vectors: the measure FID takes in Inception's features,
 * which cg-eval --judge takes in a cclf model's.
 *
 * For N(mu1, S1) and N(mu2, S2),
 *
 *   d^2 = |mu1 - mu2|^2 + tr(S1 + S2 - 2 (S1^1/2 S2 S1^1/2)^1/2),
 *
 * all in double.  The matrix square roots come from symmetric
 * eigendecompositions (Householder and QR, self-contained: no LAPACK),
 * so the cost is about 15 d^3 per distance.
 */
#ifndef CG_FRECHET_H
#define CG_FRECHET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest feature width: the d x d matrices must stay reasonable. */
#define CG_FRECHET_MAX_DIM 4096

/*
 * The running sums of a set of d-wide vectors fed in any number of
 * calls: from them, its mean and covariance.  The sums are of each
 * vector less the set's first (shift), which keeps the covariance from
 * cancelling away when the mean is large beside the spread.
 */
struct cg_moments {
	int d;
	uint64_t n;
	double *shift; /* [d]: the first vector */
	double *sum;   /* [d] */
	double *outer; /* [d, d], the upper triangle used */
};

/* Ready m for vectors of width d in [1, CG_FRECHET_MAX_DIM].  Returns 0,
 * or -1 with a message (bad d, out of memory; m is then freeable). */
int cg_moments_init(struct cg_moments *m, int d);
void cg_moments_free(struct cg_moments *m);

/* Add the n vectors x [n, d] to m. */
void cg_moments_add(struct cg_moments *m, const float *x, size_t n);

/*
 * The mean mu [d] and the covariance cov [d, d] (normalised by n - 1, as
 * numpy's cov) of the vectors added to m.  Returns 0, or -1 with a
 * message when fewer than 2 were added.
 */
int cg_moments_gauss(const struct cg_moments *m, double *mu, double *cov);

/*
 * *out = the Fréchet distance d^2 above (not its square root, as FID
 * reports it) between N(mu1, cov1) and N(mu2, cov2), mu [d] and cov
 * [d, d] symmetric positive semi-definite (eigenvalues that rounding
 * leaves below zero count as zero).  Returns 0, or -1 with a message
 * (bad d, a nan or inf, out of memory, an eigendecomposition that did
 * not converge).
 */
int cg_frechet(double *out, const double *mu1, const double *cov1,
               const double *mu2, const double *cov2, int d);

/*
 * The eigenvalues w [d] of the symmetric a [d, d] (destroyed), in no
 * particular order, and with u [d, d] != NULL its unit eigenvectors as
 * u's rows (a = u^T diag(w) u).  Returns 0, or -1 with a message (out of
 * memory, no convergence).
 */
int cg_sym_eig(double *w, double *u, double *a, int d);

#ifdef __cplusplus
}
#endif
#endif
