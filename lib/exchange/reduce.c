/*
 * exchange/reduce.c - combining gradients and deltas: the registry of
 * operations and the reducer that runs them, streaming or slice by slice.
 *
 * Each operation is one row in a file of its own under exchange/op/ and
 * one X() in the list below; nothing here names one or asks which a row
 * is: the row says what differs (exchange/reduce.h).
 *
 * A weighted mean uses each input's weight (the examples, or for text the
 * scored tokens: a text model's gradient is a mean per token); keeping
 * the running weighted sum and the total weight makes any tree of
 * reductions equal to one flat reduction, up to float rounding.  Which
 * inputs may be combined is the update module's rule (update.c), and
 * which count already uident.c's; this file only adds them up, each
 * stale input's weight in the sum scaled by its factor (stale.c) when
 * the reduction is told its model.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/clock.h"
#include "exchange/dp.h"
#include "exchange/reduce.h"
#include "exchange/secagg.h"
#include "exchange/slice.h"
#include "file/sign.h"
#include "model/model.h"

/* ------------------------------------------------------- operations */

/* The built-in operations, one X() per exchange/op/NAME_op.c, in the
 * order --help lists them; the first is the default. */
#define CG_REDUCE_OPS X(mean) X(sum) X(median) X(trimmed_mean) X(clip_mean) \
	X(sent_mean)

#define X(name) extern const struct cg_reduce_op cg_reduce_op_##name;
CG_REDUCE_OPS
#undef X

#define X(name) &cg_reduce_op_##name,
static const struct cg_reduce_op *const table[] = {CG_REDUCE_OPS};
#undef X

#define NTABLE ((int)(sizeof(table) / sizeof(table[0])))
#define MAX_REGISTERED 16

static const struct cg_reduce_op *registered[MAX_REGISTERED];
static int nregistered;

int
cg_reduce_op_count(void)
{
	return NTABLE + nregistered;
}

const struct cg_reduce_op *
cg_reduce_op_at(int i)
{
	if (i < 0 || i >= cg_reduce_op_count())
		return NULL;
	return i < NTABLE ? table[i] : registered[i - NTABLE];
}

int
cg_reduce_op_register(const struct cg_reduce_op *op)
{
	const struct cg_reduce_op *o;

	if (op == NULL || op->name == NULL || op->name[0] == '\0' ||
	    strlen(op->name) > 32 || strchr(op->name, ':') != NULL)
		return cg_seterr("operation without a name of 1 to 32 "
		                 "characters, no ':'");
	if (op->help == NULL ||
	    (op->streams ? op->init == NULL || op->add == NULL
	                 : op->slice == NULL) ||
	    (op->param != NULL && !(op->pmin < op->pmax)))
		return cg_seterr(
		    "operation %s: help, and init and add (streams) "
		    "or slice wanted; a parameter's range not empty",
		    op->name);
	for (int i = 0; (o = cg_reduce_op_at(i)) != NULL; i++)
		if (o == op || strcmp(o->name, op->name) == 0)
			return cg_seterr("operation %s: registered already",
			                 op->name);
	if (nregistered == MAX_REGISTERED)
		return cg_seterr("operation %s: more than %d operations "
		                 "registered",
		                 op->name, MAX_REGISTERED);
	registered[nregistered++] = op;
	return 0;
}

const struct cg_reduce_op *
cg_reduce_op_find(const char *name)
{
	const struct cg_reduce_op *op;
	char list[256] = "";
	size_t len = 0;

	for (int i = 0; (op = cg_reduce_op_at(i)) != NULL; i++) {
		if (strcmp(op->name, name) == 0)
			return op;
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
		                        len ? ", " : "", op->name);
		if (len >= sizeof(list))
			len = sizeof(list) - 1;
	}
	cg_seterr("unknown operation '%.32s' (%s)", name, list);
	return NULL;
}

const struct cg_reduce_op *
cg_reduce_op_parse(const char *spec, double *param)
{
	const char *colon = strchr(spec, ':');
	const struct cg_reduce_op *op;
	char name[64], *end;
	double v;

	snprintf(name, sizeof(name), "%.*s",
	         colon ? (int)(colon - spec) : (int)strlen(spec), spec);
	*param = 0;
	if ((op = cg_reduce_op_find(name)) == NULL)
		return NULL;
	if (op->param == NULL) {
		if (colon == NULL)
			return op;
		cg_seterr("%s: takes no parameter", op->name);
		return NULL;
	}
	if (colon == NULL) {
		cg_seterr("%s: wants a parameter (%s:%s)", op->name, op->name,
		          op->param);
		return NULL;
	}
	errno = 0;
	v = strtod(colon + 1, &end);
	if (colon[1] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) ||
	    v < op->pmin || v > op->pmax ||
	    ((op->popen & 1) && v == op->pmin) ||
	    ((op->popen & 2) && v == op->pmax)) {
		cg_seterr("%s: %s '%.32s' is not a number in %c%g, %g%c",
		          op->name, op->param, colon + 1,
		          op->popen & 1 ? '(' : '[', op->pmin, op->pmax,
		          op->popen & 2 ? ')' : ']');
		return NULL;
	}
	*param = v;
	return op;
}

/* ---------------------------------------------------------- reducer */

/* Elements a thread takes at a time. */
#define FOLD_CHUNK 16384

void
cg_reducer_init(struct cg_reducer *r, const struct cg_reduce_op *op,
                double param)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->param = param;
	r->sliced = !op->streams;
	r->slice = CG_REDUCE_SLICE;
	r->max_staleness = UINT64_MAX;
	r->dp_q = 1;
	cg_stale_weight_default(&r->stale);
	cg_uident_set_init(&r->ids);
}

int
cg_reducer_set_model(struct cg_reducer *r, const struct cg_model *m,
                     const char *mname, uint64_t max_staleness,
                     const struct cg_stale_weight *w)
{
	unsigned char d[32];

	if (w->rule != &cg_stale_rules[0] && !r->op->weighs)
		return cg_seterr("--op %s weighs no input: only a staleness "
		                 "rule of constant goes with it",
		                 r->op->name);
	if (cg_dp_read(m->manifest, &r->dp) < 0) {
		cg_errprefix(mname);
		return -1;
	}
	cg_model_digest(m, d);
	cg_hex(r->model_base, d);
	r->model = m;
	r->model_step = m->step;
	r->model_name = mname;
	r->max_staleness = max_staleness;
	r->stale = *w;
	return 0;
}

