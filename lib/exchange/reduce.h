/*
 * exchange/reduce.h - combining gradients and deltas: a table of operations and
 * a reducer that runs any of them with bounded memory.
 *
 * An operation is one row of the registry of operations: the built-in
 * ones, each in a file of its own, lib/exchange/op/NAME_op.c, listed in
 * reduce.c (adding one is that file, its X() in the list and its line in
 * Makefile.am), then those a program or a test adds with
 * cg_reduce_op_register() (e.g. from a function marked
 * __attribute__((constructor)) in the file that defines the row, as
 * tests/unit/reduce_toy.c does).  No program names a row.  A row is of
 * one of two kinds.
 *
 * A streaming operation (streams = 1: mean, sum) folds the inputs into
 * one accumulator as they come, each input read, folded and released:
 * memory is one accumulator plus one input whatever their number.  It
 * gives
 *
 *     init(acc, x, n, w)     acc = what the first input x [n] of weight
 *                            w contributes,
 *     add(acc, x, n, w)      acc += what each next input contributes,
 *     finish(acc, n, wsum)   the result from the fold, wsum being the
 *                            inputs' total weight (NULL: acc is it).
 *
 * An operation that needs every input at once (streams = 0: a coordinate
 * median, a trimmed mean, centred clipping) gives instead
 *
 *     slice(p, out, in, n)   out [n] from in[0..k), the same slice of
 *                            each of the k inputs (in[i] [n]), p saying
 *                            the rest (struct cg_reduce_pass).
 *
 * The reducer then keeps every input, mapped where it lies (cg_file_read
 * maps a plain file whole: a kept input costs address space and page
 * cache, not a copy of its own), and at the end walks the parameter
 * vector tensor by tensor in slices of at most r->slice elements, calling
 * slice once per slice; an operation of passes > 1 is walked so that
 * many times, out keeping what the last pass left in it and p->sum what
 * it added up over the whole vector (a norm over the whole update, which
 * no one slice knows).  Memory of its own is the output plus, where an
 * input has to be decoded to f32, k slices; inputs that come through a
 * pipe or compressed are held in memory whole, so an all-at-once
 * reduction of many inputs wants plain files.
 *
 * A row may take a parameter, written after its name and a colon
 * ("trimmed-mean:0.25"): the row gives the parameter's name for --help
 * and its range, cg_reduce_op_parse checks a spec against them, and the
 * value reaches the operation as p->param.  No program knows which rows
 * take one.
 *
 * Every input's values are checked to be finite before anything of it
 * is used, whatever the operation (a nan would poison a mean without a
 * trace, and an order statistic of one means nothing): the input is
 * refused, or with r->skip_nonfinite set, left out and said so; the
 * result is checked too (finite inputs whose sum overflows).
 *
 * Masked updates (secagg.h) are summed apart, exactly, as integers
 * modulo 2^64, whatever the path: only the mean takes them, and only all
 * of one round's peers at once; the result is their weighted mean, in
 * f32, like any other.
 *
 * A streaming operation runs on the sliced path too (r->sliced = 1): each
 * slice is then init, add for every next input, and finish, on that
 * slice.  Every element sees the same operations in the same order as
 * when streaming, so both paths give the same bits (test_reduce checks
 * it): a test of the path itself, apart from the operations on it.
 *
 * Asynchronous training reduces updates computed from different models
 * (cg_reducer_set_model).  The reduction is then for one model, the
 * newest, and every input is measured against it: its staleness s is
 * that model's step minus the input's base step (update.h).  An input
 * staler than the limit is left out and said so; the others are weighed
 * by a rule of stale.h: an input's weight in the sum becomes its weight
 * times its factor f(s), while the total the mean divides by stays the
 * inputs' own total weight, sum_i w_i f(s_i) x_i / sum_i w_i.  So a stale
 * update moves the model less, as FedBuff's sum of s(t)-scaled deltas
 * does, even when it comes alone (a mean normalised by the discounted
 * weights would give it back its full size); and the result, whose base
 * is the newest model and whose weight is sum_i w_i, reduces again with
 * others as any update does.  Only an operation that weighs its inputs
 * (weighs = 1: the mean) takes a rule other than constant.
 *
 * Every update counts once (uident.h): an input with the content of one
 * taken already, or from the same worker and base model as one (for a
 * reduction, holding such a worker's update), is refused, naming both;
 * a copy sent twice, a retried call, or a signed update replayed would
 * otherwise get the weight of two, and outvote the others under the
 * median and the trimmed mean, which assume one vote a worker.  With
 * r->allow_duplicates set it is taken.  Masked inputs keep their own
 * rule, one update a peer key (secagg.h).  The result lists under
 * "contributors" every (worker, base) pair of its inputs, so that a
 * reduction of reductions refuses two that overlap.
 *
 * Example-level DP-SGD updates (cg-train-step --example-clip: a "dp"
 * record whose release names its shard) of workers on disjoint shards
 * reduce together under any operation, each weighing one (its sample
 * count is the size of its Poisson samples, which its noise does not
 * cover): the result is a function of releases of which one example
 * touches one, so its record is the round's parallel composition
 * (privacy.h), after the model's record (cg_reducer_set_model) or, with
 * none, the one the inputs were computed from, which must then be the
 * same for all.  Refused, in one line: two of the same shard, of
 * shards of different splits or of one index of a split; one beside an
 * input without a record or with a noised release of no shard; one at
 * another delta than the others or the model; one whose history does
 * not end with its release; and any under --dp-clip.
 *
 * A tree: the result of a reduction (a manifest with "reduce") is an
 * input again only to an operation of the row's tree = 1 (mean, sum),
 * and to the same one: the mean of means weighted by their weights is
 * the mean of everything, up to float rounding (the fold of each level
 * rounds), where a median of medians, a trimmed mean of trimmed means,
 * a sent-mean of sent-means (its weights are per element, which the
 * result does not keep) or a sum of means is another statistic.  The
 * result of one input may still be coded again alone.
 */
