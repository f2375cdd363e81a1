/*
 * train/train.c - one worker call: choose batches, accumulate, step, emit.
 *
 * Batches are a pure function of (seed, shard, cursor): the cursor counts
 * examples consumed, epoch e = cursor / n is a Fisher-Yates permutation
 * seeded from (seed, e), and example cursor % n of that epoch comes next.
 * Without a state file the cursor is derived from the model's step, so a
 * rerun of the same command gives the same bits.  Model noise is seeded
 * from (seed, model step, micro-batch) and each example's input index, so
 * four workers with batch 32 see exactly what one worker with batch 128
 * sees when the shards are a round-robin split read in order.
 */
#include <float.h>
#include <fnmatch.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cjson/cJSON.h>

#include "core/clock.h"
#include "core/par.h"
#include "exchange/update.h"
#include "model/qat.h"
#include "nn/gemm.h"
#include "model/stage.h"
#include "train/pipe.h"
#include "train/plan.h"
#include "file/frame.h"
#include "train/train.h"

/* ------------------------------------------------------------ batches */

struct order {
	uint64_t n;
	uint64_t epoch; /* epoch perm holds, or UINT64_MAX */
	uint64_t *perm;	/* [n] or NULL for sequential */
	uint64_t seed;
};

static int
order_init(struct order *o, uint64_t n, enum cg_order kind, uint64_t seed)
{
	memset(o, 0, sizeof(*o));
	o->n = n;
	o->seed = seed;
	o->epoch = UINT64_MAX;
	if (kind == CG_ORDER_SHUFFLE &&
	    (o->perm = cg_alloc(n * sizeof(uint64_t))) == NULL)
		return -1;
	return 0;
}

static uint64_t
order_at(struct order *o, uint64_t pos)
{
	uint64_t e = pos / o->n;

	if (o->perm == NULL)
		return pos % o->n;
	if (e != o->epoch) {
		struct cg_rng r;

		cg_rng_derive(&r, o->seed, 0x6f72646572ULL, e);
		for (uint64_t i = 0; i < o->n; i++)
			o->perm[i] = i;
		for (uint64_t i = o->n - 1; i > 0; i--) {
			uint64_t j = cg_rng_below(&r, i + 1);
			uint64_t t = o->perm[i];
			o->perm[i] = o->perm[j];
			o->perm[j] = t;
		}
		o->epoch = e;
	}
	return o->perm[pos % o->n];
}

/* ------------------------------------------------------------ frozen */

int
cg_train_freeze(const struct cg_model *m, const char *const *glob, int n,
                uint8_t **frozen)
{
	uint8_t *f;
	int nf = 0;

	*frozen = NULL;
	if (n == 0 && m->lora == NULL)
		return 0;
	if ((f = calloc((size_t)m->nviews, 1)) == NULL)
		return cg_seterr("out of memory");
	/* a model with adapters trains them alone */
	for (int i = 0; m->lora && i < m->nviews; i++)
		f[i] = !cg_lora_is_adapter(m, i);
	for (int k = 0; k < n; k++) {
		int hit = 0;
		for (int i = 0; i < m->nviews; i++)
			if (fnmatch(glob[k], m->views[i].name, 0) == 0)
				f[i] = 1, hit = 1;
		if (!hit) {
			free(f);
			return cg_seterr("--freeze '%s': matches no tensor of "
			                 "the model (cg-inspect lists them)",
			                 glob[k]);
		}
	}
	for (int i = 0; i < m->nviews; i++)
		nf += f[i];
	if (nf == m->nviews) {
		free(f);
		return cg_seterr("--freeze: every tensor is frozen: nothing "
		                 "would train");
	}
	*frozen = f;
	return 0;
}

size_t
cg_train_trained(const struct cg_model *m, const uint8_t *frozen)
{
	size_t n = 0;

	if (frozen == NULL)
		return m->nparams;
	for (int i = 0; i < m->nviews; i++)
		if (!frozen[i])
			n += m->views[i].n;
	return n;
}

/* Zero the frozen views of x [nparams]. */
static void
zero_frozen(const struct cg_model *m, const uint8_t *frozen, float *x)
{
	for (int i = 0; frozen && i < m->nviews; i++)
		if (frozen[i])
			memset(x + m->views[i].off, 0,
			       m->views[i].n * sizeof(float));
}

/* ------------------------------------------------------------- state */

/* Where a call without a state starts reading: one round of K batches
 * per model step for a grad or delta, a batch per step for a model. */
static uint64_t
start_cursor(const struct cg_model *m, const struct cg_train_opts *o)
{
	if (o->emit == CG_EMIT_MODEL)
		return m->step * (uint64_t)o->batch;
	return m->step * (uint64_t)o->steps * (uint64_t)o->batch;
}

/* What a call of o keeps in a state: see train.h.  A fresh state's
 * cursor is where a call without one starts; it comes first, so that a
 * state file lists it first. */
int
cg_train_state_init(struct cg_state *st, const struct cg_model *m,
		    const struct cg_train_opts *o)
{
	const uint64_t P = cg_train_trained(m, o->frozen);
	uint64_t c;
	int have = cg_state_get_u64(st, "cursor", &c);
	void *avg;
	int ema;

	if (have < 0 ||
	    (!have && cg_state_put_u64(st, "cursor", start_cursor(m, o)) != 0))
		return -1;
	/* The moving average (o->ema): kept, or started from the
	 * parameters; a call without one would leave it behind. */
	if ((ema = cg_state_get(st, "ema", CG_F32, m->nparams, &avg)) < 0)
		return -1;
	if (ema && !(o->ema > 0))
		return cg_seterr("the state keeps a moving average of the "
		                 "parameters (ema): give --ema, or start a "
		                 "new state");
	if (!ema && o->ema > 0 && o->emit == CG_EMIT_MODEL) {
		if ((avg = cg_state_put(st, "ema", CG_F32, m->nparams)) == NULL)
			return -1;
		memcpy(avg, m->params, m->nparams * sizeof(float));
	}
	if (o->emit != CG_EMIT_DELTA)
		return 0;
	if (cg_state_put(st, "opt.t", CG_U64, 1) == NULL ||
	    (cg_optim_needs_m(o->opt.kind) &&
	     cg_state_put(st, "opt.m", CG_F32, P) == NULL) ||
	    (cg_optim_needs_v(o->opt.kind) &&
	     cg_state_put(st, "opt.v", CG_F32, P) == NULL))
		return -1;
	return 0;
}

/* Whether st was read with a tensor name of n f32 (already resident). */
static int
state_holds(const struct cg_state *st, const char *name, uint64_t n)
{
	void *p;

	return st && cg_state_loaded(st) &&
	       cg_state_get(st, name, CG_F32, n, &p) == 1;
}

/* ---------------------------------------------------------- the loop */

static void
add_metrics(struct cg_metrics *acc, const struct cg_metrics *b)
{
	acc->loss += b->loss * b->n;
	for (int i = 0; i < 3; i++)
		acc->part[i] += b->part[i] * b->n;
	acc->bits_per += b->bits_per * b->n;
	acc->data += b->data * b->n;
	acc->teacher += b->teacher * b->n;
	acc->n += b->n;
}

static void
finish_metrics(struct cg_metrics *acc)
{
	if (acc->n == 0)
		return;
	acc->loss /= acc->n;
	for (int i = 0; i < 3; i++)
		acc->part[i] /= acc->n;
	acc->bits_per /= acc->n;
	acc->data /= acc->n;
	acc->teacher /= acc->n;
}

/*
 * Text archs give means per scored token, and part[0] = scored tokens per
 * example (arch/cgpt/cgpt_arch.c), while batches differ in tokens (the last one is
 * short, and texts differ in length).  Weighting each batch by its tokens
 * rather than its examples makes the sums exact per-token means, whatever
 * the batch size; part[0] stays a mean per example.  *tokens counts.
 */
static void
add_text_metrics(struct cg_metrics *acc, const struct cg_metrics *b,
		 double *tokens)
{
	/* part[0] * n is the batch's whole count, up to rounding. */
	double w = round(b->part[0] * (double)b->n);

	acc->loss += b->loss * w;
	acc->bits_per += b->bits_per * w;
	acc->data += b->data * w;
	acc->teacher += b->teacher * w;
	acc->part[0] += w;
	for (int i = 1; i < 3; i++)
		acc->part[i] += b->part[i] * b->n;
	acc->n += b->n;
	*tokens += w;
}

static void
finish_text_metrics(struct cg_metrics *acc, double tokens)
{
	if (acc->n == 0)
		return;
	if (tokens > 0) {
		acc->loss /= tokens;
		acc->bits_per /= tokens;
		acc->data /= tokens;
		acc->teacher /= tokens;
	}
	for (int i = 0; i < 3; i++)
		acc->part[i] /= acc->n;
}

/* ------------------------------------------------------------ one call */

