/*
 * arch/cgpt/cgpt.c - the conditional GPT: layout, init, forward, backward.
 *
 * The model of cgpt.h on the kernels of transformer.c and nn.c.  The parameter
 * layout is a closed-form function of the config (block_at), so views, init and
 * the passes agree by construction; each block's tensors are contiguous, in
 * GPT-2's order.  The workspace holds every activation of a batch of up to
 * max_batch sequences of c->T positions in one allocation, and the gradients of
 * activations once (reused by every block, top down), or, checkpointed, only
 * each block's output and one block's scratch (see carve).  A call with fewer
 * sequences or positions uses the leading B * T rows of each buffer.  The
 * residual stream's gradient is carried in one buffer through the blocks: a
 * residual add passes its gradient through unchanged, so the branch's backward
 * adds into it in place.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cgpt/cgpt.h"
#include "core/arena.h"
#include "nn/gemm.h"
#include "nn/nn.h"
#include "nn/qlinear.h"
#include "nn/transformer.h"

/* ---------------------------------------------------------------- layout */

/* Offsets of one block's tensors in the parameter buffer. */
struct block {
	size_t ln1w, ln1b, qkvw, qkvb, projw, projb;
	size_t ln2w, ln2b, fcw, fcb, mprojw, mprojb;
};

/* Floats in one block: 4 A C + 2 F C + 3 A + F + 6 C (12 C^2 + 13 C
 * when A = C and F = 4C). */
static uint64_t
block_size(const struct cg_cgpt_config *c)
{
	uint64_t C = c->C, A = cg_cgpt_attn(c), F = cg_cgpt_ffn(c);

	return 4 * A * C + 2 * F * C + 3 * A + F + 6 * C;
}

static size_t
wpe_off(const struct cg_cgpt_config *c)
{
	return (size_t)cg_cgpt_vocab(c) * c->C;
}

/* Block l (0 <= l <= L: l == L gives where the blocks end). */
static size_t
block_off(const struct cg_cgpt_config *c, int l)
{
	return wpe_off(c) + (size_t)c->T * c->C + (size_t)l * block_size(c);
}

static struct block
block_at(const struct cg_cgpt_config *c, int l)
{
	size_t C = c->C, o = block_off(c, l);
	size_t A = cg_cgpt_attn(c), F = cg_cgpt_ffn(c);
	struct block k;

	k.ln1w = o;
	k.ln1b = k.ln1w + C;
	k.qkvw = k.ln1b + C;
	k.qkvb = k.qkvw + 3 * A * C;
	k.projw = k.qkvb + 3 * A;
	k.projb = k.projw + C * A;
	k.ln2w = k.projb + C;
	k.ln2b = k.ln2w + C;
	k.fcw = k.ln2b + C;
	k.fcb = k.fcw + F * C;
	k.mprojw = k.fcb + F;
	k.mprojb = k.mprojw + C * F;
	return k;
}

static size_t
lnf_off(const struct cg_cgpt_config *c)
{
	return block_off(c, c->L);
}

/* The output projection: lm_head.w, or wte when tied (offset 0). */
static size_t
head_off(const struct cg_cgpt_config *c)
{
	return c->tied ? 0 : lnf_off(c) + 2 * (size_t)c->C;
}

int
cg_cgpt_check_config(const struct cg_cgpt_config *c)
{
	const struct {
		const char *name;
		int v, lo, hi;
	} f[] = {
	    {"ncond", c->ncond, 1, CG_CGPT_MAX_COND},
	    {"context", c->T, 1, CG_CGPT_MAX_T},
	    {"width", c->C, 1, CG_CGPT_MAX_C},
	    {"layers", c->L, 1, CG_CGPT_MAX_L},
	    {"heads", c->NH, 1, CG_CGPT_MAX_C},
	    {"tied", c->tied, 0, 1},
	    {"head_size", c->hs, 0, CG_CGPT_MAX_C},
	    {"ffn", c->F, 0, 4 * CG_CGPT_MAX_C},
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].v < f[i].lo || f[i].v > f[i].hi)
			return cg_seterr("cgpt: %s = %d: not in [%d, %d]",
			                 f[i].name, f[i].v, f[i].lo, f[i].hi);
	if (c->hs == 0 && c->C % c->NH != 0)
		return cg_seterr("cgpt: width %d is not a multiple of %d heads",
		                 c->C, c->NH);
	if ((uint64_t)c->NH * cg_cgpt_hs(c) > CG_CGPT_MAX_C)
		return cg_seterr("cgpt: %d heads of %d: wider than %d", c->NH,
		                 cg_cgpt_hs(c), CG_CGPT_MAX_C);
	/* Each factor is below 2^19 and L below 2^11: no wrap in 64 bits. */
	uint64_t V = cg_cgpt_vocab(c), C = c->C;
	uint64_t n = V * C + (uint64_t)c->T * C + c->L * block_size(c) + 2 * C +
	             (c->tied ? 0 : V * C);
	if (n > CG_CGPT_MAX_PARAMS || n > SIZE_MAX / sizeof(float))
		return cg_seterr("cgpt: %llu parameters: more than %llu",
		                 (unsigned long long)n,
		                 (unsigned long long)CG_CGPT_MAX_PARAMS);
	return 0;
}

size_t
cg_cgpt_nparams(const struct cg_cgpt_config *c)
{
	if (cg_cgpt_check_config(c) != 0)
		return 0;
	return lnf_off(c) + 2 * (size_t)c->C +
	       (c->tied ? 0 : (size_t)cg_cgpt_vocab(c) * c->C);
}

int
cg_cgpt_nviews(const struct cg_cgpt_config *c)
{
	return 12 * c->L + 4 + (c->tied ? 0 : 1);
}

