/*
 * arch/cddpm/cddpm.c - conditional diffusion: layout, init, schedule, training
 * passes and the samplers.
 *
 * The model of cddpm.h on the kernels of nn.c.  The layout is a closed-
 * form function of the config (linear_at, EMB_OFF), so views, init and
 * the passes agree by construction.  The workspace holds every
 * activation of a batch of up to max_batch examples in one allocation;
 * B smaller than that uses the leading rows of each buffer.  Hidden
 * activations are kept after ReLU (positive exactly where the
 * pre-activation was), which is all backward needs.  The schedule is
 * computed in double once per workspace; the products that reach floats
 * are its coefficients rounded once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cddpm/cddpm.h"
#include "core/arena.h"
#include "nn/nn.h"

/* ---------------------------------------------------------------- layout */

struct linear {
	size_t w, b;
	int in, out;
};

/* Where the condition embedding [ncond + 1, hidden] starts: after the
 * time layer. */
static size_t
emb_off(const struct cg_cddpm_config *c)
{
	return (size_t)c->hidden * c->embed + c->hidden;
}

/*
 * The idx-th Linear layer: 0 the time layer, 1 .. layers the hidden
 * layers, layers + 1 the output layer.  c is valid.
 */
static struct linear
linear_at(const struct cg_cddpm_config *c, int idx)
{
	size_t D = c->in_dim, H = c->hidden, K = c->ncond;
	size_t hid0 = emb_off(c) + (K + 1) * H;
	size_t hh = H * H + H;
	struct linear ln;

	if (idx == 0) {
		ln.in = c->embed;
		ln.out = c->hidden;
		ln.w = 0;
	} else if (idx <= c->layers) {
		size_t l = idx - 1;
		ln.in = l == 0 ? c->in_dim : c->hidden;
		ln.out = c->hidden;
		ln.w = l == 0 ? hid0 : hid0 + H * D + H + (l - 1) * hh;
	} else {
		ln.in = c->hidden;
		ln.out = c->in_dim;
		ln.w = hid0 + H * D + H + (size_t)(c->layers - 1) * hh;
	}
	ln.b = ln.w + (size_t)ln.out * ln.in;
	return ln;
}

int
cg_cddpm_check_config(const struct cg_cddpm_config *c)
{
	const struct {
		const char *name;
		int v;
	} f[] = {
	    {"in_dim", c->in_dim}, {"ncond", c->ncond}, {"hidden", c->hidden},
	    {"layers", c->layers}, {"embed", c->embed},
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].v < 1 || f[i].v > CG_CDDPM_MAX_DIM)
			return cg_seterr("cddpm: %s = %d: not in [1, %d]",
			                 f[i].name, f[i].v, CG_CDDPM_MAX_DIM);
	if (c->embed % 2 != 0)
		return cg_seterr("cddpm: embed = %d: not even (sines and "
		                 "cosines in pairs)",
		                 c->embed);
	if (c->predict_x0 != 0 && c->predict_x0 != 1)
		return cg_seterr("cddpm: predict_x0 = %d: not 0 or 1",
		                 c->predict_x0);
	if (!(c->snr_clip <= CG_CDDPM_MAX_SNR_CLIP) ||
	    (c->snr_clip < 0 && c->snr_clip != CG_CDDPM_EPS_LOSS))
		return cg_seterr("cddpm: snr-clip = %g: not in [0, %g]",
		                 c->snr_clip, CG_CDDPM_MAX_SNR_CLIP);
	if (c->timesteps < CG_CDDPM_MIN_T || c->timesteps > CG_CDDPM_MAX_T)
		return cg_seterr("cddpm: timesteps = %d: not in [%d, %d]",
		                 c->timesteps, CG_CDDPM_MIN_T, CG_CDDPM_MAX_T);
	/* Every width at most 2^20: no wrap below 2^63. */
	uint64_t D = c->in_dim, K = c->ncond, H = c->hidden, E = c->embed;
	uint64_t L = c->layers;
	uint64_t n = H * E + H + (K + 1) * H + H * D + H +
	             (L - 1) * (H * H + H) + D * H + D;

	if (n > CG_CDDPM_MAX_PARAMS || n > SIZE_MAX / sizeof(float))
		return cg_seterr("cddpm: %llu parameters: more than %llu",
		                 (unsigned long long)n,
		                 (unsigned long long)CG_CDDPM_MAX_PARAMS);
	return 0;
}

