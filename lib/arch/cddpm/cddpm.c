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
 * are its coefficients rounded once.  The U-Net (unet > 0) has its own
 * layout (unet_of), init and passes (unet_*), and shares the embeddings,
 * the loss and the samplers with the MLP; its workspace keeps every map
 * of the forward pass and one gradient per map, which the backward pass
 * clears and then accumulates into (a map read twice, a skip, sums both
 * readers' gradients).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cddpm/cddpm.h"
#include "core/arena.h"
#include "core/par.h"
#include "nn/conv.h"
#include "nn/gemm.h"
#include "nn/nn.h"
#include "nn/qlinear.h"

/* Floats of unfolded input the convolutions may take at once (16 MiB). */
#define COL_BUDGET ((size_t)1 << 22)

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

/* ---------------------------------------------------------- U-Net layout */

/* The residual blocks, in buffer order. */
enum { RB_D0, RB_D1, RB_D2, RB_MID, RB_U2, RB_U1, RB_U0, NRB };

/* The maps of the forward pass, each [B, positions of its level,
 * channels]: what each block reads and writes, and between them. */
enum {
	M_H0, /* in * x_t */
	M_S0, /* down.0 */
	M_P1, /* ds.1 */
	M_S1, /* down.1 */
	M_P2, /* ds.2 */
	M_S2, /* down.2 */
	M_M,  /* mid */
	M_A,  /* attn(mid), with attn */
	M_K2, /* cat(mid or attn(mid), s2) */
	M_U2, /* up.2 */
	M_V1, /* up-sampled u2 */
	M_K1, /* cat(v1, s1) */
	M_U1, /* up.1 */
	M_V0, /* up-sampled u1 */
	M_K0, /* cat(v0, s0) */
	M_U0, /* up.0 */
	NMAP
};

/* Each map's level (0: H x W, 1: H/2, 2: H/4) and channels over C. */
static const struct {
	int level, mult;
} map_spec[NMAP] = {{0, 1}, {0, 1}, {1, 1}, {1, 2}, {2, 2}, {2, 2},
                    {2, 2}, {2, 2}, {2, 4}, {2, 2}, {1, 2}, {1, 4},
                    {1, 2}, {0, 2}, {0, 3}, {0, 1}};

/* Each block's name, input and output map. */
static const struct {
	const char *name;
	int in, out;
} rb_spec[NRB] = {{"down.0", M_H0, M_S0}, {"down.1", M_P1, M_S1},
                  {"down.2", M_P2, M_S2}, {"mid", M_S2, M_M},
                  {"up.2", M_K2, M_U2},   {"up.1", M_K1, M_U1},
                  {"up.0", M_K0, M_U0}};

/* A residual block's shapes and where its tensors are. */
struct rb {
	int in, out, G1, G2, P; /* channels, groups of n1 and n2, positions */
	struct cg_conv c1, c2, sk; /* sk (1x1) where in != out */
	size_t n1g, n1b, c1w, c1b, ew, eb, n2g, n2b, c2w, c2b, skw, skb;
};

/* The whole U-Net: its sizes, convolutions, blocks and tensors. */
struct unet {
	int C, ch, E;         /* channels of level 0, image, embedding */
	int H[3], W[3], P[3]; /* each level's sides and positions */
	int Go;               /* groups of the output norm */
	int attn, Ga;         /* self-attention, its norm's groups */
	int film, ne;         /* scale-shift by e; e's width over out */
	struct cg_conv cin, ds1, ds2, cout;
	struct rb rb[NRB];
	size_t inw, inb, ds1w, ds1b, ds2w, ds2b, ong, onb, outw, outb, end;
	size_t ang, anb, aqw, aqb, apw, apb; /* attn's */
};

/* The groups of a norm over n channels: the most, up to 8, of at least
 * 4 channels each (1 below 8 channels), so that the embedding added
 * per channel before a norm does not vanish in it. */
static int
groups(int n)
{
	for (int g = 8; g > 1; g--)
		if (n % g == 0 && n / g >= 4)
			return g;
	return 1;
}

/* Channels of map i. */
static int
map_ch(const struct unet *u, int i)
{
	return map_spec[i].mult * u->C;
}

/* Floats of map i for one example (0 for attn's without it). */
static size_t
map_size(const struct unet *u, int i)
{
	if (i == M_A && !u->attn)
		return 0;
	return (size_t)u->P[map_spec[i].level] * map_ch(u, i);
}

/* The U-Net of c (unet > 0); -1 (no message) where the image does not
 * make one. */
static int
unet_of(const struct cg_cddpm_config *c, struct unet *u)
{
	const int C = c->unet, H = c->height, W = c->width, ch = c->channels;
	size_t o = emb_off(c) + ((size_t)c->ncond + 1) * c->hidden;

	memset(u, 0, sizeof(*u));
	if (C < 1 || C > CG_CDDPM_MAX_UNET || H < 4 || W < 4 || H % 4 ||
	    W % 4 || ch < 1 || (int64_t)H * W * ch != c->in_dim)
		return -1;
	u->C = C, u->ch = ch, u->E = c->hidden;
	for (int l = 0; l < 3; l++) {
		u->H[l] = H >> l, u->W[l] = W >> l;
		u->P[l] = u->H[l] * u->W[l];
	}
	u->Go = groups(C);
	u->attn = c->attn;
	u->Ga = groups(2 * C);
	u->film = c->film;
	u->ne = c->film ? 2 : 1;
	if (cg_conv_shape(&u->cin, ch, H, W, C, 3, 1, 1) != 0 ||
	    cg_conv_shape(&u->ds1, C, H, W, C, 3, 2, 1) != 0 ||
	    cg_conv_shape(&u->ds2, 2 * C, H / 2, W / 2, 2 * C, 3, 2, 1) != 0 ||
	    cg_conv_shape(&u->cout, C, H, W, ch, 3, 1, 1) != 0)
		return -1;
#define TAKE(f, k) (f = o, o += (size_t)(k))
	TAKE(u->inw, cg_conv_wsize(&u->cin));
	TAKE(u->inb, C);
	for (int i = 0; i < NRB; i++) {
		struct rb *k = &u->rb[i];
		const int l = map_spec[rb_spec[i].out].level;

		k->in = map_ch(u, rb_spec[i].in);
		k->out = map_ch(u, rb_spec[i].out);
		k->G1 = groups(k->in), k->G2 = groups(k->out);
		k->P = u->P[l];
		if (cg_conv_shape(&k->c1, k->in, u->H[l], u->W[l], k->out, 3, 1,
		                  1) != 0 ||
		    cg_conv_shape(&k->c2, k->out, u->H[l], u->W[l], k->out, 3,
		                  1, 1) != 0 ||
		    (k->in != k->out &&
		     cg_conv_shape(&k->sk, k->in, u->H[l], u->W[l], k->out, 1,
		                   1, 0) != 0))
			return -1;
		/* The down-sampling convolution before the block's level. */
		if (i == RB_D1) {
			TAKE(u->ds1w, cg_conv_wsize(&u->ds1));
			TAKE(u->ds1b, C);
		} else if (i == RB_D2) {
			TAKE(u->ds2w, cg_conv_wsize(&u->ds2));
			TAKE(u->ds2b, 2 * C);
		}
		TAKE(k->n1g, k->in);
		TAKE(k->n1b, k->in);
		TAKE(k->c1w, cg_conv_wsize(&k->c1));
		TAKE(k->c1b, k->out);
		TAKE(k->ew, (size_t)u->ne * k->out * u->E);
		TAKE(k->eb, (size_t)u->ne * k->out);
		TAKE(k->n2g, k->out);
		TAKE(k->n2b, k->out);
		TAKE(k->c2w, cg_conv_wsize(&k->c2));
		TAKE(k->c2b, k->out);
		if (k->in != k->out) {
			TAKE(k->skw, cg_conv_wsize(&k->sk));
			TAKE(k->skb, k->out);
		}
		if (i == RB_MID && u->attn) {
			const size_t d = 2 * (size_t)C;
			TAKE(u->ang, d);
			TAKE(u->anb, d);
			TAKE(u->aqw, 3 * d * d);
			TAKE(u->aqb, 3 * d);
			TAKE(u->apw, d * d);
			TAKE(u->apb, d);
		}
	}
	TAKE(u->ong, C);
	TAKE(u->onb, C);
	TAKE(u->outw, cg_conv_wsize(&u->cout));
	TAKE(u->outb, ch);
#undef TAKE
	u->end = o;
	return 0;
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
	if (c->unet < 0 || c->unet > CG_CDDPM_MAX_UNET)
		return cg_seterr("cddpm: unet = %d: not in [0, %d]", c->unet,
		                 CG_CDDPM_MAX_UNET);
	if (c->attn != 0 && c->attn != 1)
		return cg_seterr("cddpm: attn = %d: not 0 or 1", c->attn);
	if (c->attn && !c->unet)
		return cg_seterr("cddpm: attn without a U-Net");
	if (c->film != 0 && c->film != 1)
		return cg_seterr("cddpm: film = %d: not 0 or 1", c->film);
	if (c->cosine != 0 && c->cosine != 1)
		return cg_seterr("cddpm: cosine = %d: not 0 or 1", c->cosine);
	if (c->unet) {
		struct unet u;

		if (unet_of(c, &u) != 0)
			return cg_seterr("cddpm: images of %dx%dx%d for %d "
			                 "inputs: the U-Net wants them so, "
			                 "sides multiples of 4",
			                 c->height, c->width, c->channels,
			                 c->in_dim);
		if (u.end > CG_CDDPM_MAX_PARAMS ||
		    u.end > SIZE_MAX / sizeof(float))
			return cg_seterr(
			    "cddpm: %llu parameters: more than "
			    "%llu",
			    (unsigned long long)u.end,
			    (unsigned long long)CG_CDDPM_MAX_PARAMS);
		return 0;
	}
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
	if (c->unet) {
		struct unet u;

		unet_of(c, &u);
		return u.end;
	}
	struct linear ln = linear_at(c, c->layers + 1);
	return ln.b + ln.out;
}

/* A group norm's views: NAME.g and NAME.b [n], no decay. */
static void
norm_views(struct cg_view *v, const char *layer, size_t g, size_t b, int n)
{
	char name[sizeof(v->name)];

	snprintf(name, sizeof(name), "%s.g", layer);
	cg_view_set(&v[0], name, g, (size_t)n, 0, 0);
	snprintf(name, sizeof(name), "%s.b", layer);
	cg_view_set(&v[1], name, b, (size_t)n, 0, 0);
}

/* The U-Net's views after the embeddings' 3, from v[3]; the count. */
static int
unet_views(const struct cg_cddpm_config *c, struct cg_view *v)
{
	struct unet u;
	char name[64];
	int n = 3;

	unet_of(c, &u);
	cg_view_conv(&v[n], "in", u.inw, u.inb, &u.cin);
	n += 2;
	for (int i = 0; i < NRB; i++) {
		const struct rb *k = &u.rb[i];
		const char *b = rb_spec[i].name;

		if (i == RB_D1 || i == RB_D2) {
			cg_view_conv(&v[n], i == RB_D1 ? "ds.1" : "ds.2",
			           i == RB_D1 ? u.ds1w : u.ds2w,
			           i == RB_D1 ? u.ds1b : u.ds2b,
			           i == RB_D1 ? &u.ds1 : &u.ds2);
			n += 2;
		}
		snprintf(name, sizeof(name), "%s.n1", b);
		norm_views(&v[n], name, k->n1g, k->n1b, k->in);
		snprintf(name, sizeof(name), "%s.c1", b);
		cg_view_conv(&v[n + 2], name, k->c1w, k->c1b, &k->c1);
		snprintf(name, sizeof(name), "%s.emb", b);
		cg_view_linear(&v[n + 4], name, k->ew, k->eb, u.ne * k->out,
		               u.E);
		snprintf(name, sizeof(name), "%s.n2", b);
		norm_views(&v[n + 6], name, k->n2g, k->n2b, k->out);
		snprintf(name, sizeof(name), "%s.c2", b);
		cg_view_conv(&v[n + 8], name, k->c2w, k->c2b, &k->c2);
		n += 10;
		if (k->in != k->out) {
			snprintf(name, sizeof(name), "%s.skip", b);
			cg_view_conv(&v[n], name, k->skw, k->skb, &k->sk);
			n += 2;
		}
		if (i == RB_MID && u.attn) {
			const int d = 2 * u.C;
			norm_views(&v[n], "attn.n", u.ang, u.anb, d);
			cg_view_linear(&v[n + 2], "attn.qkv", u.aqw, u.aqb,
			               3 * d, d);
			cg_view_linear(&v[n + 4], "attn.proj", u.apw, u.apb, d,
			               d);
			n += 6;
		}
	}
	norm_views(&v[n], "out.n", u.ong, u.onb, u.C);
	cg_view_conv(&v[n + 2], "out", u.outw, u.outb, &u.cout);
	return n + 4;
}

int
cg_cddpm_views(const struct cg_cddpm_config *c, struct cg_view *v, int max)
{
	int n = 0;

	if (cg_cddpm_check_config(c) != 0)
		return -1;
	if (c->unet) {
		struct linear lt = linear_at(c, 0);

		const int nv =
		    CG_CDDPM_UNET_VIEWS + c->attn * CG_CDDPM_ATTN_VIEWS;
		if (max < nv)
			return cg_seterr("cddpm: %d views do not fit in %d", nv,
			                 max);
		cg_view_linear(&v[0], "time", lt.w, lt.b, lt.out, lt.in);
		cg_view_set(&v[2], "cond.emb", emb_off(c), (size_t)c->ncond + 1,
		            c->hidden, 0);
		return unet_views(c, v);
	}
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

/* A convolution's weight and bias (they follow each other) as a Linear
 * of fan-in C KH KW. */
static void
init_conv(float *params, size_t w, const struct cg_conv *cv, struct cg_rng *r)
{
	cg_init_uniform(params + w, cg_conv_wsize(cv) + cv->OC,
	             (size_t)cv->C * cv->KH * cv->KW, r);
}

/* A group norm: scale 1, shift 0. */
static void
init_norm(float *params, size_t g, size_t b, int n)
{
	for (int j = 0; j < n; j++) {
		params[g + j] = 1;
		params[b + j] = 0;
	}
}

/* The U-Net's tensors after the embeddings, in buffer order. */
static void
unet_init(const struct cg_cddpm_config *c, float *params, struct cg_rng *r)
{
	struct unet u;

	unet_of(c, &u);
	init_conv(params, u.inw, &u.cin, r);
	for (int i = 0; i < NRB; i++) {
		const struct rb *k = &u.rb[i];

		if (i == RB_D1)
			init_conv(params, u.ds1w, &u.ds1, r);
		else if (i == RB_D2)
			init_conv(params, u.ds2w, &u.ds2, r);
		init_norm(params, k->n1g, k->n1b, k->in);
		init_conv(params, k->c1w, &k->c1, r);
		cg_init_uniform(params + k->ew,
		                (size_t)u.ne * k->out * (u.E + 1), (size_t)u.E,
		                r);
		init_norm(params, k->n2g, k->n2b, k->out);
		init_conv(params, k->c2w, &k->c2, r);
		if (k->in != k->out)
			init_conv(params, k->skw, &k->sk, r);
		if (i == RB_MID && u.attn) {
			const size_t d = 2 * (size_t)u.C;
			init_norm(params, u.ang, u.anb, (int)d);
			cg_init_uniform(params + u.aqw, 3 * d * d + 3 * d, d, r);
			cg_init_uniform(params + u.apw, d * d + d, d, r);
		}
	}
	init_norm(params, u.ong, u.onb, u.C);
	init_conv(params, u.outw, &u.cout, r);
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
			if (c->unet) {
				unet_init(c, params, r);
				return;
			}
		}
	}
}

