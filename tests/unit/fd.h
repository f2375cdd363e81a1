/*
 * fd.h - the finite-difference checker of the unit tests: a gradient
 * against central differences of a loss, for a kernel's arrays (fdcheck)
 * and for a model's views (fd_views), with the steps and tolerances
 * every test uses.
 *
 * A gradient g passes against a central difference fd when
 * |g - fd| <= tol * (floor + |fd|): the relative error, with an absolute
 * floor for the noise of differencing a float forward pass.  A loss of
 * about 1 to 10 carries rounding of about 1e-7 relative, which a step of
 * 2h = 2e-3 makes ~1e-4 in fd; the floors leave a margin over that.
 * fd_views adds a directional check per view, a difference along a
 * random +-1 direction, with far more signal than noise: it catches a
 * view's gradient a few percent off, which the floor lets through one
 * element at a time.
 *
 * Include after check.h (xcalloc, failures).
 */
#ifndef CG_TEST_FD_H
#define CG_TEST_FD_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "nn/nn.h"

/* A step, the largest relative error accepted, and its floor. */
struct fd_tol {
	double h, tol, floor;
	/*
	 * 1: Richardson-extrapolated differences, (4 D(h) - D(2h)) / 3,
	 * which cancel the h^2 term, so that the step can be large enough
	 * for float rounding to stay small.
	 */
	int extrapolate;
	/*
	 * The step of fd_views' directional check, 0: h; below 0: no
	 * directional check.  Every element of a view moves at once, a
	 * step of length h sqrt(n): a model that bends much wants a
	 * shorter one.
	 */
	double dir_h;
};

/* ------------------------------------------------------ the tolerances */

/* Kernels (test_nn): losses of O(1) built from few operations. */
static const struct fd_tol FD_NN = {1e-3, 1e-2, 1e-3, 0, 0};
/*
 * The transformer's kernels (test_transformer): a layernorm or attention
 * in float rounds to about 1e-7 of each output it touches; over a step of
 * 2e-2 that is ~1e-5 in fd, and truncation (h^2 f''' / 6) about 2e-5.
 */
static const struct fd_tol FD_TRANSFORMER = {1e-2, 1e-2, 1e-3, 0, 0};
/*
 * The test-only toy arch (test_arch, test_fdarch): softplus terms in
 * double.  The difference is off by h^2/6 |f'''| <= 2e-6 for h = 1e-2;
 * the double sums add ~1e-16 |f| / h, the gradient's float rounding
 * 6e-8 relative: 1e-3 against a floor of 1e-2 leaves a margin of five.
 */
static const struct fd_tol FD_TOY = {1e-2, 1e-3, 1e-2, 0, 0};
/* The image models (cvae, cclf, cddpm, cgan): the floor's 5e-4 covers
 * the ~1e-4 of rounding in fd. */
static const struct fd_tol FD_IMAGE = {1e-3, 1e-2, 5e-2, 0, 0};
/*
 * The same with a directional step of 2e-4, for the convolutional cgan:
 * its generator's group norms over a few values each (a 2x2 map a group)
 * bend so much that a step of 1e-3 on each of gen.emb's 32 values at
 * once left 5.5% of truncation error in the difference (measured), while
 * every element alone passed at 0.6%.
 */
static const struct fd_tol FD_IMAGE_BENT = {1e-3, 1e-2, 5e-2, 0, 2e-4};
/*
 * The text model (cgpt), extrapolated with steps h and 2h on a loss of
 * O(1): rounding contributes a few 1e-7 to each quotient, truncation (h^4
 * times a fifth derivative) less.  No directional check: at a step of
 * 3e-2 on each of 256 weights at once the extrapolation left 1.4%, and at
 * 1e-3 the rounding of a loss of 6 (~5e-7) is 1% of a view's directional
 * derivative of ~0.02 (measured); test_cgpt differentiates along one
 * direction over all views instead.
 */
static const struct fd_tol FD_TEXT = {3e-2, 1e-2, 1e-3, 1, -1};
/*
 * The same with a shorter step, for losses that bend more: cgpt
 * distilled, where the teacher term alone left 7% of truncation error on
 * the embeddings at 3e-2 (measured), at most 0.6% on any view at 1e-2,
 * and 3e-3 already 1% of rounding; and cgpt through its arch (test_fdarch),
 * where the embeddings of ~0.1 feed a layernorm.
 */