/*
 * The record r's round makes, into *next: the model's (r->dp), with a
 * release of noise multiplier sigma at r's rate after it, at r's delta
 * (the model's record's, else 1e-5, where not given).  0, or -1 with a
 * message: another delta than the model's, or past r's target.
 */
static int
round_dp(const struct cg_reducer *r, double sigma, struct cg_dp *next)
{
	const double delta = r->dp_delta > 0   ? r->dp_delta
	                     : r->dp.nhist > 0 ? r->dp.delta
	                                       : 1e-5;

	*next = r->dp;
	if (next->nhist > 0 && next->delta != delta)
		return cg_seterr("%s: its budget is spent at delta %g, not %g",
		                 r->model_name, next->delta, delta);
	next->delta = delta;
	if (cg_dp_append(next, sigma, r->dp_q, 1) != 0)
		return -1;
	if (r->dp_target > 0 && next->epsilon > r->dp_target)
		return cg_seterr("this round would spend epsilon %.4g at delta "
		                 "%g in all (%.4g so far), past "
		                 "--target-epsilon %g",
		                 next->epsilon, delta, r->dp.epsilon,
		                 r->dp_target);
	return 0;
}

int
cg_reducer_set_budget(struct cg_reducer *r, double q, double delta,
                      double target)
{
	struct cg_dp next;

	r->dp_q = q;
	r->dp_delta = delta;
	r->dp_target = target;
	r->dp_budget = 1;
	/* a delta the model's record is not at is refused now */
	return r->dp.nhist > 0 && delta > 0 ? round_dp(r, 0, &next) : 0;
}

int
cg_reducer_set_dp(struct cg_reducer *r, double clip, double sigma,
                  uint64_t seed)
{
	struct cg_dp next;

	if (!r->op->weighs || !r->op->streams)
		return cg_seterr("differential privacy: --op %s is not a "
		                 "weighted mean (the mean is)",
		                 r->op->name);
	r->dp_clip = clip;
	r->dp_sigma = sigma;
	r->dp_seed = seed;
	return sigma > 0 ? round_dp(r, sigma, &next) : 0;
}

/*
 * Masked u's share of the noise (privacy.h), against the first input's:
 * every peer's the same, or none; of weight 1 and of the round's peers.
 * (The budget is checked once the sum is whole, before anything is
 * written.)  0, or -1 with a message.
 */
static int
take_share(struct cg_reducer *r, const struct cg_update *u)
{
	struct cg_dp_share sh;
	int has = cg_dp_share_read(u->file->manifest, &sh);

	if (has < 0)
		return cg_errprefix(u->name), -1;
	if (r->first == NULL) {
		r->share_set = has;
		r->share = sh;
	} else if (has != r->share_set ||
	           (has && memcmp(&sh, &r->share, sizeof(sh)) != 0))
		return cg_seterr("%s: its noise share (dp_share) is not the "
		                 "first input's",
		                 u->name);
	if (has && (u->weight != 1 || sh.peers != u->mask->npeers))
		return cg_seterr("%s: a noise share of weight %g for %d peers "
		                 "in a round of %d: a share weighs 1",
		                 u->name, u->weight, sh.peers, u->mask->npeers);
	return 0;
}

/*
 * The noise multiplier of a masked round's shares over the peers in: each
 * of n peers adds std sigma C / sqrt(n), so m of them leave the mean of
 * weight m with sigma sqrt(m / n) C / m (a round that lost peers spends
 * more of the budget than one that did not).
 */
static double
masked_sigma(const struct cg_reducer *r)
{
	const double m = cg_mask_sum_present(r->masked);
	const double n = cg_mask_sum_peers(r->masked);

	return r->share.sigma * sqrt(m / n);
}

int
cg_reducer_set_slice(struct cg_reducer *r, int i, int n)
{
	if (r->op->passes > 1)
		return cg_seterr("--op %s measures each input over the whole "
		                 "update: it is not sliced",
		                 r->op->name);
	if (r->dp_clip > 0)
		return cg_seterr("differential privacy clips each input over "
		                 "the whole update: it is not sliced");
	if (n < 1 || n > CG_SLICE_MAX || i < 0 || i >= n)
		return cg_seterr("slice %d of %d: not 1 <= I <= N <= %d", i + 1, n,
		                 CG_SLICE_MAX);
	r->slice_i = i;
	r->slice_n = n;
	return 0;
}

/* Everything r holds but the names of the inputs left out. */
static void
release(struct cg_reducer *r)
{
	for (size_t i = 0; i < r->nkept; i++)
		if (r->kept[i] != r->first)
			cg_update_free(r->kept[i]);
	free(r->kept);
	cg_mask_sum_free(r->masked);
	r->masked = NULL;
	free(r->signers);
	r->signers = NULL;
	r->nsigners = r->capsigners = 0;
	cg_uident_set_free(&r->ids);
	for (size_t i = 0; i < r->nstale; i++)
		free(r->stale_in[i].name);
	free(r->stale_in);
	r->stale_in = NULL;
	r->nstale = r->capstale = 0;
	cg_update_free(r->first);
	cg_file_free(r->acc);
	r->acc = NULL;
	free(r->pdp);
	free(r->pbase);
	r->pdp = r->pbase = NULL;
	r->kept = NULL;
	r->first = NULL;
	r->nkept = r->capkept = 0;
}

void
cg_reducer_free(struct cg_reducer *r)
{
	release(r);
	for (size_t i = 0; i < r->nleft_out; i++)
		free(r->left_out[i]);
	free(r->left_out);
	r->left_out = NULL;
	r->nleft_out = r->capleft_out = 0;
}

/* Values decoded at a time by a thread, on its stack. */
#define DECODE_CHUNK 2048

/*
 * Fold u's views into acc's tensors (init when first) in one parallel
 * region: the threads share each view's chunks and go on to the next
 * without waiting, so the small views cost no fork of their own.  A view
 * stored as f32 is folded where it lies; any other is decoded through
 * its codec a few thousand values at a time, never whole.
 */
