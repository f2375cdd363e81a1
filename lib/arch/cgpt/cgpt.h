/*
 * arch/cgpt/cgpt.h - conditional byte-level decoder-only transformer (GPT-2
 * style).
 *
 * Tokens are bytes 0..255, then one token per condition (256 + cond), then
 * EOT (256 + ncond): V = 257 + ncond.  The model is GPT-2's: token plus
 * learned position embeddings, L pre-LayerNorm blocks (causal multi-head
 * self-attention, then an MLP C -> F -> C with tanh-GELU, each added to
 * the residual stream; F = 4C unless the config says), a final
 * LayerNorm and a bias-free projection to V
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
#include "nn/nn.h"
#include "nn/qlinear.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cg_cgpt_config {
	int ncond; /* condition tokens; V = 256 + ncond + 1 */
	int T;     /* context: most positions a sequence may have */
	int C;     /* width */
	int L;     /* layers (blocks) */
	int NH;    /* heads; C % NH == 0 unless hs is given */
	int tied;  /* 1: logits use wte, and there is no lm_head.w */
	/*
	 * A model whose heads or MLP rows were removed (cg-prune
	 * --structured) says its own; 0, as in every model cg-init makes,
	 * is GPT-2's: hs = C / NH, F = 4C.  The attention's width, the
	 * queries' (and keys' and values') channels, is A = NH hs.
	 */
	int hs; /* head size */
	int F;  /* the MLP's hidden width */
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

/* Head size, attention width A = NH hs and the MLP's width F of c. */
static inline int
cg_cgpt_hs(const struct cg_cgpt_config *c)
{
	return c->hs ? c->hs : c->C / c->NH;
}
static inline int
cg_cgpt_attn(const struct cg_cgpt_config *c)
{
	return c->NH * cg_cgpt_hs(c);
}
static inline int
cg_cgpt_ffn(const struct cg_cgpt_config *c)
{
	return c->F ? c->F : 4 * c->C;
}

/*
 * Returns 0 if c is usable: ncond in [1, CG_CGPT_MAX_COND], T in
 * [1, CG_CGPT_MAX_T], C in [1, CG_CGPT_MAX_C], L in [1, CG_CGPT_MAX_L],
 * NH in [1, CG_CGPT_MAX_C], dividing C when hs is 0, hs 0 or in [1,
 * CG_CGPT_MAX_C] with NH hs at most CG_CGPT_MAX_C, F 0 or in [1, 4
 * CG_CGPT_MAX_C], tied 0 or 1, at most CG_CGPT_MAX_PARAMS parameters;
 * else -1 with a message.
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
 *   h.l.ln1.w [C], h.l.ln1.b [C], h.l.attn.qkv.w [3A, C],
 *   h.l.attn.qkv.b [3A], h.l.attn.proj.w [C, A], h.l.attn.proj.b [C],
 *   h.l.ln2.w [C], h.l.ln2.b [C], h.l.mlp.fc.w [F, C], h.l.mlp.fc.b [F],
 *   h.l.mlp.proj.w [C, F], h.l.mlp.proj.b [C],
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
 * c->T positions, allocated once; the passes allocate nothing.  With
 * checkpoint != 0 the workspace keeps only each block's output and one
 * block's other activations: the backward pass recomputes each block's
 * forward pass (but the top one's) just before it needs it, for the same
 * results (the same kernels run on the same inputs) at about a third more
 * work and a fraction of the memory.  A workspace serves one call at a
 * time.  Returns NULL with a message on a bad config or max_batch, or out
 * of memory; the caller owns it.
 */
struct cg_cgpt_ws;
struct cg_cgpt_ws *cg_cgpt_ws_new(const struct cg_cgpt_config *c,
                                  int max_batch, int checkpoint);
/*
 * The Linear layers' matrices, for a model whose matrices stay as a file
 * stores them (cg_model_read_infer): per block l, entries 4 l .. 4 l + 3
 * are attn.qkv.w [3A, C], attn.proj.w [C, A], mlp.fc.w [F, C] and
 * mlp.proj.w [C, F]; entry 4 L is the head (lm_head.w [V, C], or wte
 * when tied).  An entry of dtype CG_F32 points at its floats.
 */
#define CG_CGPT_NMATS(L) (4 * (L) + 1)
/*
 * Have the passes on w multiply mats [CG_CGPT_NMATS(c->L)] (copied; the
 * bytes they point at are borrowed and must outlive w's use) instead of
 * the matrices in params, which they then do not read; NULL goes back to
 * params.  Such a workspace runs forward passes and losses only (a
 * gradient is refused).  Returns 0, or -1 with a message (a matrix that
 * cannot be multiplied as stored, out of memory).
 */
