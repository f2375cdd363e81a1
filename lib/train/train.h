/*
 * train/train.h - the training loop of one worker call: batches, gradient
 * accumulation, local optimizer steps, and what a call emits.
 */
#ifndef CG_TRAIN_H
#define CG_TRAIN_H

#include "data/shard.h"
#include "model/model.h"
#include "nn/optim.h"
#include "train/state.h"

enum cg_emit { CG_EMIT_GRAD, CG_EMIT_DELTA, CG_EMIT_MODEL };
enum cg_order { CG_ORDER_SHUFFLE, CG_ORDER_SEQUENTIAL };

/*
 * DP-SGD (Abadi et al. 2016): each step's batch is a Poisson sample of
 * the shard (each example in with probability q, on its own), each
 * example's own gradient is clipped to L2 norm clip (the arch's
 * dp_batch, without a pass per example), and the clipped sum gets
 * N(0, (sigma clip)^2) on every coordinate and is divided by the
 * expected batch q n: one release of the subsampled Gaussian mechanism
 * of noise multiplier sigma at rate q per step (core/rdp.h counts what
 * they spend).  The sampling and the noise draw from seed, which must
 * stay secret: who knows it can take the noise back out.  Their streams
 * are apart from every stream of the options' seed (the data order, the
 * model noise), even where the two seeds are equal.
 */
struct cg_dpsgd {
	double clip;  /* C > 0 */
	double sigma; /* >= 0; 0: clipped, not private */
	double q;     /* the sampling rate, in (0, 1] */
	uint64_t seed;
};

struct cg_train_opts {
	int steps;	 /* K micro-batches (grad) or optimizer steps */
	int batch;	 /* B examples per micro-batch */
	uint64_t seed;	 /* data order and model noise */
	enum cg_emit emit;
	enum cg_order order;
	struct cg_optim opt; /* inner optimizer (delta, model) */
	double clip;	     /* global gradient norm limit; 0 = none */
	/* Toward a teacher (model.h); NULL: plain training.  The teacher
	 * runs forward only, in the student's chunks, checkpointed. */
	const struct cg_distill *distill;
	/* Stop after the step during which cg_now() (core/clock.h) reaches
	 * this, even if fewer than steps are done; 0: run all steps.  The
	 * result then holds the steps done, and is the same as a call of
	 * that many steps but for the model noise, which stays seeded as
	 * in a call of all steps. */
	double deadline;
	/* Give back the shard's payload pages after each step
	 * (cg_shard_page_out): a shard larger than the memory budget is
	 * read a batch at a time from its file, never held whole.  The
	 * bytes read, and so the result, are the same. */
	int page_out;
	/* The views that do not train (cg_train_freeze): frozen [nviews]
	 * is 1 where a view is frozen; NULL: every view trains.  A frozen
	 * view gets no gradient (zero in a grad), no step and no moments:
	 * a delta call's moments (its state's "opt.m", "opt.v") hold only
	 * the views that train, laid end to end in the model's order; a
	 * model call keeps the model's own, whole, and leaves a frozen
	 * view's as they are. */
	const uint8_t *frozen;
	/* Quantization-aware training (model/qat.h): the weight matrices
	 * run as cg-quantize would store them in this type, and their
	 * gradient there steps the f32 masters; CG_F32 (0): none.  A model
	 * with adapters is refused. */
	enum cg_dtype qat;
	/* DP-SGD (NULL: plain training): every micro-batch is then a
	 * Poisson sample of the shard at rate dpsgd->q, and batch the
	 * most examples the arch is given at once; every micro-batch is
	 * one release.  No distillation; an arch without dp_batch is
	 * refused. */
	const struct cg_dpsgd *dpsgd;
	/*
	 * Dynamic loss scaling (f16 products, nn/gemm.h): loss_scale > 0
	 * is the scale a call starts at where its state keeps none
	 * ("amp.scale", "amp.good"), a power of two in [1, 2^24]; 0: none.
	 * Each micro-batch's gradient is made at the scale, then checked
	 * and divided by it: one with an element not finite is skipped (no
	 * optimizer step, nothing in a grad; the model's step count moves
	 * on), the scale halved and the skip logged; after scale_growth
	 * good micro-batches in a row (0: never) the scale doubles.  Not
	 * with DP-SGD.  res->skipped counts the skips, res->loss_scale is
	 * the scale at the end.
	 */
	double loss_scale;
	int scale_growth;
	/*
	 * An exponential moving average of the parameters (model mode):
	 * ema is its decay in (0, 1); 0: none.  After each optimizer step
	 * the average a moves toward the parameters p by
	 * a += (1 - d) (p - a), d = min(ema, (1 + n) / (10 + n)) with n the
	 * model's step count after the step, so that the first steps,
	 * far from the start, are not outweighed by it.  It starts from
	 * the parameters at the call's start, or from the state's ("ema")
	 * where the state keeps one; it is left in out [nparams] at the
	 * end (masked as the model is; with a state, which holds it too,
	 * out may be NULL).  A state that keeps an average is
	 * refused by a call without one (the average would miss steps).
	 */
	double ema;
	/* Called for each micro-batch skipped (may be NULL): its number
	 * (from 1), the call's, and the scale it had, with progress_ctx. */
	void (*skip)(void *ctx, int step, int total, double scale);
	/* Called after each micro-batch with the mean loss so far (may be
	 * NULL). */
	void (*progress)(void *ctx, int done, int total, double loss);
	void *progress_ctx;
};

