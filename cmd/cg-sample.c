/*
 * cg-sample.c - draw images or text from a model.
 *
 * Image models: a grid, one row per condition.  Each row holds -n samples
 * of one condition; the conditions are the ones named with -c, in the
 * order given, or all of the model's, in vocabulary order.  A row's noise
 * comes from (seed, condition index) alone, so "-c Dress" draws the very
 * row that the full grid shows for Dress, and the same seed always gives
 * the same bytes.  The image shape and the condition names come from the
 * model's manifest, as cg-init copied them from the data.
 *
 * Text models: -n texts for each condition given with -c, in order,
 * streamed to the output byte by byte as the model draws them (flushed
 * per byte on a terminal, where control bytes other than newline and tab
 * are shown as '?'), the separator between texts.  Text i of
 * condition k draws from (seed, k, i) alone, so it is the same in any
 * run that asks for it.  Without -c, the one condition of a model that
 * has one is used, or with a prompt the "(prompt)" condition where the
 * model has it; otherwise -c is required, since a model's categories are
 * too different to pick one silently.  The prompt is context, not output.
 * Options of the other kind of model are usage errors, found once the
 * model is read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "cli/cli.h"
#include "data/image.h"
#include "data/text.h"
#include "model/cond.h"
#include "model/draw.h"
#include "model/model.h"
#include "model/stage.h"
#include "nn/gemm.h"
#include "train/pipe_sample.h"

#define DEFAULT_COUNT 10
#define DEFAULT_TEXT_COUNT 1
#define DEFAULT_MAX_BYTES 512
#define MAX_MAX_BYTES (1LL << 40)
#define MAX_TOP_K 1000000
/* Bytes of a prompt file; only the last context - 1 are used. */
#define MAX_PROMPT (16 << 20)
#define MAX_COUNT 4096
#define MAX_TEMPERATURE 1000.0
#define GRID_PAD 2
#define STR_(x) #x
#define STR(x) STR_(x)

/* Keys of the options that have no short form. */
enum {
	OPT_DETERMINISTIC = CG_KEY_OWN,
	OPT_MAX_BYTES,
	OPT_NEXT,
	OPT_PRECISION,
	OPT_PROMPT_FILE,
	OPT_SEED,
	OPT_SEPARATOR,
	OPT_STAGE,
	OPT_TEMPERATURE,
	OPT_TOP_K,
	OPT_TOP_P
};

struct opts {
	const char *model;
	const char *output;
	const char **conds; /* [nconds] as given */
	int nconds;
	int count;
	const char *have_count;
	const char *have_format;
	int deterministic;
	int precision;
	enum cg_image_format format;
	uint64_t seed;
	double temperature;
	int threads;
	/* Text only; text_opt is the long name of one that was given, for
	 * the message. */
	const char *text_opt;
	/* Diffusion models only; diff_opt as text_opt. */
	struct cg_diffusion_opts diffusion;
	const char *diff_opt;
	const char *prompt;      /* --prompt, or NULL */
	const char *prompt_file; /* --prompt-file, or NULL */
	struct cg_sampler sampler;
	char *separator; /* owned, escapes expanded */
	const char *next; /* --next: the next pipeline stage's command */
	int stage;        /* --stage: a pipeline stage past the first */
};

static int
parse_format(const char *arg, void *where)
{
	return cg_image_format_parse(arg, where);
}