static void
fold_all(const struct cg_reduce_op *op, struct cg_file *acc,
         const struct cg_update *u, double w, int first)
{
	void (*fn)(float *, const float *, size_t, double) =
	    first ? op->init : op->add;
	const int nv = u->nviews;

#pragma omp parallel
	{
		float tmp[DECODE_CHUNK];
		for (int i = 0; i < nv; i++) {
			float *a = acc->tensors[i]->data;
			const float *x = cg_update_view_f32(u, i);
			const uint64_t n = u->views[i].n;
			const uint64_t nc = (n + FOLD_CHUNK - 1) / FOLD_CHUNK;
#pragma omp for schedule(dynamic) nowait
			for (uint64_t c = 0; c < nc; c++) {
				uint64_t lo = c * FOLD_CHUNK;
				uint64_t len =
				    n - lo < FOLD_CHUNK ? n - lo : FOLD_CHUNK;
				if (x) {
					fn(a + lo, x + lo, len, w);
					continue;
				}
				for (uint64_t d = 0; d < len;
				     d += DECODE_CHUNK) {
					size_t m = len - d < DECODE_CHUNK
					               ? (size_t)(len - d)
					               : DECODE_CHUNK;
					cg_update_decode(u, i, lo + d, m, tmp);
					fn(a + lo + d, tmp, m, w);
				}
			}
		}
	}
}

/* u's "reduce" when u is a reduction's result, else "". */
static const char *
how_of(const struct cg_update *u)
{
	const cJSON *h =
	    cJSON_GetObjectItemCaseSensitive(u->file->manifest, "reduce");

	return cJSON_IsString(h) ? h->valuestring : "";
}

/* Whether r's operation reduces u, of "reduce" how, beside the first
 * input, of r->first_how: results of reductions only by an operation
 * that makes a tree, and by the same one (reduce.h).  0, or -1 with a
 * message. */
static int
check_tree(const struct cg_reducer *r, const struct cg_update *u,
           const char *how)
{
	const char *op = r->op->name;
	/* the input to blame: u when it is a reduction (and, for a tree
	 * operation, one of another), else the first input */
	const int first = *how == '\0' || (r->op->tree && strcmp(how, op) == 0);
	const char *by = first ? r->first_how : how;

	if (*how == '\0' && r->first_how[0] == '\0')
		return 0;
	if (r->op->tree && (*how == '\0' || strcmp(how, op) == 0) &&
	    (r->first_how[0] == '\0' || strcmp(r->first_how, op) == 0))
		return 0;
	if (!r->op->tree)
		return cg_seterr("%s: %sa reduction by %s: --op %s of "
		                 "reductions is not the %s of their inputs "
		                 "(only mean and sum reduce in a tree)",
		                 u->name, first ? "the first input is " : "",
		                 by, op, op);
	return cg_seterr("%s: %sa reduction by %s: --op %s does not "
	                 "reduce it further (a tree reduces by one "
	                 "operation)",
	                 u->name, first ? "the first input is " : "", by, op);
}

/* Whether u may join the reduction whose first input is r->first. */
static int
check_input(const struct cg_reducer *r, const struct cg_update *u)
{
	const struct cg_update *a = r->first;

	if (check_tree(r, u, how_of(u)) != 0)
		return -1;
	if (u->slice_n != a->slice_n || u->slice_i != a->slice_i) {
		char su[32] = "whole", sa[32] = "whole";
		if (u->slice_n)
			snprintf(su, sizeof(su), "slice %d of %d", u->slice_i + 1,
			         u->slice_n);
		if (a->slice_n)
			snprintf(sa, sizeof(sa), "slice %d of %d", a->slice_i + 1,
			         a->slice_n);
		cg_seterr("%s, the first input %s", su, sa);
		goto fail;
	}

	if (u->kind != a->kind) {
		cg_seterr("a %s among %ss", cg_update_kind_name(u->kind),
		          cg_update_kind_name(a->kind));
		goto fail;
	}
	/* each stage's replicas reduce apart: a mean across stages, or
	 * of a stage with whole models, is no update of anything */
	if (memcmp(&u->stage, &a->stage, sizeof(u->stage)) != 0) {
		char x[32], y[32];
		cg_seterr("an update of %s, the first input's of %s",
		          cg_update_stage_name(u, x, sizeof(x)),
		          cg_update_stage_name(a, y, sizeof(y)));
		goto fail;
	}
	/* told its model, the reduction measured u against it already */
	if (r->model == NULL &&
	    cg_update_check_base_of(u, a->base, a->base_step,
	                            "the first input's") < 0)
		return -1;
	if (u->nviews != a->nviews) {
		cg_seterr("%d tensors, the first input has %d", u->nviews,
		          a->nviews);
		goto fail;
	}
	if (u->partial != a->partial) {
		cg_seterr("%s, the first input %s", u->partial ? "partial" : "whole",
		          a->partial ? "partial" : "whole");
		goto fail;
	}
	for (int i = 0; i < u->nviews; i++) {
		const struct cg_uview *x = &a->views[i], *t = &u->views[i];
		if (strcmp(x->name, t->name) != 0 || x->n != t->n ||
		    x->ndim != t->ndim ||
		    memcmp(x->shape, t->shape,
		           (size_t)x->ndim * sizeof(uint64_t)) != 0) {
			cg_seterr("tensor %s: differs from the first input's "
			          "%s",
			          t->name, x->name);
			goto fail;
		}
	}
	return 0;
fail:
	cg_errprefix(u->name);
	return -1;
}

/*
 * The result's file from the first input u: its manifest (less its
 * codec and layout: the result is dense f32) and one f32 tensor per
 * view, zeroed for the fold.
 */
static struct cg_file *
new_result(const struct cg_update *u)
{
	struct cg_file *f = cg_file_new(cg_update_kind_name(u->kind));
	cJSON *man;

	if (f == NULL)
		return NULL;
	if ((man = cJSON_Duplicate(u->file->manifest, 1)) == NULL) {
		cg_file_free(f);
		cg_seterr("out of memory");
		return NULL;
	}
	cJSON_Delete(f->manifest);
	f->manifest = man;
	cJSON_DeleteItemFromObjectCaseSensitive(man, "codec");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "layout");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "downlink");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "signers");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "mask");
	/* the first input's worker is not the result's: its contributors
	 * are, put at the end */
	cJSON_DeleteItemFromObjectCaseSensitive(man, "worker");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "contributors");
	/* an earlier reduction's record is not this one's */
	cJSON_DeleteItemFromObjectCaseSensitive(man, "staleness");
	if (u->slice_n) {
		/* at the end, where the join takes it off again */
		cJSON *sl;
		cJSON_DeleteItemFromObjectCaseSensitive(man, "slice");
		if ((sl = cJSON_AddObjectToObject(man, "slice")) == NULL ||
		    !cJSON_AddNumberToObject(sl, "index", u->slice_i) ||
		    !cJSON_AddNumberToObject(sl, "of", u->slice_n)) {
			cg_file_free(f);
			cg_seterr("out of memory");
			return NULL;
		}
	}
	for (int i = 0; i < u->nviews; i++) {
		const struct cg_uview *v = &u->views[i];
		if (cg_file_add_zero(f, v->name, CG_F32, v->ndim, v->shape) ==
		    NULL) {
			cg_file_free(f);
			return NULL;
		}
	}
	return f;
}

