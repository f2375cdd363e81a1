/*
 * cg-apply - the optimizer step: a model and an update make a new model.
 *
 * A gradient goes through the optimizer (SGD, momentum, Adam, AdamW, with
 * a learning-rate schedule); a delta is added as it is (model averaging)
 * or through DiLoCo's outer Nesterov step.  The work is the library's
 * (apply.c); this program parses, checks the options against the kind of
 * update it was given, and reports.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "cli.h"
#include "model.h"
#include "update.h"

static const char *prog = "cg-apply";
static const char *synopsis = "-m MODEL [options] [UPDATE] [-o OUT]";

enum {
	OPT_CLIP = 1,
	OPT_OUTER,
	OPT_OUTER_LR,
	OPT_OUTER_MOMENTUM,
};

static const struct option opts[] = {
    {"clip", required_argument, NULL, OPT_CLIP},
    {"compress", required_argument, NULL, 'z'},
    {"help", no_argument, NULL, 'h'},
    {"model", required_argument, NULL, 'm'},
    {"outer", required_argument, NULL, OPT_OUTER},
    {"outer-lr", required_argument, NULL, OPT_OUTER_LR},
    {"outer-momentum", required_argument, NULL, OPT_OUTER_MOMENTUM},
    {"output", required_argument, NULL, 'o'},
    {"threads", required_argument, NULL, 'j'},
    {"version", no_argument, NULL, 'V'},
    CG_OPTIM_LONGOPTS,
    {NULL, 0, NULL, 0}};

struct args {
	const char *model, *update, *out;
	struct cg_apply_opts ao;
	enum cg_compress comp;
	long long threads;
	/* The first option given that only a gradient (a delta) takes. */
	const char *grad_only, *delta_only;
	int outer_given;
};

static void
usage(FILE *fp)
{
	fprintf(fp,
	        "usage: %s %s\n"
	        "Apply a gradient or delta (- or none: standard input).\n"
	        "  -m, --model FILE       the model to update\n"
	        "  -o, --output FILE      the new model (- or a pipe: stdout)\n"
	        "  -z, --compress ALG     none, gzip or zstd (none)\n"
	        "  -j, --threads N        threads (all cores)\n"
	        "  -h, --help, -V, --version\n"
	        "For deltas:\n"
	        "      --outer NAME       avg (add the mean delta) or\n"
	        "                         nesterov (DiLoCo outer step) (avg)\n"
	        "      --outer-lr X       outer learning rate (0.7)\n"
	        "      --outer-momentum X outer Nesterov momentum (0.9)\n"
	        "For gradients:\n"
	        "      --clip X           clip the gradient's norm to X\n%s",
	        prog, synopsis, cg_optim_help);
}

/* One option of opts (index li) into a; 0, or -1 with a message, or 1
 * when it is no option of ours. */
static int
option(struct args *a, struct cg_optim_cli *oc, int c, int li)
{
	double x;

	switch (c) {
	case 'j':
		return cg_parse_i64("--threads", optarg, 0, 4096, &a->threads);
	case 'm':
		a->model = optarg;
		return 0;
	case 'o':
		a->out = optarg;
		return 0;
	case 'z':
		return cg_compress_parse(optarg, &a->comp);
	case OPT_OUTER:
		a->delta_only = a->delta_only ? a->delta_only : "outer";
		a->outer_given = 1;
		return cg_outer_parse(optarg, &a->ao.outer);
	case OPT_OUTER_LR:
	case OPT_OUTER_MOMENTUM:
		a->delta_only = a->delta_only ? a->delta_only : opts[li].name;
		if (cg_parse_f64(
		        c == OPT_OUTER_LR ? "--outer-lr" : "--outer-momentum",
		        optarg, 0, c == OPT_OUTER_LR ? 1e3 : 1, &x) != 0)
			return -1;
		*(c == OPT_OUTER_LR ? &a->ao.outer_lr : &a->ao.outer_mu) =
		    (float)x;
		return 0;
	case OPT_CLIP:
		a->grad_only = a->grad_only ? a->grad_only : "clip";
		return cg_parse_f64("--clip", optarg, 0, 1e30, &a->ao.clip);
	default:
		switch (cg_optim_cli_option(oc, c, optarg)) {
		case 0:
			return 1;
		case 1:
			if (a->grad_only == NULL && li >= 0)
				a->grad_only = opts[li].name;
			return 0;
		default:
			return -1;
		}
	}
}

