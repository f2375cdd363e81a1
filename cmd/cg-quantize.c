/*
 * cg-quantize - a model with its weight matrices in a smaller dtype.
 *
 * Reads a model (a cg file or a safetensors file cg-convert wrote; a
 * file or standard input), chooses each view's dtype by lib/eval/quantize.h's
 * rule and the --keep patterns, and writes the model again: to a file
 * atomically, or to standard output for a pipe.  The report on stderr
 * says what each view became and the bytes before and after.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "eval/inspect.h"
#include "eval/quantize.h"
#include "file/format.h"
#include "model/model.h"

enum { OPT_ALL = CG_KEY_OWN, OPT_KEEP, OPT_REF, OPT_REQUANT, OPT_STRIP };

#define MAX_KEEP 64

struct args {
	const char *in, *out;
	struct cg_quant_rule r;
	const char *keep[MAX_KEEP];
	enum cg_compress comp;
	int quiet, verbose;
};

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"output", 'o', "FILE", "where to write (- or none: stdout)",
     CG_OPT_STR(out)},
    {"keep", OPT_KEEP, "PAT",
     "views whose names match the glob PAT stay\nf32 (repeatable)",
     CG_OPT_CUSTOM},
    {"all", OPT_ALL, NULL,
     "norms, biases and embeddings take TYPE\ntoo (where their rows fit)",
     CG_OPT_FLAG(r.all)},
    {"allow-requantize", OPT_REQUANT, NULL,
     "take a view stored in one block type to\nanother",
     CG_OPT_FLAG(r.allow_requantize)},
    {"reference", OPT_REF, NULL,
     "q4_0, q4_1: ggml's reference rule, not the\nfitted scales",
     CG_OPT_FLAG(r.reference)},
    {"strip", OPT_STRIP, NULL,
     "leave the optimizer's state out (its\nmoments start afresh)",
     CG_OPT_FLAG(r.strip)},
    {"compress", 'z', "ALG", "none, gzip or zstd (none)",
     CG_OPT_PARSE(comp, cg_opt_compress)},
    {"quiet", 'q', NULL, "no report", CG_OPT_FLAG(quiet)},
    {"verbose", 'v', NULL, "the report names every view", CG_OPT_FLAG(verbose)},
    CG_OPT_ENCRYPT_TO,
    CG_OPT_SIGN,
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-quantize",
    .synopsis = "[-qv] [--keep PAT]... [--all] [--strip] [-o OUT] MODEL TYPE",
    .about = "Write MODEL (- : standard input) with its weight matrices in\n"
             "TYPE: f32, f16, bf16, q8_0, q4_1, q4_0 or q2_0.  Norms, biases\n"
             "and embeddings stay f32; f32 takes every view back to f32.",
    .opts = opts,
    .epilog = "Exit status: 0 success, 1 failure, 2 usage error.",
};

/* --keep PAT: one more pattern. */
static int
keep_option(void *ctx, const struct cg_getopt *g, int c)
{
	struct args *a = ctx;

	(void)c; /* --keep */
	if (a->r.nkeep == MAX_KEEP)
		return cg_usage("more than %d --keep patterns", MAX_KEEP);
	a->keep[a->r.nkeep++] = g->arg;
	return CG_CONTINUE;
}

static int
parse(int argc, char **argv, struct args *a)
{
	const struct cg_codec *c;
	int ind, rc;

	if ((rc = cg_getopt_all(&cli, argc, argv, keep_option, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	if (argc - ind != 2)
		return cg_usage(argc - ind < 2 ? "MODEL and TYPE are needed"
		                               : "too many operands");
	a->in = argv[ind];
	if (cg_dtype_parse(argv[ind + 1], &a->r.type) != 0)
		return cg_usage(NULL);
	if ((c = cg_codec(a->r.type))->kind != CG_KIND_FLOAT)
		return cg_usage("%s holds integers, not weights", c->name);
	a->r.keep = a->keep;
	if (a->out == NULL)
		a->out = "-";
	if (strcmp(a->in, "-") == 0 && isatty(STDIN_FILENO))
		return cg_usage("standard input is a terminal");
	if (strcmp(a->out, "-") == 0 && isatty(STDOUT_FILENO))
		return cg_usage("standard output is a terminal (-o FILE, or a "
		                "pipe)");
	return CG_CONTINUE;
}

/* The report on stderr: per view with -v, then the sums. */
static void
report(const struct args *a, const struct cg_model *m,
       const struct cg_quant_view *rep, const char *display)
{
	uint64_t from = 0, to = 0, qn = 0, qb = 0, n = 0;
	int nq = 0, nk = 0;
	char s1[16], s2[16];

	for (int i = 0; i < m->nviews; i++) {
		const struct cg_quant_view *q = &rep[i];
		from += q->bytes_from;
		to += q->bytes_to;
		n += q->nelem;
		if (q->to == a->r.type) {
			nq++;
			qn += q->nelem;
			qb += q->bytes_to;
		} else {
			nk++;
		}
		if (a->verbose) {
			cg_human_size(s1, q->bytes_from);
			cg_human_size(s2, q->bytes_to);
			fprintf(stderr, "  %-24s %5s -> %-5s %10s -> %s%s%s\n",
			        q->name, cg_dtype_name(q->from),
			        cg_dtype_name(q->to), s1, s2,
			        q->why ? "  kept f32: " : "", q->why ? q->why : "");
		}
	}
	cg_human_size(s1, from);
	cg_human_size(s2, to);
	cg_warnx("%s: %d of %d views %s (%.2f bits per weight), %d kept "
	         "f32; weights %s -> %s, %.2f bits per parameter",
	         display, nq, m->nviews, cg_dtype_name(a->r.type),
	         qn ? 8.0 * (double)qb / (double)qn : 0.0, nk, s1, s2,
	         n ? 8.0 * (double)to / (double)n : 0.0);
}

int
main(int argc, char **argv)
{
	struct args a = {.comp = CG_COMPRESS_NONE};
	struct cg_file *f = NULL, *out = NULL;
	struct cg_model *m = NULL;
	struct cg_quant_view *rep = NULL;
	const char *display;
	int rc;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE)
		return rc;
	display = strcmp(a.in, "-") ? a.in : "(stdin)";
	rc = CG_EXIT_FAILURE;
	if ((f = cg_read_any(a.in, NULL)) == NULL ||
	    (m = cg_model_from_file(f, display)) == NULL)
		goto done;
	if ((rep = calloc((size_t)m->nviews, sizeof(*rep))) == NULL) {
		cg_seterr("out of memory");
		goto done;
	}
	if ((out = cg_quantize(f, m, &a.r, rep)) == NULL) {
		cg_errprefix(display);
		goto done;
	}
	if (cg_file_write(out, a.out, a.comp) != 0)
		goto done;
	if (!a.quiet)
		report(&a, m, rep, display);
	rc = CG_EXIT_OK;
done:
	if (rc != CG_EXIT_OK)
		cg_warn(NULL);
	cg_file_free(out);
	cg_model_free(m);
	cg_file_free(f);
	free(rep);
	return rc;
}