size_t
cg_cddpm_nparams(const struct cg_cddpm_config *c)
{
	if (cg_cddpm_check_config(c) != 0)
		return 0;
	struct linear ln = linear_at(c, c->layers + 1);
	return ln.b + ln.out;
}

int
cg_cddpm_views(const struct cg_cddpm_config *c, struct cg_view *v, int max)
{
	int n = 0;

	if (cg_cddpm_check_config(c) != 0)
		return -1;
	if (max < 2 * c->layers + 5)
		return cg_seterr("cddpm: %d views do not fit in %d",
		                 2 * c->layers + 5, max);
	for (int i = 0; i <= c->layers + 1; i++) {
		struct linear ln = linear_at(c, i);
		char layer[32];

		if (i == 0)
			snprintf(layer, sizeof(layer), "time");
		else if (i <= c->layers)
			snprintf(layer, sizeof(layer), "hid.%d", i - 1);
		else
			snprintf(layer, sizeof(layer), "out");
		cg_view_linear(&v[n], layer, ln.w, ln.b, ln.out, ln.in);
		n += 2;
		if (i == 0)
			cg_view_set(&v[n++], "cond.emb", emb_off(c),
			         (size_t)c->ncond + 1, c->hidden, 0);
	}
	return n;
}

void
cg_cddpm_init(const struct cg_cddpm_config *c, float *params, struct cg_rng *r)
{
	if (cg_cddpm_check_config(c) != 0)
		return;
	for (int i = 0; i <= c->layers + 1; i++) {
		struct linear ln = linear_at(c, i);
		float bound = 1.0f / sqrtf((float)ln.in);
		size_t n = (size_t)ln.out * ln.in + ln.out; /* W then b */

		for (size_t j = 0; j < n; j++)
			params[ln.w + j] =
			    (2.0f * cg_rng_uniform(r) - 1.0f) * bound;
		if (i == 0) {
			size_t e = emb_off(c);
			size_t ne = ((size_t)c->ncond + 1) * c->hidden;
			for (size_t j = 0; j < ne; j++)
				params[e + j] = 0.1f * cg_rng_normal(r);
		}
	}
}

void
cg_cddpm_schedule(const struct cg_cddpm_config *c, double *abar)
{
	const int T = c->timesteps;
	const double lo = 1e-4 * 1000.0 / T, hi = 0.02 * 1000.0 / T;
	double a = 1;

	for (int t = 0; t < T; t++) {
		a *= 1 - (lo + (hi - lo) * t / (T - 1));
		abar[t] = a;
	}
}

/* ------------------------------------------------------------- workspace */

struct cg_cddpm_ws {
	struct cg_cddpm_config c;
	int max_batch;
	void *mem;
	double *abar; /* [T] */
	/* Each [max_batch, width]; the first B rows are used. */
	float *temb; /* [B, embed]: sin_emb(t) */
	float *emb;  /* [B, hidden]: time and condition embedding */
	float *xt;   /* [B, in_dim]: the network's input */
	float *h;    /* [layers][B, hidden], after ReLU */
	float *out;  /* [B, in_dim]: eps_hat (v, then eps from it) */
	float *dout; /* [B, in_dim]; the sampler's x */
	float *dh;   /* [B, hidden] */
	float *dpre; /* [B, hidden] */
	float *demb; /* [B, hidden] */
	int *ibuf;   /* [2][B]: the sampler's conditions and timesteps */
};

/* The workspace's buffers, in arena a (counting, then assigning:
 * core/arena.h): the schedule's T doubles and the 2B ints first. */
static void
lay(void *ws, struct cg_arena *a)
{
	struct cg_cddpm_ws *w = ws;
	const struct cg_cddpm_config *c = &w->c;
	size_t B = w->max_batch, D = c->in_dim, H = c->hidden, E = c->embed;
	size_t L = c->layers;

	w->abar = cg_arena_take(a, (size_t)c->timesteps, 1, sizeof(double));
	w->ibuf = cg_arena_take(a, 2, B, sizeof(int));
	w->temb = CG_ARENA_FLOATS(a, B, E);
	w->emb = CG_ARENA_FLOATS(a, B, H);
	w->xt = CG_ARENA_FLOATS(a, B, D);
	w->h = CG_ARENA_FLOATS(a, B, L * H);
	w->out = CG_ARENA_FLOATS(a, B, D);
	w->dout = CG_ARENA_FLOATS(a, B, D);
	w->dh = CG_ARENA_FLOATS(a, B, H);
	w->dpre = CG_ARENA_FLOATS(a, B, H);
	w->demb = CG_ARENA_FLOATS(a, B, H);
}

