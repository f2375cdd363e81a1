/*
 * arch/cgan/cgan.h - conditional GAN: an MLP generator and an MLP projection
 * discriminator with spectral normalisation, trained by the hinge loss.
 *
 * Images are x in [0, 1] (pixel / 255, as cvae reads them).  For a
 * condition y and noise z ~ N(0, I) [latent]:
 *
 *   generator      g_0 = relu(gen.0.w z + gen.0.b + gen.emb[y])     [hidden]
 *                  g_l = relu(gen.l.w g_{l-1} + gen.l.b)    l < layers
 *                  G(z, y) = sigmoid(gen.out.w g_{layers-1} + gen.out.b)
 *   discriminator  h_0 = x
 *                  h_{l+1} = lrelu(SN(disc.l.w) h_l + disc.l.b)  l < layers
 *                  D(x, y) = SN(disc.psi.w) h + disc.psi.b
 *                            + SN(disc.emb)[y] . h                 (scalar)
 *
 * D is the projection discriminator of Miyato and Koyama (2018): the
 * condition enters as an inner product with the features, not as an
 * input.  lrelu's slope is 0.2.  SN(w) = w / sigma(w), sigma the largest
 * singular value as the power iteration of cg_spectral_power estimates
 * it (sn_iters iterations from a fixed start: a pure function of the
 * weights, so that nothing but the weights travels in a model file and
 * DiLoCo's averaging has nothing else to average), with u and v held
 * fixed in the backward pass as in Miyato et al. (2018) and PyTorch's
 * spectral_norm.  SN keeps every layer of D 1-Lipschitz, which is what
 * keeps its gradients to G from exploding or vanishing.
 *
 * The hinge loss (Lim and Ye 2017; Miyato et al. 2018), per batch of B
 * real images x_b with conditions y_b, and B fakes G(z_b, y_b) of the
 * same conditions:
 *   L_D = mean relu(1 - D(x_b, y_b)) + mean relu(1 + D(G(z_b, y_b), y_b))
 *   L_G = -mean D(G(z_b, y_b), y_b)
 * With r1 = gamma > 0, D's objective adds the R1 penalty of Mescheder et
 * al. (2018) on the reals,
 *   R1 = gamma / 2 mean |grad_x D(x_b, y_b)|^2,
 * which holds D's slope at the data near 0 (its exact gradient, the
 * second derivative, is cgan.c's; the spectral norms' u and v are held
 * fixed in it as in the backward pass).
 * With aux = lambda > 0, D also has an auxiliary classifier on its
 * features h (AC-GAN, Odena et al. 2017), logits
 *   c(x) = disc.cls.w h + disc.cls.b                      [ncond]
 * (not normalised: it is not part of the score D, which stays
 * 1-Lipschitz), and each net's objective adds lambda times a
 * cross-entropy:
 *   L_D += lambda mean CE(c(x_b), y_b)           (the reals: D learns
 *                                                 the classes)
 *   L_G += lambda mean CE(c(G(z_b, y_b)), y_b)   (the fakes: G draws
 *                                                 what D takes for y_b)
 * D is not asked to classify the fakes (AC-GAN's first form does, and
 * rewards a generator whose draws are merely easy to classify).  R1
 * stays on the score D alone.
 * One pass gives both gradients at the same weights: d(L_D (+ R1))/d(D's
 * parameters), the fakes held fixed, into D's part of the buffer, and
 * d(L_G)/d(G's parameters) into G's.  One optimizer step on the whole
 * buffer is then a simultaneous step of both nets.  The parameters live
 * in one flat buffer: the generator's views, then the discriminator's
 * (cg_cgan_views), two parameter groups.
 *
 * With conv = C > 0 both nets are convolutional (DCGAN-like, Radford et
 * al. 2016, with nearest up-sampling and a 3x3 convolution in place of
 * the transposed convolution, which draws no checkerboard), on maps
 * channels-last, for an image of H x W x ch and F = (H/4)(W/4)(2C):
 *
 *   generator      a_0 = relu(N0(gen.0.w z + gen.0.b + gen.emb[y])) [H/4, W/4, 2C]
 *                  a_1 = relu(N1(gen.c1 * up(a_0)))               [H/2, W/2, C]
 *                  a_2 = relu(N2(gen.c2 * up(a_1)))               [H, W, C]
 *                  G(z, y) = sigmoid(gen.out * a_2)               [H, W, ch]
 *   discriminator  h_1 = lrelu(SN(disc.c1) *2 x)                  [H/2, W/2, C]
 *                  h = lrelu(SN(disc.c2) *2 h_1)                  [H/4, W/4, 2C]
 *                  D(x, y) as above on h flattened (F features)
 *
 * where * is a 3x3 convolution with padding 1 (*2: at stride 2, and
 * disc_kernel x disc_kernel) and its bias, up nearest up-sampling by 2,
 * Ni group normalisation (gen.ni.g and gen.ni.b its scale and shift; 8
 * groups, or 4, 2, 1 where 8 does not divide the channels): without it,
 * a generator of ReLUs died (every unit at 0, black images) within an
 * epoch at 32 channels (bench/RESULTS.md).  SN of a convolution is that
 * of its weight as a matrix [out, in x k x k], as PyTorch's
 * spectral_norm takes it.
 */
