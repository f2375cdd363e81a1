/*
 * exchange/stale.c - the staleness weighting rules and DC-ASGD's correction.
 *
 * A rule is a row: its name, how many parameters it takes and its
 * factor; a new rule is one more row, and cg-reduce's --help and
 * manifest follow from the table.  Every factor is in (0, 1] for s >= 0
 * and parameters >= 0, so a stale update never counts more than a fresh
 * one and never changes sign.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "exchange/stale.h"

/* ------------------------------------------------------------ rules */

static double
constant_factor(double s, const double *p)
{
	(void)s;
	(void)p;
	return 1;
}

/* FedAsync's polynomial rule: (1 + s)^-a. */
static double
poly_factor(double s, const double *p)
{
	return pow(1 + s, -p[0]);
}

/* FedAsync's hinge rule: full weight up to b steps, then 1/(a(s-b)+1). */
static double
hinge_factor(double s, const double *p)
{
	return s <= p[1] ? 1 : 1 / (p[0] * (s - p[1]) + 1);
}

const struct cg_stale_rule cg_stale_rules[] = {
    {.name = "constant",
     .help = "every kept update in full",
     .factor = constant_factor},
    {.name = "poly",
     .params = "A",
     .nparams = 1,
     .help = "(1+s)^-A",
     .factor = poly_factor},
    {.name = "hinge",
     .params = "A,B",
     .nparams = 2,
     .help = "1 up to s = B, then 1/(A(s-B)+1)",
     .factor = hinge_factor},
    {.name = NULL},
};

void
cg_stale_weight_default(struct cg_stale_weight *w)
{
	memset(w, 0, sizeof(*w));
	w->rule = &cg_stale_rules[0];
}

int
cg_stale_weight_parse(const char *spec, struct cg_stale_weight *w)
{
	const char *colon = strchr(spec, ':'), *s;
	const struct cg_stale_rule *r;
	char name[32], list[128] = "";
	size_t len = 0;
	int k = 0;

	snprintf(name, sizeof(name), "%.*s",
	         colon ? (int)(colon - spec) : (int)strlen(spec), spec);
	for (r = cg_stale_rules; r->name; r++) {
		if (strcmp(r->name, name) == 0)
			break;
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
		                        len ? ", " : "", r->name);
		if (len >= sizeof(list))
			len = sizeof(list) - 1;
	}
	if (r->name == NULL)
		return cg_seterr("unknown rule '%.32s' (%s)", name, list);
	if ((colon == NULL) != (r->nparams == 0)) {
		if (colon)
			return cg_seterr("%s takes no parameter", r->name);
		return cg_seterr("%s: wants its parameters (%s:%s)", r->name,
		                 r->name, r->params);
	}
	memset(w, 0, sizeof(*w));
	w->rule = r;
	for (s = colon; s != NULL && k <= r->nparams; k++) {
		char *end;
		double v;
		if (k == r->nparams)
			return cg_seterr("%s: more than %d parameter%s (%s:%s)",
			                 r->name, r->nparams,
			                 r->nparams == 1 ? "" : "s", r->name,
			                 r->params);
		errno = 0;
		v = strtod(s + 1, &end);
		if (end == s + 1 || (*end != '\0' && *end != ',') ||
		    errno != 0 || !isfinite(v) || v < 0)
			return cg_seterr("%s: '%.32s' is not a number >= 0",
			                 r->name, s + 1);
		w->p[k] = v;
		s = *end == ',' ? end : NULL;
	}
	if (k < r->nparams)
		return cg_seterr("%s: wants %d parameters (%s:%s)", r->name,
		                 r->nparams, r->name, r->params);
	return 0;
}

double
cg_stale_factor(const struct cg_stale_weight *w, uint64_t s)
{
	return w->rule->factor((double)s, w->p);
}

void
cg_stale_weight_name(const struct cg_stale_weight *w, char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s", w->rule->name);

	for (int k = 0; k < w->rule->nparams && len >= 0 && (size_t)len < n;
	     k++)
		len += snprintf(buf + len, n - (size_t)len, "%c%.15g",
		                k ? ',' : ':', w->p[k]);
}

/* ------------------------------------------------ delay compensation */

void
cg_delay_comp(float *g, const float *w, const float *wb, size_t n,
              double lambda)
{
	/* a float difference, product and sum are exact or nearly so in
	 * double: the result is the formula's rounded once */
#pragma omp parallel for schedule(static)
	for (size_t j = 0; j < n; j++) {
		double x = g[j];
		g[j] = (float)(x + lambda * x * x * ((double)w[j] - wb[j]));
	}
}
