/*
 * cg-audit - recompute workers' updates and say whether they are what
 * their inputs give.
 *
 * An update made by cg-train-step --deterministic records its call; with
 * the base model, the worker's shard and the state its call started from,
 * it is made again here, in deterministic mode, and compared bit for bit,
 * tensor by tensor.  One update (-d, -s), or a round's updates listed in
 * a file (-r), of which --fraction are drawn with --seed.  lib/train/audit.c
 * does the work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "train/audit.h"

enum {
	OPT_FRACTION = CG_KEY_OWN,
	OPT_JSON,
	OPT_SEED,
};

struct args {
	const char *model, *data, *state, *round, *update;
	double fraction;
	uint64_t seed;
	int threads;
	int json;
};

/* --fraction: 0 draws nothing */
static int
parse_fraction(const char *arg, void *where)
{
	if (cg_parse_f64("--fraction", arg, 0, 1, where) != 0)
		return -1;
	if (!(*(double *)where > 0))
		return cg_seterr("--fraction: must be above 0");
	return 0;
}

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"model", 'm', "FILE", "the base model the updates were made from",
     CG_OPT_STR(model)},
    {"data", 'd', "SHARD", "the worker's shard (one update)", CG_OPT_STR(data)},
    {"state", 's', "FILE", "the worker's state before its call (one update)",
     CG_OPT_STR(state)},
    {"round", 'r', "LIST", "audit a round: lines of UPDATE SHARD [STATE]",
     CG_OPT_STR(round)},
    {"fraction", OPT_FRACTION, "P",
     "audit a drawn fraction P of the round's updates (1)",
     CG_OPT_PARSE(fraction, parse_fraction)},
    {"seed", OPT_SEED, "N", "the draw's seed (0); pick it after the round",
     CG_OPT_U64(seed)},
    {"json", OPT_JSON, NULL, "one JSON object per update, one per line",
     CG_OPT_FLAG(json)},
    CG_OPT_THREADS(threads, CG_THREADS_HELP),
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-audit",
    .synopsis = "-m MODEL -d SHARD [-s STATE] [--json] UPDATE\n"
                "-m MODEL -r LIST [--fraction P] [--seed N] [--json]",
    .about = "Make a worker's grad or delta again from its base model, its\n"
             "shard and its state before the call (cg-train-step records the\n"
             "call with --deterministic), and compare them bit for bit:\n"
             "match, or the tensors that differ and by how much.",
    .opts = opts,
    .epilog = "Exit status: 0 every update audited matches, 1 a mismatch "
              "or a failure, 2\nusage error.",
};

/* The command line into a, checked; CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	if ((rc = cg_getopt_all(&cli, argc, argv, NULL, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	if (a->model == NULL)
		return cg_usage("no base model (-m)");
	if (a->round) {
		if (a->data || a->state)
			return cg_usage(
			    "-r lists each update's shard and state:"
			    " not with -d or -s");
		if (ind != argc)
			return cg_usage("unexpected operand '%s' with -r",
			                argv[ind]);
		/* each update of the round reads the model again */
		if (strcmp(a->model, "-") == 0)
			return cg_usage(
			    "-m: a round needs the model in a file");
		return CG_CONTINUE;
	}
	if (a->fraction != 1)
		return cg_usage("--fraction draws from a round (-r)");
	if (a->data == NULL)
		return cg_usage("no data shard (-d)");
	if (argc - ind != 1)
		return cg_usage(ind == argc ? "no update to audit"
		                            : "one UPDATE, or a round with -r");
	a->update = argv[ind];
	if (strcmp(a->update, "-") == 0 &&
	    (strcmp(a->model, "-") == 0 || strcmp(a->data, "-") == 0))
		return cg_usage("only one input can be standard input");
	if (strcmp(a->model, "-") == 0 && strcmp(a->data, "-") == 0)
		return cg_usage("only one input can be standard input");
	return CG_CONTINUE;
}

/* One JSON line: result "match", "mismatch", "skipped" or "error". */
static void
report_json(const char *name, const char *result, const struct cg_audit *a)
{
	cg_json_print(stdout, cg_audit_json(name, result, a));
}

/* ------------------------------------------------------------ an audit */

/*
 * Audit one update against its inputs and report it: 0 for a match, 1
 * for a mismatch, -1 said (a refusal or a failure).
 */
static int
audit_one(const struct args *a, const char *upath, const char *spath,
          const char *stpath)
{
	struct cg_audit au = {0};
	int rc = -1;

	if (cg_audit_files(upath, a->model, spath, stpath, &au) == 0) {
		if (a->json)
			report_json(upath, au.match ? "match" : "mismatch",
			            &au);
		else
			cg_audit_table(stdout, upath, &au);
		rc = au.match ? 0 : 1;
	} else {
		cg_warn(NULL);
		if (a->json)
			report_json(upath, "error", NULL);
	}
	cg_audit_free(&au);
	return rc;
}

/* A round's drawn updates, each audited; the exit status. */
static int
audit_round(const struct args *a)
{
	struct cg_audit_item *it = NULL;
	unsigned char *pick = NULL;
	int n, bad = 0;

	if ((n = cg_audit_round_read(a->round, &it)) < 0)
		return cg_fail(NULL);
	if ((pick = calloc((size_t)n, 1)) == NULL) {
		cg_audit_round_free(it, n);
		return cg_failx("out of memory");
	}
	cg_audit_draw(n, a->fraction, a->seed, pick);
	for (int i = 0; i < n; i++) {
		if (!pick[i]) {
			if (a->json)
				report_json(it[i].update, "skipped", NULL);
			else
				printf("%s: skipped (not drawn)\n",
				       it[i].update);
			continue;
		}
		bad |=
		    audit_one(a, it[i].update, it[i].shard, it[i].state) != 0;
	}
	free(pick);
	cg_audit_round_free(it, n);
	return bad ? CG_EXIT_FAILURE : CG_EXIT_OK;
}

int
main(int argc, char **argv)
{
	struct args a = {.fraction = 1};
	int rc;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE)
		return rc;
	cg_set_threads(a.threads);
	if (a.round)
		rc = audit_round(&a);
	else
		rc = audit_one(&a, a.update, a.data, a.state) == 0
		         ? CG_EXIT_OK
		         : CG_EXIT_FAILURE;
	return cg_finish_stdout(rc);
}