/* How cg_cgpt_init fills a view. */
enum init { INIT_NORMAL, INIT_RESID, INIT_ZERO, INIT_ONE };

/* Append view name with shape [d0] or [d0, d1] (d1 == 0: 1-D) at *off. */
static void
put(struct cg_view *v, enum init *kind, int *n, size_t *off, const char *name,
    uint64_t d0, uint64_t d1, int decay, enum init k)
{
	struct cg_view *x = &v[*n];

	memset(x, 0, sizeof(*x));
	snprintf(x->name, sizeof(x->name), "%s", name);
	x->off = *off;
	x->ndim = d1 ? 2 : 1;
	x->shape[0] = d0;
	x->shape[1] = d1;
	x->n = d0 * (d1 ? d1 : 1);
	x->decay = decay;
	if (kind)
		kind[*n] = k;
	*off += x->n;
	(*n)++;
}

/* The view table, and with kind != NULL how each view is initialised. */
static int
table(const struct cg_cgpt_config *c, struct cg_view *v, enum init *kind)
{
	uint64_t V = cg_cgpt_vocab(c), C = c->C;
	uint64_t A = cg_cgpt_attn(c), F = cg_cgpt_ffn(c);
	size_t off = 0;
	int n = 0;
	char name[64];

	put(v, kind, &n, &off, "wte", V, C, 0, INIT_NORMAL);
	put(v, kind, &n, &off, "wpe", c->T, C, 0, INIT_NORMAL);
	for (int l = 0; l < c->L; l++) {
		const struct {
			const char *name;
			uint64_t d0, d1; /* d1 0 for 1-D */
			int decay;
			enum init k;
		} b[] = {
		    {"ln1.w", C, 0, 0, INIT_ONE},
		    {"ln1.b", C, 0, 0, INIT_ZERO},
		    {"attn.qkv.w", 3 * A, C, 1, INIT_NORMAL},
		    {"attn.qkv.b", 3 * A, 0, 0, INIT_ZERO},
		    {"attn.proj.w", C, A, 1, INIT_RESID},
		    {"attn.proj.b", C, 0, 0, INIT_ZERO},
		    {"ln2.w", C, 0, 0, INIT_ONE},
		    {"ln2.b", C, 0, 0, INIT_ZERO},
		    {"mlp.fc.w", F, C, 1, INIT_NORMAL},
		    {"mlp.fc.b", F, 0, 0, INIT_ZERO},
		    {"mlp.proj.w", C, F, 1, INIT_RESID},
		    {"mlp.proj.b", C, 0, 0, INIT_ZERO},
		};
		for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
			snprintf(name, sizeof(name), "h.%d.%s", l, b[i].name);
			put(v, kind, &n, &off, name, b[i].d0, b[i].d1,
			    b[i].decay, b[i].k);
		}
	}
	put(v, kind, &n, &off, "lnf.w", C, 0, 0, INIT_ONE);
	put(v, kind, &n, &off, "lnf.b", C, 0, 0, INIT_ZERO);
	if (!c->tied)
		put(v, kind, &n, &off, "lm_head.w", V, C, 1, INIT_NORMAL);
	return n;
}

int
cg_cgpt_views(const struct cg_cgpt_config *c, struct cg_view *v, int max)
{
	if (cg_cgpt_check_config(c) != 0)
		return -1;
	if (max < cg_cgpt_nviews(c))
		return cg_seterr("cgpt: %d views do not fit in %d",
		                 cg_cgpt_nviews(c), max);
	return table(c, v, NULL);
}

void
cg_cgpt_init(const struct cg_cgpt_config *c, float *params, struct cg_rng *r)
{
	struct cg_view *v;
	enum init *kind;
	int nv;

	if (cg_cgpt_check_config(c) != 0)
		return;
	nv = cg_cgpt_nviews(c);
	v = malloc((size_t)nv * sizeof(*v));
	kind = malloc((size_t)nv * sizeof(*kind));
	if (v == NULL || kind == NULL) {
		/* Not worth an error path: the table is a few KB. */
		free(v);
		free(kind);
		memset(params, 0, cg_cgpt_nparams(c) * sizeof(float));
		return;
	}
	table(c, v, kind);
	float resid = 0.02f / sqrtf(2.0f * c->L);
	for (int i = 0; i < nv; i++) {
		float *p = params + v[i].off;
		for (size_t j = 0; j < v[i].n; j++)
			switch (kind[i]) {
			case INIT_NORMAL:
				p[j] = 0.02f * cg_rng_normal(r);
				break;
			case INIT_RESID:
				p[j] = resid * cg_rng_normal(r);
				break;
			case INIT_ZERO:
				p[j] = 0;
				break;
			case INIT_ONE:
				p[j] = 1;
				break;
			}
	}
	free(v);
	free(kind);
}

/* ------------------------------------------------------------- workspace */

/* One block's activations, each with max_batch * T rows. */
struct acts {
	float *ln1, *ln1_mean, *ln1_rstd; /* [B, T, C], [B, T], [B, T] */
	float *qkv;                       /* [B, T, 3A] */
	float *atty;                      /* [B, T, A] attention output */
	float *att;                       /* [B, NH, T, T] */
	float *res2;                      /* [B, T, C] after attention */
	float *ln2, *ln2_mean, *ln2_rstd; /* [B, T, C], [B, T], [B, T] */
	float *fch, *fch_gelu;            /* [B, T, F] */
	void *fch_gelu_r;                 /* [B, T, F] rounded, or NULL */
	float *res3;                      /* [B, T, C] the block's output */
};

