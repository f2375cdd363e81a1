/*
 * test_rdp.c - the privacy accountant against Opacus' figures.
 *
 * tests/rdp-vectors/opacus.txt holds Opacus' epsilon for a grid of
 * (q, sigma, steps, delta) and its get_noise_multiplier's sigma for a few
 * budgets (tests/rdp-vectors/gen.py remakes it; Opacus is not needed
 * here).  Every epsilon of cg must be within 1% of Opacus'; the sigma
 * cg finds for a budget must meet it and be within 1% of Opacus' (whose
 * search stops up to 0.01 of epsilon short).  A row made 2% off must
 * fail the same comparison, so that the check is seen to bite.
 */
#include <math.h>

#define TEST_NAME "test_rdp"
#include "check.h"
#include "core/rdp.h"

#define RTOL 0.01

/* |got - want| / |want| */
static double
rel(double got, double want)
{
	return fabs(got - want) / fabs(want);
}

/* The rows of path checked; the number of rows, -1 if unreadable. */
static int
test_vectors(const char *path, double *worst_eps, double *worst_sigma)
{
	FILE *fp = fopen(path, "r");
	char line[512];
	int rows = 0;

	if (fp == NULL)
		return -1;
	while (fgets(line, sizeof(line), fp)) {
		double q, a, steps, delta, want;
		char kind[8];
		if (line[0] == '#')
			continue;
		if (sscanf(line, "%7s %lf %lf %lf %lf %lf", kind, &q, &a,
		           &steps, &delta, &want) != 6) {
			CHECK(0, "%s: bad line: %s", path, line);
			continue;
		}
		rows++;
		if (strcmp(kind, "eps") == 0) {
			double got = cg_rdp_epsilon_of(q, a, steps, delta);
			double r = rel(got, want);
			if (r > *worst_eps)
				*worst_eps = r;
			CHECK(r <= RTOL,
			      "q %g sigma %g steps %g delta %g: epsilon %.10g, "
			      "Opacus %.10g",
			      q, a, steps, delta, got, want);
		} else {
			double got = cg_rdp_sigma_for(a, q, steps, delta);
			double r = rel(got, want);
			if (r > *worst_sigma)
				*worst_sigma = r;
			CHECK(got > 0 && got <= want * (1 + 1e-9) && r <= RTOL,
			      "q %g epsilon %g steps %g: sigma %.10g, Opacus "
			      "%.10g",
			      q, a, steps, got, want);
			CHECK(cg_rdp_epsilon_of(q, got, steps, delta) <= a,
			      "q %g epsilon %g steps %g: sigma %.10g spends "
			      "more",
			      q, a, steps, got);
		}
	}
	fclose(fp);
	return rows;
}

/* The comparison above must fail on a wrong figure. */
static void
test_bites(void)
{
	double e = cg_rdp_epsilon_of(0.01, 1.0, 1000, 1e-5);

	expect(rel(e, e * 1.02) > RTOL, "a figure 2% off fails the check");
	expect(rel(e * 1.02, e) > RTOL, "and one 2% under");
}

static void
test_rules(void)
{
	double rdp[CG_RDP_NORDERS] = {0}, order;

	expect(cg_rdp_order(0) == 1.1 && cg_rdp_order(98) == 10.9 &&
	           cg_rdp_order(99) == 12 &&
	           cg_rdp_order(CG_RDP_NORDERS - 1) == 63,
	       "Opacus' orders");
	/* q = 1: the Gaussian mechanism itself, alpha / 2 sigma^2 */
	expect(cg_rdp_sgm(1, 2, 5) == 5 / 8.0, "rdp of q 1");
	expect(cg_rdp_sgm(0, 2, 5) == 0, "rdp of q 0");
	/* composition: two calls of 5 steps make one of 10 */
	cg_rdp_add(rdp, 0.1, 1.3, 5);
	cg_rdp_add(rdp, 0.1, 1.3, 5);
	expect(rel(cg_rdp_epsilon(rdp, 1e-5, &order),
	           cg_rdp_epsilon_of(0.1, 1.3, 10, 1e-5)) < 1e-12 &&
	           order > 1,
	       "composition adds");
	double prev = 0;
	int grows = 1;
	for (int t = 1; t <= 4096; t *= 2) {
		double e = cg_rdp_epsilon_of(0.004, 1.0, t, 1e-5);
		grows &= e > prev;
		prev = e;
	}
	expect(grows, "epsilon grows with the releases");
	expect(cg_rdp_sigma_for(1e-9, 1, 1e4, 1e-5) == -1,
	       "no sigma up to the limit: -1");
}

int
main(void)
{
	const char *dir = getenv("CG_SRCDIR");
	char path[1024];
	double we = 0, ws = 0;
	int rows;

	snprintf(path, sizeof(path), "%s/tests/rdp-vectors/opacus.txt",
	         dir ? dir : ".");
	rows = test_vectors(path, &we, &ws);
	expect(rows >= 200, "Opacus' table read whole");
	printf("%d rows; largest relative difference: epsilon %.3g, sigma "
	       "%.3g (tolerance %g)\n",
	       rows, we, ws, RTOL);
	test_bites();
	test_rules();
	printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