/* One call of cg_train_run: what every mode shares, and the optimizer's
 * arrays of the modes that step (model, delta). */
struct run {
	struct cg_model *m;
	const struct cg_shard *s;
	const struct cg_train_opts *o;
	struct cg_state *st;
	float *out;
	struct cg_train_result *res;
	size_t P;
	int text;
	struct order ord;
	uint64_t *ex, cursor, *st_cursor;
	uint64_t *pex; /* DP-SGD: a step's Poisson sample [s->n] */
	float *grad;
	double tokens;
	int grad_clear; /* grad is all zeros: the optimizer cleared it */
	/* The groups that step, with their step counts: the model's own
	 * (model mode), or a copy counting from the state's (delta). */
	struct cg_group *groups;
	float *mm, *vv;  /* the moments that step */
	int own_moments; /* mm and vv are this call's, freed at its end */
	uint64_t t_local, *tp;
	float *start; /* delta: the parameters before the first step */
	struct cg_qat *qat; /* o->qat's fake quantization, or NULL */
	/* With frozen views (o->frozen): the views that train, tv [ntv],
	 * and the groups over them, tg [ngroups] (view0 and nviews index
	 * tv; a group with none of them frozen).  A delta call's moments
	 * hold only these views: tv's offsets are then into the compact
	 * buffers pc and gc [Pt], which each step fills from the model's
	 * parameters and gradient and the parameters are put back from;
	 * a model call's tv keeps the model's offsets. */
	struct cg_view *tv;
	struct cg_group *tg;
	int ntv;
	size_t Pt;
	float *pc, *gc; /* [Pt], delta with frozen views; else NULL */
	/* Loss scaling (o->loss_scale > 0): the scale and the good
	 * micro-batches in a row, kept in the state where there is one
	 * (st_scale, st_good); skip: the last micro-batch was skipped;
	 * skip_tokens: the scored tokens of skipped ones (text grad). */
	float scale;
	uint64_t good;
	float *st_scale;
	uint64_t *st_good;
	int skip;
	double skip_tokens;
	/* The moving average of the parameters (o->ema): the state's
	 * "ema", or out without a state. */
	float *ema;
};

/* What sets one mode apart: its arrays before the first step, whether an
 * optimizer step follows each batch, and what it makes of the steps at
 * the end. */
struct mode {
	int (*begin)(struct run *r);
	int steps;
	void (*end)(struct run *r);
};

/* grad: the mean gradient of the steps into out, the model unchanged. */
static int
grad_begin(struct run *r)
{
	memset(r->out, 0, r->P * sizeof(float));
	return 0;
}

static void
grad_end(struct run *r)
{
	/* The batch function gives means; K of them make K times the mean
	 * gradient (text: tokens times it). */
	const double tokens = r->tokens - r->skip_tokens;
	const int steps = r->res->steps - r->res->skipped;
	const float inv = r->text ? (tokens > 0 ? (float)(1.0 / tokens) : 0.0f)
	                  : steps > 0 ? 1.0f / (float)steps
	                              : 0.0f;

	for (size_t i = 0; i < r->P; i++)
		r->out[i] *= inv;
	cg_model_mask(r->m, r->out);
	zero_frozen(r->m, r->o->frozen, r->out);
	r->res->grad_norm = cg_clip_norm(r->out, r->P, r->o->clip);
}

/* delta: the steps taken on a copy of the optimizer's state (the state
 * file's, or zeros), their sum into out, the model unchanged. */
static int
delta_begin(struct run *r)
{
	struct cg_model *m = r->m;
	const int need_m = cg_optim_needs_m(r->o->opt.kind);
	const int need_v = cg_optim_needs_v(r->o->opt.kind);

	const size_t Pm = r->Pt; /* only the views that train */

	if (r->st) {
		/* Put there by cg_train_state_init. */
		r->tp = cg_state_put(r->st, "opt.t", CG_U64, 1);
		if (need_m)
			r->mm = cg_state_put(r->st, "opt.m", CG_F32, Pm);
		if (need_v)
			r->vv = cg_state_put(r->st, "opt.v", CG_F32, Pm);
	} else {
		r->own_moments = 1;
		if ((need_m && (r->mm = cg_alloc(Pm * sizeof(float))) == NULL) ||
		    (need_v && (r->vv = cg_alloc(Pm * sizeof(float))) == NULL))
			return -1;
		r->tp = &r->t_local;
	}
	if (r->tv && ((r->pc = cg_alloc(Pm * sizeof(float))) == NULL ||
	              (r->gc = cg_alloc(Pm * sizeof(float))) == NULL))
		return -1;
	if ((r->start = cg_alloc(r->P * sizeof(float))) == NULL ||
	    (r->groups = cg_alloc((size_t)m->ngroups * sizeof(*r->groups))) ==
	        NULL)
		return -1;
	memcpy(r->start, m->params, r->P * sizeof(float));
	/* A state keeps one step count: every group that steps steps on
	 * each inner step, so they share it. */
	memcpy(r->groups, m->groups, (size_t)m->ngroups * sizeof(*r->groups));
	for (int i = 0; i < m->ngroups; i++)
		r->groups[i].opt_t = *r->tp;
	return 0;
}

static void
delta_end(struct run *r)
{
	for (size_t i = 0; i < r->P; i++)
		r->out[i] = r->m->params[i] - r->start[i];
	memcpy(r->m->params, r->start, r->P * sizeof(float));
}

/* model: the steps taken on the model and its own optimizer state. */
static int
model_begin(struct run *r)
{
	struct cg_model *m = r->m;

	if (cg_model_ensure_opt(m, cg_optim_needs_m(r->o->opt.kind),
	                        cg_optim_needs_v(r->o->opt.kind)) != 0)
		return -1;
	r->mm = m->opt_m;
	r->vv = m->opt_v;
	r->groups = m->groups;
	return 0;
}

static const struct mode modes[] = {
    [CG_EMIT_GRAD] = {grad_begin, 0, grad_end},
    [CG_EMIT_DELTA] = {delta_begin, 1, delta_end},
    [CG_EMIT_MODEL] = {model_begin, 1, NULL},
};

/* The views that train and the groups over them (struct run's tv,
 * tg); 0, or -1 with a message. */
static int
frozen_begin(struct run *r)
{
	const struct cg_model *m = r->m;
	const uint8_t *fz = r->o->frozen;
	const int compact = r->o->emit == CG_EMIT_DELTA;
	size_t at = 0;

	if ((r->tv = cg_alloc((size_t)m->nviews * sizeof(*r->tv))) == NULL ||
	    (r->tg = cg_alloc((size_t)m->ngroups * sizeof(*r->tg))) == NULL)
		return -1;
	for (int i = 0; i < m->ngroups; i++) {
		const struct cg_group *g = &m->groups[i];
		struct cg_group *t = &r->tg[i];
		*t = *g;
		t->view0 = r->ntv;
		for (int v = g->view0; v < g->view0 + g->nviews; v++) {
			if (fz[v])
				continue;
			r->tv[r->ntv] = m->views[v];
			if (compact)
				r->tv[r->ntv].off = at;
			at += m->views[v].n;
			r->ntv++;
		}
		t->nviews = r->ntv - t->view0;
		/* no view of it trains: it takes no step */
		if (t->nviews == 0)
			t->frozen = 1;
	}
	r->Pt = at;
	return 0;
}

/* ------------------------------------------------------ loss scaling */

#define MAX_SCALE 16777216.0f /* 2^24 */

/* x is a power of two in [1, 2^24]. */
static int
scale_ok(double x)
{
	int e;

	return x >= 1 && x <= MAX_SCALE && frexp(x, &e) == 0.5;
}

/* The scale a call starts at: its state's, else o->loss_scale. */
static int
scale_begin(struct run *r)
{
	const struct cg_train_opts *o = r->o;

	if (o->dpsgd)
		return cg_seterr("DP-SGD: not with loss scaling (f16): its "
		                 "clipping takes the unscaled gradients");
	if (!scale_ok(o->loss_scale))
		return cg_seterr("loss scale %g: not a power of two in [1, "
		                 "2^24]",
		                 o->loss_scale);
	r->scale = (float)o->loss_scale;
	if (r->st == NULL)
		return 0;
	if ((r->st_scale = cg_state_put(r->st, "amp.scale", CG_F32, 1)) ==
	        NULL ||
	    (r->st_good = cg_state_put(r->st, "amp.good", CG_U64, 1)) == NULL)
		return -1;
	if (*r->st_scale == 0) /* new: the state had none */
		return 0;
	if (!scale_ok(*r->st_scale))
		return cg_seterr("the state's loss scale (amp.scale) %g: not "
		                 "a power of two in [1, 2^24]",
		                 (double)*r->st_scale);
	r->scale = *r->st_scale;
	memcpy(&r->good, r->st_good, sizeof(r->good));
	return 0;
}

