/*
 * arch/cclf/cclf.c - the image classifier: layout, init, forward, backward.
 *
 * The model of cclf.h on the kernels of nn.c and conv.c, built as
 * lib/arch/cvae/cvae.c builds its MLPs: the layout is a closed-form
 * function of the config (trunk_of, linear_at), the workspace holds every
 * activation of a batch of up to max_batch examples in one allocation,
 * and activations are kept after ReLU, which is all that backward needs
 * (a ReLU's output is positive exactly where its input was).  The softmax
 * cross-entropy is computed per row from the largest logit, its sum in
 * double.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cclf/cclf.h"
#include "core/arena.h"
#include "nn/gemm.h"
#include "nn/conv.h"
#include "nn/nn.h"
#include "nn/qlinear.h"
#include "nn/transformer.h"

/* ---------------------------------------------------------------- layout */

/* Floats of unfolded input the convolutions may take at once (16 MiB). */
#define COL_BUDGET ((size_t)1 << 22)

/*
 * The convolutional trunk: CG_CCLF_STAGES 3x3 convolutions, the first at
 * stride 1 from the image's channels to conv, each next at stride 2 to
 * twice the channels; weights and biases first in the buffer, in stage
 * order.  out is the floats of one example's last map, the MLP's input.
 * For the MLP (conv 0): no stage, nparams 0, out = in_dim.
 */
struct trunk {
	int stages;
	struct cg_conv cv[CG_CCLF_STAGES];
	size_t w[CG_CCLF_STAGES], b[CG_CCLF_STAGES];
	size_t nparams;
	int out;
};

/* The trunk of c; -1 (no message) where its shapes cannot be made. */
static int
trunk_of(const struct cg_cclf_config *c, struct trunk *t)
{
	size_t off = 0;
	int C, H, W;

	memset(t, 0, sizeof(*t));
	t->out = c->in_dim;
	if (c->conv == 0)
		return 0;
	C = c->channels, H = c->height, W = c->width;
	for (int s = 0; s < CG_CCLF_STAGES; s++) {
		struct cg_conv *v = &t->cv[s];

		if (cg_conv_shape(v, C, H, W, c->conv << s, 3, s ? 2 : 1, 1) !=
		    0)
			return -1;
		t->w[s] = off;
		t->b[s] = off + cg_conv_wsize(v);
		off = t->b[s] + (size_t)v->OC;
		C = v->OC, H = v->OH, W = v->OW;
	}
	t->stages = CG_CCLF_STAGES;
	t->nparams = off;
	t->out = C * H * W;
	return 0;
}

/* One Linear layer: weight at w [out, in], bias at b [out]. */
struct linear {
	size_t w, b;
	int in, out;
};

/* The idx-th Linear layer in buffer order, after the trunk t: hidden
 * 0..L-1, output L. */
static struct linear
linear_at(const struct cg_cclf_config *c, const struct trunk *t, int idx)
{
	size_t D = t->out, H = c->hidden, i = idx;
	struct linear ln;

	ln.in = i == 0 ? t->out : c->hidden;
	ln.out = i < (size_t)c->layers ? c->hidden : c->ncond;
	ln.w = t->nparams + (i == 0 ? 0 : H * D + H + (i - 1) * (H * H + H));
	ln.b = ln.w + (size_t)ln.out * ln.in;
	return ln;
}

