/*
 * arch/cgpt/cgpt_arch.c - the cgpt architecture as the model layer sees it.
 *
 * Binds lib/arch/cgpt/cgpt.c to struct cg_arch: config from JSON, and text
 * shard examples turned into token sequences.  Example i (condition k, payload
 * p[0..n), the first P bytes of it a prompt when the shard has a u32
 * "prompt_len" tensor, else P = 0) is the sequence
 *
 *     COND = 256 + k,  EOT,  p[0], ..., p[n-1],  EOT        (EOT = 256 + ncond)
 *
 * and the model predicts each token from those before it.  The first EOT
 * marks the start of a text (it reads "the previous text ended"), so that
 * the model learns how a text begins from windows that hold its beginning
 * and not from the middles of long texts; it needs no token of its own.
 * Call rest = EOT ⊕ p ⊕ EOT (R = n + 2 tokens, rest[0] the start mark,
 * rest[1 + j] = p[j], rest[R - 1] the end).  Scored are the text bytes and
 * the end, rest[1 + P .. R): never the condition, the start mark or the
 * prompt.  A window at offset o has the inputs COND, rest[o .. o+T-1) and
 * the targets rest[o .. o+T) (past R, inputs and targets are EOT padding
 * of weight 0): o = 0 is a start window, COND EOT prompt text; o >= 1 is a
 * window from the middle, COND then the bytes from rest[o] on, without the
 * start mark (generation drops it too when its window slides).
 *
 * With R <= T the whole example fits: o = 0.  With R > T, a window scores
 * at least one token iff its last target index o + T - 1 >= 1 + P, so the
 * offsets are [lo, R - T] with lo = max(0, P + 2 - T) (R - T >= lo since
 * P <= n).  When lo = 0 (the start window scores T - 1 - P >= 1 tokens),
 * o = 0 with probability 1/START_ODDS, else o is uniform in [1, R - T];
 * when lo > 0 (a prompt of T - 1 bytes or more leaves nothing to score in
 * the start window) o is uniform in [lo, R - T].  Uniform offsets alone
 * would give a text's opening once in R - T + 1 draws (3 in 4 fortunes
 * are longer than T = 64, and for those that is once in 62 draws at the
 * median), while every generation starts from an opening; a fixed 1 in 4
 * makes openings a steady share of the training signal for texts of any
 * length and leaves 3/4 of the windows to the middles and ends.  The
 * draws, from one generator cg_rng_derive(noise_seed, index[i],
 * WINDOW_TAG), are cg_rng_below(START_ODDS) when lo = 0 (0: the start
 * window), then, for a middle window, m = cg_rng_below(R - T - l + 1) and
 * o = l + m with l = max(lo, 1); index[i] is the example's position in
 * the input, so the same example gets the same window whichever worker
 * and batch it lands in.  Evaluation uses one window per long example.
 *
 * The loss of a batch is the mean cross-entropy in nats per scored token
 * over the whole batch (not per example).  cg_metrics: loss = that mean,
 * bits_per = loss / ln 2 (bits per byte, EOT counted as a byte), part[0]
 * ("tokens") = scored tokens per example in this batch, so that a
 * per-token mean over batches weighs each batch's loss by part[0] * n;
 * n = examples.
 *
 * Distillation (cgpt_distill): the teacher, a cgpt of the same
 * conditions and a context at least T, reads the very tokens of the
 * student's windows; its log-probabilities at the temperature, for the
 * whole batch, are the soft targets of cg_cgpt_distill_forward_backward.
 * The windows are drawn once, for the student, so the teacher adds no
 * randomness.  Its workspace is its own (on the teacher's m->ws), in
 * chunks of the teacher's m->chunk, checkpointed as lib/train/train.c asks.
 *
 * Memory: a batch is run through the model in equal chunks of at most
 * m->chunk sequences (0: as many as CHUNK_BYTES of workspace allow), with
 * activation checkpointing when m->checkpoint is set; gradients
 * accumulate over chunks, so chunking changes only rounding, and
 * checkpointing changes nothing.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/cgpt/cgpt.h"
#include "arch/common.h"
#include "model/model.h"
#include "nn/transformer.h"

#define WINDOW_TAG 0x77696e646f77ULL /* "window" */
/* A long example's window is its start window one time in START_ODDS. */
#define START_ODDS 4
#define CHUNK_BYTES ((size_t)512 << 20)

struct cgpt_ws {
	struct cg_cgpt_config c;
	struct cg_cgpt_ws *ws;
	struct cg_wmat *mats; /* an inference model's matrices, or NULL */
	int cap;       /* sequences the model workspace holds */
	int ckpt;      /* whether it checkpoints */
	int run;       /* sequences per chunk in this call (<= cap) */
	int seq_cap;   /* sequences tokens, targets and weight hold */
	int *tokens;   /* [seq_cap, T] */
	int *targets;  /* [seq_cap, T] */
	float *weight; /* [seq_cap, T] */
	/* A teacher's: its log-probabilities at the temperature for the
	 * student's sequences, [seq_cap, T, V] (NULL until it teaches). */
	float *tlogp;
};

