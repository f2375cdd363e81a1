/*
 * cg-reduce - combine many gradients or deltas into one.
 *
 * Inputs are read one after another and handed to the reducer
 * (lib/exchange/reduce.c), which folds a streaming operation into one
 * accumulator, so memory does not grow with their number.  The output is a
 * valid input again, so a reduction tree over ssh is a shell expression:
 * cg-reduce a b | cg-reduce - c equals cg-reduce a b c.
 *
 * Given the model the reduction is for (--model, the newest), inputs
 * computed from older models are taken too: measured against it, left
 * out past --max-staleness, weighed by --staleness-weight (reduce.h).
 *
 * Every update counts once: a second input of the same content, or of
 * the same worker and base model, is refused in one line naming both
 * (uident.h), unless --allow-duplicates.
 *
 * With --dp-clip and --dp-noise the reduction is DP-FedAvg's (dp.h): each
 * worker's update clipped, their plain mean noised once, and what that
 * spends of a privacy budget recorded in the result (privacy.h), after
 * what --model had spent; --target-epsilon refuses a round past it.
 *
 * A masked round of a threshold (secagg.h) closes with a quorum: each
 * surviving worker runs cg-reduce --reveal KEY --peers FILE over the
 * masked updates that are in, which writes its reveal, and cg-reduce
 * --unmask REVEALS takes the masks off with them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/progress.h"
#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "core/atomic.h"
#include "exchange/reduce.h"
#include "exchange/secagg.h"
#include "exchange/slice.h"
#include "exchange/update.h"
#include "exchange/stale.h"
#include "model/model.h"

enum {
	OPT_ALLOW_DUPLICATES = CG_KEY_OWN,
	OPT_OP,
	OPT_CODEC,
	OPT_BUDGET,
	OPT_DP_CLIP,
	OPT_DP_DELTA,
	OPT_DP_NOISE,
	OPT_DP_RATE,
	OPT_LOG,
	OPT_MAX_STALENESS,
	OPT_MIN_INPUTS,
	OPT_MODEL,
	OPT_SEED,
	OPT_SKIP_NONFINITE,
	OPT_STALENESS_WEIGHT,
	OPT_TARGET_EPSILON,
	OPT_PEERS,
	OPT_REVEAL,
	OPT_UNMASK,
	OPT_JOIN,
	OPT_SLICE
};

/* After the options, the reducer's table of operations: made by
 * make_epilog before parsing. */
static char epilog[3072];

