/*
 * cg-train-step - run K micro-batches of training on one worker.
 *
 * Emits the mean gradient (synchronous data parallel), the change of the
 * weights after K local optimizer steps (local SGD, DiLoCo's inner loop),
 * or the trained model itself (plain single-machine training).  A state
 * file keeps what a worker must remember between calls: the data cursor
 * and the inner optimizer's moments.  Same inputs and seed, same bytes.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "train.h"

static const char *prog = "cg-train-step";

static void
usage(FILE *fp)
{
	fprintf(fp,
		"usage: %s -m MODEL -d SHARD [options] [-o OUT]\n"
		"  -m, --model FILE       the model to start from\n"
		"  -d, --data SHARD       the worker's data shard\n"
		"  -e, --emit WHAT        grad, delta or model (grad)\n"
		"  -k, --steps K          micro-batches or optimizer steps (1)\n"
		"  -b, --batch B          examples per micro-batch (128)\n"
		"  -s, --state FILE       worker state kept between calls\n"
		"  -o, --output FILE      where to write (- or a pipe: stdout)\n"
		"      --clip X           clip the gradient norm to X\n"
		"      --order NAME       shuffle or sequential (shuffle)\n"
		"      --seed N           data order and model noise (0)\n"
		"      --log FILE         append one JSON line of metrics\n"
		"      --max-memory SIZE  fit the call in SIZE (256M, 2G): "
		"chunks, checkpointing\n"
		"      --checkpoint-activations  recompute activations in "
		"the backward pass\n"
		"  -j, --threads N        threads (all cores)\n"
		"  -z, --compress ALG     none, gzip or zstd (none)\n"
		"  -q, --quiet            no progress bar or summary\n"
		"  -h, --help, -V, --version\n"
		"The inner optimizer (delta and model):\n%s",
		prog, cg_optim_help);
}

static int
bad_usage(const char *msg)
{
	return cg_usage_error(prog, "-m MODEL -d SHARD [options] [-o OUT]", msg);
}

static void
progress(void *ctx, int done, int total, double loss)
{
	cg_progress_update(ctx, done, total, loss);
}

static int
write_log(const char *path, const struct cg_model *m,
	  const struct cg_train_result *res, double secs, const char *emit,
	  const struct cg_memplan *plan)
{
	FILE *fp = fopen(path, "a");
	cJSON *o = cJSON_CreateObject();
	char *s;
	int rc = -1;

	if (fp == NULL || o == NULL) {
		cg_seterr("%s: cannot append", path);
		goto out;
	}
	cJSON_AddStringToObject(o, "emit", emit);
	cJSON_AddNumberToObject(o, "step", (double)m->step);
	cJSON_AddNumberToObject(o, "samples", (double)res->samples);
	cJSON_AddNumberToObject(o, "loss", res->mean.loss);
	for (int i = 0; i < 3; i++)
		if (m->arch->part_names[i])
			cJSON_AddNumberToObject(o, m->arch->part_names[i],
						res->mean.part[i]);
	cJSON_AddNumberToObject(o, "seconds", secs);
	cJSON_AddNumberToObject(o, "chunk", plan->chunk);
	cJSON_AddBoolToObject(o, "checkpoint", plan->checkpoint);
	cJSON_AddNumberToObject(o, "memory_plan", (double)plan->estimate);
	cJSON_AddNumberToObject(o, "memory_peak", (double)cg_rss_peak());
	if ((s = cJSON_PrintUnformatted(o)) == NULL)
		goto out;
	fprintf(fp, "%s\n", s);
	free(s);
	rc = 0;
out:
	if (fp && fclose(fp) != 0)
		rc = cg_seterr("%s: write failed", path);
	cJSON_Delete(o);
	return rc;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"batch", required_argument, NULL, 'b'},
	    {"checkpoint-activations", no_argument, NULL, 14},
	    {"clip", required_argument, NULL, 3},
	    {"compress", required_argument, NULL, 'z'},
	    {"data", required_argument, NULL, 'd'},
	    {"emit", required_argument, NULL, 'e'},
	    {"help", no_argument, NULL, 'h'},
	    {"log", required_argument, NULL, 5},
	    {"max-memory", required_argument, NULL, 13},
	    {"model", required_argument, NULL, 'm'},
	    {"order", required_argument, NULL, 10},
	    {"output", required_argument, NULL, 'o'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"seed", required_argument, NULL, 12},
	    {"state", required_argument, NULL, 's'},
	    {"steps", required_argument, NULL, 'k'},
	    {"threads", required_argument, NULL, 'j'},
	    {"version", no_argument, NULL, 'V'},
	    CG_OPTIM_LONGOPTS,
	    {NULL, 0, NULL, 0}};
	const char *model = NULL, *data = NULL, *out = NULL, *state = NULL;
	const char *logpath = NULL, *emit_name = "grad";
	struct cg_train_opts o;
	struct cg_optim_cli oc;
	enum cg_compress comp = CG_COMPRESS_NONE;
	double clip = 0;
	long long steps = 1, batch = 128, threads = 0;
	uint64_t seed = 0, max_memory = 0;
	int quiet = 0, ckpt = 0, c, rc = 1;
	struct cg_memplan plan;
	struct cg_model *m = NULL;
	struct cg_shard *s = NULL;
	struct cg_state *st = NULL;
	struct cg_state_call call;
	struct cg_train_result res;
	struct cg_progress pb;
	struct cg_file *f = NULL;
	struct cg_out oout = {.fd = -1}, sout = {.fd = -1};
	float *buf = NULL;

	memset(&o, 0, sizeof(o));
	cg_optim_cli_init(&oc, CG_OPT_ADAM);
	while ((c = getopt_long(argc, argv, "b:d:e:hj:k:m:o:qs:Vz:", opts,
				NULL)) != -1) {
		int e = 0;
		switch (c) {
		case 'b':
			e = cg_parse_i64("--batch", optarg, 1, 1 << 20, &batch);
			break;
		case 'd':
			data = optarg;
			break;
		case 'e':
			emit_name = optarg;
			if (strcmp(optarg, "grad") == 0)
				o.emit = CG_EMIT_GRAD;
			else if (strcmp(optarg, "delta") == 0)
				o.emit = CG_EMIT_DELTA;
			else if (strcmp(optarg, "model") == 0)
				o.emit = CG_EMIT_MODEL;
			else
				e = cg_seterr("--emit: '%s' is not grad, "
					      "delta or model",
					      optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'j':
			e = cg_parse_i64("--threads", optarg, 0, 4096,
					 &threads);
			break;
		case 'k':
			e = cg_parse_i64("--steps", optarg, 1, 1LL << 40,
					 &steps);
			break;
		case 'm':
			model = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'q':
			quiet = 1;
			break;
		case 's':
			state = optarg;
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
		case 5:
			logpath = optarg;
			break;
		case 10:
			if (strcmp(optarg, "shuffle") == 0)
				o.order = CG_ORDER_SHUFFLE;
			else if (strcmp(optarg, "sequential") == 0)
				o.order = CG_ORDER_SEQUENTIAL;
			else
				e = cg_seterr("--order: '%s' is not shuffle "
					      "or sequential",
					      optarg);
			break;
		case 12:
			e = cg_parse_u64("--seed", optarg, &seed);
			break;
		case 13:
			e = cg_parse_size("--max-memory", optarg, &max_memory);
			if (e == 0 && max_memory == 0)
				e = cg_seterr("--max-memory: must be positive");
			break;
		case 14:
			ckpt = 1;
			break;
		default:
			if ((e = cg_optim_cli_option(&oc, c, optarg)) == 0)
				return bad_usage(NULL);
			e = e < 0;
			break;
		}
		if (e != 0)
			return bad_usage(cg_errmsg());
	}
	if (optind != argc)
		return bad_usage("unexpected argument");
	if (model == NULL)
		return bad_usage("no model (-m)");
	if (data == NULL)
		return bad_usage("no data shard (-d)");
	if (strcmp(model, "-") == 0 && strcmp(data, "-") == 0)
		return bad_usage("the model and the shard cannot both be "
				 "standard input");
	/* A state is read and written back: it must be a file. */
	if (state && strcmp(state, "-") == 0)
		return bad_usage("--state: '-' is not a file");
	if (out == NULL)
		out = "-";
	if (state && strcmp(state, out) == 0)
		return bad_usage("--state and -o name the same file");

	cg_optim_cli_finish(&oc, &o.opt);
	o.steps = (int)(steps > 1 << 30 ? 1 << 30 : steps);
	o.batch = (int)batch;
	o.seed = seed;
	o.clip = clip;
	cg_set_threads((int)threads);

	if ((m = cg_model_read(model)) == NULL ||
	    (s = cg_shard_open(data)) == NULL) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	/* Open the outputs first: a terminal on stdout or an unwritable
	 * directory is refused before any work is done. */
	if (cg_out_open(&oout, out) != 0 ||
	    (state && cg_out_open(&sout, state) != 0)) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	/* A state must belong to this call: see cg_state_check. */
	if (state)
		cg_state_call_init(&call, emit_name, s, m, out);
	if (state && (cg_state_read(&st, state) != 0 ||
		      cg_state_check(st, state, &call) != 0)) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	if (cg_train_plan(m, &o, st, max_memory, cg_rss_now(), ckpt,
			  &plan) != 0) {
		fprintf(stderr, "%s: %s%s%s\n", prog,
			max_memory ? "--max-memory: " : "",
			ckpt && !max_memory ? "--checkpoint-activations: " : "",
			cg_errmsg());
		goto out;
	}
	if (st && cg_train_state_init(st, m, &o) != 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, state, cg_errmsg());
		goto out;
	}
	if (o.emit != CG_EMIT_MODEL &&
	    (buf = cg_alloc(m->nparams * sizeof(float))) == NULL) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	cg_progress_init(&pb, stderr, prog, quiet);
	o.progress = progress;
	o.progress_ctx = &pb;
	double t0 = cg_now();
	if (cg_train_run(m, s, &o, st, buf, &res) != 0) {
		cg_progress_done(&pb);
		fprintf(stderr, "%s: %s: %s\n", prog, data, cg_errmsg());
		goto out;
	}
	double secs = cg_now() - t0;
	cg_progress_done(&pb);
	/* The activations are done with: the output has their room. */
	if (m->arch->free_ws)
		m->arch->free_ws(m);

	if (o.emit == CG_EMIT_MODEL) {
		double seen = cg_json_num(m->manifest, "samples", 0) +
			      (double)res.samples;
		cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "loss");
		cJSON_AddNumberToObject(m->manifest, "loss", res.mean.loss);
		cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "samples");
		cJSON_AddNumberToObject(m->manifest, "samples", seen);
		f = cg_model_file(m);
		if (st)
			cg_state_call_next(&call, m);
	} else {
		f = cg_update_file(m, o.emit == CG_EMIT_GRAD ? "grad" : "delta",
				   buf, &res);
	}
	/*
	 * Both files are written and fsynced before either is renamed into
	 * place, so a failure leaves neither; the state records the
	 * output's digest.  The output is renamed first: a crash between the
	 * renames leaves a new output beside the old state, which the next
	 * call refuses (the output is not the one the state names), and
	 * removing the output and rerunning the call writes both again.
	 */
	struct cg_out *outs[2] = {&oout, &sout};
	if (f == NULL || cg_file_write_to(f, &oout, comp) != 0 ||
	    (st && cg_state_write_to(st, &sout, &call, &oout) != 0) ||
	    cg_out_commit_all(outs, st ? 2 : 1) != 0) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	if (logpath &&
	    write_log(logpath, m, &res, secs, emit_name, &plan) != 0) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	if (pb.on) {
		fprintf(stderr, "%s: %llu examples, loss %.4f, %.0f examples/s",
			prog, (unsigned long long)res.samples, res.mean.loss,
			secs > 0 ? res.samples / secs : 0);
		if (plan.chunk || plan.checkpoint)
			fprintf(stderr, ", chunks of %d%s", plan.chunk,
				plan.checkpoint ? " checkpointed" : "");
		fprintf(stderr, ", peak memory %.0f MiB (planned %.0f)\n",
			cg_rss_peak() / 1048576.0, plan.estimate / 1048576.0);
	}
	rc = 0;
out:
	cg_out_abort(&oout);
	cg_out_abort(&sout);
	cg_file_free(f);
	free(buf);
	cg_state_free(st);
	cg_shard_free(s);
	cg_model_free(m);
	return rc;
}
