/*
 * cg-eval.c - measure a model on data shards.
 *
 * For each shard, every example is scored once, in order, with no
 * gradient, and the means are printed: the training objective (for cvae
 * the negative ELBO in nats per image), its named parts, and the same
 * figure in bits per dimension (images) or bits per byte (text).  The
 * model's noise (the VAE's reparameterisation draws) comes from --seed,
 * so a rerun prints the same numbers.  A shard that cannot be read or
 * does not fit the model is reported and skipped; the exit status says
 * whether any was.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "cli.h"
#include "model.h"
#include "shard.h"
#include "train.h"

#define PROG "cg-eval"
#define DEFAULT_BATCH 500
#define MAX_BATCH (1 << 20)
#define MAX_THREADS 4096

/* Codes of the options that have no short form. */
enum { OPT_JSON = 256, OPT_SEED };

struct opts {
	const char *model;
	const char **data; /* [ndata] */
	int ndata;
	int batch;
	uint64_t seed;
	int json;
	int threads;
	int quiet;
};

static void
usage(void)
{
	fprintf(stderr,
	        "usage: " PROG " -m MODEL -d SHARD [-d SHARD ...] [--batch N] "
	        "[--json]\n"
	        "               [--seed N] [--threads N] [-q] [SHARD ...]\n"
	        "Try '" PROG " --help' for more information.\n");
	exit(2);
}

static void
help(void)
{
	printf(
	    "usage: " PROG " -m MODEL -d SHARD [options] [SHARD ...]\n"
	    "Score a model on data shards and print the mean loss.\n"
	    "\n"
	    "  -b, --batch N     examples per forward pass (default %d)\n"
	    "  -d, --data SHARD  a data shard to score (repeatable; - is "
	    "stdin)\n"
	    "  -h, --help        show this help and exit\n"
	    "      --json        one JSON object per shard, one per line\n"
	    "  -m, --model FILE  the model (- is stdin)\n"
	    "  -q, --quiet       no progress output (cg-eval draws none yet)\n"
	    "      --seed N      seed of the model's noise (default 0)\n"
	    "  -j, --threads N   threads (default 0: all cores)\n"
	    "  -V, --version     show the version and exit\n"
	    "\n"
	    "Operands are shards too.  For cvae the columns are nelbo "
	    "(negative ELBO,\n"
	    "nats per image), rec, kl and bits/dim.  Exit status: 0 ok, "
	    "1 a failure,\n"
	    "2 a usage error.\n",
	    DEFAULT_BATCH);
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

static void
parse_args(int argc, char **argv, struct opts *o)
{
	/* Sorted by long name. */
	static const struct option longopts[] = {
	    {"batch", required_argument, NULL, 'b'},
	    {"data", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"model", required_argument, NULL, 'm'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"seed", required_argument, NULL, OPT_SEED},
	    {"threads", required_argument, NULL, 'j'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int ch, nstdin = 0;

	opterr = 0; /* said below, after the program's name */
	memset(o, 0, sizeof(*o));
	o->batch = DEFAULT_BATCH;
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
		case OPT_JSON:
			o->json = 1;
			break;
		case OPT_SEED:
			if (cg_parse_u64("--seed", optarg, &o->seed) != 0) {
				fprintf(stderr, PROG ": %s\n", cg_errmsg());
				usage();
			}
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
}

/* The arch's name for its objective (the cvae's: the negative ELBO). */
static const char *
loss_name(const struct cg_model *m)
{
	return m->arch->loss_name ? m->arch->loss_name : "loss";
}

/* Bits per dimension (images: per pixel channel) or per byte (text). */
static double
bits_per(const struct cg_shard *s, const struct cg_metrics *r,
         const char **name)
{
	if (s->kind == CG_PAYLOAD_IMAGE) {
		double dims = (double)s->height * s->width * s->channels;
		*name = "bits_per_dim";
		return r->loss / (M_LN2 * dims);
	}
	*name = "bits_per_byte";
	return r->bits_per;
}

static int
print_json(const struct opts *o, const struct cg_model *m, const char *data,
           const struct cg_shard *s, const struct cg_metrics *r)
{
	cJSON *j;
	char *txt;
	const char *bname;
	double bits = bits_per(s, r, &bname);

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
	cJSON_AddNumberToObject(j, bname, bits);
	txt = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (txt == NULL)
		return cg_seterr("out of memory");
	printf("%s\n", txt);
	free(txt);
	return 0;
}

static void
print_row(const struct cg_model *m, const char *data, const struct cg_shard *s,
          const struct cg_metrics *r, int *header)
{
	const char *bname;
	double bits = bits_per(s, r, &bname);

	if (!*header) {
		printf("%10s %10s", "examples", loss_name(m));
		for (int i = 0; i < 3 && m->arch->part_names[i]; i++)
			printf(" %10s", m->arch->part_names[i]);
		printf(" %10s  data\n",
		       s->kind == CG_PAYLOAD_IMAGE ? "bits/dim" : "bits/byte");
		*header = 1;
	}
	printf("%10llu %10.4f", (unsigned long long)r->n, r->loss);
	for (int i = 0; i < 3 && m->arch->part_names[i]; i++)
		printf(" %10.4f", r->part[i]);
	printf(" %10.4f  %s\n", bits, data);
}

/* Score one shard and print its line.  Returns 0, or -1 with a message
 * naming the shard. */
static int
eval_one(const struct opts *o, struct cg_model *m, const char *data,
         int *header)
{
	struct cg_shard *s;
	struct cg_metrics r;
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
	if (cg_eval_shard(m, s, B, o->seed, &r) != 0) {
		cg_errprefix(data);
		goto done;
	}
	if (o->json) {
		if (print_json(o, m, data, s, &r) != 0)
			goto done;
	} else
		print_row(m, data, s, &r, header);
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