/*
 * The views of m whose names match one of the fnmatch(3) patterns glob
 * [n], and for a model with adapters (model/lora.h) every view but
 * theirs: *frozen [m->nviews] (the caller frees) 1 where a view is
 * frozen, or NULL where none is.  Returns 0, or -1 with a message when a
 * pattern matches no view or every view is frozen (nothing would train).
 * cg_train_run refuses a model with adapters whose other views are not
 * all frozen.
 */
int cg_train_freeze(const struct cg_model *m, const char *const *glob, int n,
                    uint8_t **frozen);
/* The parameters of the views of m that train under frozen (NULL: all):
 * the length of a delta call's moments. */
size_t cg_train_trained(const struct cg_model *m, const uint8_t *frozen);

/*
 * Worker state kept between calls (lib/train/state.h), by name: "cursor" (u64,
 * examples consumed) for every emit kind and, for delta, the inner
 * optimizer's "opt.t" (u64, steps taken), "opt.m" and "opt.v" (f32 [P],
 * as the optimizer needs them), and for a model call with o->ema the
 * moving average "ema" (f32 [nparams]).  Put them into st where st has
 * none (the cursor where a call without a state starts, the average the
 * parameters, the rest zeroed), checking that those st has fit m and
 * that o keeps an average where st has one: 0, or -1 with a message.
 * cg_train_run does the same itself; a caller that calls this first gets
 * a misfit state reported apart from the run's errors.
 */
int cg_train_state_init(struct cg_state *st, const struct cg_model *m,
			const struct cg_train_opts *o);

/* Summary of one call. */
struct cg_train_result {
	struct cg_metrics mean; /* over every micro-batch of the call */
	int steps;	/* micro-batches or steps done: o->steps but past a
			   deadline */
	uint64_t samples;
	double weight;	  /* what a reduction weighs it by: scored tokens
			     for text, else samples */
	double grad_norm; /* of the emitted gradient (grad mode) */
	int skipped;	  /* micro-batches skipped by loss scaling */
	double loss_scale; /* at the end (o->loss_scale > 0), else 0 */
};

/*
 * Run one call on model m and shard s.  In grad mode, out receives the
 * mean gradient [nparams] (for text, the mean per scored token over all
 * micro-batches: each weighted by its tokens); in delta mode the new - old
 * weights and m is left as it was; in model mode m is trained in place
 * (m->step += K) and out receives the moving average of the parameters
 * (o->ema), unused without one.  st may be NULL (no state between
 * calls): the cursor is then derived from m's step, as it is for a state
 * that has none.  Of a shard opened with cg_shard_open_late, the call
 * stops at the first step after the payload fails its digest; it does
 * not wait for the verdict, which the caller does before anything made
 * from the call leaves the process.  Returns 0 or -1 with a message.
 */
int cg_train_run(struct cg_model *m, const struct cg_shard *s,
		 const struct cg_train_opts *o, struct cg_state *st, float *out,
		 struct cg_train_result *res);

/*
 * How a call spends memory: model chunks of at most chunk examples (0:
 * the arch's default) with or without activation checkpointing, and what
 * that is expected to cost in all (bytes of resident memory).
 */
struct cg_memplan {
	int chunk;
	int checkpoint;
	uint64_t estimate;
	uint64_t floor; /* the least any plan needs */
};

/*
 * Plan a call of cg_train_run(m, s, o, st, ...) so that the process stays
 * within budget bytes (0: no limit), given that it holds resident bytes
 * now (model, shard and state loaded) and that out (nparams floats, grad
 * and delta calls) is still to be allocated.  Keeping every activation of
 * whole batches comes first; then smaller chunks, down to 4 examples, with
 * gradients accumulated over them (the same mean gradient); then
 * activation checkpointing, the largest chunk that fits.  A teacher
 * (o->distill) runs in the same chunks, its workspace counted beside the
 * model's (struct cg_arch's teacher_bytes).  checkpoint != 0
 * asks for checkpointing whatever the budget.  A model whose form has no
 * checkpointing (struct cg_arch's can_checkpoint: an MLP where the
 * convolutional form has it) is only chunked.  Sets m->chunk and
 * m->checkpoint, and *p.  Returns 0, or -1 with a message when nothing
 * fits or checkpointing is asked of a model without it.
 */
int cg_train_plan(struct cg_model *m, const struct cg_train_opts *o,
		  const struct cg_state *st, uint64_t budget,
		  uint64_t resident, int checkpoint, struct cg_memplan *p);

/*
 * The file a grad or delta call emits (kind "grad" or "delta"): the
 * update module's cg_update_new with the call's samples, weight and mean
 * loss, less the views frozen [nviews] (NULL: none) marks (a partial
 * update); buf is borrowed and must outlive the file.
 */