int
cg_cclf_check_config(const struct cg_cclf_config *c)
{
	const struct {
		const char *name;
		int v;
	} f[] = {
	    {"in_dim", c->in_dim},
	    {"ncond", c->ncond},
	    {"hidden", c->hidden},
	    {"layers", c->layers},
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].v < 1 || f[i].v > CG_CCLF_MAX_DIM)
			return cg_seterr("cclf: %s = %d: not in [1, %d]",
			                 f[i].name, f[i].v, CG_CCLF_MAX_DIM);
	if (c->ncond < 2)
		return cg_seterr("cclf: %d condition: nothing to tell apart",
		                 c->ncond);
	struct trunk t;
	if (c->conv < 0 || c->conv > CG_CCLF_MAX_CONV)
		return cg_seterr("cclf: conv = %d: not in [0, %d]", c->conv,
		                 CG_CCLF_MAX_CONV);
	if (c->conv > 0 &&
	    (c->height < 1 || c->width < 1 || c->channels < 1 ||
	     (int64_t)c->height * c->width * c->channels != c->in_dim))
		return cg_seterr("cclf: images of %dx%dx%d for %d inputs",
		                 c->height, c->width, c->channels, c->in_dim);
	if (trunk_of(c, &t) != 0)
		return cg_seterr("cclf: images of %dx%d are too small or too "
		                 "large for %d stride-2 stages of conv %d",
		                 c->height, c->width, CG_CCLF_STAGES - 1,
		                 c->conv);
	/* Every field at most 2^20, the trunk's output under 2^31: no wrap
	 * below 2^63. */
	uint64_t D = t.out, K = c->ncond, H = c->hidden, L = c->layers;
	uint64_t n = t.nparams + H * D + H + (L - 1) * (H * H + H) + K * H + K;

	if (n > CG_CCLF_MAX_PARAMS || n > SIZE_MAX / sizeof(float))
		return cg_seterr("cclf: %llu parameters: more than %llu",
		                 (unsigned long long)n,
		                 (unsigned long long)CG_CCLF_MAX_PARAMS);
	return 0;
}

size_t
cg_cclf_nparams(const struct cg_cclf_config *c)
{
	struct trunk t;

	if (cg_cclf_check_config(c) != 0)
		return 0;
	trunk_of(c, &t);
	struct linear ln = linear_at(c, &t, c->layers);
	return ln.b + ln.out;
}

int
cg_cclf_views(const struct cg_cclf_config *c, struct cg_view *v, int max)
{
	struct trunk t;
	int n;

	if (cg_cclf_check_config(c) != 0)
		return -1;
	trunk_of(c, &t);
	n = 2 * (t.stages + c->layers + 1);
	if (max < n)
		return cg_seterr("cclf: %d views do not fit in %d", n, max);
	for (int s = 0; s < t.stages; s++) {
		char layer[32];

		snprintf(layer, sizeof(layer), "conv.%d", s);
		cg_view_conv(&v[2 * s], layer, t.w[s], t.b[s], &t.cv[s]);
	}
	for (int i = 0; i <= c->layers; i++) {
		struct linear ln = linear_at(c, &t, i);
		char layer[32];

		if (i < c->layers)
			snprintf(layer, sizeof(layer), "hid.%d", i);
		else
			snprintf(layer, sizeof(layer), "out");
		cg_view_linear(&v[2 * (t.stages + i)], layer, ln.w, ln.b,
		               ln.out, ln.in);
	}
	return n;
}

void
cg_cclf_init(const struct cg_cclf_config *c, float *params, struct cg_rng *r)
{
	struct trunk t;

	if (cg_cclf_check_config(c) != 0)
		return;
	trunk_of(c, &t);
	for (int s = 0; s < t.stages; s++)
		cg_init_uniform(params + t.w[s], t.b[s] + t.cv[s].OC - t.w[s],
		             (size_t)t.cv[s].C * t.cv[s].KH * t.cv[s].KW, r);
	for (int i = 0; i <= c->layers; i++) {
		struct linear ln = linear_at(c, &t, i);

		cg_init_uniform(params + ln.w, (size_t)ln.out * ln.in + ln.out,
		             (size_t)ln.in, r);
	}
}

/* ------------------------------------------------------------- workspace */

struct cg_cclf_ws {
	struct cg_cclf_config c;
	struct trunk t;
	int max_batch;
	size_t ncol;
	float *mem;
	/* Each [max_batch, width]; the first B rows are used. */
	float *act[CG_CCLF_STAGES]; /* each stage's map, after ReLU */
	float *dact[CG_CCLF_STAGES]; /* the gradient at each */
	float *col;                  /* [ncol], the convolutions' scratch */
	float *h;       /* [layers][B, hidden], after ReLU */
	float *logits;  /* [B, ncond] */
	float *dlogits; /* [B, ncond] */
	float *dh;      /* [B, hidden] */
	float *tmp;     /* [B, hidden] */
	double *sq;     /* [B], DP-SGD: each example's squared norm */
	float *rs;      /* [B], DP-SGD: each example's clip factor */
	float *pw;      /* DP-SGD: one example's gradient of the largest
	                 * stage, weight and bias */
	double *kl; /* [B], distillation: each example's KL */
	struct cg_wset ks; /* the weights as stored (cg_cclf_ws_set_mats) */
};