#ifndef CG_REDUCE_H
#define CG_REDUCE_H

#include <stddef.h>

#include "cg.h"
#include "exchange/stale.h"
#include "exchange/uident.h"
#include "exchange/update.h"
#include "model/privacy.h"

struct cg_model;

/* What an all-at-once operation's slice sees besides the numbers. */
struct cg_reduce_pass {
	double param;       /* the row's parameter (0 where it takes none) */
	int pass;           /* this walk over the vector: 0 .. passes - 1 */
	size_t k;           /* the inputs */
	const double *w;    /* [k] their weights */
	double *sum;        /* [k] zero at the start of each pass, kept
	                     * across its slices: what the pass adds up */
	const double *last; /* [k] sum as the previous pass left it */
};

struct cg_reduce_op {
	const char *name;
	const char *help;  /* a few words for --help */
	const char *param; /* the parameter's name (--op NAME:PARAM), or
	                    * NULL: the row takes none */
	double pmin, pmax; /* its range, */
	int popen;         /* open at pmin (1), at pmax (2) or both (3) */
	int streams;       /* 1: init/add/finish; 0: slice */
	int weighs;        /* 1: the inputs' weights count (a staleness
	                    * rule other than constant needs it) */
	int masked;        /* 1: takes masked updates, of which it is the
	                    * weighted mean (add them up apart, below) */
	int tree;          /* 1: a reduction of its own results is the
	                    * reduction of their inputs (mean, sum), so
	                    * it takes them; 0: it refuses a result of
	                    * any reduction beside another input */
	void (*init)(float *acc, const float *x, size_t n, double w);
	void (*add)(float *acc, const float *x, size_t n, double w);
	void (*finish)(float *acc, size_t n, double wsum);
	int passes; /* walks over the inputs (0 counts as 1) */
	void (*slice)(struct cg_reduce_pass *p, float *out,
	              const float *const *in, size_t n);
};

/* The operations: how many, and row i, in the order --help lists them
 * (the built-in ones, then those registered), NULL past the last.  Row 0
 * is the default. */
int cg_reduce_op_count(void);
const struct cg_reduce_op *cg_reduce_op_at(int i);
/*
 * Add op (it must outlive every use) after the others.  0, or -1 with a
 * message: a name empty, over 32 characters or with a ':', or taken
 * already; no help; a streaming row without init and add, another
 * without slice; a parameter's range empty; too many registered.
 */
int cg_reduce_op_register(const struct cg_reduce_op *op);

/* The operation called name (no parameter), or NULL with a message
 * listing them. */
const struct cg_reduce_op *cg_reduce_op_find(const char *name);
/*
 * The operation spec names, "NAME" or "NAME:PARAM", its parameter into
 * *param (0 where it takes none).  NULL with a message: an unknown name
 * (the message lists them), a parameter missing, one given to a row
 * that takes none, or one that is not a number in the row's range.
 */
const struct cg_reduce_op *cg_reduce_op_parse(const char *spec, double *param);

