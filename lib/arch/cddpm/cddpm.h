/*
 * arch/cddpm/cddpm.h - conditional denoising diffusion (an MLP or a U-Net
 * that predicts the clean image) with classifier-free guidance.
 *
 * Images x0 in [-1, 1] (pixel / 127.5 - 1) are noised as in Ho et al.
 * (2020): x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps, eps ~ N(0, I), for
 * t in [0, T), abar_t the product of (1 - beta_s) for s <= t.  The betas
 * run linearly from 1e-4 to 0.02 at T = 1000 and, for other T, from
 * 1e-4 * 1000 / T to 0.02 * 1000 / T (Nichol and Dhariwal's scaling, so
 * that abar at the last step is about the same, 4e-5, for every T).
 * With cosine, the betas are Nichol and Dhariwal's (2021) cosine
 * schedule's: abar_t = f((t + 1) / T) / f(0), f(u) = cos^2((u + s) / (1
 * + s) pi / 2), s = 0.008, through beta_t = 1 - abar_t / abar_{t-1}
 * clipped at 0.999 (only the last one is: f(1) = 0).  It destroys the
 * image more slowly at small t, where the linear one has taken most of
 * it by t = T / 2, and ends at abar_{T-1} = 0.001 abar_{T-2}.
 *
 * The network, from (x_t, t, c):
 *   emb = time.w sin_emb(t) + time.b + cond.emb[c]           [hidden]
 *   h_0 = relu(hid.0.w x_t + hid.0.b + emb)
 *   h_l = relu(hid.l.w h_{l-1} + hid.l.b + emb)    l = 1 .. layers - 1
 *   o = out.w h_{layers-1} + out.b                            [in_dim]
 * gives the clean image, x0_hat = o (predict_x0 1), or v_hat = o, v =
 * sqrt(abar_t) eps - sqrt(1 - abar_t) x0 (Salimans and Ho, 2022;
 * predict_x0 0, the models made before it), and the predicted noise
 * follows from either and x_t exactly:
 *   eps_hat = (x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t)
 *   eps_hat = sqrt(abar_t) v_hat + sqrt(1 - abar_t) x_t
 * The hidden layers are far narrower than an image and cannot carry its
 * noise through: an MLP that gives eps itself learns next to nothing,
 * one that gives v gets the part of eps that x_t carries past them (all
 * of it at large t) but must still find the rest, sqrt(abar_t) eps,
 * through them, and leaves it in the images it draws; x0 asks them for
 * an image alone, and x_t brings all the noise.  (Fashion-MNIST, 2345
 * steps: v drew speckled images the judge took for their class 20% of
 * the time, x0 clean ones, 88%; bench/RESULTS.md.)
 * sin_emb(t) [embed] is sin(t f_i) for i < embed / 2, then cos(t f_i),
 * f_i = 10000^(-i / (embed / 2)) (the transformer's encoding of t).  The
 * condition embedding has ncond + 1 rows: row ncond is the null
 * condition, which training puts in place of an example's condition with
 * probability cond_drop, so one network learns p(x | c) and p(x).
 *
 * The loss per example is the mean over pixels of
 *   wx_t (x0_hat - x0)^2,   wx_t = min(snr_t, clip) + 1,
 * snr_t = abar_t / (1 - abar_t), clip = snr_clip, x0_hat for a v-network
 * sqrt(abar_t) x_t - sqrt(1 - abar_t) v_hat (the same loss is then wx_t /
 * (snr_t + 1) (v_hat - v)^2, which is how it is computed).  clip 0 is
 * the plain loss on x0, an infinite clip the loss on v; a finite one
 * holds the weight of the nearly clean timesteps at clip + 1 (Hang et
 * al.'s min-SNR weighting holds it at clip).  snr_clip =
 * CG_CDDPM_EPS_LOSS is the loss on eps, mean (eps_hat - eps)^2 = snr_t
 * (x0_hat - x0)^2, of models made before the weighting.  Reported losses
 * are batch means.  All parameters live in one flat float buffer
 * laid out as cg_cddpm_views says.
 *
 * With unet = C > 0 the network is a U-Net (Ronneberger et al., 2015, as
 * Ho et al. use it) on the image of H x W x ch, channels-last, H and W
 * multiples of 4, and gives x0_hat or v_hat as the MLP does (the loss,
 * the sampler and guidance are the same).  emb is the MLP's, of width
 * hidden, and each residual block takes its own projection of silu(emb):
 *
 *   RB(x) = conv2(silu(GN2(conv1(silu(GN1(x))) + e))) + skip(x)
 *   e = blk.emb.w silu(emb) + blk.emb.b, added at every position [out]
 *
 * or with film, e of twice the width scales and shifts the normed map
 * (Dhariwal and Nichol's scale-shift norm) in place of the sum:
 *
 *   RB(x) = conv2(silu(GN2(h) (1 + e[:out]) + e[out:])) + skip(x)
 *   h = conv1(silu(GN1(x))), e = blk.emb.w silu(emb) + blk.emb.b  [2 out]
 *
 * (a shift before a norm is taken out again with its group's mean; a
 * scale after it reaches every pixel).  The MLP ignores film.
 *
 * conv1 and conv2 3x3 with padding 1, skip a 1x1 convolution where the
 * block changes the channels (else x itself), GN a group norm (eps 1e-5)
 * of the most groups, up to 8, of at least 4 channels each (one group
 * below 8 channels).  The levels are C channels at H x W, 2C at H/2, 2C
 * at H/4:
 *
 *   h   = in * x_t                                  [H, W, C]
 *   s0  = down.0(h)                                 [H, W, C]
 *   s1  = down.1(ds.1 *2 s0)                        [H/2, W/2, 2C]
 *   s2  = down.2(ds.2 *2 s1)                        [H/4, W/4, 2C]
 *   m   = mid(s2), then attn(m) with attn           [H/4, W/4, 2C]
 *   u2  = up.2(cat(m, s2))                          [H/4, W/4, 2C]
 *   u1  = up.1(cat(up(u2), s1))                     [H/2, W/2, 2C]
 *   u0  = up.0(cat(up(u1), s0))                     [H, W, C]
 *   o   = out * silu(GN(u0))                        [H, W, ch]
 *
 * where * is a 3x3 convolution with padding 1 and its bias (*2 at stride
 * 2), up nearest up-sampling by 2 and cat the concatenation of channels.
 * hidden is then the embeddings' width and layers is unused.  attn is
 * self-attention over the P = H/4 W/4 positions, one head of d = 2C:
 *
 *   n = GN(m); q, k, v = attn.qkv.w n + attn.qkv.b     [P, d] each
 *   attn(m) = m + attn.proj.w softmax(q k^T / sqrt(d)) v + attn.proj.b
 */