struct cg_cgpt_ws {
	struct cg_cgpt_config c;
	int max_batch;
	int ckpt; /* 1: blk[] share one scratch set but for res3 */
	int l0, nblk; /* blk[i] holds block l0 + i's: a stage's, or all */
	/* a stage's sets of activations: kept, one for each micro-batch
	 * in flight (its forward pass not run again before its backward
	 * pass), else one */
	int kept, nset;
	/* bytes of an element of the FFN products' rounded operands at
	 * max_batch in the precision set when the workspace was made
	 * (cg_rounded_size), 0 in f32: GELU's output and gradient are
	 * rounded as they are made, not read back by each product */
	int res;
	void *mem;
	float *encoded;                   /* [B, T, C] the set in use's */
	struct acts *blk;                 /* [nblk] the set in use's */
	float **encs;                     /* [nset] each set's encoded */
	struct acts *blks;                /* [nset * nblk] each set's blk */
	float *lnf, *lnf_mean, *lnf_rstd; /* [B, T, C], [B, T], [B, T] */
	float *logits;                    /* [B, T, V] */
	float *branch;                    /* [B, T, C] a Linear's output */
	double *losses;                   /* [2, B, T]: loss, distilled KL */
	/* Gradients of activations, shared by the blocks. */
	float *dres;      /* [B, T, C] of the residual stream */
	float *dln;       /* [B, T, C] of a LayerNorm output */
	float *dqkv;      /* [B, T, 3A] */
	float *datty;     /* [B, T, A] */
	float *dfch_gelu; /* [B, T, F] */
	void *dfch_r;     /* [B, T, F] d(loss)/d(fch) rounded, or NULL */
	float *dlogits;   /* [B, T, V] */
	float *dscratch;  /* [B, NH, T, T] */
	/* The matrices as stored (cg_cgpt_ws_set_mats), else NULL. */
	struct cg_wmat *mats; /* [CG_CGPT_NMATS(L)] */
	void *qscratch;       /* cg_qlinear_scratch(B T, max(A, F)) bytes */
};

/*
 * Lay the buffers out in arena a (counting, then assigning:
 * core/arena.h).  With checkpointing the blocks keep only their outputs
 * (res3); every other activation lives in one scratch set that all
 * blocks' pointers share, refilled by recomputing a block's forward pass
 * before its backward pass.
 */
static void
carve(struct cg_cgpt_ws *w, struct cg_arena *ar)
{
	size_t R = (size_t)w->max_batch * w->c.T, C = w->c.C;
	size_t V = cg_cgpt_vocab(&w->c), NH = w->c.NH;
	size_t A = cg_cgpt_attn(&w->c), F = cg_cgpt_ffn(&w->c);
	size_t att = (size_t)w->max_batch * NH * w->c.T;
	struct acts shared, dummy;

#define TAKE(ptr, rows, width) ((ptr) = CG_ARENA_FLOATS(ar, (rows), (width)))
#define TAKE_ACTS(a)                                                           \
	do {                                                                   \
		TAKE((a)->ln1, R, C);                                          \
		TAKE((a)->ln1_mean, R, 1);                                     \
		TAKE((a)->ln1_rstd, R, 1);                                     \
		TAKE((a)->qkv, R, 3 * A);                                      \
		TAKE((a)->atty, R, A);                                         \
		TAKE((a)->att, att, w->c.T);                                   \
		TAKE((a)->res2, R, C);                                         \
		TAKE((a)->ln2, R, C);                                          \
		TAKE((a)->ln2_mean, R, 1);                                     \
		TAKE((a)->ln2_rstd, R, 1);                                     \
		TAKE((a)->fch, R, F);                                          \
		TAKE((a)->fch_gelu, R, F);                                     \
		(a)->fch_gelu_r =                                              \
		    w->res ? cg_arena_take(ar, R, F, (size_t)w->res) : NULL;  \
	} while (0)
	for (int s = 0; s < w->nset; s++) {
		float *enc;
		TAKE(enc, R, C);
		if (ar->base)
			w->encs[s] = enc;
		if (w->ckpt)
			TAKE_ACTS(&shared);
		for (int l = 0; l < w->nblk; l++) {
			struct acts *a = ar->base
			                     ? &w->blks[(size_t)s * w->nblk + l]
			                     : &dummy;
			if (w->ckpt)
				*a = shared;
			else
				TAKE_ACTS(a);
			TAKE(a->res3, R, C);
		}
	}
	if (ar->base) {
		w->encoded = w->encs[0];
		w->blk = w->blks;
	}
	TAKE(w->lnf, R, C);
	TAKE(w->lnf_mean, R, 1);
	TAKE(w->lnf_rstd, R, 1);
	TAKE(w->logits, R, V);
	TAKE(w->branch, R, C);
	float *losses = NULL;
	TAKE(losses, R, 4); /* 2 doubles a row */
	w->losses = (double *)losses;
	TAKE(w->dres, R, C);
	TAKE(w->dln, R, C);
	TAKE(w->dqkv, R, 3 * A);
	TAKE(w->datty, R, A);
	TAKE(w->dfch_gelu, R, F);
	w->dfch_r = w->res ? cg_arena_take(ar, R, F, (size_t)w->res) : NULL;
	TAKE(w->dlogits, R, V);
	TAKE(w->dscratch, att, w->c.T);
#undef TAKE_ACTS
#undef TAKE
}