#ifndef CG_CGAN_H
#define CG_CGAN_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "nn/nn.h"
#include "nn/qlinear.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cg_cgan_config {
	int in_dim;   /* pixels per image */
	int ncond;    /* conditions */
	int latent;   /* width of z */
	int hidden;   /* width of every hidden layer of both nets */
	int layers;   /* hidden layers of each net */
	int sn_iters; /* power iterations per spectral norm */
	/*
	 * The convolutional nets (DCGAN-like): 0 for none (the MLPs), else
	 * the channels of their wider maps' narrower half (below).
	 * height x width x channels is the image's shape, channels-last
	 * (what in_dim counts), height and width multiples of 4; read only
	 * when conv > 0, and hidden and layers are then unused.
	 */
	int conv;
	int height, width, channels;
	double r1; /* gamma of the R1 penalty on D (0: none) */
	/*
	 * The side of the discriminator's two convolutions at stride 2: 3
	 * (the first models'), or 4, DCGAN's, which reaches every pixel
	 * from two places (a 3 reaches the odd ones from two, the even
	 * ones from one).  Read only when conv > 0.
	 */
	int disc_kernel;
	/* lambda of the auxiliary classifier's cross-entropies (0: no
	 * classifier, and no disc.cls tensors) */
	double aux;
};

#define CG_CGAN_MAX_CONV 4096
/* The convolutional nets' views. */
#define CG_CGAN_CONV_VIEWS 22

#define CG_CGAN_MAX_DIM (1 << 20)
#define CG_CGAN_MAX_ITERS 1000
#define CG_CGAN_MAX_PARAMS ((uint64_t)1 << 34)
#define CG_CGAN_MAX_BATCH (1 << 23)
/* The largest gamma of the R1 penalty. */
#define CG_CGAN_MAX_R1 1e6
/* The largest lambda of the auxiliary classifier. */
#define CG_CGAN_MAX_AUX 1e3
/* The discriminator's leaky ReLU. */
#define CG_CGAN_SLOPE 0.2f

/*
 * Returns 0 if c is usable: widths in [1, CG_CGAN_MAX_DIM], layers in
 * [1, 64], sn_iters in [1, CG_CGAN_MAX_ITERS], r1 in [0, CG_CGAN_MAX_R1],
 * at most CG_CGAN_MAX_PARAMS parameters; else -1 with a message.
 */
int cg_cgan_check_config(const struct cg_cgan_config *c);

/* Floats in the parameter buffer, and where the discriminator's part
 * starts; 0 (with a message) if c fails cg_cgan_check_config. */