#define CG_CTX struct opts
static const struct cg_opt opts[] = {
    {"cond", 'c', "NAME|INDEX",
     "a condition to draw (repeatable; images: default all; text: needed "
     "unless the model has one, or a prompt is given and it has "
     "\"(prompt)\")",
     CG_OPT_CUSTOM},
    {"count", 'n', "N",
     "samples per condition (default: images " STR(DEFAULT_COUNT) ", text " STR(
         DEFAULT_TEXT_COUNT) ")",
     CG_OPT_INT(count, 1, MAX_COUNT), CG_OPT_SEEN(have_count)},
    {"format", 'f', "FMT", "png or pgm (default: from FILE's suffix, else png)",
     CG_OPT_PARSE(format, parse_format), CG_OPT_SEEN(have_format)},
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    {"model", 'm', "FILE", "the model (- is stdin)", CG_OPT_STR(model)},
    {"output", 'o', "FILE",
     "where to write (default -: stdout; images: not a terminal)",
     CG_OPT_STR(output)},
    {"seed", OPT_SEED, "N", "seed of the noise (default 0)", CG_OPT_U64(seed)},
    {"temperature", OPT_TEMPERATURE, "T",
     "images: scale of the latent noise; text: of the logits (0: greedy) "
     "(default 1)",
     CG_OPT_F64(temperature, 0, MAX_TEMPERATURE)},
    CG_OPT_THREADS(threads, "threads (0: OMP_NUM_THREADS, else all cores)"),
    {"deterministic", OPT_DETERMINISTIC, NULL,
     "the same samples at any thread count on any x86-64 (built-in "
     "kernels)",
     CG_OPT_FLAG(deterministic)},
    CG_OPT_PRECISION(OPT_PRECISION, precision),
    CG_OPT_VERSION,
    CG_OPT_HEADING("Diffusion models (cddpm):"),
    CG_DIFFUSION_OPTS(diffusion, diff_opt),
    CG_OPT_HEADING("Text models:"),
    {"max-bytes", OPT_MAX_BYTES, "N",
     "stop a text after N bytes (default " STR(DEFAULT_MAX_BYTES) ")",
     CG_OPT_U64_IN(sampler.max_bytes, 1, MAX_MAX_BYTES),
     CG_OPT_SEEN_LAST(text_opt)},
    {"prompt", 'p', "TEXT", "continue TEXT (not printed)", CG_OPT_STR(prompt),
     CG_OPT_SEEN_LAST(text_opt)},
    {"prompt-file", OPT_PROMPT_FILE, "FILE",
     "continue FILE's bytes (- is stdin)", CG_OPT_STR(prompt_file),
     CG_OPT_SEEN_LAST(text_opt)},
    {"separator", OPT_SEPARATOR, "STR",
     "between texts (default \"\\n%\\n\"; \\n \\t \\\\ expanded)",
     CG_OPT_CUSTOM, CG_OPT_SEEN_LAST(text_opt)},
    {"top-k", OPT_TOP_K, "K",
     "draw from the K likeliest bytes (default 0: all)",
     CG_OPT_INT(sampler.top_k, 0, MAX_TOP_K), CG_OPT_SEEN_LAST(text_opt)},
    {"top-p", OPT_TOP_P, "P",
     "draw from the likeliest bytes of mass P (default 1)",
     CG_OPT_F64(sampler.top_p, 0, 1), CG_OPT_SEEN_LAST(text_opt)},
    CG_OPT_HEADING("Text models cut into stages (cg-convert -S):"),
    {"next", OPT_NEXT, "CMD",
     "a stage but the last: run the next stage as sh -c CMD",
     CG_OPT_STR(next)},
    {"stage", OPT_STAGE, NULL,
     "a stage past the first: rows from standard input, logits to "
     "standard output",
     CG_OPT_FLAG(stage)},
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-sample",
    .synopsis = "-m MODEL [-c COND ...] [-n N] [--seed N] [--temperature T]\n"
                " [--format png|pgm] [--threads N] [-o FILE]\n"
                "-m DIFFUSION-MODEL ... [--guidance W] [--steps N]\n"
                " [--sampler ddim|ddpm]\n"
                "-m TEXT-MODEL [-c COND ...] [-p TEXT | --prompt-file FILE]\n"
                " [-n N] [--temperature T] [--top-k K] [--top-p P]\n"
                " [--max-bytes N] [--separator STR] [--seed N] [-o FILE]\n"
                "-m STAGE-1 [text options] --next CMD\n"
                "--stage -m STAGE-I [--next CMD]",
    .about = "Draw from a model: images (a grid with one row per condition) "
             "or text.",
    .opts = opts,
    .epilog = "Exit status: 0 ok, 1 a failure, 2 a usage error.",
};