/*
 * After micro-batch k's gradient was made at the scale: divide it out
 * (exact: a power of two) and check it.  Finite: the scale doubles after
 * o->scale_growth of those in a row; 0.  Not: the gradient is zeroed,
 * the scale halved, the skip counted and told; 1.  At scale 1 nothing
 * is left to back off: -1 with a message (the gradient itself is not
 * finite).
 */
static int
unscale(struct run *r, int k)
{
	const struct cg_train_opts *o = r->o;
	const float inv = 1.0f / r->scale;
	float *g = r->grad;
	int bad = 0;

	for (size_t i = 0; i < r->P; i++) {
		g[i] *= inv;
		bad |= !(fabsf(g[i]) <= FLT_MAX);
	}
	if (!bad) {
		if (o->scale_growth > 0 && ++r->good >= (uint64_t)o->scale_growth) {
			r->good = 0;
			if (r->scale < MAX_SCALE)
				r->scale *= 2;
		}
		return 0;
	}
	if (r->scale <= 1)
		return cg_seterr("step %d of %d: the gradient is not finite at "
		                 "loss scale 1: training diverged (a lower "
		                 "--lr, or --clip)",
		                 k + 1, o->steps);
	if (o->skip)
		o->skip(o->progress_ctx, k + 1, o->steps, r->scale);
	memset(g, 0, r->P * sizeof(float));
	r->scale /= 2;
	r->good = 0;
	r->res->skipped++;
	return 1;
}

/* ------------------------------------------------- the moving average */

/* Where the average lives and what it starts from (train.h's ema).  0,
 * or -1 with a message. */
static int
ema_begin(struct run *r)
{
	const struct cg_train_opts *o = r->o;
	void *have = NULL;

	if (o->ema == 0)
		return 0; /* a state's is refused by cg_train_state_init */
	if (o->emit != CG_EMIT_MODEL)
		return cg_seterr("a moving average of the parameters is kept "
		                 "by a call that emits the model");
	if (!(o->ema > 0 && o->ema < 1))
		return cg_seterr("moving average's decay %g: not in (0, 1)",
		                 o->ema);
	/* the state's, made by cg_train_state_init */
	if (r->st) {
		if (cg_state_get(r->st, "ema", CG_F32, r->P, &have) != 1)
			return cg_seterr("the state has no moving average");
		r->ema = have;
		return 0;
	}
	if ((r->ema = r->out) == NULL)
		return cg_seterr("a moving average needs an output array");
	memcpy(r->ema, r->m->params, r->P * sizeof(float));
	return 0;
}

/* The average's move after a step (train.h's ema), on the threads. */
static void
ema_step(struct run *r)
{
	const double n = (double)r->m->step;
	const double w = (1 + n) / (10 + n);
	const float k = 1.0f - (float)(w < r->o->ema ? w : r->o->ema);
	const float *p = r->m->params;
	float *a = r->ema;
	const long long P = (long long)r->P;

	PAR_FOR_SIMD(P)
	for (long long i = 0; i < P; i++)
		a[i] += k * (p[i] - a[i]);
}

/* What every mode needs before its own begin: the checks, the order of
 * the examples, the batch and gradient arrays, where the data stream
 * stands.  0, or -1 with a message. */
static int
run_begin(struct run *r)
{
	struct cg_model *m = r->m;
	const struct cg_train_opts *o = r->o;

	if (o->steps < 1 || o->batch < 1)
		return cg_seterr("steps and batch must be positive");
	/* W trains not: its gradient is the adapters' (model/lora.h) */
	for (int i = 0; m->lora && i < m->nviews; i++)
		if (!cg_lora_is_adapter(m, i) && (!o->frozen || !o->frozen[i]))
			return cg_seterr("tensor %s: a model with adapters "
			                 "trains them alone (cg_train_freeze)",
			                 m->views[i].name);
	if (r->s->n == 0)
		return cg_seterr("the shard holds no examples");
	if (m->arch->check_data(m, r->s) != 0)
		return -1;
	if (o->distill) {
		struct cg_model *t = o->distill->teacher;
		if (cg_model_check_teacher(m, t, r->s) != 0)
			return -1;
		/* Forward only: checkpointing keeps the block outputs and no
		 * more, at no cost (see cg_train_plan). */
		t->chunk = m->chunk;
		t->checkpoint = 1;
		/* a teacher with adapters runs merged */
		if (cg_lora_merge(t, 1) != 0)
			return -1;
	}
	if (o->qat != CG_F32 &&
	    (r->qat = cg_qat_new(m, o->qat, NULL, 0)) == NULL)
		return -1;
	if (o->dpsgd) {
		const struct cg_dpsgd *dp = o->dpsgd;
		if (m->arch->dp_batch == NULL)
			return cg_seterr("DP-SGD: per-example clipping is not "
			                 "done for %s models yet",
			                 m->arch->name);
		if (o->distill)
			return cg_seterr("DP-SGD: no distillation (the "
			                 "teacher's outputs are not clipped)");
		if (r->qat || m->lora)
			return cg_seterr("DP-SGD: not with %s yet (its "
			                 "per-example pass runs the f32 weights)",
			                 r->qat ? "--qat" : "adapters");
		if (!(dp->clip > 0) || !(dp->sigma >= 0) ||
		    !(dp->q > 0 && dp->q <= 1))
			return cg_seterr("DP-SGD: clip %g, sigma %g or rate %g "
			                 "out of range",
			                 dp->clip, dp->sigma, dp->q);
		if ((r->pex = cg_alloc(r->s->n * sizeof(*r->pex))) == NULL)
			return -1;
	}
	if (order_init(&r->ord, r->s->n, o->order, o->seed) != 0)
		return -1;
	if ((r->ex = cg_alloc((size_t)o->batch * sizeof(*r->ex))) == NULL ||
	    (r->grad = cg_alloc(r->P * sizeof(float))) == NULL)
		return -1;
	r->Pt = r->P;
	if (o->frozen && frozen_begin(r) != 0)
		return -1;
	r->cursor = start_cursor(m, o);
	if (r->st) {
		if (cg_train_state_init(r->st, m, o) != 0 ||
		    (r->st_cursor = cg_state_put(r->st, "cursor", CG_U64, 1)) ==
		        NULL)
			return -1;
		memcpy(&r->cursor, r->st_cursor, sizeof(r->cursor));
	}
	if (o->loss_scale > 0 && scale_begin(r) != 0)
		return -1;
	return ema_begin(r);
}

/*
 * DP-SGD's step k (struct cg_dpsgd): a Poisson sample of the shard, its
 * clipped sum in chunks of at most the batch, the noise, divided by the
 * expected batch, into grad (and, in grad mode, added to out); its mean
 * loss into *bm (n 0 for an empty sample).  The sample and the noise
 * draw from the secret seed and the step's index, each in a domain
 * that no stream of the model's seed uses, the model's noise from nseed
 * as in a plain step.  0, or -1 with a message.
 */
static int
run_dp_batch(struct run *r, uint64_t index, uint64_t nseed,
             struct cg_metrics *bm)
{
	struct cg_model *m = r->m;
	const struct cg_train_opts *o = r->o;
	const struct cg_dpsgd *dp = o->dpsgd;
	const uint64_t n = r->s->n;
	uint64_t taken = 0;
	struct cg_rng sr, zr;
	struct cg_metrics part;

	/* Domains of their own: no stream of --seed derives from
	 * "poisson" or "dp-noise", so that equal seeds share no draw (the
	 * model noise's is "noise", with the same index) */
	cg_rng_derive(&sr, dp->seed, 0x706f6973736f6eULL /* "poisson" */,
	              index);
	cg_rng_derive(&zr, dp->seed, 0x64702d6e6f697365ULL /* "dp-noise" */,
	              index);
	for (uint64_t i = 0; i < n; i++)
		/* q 1: everyone, without a draw that could miss */
		if (dp->q >= 1 || cg_rng_uniform(&sr) < dp->q)
			r->pex[taken++] = i;
	if (!r->grad_clear)
		memset(r->grad, 0, r->P * sizeof(float));
	r->grad_clear = 0;
	memset(bm, 0, sizeof(*bm));
	for (uint64_t at = 0; at < taken; at += (uint64_t)o->batch) {
		const int B = taken - at < (uint64_t)o->batch
		                  ? (int)(taken - at)
		                  : o->batch;

		if (m->arch->dp_batch(m, r->s, r->pex + at, B, nseed, dp->clip,
		                      r->grad, &part) != 0)
			return -1;
		add_metrics(bm, &part);
	}
	finish_metrics(bm);
	r->res->samples += taken;
	/* (sum + N(0, (sigma C)^2)) / (q n): Opacus' mean for Poisson
	 * batches, whose size is not fixed and so not private either. */
	const double std = dp->sigma * dp->clip,
	             inv = 1.0 / (dp->q * (double)n);
	for (size_t i = 0; i < r->P; i++)
		r->grad[i] =
		    (float)((r->grad[i] +
		             (std > 0 ? std * cg_rng_normal(&zr) : 0)) *
		            inv);
	if (o->emit == CG_EMIT_GRAD)
		for (size_t i = 0; i < r->P; i++)
			r->out[i] += r->grad[i];
	return 0;
}

