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
#include "data/shard.h"
#include "eval/bitalloc.h"
#include "eval/inspect.h"
#include "eval/quantize.h"
#include "file/format.h"
#include "model/model.h"

enum {
	OPT_ALL = CG_KEY_OWN,
	OPT_BITS,
	OPT_KEEP,
	OPT_REF,
	OPT_REQUANT,
	OPT_SEED,
	OPT_STRIP
};

/* --bits-per-weight: the passes over -d in a batch */
#define ALLOC_BATCH 256

#define MAX_KEEP 64

struct args {
	const char *in, *out;
	struct cg_quant_rule r;
	/* --bits-per-weight B on shard -d: an allocation */
	double bpw;
	const char *bpw_given, *data;
	uint64_t seed;
	const char *keep[MAX_KEEP];
	enum cg_compress comp;
	int quiet, verbose;
};

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"output", 'o', "FILE", "where to write (- or none: stdout)",
     CG_OPT_STR(out)},
    {"bits-per-weight", OPT_BITS, "B",
     "no TYPE: each weight matrix q2_0, q4_0, q8_0 or\n"
     "f16 by its measured sensitivity on -d, B bits\n"
     "a weight over them all (2.5 to 32)",
     CG_OPT_F64(bpw, 0, 1e6), CG_OPT_POSITIVE, CG_OPT_SEEN(bpw_given)},
    {"data", 'd', "SHARD",
     "--bits-per-weight: the held-out shard that\nmeasures each matrix",
     CG_OPT_STR(data)},
    {"seed", OPT_SEED, "N", "--bits-per-weight: the model's noise (0)",
     CG_OPT_U64(seed)},
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
    .synopsis = "[-qv] [--keep PAT]... [--all] [--strip] [-o OUT] MODEL TYPE\n"
                "--bits-per-weight B -d SHARD [-qv] [--seed N]\n"
                " [--keep PAT]... [--all] [--strip] [-o OUT] MODEL",
    .about = "Write MODEL (- : standard input) with its weight matrices in\n"
             "TYPE: f32, f16, bf16, q8_0, q4_1, q4_0 or q2_0.  Norms, biases\n"
             "and embeddings stay f32; f32 takes every view back to f32.\n"
             "With --bits-per-weight, each matrix takes the type its\n"
             "measured sensitivity on SHARD earns within the budget.",
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
	if (a->bpw_given) {
		if (argc - ind != 1)
			return cg_usage(argc - ind < 1
			                    ? "MODEL is needed"
			                    : "--bits-per-weight chooses the "
			                      "types: no TYPE");
		if (a->data == NULL)
			return cg_usage("--bits-per-weight measures on a "
			                "held-out shard: give -d SHARD");
		if (!(a->bpw >= cg_bitalloc_min_bits() && a->bpw <= 32))
			return cg_usage("--bits-per-weight %g: from %.1f (every "
			                "matrix %s) to 32",
			                a->bpw, cg_bitalloc_min_bits(),
			                cg_dtype_name(cg_bitalloc_ladder[0]));
		if (strcmp(a->data, "-") == 0 && strcmp(argv[ind], "-") == 0)
			return cg_usage("the model and the shard cannot both "
			                "be standard input");
		a->r.type = cg_bitalloc_ladder[0];
	} else {
		if (a->data)
			return cg_usage("-d is the shard of --bits-per-weight");
		if (argc - ind != 2)
			return cg_usage(argc - ind < 2
			                    ? "MODEL and TYPE are needed"
			                    : "too many operands");
		if (cg_dtype_parse(argv[ind + 1], &a->r.type) != 0)
			return cg_usage(NULL);
	}
	a->in = argv[ind];
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
		if (a->r.types ? q->to != CG_F32 : q->to == a->r.type) {
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
	         display, nq, m->nviews,
	         a->r.types ? "quantized" : cg_dtype_name(a->r.type),
	         qn ? 8.0 * (double)qb / (double)qn : 0.0, nk, s1, s2,
	         n ? 8.0 * (double)to / (double)n : 0.0);
}

/* The allocation on stderr: each measured view, most sensitive first,
 * its held-out loss change at each type of the ladder, its choice. */
static void
report_alloc(const struct args *a, const struct cg_model *m,
             const struct cg_bitalloc *al, const char *display)
{
	uint64_t W = 0;
	int count[CG_BITALLOC_RUNGS] = {0};

	cg_warnx("%s: held-out loss %.6f (f32) on %s; the change with one "
	         "tensor quantized, the most sensitive (q2_0's change per "
	         "weight) first:",
	         display, al->base, a->data);
	fprintf(stderr, "  %-4s %-24s %10s", "rank", "tensor", "weights");
	for (int k = 0; k < CG_BITALLOC_RUNGS; k++)
		fprintf(stderr, " %10s", cg_dtype_name(cg_bitalloc_ladder[k]));
	fprintf(stderr, "  type\n");
	for (int j = 0; j < al->n; j++) {
		const struct cg_bitalloc_view *v = &al->v[j];
		fprintf(stderr, "  %-4d %-24s %10llu", j + 1,
		        m->views[v->view].name, (unsigned long long)v->n);
		for (int k = 0; k < CG_BITALLOC_RUNGS; k++) {
			fprintf(stderr, " %+10.6f", v->delta[k]);
			count[k] += v->type == cg_bitalloc_ladder[k];
		}
		fprintf(stderr, "  %s\n", cg_dtype_name(v->type));
		W += v->n;
	}
	cg_warnx("%s: %.4f bits per weight over %d tensors of %llu weights "
	         "(budget %g): %d f16, %d q8_0, %d q4_0, %d q2_0; predicted "
	         "loss change %+.6f",
	         display, al->bits, al->n, (unsigned long long)W, a->bpw,
	         count[3], count[2], count[1], count[0], al->predicted);
}

/* --bits-per-weight: measure m on the shard, choose each view's type
 * into *types (the caller frees).  0, or -1 with a message. */
static int
allocate(struct args *a, struct cg_model *m, const char *display,
         enum cg_dtype **types)
{
	struct cg_shard *s = cg_shard_open(a->data);
	struct cg_bitalloc al;
	int rc = -1;

	if (s == NULL)
		return -1;
	if ((*types = calloc((size_t)m->nviews, sizeof(**types))) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	if (cg_bitalloc_measure(m, s, &a->r, ALLOC_BATCH, a->seed, &al) != 0) {
		cg_errprefix(display);
		goto out;
	}
	if (cg_bitalloc_choose(&al, m, a->bpw, *types) == 0) {
		if (!a->quiet)
			report_alloc(a, m, &al, display);
		a->r.types = *types;
		rc = 0;
	}
	cg_bitalloc_free(&al);
out:
	cg_shard_free(s);
	return rc;
}

int
main(int argc, char **argv)
{
	struct args a = {.comp = CG_COMPRESS_NONE};
	struct cg_file *f = NULL, *out = NULL;
	struct cg_model *m = NULL;
	struct cg_quant_view *rep = NULL;
	enum cg_dtype *types = NULL;
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
	if (a.bpw_given && allocate(&a, m, display, &types) != 0)
		goto done;
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
	free(types);
	return rc;
}