static int
keep(struct cg_reducer *r, struct cg_update *u)
{
	if (r->nkept == r->capkept) {
		size_t cap = r->capkept ? 2 * r->capkept : 16;
		void *p = realloc(r->kept, cap * sizeof(*r->kept));
		if (p == NULL)
			return cg_seterr("out of memory");
		r->kept = p;
		r->capkept = cap;
	}
	r->kept[r->nkept++] = u;
	return 0;
}

/* Note who signed u's file, once a key. */
static int
add_signer(struct cg_reducer *r, const struct cg_update *u)
{
	if (u->file == NULL || !u->file->is_signed)
		return 0;
	for (size_t i = 0; i < r->nsigners; i++)
		if (memcmp(r->signers[i], u->file->signer, 32) == 0)
			return 0;
	if (r->nsigners == r->capsigners) {
		size_t cap = r->capsigners ? 2 * r->capsigners : 8;
		void *p = realloc(r->signers, cap * sizeof(*r->signers));
		if (p == NULL)
			return cg_seterr("out of memory");
		r->signers = p;
		r->capsigners = cap;
	}
	memcpy(r->signers[r->nsigners++], u->file->signer, 32);
	return 0;
}

static int
cmp_hex(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* "signers" of f's manifest: the fingerprints of r's signers, sorted
 * (the order of the inputs does not show); none where no input was
 * signed.  0 or -1. */
static int
put_signers(struct cg_file *f, const struct cg_reducer *r)
{
	char (*fp)[65];
	cJSON *arr;

	if (r->nsigners == 0)
		return 0;
	if ((fp = malloc(r->nsigners * sizeof(*fp))) == NULL)
		return cg_seterr("out of memory");
	for (size_t i = 0; i < r->nsigners; i++)
		cg_key_fingerprint(fp[i], r->signers[i]);
	qsort(fp, r->nsigners, sizeof(*fp), cmp_hex);
	if ((arr = cJSON_AddArrayToObject(f->manifest, "signers")) == NULL) {
		free(fp);
		return cg_seterr("out of memory");
	}
	for (size_t i = 0; i < r->nsigners; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(fp[i]));
	free(fp);
	return 0;
}

/*
 * Masked u into r's integer sum (the first makes it): the mean only,
 * never mixed with plain inputs, one round's peers each once.  u's
 * numbers are spent; r keeps the first input for its layout.  0 or -1.
 */
static int
add_masked(struct cg_reducer *r, struct cg_update *u)
{
	uint64_t P = 0;

	if (!r->op->masked)
		return cg_seterr("%s: masked: --op %s cannot read masked values "
		                 "(the mean of every peer's update can)",
		                 u->name, r->op->name);
	if (r->first == NULL) {
		for (int i = 0; i < u->nviews; i++)
			P += u->views[i].n;
		if ((r->masked = cg_mask_sum_new(u->mask, P)) == NULL)
			return -1;
	}
	if (cg_mask_sum_join(r->masked, u->mask, u->name) != 0)
		return -1;
	for (int i = 0; i < u->nviews; i++)
		if (cg_mask_sum_add(r->masked, &u->views[i]) != 0) {
			cg_errprefix(u->name);
			return -1;
		}
	return 0;
}

/*
 * The first element of u's view i that is not finite, or UINT64_MAX: a
 * run of values at a time without a branch (every exponent bit set: an
 * inf or a nan), then the element.  A view stored as f32 is read where
 * it lies, any other decoded a few thousand values at a time.
 */
static uint64_t
first_nonfinite(const struct cg_update *u, int i)
{
	const float *x = cg_update_view_f32(u, i);
	const uint64_t n = u->views[i].n;
	const uint64_t nc = (n + FOLD_CHUNK - 1) / FOLD_CHUNK;
	uint64_t first = UINT64_MAX;

#pragma omp parallel for schedule(dynamic) reduction(min : first)
	for (uint64_t c = 0; c < nc; c++) {
		float tmp[DECODE_CHUNK];
		const uint64_t hi =
		    n - c * FOLD_CHUNK < FOLD_CHUNK ? n : (c + 1) * FOLD_CHUNK;
		for (uint64_t d = c * FOLD_CHUNK; d < hi; d += DECODE_CHUNK) {
			size_t m = hi - d < DECODE_CHUNK ? (size_t)(hi - d)
			                                 : DECODE_CHUNK;
			const float *y = x ? x + d : tmp;
			uint64_t j;
			if (x == NULL)
				cg_update_decode(u, i, d, m, tmp);
			if ((j = cg_first_nonfinite(y, m)) == m)
				continue;
			first = first < d + j ? first : d + j;
			break;
		}
	}
	return first;
}

/* 0 when every value of u is finite; else -1 with a message naming u,
 * the tensor and the element, saying u is left out when skip. */
static int
check_finite(const struct cg_update *u, int skip)
{
	for (int i = 0; i < u->nviews; i++) {
		uint64_t j = first_nonfinite(u, i);
		if (j != UINT64_MAX)
			return cg_seterr("%s: tensor %s: element %llu is not "
			                 "finite%s",
			                 u->name, u->views[i].name,
			                 (unsigned long long)j,
			                 skip ? "; left out" : "");
	}
	return 0;
}

/* u, folded in, becomes r's first input, kept for its layout (views,
 * manifest) once its numbers are spent: its file is let go. */
static void
take_layout(struct cg_reducer *r, struct cg_update *u)
{
	cg_file_free(u->file);
	u->file = NULL;
	for (int i = 0; i < u->nviews; i++)
		u->views[i].t[0] = u->views[i].t[1] = NULL;
	r->first = u;
}

/* Whether u has the tensors of r's model (names, shapes, in order). */
static int
check_model_layout(const struct cg_reducer *r, const struct cg_update *u)
{
	const struct cg_model *m = r->model;
	int j = 0;

	/* a partial update's views, and a slice's, are some of the
	 * model's, in its order */
	const int part = u->partial || u->slice_n;
	if (u->nviews != m->nviews && !(part && u->nviews < m->nviews))
		return cg_seterr("%s: %d tensors, the model %s has %d", u->name,
		                 u->nviews, r->model_name, m->nviews);
	for (int i = 0; i < u->nviews; i++, j++) {
		const struct cg_uview *t = &u->views[i];
		while (part && j < m->nviews &&
		       strcmp(m->views[j].name, t->name) != 0)
			j++;
		if (j == m->nviews)
			return cg_seterr("%s: tensor %s: not one of the model "
			                 "%s's (or out of its order)",
			                 u->name, t->name, r->model_name);
		const struct cg_view *v = &m->views[j];
		if (strcmp(v->name, t->name) != 0 || v->n != t->n ||
		    v->ndim != t->ndim ||
		    memcmp(v->shape, t->shape,
		           (size_t)v->ndim * sizeof(uint64_t)) != 0)
			return cg_seterr(
			    "%s: tensor %s: differs from the model "
			    "%s's %s",
			    u->name, t->name, r->model_name, v->name);
	}
	return 0;
}

/* Note u among the inputs measured against the model; 0 or -1. */
static int
note_stale(struct cg_reducer *r, const struct cg_update *u, uint64_t s,
           double factor, int dropped)
{
	struct cg_stale_in *e;

	if (r->nstale == r->capstale) {
		size_t cap = r->capstale ? 2 * r->capstale : 8;
		void *p = realloc(r->stale_in, cap * sizeof(*r->stale_in));
		if (p == NULL)
			return cg_seterr("out of memory");
		r->stale_in = p;
		r->capstale = cap;
	}
	e = &r->stale_in[r->nstale];
	if ((e->name = strdup(u->name)) == NULL)
		return cg_seterr("out of memory");
	e->base_step = u->base_step;
	e->staleness = s;
	e->factor = factor;
	e->dropped = dropped;
	r->nstale++;
	return 0;
}

/*
 * u measured against r's model: its staleness into *stale and its
 * factor into *factor; 0, 1 when u is staler than r->max_staleness
 * (noted, and the message says it is left out), or -1 with a message.
 */
static int
measure(struct cg_reducer *r, const struct cg_update *u, int64_t *stale,
        double *factor)
{
	if (u->stage.count)
		return cg_seterr("%s: a pipeline stage's update: --model "
		                 "takes a whole model's",
		                 u->name);
	int64_t s =
	    cg_update_staleness(u, r->model_base, r->model_step, r->model_name);

	if (s < 0 || check_model_layout(r, u) != 0)
		return -1;
	if ((uint64_t)s > r->max_staleness) {
		if (note_stale(r, u, (uint64_t)s, 0, 1) != 0)
			return -1;
		r->dropped++;
		cg_seterr("%s: stale by %lld step%s (computed from step %llu, "
		          "%s is at %llu), more than --max-staleness %llu; "
		          "left out",
		          u->name, (long long)s, s == 1 ? "" : "s",
		          (unsigned long long)u->base_step, r->model_name,
		          (unsigned long long)r->model_step,
		          (unsigned long long)r->max_staleness);
		return 1;
	}
	*stale = s;
	*factor = cg_stale_factor(&r->stale, (uint64_t)s);
	if (u->mask && *factor != 1)
		return cg_seterr(
		    "%s: masked, and stale by %lld steps: a masked "
		    "value cannot be weighed down",
		    u->name, (long long)s);
	return 0;
}

/*
 * u's record in (a DP-SGD release of a shard) against r's so far: its
 * base, checked against the first such input's or the model's, into
 * *base, and r's releases with its own joined, into *joined (both
 * allocated here, the caller's to free).  0, or -1 with a message.
 */
static int
take_parallel(const struct cg_reducer *r, const struct cg_update *u,
              const struct cg_dp *in, struct cg_dp **base,
              struct cg_dp **joined)
{
	struct cg_dp *b = malloc(sizeof(*b)), *j = malloc(sizeof(*j));

	*base = b;
	*joined = j;
	if (b == NULL || j == NULL)
		return cg_seterr("out of memory");
	if (r->dp_clip > 0)
		return cg_seterr("%s: noised by DP-SGD already: it is not "
		                 "clipped and noised again (--dp-clip)",
		                 u->name);
	if (r->first != NULL && r->pdp == NULL)
		return cg_seterr("%s: noised by DP-SGD, among inputs without "
		                 "differential privacy",
		                 u->name);
	if (cg_dp_base(in, b) != 0)
		return cg_errprefix(u->name), -1;
	if (r->pdp != NULL && in->delta != r->pdp->delta)
		return cg_seterr("%s: dp: spent at delta %g, the first input "
		                 "at %g",
		                 u->name, in->delta, r->pdp->delta);
	if (r->model != NULL) {
		/* the round adds to the model's record, whatever older
		 * model an input was computed from */
		if (r->dp.nhist > 0 && in->delta != r->dp.delta)
			return cg_seterr("%s: dp: spent at delta %g, the model "
			                 "%s at %g",
			                 u->name, in->delta, r->model_name,
			                 r->dp.delta);
		if (r->dp.nhist == 0 && b->nhist > 0)
			return cg_seterr(
			    "%s: dp: computed from a model that had "
			    "spent epsilon %.4g; the model %s records "
			    "none",
			    u->name, b->epsilon, r->model_name);
	} else if (r->pbase != NULL) {
		if (!cg_dp_same_history(b, r->pbase))
			return cg_seterr(
			    "%s: dp: its record before its release "
			    "is not the first input's",
			    u->name);
	}
	if (r->pdp)
		*j = *r->pdp;
	else {
		memset(j, 0, sizeof(*j));
		j->delta = in->delta;
	}
	if (cg_dp_join(j, in) != 0)
		return cg_errprefix(u->name), -1;
	return 0;
}

/* The record of a round of DP-SGD inputs (r->pdp) into *next: the
 * model's record, or theirs, with their parallel release after it.  0,
 * or -1 with a message: another delta than --dp-delta's, or past
 * --target-epsilon. */
static int
parallel_dp(const struct cg_reducer *r, struct cg_dp *next)
{
	*next = r->model ? r->dp : *r->pbase;
	next->delta = r->pdp->delta;
	if (r->dp_delta > 0 && r->dp_delta != next->delta)
		return cg_seterr("--dp-delta %g: the inputs spent their budget "
		                 "at delta %g",
		                 r->dp_delta, next->delta);
	if (cg_dp_append_max(next, r->pdp->release, r->pdp->nrelease) != 0)
		return -1;
	if (r->dp_target > 0 && next->epsilon > r->dp_target)
		return cg_seterr("this round would spend epsilon %.4g at delta "
		                 "%g in all (%.4g so far), past "
		                 "--target-epsilon %g",
		                 next->epsilon, next->delta, r->dp.epsilon,
		                 r->dp_target);
	next->clip = r->pdp->clip;
	next->nrelease = r->pdp->nrelease;
	next->has_shard = 1;
	memcpy(next->release, r->pdp->release,
	       (size_t)next->nrelease * sizeof(next->release[0]));
	memcpy(next->shard, r->pdp->shard,
	       (size_t)next->nrelease * sizeof(next->shard[0]));
	return 0;
}

/* Note name among the inputs left out; 0, or -1 with a message. */
static int
note_left_out(struct cg_reducer *r, const char *name)
{
	if (r->nleft_out == r->capleft_out) {
		size_t cap = r->capleft_out ? 2 * r->capleft_out : 8;
		void *p = realloc(r->left_out, cap * sizeof(*r->left_out));
		if (p == NULL)
			return cg_seterr("out of memory");
		r->left_out = p;
		r->capleft_out = cap;
	}
	if ((r->left_out[r->nleft_out] = strdup(name)) == NULL)
		return cg_seterr("out of memory");
	r->nleft_out++;
	return 0;
}

int
cg_reducer_add(struct cg_reducer *r, struct cg_update *u)
{
	const double w = u->weight, ns = u->samples, loss = u->loss;
	const uint64_t inputs = u->inputs;
	double wt = w; /* what it adds to the total weight */
	struct cg_uident id = {.n = 0};
	double factor = 1;
	int64_t stale = 0;
	int rc = -1;
	/* a DP-SGD release of a shard: its record, base and joined */
	struct cg_dp *in = NULL, *pbase = NULL, *joined = NULL;

	if (cg_update_check_weight(u) != 0)
		goto out;
	if (r->slice_n && u->slice_n == 0 &&
	    cg_update_cut(u, r->slice_i, r->slice_n) != 0)
		goto out;
	if (r->slice_n &&
	    (u->slice_i != r->slice_i || u->slice_n != r->slice_n)) {
		cg_seterr("%s: slice %d of %d, not the slice %d of %d reduced",
		          u->name, u->slice_i + 1, u->slice_n, r->slice_i + 1,
		          r->slice_n);
		goto out;
	}
	if (r->model != NULL && (rc = measure(r, u, &stale, &factor)) != 0)
		goto out;
	rc = -1;
	if (r->first != NULL && check_input(r, u) != 0)
		goto out;
	if (cJSON_GetObjectItemCaseSensitive(u->file->manifest, "dp")) {
		if ((in = malloc(sizeof(*in))) == NULL) {
			cg_seterr("out of memory");
			goto out;
		}
		if (cg_dp_read(u->file->manifest, in) < 0) {
			cg_errprefix(u->name);
			goto out;
		}
		/* DP-SGD on a shard: in parallel with others (privacy.h) */
		if (in->has_shard && in->clip > 0 &&
		    take_parallel(r, u, in, &pbase, &joined) != 0)
			goto out;
	} else if (r->pdp) {
		cg_seterr("%s: no differential privacy, among inputs noised "
		          "by DP-SGD",
		          u->name);
		goto out;
	}
	/* another noised release stands alone: it passes through a
	 * reduction of one (a recode) with its record, and mixes with
	 * nothing */
	if (in && joined == NULL && (r->dp_clip > 0 || r->first != NULL)) {
		cg_seterr("%s: noised for differential privacy already: it "
		          "is reduced with no other input",
		          u->name);
		goto out;
	}
	if (r->acc && r->pdp == NULL &&
	    cJSON_GetObjectItemCaseSensitive(r->acc->manifest, "dp")) {
		cg_seterr("%s: the first input was noised for differential "
		          "privacy: it is reduced with no other input",
		          u->name);
		goto out;
	}
	if (r->dp_clip > 0 && u->mask) {
		cg_seterr("%s: masked: its values cannot be clipped for "
		          "differential privacy",
		          u->name);
		goto out;
	}
	if (r->dp_clip > 0 && inputs != 1) {
		cg_seterr("%s: stands for %llu updates: differential privacy "
		          "clips each worker's own",
		          u->name, (unsigned long long)inputs);
		goto out;
	}
	/* (a masked value means nothing alone: the integer sum checks it) */
	if (u->mask == NULL && check_finite(u, r->skip_nonfinite) != 0) {
		if (r->skip_nonfinite) {
			r->skipped++;
			rc = 1;
		}
		goto out;
	}
	/* every update counts once; a masked round has a rule of its own,
	 * one update a peer key, checked as the sum is made */
	if (cg_uident_of(u, &id) != 0 ||
	    (!r->allow_duplicates && u->mask == NULL &&
	     cg_uident_set_check(&r->ids, &id, u->name) != 0) ||
	    cg_uident_set_reserve(&r->ids, &id, u->name) != 0)
		goto out;
	if (add_signer(r, u) != 0)
		goto out;
	if (r->first != NULL && (u->mask != NULL) != (r->masked != NULL)) {
		cg_seterr("%s: a %s input among %s ones", u->name,
		          u->mask ? "masked" : "plain",
		          u->mask ? "plain" : "masked");
		goto out;
	}
	if (r->first == NULL && (r->acc = new_result(u)) == NULL)
		goto out;
	if (r->first == NULL)
		snprintf(r->first_how, sizeof(r->first_how), "%s", how_of(u));
	if (r->model != NULL &&
	    note_stale(r, u, (uint64_t)stale, factor, 0) != 0)
		goto out;
	/* its weight in the sum; the total divided by stays w (reduce.h) */
	u->weight = w * factor;
	if (joined) {
		/* one a worker: a Poisson sample's size is not private */
		wt = (double)inputs;
		u->weight = wt * factor;
	}
	if (r->dp_clip > 0) {
		/* one worker, one vote, of norm at most the clip */
		double c = cg_dp_clip_factor(cg_dp_update_norm(u), r->dp_clip);
		u->weight = factor * c;
		r->dp_clipped += c < 1;
		wt = 1;
	}
	if (u->mask) {
		double t0 = cg_now();
		if (take_share(r, u) != 0 || add_masked(r, u) != 0) {
			if (r->first == NULL) {
				/* the next input starts afresh */
				cg_file_free(r->acc);
				r->acc = NULL;
				cg_mask_sum_free(r->masked);
				r->masked = NULL;
			}
			goto out;
		}
		r->fold_seconds += cg_now() - t0;
		if (r->first == NULL) {
			take_layout(r, u);
			u = NULL;
		}
	} else if (r->sliced) {
		if (r->nkept >= CG_REDUCE_MAX_KEPT) {
			cg_seterr("%s: more than %d inputs for --op %s",
			          u->name, CG_REDUCE_MAX_KEPT, r->op->name);
			goto out;
		}
		if (keep(r, u) != 0)
			goto out;
		if (r->first == NULL)
			r->first = u;
		u = NULL;
	} else {
		double t0 = cg_now();
		fold_all(r->op, r->acc, u, u->weight, r->first == NULL);
		r->fold_seconds += cg_now() - t0;
		if (r->first == NULL) {
			take_layout(r, u);
			u = NULL;
		}
	}
	r->weight += wt;
	r->samples += ns;
	r->loss += wt * loss;
	r->inputs += inputs;
	cg_uident_set_add(&r->ids, &id);
	if (joined) {
		free(r->pdp);
		r->pdp = joined;
		joined = NULL;
		if (r->pbase == NULL) {
			r->pbase = pbase;
			pbase = NULL;
		}
	}
	rc = 0;
out:
	free(in);
	free(pbase);
	free(joined);
	/* the message says why it is left out: kept unless no memory */
	if (rc == 1 && note_left_out(r, u->name) != 0)
		rc = -1;
	cg_uident_free(&id);
	cg_update_free(u);
	return rc;
}

/* ----------------------------------------------------- sliced path */

/*
 * out [n] from the slices in[0..k) [n]: the operation's own slice, or a
 * streaming operation's init, add... and finish on the slice, in chunks
 * shared among threads.
 */
static void
run_slice(const struct cg_reduce_op *op, struct cg_reduce_pass *p, float *out,
          const float *const *in, size_t n, double wsum)
{
	if (op->slice) {
		op->slice(p, out, in, n);
		return;
	}
	const size_t nc = (n + FOLD_CHUNK - 1) / FOLD_CHUNK;
#pragma omp parallel for schedule(dynamic)
	for (size_t c = 0; c < nc; c++) {
		size_t lo = c * FOLD_CHUNK;
		size_t len = n - lo < FOLD_CHUNK ? n - lo : FOLD_CHUNK;
		op->init(out + lo, in[0] + lo, len, p->w[0]);
		for (size_t i = 1; i < p->k; i++)
			op->add(out + lo, in[i] + lo, len, p->w[i]);
		if (op->finish)
			op->finish(out + lo, len, wsum);
	}
}

/* Reduce every kept input into the result's tensors, slice by slice, in
 * as many passes as the operation asks; an input not stored as f32 is
 * decoded a slice at a time (again on each pass: memory stays a slice
 * an input). */
static int
finish_sliced(struct cg_reducer *r)
{
	struct cg_file *f = r->acc;
	const size_t k = r->nkept, step = r->slice ? r->slice : 1;
	const int passes = r->op->passes > 1 ? r->op->passes : 1;
	const float **in = cg_alloc(k * sizeof(*in));
	float **dec = calloc(k, sizeof(*dec));
	double *w = cg_alloc(3 * k * sizeof(*w));
	int rc = -1;

	if (in == NULL || dec == NULL || w == NULL)
		goto out;
	struct cg_reduce_pass p = {
	    .param = r->param, .k = k, .w = w, .sum = w + k, .last = w + 2 * k};
	for (size_t i = 0; i < k; i++) {
		w[i] = r->kept[i]->weight;
		p.sum[i] = w[2 * k + i] = 0;
	}
	for (p.pass = 0; p.pass < passes; p.pass++) {
		if (p.pass > 0)
			for (size_t i = 0; i < k; i++) {
				w[2 * k + i] = p.sum[i];
				p.sum[i] = 0;
			}
		for (int t = 0; t < r->first->nviews; t++) {
			float *out = f->tensors[t]->data;
			const uint64_t n = f->tensors[t]->nelem;
			for (uint64_t lo = 0; lo < n; lo += step) {
				size_t m =
				    n - lo < step ? (size_t)(n - lo) : step;
				for (size_t i = 0; i < k; i++) {
					const struct cg_update *u = r->kept[i];
					const float *x =
					    cg_update_view_f32(u, t);
					if (x) {
						in[i] = x + lo;
						continue;
					}
					if (dec[i] == NULL &&
					    (dec[i] = cg_alloc(
					         step * sizeof(float))) == NULL)
						goto out;
					cg_update_decode(u, t, lo, m, dec[i]);
					in[i] = dec[i];
				}
				run_slice(r->op, &p, out + lo, in, m,
				          r->weight);
			}
		}
	}
	rc = 0;
out:
	for (size_t i = 0; dec && i < k; i++)
		free(dec[i]);
	free(dec);
	free((void *)in);
	free(w);
	return rc;
}

/* 0 when every value of the result f is finite; else -1 with a message
 * (finite inputs may still sum past the largest float). */
static int
check_result(const struct cg_file *f)
{
	for (size_t i = 0; i < f->ntensors; i++) {
		const float *x = f->tensors[i]->data;
		for (uint64_t j = 0; j < f->tensors[i]->nelem; j++)
			if (!isfinite(x[j]))
				return cg_seterr(
				    "the result's tensor %s: element "
				    "%llu is not finite (the inputs "
				    "overflow a float)",
				    f->tensors[i]->name, (unsigned long long)j);
	}
	return 0;
}

/* ---------------------------------------------------------- result */

/*
 * A reduction told its model: the result's base becomes that model, and
 * "staleness" says how every input stood against it: the rule, the
 * limit (absent: none), and per input in the order given its name, base
 * step, staleness and factor, "dropped" for those left out.  0 or -1.
 */
static int
put_staleness(struct cg_file *f, const struct cg_reducer *r)
{
	cJSON *man = f->manifest, *b, *o, *in, *out;
	char rule[96];

	cJSON_DeleteItemFromObjectCaseSensitive(man, "base");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "staleness");
	if ((b = cJSON_AddObjectToObject(man, "base")) == NULL ||
	    (o = cJSON_AddObjectToObject(man, "staleness")) == NULL)
		return cg_seterr("out of memory");
	cJSON_AddStringToObject(b, "sha256", r->model_base);
	cJSON_AddNumberToObject(b, "step", (double)r->model_step);
	cg_stale_weight_name(&r->stale, rule, sizeof(rule));
	cJSON_AddStringToObject(o, "rule", rule);
	if (r->max_staleness != UINT64_MAX)
		cJSON_AddNumberToObject(o, "max", (double)r->max_staleness);
	if ((in = cJSON_AddArrayToObject(o, "inputs")) == NULL ||
	    (out = cJSON_AddArrayToObject(o, "dropped")) == NULL)
		return cg_seterr("out of memory");
	for (size_t i = 0; i < r->nstale; i++) {
		const struct cg_stale_in *e = &r->stale_in[i];
		cJSON *x = cJSON_CreateObject();
		if (x == NULL)
			return cg_seterr("out of memory");
		cJSON_AddItemToArray(e->dropped ? out : in, x);
		cJSON_AddStringToObject(x, "input", e->name);
		cJSON_AddNumberToObject(x, "step", (double)e->base_step);
		cJSON_AddNumberToObject(x, "staleness", (double)e->staleness);
		if (!e->dropped)
			cJSON_AddNumberToObject(x, "factor", e->factor);
	}
	return 0;
}