/* Step k's batch: its loss into *bm and its gradient into grad (or, for
 * images in grad mode, added to out).  0, or -1 with a message. */
static int
run_batch(struct run *r, int k, uint64_t step0, struct cg_metrics *bm)
{
	struct cg_model *m = r->m;
	const struct cg_train_opts *o = r->o;
	const int B = o->batch;
	uint64_t noise = o->emit == CG_EMIT_MODEL
	                     ? m->step
	                     : step0 * (uint64_t)o->steps + (uint64_t)k;
	struct cg_rng nr;

	if (o->dpsgd) {
		cg_rng_derive(&nr, o->seed, 0x6e6f697365ULL, noise);
		if (run_dp_batch(r, noise, cg_rng_u64(&nr), bm) != 0)
			return -1;
		if (bm->n > 0 && !isfinite(bm->loss))
			return cg_seterr("step %d of %d: the loss is %s: "
			                 "training diverged (a lower --lr)",
			                 k + 1, o->steps,
			                 isnan(bm->loss) ? "NaN" : "infinite");
		add_metrics(&r->res->mean, bm);
		return 0;
	}

	for (int b = 0; b < B; b++)
		r->ex[b] = order_at(&r->ord, r->cursor + (uint64_t)b);
	r->cursor += (uint64_t)B;
	cg_rng_derive(&nr, o->seed, 0x6e6f697365ULL, noise);
	uint64_t nseed = cg_rng_u64(&nr);
	/* Text in grad mode: each micro-batch's per-token mean gradient is
	 * added in weighted by its tokens; scaled, every gradient is
	 * checked in grad before it counts. */
	const int scaled = o->loss_scale > 0;
	float *g = o->emit == CG_EMIT_GRAD && !r->text && !scaled ? r->out
	                                                          : r->grad;
	if (g == r->grad && !r->grad_clear)
		memset(r->grad, 0, r->P * sizeof(float));
	r->grad_clear = 0;
	/* adapters: the arch runs W + s B A, and dW' becomes dA and dB */
	if (cg_lora_merge(m, 0) != 0)
		return -1;
	/* QAT: the arch runs the quantized weights, and their gradient
	 * passes straight through to the masters put back after it */
	if (r->qat && cg_qat_apply(r->qat, m) != 0)
		return -1;
	if (scaled)
		cg_set_loss_scale(r->scale);
	int rc = o->distill ? m->arch->distill(m, o->distill, r->s, r->ex, B,
	                                       nseed, g, bm)
	                    : m->arch->batch(m, r->s, r->ex, B, nseed, g, bm);
	cg_set_loss_scale(1.0f);
	if (rc == 0)
		cg_lora_grad(m, g);
	cg_qat_restore(r->qat, m);
	cg_lora_unmerge(m);
	if (rc != 0)
		return -1;
	/* A diverged run ends here: a model, delta or gradient of NaNs would
	 * pass for a result and poison every reduction it went into. */
	if (!isfinite(bm->loss))
		return cg_seterr("step %d of %d: the loss is %s: training "
		                 "diverged (a lower --lr, or --clip)",
		                 k + 1, o->steps,
		                 isnan(bm->loss) ? "NaN" : "infinite");
	r->skip = 0;
	if (scaled && (r->skip = unscale(r, k)) < 0)
		return -1;
	if (r->text) {
		double before = r->tokens;
		add_text_metrics(&r->res->mean, bm, &r->tokens);
		if (r->skip)
			r->skip_tokens += r->tokens - before;
		else if (o->emit == CG_EMIT_GRAD) {
			const float w = (float)(r->tokens - before);
			for (size_t i = 0; i < r->P; i++)
				r->out[i] += w * r->grad[i];
		}
	} else {
		add_metrics(&r->res->mean, bm);
		if (scaled && !r->skip && o->emit == CG_EMIT_GRAD)
			for (size_t i = 0; i < r->P; i++)
				r->out[i] += r->grad[i];
	}
	return 0;
}

/* The step of the views that train (struct run's tv): on compact
 * copies of their parameters and gradient (delta), or in place (model);
 * grad is all zeros afterwards. */
static void
step_trained(struct run *r)
{
	struct cg_model *m = r->m;
	float *p = m->params, *g = r->grad;

	if (r->pc) {
		for (int i = 0, v = 0; i < r->ntv; i++, v++) {
			while (strcmp(m->views[v].name, r->tv[i].name) != 0)
				v++;
			memcpy(r->pc + r->tv[i].off, p + m->views[v].off,
			       r->tv[i].n * sizeof(float));
			memcpy(r->gc + r->tv[i].off, g + m->views[v].off,
			       r->tv[i].n * sizeof(float));
		}
		p = r->pc;
		g = r->gc;
	}
	for (int i = 0; i < m->ngroups; i++)
		r->tg[i].opt_t = r->groups[i].opt_t;
	cg_optim_step_groups(&r->o->opt, r->tg, m->ngroups, p, g, r->mm, r->vv,
	                     r->tv, 0);
	for (int i = 0; i < m->ngroups; i++)
		r->groups[i].opt_t = r->tg[i].opt_t;
	if (r->pc)
		for (int i = 0, v = 0; i < r->ntv; i++, v++) {
			while (strcmp(m->views[v].name, r->tv[i].name) != 0)
				v++;
			memcpy(m->params + m->views[v].off, r->pc + r->tv[i].off,
			       r->tv[i].n * sizeof(float));
		}
	memset(r->grad, 0, r->P * sizeof(float));
}

/* The optimizer's step on grad, in the modes that step. */
static void
run_step(struct run *r)
{
	struct cg_model *m = r->m;
	const struct cg_train_opts *o = r->o;

	/* Pruned weights get no gradient, and are set back to zero after
	 * the step (weight decay, or moments from elsewhere, would move
	 * them). */
	cg_model_mask(m, r->grad);
	if (m->ngroups > 1)
		cg_optim_mask_frozen(r->grad, r->groups, m->ngroups);
	zero_frozen(m, o->frozen, r->grad);
	if (o->clip > 0)
		cg_clip_norm(r->grad, r->P, o->clip);
	if (r->tv)
		step_trained(r);
	else
		/* Weight decay skips biases: one step per view. */
		cg_optim_step_groups(&o->opt, r->groups, m->ngroups, m->params,
		                     r->grad, r->mm, r->vv, m->views, 1);
	cg_model_mask(m, m->params);
	if (r->pc == NULL) { /* moments in the model's layout */
		cg_model_mask(m, r->mm);
		cg_model_mask(m, r->vv);
	}
	if (r->tp)
		*r->tp += 1;
	r->grad_clear = 1;
	if (o->emit == CG_EMIT_MODEL)
		m->step++;
}

static void
run_free(struct run *r)
{
	if (r->own_moments) {
		free(r->mm);
		free(r->vv);
	}
	if (r->groups != r->m->groups)
		free(r->groups);
	free(r->ord.perm);
	free(r->ex);
	free(r->pex);
	free(r->grad);
	free(r->start);
	free(r->tv);
	free(r->tg);
	free(r->pc);
	free(r->gc);
	cg_qat_free(r->qat);
}

int
cg_train_run(struct cg_model *m, const struct cg_shard *s,
	     const struct cg_train_opts *o, struct cg_state *st, float *out,
	     struct cg_train_result *res)
{
	struct run r = {.m = m, .s = s, .o = o, .st = st, .out = out,
	                .res = res, .P = m->nparams,
	                .text = s->kind == CG_PAYLOAD_TEXT};
	const struct mode *md = &modes[o->emit];
	const uint64_t step0 = m->step;
	int done = 0, rc = -1;

