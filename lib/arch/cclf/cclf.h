/*
 * arch/cclf/cclf.h - a classifier of images into the conditions of their data
 * (an MLP, or a small CNN).
 *
 * The CNN (conv > 0) first runs the image, channels-last, through a trunk
 * of CG_CCLF_STAGES (3x3 convolution, ReLU) stages: the first at stride 1
 * to conv channels, each next at stride 2 (padding 1) to twice as many;
 * its last map, flattened in channels-last order, is the MLP's input.
 * Then x -> layers x (Linear, ReLU) of width hidden -> Linear to ncond logits;
 * the loss per example is the cross-entropy of the softmax of the logits
 * to the example's condition, and reported losses are batch means.  The
 * last hidden layer's activations (after its ReLU) are the model's
 * features: what cg-eval --judge compares between generated and real
 * images, as FID compares Inception's.  All parameters live in one flat
 * float buffer laid out as cg_cclf_views says.
 */
#ifndef CG_CCLF_H
#define CG_CCLF_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "nn/nn.h"
#include "nn/qlinear.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cg_cclf_config {
	int in_dim; /* pixels per image */
	int ncond;  /* number of conditions (classes) */
	int hidden; /* width of every hidden layer: the features' width */
	int layers; /* hidden layers */
	/*
	 * The convolutional trunk: 0 for none (the MLP), else the channels
	 * of its first stage (see below).  height x width x channels is the
	 * image's shape, channels-last (what in_dim counts); read only when
	 * conv > 0.
	 */
	int conv;
	int height, width, channels;
};

/* Stages of the trunk, and the most channels its first may have. */
#define CG_CCLF_STAGES 3
#define CG_CCLF_MAX_CONV 4096

/* Largest value of any config field, largest parameter count and batch. */
#define CG_CCLF_MAX_DIM (1 << 20)
#define CG_CCLF_MAX_PARAMS ((uint64_t)1 << 34)
#define CG_CCLF_MAX_BATCH (1 << 24)

/*
 * Returns 0 if c is usable: every field in [1, CG_CCLF_MAX_DIM], ncond at
 * least 2, and the parameter count at most CG_CCLF_MAX_PARAMS; else -1
 * with a message.
 */
int cg_cclf_check_config(const struct cg_cclf_config *c);

/* Number of floats in the parameter buffer; 0 (with a message) if c fails
 * cg_cclf_check_config. */
size_t cg_cclf_nparams(const struct cg_cclf_config *c);

/*
 * Fill v[0..] with the named views of the parameter buffer, in buffer
 * order: conv.0.w, conv.0.b, ... (the trunk's, if any), hid.0.w, hid.0.b,
 * ..., out.w, out.b (2 * (stages + layers + 1) views).  Weights are [out,
 * in] like nn.Linear, convolutions' [out, in, 3, 3] like nn.Conv2d, decay
 * 1; biases [out], decay 0.
 * Returns the count, or -1 with a message if c is bad or max is too small.
 */
int cg_cclf_views(const struct cg_cclf_config *c, struct cg_view *v, int max);

/*
 * PyTorch's default nn.Linear and nn.Conv2d init, as cg_cvae_init: W and b
 * uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) (a convolution's fan_in is
 * in channels x 9), drawn from r in buffer order.
 * c must pass cg_cclf_check_config (else nothing is written).
 */
void cg_cclf_init(const struct cg_cclf_config *c, float *params,
                  struct cg_rng *r);

/*
 * Activations workspace for batches of up to max_batch examples, allocated
 * once; the passes allocate nothing.  Returns NULL with a message on a bad
 * config or max_batch, or out of memory; the caller owns it.
 */
struct cg_cclf_ws;
struct cg_cclf_ws *cg_cclf_ws_new(const struct cg_cclf_config *c,
                                  int max_batch);
void cg_cclf_ws_free(struct cg_cclf_ws *w);
/* The bytes cg_cclf_ws_new(c, max_batch) allocates, counted without
 * allocating; 0 with a message where it would fail. */
size_t cg_cclf_ws_bytes(const struct cg_cclf_config *c, int max_batch);

