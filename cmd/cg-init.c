/*
 * cg-init - create a model with seeded weights.
 *
 * The architecture's sizes come from options; the input shape (cvae) and
 * the condition vocabulary come from a data shard, so a model always fits
 * the data it was made for.  The vocabulary is copied into the model,
 * which is how cg-sample later names its rows.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cgpt.h"
#include "cli.h"
#include "model.h"

static const char *prog = "cg-init";

static void
usage(FILE *fp)
{
	fprintf(fp,
		"usage: %s -a ARCH -d SHARD [options] -o MODEL\n"
		"  -a, --arch NAME      architecture: cvae or cgpt\n"
		"      --context N      positions per sequence (cgpt: 128)\n"
		"  -d, --data SHARD     a data shard: input shape, conditions\n"
		"      --heads N        attention heads (cgpt: 4)\n"
		"      --hidden N       hidden width (cvae: 512)\n"
		"      --latent N       latent size (cvae: 32)\n"
		"      --layers N       hidden layers (cvae: 2) or blocks "
		"(cgpt: 4)\n"
		"  -o, --output FILE    model to write (- for stdout)\n"
		"      --seed N         weight seed (0)\n"
		"      --tied[=0|1]     cgpt: output projection tied to the "
		"token\n"
		"                       embedding (default 0; --tied alone: 1)\n"
		"      --width N        model width (cgpt: 256)\n"
		"  -z, --compress ALG   none, gzip or zstd (none)\n"
		"  -h, --help           this help\n"
		"  -V, --version        version\n",
		prog);
}

static int
fail(const char *msg)
{
	fprintf(stderr, "%s: %s\n", prog, msg);
	return 1;
}

static int
bad_usage(const char *msg)
{
	return cg_usage_error(prog, "-a ARCH -d SHARD [options] -o MODEL", msg);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"arch", required_argument, NULL, 'a'},
	    {"compress", required_argument, NULL, 'z'},
	    {"context", required_argument, NULL, 5},
	    {"data", required_argument, NULL, 'd'},
	    {"heads", required_argument, NULL, 6},
	    {"help", no_argument, NULL, 'h'},
	    {"hidden", required_argument, NULL, 1},
	    {"latent", required_argument, NULL, 2},
	    {"layers", required_argument, NULL, 3},
	    {"output", required_argument, NULL, 'o'},
	    {"seed", required_argument, NULL, 4},
	    {"tied", optional_argument, NULL, 7},
	    {"version", no_argument, NULL, 'V'},
	    {"width", required_argument, NULL, 8},
	    {NULL, 0, NULL, 0}};
	const char *arch = NULL, *data = NULL, *out = NULL;
	long long hidden = 512, latent = 32, layers = -1;
	long long context = 128, heads = 4, tied = 0, width = 256;
	uint64_t seed = 0;
	enum cg_compress comp = CG_COMPRESS_NONE;
	struct cg_shard *s = NULL;
	struct cg_model *m = NULL;
	int c, rc = 1;

	while ((c = getopt_long(argc, argv, "a:d:ho:Vz:", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			arch = optarg;
			break;
		case 'd':
			data = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'o':
			out = optarg;
			break;
		case 'V':
			printf("%s (cg) %s\n", prog, CG_VERSION);
			return 0;
		case 'z':
			if (cg_compress_parse(optarg, &comp) != 0)
				return bad_usage(cg_errmsg());
			break;
		case 1:
			if (cg_parse_i64("--hidden", optarg, 1, 1 << 20,
					 &hidden) != 0)
				return bad_usage(cg_errmsg());
			break;
		case 2:
			if (cg_parse_i64("--latent", optarg, 1, 1 << 20,
					 &latent) != 0)
				return bad_usage(cg_errmsg());
			break;
		case 3:
			if (cg_parse_i64("--layers", optarg, 1, 64, &layers) !=
			    0)
				return bad_usage(cg_errmsg());
			break;
		case 4:
			if (cg_parse_u64("--seed", optarg, &seed) != 0)
				return bad_usage(cg_errmsg());
			break;
		case 5:
			if (cg_parse_i64("--context", optarg, 1, CG_CGPT_MAX_T,
					 &context) != 0)
				return bad_usage(cg_errmsg());
			break;
		case 6:
			if (cg_parse_i64("--heads", optarg, 1, CG_CGPT_MAX_C,
					 &heads) != 0)
				return bad_usage(cg_errmsg());
			break;
		case 7:
			tied = 1;
			if (optarg &&
			    cg_parse_i64("--tied", optarg, 0, 1, &tied) != 0)
				return bad_usage(cg_errmsg());
			break;
		case 8:
			if (cg_parse_i64("--width", optarg, 1, CG_CGPT_MAX_C,
					 &width) != 0)
				return bad_usage(cg_errmsg());
			break;
		default:
			return bad_usage(NULL);
		}
	}
	if (optind != argc)
		return bad_usage("unexpected argument");
	if (arch == NULL)
		return bad_usage("no architecture (-a)");
	if (data == NULL)
		return bad_usage("no data shard (-d)");
	if (out == NULL)
		out = "-";
	if (cg_arch_find(arch) == NULL)
		return bad_usage(cg_errmsg());
	if ((s = cg_shard_open(data)) == NULL)
		return fail(cg_errmsg());

	cJSON *config = cJSON_CreateObject(), *extra = cJSON_CreateObject();
	cJSON *conds = cJSON_CreateArray();
	if (config == NULL || extra == NULL || conds == NULL) {
		cJSON_Delete(config);
		cJSON_Delete(extra);
		cJSON_Delete(conds);
		fail("out of memory");
		goto out;
	}
	for (size_t i = 0; i < s->nconditions; i++)
		cJSON_AddItemToArray(conds,
				     cJSON_CreateString(s->conditions[i]));
	cJSON_AddItemToObject(extra, "conditions", conds);
	if (strcmp(arch, "cvae") == 0) {
		if (s->kind != CG_PAYLOAD_IMAGE) {
			cJSON_Delete(config);
			cJSON_Delete(extra);
			fprintf(stderr, "%s: %s: cvae needs image data\n", prog,
				data);
			goto out;
		}
		cJSON *img = cJSON_AddObjectToObject(extra, "image");
		cJSON_AddNumberToObject(img, "height", s->height);
		cJSON_AddNumberToObject(img, "width", s->width);
		cJSON_AddNumberToObject(img, "channels", s->channels);
		cJSON_AddNumberToObject(
		    config, "in_dim",
		    (double)s->height * s->width * s->channels);
		cJSON_AddNumberToObject(config, "ncond",
					(double)s->nconditions);
		cJSON_AddNumberToObject(config, "hidden", (double)hidden);
		cJSON_AddNumberToObject(config, "layers",
					layers < 0 ? 2 : (double)layers);
		cJSON_AddNumberToObject(config, "latent", (double)latent);
	} else if (strcmp(arch, "cgpt") == 0) {
		if (s->kind != CG_PAYLOAD_TEXT) {
			cJSON_Delete(config);
			cJSON_Delete(extra);
			fprintf(stderr, "%s: %s: cgpt needs text data\n", prog,
				data);
			goto out;
		}
		cJSON_AddNumberToObject(config, "ncond",
					(double)s->nconditions);
		cJSON_AddNumberToObject(config, "context", (double)context);
		cJSON_AddNumberToObject(config, "width", (double)width);
		cJSON_AddNumberToObject(config, "layers",
					layers < 0 ? 4 : (double)layers);
		cJSON_AddNumberToObject(config, "heads", (double)heads);
		cJSON_AddNumberToObject(config, "tied", (double)tied);
	}
	if ((m = cg_model_create(arch, config, extra, seed)) == NULL) {
		fail(cg_errmsg());
		goto out;
	}
	if (cg_model_write(m, out, comp) != 0) {
		fail(cg_errmsg());
		goto out;
	}
	rc = 0;
out:
	cg_model_free(m);
	cg_shard_free(s);
	return rc;
}
