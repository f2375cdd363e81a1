/*
 * cg-train-step - run K micro-batches of training on one worker.
 *
 * Emits the mean gradient (synchronous data parallel), the change of the
 * weights after K local optimizer steps (local SGD, DiLoCo's inner loop),
 * or the trained model itself (plain single-machine training).  A state
 * file keeps what a worker must remember between calls: the data cursor
 * and the inner optimizer's moments.  Same inputs and seed, same bytes.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "core/rdp.h"
#include "exchange/dp.h"
#include "exchange/secagg.h"
#include "exchange/uident.h"
#include "exchange/update.h"
#include "model/privacy.h"
#include "nn/gemm.h"
#include "train/audit.h"
#include "train/encode.h"
#include "train/report.h"
#include "train/pipe.h"
#include "train/train.h"
#include "model/stage.h"

#define MAX_BATCH (1 << 20)
#define MAX_STEPS (1LL << 40)
/* --teacher-temp: past these a softmax is one-hot or flat in float. */
#define MIN_TEMP 0.05
#define MAX_TEMP 100
/* --distill-steps: the teacher's 2N - 1 within the largest T */
#define MAX_DISTILL_STEPS 50000
/* --distill-guidance, as cg-sample's --guidance */
#define MAX_GUIDANCE 100
/* --time-limit: a year */
#define MAX_SECONDS (366.0 * 86400)
/* --freeze: patterns at most */
#define MAX_FREEZE 64

enum {
	OPT_BUDGET = CG_KEY_OWN,
	OPT_CHECKPOINT,
	OPT_CLIP,
	OPT_CODEC,
	OPT_DETERMINISTIC,
	OPT_DISTILL_GUIDANCE,
	OPT_DISTILL_STEPS,
	OPT_DP_CLIP,
	OPT_DP_NOISE,
	OPT_DP_SEED,
	OPT_EMA,
	OPT_EMA_OUT,
	OPT_EXAMPLE_CLIP,
	OPT_EXAMPLE_DELTA,
	OPT_EXAMPLE_NOISE,
	OPT_FEEDBACK_DECAY,
	OPT_FREEZE,
	OPT_NO_FEEDBACK,
	OPT_LOG,
	OPT_MASK,
	OPT_MASK_BITS,
	OPT_MASK_THRESHOLD,
	OPT_MASK_ROUND,
	OPT_MAX_MEMORY,
	OPT_MICRO,
	OPT_NEXT,
	OPT_WIRE,
	OPT_PIPELINE,
	OPT_ORDER,
	OPT_PEERS,
	OPT_PRECISION,
	OPT_LOSS_SCALE,
	OPT_SCALE_GROWTH,
	OPT_QAT,
	OPT_SEED,
	OPT_TARGET_EPSILON,
	OPT_TEACHER,
	OPT_TEACHER_TEMP,
	OPT_TEACHER_WEIGHT,
	OPT_TIME_LIMIT,
};

/* What the command line asks for. */
struct args {
	const char *model, *data, *out, *state, *log, *emit_name, *teacher;
	const char *ema_out; /* --ema-out; --ema is o.ema */
	const char *emit_given; /* --emit was given */
	double tau, alpha;
	const char *tau_set, *alpha_set;
	/* --distill-steps, --distill-guidance: step distillation */
	int dsteps;
	double dguidance;
	const char *dguidance_set;
	double start, time_limit; /* cg_now() at the start; 0: no limit */
	struct cg_train_opts o;
	struct cg_optim_cli oc;
	long long micro;  /* --micro-batches; 0: the arch's chunks */
	const char *next; /* --next: the next pipeline stage's command */
	int stage;        /* a pipeline stage's call (--next, or no -d) */
	int wire;         /* --wire: wire_names' index */
	int pipeline;     /* --pipeline: 1 1F1B */
	enum cg_compress comp;
	long long steps, batch;
	int threads;
	uint64_t max_memory, budget;
	const char *codec_name;
	struct cg_uspec codec;
	double decay;
	int quiet, ckpt, coded, no_feedback, deterministic, precision;
	/* --loss-scale, --scale-growth: f16's dynamic loss scaling */
	double loss_scale;
	long long scale_growth;
	const char *scale_given;
	const char *mask, *peers, *mask_round; /* --mask and its options */
	long long mask_bits, mask_threshold;
	/* --dp-clip, --dp-noise, --dp-seed: a share of DP's noise */
	double dp_clip, dp_noise;
	uint64_t dp_seed;
	const char *dp_given, *dp_seed_given;
	/* --example-clip, --example-noise, --example-delta,
	 * --target-epsilon: DP-SGD */
	double ex_clip, ex_noise, ex_delta, target_eps;
	const char *ex_given, *ex_noise_given, *ex_delta_given, *target_given;
	const char *freeze[MAX_FREEZE]; /* --freeze GLOB, repeatable */
	int nfreeze;
};

/* --emit's and --order's names, in their enums' order. */
static const char *const emit_names[] = {"grad", "delta", "model", NULL};
static const char *const order_names[] = {"shuffle", "sequential", NULL};
/* --wire's names, the dtypes' own (cg_dtype_parse takes them) */
static const char *const wire_names[] = {"f32", "bf16", "q8_0", NULL};
static const char *const pipeline_names[] = {"gpipe", "1f1b", NULL};

/* --mask-round TEXT, of at most CG_MASK_ROUND_MAX bytes. */
static int
parse_round(const char *arg, void *where)
{
	if (strlen(arg) > CG_MASK_ROUND_MAX)
		return cg_seterr("--mask-round: longer than %d bytes",
		                 CG_MASK_ROUND_MAX);
	*(const char **)where = arg;
	return 0;
}

