/*
 * arch/cvae/cvae_conv.h - the cvae's convolutional nets (conv > 0).
 *
 * The encoder and decoder of cvae.h's conv form, for cvae.c, which keeps
 * the loss, the reparameterisation, the KL and the class prior, and
 * calls these for the nets on either side of them.  The layout: the
 * nets' tensors (cvae.h's order), then the class prior's two tables,
 * then with cond_every the five FiLM tables; cg_cvae_conv_views gives
 * every view.  The functions here take a config that passed
 * cg_cvae_conv_check.
 */
#ifndef CG_CVAE_CONV_H
#define CG_CVAE_CONV_H

#include <stddef.h>

#include "arch/cvae/cvae.h"

/* Views of a conv cvae: 26 for the nets, 2 for the class prior, 5 FiLM
 * tables. */
#define CG_CVAE_CONV_NETS 26

/*
 * 0 if c's conv form is usable: the image height x width x channels
 * in_dim's, sides multiples of 4, the first layers' widths at most
 * CG_CVAE_MAX_DIM, at most CG_CVAE_MAX_PARAMS parameters; else -1 with
 * a message.  c->conv > 0.
 */
int cg_cvae_conv_check(const struct cg_cvae_config *c);

/* Floats of the whole parameter buffer; where the class prior's tables
 * start (the nets' floats). */
size_t cg_cvae_conv_nparams(const struct cg_cvae_config *c);
size_t cg_cvae_conv_prior_at(const struct cg_cvae_config *c);

/* The views, as cg_cvae_views (the count, or -1 with a message where
 * max is too small), and their count. */
int cg_cvae_conv_nviews(const struct cg_cvae_config *c);
int cg_cvae_conv_views(const struct cg_cvae_config *c, struct cg_view *v,
                       int max);

/* PyTorch's default init of every convolution and Linear layer, drawn
 * from r in buffer order; the norms' scales 1, every shift, the prior
 * and the FiLM tables 0 (no draw). */
void cg_cvae_conv_init(const struct cg_cvae_config *c, float *params,
                       struct cg_rng *r);

/*
 * The nets' activations for batches of up to max_batch, allocated once
 * (NULL with a message), checkpointed where checkpoint != 0 (each stage
 * keeps its layer's output, the rest is made again in the backward
 * pass: the same bits); cg_cvae_cnet_bytes what that takes (0 with a
 * message).  _free(NULL) is a no-op.
 */
struct cg_cvae_cnet;
struct cg_cvae_cnet *cg_cvae_cnet_new(const struct cg_cvae_config *c,
                                      int max_batch, int checkpoint);
size_t cg_cvae_cnet_bytes(const struct cg_cvae_config *c, int max_batch,
                          int checkpoint);
void cg_cvae_cnet_free(struct cg_cvae_cnet *n);

/*
 * The encoder: mu, logvar [B, latent] of x [B, in_dim] and cond [B]
 * (checked by the caller), its activations kept in n for the backward.
 * The decoder: logits [B, in_dim] of z [B, latent] and cond.
 */
void cg_cvae_conv_encode(const struct cg_cvae_config *c, const float *params,
                         struct cg_cvae_cnet *n, const float *x,
                         const int *cond, int B, float *mu, float *logvar);
void cg_cvae_conv_decode(const struct cg_cvae_config *c, const float *params,
                         struct cg_cvae_cnet *n, const float *z,
                         const int *cond, int B, float *logits);
/*
 * Backward of the last decode on n: dz [B, latent] += d(loss)/d(z) and
 * grad += the decoder's gradients, given dlogits [B, in_dim].  Of the
 * last encode: grad += the encoder's, given dmu and dlogvar [B, latent];
 * x the encode's.
 */
void cg_cvae_conv_decode_backward(const struct cg_cvae_config *c,
                                  const float *params, struct cg_cvae_cnet *n,
                                  const int *cond, int B, const float *dlogits,
                                  float *grad, float *dz);
void cg_cvae_conv_encode_backward(const struct cg_cvae_config *c,
                                  const float *params, struct cg_cvae_cnet *n,
                                  const float *x, const int *cond, int B,
                                  const float *dmu, const float *dlogvar,
                                  float *grad);

#endif