extern const struct cg_arch cg_arch_cgpt;

static int
get_config(const cJSON *j, struct cg_cgpt_config *c)
{
	return cg_arch_read_config(&cg_arch_cgpt, j, c);
}

static int
cgpt_layout(struct cg_model *m)
{
	struct cg_cgpt_config c;
	int nv;

	if (get_config(m->config, &c) != 0)
		return -1;
	m->nparams = cg_cgpt_nparams(&c);
	nv = cg_cgpt_nviews(&c);
	if ((m->views = calloc((size_t)nv, sizeof(*m->views))) == NULL)
		return cg_seterr("out of memory");
	if ((m->nviews = cg_cgpt_views(&c, m->views, nv)) < 0)
		return -1;
	return 0;
}

static void
cgpt_init(struct cg_model *m, struct cg_rng *r)
{
	struct cg_cgpt_config c;

	if (get_config(m->config, &c) == 0)
		cg_cgpt_init(&c, m->params, r);
}

static int
cgpt_check_data(struct cg_model *m, const struct cg_shard *s)
{
	struct cg_cgpt_config c;

	if (get_config(m->config, &c) != 0)
		return -1;
	if (s->kind != CG_PAYLOAD_TEXT)
		return cg_seterr("cgpt needs text data");
	if (s->nconditions != (size_t)c.ncond)
		return cg_seterr("%zu conditions in the data, %d in the model "
		                 "(cg-init --from MODEL -d SHARD makes it over "
		                 "for the data's)",
		                 s->nconditions, c.ncond);
	return cg_model_check_conditions(m, s);
}

static int
cgpt_config_from_shard(const struct cg_arch *a, const struct cg_shard *s,
                       cJSON *config, cJSON *extra)
{
	(void)a;
	(void)extra;
	if (s->kind != CG_PAYLOAD_TEXT)
		return cg_seterr("cgpt needs text data");
	if (cJSON_AddNumberToObject(config, "ncond", (double)s->nconditions) ==
	    NULL)
		return cg_seterr("out of memory");
	return 0;
}

static int
cgpt_nconds(const struct cg_model *m)
{
	struct cg_cgpt_config c;

	return get_config(m->config, &c) != 0 ? -1 : c.ncond;
}

/*
 * struct cg_arch's recondition.  Of the vocabulary's rows (wte, and
 * lm_head.w where untied), the bytes' 0-255 and the end mark's (256 +
 * ncond) are old's, condition k's (256 + k) old's 256 + map[k] where
 * old has it (moved by name even when the counts are equal); every
 * other tensor is the same shape as old's, and copied.
 */
static int
cgpt_recondition(struct cg_model *m, const struct cg_model *old,
                 const int *map)
{
	struct cg_cgpt_config c, o;

	if (get_config(m->config, &c) != 0 || get_config(old->config, &o) != 0)
		return -1;
	if (m->nviews != old->nviews)
		return cg_seterr("%d tensors, the old model %d", m->nviews,
		                 old->nviews);
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i], *w = &old->views[i];
		float *dst = m->params + v->off;
		const float *src = old->params + w->off;
		const size_t C = (size_t)c.C;
		if (strcmp(v->name, w->name) != 0)
			return cg_seterr("tensor %s: the old model's is %s",
			                 v->name, w->name);
		if (strcmp(v->name, "wte") != 0 &&
		    strcmp(v->name, "lm_head.w") != 0) {
			if (v->n != w->n)
				return cg_seterr("tensor %s: shape differs "
				                 "from the old model's",
				                 v->name);
			memcpy(dst, src, v->n * sizeof(float));
			continue;
		}
		if (v->ndim != 2 || v->shape[0] != (uint64_t)cg_cgpt_vocab(&c) ||
		    w->shape[0] != (uint64_t)cg_cgpt_vocab(&o) ||
		    v->shape[1] != C || w->shape[1] != C)
			return cg_seterr("tensor %s: not of the vocabulary's "
			                 "rows",
			                 v->name);
		memcpy(dst, src, 256 * C * sizeof(float));
		for (int k = 0; k < c.ncond; k++)
			if (map[k] >= 0)
				memcpy(dst + (256 + (size_t)k) * C,
				       src + (256 + (size_t)map[k]) * C,
				       C * sizeof(float));
		memcpy(dst + (256 + (size_t)c.ncond) * C,
		       src + (256 + (size_t)o.ncond) * C, C * sizeof(float));
	}
	return 0;
}