struct cg_cddpm_ws *
cg_cddpm_ws_new(const struct cg_cddpm_config *c, int max_batch)
{
	struct cg_cddpm_ws *w;
	struct cg_arena a;

	if (cg_cddpm_check_config(c) != 0)
		return NULL;
	if (max_batch < 1 || max_batch > CG_CDDPM_MAX_BATCH) {
		cg_seterr("cddpm: batch %d: not in [1, %d]", max_batch,
		          CG_CDDPM_MAX_BATCH);
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("cddpm: out of memory");
		return NULL;
	}
	w->c = *c;
	w->max_batch = max_batch;
	if (cg_arena_make(&a, lay, w, "cddpm", max_batch) != 0) {
		free(w);
		return NULL;
	}
	w->mem = (float *)a.base;
	cg_cddpm_schedule(c, w->abar);
	return w;
}

void
cg_cddpm_ws_free(struct cg_cddpm_ws *w)
{
	if (w == NULL)
		return;
	free(w->mem);
	free(w);
}

/* --------------------------------------------------------------- passes */

static int
check_call(const struct cg_cddpm_config *c, const struct cg_cddpm_ws *w,
           const int *cond, const int *t, int B)
{
	if (memcmp(c, &w->c, sizeof(*c)) != 0)
		return cg_seterr("cddpm: workspace made for another config");
	if (B < 1 || B > w->max_batch)
		return cg_seterr("cddpm: batch %d: not in [1, %d]", B,
		                 w->max_batch);
	for (int b = 0; b < B; b++) {
		if (cond[b] < 0 || cond[b] > c->ncond)
			return cg_seterr("cddpm: condition %d (example %d): "
			                 "not in [0, %d]",
			                 cond[b], b, c->ncond);
		if (t[b] < 0 || t[b] >= c->timesteps)
			return cg_seterr("cddpm: timestep %d (example %d): "
			                 "not in [0, %d)",
			                 t[b], b, c->timesteps);
	}
	return 0;
}

/* v_hat of the network on w->xt [B, in_dim] into w->out; every
 * activation backward needs stays in w. */
static void
forward(const struct cg_cddpm_config *c, const float *params,
        struct cg_cddpm_ws *w, const int *cond, const int *t, int B)
{
	const int E = c->embed, H = c->hidden, half = c->embed / 2;
	const size_t stride = (size_t)w->max_batch * H;
	const float *cemb = params + emb_off(c);

	for (int b = 0; b < B; b++) {
		float *e = w->temb + (size_t)b * E;
		for (int i = 0; i < half; i++) {
			double f = exp(-log(10000.0) * i / half) * t[b];
			e[i] = (float)sin(f);
			e[half + i] = (float)cos(f);
		}
	}
	struct linear lt = linear_at(c, 0);
	cg_linear_forward(w->emb, w->temb, params + lt.w, params + lt.b, B, E,
	                  H);
	for (int b = 0; b < B; b++)
		for (int j = 0; j < H; j++)
			w->emb[(size_t)b * H + j] +=
			    cemb[(size_t)cond[b] * H + j];
	for (int l = 0; l < c->layers; l++) {
		struct linear ln = linear_at(c, l + 1);
		float *h = w->h + l * stride;

		cg_linear_forward(h, l == 0 ? w->xt : h - stride, params + ln.w,
		                  params + ln.b, B, ln.in, ln.out);
		for (size_t i = 0; i < (size_t)B * H; i++) {
			float v = h[i] + w->emb[i];
			h[i] = v > 0 ? v : 0;
		}
	}
	struct linear lo = linear_at(c, c->layers + 1);
	cg_linear_forward(w->out, w->h + (c->layers - 1) * stride,
	                  params + lo.w, params + lo.b, B, H, c->in_dim);
}

/* w->out [B, in_dim]: the last layer's x0_hat or v_hat, as forward
 * leaves it, to eps_hat, which follows from it and x_t exactly. */
