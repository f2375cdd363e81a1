/*
 * eval/frechet.c - moments of feature sets, and the Fréchet distance between
 * the Gaussians they fit.
 *
 * The trace term is tr((S1^1/2 S2 S1^1/2)^1/2) = the sum of the square
 * roots of the eigenvalues of M = S1^1/2 S2 S1^1/2.  With S1 = V L V^T,
 * M = V (L^1/2 V^T S2 V L^1/2) V^T, so M's eigenvalues are those of
 * B = L^1/2 (V^T S2 V) L^1/2: one eigendecomposition with vectors (S1)
 * and one without (B), and two d^3 products.  The eigendecompositions
 * are Householder's reduction to tridiagonal form and implicit QR steps
 * (a few d^3 with vectors), written along rows so that every inner loop
 * runs over contiguous memory; the eigenvalues are accurate to a few
 * units of rounding of the largest, as LAPACK's dsyev is.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "eval/frechet.h"

/* ----------------------------------------------------------- moments */

int
cg_moments_init(struct cg_moments *m, int d)
{
	memset(m, 0, sizeof(*m));
	if (d < 1 || d > CG_FRECHET_MAX_DIM)
		return cg_seterr("features of width %d: not in [1, %d]", d,
		                 CG_FRECHET_MAX_DIM);
	m->d = d;
	if ((m->shift = calloc((size_t)d, sizeof(double))) == NULL ||
	    (m->sum = calloc((size_t)d, sizeof(double))) == NULL ||
	    (m->outer = calloc((size_t)d * d, sizeof(double))) == NULL) {
		cg_moments_free(m);
		return cg_seterr("out of memory");
	}
	return 0;
}

void
cg_moments_free(struct cg_moments *m)
{
	if (m == NULL)
		return;
	free(m->shift);
	free(m->sum);
	free(m->outer);
	memset(m, 0, sizeof(*m));
}

void
cg_moments_add(struct cg_moments *m, const float *x, size_t n)
{
	const int d = m->d;
	double *y = m->shift; /* the first row is the shift: set below */

	for (size_t r = 0; r < n; r++) {
		const float *row = x + r * d;
		double t[CG_FRECHET_MAX_DIM];

		if (m->n == 0)
			for (int i = 0; i < d; i++)
				y[i] = row[i];
		for (int i = 0; i < d; i++) {
			t[i] = row[i] - y[i];
			m->sum[i] += t[i];
		}
		for (int i = 0; i < d; i++) {
			double *o = m->outer + (size_t)i * d;
			if (t[i] == 0) /* ReLU features are often 0 */
				continue;
			for (int j = i; j < d; j++)
				o[j] += t[i] * t[j];
		}
		m->n++;
	}
}

int
cg_moments_gauss(const struct cg_moments *m, double *mu, double *cov)
{
	const int d = m->d;
	const double n = (double)m->n;

	if (m->n < 2)
		return cg_seterr("%llu feature vectors: a covariance needs 2",
		                 (unsigned long long)m->n);
	for (int i = 0; i < d; i++)
		mu[i] = m->shift[i] + m->sum[i] / n;
	/* cov = (sum t t^T - n tbar tbar^T) / (n - 1), t the shifted
	 * vectors: the shift cancels. */
	for (int i = 0; i < d; i++)
		for (int j = i; j < d; j++) {
			double c = (m->outer[(size_t)i * d + j] -
			            m->sum[i] * m->sum[j] / n) /
			           (n - 1);
			cov[(size_t)i * d + j] = cov[(size_t)j * d + i] = c;
		}
	return 0;
}

/* ------------------------------------------------------ eigenvalues */

/*
 * Householder reduction of the symmetric a [d, d] (destroyed) to
 * tridiagonal T = U a U^T: diagonal diag [d], off-diagonal off [d - 1]
 * (off[i] between i and i + 1), and, with u != NULL, the orthogonal U
 * [d, d] (rows).  Each reflection H = I - 2 v v^T, |v| = 1, zeroes a
 * column below its subdiagonal: a <- H a H = a - v w^T - w v^T for
 * p = a v, w = 2 (p - (v^T p) v), and u <- H u.  Rows only: every loop
 * runs along contiguous memory.  tmp [2 d] is scratch.
 */