static void
cgpt_free_ws(struct cg_model *m)
{
	struct cgpt_ws *w = m->ws;

	if (w == NULL)
		return;
	cg_cgpt_ws_free(w->ws);
	free(w->mats);
	free(w->tokens);
	free(w->targets);
	free(w->weight);
	free(w->tlogp);
	free(w);
	m->ws = NULL;
	m->ws_batch = 0;
}

/* The index of view i of a block's 12 that is a Linear weight, as its
 * entry among the block's 4 matrices (CG_CGPT_NMATS), else -1. */
static int
block_mat(int i)
{
	switch (i) {
	case 2: /* attn.qkv.w */
		return 0;
	case 4: /* attn.proj.w */
		return 1;
	case 8: /* mlp.fc.w */
		return 2;
	case 10: /* mlp.proj.w */
		return 3;
	default:
		return -1;
	}
}

/* The Linear weights stay as stored (f16, q8_0, q4_0); the embeddings
 * (wte too when it is the head: its rows are looked up) are decoded. */
static int
cgpt_keeps(const struct cg_model *m, int i, enum cg_dtype dt)
{
	struct cg_cgpt_config c;

	if (get_config(m->config, &c) != 0 || !cg_qlinear_keeps(dt))
		return 0;
	if (i >= 2 && i < 2 + 12 * c.L)
		return block_mat((i - 2) % 12) >= 0;
	return !c.tied && i == 4 + 12 * c.L; /* lm_head.w */
}

/*
 * The matrices of inference model m (m->stored) in CG_CGPT_NMATS order
 * into *out (the caller frees it), or NULL for a model of f32 params.
 * Returns 0 or -1 with a message.
 */
static int
model_mats(const struct cg_model *m, const struct cg_cgpt_config *c,
           struct cg_wmat **out)
{
	struct cg_wmat *w;

	*out = NULL;
	if (m->stored == NULL)
		return 0;
	if ((w = calloc((size_t)CG_CGPT_NMATS(c->L), sizeof(*w))) == NULL)
		return cg_seterr("out of memory");
	for (int i = 2; i < 2 + 12 * c->L; i++) {
		int j = block_mat((i - 2) % 12);
		if (j >= 0)
			w[4 * ((i - 2) / 12) + j] = m->stored[i];
	}
	w[4 * c->L] = m->stored[c->tied ? 0 : 4 + 12 * c->L];
	*out = w;
	return 0;
}

/* Sequences per chunk for a batch of B: at most most (0: as many as
 * CHUNK_BYTES of workspace allow), the batch cut into equal chunks.  0
 * with a message if the config is bad. */
static int
chunk_size(const struct cg_cgpt_config *c, int B, int most, int ckpt)
{
	if (most < 1) {
		/* The most sequences whose workspace fits CHUNK_BYTES (one
		 * at least), by bisection: it grows with the batch. */
		int lo = 1, hi = B;
		if (cg_cgpt_ws_bytes(c, 1, ckpt) == 0)
			return 0;
		while (lo < hi) {
			int mid = lo + (hi - lo + 1) / 2;
			size_t n = cg_cgpt_ws_bytes(c, mid, ckpt);
			if (n != 0 && n <= CHUNK_BYTES)
				lo = mid;
			else
				hi = mid - 1;
		}
		most = lo;
	}
	if (most > B)
		most = B;
	int nchunks = (B + most - 1) / most;
	return (B + nchunks - 1) / nchunks;
}

static size_t
cgpt_ws_bytes(struct cg_model *m, int B, int chunk, int checkpoint)
{
	struct cg_cgpt_config c;
	size_t n;

	if (get_config(m->config, &c) != 0 || B < 1)
		return 0;
	if ((chunk = chunk_size(&c, B, chunk, checkpoint)) == 0 ||
	    (n = cg_cgpt_ws_bytes(&c, chunk, checkpoint)) == 0)
		return 0;
	/* tokens, targets and weight of the whole batch */
	return n + sizeof(struct cgpt_ws) + (size_t)B * c.T * 12;
}

/* The workspace for batches of B (model chunks of cap); NULL on error. */
static struct cgpt_ws *
get_ws(struct cg_model *m, int B)
{
	struct cgpt_ws *w = m->ws;
	struct cg_cgpt_config c;
	int cap, ckpt = m->checkpoint != 0;

	if (get_config(m->config, &c) != 0)
		return NULL;
	if ((cap = chunk_size(&c, B, m->chunk, ckpt)) == 0)
		return NULL;
	if (w && w->cap >= cap && w->seq_cap >= B && w->ckpt == ckpt) {
		w->run = cap;
		return w;
	}
	cgpt_free_ws(m);
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	m->ws = w;
	w->c = c;
	size_t n = (size_t)B * c.T;
	if ((w->ws = cg_cgpt_ws_new(&c, cap, ckpt)) == NULL ||
	    model_mats(m, &c, &w->mats) != 0 ||
	    cg_cgpt_ws_set_mats(w->ws, w->mats) != 0 ||
	    (w->tokens = cg_alloc(n * sizeof(int))) == NULL ||
	    (w->targets = cg_alloc(n * sizeof(int))) == NULL ||
	    (w->weight = cg_alloc(n * sizeof(float))) == NULL) {
		cgpt_free_ws(m);
		return NULL;
	}
	w->cap = w->run = m->ws_batch = cap;
	w->ckpt = ckpt;
	w->seq_cap = B;
	return w;
}