/* --freeze GLOB: one more pattern. */
static int
freeze_option(void *ctx, const struct cg_getopt *g, int c)
{
	struct args *a = ctx;

	(void)c;
	if (a->nfreeze == MAX_FREEZE)
		return cg_usage("--freeze: more than %d", MAX_FREEZE);
	a->freeze[a->nfreeze++] = g->arg;
	return CG_CONTINUE;
}

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"model", 'm', "FILE", "the model to start from", CG_OPT_STR(model)},
    {"data", 'd', "SHARD", "the worker's data shard", CG_OPT_STR(data)},
    {"emit", 'e', "WHAT", "grad, delta or model (grad)",
     CG_OPT_ENUM(o.emit, emit_names), CG_OPT_SEEN(emit_given)},
    {"steps", 'k', "K", "micro-batches or optimizer steps (1)",
     CG_OPT_I64(steps, 1, MAX_STEPS)},
    {"batch", 'b', "B", "examples per micro-batch (128)",
     CG_OPT_I64(batch, 1, MAX_BATCH)},
    {"state", 's', "FILE", "worker state kept between calls",
     CG_OPT_STR(state)},
    {"output", 'o', "FILE", "where to write (- or a pipe: stdout)",
     CG_OPT_STR(out)},
    {"clip", OPT_CLIP, "X", "clip the gradient norm to X",
     CG_OPT_F64(o.clip, 0, 1e30)},
    {"freeze", OPT_FREEZE, "GLOB",
     "tensors whose names match GLOB do not train (repeatable)",
     CG_OPT_CUSTOM},
    {"qat", OPT_QAT, "TYPE",
     "quantization-aware: run the weight matrices as cg-quantize\n"
     "stores them in TYPE (q8_0, q4_1, q4_0, ...), train f32",
     CG_OPT_PARSE(o.qat, cg_opt_wtype)},
    {"order", OPT_ORDER, "NAME", "shuffle or sequential (shuffle)",
     CG_OPT_ENUM(o.order, order_names)},
    {"seed", OPT_SEED, "N", "data order and model noise (0)",
     CG_OPT_U64(o.seed)},
    {"time-limit", OPT_TIME_LIMIT, "SECONDS",
     "stop after the step that passes SECONDS; emit what is done",
     CG_OPT_F64(time_limit, 0, MAX_SECONDS), CG_OPT_POSITIVE},
    {"teacher", OPT_TEACHER, "FILE",
     "distill: learn from this model's outputs too", CG_OPT_STR(teacher)},
    {"teacher-temp", OPT_TEACHER_TEMP, "T",
     "the temperature of both distributions (1)",
     CG_OPT_F64(tau, MIN_TEMP, MAX_TEMP), CG_OPT_SEEN(tau_set)},
    {"teacher-weight", OPT_TEACHER_WEIGHT, "A",
     "the teacher term's weight in [0, 1] (0.9; 1 with --distill-steps)",
     CG_OPT_F64(alpha, 0, 1), CG_OPT_SEEN(alpha_set)},
    {"distill-steps", OPT_DISTILL_STEPS, "N",
     "diffusion: one DDIM step of N learns two of the teacher's",
     CG_OPT_INT(dsteps, 2, MAX_DISTILL_STEPS)},
    {"distill-guidance", OPT_DISTILL_GUIDANCE, "W",
     "the guidance of the teacher --distill-steps learns (0)",
     CG_OPT_F64(dguidance, 0, MAX_GUIDANCE), CG_OPT_SEEN(dguidance_set)},
    {"ema", OPT_EMA, "DECAY",
     "keep a moving average of the weights (decay 0.999, say)",
     CG_OPT_F64(o.ema, 0, 1), CG_OPT_POSITIVE},
    {"ema-out", OPT_EMA_OUT, "FILE", "write the moving average as a model",
     CG_OPT_STR(ema_out)},
    {"log", OPT_LOG, "FILE", "append one JSON line of metrics",
     CG_OPT_STR(log)},
    {"max-memory", OPT_MAX_MEMORY, "SIZE",
     "fit the call in SIZE (256M, 2G): chunks, checkpointing",
     CG_OPT_SIZE(max_memory), CG_OPT_POSITIVE},
    {"micro-batches", OPT_MICRO, "M",
     "run each batch in M micro-batches, gradients accumulated",
     CG_OPT_I64(micro, 1, MAX_BATCH)},
    {"next", OPT_NEXT, "CMD",
     "a pipeline stage: run the next stage as sh -c CMD", CG_OPT_STR(next)},
    {"pipeline", OPT_PIPELINE, "NAME",
     "the first stage's schedule: gpipe or 1f1b (gpipe)",
     CG_OPT_ENUM(pipeline, pipeline_names)},
    {"wire", OPT_WIRE, "DTYPE",
     "the first stage's activations between stages: f32, bf16 or q8_0 "
     "(f32)",
     CG_OPT_ENUM(wire, wire_names)},
    {"checkpoint-activations", OPT_CHECKPOINT, NULL,
     "recompute activations in the backward pass", CG_OPT_FLAG(ckpt)},
    CG_OPT_THREADS(threads, CG_THREADS_HELP),
    {"deterministic", OPT_DETERMINISTIC, NULL,
     "the same bytes at any thread count on any x86-64 (built-in "
     "kernels); a grad or delta records its call for cg-audit",
     CG_OPT_FLAG(deterministic)},
    CG_OPT_PRECISION(OPT_PRECISION, precision),
    {"loss-scale", OPT_LOSS_SCALE, "S",
     "f16: the loss scale to start at, a power of two (65536)",
     CG_OPT_F64(loss_scale, 1, 16777216), CG_OPT_SEEN(scale_given)},
    {"scale-growth", OPT_SCALE_GROWTH, "N",
     "f16: double the scale after N good steps; 0 never (2000)",
     CG_OPT_I64(scale_growth, 0, 1 << 30), CG_OPT_SEEN(scale_given)},
    {"compress", 'z', "ALG", "none, gzip or zstd (none)",
     CG_OPT_PARSE(comp, cg_opt_compress)},
    {"codec", OPT_CODEC, "SPEC",
     "encode the grad or delta: f16, q8, q4, q2[:sr], topk:F, sign, "
     "lowrank:R",
     CG_OPT_PARSE(codec, cg_opt_codec), CG_OPT_PREFIX, CG_OPT_SEEN(codec_name)},
    {"budget", OPT_BUDGET, "BYTES",
     "fit the encoded update in BYTES (k, bits or rank; topk by default)",
     CG_OPT_SIZE(budget), CG_OPT_POSITIVE},
    {"no-error-feedback", OPT_NO_FEEDBACK, NULL,
     "do not keep what the codec did not send", CG_OPT_FLAG(no_feedback)},
    {"feedback-decay", OPT_FEEDBACK_DECAY, "X",
     "scale the kept residual by X before adding it (1)",
     CG_OPT_F64(decay, 0, 1)},
    {"mask", OPT_MASK, "KEY",
     "secure aggregation: mask the update with this X25519 key",
     CG_OPT_STR(mask)},
    {"peers", OPT_PEERS, "FILE",
     "the round's X25519 public keys, this worker's too (a file or dir)",
     CG_OPT_STR(peers)},
    {"mask-round", OPT_MASK_ROUND, "TEXT",
     "tells apart rounds from one model (\"\")",
     CG_OPT_PARSE(mask_round, parse_round)},
    {"mask-bits", OPT_MASK_BITS, "F", "fraction bits of the fixed point (32)",
     CG_OPT_I64(mask_bits, CG_MASK_MIN_FRAC, CG_MASK_MAX_FRAC)},
    {"mask-threshold", OPT_MASK_THRESHOLD, "T",
     "a round that closes with T of the peers' updates: a self-mask,\n"
     "shared among the peers (none: every peer's update is needed)",
     CG_OPT_I64(mask_threshold, 2, CG_MASK_MAX_PEERS)},
    {"dp-clip", OPT_DP_CLIP, "C",
     "with --mask: clip the update to L2 norm C, of weight 1",
     CG_OPT_F64(dp_clip, 0, 1e30), CG_OPT_POSITIVE, CG_OPT_SEEN(dp_given)},
    {"dp-noise", OPT_DP_NOISE, "SIGMA",
     "with --mask: add this worker's share of DP's noise,\n"
     "std SIGMA*C/sqrt(peers): the round's mean gets SIGMA*C/peers",
     CG_OPT_F64(dp_noise, 0, 1e6), CG_OPT_POSITIVE, CG_OPT_SEEN(dp_given)},
    {"dp-seed", OPT_DP_SEED, "N",
     "draw the share, or DP-SGD's sample and noise, from seed N,\n"
     "kept secret (the system's randomness)",
     CG_OPT_U64(dp_seed), CG_OPT_SEEN(dp_seed_given)},
    {"example-clip", OPT_EXAMPLE_CLIP, "C",
     "DP-SGD: clip each example's gradient to L2 norm C; each step\n"
     "a Poisson sample of the shard at rate B/N",
     CG_OPT_F64(ex_clip, 0, 1e30), CG_OPT_POSITIVE, CG_OPT_SEEN(ex_given)},
    {"example-noise", OPT_EXAMPLE_NOISE, "SIGMA",
     "DP-SGD: add N(0, (SIGMA*C)^2) to each step's clipped sum",
     CG_OPT_F64(ex_noise, 0, 1e6), CG_OPT_SEEN(ex_noise_given)},
    {"example-delta", OPT_EXAMPLE_DELTA, "D",
     "DP-SGD: the delta of the (epsilon, delta) spent (the model's,\n"
     "else 1e-5)",
     CG_OPT_F64(ex_delta, 0, 0.5), CG_OPT_POSITIVE,
     CG_OPT_SEEN(ex_delta_given)},
    {"target-epsilon", OPT_TARGET_EPSILON, "E",
     "DP-SGD: refuse a call that would bring the model's epsilon\n"
     "past E; without --example-noise, the least SIGMA that does not",
     CG_OPT_F64(target_eps, 0, 1e6), CG_OPT_POSITIVE,
     CG_OPT_SEEN(target_given)},
    {"quiet", 'q', NULL, "no progress bar or summary", CG_OPT_FLAG(quiet)},
    CG_OPT_ENCRYPT_TO,
    CG_OPT_SIGN,
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    CG_OPT_HEADING("The inner optimizer (delta and model):"),
    CG_OPTIM_OPTS(oc),
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-train-step",
    .synopsis = "-m MODEL -d SHARD [options] [-o OUT]",
    .about = "Run K micro-batches of training on one worker and emit the "
             "mean gradient,\nthe change of the weights, or the model.",
    .opts = opts,
    .epilog = "Exit status: 0 success, 1 failure, 2 usage error.",
};

