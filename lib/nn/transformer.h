/*
 * nn/transformer.h - kernels of a GPT-style decoder: embedding, layernorm,
 * GELU, causal self-attention, residual add, masked softmax cross-entropy.
 * Their exponentials are cg_exp_approx of vmath.h.
 *
 * Plain functions in the manner of llm.c and lib/nn/nn.h: outputs first, then
 * inputs, then sizes; every array's shape is in the comment.  No kernel
 * allocates, does I/O or fails; callers check tokens and sizes first.  A
 * backward ACCUMULATES (+=) into its gradient outputs and zeroing them is
 * the caller's job.  The Linear layers around these kernels are
 * cg_linear_forward/backward of nn.h (cg_sgemm underneath).
 *
 * Dimension letters: B batch (sequences), T positions per sequence, C
 * channels (model width), NH attention heads (C % NH == 0, head size
 * hs = C / NH), V vocabulary, N a flat element count.  Rows of [B, T, ...]
 * arrays are position-major within a sequence, as in llm.c.
 */
#ifndef CG_TRANSFORMER_H
#define CG_TRANSFORMER_H

#include <stddef.h>
#include <stdint.h>

#include "nn/vmath.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ embedding */

/*
 * out[b, t] = wte[tokens[b, t]] + wpe[t].
 * out [B, T, C], tokens [B, T] each in [0, V), wte [V, C], wpe [>= T, C].
 */
void cg_embed_forward(float *out, const int *tokens, const float *wte,
                      const float *wpe, int B, int T, int C);
/*
 * dwte[tokens[b, t]] += dout[b, t], dwpe[t] += sum over b of dout[b, t].
 * dwte [V, C], dwpe [>= T, C], dout [B, T, C], tokens [B, T].
 */
void cg_embed_backward(float *dwte, float *dwpe, const float *dout,
                       const int *tokens, int B, int T, int C);

/* ------------------------------------------------------------ layernorm */

/* The epsilon added to the variance, as PyTorch's nn.LayerNorm. */
#define CG_LN_EPS 1e-5f

/*
 * Per row: out = (inp - mean) * rstd * w + b, with the biased variance.
 * out [B, T, C], mean [B, T], rstd [B, T] (saved for backward),
 * inp [B, T, C], w [C], b [C].  out must not alias inp.
 */
void cg_layernorm_forward(float *out, float *mean, float *rstd,
                          const float *inp, const float *w, const float *b,
                          int B, int T, int C);
/*
 * dinp [B, T, C], dw [C], db [C] += gradients; dout [B, T, C],
 * inp [B, T, C], w [C], mean [B, T], rstd [B, T] from the forward.
 */
void cg_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                           const float *inp, const float *w, const float *mean,
                           const float *rstd, int B, int T, int C);

/* ----------------------------------------------------------------- gelu */

/*
 * out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GPT-2's GELU,
 * PyTorch's GELU(approximate='tanh').  out [N], inp [N]; out may be inp.
 */
void cg_gelu_forward(float *out, const float *inp, size_t N);
/* dinp [N] += dout * gelu'(inp); dout [N], inp [N] (the forward input). */
void cg_gelu_backward(float *dinp, const float *dout, const float *inp,
                      size_t N);
/* The same, but dinp is WRITTEN: no pass to clear it first. */
void cg_gelu_backward_set(float *dinp, const float *dout, const float *inp,
                          size_t N);
/*
 * The same, cg_gelu_forward and cg_gelu_backward_set, each also writing
 * its output rounded for a product (nn/gemm.h's cg_round_rows, es bytes
 * an element) at rout or rdinp, packed, for cg_linear_forward_r and
 * cg_linear_backward_set_r; NULL or es 0: as the plain ones.  The same
 * bits as the plain ones.
 */
void cg_gelu_forward_r(float *out, void *rout, int es, const float *inp,
                       size_t N);
void cg_gelu_backward_set_r(float *dinp, void *rdinp, int es,
                            const float *dout, const float *inp, size_t N);

/* ----------------------------------------------------- causal attention */

/*
 * Multi-head causal self-attention on packed projections, as llm.c:
 * qkv[b, t] holds q (channels 0..C), k (C..2C) and v (2C..3C), head h
 * owning channels h*hs .. (h+1)*hs of each.  For every (b, h, t):
 * att[b, h, t, j] = softmax over j <= t of q_t . k_j / sqrt(hs) (0 for
 * j > t), out[b, t, head h] = sum over j of att[b, h, t, j] v_j.
 * out [B, T, C], att [B, NH, T, T] (saved for backward), qkv [B, T, 3C].
 */
void cg_attention_forward(float *out, float *att, const float *qkv, int B,
                          int T, int C, int NH);