size_t cg_cgan_nparams(const struct cg_cgan_config *c);
size_t cg_cgan_disc_off(const struct cg_cgan_config *c);

/*
 * With conv: gen.emb [ncond, F], gen.0.w [F, latent], gen.0.b, gen.n0.g
 * and .b [2 conv], gen.c1, gen.n1 (.g, .b [conv]), gen.c2, gen.n2,
 * gen.out, then disc.c1, disc.c2 (each convolution a .w [out, in, 3, 3]
 * and a .b), disc.psi.w [1, F], disc.psi.b, disc.emb [ncond, F]: 22
 * views.
 * Without, fill v[0..] with the named views, in buffer order: gen.emb [ncond,
 * hidden], gen.0.w [hidden, latent], gen.0.b, gen.1.w [hidden, hidden],
 * ..., gen.out.w [in_dim, hidden], gen.out.b, then disc.0.w [hidden,
 * in_dim], disc.0.b, ..., disc.psi.w [1, hidden], disc.psi.b [1],
 * disc.emb [ncond, hidden]: 2 layers + 3 generator views, then 2 layers +
 * 3 discriminator views.  Matrices decay 1; biases and embeddings 0.
 * Either kind, with aux > 0, then disc.cls.w [ncond, F] (F the MLP's
 * hidden) and disc.cls.b [ncond]: cg_cgan_nviews(c) in all.
 * Returns the count, or -1 with a message if c is bad or max too small.
 */
int cg_cgan_views(const struct cg_cgan_config *c, struct cg_view *v, int max);
/* The views of c (cg_cgan_views's count); 0 where c is bad. */
int cg_cgan_nviews(const struct cg_cgan_config *c);

/*
 * Seeded weights drawn from r in buffer order: each Linear as PyTorch's
 * default (W and b uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in))), gen.emb
 * and gen.0 as one Linear on (z, one-hot(y)) (fan_in latent + ncond: with
 * the embedding standard normal, the condition drowned the noise and
 * each condition's draws came out alike), disc.emb standard normal
 * (nn.Embedding's default), disc.cls (with aux) a Linear, drawn last.  c
 * must pass
 * cg_cgan_check_config (else nothing is written).
 */
void cg_cgan_init(const struct cg_cgan_config *c, float *params,
                  struct cg_rng *r);

/*
 * Workspace for batches of up to max_batch examples (the discriminator
 * sees twice that: reals and fakes), allocated once.  With checkpoint
 * != 0 the convolutional generator keeps only its norms' inputs and
 * makes their outputs and the up-sampled maps again in the backward
 * pass (no convolution runs twice): the same bits, from a smaller
 * workspace; the MLPs keep every activation either way.  Returns NULL
 * with a message on a bad config or max_batch, or out of memory.
 */
struct cg_cgan_ws;
struct cg_cgan_ws *cg_cgan_ws_new(const struct cg_cgan_config *c, int max_batch,
                                  int checkpoint);
void cg_cgan_ws_free(struct cg_cgan_ws *w);
/* The bytes cg_cgan_ws_new(c, max_batch, checkpoint) allocates, counted
 * without allocating; 0 with a message where it would fail. */
size_t cg_cgan_ws_bytes(const struct cg_cgan_config *c, int max_batch,
                        int checkpoint);

/*
 * Have the passes on w take the generator's weights of views with a
 * dtype other than CG_F32 in mats [nv] (a model's stored, in
 * cg_cgan_views order, nv its view count; copied, their bytes borrowed
 * and outliving w's use) as stored instead of from params: the Linear
 * layers multiplied as stored where qlinear takes them, the rest (the
 * convolutions) decoded one layer at a time (nn/qlinear.h's cg_wset);
 * NULL goes back to params.  The discriminator reads f32 weights only
 * (their spectral norms are copies of them anyway).  Such a workspace
 * runs forward passes and generation only (a gradient is refused).
 * Returns 0, or -1 with a message (a count that is not the config's, a
 * discriminator's weight not f32, a dtype that cannot be decoded, out
 * of memory); w is then as it was.
 */
