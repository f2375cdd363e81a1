/*
 * test_frechet.c - lib/eval/frechet.c against stored vectors and by identities.
 *
 * tests/frechet-vectors/NAME.txt hold two feature sets and the Fréchet
 * distance of their Gaussians as numpy and scipy.linalg.sqrtm compute it
 * (tests/frechet-vectors/gen.py): cg's must agree within 1e-6 of it, plus
 * 1e-9 of tr(S1) + tr(S2) for the cancellation a near-zero distance
 * suffers.  Then: the eigendecomposition rebuilds its matrix, a set's
 * distance to itself is 0, the distance is symmetric, and Gaussians of
 * diagonal covariances give the closed form.
 */
#define TEST_NAME "test_frechet"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "check.h"
#include "eval/frechet.h"

/* Moments of n vectors x [n, d] into mu [d], cov [d, d]. */
static void
fit(const float *x, size_t n, int d, double *mu, double *cov)
{
	struct cg_moments m;

	if (cg_moments_init(&m, d) != 0)
		die("cg_moments_init");
	/* in two calls: the sums carry over */
	cg_moments_add(&m, x, n / 2);
	cg_moments_add(&m, x + (n / 2) * d, n - n / 2);
	if (cg_moments_gauss(&m, mu, cov) != 0)
		die("cg_moments_gauss");
	cg_moments_free(&m);
}

static double
trace(const double *a, int d)
{
	double t = 0;

	for (int i = 0; i < d; i++)
		t += a[(size_t)i * d + i];
	return t;
}

/* One stored case; the number of checks made. */
static int
test_file(const char *dir, const char *name)
{
	char path[1024];
	int d, n1, n2, ok = 0;
	double want, got, got2, self;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/tests/frechet-vectors/%s.txt", dir,
	         name);
	if ((fp = fopen(path, "r")) == NULL) {
		CHECK(0, "%s: cannot open", path);
		return 0;
	}
	if (fscanf(fp, "%d %d %d", &d, &n1, &n2) != 3 || d < 1 || d > 1024 ||
	    n1 < 2 || n2 < 2 || n1 > 100000 || n2 > 100000) {
		CHECK(0, "%s: bad header", path);
		fclose(fp);
		return 0;
	}
	float *x = xcalloc((size_t)(n1 + n2) * d, sizeof(float));
	double *mu1 = xcalloc((size_t)d, sizeof(double));
	double *mu2 = xcalloc((size_t)d, sizeof(double));
	double *s1 = xcalloc((size_t)d * d, sizeof(double));
	double *s2 = xcalloc((size_t)d * d, sizeof(double));
	for (size_t i = 0; i < (size_t)(n1 + n2) * d; i++)
		if (fscanf(fp, "%f", &x[i]) != 1) {
			CHECK(0, "%s: value %zu: not a number", path, i);
			goto out;
		}
	if (fscanf(fp, " distance %lf", &want) != 1) {
		CHECK(0, "%s: no distance line", path);
		goto out;
	}
	fit(x, (size_t)n1, d, mu1, s1);
	fit(x + (size_t)n1 * d, (size_t)n2, d, mu2, s2);
	if (cg_frechet(&got, mu1, s1, mu2, s2, d) != 0 ||
	    cg_frechet(&got2, mu2, s2, mu1, s1, d) != 0 ||
	    cg_frechet(&self, mu1, s1, mu1, s1, d) != 0)
		die("cg_frechet");
	double scale = trace(s1, d) + trace(s2, d);
	double tol = 1e-6 * fabs(want) + 1e-9 * scale;
	printf("%-4s %s: d=%d n=%d,%d cg %.12g scipy %.12g diff %.3g (%.3g "
	       "of tolerance)\n",
	       fabs(got - want) <= tol ? "ok" : "FAIL", name, d, n1, n2, got,
	       want, fabs(got - want), fabs(got - want) / tol);
	if (fabs(got - want) > tol)
		failures++;
	CHECK(fabs(got2 - want) <= tol, "%s: swapped: %.12g", name, got2);
	CHECK(fabs(self) <= 1e-9 * scale, "%s: a set against itself: %.3g",
	      name, self);
	ok = 1;
out:
	fclose(fp);
	free(x);
	free(mu1);
	free(mu2);
	free(s1);
	free(s2);
	return ok;
}