/* Nichol and Dhariwal's f(u) = cos^2((u + s) / (1 + s) pi / 2), s =
 * 0.008, at u = t / T in [0, 1]. */
static double
cosine_f(double u)
{
	const double s = 0.008, q = cos((u + s) / (1 + s) * M_PI / 2);

	return q * q;
}

void
cg_cddpm_schedule(const struct cg_cddpm_config *c, double *abar)
{
	const int T = c->timesteps;
	const double lo = 1e-4 * 1000.0 / T, hi = 0.02 * 1000.0 / T;
	double a = 1;

	for (int t = 0; t < T; t++) {
		double beta = lo + (hi - lo) * t / (T - 1);

		/* abar_t = f((t + 1) / T) / f(0) through the betas, so
		 * that the clip (f(1) = 0 would give beta 1 and abar 0)
		 * carries on to every later step */
		if (c->cosine)
			beta = fmin(1 - cosine_f((double)(t + 1) / T) /
			                    cosine_f((double)t / T),
			            CG_CDDPM_COSINE_MAX_BETA);
		a *= 1 - beta;
		abar[t] = a;
	}
}

/* ------------------------------------------------------------- workspace */

/* The slots of the time encodings a workspace keeps (tenc, below): every
 * timestep's where there are at most 1024. */
