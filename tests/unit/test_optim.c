/*
 * test_optim.c - the optimizer steps against PyTorch's formulas, and the
 * one-pass step over a model's views against one step per view.
 *
 * cg_optim_step_views splits the views laid end to end among threads, so
 * a view may be cut anywhere; it must give the same bits as stepping each
 * view alone on one thread, at every thread count, and clear the gradient
 * only when asked.  The formulas themselves are checked against a double
 * precision transcription of torch.optim's (SGD, momentum with its first
 * step, Adam with L2 decay, AdamW with decoupled decay; bias corrections,
 * eps after the square root) over three steps.  A moment left to decay
 * (the gradient 0 after a step) goes from normal to zero, never through
 * the subnormals that cost Intel CPUs a microcode assist an operation.
 * Exit 0 pass, 1 fail.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cg.h"
#include "nn/nn.h"
#include "nn/optim.h"

#define TEST_NAME "test_optim"
#include "check.h"

/* Views of odd sizes, in an order other than their offsets', with and
 * without decay; big enough together to be shared among threads. */
static const size_t sizes[] = {1, 17, 70001, 3, 100003, 64, 33};
#define NV (sizeof(sizes) / sizeof(sizes[0]))

static struct cg_rng rng;

static float
uniform(float lo, float hi)
{
	return lo + (hi - lo) * cg_rng_uniform(&rng);
}

/* torch.optim's update of one element, in double. */
static void
reference(const struct cg_optim *o, uint64_t t, double *p, double g,
	  double *m, double *v, int decay)
{
	double lr = cg_optim_lr(o, t), wd = decay ? o->wd : 0;

	switch (o->kind) {
	case CG_OPT_SGD:
		*p -= lr * (g + wd * *p);
		break;
	case CG_OPT_MOMENTUM:
		g += wd * *p;
		*m = t == 1 ? g : o->momentum * *m + g;
		*p -= lr * *m;
		break;
	case CG_OPT_ADAM:
	case CG_OPT_ADAMW: {
		double bc1 = 1 - pow(o->beta1, (double)t);
		double bc2 = 1 - pow(o->beta2, (double)t);
		if (o->kind == CG_OPT_ADAMW)
			*p *= 1 - lr * wd;
		else
			g += wd * *p;
		*m = o->beta1 * *m + (1 - o->beta1) * g;
		*v = o->beta2 * *v + (1 - o->beta2) * g * g;
		*p -= lr / bc1 * *m / (sqrt(*v) / sqrt(bc2) + o->eps);
		break;
	}
	}
}

static void
test_kind(enum cg_opt_kind kind)
{
	struct cg_view views[NV];
	struct cg_optim o;
	size_t P = 0, off[NV];
	char what[160];

	cg_optim_defaults(&o, kind);
	o.wd = 0.05f;
	o.lr = 0.01f;
	/* Offsets in reverse: the views' order is not the buffer's. */
	for (size_t i = 0; i < NV; i++)
		P += sizes[i];
	for (size_t i = 0, at = P; i < NV; i++) {
		at -= sizes[i];
		off[i] = at;
		memset(&views[i], 0, sizeof(views[i]));
		views[i].off = at;
		views[i].n = sizes[i];
		views[i].decay = (int)(i % 2);
	}
	float *p0 = xcalloc(P, sizeof(float)), *g = xcalloc(P, sizeof(float));
	float *gs[3];
	for (int s = 0; s < 3; s++) {
		gs[s] = xcalloc(P, sizeof(float));
		for (size_t i = 0; i < P; i++)
			gs[s][i] = uniform(-1, 1);
	}
	for (size_t i = 0; i < P; i++)
		p0[i] = uniform(-2, 2);

	/* One view at a time on one thread: the bits to match. */
	float *pa = xcalloc(P, sizeof(float)), *ma = xcalloc(P, sizeof(float));
	float *va = xcalloc(P, sizeof(float));
	memcpy(pa, p0, P * sizeof(float));
#ifdef _OPENMP
	omp_set_num_threads(1);
#endif
	for (uint64_t t = 1; t <= 3; t++)
		for (size_t i = 0; i < NV; i++)
			cg_optim_step(&o, t, pa + off[i], gs[t - 1] + off[i],
				      ma + off[i], va + off[i], sizes[i],
				      views[i].decay);

	/* The formulas, in double. */
	double worst = 0;
	for (size_t i = 0; i < NV; i++)
		for (size_t j = off[i]; j < off[i] + sizes[i]; j++) {
			double p = p0[j], m = 0, v = 0;
			for (uint64_t t = 1; t <= 3; t++)
				reference(&o, t, &p, gs[t - 1][j], &m, &v,
					  views[i].decay);
			/* In units of float rounding of the weight or of
			 * a step's size (about lr), whichever is larger. */
			double scale = fmax(fmax(fabs(p), fabs((double)p0[j])),
					    (double)o.lr);
			double e = fabs(pa[j] - p) / (FLT_EPSILON * scale);
			worst = e > worst ? e : worst;
		}
	snprintf(what, sizeof(what),
		 "%s: three steps match torch.optim's formulas (worst "
		 "error %.2f float epsilons of the weight or lr)",
		 cg_optim_name(kind), worst);
	expect(worst < 8, what);

	/* All views in one pass, at 1, 2 and 3 threads. */
	float *pb = xcalloc(P, sizeof(float)), *mb = xcalloc(P, sizeof(float));
	float *vb = xcalloc(P, sizeof(float));
	for (int nt = 1; nt <= 3; nt++) {
#ifdef _OPENMP
		omp_set_num_threads(nt);
#endif
		memcpy(pb, p0, P * sizeof(float));
		memset(mb, 0, P * sizeof(float));
		memset(vb, 0, P * sizeof(float));
		int cleared = 1, kept = 1;
		for (uint64_t t = 1; t <= 3; t++) {
			int zero = t != 2;
			memcpy(g, gs[t - 1], P * sizeof(float));
			cg_optim_step_views(&o, t, pb, g,
					    cg_optim_needs_m(kind) ? mb : NULL,
					    cg_optim_needs_v(kind) ? vb : NULL,
					    views, (int)NV, zero);
			for (size_t i = 0; i < P; i++) {
				if (zero && g[i] != 0)
					cleared = 0;
				if (!zero && g[i] != gs[t - 1][i])
					kept = 0;
			}
		}
		snprintf(what, sizeof(what),
			 "%s: one pass over the views, %d thread(s), equals "
			 "a step per view bit for bit",
			 cg_optim_name(kind), nt);
		expect(memcmp(pa, pb, P * sizeof(float)) == 0, what);
		snprintf(what, sizeof(what),
			 "%s, %d thread(s): the gradient is cleared when asked "
			 "and left alone otherwise",
			 cg_optim_name(kind), nt);
		expect(cleared && kept, what);
	}
	for (int s = 0; s < 3; s++)
		free(gs[s]);
	free(p0);
	free(g);
	free(pa);
	free(ma);
	free(va);
	free(pb);
	free(mb);
	free(vb);
}