/* -c COND and --separator STR; CG_CONTINUE, or the exit status. */
static int
set_option(void *ctx, const struct cg_getopt *g, int c)
{
	struct opts *o = ctx;

	if (c == 'c') {
		o->conds[o->nconds++] = g->arg;
		return CG_CONTINUE;
	}
	free(o->separator);
	if ((o->separator = cg_unescape(g->arg)) == NULL)
		return cg_fail(NULL);
	return CG_CONTINUE;
}

/* The command line into o (whose conds and separator the caller frees);
 * CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv, struct opts *o)
{
	int ind, rc;

	memset(o, 0, sizeof(*o));
	o->output = "-";
	o->count = DEFAULT_COUNT;
	o->temperature = 1.0;
	o->sampler.top_p = 1.0;
	o->sampler.max_bytes = DEFAULT_MAX_BYTES;
	cg_setprogname(cli.name); /* for a message before parsing */
	if ((o->conds = calloc((size_t)argc + 1, sizeof(*o->conds))) == NULL)
		return cg_failx("out of memory");
	if ((rc = cg_getopt_all(&cli, argc, argv, set_option, o, &ind)) !=
	    CG_CONTINUE)
		return rc;
	if (ind < argc)
		return cg_usage("unexpected argument '%s'", argv[ind]);
	return CG_CONTINUE;
}

/* Conflicts and what is missing; then what follows from the options. */
static int
validate(struct opts *o)
{
	if (o->model == NULL)
		return cg_usage("no model given (-m MODEL)");
	if (o->nconds > CG_SHARD_MAX_CONDITIONS)
		return cg_usage("more than %d conditions given",
		                CG_SHARD_MAX_CONDITIONS);
	if (o->stage && (o->nconds || o->have_count || o->text_opt ||
	                 strcmp(o->output, "-") != 0))
		return cg_usage("--stage: the first stage draws: no -c, -n, -o "
		                "or text options here");
	if (o->stage && strcmp(o->model, "-") == 0)
		return cg_usage("--stage: standard input is the previous "
		                "stage's: give -m FILE");
	if (o->prompt && o->prompt_file)
		return cg_usage(
		    "--prompt and --prompt-file exclude each other");
	if (o->prompt_file && strcmp(o->prompt_file, "-") == 0 &&
	    strcmp(o->model, "-") == 0)
		return cg_usage("only one input can be standard input");
	if (!o->have_format)
		o->format = cg_image_format_guess(o->output);
	o->sampler.temperature = o->temperature;
	if (o->separator == NULL &&
	    (o->separator = cg_unescape("\\n%\\n")) == NULL)
		return cg_fail(NULL);
	return CG_CONTINUE;
}

/* lead ("...; valid: "), then the names a condition may be given by,
 * as a usage error; returns its status. */
static int
usage_conds(const struct cg_conds *c, const char *lead)
{
	char buf[4096];

	return cg_usage("%s", cg_conds_valid(c, lead, buf, sizeof(buf)));
}

/* An unknown condition is the user's slip, not a failure: say which
 * names would do; returns the usage error's status. */
static int
unknown_cond(const struct cg_conds *c, const char *s)
{
	char lead[1024];

	snprintf(lead, sizeof(lead), "unknown condition '%s'; valid: ", s);
	return usage_conds(c, lead);
}

