/*
 * cg-eval.c - measure a model on data shards.
 *
 * For each shard, every example is scored once, in order, with no
 * gradient, and the means are printed: for images the training objective
 * (for cvae the negative ELBO in nats per image), its named parts and
 * bits per dimension; for text nats per token, bits per byte and
 * perplexity per byte, exact means over the shard's scored tokens.  With
 * --generate a text model also continues each example's condition and
 * prompt, and the continuations are scored against the examples' texts
 * by BLEU and ROUGE-L (lib/eval/evalgen.c).  With --judge an image model
 * also draws images of every condition, and a classifier scores them
 * against the shard's real images: conditional accuracy and the Fréchet
 * distance of its features (lib/eval/judge.c); a diffusion model draws them
 * as cg-sample's --guidance, --sampler and --steps say (one parser,
 * lib/cli/cli.c).  The model's noise and the
 * sampler's draws come from --seed, so a rerun prints the same numbers.
 * A shard that cannot be read or does not fit the model is reported and
 * skipped; the exit status says whether any was.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "cli/cli.h"
#include "data/shard.h"
#include "eval/evalgen.h"
#include "eval/figures.h"
#include "eval/judge.h"
#include "model/model.h"
#include "nn/gemm.h"
#include "train/train.h"

#define DEFAULT_BATCH 500
#define MAX_BATCH (1 << 20)
#define MAX_TEMPERATURE 1000.0 /* as cg-sample */
#define MAX_TOP_K 1000000
#define MAX_MAX_BYTES (1 << 24) /* one buffer of this is allocated */
#define DEFAULT_JUDGE_SAMPLES 1000
#define STR_(x) #x
#define STR(x) STR_(x)

/* Keys of the options that have no short form. */
enum {
	OPT_DETERMINISTIC = CG_KEY_OWN,
	OPT_GENERATE,
	OPT_JSON,
	OPT_JUDGE,
	OPT_JUDGE_SAMPLES,
	OPT_LIMIT,
	OPT_MAX_BYTES,
	OPT_PRECISION,
	OPT_SEED,
	OPT_TEMPERATURE,
	OPT_TOP_K,
	OPT_TOP_P
};

struct opts {
	const char *model;
	const char **data; /* [ndata] */
	int ndata;
	int batch;
	uint64_t seed;
	int json;
	int threads;
	int quiet;
	int generate;
	int deterministic;
	int precision;
	const char *judge; /* the classifier, or NULL */
	int judge_samples;
	const char *have_judge_samples;
	/* How a diffusion model draws for the judge; diff_opt is the long
	 * name of one that was given, for the messages. */
	struct cg_diffusion_opts diffusion;
	const char *diff_opt;
	/* Generation only; gen_opt is the long name of one that was
	 * given, for the message when --generate is not. */
	const char *gen_opt;
	int have_temperature; /* for --generate's or --judge's noise */
	struct cg_gen_opts gen; /* sampler.max_bytes 0: per reference */
};

