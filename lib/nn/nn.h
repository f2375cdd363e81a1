/*
 * nn/nn.h - neural-network kernels over flat float arrays.
 *
 * Plain functions in the manner of llm.c: outputs first, then inputs, then
 * sizes; every array's shape is in the comment.  No kernel allocates, does
 * I/O or fails.  Forward and backward come in pairs; a backward ACCUMULATES
 * (+=) into its gradient outputs, and zeroing them is the caller's job.
 * Dimension letters: B batch, C input features, OC output features,
 * N a flat element count, L latent size, K number of conditions.
 */
#ifndef CG_NN_H
#define CG_NN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef CG_VIEW_DEFINED
#define CG_VIEW_DEFINED
/*
 * A named slice of a model's flat parameter buffer: elements [off, off+n),
 * row-major with the given shape.  decay is 1 where weight decay applies
 * (matrices) and 0 where it does not (biases).
 */
struct cg_view {
	char name[64];
	size_t off;
	size_t n;
	int ndim;
	uint64_t shape[4];
	int decay;
};
#endif

/* View v named name at off: a matrix [rows, cols], or with cols 0 a
 * vector [rows]; decay 1 where weight decay applies. */
void cg_view_set(struct cg_view *v, const char *name, size_t off, size_t rows,
                 size_t cols, int decay);
/*
 * The two views of a linear layer named layer: "layer.w" [out, in] at
 * w_off (weight decay) and "layer.b" [out] at b_off (none).
 */
void cg_view_linear(struct cg_view v[2], const char *layer, size_t w_off,
                    size_t b_off, int out, int in);

/*
 * PyTorch's default init of a Linear or convolution layer: p [n] (its
 * weight, then its bias where they follow each other) uniform in
 * [-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn from r in order.
 */
struct cg_rng;
void cg_init_uniform(float *p, size_t n, size_t fan_in, struct cg_rng *r);

/* ---------------------------------------------------------------- linear */

/*
 * out = inp @ w^T + b, as PyTorch's nn.Linear.
 * out [B, OC], inp [B, C], w [OC, C], b [OC] or NULL.
 */
void cg_linear_forward(float *out, const float *inp, const float *w,
                       const float *b, int B, int C, int OC);
/*
 * dinp += dout @ w, dw += dout^T @ inp, db += sum over B of dout.
 * dinp [B, C] or NULL (not wanted), dw [OC, C] or NULL (with db: not
 * wanted), db [OC] or NULL, dout [B, OC], inp [B, C], w [OC, C].
 */
void cg_linear_backward(float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, int B, int C, int OC);
/* The same, but dinp is WRITTEN (= dout @ w): no pass to clear it first. */
void cg_linear_backward_set(float *dinp, float *dw, float *db,
                            const float *dout, const float *inp,
                            const float *w, int B, int C, int OC);
/*
 * The same two with operands their producers rounded for the products
 * (cg_gelu_forward_r): rinp [B, C] and rdout [B, OC], of es bytes an
 * element as cg_rounded_size gives for the product (nn/gemm.h), packed.
 * Each is taken where it is not NULL and es is the size the product
 * wants here; otherwise the kernel rounds inp or dout itself.  The same
 * bits as cg_linear_forward and cg_linear_backward_set.
 */
void cg_linear_forward_r(float *out, const float *inp, const void *rinp,
                         int es, const float *w, const float *b, int B, int C,
                         int OC);
void cg_linear_backward_set_r(float *dinp, float *dw, float *db,
                              const float *dout, const void *rdout,
                              const float *inp, const void *rinp, int es,
                              const float *w, int B, int C, int OC);
/*
 * Linear then ReLU in one pass over threads: out = max(inp @ w^T + b, 0).
 * Same shapes as cg_linear_forward; the same bits as it and
 * cg_relu_forward in turn.
 */
void cg_linear_relu_forward(float *out, const float *inp, const float *w,
                            const float *b, int B, int C, int OC);
/*
 * The same with add [B, OC] added before the ReLU: out = max((inp @ w^T +
 * b) + add, 0), the sum in that order (the bits of cg_linear_forward,
 * then the addition, then the ReLU, each in turn), in the same pass.
 */
void cg_linear_add_relu_forward(float *out, const float *inp, const float *w,
                                const float *b, const float *add, int B, int C,
                                int OC);