/* The most inputs an all-at-once operation takes (each element's values
 * sit on the stack to be sorted). */
#define CG_REDUCE_MAX_KEPT 1024

/* Elements per slice on the all-at-once path: 1 MiB of f32 per input. */
#define CG_REDUCE_SLICE ((size_t)1 << 18)

/* An input measured against the model of a reduction: used, with its
 * factor, or left out for its staleness (dropped). */
struct cg_stale_in {
	char *name;
	uint64_t base_step, staleness;
	double factor;
	int dropped;
};

/*
 * A running reduction.  Every input must be of one kind (all grads or
 * all deltas), computed from one base model (cg_update_check_base_of
 * against the first input's base) or, for a reduction told its model,
 * from that model or an earlier one (cg_update_staleness) and with that
 * model's tensors, with the first input's tensors, a
 * positive weight (cg_update_check_weight) and finite values.  The
 * result is a valid input again: it carries the total weight and sample
 * count of the inputs used, so reducing partial means gives the mean of
 * everything.
 */
struct cg_reducer {
	const struct cg_reduce_op *op;
	double param;       /* the operation's parameter */
	int sliced;         /* keep the inputs and reduce them slice by slice */
	size_t slice;       /* elements per slice on that path */
	int skip_nonfinite; /* leave out an input with a value not finite */
	int allow_duplicates;     /* take an update that counts already */
	struct cg_uident_set ids; /* the identities taken */
	/* The first input used, whose views and manifest the result
	 * takes, and the result: one dense f32 tensor per view, the
	 * running fold when streaming. */
	struct cg_update *first;
	struct cg_file *acc;
	struct cg_update **kept; /* sliced: every input, first included */
	size_t nkept, capkept;
	double weight;  /* total weight */
	double samples; /* total samples */
	double loss;    /* weighted loss sum */
	uint64_t inputs;
	uint64_t skipped; /* inputs left out (skip_nonfinite) */
	/* The keys that signed the inputs, each once: the result's
	 * manifest lists their fingerprints under "signers". */
	unsigned char (*signers)[32];
	size_t nsigners, capsigners;
	double fold_seconds; /* folding the inputs in: decoding, adding */
	/* Masked inputs: their integer sum (NULL with plain inputs). */
	struct cg_mask_sum *masked;
	/* The model the reduction is for (NULL: the first input's base):
	 * borrowed, its digest and step, its name in messages. */
	const struct cg_model *model;
	char model_base[65];
	uint64_t model_step;
	const char *model_name;
	uint64_t max_staleness; /* staler inputs are left out */
	struct cg_stale_weight stale;
	/* Every input measured against the model, in the order given. */
	struct cg_stale_in *stale_in;
	size_t nstale, capstale;
	uint64_t dropped; /* inputs left out as too stale */
	/* The names of the inputs left out (cg_reducer_add returned 1:
	 * not finite, or too stale), in the order given; owned. */
	char **left_out;
	size_t nleft_out, capleft_out;
	/* Differential privacy (cg_reducer_set_budget, _set_dp): dp_clip
	 * > 0 clips; dp_sigma > 0 adds noise drawn from dp_seed; masked
	 * inputs may bring their noise shares instead (share); dp, the
	 * model's record (or none), gets the release (noised). */
	double dp_clip, dp_sigma, dp_q, dp_delta, dp_target;
	int dp_budget; /* cg_reducer_set_budget was called */
	uint64_t dp_seed;
	struct cg_dp dp;
	struct cg_dp_share share;
	int share_set, noised;
	uint64_t dp_clipped; /* inputs scaled down by the clip */
	/* Example-level DP-SGD updates on disjoint shards (privacy.h):
	 * their releases joined so far, and the record the first was
	 * computed from; NULL before the first such input. */
	struct cg_dp *pdp, *pbase;
	/* Slice slice_i of slice_n of the tensors (slice.h; slice_n 0:
	 * all of them): whole inputs are cut to it as they come. */
	int slice_i, slice_n;
	/* The first input's "reduce" when it is a reduction's result, ""
	 * for a worker's update: a tree reduces by one operation. */
	char first_how[96];
};

/* A reducer running op with parameter param (cg_reduce_op_parse):
 * streaming when op streams (set r->sliced afterwards to force the
 * sliced path), sliced otherwise. */
void cg_reducer_init(struct cg_reducer *r, const struct cg_reduce_op *op,
                     double param);
