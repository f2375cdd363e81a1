/*
 * optim.c - optimizer steps over flat parameter buffers.
 *
 * The formulas follow PyTorch's torch.optim so that a run can be checked
 * step for step against it: Adam's bias corrections are applied to the
 * step size, eps is added after the square root, AdamW decays weights by
 * lr*wd before the Adam update, and SGD's L2 weight decay is added to the
 * gradient.  Element loops are left to the compiler to vectorise.
 */
#include <math.h>
#include <string.h>

#include "cg.h"
#include "optim.h"

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
	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0) {
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

void
cg_optim_step(const struct cg_optim *o, uint64_t t, float *p, const float *g,
	      float *m, float *v, size_t N, int decay)
{
	const float lr = cg_optim_lr(o, t);
	const float wd = decay ? o->wd : 0.0f;

	switch (o->kind) {
	case CG_OPT_SGD:
		for (size_t i = 0; i < N; i++)
			p[i] -= lr * (g[i] + wd * p[i]);
		break;
	case CG_OPT_MOMENTUM: {
		const float mu = o->momentum;
		for (size_t i = 0; i < N; i++) {
			float gi = g[i] + wd * p[i];
			/* PyTorch starts the buffer at g; mu*0 + g is that. */
			m[i] = t == 1 ? gi : mu * m[i] + gi;
			p[i] -= lr * m[i];
		}
		break;
	}
	case CG_OPT_ADAM:
	case CG_OPT_ADAMW: {
		const float b1 = o->beta1, b2 = o->beta2, eps = o->eps;
		const double bc1 = 1.0 - pow(b1, (double)t);
		const double bc2 = 1.0 - pow(b2, (double)t);
		const float step = (float)(lr / bc1);
		const float rbc2 = (float)(1.0 / sqrt(bc2));
		const int adamw = o->kind == CG_OPT_ADAMW;
		const float shrink = 1.0f - lr * wd;
#pragma omp parallel for simd if (N > 65536) schedule(static)
		for (size_t i = 0; i < N; i++) {
			float gi = g[i];
			if (adamw)
				p[i] *= shrink;
			else
				gi += wd * p[i];
			m[i] = b1 * m[i] + (1.0f - b1) * gi;
			v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
			p[i] -= step * m[i] / (sqrtf(v[i]) * rbc2 + eps);
		}
		break;
	}
	}
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