/* The workspace's buffers in struct order, in arena a (counting, then
 * assigning: core/arena.h). */
static void
lay(void *ws, struct cg_arena *a)
{
	struct cg_cclf_ws *w = ws;
	size_t B = w->max_batch, K = w->c.ncond, H = w->c.hidden;

	for (int s = 0; s < w->t.stages; s++) {
		const struct cg_conv *cv = &w->t.cv[s];
		const size_t n = (size_t)cv->OH * cv->OW * cv->OC;

		w->act[s] = CG_ARENA_FLOATS(a, B, n);
		w->dact[s] = CG_ARENA_FLOATS(a, B, n);
	}
	w->col = CG_ARENA_FLOATS(a, w->ncol, 1);
	w->h = CG_ARENA_FLOATS(a, B, (size_t)w->c.layers * H);
	w->logits = CG_ARENA_FLOATS(a, B, K);
	w->dlogits = CG_ARENA_FLOATS(a, B, K);
	w->dh = CG_ARENA_FLOATS(a, B, H);
	w->tmp = CG_ARENA_FLOATS(a, B, H);
	w->sq = cg_arena_take(a, B, 1, sizeof(double));
	w->rs = CG_ARENA_FLOATS(a, B, 1);
	size_t pw = 1;
	for (int s = 0; s < w->t.stages; s++) {
		size_t n = cg_conv_wsize(&w->t.cv[s]) + (size_t)w->t.cv[s].OC;
		pw = n > pw ? n : pw;
	}
	w->pw = CG_ARENA_FLOATS(a, pw, 1);
	w->kl = cg_arena_take(a, B, 1, sizeof(double));
}

/* A workspace's struct for batches of up to max_batch, its arena not
 * laid out; NULL with a message. */
static struct cg_cclf_ws *
ws_prep(const struct cg_cclf_config *c, int max_batch)
{
	struct cg_cclf_ws *w;

	if (cg_cclf_check_config(c) != 0)
		return NULL;
	if (max_batch < 1 || max_batch > CG_CCLF_MAX_BATCH) {
		cg_seterr("cclf: batch %d: not in [1, %d]", max_batch,
		          CG_CCLF_MAX_BATCH);
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("cclf: out of memory");
		return NULL;
	}
	w->c = *c;
	w->max_batch = max_batch;
	trunk_of(c, &w->t);
	for (int s = 0; s < w->t.stages; s++) {
		size_t n = cg_conv_scratch(&w->t.cv[s], max_batch, COL_BUDGET);

		if (n > w->ncol)
			w->ncol = n;
	}
	return w;
}

struct cg_cclf_ws *
cg_cclf_ws_new(const struct cg_cclf_config *c, int max_batch)
{
	struct cg_cclf_ws *w = ws_prep(c, max_batch);
	struct cg_arena a;

	if (w == NULL)
		return NULL;
	if (cg_arena_make(&a, lay, w, "cclf", max_batch) != 0) {
		free(w);
		return NULL;
	}
	w->mem = (float *)a.base;
	return w;
}

size_t
cg_cclf_ws_bytes(const struct cg_cclf_config *c, int max_batch)
{
	struct cg_cclf_ws *w = ws_prep(c, max_batch);
	size_t n;

	if (w == NULL)
		return 0;
	n = cg_arena_bytes(lay, w, sizeof(*w), "cclf", max_batch);
	free(w);
	return n;
}

void
cg_cclf_ws_free(struct cg_cclf_ws *w)
{
	if (w == NULL)
		return;
	cg_wset_free(&w->ks);
	free(w->mem);
	free(w);
}

int
cg_cclf_ws_set_mats(struct cg_cclf_ws *w, const struct cg_wmat *mats, int nv)
{
	const int n = 2 * (w->t.stages + w->c.layers + 1);
	struct cg_view *v;
	struct cg_wset ks;

	if (mats != NULL && nv != n)
		return cg_seterr("cclf: %d weights for %d views", nv, n);
	if ((v = calloc((size_t)n, sizeof(*v))) == NULL)
		return cg_seterr("cclf: out of memory");
	if (cg_cclf_views(&w->c, v, n) < 0 ||
	    cg_wset_make(&ks, v, mats, n, w->max_batch) != 0) {
		free(v);
		return -1;
	}
	free(v);
	cg_wset_free(&w->ks);
	w->ks = ks;
	return 0;
}