/* What one call holds while it runs; freed by job_free. */
struct job {
	struct cg_model *m;
	struct cg_model *t; /* --teacher, or NULL */
	struct cg_distill distill;
	double carried; /* --distill-steps: the guidance the student carries */
	struct cg_train_opts o; /* a's, with the teacher */
	struct cg_shard *s;
	struct cg_state *st; /* NULL without --state */
	struct cg_state_call call;
	int has_sd;           /* st was read from a file: */
	unsigned char sd[32]; /* its identity, before the call */
	struct cg_memplan plan;
	struct cg_uspec spec; /* --codec, fitted to --budget */
	struct cg_mask mask;  /* --mask */
	struct cg_dpsgd dpsgd; /* --example-clip */
	struct cg_dp dp;       /* the model's record (--example-clip) */
	struct cg_train_result res;
	struct cg_file *f;
	struct cg_out out, sout, eout; /* eout: --ema-out */
	struct cg_file *ef;            /* --ema-out's file */
	/* grad and delta: what is emitted; model with --ema: the moving
	 * average [nparams] */
	float *buf;
	uint8_t *frozen; /* --freeze: [nviews], 1 where frozen; or NULL */
	struct cg_train_report rep; /* what the call did, for the log */
	int shown; /* a progress line was drawn: the summary follows */
};

/* The command line into a; CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	cg_optim_cli_init(&a->oc, CG_OPT_ADAM);
	if ((rc = cg_getopt_all(&cli, argc, argv, freeze_option, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	if (ind != argc)
		return cg_usage("unexpected argument");
	a->emit_name = emit_names[a->o.emit];
	return CG_CONTINUE;
}

/*
 * A pipeline stage's call: what it cannot do, then its training options.
 * Whether it needs -d and --next its file says (stage_job).  It emits
 * its model, or its grad or delta (the stages' options must agree: the
 * first says its own down the pipe).
 */
static int
validate_stage(struct args *a)
{
	const char *no = a->state        ? "--state"
	                 : a->o.ema > 0  ? "--ema"
	                 : a->mask       ? "--mask"
	                 : a->teacher    ? "--teacher"
	                 : a->nfreeze    ? "--freeze"
	                 : a->o.clip > 0 ? "--clip"
	                 : a->time_limit ? "--time-limit"
	                 : a->dp_given   ? "--dp-clip"
	                                 : NULL;

	if (no)
		return cg_usage("%s: not with a pipeline stage (--next, or "
		                "--emit without -d)",
		                no);
	if (a->precision == CG_PREC_F16)
		return cg_usage("--precision f16: not with a pipeline stage "
		                "(no loss scaling across stages yet)");
	if (strcmp(a->model, "-") == 0)
		return cg_usage("a pipeline stage's model is a file, not "
		                "standard input");
	if (a->budget && a->codec_name == NULL)
		cg_uspec_parse("topk", &a->codec);
	a->coded = a->codec_name != NULL || a->budget != 0;
	if (a->coded && a->o.emit == CG_EMIT_MODEL)
		return cg_usage("--codec and --budget encode a grad or a delta, "
		                "not a model");
	if (a->coded && cg_uspec_masked(&a->codec))
		return cg_usage("--codec masked: not with a pipeline stage");
	/* a stage keeps no state, where a residual would go */
	if (a->coded && !cg_uspec_lossless(&a->codec) && !a->no_feedback)
		return cg_usage("a lossy --codec keeps what it did not send in "
		                "--state, which a pipeline stage has not: give "
		                "--no-error-feedback");
	cg_optim_cli_finish(&a->oc, &a->o.opt);
	a->o.steps = (int)(a->steps > 1 << 30 ? 1 << 30 : a->steps);
	a->o.batch = (int)a->batch;
	return CG_CONTINUE;
}

