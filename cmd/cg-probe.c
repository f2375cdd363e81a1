/*
 * cg-probe - how fast this host trains a model on a shard: examples/s,
 * and the weight cg-shard --weights takes for it.
 *
 * The weight is the examples/s itself, divided by --reference where one
 * is given: cg-shard reads its weights as relative shares, so the
 * figures of several hosts, probed with the same model, shard and
 * batch, go to it as they are.  lib/train/probe.c does the timing.
 *
 * --plan HOSTS takes those figures the other way: with each host's
 * memory and link, the split of a model into pipeline stages that
 * trains a batch fastest, and its predicted step time, bytes and
 * memory (lib/train/plan.h).  Nothing is timed then.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "train/plan.h"
#include "train/probe.h"

#define MAX_BATCH (1 << 20)
/* a probe is a few seconds; an hour is a mistake */
#define MAX_SECONDS 3600.0

enum {
	OPT_JSON = CG_KEY_OWN,
	OPT_CHECKPOINT,
	OPT_MICRO,
	OPT_PIPELINE,
	OPT_PLAN,
	OPT_PROBED,
	OPT_REFERENCE,
	OPT_SECONDS,
	OPT_SEED,
	OPT_WARMUP,
	OPT_WINDOWS,
	OPT_WIRE,
};

struct args {
	const char *model, *data;
	long long batch, windows;
	int threads;
	double seconds, warmup, reference;
	uint64_t seed;
	int json;
	const char *plan, *probed; /* --plan's hosts; the probes' model */
	long long micro;           /* --micro-batches; 0: the fastest */
	int pipeline, wire;        /* 1: 1F1B; wire_names' index */
	int ckpt;                  /* --checkpoint-activations */
	const char *micro_seen, *pipeline_seen, *wire_seen, *probed_seen;
};

/* --wire's names, the dtypes' own (cg_dtype_parse takes them) */
static const char *const wire_names[] = {"f32", "bf16", "q8_0", NULL};
static const char *const pipeline_names[] = {"gpipe", "1f1b", NULL};

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
    {"checkpoint-activations", OPT_CHECKPOINT, NULL,
     "--plan: no stage keeps activations: forward passes run again",
     CG_OPT_FLAG(ckpt)},
    {"micro-batches", OPT_MICRO, "M",
     "--plan: the batch in M micro-batches (the fastest)",
     CG_OPT_I64(micro, 1, MAX_BATCH), CG_OPT_SEEN(micro_seen)},
    {"pipeline", OPT_PIPELINE, "NAME", "--plan: the schedule, gpipe or 1f1b",
     CG_OPT_ENUM(pipeline, pipeline_names), CG_OPT_SEEN(pipeline_seen)},
    {"plan", OPT_PLAN, "HOSTS",
     "split MODEL into pipeline stages over the hosts of file HOSTS",
     CG_OPT_STR(plan)},
    {"probed", OPT_PROBED, "FILE",
     "--plan: the model the hosts' examples/s were probed with (MODEL)",
     CG_OPT_STR(probed), CG_OPT_SEEN(probed_seen)},
    {"reference", OPT_REFERENCE, "X",
     "print the weight as examples/s divided by X (1)",
     CG_OPT_F64(reference, 1e-30, 1e30)},
    {"seed", OPT_SEED, "N", "data order and model noise (0)", CG_OPT_U64(seed)},
    CG_OPT_THREADS(threads, CG_THREADS_HELP),
    {"wire", OPT_WIRE, "DTYPE",
     "--plan: activations on the wire as f32, bf16 or q8_0",
     CG_OPT_ENUM(wire, wire_names), CG_OPT_SEEN(wire_seen)},
    {"json", OPT_JSON, NULL, "one JSON object instead of the table",
     CG_OPT_FLAG(json)},
    CG_OPT_SEAL_KEY,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-probe",
    .synopsis = "-m MODEL -d SHARD [options]\n"
                "       cg-probe --plan HOSTS -m MODEL [-b B] [--micro-batches "
                "M]\n"
                "                [--pipeline NAME] [--wire DTYPE] [--probed "
                "FILE]\n"
                "                [--checkpoint-activations] [--json]",
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
	if (a->plan) {
		if (a->data)
			return cg_usage("--plan times nothing: no -d");
		if (strcmp(a->plan, "-") == 0 && strcmp(a->model, "-") == 0)
			return cg_usage("the model and the hosts cannot both "
			                "be standard input");
		return CG_CONTINUE;
	}
	if (a->micro_seen || a->pipeline_seen || a->wire_seen ||
	    a->probed_seen || a->ckpt)
		return cg_usage("--micro-batches, --pipeline, --wire, "
		                "--probed and --checkpoint-activations are "
		                "--plan's");
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

/* The plan p of model m (file path) over hosts hs, as a table or one
 * JSON line.  0, or -1 with a message. */
