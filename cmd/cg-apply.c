/*
 * cg-apply - the optimizer step: a model and an update make a new model.
 *
 * A gradient goes through the optimizer (SGD, momentum, Adam, AdamW, with
 * a learning-rate schedule); a delta is added as it is (model averaging)
 * or through DiLoCo's outer Nesterov step.  The work is the library's
 * (apply.c); this program parses, checks the options against the kind of
 * update it was given, and reports.  A stale update (computed from an
 * older model) is applied when that model is given (--base-model), a
 * gradient corrected by DC-ASGD with --delay-comp.  An update noised for
 * differential privacy adds what it spent to the model's record
 * (model/privacy.h); --target-epsilon refuses one past a budget.  A
 * pipeline stage's file (cg-convert --stage) takes that stage's update
 * and is written back as the stage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "exchange/apply.h"
#include "exchange/update.h"
#include "model/model.h"
#include "model/stage.h"

enum {
	OPT_BASE_MODEL = CG_KEY_OWN,
	OPT_BUDGET,
	OPT_CHANGE,
	OPT_CLIP,
	OPT_CODEC,
	OPT_DELAY_COMP,
	OPT_NO_FEEDBACK,
	OPT_OUTER,
	OPT_OUTER_LR,
	OPT_OUTER_MOMENTUM,
	OPT_TARGET_EPSILON,
};

struct args {
	const char *model, *update, *out, *change, *codec_name, *base;
	struct cg_uspec codec;
	uint64_t budget;
	int no_feedback;
	struct cg_apply_opts ao;
	struct cg_optim_cli oc;
	enum cg_compress comp;
	int threads;
	/* The first option given that only a gradient (a delta) takes. */
	const char *grad_only, *delta_only;
	int outer_given;
};

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"model", 'm', "FILE", "the model to update", CG_OPT_STR(model)},
    {"output", 'o', "FILE", "the new model (- or a pipe: stdout)",
     CG_OPT_STR(out)},
    {"compress", 'z', "ALG", "none, gzip or zstd (none)",
     CG_OPT_PARSE(comp, cg_opt_compress)},
    CG_OPT_THREADS(threads, CG_THREADS_HELP),
    {"target-epsilon", OPT_TARGET_EPSILON, "E",
     "refuse an update whose noise would bring the model's\n"
     "differential privacy epsilon past E (or that has none)",
     CG_OPT_F64(ao.target_epsilon, 0, 1e6), CG_OPT_POSITIVE},
    CG_OPT_ENCRYPT_TO,
    CG_OPT_SIGN,
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    CG_OPT_HEADING("The downlink (the model's change, compressed):"),
    {"codec", OPT_CODEC, "SPEC",
     "publish the change encoded: f16, q8, q4, q2, topk:F, sign, lowrank:R",
     CG_OPT_PARSE(codec, cg_opt_codec), CG_OPT_PREFIX, CG_OPT_SEEN(codec_name)},
    {"budget", OPT_BUDGET, "BYTES", "fit the encoded change in BYTES",
     CG_OPT_SIZE(budget), CG_OPT_POSITIVE},
    {"change", OPT_CHANGE, "FILE",
     "where the change goes; workers apply it to rebuild the model",
     CG_OPT_STR(change)},
    {"no-error-feedback", OPT_NO_FEEDBACK, NULL,
     "do not keep what the change did not carry (ef.down)",
     CG_OPT_FLAG(no_feedback)},
    CG_OPT_HEADING("A stale update (computed from an older model):"),
    {"base-model", OPT_BASE_MODEL, "FILE",
     "the model it was computed from (its digest is checked)",
     CG_OPT_STR(base)},
    {"delay-comp", OPT_DELAY_COMP, "L",
     "a gradient: g + L g*g*(w - w_base), DC-ASGD (0: none)",
     CG_OPT_F64(ao.delay_comp, 0, 1e6), CG_OPT_SEEN(grad_only)},
    CG_OPT_HEADING("For deltas:"),
    {"outer", OPT_OUTER, "NAME",
     "avg (add the mean delta) or nesterov (DiLoCo outer step) (avg)",
     CG_OPT_CUSTOM, CG_OPT_SEEN(delta_only)},
    {"outer-lr", OPT_OUTER_LR, "X", "outer learning rate (0.7)",
     CG_OPT_F32(ao.outer_lr, 0, 1e3), CG_OPT_SEEN(delta_only)},
    {"outer-momentum", OPT_OUTER_MOMENTUM, "X", "outer Nesterov momentum (0.9)",
     CG_OPT_F32(ao.outer_mu, 0, 1), CG_OPT_SEEN(delta_only)},
    CG_OPT_HEADING("For gradients:"),
    {"clip", OPT_CLIP, "X", "clip the gradient's norm to X",
     CG_OPT_F64(ao.clip, 0, 1e30), CG_OPT_SEEN(grad_only)},
    CG_OPTIM_OPTS_SEEN(oc, grad_only),
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-apply",
    .synopsis = "-m MODEL [options] [UPDATE] [-o OUT]",
    .about = "Apply a gradient or delta (- or none: standard input).",
    .opts = opts,
    .epilog = "Exit status: 0 success, 1 failure, 2 usage error.",
};

