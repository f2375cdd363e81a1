/*
 * cg-apply - the optimizer step: a model and an update make a new model.
 *
 * A gradient goes through the optimizer (SGD, momentum, Adam, AdamW, with
 * a learning-rate schedule); a delta is added as it is (model averaging)
 * or through DiLoCo's outer Nesterov step.  The optimizer's state lives in
 * the model file.  An update computed from another model is refused.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "model.h"
#include "reduce.h"

static const char *prog = "cg-apply";

static void
usage(FILE *fp)
{
	fprintf(fp,
		"usage: %s -m MODEL [options] [UPDATE] [-o OUT]\n"
		"Apply a gradient or delta (- or none: standard input).\n"
		"  -m, --model FILE       the model to update\n"
		"  -o, --output FILE      the new model (- or a pipe: stdout)\n"
		"      --outer NAME       for deltas: avg (add the mean delta)\n"
		"                         or nesterov (DiLoCo outer step) (avg)\n"
		"      --outer-lr X       outer learning rate (0.7)\n"
		"      --outer-momentum X outer Nesterov momentum (0.9)\n"
		"      --clip X           clip a gradient's norm to X\n"
		"  -z, --compress ALG     none, gzip or zstd (none)\n"
		"  -j, --threads N        threads (all cores)\n"
		"  -h, --help, -V, --version\n"
		"For gradients:\n%s",
		prog, cg_optim_help);
}

static int
bad_usage(const char *msg)
{
	return cg_usage_error(prog, "-m MODEL [options] [UPDATE] [-o OUT]", msg);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"clip", required_argument, NULL, 3},
	    {"compress", required_argument, NULL, 'z'},
	    {"help", no_argument, NULL, 'h'},
	    {"model", required_argument, NULL, 'm'},
	    {"outer", required_argument, NULL, 4},
	    {"outer-lr", required_argument, NULL, 5},
	    {"outer-momentum", required_argument, NULL, 6},
	    {"output", required_argument, NULL, 'o'},
	    {"threads", required_argument, NULL, 'j'},
	    {"version", no_argument, NULL, 'V'},
	    CG_OPTIM_LONGOPTS,
	    {NULL, 0, NULL, 0}};
	const char *model = NULL, *upath = "-", *out = "-", *uname;
	struct cg_optim_cli oc;
	struct cg_optim opt;
	enum cg_compress comp = CG_COMPRESS_NONE;
	double clip = 0, olr = 0.7, omu = 0.9;
	long long threads = 0;
	int nesterov = 0, c, e, rc = 1;
	struct cg_model *m = NULL;
	struct cg_file *u = NULL;
	float *g = NULL;

	cg_optim_cli_init(&oc, CG_OPT_ADAM);
	while ((c = getopt_long(argc, argv, "hj:m:o:Vz:", opts, NULL)) != -1) {
		e = 0;
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'j':
			e = cg_parse_i64("--threads", optarg, 0, 4096,
					 &threads);
			break;
		case 'm':
			model = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'V':
			printf("%s (cg) %s\n", prog, CG_VERSION);
			return 0;
		case 'z':
			e = cg_compress_parse(optarg, &comp);
			break;
		case 3:
			e = cg_parse_f64("--clip", optarg, 0, 1e30, &clip);
			break;
		case 4:
			if (strcmp(optarg, "avg") == 0)
				nesterov = 0;
			else if (strcmp(optarg, "nesterov") == 0)
				nesterov = 1;
			else
				e = cg_seterr("--outer: '%s' is not avg or "
					      "nesterov",
					      optarg);
			break;
		case 5:
			e = cg_parse_f64("--outer-lr", optarg, 0, 1e3, &olr);
			break;
		case 6:
			e = cg_parse_f64("--outer-momentum", optarg, 0, 1,
					 &omu);
			break;
		default:
			if ((e = cg_optim_cli_option(&oc, c, optarg)) == 0)
				return bad_usage(NULL);
			e = e < 0;
			break;
		}
		if (e)
			return bad_usage(cg_errmsg());
	}
	if (optind < argc)
		upath = argv[optind++];
	if (optind < argc)
		return bad_usage("more than one update (reduce them first)");
	if (model == NULL)
		return bad_usage("no model (-m)");
	if (strcmp(model, "-") == 0 && strcmp(upath, "-") == 0)
		return bad_usage("the model and the update cannot both be "
				 "standard input");
	uname = strcmp(upath, "-") == 0 ? "(stdin)" : upath;
	cg_optim_cli_finish(&oc, &opt);
	cg_set_threads((int)threads);

	if ((m = cg_model_read(model)) == NULL ||
	    (u = cg_file_read(upath)) == NULL) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	const char *kind = cg_file_kind(u);
	int is_grad = strcmp(kind, "grad") == 0;
	if (!is_grad && strcmp(kind, "delta") != 0) {
		fprintf(stderr, "%s: %s: a %s file, not a grad or delta\n",
			prog, uname, kind);
		goto out;
	}
	char hex[65], mine[65];
	unsigned char d[32];
	uint64_t bstep;
	cg_model_digest(m, d);
	cg_hex(mine, d);
	if (cg_update_base(u, hex, &bstep) != 0) {
		fprintf(stderr, "%s: %s: no base model digest\n", prog, uname);
		goto out;
	}
	if (strcmp(hex, mine) != 0) {
		fprintf(stderr,
			"%s: %s: computed from another model (step %llu, "
			"sha256 %.12s...), not %s (step %llu, %.12s...)\n",
			prog, uname, (unsigned long long)bstep, hex, model,
			(unsigned long long)m->step, mine);
		goto out;
	}
	if ((g = cg_alloc(m->nparams * sizeof(float))) == NULL ||
	    cg_model_get_views(m, u, g) != 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, uname, cg_errmsg());
		goto out;
	}
	if (is_grad) {
		if (clip > 0)
			cg_clip_norm(g, m->nparams, clip);
		if (cg_model_ensure_opt(m, cg_optim_needs_m(opt.kind),
					cg_optim_needs_v(opt.kind)) != 0) {
			fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
			goto out;
		}
		m->opt_t++;
		cg_optim_step_views(&opt, m->opt_t, m->params, g, m->opt_m,
				    m->opt_v, m->views, m->nviews, 0);
	} else if (nesterov) {
		if (cg_model_ensure_outer(m) != 0) {
			fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
			goto out;
		}
		cg_outer_nesterov(m->params, g, m->outer_mom, m->nparams,
				  (float)olr, (float)omu);
	} else {
		for (size_t i = 0; i < m->nparams; i++)
			m->params[i] += g[i];
	}
	m->step++;
	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "loss");
	cJSON_AddNumberToObject(m->manifest, "loss",
				cg_json_num(u->manifest, "loss", 0));
	/* "samples" counts the examples the model has learnt from. */
	double seen = cg_json_num(m->manifest, "samples", 0) +
		      cg_json_num(u->manifest, "samples", 0);
	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "samples");
	cJSON_AddNumberToObject(m->manifest, "samples", seen);
	if (cg_model_write(m, out, comp) != 0) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	rc = 0;
out:
	free(g);
	cg_file_free(u);
	cg_model_free(m);
	return rc;
}