#define TSLOTS_MAX 1024
static size_t
tslots(const struct cg_cddpm_config *c)
{
	return c->timesteps < TSLOTS_MAX ? (size_t)c->timesteps : TSLOTS_MAX;
}

struct cg_cddpm_ws {
	struct cg_cddpm_config c;
	int max_batch;
	/* Checkpointed (a U-Net's only): act[] share one set, the largest
	 * block's, which holds block held's (-1: none); the backward pass
	 * recomputes a block's into it from the block's input map. */
	int ckpt, held;
	void *mem;
	double *abar; /* [T] */
	/* Each [max_batch, width]; the first B rows are used. */
	float *temb; /* [B, embed]: sin_emb(t) */
	/* sin_emb(t) of the last timestep t seen in each slot t % tslots()
	 * (tslot[s] = t + 1; 0: none yet), so that a step copies the
	 * encodings of timesteps seen before: they cost a sine and a cosine
	 * in double an element, on one thread, a tenth of a step once */
	float *tenc;  /* [TSLOTS, embed] */
	int *tslot;   /* [TSLOTS] */
	double *rsum; /* [2][B]: the loss's sums, row by row */
	float *emb;  /* [B, hidden]: time and condition embedding */
	float *xt;   /* [B, in_dim]: the network's input */
	float *h;    /* [layers][B, hidden], after ReLU */
	float *out;  /* [B, in_dim]: eps_hat (v, then eps from it) */
	float *dout; /* [B, in_dim]; the sampler's x */
	float *dh;   /* [B, hidden] */
	float *dpre; /* [B, hidden] */
	float *demb; /* [B, hidden] */
	int *ibuf;   /* [2][B]: the sampler's conditions and timesteps */
	/* The U-Net (unet > 0; else every size 0). */
	struct unet u;
	float *es, *des;               /* [B, hidden]: silu(emb), its grad */
	float *map[NMAP], *dmap[NMAP]; /* [B, map_size] */
	struct rb_act {
		float *n1, *a1;      /* [B, P, in]: GN1, then SiLU */
		float *h1, *n2, *a2; /* [B, P, out]: conv1 (+ e), GN2, SiLU */
		float *f;            /* [B, P, out]: GN2 scaled and shifted */
		float *e;            /* [B, out], with film [B, 2 out] */
		float *m1, *r1, *m2, *r2; /* [B, G1] and [B, G2] */
	} act[NRB];
	float *on, *oa;      /* [B, H W, C]: the output's norm, then SiLU */
	float *om, *orstd;   /* [B, Go] */
	float *t1, *t2, *t3; /* [B, the largest block's map]: scratch */
	float *de;           /* [B, 2C], with film [B, 4C] */
	/* Self-attention (attn; else empty), P = H/4 W/4 positions, d = 2C. */
	float *an, *am, *ar; /* [B, P, d]: its norm; [B, Ga] */
	float *qkv, *dqkv;   /* [B, P, 3d] */
	float *att;          /* [B, P, P]: softmax(q k^T / sqrt(d)) */
	float *ao;           /* [B, P, d]: att v */
	float *datt;         /* [P, P] */
	float *col;          /* [ncol] */
	size_t ncol;
	struct cg_wset ks; /* the weights as stored (cg_cddpm_ws_set_mats) */
};

/* One block's activations in arena a for B examples: Pi and Po floats
 * of its input's and output's size, E of e's, G1 and G2 groups. */
static void
rb_lay(struct rb_act *ac, struct cg_arena *a, size_t B, size_t Pi, size_t Po,
       size_t E, size_t G1, size_t G2, int film)
{
	ac->n1 = CG_ARENA_FLOATS(a, B, Pi);
	ac->a1 = CG_ARENA_FLOATS(a, B, Pi);
	ac->h1 = CG_ARENA_FLOATS(a, B, Po);
	ac->n2 = CG_ARENA_FLOATS(a, B, Po);
	ac->a2 = CG_ARENA_FLOATS(a, B, Po);
	ac->f = CG_ARENA_FLOATS(a, B, film ? Po : 0);
	ac->e = CG_ARENA_FLOATS(a, B, E);
	ac->m1 = CG_ARENA_FLOATS(a, B, G1);
	ac->r1 = CG_ARENA_FLOATS(a, B, G1);
	ac->m2 = CG_ARENA_FLOATS(a, B, G2);
	ac->r2 = CG_ARENA_FLOATS(a, B, G2);
}

/* The workspace's buffers, in arena a (counting, then assigning:
 * core/arena.h): the schedule's T doubles and the 2B ints first. */