/* Arguments of a workspace, checked; 0 or -1 with a message. */
static int
check_ws(const struct cg_cgpt_config *c, int max_batch)
{
	if (cg_cgpt_check_config(c) != 0)
		return -1;
	if (max_batch < 1 || max_batch > CG_CGPT_MAX_BATCH)
		return cg_seterr("cgpt: batch %d: not in [1, %d]", max_batch,
		                 CG_CGPT_MAX_BATCH);
	/*
	 * cg_sgemm takes int sizes: the rows of a call (B * T) and each
	 * buffer's elements must stay below 2^31.
	 */
	uint64_t rows = (uint64_t)max_batch * c->T;
	uint64_t wide = (uint64_t)4 * c->C;
	if ((uint64_t)cg_cgpt_ffn(c) > wide)
		wide = cg_cgpt_ffn(c);
	if ((uint64_t)3 * cg_cgpt_attn(c) > wide)
		wide = (uint64_t)3 * cg_cgpt_attn(c);
	if ((uint64_t)cg_cgpt_vocab(c) > wide)
		wide = cg_cgpt_vocab(c);
	if ((uint64_t)c->NH * c->T > wide)
		wide = (uint64_t)c->NH * c->T;
	if (rows * wide > INT32_MAX)
		return cg_seterr("cgpt: workspace for batch %d: too large",
		                 max_batch);
	return 0;
}

/* The element size of the FFN products' rounded operands for BT rows
 * (both are BT x C x F multiply-adds): 0 in f32. */
static int
ffn_rounded(const struct cg_cgpt_config *c, int BT)
{
	return cg_rounded_size(BT, c->C, cg_cgpt_ffn(c));
}

/* The bytes ws_new(c, max_batch, checkpoint, any l0, nblk, nset)
 * allocates, or 0 with a message. */
static size_t
ws_bytes(const struct cg_cgpt_config *c, int max_batch, int checkpoint,
         int nblk, int nset)
{
	struct cg_cgpt_ws w = {.c = *c,
	                       .max_batch = max_batch,
	                       .ckpt = checkpoint != 0,
	                       .nblk = nblk,
	                       .nset = nset};
	struct cg_arena a = {0};

	if (check_ws(c, max_batch) != 0)
		return 0;
	w.res = ffn_rounded(c, max_batch * c->T);
	carve(&w, &a);
	if (a.overflow) {
		cg_seterr("cgpt: workspace for batch %d: too large",
		          max_batch);
		return 0;
	}
	return a.used + sizeof(w) +
	       (size_t)nset * (nblk * sizeof(struct acts) + sizeof(float *));
}

size_t
cg_cgpt_ws_bytes(const struct cg_cgpt_config *c, int max_batch,
                 int checkpoint)
{
	return ws_bytes(c, max_batch, checkpoint, c->L, 1);
}

/* A workspace for blocks [l0, l0 + nblk) of c, nset sets of their
 * activations. */
static struct cg_cgpt_ws *
ws_new(const struct cg_cgpt_config *c, int max_batch, int checkpoint, int l0,
       int nblk, int nset)
{
	struct cg_cgpt_ws *w;
	struct cg_arena a = {0};
	char what[64];

	if (check_ws(c, max_batch) != 0)
		return NULL;
	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->blks = calloc((size_t)nset * nblk, sizeof(*w->blks))) == NULL ||
	    (w->encs = calloc((size_t)nset, sizeof(*w->encs))) == NULL) {
		if (w)
			free(w->blks);
		free(w);
		cg_seterr("cgpt: out of memory");
		return NULL;
	}
	w->c = *c;
	w->max_batch = max_batch;
	w->ckpt = checkpoint != 0;
	w->l0 = l0;
	w->nblk = nblk;
	w->nset = nset;
	w->res = ffn_rounded(c, max_batch * c->T);
	snprintf(what, sizeof(what), "cgpt: workspace for batch %d",
	         max_batch);
	carve(w, &a);
	if (cg_arena_alloc(&a, what) != 0)
		goto fail;
	carve(w, &a);
	w->mem = (float *)a.base;
	return w;
fail:
	cg_cgpt_ws_free(w);
	return NULL;
}

struct cg_cgpt_ws *
cg_cgpt_ws_new(const struct cg_cgpt_config *c, int max_batch, int checkpoint)
{
	return ws_new(c, max_batch, checkpoint, 0, c->L, 1);
}

void
cg_cgpt_ws_free(struct cg_cgpt_ws *w)
{
	if (w == NULL)
		return;
	free(w->mem);
	free(w->blks);
	free(w->encs);
	free(w->mats);
	free(w->qscratch);
	free(w);
}

int
cg_cgpt_ws_set_mats(struct cg_cgpt_ws *w, const struct cg_wmat *mats)
{
	const int C = w->c.C, A = cg_cgpt_attn(&w->c), F = cg_cgpt_ffn(&w->c);
	const int n = CG_CGPT_NMATS(w->c.L);
	struct cg_wmat *copy = NULL;
	void *scratch = NULL;

	if (mats != NULL) {
		for (int i = 0; i < n; i++) {
			/* in-widths: qkv and fc take C, proj A, mlp.proj F */
			int K = i >= 4 * w->c.L ? C
			        : i % 4 == 3    ? F
			        : i % 4 == 1    ? A
			                        : C;
			if (!cg_wmat_ok(mats[i].dtype, (uint64_t)K))
				return cg_seterr("cgpt: matrix %d: %s [*, %d] "
				                 "cannot be multiplied as "
				                 "stored",
				                 i, cg_dtype_name(mats[i].dtype),
				                 K);
		}
		if ((copy = malloc((size_t)n * sizeof(*copy))) == NULL ||
		    (scratch = cg_alloc(cg_qlinear_scratch(
		         w->max_batch * w->c.T, A > F ? A : F))) == NULL) {
			free(copy);
			return cg_seterr("cgpt: out of memory");
		}
		memcpy(copy, mats, (size_t)n * sizeof(*copy));
	}
	free(w->mats);
	free(w->qscratch);
	w->mats = copy;
	w->qscratch = scratch;
	return 0;
}