const float *
cg_cclf_logits(const struct cg_cclf_ws *w)
{
	return w->logits;
}

const float *
cg_cclf_features(const struct cg_cclf_ws *w)
{
	return w->h + (size_t)(w->c.layers - 1) * w->max_batch * w->c.hidden;
}

/* --------------------------------------------------------------- passes */

static int
check_call(const struct cg_cclf_config *c, const struct cg_cclf_ws *w,
           const int *cond, int B, const float *grad)
{
	if (c->in_dim != w->c.in_dim || c->ncond != w->c.ncond ||
	    c->hidden != w->c.hidden || c->layers != w->c.layers ||
	    c->conv != w->c.conv || c->height != w->c.height ||
	    c->width != w->c.width || c->channels != w->c.channels)
		return cg_seterr("cclf: workspace made for another config");
	if (B < 1 || B > w->max_batch)
		return cg_seterr("cclf: batch %d: not in [1, %d]", B,
		                 w->max_batch);
	if (cond == NULL && grad != NULL)
		return cg_seterr("cclf: a gradient needs the conditions");
	for (int b = 0; cond && b < B; b++)
		if (cond[b] < 0 || cond[b] >= c->ncond)
			return cg_seterr("cclf: condition %d (example %d): "
			                 "not in [0, %d)",
			                 cond[b], b, c->ncond);
	return 0;
}

/*
 * Softmax cross-entropy of logits [B, K] to cond [B]: the sum over the
 * batch into *sum, the count whose largest logit is cond's into *right,
 * and, with dlogits [B, K] != NULL, dlogits = scale * (softmax - onehot)
 * (written).
 */
static void
xent(double *sum, int *right, float *dlogits, const float *logits,
     const int *cond, float scale, int B, int K)
{
	double s = 0;
	int n = 0;

	for (int b = 0; b < B; b++) {
		const float *l = logits + (size_t)b * K;
		int arg = 0;
		double z = 0;

		for (int k = 1; k < K; k++)
			if (l[k] > l[arg])
				arg = k;
		for (int k = 0; k < K; k++)
			z += exp((double)l[k] - l[arg]);
		/* -log softmax(l)[cond] = log sum exp(l - max) - (l[cond] -
		 * max) */
		s += log(z) - ((double)l[cond[b]] - l[arg]);
		n += arg == cond[b];
		if (dlogits == NULL)
			continue;
		float *d = dlogits + (size_t)b * K;
		for (int k = 0; k < K; k++)
			d[k] = scale * (float)(exp((double)l[k] - l[arg]) / z);
		d[cond[b]] -= scale;
	}
	*sum = s;
	*right = n;
}

/*
 * Down the trunk from w->dact [last] (the MLP's input gradient): each
 * stage's gradient through its ReLU (in place), then through its
 * convolution into the stage below's.  grad [nparams] += the stages'
 * weights' gradient, or with grad NULL none; sq [B] (or NULL) += each
 * example's squared norm of its own gradient of them, made one example
 * at a time into w->pw (a convolution's weight sees many rows per
 * example, and its gradient is smaller than their ghost norm: the same
 * arithmetic as the batch's weight gradient, once more).
 */
static void
trunk_backward(const float *params, struct cg_cclf_ws *w, const float *x,
               int B, float *grad, double *sq)
{
	const struct trunk *t = &w->t;

	for (int s = t->stages - 1; s >= 0; s--) {
		const struct cg_conv *cv = &t->cv[s];
		const size_t on = (size_t)cv->OH * cv->OW * cv->OC;
		const size_t in = (size_t)cv->H * cv->W * cv->C;
		const size_t nw = cg_conv_wsize(cv), n = (size_t)B * on;
		float *d = w->dact[s];
		const float *a = w->act[s];
		const float *inp = s > 0 ? w->act[s - 1] : x;

		for (size_t i = 0; i < n; i++)
			d[i] = a[i] > 0 ? d[i] : 0;
		for (int b = 0; sq && b < B; b++) {
			double ss = 0;

			memset(w->pw, 0, (nw + (size_t)cv->OC) * sizeof(float));
			cg_conv_backward(cv, NULL, w->pw, w->pw + nw,
			                 d + (size_t)b * on, inp + (size_t)b * in,
			                 params + t->w[s], 1, w->col, w->ncol);
			for (size_t i = 0; i < nw + (size_t)cv->OC; i++)
				ss += (double)w->pw[i] * w->pw[i];
			sq[b] += ss;
		}
		if (s > 0)
			memset(w->dact[s - 1], 0, (size_t)B * in * sizeof(float));
		if (s == 0 && grad == NULL)
			break;
		cg_conv_backward(cv, s > 0 ? w->dact[s - 1] : NULL,
		                 grad ? grad + t->w[s] : NULL,
		                 grad ? grad + t->b[s] : NULL, d, inp,
		                 params + t->w[s], B, w->col, w->ncol);
	}
}