struct args {
	const char *out;
	const struct cg_reduce_op *op;
	double param; /* op's */
	const char *model;
	long long max_staleness; /* -1: none */
	struct cg_stale_weight stale;
	int stale_given;
	int skip_nonfinite;
	int allow_duplicates;
	struct cg_uspec codec;
	const char *codec_name;
	int coded;
	uint64_t budget;
	enum cg_compress comp;
	int threads;
	const char *log;
	long long min_inputs;
	double dp_clip, dp_noise, dp_rate, dp_delta, target_epsilon;
	const char *dp_noise_given, *dp_only; /* the option's name */
	uint64_t seed;
	const char *seed_given;
	const char *reveal, *peers, *unmask; /* a threshold round's */
	char **inputs;                       /* [ninputs] */
	int ninputs;
	int quiet;
	int slice_i, slice_n; /* --slice I/N (slice_n 0: none) */
	int join;
};

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"output", 'o', "FILE", "where to write (- or a pipe: stdout)",
     CG_OPT_STR(out)},
    {"op", OPT_OP, "NAME[:P]", "how to combine (mean): one of those below",
     CG_OPT_CUSTOM},
    {"min-inputs", OPT_MIN_INPUTS, "K",
     "fail unless the inputs stand for K updates at least (1)",
     CG_OPT_I64(min_inputs, 1, INT64_MAX)},
    {"skip-nonfinite", OPT_SKIP_NONFINITE, NULL,
     "leave out an input with a nan or inf, and say so (refuse it)",
     CG_OPT_FLAG(skip_nonfinite)},
    {"allow-duplicates", OPT_ALLOW_DUPLICATES, NULL,
     "take an update that counts already: one of the same content, or\n"
     "of the same worker and base model (refuse it: one update a worker)",
     CG_OPT_FLAG(allow_duplicates)},
    {"model", OPT_MODEL, "FILE",
     "reduce for this model: inputs of it or of an earlier step",
     CG_OPT_STR(model)},
    {"max-staleness", OPT_MAX_STALENESS, "S",
     "leave out inputs more than S steps older than --model (none)",
     CG_OPT_I64(max_staleness, 0, INT64_MAX)},
    {"staleness-weight", OPT_STALENESS_WEIGHT, "RULE",
     "weigh inputs by staleness: one of those below (constant)", CG_OPT_CUSTOM},
    {"codec", OPT_CODEC, "SPEC",
     "encode the result: f16, q8, q4, q2, topk:F, sign, lowrank:R (f32)",
     CG_OPT_PARSE(codec, cg_opt_codec), CG_OPT_PREFIX, CG_OPT_SEEN(codec_name)},
    {"budget", OPT_BUDGET, "BYTES", "fit the encoded result in BYTES",
     CG_OPT_SIZE(budget), CG_OPT_POSITIVE},
    {"compress", 'z', "ALG", "none, gzip or zstd (none)",
     CG_OPT_PARSE(comp, cg_opt_compress)},
    {"log", OPT_LOG, "FILE", "append the call's figures to FILE (JSON lines)",
     CG_OPT_STR(log)},
    CG_OPT_HEADING("Several coordinators, each a slice of the tensors:"),
    {"slice", OPT_SLICE, "I/N",
     "reduce only slice I of N (1 <= I <= N) of the tensors", CG_OPT_CUSTOM},
    {"join", OPT_JOIN, NULL, "join the N slices given into the whole reduction",
     CG_OPT_FLAG(join)},
    CG_OPT_HEADING("Differential privacy (DP-FedAvg: each input a worker's):"),
    {"dp-clip", OPT_DP_CLIP, "C",
     "clip each input to L2 norm C over all its tensors; weigh them alike",
     CG_OPT_F64(dp_clip, 0, 1e30), CG_OPT_POSITIVE},
    {"dp-noise", OPT_DP_NOISE, "SIGMA",
     "add noise of std SIGMA*C/W to the mean of the W inputs\n"
     "(masked inputs may bring their shares of it instead)",
     CG_OPT_F64(dp_noise, 0, 1e6), CG_OPT_POSITIVE,
     CG_OPT_SEEN(dp_noise_given)},
    {"dp-rate", OPT_DP_RATE, "Q",
     "each worker took part with probability Q, for the accountant (1)",
     CG_OPT_F64(dp_rate, 0, 1), CG_OPT_POSITIVE, CG_OPT_SEEN(dp_only)},
    {"dp-delta", OPT_DP_DELTA, "D",
     "the budget's delta (the model's record's, else 1e-5)",
     CG_OPT_F64(dp_delta, 0, 0.5), CG_OPT_POSITIVE, CG_OPT_SEEN(dp_only)},
    {"target-epsilon", OPT_TARGET_EPSILON, "E",
     "refuse a round that would bring the model's epsilon past E",
     CG_OPT_F64(target_epsilon, 0, 1e6), CG_OPT_POSITIVE, CG_OPT_SEEN(dp_only)},
    {"seed", OPT_SEED, "N",
     "draw the noise from seed N, kept secret (the system's randomness)",
     CG_OPT_U64(seed), CG_OPT_SEEN(seed_given)},
    CG_OPT_HEADING("Secure aggregation with a threshold (--mask-threshold):"),
    {"unmask", OPT_UNMASK, "FILES",
     "take the masks off with the survivors' reveals (a file, or a\n"
     "quoted glob): the round closes with a quorum of its peers",
     CG_OPT_STR(unmask)},
    {"reveal", OPT_REVEAL, "KEY",
     "as a surviving worker, with its X25519 key: write what closes\n"
     "the round of the masked updates given (once per round)",
     CG_OPT_STR(reveal)},
    {"peers", OPT_PEERS, "FILE",
     "with --reveal: the round's peers (a file or dir)", CG_OPT_STR(peers)},
    CG_OPT_THREADS(threads, CG_THREADS_HELP),
    {"quiet", 'q', NULL, "nothing on stderr but errors", CG_OPT_FLAG(quiet)},
    CG_OPT_ENCRYPT_TO,
    CG_OPT_SIGN,
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-reduce",
    .synopsis = "[options] [FILE...]",
    .about = "Combine gradients or deltas (- or none: standard input).",
    .opts = opts,
    .epilog = epilog,
};