const float *
cg_cgpt_logits(const struct cg_cgpt_ws *w)
{
	return w->logits;
}

/* --------------------------------------------------------------- passes */

static int
check_call(const struct cg_cgpt_config *c, const struct cg_cgpt_ws *w,
           const int *tokens, int B, int T)
{
	int V = cg_cgpt_vocab(c);

	if (memcmp(c, &w->c, sizeof(*c)) != 0)
		return cg_seterr("cgpt: workspace made for another config");
	if (B < 1 || B > w->max_batch)
		return cg_seterr("cgpt: batch %d: not in [1, %d]", B,
		                 w->max_batch);
	if (T < 1 || T > c->T)
		return cg_seterr("cgpt: %d positions: not in [1, %d]", T, c->T);
	for (size_t i = 0; tokens && i < (size_t)B * T; i++)
		if (tokens[i] < 0 || tokens[i] >= V)
			return cg_seterr("cgpt: token %d (sequence %zu, "
			                 "position %zu): not in [0, %d)",
			                 tokens[i], i / T, i % T, V);
	return 0;
}

/* Linear layer i (see CG_CGPT_NMATS) on weight wt [N, K] of params, or
 * on the matrix as stored when the workspace has them. */
static void
linear(const struct cg_cgpt_ws *w, int i, float *out, const float *inp,
       const float *wt, const float *bias, int BT, int K, int N)
{
	if (w->mats != NULL)
		cg_qlinear_forward(out, inp, &w->mats[i], bias, BT, K, N,
		                   w->qscratch);
	else
		cg_linear_forward(out, inp, wt, bias, BT, K, N);
}

/* Block l's forward pass from its input res into w->blk[l]. */
static void
block_forward(const struct cg_cgpt_config *c, const float *p,
              struct cg_cgpt_ws *w, int l, const float *res, int B, int T)
{
	const int C = c->C, NH = c->NH, BT = B * T;
	const int A = cg_cgpt_attn(c), F = cg_cgpt_ffn(c);
	const size_t N = (size_t)BT * C;
	struct block k = block_at(c, l);
	struct acts *a = &w->blk[l - w->l0];

	cg_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, res, p + k.ln1w,
	                     p + k.ln1b, B, T, C);
	linear(w, 4 * l, a->qkv, a->ln1, p + k.qkvw, p + k.qkvb, BT, C, 3 * A);
	cg_attention_forward(a->atty, a->att, a->qkv, B, T, A, NH);
	linear(w, 4 * l + 1, w->branch, a->atty, p + k.projw, p + k.projb, BT,
	       A, C);
	cg_residual_forward(a->res2, res, w->branch, N);
	cg_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2,
	                     p + k.ln2w, p + k.ln2b, B, T, C);
	linear(w, 4 * l + 2, a->fch, a->ln2, p + k.fcw, p + k.fcb, BT, C, F);
	/* GELU's output rounded as it is made for the products that read
	 * it (here and in the backward pass), where the precision asks */
	int es = ffn_rounded(c, BT);
	void *r = es && es == w->res && w->mats == NULL ? a->fch_gelu_r : NULL;
	cg_gelu_forward_r(a->fch_gelu, r, es, a->fch, (size_t)BT * F);
	if (r != NULL)
		cg_linear_forward_r(w->branch, a->fch_gelu, r, es, p + k.mprojw,
		                    p + k.mprojb, BT, F, C);
	else
		linear(w, 4 * l + 3, w->branch, a->fch_gelu, p + k.mprojw,
		       p + k.mprojb, BT, F, C);
	cg_residual_forward(a->res3, a->res2, w->branch, N);
}

/* Block l's input: the previous block's output, or the embeddings. */
static const float *
block_input(const struct cg_cgpt_ws *w, int l)
{
	return l > w->l0 ? w->blk[l - 1 - w->l0].res3 : w->encoded;
}

/* The forward pass on checked arguments. */
static void
forward(const struct cg_cgpt_config *c, const float *params,
        struct cg_cgpt_ws *w, const int *tokens, int B, int T)
{
	const int C = c->C, V = cg_cgpt_vocab(c);

	cg_embed_forward(w->encoded, tokens, params, params + wpe_off(c), B, T,
	                 C);
	for (int l = 0; l < c->L; l++)
		block_forward(c, params, w, l, block_input(w, l), B, T);
	size_t f = lnf_off(c);
	cg_layernorm_forward(w->lnf, w->lnf_mean, w->lnf_rstd,
	                     block_input(w, c->L), params + f, params + f + C,
	                     B, T, C);
	linear(w, 4 * c->L, w->logits, w->lnf, params + head_off(c), NULL,
	       B * T, C, V);
}

int
cg_cgpt_forward(const struct cg_cgpt_config *c, const float *params,
                struct cg_cgpt_ws *w, const int *tokens, int B, int T)
{
	if (check_call(c, w, tokens, B, T) != 0)
		return -1;
	forward(c, params, w, tokens, B, T);
	return 0;
}

/* Zero the leading n floats of p. */
static void
zero(float *p, size_t n)
{
	memset(p, 0, n * sizeof(float));
}

/*
 * Block l's backward pass, its forward pass's activations in w->blk[l]
 * and its input res: w->dres [B, T, C] holds d(loss)/d(its output) and
 * gets d(loss)/d(its input); grad [nparams] += its parameters' share.
 */