/*
 * Make r a reduction for model m (borrowed: it must outlive r), named
 * mname in messages: inputs staler than max_staleness (UINT64_MAX: no
 * limit) are left out, the others weighed by w; the result's base is m.
 * Before the first input.  0, or -1 with a message when w is not
 * constant and r's operation does not weigh its inputs, or m's privacy
 * record (privacy.h, kept as what the round adds to) is not sound.
 */
int cg_reducer_set_model(struct cg_reducer *r, const struct cg_model *m,
                         const char *mname, uint64_t max_staleness,
                         const struct cg_stale_weight *w);
/*
 * The budget differential privacy counts r's round against, whether the
 * noise is added here (cg_reducer_set_dp) or by the workers (masked
 * inputs carrying a noise share, privacy.h): the release sampled at
 * rate q (0 < q <= 1; 1 where not set), at delta (0: the model's
 * record's, else 1e-5), after the record of r's model (read by
 * cg_reducer_set_model); target > 0 refuses a round that would bring
 * epsilon past it ("this round would spend epsilon E at delta D in all
 * (F so far), past --target-epsilon T"), before the first input where
 * the noise is added here, in cg_reducer_finish where the workers
 * added it.  A
 * budget set makes a round without noise fail in cg_reducer_finish.
 * After cg_reducer_set_model, before the first input.  0, or -1 with a
 * message: delta is not the model's record's.
 */
int cg_reducer_set_budget(struct cg_reducer *r, double q, double delta,
                          double target);

/*
 * Differential privacy added here (after cg_reducer_set_budget, if
 * any, and before the first input): every input clipped to L2 norm clip
 * (> 0) and weighed alike; with sigma > 0, noise of std sigma clip / W
 * added to the mean from a stream seeded with seed.  0, or -1 with a
 * message: r's operation is not a streaming weighted mean, or the round
 * is past the budget's target.  Then cg_reducer_add refuses a masked
 * input (its values cannot be clipped) and one that stands for more
 * than one update.  Masked inputs with noise shares need none of it:
 * their shares must agree (clip, sigma, the round's peers, weight 1).
 */
int cg_reducer_set_dp(struct cg_reducer *r, double clip, double sigma,
                      uint64_t seed);

/*
 * Make r the reduction of slice i of n of the tensors (slice.h), before
 * the first input: whole inputs are cut to it, slices of it are taken
 * as they are, other slices refused.  0, or -1 with a message: an
 * operation of more than one pass (its norms are over the whole
 * update), or differential privacy (its clip is over the whole update).
 */
int cg_reducer_set_slice(struct cg_reducer *r, int i, int n);

/*
 * Add u (taken over: freed now when streaming or left out, at the end
 * otherwise).  Returns 0; 1 when u holds a value that is not finite and
 * r->skip_nonfinite is set, or when u is staler than r->max_staleness:
 * u is left out, as if never given (but listed with its staleness and
 * its name noted in r->left_out), and the message says why, starting
 * with u's name; or -1 with such a message (or "out of memory")
 * when u breaks a rule above (an update that counts already included:
 * the message names the input that brought it).
 */
int cg_reducer_add(struct cg_reducer *r, struct cg_update *u);
/* The result (the reducer gives it up; the caller frees it), or NULL with
 * a message when nothing was added or a value of the result is not
 * finite.  Either way r's inputs are released; its counts and left_out
 * stay for a report until cg_reducer_free. */
struct cg_file *cg_reducer_finish(struct cg_reducer *r);
/*
 * A surviving peer's reveal (secagg.h; text [len], named name) for r's
 * masked round of a threshold, after every input: 0, or -1 with a
 * message (no masked inputs, or what cg_mask_sum_reveal refuses).
 */
int cg_reducer_reveal(struct cg_reducer *r, const char *text, size_t len,
                      const char *name);
/* -1 with a message when r's masked round has a threshold and fewer
 * updates than it are in: no reveal can close it.  Else 0. */
int cg_reducer_reveal_ready(const struct cg_reducer *r);
void cg_reducer_free(struct cg_reducer *r);

/*
 * cg-reduce --log's object of a finished reduction r whose result is f:
 * "inputs", "samples", "seconds" (secs, the caller's clock over the
 * call), "fold_seconds", "skipped" (the inputs left out, by name),
 * with differential privacy "dp_clipped" (the inputs the clip scaled
 * down) and "epsilon", and, with a model, "staleness" (f's manifest's: how
 * every input stood against it).  A new object the caller owns, or NULL when
 * out of memory.
 */
struct cJSON *cg_reducer_log_json(const struct cg_reducer *r,
                                  const struct cg_file *f, double secs);

#endif