static void
out_to_eps(const struct cg_cddpm_config *c, struct cg_cddpm_ws *w, const int *t,
           int B)
{
	for (int b = 0; b < B; b++) {
		const float sa = (float)sqrt(w->abar[t[b]]);
		const float sn = (float)sqrt(1 - w->abar[t[b]]);
		float *o = w->out + (size_t)b * c->in_dim;
		const float *x = w->xt + (size_t)b * c->in_dim;
		if (c->predict_x0)
			for (int i = 0; i < c->in_dim; i++)
				o[i] = (x[i] - sa * o[i]) / sn;
		else
			for (int i = 0; i < c->in_dim; i++)
				o[i] = sa * o[i] + sn * x[i];
	}
}

int
cg_cddpm_forward_backward(const struct cg_cddpm_config *c, const float *params,
                          struct cg_cddpm_ws *w, const float *x0,
                          const int *cond, const int *t, const float *eps,
                          int B, float *grad, double *loss)
{
	const int D = c->in_dim, H = c->hidden, L = c->layers;
	const size_t stride = (size_t)w->max_batch * H;

	if (check_call(c, w, cond, t, B) != 0)
		return -1;
	for (int b = 0; b < B; b++) {
		const float sa = (float)sqrt(w->abar[t[b]]);
		const float sn = (float)sqrt(1 - w->abar[t[b]]);
		const size_t o = (size_t)b * D;
		for (int i = 0; i < D; i++)
			w->xt[o + i] = sa * x0[o + i] + sn * eps[o + i];
	}
	forward(c, params, w, cond, t, B);

	const float scale = 2.0f / ((float)B * D);
	double sum = 0;
	if (c->snr_clip == CG_CDDPM_EPS_LOSS && !c->predict_x0) {
		/* The loss on eps_hat; with a gradient wanted, d(loss)/d(v)
		 * = sqrt(abar_t) d(loss)/d(eps_hat) in the same pass. */
		out_to_eps(c, w, t, B);
		for (int b = 0; b < B; b++) {
			const float gs = scale * (float)sqrt(w->abar[t[b]]);
			double s = 0;
			for (int i = 0; i < D; i++) {
				const size_t k = (size_t)b * D + i;
				const float d = w->out[k] - eps[k];
				s += (double)d * d;
				if (grad)
					w->dout[k] = gs * d;
			}
			sum += s / D;
		}
	} else {
		/* The loss on x0_hat weighted wx (cddpm.h); on v_hat, the
		 * same loss, weighted wx / (snr + 1), from v = sqrt(abar) eps
		 * - sqrt(1 - abar) x0 directly: no cancellation at large
		 * t. */
		for (int b = 0; b < B; b++) {
			const double ab = w->abar[t[b]], snr = ab / (1 - ab);
			const double wx = c->snr_clip == CG_CDDPM_EPS_LOSS
			                      ? snr
			                      : fmin(snr, c->snr_clip) + 1;
			const double wt = c->predict_x0 ? wx : wx / (snr + 1);
			const float sa = (float)sqrt(ab);
			const float sn = (float)sqrt(1 - ab);
			const float gs = scale * (float)wt;
			double s = 0;
			for (int i = 0; i < D; i++) {
				const size_t k = (size_t)b * D + i;
				const float d =
				    w->out[k] -
				    (c->predict_x0 ? x0[k]
				                   : sa * eps[k] - sn * x0[k]);
				s += (double)d * d;
				if (grad)
					w->dout[k] = gs * d;
			}
			sum += wt * s / D;
		}
	}
	if (loss)
		*loss = sum / B;
	if (grad == NULL)
		return 0;

	struct linear lo = linear_at(c, L + 1), lt = linear_at(c, 0);
	const size_t nh = (size_t)B * H;
	cg_linear_backward_set(w->dh, grad + lo.w, grad + lo.b, w->dout,
	                       w->h + (L - 1) * stride, params + lo.w, B, H, D);
	memset(w->demb, 0, nh * sizeof(float));
	for (int l = L - 1; l >= 0; l--) {
		struct linear ln = linear_at(c, l + 1);
		const float *h = w->h + l * stride;

		/* dpre is d(loss)/d(pre-activation), which is also what
		 * reaches the embedding added to it. */
		cg_linear_relu_backward(l > 0 ? w->dh : NULL, grad + ln.w,
		                        grad + ln.b, w->dpre, w->dh, h,
		                        l > 0 ? h - stride : w->xt,
		                        params + ln.w, B, ln.in, ln.out);
		for (size_t i = 0; i < nh; i++)
			w->demb[i] += w->dpre[i];
	}
	cg_linear_backward(NULL, grad + lt.w, grad + lt.b, w->demb, w->temb,
	                   params + lt.w, B, c->embed, H);
	float *gemb = grad + emb_off(c);
	for (int b = 0; b < B; b++)
		for (int j = 0; j < H; j++)
			gemb[(size_t)cond[b] * H + j] +=
			    w->demb[(size_t)b * H + j];
	return 0;
}

