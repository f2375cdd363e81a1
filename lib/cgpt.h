/*
 * cgpt.h - conditional byte-level decoder-only transformer (GPT-2 style).
 *
 * Tokens are bytes 0..255, then one token per condition (256 + cond), then
 * EOT (256 + ncond): V = 257 + ncond.  The model is GPT-2's: token plus
 * learned position embeddings, L pre-LayerNorm blocks (causal multi-head
 * self-attention, then an MLP C -> 4C -> C with tanh-GELU, each added to
 * the residual stream), a final LayerNorm and a bias-free projection to V
 * logits, either its own matrix lm_head.w or the token embedding (tied).
 * The loss is a weighted sum of per-position cross-entropies; the caller's
 * weights both mask positions out and normalise (mask / count gives a
 * mean).  All parameters live in one flat float buffer laid out as
 * cg_cgpt_views says; the views' names follow GPT-2's.
 */
#ifndef CG_CGPT_H
#define CG_CGPT_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cg_cgpt_config {
	int ncond; /* condition tokens; V = 256 + ncond + 1 */
	int T;     /* context: most positions a sequence may have */
	int C;     /* width */
	int L;     /* layers (blocks) */
	int NH;    /* heads; C % NH == 0 */
	int tied;  /* 1: logits use wte, and there is no lm_head.w */
};

/* Limits of the config fields, the parameter count and the batch. */
#define CG_CGPT_MAX_COND 65536
#define CG_CGPT_MAX_T (1 << 14)
#define CG_CGPT_MAX_C (1 << 16)
#define CG_CGPT_MAX_L 1024
#define CG_CGPT_MAX_PARAMS ((uint64_t)1 << 34)
#define CG_CGPT_MAX_BATCH (1 << 24)

/* Vocabulary size: 256 bytes, ncond condition tokens, EOT. */
static inline int
cg_cgpt_vocab(const struct cg_cgpt_config *c)
{
	return 256 + c->ncond + 1;
}

/*
 * Returns 0 if c is usable: ncond in [1, CG_CGPT_MAX_COND], T in
 * [1, CG_CGPT_MAX_T], C in [1, CG_CGPT_MAX_C], L in [1, CG_CGPT_MAX_L],
 * NH in [1, C] dividing C, tied 0 or 1, at most CG_CGPT_MAX_PARAMS
 * parameters; else -1 with a message.
 */
int cg_cgpt_check_config(const struct cg_cgpt_config *c);

/* Number of floats in the parameter buffer; 0 (with a message) if c fails
 * cg_cgpt_check_config. */
size_t cg_cgpt_nparams(const struct cg_cgpt_config *c);

/* Number of views: 12 L + 4, plus 1 when untied. */
int cg_cgpt_nviews(const struct cg_cgpt_config *c);

/*
 * Fill v[0..] with the named views in buffer order:
 *   wte [V, C], wpe [T, C], then per block l
 *   h.l.ln1.w [C], h.l.ln1.b [C], h.l.attn.qkv.w [3C, C],
 *   h.l.attn.qkv.b [3C], h.l.attn.proj.w [C, C], h.l.attn.proj.b [C],
 *   h.l.ln2.w [C], h.l.ln2.b [C], h.l.mlp.fc.w [4C, C], h.l.mlp.fc.b [4C],
 *   h.l.mlp.proj.w [C, 4C], h.l.mlp.proj.b [C],
 *   then lnf.w [C], lnf.b [C] and, untied, lm_head.w [V, C].
 * Linear weights are [out, in] as nn.Linear.  Weight decay (decay 1) is on
 * the Linear weights only (qkv, proj, fc, lm_head), as in GPT-2 and
 * minGPT; biases, LayerNorm gains and both embeddings have decay 0, and
 * so has wte when tied (it stays an embedding).  Returns the count, or -1
 * with a message if c is bad or max is too small.
 */
int cg_cgpt_views(const struct cg_cgpt_config *c, struct cg_view *v, int max);

/*
 * GPT-2's init, drawn from r in buffer order: embeddings and Linear weights
 * normal(0, 0.02), the two projections into the residual stream
 * (attn.proj.w, mlp.proj.w) normal(0, 0.02 / sqrt(2 L)), biases 0,
 * LayerNorm gains 1.  params [nparams].  c must pass cg_cgpt_check_config
 * (else nothing is written).
 */
void cg_cgpt_init(const struct cg_cgpt_config *c, float *params,
                  struct cg_rng *r);

/*
 * Activations and their gradients for up to max_batch sequences of up to
 * c->T positions, allocated once; the passes allocate nothing.  A
 * workspace serves one call at a time.  Returns NULL with a message on a
 * bad config or max_batch, or out of memory; the caller owns it.
 */
struct cg_cgpt_ws;
struct cg_cgpt_ws *cg_cgpt_ws_new(const struct cg_cgpt_config *c,
                                  int max_batch);
void cg_cgpt_ws_free(struct cg_cgpt_ws *w);

/*
 * Forward pass to the logits, which cg_cgpt_logits then returns.
 * params [nparams], tokens [B, T] each in [0, V); B in [1, max_batch],
 * T in [1, c->T].  Returns 0, or -1 with a message (sizes, a token out of
 * range, a workspace made for another config).
 */
int cg_cgpt_forward(const struct cg_cgpt_config *c, const float *params,
                    struct cg_cgpt_ws *w, const int *tokens, int B, int T);

/* The logits [B, T, V] of the last cg_cgpt_forward on w (valid until the
 * next call on w; a forward_backward with a gradient keeps them too). */
const float *cg_cgpt_logits(const struct cg_cgpt_ws *w);

/*
 * Forward pass, loss and, if grad != NULL, the backward pass.
 * tokens [B, T] as above; targets [B, T] in [0, V) wherever weight != 0
 * (elsewhere not read); weight [B, T].  *loss (may be NULL) = sum over
 * (b, t) of weight[b, t] * -log p(targets[b, t] | tokens[b, 0..t]);
 * grad [nparams] += d(loss)/d(params).  Returns 0, or -1 with a message
 * as cg_cgpt_forward or for a target out of range; on error nothing is
 * written.
 */
int cg_cgpt_forward_backward(const struct cg_cgpt_config *c,
                             const float *params, struct cg_cgpt_ws *w,
                             const int *tokens, const int *targets,
                             const float *weight, int B, int T, float *grad,
                             double *loss);

#ifdef __cplusplus
}
#endif
#endif