/* What is missing or in conflict; then the training options from a. */
static int
validate(struct args *a)
{
	if (a->model == NULL)
		return cg_usage("no model (-m)");
	/* a stage past the first reads no data, and says what it emits */
	a->stage = a->next != NULL || (a->data == NULL && a->emit_given);
	if (a->stage)
		return validate_stage(a);
	if (a->data == NULL)
		return cg_usage("no data shard (-d)");
	if (a->wire || a->pipeline)
		return cg_usage("--%s: a pipeline stage's (--next)",
		                a->wire ? "wire" : "pipeline");
	if (strcmp(a->model, "-") == 0 && strcmp(a->data, "-") == 0)
		return cg_usage("the model and the shard cannot both be "
		                "standard input");
	/* A state is read and written back: it must be a file. */
	if (a->state && strcmp(a->state, "-") == 0)
		return cg_usage("--state: '-' is not a file");
	if (a->state && strcmp(a->state, a->out) == 0)
		return cg_usage("--state and -o name the same file");
	if (a->ema_out && a->o.ema == 0)
		return cg_usage("--ema-out needs --ema DECAY");
	if (a->o.ema > 0) {
		if (a->o.emit != CG_EMIT_MODEL)
			return cg_usage("--ema: a moving average of the weights "
			                "is kept by --emit model");
		if (a->o.ema >= 1)
			return cg_usage("--ema %g: the decay is below 1",
			                a->o.ema);
		if (a->ema_out == NULL && a->state == NULL)
			return cg_usage("--ema: give --ema-out FILE (or "
			                "--state FILE, which keeps it)");
		if (a->ema_out && (strcmp(a->ema_out, a->out) == 0 ||
		                   (a->state && strcmp(a->ema_out, a->state) == 0)))
			return cg_usage("--ema-out names the same file as %s",
			                strcmp(a->ema_out, a->out) == 0 ? "-o"
			                                                : "--state");
	}
	if ((a->tau_set || a->alpha_set) && a->teacher == NULL)
		return cg_usage("--%s needs --teacher",
		                a->tau_set ? "teacher-temp" : "teacher-weight");
	if (a->dsteps && a->teacher == NULL)
		return cg_usage("--distill-steps needs --teacher");
	if (a->dguidance_set && a->dsteps == 0)
		return cg_usage("--distill-guidance needs --distill-steps");
	if (a->dsteps && a->tau_set)
		return cg_usage("--teacher-temp: step distillation has no "
		                "temperature");
	/* the student learns the teacher's steps alone unless told */
	if (a->dsteps && !a->alpha_set)
		a->alpha = 1;
	if (a->teacher && strcmp(a->teacher, "-") == 0 &&
	    (strcmp(a->model, "-") == 0 || strcmp(a->data, "-") == 0))
		return cg_usage("the teacher and the %s cannot both be "
		                "standard input",
		                strcmp(a->model, "-") == 0 ? "model" : "shard");
	if (a->scale_given && a->precision != CG_PREC_F16)
		return cg_usage("--loss-scale and --scale-growth are f16's "
		                "(--precision f16)");
	if (a->precision == CG_PREC_F16) {
		int e;
		if (frexp(a->loss_scale, &e) != 0.5)
			return cg_usage("--loss-scale %g: not a power of two",
			                a->loss_scale);
		if (a->ex_given)
			return cg_usage("--precision f16 and --example-clip "
			                "conflict: DP-SGD clips unscaled "
			                "gradients");
		a->o.loss_scale = a->loss_scale;
		a->o.scale_growth = (int)a->scale_growth;
	}
	/* where a clock stops the call is not in its inputs */
	if (a->deterministic && a->time_limit > 0)
		return cg_usage("--deterministic and --time-limit conflict: "
		                "a deadline's steps depend on the machine");
	if ((a->peers || a->mask_round || a->mask_bits || a->mask_threshold) &&
	    a->mask == NULL)
		return cg_usage("--%s needs --mask",
		                a->peers        ? "peers"
		                : a->mask_round ? "mask-round"
		                : a->mask_bits  ? "mask-bits"
		                                : "mask-threshold");
	if (a->mask && a->peers == NULL)
		return cg_usage("--mask needs --peers FILE");
	if (a->codec_name && cg_uspec_masked(&a->codec))
		return cg_usage("--codec masked: give --mask KEY --peers FILE");
	if (a->mask && (a->codec_name || a->budget))
		return cg_usage("--mask is a codec of its own: no --codec or "
		                "--budget");
	/* cg-audit remakes a call from what its update records, which
	 * holds no --freeze */
	if (a->nfreeze && a->deterministic)
		return cg_usage("--freeze and --deterministic conflict: "
		                "cg-audit cannot remake a frozen call");
	if (a->o.qat != CG_F32 && a->deterministic)
		return cg_usage("--qat and --deterministic conflict: "
		                "cg-audit cannot remake a quantized call");
	if (a->mask && a->o.emit == CG_EMIT_MODEL)
		return cg_usage("--mask masks a grad or a delta, not a model");
	if ((a->ex_noise_given || a->ex_delta_given || a->target_given) &&
	    a->ex_given == NULL)
		return cg_usage("--%s is DP-SGD's: give --example-clip",
		                a->ex_noise_given   ? "example-noise"
		                : a->ex_delta_given ? "example-delta"
		                                    : "target-epsilon");
	if (a->ex_given && a->ex_noise_given == NULL && a->target_given == NULL)
		return cg_usage("--example-clip: give --example-noise SIGMA or "
		                "--target-epsilon E");
	if (a->ex_given && a->ex_noise_given && a->ex_noise == 0 &&
	    a->target_given)
		return cg_usage("--target-epsilon: --example-noise 0 spends an "
		                "infinite epsilon");
	if (a->ex_given && (a->mask || a->teacher || a->dp_given))
		return cg_usage("--example-clip and --%s conflict",
		                a->mask      ? "mask"
		                : a->teacher ? "teacher"
		                             : "dp-clip");
	if (a->ex_given && a->deterministic && a->ex_noise != 0)
		return cg_usage(
		    "--example-noise and --deterministic conflict: "
		    "the noise is secret, no one can make it again");
	if (a->dp_given && a->mask == NULL)
		return cg_usage("--%s: a worker's part of differential privacy "
		                "is under --mask (else cg-reduce --dp-clip)",
		                a->dp_given);
	if (a->dp_noise > 0 && a->dp_clip == 0)
		return cg_usage("--dp-noise: noise is measured in the clip's "
		                "units: give --dp-clip");
	if (a->dp_seed_given && a->dp_noise == 0 && a->ex_given == NULL)
		return cg_usage("--dp-seed: seeds the noise: give --dp-noise "
		                "or --example-clip");
	if (a->dp_noise > 0 && a->deterministic)
		return cg_usage("--dp-noise and --deterministic conflict: the "
		                "noise is secret, no one can make it again");
	if (a->budget && a->codec_name == NULL)
		cg_uspec_parse("topk", &a->codec);
	a->coded = a->codec_name != NULL || a->budget != 0;
	if (a->coded && a->o.emit == CG_EMIT_MODEL)
		return cg_usage("--codec and --budget encode a grad or a delta, "
		                "not a model");
	/* What a lossy codec leaves out is kept in the state, unless told
	 * not to keep it. */
	if (a->coded && !cg_uspec_lossless(&a->codec) && !a->no_feedback &&
	    a->state == NULL)
		return cg_usage("a lossy --codec keeps what it did not send in "
		                "--state FILE (or give --no-error-feedback)");
	if (a->mask) {
		/* exact in the sum: nothing is left over to feed back */
		cg_uspec_parse("masked", &a->codec);
		a->coded = 1;
		if (a->mask_bits == 0)
			a->mask_bits = CG_MASK_FRAC_BITS;
	}
	cg_optim_cli_finish(&a->oc, &a->o.opt);
	a->o.steps = (int)(a->steps > 1 << 30 ? 1 << 30 : a->steps);
	a->o.batch = (int)a->batch;
	/* Counted from the start of the program: reading the inputs is
	 * part of the call's time. */
	if (a->time_limit > 0)
		a->o.deadline = a->start + a->time_limit;
	return CG_CONTINUE;
}

/* The training options of the call: a's, with j's teacher. */
static const struct cg_train_opts *
job_opts(const struct args *a, struct job *j)
{
	j->o = a->o;
	j->o.distill = j->t ? &j->distill : NULL;
	j->o.frozen = j->frozen;
	j->o.dpsgd = a->ex_given ? &j->dpsgd : NULL;
	/* under a budget the shard is read a batch at a time */
	j->o.page_out = a->max_memory > 0;
	return &j->o;
}

/* The shard as messages name it. */
static const char *
shard_name(const struct args *a)
{
	return strcmp(a->data, "-") ? a->data : "(stdin)";
}

/*
 * DP-SGD's parameters, from the command line and the shard (the rate q
 * = B/N), and the model's privacy record, which the call extends: the
 * noise multiplier given or, with --target-epsilon alone, the least
 * that keeps a model without a record within it; a call that would
 * pass the target is refused here, before any work.  The seed is
 * --dp-seed's or the system's.  0, or -1 said.
 */