#define CG_CTX struct opts
static const struct cg_opt opts[] = {
    {"batch", 'b', "N",
     "examples per forward pass (default " STR(DEFAULT_BATCH) ")",
     CG_OPT_INT(batch, 1, MAX_BATCH)},
    {"data", 'd', "SHARD", "a data shard to score (repeatable; - is stdin)",
     CG_OPT_CUSTOM},
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    {"json", OPT_JSON, NULL, "one JSON object per shard, one per line",
     CG_OPT_FLAG(json)},
    {"model", 'm', "FILE", "the model (- is stdin)", CG_OPT_STR(model)},
    {"quiet", 'q', NULL, "no progress bar (one is drawn on a terminal)",
     CG_OPT_FLAG(quiet)},
    {"seed", OPT_SEED, "N",
     "seed of the model's noise and of --generate (default 0)",
     CG_OPT_U64(seed)},
    CG_OPT_THREADS(threads, "threads (0: OMP_NUM_THREADS, else all cores)"),
    {"deterministic", OPT_DETERMINISTIC, NULL,
     "the same figures at any thread count on any x86-64 (built-in "
     "kernels)",
     CG_OPT_FLAG(deterministic)},
    CG_OPT_PRECISION(OPT_PRECISION, precision),
    CG_OPT_VERSION,
    CG_OPT_HEADING("Text models:"),
    {"generate", OPT_GENERATE, NULL,
     "also continue each example's condition and prompt, and score that "
     "against its text: bleu, rouge_l",
     CG_OPT_FLAG(generate)},
    {"limit", OPT_LIMIT, "N",
     "generate for the first N examples only (default: all)",
     CG_OPT_U64_IN(gen.limit, 1, INT32_MAX), CG_OPT_SEEN_LAST(gen_opt)},
    {"max-bytes", OPT_MAX_BYTES, "N",
     "stop a continuation after N bytes (default: its reference's length "
     "+ " STR(CG_GEN_EXTRA) ", at most " STR(CG_GEN_CAP) ")",
     CG_OPT_U64_IN(gen.sampler.max_bytes, 1, MAX_MAX_BYTES),
     CG_OPT_SEEN_LAST(gen_opt)},
    {"temperature", OPT_TEMPERATURE, "T",
     "of the logits (default 0: greedy); with --judge, the scale of an "
     "image model's noise, as cg-sample's (default 1)",
     CG_OPT_F64(gen.sampler.temperature, 0, MAX_TEMPERATURE),
     CG_OPT_SEEN(have_temperature)},
    {"top-k", OPT_TOP_K, "K",
     "draw from the K likeliest bytes (default 0: all)",
     CG_OPT_INT(gen.sampler.top_k, 0, MAX_TOP_K), CG_OPT_SEEN_LAST(gen_opt)},
    {"top-p", OPT_TOP_P, "P",
     "draw from the likeliest bytes of mass P (default 1: all)",
     CG_OPT_F64(gen.sampler.top_p, 0, 1), CG_OPT_SEEN_LAST(gen_opt)},
    CG_OPT_HEADING("Image models:"),
    {"judge", OPT_JUDGE, "CLF",
     "also draw images of every condition and score them with the "
     "classifier CLF (a cclf model): conditional accuracy, Fréchet "
     "distance to the shard's images in CLF's features",
     CG_OPT_STR(judge)},
    {"judge-samples", OPT_JUDGE_SAMPLES, "N",
     "images drawn per condition (default " STR(DEFAULT_JUDGE_SAMPLES) ")",
     CG_OPT_INT(judge_samples, 2, CG_JUDGE_MAX_SAMPLES),
     CG_OPT_SEEN(have_judge_samples)},
    CG_OPT_HEADING("Diffusion models (cddpm), with --judge, as cg-sample:"),
    CG_DIFFUSION_OPTS(diffusion, diff_opt),
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-eval",
    .synopsis = "-m MODEL -d SHARD [-d SHARD ...] [--batch N] [--json]\n"
                " [--seed N] [--threads N] [-q] [SHARD ...]\n"
                "-m TEXT-MODEL -d SHARD ... --generate [--limit N]\n"
                " [--temperature T] [--top-k K] [--top-p P] [--max-bytes N]\n"
                "-m IMAGE-MODEL -d SHARD ... --judge CLF [--judge-samples N]\n"
                " [--seed N] [--temperature T]\n"
                " [--guidance W] [--steps N] [--sampler ddim|ddpm]",
    .about = "Score a model on data shards and print the mean loss.",
    .opts = opts,
    .epilog =
        "Operands are shards too.  For cvae the columns are nelbo (negative "
        "ELBO,\n"
        "nats per image), rec, kl and bits/dim; for cddpm mse (its "
        "objective, the\n"
        "weighted squared error of its predicted image, see cg-init(1)).  "
        "For\n"
        "text: nats_per_token, tokens (scored per example: text bytes and\n"
        "end-of-text), bpb (bits per byte, the end-of-text counted as a "
        "byte),\n"
        "ppl (2^bpb), and with --generate bleu\n"
        "(corpus BLEU-4) and rouge_l (mean ROUGE-L F1), both in [0, 1] "
        "over\n"
        "whitespace-separated tokens.  For a classifier (cclf): xent "
        "(cross-entropy,\n"
        "nats) and acc (the share classified as their condition).  "
        "--judge adds a\n"
        "table per shard: per condition and overall, acc (the share of "
        "the images\n"
        "drawn for it that CLF classifies as it), real_acc (CLF's on the "
        "shard's\n"
        "images) and frechet (the Fréchet distance, squared, between "
        "Gaussians\n"
        "fitted to CLF's features of drawn and of real images; - with "
        "fewer than 2\n"
        "real ones).  Exit status: 0 ok, 1 a failure, 2 a usage error.",
};

