/*
 * arch/cgpt/sample.c - text from the conditional GPT: a key/value cache, the
 * choice of each next token, and the generation loop.
 *
 * A generator runs the model of cgpt.h over new positions only: each
 * layer's keys and values of the positions before are kept in a cache
 * [L, NH, T, hs], so a new position costs its own LayerNorms, Linears and
 * MLP plus one attention row over the cache, not a pass over the whole
 * window.  Positions are fed in chunks of up to PREFILL_ROWS rows, so that
 * a prompt or a rebuilt window goes through cg_sgemm as matrices while a
 * generated token goes through as one row; only the last row of a chunk
 * reaches the final LayerNorm and the head, since only the next token's
 * logits are wanted.  The Linear, LayerNorm, GELU, residual and
 * attention-row kernels are those of nn.h and transformer.h, so the
 * numbers are cg_cgpt_forward's but for the summation order of cg_sgemm
 * (a BLAS may sum a product of M rows otherwise than M products of one
 * row: with OpenBLAS the logits differ by a few ulp; with a GEMM whose
 * rows do not depend on M they are the same bits).  The window and how it
 * starts and slides are described in cgpt.h.  The parameter offsets come
 * from cg_cgpt_views, in the order cgpt.h documents.
 *
 * A pipeline stage's generator (cg_cgpt_gen_new_stage) runs blocks [a, b)
 * only and caches their keys and values only: the first stage embeds the
 * tokens and hands each chunk's rows to the next stage through a link,
 * which answers the logits of the chunk's last row; a later stage takes
 * its rows from the previous one (cg_cgpt_gen_rows), and the last adds
 * the final LayerNorm and the head.  The chunks are the unsplit
 * generator's, so are the numbers.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cgpt/cgpt.h"
#include "core/arena.h"
#include "model/model.h"
#include "nn/nn.h"
#include "nn/qlinear.h"
#include "nn/transformer.h"

/* Rows per chunk of a prefill: enough for cg_sgemm to run at matrix
 * speed, few enough that the scratch stays small for long contexts. */
#define PREFILL_ROWS 64
/* Candidate tokens: 256 bytes and EOT. */
#define NCAND 257
/* Attention work (multiply-adds) under which OpenMP costs more than it
 * saves. */
#define PAR_MIN 32768

/* One block's parameters. */
struct block {
	const float *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb;
	const float *ln2w, *ln2b, *fcw, *fcb, *mprojw, *mprojb;
};

struct cg_cgpt_gen {
	struct cg_cgpt_config c;
	int V, hs, R; /* vocabulary, head size, rows per chunk */
	int la, lb;   /* the blocks run: [la, lb) */
	const struct cg_stage_link *next; /* the next stage, or NULL */
	int A, F;     /* attention and MLP widths (cgpt.h) */
	const float *wte, *wpe, *lnfw, *lnfb, *head;
	struct block *blk; /* [L] */
	int started;
	int len;            /* positions in the window and the cache */
	int *win;           /* [T] the window's tokens */
	float *kc, *vc;     /* [lb - la, NH, T, hs] cached keys and values */
	float *x;           /* [R, C] the residual stream */
	float *ln;          /* [R, C] a LayerNorm's output */
	float *mean, *rstd; /* [R] */
	float *qkv;         /* [R, 3A] */
	float *atty;        /* [R, A] attention output */
	float *branch;      /* [R, C] a projection's output */
	float *fch;         /* [R, F] */
	float *att;         /* [NH, T] attention weights of one row */
	float *logits;      /* [V] */
	void *mem;
	struct cg_wmat *mats; /* [CG_CGPT_NMATS(L)] as stored, or NULL */
	void *qscratch;       /* cg_qlinear_scratch(R, max(A, F)) bytes */
};

/* -------------------------------------------------------------- setup */