struct cg_file *
cg_reducer_finish(struct cg_reducer *r)
{
	struct cg_file *f;

	if (r->first == NULL) {
		if (r->skipped || r->dropped)
			cg_seterr("no inputs: every one left out");
		else
			cg_seterr("no inputs");
		return NULL;
	}
	if (r->masked) {
		/* every peer in (or a quorum, and the reveals), and the
		 * masks gone: the mean, or nothing */
		if (cg_mask_sum_close(r->masked) != 0)
			return NULL;
		f = r->acc;
		for (int i = 0; i < r->first->nviews; i++)
			if (cg_mask_sum_mean(r->masked, &r->first->views[i],
			                     f->tensors[i]->data) != 0)
				return NULL;
		cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "masked");
		cJSON_AddNumberToObject(f->manifest, "masked",
		                        cg_mask_sum_present(r->masked));
	} else if (r->sliced) {
		double t0 = cg_now();
		if (finish_sliced(r) != 0)
			return NULL;
		r->fold_seconds += cg_now() - t0;
	} else if (r->op->finish) {
		f = r->acc;
		for (size_t i = 0; i < f->ntensors; i++)
			r->op->finish(f->tensors[i]->data, f->tensors[i]->nelem,
			              r->weight);
	}
	f = r->acc;
	if (check_result(f) != 0)
		return NULL;
	/* the noise of DP-FedAvg: std sigma C / W on the mean (dp.h),
	 * added here or by the workers under their masks */
	const double sigma = r->dp_sigma > 0 ? r->dp_sigma
	                     : r->masked     ? masked_sigma(r)
	                                     : 0;
	if (r->pdp) {
		struct cg_dp *next = malloc(sizeof(*next));
		if (next == NULL || parallel_dp(r, next) != 0) {
			if (next == NULL)
				cg_seterr("out of memory");
			free(next);
			return NULL;
		}
		r->dp = *next;
		free(next);
	} else if (sigma > 0) {
		struct cg_dp next;
		if (r->dp_sigma > 0)
			cg_dp_add_noise(f, r->dp_sigma * r->dp_clip / r->weight,
			                r->dp_seed);
		if (round_dp(r, sigma, &next) != 0 || check_result(f) != 0)
			return NULL;
		r->dp = next;
		r->dp.clip = r->dp_sigma > 0 ? r->dp_clip : r->share.clip;
		r->dp.nrelease = 1;
		r->dp.has_shard = 0;
		r->dp.release[0] = (struct cg_dp_run){
		    .sigma = sigma, .q = r->dp_q, .steps = 1};
	} else if (r->dp_budget) {
		cg_seterr("a privacy budget, but no noise in this round "
		          "(--dp-noise here, or at the workers under --mask)");
		return NULL;
	}
	r->noised = sigma > 0 || r->pdp != NULL;
	r->acc = NULL;
	if (put_signers(f, r) != 0 ||
	    cg_uident_set_put(&r->ids, f->manifest) != 0 ||
	    (r->model != NULL && put_staleness(f, r) != 0) ||
	    (r->noised && cg_dp_write(f->manifest, &r->dp) != 0)) {
		cg_file_free(f);
		release(r);
		return NULL;
	}
	release(r);
	cg_json_set_num(f->manifest, "samples", r->samples);
	cg_json_set_num(f->manifest, "weight", r->weight);
	cg_json_set_num(f->manifest, "loss", r->loss / r->weight);
	cg_json_set_num(f->manifest, "inputs", (double)r->inputs);
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "reduce");
	/* the operation as --op names it, its parameter with it */
	char how[96];
	if (r->op->param)
		snprintf(how, sizeof(how), "%s:%.15g", r->op->name, r->param);
	else
		snprintf(how, sizeof(how), "%s", r->op->name);
	cJSON_AddStringToObject(f->manifest, "reduce", how);
	return f;
}

