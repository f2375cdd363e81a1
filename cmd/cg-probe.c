/*
 * cg-probe - how fast this host trains a model on a shard: examples/s,
 * and the weight cg-shard --weights takes for it.
 *
 * The weight is the examples/s itself, divided by --reference where one
 * is given: cg-shard reads its weights as relative shares, so the
 * figures of several hosts, probed with the same model, shard and
 * batch, go to it as they are.  lib/train/probe.c does the timing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "train/probe.h"

#define MAX_BATCH (1 << 20)
/* a probe is a few seconds; an hour is a mistake */
#define MAX_SECONDS 3600.0

enum {
	OPT_JSON = CG_KEY_OWN,
	OPT_REFERENCE,
	OPT_SECONDS,
	OPT_SEED,
	OPT_WARMUP,
	OPT_WINDOWS,
};

struct args {
	const char *model, *data;
	long long batch, windows;
	int threads;
	double seconds, warmup, reference;
	uint64_t seed;
	int json;
};

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"model", 'm', "FILE", "the model to train", CG_OPT_STR(model)},
    {"data", 'd', "SHARD", "a data shard of this host", CG_OPT_STR(data)},
    {"batch", 'b', "B", "examples per step, as the host's calls (32)",
     CG_OPT_I64(batch, 1, MAX_BATCH)},
    {"seconds", OPT_SECONDS, "S", "seconds of timed steps (5)",
     CG_OPT_F64(seconds, 0, MAX_SECONDS), CG_OPT_POSITIVE},
    {"warmup", OPT_WARMUP, "S", "seconds of steps before, not timed (1)",
     CG_OPT_F64(warmup, 0, MAX_SECONDS)},
    {"windows", OPT_WINDOWS, "N",
     "cut the timed seconds into N windows; the median counts (5)",
     CG_OPT_I64(windows, 1, CG_PROBE_MAX_WINDOWS)},
    {"reference", OPT_REFERENCE, "X",
     "print the weight as examples/s divided by X (1)",
     CG_OPT_F64(reference, 1e-30, 1e30)},
    {"seed", OPT_SEED, "N", "data order and model noise (0)", CG_OPT_U64(seed)},
    CG_OPT_THREADS(threads, CG_THREADS_HELP),
    {"json", OPT_JSON, NULL, "one JSON object instead of the table",
     CG_OPT_FLAG(json)},
    CG_OPT_SEAL_KEY,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-probe",
    .synopsis = "-m MODEL -d SHARD [options]",
    .about = "Time a few seconds of real training steps of MODEL on SHARD on\n"
             "this host, after a warm-up, and print its examples/s and the\n"
             "weight cg-shard --weights takes for it (examples/s, relative).",
    .opts = opts,
    .epilog = "Exit status: 0 success, 1 failure, 2 usage error.",
};

static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	if ((rc = cg_getopt_all(&cli, argc, argv, NULL, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	if (ind != argc)
		return cg_usage("unexpected argument '%s'", argv[ind]);
	if (a->model == NULL)
		return cg_usage("no model (-m)");
	if (a->data == NULL)
		return cg_usage("no data shard (-d)");
	if (strcmp(a->model, "-") == 0 && strcmp(a->data, "-") == 0)
		return cg_usage("the model and the shard cannot both be "
		                "standard input");
	return CG_CONTINUE;
}

/* The figures, as a table or one JSON line.  0, or -1 with a message. */
static int
report(const struct args *a, const struct cg_model *m, int threads,
       const struct cg_probe_result *r)
{
	char host[256] = "";
	cJSON *j, *w;

	if (gethostname(host, sizeof(host) - 1) != 0)
		strcpy(host, "");
	if (!a->json) {
		printf("host:       %s\n", host);
		printf("model:      %s, %llu parameters\n", m->arch->name,
		       (unsigned long long)m->nparams);
		printf("threads:    %d\n", threads);
		printf("batch:      %lld\n", a->batch);
		printf("steps:      %d in %.2f s (%llu examples)\n", r->steps,
		       r->secs, (unsigned long long)r->samples);
		printf("cpu:        %.2f s (%.3g of a CPU", r->cpu,
		       r->secs > 0 ? r->cpu / r->secs : 0);
		if (isfinite(r->cap))
			printf("; allowed %.3g", r->cap);
		printf(")\n");
		printf(
		    "examples/s: %.6g (median of %d windows; %.6g to %.6g)\n",
		    r->rate, r->nwindows, r->lo, r->hi);
		printf("weight:     %.6g\n", r->rate / a->reference);
		return 0;
	}
	if ((j = cJSON_CreateObject()) == NULL)
		return cg_seterr("out of memory");
	cJSON_AddStringToObject(j, "host", host);
	cJSON_AddStringToObject(j, "model", a->model);
	cJSON_AddStringToObject(j, "data", a->data);
	cJSON_AddStringToObject(j, "arch", m->arch->name);
	cJSON_AddNumberToObject(j, "params", (double)m->nparams);
	cJSON_AddNumberToObject(j, "threads", threads);
	cJSON_AddNumberToObject(j, "batch", (double)a->batch);
	cJSON_AddNumberToObject(j, "steps", r->steps);
	cJSON_AddNumberToObject(j, "examples", (double)r->samples);
	cJSON_AddNumberToObject(j, "seconds", r->secs);
	cJSON_AddNumberToObject(j, "cpu_seconds", r->cpu);
	if (isfinite(r->cap))
		cJSON_AddNumberToObject(j, "cpu_cap", r->cap);
	else
		cJSON_AddNullToObject(j, "cpu_cap");
	cJSON_AddNumberToObject(j, "examples_per_s", r->rate);
	cJSON_AddNumberToObject(j, "reference", a->reference);
	cJSON_AddNumberToObject(j, "weight", r->rate / a->reference);
	if ((w = cJSON_AddArrayToObject(j, "windows")) != NULL)
		for (int i = 0; i < r->nwindows; i++)
			cJSON_AddItemToArray(w,
			                     cJSON_CreateNumber(r->window[i]));
	return cg_json_print(stdout, j);
}

int
main(int argc, char **argv)
{
	struct args a = {.batch = 32,
	                 .seconds = 5,
	                 .warmup = 1,
	                 .windows = 5,
	                 .reference = 1};
	struct cg_probe_opts o;
	struct cg_probe_result r;
	struct cg_model *m = NULL;
	struct cg_shard *s = NULL;
	int rc;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE)
		return rc;
	cg_set_threads(a.threads);
	o = (struct cg_probe_opts){.batch = (int)a.batch,
	                           .warmup = a.warmup,
	                           .seconds = a.seconds,
	                           .windows = (int)a.windows,
	                           .seed = a.seed};
	rc = CG_EXIT_FAILURE;
	if ((m = cg_model_read(a.model)) == NULL ||
	    (s = cg_shard_open(a.data)) == NULL)
		cg_warn(NULL);
	else if (cg_probe_run(m, s, &o, &r) != 0)
		cg_warn("%s", a.data);
	else if (report(&a, m, cg_threads(), &r) != 0)
		cg_warn(NULL);
	else
		rc = CG_EXIT_OK;
	cg_shard_free(s);
	cg_model_free(m);
	return cg_finish_stdout(rc);
}
