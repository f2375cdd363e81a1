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
 * by BLEU and ROUGE-L (lib/evalgen.c).  The model's noise and the
 * sampler's draws come from --seed, so a rerun prints the same numbers.
 * A shard that cannot be read or does not fit the model is reported and
 * skipped; the exit status says whether any was.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "cli.h"
#include "evalgen.h"
#include "model.h"
#include "shard.h"
#include "train.h"

#define PROG "cg-eval"
#define DEFAULT_BATCH 500
#define MAX_BATCH (1 << 20)
#define MAX_THREADS 4096
#define MAX_TEMPERATURE 1000.0 /* as cg-sample */
#define MAX_TOP_K 1000000
#define MAX_MAX_BYTES (1 << 24) /* one buffer of this is allocated */

/* Codes of the options that have no short form. */
enum {
	OPT_GENERATE = 256,
	OPT_JSON,
	OPT_LIMIT,
	OPT_MAX_BYTES,
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
	/* Generation only; gen_opt names one that was given, for the
	 * message when --generate is not. */
	const char *gen_opt;
	struct cg_gen_opts gen; /* sampler.max_bytes 0: per reference */
};

static void
usage(void)
{
	fprintf(stderr,
	        "usage: " PROG " -m MODEL -d SHARD [-d SHARD ...] [--batch N] "
	        "[--json]\n"
	        "               [--seed N] [--threads N] [-q] [SHARD ...]\n"
	        "       " PROG " -m TEXT-MODEL -d SHARD ... --generate "
	        "[--limit N]\n"
	        "               [--temperature T] [--top-k K] [--top-p P] "
	        "[--max-bytes N]\n"
	        "Try '" PROG " --help' for more information.\n");
	exit(2);
}

static void
help(void)
{
	printf("usage: " PROG " -m MODEL -d SHARD [options] [SHARD ...]\n"
	       "Score a model on data shards and print the mean loss.\n"
	       "\n"
	       "  -b, --batch N       examples per forward pass (default %d)\n"
	       "  -d, --data SHARD    a data shard to score (repeatable; - is "
	       "stdin)\n"
	       "  -h, --help          show this help and exit\n"
	       "      --json          one JSON object per shard, one per line\n"
	       "  -m, --model FILE    the model (- is stdin)\n"
	       "  -q, --quiet         no progress output (cg-eval draws none "
	       "yet)\n"
	       "      --seed N        seed of the model's noise and of "
	       "--generate (default 0)\n"
	       "  -j, --threads N     threads (default 0: all cores)\n"
	       "  -V, --version       show the version and exit\n"
	       "\n"
	       "Text models:\n"
	       "      --generate      also continue each example's condition "
	       "and prompt, and\n"
	       "                      score that against its text: bleu, "
	       "rouge_l\n"
	       "      --limit N       generate for the first N examples only "
	       "(default: all)\n"
	       "      --max-bytes N   stop a continuation after N bytes "
	       "(default: its\n"
	       "                      reference's length + %d, at most %d)\n"
	       "      --temperature T of the logits (default 0: greedy)\n"
	       "      --top-k K       draw from the K likeliest bytes "
	       "(default 0: all)\n"
	       "      --top-p P       draw from the likeliest bytes of mass P "
	       "(default 1: all)\n"
	       "\n"
	       "Operands are shards too.  For cvae the columns are nelbo "
	       "(negative ELBO,\n"
	       "nats per image), rec, kl and bits/dim.  For text: "
	       "nats_per_token, tokens\n"
	       "(scored per example: text bytes and end-of-text), bpb (bits "
	       "per byte, the\n"
	       "end-of-text counted as a byte), ppl (2^bpb), and with "
	       "--generate bleu\n"
	       "(corpus BLEU-4) and rouge_l (mean ROUGE-L F1), both in [0, 1] "
	       "over\n"
	       "whitespace-separated tokens.  Exit status: 0 ok, 1 a failure, "
	       "2 a usage\n"
	       "error.\n",
	       DEFAULT_BATCH, CG_GEN_EXTRA, CG_GEN_CAP);
	exit(0);
}

static void
version(void)
{
	printf(PROG " (cg) " CG_VERSION "\n");
	exit(0);
}

