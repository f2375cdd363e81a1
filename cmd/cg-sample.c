/*
 * cg-sample.c - draw images from a model, one grid row per condition.
 *
 * Each row holds -n samples of one condition; the conditions are the
 * ones named with -c, in the order given, or all of the model's, in
 * vocabulary order.  A row's noise comes from (seed, condition index)
 * alone, so "-c Dress" draws the very row that the full grid shows for
 * Dress, and the same seed always gives the same bytes.  Image models
 * only: sampling text is not written yet.  The image shape and the
 * condition names come from the model's manifest, as cg-init copied them
 * from the data.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "cli.h"
#include "image.h"
#include "model.h"

#define PROG "cg-sample"
#define DEFAULT_COUNT 10
#define MAX_COUNT 4096
#define MAX_THREADS 4096
#define MAX_TEMPERATURE 1000.0
#define GRID_PAD 2
/* Names listed in the message for an unknown condition. */
#define MAX_LISTED 32

/* Codes of the options that have no short form. */
enum { OPT_SEED = 256, OPT_TEMPERATURE };

struct opts {
	const char *model;
	const char *output;
	const char **conds; /* [nconds] as given */
	int nconds;
	int count;
	int have_format;
	enum cg_image_format format;
	uint64_t seed;
	double temperature;
	int threads;
};

/* What the manifest says about the images and their conditions. */
struct vocab {
	const char **names; /* [n], borrowed from the manifest */
	int n;
	int height, width, channels;
};

static void
usage(void)
{
	fprintf(stderr,
	        "usage: " PROG " -m MODEL [-c COND ...] [-n N] [--seed N] "
	        "[--temperature T]\n"
	        "                 [--format png|pgm] [--threads N] [-o FILE]\n"
	        "Try '" PROG " --help' for more information.\n");
	exit(2);
}

static void
help(void)
{
	printf("usage: " PROG " -m MODEL [options] [-o FILE]\n"
	       "Draw images from a model: a grid with one row per "
	       "condition.\n"
	       "\n"
	       "  -c, --cond NAME|INDEX  a condition to draw (repeatable; "
	       "default: all)\n"
	       "  -n, --count N          images per condition (default %d)\n"
	       "  -f, --format FMT       png or pgm (default: from FILE's "
	       "suffix, else png)\n"
	       "  -h, --help             show this help and exit\n"
	       "  -m, --model FILE       the model (- is stdin)\n"
	       "  -o, --output FILE      where to write (default -: stdout, "
	       "not a terminal)\n"
	       "      --seed N           seed of the noise (default 0)\n"
	       "      --temperature T    scale of the latent noise (default "
	       "1)\n"
	       "  -j, --threads N        threads (default 0: all cores)\n"
	       "  -V, --version          show the version and exit\n"
	       "\n"
	       "Exit status: 0 ok, 1 a failure, 2 a usage error.\n",
	       DEFAULT_COUNT);
	exit(0);
}

static void
version(void)
{
	printf(PROG " (cg) " CG_VERSION "\n");
	exit(0);
}

static void
bad_arg(void)
{
	fprintf(stderr, PROG ": %s\n", cg_errmsg());
	usage();
}