/*
 * Example i of s as one row of T tokens, targets and weights (1 scored,
 * 0 not), windowed as the file comment says.  P is its prompt length.
 * in [T] (may be NULL) gets 1 where the input token is the example's
 * (the condition, rest[o .. R)), 0 where it is padding.  Returns the
 * number of scored tokens.
 */
static int
make_seq(const struct cg_cgpt_config *c, const struct cg_shard *s, uint64_t i,
         uint64_t P, uint64_t noise_seed, int *tok, int *tgt, float *wt,
         float *in)
{
	const int T = c->T, EOT = 256 + c->ncond;
	uint64_t n, R, o = 0;
	const uint8_t *p = cg_shard_example(s, i, &n);
	int count = 0;

	R = n + 2;
	if (R > (uint64_t)T) {
		uint64_t lo = P + 2 > (uint64_t)T ? P + 2 - T : 0;
		uint64_t hi = R - T;
		struct cg_rng r;

		cg_rng_derive(&r, noise_seed, s->index[i], WINDOW_TAG);
		if (lo > 0 || cg_rng_below(&r, START_ODDS) != 0) {
			lo = lo > 0 ? lo : 1;
			o = lo + cg_rng_below(&r, hi - lo + 1);
		}
	}
	tok[0] = 256 + (int)s->cond[i];
	for (int t = 0; t < T; t++) {
		uint64_t j = o + t; /* target's index in rest */
		/* rest[k] is p[k - 1] for 1 <= k <= n, else EOT. */
		if (t > 0)
			tok[t] = j - 1 >= 1 && j - 1 <= n ? p[j - 2] : EOT;
		tgt[t] = j >= 1 && j <= n ? p[j - 1] : EOT;
		wt[t] = j < R && j > P;
		count += j < R && j > P;
		/* after wt: in may be wt itself */
		if (in)
			in[t] = t == 0 || j - 1 < R;
	}
	return count;
}

/*
 * The sequences of examples ex[0..B) of s for config c into tokens,
 * targets and weight [B, T], the weights scaled to sum to 1; *count gets
 * the scored tokens.  0, or -1 with a message.
 */
static int
fill_rows(const struct cg_cgpt_config *c, const struct cg_shard *s,
          const uint64_t *ex, int B, uint64_t noise_seed, int *tokens,
          int *targets, float *weight, uint64_t *count)
{
	const int T = c->T;

	*count = 0;
	for (int b = 0; b < B; b++) {
		uint64_t i = ex[b];
		size_t r = (size_t)b * T;

		if (i >= s->n)
			return cg_seterr("cgpt: example %llu: the shard has "
			                 "%llu",
			                 (unsigned long long)i,
			                 (unsigned long long)s->n);
		/* cg_shard_open checked prompt_len[i] <= the length. */
		uint64_t P = s->prompt_len ? s->prompt_len[i] : 0;
		*count += make_seq(c, s, i, P, noise_seed, tokens + r,
		                   targets + r, weight + r, NULL);
	}
	if (*count == 0)
		return 0;
	/* Weights 1/count make the summed loss a mean per scored token. */
	float inv = (float)(1.0 / (double)*count);
	for (size_t j = 0; j < (size_t)B * T; j++)
		weight[j] *= inv;
	return 0;
}

/* fill_rows into w's tokens, targets and weights. */
static int
fill_batch(struct cgpt_ws *w, const struct cg_shard *s, const uint64_t *ex,
           int B, uint64_t noise_seed, uint64_t *count)
{
	return fill_rows(&w->c, s, ex, B, noise_seed, w->tokens, w->targets,
	                 w->weight, count);
}

static int
cgpt_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
           int B, uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cgpt_ws *w;
	uint64_t count;
	double loss = 0;

	if (B < 1)
		return cg_seterr("cgpt: batch %d: not positive", B);
	if ((w = get_ws(m, B)) == NULL ||
	    fill_batch(w, s, ex, B, noise_seed, &count) != 0)
		return -1;
	const int T = w->c.T;
	memset(out, 0, sizeof(*out));
	out->n = (uint64_t)B;
	if (count == 0)
		return 0;
	for (int b0 = 0; b0 < B; b0 += w->run) {
		int nb = B - b0 < w->run ? B - b0 : w->run;
		size_t r = (size_t)b0 * T;
		double part;

		if (cg_cgpt_forward_backward(
		        &w->c, m->params, w->ws, w->tokens + r, w->targets + r,
		        w->weight + r, nb, T, grad, &part) != 0)
			return -1;
		loss += part;
	}
	out->loss = loss;
	out->bits_per = loss / M_LN2;
	out->part[0] = (double)count / B;
	return 0;
}