/* -d SHARD: one more shard. */
static int
data_option(void *ctx, const struct cg_getopt *g, int c)
{
	struct opts *o = ctx;

	(void)c;
	o->data[o->ndata++] = g->arg;
	return CG_CONTINUE;
}

/* The command line into o (whose data the caller frees); CG_CONTINUE or
 * the exit status. */
static int
parse(int argc, char **argv, struct opts *o)
{
	int ind, rc;

	memset(o, 0, sizeof(*o));
	o->batch = DEFAULT_BATCH;
	o->judge_samples = DEFAULT_JUDGE_SAMPLES;
	o->gen.sampler.top_p = 1.0; /* greedy, all bytes, auto budget */
	cg_setprogname(cli.name);   /* for a message before parsing */
	/* Every argument at most is a shard: -d's and operands together. */
	if ((o->data = calloc((size_t)argc + 1, sizeof(*o->data))) == NULL)
		return cg_failx("out of memory");
	if ((rc = cg_getopt_all(&cli, argc, argv, data_option, o, &ind)) !=
	    CG_CONTINUE)
		return rc;
	for (int i = ind; i < argc; i++)
		o->data[o->ndata++] = argv[i];
	o->gen.seed = o->seed;
	return CG_CONTINUE;
}

/* Conflicts and what is missing, each with its own message. */
static int
validate(const struct opts *o)
{
	int nstdin;

	if (o->model == NULL)
		return cg_usage("no model given (-m MODEL)");
	if (o->ndata == 0)
		return cg_usage("no data given (-d SHARD)");
	nstdin = strcmp(o->model, "-") == 0;
	nstdin += o->judge && strcmp(o->judge, "-") == 0;
	for (int i = 0; i < o->ndata; i++)
		nstdin += strcmp(o->data[i], "-") == 0;
	if (nstdin > 1)
		return cg_usage("only one input can be standard input");
	if (o->gen_opt && !o->generate)
		return cg_usage("--%s needs --generate", o->gen_opt);
	if (o->have_temperature && !o->generate && !o->judge)
		return cg_usage("--temperature needs --generate or --judge");
	if (o->have_judge_samples && !o->judge)
		return cg_usage("--judge-samples needs --judge");
	if (o->diff_opt && !o->judge)
		return cg_usage("--%s needs --judge", o->diff_opt);
	if (o->judge && o->generate)
		return cg_usage("--judge is for image models, --generate for "
		                "text models");
	return CG_CONTINUE;
}

/* The progress line begins again for a second phase: the line drawn so
 * far is overwritten, not ended. */
static void
restart(struct cg_progress *pb)
{
	int drawn = pb->drawn;

	cg_progress_init(pb, pb->fp, pb->label, !pb->on);
	pb->drawn = drawn;
}

/* The scale of the noise --judge draws images from: cg-sample's default,
 * 1, unless --temperature is given. */
static double
judge_temperature(const struct opts *o)
{
	return o->have_temperature ? o->gen.sampler.temperature : 1.0;
}

/* Score one shard and print its line.  Returns 0, or -1 with a message
 * naming the shard. */