/*
 * A gradient of each size from 1 down to 1e-30 once, then 0 for 100 000
 * steps (v, at 0.999 a step, needs some 70 000 to leave the normals):
 * after every step each moment is a normal float or 0.  The weights are
 * the formulas' in double wherever a weight can tell (a moment that can
 * move a weight by more than its rounding is normal).
 */
static void
test_no_subnormals(enum cg_opt_kind kind)
{
	enum { N = 16 };
	struct cg_optim o;
	float p[N], g[N], m[N] = {0}, v[N] = {0};
	double pr[N], mr[N] = {0}, vr[N] = {0};
	long sub = 0, first = -1;
	char what[160];

	cg_optim_defaults(&o, kind);
	for (int i = 0; i < N; i++)
		pr[i] = p[i] = 0.5f;
	for (uint64_t t = 1; t <= 100000; t++) {
		for (int i = 0; i < N; i++)
			g[i] = t == 1 ? (float)pow(10, -2.0 * i) : 0.0f;
		/* no decay: 100 000 roundings of AdamW's shrink would
		 * hide what the moments do */
		cg_optim_step(&o, t, p, g, m, v, N, 0);
		for (int i = 0; i < N; i++) {
			reference(&o, t, &pr[i], g[i], &mr[i], &vr[i], 0);
			int bad = (m[i] != 0 && fabsf(m[i]) < FLT_MIN) ||
			          (v[i] != 0 && fabsf(v[i]) < FLT_MIN);
			if (bad && first < 0)
				first = (long)t;
			sub += bad;
		}
	}
	snprintf(what, sizeof(what),
		 "%s: 100 000 steps of a decaying moment leave no subnormal "
		 "(%ld found, the first at step %ld)",
		 cg_optim_name(kind), sub, first);
	expect(sub == 0, what);
	double worst = 0;
	for (int i = 0; i < N; i++) {
		double e = fabs(p[i] - pr[i]) / (FLT_EPSILON * fabs(pr[i]));
		worst = e > worst ? e : worst;
	}
	snprintf(what, sizeof(what),
		 "%s: the weights after them are the formulas' (worst %.1f "
		 "float epsilons)",
		 cg_optim_name(kind), worst);
	expect(worst < 8, what);
}

int
main(void)
{
	cg_rng_seed(&rng, 99);
	test_kind(CG_OPT_SGD);
	test_kind(CG_OPT_MOMENTUM);
	test_kind(CG_OPT_ADAM);
	test_kind(CG_OPT_ADAMW);
	test_no_subnormals(CG_OPT_MOMENTUM);
	test_no_subnormals(CG_OPT_ADAM);
	test_no_subnormals(CG_OPT_ADAMW);
	if (failures) {
		printf(TEST_NAME ": %d check(s) FAILED\n", failures);
		return 1;
	}
	printf(TEST_NAME ": all checks passed\n");
	return 0;
}