/* Print "cg-eval: message" (the library's message names the file). */
static void
fail(void)
{
	fprintf(stderr, PROG ": %s\n", cg_errmsg());
}

static int
num_opt(const char *what, const char *s, long long min, long long max)
{
	long long v;

	if (cg_parse_i64(what, s, min, max, &v) != 0) {
		fprintf(stderr, PROG ": %s\n", cg_errmsg());
		usage();
	}
	return (int)v;
}

static double
dbl_opt(const char *what, const char *s, double min, double max)
{
	double v;

	if (cg_parse_f64(what, s, min, max, &v) != 0) {
		fprintf(stderr, PROG ": %s\n", cg_errmsg());
		usage();
	}
	return v;
}

static void
parse_args(int argc, char **argv, struct opts *o)
{
	/* Sorted by long name. */
	static const struct option longopts[] = {
	    {"batch", required_argument, NULL, 'b'},
	    {"data", required_argument, NULL, 'd'},
	    {"generate", no_argument, NULL, OPT_GENERATE},
	    {"help", no_argument, NULL, 'h'},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"limit", required_argument, NULL, OPT_LIMIT},
	    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
	    {"model", required_argument, NULL, 'm'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"seed", required_argument, NULL, OPT_SEED},
	    {"temperature", required_argument, NULL, OPT_TEMPERATURE},
	    {"threads", required_argument, NULL, 'j'},
	    {"top-k", required_argument, NULL, OPT_TOP_K},
	    {"top-p", required_argument, NULL, OPT_TOP_P},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int ch, nstdin = 0;

	opterr = 0; /* said below, after the program's name */
	memset(o, 0, sizeof(*o));
	o->batch = DEFAULT_BATCH;
	o->gen.sampler.top_p = 1.0; /* greedy, all bytes, auto budget */
	/* Every argument at most is a shard: -d's and operands together. */
	if ((o->data = calloc((size_t)argc + 1, sizeof(*o->data))) == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	while ((ch = getopt_long(argc, argv, ":b:d:hj:m:qV", longopts, NULL)) !=
	       -1) {
		switch (ch) {
		case 'b':
			o->batch = num_opt("--batch", optarg, 1, MAX_BATCH);
			break;
		case 'd':
			o->data[o->ndata++] = optarg;
			break;
		case 'h':
			help();
			break;
		case 'j':
			o->threads =
			    num_opt("--threads", optarg, 0, MAX_THREADS);
			break;
		case 'm':
			o->model = optarg;
			break;
		case 'q':
			o->quiet = 1;
			break;
		case 'V':
			version();
			break;
		case OPT_GENERATE:
			o->generate = 1;
			break;
		case OPT_JSON:
			o->json = 1;
			break;
		case OPT_LIMIT:
			o->gen.limit =
			    (uint64_t)num_opt("--limit", optarg, 1, INT32_MAX);
			o->gen_opt = "--limit";
			break;
		case OPT_MAX_BYTES:
			o->gen.sampler.max_bytes = (size_t)num_opt(
			    "--max-bytes", optarg, 1, MAX_MAX_BYTES);
			o->gen_opt = "--max-bytes";
			break;
		case OPT_SEED:
			if (cg_parse_u64("--seed", optarg, &o->seed) != 0) {
				fprintf(stderr, PROG ": %s\n", cg_errmsg());
				usage();
			}
			break;
		case OPT_TEMPERATURE:
			o->gen.sampler.temperature = dbl_opt(
			    "--temperature", optarg, 0, MAX_TEMPERATURE);
			o->gen_opt = "--temperature";
			break;
		case OPT_TOP_K:
			o->gen.sampler.top_k =
			    num_opt("--top-k", optarg, 0, MAX_TOP_K);
			o->gen_opt = "--top-k";
			break;
		case OPT_TOP_P:
			o->gen.sampler.top_p = dbl_opt("--top-p", optarg, 0, 1);
			o->gen_opt = "--top-p";
			break;
		case ':':
			fprintf(stderr,
			        PROG ": option '%s' needs an argument\n",
			        argv[optind - 1]);
			usage();
			break;
		default:
			/* optopt is the letter of a bad short option, or 0 or
			 * a code above 255 for a long one. */
			if (optopt > 0 && optopt < 256)
				fprintf(stderr, PROG ": unknown option '-%c'\n",
				        optopt);
			else
				fprintf(stderr, PROG ": unknown option '%s'\n",
				        argv[optind - 1]);
			usage();
		}
	}
	for (int i = optind; i < argc; i++)
		o->data[o->ndata++] = argv[i];
	if (o->model == NULL) {
		fprintf(stderr, PROG ": no model given (-m MODEL)\n");
		usage();
	}
	if (o->ndata == 0) {
		fprintf(stderr, PROG ": no data given (-d SHARD)\n");
		usage();
	}
	nstdin = strcmp(o->model, "-") == 0;
	for (int i = 0; i < o->ndata; i++)
		nstdin += strcmp(o->data[i], "-") == 0;
	if (nstdin > 1) {
		fprintf(stderr, PROG ": only one input can be standard "
		                     "input\n");
		usage();
	}
	if (o->gen_opt && !o->generate) {
		fprintf(stderr, PROG ": %s needs --generate\n", o->gen_opt);
		usage();
	}
	o->gen.seed = o->seed;
}

/* The arch's name for its objective (the cvae's: the negative ELBO). */
static const char *
loss_name(const struct cg_model *m)
{
	return m->arch->loss_name ? m->arch->loss_name : "loss";
}

/* Bits per dimension: the objective per pixel value. */
static double
bits_per_dim(const struct cg_shard *s, const struct cg_metrics *r)
{
	double dims = (double)s->height * s->width * s->channels;

	return r->loss / (M_LN2 * dims);
}

/*
 * The figures of a text shard.  A text arch's loss is in nats per scored
 * token, and it counts end-of-text as a byte (struct cg_metrics, model.h),
 * so that a model is also scored on where a text ends: bits_per is then
 * per token and per byte at once.
 */
struct text_figures {
	double nats; /* per token */
	double bpb;  /* bits per byte */
	double ppl;  /* perplexity per byte, 2^bpb */
};

static void
text_figures(const struct cg_metrics *r, struct text_figures *t)
{
	t->bpb = r->bits_per;
	t->nats = r->loss;
	t->ppl = exp2(t->bpb);
}

static int
print_json(const struct opts *o, const struct cg_model *m, const char *data,
           const struct cg_shard *s, const struct cg_metrics *r,
           const struct cg_gen_result *g)
{
	cJSON *j;
	char *txt;

	if ((j = cJSON_CreateObject()) == NULL)
		return cg_seterr("out of memory");
	cJSON_AddStringToObject(j, "model", o->model);
	cJSON_AddStringToObject(j, "data", data);
	cJSON_AddStringToObject(j, "arch", m->arch->name);
	cJSON_AddNumberToObject(j, "step", (double)m->step);
	cJSON_AddNumberToObject(j, "seed", (double)o->seed);
	cJSON_AddNumberToObject(j, "examples", (double)r->n);
	cJSON_AddNumberToObject(j, loss_name(m), r->loss);
	for (int i = 0; i < 3 && m->arch->part_names[i]; i++)
		cJSON_AddNumberToObject(j, m->arch->part_names[i], r->part[i]);
	if (s->kind == CG_PAYLOAD_IMAGE)
		cJSON_AddNumberToObject(j, "bits_per_dim", bits_per_dim(s, r));
	else {
		struct text_figures t;

		text_figures(r, &t);
		cJSON_AddNumberToObject(j, "nats_per_token", t.nats);
		cJSON_AddNumberToObject(j, "bpb", t.bpb);
		cJSON_AddNumberToObject(j, "ppl", t.ppl);
	}
	if (g) {
		const struct cg_sampler *sm = &o->gen.sampler;

		cJSON_AddNumberToObject(j, "generated", (double)g->n);
		cJSON_AddNumberToObject(j, "generated_bytes", (double)g->bytes);
		cJSON_AddNumberToObject(j, "temperature", sm->temperature);
		cJSON_AddNumberToObject(j, "top_k", sm->top_k);
		cJSON_AddNumberToObject(j, "top_p", sm->top_p);
		cJSON_AddNumberToObject(j, "bleu", g->bleu);
		cJSON_AddNumberToObject(j, "rouge_l", g->rouge_l);
	}
	txt = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (txt == NULL)
		return cg_seterr("out of memory");
	printf("%s\n", txt);
	free(txt);
	return 0;
}

/*
 * One table row; the header before the first.  Images: the objective,
 * its parts, bits/dim.  Text: nats_per_token, the parts, bpb, ppl, and
 * bleu and rouge_l with --generate.  The shards of one call are all of
 * the model's kind, so one header serves.
 */
static void
print_row(const struct cg_model *m, const char *data, const struct cg_shard *s,
          const struct cg_metrics *r, const struct cg_gen_result *g,
          int *header)
{
	const int text = s->kind == CG_PAYLOAD_TEXT;
	const int w = text ? 14 : 10; /* room for "nats_per_token" */
	struct text_figures t;

	if (!*header) {
		printf("%10s %*s", "examples", w,
		       text ? "nats_per_token" : loss_name(m));
		for (int i = 0; i < 3 && m->arch->part_names[i]; i++)
			printf(" %10s", m->arch->part_names[i]);
		if (text)
			printf(" %10s %10s", "bpb", "ppl");
		else
			printf(" %10s", "bits/dim");
		if (g)
			printf(" %10s %10s", "bleu", "rouge_l");
		printf("  data\n");
		*header = 1;
	}
	text_figures(r, &t);
	printf("%10llu %*.4f", (unsigned long long)r->n, w,
	       text ? t.nats : r->loss);
	for (int i = 0; i < 3 && m->arch->part_names[i]; i++)
		printf(" %10.4f", r->part[i]);
	if (text)
		printf(" %10.4f %10.4f", t.bpb, t.ppl);
	else
		printf(" %10.4f", bits_per_dim(s, r));
	if (g)
		printf(" %10.4f %10.4f", g->bleu, g->rouge_l);
	printf("  %s\n", data);
}

/* Score one shard and print its line.  Returns 0, or -1 with a message
 * naming the shard. */
static int
eval_one(const struct opts *o, struct cg_model *m, const char *data,
         int *header)
{
	struct cg_shard *s;
	struct cg_metrics r;
	struct cg_gen_result g;
	int rc = -1;

	if ((s = cg_shard_open(data)) == NULL)
		return -1;
	if (s->n == 0) {
		cg_seterr("%s: no examples to score", data);
		goto done;
	}
	/* A batch larger than the shard would only cost memory. */
	int B = (uint64_t)o->batch > s->n ? (int)s->n : o->batch;
	/* cg_eval_shard checks the data fits, condition names included. */
	if (cg_eval_shard(m, s, B, o->seed, &r) != 0 ||
	    (o->generate && cg_eval_generate(m, s, &o->gen, &g) != 0)) {
		cg_errprefix(data);
		goto done;
	}
	if (o->json) {
		if (print_json(o, m, data, s, &r, o->generate ? &g : NULL) != 0)
			goto done;
	} else
		print_row(m, data, s, &r, o->generate ? &g : NULL, header);
	rc = 0;
done:
	cg_shard_free(s);
	return rc;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct cg_model *m;
	int status = 0, header = 0;

	parse_args(argc, argv, &o);
	cg_set_threads(o.threads);
	if ((m = cg_model_read(o.model)) == NULL) {
		fail();
		free(o.data);
		return 1;
	}
	if (o.generate && m->arch->sample_image) {
		fprintf(stderr,
		        PROG ": %s: --generate is for text models (%s "
		             "makes images)\n",
		        o.model, m->arch->name);
		cg_model_free(m);
		free(o.data);
		usage();
	}
	if (!o.json)
		printf("model %s (%s, step %llu)\n", o.model, m->arch->name,
		       (unsigned long long)m->step);
	for (int i = 0; i < o.ndata; i++) {
		if (eval_one(&o, m, o.data[i], &header) != 0) {
			fail();
			status = 1;
		}
		/* Lines appear as shards finish, not all at the end. */
		fflush(stdout);
	}
	cg_model_free(m);
	free(o.data);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": standard output: write error\n");
		return 1;
	}
	return status;
}