/* --op and --staleness-weight; CG_CONTINUE, or a usage error. */
static int
set_option(void *ctx, const struct cg_getopt *g, int c)
{
	struct args *a = ctx;
	int e;

	if (c == OPT_OP) {
		e = (a->op = cg_reduce_op_parse(g->arg, &a->param)) == NULL;
	} else if (c == OPT_SLICE) {
		char *end;
		long i, n = 0;
		errno = 0;
		i = strtol(g->arg, &end, 10);
		e = end == g->arg || *end != '/';
		if (!e) {
			const char *ns = end + 1;
			n = strtol(ns, &end, 10);
			e = end == ns || *end != '\0';
		}
		e = e || errno != 0 || n < 1 || n > CG_SLICE_MAX || i < 1 ||
		    i > n;
		if (e)
			cg_seterr("'%.32s' is not I/N with 1 <= I <= N <= %d",
			          g->arg, CG_SLICE_MAX);
		a->slice_i = e ? 0 : (int)i - 1;
		a->slice_n = e ? 0 : (int)n;
	} else {
		a->stale_given = 1;
		e = cg_stale_weight_parse(g->arg, &a->stale) != 0;
	}
	if (e)
		cg_errprefix(g->name);
	return e ? cg_usage(NULL) : CG_CONTINUE;
}

/* The command line into a; CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	cg_cli_reduce_help(
	    epilog, sizeof(epilog),
	    "\nExit status: 0 success, 1 failure, 2 usage error.");
	if ((rc = cg_getopt_all(&cli, argc, argv, set_option, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	a->inputs = argv + ind;
	a->ninputs = argc - ind;
	/* --budget alone fits a top-k */
	if (a->budget && a->codec_name == NULL)
		cg_uspec_parse("topk", &a->codec);
	a->coded = a->codec_name != NULL || a->budget != 0;
	return CG_CONTINUE;
}

/* What is missing or in conflict on the command line. */
static int
validate(const struct args *a)
{
	if (a->model == NULL && a->max_staleness >= 0)
		return cg_usage(
		    "--max-staleness: staleness is measured against "
		    "a model: name it with --model");
	if (a->model == NULL && a->stale_given)
		return cg_usage("--staleness-weight: staleness is measured "
		                "against a model: name it with --model");
	if (a->stale.rule != &cg_stale_rules[0] && !a->op->weighs)
		return cg_usage("--staleness-weight %s: --op %s weighs no "
		                "input (the mean does)",
		                a->stale.rule->name, a->op->name);
	if (a->dp_noise > 0 && a->dp_clip == 0)
		return cg_usage("--dp-noise: noise is measured in the clip's "
		                "units: give --dp-clip");
	if (a->seed_given && a->dp_noise_given == NULL)
		return cg_usage("--seed: seeds the noise: give --dp-noise");
	if (a->target_epsilon > 0 && a->model == NULL)
		return cg_usage("--target-epsilon: the budget spent so far is "
		                "the model's: name it with --model");
	if (a->reveal && a->peers == NULL)
		return cg_usage("--reveal needs --peers FILE");
	if (a->peers && a->reveal == NULL)
		return cg_usage("--peers needs --reveal");
	if (a->reveal &&
	    (a->unmask || a->model || a->dp_clip > 0 || a->coded || a->dp_only))
		return cg_usage("--reveal writes a reveal, not a reduction: no "
		                "--unmask, --model, --codec or --dp-*");
	if (a->join && (a->slice_n || a->model || a->coded || a->dp_clip > 0 ||
	                a->dp_only || a->unmask || a->reveal ||
	                a->op != cg_reduce_op_at(0)))
		return cg_usage("--join lays slices side by side: no --slice, "
		                "--op, --model, --codec, --budget, --unmask, "
		                "--reveal or --dp-*");
	if (a->slice_n && (a->reveal || a->unmask))
		return cg_usage("--slice: masked inputs are not sliced (their "
		                "masks cancel only in the whole sum)");
	if (a->model && strcmp(a->model, "-") == 0)
		return cg_usage("--model: a file, not standard input (the "
		                "inputs may come from there)");
	return CG_CONTINUE;
}

