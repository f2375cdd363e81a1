/*
 * nn/optim.c - optimizer steps over flat parameter buffers.
 *
 * The formulas follow PyTorch's torch.optim so that a run can be checked
 * step for step against it: Adam's bias corrections are applied to the
 * step size, eps is added after the square root, AdamW decays weights by
 * lr*wd before the Adam update, and SGD's L2 weight decay is added to the
 * gradient.  Element loops are left to the compiler to vectorise.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cg.h"
#include "nn/nn.h"
#include "nn/optim.h"

static const char *names[] = {"sgd", "momentum", "adam", "adamw"};

void
cg_optim_defaults(struct cg_optim *o, enum cg_opt_kind kind)
{
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	o->lr = kind >= CG_OPT_ADAM ? 1e-3f : 1e-2f;
	o->beta1 = 0.9f;
	o->beta2 = 0.999f;
	o->eps = 1e-8f;
	o->momentum = 0.9f;
	o->wd = kind == CG_OPT_ADAMW ? 0.01f : 0.0f;
	o->sched = CG_SCHED_CONSTANT;
}

int
cg_optim_parse(const char *s, enum cg_opt_kind *out)
{
	int i = cg_name_index(names, CG_OPT_SGD, CG_OPT_ADAMW, s);

	if (i >= 0) {
		*out = (enum cg_opt_kind)i;
		return 0;
	}
	return cg_seterr("unknown optimizer '%s' (sgd, momentum, adam, adamw)",
			 s);
}

const char *
cg_optim_name(enum cg_opt_kind k)
{
	return (unsigned)k < 4 ? names[k] : "?";
}

int
cg_optim_needs_m(enum cg_opt_kind k)
{
	return k != CG_OPT_SGD;
}

int
cg_optim_needs_v(enum cg_opt_kind k)
{
	return k == CG_OPT_ADAM || k == CG_OPT_ADAMW;
}

float
cg_optim_lr(const struct cg_optim *o, uint64_t t)
{
	double lr = o->lr;

	if (o->warmup > 0 && t <= o->warmup)
		return (float)(lr * (double)t / (double)o->warmup);
	if (o->sched == CG_SCHED_COSINE && o->total > o->warmup) {
		double span = (double)(o->total - o->warmup);
		double x = (double)(t - o->warmup) / span;
		if (x > 1)
			x = 1;
		lr = o->lr_min + 0.5 * (o->lr - o->lr_min) * (1 + cos(M_PI * x));
	}
	return (float)lr;
}

/* What every element of one step shares. */
struct step {
	enum cg_opt_kind kind;
	uint64_t t;
	float lr, wd, mu;    /* SGD, momentum */
	float b1, b2, eps;   /* Adam family */
	float size, rbc2;    /* lr / bias correction 1, 1 / sqrt(bc2) */
	float shrink;        /* AdamW: 1 - lr wd */
};

static void
step_init(struct step *k, const struct cg_optim *o, uint64_t t)
{
	const double bc1 = 1.0 - pow(o->beta1, (double)t);
	const double bc2 = 1.0 - pow(o->beta2, (double)t);

	k->kind = o->kind;
	k->t = t;
	k->lr = cg_optim_lr(o, t);
	k->wd = o->wd;
	k->mu = o->momentum;
	k->b1 = o->beta1;
	k->b2 = o->beta2;
	k->eps = o->eps;
	k->size = (float)(k->lr / bc1);
	k->rbc2 = (float)(1.0 / sqrt(bc2));
	k->shrink = 1.0f - k->lr * o->wd;
}

/*
 * A moment that has decayed below the smallest normal float is taken as
 * zero.  A weight whose gradient stays 0 (a pixel that is always black, a
 * token never seen) has its moments shrink by beta each step, through the
 * subnormal range for a hundred steps or more (Adam's m: 0.9 a step) and
 * for tens of thousands (v: 0.999); every operation on a subnormal costs
 * Intel CPUs a microcode assist, and a long cvae call spent 1.7 times as
 * long a step in the optimizer for it (tests/unit/test_optim).  A
 * subnormal moment moves no weight that is not itself below 1e-30, so
 * the values are PyTorch's wherever a weight can tell.  The same bits on
 * every CPU: a comparison, not the FPU's flush-to-zero mode.
 */
static inline float
normal_or_zero(float x)
{
	return fabsf(x) < FLT_MIN ? 0.0f : x;
}

/*
 * The step on n elements, on the calling thread; decay 0 skips weight
 * decay.  With zero_g (a constant where step_slice calls it), each
 * gradient element is set to 0 once read, in the same pass, so that the
 * next step's accumulation needs no pass of its own to clear it (a
 * separate memset wrote the gradient's lines once more: 2% of a cddpm
 * step).
 */