	memset(res, 0, sizeof(*res));
	if (run_begin(&r) != 0 || md->begin(&r) != 0)
		goto out;
	/* Moments kept from before the model was pruned start at zero
	 * where it prunes (in the model's layout; compact moments of the
	 * views that train are zeroed by the step's masked gradient). */
	if (r.pc == NULL) {
		cg_model_mask(m, r.mm);
		cg_model_mask(m, r.vv);
	}
	for (int k = 0; k < o->steps; k++) {
		struct cg_metrics bm;

		if (run_batch(&r, k, step0, &bm) != 0)
			goto out;
		if (md->steps && !r.skip) {
			run_step(&r);
			if (r.ema)
				ema_step(&r);
		} else if (md->steps) { /* skipped: no update, the step counts */
			r.grad_clear = 1; /* unscale zeroed it */
			if (o->emit == CG_EMIT_MODEL)
				m->step++;
		}
		if (o->page_out)
			cg_shard_page_out(s);
		/* a payload that fails its digest stops the call at once */
		if (cg_shard_verified(s, 0) < 0)
			goto out;
		/* The running mean so far, the figure of the summary. */
		if (o->progress)
			o->progress(o->progress_ctx, k + 1, o->steps,
			            res->mean.loss / (r.text ? r.tokens
			                                     : (double)res->mean.n));
		done = k + 1;
		if (o->deadline > 0 && done < o->steps && cg_now() >= o->deadline)
			break;
	}
	if (r.text)
		finish_text_metrics(&res->mean, r.tokens);
	else
		finish_metrics(&res->mean);
	res->steps = done;
	if (o->dpsgd == NULL) /* DP-SGD counts what its samples took */
		res->samples = (uint64_t)done * (uint64_t)o->batch;
	res->weight = r.text ? r.tokens : (double)res->samples;
	if (o->emit == CG_EMIT_GRAD) /* the gradient is of the rest */
		res->weight = r.text ? r.tokens - r.skip_tokens
		                     : (double)res->samples -
		                           (double)res->skipped * o->batch;
	if (md->end)
		md->end(&r);
	if (r.ema) {
		cg_model_mask(m, r.ema);
		if (out && r.ema != out) /* with a state, out may be NULL */
			memcpy(out, r.ema, r.P * sizeof(float));
	}
	if (r.st_cursor)
		memcpy(r.st_cursor, &r.cursor, sizeof(r.cursor));
	if (o->loss_scale > 0) {
		res->loss_scale = r.scale;
		if (r.st_scale) {
			*r.st_scale = r.scale;
			memcpy(r.st_good, &r.good, sizeof(r.good));
		}
	}
	rc = 0;
out:
	run_free(&r);
	return rc;
}

/* -------------------------------------------------------------- memory */

/*
 * What the process touches beyond the arrays counted below: the BLAS's
 * packing buffers, the threads' stacks, the writer's and compressor's
 * buffers.  Measured 3-5 MiB with OpenBLAS on one and two threads and
 * zstd output; the reserve is 8 MiB and 2 MiB more per thread.  bf16
 * products round a slice of their operands into buffers of each thread
 * (nn/gemm.c), 1 KiB per row and column of the product: 4 MiB more per
 * thread covers 4096 of them (a cgpt's batch of 16 x 128 positions and
 * an output 2048 wide).
 */
static uint64_t
plan_reserve(void)
{
	int threads = 1;
	uint64_t per = (uint64_t)2 << 20;
#ifdef _OPENMP
	threads = omp_get_max_threads();
#endif
	if (cg_get_precision() != CG_PREC_F32) /* bf16 or f16 */
		per += (uint64_t)4 << 20;
	return ((uint64_t)8 << 20) + threads * per;
}
/* Chunks smaller than this are slower than checkpointing. */
#define PLAN_MIN_CHUNK 4

/*
 * The workspace of batches of B in chunks of chunk: the model's, and a
 * teacher's where o has one (it runs in the same chunks, checkpointed).
 * 0 with a message if impossible.
 */
static size_t
plan_ws(struct cg_model *m, const struct cg_train_opts *o, int B, int chunk,
        int ckpt)
{
	size_t n = m->arch->ws_bytes(m, B, chunk, ckpt), t;
	struct cg_model *tm = o->distill ? o->distill->teacher : NULL;

	if (n == 0 || tm == NULL || tm->arch->teacher_bytes == NULL)
		return n;
	if ((t = tm->arch->teacher_bytes(tm, B, chunk)) == 0 ||
	    t > SIZE_MAX - n)
		return 0;
	return n + t;
}

