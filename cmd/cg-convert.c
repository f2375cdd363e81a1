/*
 * cg-convert - a cg file as a safetensors file, or a safetensors file as
 * a cg file.
 *
 * The input says which way: a safetensors file (an 8-byte header length,
 * then '{') becomes a cg file, anything else is read as a cg file and
 * becomes a safetensors file with the manifest under the metadata key
 * "cg.json", so that converting there and back gives the same file.
 * lib/file/safetensors.c does the work: reading either format as hostile,
 * and which dtypes go across (f32, f16, bf16 and the integers as they
 * are; q8_0, q4_0 and q2_0 decoded to f32).  What is read is checked
 * as cg-inspect --verify checks it (lib/eval/verify.h) before anything is
 * written: a file of a kind the format does not define, or one its
 * kind's readers refuse, is not passed on.
 *
 * --stage I/N cuts a model's pipeline stage I of N, and --join joins the
 * stage files back into the model (lib/model/stage.h): the cut and the
 * join of every stage give the model's file again, byte for byte.
 * --layers A:B cuts a stage of other layers than the even cut's (the
 * split cg-probe --plan finds for hosts of unequal speed or memory).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "eval/verify.h"
#include "model/model.h"
#include "model/stage.h"
#include "file/format.h"
#include "file/safetensors.h"

struct args {
	const char *in, *out, *to;
	enum cg_compress comp;
	const char *zgiven;
	int merge, join;
	const char *stage;
	int index, count; /* --stage I/N, 0-based */
	const char *layers;
	int a, b;         /* --layers A:B; b = 0: the even cut */
	char **ins;       /* --join's inputs */
	int nins;
};

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"output", 'o', "FILE", "where to write (- or none: stdout)",
     CG_OPT_STR(out)},
    {"compress", 'z', "ALG", "a cg file written: none, gzip or zstd (none)",
     CG_OPT_PARSE(comp, cg_opt_compress), CG_OPT_SEEN(zgiven)},
    {"to", 't', "FORMAT",
     "write FORMAT: cg or safetensors (the one IN is not in)", CG_OPT_STR(to)},
    CG_OPT_ENCRYPT_TO,
    {"join", 'J', NULL, "the pipeline stages IN... joined into their model",
     CG_OPT_FLAG(join)},
    {"layers", 'L', "A:B",
     "with --stage: the stage holds layers A to B - 1 (as cg-probe --plan "
     "says)",
     CG_OPT_STR(layers)},
    {"merge-lora", 'M', NULL,
     "a model's adapters merged into its weights: a plain model",
     CG_OPT_FLAG(merge)},
    CG_OPT_SIGN,
    CG_OPT_SEAL_KEY,
    {"stage", 'S', "I/N", "the model IN's pipeline stage I of N (1 to N)",
     CG_OPT_STR(stage)},
    CG_OPT_TRUST,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-convert",
    .synopsis = "[-M] [-t FORMAT] [-z ALG] [-o OUT] [IN [OUT]]\n"
                "       cg-convert -S I/N [-L A:B] [-z ALG] [-o OUT] [MODEL "
                "[OUT]]\n"
                "       cg-convert -J [-z ALG] -o OUT STAGE...",
    .about = "Write the cg file IN as a safetensors file, or the safetensors\n"
             "file IN as a cg file (IN - or none: standard input).",
    .opts = opts,
    .epilog = "Exit status: 0 success, 1 failure, 2 usage error.",
};

/* --stage I/N into a->index and a->count; CG_CONTINUE or a usage error. */
static int
stage_arg(struct args *a)
{
	char *end;
	long i = strtol(a->stage, &end, 10), n;

	if (end == a->stage || *end != '/')
		return cg_usage("--stage %s: not I/N", a->stage);
	const char *rest = end + 1;
	n = strtol(rest, &end, 10);
	if (end == rest || *end != '\0' || n < 1 || n > CG_STAGE_MAX || i < 1 ||
	    i > n)
		return cg_usage("--stage %s: not I/N with 1 <= I <= N <= %d",
		                a->stage, CG_STAGE_MAX);
	a->index = (int)i - 1;
	a->count = (int)n;
	if (a->layers == NULL)
		return CG_CONTINUE;
	long la = strtol(a->layers, &end, 10), lb;
	if (end == a->layers || *end != ':')
		return cg_usage("--layers %s: not A:B", a->layers);
	rest = end + 1;
	lb = strtol(rest, &end, 10);
	if (end == rest || *end != '\0' || la < 0 || lb <= la || lb > 1 << 20)
		return cg_usage("--layers %s: not A:B with 0 <= A < B", a->layers);
	a->a = (int)la;
	a->b = (int)lb;
	return CG_CONTINUE;
}