/* Point g's parameter pointers into params, by the view table. */
static int
bind_params(struct cg_cgpt_gen *g, const float *params)
{
	const struct cg_cgpt_config *c = &g->c;
	int nv = cg_cgpt_nviews(c);
	struct cg_view *v = malloc((size_t)nv * sizeof(*v));

	if (v == NULL)
		return cg_seterr("cgpt: out of memory");
	if (cg_cgpt_views(c, v, nv) != nv) {
		free(v);
		return -1;
	}
	/* wte, wpe, 12 per block, lnf.w, lnf.b[, lm_head.w] */
	g->wte = params + v[0].off;
	g->wpe = params + v[1].off;
	for (int l = 0; l < c->L; l++) {
		const struct cg_view *b = v + 2 + 12 * l;
		struct block *k = &g->blk[l];
		k->ln1w = params + b[0].off;
		k->ln1b = params + b[1].off;
		k->qkvw = params + b[2].off;
		k->qkvb = params + b[3].off;
		k->projw = params + b[4].off;
		k->projb = params + b[5].off;
		k->ln2w = params + b[6].off;
		k->ln2b = params + b[7].off;
		k->fcw = params + b[8].off;
		k->fcb = params + b[9].off;
		k->mprojw = params + b[10].off;
		k->mprojb = params + b[11].off;
	}
	g->lnfw = params + v[2 + 12 * c->L].off;
	g->lnfb = params + v[3 + 12 * c->L].off;
	g->head = c->tied ? g->wte : params + v[4 + 12 * c->L].off;
	free(v);
	return 0;
}

/* Lay the buffers out in arena a (counting, then assigning:
 * core/arena.h). */
static void
carve(struct cg_cgpt_gen *g, struct cg_arena *a)
{
	const struct cg_cgpt_config *c = &g->c;
	size_t R = g->R, C = c->C, T = c->T, L = g->lb - g->la, A = g->A;

	g->kc = CG_ARENA_FLOATS(a, L * T, A); /* L NH T hs */
	g->vc = CG_ARENA_FLOATS(a, L * T, A);
	g->x = CG_ARENA_FLOATS(a, R, C);
	g->ln = CG_ARENA_FLOATS(a, R, C);
	g->mean = CG_ARENA_FLOATS(a, R, 1);
	g->rstd = CG_ARENA_FLOATS(a, R, 1);
	g->qkv = CG_ARENA_FLOATS(a, R, 3 * A);
	g->atty = CG_ARENA_FLOATS(a, R, A);
	g->branch = CG_ARENA_FLOATS(a, R, C);
	g->fch = CG_ARENA_FLOATS(a, R, (size_t)g->F);
	g->att = CG_ARENA_FLOATS(a, (size_t)c->NH, T);
	g->logits = CG_ARENA_FLOATS(a, (size_t)g->V, 1);
}

struct cg_cgpt_gen *
cg_cgpt_gen_new(const struct cg_cgpt_config *c, const float *params)
{
	return cg_cgpt_gen_new_mats(c, params, NULL);
}

struct cg_cgpt_gen *
cg_cgpt_gen_new_mats(const struct cg_cgpt_config *c, const float *params,
                     const struct cg_wmat *mats)
{
	return cg_cgpt_gen_new_stage(c, params, mats, 0, c->L, NULL);
}