/* Wanda's sums (struct cg_arch's input_sq): the batch's windows as
 * cgpt_batch makes them, padding not counted. */
static int
cgpt_input_sq(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
              int B, uint64_t noise_seed, double *sq, uint64_t *rows)
{
	struct cgpt_ws *w;

	if (B < 1)
		return cg_seterr("cgpt: batch %d: not positive", B);
	if ((w = get_ws(m, B)) == NULL)
		return -1;
	const int T = w->c.T;
	/* the weights' buffer holds the inputs' flags: no loss here */
	float *in = w->weight;
	for (int b = 0; b < B; b++) {
		uint64_t i = ex[b];
		size_t r = (size_t)b * T;
		float *wt = in + r;

		if (i >= s->n)
			return cg_seterr("cgpt: example %llu: the shard has "
			                 "%llu",
			                 (unsigned long long)i,
			                 (unsigned long long)s->n);
		uint64_t P = s->prompt_len ? s->prompt_len[i] : 0;
		/* the scored weights are written first, then overwritten */
		make_seq(&w->c, s, i, P, noise_seed, w->tokens + r,
		         w->targets + r, wt, wt);
		if (rows)
			for (int t = 0; t < T; t++)
				*rows += wt[t] != 0;
	}
	for (int b0 = 0; b0 < B; b0 += w->run) {
		int nb = B - b0 < w->run ? B - b0 : w->run;
		size_t r = (size_t)b0 * T;
		if (cg_cgpt_input_sq(&w->c, m->params, w->ws, w->tokens + r,
		                     in + r, nb, T, sq) != 0)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------------- distillation */

/*
 * A teacher must give a distribution over the student's vocabulary (the
 * same conditions: model.c compares their names) for every position the
 * student sees: the teacher runs on the student's windows, so its context
 * must hold them.
 */
static int
cgpt_check_teacher(const struct cg_model *m, const struct cg_model *t)
{
	struct cg_cgpt_config c, ct;

	if (get_config(m->config, &c) != 0 || get_config(t->config, &ct) != 0)
		return -1;
	if (c.ncond != ct.ncond)
		return cg_seterr("the teacher has %d conditions, the model %d",
		                 ct.ncond, c.ncond);
	if (ct.T < c.T)
		return cg_seterr("the teacher's context of %d is shorter than "
		                 "the model's %d",
		                 ct.T, c.T);
	return 0;
}

/* The teacher's log-softmax buffer covers B sequences of its context. */
static size_t
tlogp_floats(const struct cg_cgpt_config *ct, int B)
{
	return (size_t)B * ct->T * cg_cgpt_vocab(ct);
}

static size_t
cgpt_teacher_bytes(struct cg_model *t, int B, int chunk)
{
	struct cg_cgpt_config ct;
	size_t n;

	if (get_config(t->config, &ct) != 0 ||
	    (n = cgpt_ws_bytes(t, B, chunk, 1)) == 0)
		return 0;
	return n + tlogp_floats(&ct, B) * sizeof(float);
}

static int
cgpt_distill(struct cg_model *m, const struct cg_distill *d,
             const struct cg_shard *s, const uint64_t *ex, int B,
             uint64_t noise_seed, float *grad, struct cg_metrics *out)
{
	struct cg_model *t = d->teacher;
	struct cgpt_ws *w, *tw;
	uint64_t count;
	double data = 0, teach = 0;

	if (B < 1)
		return cg_seterr("cgpt: batch %d: not positive", B);
	if ((w = get_ws(m, B)) == NULL ||
	    fill_batch(w, s, ex, B, noise_seed, &count) != 0)
		return -1;
	const int T = w->c.T, V = cg_cgpt_vocab(&w->c);
	memset(out, 0, sizeof(*out));
	out->n = (uint64_t)B;
	if (count == 0)
		return 0;
	/* The teacher first, in its own chunks, on the same tokens. */
	if ((tw = get_ws(t, B)) == NULL)
		return -1;
	if (tw->tlogp == NULL &&
	    (tw->tlogp = cg_alloc(tlogp_floats(&tw->c, tw->seq_cap) *
	                          sizeof(float))) == NULL)
		return -1;
	for (int b0 = 0; b0 < B; b0 += tw->run) {
		int nb = B - b0 < tw->run ? B - b0 : tw->run;
		size_t r = (size_t)b0 * T;

		if (cg_cgpt_forward(&tw->c, t->params, tw->ws, w->tokens + r,
		                    nb, T) != 0)
			return -1;
		cg_log_softmax_forward(tw->tlogp + r * V,
		                       cg_cgpt_logits(tw->ws), (float)d->tau,
		                       (size_t)nb * T, V);
	}
	for (int b0 = 0; b0 < B; b0 += w->run) {
		int nb = B - b0 < w->run ? B - b0 : w->run;
		size_t r = (size_t)b0 * T;
		double pd, pt;

		if (cg_cgpt_distill_forward_backward(
		        &w->c, m->params, w->ws, w->tokens + r, w->targets + r,
		        w->weight + r, tw->tlogp + r * V, d->alpha, d->tau, nb,
		        T, grad, NULL, &pd, &pt) != 0)
			return -1;
		data += pd;
		teach += pt;
	}
	/* As cg_cgpt_distill_forward_backward mixes them: alpha 0 leaves
	 * the data term's bits. */
	out->loss = (1.0 - d->alpha) * data + d->alpha * teach;
	out->data = data;
	out->teacher = teach;
	out->bits_per = data / M_LN2;
	out->part[0] = (double)count / B;
	return 0;
}

static long
cgpt_sample_text(struct cg_model *m, int cond, const uint8_t *prompt,
                 size_t plen, const struct cg_sampler *s, struct cg_rng *r,
                 cg_emit_fn emit, void *ctx)
{
	struct cg_cgpt_config c;
	struct cg_wmat *mats;
	long n;

	if (get_config(m->config, &c) != 0 || model_mats(m, &c, &mats) != 0)
		return -1;
	n = cg_cgpt_sample_mats(&c, m->params, mats, cond, prompt, plen, s, r,
	                        emit, ctx);
	free(mats);
	return n;
}

/* ------------------------------------------------ structured pruning */

enum { S_HEADS, S_ROWS };
static const char *const cgpt_structures[] = {"heads", "rows", NULL};

/* config's key set to the number x, added when absent; 0 or -1. */
static int
set_key(cJSON *config, const char *key, int x)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(config, key);

	if (v != NULL) {
		cJSON_SetNumberValue(v, x);
		return 0;
	}
	return cJSON_AddNumberToObject(config, key, x) ? 0
	                                              : cg_seterr("out of memory");
}

/*
 * struct cg_arch's shrink: "heads" and "rows" (the MLP's hidden rows).
 * A head's importance is the norm of its value rows of attn.qkv.w
 * times that of its columns of attn.proj.w: what it adds to the
 * residual stream scales with both, while its queries and keys only say
 * where it looks.  An MLP row's is the norm of its row of mlp.fc.w
 * times that of its column of mlp.proj.w.  Every block loses as many of
 * each, so that the config says the smaller model in two numbers:
 * heads (of head_size each) and ffn.  A removed head's queries, keys,
 * values and projection columns go, a removed row's weights, bias and
 * projection column; the projections' biases stay.
 */
static int
cgpt_shrink(struct cg_model *m, const double *remove, cJSON *config,
            struct cg_model *small)
{
	struct cg_cgpt_config c;
	double *score = NULL;
	unsigned char *kh = NULL, *ka = NULL, *kq = NULL, *kf = NULL;
	int rc = -1;

	if (get_config(m->config, &c) != 0)
		return -1;
	const size_t C = c.C, NH = c.NH, hs = cg_cgpt_hs(&c);
	const size_t A = cg_cgpt_attn(&c), F = cg_cgpt_ffn(&c);
	const int rh = cg_arch_removed(remove[S_HEADS], c.NH);
	const int rf = cg_arch_removed(remove[S_ROWS], (int)F);
	if (config != NULL && small == NULL) {
		if (set_key(config, "heads", c.NH - rh) != 0 ||
		    ((rh > 0 || c.hs) &&
		     set_key(config, "head_size", (int)hs) != 0) ||
		    ((rf > 0 || c.F) && set_key(config, "ffn", (int)F - rf) != 0))
			return -1;
		return 0;
	}
	if ((score = malloc((NH > F ? NH : F) * sizeof(*score))) == NULL ||
	    (kh = malloc(NH)) == NULL || (ka = malloc(A)) == NULL ||
	    (kq = malloc(3 * A)) == NULL || (kf = malloc(F)) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (int l = 0; l < c.L; l++) {
		const struct cg_view *v = &m->views[2 + 12 * l];
		float *p = m->params;
		const float *qkv = p + v[2].off, *proj = p + v[4].off;
		const float *fc = p + v[8].off, *mproj = p + v[10].off;

		for (size_t h = 0; h < NH; h++) {
			double sv = 0, sp = 0;
			for (size_t j = h * hs; j < (h + 1) * hs; j++) {
				double a = cg_arch_norm(qkv, 3 * A, C,
				                        (long)(2 * A + j), -1);
				double b = cg_arch_norm(proj, C, A, 0, (long)j);
				sv += a * a, sp += b * b;
			}
			score[h] = sqrt(sv) * sqrt(sp);
		}
		cg_arch_least(kh, score, (int)NH, rh);
		for (size_t j = 0; j < A; j++)
			ka[j] = kq[j] = kq[A + j] = kq[2 * A + j] = kh[j / hs];
		for (size_t j = 0; j < F; j++)
			score[j] = cg_arch_norm(fc, F, C, (long)j, -1) *
			           cg_arch_norm(mproj, C, F, 0, (long)j);
		cg_arch_least(kf, score, (int)F, rf);
		for (int i = 0; i < 12; i++) {
			float *dst = small ? small->params +
			                         small->views[2 + 12 * l + i].off
			                   : NULL;
			float *src = p + v[i].off;
			switch (i) {
			case 2: /* attn.qkv.w, .b */
			case 3:
				cg_arch_sub(dst, src, 3 * A, i == 2 ? C : 1,
				            kq, NULL);
				break;
			case 4: /* attn.proj.w */
				cg_arch_sub(dst, src, C, A, NULL, ka);
				break;
			case 8: /* mlp.fc.w, .b */
			case 9:
				cg_arch_sub(dst, src, F, i == 8 ? C : 1, kf,
				            NULL);
				break;
			case 10: /* mlp.proj.w */
				cg_arch_sub(dst, src, C, F, NULL, kf);
				break;
			default:
				cg_arch_sub(dst, src, v[i].n, 1, NULL, NULL);
			}
		}
	}
	/* the embeddings, the last LayerNorm and the head: as they are */
	for (int i = 0; small != NULL && i < m->nviews; i++)
		if (i < 2 || i >= 2 + 12 * c.L)
			memcpy(small->params + small->views[i].off,
			       m->params + m->views[i].off,
			       m->views[i].n * sizeof(float));
	rc = 0;
out:
	free(score);
	free(kh);
	free(ka);
	free(kq);
	free(kf);
	return rc;
}

/* cg-init's options; their keys follow ncond in the config. */
static const struct cg_arch_opt cgpt_opts[] = {
    {"context", CG_ARCH_OPT_INT, 128, 1, CG_CGPT_MAX_T,
     "positions per sequence"},
    {"width", CG_ARCH_OPT_INT, 256, 1, CG_CGPT_MAX_C,
     "model width: residual stream and embeddings"},
    {"layers", CG_ARCH_OPT_INT, 4, 1, 64, "transformer blocks"},
    {"heads", CG_ARCH_OPT_INT, 4, 1, CG_CGPT_MAX_C,
     "attention heads (they divide --width)"},
    {"tied", CG_ARCH_OPT_BOOL, 0, 0, 1,
     "output projection tied to the token embedding"},
};

static int
check_config(const void *c)
{
	return cg_cgpt_check_config(c);
}

#define KEY(name, field)                                                       \
	{name, offsetof(struct cg_cgpt_config, field), 0, CG_CGPT_MAX_C * 2,   \
	 0, 0}
static const struct cg_arch_key cgpt_keys[] = {
    KEY("ncond", ncond), KEY("context", T), KEY("width", C),
    KEY("layers", L),    KEY("heads", NH),  KEY("tied", tied),
    /* what cg-prune --structured writes; absent (0): C / NH and 4C */
    {"head_size", offsetof(struct cg_cgpt_config, hs), 1, CG_CGPT_MAX_C, 1,
     0},
    {"ffn", offsetof(struct cg_cgpt_config, F), 1, 4 * CG_CGPT_MAX_C, 1, 0},
};
#undef KEY

/* ------------------------------------------------------ pipeline stages */

static int
stage_layers(const struct cg_model *m, int n, int *T, int *C)
{
	struct cg_cgpt_config c;

	if (get_config(m->config, &c) != 0)
		return -1;
	if (n < 1 || n > c.L)
		return cg_seterr("%d stages of a model of %d blocks", n, c.L);
	if (c.tied && n > 1)
		return cg_seterr("a tied model's head is its embedding: it "
		                 "cannot be split (cg-init --tied 0)");
	*T = c.T;
	*C = c.C;
	return c.L;
}

/* Views: wte, wpe, 12 per block, then the head's. */
static int
stage_layer_view(const struct cg_model *m, int l)
{
	struct cg_cgpt_config c;

	if (get_config(m->config, &c) != 0)
		return -1;
	return l == 0 ? 0 : l == c.L ? m->nviews : 2 + 12 * l;
}

static int
stage_rows(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
           int B, uint64_t noise_seed, int *tokens, int *targets, float *weight,
           uint64_t *count)
{
	struct cg_cgpt_config c;

	if (B < 1)
		return cg_seterr("cgpt: batch %d: not positive", B);
	if (get_config(m->config, &c) != 0)
		return -1;
	/* no workspace: a stage holds only its blocks' */
	return fill_rows(&c, s, ex, B, noise_seed, tokens, targets, weight,
	                 count);
}

struct cgpt_stage {
	struct cg_cgpt_config c;
	struct cg_cgpt_ws *ws;
};

static void
stage_free(void *ws)
{
	struct cgpt_stage *st = ws;

	if (st == NULL)
		return;
	cg_cgpt_ws_free(st->ws);
	free(st);
}

static void *
stage_new(const struct cg_model *m, int a, int b, int mb, int keep)
{
	struct cgpt_stage *st = calloc(1, sizeof(*st));

	if (st == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	if (get_config(m->config, &st->c) != 0 ||
	    (st->ws = cg_cgpt_stage_ws_new(&st->c, mb, a, b, keep)) == NULL) {
		stage_free(st);
		return NULL;
	}
	return st;
}

static int
stage_cost(const struct cg_model *m, int a, int b, int mb, int keep,
           double *flops, size_t *ws)
{
	struct cg_cgpt_config c;

	if (get_config(m->config, &c) != 0 ||
	    (*ws = cg_cgpt_stage_ws_bytes(&c, mb, a, b, keep)) == 0)
		return -1;
	*flops = cg_cgpt_stage_flops(&c, a, b);
	return 0;
}

static int
stage_forward(const struct cg_model *m, void *ws, int k, const int *tokens,
              const float *x, int B, float *y)
{
	struct cgpt_stage *st = ws;

	return cg_cgpt_stage_forward(&st->c, m->params, st->ws, k, tokens, x, B,
	                             st->c.T, y);
}

static int
stage_backward(const struct cg_model *m, void *ws, int k, const int *tokens,
               const float *x, const int *targets, const float *weight,
               const float *dy, int B, float *grad, float *dx, double *loss)
{
	struct cgpt_stage *st = ws;

	return cg_cgpt_stage_backward(&st->c, m->params, st->ws, k, tokens, x,
	                              targets, weight, dy, B, st->c.T, grad, dx,
	                              loss);
}

static void *
stage_gen_new(const struct cg_model *m, int a, int b,
              const struct cg_stage_link *next, int *V)
{
	struct cg_cgpt_config c;
	struct cg_cgpt_gen *g;

	if (get_config(m->config, &c) != 0 ||
	    (g = cg_cgpt_gen_new_stage(&c, m->params, NULL, a, b, next)) ==
	        NULL)
		return NULL;
	*V = cg_cgpt_gen_vocab(g);
	return g;
}

static void
stage_gen_free(void *gen)
{
	cg_cgpt_gen_free(gen);
}

static long
stage_gen_sample(void *gen, int cond, const uint8_t *prompt, size_t plen,
                 const struct cg_sampler *s, struct cg_rng *r,
                 int (*emit)(void *ctx, int byte), void *ctx)
{
	return cg_cgpt_gen_sample(gen, cond, prompt, plen, s, r, emit, ctx);
}

static int
stage_gen_rows(void *gen, int p0, const float *x, int n, float *logits)
{
	return cg_cgpt_gen_rows(gen, p0, x, n, logits);
}

static const struct cg_stage_ops cgpt_stages = {
    .layers = stage_layers,
    .layer_view = stage_layer_view,
    .rows = stage_rows,
    .stage_new = stage_new,
    .stage_free = stage_free,
    .cost = stage_cost,
    .forward = stage_forward,
    .backward = stage_backward,
    .gen_new = stage_gen_new,
    .gen_free = stage_gen_free,
    .gen_sample = stage_gen_sample,
    .gen_rows = stage_gen_rows,
};

const struct cg_arch cg_arch_cgpt = {
    .name = "cgpt",
    .summary = "conditional byte-level transformer (GPT-2) for text",
    .loss_name = "loss",
    .part_names = {"tokens", NULL, NULL},
    .opts = cgpt_opts,
    .nopts = sizeof(cgpt_opts) / sizeof(cgpt_opts[0]),
    .keys = cgpt_keys,
    .nkeys = sizeof(cgpt_keys) / sizeof(cgpt_keys[0]),
    .config_size = sizeof(struct cg_cgpt_config),
    .check_config = check_config,
    .config_from_shard = cgpt_config_from_shard,
    .nconds = cgpt_nconds,
    .recondition = cgpt_recondition,
    .layout = cgpt_layout,
    .init = cgpt_init,
    .check_data = cgpt_check_data,
    .batch = cgpt_batch,
    .sample_image = NULL,
    .sample_text = cgpt_sample_text,
    .free_ws = cgpt_free_ws,
    .ws_bytes = cgpt_ws_bytes,
    .checkpoints = 1,
    .keeps = cgpt_keeps,
    .input_sq = cgpt_input_sq,
    .check_teacher = cgpt_check_teacher,
    .distill = cgpt_distill,
    .teacher_bytes = cgpt_teacher_bytes,
    .stages = &cgpt_stages,
    .structures = cgpt_structures,
    .shrink = cgpt_shrink,
};