#ifndef CG_CDDPM_H
#define CG_CDDPM_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "nn/nn.h"
#include "nn/qlinear.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cg_cddpm_config {
	int in_dim;      /* pixels per image */
	int ncond;       /* conditions (the embedding has one row more) */
	int hidden;      /* width of every hidden layer and of the embeddings */
	int layers;      /* hidden layers */
	int embed;       /* width of the sinusoidal time encoding, even */
	int timesteps;   /* T */
	double snr_clip; /* clip of the loss weighting, or CG_CDDPM_EPS_LOSS */
	int predict_x0;  /* 1: the last layer gives x0_hat; 0: v_hat */
	/*
	 * The U-Net: 0 for none (the MLP), else the channels of its first
	 * level.  height x width x channels is the image's shape (what
	 * in_dim counts), read only when unet > 0.
	 */
	int unet;
	int height, width, channels;
	int attn; /* 1: self-attention after the U-Net's middle block */
	int film; /* 1: each block scales and shifts its normed map by e */
	int cosine; /* 1: the cosine schedule; 0: the linear betas */
};

#define CG_CDDPM_MAX_UNET 4096
/* The U-Net's views (cg_cddpm_views), and how many attn adds. */
#define CG_CDDPM_UNET_VIEWS 91
#define CG_CDDPM_ATTN_VIEWS 6

/* Largest value of any width, largest parameter count and batch; the
 * range of T (below 50 the largest beta, 20 / T, would pass 0.4). */
#define CG_CDDPM_MAX_DIM (1 << 20)
#define CG_CDDPM_MAX_PARAMS ((uint64_t)1 << 34)
#define CG_CDDPM_MAX_BATCH (1 << 24)
#define CG_CDDPM_MIN_T 50
#define CG_CDDPM_MAX_T 100000
#define CG_CDDPM_MAX_SNR_CLIP 1e6
#define CG_CDDPM_EPS_LOSS (-1.0)
/* The cosine schedule's clip of its betas. */
#define CG_CDDPM_COSINE_MAX_BETA 0.999

/*
 * Returns 0 if c is usable: widths in [1, CG_CDDPM_MAX_DIM], embed even,
 * T in [CG_CDDPM_MIN_T, CG_CDDPM_MAX_T], snr_clip in [0,
 * CG_CDDPM_MAX_SNR_CLIP] or CG_CDDPM_EPS_LOSS, unet in [0,
 * CG_CDDPM_MAX_UNET] and, above 0, an image of in_dim values with sides
 * multiples of 4, attn 0 or 1 (1 only with the U-Net), film and cosine 0
 * or 1, and at most
 * CG_CDDPM_MAX_PARAMS parameters; else -1 with a message.
 */