/* The command line into a, checked; CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc, n;

	if ((rc = cg_getopt_all(&cli, argc, argv, NULL, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	if ((a->join || a->stage) && (a->to || a->merge))
		return cg_usage("--join and --stage write cg files: no --to "
		                "or --merge-lora");
	if (a->join && a->stage)
		return cg_usage("--join and --stage conflict");
	if (a->layers && !a->stage)
		return cg_usage("--layers: a stage's (--stage)");
	if (a->join) {
		if (argc - ind < 1)
			return cg_usage("--join: give the stage files");
		if (argc - ind > CG_STAGE_MAX)
			return cg_usage("--join: more than %d stages",
			                CG_STAGE_MAX);
		a->ins = argv + ind;
		a->nins = argc - ind;
		if (a->out == NULL)
			a->out = "-";
		return CG_CONTINUE;
	}
	if (a->stage && stage_arg(a) != CG_CONTINUE)
		return CG_EXIT_USAGE;
	if ((n = argc - ind) > 2)
		return cg_usage("too many operands");
	if (n == 2 && a->out)
		return cg_usage("the output given twice (-o and OUT)");
	a->in = n > 0 ? argv[ind] : "-";
	if (n == 2)
		a->out = argv[ind + 1];
	if (a->out == NULL)
		a->out = "-";
	if (strcmp(a->in, "-") == 0 && isatty(STDIN_FILENO))
		return cg_usage("standard input is a terminal");
	if (a->to && cg_format_find(a->to) == NULL)
		return cg_usage("--to: %s", cg_errmsg());
	return CG_CONTINUE;
}

/* The merged model, whose arrays the file merged makes borrows: freed
 * at the end of main. */
static struct cg_model *merged_model;

/* The model file f (freed) with its adapters merged (cg_model_merge_lora),
 * as a new file; NULL with a message naming in. */
static struct cg_file *
merged(struct cg_file *f, const char *in)
{
	const char *name = strcmp(in, "-") ? in : "(stdin)";
	struct cg_model *m = NULL, *p = NULL;
	struct cg_file *out = NULL;

	if (strcmp(cg_file_kind(f), "model") != 0)
		cg_seterr("--merge-lora: a %s file, not a model",
		          cg_file_kind(f));
	else if ((m = cg_model_from_file(f, name)) != NULL &&
	         (p = cg_model_merge_lora(m)) != NULL &&
	         (out = cg_model_file(p)) != NULL) {
		merged_model = p;
		p = NULL;
	}
	if (out == NULL)
		cg_errprefix(name);
	cg_model_free(m);
	cg_model_free(p);
	cg_file_free(f);
	return out;
}

/* --stage: stage a->index of a->count of model file f (freed) to
 * a->out.  0, or -1 with a message. */
static int
cut(const struct args *a, struct cg_file *f)
{
	const char *name = strcmp(a->in, "-") ? a->in : "(stdin)";
	struct cg_model *m = cg_model_from_file(f, name);
	struct cg_stage st;
	int rc = -1;

	cg_file_free(f);
	if (m == NULL)
		return -1;
	if ((a->b ? cg_stage_plan_at(m, a->index, a->count, a->a, a->b, &st)
	          : cg_stage_plan(m, a->index, a->count, &st)) != 0)
		cg_errprefix(name);
	else
		rc = cg_file_write_free(cg_stage_file(m, &st), a->out, a->comp);
	cg_model_free(m);
	return rc;
}

/* --join: the stage files a->ins into their model at a->out.  0, or -1
 * with a message. */
static int
join(const struct args *a)
{
	struct cg_file *f[CG_STAGE_MAX] = {0};
	struct cg_model *m = NULL;
	int rc = -1, i;

	for (i = 0; i < a->nins; i++)
		if ((f[i] = cg_file_read(a->ins[i])) == NULL)
			goto out;
	if ((m = cg_stage_join(f, a->nins, (const char *const *)a->ins)))
		rc = cg_model_write(m, a->out, a->comp);
out:
	for (i = 0; i < a->nins; i++)
		cg_file_free(f[i]);
	cg_model_free(m);
	return rc;
}

int
main(int argc, char **argv)
{
	struct args a = {0};
	const struct cg_format *from, *to;
	struct cg_file *f;
	int rc;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE)
		return rc;
	if (a.join)
		return join(&a) == 0 ? CG_EXIT_OK : cg_fail(NULL);
	if ((f = cg_read_any(a.in, &from)) == NULL)
		return cg_fail(NULL);
	if (a.stage)
		return cut(&a, f) == 0 ? CG_EXIT_OK : cg_fail(NULL);
	if (f == NULL)
		return cg_fail(NULL);
	/* by default a cg file becomes a safetensors file, any other a cg
	 * file; a merged model a cg file */
	to = a.to                  ? cg_format_find(a.to)
	     : a.merge             ? &cg_format_cg
	     : from == &cg_format_cg ? &cg_format_safetensors
	                             : &cg_format_cg;
	/* either way, only a file every reader of its kind takes */
	if (cg_verify_file(f) != 0) {
		cg_errprefix(strcmp(a.in, "-") ? a.in : "(stdin)");
		rc = -1;
	} else if (a.merge && (f = merged(f, a.in)) == NULL)
		rc = -1;
	else if (a.zgiven && a.comp != CG_COMPRESS_NONE && !to->compresses)
		rc = cg_seterr("--compress: a %s file is written uncompressed",
		               to->name);
	else
		rc = to->write(f, a.out, a.comp);
	cg_file_free(f);
	cg_model_free(merged_model);
	return rc == 0 ? CG_EXIT_OK : cg_fail(NULL);
}