struct cg_file *cg_update_file(const struct cg_model *base, const char *kind,
			       const float *buf,
			       const struct cg_train_result *res,
			       const uint8_t *frozen);

/*
 * Run a pipeline stage's call (GPipe's fill and drain, or 1F1B,
 * train/pipe.h): m a stage's model (cg_stage_read) holding stage st;
 * stage 0 reads shard s (NULL elsewhere) and says o's steps and batch,
 * its emit and so down the pipe, which the others take from it into o
 * and so (their own o->emit must be stage 0's).  With so->wire bf16 the
 * activations and their gradients cross rounded to bf16 (half the
 * bytes), with q8_0 in blocks of 32 values with one f16 scale (34 bytes
 * a block, 27% of f32's; a sequence's values, T x C, must be whole
 * blocks); then not the unsplit call's bits.  Each step runs the batch in
 * micro-batches of the rows cgpt's chunks would hold under the same
 * count (each stage but the last keeps the activations of the
 * micro-batches in flight from their forward to their backward pass;
 * with so->recompute, or where so->max_memory cannot hold them, it
 * holds only their inputs and runs each forward pass again before the
 * backward pass: the same bits).  Then, by o->emit: model,
 * the optimizer's step on the stage's views; grad, no step, and out
 * [nparams] (zeros, the caller's) gets in the stage's range the mean
 * gradient per scored token of the call; delta, steps on moments of the
 * call's own from zero, out's range gets the new parameters less the
 * old, and m is left as it was.  With the same options the bits are
 * those cg_train_run makes with m->chunk = ceil(B / so->micro), when
 * so->wire is f32: joined, the stages' outputs are the unsplit call's.  No
 * clip, freeze, teacher, DP-SGD, QAT or deadline.  res: stage 0's is the
 * call's; the others know no losses (the "end" frame brings the mean),
 * but of a grad or delta call the tokens (res->weight).
 * Returns 0, or -1 with a message.
 */
struct cg_stage;
struct cg_pipe;
/* What stage 0 says down the pipe beside o's steps and batch. */
struct cg_stage_opts {
	int micro; /* micro-batches a batch is run in */
	/* activations and their gradients on the wire: CG_F32, CG_BF16 or
	 * CG_Q8_0 (cg_train_wire_ok) */
	enum cg_dtype wire;
	int one_f_one_b; /* the schedule: 1F1B, else GPipe */
	/* grad and delta: who computes the update (exchange/uident.h), the
	 * shard's identity in four little-endian words and the seed;
	 * stage 0's caller sets it, the others hear it */
	uint64_t worker[5];
	/* each stage's own: recompute, run each forward pass again before
	 * its backward pass, not keeping the activations of the
	 * micro-batches in flight; max_memory (0: none), the bytes the
	 * stage may take by the plan's count (train/plan.h): kept
	 * activations only where they fit, else refused */
	int recompute;
	uint64_t max_memory;
	/* what the call chose: the activations kept (no forward pass run
	 * again: always on the last stage), the bytes it takes */
	int kept;
	uint64_t mem;
	/* what the call says of itself (--log): the wall seconds of its
	 * steps, and of those the seconds it sat waiting for a neighbour's
	 * frame (the schedule's bubble, and a slower neighbour's time);
	 * the first step's apart, which waits for the stages below to
	 * start */
	double step_s, wait_s, first_step_s, first_wait_s;
};
/*
 * Whether stage st of m keeps the activations of the micro-batches in
 * flight under o's batch and so's micro-batches, schedule and wire (as
 * cg_train_stage would): not the last stage, nor with so->recompute,
 * nor where so->max_memory cannot hold them (the plan's count of the
 * stage's bytes: train/plan.h).  so->kept and so->mem get what is
 * chosen.  0, or -1 with a message where even the stage without them
 * does not fit so->max_memory, or where so->wire cannot carry the
 * stage's activations (not f32, bf16 or q8_0, or q8_0 and a sequence's
 * T x C values not whole blocks).  cg_train_stage asks it once it has
 * heard the first stage's options; the first stage's caller may ask it
 * before starting the others.
 */
int cg_train_stage_memory(const struct cg_model *m, const struct cg_stage *st,
                          const struct cg_train_opts *o,
                          struct cg_stage_opts *so);
int cg_train_stage(struct cg_model *m, const struct cg_stage *st,
                   const struct cg_shard *s, struct cg_train_opts *o,
                   struct cg_stage_opts *so, const struct cg_pipe *p,
                   float *out, struct cg_train_result *res);

/* Evaluate m over all of s in batches of B (no gradient); noise from
 * seed.  The means are per example, but for text shards loss and
 * bits_per are exact means per scored token over the whole shard (part[0]
 * is then tokens per example; see train.c).  progress (may be NULL) is
 * called after each batch with the examples scored so far and no loss
 * (NAN).  Returns 0 or -1. */
int cg_eval_shard(struct cg_model *m, const struct cg_shard *s, int B,
		  uint64_t seed, struct cg_metrics *out,
		  void (*progress)(void *ctx, int done, int total,
				   double loss),
		  void *progress_ctx);

#endif