int cg_cddpm_check_config(const struct cg_cddpm_config *c);

/* Number of floats in the parameter buffer; 0 (with a message) if c fails
 * cg_cddpm_check_config. */
size_t cg_cddpm_nparams(const struct cg_cddpm_config *c);

/*
 * Fill v[0..] with the named views of the parameter buffer, in buffer
 * order: time.w [hidden, embed], time.b, cond.emb [ncond + 1, hidden],
 * hid.0.w [hidden, in_dim], hid.0.b, ..., out.w [in_dim, hidden], out.b
 * (2 * layers + 5 views).  The U-Net's: time.w, time.b, cond.emb, then
 * in, down.0, ds.1, down.1, ds.2, down.2, mid, with attn attn.n,
 * attn.qkv [3d, d] and attn.proj [d, d], then up.2, up.1, up.0, out.n
 * and out (CG_CDDPM_UNET_VIEWS views, CG_CDDPM_ATTN_VIEWS more with
 * attn): a convolution NAME is NAME.w [out,
 * in, KH, KW] and NAME.b [out]; a group norm NAME.g and NAME.b
 * [channels]; a block's views are n1, c1, emb (.w [out, hidden], .b),
 * n2, c2 and, where it changes the channels, skip (1x1).  Matrices and
 * convolution weights decay 1; biases, norms and the embedding 0.
 * Returns the count, or -1 with a message if c is bad or max is too small.
 */
int cg_cddpm_views(const struct cg_cddpm_config *c, struct cg_view *v, int max);

/*
 * Seeded weights drawn from r in buffer order: each Linear as PyTorch's
 * default (W and b uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in))), the
 * condition embedding normal with standard deviation 0.1; a
 * convolution as a Linear of fan_in its input channels times KH KW, a
 * group norm's scale 1 and shift 0 (no draw).  c must pass
 * cg_cddpm_check_config (else nothing is written).
 */
void cg_cddpm_init(const struct cg_cddpm_config *c, float *params,
                   struct cg_rng *r);

/*
 * abar [T] (double) of the schedule above.  c must pass
 * cg_cddpm_check_config.
 */
void cg_cddpm_schedule(const struct cg_cddpm_config *c, double *abar);

/*
 * Activations workspace for batches of up to max_batch examples (the
 * schedule with them), allocated once; the passes allocate nothing.
 * With checkpoint != 0 a U-Net's keeps the maps between its residual
 * blocks (every map of the diagram above) and one block's activations
 * inside it, the largest block's worth, and the backward pass
 * recomputes each block's from its input map just before the block's
 * backward: the same arithmetic, so the same bits of loss and gradient,
 * for about one more pass of each block's first half.  The MLP keeps
 * every activation either way (they are a few rows of hidden).
 * Returns NULL with a message on a bad config or max_batch, or out of
 * memory; the caller owns it.
 */
struct cg_cddpm_ws;
struct cg_cddpm_ws *cg_cddpm_ws_new(const struct cg_cddpm_config *c,
                                    int max_batch, int checkpoint);
void cg_cddpm_ws_free(struct cg_cddpm_ws *w);
/* The bytes cg_cddpm_ws_new(c, max_batch, checkpoint) allocates,
 * counted without allocating; 0 with a message where it would fail. */
size_t cg_cddpm_ws_bytes(const struct cg_cddpm_config *c, int max_batch,
                         int checkpoint);

/*
 * Have the passes on w take the weights of views with a dtype other than
 * CG_F32 in mats [nv] (a model's stored, in cg_cddpm_views order, nv its
 * view count; copied, their bytes borrowed and outliving w's use) as
 * stored instead of from params: the Linear layers multiplied as stored
 * where qlinear takes them, the rest (the U-Net's convolutions) decoded
 * one layer at a time (nn/qlinear.h's cg_wset); NULL goes back to
 * params.  Such a workspace runs forward passes and sampling only (a
 * gradient is refused).  Returns 0, or -1 with a message (a count that
 * is not the config's, a dtype that cannot be decoded, out of memory);
 * w is then as it was.
 */
int cg_cddpm_ws_set_mats(struct cg_cddpm_ws *w, const struct cg_wmat *mats,
                         int nv);

/*
 * One training forward pass and, if grad != NULL, the backward pass.
 * params [nparams], x0 [B, in_dim] in [-1, 1], cond [B] in [0, ncond]
 * (ncond: the null condition; dropping is the caller's draw), t [B] in
 * [0, T), eps [B, in_dim] standard-normal noise drawn by the caller.
 * *loss (may be NULL) = the batch mean of the per-example loss above.
 * grad [nparams] += d(loss)/d(params).  Returns 0, or -1 with a message
 * (B outside [1, max_batch], a condition or t out of range, a workspace
 * made for another config); on error nothing is written.
 */
