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
 *
 * The privacy record's parallel releases (model/privacy.h): runs of
 * workers on disjoint shards add the pointwise maximum of their curves,
 * one run where one bounds the others, and taking the release off an
 * update's record gives back the one it was computed from.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TEST_NAME "test_rdp"
#include "check.h"
#include "core/rdp.h"
#include "model/privacy.h"

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

static void
test_parallel(void)
{
	struct cg_dp *dp = calloc(1, sizeof(*dp)), *b = calloc(1, sizeof(*b));
	const struct cg_dp_run same = {.sigma = 1.0, .q = 0.1, .steps = 3};
	struct cg_dp_run four[4] = {same, same, same, same};
	/* q 1 spends more at low orders, ten steps at 0.1 at high ones */
	struct cg_dp_run cross[2] = {{.sigma = 1.0, .q = 1, .steps = 1},
	                             {.sigma = 1.0, .q = 0.1, .steps = 10}};
	struct cg_dp_run dom[2] = {{.sigma = 1.0, .q = 0.2, .steps = 3}, same};
	double rdp[CG_RDP_NORDERS] = {0};

	if (dp == NULL || b == NULL)
		abort();
	dp->delta = 1e-5;
	cg_dp_append(dp, 1.0, 0.1, 3);
	expect(cg_dp_append_max(dp, four, 4) == 0 && dp->nhist == 1 &&
	           dp->hist[0].steps == 6 &&
	           rel(dp->epsilon, cg_rdp_epsilon_of(0.1, 1.0, 6, 1e-5)) <
	               1e-12,
	       "four equal runs in parallel: one, merged with the last");
	memset(dp, 0, sizeof(*dp));
	dp->delta = 1e-5;
	expect(cg_dp_append_max(dp, dom, 2) == 0 && dp->nhist == 1 &&
	           dp->hist[0].q == 0.2,
	       "a run bounded at every order is left out");
	memset(dp, 0, sizeof(*dp));
	dp->delta = 1e-5;
	cg_dp_append(dp, 2.0, 0.5, 4);
	expect(cg_dp_append_max(dp, cross, 2) == 0 && dp->nhist == 3 &&
	           dp->hist[1].alt == 1 && dp->hist[2].alt == 0 &&
	           dp->hist[1].q == 0.1,
	       "curves that cross: a max item of both, sorted");
	cg_rdp_add(rdp, 0.5, 2.0, 4);
	for (int i = 0; i < CG_RDP_NORDERS; i++) {
		double a = cg_rdp_order(i), x = cg_rdp_sgm(1, 1.0, a),
		       y = 10 * cg_rdp_sgm(0.1, 1.0, a);
		rdp[i] += x > y ? x : y;
	}
	double e = cg_rdp_epsilon(rdp, 1e-5, NULL);
	printf("crossing runs: epsilon %.6g; alone %.6g and %.6g\n",
	       dp->epsilon, cg_rdp_epsilon_of(1, 1.0, 1, 1e-5),
	       cg_rdp_epsilon_of(0.1, 1.0, 10, 1e-5));
	expect(rel(dp->epsilon, e) < 1e-12 &&
	           dp->epsilon > cg_rdp_epsilon_of(1, 1.0, 1, 1e-5) &&
	           dp->epsilon > cg_rdp_epsilon_of(0.1, 1.0, 10, 1e-5),
	       "the max item's epsilon: the pointwise maximum's");
	/* a later run merges with no run of the item */
	cg_dp_append(dp, 1.0, 0.1, 5);
	expect(dp->nhist == 4 && dp->hist[3].steps == 5,
	       "a run after a max item stands apart");
	/* the release taken off gives the record before it */
	dp->nhist = 3;
	dp->clip = 1;
	dp->nrelease = 2;
	dp->release[0] = cross[1];
	dp->release[1] = cross[0];
	expect(
	    cg_dp_base(dp, b) == 0 && b->nhist == 1 && b->hist[0].steps == 4 &&
	        rel(b->epsilon, cg_rdp_epsilon_of(0.5, 2.0, 4, 1e-5)) < 1e-12,
	    "the base of a parallel release");
	dp->release[1].steps = 2;
	expect(cg_dp_base(dp, b) == -1,
	       "a release that is not the history's end is refused");
	free(dp);
	free(b);
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
	test_parallel();
	printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
