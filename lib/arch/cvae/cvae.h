/*
 * arch/cvae/cvae.h - conditional variational auto-encoder (MLP, label
 * concatenated).
 *
 * Encoder: x ⊕ onehot(cond) -> layers x (Linear, ReLU) of width hidden ->
 * two Linear heads for mu and logvar [latent].  Decoder: z ⊕ onehot(cond)
 * -> layers x (Linear, ReLU) -> Linear to in_dim logits.  The loss per
 * example is BCE-with-logits summed over pixels (x is a Bernoulli target in
 * [0, 1]) plus KL(N(mu, exp(logvar)) || p(z | cond)); reported losses are
 * batch means.  All parameters live in one flat float buffer laid out as
 * cg_cvae_views says.
 *
 * The prior p(z | cond): N(0, I) for every condition, or with class_prior
 * a diagonal Gaussian of its own for each condition, N(prior.mu[cond],
 * exp(prior.logvar[cond])), learnt with the rest (zero at init: N(0, I)).
 * The encoder sees the image, and the latent learns the class from it
 * whatever the label says; one prior for all classes then puts the
 * samples of class c where the decoder has learnt other classes' images.
 * A prior per class puts them where class c's own images are encoded.
 *
 * With cond_every, every hidden layer after the first, in the encoder and
 * in the decoder, also takes the condition: a row per condition, of a
 * table [ncond, hidden] of its own, added before the ReLU (the one-hot
 * concatenated to the layer's input, as the first layers take it; zero
 * at init).  The label then reaches the decoder's output through more
 * than one layer, and the encoder can take the class out of z.
 *
 * With conv = C > 0 both sides are convolutional (cvae_conv.c), on an
 * image of H x W x ch channels-last, H and W multiples of 4, with F =
 * (H/4)(W/4)(2C) and N(p) = FiLM(groupnorm(p), row cond of a table):
 *
 *   encoder  a_1 = silu(N(enc.c1 *2 x))                 [H/2, W/2, C]
 *            a_2 = silu(N(enc.c2 *2 a_1))               [H/4, W/4, 2C]
 *            mu, logvar = enc.mu, enc.logvar (a_2 ⊕ onehot(cond))
 *   decoder  a_0 = silu(N(dec.0 (z ⊕ onehot(cond))))    [H/4, W/4, 2C]
 *            a_3 = silu(N(dec.c1 * up(a_0)))            [H/2, W/2, C]
 *            a_4 = silu(N(dec.c2 * up(a_3)))            [H, W, C]
 *            logits = dec.out * a_4                     [H, W, ch]
 *
 * where * is a 3x3 convolution with padding 1 (*2 at stride 2) and its
 * bias, up nearest up-sampling by 2, and the norms have 8 groups (or 4,
 * 2, 1: the most that divide the channels into groups of 2 or more).  The one-hot enters the
 * heads and the decoder's first layer as the MLP's first layers take
 * it; with cond_every each of the five norms is followed by FiLM, a
 * scale and a shift per channel from its own table [ncond, 2 channels]
 * (zero at init: the identity), so the condition enters every stage;
 * without, N is the group norm alone.  The loss, the class prior and
 * sampling are the MLP's.  hidden and layers are unused.
 */
#ifndef CG_CVAE_H
#define CG_CVAE_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "nn/nn.h"
#include "nn/qlinear.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cg_cvae_config {
	int in_dim;      /* pixels per image */
	int ncond;       /* number of conditions (classes) */
	int hidden;      /* width of every hidden layer */
	int layers;      /* hidden layers in the encoder, and in the decoder */
	int latent;      /* size of z */
	int class_prior; /* 1: a learnt prior per condition; 0: N(0, I) */
	int cond_every;  /* 1: the condition at every hidden layer; 0: first */
	/*
	 * The convolutional nets: 0 for none (the MLPs), else the channels
	 * of the first map; height x width x channels is the image's shape
	 * (what in_dim counts), read only when conv > 0.
	 */
	int conv;
	int height, width, channels;
};

#define CG_CVAE_MAX_CONV 4096

/* Largest value of any config field, largest parameter count and batch. */
#define CG_CVAE_MAX_DIM (1 << 20)
#define CG_CVAE_MAX_PARAMS ((uint64_t)1 << 34)
#define CG_CVAE_MAX_BATCH (1 << 24)

/*
 * Returns 0 if c is usable: every size in [1, CG_CVAE_MAX_DIM], class_prior
 * and cond_every 0 or 1, conv in [0, CG_CVAE_MAX_CONV] (and with conv,
 * an image whose sides are multiples of 4 and whose shape is in_dim's),
 * and the parameter count at most CG_CVAE_MAX_PARAMS; else -1 with a
 * message.
 */