static void
tridiagonalize(double *diag, double *off, double *u, double *a, double *tmp,
               int d)
{
	const size_t D = d;
	double *v = tmp, *w = tmp + D;

	if (u)
		for (size_t i = 0; i < D; i++)
			for (size_t j = 0; j < D; j++)
				u[i * D + j] = i == j;
	for (size_t k = 0; k + 2 < D; k++) {
		const size_t s = k + 1, n = D - s; /* the trailing block */
		double norm = 0, vn = 0, vp = 0;

		for (size_t i = 0; i < n; i++) {
			v[i] = a[(s + i) * D + k];
			norm += v[i] * v[i];
		}
		norm = sqrt(norm);
		/* alpha of the sign opposite to v[0]: no cancellation */
		double alpha = v[0] > 0 ? -norm : norm;
		v[0] -= alpha;
		for (size_t i = 0; i < n; i++)
			vn += v[i] * v[i];
		off[k] = alpha;
		if (vn == 0) /* the column is zero already */
			continue;
		vn = 1 / sqrt(vn);
		for (size_t i = 0; i < n; i++)
			v[i] *= vn;
		for (size_t i = 0; i < n; i++) {
			const double *r = a + (s + i) * D + s;
			double p = 0;
			for (size_t j = 0; j < n; j++)
				p += r[j] * v[j];
			w[i] = p;
			vp += p * v[i];
		}
		for (size_t i = 0; i < n; i++)
			w[i] = 2 * (w[i] - vp * v[i]);
		for (size_t i = 0; i < n; i++) {
			double *r = a + (s + i) * D + s;
			for (size_t j = 0; j < n; j++)
				r[j] -= v[i] * w[j] + w[i] * v[j];
		}
		if (u == NULL)
			continue;
		/* u's rows s.. <- H them: subtract 2 v (v^T u) */
		double *t = w; /* w is spent: v^T u [D] */
		memset(t, 0, D * sizeof(double));
		for (size_t i = 0; i < n; i++) {
			const double *r = u + (s + i) * D;
			for (size_t j = 0; j < D; j++)
				t[j] += v[i] * r[j];
		}
		for (size_t i = 0; i < n; i++) {
			double *r = u + (s + i) * D;
			for (size_t j = 0; j < D; j++)
				r[j] -= 2 * v[i] * t[j];
		}
	}
	for (size_t i = 0; i < D; i++)
		diag[i] = a[i * D + i];
	if (D >= 2)
		off[D - 2] = a[(D - 1) * D + D - 2];
}

/* Whether off-diagonal e between diagonals x and y is negligible. */
static int
negligible(double e, double x, double y)
{
	return fabs(e) <= DBL_EPSILON * (fabs(x) + fabs(y)) ||
	       fabs(e) < DBL_MIN;
}

int
cg_sym_eig(double *w, double *u, double *a, int d)
{
	const size_t D = d;
	double *off, *tmp;
	int iter = 0;

	if ((off = calloc(D + 1, sizeof(double))) == NULL ||
	    (tmp = calloc(2 * D, sizeof(double))) == NULL) {
		free(off);
		return cg_seterr("out of memory");
	}
	tridiagonalize(w, off, u, a, tmp, d);
	free(tmp);
	/*
	 * Implicit symmetric QR steps with Wilkinson's shift on the last
	 * unreduced block [l, m] (Golub and Van Loan, 8.3), deflating from
	 * the bottom.  A step is rotations R of rows and columns k, k + 1,
	 * T <- R T R^T, chasing the bulge z at (k + 2, k) down; u <- R u
	 * keeps a = u^T T u.
	 */
	for (size_t m = D ? D - 1 : 0; m > 0;) {
		if (negligible(off[m - 1], w[m - 1], w[m])) {
			off[m - 1] = 0;
			m--;
			continue;
		}
		size_t l = m - 1;
		while (l > 0 && !negligible(off[l - 1], w[l - 1], w[l]))
			l--;
		if (++iter > 50 * d) {
			free(off);
			return cg_seterr("eigendecomposition of a %dx%d "
			                 "matrix: no convergence",
			                 d, d);
		}
		/* the eigenvalue of the last 2x2 nearer w[m]: w[m] - e^2 /
		 * (dd + sign(dd) sqrt(dd^2 + e^2)), dd half the diagonals'
		 * difference, in terms of t = dd / e, whose square neither
		 * underflows nor overflows where e's or dd's would (a
		 * covariance of features all but equal is ~1e-30 and less) */
		double e = off[m - 1], t = (w[m - 1] - w[m]) / 2 / e;
		double mu = w[m] - e / (t + copysign(hypot(t, 1), t));
		double x = w[l] - mu, z = off[l];
		for (size_t k = l; k < m; k++) {
			double r = hypot(x, z), c = x / r, s = z / r;
			if (r == 0) { /* nothing left to chase */
				c = 1;
				s = 0;
			}
			if (k > l)
				off[k - 1] = r;
			double p = w[k], b = off[k], q = w[k + 1];
			w[k] = c * c * p + 2 * c * s * b + s * s * q;
			w[k + 1] = s * s * p - 2 * c * s * b + c * c * q;
			off[k] = c * s * (q - p) + (c * c - s * s) * b;
			if (k + 1 < m) {
				z = s * off[k + 1];
				off[k + 1] *= c;
				x = off[k];
			}
			if (u == NULL)
				continue;
			double *r0 = u + k * D, *r1 = r0 + D;
			for (size_t j = 0; j < D; j++) {
				double y0 = r0[j], y1 = r1[j];
				r0[j] = c * y0 + s * y1;
				r1[j] = c * y1 - s * y0;
			}
		}
	}
	free(off);
	return 0;
}