static void
parse_args(int argc, char **argv, struct opts *o)
{
	/* Sorted by long name. */
	static const struct option longopts[] = {
	    {"cond", required_argument, NULL, 'c'},
	    {"count", required_argument, NULL, 'n'},
	    {"format", required_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {"model", required_argument, NULL, 'm'},
	    {"output", required_argument, NULL, 'o'},
	    {"seed", required_argument, NULL, OPT_SEED},
	    {"temperature", required_argument, NULL, OPT_TEMPERATURE},
	    {"threads", required_argument, NULL, 'j'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	long long v;
	int ch;

	opterr = 0; /* said below, after the program's name */
	memset(o, 0, sizeof(*o));
	o->output = "-";
	o->count = DEFAULT_COUNT;
	o->temperature = 1.0;
	if ((o->conds = calloc((size_t)argc + 1, sizeof(*o->conds))) == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	while ((ch = getopt_long(argc, argv, ":c:f:hj:m:n:o:V", longopts,
	                         NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->conds[o->nconds++] = optarg;
			break;
		case 'f':
			if (cg_image_format_parse(optarg, &o->format) != 0)
				bad_arg();
			o->have_format = 1;
			break;
		case 'h':
			help();
			break;
		case 'j':
			if (cg_parse_i64("--threads", optarg, 0, MAX_THREADS,
			                 &v) != 0)
				bad_arg();
			o->threads = (int)v;
			break;
		case 'm':
			o->model = optarg;
			break;
		case 'n':
			if (cg_parse_i64("--count", optarg, 1, MAX_COUNT, &v) !=
			    0)
				bad_arg();
			o->count = (int)v;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'V':
			version();
			break;
		case OPT_SEED:
			if (cg_parse_u64("--seed", optarg, &o->seed) != 0)
				bad_arg();
			break;
		case OPT_TEMPERATURE:
			if (cg_parse_f64("--temperature", optarg, 0,
			                 MAX_TEMPERATURE, &o->temperature) != 0)
				bad_arg();
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
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n",
		        argv[optind]);
		usage();
	}
	if (o->model == NULL) {
		fprintf(stderr, PROG ": no model given (-m MODEL)\n");
		usage();
	}
	if (o->nconds > CG_SHARD_MAX_CONDITIONS) {
		fprintf(stderr, PROG ": more than %d conditions given\n",
		        CG_SHARD_MAX_CONDITIONS);
		usage();
	}
	if (!o->have_format)
		o->format = cg_image_format_guess(o->output);
}

/* A positive whole number under key of obj, at most max; else -1. */
static int
json_int(const cJSON *obj, const char *key, int max)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > max ||
	    v->valuedouble != (int)v->valuedouble)
		return -1;
	return (int)v->valuedouble;
}

/*
 * Read the vocabulary and image shape from m's manifest into *vb, and
 * check them against the architecture's config, which fixes how many
 * floats one image is: a manifest that disagrees would make the grid
 * read past the sampled buffer.  Returns 0 or -1 with a message.
 */
static int
get_vocab(const struct cg_model *m, struct vocab *vb)
{
	const cJSON *names, *img, *v;
	uint64_t in_dim, ncond;
	int i = 0;

	memset(vb, 0, sizeof(*vb));
	names = cJSON_GetObjectItemCaseSensitive(m->manifest, "conditions");
	if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) < 1 ||
	    cJSON_GetArraySize(names) > CG_SHARD_MAX_CONDITIONS)
		return cg_seterr("manifest: no \"conditions\" list");
	img = cJSON_GetObjectItemCaseSensitive(m->manifest, "image");
	if ((vb->height = json_int(img, "height", CG_IMAGE_MAX_SIDE)) < 0 ||
	    (vb->width = json_int(img, "width", CG_IMAGE_MAX_SIDE)) < 0 ||
	    (vb->channels = json_int(img, "channels", 4)) < 0)
		return cg_seterr("manifest: no valid \"image\" "
		                 "{height, width, channels}");
	in_dim = cg_json_u64(m->config, "in_dim", 0);
	ncond = cg_json_u64(m->config, "ncond", 0);
	if (in_dim != (uint64_t)vb->height * vb->width * vb->channels)
		return cg_seterr("manifest: images of %dx%dx%d, but the model "
		                 "makes %llu values per image",
		                 vb->height, vb->width, vb->channels,
		                 (unsigned long long)in_dim);
	if (ncond != (uint64_t)cJSON_GetArraySize(names))
		return cg_seterr("manifest: %d condition names, but the model "
		                 "has %llu conditions",
		                 cJSON_GetArraySize(names),
		                 (unsigned long long)ncond);
	vb->n = cJSON_GetArraySize(names);
	if ((vb->names = calloc((size_t)vb->n, sizeof(*vb->names))) == NULL)
		return cg_seterr("out of memory");
	cJSON_ArrayForEach(v, names)
	{
		if (!cJSON_IsString(v)) {
			free(vb->names);
			vb->names = NULL;
			return cg_seterr("manifest: condition %d is not a "
			                 "string",
			                 i);
		}
		vb->names[i++] = v->valuestring;
	}
	return 0;
}

/* The index of condition s, given by name or, failing that, by index;
 * -1 if neither. */
static int
find_cond(const struct vocab *vb, const char *s)
{
	long long v;

	for (int i = 0; i < vb->n; i++)
		if (strcmp(vb->names[i], s) == 0)
			return i;
	if (cg_parse_i64("condition", s, 0, vb->n - 1, &v) == 0)
		return (int)v;
	return -1;
}

/* An unknown condition is the user's slip, not a failure: say which
 * names would do, and exit 2. */
static void
unknown_cond(const struct vocab *vb, const char *s)
{
	fprintf(stderr, PROG ": unknown condition '%s'; valid: ", s);
	for (int i = 0; i < vb->n && i < MAX_LISTED; i++)
		fprintf(stderr, "%s\"%s\"", i ? ", " : "", vb->names[i]);
	fprintf(stderr, "%s, or an index 0 to %d\n",
	        vb->n > MAX_LISTED ? ", ..." : "", vb->n - 1);
	usage();
}

/*
 * Draw o->count images for each condition rows[0..nrows) into
 * imgs [nrows * count, pixels].  Returns 0 or -1.
 */
static int
draw(struct cg_model *m, const struct opts *o, const int *rows, int nrows,
     size_t pixels, float *imgs)
{
	int *cond;

	if ((cond = malloc((size_t)o->count * sizeof(*cond))) == NULL)
		return cg_seterr("out of memory");
	for (int r = 0; r < nrows; r++) {
		struct cg_rng rng;
		for (int i = 0; i < o->count; i++)
			cond[i] = rows[r];
		cg_rng_derive(&rng, o->seed, (uint64_t)rows[r], 0);
		if (m->arch->sample_image(
		        m, cond, o->count, o->temperature, &rng,
		        imgs + (size_t)r * o->count * pixels) != 0) {
			free(cond);
			return -1;
		}
	}
	free(cond);
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct cg_model *m = NULL;
	struct vocab vb = {0};
	int *rows = NULL, nrows;
	float *imgs = NULL;
	uint32_t gw, gh;
	int status = 1;

	parse_args(argc, argv, &o);
	/* cg_out_open refuses too, but only after all the work. */
	if (strcmp(o.output, "-") == 0 && isatty(STDOUT_FILENO)) {
		fprintf(stderr, PROG ": refusing to write an image to a "
		                     "terminal (use -o FILE or a pipe)\n");
		goto done;
	}
	cg_set_threads(o.threads);
	if ((m = cg_model_read(o.model)) == NULL)
		goto fail;
	if (m->arch->sample_image == NULL) {
		fprintf(stderr,
		        PROG ": %s: text sampling is not available yet (%s "
		             "is a text model)\n",
		        o.model, m->arch->name);
		goto done;
	}
	if (get_vocab(m, &vb) != 0) {
		cg_errprefix(o.model);
		goto fail;
	}
	nrows = o.nconds > 0 ? o.nconds : vb.n;
	if ((rows = calloc((size_t)nrows, sizeof(*rows))) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	for (int i = 0; i < nrows; i++) {
		rows[i] = o.nconds > 0 ? find_cond(&vb, o.conds[i]) : i;
		if (rows[i] < 0)
			unknown_cond(&vb, o.conds[i]);
	}
	/* Refuse a picture too large before drawing a single image. */
	if (cg_image_grid_size(nrows * o.count, vb.height, vb.width,
	                       vb.channels, o.count, GRID_PAD, &gw, &gh) != 0) {
		cg_errprefix(strcmp(o.output, "-") == 0 ? "standard output"
		                                        : o.output);
		goto fail;
	}
	size_t pixels = (size_t)vb.height * vb.width * vb.channels;
	if ((imgs = malloc((size_t)nrows * o.count * pixels * sizeof(*imgs))) ==
	    NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	if (draw(m, &o, rows, nrows, pixels, imgs) != 0) {
		cg_errprefix(o.model);
		goto fail;
	}
	if (cg_image_grid_write(o.output, imgs, nrows * o.count, vb.height,
	                        vb.width, vb.channels, o.count, GRID_PAD,
	                        o.format) != 0)
		goto fail;
	status = 0;
	goto done;
fail:
	fprintf(stderr, PROG ": %s\n", cg_errmsg());
done:
	free(imgs);
	free(rows);
	free(vb.names);
	cg_model_free(m);
	free(o.conds);
	return status;
}