/* U^T diag(w) U rebuilds a random symmetric matrix; U is orthogonal. */
static void
test_eig(void)
{
	const int d = 40;
	double *a = xcalloc(d * d, sizeof(double));
	double *b = xcalloc(d * d, sizeof(double));
	double *v = xcalloc(d * d, sizeof(double));
	double w[40], err = 0, orth = 0;
	struct cg_rng r;

	cg_rng_seed(&r, 7);
	for (int i = 0; i < d; i++)
		for (int j = 0; j <= i; j++)
			a[i * d + j] = a[j * d + i] = cg_rng_normal(&r);
	memcpy(b, a, sizeof(double) * d * d);
	if (cg_sym_eig(w, v, b, d) != 0)
		die("cg_sym_eig");
	for (int i = 0; i < d; i++)
		for (int j = 0; j < d; j++) {
			double s = 0, o = 0;
			for (int k = 0; k < d; k++) {
				s += v[k * d + i] * w[k] * v[k * d + j];
				o += v[i * d + k] * v[j * d + k];
			}
			err = fmax(err, fabs(s - a[i * d + j]));
			orth = fmax(orth, fabs(o - (i == j)));
		}
	CHECK(err < 1e-12 && orth < 1e-12,
	      "eig: |U^T W U - A| %.3g, |U U^T - I| %.3g", err, orth);
	expect(err < 1e-12 && orth < 1e-12,
	       "U^T diag(w) U is A and U is orthogonal (40x40)");
	free(a);
	free(b);
	free(v);
}

/* The same for matrices of rank 1, 2 and 3, of entries near 1 and near
 * 1e-13 (the covariance of a judge's features of images all the same
 * but for rounding, drawn without noise, has one eigenvalue ~1e-12 and
 * the rest ~1e-30): their zero eigenvalues are where the QR steps drive
 * off-diagonals down to where their squares underflow. */
static void
test_eig_lowrank(void)
{
	const int d = 32;
	double a[1024], b[1024], v[1024], w[32], x[3][32];
	struct cg_rng r;

	cg_rng_seed(&r, 11);
	for (int c = 0; c < 6; c++) {
		const int rank = 1 + c % 3;
		const double size = c < 3 ? 1 : 3e-7; /* of the vectors */
		double err = 0, scale = 0;

		for (int k = 0; k < rank; k++)
			for (int i = 0; i < d; i++)
				/* ReLU features: some 0 in every vector */
				x[k][i] = i % 5 == 0 ? 0
				                     : size * cg_rng_normal(&r);
		for (int i = 0; i < d; i++)
			for (int j = 0; j < d; j++) {
				double s = 0;
				for (int k = 0; k < rank; k++)
					s += x[k][i] * x[k][j];
				a[i * d + j] = s;
				scale = fmax(scale, fabs(s));
			}
		memcpy(b, a, sizeof(a));
		CHECK(cg_sym_eig(w, v, b, d) == 0, "rank %d, scale %g: %s", rank,
		      scale, cg_errmsg());
		for (int i = 0; i < d; i++)
			for (int j = 0; j < d; j++) {
				double s = 0;
				for (int q = 0; q < d; q++)
					s += v[q * d + i] * w[q] * v[q * d + j];
				err = fmax(err, fabs(s - a[i * d + j]) / scale);
			}
		CHECK(err < 1e-12,
		      "eig of rank %d, scale %g: |U^T W U - A| / max|A| %.3g",
		      rank, scale, err);
	}
	expect(failures == 0, "eig of 32x32 matrices of rank 1, 2 and 3, "
	                      "entries near 1 and near 1e-13");
}

/* A block of equal diagonals whose off-diagonal's square underflows,
 * [[-e, e], [e, -e]] for e = 1e-172 (where the QR steps left the
 * covariance of a judge's features of images all the same but for
 * rounding): eigenvalues 0 and -2e, not a nan from the shift. */
static void
test_eig_tiny(void)
{
	static const double scales[] = {1e-172, 1e-160, 1e-300, 1};

	for (size_t c = 0; c < sizeof(scales) / sizeof(scales[0]); c++) {
		const double e = scales[c];
		double a[4] = {-e, e, e, -e}, v[4], w[2], lo, hi;

		CHECK(cg_sym_eig(w, v, a, 2) == 0, "e = %g: %s", e, cg_errmsg());
		lo = fmin(w[0], w[1]);
		hi = fmax(w[0], w[1]);
		CHECK(fabs(lo + 2 * e) <= 1e-15 * e && fabs(hi) <= 1e-15 * e,
		      "e = %g: eigenvalues %.17g %.17g, want %.17g and 0", e, lo,
		      hi, -2 * e);
	}
	expect(failures == 0, "eig of [[-e, e], [e, -e]], e down to 1e-300");
}