struct cg_cgpt_gen *
cg_cgpt_gen_new_stage(const struct cg_cgpt_config *c, const float *params,
                      const struct cg_wmat *mats, int a, int b,
                      const struct cg_stage_link *next)
{
	struct cg_cgpt_gen *g;
	struct cg_arena arena = {0};

	if (cg_cgpt_check_config(c) != 0)
		return NULL;
	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->blk = calloc((size_t)c->L, sizeof(*g->blk))) == NULL ||
	    (g->win = calloc((size_t)c->T, sizeof(*g->win))) == NULL) {
		cg_cgpt_gen_free(g);
		cg_seterr("cgpt: out of memory");
		return NULL;
	}
	g->c = *c;
	if (a < 0 || b > c->L || a >= b || (next == NULL) != (b == c->L) ||
	    (mats != NULL && (a > 0 || b < c->L))) {
		cg_seterr("cgpt: blocks [%d, %d) of %d: not a stage", a, b,
		          c->L);
		goto fail;
	}
	g->la = a;
	g->lb = b;
	g->next = next;
	g->V = cg_cgpt_vocab(c);
	g->hs = cg_cgpt_hs(c);
	g->A = cg_cgpt_attn(c);
	g->F = cg_cgpt_ffn(c);
	g->R = c->T < PREFILL_ROWS ? c->T : PREFILL_ROWS;
	/* cg_sgemm takes int sizes: a chunk's widest output must fit. */
	if ((uint64_t)g->R * 4 * c->C > INT32_MAX ||
	    (uint64_t)g->R * g->F > INT32_MAX ||
	    (uint64_t)g->R * 3 * g->A > INT32_MAX ||
	    (uint64_t)g->V * c->C > INT32_MAX) {
		cg_seterr("cgpt: model too large to sample from");
		goto fail;
	}
	if (bind_params(g, params) != 0)
		goto fail;
	carve(g, &arena);
	if (cg_arena_alloc(&arena, "cgpt: generator") != 0)
		goto fail;
	carve(g, &arena);
	g->mem = (float *)arena.base;
	if (mats != NULL) {
		size_t nm = (size_t)CG_CGPT_NMATS(c->L);
		for (size_t i = 0; i < nm; i++) {
			/* in-widths: qkv and fc take C, proj A, mlp.proj F */
			int K = i == nm - 1 ? c->C
			        : i % 4 == 3 ? g->F
			        : i % 4 == 1 ? g->A
			                     : c->C;
			if (!cg_wmat_ok(mats[i].dtype, (uint64_t)K)) {
				cg_seterr("cgpt: matrix %zu: %s [*, %d] cannot "
				          "be multiplied as stored",
				          i, cg_dtype_name(mats[i].dtype), K);
				goto fail;
			}
		}
		if ((g->mats = malloc(nm * sizeof(*g->mats))) == NULL ||
		    (g->qscratch = cg_alloc(cg_qlinear_scratch(
		         g->R, g->A > g->F ? g->A : g->F))) == NULL) {
			cg_seterr("cgpt: out of memory");
			goto fail;
		}
		memcpy(g->mats, mats, nm * sizeof(*g->mats));
	}
	return g;
fail:
	cg_cgpt_gen_free(g);
	return NULL;
}

void
cg_cgpt_gen_free(struct cg_cgpt_gen *g)
{
	if (g == NULL)
		return;
	free(g->mem);
	free(g->win);
	free(g->blk);
	free(g->mats);
	free(g->qscratch);
	free(g);
}

/* ------------------------------------------------------------ kernels */

/* Linear layer i (see CG_CGPT_NMATS) on weight w [N, K] from params, or on
 * the matrix as stored when g has them. */
static void
linear(const struct cg_cgpt_gen *g, int i, float *out, const float *inp,
       const float *w, const float *bias, int n, int K, int N)
{
	if (g->mats != NULL)
		cg_qlinear_forward(out, inp, &g->mats[i], bias, n, K, N,
		                   g->qscratch);
	else
		cg_linear_forward(out, inp, w, bias, n, K, N);
}

/*
 * Run n rows of tokens [n] (or, NULL, the rows already in g->x) at
 * positions g->len .. g->len + n - 1 (all within T, n <= g->R) through
 * the blocks, appending their keys and values to the cache; g->x ends as
 * the last block's output.  With a next stage, the rows go on to it and
 * g->logits are its answer.  0, or -1 with a message (the link's).
 */