/* Read path into r; 1 (reported on stderr) if it fails.  An input left
 * out is said on stderr (unless quiet); r notes it. */
static int
add_one(struct cg_reducer *r, const char *path, int *stdin_used, int quiet)
{
	struct cg_update *u;
	int rc;

	if (strcmp(path, "-") == 0 && (*stdin_used)++)
		return cg_failx("standard input named twice");
	if ((u = cg_update_read(path)) == NULL)
		return cg_fail(NULL);
	if ((rc = cg_reducer_add(r, u)) == 1) {
		if (!quiet)
			cg_warn(NULL);
		rc = 0;
	} else if (rc != 0) {
		rc = cg_fail(NULL);
	}
	return rc;
}

/* Every input named on the command line (cg_inputs_expand) into r; the
 * failures counted. */
static int
add_all(struct cg_reducer *r, char **names, int n, int quiet)
{
	int errors = 0, stdin_used = 0;
	size_t count;
	char **paths = cg_inputs_expand(names, n, &count);

	if (paths == NULL)
		return cg_fail(NULL);
	for (size_t i = 0; i < count; i++)
		errors += add_one(r, paths[i], &stdin_used, quiet);
	cg_inputs_free(paths);
	return errors;
}

/* A call's work: the reducer, the model it reduces for, the inputs
 * left out, the result. */
struct call {
	struct cg_reducer r;
	struct cg_model *m;
	struct cg_file *f;
};

/* c's reducer private as a asks; 0, or -1 said.  The noise's seed is
 * --seed, or without it the system's randomness: noise whose seed is
 * known can be taken off again. */
static int
start_dp(const struct args *a, struct call *c)
{
	uint64_t seed = a->seed;

	if (a->dp_only && cg_reducer_set_budget(&c->r, a->dp_rate, a->dp_delta,
	                                        a->target_epsilon) != 0)
		return cg_warn(NULL), -1;
	if (a->dp_clip == 0)
		return 0;
	if (a->seed_given == NULL && getentropy(&seed, sizeof(seed)) != 0)
		return cg_warnx("no randomness for the noise: %s",
		                strerror(errno)),
		       -1;
	if (cg_reducer_set_dp(&c->r, a->dp_clip, a->dp_noise, seed) != 0)
		return cg_warn(NULL), -1;
	return 0;
}

/* c's reducer as a asks: its operation, its model; 0, or -1 said. */
static int
start(const struct args *a, struct call *c)
{
	cg_set_threads(a->threads);
	cg_reducer_init(&c->r, a->op, a->param);
	c->r.skip_nonfinite = a->skip_nonfinite;
	c->r.allow_duplicates = a->allow_duplicates;
	if (a->model &&
	    ((c->m = cg_model_read(a->model)) == NULL ||
	     cg_reducer_set_model(
	         &c->r, c->m, a->model,
	         a->max_staleness < 0 ? UINT64_MAX : (uint64_t)a->max_staleness,
	         &a->stale) != 0))
		return cg_warn(NULL), -1;
	if (start_dp(a, c) != 0)
		return -1;
	if (a->slice_n &&
	    cg_reducer_set_slice(&c->r, a->slice_i, a->slice_n) != 0)
		return cg_warn(NULL), -1;
	return 0;
}