int cg_cgpt_ws_set_mats(struct cg_cgpt_ws *w, const struct cg_wmat *mats);
/* The bytes cg_cgpt_ws_new(c, max_batch, checkpoint) allocates, or 0
 * with a message when it would fail its checks. */
size_t cg_cgpt_ws_bytes(const struct cg_cgpt_config *c, int max_batch,
                        int checkpoint);
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

/*
 * What reaches each Linear layer, for Wanda's importance: a forward pass
 * on tokens [B, T] (checked as cg_cgpt_forward checks them) that adds,
 * for each layer in buffer order (per block attn.qkv.w, attn.proj.w,
 * mlp.fc.w, mlp.proj.w, then lm_head.w when untied) and each of its
 * input columns j, the sum over positions of rows[b, t] * x[b, t, j]^2
 * to sq [L (2C + A + F) + (untied ? C : 0)] (per block C, A, C, F; in
 * double).
 * rows [B, T] weighs each position (1: counted, 0: padding).  The
 * logits are not computed.  Returns 0, or -1 with a message.
 */
int cg_cgpt_input_sq(const struct cg_cgpt_config *c, const float *params,
                     struct cg_cgpt_ws *w, const int *tokens,
                     const float *rows, int B, int T, double *sq);

/*
 * Distillation: as cg_cgpt_forward_backward, with a teacher's next-token
 * log-probabilities tlogp [B, T, V] at temperature tau (from
 * cg_log_softmax_forward over the teacher's logits for the same tokens)
 * beside the targets.  *data (may be NULL) = sum of weight * cross-entropy
 * (what cg_cgpt_forward_backward's loss is), *teacher = tau^2 * sum of
 * weight * KL(teacher || student at tau), *loss = (1 - alpha) * data +
 * alpha * teacher; grad [nparams] += d(loss)/d(params).  alpha = 0 gives
 * the bits of cg_cgpt_forward_backward.  tau > 0, alpha in [0, 1].
 * Returns 0, or -1 with a message as cg_cgpt_forward_backward.
 */
int cg_cgpt_distill_forward_backward(const struct cg_cgpt_config *c,
                                     const float *params, struct cg_cgpt_ws *w,
                                     const int *tokens, const int *targets,
                                     const float *weight, const float *tlogp,
                                     double alpha, double tau, int B, int T,
                                     float *grad, double *loss, double *data,
                                     double *teacher);

/* ------------------------------------------------------- pipeline stages */

/*
 * A pipeline stage holds blocks [a, b) of the L, the embeddings with them
 * where a = 0 and the final LayerNorm and head where b = L.  Its
 * parameters are the range [cg_cgpt_stage_off(c, a), cg_cgpt_stage_off(c,
 * b)) of the flat buffer (0 and nparams at the ends: the layout is
 * embeddings, blocks, head), and its passes read and write no other.
 * Run one stage after another on the same micro-batch, they make the
 * very floats cg_cgpt_forward_backward makes: the same kernels on the
 * same inputs, in the same order.  A tied model (the head is wte) cannot
 * be cut where the first stage is not the last; the caller checks.
 */
size_t cg_cgpt_stage_off(const struct cg_cgpt_config *c, int l);

/* The most sets of activations a stage's workspace keeps: one a
 * micro-batch of a batch of CG_CGPT_MAX_BATCH sequences at most (what
 * they take is the arena's to refuse). */
#define CG_CGPT_MAX_KEEP CG_CGPT_MAX_BATCH

/*
 * A workspace for micro-batches of up to max_batch sequences through
 * blocks [a, b) of c (0 <= a < b <= L), never checkpointed: it holds the
 * activations of those blocks only.  keep 0: one set of them, which
 * each backward pass fills again by running the forward pass before it;
 * keep > 0: keep sets, set k holding what the forward pass on set k
 * left, for its backward pass (no forward pass again; the last stage's
 * backward pass runs its only one).  NULL with a message.
 */
struct cg_cgpt_ws *cg_cgpt_stage_ws_new(const struct cg_cgpt_config *c,
                                        int max_batch, int a, int b, int keep);

/* The bytes cg_cgpt_stage_ws_new(c, max_batch, a, b, keep) allocates,
 * or 0 with a message: a set more adds the same bytes each time. */
size_t cg_cgpt_stage_ws_bytes(const struct cg_cgpt_config *c, int max_batch,
                              int a, int b, int keep);