/* --outer NAME: how a delta is applied. */
static int
outer_option(void *ctx, const struct cg_getopt *g, int c)
{
	struct args *a = ctx;

	(void)c;
	a->outer_given = 1;
	return cg_outer_parse(g->arg, &a->ao.outer) ? cg_usage(NULL)
	                                            : CG_CONTINUE;
}

/* The command line into a; CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	memset(a, 0, sizeof(*a));
	a->update = a->out = "-";
	cg_apply_defaults(&a->ao);
	cg_optim_cli_init(&a->oc, CG_OPT_ADAM);
	if ((rc = cg_getopt_all(&cli, argc, argv, outer_option, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	if (ind < argc)
		a->update = argv[ind++];
	if (ind < argc)
		return cg_usage("more than one update (reduce them first)");
	cg_optim_cli_finish(&a->oc, &a->ao.opt);
	return CG_CONTINUE;
}

/* What is missing or in conflict on the command line. */
static int
validate(const struct args *a)
{
	if (a->model == NULL)
		return cg_usage("no model (-m)");
	if (strcmp(a->model, "-") == 0 && strcmp(a->update, "-") == 0)
		return cg_usage("the model and the update cannot both be "
		                "standard input");
	if ((a->codec_name || a->budget) && a->change == NULL)
		return cg_usage("--codec and --budget publish a change: name "
		                "its file with --change");
	if (a->change && strcmp(a->change, a->out) == 0)
		return cg_usage("--change and -o name the same file");
	if (a->ao.delay_comp > 0 && a->base == NULL)
		return cg_usage("--delay-comp: the gradient's base model is "
		                "needed: name it with --base-model");
	if (a->base && strcmp(a->base, "-") == 0)
		return cg_usage("--base-model: a file, not standard input");
	return CG_CONTINUE;
}

/* Whether a's options fit u's kind: CG_CONTINUE, or a usage error. */
static int
validate_kind(const struct args *a, const struct cg_update *u)
{
	if (u->kind == CG_UPDATE_GRAD && a->delta_only)
		return cg_usage("%s: a gradient, but --%s is for deltas: "
		                "outer steps apply to deltas",
		                u->name, a->delta_only);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(u->file->manifest,
	                                                  "downlink")) &&
	    a->ao.outer != CG_OUTER_AVG)
		return cg_usage("%s: a published change is added as it is: "
		                "--outer %s would make another model than the "
		                "coordinator's",
		                u->name, "nesterov");
	if (u->kind == CG_UPDATE_DELTA && a->grad_only)
		return cg_usage("%s: a delta, but --%s is for gradients: the "
		                "optimizer steps on gradients",
		                u->name, a->grad_only);
	return CG_CONTINUE;
}

