/*
 * exchange/stale.h - stale updates: how much an update computed from an older
 * model counts, and how a stale gradient is corrected.
 *
 * An update's staleness s is the step of the model it is applied to
 * minus the step of the model it was computed from (update.h's
 * cg_update_staleness).  A weighting rule maps s to a factor in (0, 1]
 * that multiplies the update's weight in a reduction (reduce.h); the
 * rules are those of FedAsync (Xie, Koyejo and Gupta, 2019), one row
 * each of cg_stale_rules:
 *
 *     constant       1
 *     poly:A         (1 + s)^-A
 *     hinge:A,B      1 where s <= B, else 1 / (A (s - B) + 1)
 *
 * A stale gradient may instead be corrected towards the model it is
 * applied to, by DC-ASGD's first-order term (Zheng et al., "Asynchronous
 * Stochastic Gradient Descent with Delay Compensation", ICML 2017):
 *
 *     g + lambda g * g * (w_now - w_base)      (element-wise)
 *
 * which needs the model the gradient was computed from (cg_delay_comp).
 */
#ifndef CG_STALE_H
#define CG_STALE_H

#include <stddef.h>
#include <stdint.h>

/* A weighting rule: one row of cg_stale_rules. */
struct cg_stale_rule {
	const char *name;
	const char *params; /* how --help writes its parameters ("A,B"),
	                     * NULL where it takes none */
	int nparams;        /* 0, 1 or 2 */
	const char *help;   /* a few words for --help */
	double (*factor)(double s, const double *p);
};

/* Every rule, in the order --help lists them; ends with a row whose name
 * is NULL.  The first, constant, is the default. */
extern const struct cg_stale_rule cg_stale_rules[];

/* A rule with its parameters, as --staleness-weight names it. */
struct cg_stale_weight {
	const struct cg_stale_rule *rule;
	double p[2];
};

/* The default: constant (every update that is kept counts in full). */
void cg_stale_weight_default(struct cg_stale_weight *w);
/*
 * spec ("constant", "poly:0.5", "hinge:10,4") into *w.  0, or -1 with a
 * message: an unknown name (the message lists them), parameters missing,
 * too many, or one that is not a finite number >= 0.
 */
int cg_stale_weight_parse(const char *spec, struct cg_stale_weight *w);
/* The factor for an update s steps stale (s >= 0), in (0, 1]. */
double cg_stale_factor(const struct cg_stale_weight *w, uint64_t s);
/* w written back as a spec into buf [n] (what a manifest records). */
void cg_stale_weight_name(const struct cg_stale_weight *w, char *buf, size_t n);

/*
 * DC-ASGD's correction of the gradient g [n] in place, w [n] the model
 * it is applied to, wb [n] the model it was computed from:
 * g += lambda g g (w - wb), each element in double and rounded once.
 */
void cg_delay_comp(float *g, const float *w, const float *wb, size_t n,
                   double lambda);

#endif