static int
dpsgd_plan(const struct args *a, struct job *j)
{
	struct cg_dpsgd *d = &j->dpsgd;
	struct cg_dp next;
	const uint64_t n = j->s->n;

	if (j->m->arch->dp_batch == NULL)
		return cg_warnx("%s: DP-SGD: per-example clipping is not done "
		                "for %s models yet",
		                a->model, j->m->arch->name),
		       -1;
	if ((uint64_t)a->batch > n)
		return cg_warnx("--batch %lld: more than the %llu examples of "
		                "%s: the rate B/N would pass 1",
		                a->batch, (unsigned long long)n, shard_name(a)),
		       -1;
	if (cg_dp_read(j->m->manifest, &j->dp) < 0)
		return cg_warn("%s", a->model), -1;
	d->clip = a->ex_clip;
	d->q = (double)a->batch / (double)n;
	d->sigma = a->ex_noise;
	if (j->dp.nhist == 0)
		j->dp.delta = a->ex_delta_given ? a->ex_delta : 1e-5;
	else if (a->ex_delta_given && a->ex_delta != j->dp.delta)
		return cg_warnx("--example-delta %g: the model %s spent its "
		                "budget at delta %g",
		                a->ex_delta, a->model, j->dp.delta),
		       -1;
	if (a->ex_noise_given == NULL) {
		if (j->dp.nhist > 0)
			return cg_warnx("--target-epsilon: the model %s has "
			                "spent epsilon %.4g already: give "
			                "--example-noise",
			                a->model, j->dp.epsilon),
			       -1;
		d->sigma = cg_rdp_sigma_for(a->target_eps, d->q,
		                            (double)a->o.steps, j->dp.delta);
		if (d->sigma < 0)
			return cg_warnx("--target-epsilon %g: no noise up to "
			                "%g reaches it in %d steps at rate %g",
			                a->target_eps, CG_RDP_MAX_SIGMA,
			                a->o.steps, d->q),
			       -1;
	}
	next = j->dp;
	if (d->sigma > 0 && a->target_given &&
	    (cg_dp_append(&next, d->sigma, d->q, (uint64_t)a->o.steps) != 0 ||
	     next.epsilon > a->target_eps))
		return cg_warnx(
		           "--target-epsilon %g: %d steps at noise %g and "
		           "rate %g would bring epsilon to %.4g at delta %g "
		           "(%.4g so far)",
		           a->target_eps, a->o.steps, d->sigma, d->q,
		           next.epsilon, next.delta, j->dp.epsilon),
		       -1;
	d->seed = a->dp_seed;
	if (a->dp_seed_given == NULL && getentropy(&d->seed, sizeof(d->seed)))
		return cg_warnx("no randomness for DP-SGD: %s",
		                strerror(errno)),
		       -1;
	return 0;
}

/*
 * What a DP-SGD call spent, into its output's manifest man: the model's
 * record with the steps done appended (noise 0 spends an unbounded
 * epsilon: no record, and a model that had one is refused) and, in an
 * update, those steps as its release, which cg-apply appends to the
 * model it is applied to.  0, or -1 with a message.
 */
static int
dpsgd_record(const struct args *a, struct job *j, struct cJSON *man)
{
	struct cg_dp next = j->dp;
	const struct cg_dpsgd *d = &j->dpsgd;

	if (d->sigma == 0) {
		if (j->dp.nhist > 0)
			return cg_seterr("--example-noise 0: the model's "
			                 "epsilon would be unbounded");
		cJSON_DeleteItemFromObjectCaseSensitive(man, "dp");
		return 0;
	}
	if (cg_dp_append(&next, d->sigma, d->q, (uint64_t)j->res.steps) != 0)
		return -1;
	next.clip = 0;
	next.nrelease = next.has_shard = 0;
	if (a->o.emit != CG_EMIT_MODEL) {
		unsigned char id[32], split[32];
		int index;
		next.clip = d->clip;
		next.nrelease = 1;
		next.release[0] =
		    (struct cg_dp_run){.sigma = d->sigma,
		                       .q = d->q,
		                       .steps = (uint64_t)j->res.steps};
		/* the shard it trained on: cg-reduce takes releases of
		 * disjoint shards together (privacy.h) */
		if (cg_state_split(j->s->file, split, &index)) {
			cg_state_identity(j->s->file, id);
			cg_hex(next.shard[0].sha256, id);
			cg_hex(next.shard[0].split, split);
			next.shard[0].index = index;
			next.has_shard = 1;
		}
	}
	return cg_dp_write(man, &next);
}

/*
 * --distill-steps N against the models: a diffusion student, and a
 * teacher that samples on the grid of 2N - 1 steps (a plain one samples
 * on any; a distilled one on its own, and already carries its
 * guidance, which the student's record keeps).  0, or -1 said.
 */
static int
distill_steps(const struct args *a, struct job *j)
{
	double tg;
	int tn;

	if (a->dsteps == 0)
		return 0;
	if (!j->m->arch->diffusion)
		return cg_warnx("--distill-steps: %s models do not sample in "
		                "steps",
		                j->m->arch->name),
		       -1;
	if ((tn = cg_model_distilled(j->t, &tg)) < 0)
		return cg_warn("%s", a->teacher), -1;
	if (tn > 0 && tn != 2 * a->dsteps - 1)
		return cg_warnx("%s: the teacher samples in %d steps, not the "
		                "%d that --distill-steps %d halves%s",
		                a->teacher, tn, 2 * a->dsteps - 1, a->dsteps,
		                tn % 2 ? "" : " (an even count halves into "
		                              "no grid: distill from 2N - 1)"),
		       -1;
	if (tn > 0 && a->dguidance != 0)
		return cg_warnx("%s: a distilled teacher keeps its own "
		                "guidance (%g): --distill-guidance would guide "
		                "it twice",
		                a->teacher, tg),
		       -1;
	/* a distilled teacher is run as it is drawn, without guidance;
	 * the student's record keeps what it carries */
	j->distill.steps = a->dsteps;
	j->distill.guidance = tn > 0 ? 0 : a->dguidance;
	j->carried = tn > 0 ? tg : a->dguidance;
	return 0;
}

/*
 * Read the inputs, open the outputs, read and check the state, plan the
 * memory: everything that can fail before the work.  0, or -1 said.
 */