/* ---------------------------------------------------------- distance */

/* c = a b (transb 0) or a b^T (transb 1), all [d, d]: loops along
 * rows. */
static void
matmul(double *c, const double *a, const double *b, int d, int transb)
{
	const size_t D = d;

	memset(c, 0, D * D * sizeof(double));
	for (size_t i = 0; i < D; i++) {
		const double *ar = a + i * D;
		double *cr = c + i * D;
		for (size_t k = 0; k < D; k++) {
			const double *br = b + k * D;
			if (transb) {
				double s = 0;
				for (size_t j = 0; j < D; j++)
					s += ar[j] * br[j];
				cr[k] = s;
			} else {
				for (size_t j = 0; j < D; j++)
					cr[j] += ar[k] * br[j];
			}
		}
	}
}

int
cg_frechet(double *out, const double *mu1, const double *cov1,
           const double *mu2, const double *cov2, int d)
{
	const size_t D = d;
	double *a = NULL, *v = NULL, *t = NULL, *l = NULL, *m = NULL;
	double dmu = 0, tr = 0, root = 0;
	int rc = -1;

	if (d < 1 || d > CG_FRECHET_MAX_DIM)
		return cg_seterr("features of width %d: not in [1, %d]", d,
		                 CG_FRECHET_MAX_DIM);
	if ((a = malloc(D * D * sizeof(double))) == NULL ||
	    (v = malloc(D * D * sizeof(double))) == NULL ||
	    (t = malloc(D * D * sizeof(double))) == NULL ||
	    (m = malloc(D * D * sizeof(double))) == NULL ||
	    (l = malloc(D * sizeof(double))) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	/* A nan would keep the QR steps from ever deflating. */
	for (size_t i = 0; i < D * D; i++)
		if (!isfinite(cov1[i]) || !isfinite(cov2[i]) ||
		    (i < D && (!isfinite(mu1[i]) || !isfinite(mu2[i])))) {
			cg_seterr("features that are not finite (nan or inf)");
			goto out;
		}
	for (size_t i = 0; i < D; i++) {
		dmu += (mu1[i] - mu2[i]) * (mu1[i] - mu2[i]);
		tr += cov1[i * D + i] + cov2[i * D + i];
	}
	/* S1 = U^T L U (U's rows the eigenvectors) */
	memcpy(a, cov1, D * D * sizeof(double));
	if (cg_sym_eig(l, v, a, d) != 0)
		goto out;
	for (size_t i = 0; i < D; i++)
		l[i] = l[i] > 0 ? sqrt(l[i]) : 0;
	/* B = L^1/2 U S2 U^T L^1/2, symmetrised against rounding */
	matmul(t, v, cov2, d, 0);
	matmul(m, t, v, d, 1);
	for (size_t i = 0; i < D; i++)
		for (size_t j = 0; j < D; j++)
			a[i * D + j] =
			    l[i] * l[j] * 0.5 * (m[i * D + j] + m[j * D + i]);
	if (cg_sym_eig(l, NULL, a, d) != 0)
		goto out;
	for (size_t i = 0; i < D; i++)
		root += l[i] > 0 ? sqrt(l[i]) : 0;
	*out = dmu + tr - 2 * root;
	rc = 0;
out:
	free(a);
	free(v);
	free(t);
	free(m);
	free(l);
	return rc;
}