static void
lay(void *ws, struct cg_arena *a)
{
	struct cg_cddpm_ws *w = ws;
	const struct cg_cddpm_config *c = &w->c;
	size_t B = w->max_batch, D = c->in_dim, H = c->hidden, E = c->embed;
	/* The MLP's layers (none for the U-Net), the U-Net's embedding. */
	size_t L = c->unet ? 0 : c->layers, MH = c->unet ? 0 : H;
	size_t UH = c->unet ? H : 0;
	const struct unet *u = &w->u;

	w->abar = cg_arena_take(a, (size_t)c->timesteps, 1, sizeof(double));
	w->ibuf = cg_arena_take(a, 2, B, sizeof(int));
	w->temb = CG_ARENA_FLOATS(a, B, E);
	w->tenc = CG_ARENA_FLOATS(a, tslots(c), E);
	w->tslot = cg_arena_take(a, tslots(c), 1, sizeof(int));
	w->rsum = cg_arena_take(a, 2, B, sizeof(double));
	w->emb = CG_ARENA_FLOATS(a, B, H);
	w->xt = CG_ARENA_FLOATS(a, B, D);
	w->h = CG_ARENA_FLOATS(a, B, L * H);
	w->out = CG_ARENA_FLOATS(a, B, D);
	w->dout = CG_ARENA_FLOATS(a, B, D);
	w->dh = CG_ARENA_FLOATS(a, B, MH);
	w->dpre = CG_ARENA_FLOATS(a, B, MH);
	w->demb = CG_ARENA_FLOATS(a, B, H);

	/* The U-Net's maps and blocks: all of size 0 without one. */
	size_t big = (size_t)u->P[0] * u->C;
	w->es = CG_ARENA_FLOATS(a, B, UH);
	w->des = CG_ARENA_FLOATS(a, B, UH);
	for (int i = 0; i < NMAP; i++) {
		w->map[i] = CG_ARENA_FLOATS(a, B, map_size(u, i));
		w->dmap[i] = CG_ARENA_FLOATS(a, B, map_size(u, i));
	}
	/* Each block's activations; checkpointed, one set of the largest
	 * sizes that every block's pointers share. */
	size_t mPi = 0, mPo = 0, mE = 0, mG1 = 0, mG2 = 0;
	for (int i = 0; i < NRB; i++) {
		const struct rb *k = &u->rb[i];
		size_t Pi = (size_t)k->P * k->in, Po = (size_t)k->P * k->out;

		if (!w->ckpt)
			rb_lay(&w->act[i], a, B, Pi, Po, (size_t)u->ne * k->out,
			       k->G1, k->G2, u->film);
		mPi = Pi > mPi ? Pi : mPi;
		mPo = Po > mPo ? Po : mPo;
		mE = (size_t)u->ne * k->out > mE ? (size_t)u->ne * k->out : mE;
		mG1 = (size_t)k->G1 > mG1 ? (size_t)k->G1 : mG1;
		mG2 = (size_t)k->G2 > mG2 ? (size_t)k->G2 : mG2;
		if (Pi > big)
			big = Pi;
		if (Po > big)
			big = Po;
	}
	if (w->ckpt) {
		rb_lay(&w->act[0], a, B, mPi, mPo, mE, mG1, mG2, u->film);
		for (int i = 1; i < NRB; i++)
			w->act[i] = w->act[0];
	}
	w->on = CG_ARENA_FLOATS(a, B, (size_t)u->P[0] * u->C);
	w->oa = CG_ARENA_FLOATS(a, B, (size_t)u->P[0] * u->C);
	w->om = CG_ARENA_FLOATS(a, B, (size_t)u->Go);
	w->orstd = CG_ARENA_FLOATS(a, B, (size_t)u->Go);
	w->t1 = CG_ARENA_FLOATS(a, B, big);
	w->t2 = CG_ARENA_FLOATS(a, B, big);
	w->t3 = CG_ARENA_FLOATS(a, B, big);
	w->de = CG_ARENA_FLOATS(a, B, (size_t)2 * u->ne * u->C);
	size_t AP = u->attn ? (size_t)u->P[2] : 0, Ad = 2 * (size_t)u->C;
	w->an = CG_ARENA_FLOATS(a, B, AP * Ad);
	w->am = CG_ARENA_FLOATS(a, B, u->attn ? (size_t)u->Ga : 0);
	w->ar = CG_ARENA_FLOATS(a, B, u->attn ? (size_t)u->Ga : 0);
	w->qkv = CG_ARENA_FLOATS(a, B, AP * 3 * Ad);
	w->dqkv = CG_ARENA_FLOATS(a, B, AP * 3 * Ad);
	w->att = CG_ARENA_FLOATS(a, B, AP * AP);
	w->ao = CG_ARENA_FLOATS(a, B, AP * Ad);
	w->datt = CG_ARENA_FLOATS(a, AP, AP);
	w->col = CG_ARENA_FLOATS(a, w->ncol, 1);
}

/* A workspace's struct for batches of up to max_batch, its arena not
 * laid out; NULL with a message. */
static struct cg_cddpm_ws *
ws_prep(const struct cg_cddpm_config *c, int max_batch, int checkpoint)
{
	struct cg_cddpm_ws *w;

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
	w->ckpt = checkpoint != 0 && c->unet > 0;
	w->held = -1;
	if (c->unet) {
		struct unet *u = &w->u;

		unet_of(c, u);
		const struct cg_conv *cv[4 + 2 * NRB] = {&u->cin, &u->ds1,
		                                         &u->ds2, &u->cout};
		for (int i = 0; i < NRB; i++) {
			cv[4 + 2 * i] = &u->rb[i].c1;
			cv[5 + 2 * i] = &u->rb[i].c2;
		}
		for (int i = 0; i < 4 + 2 * NRB; i++) {
			size_t k =
			    cg_conv_scratch(cv[i], max_batch, COL_BUDGET);
			if (k > w->ncol)
				w->ncol = k;
		}
	}
	return w;
}

struct cg_cddpm_ws *
cg_cddpm_ws_new(const struct cg_cddpm_config *c, int max_batch, int checkpoint)
{
	struct cg_cddpm_ws *w = ws_prep(c, max_batch, checkpoint);
	struct cg_arena a;

	if (w == NULL)
		return NULL;
	if (cg_arena_make(&a, lay, w, "cddpm", max_batch) != 0) {
		free(w);
		return NULL;
	}
	w->mem = (float *)a.base;
	cg_cddpm_schedule(c, w->abar);
	return w;
}

size_t
cg_cddpm_ws_bytes(const struct cg_cddpm_config *c, int max_batch,
                  int checkpoint)
{
	struct cg_cddpm_ws *w = ws_prep(c, max_batch, checkpoint);
	size_t n;

	if (w == NULL)
		return 0;
	n = cg_arena_bytes(lay, w, sizeof(*w), "cddpm", max_batch);
	free(w);
	return n;
}

void
cg_cddpm_ws_free(struct cg_cddpm_ws *w)
{
	if (w == NULL)
		return;
	cg_wset_free(&w->ks);
	free(w->mem);
	free(w);
}