cJSON *
cg_reducer_log_json(const struct cg_reducer *r, const struct cg_file *f,
                    double secs)
{
	cJSON *o = cJSON_CreateObject();

	if (o == NULL)
		return NULL;
	cJSON_AddNumberToObject(o, "inputs", (double)r->inputs);
	cJSON_AddNumberToObject(o, "samples", r->samples);
	cJSON_AddNumberToObject(o, "seconds", secs);
	cJSON_AddNumberToObject(o, "fold_seconds", r->fold_seconds);
	cJSON *arr = cJSON_AddArrayToObject(o, "skipped");
	for (size_t i = 0; arr && i < r->nleft_out; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(r->left_out[i]));
	if (r->dp_clip > 0)
		cJSON_AddNumberToObject(o, "dp_clipped", (double)r->dp_clipped);
	if (r->noised)
		cJSON_AddNumberToObject(o, "epsilon", r->dp.epsilon);
	const cJSON *st =
	    cJSON_GetObjectItemCaseSensitive(f->manifest, "staleness");
	if (st)
		cJSON_AddItemToObject(o, "staleness", cJSON_Duplicate(st, 1));
	return o;
}

int
cg_reducer_reveal_ready(const struct cg_reducer *r)
{
	return r->masked ? cg_mask_sum_quorum(r->masked) : 0;
}

int
cg_reducer_reveal(struct cg_reducer *r, const char *text, size_t len,
                  const char *name)
{
	if (r->masked == NULL)
		return cg_seterr("%s: a reveal, but no masked inputs", name);
	if (cg_mask_sum_quorum(r->masked) != 0)
		return -1;
	return cg_mask_sum_reveal(r->masked, text, len, name);
}