static int
plan_report(const struct args *a, const struct cg_model *m,
            const struct cg_plan_hosts *hs, const struct cg_plan *p)
{
	cJSON *j, *arr, *o, *l;

	if (!a->json) {
		printf("model:      %s, %llu parameters\n", m->arch->name,
		       (unsigned long long)m->nparams);
		printf("batch:      %lld in %d micro-batches of %d, %s, %s on "
		       "the wire\n",
		       a->batch, p->micro, p->run, pipeline_names[a->pipeline],
		       wire_names[a->wire]);
		printf("stage  host              layers      parameters  "
		       "peak MiB  compute s  activations\n");
		for (int i = 0; i < p->count; i++)
			printf("%-5d  %-16s  %4d:%-5d  %10llu  %8.1f  %9.4f  "
			       "%s\n",
			       i + 1, hs->h[i].name, p->st[i].a, p->st[i].b,
			       (unsigned long long)p->st[i].params,
			       (double)p->st[i].mem / (1 << 20), p->st[i].busy,
			       i == p->count - 1 ? "-"
			       : p->st[i].keep   ? "kept"
			                         : "recomputed");
		printf("step:       %.4f s predicted\n", p->step);
		printf("bytes/step: %llu down, %llu up over each link\n",
		       (unsigned long long)p->down, (unsigned long long)p->up);
		for (int i = 0; i < p->count; i++)
			printf("cut:        cg-convert -S %d/%d -L %d:%d -o "
			       "stage-%d.cgm %s\n",
			       i + 1, p->count, p->st[i].a, p->st[i].b, i + 1,
			       a->model);
		return 0;
	}
	if ((j = cJSON_CreateObject()) == NULL)
		return cg_seterr("out of memory");
	cJSON_AddStringToObject(j, "model", a->model);
	cJSON_AddStringToObject(j, "arch", m->arch->name);
	cJSON_AddNumberToObject(j, "params", (double)m->nparams);
	cJSON_AddNumberToObject(j, "batch", (double)a->batch);
	cJSON_AddNumberToObject(j, "micro_batches", p->micro);
	cJSON_AddNumberToObject(j, "micro_batch", p->run);
	cJSON_AddStringToObject(j, "pipeline", pipeline_names[a->pipeline]);
	cJSON_AddStringToObject(j, "wire", wire_names[a->wire]);
	cJSON_AddNumberToObject(j, "step_s", p->step);
	cJSON_AddNumberToObject(j, "bytes_down", (double)p->down);
	cJSON_AddNumberToObject(j, "bytes_up", (double)p->up);
	if ((arr = cJSON_AddArrayToObject(j, "stages")) != NULL)
		for (int i = 0; i < p->count; i++) {
			if ((o = cJSON_CreateObject()) == NULL)
				break;
			cJSON_AddItemToArray(arr, o);
			cJSON_AddStringToObject(o, "host", hs->h[i].name);
			if ((l = cJSON_AddArrayToObject(o, "layers")) != NULL) {
				cJSON_AddItemToArray(
				    l, cJSON_CreateNumber(p->st[i].a));
				cJSON_AddItemToArray(
				    l, cJSON_CreateNumber(p->st[i].b));
			}
			cJSON_AddNumberToObject(o, "params",
			                        (double)p->st[i].params);
			cJSON_AddNumberToObject(o, "peak_bytes",
			                        (double)p->st[i].mem);
			cJSON_AddNumberToObject(o, "compute_s", p->st[i].busy);
			cJSON_AddBoolToObject(o, "kept_activations",
			                      p->st[i].keep != 0);
		}
	return cg_json_print(stdout, j);
}

/* --plan: read the hosts and the models, plan, report.  The exit
 * status. */
static int
plan_main(const struct args *a)
{
	struct cg_plan_hosts *hs = malloc(sizeof(*hs));
	struct cg_plan *p = malloc(sizeof(*p));
	struct cg_model *m = NULL, *pm = NULL;
	struct cg_plan_opts o = {.batch = (int)a->batch,
	                         .micro = (int)a->micro,
	                         .one_f_one_b = a->pipeline,
	                         .recompute = a->ckpt};
	int rc = CG_EXIT_FAILURE;

	cg_dtype_parse(wire_names[a->wire], &o.wire);
	if (hs == NULL || p == NULL)
		cg_warnx("out of memory");
	else if (cg_plan_hosts_read(a->plan, hs) != 0 ||
	         (m = cg_model_read(a->model)) == NULL ||
	         (a->probed && (pm = cg_model_read(a->probed)) == NULL))
		cg_warn(NULL);
	else if (pm && (o.probe_flops = cg_plan_train_flops(pm)) < 0)
		cg_warn("%s", a->probed);
	else if (pm && strcmp(pm->arch->name, m->arch->name) != 0)
		cg_warnx("%s: a %s model, %s a %s one: probe with a model of "
		         "the arch planned",
		         a->probed, pm->arch->name, a->model, m->arch->name);
	else if (cg_plan_find(m, hs, &o, p) != 0)
		cg_warn("%s", a->model);
	else if (plan_report(a, m, hs, p) != 0)
		cg_warn(NULL);
	else
		rc = CG_EXIT_OK;
	cg_model_free(pm);
	cg_model_free(m);
	free(hs);
	free(p);
	return cg_finish_stdout(rc);
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
	if (a.plan)
		return plan_main(&a);
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