static const struct fd_tol FD_TEXT_FINE = {1e-2, 1e-2, 1e-3, 1, -1};

/* ------------------------------------------------------------- kernels */

/* A zeroed float array of n (never NULL). */
static inline float *
falloc(size_t n)
{
	return xcalloc(n, sizeof(float));
}

/* sum of a[i] r[i] in double: a random weighting that makes a loss. */
static inline double
dot(const float *a, const float *r, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * r[i];
	return s;
}

typedef double (*lossfn)(void *ctx);

/*
 * The central difference of f at p[i] by t (extrapolated if t says so);
 * p[i] is left as found.  The steps are the ones actually taken, after
 * rounding to float.
 */
static inline double
fd_at(float *p, size_t i, const struct fd_tol *t, lossfn f, void *ctx)
{
	float orig = p[i];
	float hi = orig + (float)t->h, lo = orig - (float)t->h;

	p[i] = hi;
	double lp = f(ctx);
	p[i] = lo;
	double lm = f(ctx);
	p[i] = orig;
	double d1 = (lp - lm) / ((double)hi - (double)lo);
	if (!t->extrapolate)
		return d1;
	hi = orig + 2 * (float)t->h;
	lo = orig - 2 * (float)t->h;
	p[i] = hi;
	lp = f(ctx);
	p[i] = lo;
	lm = f(ctx);
	p[i] = orig;
	return (4 * d1 - (lp - lm) / ((double)hi - (double)lo)) / 3;
}

/*
 * Compare g [n] with central differences of f with respect to p [n].
 * Returns the largest relative error |g - fd| / (t->floor + |fd|); prints
 * it with the largest absolute difference, and counts a failure above
 * t->tol, unless quiet.
 */
static inline double
fdcheck(const struct fd_tol *t, const char *name, float *p, const float *g,
        size_t n, lossfn f, void *ctx, int quiet)
{
	double maxrel = 0, maxabs = 0;

	for (size_t i = 0; i < n; i++) {
		double fd = fd_at(p, i, t, f, ctx);
		double ad = fabs(g[i] - fd);
		double rel = ad / (t->floor + fabs(fd));

		if (!(rel <= maxrel))
			maxrel = rel;
		if (ad > maxabs)
			maxabs = ad;
	}
	if (!quiet) {
		int ok = maxrel <= t->tol;
		printf("%-4s %-28s n=%-5zu max rel err %.3g  max abs diff "
		       "%.3g\n",
		       ok ? "ok" : "FAIL", name, n, maxrel, maxabs);
		if (!ok)
			failures++;
	}
	return maxrel;
}

/* -------------------------------------------------------------- models */

/*
 * The loss whose gradient view v holds, at the parameters as they are
 * now (most models: the one loss; a GAN's: L_G for the generator's
 * views, L_D for the discriminator's).
 */
typedef double (*fd_view_loss)(void *ctx, int v);

struct fd_view_ctx {
	fd_view_loss f;
	void *ctx;
	int v;
};

static inline double
fd_view_call(void *p)
{
	struct fd_view_ctx *c = p;

	return c->f(c->ctx, c->v);
}

/*
 * Along direction s [n] (entries +-1) from p = save [n]: the difference
 * quotient of the loss at save +- h s over the step's length h, and in
 * *dg the gradient g [n] dotted with the step actually taken over the same
 * length.  p is left as save.
 */
static inline double
fd_dir(float *p, const float *save, const float *s, size_t n, double h,
       const float *g, struct fd_view_ctx *c, double *dg)
{
	double sum = 0;

	for (size_t j = 0; j < n; j++)
		p[j] = save[j] + s[j] * (float)h;
	double lp = fd_view_call(c);
	for (size_t j = 0; j < n; j++)
		p[j] = save[j] - s[j] * (float)h;
	double lm = fd_view_call(c);
	for (size_t j = 0; j < n; j++) {
		double step = (double)(save[j] + s[j] * (float)h) -
		              (double)(save[j] - s[j] * (float)h);
		sum += g[j] * step;
	}
	memcpy(p, save, n * sizeof(float));
	*dg = sum / (2 * h);
	return (lp - lm) / (2 * h);
}

