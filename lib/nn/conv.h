/*
 * nn/conv.h - the kernels of convolutional models: 2-D convolution,
 * nearest up-sampling, group normalisation, SiLU, average pooling, a
 * per-channel add and a channel concatenation.
 *
 * Feature maps are channels-last (NHWC): x [B, H, W, C], element
 * ((b H + h) W + w) C + c, so that a map is also a batch of B*H*W rows of
 * C features and a 1x1 convolution is a linear layer.  Weights keep
 * PyTorch's layout, [OC, C, KH, KW], so that they cross safetensors
 * unchanged.  The conventions of nn.h hold: outputs first, no kernel
 * allocates, does I/O or fails, and a backward ACCUMULATES (+=) into its
 * gradient outputs.
 */
#ifndef CG_CONV_H
#define CG_CONV_H

#include <stddef.h>

#include "nn/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* -------------------------------------------------------- convolution */

/*
 * The shape of a convolution: input C x H x W, OC filters of KH x KW,
 * stride and zero padding on every side; OH x OW, the output's size, is
 * (H + 2 pad - KH) / stride + 1 (and the same for W).
 */
struct cg_conv {
	int C, H, W, OC, KH, KW, stride, pad;
	int OH, OW;
};

/*
 * Fill c for a square kernel K; 0, or -1 if a size is below 1, pad is
 * negative or at least K, the kernel does not fit the padded input, or a
 * product of sizes a kernel forms passes INT_MAX.
 */
int cg_conv_shape(struct cg_conv *c, int C, int H, int W, int OC, int K,
                  int stride, int pad);

/* Elements of the weight [OC, C, KH, KW] (its bias is [OC]). */
size_t cg_conv_wsize(const struct cg_conv *c);

/*
 * The two views of a convolution named layer (nn.h's struct cg_view):
 * "layer.w" [OC, C, KH, KW] at w_off (weight decay) and "layer.b" [OC]
 * at b_off (none).
 */
void cg_view_conv(struct cg_view v[2], const char *layer, size_t w_off,
                  size_t b_off, const struct cg_conv *c);

/*
 * The scratch (in floats) the passes want for B examples: the weight and
 * its gradient permuted (2 cg_conv_wsize), then the unfolded input
 * ("im2col") of as many examples as fit in the rest of budget floats, at
 * least one; 0 where none is needed (a 1x1 kernel with stride 1 and no
 * padding, which is the linear layer).  A pass given less scratch than
 * this for the same B and budget still works, in more pieces, as long as
 * it holds one example's (cg_conv_scratch(c, 1, 0)).
 */
size_t cg_conv_scratch(const struct cg_conv *c, int B, size_t budget);

/*
 * out = conv(inp, w) + b, as PyTorch's nn.Conv2d (cross-correlation).
 * out [B, OH, OW, OC], inp [B, H, W, C], w [OC, C, KH, KW], b [OC] or
 * NULL; col [ncol] scratch (see cg_conv_scratch).
 */
void cg_conv_forward(const struct cg_conv *c, float *out, const float *inp,
                     const float *w, const float *b, int B, float *col,
                     size_t ncol);
/*
 * dinp += d(loss)/d(inp), dw += d(loss)/d(w), db += d(loss)/d(b), given
 * dout [B, OH, OW, OC]; dinp, dw or db NULL when not wanted.  inp and w
 * are the forward's (inp is not read without dw); col [ncol] scratch as
 * for the forward.
 */
void cg_conv_backward(const struct cg_conv *c, float *dinp, float *dw,
                      float *db, const float *dout, const float *inp,
                      const float *w, int B, float *col, size_t ncol);

/*
 * How many convolution passes (a forward, a backward's input gradient,
 * a backward's weight gradient) oneDNN's primitives have run in this
 * process: 0 where libcg has no oneDNN.  For tests: the engine that
 * should take a convolution took it.
 */
unsigned long cg_conv_dnnl_runs(void);

/* ------------------------------------------------------ up-sampling */