/* The floating-point operations of one sequence of T positions forward
 * through blocks [a, b) of c (and the head where b = L): the matrix
 * products', the element-wise work not counted. */
double cg_cgpt_stage_flops(const struct cg_cgpt_config *c, int a, int b);

/*
 * The stage's forward pass on set k of w's activations (0 where w keeps
 * none), a < b < L (not the last stage): from tokens [B, T] where a = 0,
 * else from x [B, T, C], the output of block b - 1 into y [B, T, C].
 * Returns 0, or -1 with a message (sizes, a set not w's, a token out of
 * range).
 */
int cg_cgpt_stage_forward(const struct cg_cgpt_config *c, const float *params,
                          struct cg_cgpt_ws *w, int k, const int *tokens,
                          const float *x, int B, int T, float *y);

/*
 * On set k: where w keeps no activations, or b = L, the stage's forward
 * pass (again, but for the last stage: as cg_cgpt_stage_forward, tokens
 * or x); where it keeps them, the forward pass that the last
 * cg_cgpt_stage_forward on set k ran, of the same tokens or x, is
 * taken as it left them (the same floats).  Then its backward pass:
 * from the loss of targets and weight [B, T] (as
 * cg_cgpt_forward_backward's; *loss gets it) where b = L, else from dy
 * [B, T, C] = d(loss)/d(its output) (*loss = 0).  grad [nparams] += its
 * parameters' share; where a > 0, dx [B, T, C] = d(loss)/d(x).  Returns
 * 0, or -1 with a message (a token or target out of range).
 */
int cg_cgpt_stage_backward(const struct cg_cgpt_config *c, const float *params,
                           struct cg_cgpt_ws *w, int k, const int *tokens,
                           const float *x, const int *targets,
                           const float *weight, const float *dy, int B, int T,
                           float *grad, float *dx, double *loss);

/* ------------------------------------------------------------ generation */

/*
 * Incremental decoding with a key/value cache (lib/arch/cgpt/sample.c).  A
 * generator holds a window of at most c->T tokens, the condition token
 * first, and every layer's keys and values for it [L, NH, T, hs], so that
 * one more token costs one position's pass (O(L C^2 + L T C)) instead of
 * a pass over the whole window.  Its logits are those cg_cgpt_forward
 * gives at the window's last position, to float rounding.
 *
 * The windows are those the model was trained on (lib/arch/cgpt/cgpt_arch.c).  A
 * text starts as a start window: the condition, EOT (256 + ncond, here
 * the mark of a text's start), the prompt, when the prompt fits beside
 * them (plen <= T - 2); a longer prompt gives a window from the middle:
 * the condition and the prompt's last T - 1 bytes, without the mark.
 * When the window is full, pushing a token slides it: the condition token
 * stays at position 0, the (T - 1) / 2 most recent tokens follow, then the
 * new one, and the cache is rebuilt by one pass over that window; the
 * start mark is dropped, as in training's windows from the middle.
 * Sliding by half a window at a time keeps the cost linear in the length
 * generated: each rebuild of about T/2 positions buys about T/2 cheap
 * steps, so a token costs about twice a plain step, at the price of a
 * context that shrinks to half after each slide.  With T = 1 the window
 * holds the condition only and the logits never change.
 */
struct cg_cgpt_gen;

/*
 * A generator for a model of config c with parameters params [nparams]
 * (borrowed: they must outlive it and not change while it is used).
 * Returns NULL with a message on a bad config or out of memory; the
 * caller frees it with cg_cgpt_gen_free.
 */
struct cg_cgpt_gen *cg_cgpt_gen_new(const struct cg_cgpt_config *c,
                                    const float *params);
/* The same, the Linear layers multiplying mats [CG_CGPT_NMATS(c->L)]
 * (copied; their bytes borrowed) as cg_cgpt_ws_set_mats says; mats NULL
 * is cg_cgpt_gen_new. */
struct cg_cgpt_gen *cg_cgpt_gen_new_mats(const struct cg_cgpt_config *c,
                                         const float *params,
                                         const struct cg_wmat *mats);
void cg_cgpt_gen_free(struct cg_cgpt_gen *g);

/*
 * A pipeline stage's generator: blocks [a, b) of c->L only, their cache
 * only (params as cg_stage_read lays them out).  The first stage (a = 0)
 * embeds and samples (cg_cgpt_gen_sample); a later one takes its rows
 * from cg_cgpt_gen_rows.  next (borrowed) takes each chunk's rows on to
 * the next stage and answers the logits of its last row; NULL exactly
 * when b = c->L (the last stage, which holds the head).  mats only for
 * the whole model.  NULL with a message.
 */