/*
 * Backward of cg_linear_relu_forward, given dout [B, OC] = d(loss)/d(out)
 * and out [B, OC] its output: dpre [B, OC] (scratch, written) gets
 * d(loss)/d(inp @ w^T + b); dw and db accumulate as in cg_linear_backward,
 * but dinp [B, C] is WRITTEN (= d(loss)/d(inp)), and may be dout when C
 * == OC (dout is read before dinp is written).  dinp or db NULL when not
 * wanted; dpre must not alias any other array.
 */
void cg_linear_relu_backward(float *dinp, float *dw, float *db, float *dpre,
                             const float *dout, const float *out,
                             const float *inp, const float *w, int B, int C,
                             int OC);

/*
 * The "ghost norm" of a linear layer y = inp @ w^T + b for DP-SGD: each
 * example is one row, so its own gradient dw_b = dout_b^T inp_b is of
 * rank one and its squared norm is |dout_b|^2 |inp_b|^2 (plus |dout_b|^2
 * for the bias, db_b = dout_b, when bias != 0), had without making
 * dw_b.  sq [B] += that, in double.  dout [B, OC], inp [B, C] or NULL
 * (C 0: a bias alone, or a table's row one example reads).
 */
void cg_linear_ghost_sq(double *sq, const float *dout, const float *inp, int B,
                        int C, int OC, int bias);
/* Row b of x [B, N] *= s [b]. */
void cg_scale_rows(float *x, const float *s, int B, size_t N);

/* ------------------------------------------------------------------ relu */

/* out = max(inp, 0); out [N], inp [N]; out may be inp. */
void cg_relu_forward(float *out, const float *inp, size_t N);
/*
 * dinp += dout where out > 0 (the gradient at 0 is taken as 0).
 * dinp [N], dout [N], out [N] (the forward output, or its input: the sign
 * test is the same).  dinp must not alias dout.
 */
void cg_relu_backward(float *dinp, const float *dout, const float *out,
                      size_t N);

/* --------------------------------------------------------------- sigmoid */

/* out = 1 / (1 + exp(-inp)); out [N], inp [N]; out may be inp. */
void cg_sigmoid_forward(float *out, const float *inp, size_t N);

/* ----------------------------------------------- binary cross-entropy */

/*
 * Per-example BCE-with-logits summed over features, computed stably as
 * max(l, 0) - l*t + log1p(exp(-|l|)).
 * loss [B] (double: written, not accumulated), logits [B, N], targets
 * [B, N] (in [0, 1]).
 */
void cg_bce_logits_forward(double *loss, const float *logits,
                           const float *targets, int B, int N);
/*
 * dlogits += scale * (sigmoid(logits) - targets); scale is d(total)/d(each
 * example's loss), e.g. 1/B for a batch mean.
 * dlogits [B, N], logits [B, N], targets [B, N].
 */
void cg_bce_logits_backward(float *dlogits, const float *logits,
                            const float *targets, float scale, int B, int N);

/*
 * Both at once, sharing one exp per element (what a training step wants):
 * loss as cg_bce_logits_forward, dlogits as cg_bce_logits_backward.
 */
void cg_bce_logits_forward_backward(double *loss, float *dlogits,
                                    const float *logits, const float *targets,
                                    float scale, int B, int N);

/*
 * Distillation of Bernoulli outputs at temperature tau > 0: per example,
 * kl[b] = sum over N of KL(Bern(sigmoid(tlogits)) || Bern(sigmoid(logits
 * / tau))), the teacher's logits tlogits already divided by tau, computed
 * stably as softplus(s) - softplus(t) - sigmoid(t) (s - t) for s = logits
 * / tau, t = tlogits.  With dlogits != NULL, dlogits += scale * tau *
 * (sigmoid(s) - sigmoid(t)): the gradient of scale * tau^2 * kl.
 * kl [B] (double: written), dlogits, logits, tlogits [B, N].
 */
void cg_bern_kl_forward_backward(double *kl, float *dlogits,
                                 const float *logits, const float *tlogits,
                                 float tau, float scale, int B, int N);

/* --------------------------------------------------- Gaussian KL to N(0,I) */