/* The command line into a: -1 to go on, else the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	struct cg_optim_cli oc;
	int c, li, e;

	memset(a, 0, sizeof(*a));
	a->update = a->out = "-";
	cg_apply_defaults(&a->ao);
	cg_optim_cli_init(&oc, CG_OPT_ADAM);
	while (li = -1,
	       (c = getopt_long(argc, argv, "hj:m:o:Vz:", opts, &li)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == 'V') {
			printf("%s (cg) %s\n", prog, CG_VERSION);
			return 0;
		}
		if ((e = option(a, &oc, c, li)) != 0)
			return cg_usage_error(prog, synopsis,
			                      e < 0 ? cg_errmsg() : NULL);
	}
	if (optind < argc)
		a->update = argv[optind++];
	if (optind < argc)
		return cg_usage_error(prog, synopsis,
		                      "more than one update (reduce them "
		                      "first)");
	if (a->model == NULL)
		return cg_usage_error(prog, synopsis, "no model (-m)");
	if (strcmp(a->model, "-") == 0 && strcmp(a->update, "-") == 0)
		return cg_usage_error(prog, synopsis,
		                      "the model and the update cannot both "
		                      "be standard input");
	cg_optim_cli_finish(&oc, &a->ao.opt);
	return -1;
}

/* Whether a's options fit u's kind: 0, or the exit status of a usage
 * error. */
static int
validate(const struct args *a, const struct cg_update *u)
{
	char msg[256];

	if (u->kind == CG_UPDATE_GRAD && a->delta_only) {
		snprintf(msg, sizeof(msg),
		         "%s: a gradient, but --%s is for deltas: outer steps "
		         "apply to deltas",
		         u->name, a->delta_only);
		return cg_usage_error(prog, synopsis, msg);
	}
	if (u->kind == CG_UPDATE_DELTA && a->grad_only) {
		snprintf(msg, sizeof(msg),
		         "%s: a delta, but --%s is for gradients: the "
		         "optimizer steps on gradients",
		         u->name, a->grad_only);
		return cg_usage_error(prog, synopsis, msg);
	}
	return 0;
}

/* What the user did not choose but should know: said once, on stderr,
 * once the new model is written. */
static void
report(const struct args *a, const struct cg_update *u)
{
	if (u->kind == CG_UPDATE_DELTA && !a->outer_given)
		fprintf(stderr,
		        "%s: %s: delta added as it is (--outer avg); --outer "
		        "nesterov for DiLoCo's outer step\n",
		        prog, u->name);
}

int
main(int argc, char **argv)
{
	struct args a;
	struct cg_model *m = NULL;
	struct cg_update *u = NULL;
	int rc = parse(argc, argv, &a);

	if (rc >= 0)
		return rc;
	cg_set_threads((int)a.threads);
	rc = 1;
	if ((m = cg_model_read(a.model)) == NULL ||
	    (u = cg_update_read(a.update)) == NULL) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	if ((rc = validate(&a, u)) != 0)
		goto out;
	rc = 1;
	if (cg_apply_update(m, strcmp(a.model, "-") ? a.model : "(stdin)", u,
	                    &a.ao) != 0 ||
	    cg_model_write(m, a.out, a.comp) != 0) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	report(&a, u);
	rc = 0;
out:
	cg_update_free(u);
	cg_model_free(m);
	return rc;
}