struct cg_stage_link;
struct cg_cgpt_gen *cg_cgpt_gen_new_stage(const struct cg_cgpt_config *c,
                                          const float *params,
                                          const struct cg_wmat *mats, int a,
                                          int b,
                                          const struct cg_stage_link *next);

/*
 * A later stage: rows x [n, C] (the previous stage's output) at
 * positions p0 .. p0 + n - 1, p0 either 0 (a new window) or the count
 * the stage holds, n at most a chunk; logits [V] the last row's (from
 * the head, or the next stage).  0, or -1 with a message (rows out of
 * place, the next stage's failure).
 */
int cg_cgpt_gen_rows(struct cg_cgpt_gen *g, int p0, const float *x, int n,
                     float *logits);
/* V, the logits' length. */
int cg_cgpt_gen_vocab(const struct cg_cgpt_gen *g);

/*
 * Start a window: the token of condition cond in [0, c->ncond), then EOT
 * and the whole prompt [plen] when plen <= T - 2, else the prompt's last
 * T - 1 bytes (prompt may be NULL when plen is 0).  Returns 0, or -1
 * with a message on a bad condition.
 */
int cg_cgpt_gen_start(struct cg_cgpt_gen *g, int cond, const uint8_t *prompt,
                      size_t plen);

/*
 * Append token in [0, V) to the window, sliding it first if it is full
 * (see above).  Returns 0, or -1 with a message (a token out of range, no
 * window started).
 */
int cg_cgpt_gen_push(struct cg_cgpt_gen *g, int token);

/* The logits [V] of the next token after the window (valid until the next
 * start or push; NULL before the first start). */
const float *cg_cgpt_gen_logits(const struct cg_cgpt_gen *g);

/* The window's tokens [*len] (len may be NULL): what the logits are
 * conditioned on, position 0 being the condition token, position 1 the
 * start mark EOT while the window holds the text's start. */
const int *cg_cgpt_gen_window(const struct cg_cgpt_gen *g, int *len);

/*
 * Pick the next token from logits [V] (V = 257 + ncond) as s says:
 * only the bytes 0..255 and EOT (256 + ncond) are candidates, never a
 * condition token; NaN logits count as -infinity.  The candidates are
 * ranked by logit (ties: the lower token first); temperature 0 takes the
 * first, else logits / temperature are softmaxed over the top_k first
 * (top_k 0: all), the smallest leading set whose probability reaches top_p
 * is kept (top_p >= 1: all; it always keeps at least one), and one token
 * is drawn from that set, renormalised, with one cg_rng_u64 from r (none
 * at temperature 0).
 * s->temperature >= 0, s->top_k >= 0, s->top_p in [0, 1] are the
 * caller's to check (cg_cgpt_sample does).  Returns the token.
 */
struct cg_sampler;
int cg_cgpt_pick(const float *logits, int ncond, const struct cg_sampler *s,
                 struct cg_rng *r);

/*
 * Generate text: start a window with cond and prompt [plen], then pick a
 * token (cg_cgpt_pick), stop at EOT, else hand the byte to emit(ctx, byte)
 * and push it, until s->max_bytes bytes or emit returns nonzero (a stop,
 * not an error).  The prompt is not emitted.  Returns the number of bytes
 * handed to emit, or -1 with a message (a bad condition or sampler, out
 * of memory).  The arch's sample_text hook (struct cg_arch) is this.
 */
long cg_cgpt_sample(const struct cg_cgpt_config *c, const float *params,
                    int cond, const uint8_t *prompt, size_t plen,
                    const struct cg_sampler *s, struct cg_rng *r,
                    int (*emit)(void *ctx, int byte), void *ctx);
/* The same through generator g (the first stage's, or a whole model's);
 * a next stage's failure is an error too. */
long cg_cgpt_gen_sample(struct cg_cgpt_gen *g, int cond,
                        const uint8_t *prompt, size_t plen,
                        const struct cg_sampler *s, struct cg_rng *r,
                        int (*emit)(void *ctx, int byte), void *ctx);
/* The same through a generator of cg_cgpt_gen_new_mats(c, params, mats). */
long cg_cgpt_sample_mats(const struct cg_cgpt_config *c, const float *params,
                         const struct cg_wmat *mats, int cond,
                         const uint8_t *prompt, size_t plen,
                         const struct cg_sampler *s, struct cg_rng *r,
                         int (*emit)(void *ctx, int byte), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