/* One set of identical vectors: its covariance is 0 but for rounding,
 * and its distance to another is |mu1 - mu2|^2 + tr(S2) (as a judge's
 * images all the same, drawn without noise, give). */
static void
test_point(void)
{
	const int d = 32, n = 20;
	float *x = xcalloc((size_t)n * d, sizeof(float));
	float *y = xcalloc((size_t)n * d, sizeof(float));
	double mu1[32], mu2[32], s1[1024], s2[1024], got, want = 0;
	struct cg_rng r;

	cg_rng_seed(&r, 5);
	for (int j = 0; j < d; j++)
		x[j] = (float)cg_rng_normal(&r) * 3.7f;
	for (int i = 1; i < n; i++)
		memcpy(x + (size_t)i * d, x, d * sizeof(float));
	for (int i = 0; i < n * d; i++)
		y[i] = (float)cg_rng_normal(&r);
	fit(x, n, d, mu1, s1);
	fit(y, n, d, mu2, s2);
	for (int j = 0; j < d; j++)
		want += (mu1[j] - mu2[j]) * (mu1[j] - mu2[j]);
	want += trace(s2, d);
	CHECK(cg_frechet(&got, mu1, s1, mu2, s2, d) == 0, "%s", cg_errmsg());
	CHECK(fabs(got - want) < 1e-9 * want, "point: %.17g, want %.17g", got,
	      want);
	expect(fabs(got - want) < 1e-9 * want,
	       "a set of identical vectors: |mu1 - mu2|^2 + tr(S2)");
	free(x);
	free(y);
}

/* Diagonal covariances: d^2 = |mu1 - mu2|^2 + sum (sqrt a - sqrt b)^2,
 * singular ones included. */
static void
test_diagonal(void)
{
	const int d = 5;
	double mu1[5] = {0, 1, 2, 3, 4}, mu2[5] = {1, 1, 2, 3, 2};
	double a[5] = {1, 4, 0, 9, 2}, b[5] = {4, 4, 1, 0, 3};
	double s1[25] = {0}, s2[25] = {0}, want = 5, got;

	for (int i = 0; i < d; i++) {
		s1[i * d + i] = a[i];
		s2[i * d + i] = b[i];
		want += (sqrt(a[i]) - sqrt(b[i])) * (sqrt(a[i]) - sqrt(b[i]));
	}
	CHECK(cg_frechet(&got, mu1, s1, mu2, s2, d) == 0, "%s", cg_errmsg());
	expect(fabs(got - want) < 1e-12, "diagonal covariances: closed form");
}

static void
test_errors(void)
{
	struct cg_moments m;
	double mu, cov, out;
	float x = 1;

	expect(cg_moments_init(&m, 0) == -1 && cg_moments_init(&m, 5000) == -1,
	       "a width of 0 or 5000 is refused");
	if (cg_moments_init(&m, 1) != 0)
		die("cg_moments_init");
	cg_moments_add(&m, &x, 1);
	expect(cg_moments_gauss(&m, &mu, &cov) == -1 &&
	           strstr(cg_errmsg(), "needs 2"),
	       "one vector has no covariance");
	cg_moments_free(&m);
	cg_moments_free(&m);
	expect(cg_frechet(&out, &mu, &cov, &mu, &cov, 0) == -1,
	       "cg_frechet refuses a width of 0");
	mu = 0;
	cov = NAN;
	expect(cg_frechet(&out, &mu, &cov, &mu, &cov, 1) == -1 &&
	           strstr(cg_errmsg(), "not finite"),
	       "cg_frechet refuses a nan");
}

int
main(void)
{
	const char *dir = getenv("CG_SRCDIR");
	static const char *const cases[] = {"gauss", "relu", "near", "lowrank"};
	int checks = 0;

	if (dir == NULL)
		dir = ".";
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		checks += test_file(dir, cases[i]);
	test_eig();
	test_eig_lowrank();
	test_eig_tiny();
	test_point();
	test_diagonal();
	test_errors();
	printf("%s: %d stored cases, %d failures\n", failures ? "FAIL" : "PASS",
	       checks, failures);
	return failures || checks != 4 ? 1 : 0;
}