int cg_cgan_ws_set_mats(struct cg_cgan_ws *w, const struct cg_wmat *mats,
                        int nv);

/* The figures of one pass (batch means). */
struct cg_cgan_loss {
	double d;      /* L_D = d_real + d_fake */
	double d_real; /* mean relu(1 - D(x, y)) */
	double d_fake; /* mean relu(1 + D(G(z, y), y)) */
	double g;      /* L_G = -mean D(G(z, y), y) */
	double r1;     /* the R1 penalty (0 without it) */
	/* the auxiliary classifier's mean cross-entropies on the reals
	 * and on the fakes, unweighted (0 without it): L_D adds lambda
	 * aux_real, L_G lambda aux_fake */
	double aux_real, aux_fake;
	double teacher; /* distilled: T below (else 0) */
};

/*
 * One training pass: x [B, in_dim] real images in [0, 1], cond [B] in
 * [0, ncond), z [B, latent] the noise (drawn by the caller).  *loss (may
 * be NULL) gets the figures above.  If grad != NULL, grad [nparams] +=
 * d(L_G)/d(generator's views) in the generator's range and d(L_D +
 * R1)/d(discriminator's views) in the discriminator's.  Returns 0, or -1 with
 * a message (B outside [1, max_batch], a condition out of range, a
 * workspace made for another config); nothing is written on error.
 */
int cg_cgan_forward_backward(const struct cg_cgan_config *c,
                             const float *params, struct cg_cgan_ws *w,
                             const float *x, const int *cond, const float *z,
                             int B, float *grad, struct cg_cgan_loss *loss);

/*
 * Distillation toward a teacher generator: as cg_cgan_forward_backward,
 * with target [B, in_dim] the teacher's images G_t(z_b, y_b) for the
 * same noise and conditions, and the generator's objective
 *   (1 - alpha) L_G + alpha T,  T = mean_b |G(z_b, y_b) - target_b|^2
 * (the squared distance summed over pixels, in [0, 1] each), loss->teacher
 * = T.  The discriminator's objective is L_D (+ R1) as without a
 * teacher: the model's own discriminator keeps learning the model's
 * fakes.  alpha in [0, 1]; 0 gives cg_cgan_forward_backward's bytes.
 * Returns 0, or -1 with a message (those of cg_cgan_forward_backward,
 * alpha out of range, no target).
 */
int cg_cgan_distill_forward_backward(const struct cg_cgan_config *c,
                                     const float *params, struct cg_cgan_ws *w,
                                     const float *x, const int *cond,
                                     const float *z, const float *target,
                                     double alpha, int B, float *grad,
                                     struct cg_cgan_loss *loss);

/*
 * The generator alone: out [n, in_dim] = G(z [n, latent], cond [n]), n
 * at most max_batch.  Returns 0 or -1 with a message.
 */
int cg_cgan_generate(const struct cg_cgan_config *c, const float *params,
                     struct cg_cgan_ws *w, const float *z, const int *cond,
                     int n, float *out);

/*
 * The discriminator alone: score [n] = D(x [n, in_dim], cond [n]), n at
 * most 2 max_batch, the spectral norms estimated afresh.  Returns 0 or -1.
 */
int cg_cgan_discriminate(const struct cg_cgan_config *c, const float *params,
                         struct cg_cgan_ws *w, const float *x, const int *cond,
                         int n, float *score);

/*
 * The power iteration's vectors of the last pass, for a test or a
 * reference implementation to recompute it: for i in [0, n + 2) (the n
 * hidden layers, layers or, with conv, 2 convolutions; then psi, the
 * embedding), u [OC] and v [C] of that matrix and the sigma it used.
 * Returns -1 for an i out of range.
 */
int cg_cgan_sn_vectors(const struct cg_cgan_ws *w, int i, const float **u,
                       const float **v, double *sigma);

#ifdef __cplusplus
}
#endif
#endif