int cg_cvae_check_config(const struct cg_cvae_config *c);

/* Number of floats in the parameter buffer; 0 (with a message) if c fails
 * cg_cvae_check_config. */
size_t cg_cvae_nparams(const struct cg_cvae_config *c);

/*
 * Fill v[0..] with the named views of the parameter buffer, in buffer
 * order: enc.0.w, enc.0.b, ..., enc.mu.w, enc.mu.b, enc.logvar.w,
 * enc.logvar.b, dec.0.w, ..., dec.out.w, dec.out.b (4*layers + 6 views),
 * then with class_prior prior.mu and prior.logvar [ncond, latent] (2 more),
 * then with cond_every the condition's rows enc.1.cond .. enc.{layers-1}.cond,
 * dec.1.cond .. dec.{layers-1}.cond [ncond, hidden] (2 * (layers - 1)
 * more); the layers' layout is the same with or without them.  Weights
 * are [out, in] like nn.Linear, decay 1; biases [out], the prior and the
 * condition's rows, decay 0.
 * With conv: enc.c1 (.w [C, channels, 3, 3], .b), enc.n1 (.g, .b [C]),
 * enc.c2, enc.n2 [2C], enc.mu, enc.logvar [latent, F + ncond], dec.0
 * [F, latent + ncond], dec.n0 [2C], dec.c1, dec.n1, dec.c2, dec.n2 [C],
 * dec.out [channels, C, 3, 3] (26 views), then the prior's 2, then with
 * cond_every the FiLM tables enc.n1.cond, enc.n2.cond, dec.n0.cond,
 * dec.n1.cond, dec.n2.cond [ncond, 2 x the norm's channels].
 * Returns the count, or -1 with a message if c is bad or max is too small.
 */
int cg_cvae_views(const struct cg_cvae_config *c, struct cg_view *v, int max);

/* The number of views cg_cvae_views gives for c, which must pass
 * cg_cvae_check_config. */
int cg_cvae_nviews(const struct cg_cvae_config *c);

/*
 * PyTorch's default nn.Linear init: W and b uniform in
 * [-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn from r in buffer order; the
 * prior and the condition's rows zero, drawing nothing.  params
 * [nparams].  c must pass
 * cg_cvae_check_config (else nothing is written).
 */
void cg_cvae_init(const struct cg_cvae_config *c, float *params,
                  struct cg_rng *r);

/*
 * Activations workspace for batches of up to max_batch examples, allocated
 * once; forward, backward and decode allocate nothing.  A workspace serves
 * one call at a time.  With checkpoint != 0 the convolutional nets keep
 * less and recompute the rest in the backward pass, to the same bits
 * (cvae_conv.h); the MLP keeps every activation either way.  Returns
 * NULL with a message on a bad config or max_batch, or out of memory;
 * the caller owns it.
 */
struct cg_cvae_ws;
struct cg_cvae_ws *cg_cvae_ws_new(const struct cg_cvae_config *c, int max_batch,
                                  int checkpoint);
void cg_cvae_ws_free(struct cg_cvae_ws *w);
/* The bytes cg_cvae_ws_new takes for c, max_batch and checkpoint; 0
 * with a message where it would fail for the config or the size. */
size_t cg_cvae_ws_bytes(const struct cg_cvae_config *c, int max_batch,
                        int checkpoint);

/*
 * The Linear layers' matrices for a model whose matrices stay as a file
 * stores them (cg_model_read_infer), in buffer order (the views' order,
 * weights only): encoder 0 .. layers - 1, the mu and logvar heads, decoder,
 * output layer.  An entry of dtype CG_F32 points at its floats.
 */
#define CG_CVAE_NMATS(layers) (2 * (layers) + 3)
/*
 * Have the passes on w multiply mats [CG_CVAE_NMATS(c->layers)] (copied;
 * their bytes borrowed and must outlive w's use) instead of the matrices
 * in params; NULL goes back to params.  Such a workspace runs losses and
 * decoding only (a gradient is refused).  Returns 0, or -1 with a
 * message (a matrix that cannot be multiplied as stored, the
 * convolutional nets, out of memory).
 */
int cg_cvae_ws_set_mats(struct cg_cvae_ws *w, const struct cg_wmat *mats);