static void
block_backward(const struct cg_cgpt_config *c, const float *params,
               struct cg_cgpt_ws *w, int l, const float *res, int B, int T,
               float *grad)
{
	const int C = c->C, NH = c->NH;
	const int A = cg_cgpt_attn(c), F = cg_cgpt_ffn(c);
	const int BT = B * T;
	struct block k = block_at(c, l);
	struct acts *a = &w->blk[l - w->l0];
	const float *p = params;
	float *g = grad;
	size_t NF = (size_t)BT * F;

	/* the FFN's operands rounded by GELU's passes (block_forward) */
	int es = ffn_rounded(c, BT);
	int fused = es && es == w->res && w->mats == NULL;

	/* res3 = res2 + mlp(ln2(res2)) */
	cg_linear_backward_set_r(w->dfch_gelu, g + k.mprojw, g + k.mprojb,
	                         w->dres, NULL, a->fch_gelu,
	                         fused ? a->fch_gelu_r : NULL, es,
	                         p + k.mprojw, BT, F, C);
	/* fch_gelu is spent: it takes d(loss)/d(fch). */
	float *dfch = a->fch_gelu;
	cg_gelu_backward_set_r(dfch, fused ? w->dfch_r : NULL, es,
	                       w->dfch_gelu, a->fch, NF);
	cg_linear_backward_set_r(w->dln, g + k.fcw, g + k.fcb, dfch,
	                         fused ? w->dfch_r : NULL, a->ln2, NULL, es,
	                         p + k.fcw, BT, C, F);
	cg_layernorm_backward(w->dres, g + k.ln2w, g + k.ln2b, w->dln, a->res2,
	                      p + k.ln2w, a->ln2_mean, a->ln2_rstd, B, T, C);
	/* res2 = res + proj(attention(qkv(ln1(res)))) */
	cg_linear_backward_set(w->datty, g + k.projw, g + k.projb, w->dres,
	                       a->atty, p + k.projw, BT, A, C);
	zero(w->dqkv, 3 * (size_t)BT * A);
	cg_attention_backward(w->dqkv, w->dscratch, w->datty, a->qkv, a->att, B,
	                      T, A, NH);
	cg_linear_backward_set(w->dln, g + k.qkvw, g + k.qkvb, w->dqkv, a->ln1,
	                       p + k.qkvw, BT, C, 3 * A);
	cg_layernorm_backward(w->dres, g + k.ln1w, g + k.ln1b, w->dln, res,
	                      p + k.ln1w, a->ln1_mean, a->ln1_rstd, B, T, C);
}

/*
 * The backward pass from w->dlogits [B, T, V], after the forward pass of
 * the same tokens on w: grad [nparams] += d(loss)/d(params).
 */
static void
backward(const struct cg_cgpt_config *c, const float *params,
         struct cg_cgpt_ws *w, const int *tokens, int B, int T, float *grad)
{
	const int C = c->C, V = cg_cgpt_vocab(c);
	const int BT = B * T;
	const size_t N = (size_t)BT * C;

	/* Head and final LayerNorm. */
	const float *last = block_input(w, c->L);
	size_t f = lnf_off(c);
	cg_linear_backward_set(w->dln, grad + head_off(c), NULL, w->dlogits,
	                       w->lnf, params + head_off(c), BT, C, V);
	zero(w->dres, N);
	cg_layernorm_backward(w->dres, grad + f, grad + f + C, w->dln, last,
	                      params + f, w->lnf_mean, w->lnf_rstd, B, T, C);

	/* Blocks, top down; w->dres is d(loss)/d(the block's output). */
	for (int l = c->L - 1; l >= 0; l--) {
		/* Checkpointed: the scratch set holds the top block's
		 * activations since the forward pass; others recompute. */
		if (w->ckpt && l < c->L - 1)
			block_forward(c, params, w, l, block_input(w, l), B, T);
		block_backward(c, params, w, l, block_input(w, l), B, T, grad);
	}
	cg_embed_backward(grad, grad + wpe_off(c), w->dres, tokens, B, T, C);
}

int
cg_cgpt_forward_backward(const struct cg_cgpt_config *c, const float *params,
                         struct cg_cgpt_ws *w, const int *tokens,
                         const int *targets, const float *weight, int B, int T,
                         float *grad, double *loss)
{
	const int V = cg_cgpt_vocab(c);
	const int BT = B * T;

	if (check_call(c, w, tokens, B, T) != 0)
		return -1;
	if (grad != NULL && w->mats != NULL)
		return cg_seterr("cgpt: no gradient through matrices as "
		                 "stored");
	for (size_t i = 0; i < (size_t)BT; i++)
		if (weight[i] != 0 && (targets[i] < 0 || targets[i] >= V))
			return cg_seterr("cgpt: target %d (sequence %zu, "
			                 "position %zu): not in [0, %d)",
			                 targets[i], i / T, i % T, V);
	forward(c, params, w, tokens, B, T);

	/* The loss; with a gradient wanted, d(loss)/d(logits) alongside. */
	if (grad != NULL) {
		zero(w->dlogits, (size_t)BT * V);
		cg_xent_forward_backward(w->losses, w->dlogits, w->logits,
		                         targets, weight, B, T, V);
		cg_loss_scale_apply(w->dlogits, (size_t)BT * V);
	} else
		cg_xent_forward(w->losses, w->logits, targets, weight, B, T, V);
	if (loss != NULL) {
		double s = 0;
		for (size_t i = 0; i < (size_t)BT; i++)
			s += weight[i] * w->losses[i];
		*loss = s;
	}
	if (grad == NULL)
		return 0;
	backward(c, params, w, tokens, B, T, grad);
	return 0;
}