/*
 * From w->dlogits down the MLP to its input in (the trunk's last map,
 * or the image) [B, t->out]: grad [nparams] += the MLP's weights'
 * gradient, or with grad NULL none; sq [B] (or NULL) += each example's
 * squared norm of its own gradient of them (the ghost norm,
 * cg_linear_ghost_sq).
 */
static void
mlp_backward(const struct cg_cclf_config *c, const float *params,
             struct cg_cclf_ws *w, const float *in, int B, float *grad,
             double *sq)
{
	const int L = c->layers, H = c->hidden, K = c->ncond;
	const size_t stride = (size_t)w->max_batch * H;
	const struct trunk *t = &w->t;
	const float *top = w->h + (L - 1) * stride;
	struct linear lo = linear_at(c, t, L);

	if (sq)
		cg_linear_ghost_sq(sq, w->dlogits, top, B, H, K, 1);
	cg_linear_backward_set(w->dh, grad ? grad + lo.w : NULL,
	                       grad ? grad + lo.b : NULL, w->dlogits, top,
	                       params + lo.w, B, H, K);
	for (int l = L - 1; l >= 0; l--) {
		struct linear ln = linear_at(c, t, l);
		const float *out = w->h + l * stride;
		const float *x = l > 0 ? out - stride : in;
		float *dinp = l > 0       ? w->dh
		              : t->stages ? w->dact[t->stages - 1]
		                          : NULL;

		cg_linear_relu_backward(
		    dinp, grad ? grad + ln.w : NULL, grad ? grad + ln.b : NULL,
		    w->tmp, w->dh, out, x, params + ln.w, B, ln.in, ln.out);
		if (sq)
			cg_linear_ghost_sq(sq, w->tmp, x, B, ln.in, ln.out, 1);
	}
}

int
cg_cclf_dp_forward_backward(const struct cg_cclf_config *c, const float *params,
                            struct cg_cclf_ws *w, const float *x,
                            const int *cond, int B, double clip, float *grad,
                            double *loss, double *acc, double *norms)
{
	const int K = c->ncond;
	double sum;
	int right;

	if (!(clip > 0 && clip <= 1e30))
		return cg_seterr("cclf: clip %g: not in (0, 1e30]", clip);
	if (cond == NULL)
		return cg_seterr("cclf: a gradient needs the conditions");
	if (w->ks.n > 0)
		return cg_seterr("cclf: no gradient through weights as stored");
	/* the forward pass alone, checked */
	if (cg_cclf_forward_backward(c, params, w, x, cond, B, NULL, NULL,
	                             NULL) != 0)
		return -1;
	/* each example's own loss (scale 1): its gradient is g_b */
	xent(&sum, &right, w->dlogits, w->logits, cond, 1.0f, B, K);
	const float *in = w->t.stages ? w->act[w->t.stages - 1] : x;
	for (int b = 0; b < B; b++)
		w->sq[b] = 0;
	mlp_backward(c, params, w, in, B, NULL, w->sq);
	trunk_backward(params, w, x, B, NULL, w->sq);
	for (int b = 0; b < B; b++) {
		const double n = sqrt(w->sq[b]);

		w->rs[b] = n > clip ? (float)(clip / n) : 1.0f;
		if (norms)
			norms[b] = n;
	}
	/* backward is linear in dlogits: scaled rows give sum_b rs [b] g_b */
	cg_scale_rows(w->dlogits, w->rs, B, (size_t)K);
	mlp_backward(c, params, w, in, B, grad, NULL);
	trunk_backward(params, w, x, B, grad, NULL);
	if (loss)
		*loss = sum / B;
	if (acc)
		*acc = (double)right / B;
	return 0;
}