/*
 * kl = -0.5 * sum over L of (1 + logvar - mu^2 - exp(logvar)), per example.
 * kl [B] (double: written), mu [B, L], logvar [B, L].
 */
void cg_gauss_kl_forward(double *kl, const float *mu, const float *logvar,
                         int B, int L);
/*
 * dmu += scale * mu, dlogvar += scale * 0.5 * (exp(logvar) - 1).
 * dmu [B, L], dlogvar [B, L], mu [B, L], logvar [B, L].
 */
void cg_gauss_kl_backward(float *dmu, float *dlogvar, const float *mu,
                          const float *logvar, float scale, int B, int L);

/* -------------------------------------------------- reparameterisation */

/*
 * z = mu + exp(0.5 * logvar) * eps.
 * z [N], mu [N], logvar [N], eps [N] (standard normal, from the caller).
 */
void cg_reparam_forward(float *z, const float *mu, const float *logvar,
                        const float *eps, size_t N);
/*
 * dmu += dz, dlogvar += dz * eps * 0.5 * exp(0.5 * logvar).
 * dmu [N], dlogvar [N], dz [N], logvar [N], eps [N].
 */
void cg_reparam_backward(float *dmu, float *dlogvar, const float *dz,
                         const float *logvar, const float *eps, size_t N);

/* ------------------------------------------------ concat with one-hot */

/*
 * out = inp ⊕ onehot(cond): each row is inp's D values, then K values that
 * are 1 at cond and 0 elsewhere.  A cond outside [0, K) gives an all-zero
 * one-hot part (callers check conditions before they get here).
 * out [B, D+K], inp [B, D], cond [B].
 */
void cg_concat_onehot_forward(float *out, const float *inp, const int *cond,
                              int B, int D, int K);
/*
 * dinp += the first D columns of dout (the one-hot part has no gradient).
 * dinp [B, D], dout [B, D+K].
 */
void cg_concat_onehot_backward(float *dinp, const float *dout, int B, int D,
                               int K);

/* ----------------------------------------------------------- leaky relu */

/* out = inp where inp > 0, else slope * inp; out [N], inp [N]; out may
 * be inp.  slope in (0, 1). */
void cg_lrelu_forward(float *out, const float *inp, float slope, size_t N);
/*
 * dinp += dout where out > 0, slope * dout elsewhere (the gradient at 0
 * is taken as slope's).  dinp [N], dout [N], out [N] (the forward output,
 * or its input: with slope > 0 the sign test is the same).  dinp must not
 * alias dout.
 */
void cg_lrelu_backward(float *dinp, const float *dout, const float *out,
                       float slope, size_t N);

/* -------------------------------------------------- spectral norm */

/*
 * The power iteration of Miyato et al. (2018) on w [OC, C], from a fixed
 * start v0 (standard normal draws from a generator seeded with a constant,
 * normalised: the same for every call, so that the result is a function of
 * w alone), iters >= 1 times: u = normalize(w v), v = normalize(w^T u)
 * (w v summed in double, w^T u in float), serially.  u [OC] and v [C] get the
 * last pair, rounded to float; the return value is sigma = u^T w v (in double),
 * the estimate of w's largest singular value (0 for w = 0, u and v then 0).
 */
double cg_spectral_power(float *u, float *v, const float *w, int OC, int C,
                         int iters);
/*
 * wsn = w / sigma with sigma = u^T w v (in double), u and v held fixed
 * (what PyTorch's spectral_norm parametrization does in training mode).
 * wsn [OC, C], w [OC, C], u [OC], v [C].  Returns sigma; where sigma is
 * not positive (w = 0), wsn is w unscaled and 1 is returned.
 */
double cg_spectral_norm_forward(float *wsn, const float *w, const float *u,
                                const float *v, int OC, int C);
/*
 * dw += (dwsn - <dwsn, wsn> u v^T) / sigma: the gradient through wsn = w /
 * (u^T w v) with u and v constants.  dw, dwsn, wsn [OC, C], u [OC], v [C],
 * sigma as the forward returned it.  dw must not alias dwsn.
 */
void cg_spectral_norm_backward(float *dw, const float *dwsn, const float *wsn,
                               const float *u, const float *v, double sigma,
                               int OC, int C);

#ifdef __cplusplus
}
#endif
#endif