int
cg_cgpt_distill_forward_backward(const struct cg_cgpt_config *c,
                                 const float *params, struct cg_cgpt_ws *w,
                                 const int *tokens, const int *targets,
                                 const float *weight, const float *tlogp,
                                 double alpha, double tau, int B, int T,
                                 float *grad, double *loss, double *data,
                                 double *teacher)
{
	const int V = cg_cgpt_vocab(c);
	const int BT = B * T;

	if (check_call(c, w, tokens, B, T) != 0)
		return -1;
	if (grad != NULL && w->mats != NULL)
		return cg_seterr("cgpt: no gradient through matrices as "
		                 "stored");
	if (!(tau > 0) || !(alpha >= 0 && alpha <= 1))
		return cg_seterr("cgpt: temperature %g or teacher weight %g out "
		                 "of range",
		                 tau, alpha);
	for (size_t i = 0; i < (size_t)BT; i++)
		if (weight[i] != 0 && (targets[i] < 0 || targets[i] >= V))
			return cg_seterr("cgpt: target %d (sequence %zu, "
			                 "position %zu): not in [0, %d)",
			                 targets[i], i / T, i % T, V);
	forward(c, params, w, tokens, B, T);
	/* w->losses holds 2 doubles a row: the data term, then the KL. */
	double *ce = w->losses, *kl = w->losses + BT;
	if (grad != NULL)
		zero(w->dlogits, (size_t)BT * V);
	cg_distill_xent_forward_backward(ce, kl, grad ? w->dlogits : NULL,
	                                 w->logits, tlogp, targets, weight,
	                                 (float)alpha, (float)tau, B, T, V);
	double sd = 0, st = 0;
	for (size_t i = 0; i < (size_t)BT; i++) {
		sd += weight[i] * ce[i];
		st += weight[i] * kl[i];
	}
	st *= tau * tau;
	if (data != NULL)
		*data = sd;
	if (teacher != NULL)
		*teacher = st;
	if (loss != NULL)
		*loss = (1.0 - alpha) * sd + alpha * st;
	if (grad != NULL) {
		cg_loss_scale_apply(w->dlogits, (size_t)BT * V);
		backward(c, params, w, tokens, B, T, grad);
	}
	return 0;
}

/* ----------------------------------------------------- pipeline stages */

/* The checks of a stage workspace's arguments; 0 or -1 with a message. */
static int
check_range(const struct cg_cgpt_config *c, int a, int b, int keep)
{
	if (cg_cgpt_check_config(c) != 0)
		return -1;
	if (a < 0 || b <= a || b > c->L)
		return cg_seterr(
		    "cgpt: blocks [%d, %d): not a range of [0, %d)", a, b,
		    c->L);
	if (keep < 0 || keep > CG_CGPT_MAX_KEEP)
		return cg_seterr("cgpt: %d sets of activations kept: not in "
		                 "[0, %d]",
		                 keep, CG_CGPT_MAX_KEEP);
	return 0;
}

struct cg_cgpt_ws *
cg_cgpt_stage_ws_new(const struct cg_cgpt_config *c, int max_batch, int a,
                     int b, int keep)
{
	struct cg_cgpt_ws *w;

	if (check_range(c, a, b, keep) != 0)
		return NULL;
	if ((w = ws_new(c, max_batch, 0, a, b - a, keep > 0 ? keep : 1)) !=
	    NULL)
		w->kept = keep > 0;
	return w;
}

size_t
cg_cgpt_stage_ws_bytes(const struct cg_cgpt_config *c, int max_batch, int a,
                       int b, int keep)
{
	if (check_range(c, a, b, keep) != 0)
		return 0;
	return ws_bytes(c, max_batch, 0, b - a, keep > 0 ? keep : 1);
}

double
cg_cgpt_stage_flops(const struct cg_cgpt_config *c, int a, int b)
{
	double T = c->T, C = c->C, A = cg_cgpt_attn(c), F = cg_cgpt_ffn(c);
	double V = cg_cgpt_vocab(c);
	/* a block's products a token: qkv, the projection, the MLP's two;
	 * causal attention's scores and sums over (T + 1) / 2 keys on
	 * average */
	double block = 2 * (C * 3 * A + A * C + 2 * C * F) + 2 * 2 * A *
	                                                          (T + 1) / 2;
	double f = (b - a) * block;

	if (b == c->L)
		f += 2 * C * V; /* the head */
	return f * T;
}

/* The checks of a stage's call on set k of w's activations, which it
 * takes; 0 or -1 with a message. */
static int
check_stage(const struct cg_cgpt_config *c, struct cg_cgpt_ws *w, int k,
            const int *tokens, const int *targets, const float *weight, int B,
            int T)
{
	const int V = cg_cgpt_vocab(c);

	if (w->ckpt || w->mats)
		return cg_seterr("cgpt: not a stage's workspace");
	if (k < 0 || k >= w->nset)
		return cg_seterr("cgpt: set %d of activations: not in [0, %d)",
		                 k, w->nset);
	w->encoded = w->encs[k];
	w->blk = w->blks + (size_t)k * w->nblk;
	if (check_call(c, w, w->l0 == 0 ? tokens : NULL, B, T) != 0)
		return -1;
	for (size_t i = 0; targets && i < (size_t)B * T; i++)
		if (weight[i] != 0 && (targets[i] < 0 || targets[i] >= V))
			return cg_seterr("cgpt: target %d (sequence %zu, "
			                 "position %zu): not in [0, %d)",
			                 targets[i], i / T, i % T, V);
	return 0;
}

/* The stage's blocks forward, from the embeddings of tokens (the first
 * stage) or from x. */
static void
stage_forward(const struct cg_cgpt_config *c, const float *params,
              struct cg_cgpt_ws *w, const int *tokens, const float *x, int B,
              int T)
{
	const int C = c->C;

	if (w->l0 == 0)
		cg_embed_forward(w->encoded, tokens, params,
		                 params + wpe_off(c), B, T, C);
	else
		memcpy(w->encoded, x, (size_t)B * T * C * sizeof(float));
	for (int l = w->l0; l < w->l0 + w->nblk; l++)
		block_forward(c, params, w, l, block_input(w, l), B, T);
}