/*
 * A quorum: the updates the inputs stand for, as their manifests count
 * them (a reduction's output counts those it was made of).  None at all
 * (every one left out) is the reducer's to say.  0, or -1 said.
 */
static int
quorum(const struct args *a, const struct cg_reducer *r)
{
	if (r->inputs > 0 && r->inputs < (uint64_t)a->min_inputs) {
		cg_warnx("%llu input%s, fewer than --min-inputs %lld",
		         (unsigned long long)r->inputs,
		         r->inputs == 1 ? "" : "s", a->min_inputs);
		return -1;
	}
	return 0;
}

/* The result of c, encoded as a asks, written, and the call logged; 0,
 * or -1 said. */
static int
report(const struct args *a, struct call *c, double t0)
{
	if (a->coded) {
		struct cg_file *g =
		    cg_update_recode(c->f, &a->codec, a->budget);
		cg_file_free(c->f);
		if ((c->f = g) == NULL)
			return cg_warn(NULL), -1;
	}
	if (cg_file_write(c->f, a->out, a->comp) != 0)
		return cg_warn(NULL), -1;
	if (a->log &&
	    cg_json_append(
	        a->log, cg_reducer_log_json(&c->r, c->f, cg_now() - t0)) != 0)
		return cg_warn(NULL), -1;
	return 0;
}

/* The reveals of --unmask into r; the failures counted. */
static int
add_reveals(struct cg_reducer *r, const char *pattern)
{
	char *name = (char *)pattern;
	size_t count;
	char **paths = cg_inputs_expand(&name, 1, &count);
	int errors = 0;

	if (paths == NULL)
		return cg_fail(NULL);
	if (cg_reducer_reveal_ready(r) != 0)
		count = 0, errors = cg_fail(NULL);
	for (size_t i = 0; i < count; i++) {
		uint8_t *buf = NULL;
		size_t n = 0;
		if (cg_read_input(paths[i], CG_MAX_MANIFEST, &buf, &n) != 0 ||
		    cg_reducer_reveal(r, (const char *)buf, n, paths[i]) != 0)
			errors += cg_fail(NULL);
		free(buf);
	}
	cg_inputs_free(paths);
	return errors;
}

/* --reveal: this survivor's reveal of the masked updates given, written
 * to a->out; the exit status. */