int
cg_cddpm_predict(const struct cg_cddpm_config *c, const float *params,
                 struct cg_cddpm_ws *w, const float *xt, const int *cond,
                 const int *t, int B, float *out)
{
	if (check_call(c, w, cond, t, B) != 0)
		return -1;
	memcpy(w->xt, xt, (size_t)B * c->in_dim * sizeof(float));
	forward(c, params, w, cond, t, B);
	out_to_eps(c, w, t, B);
	memcpy(out, w->out, (size_t)B * c->in_dim * sizeof(float));
	return 0;
}

/* -------------------------------------------------------------- sampling */

/* The i-th of the N timesteps visited, ascending: round(i (T - 1) / (N -
 * 1)), T - 1 for N = 1. */
static int
visited(int i, int N, int T)
{
	if (N == 1)
		return T - 1;
	return (int)floor((double)i * (T - 1) / (N - 1) + 0.5);
}

int
cg_cddpm_sample(const struct cg_cddpm_config *c, const float *params,
                struct cg_cddpm_ws *w, const int *cond, int n,
                const struct cg_cddpm_sampling *s, struct cg_rng *r, float *out)
{
	const int D = c->in_dim, T = c->timesteps;
	const int guided = s->guidance != 0;
	const int B = guided ? 2 * n : n;
	const double eta = s->ddim ? 0 : 1;

	if (n < 1 || B > w->max_batch)
		return cg_seterr("cddpm: %d images: not in [1, %d]", n,
		                 guided ? w->max_batch / 2 : w->max_batch);
	if (s->steps < 1 || s->steps > T)
		return cg_seterr("cddpm: %d steps: not in [1, %d]", s->steps,
		                 T);
	if (!(s->guidance >= 0) || !isfinite(s->guidance))
		return cg_seterr("cddpm: guidance %g: not a finite number "
		                 ">= 0",
		                 s->guidance);
	int *cb = w->ibuf, *tb = w->ibuf + w->max_batch;
	for (int b = 0; b < n; b++) {
		cb[b] = cond[b];
		if (guided)
			cb[n + b] = c->ncond;
	}
	float *x = w->dout; /* [n, D]: the chain's state */
	const float temp = (float)s->temperature;
	for (size_t i = 0; i < (size_t)n * D; i++)
		x[i] = temp * cg_rng_normal(r);

	for (int i = s->steps - 1; i >= 0; i--) {
		const int t = visited(i, s->steps, T);
		const double at = w->abar[t];
		const double as =
		    i > 0 ? w->abar[visited(i - 1, s->steps, T)] : 1.0;
		for (int b = 0; b < B; b++)
			tb[b] = t;
		for (int b = 0; b < B; b++)
			memcpy(w->xt + (size_t)b * D, x + (size_t)(b % n) * D,
			       (size_t)D * sizeof(float));
		if (check_call(c, w, cb, tb, B) != 0)
			return -1;
		forward(c, params, w, cb, tb, B);
		out_to_eps(c, w, tb, B);

		const double sig =
		    eta * sqrt((1 - as) / (1 - at) * (1 - at / as));
		const double dir = sqrt(fmax(1 - as - sig * sig, 0));
		const float gw = (float)s->guidance;
		for (size_t k = 0; k < (size_t)n * D; k++) {
			float e = w->out[k];
			if (guided)
				e = (1 + gw) * e -
				    gw * w->out[(size_t)n * D + k];
			double x0 = (x[k] - sqrt(1 - at) * e) / sqrt(at);
			x0 = x0 < -1 ? -1 : x0 > 1 ? 1 : x0;
			/* eps that the clipped x0 and x agree on */
			double ec = (x[k] - sqrt(at) * x0) / sqrt(1 - at);
			double nx = sqrt(as) * x0 + dir * ec;
			if (sig > 0)
				nx += sig * temp * cg_rng_normal(r);
			x[k] = (float)nx;
		}
	}
	for (size_t k = 0; k < (size_t)n * D; k++) {
		float v = 0.5f * (x[k] + 1);
		out[k] = v < 0 ? 0 : v > 1 ? 1 : v;
	}
	return 0;
}