static int
prepare(const struct args *a, struct job *j)
{
	/* The shard first: its payload's digest is verified on a thread
	 * while the model is read and the call trains, and waited for in
	 * emit before a byte leaves (cg_shard_open_late).  Under a budget
	 * a compressed shard is decompressed to a temporary file first,
	 * to be read a batch at a time as a plain one is. */
	if ((j->s = a->max_memory ? cg_shard_open_spooled(a->data)
	                          : cg_shard_open_late(a->data)) == NULL ||
	    (j->m = cg_model_read(a->model)) == NULL ||
	    (a->teacher && (j->t = cg_model_read(a->teacher)) == NULL))
		return cg_warn(NULL), -1;
	if (cg_train_freeze(j->m, a->freeze, a->nfreeze, &j->frozen) != 0)
		return cg_warn(NULL), -1;
	if (j->m->lora && a->o.qat != CG_F32)
		return cg_warnx("--qat: %s: a model with adapters trains them "
		                "alone: its matrices cannot be trained "
		                "quantized",
		                a->model),
		       -1;
	if (j->m->lora && a->deterministic)
		return cg_warnx("--deterministic: cg-audit cannot remake a "
		                "call of a model with adapters"),
		       -1;
	/* A teacher that cannot teach this model on this shard is refused
	 * before any output is opened. */
	if (j->t) {
		if (cg_model_check_teacher(j->m, j->t, j->s) != 0)
			return cg_warn("%s", a->teacher), -1;
		j->distill.teacher = j->t;
		j->distill.alpha = a->alpha;
		j->distill.tau = a->tau;
		if (distill_steps(a, j) != 0)
			return -1;
	}
	if (a->ex_given && dpsgd_plan(a, j) != 0)
		return -1;
	/* the keys and peers of --mask, before any work */
	if (a->mask && cg_mask_init(&j->mask, a->mask, a->peers, a->mask_round,
	                            (int)a->mask_bits) != 0)
		return cg_warn(NULL), -1;
	if (a->mask && a->mask_threshold > j->mask.npeers)
		return cg_warnx("--mask-threshold %lld: more than the %d peers "
		                "of %s",
		                a->mask_threshold, j->mask.npeers, a->peers),
		       -1;
	j->mask.threshold = (int)a->mask_threshold;
	/* Open the outputs first: a terminal on stdout or an unwritable
	 * directory is refused before any work is done. */
	if (cg_out_open(&j->out, a->out) != 0 ||
	    (a->state && cg_out_open(&j->sout, a->state) != 0) ||
	    (a->ema_out && cg_out_open(&j->eout, a->ema_out) != 0))
		return cg_warn(NULL), -1;
	/* A state must belong to this call: see cg_state_check. */
	if (a->state) {
		cg_state_call_init(&j->call, a->emit_name, j->s, j->m, a->out);
		if (j->t)
			cg_state_call_teacher(&j->call, j->t);
		if (cg_state_read(&j->st, a->state) != 0 ||
		    cg_state_check(j->st, a->state, &j->call) != 0)
			return cg_warn(NULL), -1;
		j->has_sd = cg_state_digest(j->st, j->sd);
	}
	/* what of the shard's payload is mapped is no part of the plan:
	 * under a budget it is given back after each step */
	if (a->max_memory)
		cg_shard_page_out(j->s);
	if (cg_train_plan(j->m, job_opts(a, j), j->st, a->max_memory,
	                  cg_rss_now(), a->ckpt, &j->plan) != 0) {
		if (a->max_memory)
			cg_warn("--max-memory");
		else if (a->ckpt)
			cg_warn("--checkpoint-activations");
		else
			cg_warn(NULL);
		return -1;
	}
	/* --micro-batches: cgpt's chunks are the micro-batches */
	if (a->micro > 0) {
		if (a->max_memory || a->ckpt)
			return cg_warnx(
			           "--micro-batches: not with --max-memory "
			           "or --checkpoint-activations"),
			       -1;
		j->m->chunk = (int)((a->batch + a->micro - 1) / a->micro);
	}
	if (j->st && cg_train_state_init(j->st, j->m, job_opts(a, j)) != 0)
		return cg_warn("%s", a->state), -1;
	if ((a->o.emit != CG_EMIT_MODEL || a->o.ema > 0) &&
	    (j->buf = cg_alloc(j->m->nparams * sizeof(float))) == NULL)
		return cg_warn(NULL), -1;
	/* a budget no update of this model fits is said before the work */
	j->spec = a->codec;
	if (a->coded && a->budget) {
		struct cg_uview *v;
		int rc, nv;
		if (cg_update_views_of(j->m, j->frozen, &v, &nv) != 0)
			return cg_warn(NULL), -1;
		rc = cg_uspec_fit(&j->spec, v, nv, a->budget);
		free(v);
		if (rc != 0)
			return cg_warn(NULL), -1;
	}
	return 0;
}

/* The shard's payload verified (cg_shard_open_late): 0, or -1 said. */
static int
payload_verified(const struct args *a, const struct job *j)
{
	if (cg_shard_verified(j->s, 1) != 0)
		return cg_warn("%s", shard_name(a)), -1;
	return 0;
}

/* f16: a micro-batch whose scaled gradient was not finite (ctx: the
 * progress line). */
static void
skipped(void *ctx, int step, int total, double scale)
{
	(void)ctx;
	cg_warnx("step %d of %d: the gradient at loss scale %g is not finite: "
	         "step skipped, the scale halved",
	         step, total, scale);
}

/* The training itself, with its progress line.  0, or -1 said. */
static int
train(const struct args *a, struct job *j)
{
	struct cg_train_opts o = *job_opts(a, j);
	struct cg_progress pb;
	double t0;
	int rc;

	cg_progress_init(&pb, stderr, cg_getprogname(), a->quiet);
	o.progress = cg_progress_cb;
	o.progress_ctx = &pb;
	o.skip = skipped;
	t0 = cg_now();
	rc = cg_train_run(j->m, j->s, &o, j->st, j->buf, &j->res);
	j->rep = (struct cg_train_report){.emit = a->emit_name,
	                                  .m = j->m,
	                                  .res = &j->res,
	                                  .plan = &j->plan,
	                                  .distill = j->t ? &j->distill : NULL,
	                                  .steps = o.steps,
	                                  .secs = cg_now() - t0};
	j->shown = pb.on;
	cg_progress_done(&pb);
	if (rc != 0)
		return cg_warn("%s", shard_name(a)), -1;
	/* The activations are done with: the output has their room. */
	if (j->m->arch->free_ws)
		j->m->arch->free_ws(j->m);
	if (j->t && j->t->arch->free_ws)
		j->t->arch->free_ws(j->t);
	return 0;
}

/*
 * This worker's share of differential privacy under the masks: its
 * update clipped to --dp-clip and of weight 1, with noise of std sigma
 * C / sqrt(peers) (privacy.h's struct cg_dp_share), drawn from --dp-seed
 * or else the system's randomness.  0, or -1 with a message.
 */
static int
dp_share(const struct args *a, struct job *j)
{
	uint64_t seed = a->dp_seed;

	if (a->dp_seed_given == NULL && a->dp_noise > 0 &&
	    getentropy(&seed, sizeof(seed)) != 0)
		return cg_seterr("no randomness for the noise: %s",
		                 strerror(errno));
	cg_dp_clip_noise(j->buf, j->m->nparams, a->dp_clip,
	                 a->dp_noise * a->dp_clip / sqrt(j->mask.npeers), seed);
	j->res.weight = 1;
	return 0;
}

/*
 * The update encoded under --codec (fitted to --budget) or --mask into
 * j->f, with the error feedback and codec state the state file keeps
 * (cg_train_encode).  0, or -1 with a message.
 */