int
cg_cddpm_ws_set_mats(struct cg_cddpm_ws *w, const struct cg_wmat *mats, int nv)
{
	const struct cg_cddpm_config *c = &w->c;
	const int n = c->unet
	                  ? CG_CDDPM_UNET_VIEWS + c->attn * CG_CDDPM_ATTN_VIEWS
	                  : 2 * c->layers + 5;
	/* the attention's products take every position of a batch */
	const int rows =
	    c->unet && c->attn ? w->max_batch * w->u.P[2] : w->max_batch;
	struct cg_view *v;
	struct cg_wset ks;

	if (mats != NULL && nv != n)
		return cg_seterr("cddpm: %d weights for %d views", nv, n);
	if ((v = calloc((size_t)n, sizeof(*v))) == NULL)
		return cg_seterr("cddpm: out of memory");
	if (cg_cddpm_views(c, v, n) < 0 ||
	    cg_wset_make(&ks, v, mats, n, rows) != 0) {
		free(v);
		return -1;
	}
	free(v);
	cg_wset_free(&w->ks);
	w->ks = ks;
	return 0;
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

/* w->emb [B, hidden] = time.w sin_emb(t) + time.b + cond.emb[cond]
 * (w->temb the encoding). */
static void
embed_forward(const struct cg_cddpm_config *c, const float *params,
              struct cg_cddpm_ws *w, const int *cond, const int *t, int B)
{
	const int E = c->embed, H = c->hidden, half = c->embed / 2;
	const float *cemb = params + emb_off(c);
	const size_t ns = tslots(c);

	for (int b = 0; b < B; b++) {
		const size_t k = (size_t)t[b] % ns;
		float *e = w->tenc + k * E;
		if (w->tslot[k] != t[b] + 1) {
			for (int i = 0; i < half; i++) {
				double f = exp(-log(10000.0) * i / half) * t[b];
				e[i] = (float)sin(f);
				e[half + i] = (float)cos(f);
			}
			w->tslot[k] = t[b] + 1;
		}
		memcpy(w->temb + (size_t)b * E, e, (size_t)E * sizeof(float));
	}
	struct linear lt = linear_at(c, 0);
	cg_wset_linear(&w->ks, w->emb, w->temb, params, lt.w, params + lt.b, B,
	               E, H, 0);
	PAR_FOR((size_t)B * H)
	for (int b = 0; b < B; b++)
		for (int j = 0; j < H; j++)
			w->emb[(size_t)b * H + j] +=
			    cemb[(size_t)cond[b] * H + j];
}

/* Its backward given w->demb [B, hidden]: grad of time and cond.emb +=. */
static void
embed_backward(const struct cg_cddpm_config *c, const float *params,
               struct cg_cddpm_ws *w, const int *cond, int B, float *grad)
{
	const int H = c->hidden;
	struct linear lt = linear_at(c, 0);

	cg_linear_backward(NULL, grad + lt.w, grad + lt.b, w->demb, w->temb,
	                   params + lt.w, B, c->embed, H);
	float *gemb = grad + emb_off(c);
	/* threads over columns: each element's sum in the order of b */
	PAR_FOR((size_t)B * H)
	for (int j0 = 0; j0 < H; j0 += 64) {
		const int m = H - j0 < 64 ? H - j0 : 64;
		for (int b = 0; b < B; b++) {
			float *g = gemb + (size_t)cond[b] * H + j0;
			const float *d = w->demb + (size_t)b * H + j0;
			for (int j = 0; j < m; j++)
				g[j] += d[j];
		}
	}
}

static void unet_forward(const float *params, struct cg_cddpm_ws *w, int B);

/* v_hat of the network on w->xt [B, in_dim] into w->out; every
 * activation backward needs stays in w. */
static void
forward(const struct cg_cddpm_config *c, const float *params,
        struct cg_cddpm_ws *w, const int *cond, const int *t, int B)
{
	const int H = c->hidden;
	const size_t stride = (size_t)w->max_batch * H;

	embed_forward(c, params, w, cond, t, B);
	if (c->unet) {
		unet_forward(params, w, B);
		return;
	}
	for (int l = 0; l < c->layers; l++) {
		struct linear ln = linear_at(c, l + 1);
		float *h = w->h + l * stride;

		/* h = relu((x W^T + b) + emb), in the product's pass */
		cg_wset_linear_add_relu(&w->ks, h, l == 0 ? w->xt : h - stride,
		                        params, ln.w, params + ln.b, w->emb, B,
		                        ln.in, ln.out);
	}
	struct linear lo = linear_at(c, c->layers + 1);
	cg_wset_linear(&w->ks, w->out, w->h + (c->layers - 1) * stride, params,
	               lo.w, params + lo.b, B, H, c->in_dim, 0);
}

/* ----------------------------------------------------------- U-Net passes */

/* The weights of convolution cv at params + off for a forward pass:
 * params', or w's as stored decoded (until the next one). */
#define WT(w, params, off, cv)                                                 \
	cg_wset_floats(&(w)->ks, (params), (off), cg_conv_wsize(cv))

/* Block i's activations from its input map, up to conv2's input a2,
 * into w->act[i] (checkpointed, the shared set: w->held = i).  The
 * backward pass of a checkpointed workspace runs it again, the very
 * arithmetic of the forward pass, so the activations are the same bits. */
static void
rb_acts(struct cg_cddpm_ws *w, const float *params, int i, int B)
{
	const struct unet *u = &w->u;
	const struct rb *k = &u->rb[i];
	struct rb_act *a = &w->act[i];
	const float *x = w->map[rb_spec[i].in];
	const size_t ni = (size_t)B * k->P * k->in;
	const size_t no = (size_t)B * k->P * k->out;

	cg_groupnorm_forward(a->n1, a->m1, a->r1, x, params + k->n1g,
	                     params + k->n1b, B, k->P, k->in, k->G1);
	cg_silu_forward(a->a1, a->n1, ni);
	cg_conv_forward(&k->c1, a->h1, a->a1, WT(w, params, k->c1w, &k->c1),
	                params + k->c1b, B, w->col, w->ncol);
	cg_wset_linear(&w->ks, a->e, w->es, params, k->ew, params + k->eb, B,
	               u->E, u->ne * k->out, 0);
	if (!u->film)
		cg_add_channel_forward(a->h1, a->e, B, k->P, k->out);
	cg_groupnorm_forward(a->n2, a->m2, a->r2, a->h1, params + k->n2g,
	                     params + k->n2b, B, k->P, k->out, k->G2);
	if (u->film) {
		cg_film_forward(a->f, a->n2, a->e, B, k->P, k->out);
		cg_silu_forward(a->a2, a->f, no);
	} else {
		cg_silu_forward(a->a2, a->n2, no);
	}
	w->held = i;
}

/* Block i on its input map into its output map (cddpm.h's RB); its
 * activations stay in w->act[i]. */
static void
rb_forward(struct cg_cddpm_ws *w, const float *params, int i, int B)
{
	const struct rb *k = &w->u.rb[i];
	const float *x = w->map[rb_spec[i].in];
	float *y = w->map[rb_spec[i].out];
	const size_t no = (size_t)B * k->P * k->out;

	rb_acts(w, params, i, B);
	cg_conv_forward(&k->c2, y, w->act[i].a2, WT(w, params, k->c2w, &k->c2),
	                params + k->c2b, B, w->col, w->ncol);
	if (k->in != k->out) {
		cg_conv_forward(&k->sk, w->t1, x, WT(w, params, k->skw, &k->sk),
		                params + k->skb, B, w->col, w->ncol);
		x = w->t1;
	}
	for (size_t j = 0; j < no; j++)
		y[j] += x[j];
}

/* Its backward given the gradient of its output map: its input map's
 * gradient +=, grad += for its tensors, w->des += for silu(emb). */
static void
rb_backward(struct cg_cddpm_ws *w, const float *params, int i, int B,
            float *grad)
{
	const struct unet *u = &w->u;
	const struct rb *k = &u->rb[i];
	const struct rb_act *a = &w->act[i];
	const float *x = w->map[rb_spec[i].in];
	const float *dy = w->dmap[rb_spec[i].out];
	float *dx = w->dmap[rb_spec[i].in];
	const size_t ni = (size_t)B * k->P * k->in;
	const size_t no = (size_t)B * k->P * k->out;

	/* Checkpointed: the shared set holds the last block of the
	 * forward pass (up.0) since then; the others recompute. */
	if (w->ckpt && w->held != i)
		rb_acts(w, params, i, B);
	if (k->in != k->out)
		cg_conv_backward(&k->sk, dx, grad + k->skw, grad + k->skb, dy,
		                 x, params + k->skw, B, w->col, w->ncol);
	else
		for (size_t j = 0; j < no; j++)
			dx[j] += dy[j];
	memset(w->t1, 0, no * sizeof(float));
	cg_conv_backward(&k->c2, w->t1, grad + k->c2w, grad + k->c2b, dy, a->a2,
	                 params + k->c2w, B, w->col, w->ncol);
	memset(w->t2, 0, no * sizeof(float));
	cg_silu_backward(w->t2, w->t1, u->film ? a->f : a->n2, no);
	memset(w->de, 0, (size_t)B * u->ne * k->out * sizeof(float));
	if (u->film) {
		/* w->t2 the gradient of the scaled map: GN2's output's, in
		 * w->t1, and e's. */
		memset(w->t1, 0, no * sizeof(float));
		cg_film_backward(w->t1, w->de, w->t2, a->n2, a->e, B, k->P,
		                 k->out);
	}
	memset(w->t3, 0, no * sizeof(float));
	cg_groupnorm_backward(w->t3, grad + k->n2g, grad + k->n2b,
	                      u->film ? w->t1 : w->t2, a->h1,
	                      params + k->n2g, a->m2, a->r2, B, k->P, k->out,
	                      k->G2);
	/* w->t3: the gradient of conv1's output (and, without film, of e
	 * at each position). */
	if (!u->film)
		cg_add_channel_backward(w->de, w->t3, B, k->P, k->out);
	cg_linear_backward(w->des, grad + k->ew, grad + k->eb, w->de, w->es,
	                   params + k->ew, B, u->E, u->ne * k->out);
	memset(w->t1, 0, ni * sizeof(float));
	cg_conv_backward(&k->c1, w->t1, grad + k->c1w, grad + k->c1b, w->t3,
	                 a->a1, params + k->c1w, B, w->col, w->ncol);
	memset(w->t2, 0, ni * sizeof(float));
	cg_silu_backward(w->t2, w->t1, a->n1, ni);
	cg_groupnorm_backward(dx, grad + k->n1g, grad + k->n1b, w->t2, x,
	                      params + k->n1g, a->m1, a->r1, B, k->P, k->in,
	                      k->G1);
}

/* Self-attention (cddpm.h's attn) on map M_M into M_A. */
static void
attn_forward(struct cg_cddpm_ws *w, const float *params, int B)
{
	const struct unet *u = &w->u;
	const int P = u->P[2], d = 2 * u->C, Q = 3 * d;
	const float scale = 1.0f / sqrtf((float)d);
	const float *x = w->map[M_M];
	float *y = w->map[M_A];

	cg_groupnorm_forward(w->an, w->am, w->ar, x, params + u->ang,
	                     params + u->anb, B, P, d, u->Ga);
	cg_wset_linear(&w->ks, w->qkv, w->an, params, u->aqw, params + u->aqb,
	               B * P, d, Q, 0);
	for (int b = 0; b < B; b++) {
		const float *q = w->qkv + (size_t)b * P * Q;
		float *A = w->att + (size_t)b * P * P;

		cg_sgemm(0, 1, P, P, d, scale, q, Q, q + d, Q, 0.0f, A, P);
		for (int i = 0; i < P; i++) {
			float *row = A + (size_t)i * P, mx = row[0];
			double sum = 0;
			for (int j = 1; j < P; j++)
				mx = row[j] > mx ? row[j] : mx;
			for (int j = 0; j < P; j++) {
				row[j] = expf(row[j] - mx);
				sum += row[j];
			}
			const float inv = (float)(1.0 / sum);
			for (int j = 0; j < P; j++)
				row[j] *= inv;
		}
		cg_sgemm(0, 0, P, d, P, 1.0f, A, P, q + 2 * d, Q, 0.0f,
		         w->ao + (size_t)b * P * d, d);
	}
	cg_wset_linear(&w->ks, y, w->ao, params, u->apw, params + u->apb, B * P,
	               d, d, 0);
	for (size_t j = 0; j < (size_t)B * P * d; j++)
		y[j] += x[j];
}

/* Its backward given M_A's gradient: M_M's +=, grad += for its tensors. */
static void
attn_backward(struct cg_cddpm_ws *w, const float *params, int B, float *grad)
{
	const struct unet *u = &w->u;
	const int P = u->P[2], d = 2 * u->C, Q = 3 * d;
	const size_t n = (size_t)B * P * d;
	const float scale = 1.0f / sqrtf((float)d);
	const float *dy = w->dmap[M_A];
	float *dx = w->dmap[M_M];

	for (size_t j = 0; j < n; j++)
		dx[j] += dy[j];
	/* w->t1: the gradient of att v. */
	memset(w->t1, 0, n * sizeof(float));
	cg_linear_backward(w->t1, grad + u->apw, grad + u->apb, dy, w->ao,
	                   params + u->apw, B * P, d, d);
	for (int b = 0; b < B; b++) {
		const float *q = w->qkv + (size_t)b * P * Q;
		const float *A = w->att + (size_t)b * P * P;
		const float *dO = w->t1 + (size_t)b * P * d;
		float *dq = w->dqkv + (size_t)b * P * Q, *dA = w->datt;

		/* dv = A^T dO, dA = dO v^T, then through the softmax. */
		cg_sgemm(1, 0, P, d, P, 1.0f, A, P, dO, d, 0.0f, dq + 2 * d, Q);
		cg_sgemm(0, 1, P, P, d, 1.0f, dO, d, q + 2 * d, Q, 0.0f, dA, P);
		for (int i = 0; i < P; i++) {
			const float *a = A + (size_t)i * P;
			float *g = dA + (size_t)i * P;
			double s = 0;
			for (int j = 0; j < P; j++)
				s += (double)g[j] * a[j];
			for (int j = 0; j < P; j++)
				g[j] = a[j] * (g[j] - (float)s);
		}
		/* dq = dS k / sqrt(d), dk = dS^T q / sqrt(d). */
		cg_sgemm(0, 0, P, d, P, scale, dA, P, q + d, Q, 0.0f, dq, Q);
		cg_sgemm(1, 0, P, d, P, scale, dA, P, q, Q, 0.0f, dq + d, Q);
	}
	memset(w->t2, 0, n * sizeof(float));
	cg_linear_backward(w->t2, grad + u->aqw, grad + u->aqb, w->dqkv, w->an,
	                   params + u->aqw, B * P, d, Q);
	cg_groupnorm_backward(dx, grad + u->ang, grad + u->anb, w->t2,
	                      w->map[M_M], params + u->ang, w->am, w->ar, B, P,
	                      d, u->Ga);
}

/* The U-Net on w->xt [B, H W ch] and w->emb into w->out (cddpm.h). */
static void
unet_forward(const float *params, struct cg_cddpm_ws *w, int B)
{
	const struct unet *u = &w->u;
	float *const *m = w->map;
	const int C = u->C;

	cg_silu_forward(w->es, w->emb, (size_t)B * u->E);
	cg_conv_forward(&u->cin, m[M_H0], w->xt, WT(w, params, u->inw, &u->cin),
	                params + u->inb, B, w->col, w->ncol);
	rb_forward(w, params, RB_D0, B);
	cg_conv_forward(&u->ds1, m[M_P1], m[M_S0],
	                WT(w, params, u->ds1w, &u->ds1), params + u->ds1b, B,
	                w->col, w->ncol);
	rb_forward(w, params, RB_D1, B);
	cg_conv_forward(&u->ds2, m[M_P2], m[M_S1],
	                WT(w, params, u->ds2w, &u->ds2), params + u->ds2b, B,
	                w->col, w->ncol);
	rb_forward(w, params, RB_D2, B);
	rb_forward(w, params, RB_MID, B);
	if (u->attn)
		attn_forward(w, params, B);
	cg_concat_forward(m[M_K2], m[u->attn ? M_A : M_M], m[M_S2], B * u->P[2],
	                  2 * C, 2 * C);
	rb_forward(w, params, RB_U2, B);
	cg_upsample2_forward(m[M_V1], m[M_U2], B, u->H[2], u->W[2], 2 * C);
	cg_concat_forward(m[M_K1], m[M_V1], m[M_S1], B * u->P[1], 2 * C, 2 * C);
	rb_forward(w, params, RB_U1, B);
	cg_upsample2_forward(m[M_V0], m[M_U1], B, u->H[1], u->W[1], 2 * C);
	cg_concat_forward(m[M_K0], m[M_V0], m[M_S0], B * u->P[0], 2 * C, C);
	rb_forward(w, params, RB_U0, B);
	cg_groupnorm_forward(w->on, w->om, w->orstd, m[M_U0], params + u->ong,
	                     params + u->onb, B, u->P[0], C, u->Go);
	cg_silu_forward(w->oa, w->on, (size_t)B * u->P[0] * C);
	cg_conv_forward(&u->cout, w->out, w->oa,
	                WT(w, params, u->outw, &u->cout), params + u->outb, B,
	                w->col, w->ncol);
}

/* Its backward given w->dout [B, in_dim]: grad += for the U-Net's
 * tensors, and w->demb = the gradient reaching emb. */
static void
unet_backward(const float *params, struct cg_cddpm_ws *w, int B, float *grad)
{
	const struct unet *u = &w->u;
	float *const *m = w->map, *const *d = w->dmap;
	const int C = u->C;
	const size_t n0 = (size_t)B * u->P[0] * C;

	for (int i = 0; i < NMAP; i++)
		memset(d[i], 0, (size_t)B * map_size(u, i) * sizeof(float));
	memset(w->des, 0, (size_t)B * u->E * sizeof(float));
	memset(w->t1, 0, n0 * sizeof(float));
	cg_conv_backward(&u->cout, w->t1, grad + u->outw, grad + u->outb,
	                 w->dout, w->oa, params + u->outw, B, w->col, w->ncol);
	memset(w->t2, 0, n0 * sizeof(float));
	cg_silu_backward(w->t2, w->t1, w->on, n0);
	cg_groupnorm_backward(d[M_U0], grad + u->ong, grad + u->onb, w->t2,
	                      m[M_U0], params + u->ong, w->om, w->orstd, B,
	                      u->P[0], C, u->Go);
	rb_backward(w, params, RB_U0, B, grad);
	cg_concat_backward(d[M_V0], d[M_S0], d[M_K0], B * u->P[0], 2 * C, C);
	cg_upsample2_backward(d[M_U1], d[M_V0], B, u->H[1], u->W[1], 2 * C);
	rb_backward(w, params, RB_U1, B, grad);
	cg_concat_backward(d[M_V1], d[M_S1], d[M_K1], B * u->P[1], 2 * C,
	                   2 * C);
	cg_upsample2_backward(d[M_U2], d[M_V1], B, u->H[2], u->W[2], 2 * C);
	rb_backward(w, params, RB_U2, B, grad);
	cg_concat_backward(d[u->attn ? M_A : M_M], d[M_S2], d[M_K2],
	                   B * u->P[2], 2 * C, 2 * C);
	if (u->attn)
		attn_backward(w, params, B, grad);
	/* s2's gradient is then whole: the skip's and mid's. */
	rb_backward(w, params, RB_MID, B, grad);
	rb_backward(w, params, RB_D2, B, grad);
	cg_conv_backward(&u->ds2, d[M_S1], grad + u->ds2w, grad + u->ds2b,
	                 d[M_P2], m[M_S1], params + u->ds2w, B, w->col,
	                 w->ncol);
	rb_backward(w, params, RB_D1, B, grad);
	cg_conv_backward(&u->ds1, d[M_S0], grad + u->ds1w, grad + u->ds1b,
	                 d[M_P1], m[M_S0], params + u->ds1w, B, w->col,
	                 w->ncol);
	rb_backward(w, params, RB_D0, B, grad);
	cg_conv_backward(&u->cin, NULL, grad + u->inw, grad + u->inb, d[M_H0],
	                 w->xt, params + u->inw, B, w->col, w->ncol);
	memset(w->demb, 0, (size_t)B * u->E * sizeof(float));
	cg_silu_backward(w->demb, w->des, w->emb, (size_t)B * u->E);
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

/*
 * The loss and, with grad, the backward pass, the network's input already
 * in w->xt: toward targets x0 and eps [B, in_dim] (a v or eps loss reads
 * eps, an x0 loss x0) and, with x0t, the teacher's x0t and epst, the
 * loss then (1 - alpha) data + alpha teacher (*data and *teach its
 * terms).  The targets need not be what w->xt was made from.
 */
static int
fit(const struct cg_cddpm_config *c, const float *params, struct cg_cddpm_ws *w,
    const float *x0, const float *eps, const float *x0t, const float *epst,
    double alpha, const int *cond, const int *t, int B, float *grad,
    double *loss, double *data, double *teach)
{
	const int D = c->in_dim, H = c->hidden, L = c->layers;
	const size_t stride = (size_t)w->max_batch * H;
	const float fa = (float)alpha, fd = (float)(1 - alpha);

	if (grad != NULL && w->ks.n > 0)
		return cg_seterr("cddpm: no gradient through weights as "
		                 "stored");
	forward(c, params, w, cond, t, B);

	/* d(loss)/d(out) times the loss scale (nn/gemm.h) */
	const float scale = cg_loss_scale() * 2.0f / ((float)B * D);
	double sum = 0, sumt = 0;
	/* Each row's sums on some thread (rs, rt), then added in the order
	 * of the rows: the bits of one thread's loop. */
	double *rs = w->rsum, *rt = w->rsum + B;
	if (c->snr_clip == CG_CDDPM_EPS_LOSS && !c->predict_x0) {
		/* The loss on eps_hat; with a gradient wanted, d(loss)/d(v)
		 * = sqrt(abar_t) d(loss)/d(eps_hat) in the same pass. */
		out_to_eps(c, w, t, B);
		PAR_FOR((size_t)B * D)
		for (int b = 0; b < B; b++) {
			const float gs = scale * (float)sqrt(w->abar[t[b]]);
			double s = 0, st = 0;
			for (int i = 0; i < D; i++) {
				const size_t k = (size_t)b * D + i;
				const float d = w->out[k] - eps[k];
				float g = d;
				s += (double)d * d;
				if (x0t) {
					const float dt = w->out[k] - epst[k];
					st += (double)dt * dt;
					g = fd * d + fa * dt;
				}
				if (grad)
					w->dout[k] = gs * g;
			}
			rs[b] = s;
			rt[b] = st;
		}
		for (int b = 0; b < B; b++) {
			sum += rs[b] / D;
			sumt += rt[b] / D;
		}
	} else {
		/* The loss on x0_hat weighted wx (cddpm.h); on v_hat, the
		 * same loss, weighted wx / (snr + 1), from v = sqrt(abar) eps
		 * - sqrt(1 - abar) x0 directly: no cancellation at large
		 * t. */
		PAR_FOR((size_t)B * D)
		for (int b = 0; b < B; b++) {
			const double ab = w->abar[t[b]], snr = ab / (1 - ab);
			const double wx = c->snr_clip == CG_CDDPM_EPS_LOSS
			                      ? snr
			                      : fmin(snr, c->snr_clip) + 1;
			const double wt = c->predict_x0 ? wx : wx / (snr + 1);
			const float sa = (float)sqrt(ab);
			const float sn = (float)sqrt(1 - ab);
			const float gs = scale * (float)wt;
			double s = 0, st = 0;
			for (int i = 0; i < D; i++) {
				const size_t k = (size_t)b * D + i;
				const float d =
				    w->out[k] -
				    (c->predict_x0 ? x0[k]
				                   : sa * eps[k] - sn * x0[k]);
				float g = d;
				s += (double)d * d;
				if (x0t) {
					const float dt =
					    w->out[k] -
					    (c->predict_x0
					         ? x0t[k]
					         : sa * epst[k] - sn * x0t[k]);
					st += (double)dt * dt;
					g = fd * d + fa * dt;
				}
				if (grad)
					w->dout[k] = gs * g;
			}
			rs[b] = wt * s;
			rt[b] = wt * st;
		}
		for (int b = 0; b < B; b++) {
			sum += rs[b] / D;
			sumt += rt[b] / D;
		}
	}
	if (data)
		*data = sum / B;
	if (teach)
		*teach = sumt / B;
	if (loss)
		*loss = x0t ? (1 - alpha) * (sum / B) + alpha * (sumt / B)
		            : sum / B;
	if (grad == NULL)
		return 0;
	if (c->unet) {
		unet_backward(params, w, B, grad);
		embed_backward(c, params, w, cond, B, grad);
		return 0;
	}

	struct linear lo = linear_at(c, L + 1);
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
		PAR_FOR_SIMD(nh)
		for (size_t i = 0; i < nh; i++)
			w->demb[i] += w->dpre[i];
	}
	embed_backward(c, params, w, cond, B, grad);
	return 0;
}

int
cg_cddpm_forward_backward(const struct cg_cddpm_config *c, const float *params,
                          struct cg_cddpm_ws *w, const float *x0,
                          const int *cond, const int *t, const float *eps,
                          int B, float *grad, double *loss)
{
	const int D = c->in_dim;

	if (check_call(c, w, cond, t, B) != 0)
		return -1;
	PAR_FOR((size_t)B * D)
	for (int b = 0; b < B; b++) {
		const float sa = (float)sqrt(w->abar[t[b]]);
		const float sn = (float)sqrt(1 - w->abar[t[b]]);
		const size_t o = (size_t)b * D;
		for (int i = 0; i < D; i++)
			w->xt[o + i] = sa * x0[o + i] + sn * eps[o + i];
	}
	return fit(c, params, w, x0, eps, NULL, NULL, 0, cond, t, B, grad,
	           loss, NULL, NULL);
}

int
cg_cddpm_distill_forward_backward(const struct cg_cddpm_config *c,
                                  const float *params, struct cg_cddpm_ws *w,
                                  const float *xt, const float *x0,
                                  const float *eps, const float *x0t,
                                  const float *epst, double alpha,
                                  const int *cond, const int *t, int B,
                                  float *grad, double *loss, double *data,
                                  double *teach)
{
	if (check_call(c, w, cond, t, B) != 0)
		return -1;
	if (!(alpha >= 0 && alpha <= 1))
		return cg_seterr("cddpm: teacher weight %g: not in [0, 1]",
		                 alpha);
	memcpy(w->xt, xt, (size_t)B * c->in_dim * sizeof(float));
	return fit(c, params, w, x0, eps, x0t, epst, alpha, cond, t, B, grad,
	           loss, data, teach);
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

int
cg_cddpm_visited(int i, int N, int T)
{
	if (N == 1)
		return T - 1;
	return (int)floor((double)i * (T - 1) / (N - 1) + 0.5);
}

/*
 * One step of the sampler for n chains x [n, in_dim], in place: chain b
 * from timestep t[b] (tc where t is NULL) to s[b] (sc where s is NULL;
 * -1 the clean image, abar 1), eta 0 DDIM's, 1 DDPM's (its noise drawn
 * from r and scaled by temp).  The caller has checked n, the guidance
 * and that w holds 2n examples where guided.
 */
static int
step(const struct cg_cddpm_config *c, const float *params,
     struct cg_cddpm_ws *w, float *x, const int *cond, const int *t,
     const int *s, int tc, int sc, int n, double guidance, double eta,
     float temp, struct cg_rng *r)
{
	const int D = c->in_dim;
	const int guided = guidance != 0;
	const int B = guided ? 2 * n : n;
	int *cb = w->ibuf, *tb = w->ibuf + w->max_batch;

	for (int b = 0; b < n; b++) {
		cb[b] = cond[b];
		tb[b] = t ? t[b] : tc;
		if (guided) {
			cb[n + b] = c->ncond;
			tb[n + b] = tb[b];
		}
	}
	for (int b = 0; b < B; b++)
		memcpy(w->xt + (size_t)b * D, x + (size_t)(b % n) * D,
		       (size_t)D * sizeof(float));
	if (check_call(c, w, cb, tb, B) != 0)
		return -1;
	forward(c, params, w, cb, tb, B);
	out_to_eps(c, w, tb, B);

	const float gw = (float)guidance;
	for (int b = 0; b < n; b++) {
		const int sb = s ? s[b] : sc;
		const double at = w->abar[tb[b]];
		const double as = sb >= 0 ? w->abar[sb] : 1.0;
		const double sig =
		    eta * sqrt((1 - as) / (1 - at) * (1 - at / as));
		const double dir = sqrt(fmax(1 - as - sig * sig, 0));
		for (size_t k = (size_t)b * D; k < (size_t)(b + 1) * D; k++) {
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
	return 0;
}

static int
check_guidance(double g)
{
	if (!(g >= 0) || !isfinite(g))
		return cg_seterr("cddpm: guidance %g: not a finite number "
		                 ">= 0",
		                 g);
	return 0;
}

int
cg_cddpm_ddim_step(const struct cg_cddpm_config *c, const float *params,
                   struct cg_cddpm_ws *w, float *x, const int *cond,
                   const int *t, const int *s, int n, double guidance)
{
	const int B = guidance != 0 ? 2 * n : n;

	if (check_guidance(guidance) != 0)
		return -1;
	if (n < 1 || B > w->max_batch)
		return cg_seterr("cddpm: %d chains: not in [1, %d]", n,
		                 guidance != 0 ? w->max_batch / 2
		                               : w->max_batch);
	for (int b = 0; b < n; b++)
		if (s[b] < -1 || s[b] >= t[b])
			return cg_seterr("cddpm: a step from timestep %d to "
			                 "%d (chain %d): not to an earlier one",
			                 t[b], s[b], b);
	return step(c, params, w, x, cond, t, s, 0, 0, n, guidance, 0, 1.0f,
	            NULL);
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
	if (check_guidance(s->guidance) != 0)
		return -1;
	float *x = w->dout; /* [n, D]: the chain's state */
	const float temp = (float)s->temperature;
	for (size_t i = 0; i < (size_t)n * D; i++)
		x[i] = temp * cg_rng_normal(r);

	for (int i = s->steps - 1; i >= 0; i--) {
		const int t = cg_cddpm_visited(i, s->steps, T);
		const int to =
		    i > 0 ? cg_cddpm_visited(i - 1, s->steps, T) : -1;
		/* the guidance interval, in the schedule's fraction */
		const double f = T > 1 ? (double)t / (T - 1) : 0;
		const double g =
		    !s->interval || (f >= s->glo && f <= s->ghi) ? s->guidance
		                                                 : 0;
		if (step(c, params, w, x, cond, NULL, NULL, t, to, n, g, eta,
		         temp, r) != 0)
			return -1;
	}
	for (size_t k = 0; k < (size_t)n * D; k++) {
		float v = 0.5f * (x[k] + 1);
		out[k] = v < 0 ? 0 : v > 1 ? 1 : v;
	}
	return 0;
}