/* Draw from r what fd_views draws over views v[0..nv) (its directions):
 * a check of some views leaves r where a check of all would. */
static inline void
fd_skip(const struct cg_view *v, int nv, struct cg_rng *r)
{
	for (int i = 0; i < nv; i++)
		for (size_t j = 0; j < v[i].n; j++)
			(void)cg_rng_uniform(r);
}

/*
 * Check the gradient g of a model, each of views v[0..nv) of params
 * against f: element by element, and along one random +-1 direction per
 * view drawn from r (the sum of g s against the difference of the loss
 * at params +- h s).  Returns the largest relative error over every view
 * and both checks, after printing each view's, tagged by tag(ctx, view)
 * when tag is not NULL, unless quiet.  Counts no failure: the caller
 * compares the result with t->tol.  Quiet, it returns at the first error
 * above t->tol (a check that must fail needs no more than one).
 */
static inline double
fd_views(const struct fd_tol *t, const struct cg_view *v, int nv, float *params,
         const float *g, fd_view_loss f, void *ctx,
         const char *(*tag)(void *ctx, int v), struct cg_rng *r, int quiet)
{
	double all = 0;
	size_t most = 0;

	for (int i = 0; i < nv; i++)
		if (v[i].n > most)
			most = v[i].n;
	float *save = xcalloc(most, sizeof(float));
	float *sgn = xcalloc(most, sizeof(float));

	for (int i = 0; i < nv; i++) {
		struct fd_view_ctx c = {f, ctx, i};
		float *p = params + v[i].off;
		double maxrel = 0, maxabs = 0;

		for (size_t j = 0; j < v[i].n; j++) {
			double fd = fd_at(p, j, t, fd_view_call, &c);
			double ad = fabs(g[v[i].off + j] - fd);
			double rel = ad / (t->floor + fabs(fd));

			if (!(rel <= maxrel))
				maxrel = rel;
			maxabs = fmax(maxabs, ad);
			if (quiet && !(maxrel <= t->tol))
				break;
		}
		if (quiet && !(maxrel <= t->tol)) {
			all = maxrel;
			break;
		}
		for (size_t j = 0; j < v[i].n; j++)
			sgn[j] = cg_rng_uniform(r) < 0.5f ? -1.0f : 1.0f;
		memcpy(save, p, v[i].n * sizeof(float));
		double drel = 0;
		if (t->dir_h >= 0) {
			double h = t->dir_h > 0 ? t->dir_h : t->h, dg, dg2;
			double dl = fd_dir(p, save, sgn, v[i].n, h,
			                   g + v[i].off, &c, &dg);
			if (t->extrapolate) {
				double dl2 = fd_dir(p, save, sgn, v[i].n, 2 * h,
				                    g + v[i].off, &c, &dg2);
				dl = (4 * dl - dl2) / 3;
				dg = (4 * dg - dg2) / 3;
			}
			drel = fabs(dg - dl) / (t->floor + fabs(dl));
		}

		if (!quiet)
			printf("%-4s %-18s %-8s n=%-5zu max rel err %.3g (max "
			       "abs diff %.3g), directional %.3g\n",
			       maxrel <= t->tol && drel <= t->tol ? "ok"
			                                          : "FAIL",
			       v[i].name, tag ? tag(ctx, i) : "", v[i].n,
			       maxrel, maxabs, drel);
		if (!(maxrel <= all))
			all = maxrel;
		if (!(drel <= all))
			all = drel;
		if (quiet && !(all <= t->tol))
			break;
	}
	free(save);
	free(sgn);
	return all;
}

/*
 * fd_views, quiet, over views v[from..nv) only: for a check that must fail,
 * from the view that holds the spoilt gradient.  The directions are those
 * a check of all views draws for them, and r is left where that check
 * leaves it, so that what the test draws next is the same either way.
 */
static inline double
fd_reject(const struct fd_tol *t, const struct cg_view *v, int nv, int from,
          float *params, const float *g, fd_view_loss f, void *ctx,
          struct cg_rng *r)
{
	struct cg_rng s = *r;

	fd_skip(v, from, &s);
	double e =
	    fd_views(t, v + from, nv - from, params, g, f, ctx, NULL, &s, 1);
	fd_skip(v, nv, r);
	return e;
}

#endif