static int
feed_chunk(struct cg_cgpt_gen *g, const int *tokens, int n)
{
	const struct cg_cgpt_config *c = &g->c;
	const int C = c->C, NH = c->NH, hs = g->hs, T = c->T, p0 = g->len;
	const int A = g->A, F = g->F;
	const size_t N = (size_t)n * C;

	/* wpe is offset so that row i takes position p0 + i. */
	if (tokens != NULL)
		cg_embed_forward(g->x, tokens, g->wte,
		                 g->wpe + (size_t)p0 * C, 1, n, C);
	for (int l = g->la; l < g->lb; l++) {
		const struct block *k = &g->blk[l];
		float *kc = g->kc + (size_t)(l - g->la) * NH * T * hs;
		float *vc = g->vc + (size_t)(l - g->la) * NH * T * hs;

		cg_layernorm_forward(g->ln, g->mean, g->rstd, g->x, k->ln1w,
		                     k->ln1b, 1, n, C);
		linear(g, 4 * l, g->qkv, g->ln, k->qkvw, k->qkvb, n, C, 3 * A);
		for (int i = 0; i < n; i++)
			for (int h = 0; h < NH; h++) {
				const float *r = g->qkv + (size_t)i * 3 * A;
				size_t at = ((size_t)h * T + p0 + i) * hs;
				memcpy(kc + at, r + A + h * hs,
				       (size_t)hs * sizeof(float));
				memcpy(vc + at, r + 2 * A + h * hs,
				       (size_t)hs * sizeof(float));
			}
		/* Rows in order: row i sees the cache up to p0 + i only.
		 * Heads write disjoint slices of atty and of att. */
		for (int i = 0; i < n; i++) {
			int p = p0 + i;
			size_t work = (size_t)NH * (p + 1) * hs;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (work >= PAR_MIN)
#endif
			for (int h = 0; h < NH; h++)
				cg_attention_row(
				    g->atty + (size_t)i * A + h * hs,
				    g->att + (size_t)h * T,
				    g->qkv + (size_t)i * 3 * A + h * hs,
				    kc + (size_t)h * T * hs,
				    vc + (size_t)h * T * hs, hs, p, hs);
			(void)work;
		}
		linear(g, 4 * l + 1, g->branch, g->atty, k->projw, k->projb, n,
		       A, C);
		cg_residual_forward(g->x, g->x, g->branch, N);
		cg_layernorm_forward(g->ln, g->mean, g->rstd, g->x, k->ln2w,
		                     k->ln2b, 1, n, C);
		linear(g, 4 * l + 2, g->fch, g->ln, k->fcw, k->fcb, n, C, F);
		cg_gelu_forward(g->fch, g->fch, (size_t)n * F);
		linear(g, 4 * l + 3, g->branch, g->fch, k->mprojw, k->mprojb,
		       n, F, C);
		cg_residual_forward(g->x, g->x, g->branch, N);
	}
	g->len += n;
	if (g->next != NULL)
		return g->next->rows(g->next->ctx, p0, g->x, n, g->logits);
	return 0;
}

/* The logits of row i of g->x (the last stage's). */
static void
head(struct cg_cgpt_gen *g, int i)
{
	const int C = g->c.C;
	const float *last = g->x + (size_t)i * C;

	cg_layernorm_forward(g->ln, g->mean, g->rstd, last, g->lnfw, g->lnfb, 1,
	                     1, C);
	linear(g, 4 * g->c.L, g->logits, g->ln, g->head, NULL, 1, C, g->V);
}

/* Feed g->win [g->len .. end) (within T) and compute the logits of the
 * last position: 0, or -1 with a message (the next stage's). */
static int
feed(struct cg_cgpt_gen *g, int end)
{
	int n = 0;

	while (g->len < end) {
		n = end - g->len < g->R ? end - g->len : g->R;
		if (feed_chunk(g, g->win + g->len, n) != 0)
			return -1;
	}
	if (g->next == NULL)
		head(g, n - 1);
	return 0;
}

int
cg_cgpt_gen_rows(struct cg_cgpt_gen *g, int p0, const float *x, int n,
                 float *logits)
{
	if (g->la == 0)
		return cg_seterr("cgpt: the first stage makes its own rows");
	if (n < 1 || n > g->R || p0 < 0 || p0 > g->c.T - n ||
	    (p0 != 0 && p0 != g->len))
		return cg_seterr("cgpt: %d rows at position %d: the stage "
		                 "holds %d of at most %d, in chunks of %d",
		                 n, p0, g->len, g->c.T, g->R);
	memcpy(g->x, x, (size_t)n * g->c.C * sizeof(float));
	g->len = p0;
	if (feed_chunk(g, NULL, n) != 0)
		return -1;
	if (g->next == NULL)
		head(g, n - 1);
	memcpy(logits, g->logits, (size_t)g->V * sizeof(float));
	return 0;
}

int
cg_cgpt_gen_vocab(const struct cg_cgpt_gen *g)
{
	return g->V;
}

/* ------------------------------------------------------------- window */