/*
 * Have the passes on w take the weights of views with a dtype other than
 * CG_F32 in mats [nv] (a model's stored, in cg_cclf_views order, nv its
 * view count; copied, their bytes borrowed and outliving w's use) as
 * stored instead of from params: the Linear layers multiplied as
 * stored where qlinear takes them, the rest decoded one layer at a time
 * (nn/qlinear.h's cg_wset); NULL goes back to params.  Such a workspace
 * runs forward passes only (a gradient is refused).  Returns 0, or -1
 * with a message (a count that is not the config's, a dtype that cannot
 * be decoded, out of memory); w is then as it was.
 */
int cg_cclf_ws_set_mats(struct cg_cclf_ws *w, const struct cg_wmat *mats,
                        int nv);

/*
 * One forward pass and, if grad != NULL, the backward pass.
 * params [nparams], x [B, in_dim], cond [B] in [0, ncond) or NULL (no
 * loss: the logits and features alone; grad must then be NULL).
 * *loss = the batch mean of the cross-entropy, *acc = the share of the
 * batch whose largest logit is its condition's (the first largest on a
 * tie); either may be NULL.  grad [nparams] += d(loss)/d(params).
 * Returns 0, or -1 with a message (B outside [1, max_batch], a condition
 * out of range, a workspace made for another config); on error nothing
 * is written.
 */
int cg_cclf_forward_backward(const struct cg_cclf_config *c,
                             const float *params, struct cg_cclf_ws *w,
                             const float *x, const int *cond, int B,
                             float *grad, double *loss, double *acc);

/*
 * DP-SGD's step on a batch: as cg_cclf_forward_backward, but grad
 * [nparams] += the sum over the examples of each one's own gradient g_b
 * (of its cross-entropy, not divided by B) clipped to L2 norm clip: g_b
 * min(1, clip / |g_b|), |g_b| had without making g_b whole (the ghost
 * norm, cg_linear_ghost_sq) and the clipped sum by a second backward pass
 * with each example's logits' gradient scaled.  A convolution's part of
 * |g_b| is made from its input and output gradient one example at a
 * time (the arithmetic of the batch's weight gradient, once more).
 * norms [B] (or NULL) gets each |g_b|.  clip in (0, 1e30].  Returns 0,
 * or -1 with a message.
 */
int cg_cclf_dp_forward_backward(const struct cg_cclf_config *c,
                                const float *params, struct cg_cclf_ws *w,
                                const float *x, const int *cond, int B,
                                double clip, float *grad, double *loss,
                                double *acc, double *norms);

/*
 * Knowledge distillation (Hinton, Vinyals and Dean, 2015): as
 * cg_cclf_forward_backward (cond needed), with the loss per example
 *   (1 - alpha) xent + alpha tau^2 KL(p || q),
 * p = exp(tlogp [B, ncond]) the teacher's class distribution at
 * temperature tau (the log softmax of its logits / tau,
 * cg_log_softmax_forward) and q = softmax(logits / tau) the model's; the
 * factor tau^2 keeps the teacher term's gradient, tau (q - p) / B per
 * logit, of the size of the data term's whatever tau.  Batch means:
 * *data (the cross-entropy), *teacher (tau^2 KL), *loss (their mix),
 * *acc as there; any may be NULL.  grad [nparams] += d(loss)/d(params).
 * alpha in [0, 1] (0: the bytes of cg_cclf_forward_backward), tau > 0.
 * Returns 0, or -1 with a message (those of cg_cclf_forward_backward,
 * alpha or tau out of range); on error nothing is written.
 */
int cg_cclf_distill_forward_backward(const struct cg_cclf_config *c,
                                     const float *params, struct cg_cclf_ws *w,
                                     const float *x, const int *cond,
                                     const float *tlogp, double alpha,
                                     double tau, int B, float *grad,
                                     double *loss, double *acc, double *data,
                                     double *teacher);

/* The logits [B, ncond] and the features [B, hidden] of the last
 * forward pass on w (valid until the next call on w). */
const float *cg_cclf_logits(const struct cg_cclf_ws *w);
const float *cg_cclf_features(const struct cg_cclf_ws *w);

#ifdef __cplusplus
}
#endif
#endif
