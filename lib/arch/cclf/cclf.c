/*
 * arch/cclf/cclf.c - the image classifier: layout, init, forward, backward.
 *
 * The model of cclf.h on the kernels of nn.c, built as lib/arch/cvae/cvae.c
 * builds its MLPs: the layout is a closed-form function of the config
 * (linear_at), the workspace holds every activation of a batch of up to
 * max_batch examples in one allocation, and hidden activations are kept after
 * ReLU, which is all that backward needs.  The softmax cross-entropy is
 * computed per row from the largest logit, its sum in double.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cclf/cclf.h"
#include "core/arena.h"
#include "nn/nn.h"

/* ---------------------------------------------------------------- layout */

/* One Linear layer: weight at w [out, in], bias at b [out]. */
struct linear {
	size_t w, b;
	int in, out;
};

/* The idx-th Linear layer in buffer order: hidden 0..L-1, output L.
 * c is valid. */
static struct linear
linear_at(const struct cg_cclf_config *c, int idx)
{
	size_t D = c->in_dim, H = c->hidden, i = idx;
	struct linear ln;

	ln.in = i == 0 ? c->in_dim : c->hidden;
	ln.out = i < (size_t)c->layers ? c->hidden : c->ncond;
	ln.w = i == 0 ? 0 : H * D + H + (i - 1) * (H * H + H);
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
	/* Every field at most 2^20: no wrap below 2^63. */
	uint64_t D = c->in_dim, K = c->ncond, H = c->hidden, L = c->layers;
	uint64_t n = H * D + H + (L - 1) * (H * H + H) + K * H + K;

	if (n > CG_CCLF_MAX_PARAMS || n > SIZE_MAX / sizeof(float))
		return cg_seterr("cclf: %llu parameters: more than %llu",
		                 (unsigned long long)n,
		                 (unsigned long long)CG_CCLF_MAX_PARAMS);
	return 0;
}

size_t
cg_cclf_nparams(const struct cg_cclf_config *c)
{
	if (cg_cclf_check_config(c) != 0)
		return 0;
	struct linear ln = linear_at(c, c->layers);
	return ln.b + ln.out;
}

int
cg_cclf_views(const struct cg_cclf_config *c, struct cg_view *v, int max)
{
	int n;

	if (cg_cclf_check_config(c) != 0)
		return -1;
	n = 2 * (c->layers + 1);
	if (max < n)
		return cg_seterr("cclf: %d views do not fit in %d", n, max);
	for (int i = 0; i <= c->layers; i++) {
		struct linear ln = linear_at(c, i);
		char layer[32];

		if (i < c->layers)
			snprintf(layer, sizeof(layer), "hid.%d", i);
		else
			snprintf(layer, sizeof(layer), "out");
		cg_view_linear(&v[2 * i], layer, ln.w, ln.b, ln.out, ln.in);
	}
	return n;
}

void
cg_cclf_init(const struct cg_cclf_config *c, float *params, struct cg_rng *r)
{
	if (cg_cclf_check_config(c) != 0)
		return;
	for (int i = 0; i <= c->layers; i++) {
		struct linear ln = linear_at(c, i);
		float bound = 1.0f / sqrtf((float)ln.in);
		size_t n = (size_t)ln.out * ln.in + ln.out; /* W then b */

		for (size_t j = 0; j < n; j++)
			params[ln.w + j] =
			    (2.0f * cg_rng_uniform(r) - 1.0f) * bound;
	}
}

/* ------------------------------------------------------------- workspace */

struct cg_cclf_ws {
	struct cg_cclf_config c;
	int max_batch;
	float *mem;
	/* Each [max_batch, width]; the first B rows are used. */
	float *h;       /* [layers][B, hidden], after ReLU */
	float *logits;  /* [B, ncond] */
	float *dlogits; /* [B, ncond] */
	float *dh;      /* [B, hidden] */
	float *tmp;     /* [B, hidden] */
};

/* The workspace's buffers in struct order, in arena a (counting, then
 * assigning: core/arena.h). */
static void
lay(void *ws, struct cg_arena *a)
{
	struct cg_cclf_ws *w = ws;
	size_t B = w->max_batch, K = w->c.ncond, H = w->c.hidden;

	w->h = CG_ARENA_FLOATS(a, B, (size_t)w->c.layers * H);
	w->logits = CG_ARENA_FLOATS(a, B, K);
	w->dlogits = CG_ARENA_FLOATS(a, B, K);
	w->dh = CG_ARENA_FLOATS(a, B, H);
	w->tmp = CG_ARENA_FLOATS(a, B, H);
}

struct cg_cclf_ws *
cg_cclf_ws_new(const struct cg_cclf_config *c, int max_batch)
{
	struct cg_cclf_ws *w;
	struct cg_arena a;

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
	if (cg_arena_make(&a, lay, w, "cclf", max_batch) != 0) {
		free(w);
		return NULL;
	}
	w->mem = (float *)a.base;
	return w;
}

void
cg_cclf_ws_free(struct cg_cclf_ws *w)
{
	if (w == NULL)
		return;
	free(w->mem);
	free(w);
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
	    c->hidden != w->c.hidden || c->layers != w->c.layers)
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

int
cg_cclf_forward_backward(const struct cg_cclf_config *c, const float *params,
                         struct cg_cclf_ws *w, const float *x, const int *cond,
                         int B, float *grad, double *loss, double *acc)
{
	const int L = c->layers, H = c->hidden, K = c->ncond;
	const size_t stride = (size_t)w->max_batch * H;

	if (check_call(c, w, cond, B, grad) != 0)
		return -1;
	for (int l = 0; l < L; l++) {
		struct linear ln = linear_at(c, l);
		float *out = w->h + l * stride;

		cg_linear_relu_forward(out, l == 0 ? x : out - stride,
		                       params + ln.w, params + ln.b, B, ln.in,
		                       ln.out);
	}
	const float *top = w->h + (L - 1) * stride;
	struct linear lo = linear_at(c, L);
	cg_linear_forward(w->logits, top, params + lo.w, params + lo.b, B, H,
	                  K);
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
	cg_linear_backward_set(w->dh, grad + lo.w, grad + lo.b, w->dlogits, top,
	                       params + lo.w, B, H, K);
	for (int l = L - 1; l >= 0; l--) {
		struct linear ln = linear_at(c, l);
		const float *out = w->h + l * stride;

		cg_linear_relu_backward(l > 0 ? w->dh : NULL, grad + ln.w,
		                        grad + ln.b, w->tmp, w->dh, out,
		                        l > 0 ? out - stride : x, params + ln.w,
		                        B, ln.in, ln.out);
	}
	return 0;
}