/*
 * One forward pass and, if grad != NULL, the backward pass.
 * params [nparams], x [B, in_dim] in [0, 1], cond [B] in [0, ncond),
 * eps [B, latent] standard-normal noise drawn by the caller.
 * *loss = mean over the batch of (rec + kl), kl against p(z | cond),
 * *rec and *kl its two parts
 * (any of the three may be NULL).  grad [nparams] += d(loss)/d(params).
 * Returns 0, or -1 with a message (B outside [1, max_batch], a condition
 * out of range, a workspace made for another config); on error nothing
 * is written.
 */
int cg_cvae_forward_backward(const struct cg_cvae_config *c,
                             const float *params, struct cg_cvae_ws *w,
                             const float *x, const int *cond, const float *eps,
                             int B, float *grad, double *loss, double *rec,
                             double *kl);

/*
 * Distillation: as cg_cvae_forward_backward, with a teacher's decoder
 * logits for the same images divided by tau, tlogits [B, in_dim], as soft
 * Bernoulli targets: *teacher (may be NULL) = the batch mean of tau^2 *
 * sum over pixels of KL(Bern(sigmoid(tlogits)) || Bern(sigmoid(logits /
 * tau))), and *loss = mean of (1 - alpha) rec + kl, + alpha * teacher;
 * *rec and *kl are the plain parts, unweighed.  alpha = 0 gives the bits
 * of cg_cvae_forward_backward.  tau > 0, alpha in [0, 1].  Returns 0, or
 * -1 with a message as cg_cvae_forward_backward (and for the
 * convolutional nets, which are not distilled).
 */
int cg_cvae_distill_forward_backward(const struct cg_cvae_config *c,
                                     const float *params, struct cg_cvae_ws *w,
                                     const float *x, const int *cond,
                                     const float *eps, const float *tlogits,
                                     double alpha, double tau, int B,
                                     float *grad, double *loss, double *rec,
                                     double *kl, double *teacher);

/*
 * DP-SGD's step on a batch: as cg_cvae_forward_backward, but grad
 * [nparams] += the sum over the examples of each one's own gradient g_b
 * (of its rec + kl, not divided by B) clipped to L2 norm clip: g_b
 * min(1, clip / |g_b|).  |g_b| is had without making g_b (the ghost
 * norm: a backward pass without the weights' products, from each
 * Linear layer's input and output gradient), then a second backward
 * pass, each example's gradient scaled at its start, makes the clipped
 * sum: one forward and two backward passes for the batch, not B.
 * norms [B] (or NULL) gets each |g_b|.  clip in (0, 1e30].  Returns 0,
 * or -1 with a message as cg_cvae_forward_backward (matrices as stored
 * and the convolutional nets are refused).
 */
int cg_cvae_dp_forward_backward(const struct cg_cvae_config *c,
                                const float *params, struct cg_cvae_ws *w,
                                const float *x, const int *cond,
                                const float *eps, int B, double clip,
                                float *grad, double *loss, double *rec,
                                double *kl, double *norms);

/* The decoder's logits [B, in_dim] of the last forward pass on w (valid
 * until the next call on w). */
const float *cg_cvae_logits(const struct cg_cvae_ws *w);

/*
 * Decode: probs [B, in_dim] = sigmoid(decoder(z ⊕ onehot(cond))).
 * z [B, latent], cond [B].  Returns 0, or -1 with a message as above.
 */
int cg_cvae_decode(const struct cg_cvae_config *c, const float *params,
                   struct cg_cvae_ws *w, const float *z, const int *cond, int B,
                   float *probs);

/*
 * A draw from the prior: z = prior mean + exp(prior logvar / 2) eps for
 * each example's condition (z = eps without class_prior).  z [B, latent]
 * (may be eps), eps [B, latent], cond [B].  Returns 0, or -1 with a
 * message (a condition out of range).
 */
int cg_cvae_prior_sample(const struct cg_cvae_config *c, const float *params,
                         float *z, const float *eps, const int *cond, int B);

/*
 * What reaches each Linear layer, for Wanda's importance: the encoder,
 * the sample z = mu + exp(logvar / 2) eps and the decoder's hidden
 * layers on x, cond, eps as cg_cvae_forward_backward takes them, adding
 * for each layer in buffer order (enc.0 .. enc.mu, enc.logvar, dec.0 ..
 * dec.out) and each of its input columns j the sum over the B examples
 * of x_j^2 to sq (double; the layers' input widths end to end).
 * Returns 0, or -1 with a message as cg_cvae_forward_backward (and for
 * the convolutional nets).
 */
int cg_cvae_input_sq(const struct cg_cvae_config *c, const float *params,
                     struct cg_cvae_ws *w, const float *x, const int *cond,
                     const float *eps, int B, double *sq);

#ifdef __cplusplus
}
#endif
#endif