int
cg_cgpt_gen_start(struct cg_cgpt_gen *g, int cond, const uint8_t *prompt,
                  size_t plen)
{
	const int T = g->c.T;
	int at = 1;
	size_t n;

	if (cond < 0 || cond >= g->c.ncond)
		return cg_seterr("cgpt: condition %d: not in [0, %d)", cond,
		                 g->c.ncond);
	g->win[0] = 256 + cond;
	if (T >= 2 && plen <= (size_t)T - 2) {
		/* A start window, as training's offset 0. */
		g->win[at++] = 256 + g->c.ncond;
		n = plen;
	} else {
		/* A window from the middle: the prompt's tail (plen >=
		 * T - 1 here). */
		n = (size_t)T - 1;
	}
	for (size_t i = 0; i < n; i++)
		g->win[at + i] = prompt[plen - n + i];
	g->len = 0;
	g->started = 1;
	return feed(g, at + (int)n);
}

int
cg_cgpt_gen_push(struct cg_cgpt_gen *g, int token)
{
	const int T = g->c.T;

	if (!g->started)
		return cg_seterr("cgpt: no window started");
	if (token < 0 || token >= g->V)
		return cg_seterr("cgpt: token %d: not in [0, %d)", token, g->V);
	if (T == 1)
		return 0; /* the condition alone: nothing else fits */
	if (g->len < T) {
		g->win[g->len] = token;
		return feed(g, g->len + 1);
	}
	/* Full: the condition, the most recent keep tokens, the new one.
	 * keep <= T - 2, so a start mark at position 1 is never kept. */
	int keep = (T - 1) / 2;
	memmove(g->win + 1, g->win + T - keep, (size_t)keep * sizeof(int));
	g->win[1 + keep] = token;
	g->len = 0;
	return feed(g, keep + 2);
}

const float *
cg_cgpt_gen_logits(const struct cg_cgpt_gen *g)
{
	return g->started ? g->logits : NULL;
}

const int *
cg_cgpt_gen_window(const struct cg_cgpt_gen *g, int *len)
{
	if (len)
		*len = g->len;
	return g->win;
}

/* ----------------------------------------------------------- sampling */

struct cand {
	double z; /* logit, NaN made -infinity */
	int tok;
};

/* Whether a ranks before b: the higher logit, on a tie the lower token
 * (a total order, so the ranking is one and the same everywhere). */
static inline int
before(const struct cand *a, const struct cand *b)
{
	return a->z > b->z || (a->z == b->z && a->tok < b->tok);
}