static int
eval_one(const struct opts *o, struct cg_model *m, struct cg_model *judge,
         const char *data, int *header)
{
	struct cg_gen_opts gen = o->gen;
	struct cg_progress pb;
	struct cg_shard *s;
	struct cg_metrics r;
	struct cg_gen_result g;
	struct cg_judge_result jr = {0};
	int rc = -1;

	if ((s = cg_shard_open(data)) == NULL)
		return -1;
	if (s->n == 0) {
		cg_seterr("%s: no examples to score", data);
		goto done;
	}
	/* A batch larger than the shard would only cost memory. */
	int B = (uint64_t)o->batch > s->n ? (int)s->n : o->batch;
	/* A line on a terminal, for the scoring and then, on the same line
	 * with its clock started again, for the generation. */
	cg_progress_init(&pb, stderr, cg_getprogname(), o->quiet);
	gen.progress = cg_progress_cb;
	gen.progress_ctx = &pb;
	/* cg_eval_shard checks the data fits, condition names included. */
	int e = cg_eval_shard(m, s, B, o->seed, &r, cg_progress_cb, &pb);
	if (e == 0 && o->generate) {
		restart(&pb);
		e = cg_eval_generate(m, s, &gen, &g);
	}
	if (e == 0 && judge) {
		struct cg_judge_opts jo = {
		    .samples = o->judge_samples,
		    .seed = o->seed,
		    .temperature = judge_temperature(o),
		    .batch = o->batch,
		    .progress = cg_progress_cb,
		    .progress_ctx = &pb,
		};
		restart(&pb);
		e = cg_judge_eval(m, judge, s, &jo, &jr);
	}
	cg_progress_done(&pb);
	if (e != 0) {
		cg_errprefix(data);
		goto done;
	}
	struct cg_figures f = {
	    .model = o->model, .data = data, .seed = o->seed,
	    .deterministic = o->deterministic, .m = m, .s = s, .r = &r,
	    .sampler = &o->gen.sampler, .gen = o->generate ? &g : NULL,
	    .judge = o->judge, .judge_samples = o->judge_samples,
	    .judge_temperature = judge_temperature(o),
	    .diffusion = &o->diffusion, .jr = judge ? &jr : NULL,
	};
	if (!o->json)
		cg_figures_table(stdout, &f, header);
	else if (cg_json_print(stdout, cg_figures_json(&f)) != 0)
		goto done;
	rc = 0;
done:
	cg_judge_result_free(&jr);
	cg_shard_free(s);
	return rc;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct cg_model *m = NULL, *judge = NULL;
	int rc, header = 0;

	if ((rc = parse(argc, argv, &o)) != CG_CONTINUE ||
	    (rc = validate(&o)) != CG_CONTINUE)
		goto out;
	cg_set_threads(o.threads);
	if (cg_set_compute(o.deterministic, o.precision, o.quiet) != 0) {
		rc = cg_fail(NULL);
		goto out;
	}
	if ((m = cg_model_read_infer(o.model)) == NULL) {
		rc = cg_fail(NULL);
		goto out;
	}
	if (o.generate && m->arch->sample_image) {
		rc = cg_usage("%s: --generate is for text models (%s makes "
		              "images)",
		              o.model, m->arch->name);
		goto out;
	}
	if (o.diff_opt && !m->arch->diffusion) {
		rc = cg_usage("%s: --%s is for diffusion models (%s is not "
		              "one)",
		              o.model, o.diff_opt, m->arch->name);
		goto out;
	}
	/* The judge draws through the arch, which reads these. */
	m->diffusion = o.diffusion;
	if (o.judge) {
		if ((judge = cg_model_read_infer(o.judge)) == NULL) {
			rc = cg_fail(NULL);
			goto out;
		}
		if (cg_judge_check(judge, m) != 0) {
			rc = cg_failx("%s: %s", o.judge, cg_errmsg());
			goto out;
		}
	}
	if (!o.json)
		printf("model %s (%s, step %llu)\n", o.model, m->arch->name,
		       (unsigned long long)m->step);
	rc = CG_EXIT_OK;
	for (int i = 0; i < o.ndata; i++) {
		if (eval_one(&o, m, judge, o.data[i], &header) != 0)
			rc = cg_fail(NULL);
		/* Lines appear as shards finish, not all at the end. */
		fflush(stdout);
	}
	rc = cg_finish_stdout(rc);
out:
	cg_model_free(m);
	cg_model_free(judge);
	free(o.data);
	return rc;
}