static inline __attribute__((always_inline)) void
step_run(const struct step *k, float *p, float *g, float *m, float *v,
         size_t n, int decay, const int zero_g)
{
	const float lr = k->lr, wd = decay ? k->wd : 0.0f;

	switch (k->kind) {
	case CG_OPT_SGD:
#pragma omp simd
		for (size_t i = 0; i < n; i++) {
			const float gi = g[i];
			if (zero_g)
				g[i] = 0.0f;
			p[i] -= lr * (gi + wd * p[i]);
		}
		break;
	case CG_OPT_MOMENTUM: {
		const float mu = k->mu;
		const int first = k->t == 1;
#pragma omp simd
		for (size_t i = 0; i < n; i++) {
			float gi = g[i] + wd * p[i];
			if (zero_g)
				g[i] = 0.0f;
			/* PyTorch starts the buffer at g; mu*0 + g is that. */
			m[i] = normal_or_zero(first ? gi : mu * m[i] + gi);
			p[i] -= lr * m[i];
		}
		break;
	}
	case CG_OPT_ADAM:
	case CG_OPT_ADAMW: {
		const float b1 = k->b1, b2 = k->b2, eps = k->eps;
		const float size = k->size, rbc2 = k->rbc2;
		const float shrink = decay ? k->shrink : 1.0f;
		if (k->kind == CG_OPT_ADAMW) {
#pragma omp simd
			for (size_t i = 0; i < n; i++) {
				float gi = g[i];
				if (zero_g)
					g[i] = 0.0f;
				p[i] *= shrink;
				m[i] = normal_or_zero(b1 * m[i] + (1.0f - b1) * gi);
				v[i] = normal_or_zero(b2 * v[i] +
				                      (1.0f - b2) * gi * gi);
				p[i] -= size * m[i] /
				        (sqrtf(v[i]) * rbc2 + eps);
			}
		} else {
#pragma omp simd
			for (size_t i = 0; i < n; i++) {
				float gi = g[i] + wd * p[i];
				if (zero_g)
					g[i] = 0.0f;
				m[i] = normal_or_zero(b1 * m[i] + (1.0f - b1) * gi);
				v[i] = normal_or_zero(b2 * v[i] +
				                      (1.0f - b2) * gi * gi);
				p[i] -= size * m[i] /
				        (sqrtf(v[i]) * rbc2 + eps);
			}
		}
		break;
	}
	}
}

static void
step_slice(const struct step *k, float *p, float *g, float *m, float *v,
	   size_t n, int decay, int zero_g)
{
	if (zero_g)
		step_run(k, p, g, m, v, n, decay, 1);
	else
		step_run(k, p, g, m, v, n, decay, 0);
}

/* Elements under which one thread steps alone. */
#define PAR_MIN 65536

void
cg_optim_step(const struct cg_optim *o, uint64_t t, float *p, const float *g,
	      float *m, float *v, size_t N, int decay)
{
	struct cg_view one = {.off = 0, .n = N, .decay = decay};

	cg_optim_step_views(o, t, p, (float *)g, m, v, &one, 1, 0);
}

void
cg_optim_step_views(const struct cg_optim *o, uint64_t t, float *p, float *g,
		    float *m, float *v, const struct cg_view *views,
		    int nviews, int zero_g)
{
	struct step k;
	size_t total = 0;

	step_init(&k, o, t);
	for (int i = 0; i < nviews; i++)
		total += views[i].n;
	/*
	 * The views laid end to end are split into one run per thread (at
	 * multiples of 16 elements); a thread steps the parts of the views
	 * that fall in its run.  One parallel region for the whole model.
	 */
#pragma omp parallel if (total >= PAR_MIN)
	{
		size_t lo = 0, hi = total, at = 0;
#ifdef _OPENMP
		const size_t nt = (size_t)omp_get_num_threads();
		const size_t id = (size_t)omp_get_thread_num();
		const size_t chunks = (total + 15) / 16;
		lo = chunks * id / nt * 16;
		hi = chunks * (id + 1) / nt * 16;
		lo = lo < total ? lo : total;
		hi = hi < total ? hi : total;
#endif
		for (int i = 0; i < nviews && at < hi; i++) {
			const struct cg_view *w = &views[i];
			size_t a = lo > at ? lo - at : 0;
			size_t b = hi - at < w->n ? hi - at : w->n;
			if (a < b) {
				size_t off = w->off + a;
				step_slice(&k, p + off, g + off,
					   m ? m + off : NULL,
					   v ? v + off : NULL, b - a,
					   w->decay, zero_g);
			}
			at += w->n;
		}
	}
}

void
cg_optim_step_groups(const struct cg_optim *o, struct cg_group *groups,
                     int ngroups, float *p, float *g, float *m, float *v,
                     const struct cg_view *views, int zero_g)
{
	for (int i = 0; i < ngroups; i++) {
		struct cg_group *gr = &groups[i];
		if (gr->frozen) {
			if (zero_g)
				memset(g + gr->off, 0, gr->n * sizeof(float));
			continue;
		}
		gr->opt_t++;
		cg_optim_step_views(o, gr->opt_t, p, g, m, v, views + gr->view0,
		                    gr->nviews, zero_g);
	}
}

void
cg_optim_mask_frozen(float *g, const struct cg_group *groups, int ngroups)
{
	for (int i = 0; i < ngroups; i++)
		if (groups[i].frozen)
			memset(g + groups[i].off, 0,
			       groups[i].n * sizeof(float));
}

double
cg_clip_norm(float *g, size_t N, double maxnorm)
{
	double s = 0;

	for (size_t i = 0; i < N; i++)
		s += (double)g[i] * g[i];
	s = sqrt(s);
	if (maxnorm > 0 && s > maxnorm) {
		float k = (float)(maxnorm / (s + 1e-6));
		for (size_t i = 0; i < N; i++)
			g[i] *= k;
	}
	return s;
}

void
cg_outer_nesterov(float *p, const float *delta, float *mom, size_t N,
		  float lr, float mu)
{
	for (size_t i = 0; i < N; i++) {
		float gi = -delta[i];
		mom[i] = mu * mom[i] + gi;
		p[i] -= lr * (gi + mu * mom[i]);
	}
}