int
cg_cclf_forward_backward(const struct cg_cclf_config *c, const float *params,
                         struct cg_cclf_ws *w, const float *x, const int *cond,
                         int B, float *grad, double *loss, double *acc)
{
	const int L = c->layers, H = c->hidden, K = c->ncond;
	const size_t stride = (size_t)w->max_batch * H;
	const struct trunk *t = &w->t;
	const float *in = x; /* the MLP's input, [B, t->out] */

	if (check_call(c, w, cond, B, grad) != 0)
		return -1;
	if (grad != NULL && w->ks.n > 0)
		return cg_seterr("cclf: no gradient through weights as stored");
	for (int s = 0; s < t->stages; s++) {
		const struct cg_conv *cv = &t->cv[s];
		const size_t n = (size_t)B * cv->OH * cv->OW * cv->OC;

		cg_conv_forward(
		    cv, w->act[s], in,
		    cg_wset_floats(&w->ks, params, t->w[s], cg_conv_wsize(cv)),
		    params + t->b[s], B, w->col, w->ncol);
		cg_relu_forward(w->act[s], w->act[s], n);
		in = w->act[s];
	}
	for (int l = 0; l < L; l++) {
		struct linear ln = linear_at(c, t, l);
		float *out = w->h + l * stride;

		cg_wset_linear(&w->ks, out, l == 0 ? in : out - stride, params,
		               ln.w, params + ln.b, B, ln.in, ln.out, 1);
	}
	const float *top = w->h + (L - 1) * stride;
	struct linear lo = linear_at(c, t, L);
	cg_wset_linear(&w->ks, w->logits, top, params, lo.w, params + lo.b, B,
	               H, K, 0);
	if (cond == NULL)
		return 0;

	double sum;
	int right;
	xent(&sum, &right, grad ? w->dlogits : NULL, w->logits, cond, 1.0f / B,
	     B, K);
	if (loss)
		*loss = sum / B;
	if (acc)
		*acc = (double)right / B;
	if (grad == NULL)
		return 0;
	cg_loss_scale_apply(w->dlogits, (size_t)B * K);
	mlp_backward(c, params, w, in, B, grad, NULL);
	trunk_backward(params, w, x, B, grad, NULL);
	return 0;
}

/* ------------------------------------------------------- distillation */

int
cg_cclf_distill_forward_backward(const struct cg_cclf_config *c,
                                 const float *params, struct cg_cclf_ws *w,
                                 const float *x, const int *cond,
                                 const float *tlogp, double alpha, double tau,
                                 int B, float *grad, double *loss, double *acc,
                                 double *data, double *teacher)
{
	const int K = c->ncond;
	double sum, kl = 0;
	int right;

	if (!(tau > 0) || !(alpha >= 0 && alpha <= 1))
		return cg_seterr(
		    "cclf: temperature %g or teacher weight %g out "
		    "of range",
		    tau, alpha);
	if (cond == NULL)
		return cg_seterr("cclf: distillation needs the conditions");
	/* the forward pass alone, checked */
	if (cg_cclf_forward_backward(c, params, w, x, cond, B, NULL, NULL,
	                             NULL) != 0)
		return -1;
	/* The data term's gradient as plain training writes it, at weight
	 * (1 - alpha) / B: (1 - 0) / B is 1 / B, so alpha 0 is plain
	 * training to the bit.  Then the teacher term's, added. */
	xent(&sum, &right, grad ? w->dlogits : NULL, w->logits, cond,
	     (1.0f - (float)alpha) / (float)B, B, K);
	cg_distill_kl_forward_backward(
	    w->kl, grad && alpha != 0 ? w->dlogits : NULL, w->logits, tlogp,
	    (float)(alpha * tau / B), (float)tau, (size_t)B, K);
	for (int b = 0; b < B; b++)
		kl += w->kl[b];
	kl *= tau * tau / B;
	if (data)
		*data = sum / B;
	if (teacher)
		*teacher = kl;
	if (loss)
		*loss = (1.0 - alpha) * (sum / B) + alpha * kl;
	if (acc)
		*acc = (double)right / B;
	if (grad == NULL)
		return 0;
	cg_loss_scale_apply(w->dlogits, (size_t)B * K);
	const float *in = w->t.stages ? w->act[w->t.stages - 1] : x;
	mlp_backward(c, params, w, in, B, grad, NULL);
	trunk_backward(params, w, x, B, grad, NULL);
	return 0;
}