/* The largest chunk in [1, B] whose workspace fits avail, or 0. */
static int
largest_chunk(struct cg_model *m, const struct cg_train_opts *o, int B,
              int ckpt, uint64_t avail)
{
	int lo = 0, hi = B;

	while (lo < hi) {
		int mid = lo + (hi - lo + 1) / 2;
		size_t n = plan_ws(m, o, B, mid, ckpt);
		if (n != 0 && n <= avail)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

int
cg_train_plan(struct cg_model *m, const struct cg_train_opts *o,
	      const struct cg_state *st, uint64_t budget,
	      uint64_t resident, int checkpoint, struct cg_memplan *p)
{
	const uint64_t P = (uint64_t)m->nparams * sizeof(float);
	const int B = o->batch;
	int need_m = cg_optim_needs_m(o->opt.kind);
	int need_v = cg_optim_needs_v(o->opt.kind);
	uint64_t fixed = resident + plan_reserve() + P; /* + the gradient */

	memset(p, 0, sizeof(*p));
	int can_ckpt = m->arch->ws_bytes && m->arch->checkpoints;

	if (checkpoint && !can_ckpt)
		return cg_seterr("%s has no activation checkpointing",
				 m->arch->name);
	/* an arch that checkpoints some of its forms only (the
	 * convolutional ones) says why not this one */
	if (can_ckpt && m->arch->can_checkpoint &&
	    !m->arch->can_checkpoint(m)) {
		if (checkpoint)
			return -1;
		can_ckpt = 0;
	}
	if (o->emit == CG_EMIT_MODEL) {
		fixed += need_m && !m->opt_m ? P : 0;
		fixed += need_v && !m->opt_v ? P : 0;
		/* the moving average: out, and the state's when it has
		 * none yet */
		if (o->ema > 0)
			fixed += P + (st && !state_holds(st, "ema", m->nparams)
			                  ? P
			                  : 0);
	} else {
		fixed += P; /* out */
		if (o->emit == CG_EMIT_DELTA) {
			fixed += P; /* the starting weights */
			fixed += need_m && !state_holds(st, "opt.m", m->nparams)
				     ? P
				     : 0;
			fixed += need_v && !state_holds(st, "opt.v", m->nparams)
				     ? P
				     : 0;
		}
	}
	p->floor = fixed;
	if (m->arch->ws_bytes == NULL) {
		/* Nothing to choose: the arch's own batch memory is small. */
		p->estimate = fixed;
		if (budget && fixed > budget)
			goto none;
		return 0;
	}
	size_t least = plan_ws(m, o, B, 1, can_ckpt);
	if (least == 0)
		return -1;
	p->floor = fixed + least;
	if (budget == 0) {
		p->checkpoint = checkpoint != 0;
		p->estimate = fixed + plan_ws(m, o, B, 0, p->checkpoint);
	} else {
		if (p->floor > budget)
			goto none;
		uint64_t avail = budget - fixed;
		int c0 = checkpoint ? 0 : largest_chunk(m, o, B, 0, avail);
		int c1 = can_ckpt ? largest_chunk(m, o, B, 1, avail) : 0;
		int small = B < PLAN_MIN_CHUNK ? B : PLAN_MIN_CHUNK;
		if (c0 >= small || c0 >= c1) {
			p->chunk = c0;
			p->checkpoint = 0;
		} else {
			p->chunk = c1;
			p->checkpoint = 1;
		}
		/* The chunks are equal: as many as c needs, evened out;
		 * the whole batch is no chunking at all. */
		int nchunks = (B + p->chunk - 1) / p->chunk;
		p->chunk = (B + nchunks - 1) / nchunks;
		if (p->chunk == B)
			p->chunk = 0;
		p->estimate = fixed + plan_ws(m, o, B, p->chunk,
		                              p->checkpoint);
	}
	m->chunk = p->chunk;
	m->checkpoint = p->checkpoint;
	return 0;
none:
	return cg_seterr("a step needs at least %.0f MiB, more than the "
			 "budget of %.0f MiB",
			 p->floor / 1048576.0, budget / 1048576.0);
}

/* ------------------------------------------------------------- output */

struct cg_file *
cg_update_file(const struct cg_model *base, const char *kind, const float *buf,
	       const struct cg_train_result *res, const uint8_t *frozen)
{
	return cg_update_new_part(
	    base, strcmp(kind, "grad") == 0 ? CG_UPDATE_GRAD : CG_UPDATE_DELTA,
	    buf, (double)res->samples, res->weight, res->mean.loss, frozen);
}

int
cg_eval_shard(struct cg_model *m, const struct cg_shard *s, int B,
	      uint64_t seed, struct cg_metrics *out,
	      void (*progress)(void *ctx, int done, int total, double loss),
	      void *progress_ctx)
{
	uint64_t *ex;
	struct cg_rng r;
	const int text = s->kind == CG_PAYLOAD_TEXT;
	double tokens = 0;

	memset(out, 0, sizeof(*out));
	if (m->arch->check_data(m, s) != 0)
		return -1;
	if ((ex = cg_alloc((size_t)B * sizeof(*ex))) == NULL)
		return -1;
	if (cg_lora_merge(m, 0) != 0) {
		free(ex);
		return -1;
	}
	cg_rng_derive(&r, seed, 0x6576616cULL, 0);
	uint64_t nseed = cg_rng_u64(&r);
	for (uint64_t i = 0; i < s->n; i += (uint64_t)B) {
		int nb = s->n - i < (uint64_t)B ? (int)(s->n - i) : B;
		struct cg_metrics bm;
		for (int b = 0; b < nb; b++)
			ex[b] = i + (uint64_t)b;
		if (m->arch->batch(m, s, ex, nb, nseed, NULL, &bm) != 0) {
			cg_lora_unmerge(m);
			free(ex);
			return -1;
		}
		if (text)
			add_text_metrics(out, &bm, &tokens);
		else
			add_metrics(out, &bm);
		if (progress) {
			/* counted in an int: scaled down past INT_MAX */
			uint64_t tot = s->n > INT_MAX ? INT_MAX : s->n;
			progress(progress_ctx,
				 (int)((i + (uint64_t)nb) * tot / s->n),
				 (int)tot, NAN);
		}
	}
	cg_lora_unmerge(m);
	if (text)
		finish_text_metrics(out, tokens);
	else
		finish_metrics(out);
	free(ex);
	return 0;
}

/* ------------------------------------------------------ pipeline stages */

/* What one stage holds through its call (cg_train_stage). */
struct stage_run {
	int T, C, run, nmb; /* rows per micro-batch, micro-batches */
	int *tokens, *targets;
	float *weight;      /* [B, T] */
	float *xs;          /* [B, T, C]: every micro-batch's input */
	float *y, *dy, *dx; /* [run, T, C] */
	float *grad;        /* [nparams], written in the stage's range */
	void *ws;
	enum cg_dtype wire; /* what activations cross as (so->wire) */
	int one_f_one_b;             /* the schedule: 1F1B, else GPipe */
	int slots;                   /* micro-batches' inputs xs holds */
	int keep; /* the sets of activations ws keeps (slots), or 0 */
	double wait;                 /* seconds waiting for a neighbour */
	struct cg_sender *up, *down; /* to the stages above and below */
	void *words; /* [run, T, C] in the wire's dtype, unless f32 */
};

static void
stage_run_free(const struct cg_model *m, struct stage_run *r)
{
	free(r->tokens);
	free(r->targets);
	free(r->weight);
	free(r->xs);
	free(r->y);
	free(r->dy);
	free(r->dx);
	free(r->grad);
	free(r->words);
	cg_sender_stop(r->up);
	cg_sender_stop(r->down);
	if (r->ws)
		m->arch->stages->stage_free(r->ws);
}

/* The wires in the order of their codes in the head frame (0 f32, 1
 * bf16, 2 q8_0). */
static const enum cg_dtype wires[] = {CG_F32, CG_BF16, CG_Q8_0};
#define NWIRES ((int)(sizeof(wires) / sizeof(wires[0])))

static int
wire_code(enum cg_dtype wire)
{
	for (int i = 0; i < NWIRES; i++)
		if (wires[i] == wire)
			return i;
	return -1;
}

/* Whether activations of stage st can cross as wire: f32, bf16, or
 * q8_0 where a sequence's T x C values are whole blocks.  0, or -1 with
 * a message. */
static int
wire_check(const struct cg_stage *st, enum cg_dtype wire)
{
	uint64_t nb;

	if (wire_code(wire) < 0)
		return cg_seterr("the activations cross as f32, bf16 or q8_0, "
		                 "not %s",
		                 cg_dtype_name(wire));
	if (cg_dtype_bytes(wire, (uint64_t)st->T * st->C, &nb) != 0)
		return cg_seterr("--wire %s: a sequence's %d x %d activations "
		                 "are not whole blocks of %u",
		                 cg_dtype_name(wire), st->T, st->C,
		                 cg_codec(wire)->block);
	return 0;
}

/* The handshake: stage 0 says the call's shape, the others hear it and
 * pass it on; in a grad or delta call, the worker after it.  0, or -1
 * with a message. */
static int
stage_head(const struct cg_model *m, const struct cg_stage *st,
           struct cg_train_opts *o, struct cg_stage_opts *so,
           const struct cg_pipe *p)
{
	static const char *const what[] = {"a grad", "a delta", "its model"};
	uint64_t h[10] = {1,
	                 (uint64_t)st->count,
	                 (uint64_t)o->steps,
	                 (uint64_t)o->batch,
	                 (uint64_t)so->micro,
	                 m->step,
	                 (uint64_t)wire_code(so->wire),
	                 (uint64_t)(so->one_f_one_b != 0),
	                 (uint64_t)o->emit,
	                 (uint64_t)st->b};

	if (st->index > 0) {
		if (cg_pipe_hear(p->up_in, "head", h, 10) != 0)
			return -1;
		if (h[0] != (uint64_t)st->index || h[1] != (uint64_t)st->count)
			return cg_seterr(
			    "the previous stage takes this one for "
			    "stage %llu of %llu, not %d of %d",
			    (unsigned long long)h[0] + 1,
			    (unsigned long long)h[1], st->index + 1, st->count);
		if (h[5] != m->step)
			return cg_seterr("the previous stage is at step %llu, "
			                 "this one at %llu",
			                 (unsigned long long)h[5],
			                 (unsigned long long)m->step);
		if (h[2] < 1 || h[2] > 1 << 30 || h[3] < 1 || h[3] > 1 << 20 ||
		    h[4] < 1 || h[4] > h[3] || h[6] >= NWIRES || h[7] > 1 ||
		    h[8] > CG_EMIT_MODEL)
			return cg_seterr("the previous stage asks for %llu "
			                 "steps of %llu in %llu micro-batches",
			                 (unsigned long long)h[2],
			                 (unsigned long long)h[3],
			                 (unsigned long long)h[4]);
		if (h[8] != (uint64_t)o->emit)
			return cg_seterr(
			    "the previous stage emits %s, this one "
			    "%s (--emit)",
			    what[h[8]], what[o->emit]);
		/* stages cut from different splits would skip or repeat
		 * layers */
		if (h[9] != (uint64_t)st->a)
			return cg_seterr("the previous stage ends at layer %llu, "
			                 "this one starts at %d: stages of "
			                 "different cuts",
			                 (unsigned long long)h[9], st->a);
		h[9] = (uint64_t)st->b;
		o->steps = (int)h[2];
		o->batch = (int)h[3];
		so->micro = (int)h[4];
		so->wire = wires[h[6]];
		so->one_f_one_b = (int)h[7];
		h[0]++;
		if (o->emit != CG_EMIT_MODEL &&
		    cg_pipe_hear(p->up_in, "worker", so->worker, 5) != 0)
			return -1;
	}
	if (st->index < st->count - 1 &&
	    (cg_pipe_say(p->down_out, "head", h, 10) != 0 ||
	     (o->emit != CG_EMIT_MODEL &&
	      cg_pipe_say(p->down_out, "worker", so->worker, 5) != 0)))
		return -1;
	return 0;
}

/* Activations or their gradient x [shape] as frame name to the sender
 * to: f32, or encoded in the wire's dtype through r->words.  0 or -1. */
static int
send_act(struct stage_run *r, struct cg_sender *to, const char *name,
         const uint64_t *shape, const float *x)
{
	size_t n = (size_t)(shape[0] * shape[1] * shape[2]);

	if (r->wire == CG_F32)
		return cg_sender_put(to, name, CG_F32, 3, shape, x);
	if (cg_codec(r->wire)->encode(r->words, x, n) != 0) {
		cg_errprefix(name);
		return -1;
	}
	return cg_sender_put(to, name, r->wire, 3, shape, r->words);
}

/* The frame send_act sent, from fd into x [shape] as f32.  0 or -1. */
static int
recv_act(struct stage_run *r, int fd, const char *name, const uint64_t *shape,
         float *x)
{
	size_t n = (size_t)(shape[0] * shape[1] * shape[2]);
	const struct cg_codec *c = cg_codec(r->wire);

	if (r->wire == CG_F32)
		return cg_frame_expect(fd, name, CG_F32, 3, shape, x);
	if (cg_frame_expect(fd, name, r->wire, 3, shape, r->words) != 0)
		return -1;
	/* a block whose scale is no number, refused as a reader of a
	 * file refuses it */
	if (c->check && c->check(r->words, n) != 0) {
		cg_errprefix(name);
		return -1;
	}
	c->decode(x, r->words, n);
	return 0;
}

/* Micro-batch j's rows: the first b0, nb of them. */
static void
mb_rows(const struct stage_run *r, int B, int j, int *b0, int *nb)
{
	*b0 = j * r->run;
	*nb = B - *b0 < r->run ? B - *b0 : r->run;
}

/* Micro-batch j forward: its input from the stage above (all but the
 * first), its output down (all but the last; the last only keeps its
 * input).  0 or -1. */
static int
stage_fwd(const struct cg_model *m, const struct cg_stage *st,
          struct stage_run *r, int B, const struct cg_pipe *p, int j)
{
	const struct cg_stage_ops *ops = m->arch->stages;
	int b0, nb;

	mb_rows(r, B, j, &b0, &nb);
	size_t rt = (size_t)b0 * r->T;
	float *x = r->xs ? r->xs + (size_t)(j % r->slots) * r->run * r->T * r->C
	                 : NULL;
	uint64_t sa[3] = {(uint64_t)nb, (uint64_t)r->T, (uint64_t)r->C};
	double t0 = cg_now();
	if (st->index > 0 && (recv_act(r, p->up_in, "x", sa, x) != 0 ||
	                      cg_frame_expect(p->up_in, "targets", CG_U32, 2,
	                                      sa, r->targets + rt) != 0 ||
	                      cg_frame_expect(p->up_in, "weight", CG_F32, 2, sa,
	                                      r->weight + rt) != 0))
		return -1;
	r->wait += cg_now() - t0;
	if (st->index == st->count - 1)
		return 0;
	if (ops->forward(m, r->ws, r->keep ? j % r->slots : 0,
	                 r->tokens ? r->tokens + rt : NULL, x, nb, r->y) != 0 ||
	    send_act(r, r->down, "x", sa, r->y) != 0 ||
	    cg_sender_put(r->down, "targets", CG_U32, 2, sa, r->targets + rt) !=
	        0 ||
	    cg_sender_put(r->down, "weight", CG_F32, 2, sa, r->weight + rt) !=
	        0)
		return -1;
	return 0;
}

/* Micro-batch j backward: its output's gradient from below (all but the
 * last), its input's gradient up (all but the first); *loss += its
 * loss, which comes up from the last stage.  0 or -1. */
static int
stage_bwd(const struct cg_model *m, const struct cg_stage *st,
          struct stage_run *r, int B, const struct cg_pipe *p, int j,
          double *loss)
{
	const struct cg_stage_ops *ops = m->arch->stages;
	const int last = st->index == st->count - 1;
	int b0, nb;

	mb_rows(r, B, j, &b0, &nb);
	size_t rt = (size_t)b0 * r->T;
	float *x = r->xs ? r->xs + (size_t)(j % r->slots) * r->run * r->T * r->C
	                 : NULL;
	uint64_t sa[3] = {(uint64_t)nb, (uint64_t)r->T, (uint64_t)r->C};
	uint64_t bits;
	double part, t0 = cg_now();
	if (!last && (recv_act(r, p->down_in, "dx", sa, r->dy) != 0 ||
	              cg_pipe_hear(p->down_in, "loss", &bits, 1) != 0))
		return -1;
	r->wait += cg_now() - t0;
	if (ops->backward(m, r->ws, r->keep ? j % r->slots : 0,
	                  r->tokens ? r->tokens + rt : NULL, x, r->targets + rt,
	                  r->weight + rt, r->dy, nb, r->grad, r->dx,
	                  &part) != 0)
		return -1;
	if (!last)
		memcpy(&part, &bits, sizeof(part));
	else
		memcpy(&bits, &part, sizeof(bits));
	*loss += part;
	if (st->index > 0 && (send_act(r, r->up, "dx", sa, r->dx) != 0 ||
	                      cg_sender_put(r->up, "loss", CG_U64, 1,
	                                    (uint64_t[1]){1}, &bits) != 0))
		return -1;
	return 0;
}

/*
 * One step's micro-batches through the stage, in the schedule's order,
 * *loss their losses' sum in the order of the micro-batches (the
 * backward passes' order under both schedules).  GPipe: every one
 * forward, then every one backward.  1F1B: N - 1 - index forward (the
 * warm-up), then one forward and one backward in turn, then the
 * backward passes left; a stage then holds the inputs of at most
 * N - index micro-batches.  The last stage's forward pass is its
 * backward call's: under either schedule it takes each micro-batch as
 * it comes and sends its gradient up at once (under GPipe it would
 * otherwise sit idle until the last one had come).
 */
static int
stage_step(const struct cg_model *m, const struct cg_stage *st,
           struct stage_run *r, int B, const struct cg_pipe *p, double *loss)
{
	int w = r->one_f_one_b || st->index == st->count - 1
	            ? st->count - 1 - st->index
	            : r->nmb;

	if (w > r->nmb)
		w = r->nmb;
	*loss = 0;
	for (int j = 0; j < w; j++)
		if (stage_fwd(m, st, r, B, p, j) != 0)
			return -1;
	for (int i = 0; i < r->nmb - w; i++)
		if (stage_fwd(m, st, r, B, p, w + i) != 0 ||
		    stage_bwd(m, st, r, B, p, i, loss) != 0)
			return -1;
	for (int i = r->nmb - w; i < r->nmb; i++)
		if (stage_bwd(m, st, r, B, p, i, loss) != 0)
			return -1;
	return 0;
}

/* A zeroed array of n floats whose pages cost memory once written. */
static float *
lazy_floats(size_t n)
{
	float *p = calloc(n ? n : 1, sizeof(float));

	if (p == NULL)
		cg_seterr("out of memory");
	return p;
}

/* The steps of a stage's call that emits a grad or a delta: its views
 * stepped on moments of its own (zeros, from step 0: delta), or their
 * gradients summed by the tokens of each step (grad), into out; NULL
 * in a model call. */
struct stage_emit {
	float *out;      /* [nparams], the stage's range written */
	float *mm, *vv;  /* delta: the inner moments [nparams] */
	float *start;    /* delta: the range's parameters before [hi - lo] */
	uint64_t t;      /* delta: the inner steps taken */
	uint64_t noise0; /* the model noise's first index */
};

/*
 * Stage st's step k done, its gradient in grad (of weight w, the step's
 * scored tokens): stepped as the call's emit asks, the stage's range of
 * grad zeroed after.
 */
static void
stage_update(struct cg_model *m, const struct cg_stage *st,
             const struct cg_train_opts *o, struct stage_emit *e, float *grad,
             float w)
{
	const struct cg_view *v = m->views + st->v0;
	const int nv = st->v1 - st->v0;

	if (o->emit == CG_EMIT_GRAD) {
		/* as cg_train_run's text batches: weighted by their tokens */
		for (size_t i = st->lo; i < st->hi; i++) {
			e->out[i] += w * grad[i];
			grad[i] = 0;
		}
	} else if (o->emit == CG_EMIT_DELTA) {
		e->t++;
		cg_optim_step_views(&o->opt, e->t, m->params, grad, e->mm,
		                    e->vv, v, nv, 1);
	} else {
		m->groups[0].opt_t++;
		cg_optim_step_views(&o->opt, m->groups[0].opt_t, m->params,
		                    grad, m->opt_m, m->opt_v, v, nv, 1);
		m->step++;
	}
}

/* The call's output, once every step is done: grad, the mean by the
 * tokens; delta, the new parameters less the old, which are put back. */
static void
stage_finish(struct cg_model *m, const struct cg_stage *st,
             const struct cg_train_opts *o, struct stage_emit *e, double tokens)
{
	const float inv = tokens > 0 ? (float)(1.0 / tokens) : 0.0f;

	if (o->emit == CG_EMIT_GRAD)
		for (size_t i = st->lo; i < st->hi; i++)
			e->out[i] *= inv;
	if (o->emit == CG_EMIT_DELTA) {
		float *p = m->params + st->lo;
		for (size_t i = 0; i < st->hi - st->lo; i++) {
			e->out[st->lo + i] = p[i] - e->start[i];
			p[i] = e->start[i];
		}
	}
}

int
cg_train_stage_memory(const struct cg_model *m, const struct cg_stage *st,
                      const struct cg_train_opts *o, struct cg_stage_opts *so)
{
	const int last = st->index == st->count - 1;
	int keep = !last && !so->recompute;
	uint64_t need = 0;

	if (wire_check(st, so->wire) != 0)
		return -1;
	if (cg_plan_stage_bytes(m, st, o->batch, so->micro, so->one_f_one_b,
	                        so->wire, keep, &need) != 0)
		return -1;
	if (so->max_memory && need > so->max_memory && keep) {
		keep = 0;
		if (cg_plan_stage_bytes(m, st, o->batch, so->micro,
		                        so->one_f_one_b, so->wire, 0,
		                        &need) != 0)
			return -1;
	}
	so->kept = last || keep; /* no forward pass run again */
	so->mem = need;
	if (so->max_memory && need > so->max_memory)
		return cg_seterr("stage %d of %d: --max-memory %llu: the stage "
		                 "takes %llu bytes at the least (fewer layers, "
		                 "or more micro-batches)",
		                 st->index + 1, st->count,
		                 (unsigned long long)so->max_memory,
		                 (unsigned long long)need);
	return 0;
}

int
cg_train_stage(struct cg_model *m, const struct cg_stage *st,
               const struct cg_shard *s, struct cg_train_opts *o,
               struct cg_stage_opts *so, const struct cg_pipe *p, float *out,
               struct cg_train_result *res)
{
	const struct cg_stage_ops *ops = m->arch->stages;
	struct stage_run r = {.T = st->T, .C = st->C};
	struct stage_emit e = {.out = out, .noise0 = m->step};
	struct order ord = {0};
	double tokens = 0;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if (ops == NULL)
		return cg_seterr("a %s model has no stages", m->arch->name);
	if (o->emit != CG_EMIT_MODEL && out == NULL)
		return cg_seterr("a stage's grad or delta needs its buffer");
	if (o->clip > 0 || o->frozen || o->distill || o->dpsgd ||
	    o->qat != CG_F32 || o->deadline > 0)
		return cg_seterr("a stage's call: no clip, freeze, teacher, "
		                 "DP-SGD, QAT or deadline");
	/* the wire heard checked with the memory, below */
	if (wire_check(st, so->wire) != 0 || stage_head(m, st, o, so, p) != 0)
		return -1;
	/* as cg_train_run: a grad or delta call's K batches are one model
	 * step's, their noise counted from step * K */
	if (o->emit != CG_EMIT_MODEL)
		e.noise0 = m->step * (uint64_t)o->steps;
	r.wire = so->wire;
	r.one_f_one_b = so->one_f_one_b;
	const int B = o->batch;
	/* the chunks of cgpt's batch under m->chunk = ceil(B / M) */
	int most = (B + so->micro - 1) / so->micro;
	int nch = (B + most - 1) / most;
	r.run = (B + nch - 1) / nch;
	r.nmb = (B + r.run - 1) / r.run;
	/* GPipe holds every micro-batch's input, 1F1B those in flight, the
	 * last stage one (stage_step) */
	r.slots = st->index == st->count - 1 ? 1
	          : r.one_f_one_b && st->count - st->index < r.nmb
	              ? st->count - st->index
	              : r.nmb;
	if (cg_train_stage_memory(m, st, o, so) != 0)
		return -1;
	r.keep = so->kept && st->index < st->count - 1 ? r.slots : 0;
	size_t bt = (size_t)B * r.T, rtc = (size_t)r.run * r.T * r.C;
	uint64_t wb;
	if ((r.targets = cg_alloc(bt * sizeof(int))) == NULL ||
	    (r.weight = cg_alloc(bt * sizeof(float))) == NULL ||
	    (r.y = cg_alloc(rtc * sizeof(float))) == NULL ||
	    (r.dy = cg_alloc(rtc * sizeof(float))) == NULL ||
	    (r.dx = cg_alloc(rtc * sizeof(float))) == NULL ||
	    (so->wire != CG_F32 &&
	     (cg_dtype_bytes(so->wire, rtc, &wb) != 0 ||
	      (r.words = cg_alloc((size_t)wb)) == NULL)) ||
	    (r.grad = lazy_floats(m->nparams)) == NULL ||
	    (r.ws = ops->stage_new(m, st->a, st->b, r.run, r.keep)) == NULL ||
	    (st->index > 0 && (r.up = cg_sender_start(p->up_out)) == NULL) ||
	    (st->index < st->count - 1 &&
	     (r.down = cg_sender_start(p->down_out)) == NULL))
		goto out;
	/* a micro-batch's frames whole in each pipe's buffer: the sender
	 * writes them without waiting for the reader, the reader takes
	 * them in one go */
	size_t mbf = rtc * 4 + (size_t)r.run * r.T * 8 + 4096;
	cg_pipe_widen(p->up_in, mbf);
	cg_pipe_widen(p->up_out, mbf);
	cg_pipe_widen(p->down_in, mbf);
	cg_pipe_widen(p->down_out, mbf);
	if (st->index == 0) {
		if (s == NULL || s->n == 0)
			goto nodata;
		if (m->arch->check_data(m, s) != 0 ||
		    order_init(&ord, s->n, o->order, o->seed) != 0 ||
		    (r.tokens = cg_alloc(bt * sizeof(int))) == NULL)
			goto out;
	} else if ((r.xs = cg_alloc((size_t)r.slots * rtc * sizeof(float))) ==
	           NULL)
		goto out;
	if (o->emit == CG_EMIT_MODEL &&
	    ((cg_optim_needs_m(o->opt.kind) && m->opt_m == NULL &&
	      (m->opt_m = lazy_floats(m->nparams)) == NULL) ||
	     (cg_optim_needs_v(o->opt.kind) && m->opt_v == NULL &&
	      (m->opt_v = lazy_floats(m->nparams)) == NULL)))
		goto out;
	if (o->emit == CG_EMIT_DELTA) {
		if ((cg_optim_needs_m(o->opt.kind) &&
		     (e.mm = lazy_floats(m->nparams)) == NULL) ||
		    (cg_optim_needs_v(o->opt.kind) &&
		     (e.vv = lazy_floats(m->nparams)) == NULL) ||
		    (e.start = cg_alloc((st->hi - st->lo) * sizeof(float))) ==
		        NULL)
			goto out;
		memcpy(e.start, m->params + st->lo,
		       (st->hi - st->lo) * sizeof(float));
	}
	uint64_t cursor = start_cursor(m, o);
	uint64_t *ex = NULL;
	if (st->index == 0 && (ex = cg_alloc((size_t)B * sizeof(*ex))) == NULL)
		goto out;
	so->step_s = so->wait_s = so->first_step_s = so->first_wait_s = 0;
	for (int k = 0; k < o->steps; k++) {
		double loss, t0 = cg_now();
		uint64_t wbits = 0;
		double w = 0;
		r.wait = 0;
		if (st->index == 0) {
			struct cg_rng nr;
			uint64_t count;
			for (int b = 0; b < B; b++)
				ex[b] = order_at(&ord, cursor + (uint64_t)b);
			cursor += (uint64_t)B;
			cg_rng_derive(&nr, o->seed, 0x6e6f697365ULL,
			              o->emit == CG_EMIT_MODEL
			                  ? m->step
			                  : e.noise0 + (uint64_t)k);
			if (ops->rows(m, s, ex, B, cg_rng_u64(&nr), r.tokens,
			              r.targets, r.weight, &count) != 0)
				goto fail_ex;
			res->mean.part[1] = (double)count; /* below */
			/* the step's weight as add_text_metrics rounds it */
			w = round((double)count / B * (double)B);
			memcpy(&wbits, &w, sizeof(w));
		} else if (o->emit != CG_EMIT_MODEL) {
			double t1 = cg_now();
			if (cg_frame_expect(p->up_in, "tokens", CG_U64, 1,
			                    (uint64_t[1]){1}, &wbits) != 0)
				goto fail_ex;
			r.wait += cg_now() - t1;
			memcpy(&w, &wbits, sizeof(w));
			if (!(w >= 0 && w <= (double)B * r.T)) {
				cg_seterr("the previous stage says a step of "
				          "%g tokens",
				          w);
				goto fail_ex;
			}
		}
		if (o->emit != CG_EMIT_MODEL && st->index < st->count - 1 &&
		    cg_sender_put(r.down, "tokens", CG_U64, 1, (uint64_t[1]){1},
		                  &wbits) != 0)
			goto fail_ex;
		if (stage_step(m, st, &r, B, p, &loss) != 0)
			goto fail_ex;
		if (st->index == 0) {
			struct cg_metrics bm = {.loss = loss,
			                        .n = (uint64_t)B,
			                        .bits_per = loss / M_LN2};
			bm.part[0] = res->mean.part[1] / B;
			res->mean.part[1] = 0;
			if (!isfinite(loss)) {
				cg_seterr("step %d of %d: the loss is not "
				          "finite: training diverged (a lower "
				          "--lr)",
				          k + 1, o->steps);
				goto fail_ex;
			}
			add_text_metrics(&res->mean, &bm, &tokens);
		} else
			tokens += w;
		stage_update(m, st, o, &e, r.grad, (float)w);
		double dt = cg_now() - t0;
		so->step_s += dt;
		so->wait_s += r.wait;
		if (k == 0) {
			so->first_step_s = dt;
			so->first_wait_s = r.wait;
		}
		if (o->progress)
			o->progress(o->progress_ctx, k + 1, o->steps,
			            st->index == 0 ? res->mean.loss / tokens
			                           : NAN);
	}
	if (o->emit != CG_EMIT_MODEL)
		stage_finish(m, st, o, &e, tokens);
	finish_text_metrics(&res->mean, tokens);
	res->steps = o->steps;
	res->samples = (uint64_t)o->steps * (uint64_t)B;
	res->weight = tokens;
	/* every frame written before the end's are said in line */
	if (cg_sender_stop(r.up) != 0) {
		r.up = NULL;
		goto fail_ex;
	}
	r.up = NULL;
	if (cg_sender_stop(r.down) != 0) {
		r.down = NULL;
		goto fail_ex;
	}
	r.down = NULL;
	rc = 0;
fail_ex:
	free(ex);
	goto out;
nodata:
	cg_seterr("the first stage reads the data: give it a shard that "
	          "holds examples");
out:
	free(ord.perm);
	free(e.mm);
	free(e.vv);
	free(e.start);
	stage_run_free(m, &r);
	return rc;
}