/* Restore the heap h [n] (first in rank at the root) below node i. */
static void
sift_down(struct cand *h, int n, int i)
{
	for (;;) {
		int l = 2 * i + 1, m = i;
		if (l < n && before(&h[l], &h[m]))
			m = l;
		if (l + 1 < n && before(&h[l + 1], &h[m]))
			m = l + 1;
		if (m == i)
			return;
		struct cand t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/*
 * The candidates are only ranked as far as the filters need: a heap
 * hands them out in rank order, so top-k and top-p cost O(V + m log V)
 * for the m tokens kept rather than a full sort per token (which, for
 * a small model, costs more than the model's step).  Without a filter
 * nothing is ranked, and the draw walks the tokens in token order.
 */
int
cg_cgpt_pick(const float *logits, int ncond, const struct cg_sampler *s,
             struct cg_rng *r)
{
	struct cand cd[NCAND], kept[NCAND];
	double p[NCAND], sum = 0;
	int n = NCAND, best = 0;

	for (int i = 0; i < NCAND; i++) {
		cd[i].tok = i < 256 ? i : 256 + ncond;
		cd[i].z = logits[cd[i].tok];
		if (isnan(cd[i].z))
			cd[i].z = -INFINITY;
		if (before(&cd[i], &cd[best]))
			best = i;
	}
	/* All -infinity: no distribution to draw from; take the first. */
	if (s->temperature == 0 || cd[best].z == -INFINITY)
		return cd[best].tok;
	const double top = cd[best].z, T = s->temperature;
	int k = s->top_k > 0 && s->top_k < NCAND ? s->top_k : NCAND;
	if (k < NCAND || s->top_p < 1) {
		/* The mass top-p measures against: all, or the top k's. */
		double mass = 0, want;
		if (k == NCAND)
			for (int i = 0; i < NCAND; i++)
				mass += exp((cd[i].z - top) / T);
		for (int i = NCAND / 2 - 1; i >= 0; i--)
			sift_down(cd, NCAND, i);
		n = 0;
		for (int h = NCAND; n < k; n++) {
			kept[n] = cd[0];
			p[n] = exp((kept[n].z - top) / T);
			sum += p[n];
			cd[0] = cd[--h];
			sift_down(cd, h, 0);
			/* Without top-k, the nucleus ends the ranking. */
			if (k == NCAND && s->top_p < 1 &&
			    sum >= s->top_p * mass) {
				n++;
				break;
			}
		}
		if (k < NCAND && s->top_p < 1) {
			int m = 0;
			double acc = 0;
			want = s->top_p * sum;
			while (m < n && (m == 0 || acc < want))
				acc += p[m++];
			n = m;
			sum = acc;
		}
	} else {
		for (int i = 0; i < NCAND; i++) {
			kept[i] = cd[i];
			p[i] = exp((cd[i].z - top) / T);
			sum += p[i];
		}
	}
	/* u in [0, sum): the first token whose running mass exceeds it. */
	double u = (double)(cg_rng_u64(r) >> 11) * 0x1p-53 * sum, acc = 0;
	for (int i = 0; i < n; i++) {
		acc += p[i];
		if (u < acc)
			return kept[i].tok;
	}
	/* Rounding left u at or above the total: the last with mass. */
	while (n > 1 && p[n - 1] == 0)
		n--;
	return kept[n - 1].tok;
}

long
cg_cgpt_sample(const struct cg_cgpt_config *c, const float *params, int cond,
               const uint8_t *prompt, size_t plen, const struct cg_sampler *s,
               struct cg_rng *r, int (*emit)(void *ctx, int byte), void *ctx)
{
	return cg_cgpt_sample_mats(c, params, NULL, cond, prompt, plen, s, r,
	                           emit, ctx);
}

long
cg_cgpt_sample_mats(const struct cg_cgpt_config *c, const float *params,
                    const struct cg_wmat *mats, int cond,
                    const uint8_t *prompt, size_t plen,
                    const struct cg_sampler *s, struct cg_rng *r,
                    int (*emit)(void *ctx, int byte), void *ctx)
{
	struct cg_cgpt_gen *g;
	long n;

	if ((g = cg_cgpt_gen_new_mats(c, params, mats)) == NULL)
		return -1;
	n = cg_cgpt_gen_sample(g, cond, prompt, plen, s, r, emit, ctx);
	cg_cgpt_gen_free(g);
	return n;
}

long
cg_cgpt_gen_sample(struct cg_cgpt_gen *g, int cond, const uint8_t *prompt,
                   size_t plen, const struct cg_sampler *s, struct cg_rng *r,
                   int (*emit)(void *ctx, int byte), void *ctx)
{
	const struct cg_cgpt_config *c = &g->c;
	const int EOT = 256 + c->ncond;
	long count = 0;

	if (g->la != 0)
		return cg_seterr("cgpt: only the first stage samples");
	if (!(s->temperature >= 0) || !isfinite(s->temperature))
		return cg_seterr("cgpt: temperature %g: not a finite number "
		                 ">= 0",
		                 s->temperature);
	if (s->top_k < 0)
		return cg_seterr("cgpt: top-k %d: negative", s->top_k);
	if (!(s->top_p >= 0 && s->top_p <= 1))
		return cg_seterr("cgpt: top-p %g: not in [0, 1]", s->top_p);
	if (cg_cgpt_gen_start(g, cond, prompt, plen) != 0)
		return -1;
	while ((size_t)count < s->max_bytes && count < LONG_MAX) {
		int tok = cg_cgpt_pick(g->logits, c->ncond, s, r);
		if (tok == EOT)
			break;
		count++;
		if (emit(ctx, tok) != 0 || (size_t)count == s->max_bytes)
			break;
		/* tok is a byte: only a next stage can fail it. */
		if (cg_cgpt_gen_push(g, tok) != 0)
			return -1;
	}
	return count;
}