/*
 * Nearest up-sampling by 2: out [B, 2H, 2W, C] with out[b, y, x, c] =
 * inp[b, y/2, x/2, c] (nn.Upsample(scale_factor=2, mode="nearest")).
 */
void cg_upsample2_forward(float *out, const float *inp, int B, int H, int W,
                          int C);
/* dinp [B, H, W, C] += the sum of dout [B, 2H, 2W, C] over each 2x2. */
void cg_upsample2_backward(float *dinp, const float *dout, int B, int H,
                           int W, int C);

/* --------------------------------------------- group normalisation */

/*
 * Group normalisation (Wu and He, 2018) as PyTorch's nn.GroupNorm with
 * eps 1e-5: the C channels fall in G groups of C/G consecutive ones, and
 * each example's group is normalised over its N = HW * C/G values (the
 * biased variance), then scaled and shifted per channel.
 * out [B, HW, C] (may be inp), mean and rstd [B, G] (written: the
 * backward's), inp [B, HW, C], gamma and beta [C].  G divides C.
 */
void cg_groupnorm_forward(float *out, float *mean, float *rstd,
                          const float *inp, const float *gamma,
                          const float *beta, int B, int HW, int C, int G);
/*
 * dinp += d(loss)/d(inp), dgamma += .., dbeta += .., given dout [B, HW,
 * C]; inp, gamma, mean and rstd the forward's.  dinp must not alias dout.
 */
void cg_groupnorm_backward(float *dinp, float *dgamma, float *dbeta,
                           const float *dout, const float *inp,
                           const float *gamma, const float *mean,
                           const float *rstd, int B, int HW, int C, int G);

/* ------------------------------------------------------------- SiLU */

/* out = inp * sigmoid(inp) (nn.SiLU); out [N], inp [N]; out may not be
 * inp (the backward reads the input). */
void cg_silu_forward(float *out, const float *inp, size_t N);
/* dinp += dout * s (1 + inp (1 - s)) with s = sigmoid(inp); dinp must
 * not alias dout. */
void cg_silu_backward(float *dinp, const float *dout, const float *inp,
                      size_t N);

/* ------------------------------------------------ pooling, add, concat */

/* out [B, C] = the mean of inp [B, HW, C] over HW (global average pool). */
void cg_avgpool_forward(float *out, const float *inp, int B, int HW, int C);
/* dinp [B, HW, C] += dout [B, C] / HW at every position. */
void cg_avgpool_backward(float *dinp, const float *dout, int B, int HW,
                         int C);

/* x [B, HW, C] += e [B, C] at every position (an embedding added to a
 * map); the backward: de [B, C] += the sum of dx over HW. */
void cg_add_channel_forward(float *x, const float *e, int B, int HW, int C);
void cg_add_channel_backward(float *de, const float *dx, int B, int HW,
                             int C);

/*
 * y [B, HW, C] = x (1 + e[b, :C]) + e[b, C:], e [B, 2C]: a scale and a
 * shift per example and channel (FiLM, as the U-Nets of Dhariwal and
 * Nichol put an embedding after a norm).  y may not alias x.  The
 * backward: dx += dy (1 + e[b, :C]) (dx NULL: not wanted), de[b, :C] +=
 * the sum over HW of dy x, de[b, C:] += the sum of dy.
 */
void cg_film_forward(float *y, const float *x, const float *e, int B, int HW,
                     int C);
void cg_film_backward(float *dx, float *de, const float *dy, const float *x,
                      const float *e, int B, int HW, int C);

/*
 * out [R, C1 + C2] = a [R, C1] and b [R, C2] side by side in each row (R
 * = B*H*W positions: torch.cat along channels); the backward splits dout
 * into da += .. and db += .. (either NULL when not wanted).
 */
void cg_concat_forward(float *out, const float *a, const float *b, int R,
                       int C1, int C2);
void cg_concat_backward(float *da, float *db, const float *dout, int R,
                        int C1, int C2);

#ifdef __cplusplus
}
#endif
#endif