static int
encode(const struct args *a, struct job *j)
{
	struct cg_train_enc e = {
	    .spec = &j->spec,
	    .kind =
	        a->o.emit == CG_EMIT_GRAD ? CG_UPDATE_GRAD : CG_UPDATE_DELTA,
	    .seed = a->o.seed,
	    .no_feedback = a->no_feedback,
	    .decay = a->decay,
	    /* the input model's digest is the state's, taken before
	     * training */
	    .base = j->st ? j->call.model : NULL,
	    .frozen = j->frozen,
	};
	double t0 = cg_now();

	if (a->mask) {
		/* the round is the model's: its digest, which every peer's
		 * base is; the weight whole, as the sum needs it */
		unsigned char d[32];
		if (e.base)
			memcpy(d, e.base, 32);
		else
			cg_model_digest(j->m, d);
		if (a->dp_clip > 0 && dp_share(a, j) != 0)
			return -1;
		if (cg_mask_check_weight(j->res.weight, j->mask.frac_bits,
		                         &e.mask_weight) != 0 ||
		    cg_mask_round(&j->mask, d) != 0) {
			cg_errprefix("--mask");
			return -1;
		}
		e.mask = &j->mask;
	}
	if ((j->f = cg_train_encode(j->m, j->s, j->st, j->buf, &j->res, &e)) ==
	    NULL)
		return -1;
	if (a->dp_clip > 0 &&
	    cg_dp_share_write(j->f->manifest,
	                      &(struct cg_dp_share){.clip = a->dp_clip,
	                                            .sigma = a->dp_noise,
	                                            .peers = j->mask.npeers}) !=
	        0)
		return -1;
	j->rep.coded = j->f;
	j->rep.enc_secs = cg_now() - t0;
	j->rep.npeers = j->mask.npeers;
	return 0;
}

/*
 * Write the output and the state, when what is written is finite.  Both
 * files are written and fsynced before either is renamed into place, so
 * a failure leaves neither; the state records the output's digest.  The
 * output is renamed first: a crash between the renames leaves a new
 * output beside the old state, which the next call refuses (the output
 * is not the one the state names), and removing the output and rerunning
 * the call writes both again.  0, or -1 said.
 */
static int
emit(const struct args *a, struct job *j)
{
	struct cg_out *outs[3] = {&j->out, &j->sout, &j->eout};
	struct cg_model *m = j->m;
	size_t nout = 1;

	/* a diverged model's numbers are no output: refused as cg-reduce
	 * refuses them, before the state or the output is touched */
	if (a->o.emit == CG_EMIT_MODEL ? cg_model_check_all_finite(m) != 0
	                               : cg_model_check_finite(m, j->buf) != 0)
		return cg_warnx("the %s is not finite: %s (the model "
		                "diverged? lower --lr)",
		                a->emit_name, cg_errmsg()),
		       -1;
	if (a->o.emit == CG_EMIT_MODEL) {
		double seen = cg_json_num(m->manifest, "samples", 0) +
		              (double)j->res.samples;
		cg_json_set_num(m->manifest, "loss", j->res.mean.loss);
		cg_json_set_num(m->manifest, "samples", seen);
		if (a->dsteps &&
		    cg_model_set_distilled(m, a->dsteps, j->carried) != 0)
			return cg_warn(NULL), -1;
		if (a->ex_given && dpsgd_record(a, j, m->manifest) != 0)
			return cg_warn(NULL), -1;
		j->f = cg_model_file(m);
		if (j->st)
			cg_state_call_next(&j->call, m);
		if (a->ema_out &&
		    (cg_model_check_finite(m, j->buf) != 0 ||
		     (j->ef = cg_model_file_ema(m, j->buf, a->o.ema)) == NULL))
			return cg_warn("--ema-out"), -1;
	} else if (a->coded) {
		if (encode(a, j) != 0)
			return cg_warn(NULL), -1;
	} else
		j->f = cg_update_file(
		    m, a->o.emit == CG_EMIT_GRAD ? "grad" : "delta", j->buf,
		    &j->res, j->frozen);
	if (j->f && a->o.emit != CG_EMIT_MODEL && a->ex_given &&
	    dpsgd_record(a, j, j->f->manifest) != 0)
		return cg_warn(NULL), -1;
	/* who made it, for a reducer that counts each worker once */
	if (j->f && a->o.emit != CG_EMIT_MODEL) {
		unsigned char shard[32];
		cg_state_identity(j->s->file, shard);
		if (cg_uident_record(j->f->manifest, shard, a->o.seed) != 0)
			return cg_warn(NULL), -1;
	}
	/* what cg-audit needs to make the update again */
	if (j->f && a->deterministic && a->o.emit != CG_EMIT_MODEL &&
	    cg_call_record(j->f->manifest, &j->o, j->s,
	                   j->has_sd ? j->sd : NULL, m) != 0)
		return cg_warn(NULL), -1;
	if (j->f == NULL)
		return cg_warn(NULL), -1;
	/* Nothing made from the shard's payload leaves before its digest
	 * is verified: an output written in place (standard output, a
	 * pipe) waits for it before the first byte, one written under a
	 * temporary name before the rename. */
	if ((j->out.tmp == NULL || (j->st && j->sout.tmp == NULL) ||
	     (j->ef && j->eout.tmp == NULL)) &&
	    payload_verified(a, j) != 0)
		return -1;
	if (cg_file_write_to(j->f, &j->out, a->comp) != 0 ||
	    (j->st &&
	     cg_state_write_to(j->st, &j->sout, &j->call, &j->out) != 0) ||
	    (j->ef && cg_file_write_to(j->ef, &j->eout, a->comp) != 0))
		return cg_warn(NULL), -1;
	if (payload_verified(a, j) != 0)
		return -1;
	if (j->st)
		nout = 2;
	if (j->ef)
		outs[nout++] = &j->eout;
	if (cg_out_commit_all(outs, nout) != 0)
		return cg_warn(NULL), -1;
	if (a->log && cg_json_append(a->log, cg_train_log_json(&j->rep)) != 0)
		return cg_warn(NULL), -1;
	return 0;
}

/*
 * A stage's update encoded under --codec (fitted to --budget over the
 * stage's tensors), without error feedback: as cg_update_new_stage's, of
 * the stage's tensors with its digest as base and its "stage", and the
 * stochastic rounding drawn as cg_train_encode draws it, from the seed,
 * the step and the shard (the first stage's, which every stage knows).  NULL
 * with a message.
 */
static struct cg_file *
stage_encode(const struct args *a, struct job *j, const struct cg_stage *st,
             const unsigned char shard[32], uint64_t seed)
{
	struct cg_model *m = j->m;
	struct cg_uenc enc = {0};
	struct cg_uview *v = NULL;
	struct cg_file *f = NULL;
	unsigned char d[32];
	uint8_t *skip = calloc((size_t)m->nviews, 1);
	int nv;

	if (skip == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	for (int i = 0; i < m->nviews; i++)
		skip[i] = i < st->v0 || i >= st->v1;
	j->spec = a->codec;
	if (cg_update_views_of(m, skip, &v, &nv) != 0 ||
	    (a->budget && cg_uspec_fit(&j->spec, v, nv, a->budget) != 0))
		goto out;
	cg_rng_derive(&enc.rng, seed, m->step, cg_get_le64(shard));
	cg_stage_digest(m, st, d);
	f = cg_update_encode_part(
	    m, d, a->o.emit == CG_EMIT_GRAD ? CG_UPDATE_GRAD : CG_UPDATE_DELTA,
	    j->buf, (double)j->res.samples, j->res.weight, j->res.mean.loss,
	    &j->spec, &enc, NULL, NULL, skip);
	if (f == NULL)
		goto out;
	/* not a partial update: a stage's */
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "partial");
	if (cg_stage_put(f->manifest, st) != 0) {
		cg_file_free(f);
		f = NULL;
	}
out:
	free(skip);
	free(v);
	return f;
}