/* The image grid: returns the exit status. */
static int
run_image(struct cg_model *m, const struct opts *o)
{
	struct cg_conds vb = {0};
	int *rows = NULL, nrows, k, shape[3];
	int status = 1;

	if (o->text_opt)
		return cg_usage("%s: --%s is for text models (%s makes images)",
		                o->model, o->text_opt, m->arch->name);
	m->diffusion = o->diffusion;
	/* cg_out_open refuses too, but only after all the work. */
	if (strcmp(o->output, "-") == 0 && isatty(STDOUT_FILENO)) {
		return cg_failx("refusing to write an image to a terminal "
		                "(use -o FILE or a pipe)");
	}
	/* The shape as the arch checks it against its config, which fixes
	 * how many floats one image is: a manifest that disagrees would make
	 * the grid read past the sampled buffer. */
	if (m->arch->image_shape(m, shape) != 0 ||
	    cg_conds_get(m, 1, &vb) != 0) {
		cg_errprefix(o->model);
		goto fail;
	}
	nrows = o->nconds > 0 ? o->nconds : vb.n;
	if ((rows = calloc((size_t)nrows, sizeof(*rows))) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	for (int i = 0; i < nrows; i++)
		rows[i] = i;
	if ((k = cg_conds_lookup(&vb, o->conds, o->nconds, rows)) < o->nconds) {
		status = unknown_cond(&vb, o->conds[k]);
		goto done;
	}
	if (cg_draw_grid(m, o->model, shape, rows, nrows, o->count,
	                 o->temperature, o->seed, o->output, GRID_PAD,
	                 o->format) != 0)
		goto fail;
	status = 0;
	goto done;
fail:
	cg_warn(NULL);
done:
	free(rows);
	cg_conds_free(&vb);
	return status;
}

/* ------------------------------------------------------------------ text */

/* The prompt's bytes into *p [*n] (malloc'd; NULL when there is none). */
static int
read_prompt(const struct opts *o, uint8_t **p, size_t *n)
{
	*p = NULL;
	*n = 0;
	if (o->prompt) {
		*n = strlen(o->prompt);
		if ((*p = malloc(*n + 1)) == NULL)
			return cg_seterr("out of memory");
		memcpy(*p, o->prompt, *n);
		return 0;
	}
	if (o->prompt_file == NULL)
		return 0;
	return cg_read_input(o->prompt_file, MAX_PROMPT, p, n);
}

/*
 * Which conditions to sample, into *rows [*nrows] (malloc'd).  Returns
 * 0, -1 with a message, or CG_EXIT_USAGE after saying why they are
 * unknown or none can be chosen.
 */
static int
text_conds(const struct opts *o, const struct cg_conds *vb, int **rows,
           int *nrows)
{
	int n = o->nconds > 0 ? o->nconds : 1, k;

	if ((*rows = calloc((size_t)n, sizeof(**rows))) == NULL)
		return cg_seterr("out of memory");
	*nrows = n;
	if ((k = cg_conds_lookup(vb, o->conds, o->nconds, *rows)) < o->nconds)
		return unknown_cond(vb, o->conds[k]);
	if (o->nconds == 0 && ((*rows)[0] = cg_conds_default(
	                           vb, o->prompt || o->prompt_file)) < 0) {
		char lead[1024];

		snprintf(lead, sizeof(lead),
		         "%s: %d conditions: choose one with -c; valid: ",
		         o->model, vb->n);
		return usage_conds(vb, lead);
	}
	return 0;
}

/* Text from a text model, or through the pipeline whose first stage is
 * sg (else NULL): returns the exit status. */
static int
run_text(struct cg_model *m, const struct opts *o, struct cg_stage_gen *sg)
{
	struct cg_conds vb = {0};
	struct cg_out out = {0};
	struct cg_text_sink k;
	uint8_t *prompt = NULL;
	size_t plen = 0;
	int *rows = NULL, nrows = 0, status = 1;
	int to_stdout = strcmp(o->output, "-") == 0;
	const char *where = to_stdout ? "standard output" : o->output;
	int count = o->have_count ? o->count : DEFAULT_TEXT_COUNT;

	if (o->have_format)
		return cg_usage("%s: --format is for image models (%s makes "
		                "text)",
		                o->model, m->arch->name);
	if (cg_conds_get(m, 0, &vb) != 0) {
		cg_errprefix(o->model);
		goto fail;
	}
	switch (text_conds(o, &vb, &rows, &nrows)) {
	case 0:
		break;
	case CG_EXIT_USAGE:
		status = CG_EXIT_USAGE;
		goto done;
	default:
		goto fail;
	}
	if (read_prompt(o, &prompt, &plen) != 0)
		goto fail;
	if (to_stdout)
		cg_text_sink_init(&k, stdout, isatty(STDOUT_FILENO),
		                  o->separator);
	else if (cg_out_open(&out, o->output) != 0)
		goto fail;
	else
		cg_text_sink_init(&k, out.fp, 0, o->separator);
	if ((sg ? cg_draw_texts_by(sg->ops->gen_sample, sg->gen, rows, nrows,
	                           count, prompt, plen, &o->sampler, o->seed,
	                           cg_text_sink_byte, cg_text_sink_sep, &k)
	        : cg_draw_texts(m, rows, nrows, count, prompt, plen,
	                        &o->sampler, o->seed, cg_text_sink_byte,
	                        cg_text_sink_sep, &k)) != 0) {
		cg_errprefix(o->model);
		goto fail;
	}
	/* The next stages' answer: they end with the text. */
	if (sg && cg_stage_gen_end(sg) != 0)
		goto fail;
	if (cg_text_sink_end(&k) == EPIPE && to_stdout) {
		/* The reader has gone (SIGPIPE ignored): not worth a word. */
		status = 1;
		goto done;
	}
	if (k.err) {
		cg_seterr("%s: %s", where, strerror(k.err));
		goto fail;
	}
	if (!to_stdout && cg_out_commit(&out) != 0)
		goto fail;
	status = 0;
	goto done;
fail:
	cg_warn(NULL);
done:
	if (!to_stdout)
		cg_out_abort(&out);
	free(prompt);
	free(rows);
	cg_conds_free(&vb);
	return status;
}

/*
 * A pipeline stage (lib/train/pipe_sample.h): the first draws the text
 * as run_text does, the later ones answer their rows.  Returns the exit
 * status.
 */
static int
run_stage(const struct opts *o)
{
	struct cg_stage_gen sg = {0};
	struct cg_stage st;
	struct cg_model *m;
	int rc = 1;

	if ((m = cg_stage_read(o->model, &st)) == NULL)
		return cg_fail(NULL);
	if (o->stage != (st.index > 0)) {
		rc = cg_failx("%s: stage %d of %d: %s", o->model, st.index + 1,
		              st.count,
		              o->stage ? "the first stage draws the text: no "
		                         "--stage"
		                       : "its rows come from the previous "
		                         "stage: give --stage");
		goto done;
	}
	if (cg_stage_gen_open(&sg, m, &st, o->next) != 0)
		rc = cg_fail(NULL);
	else if (o->stage)
		rc = cg_stage_gen_serve(&sg) == 0 ? 0 : cg_fail(NULL);
	else if (m->arch->sample_text == NULL)
		rc = cg_failx("%s: %s models are not sampled across stages",
		              o->model, m->arch->name);
	else if ((rc = run_text(m, o, &sg)) != 0)
		/* The next stages are told to end, not left to find a cut
		 * stream: the failure is said once, here. */
		(void)cg_stage_gen_end(&sg);
	if (cg_stage_gen_close(&sg) != 0 && rc == 0)
		rc = cg_fail(NULL);
done:
	cg_model_free(m);
	return rc;
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct cg_model *m = NULL;
	int rc;

	if ((rc = parse(argc, argv, &o)) != CG_CONTINUE ||
	    (rc = validate(&o)) != CG_CONTINUE)
		goto done;
	cg_set_threads(o.threads);
	if (cg_set_compute(o.deterministic, o.precision, 0) != 0)
		rc = cg_fail(NULL);
	else if (o.next || o.stage)
		rc = run_stage(&o);
	else if ((m = cg_model_read_infer(o.model)) == NULL)
		rc = cg_fail(NULL);
	else if (o.diff_opt && !m->arch->diffusion)
		rc = cg_usage("%s: --%s is for diffusion models (%s is not "
		              "one)",
		              o.model, o.diff_opt, m->arch->name);
	else if (m->arch->sample_text != NULL)
		rc = run_text(m, &o, NULL);
	else if (m->arch->sample_image != NULL)
		rc = run_image(m, &o);
	else
		rc = cg_failx("%s: %s models cannot be sampled", o.model,
		              m->arch->name);
done:
	cg_model_free(m);
	free(o.conds);
	free(o.separator);
	return rc;
}