static int
run_reveal(const struct args *a)
{
	struct cg_mask m;
	size_t count = 0, n = 0;
	char **paths = cg_inputs_expand(a->inputs, a->ninputs, &count);
	struct cg_update **u = calloc(count ? count : 1, sizeof(*u));
	const struct cg_mask_info **in = calloc(count ? count : 1, sizeof(*in));
	unsigned char(*base)[32] = calloc(count ? count : 1, 32);
	const char **names = calloc(count ? count : 1, sizeof(*names));
	struct cg_out out = {0};
	cJSON *o = NULL;
	char *text = NULL;
	int rc = CG_EXIT_FAILURE;

	if (cg_mask_init(&m, a->reveal, a->peers, NULL, CG_MASK_FRAC_BITS) !=
	    0) {
		cg_warn(NULL);
		goto out;
	}
	if (paths == NULL || !u || !in || !base || !names) {
		cg_fail(NULL);
		goto out;
	}
	for (; n < count; n++) {
		if ((u[n] = cg_update_read(paths[n])) == NULL) {
			cg_fail(NULL);
			goto out;
		}
		if (u[n]->mask == NULL) {
			cg_warnx("%s: not masked: nothing to reveal", paths[n]);
			n++;
			goto out;
		}
		in[n] = u[n]->mask;
		names[n] = u[n]->name;
		cg_hex_parse(base[n], u[n]->base); /* checked by the reader */
	}
	if ((o = cg_mask_reveal(&m, in, (const unsigned char(*)[32])base, names,
	                        (int)n)) == NULL ||
	    (text = cJSON_PrintUnformatted(o)) == NULL) {
		cg_fail(NULL);
		goto out;
	}
	if (cg_out_open(&out, a->out) != 0 ||
	    cg_out_write(&out, text, strlen(text)) != 0 ||
	    cg_out_write(&out, "\n", 1) != 0 || cg_out_commit(&out) != 0) {
		cg_warn(NULL);
		cg_out_abort(&out);
		goto out;
	}
	rc = CG_EXIT_OK;
out:
	if (text)
		OPENSSL_cleanse(text, strlen(text));
	free(text);
	cJSON_Delete(o);
	for (size_t i = 0; i < n; i++)
		cg_update_free(u[i]);
	free(u);
	free(in);
	free(base);
	free(names);
	cg_inputs_free(paths);
	cg_mask_free(&m);
	return rc;
}

/* --join: the slices given, joined into the whole reduction and
 * written to a->out; the exit status. */
static int
run_join(const struct args *a)
{
	size_t count = 0, n = 0;
	char **paths = cg_inputs_expand(a->inputs, a->ninputs, &count);
	struct cg_update **u = calloc(count ? count : 1, sizeof(*u));
	struct cg_file *f = NULL;
	int errors = 0, stdin_used = 0;

	if (paths == NULL || u == NULL) {
		errors = cg_fail(NULL);
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		if (strcmp(paths[i], "-") == 0 && stdin_used++)
			errors += cg_failx("standard input named twice");
		else if ((u[n] = cg_update_read(paths[i])) == NULL)
			errors += cg_fail(NULL);
		else
			n++;
	}
	if (errors == 0 && (f = cg_slice_join(u, (int)n)) == NULL)
		errors = cg_fail(NULL);
	if (errors == 0 && cg_file_write(f, a->out, a->comp) != 0)
		errors = cg_fail(NULL);
out:
	cg_file_free(f);
	for (size_t i = 0; i < n; i++)
		cg_update_free(u[i]);
	free(u);
	cg_inputs_free(paths);
	return errors ? CG_EXIT_FAILURE : CG_EXIT_OK;
}

/* The call: every input into the reducer, the result out; the exit
 * status. */
static int
run(const struct args *a, struct call *c)
{
	const double t0 = cg_now();

	if (a->reveal)
		return run_reveal(a);
	if (a->join)
		return run_join(a);
	if (start(a, c) != 0 ||
	    add_all(&c->r, a->inputs, a->ninputs, a->quiet) != 0 ||
	    (a->unmask && add_reveals(&c->r, a->unmask) != 0) ||
	    quorum(a, &c->r) != 0)
		return CG_EXIT_FAILURE;
	if ((c->f = cg_reducer_finish(&c->r)) == NULL)
		return cg_fail(NULL);
	return report(a, c, t0) != 0 ? CG_EXIT_FAILURE : CG_EXIT_OK;
}

static void
call_free(struct call *c)
{
	cg_file_free(c->f);
	cg_reducer_free(&c->r);
	cg_model_free(c->m);
}

int
main(int argc, char **argv)
{
	struct args a = {.out = "-",
	                 .op = cg_reduce_op_at(0),
	                 .min_inputs = 1,
	                 .dp_rate = 1,
	                 .max_staleness = -1};
	struct call c = {.m = NULL};
	int rc;

	cg_stale_weight_default(&a.stale);
	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE ||
	    (rc = validate(&a)) != CG_CONTINUE)
		return rc;
	rc = run(&a, &c);
	call_free(&c);
	return rc;
}