/*
 * One query of one head over positions 0..t, cg_attention_forward's rows
 * to float rounding (it sums the same products in another order), for a
 * key/value cache: a[j] = softmax over j <= t of q . k_j / sqrt(hs), o = sum
 * over j of a[j] v_j.  o [hs], a [t + 1], q [hs]; key j is k + j * ld
 * [hs], value j is v + j * ld [hs].
 */
void cg_attention_row(float *o, float *a, const float *q, const float *k,
                      const float *v, size_t ld, int t, int hs);
/*
 * dqkv [B, T, 3C] += gradient; scratch [B, NH, T, T] is clobbered;
 * dout [B, T, C], qkv [B, T, 3C] and att [B, NH, T, T] from the forward.
 */
void cg_attention_backward(float *dqkv, float *scratch, const float *dout,
                           const float *qkv, const float *att, int B, int T,
                           int C, int NH);

/* ------------------------------------------------------------- residual */

/* out = inp1 + inp2; out [N], inp1 [N], inp2 [N]; out may be either. */
void cg_residual_forward(float *out, const float *inp1, const float *inp2,
                         size_t N);
/* dinp1 += dout, dinp2 += dout; all [N]; dinp1 and dinp2 distinct. */
void cg_residual_backward(float *dinp1, float *dinp2, const float *dout,
                          size_t N);

/* ------------------------------------ softmax cross-entropy with a mask */

/*
 * loss[b, t] = -log softmax(logits[b, t])[targets[b, t]] where
 * weight[b, t] != 0, and 0 (targets not read) where it is 0, so padding
 * may carry any target.  The caller forms sum(weight * loss).
 * loss [B, T] (double: written, not accumulated), logits [B, T, V],
 * targets [B, T] in [0, V) where weight != 0, weight [B, T].
 */
void cg_xent_forward(double *loss, const float *logits, const int *targets,
                     const float *weight, int B, int T, int V);
/*
 * dlogits[b, t] += weight[b, t] * (softmax(logits[b, t]) - onehot(target)):
 * the gradient of sum(weight * loss).  dlogits [B, T, V], logits
 * [B, T, V], targets [B, T], weight [B, T].
 */
void cg_xent_backward(float *dlogits, const float *logits, const int *targets,
                      const float *weight, int B, int T, int V);
/* Both at once, one softmax per row (what a training step wants). */
void cg_xent_forward_backward(double *loss, float *dlogits, const float *logits,
                              const int *targets, const float *weight, int B,
                              int T, int V);

/* ------------------------------------ distillation from a teacher */

/*
 * out[r] = log softmax(logits[r] / tau) for each of rows rows: a teacher's
 * next-token log-probabilities at temperature tau > 0.  out [rows, V],
 * logits [rows, V]; out may be logits.
 */
void cg_log_softmax_forward(float *out, const float *logits, float tau,
                            size_t rows, int V);
/*
 * The two terms of a distilled loss, for each row r with weight[r] != 0
 * (rows of weight 0 get 0 and are not read):
 *   ce[r] = -log softmax(logits[r])[targets[r]],
 *   kl[r] = KL(p || q) = sum_v p_v (tlogp[r, v] - log q_v), with
 *           p = exp(tlogp[r]) the teacher's and q = softmax(logits[r] /
 *           tau) the student's distribution at temperature tau.
 * The loss these make is sum_r weight[r] ((1 - alpha) ce[r] + alpha tau^2
 * kl[r]); with dlogits != NULL its gradient is added:
 *   dlogits[r] += weight[r] ((1 - alpha) (softmax(logits[r]) - onehot)
 *                            + alpha tau (q - p)).
 * alpha = 0 adds exactly what cg_xent_forward_backward adds; alpha = 1
 * adds no data term.  ce, kl [B, T] (double: written); dlogits, logits,
 * tlogp [B, T, V]; targets, weight [B, T]; tau > 0, alpha in [0, 1].
 */
void cg_distill_xent_forward_backward(double *ce, double *kl, float *dlogits,
                                      const float *logits, const float *tlogp,
                                      const int *targets, const float *weight,
                                      float alpha, float tau, int B, int T,
                                      int V);
/*
 * The teacher term alone, for a classifier's rows (lib/arch/cclf): kl[r]
 * = KL(p || q) of cg_distill_xent_forward_backward for each of rows rows,
 * and with dlogits != NULL, dlogits[r] += scale (q - p) (scale: the
 * loss's weight of kl[r] times tau, alpha tau / B for a batch mean of
 * alpha tau^2 kl).  kl [rows] (double: written); dlogits, logits, tlogp
 * [rows, V]; tau > 0.
 */
void cg_distill_kl_forward_backward(double *kl, float *dlogits,
                                    const float *logits, const float *tlogp,
                                    float scale, float tau, size_t rows, int V);

#ifdef __cplusplus
}
#endif
#endif