int
cg_cgpt_stage_forward(const struct cg_cgpt_config *c, const float *params,
                      struct cg_cgpt_ws *w, int k, const int *tokens,
                      const float *x, int B, int T, float *y)
{
	if (check_stage(c, w, k, tokens, NULL, NULL, B, T) != 0)
		return -1;
	stage_forward(c, params, w, tokens, x, B, T);
	memcpy(y, block_input(w, w->l0 + w->nblk),
	       (size_t)B * T * c->C * sizeof(float));
	return 0;
}

int
cg_cgpt_stage_backward(const struct cg_cgpt_config *c, const float *params,
                       struct cg_cgpt_ws *w, int k, const int *tokens,
                       const float *x, const int *targets, const float *weight,
                       const float *dy, int B, int T, float *grad, float *dx,
                       double *loss)
{
	const int C = c->C, V = cg_cgpt_vocab(c), BT = B * T;
	const int top = w->l0 + w->nblk;
	const size_t N = (size_t)BT * C;

	if (check_stage(c, w, k, tokens, top == c->L ? targets : NULL, weight,
	                B, T) != 0)
		return -1;
	/* kept: set k holds the activations of its forward pass (the same
	 * floats again would come of running it: the same kernels on the
	 * same inputs); the last stage's forward pass is this call's */
	if (!w->kept || top == c->L)
		stage_forward(c, params, w, tokens, x, B, T);
	*loss = 0;
	if (top == c->L) {
		/* as cg_cgpt_forward_backward: head, loss, head's backward */
		size_t f = lnf_off(c);
		cg_layernorm_forward(w->lnf, w->lnf_mean, w->lnf_rstd,
		                     block_input(w, top), params + f,
		                     params + f + C, B, T, C);
		linear(w, 4 * c->L, w->logits, w->lnf, params + head_off(c),
		       NULL, BT, C, V);
		zero(w->dlogits, (size_t)BT * V);
		cg_xent_forward_backward(w->losses, w->dlogits, w->logits,
		                         targets, weight, B, T, V);
		double s = 0;
		for (size_t i = 0; i < (size_t)BT; i++)
			s += weight[i] * w->losses[i];
		*loss = s;
		cg_linear_backward_set(w->dln, grad + head_off(c), NULL,
		                       w->dlogits, w->lnf, params + head_off(c),
		                       BT, C, V);
		zero(w->dres, N);
		cg_layernorm_backward(w->dres, grad + f, grad + f + C, w->dln,
		                      block_input(w, top), params + f,
		                      w->lnf_mean, w->lnf_rstd, B, T, C);
	} else
		memcpy(w->dres, dy, N * sizeof(float));
	for (int l = top - 1; l >= w->l0; l--)
		block_backward(c, params, w, l, block_input(w, l), B, T, grad);
	if (w->l0 == 0)
		cg_embed_backward(grad, grad + wpe_off(c), w->dres, tokens, B,
		                  T, C);
	else
		memcpy(dx, w->dres, N * sizeof(float));
	return 0;
}

size_t
cg_cgpt_stage_off(const struct cg_cgpt_config *c, int l)
{
	return l == 0 ? 0 : l == c->L ? cg_cgpt_nparams(c) : block_off(c, l);
}

/* ------------------------------------------------- inputs of the layers */

/* sq [W] += the sum over rows r of x[r] squared, each row weighed by
 * rows[r] (0: not counted); x [R, W], rows [R]. */
static void
add_sq(double *sq, const float *x, const float *rows, size_t R, size_t W)
{
	for (size_t r = 0; r < R; r++) {
		const float *xr = x + r * W;
		const double wr = rows[r];
		if (wr == 0)
			continue;
		for (size_t j = 0; j < W; j++)
			sq[j] += wr * ((double)xr[j] * xr[j]);
	}
}

int
cg_cgpt_input_sq(const struct cg_cgpt_config *c, const float *params,
                 struct cg_cgpt_ws *w, const int *tokens, const float *rows,
                 int B, int T, double *sq)
{
	const size_t C = c->C, R = (size_t)B * T;
	const size_t A = cg_cgpt_attn(c), F = cg_cgpt_ffn(c);
	const size_t per = 2 * C + A + F; /* sq's floats per block */

	if (check_call(c, w, tokens, B, T) != 0)
		return -1;
	cg_embed_forward(w->encoded, tokens, params, params + wpe_off(c), B, T,
	                 c->C);
	/* Block by block: a checkpointed workspace keeps one block's
	 * activations at a time. */
	for (int l = 0; l < c->L; l++) {
		const struct acts *a = &w->blk[l];
		double *q = sq + (size_t)l * per;

		block_forward(c, params, w, l, block_input(w, l), B, T);
		/* attn.qkv.w, attn.proj.w, mlp.fc.w, mlp.proj.w */
		add_sq(q, a->ln1, rows, R, C);
		add_sq(q + C, a->atty, rows, R, A);
		add_sq(q + C + A, a->ln2, rows, R, C);
		add_sq(q + 2 * C + A, a->fch_gelu, rows, R, F);
	}
	if (!c->tied) {
		size_t f = lnf_off(c);
		cg_layernorm_forward(w->lnf, w->lnf_mean, w->lnf_rstd,
		                     block_input(w, c->L), params + f,
		                     params + f + C, B, T, c->C);
		add_sq(sq + (size_t)c->L * per, w->lnf, rows, R, C);
	}
	return 0;
}