/*
 * A pipeline stage's call (lib/train/pipe.h): read the stage, run the
 * next one, train, and write the output only once every stage below has
 * written its own, renamed on stage 0's word.  0, or -1 said.
 */
static int
stage_job(struct args *a, struct job *j)
{
	struct cg_pipe p = CG_PIPE_NONE;
	struct cg_stage st;
	struct cg_stage_opts so = {.micro = (int)(a->micro ? a->micro : 1),
	                           .one_f_one_b = a->pipeline,
	                           .recompute = a->ckpt,
	                           .max_memory = a->max_memory};
	int rc = -1;
	uint64_t end[2];
	unsigned char shard[32];

	cg_dtype_parse(wire_names[a->wire], &so.wire);
	if ((j->m = cg_stage_read(a->model, &st)) == NULL)
		return cg_warn(a->data ? NULL : "no data shard (-d), and"), -1;
	const int first = st.index == 0, last = st.index == st.count - 1;
	if (first != (a->data != NULL) || last != (a->next == NULL))
		return cg_warnx("%s: stage %d of %d: %s", a->model,
		                st.index + 1, st.count,
		                first != (a->data != NULL)
		                    ? (first
		                           ? "the first stage reads the data: "
		                             "give -d"
		                           : "only the first stage reads "
		                             "data: no -d")
		                    : (last ? "the last stage runs no other: "
		                              "no --next"
		                            : "give --next CMD, the next "
		                              "stage")),
		       -1;
	if (!first && strcmp(a->out, "-") == 0)
		return cg_warnx("stage %d of %d: standard output is the "
		                "pipe to the previous stage: give -o FILE",
		                st.index + 1, st.count),
		       -1;
	if (!first)
		p.up_in = 0, p.up_out = 1;
	/* the first stage knows the call's shape and wire: refused before
	 * the others start */
	if (first && cg_train_stage_memory(j->m, &st, &a->o, &so) != 0)
		goto fail;
	if ((first && (j->s = cg_shard_open(a->data)) == NULL) ||
	    cg_out_open(&j->out, a->out) != 0 ||
	    (a->next && cg_pipe_spawn(&p, a->next) != 0))
		goto fail;
	if (first) {
		cg_state_identity(j->s->file, shard);
		for (int i = 0; i < 4; i++)
			so.worker[i] = cg_get_le64(shard + 8 * i);
		so.worker[4] = a->o.seed;
	}
	/* a grad's or delta's range of the stage, the rest never written */
	if (a->o.emit != CG_EMIT_MODEL &&
	    (j->buf = calloc(j->m->nparams ? j->m->nparams : 1,
	                     sizeof(float))) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	if (cg_train_stage(j->m, &st, j->s, &a->o, &so, &p, j->buf, &j->res) !=
	    0)
		goto fail;
	memcpy(&end[0], &j->res.mean.loss, sizeof(double));
	end[1] = j->res.samples;
	if (cg_pipe_end(&p, st.index, st.count, end) != 0)
		goto fail;
	double loss, seen = cg_json_num(j->m->manifest, "samples", 0);
	memcpy(&loss, &end[0], sizeof(loss));
	if (a->o.emit != CG_EMIT_MODEL) {
		for (int i = 0; i < 32; i++)
			shard[i] =
			    (unsigned char)(so.worker[i / 8] >> (8 * (i % 8)));
		j->res.samples = end[1];
		j->res.mean.loss = loss;
		if (cg_model_check_finite(j->m, j->buf) != 0 ||
		    (j->f = a->coded
		                ? stage_encode(a, j, &st, shard, so.worker[4])
		                : cg_update_new_stage(j->m, &st,
		                                      a->o.emit == CG_EMIT_GRAD
		                                          ? CG_UPDATE_GRAD
		                                          : CG_UPDATE_DELTA,
		                                      j->buf, (double)end[1],
		                                      j->res.weight, loss)) ==
		        NULL ||
		    cg_uident_record(j->f->manifest, shard, so.worker[4]) != 0)
			goto fail;
	} else {
		j->res.mean.loss = loss;
		cg_json_set_num(j->m->manifest, "loss", loss);
		cg_json_set_num(j->m->manifest, "samples",
		                seen + (double)end[1]);
		if (cg_model_check_all_finite(j->m) != 0 ||
		    (j->f = cg_stage_file(j->m, &st)) == NULL)
			goto fail;
	}
	if (cg_file_write_to(j->f, &j->out, a->comp) != 0 ||
	    cg_out_flush(&j->out) != 0 ||
	    cg_pipe_ready(&p, st.index, st.count) != 0 ||
	    cg_pipe_commit(&p, st.index, st.count) != 0 ||
	    cg_out_commit(&j->out) != 0)
		goto fail;
	j->rep = (struct cg_train_report){.emit = a->emit_name,
	                                  .m = j->m,
	                                  .res = &j->res,
	                                  .steps = a->o.steps,
	                                  .secs = so.step_s,
	                                  .stage = &so,
	                                  .stage_index = st.index,
	                                  .stage_count = st.count};
	if (a->log && cg_json_append(a->log, cg_train_log_json(&j->rep)) != 0)
		goto fail;
	rc = 0;
fail:
	if (rc != 0)
		cg_warn(NULL);
	if (cg_pipe_close(&p) != 0 && rc == 0)
		rc = -1, cg_warn(NULL);
	return rc;
}

/* The summary, on a terminal after the progress line. */
static void
report(const struct job *j)
{
	char lines[CG_TRAIN_SUMMARY_LINES][CG_TRAIN_SUMMARY_LINE];

	for (int i = 0, n = j->shown ? cg_train_summary(&j->rep, lines) : 0;
	     i < n; i++)
		cg_warnx("%s", lines[i]);
}

static void
job_free(struct job *j)
{
	cg_out_abort(&j->out);
	cg_out_abort(&j->sout);
	cg_out_abort(&j->eout);
	cg_file_free(j->ef);
	cg_file_free(j->f);
	free(j->buf);
	free(j->frozen);
	cg_state_free(j->st);
	cg_shard_free(j->s);
	cg_model_free(j->m);
	cg_model_free(j->t);
	cg_mask_free(&j->mask);
}

int
main(int argc, char **argv)
{
	struct args a = {.out = "-",
	                 .steps = 1,
	                 .batch = 128,
	                 .decay = 1,
	                 .tau = 1,
	                 .alpha = 0.9,
	                 .loss_scale = 65536,
	                 .scale_growth = 2000};
	struct job j = {.out = {.fd = -1}, .sout = {.fd = -1}, .eout = {.fd = -1}};
	int rc;

	a.start = cg_now();
	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE ||
	    (rc = validate(&a)) != CG_CONTINUE)
		return rc;
	cg_set_threads(a.threads);
	if (cg_set_compute(a.deterministic, a.precision, a.quiet) != 0)
		return cg_fail(NULL);
	rc = CG_EXIT_FAILURE;
	if (a.stage)
		rc = stage_job(&a, &j) == 0 ? CG_EXIT_OK : CG_EXIT_FAILURE;
	else if (prepare(&a, &j) == 0 && train(&a, &j) == 0 &&
	         emit(&a, &j) == 0) {
		report(&j);
		rc = CG_EXIT_OK;
	}
	job_free(&j);
	return rc;
}