/* What the user did not choose but should know: said once, on stderr,
 * once the new model is written. */
static void
report(const struct args *a, const struct cg_update *u)
{
	if (u->kind == CG_UPDATE_DELTA && !a->outer_given &&
	    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(u->file->manifest,
	                                                   "downlink")))
		cg_warnx("%s: delta added as it is (--outer avg); --outer "
		         "nesterov for DiLoCo's outer step",
		         u->name);
}

/* The new model and, with --change, the change: both written and
 * fsynced before either is renamed, so a failure leaves neither.  0, or
 * -1 with a message. */
static int
publish(const struct args *a, struct cg_model *m, const char *mname,
        const struct cg_update *u)
{
	struct cg_out outs[2] = {{.fd = -1}, {.fd = -1}};
	struct cg_out *po[2] = {&outs[0], &outs[1]};
	struct cg_file *mf = NULL, *ch = NULL;
	int rc = -1;

	if (a->ao.stage) {
		if (a->change)
			return cg_seterr("%s: a pipeline stage publishes no "
			                 "change (--change)",
			                 mname);
		if (cg_apply_update(m, mname, u, &a->ao) != 0)
			return -1;
		return cg_file_write_free(cg_stage_file(m, a->ao.stage), a->out,
		                          a->comp);
	}
	if (a->change == NULL) {
		if (cg_apply_update(m, mname, u, &a->ao) != 0)
			return -1;
		return cg_model_write(m, a->out, a->comp);
	}
	if (cg_out_open(&outs[0], a->out) != 0 ||
	    cg_out_open(&outs[1], a->change) != 0)
		goto out;
	if (cg_apply_publish(m, mname, u, &a->ao, &a->codec, a->budget,
	                     !a->no_feedback && !cg_uspec_lossless(&a->codec),
	                     &ch) != 0 ||
	    (mf = cg_model_file(m)) == NULL ||
	    cg_file_write_to(mf, &outs[0], a->comp) != 0 ||
	    cg_file_write_to(ch, &outs[1], a->comp) != 0 ||
	    cg_out_commit_all(po, 2) != 0)
		goto out;
	rc = 0;
out:
	cg_out_abort(&outs[0]);
	cg_out_abort(&outs[1]);
	cg_file_free(mf);
	cg_file_free(ch);
	return rc;
}

int
main(int argc, char **argv)
{
	struct args a;
	struct cg_model *m = NULL, *b = NULL;
	struct cg_update *u = NULL;
	struct cg_stage st;
	int rc, staged;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE ||
	    (rc = validate(&a)) != CG_CONTINUE)
		return rc;
	cg_set_threads(a.threads);
	/* --change alone publishes the change whole (f32); --budget alone
	 * fits a top-k to it */
	if (a.change && a.codec_name == NULL)
		cg_uspec_parse(a.budget ? "topk" : "f32", &a.codec);
	if ((m = cg_stage_or_model_read(a.model, &st, &staged)) == NULL ||
	    (a.base && (b = cg_model_read(a.base)) == NULL) ||
	    (u = cg_update_read(a.update)) == NULL) {
		rc = cg_fail(NULL);
		goto out;
	}
	a.ao.base = b;
	a.ao.base_name = a.base;
	a.ao.stage = staged ? &st : NULL;
	if ((rc = validate_kind(&a, u)) != CG_CONTINUE)
		goto out;
	if (publish(&a, m, strcmp(a.model, "-") ? a.model : "(stdin)", u) !=
	    0) {
		rc = cg_fail(NULL);
		goto out;
	}
	report(&a, u);
	rc = CG_EXIT_OK;
out:
	cg_update_free(u);
	cg_model_free(m);
	cg_model_free(b);
	return rc;
}