int cg_cddpm_forward_backward(const struct cg_cddpm_config *c,
                              const float *params, struct cg_cddpm_ws *w,
                              const float *x0, const int *cond, const int *t,
                              const float *eps, int B, float *grad,
                              double *loss);

/*
 * A distillation pass at a given network input: xt [B, in_dim] (not
 * drawn here), the data's targets x0 and eps [B, in_dim] (for a pair
 * that made xt, the loss of cg_cddpm_forward_backward) and the
 * teacher's x0t and epst; a v or eps loss reads the eps targets, an x0
 * loss the x0 ones, so a caller gives both, consistent with xt (eps =
 * (xt - sqrt(abar_t) x0) / sqrt(1 - abar_t)).  *data and *teach (either
 * may be NULL) are the same loss toward each, and *loss = (1 - alpha)
 * *data + alpha *teach, alpha in [0, 1]; grad [nparams] += its
 * gradient.  Returns 0, or -1 with a message as
 * cg_cddpm_forward_backward.
 */
int cg_cddpm_distill_forward_backward(const struct cg_cddpm_config *c,
                                      const float *params,
                                      struct cg_cddpm_ws *w, const float *xt,
                                      const float *x0, const float *eps,
                                      const float *x0t, const float *epst,
                                      double alpha, const int *cond,
                                      const int *t, int B, float *grad,
                                      double *loss, double *data,
                                      double *teach);

/*
 * The network alone: out [B, in_dim] = eps_hat(xt [B, in_dim], t [B],
 * cond [B]), conditions and t as cg_cddpm_forward_backward takes them.
 * Returns 0 or -1 with a message as that.
 */
int cg_cddpm_predict(const struct cg_cddpm_config *c, const float *params,
                     struct cg_cddpm_ws *w, const float *xt, const int *cond,
                     const int *t, int B, float *out);

/* The i-th of the N timesteps a sampler of N steps visits, ascending:
 * round(i (T - 1) / (N - 1)), T - 1 for N = 1.  The grid of 2N - 1
 * steps holds it at every other point: one step of the N-step grid is
 * two of that one. */
int cg_cddpm_visited(int i, int N, int T);

/*
 * One deterministic DDIM step (eta 0), as cg_cddpm_sample takes it, of n
 * chains x [n, in_dim] in place: chain b, with condition cond[b], from
 * timestep t[b] to s[b] < t[b] (-1: to the clean image, abar 1), x0
 * predicted with guidance w >= 0 and clipped to [-1, 1].  The
 * workspace must hold 2n examples where guidance != 0.  Returns 0, or
 * -1 with a message (then x may be half stepped).
 */
int cg_cddpm_ddim_step(const struct cg_cddpm_config *c, const float *params,
                       struct cg_cddpm_ws *w, float *x, const int *cond,
                       const int *t, const int *s, int n, double guidance);

/* How cg_cddpm_sample draws. */
struct cg_cddpm_sampling {
	double guidance; /* w >= 0: eps = (1 + w) eps(x, c) - w eps(x, null) */
	int steps;       /* N in [1, T]: timesteps visited */
	int ddim;        /* 1: DDIM, deterministic (eta 0); 0: DDPM */
	double temperature; /* scales the starting noise and DDPM's noise */
	/* interval 1: guided only at the steps from a timestep t with
	 * glo <= t / (T - 1) <= ghi, unguided at the others; 0: every step */
	int interval;
	double glo, ghi;
};

/*
 * n images out [n, in_dim] in [0, 1] for conditions cond [n] (in [0,
 * ncond]; ncond draws unconditionally), noise drawn from r.  The N steps
 * visit the timesteps cg_cddpm_visited(i, N, T), i = N - 1 .. 0; each
 * step predicts x0 from x and the guided eps,
 * clips it to [-1, 1], takes eps again from the clipped x0, and moves to
 * the previous visited timestep s (abar_s = 1 past the first) by DDIM's
 * update x_s = sqrt(abar_s) x0 + sqrt(1 - abar_s - sigma^2) eps + sigma
 * z, sigma = eta sqrt((1 - abar_s) / (1 - abar_t) (1 - abar_t /
 * abar_s)); eta 1 is DDPM's ancestral step (its posterior variance, on
 * the respaced schedule when N < T), eta 0 DDIM's.  w needs the
 * workspace to hold 2n examples (the conditional and null passes run
 * as one batch).  Returns 0 or -1 with a message.
 */
int cg_cddpm_sample(const struct cg_cddpm_config *c, const float *params,
                    struct cg_cddpm_ws *w, const int *cond, int n,
                    const struct cg_cddpm_sampling *s, struct cg_rng *r,
                    float *out);

#ifdef __cplusplus
}
#endif
#endif
