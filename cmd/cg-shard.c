/*
 * cg-shard.c - split a dataset into data shards for N workers.
 *
 * Reads IDX image and label files (plain or gzip), a directory holding the
 * MNIST-style train or t10k pair, or text (a directory of fortune files, JSON
 * Lines, TSV: lib/data/text.c), splits the examples with one of the strategies
 * of lib/data/shard.c, optionally weighted and with a held-out shard, and
 * writes PREFIX-0.cgd ... PREFIX-(N-1).cgd.  The input's kind is told from what
 * it is (a directory with or without IDX files) and its name (.jsonl, .json,
 * .tsv), unless --format says.  Each file is written atomically; if one fails,
 * the ones this run already wrote are removed so that no partial set is left.
 * An interrupt between two files still leaves the files finished so far.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cg.h"
#include "cli/cli.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/shard.h"
#include "data/split.h"
#include "data/text.h"

enum {
	OPT_CONDITIONS = CG_KEY_OWN,
	OPT_FORMAT,
	OPT_HOLDOUT,
	OPT_HOLDOUT_COUNT,
	OPT_HOLDOUT_FRACTION,
	OPT_JSON,
	OPT_LIMIT,
	OPT_MAX_ENTRY,
	OPT_SEED,
	OPT_TEST
};

/* What the command line asks for. */
struct args {
	struct cg_split split;
	struct cg_text_options topts;
	enum cg_compress compress;
	const char *prefix, *holdout, *conditions;
	double *weights, fraction;
	uint64_t nshards, limit, count;
	const char *have_count, *have_fraction;
	int test, json, verbose, quiet, nweights;
	int idx, text; /* --format idx, or a text format */
	char **inputs; /* [ninputs] */
	int ninputs;
};

static int
parse_strategy(const char *arg, void *where)
{
	return cg_split_parse(arg, where);
}

/* --holdout-fraction X, in [0, 1) */
static int
parse_fraction(const char *arg, void *where)
{
	if (cg_parse_f64("--holdout-fraction", arg, 0, 1, where) != 0 ||
	    *(double *)where == 1)
		return cg_seterr("--holdout-fraction: '%s' is not a number in "
		                 "[0, 1)",
		                 arg);
	return 0;
}

/* --max-entry SIZE, 1 byte to CG_TEXT_MAX_ENTRY_LIMIT */
static int
parse_max_entry(const char *arg, void *where)
{
	uint64_t *n = where;

	if (cg_parse_size("--max-entry", arg, n) != 0)
		return -1;
	if (*n < 1 || *n > CG_TEXT_MAX_ENTRY_LIMIT)
		return cg_seterr("--max-entry: '%s' is not a size from 1 to 1G",
		                 arg);
	return 0;
}

/* In the order of --help, by topic. */
#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"shards", 'n', "N",
     "number of shards (default: the number of weights, or 1)",
     CG_OPT_U64_IN(nshards, 1, CG_SHARD_MAX_SHARDS)},
    {"output", 'o', "PREFIX",
     "write PREFIX-I.cgd; \"-\" writes one shard to stdout",
     CG_OPT_STR(prefix)},
    {"strategy", 's', "NAME",
     "contiguous, round-robin, random, stratified (default) or hashed",
     CG_OPT_PARSE(split.strategy, parse_strategy), CG_OPT_PREFIX},
    {"weights", 'w', "W,W,...", "relative share of each shard (one per shard)",
     CG_OPT_CUSTOM},
    {"holdout", OPT_HOLDOUT, "FILE", "also write a held-out shard to FILE",
     CG_OPT_STR(holdout)},
    {"holdout-fraction", OPT_HOLDOUT_FRACTION, "X",
     "hold out this fraction (default 0.1)",
     CG_OPT_PARSE(fraction, parse_fraction), CG_OPT_SEEN(have_fraction)},
    {"holdout-count", OPT_HOLDOUT_COUNT, "K", "hold out exactly K examples",
     CG_OPT_U64_IN(count, 0, (long long)CG_SHARD_MAX_EXAMPLES),
     CG_OPT_SEEN(have_count)},
    {"seed", OPT_SEED, "N",
     "seed of the holdout, random, stratified and hashed choices (default "
     "0)",
     CG_OPT_U64_IN(split.seed, 0, (1LL << 53) - 1)},
    {"limit", OPT_LIMIT, "N", "use only the first N examples",
     CG_OPT_U64_IN(limit, 1, (long long)CG_SHARD_MAX_EXAMPLES)},
    {"test", OPT_TEST, NULL, "in DIR, read t10k-* instead of train-*",
     CG_OPT_FLAG(test)},
    {"conditions", OPT_CONDITIONS, "FILE",
     "condition names of IDX labels, one per line", CG_OPT_STR(conditions)},
    {"format", OPT_FORMAT, "NAME",
     "read the input as idx, fortunes, jsonl or tsv (default: told from the "
     "input as above)",
     CG_OPT_CUSTOM},
    {"max-entry", OPT_MAX_ENTRY, "SIZE",
     "longest text example in bytes, K, M or G suffix (default 1M)",
     CG_OPT_PARSE(topts.max_entry, parse_max_entry)},
    {"compress", 'z', "TYPE", "none (default), gzip or zstd",
     CG_OPT_PARSE(compress, cg_opt_compress), CG_OPT_PREFIX},
    {"json", OPT_JSON, NULL, "one JSON line per written shard on stdout",
     CG_OPT_FLAG(json)},
    {"verbose", 'v', NULL, "a table of the shards on stderr",
     CG_OPT_FLAG(verbose)},
    {"quiet", 'q', NULL, "print nothing but errors (and no progress)",
     CG_OPT_FLAG(quiet)},
    CG_OPT_ENCRYPT_TO,
    CG_OPT_SIGN,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-shard",
    .synopsis = "[options] -o PREFIX IMAGES LABELS\n"
                "[options] -o PREFIX DIR\n"
                "[options] -o PREFIX FILE.jsonl|FILE.tsv",
    .about =
        "Split a dataset into N data shards PREFIX-0.cgd ... "
        "PREFIX-(N-1).cgd.\n"
        "IMAGES and LABELS are IDX files, plain or gzip (\"-\" reads one of "
        "them\n"
        "from stdin); DIR holds train-images-idx3-ubyte and "
        "train-labels-idx1-ubyte\n"
        "(or .gz).  A DIR without them holds fortune files: each file whose "
        "name has\n"
        "no dot is a condition, and its entries are separated by lines "
        "holding \"%\".\n"
        "FILE.jsonl has one {\"cond\":...,\"text\":...} or "
        "{\"prompt\":...,\"text\":...}\n"
        "per line; FILE.tsv one cond<TAB>text per line, with \\n \\t \\r "
        "\\\\ escapes.\n"
        "Both may be gzip files, or \"-\" (stdin) with --format.",
    .opts = opts,
    .epilog = "Exit status: 0 on success, 1 on failure, 2 on a usage error.",
};

/*
 * The IDX pair to read: IMAGES LABELS as given, or found in a directory
 * (found keeps the strings to free).  Prints the error and returns -1.
 */
static int
find_inputs(int argc, char **argv, int test, const char **images,
            const char **labels, char *found[2])
{
	struct stat st;

	if (argc == 2) {
		*images = argv[0];
		*labels = argv[1];
		return 0;
	}
	if (stat(argv[0], &st) != 0)
		return cg_warnx("%s: %s", argv[0], strerror(errno)), -1;
	if (!S_ISDIR(st.st_mode))
		return cg_warnx("%s: not a directory (give IMAGES LABELS, or "
		                "a directory holding them)",
		                argv[0]),
		       -1;
	if (cg_idx_find(argv[0], test ? "t10k" : "train", found) != 0)
		return cg_warn(NULL), -1;
	*images = found[0];
	*labels = found[1];
	return 0;
}

/* The progress line's step: k of n files written. */
static void
progress(void *ctx, int k, int n)
{
	cg_progress_update(ctx, k, n, NAN);
}

/*
 * Write every shard, then the holdout, with a progress line on a terminal
 * unless quiet; all or nothing (cg_split_write).  0, or -1 said.
 */
static int
write_shards(const struct cg_dataset *d, const int *assign,
             const struct cg_split *s, char **paths, enum cg_compress c,
             int quiet)
{
	struct cg_progress pb;
	int rc;

	cg_progress_init(&pb, stderr, cg_getprogname(), quiet);
	rc = cg_split_write(d, assign, s, paths, c, progress, &pb);
	cg_progress_done(&pb);
	if (rc != 0)
		cg_warn(NULL);
	return rc;
}

/* One JSON line per written shard (cg_split_json); 0, or -1 when out of
 * memory. */
static int
print_json(const struct cg_dataset *d, const int *assign, char **paths,
           uint64_t n)
{
	for (uint64_t i = 0; i <= n; i++)
		if (paths[i] != NULL &&
		    cg_json_print(stdout,
		                  cg_split_json(d, assign, i < n ? (int)i : -1,
		                                paths[i])) != 0)
			return -1;
	return 0;
}

/* --weights and --format; CG_CONTINUE, or a usage error. */
static int
set_option(void *ctx, const struct cg_getopt *g, int c)
{
	struct args *a = ctx;
	static double wbuf[CG_SHARD_MAX_SHARDS];
	const char *s = g->arg;

	if (c == 'w') {
		if ((a->nweights = cg_parse_list(g->name, s, wbuf,
		                                 CG_SHARD_MAX_SHARDS)) < 0)
			return cg_usage(NULL);
		a->weights = wbuf;
		return CG_CONTINUE;
	}
	a->idx = strcmp(s, "idx") == 0;
	a->text = 0;
	if (!a->idx && cg_text_format_parse(s, &a->topts.format) != 0)
		return cg_usage("--format: unknown format '%s' (idx, "
		                "fortunes, jsonl or tsv)",
		                s);
	a->text = !a->idx;
	return CG_CONTINUE;
}

/* The command line into a; CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	if ((rc = cg_getopt_all(&cli, argc, argv, set_option, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	a->inputs = argv + ind;
	a->ninputs = argc - ind;
	return CG_CONTINUE;
}

/* Conflicts, each with its own message. */
static int
validate(struct args *a)
{
	const int out_stdout = a->prefix && strcmp(a->prefix, "-") == 0;
	const char *fmt = cg_text_format_name(a->topts.format);

	if (a->ninputs < 1)
		return cg_usage("no input given");
	if (a->ninputs > 2)
		return cg_usage("too many inputs (give IMAGES LABELS, or DIR)");
	if (a->prefix == NULL)
		return cg_usage("no output: give -o PREFIX");
	if (a->nshards == 0)
		a->nshards = a->weights ? (uint64_t)a->nweights : 1;
	if (a->weights && (uint64_t)a->nweights != a->nshards)
		return cg_usage("-w: %d weights for %llu shards", a->nweights,
		                (unsigned long long)a->nshards);
	if (a->have_count && a->have_fraction)
		return cg_usage("--holdout-count and --holdout-fraction "
		                "exclude each other");
	if ((a->have_count || a->have_fraction) && a->holdout == NULL)
		return cg_usage("--holdout-count and --holdout-fraction need "
		                "--holdout FILE");
	if (a->test && a->ninputs != 1)
		return cg_usage("--test needs a directory input");
	if (a->text && a->ninputs != 1)
		return cg_usage(
		    "--format %s reads one input, not IMAGES LABELS", fmt);
	if (a->test && a->text)
		return cg_usage("--test reads IDX files, not --format %s", fmt);
	if (out_stdout && (a->nshards != 1 || a->holdout))
		return cg_usage("-o - writes one shard: it needs -n 1 and no "
		                "--holdout");
	if (out_stdout && a->json)
		return cg_usage("--json and -o - both want standard output");
	if (a->holdout && strcmp(a->holdout, "-") == 0)
		return cg_usage("--holdout needs a file name, not -");
	if (a->quiet)
		a->verbose = 0;
	return CG_CONTINUE;
}

/*
 * Which kind of input: IDX unless it is one text file or a directory
 * without IDX files, or --format says; then what only the kind allows.
 * CG_CONTINUE, or the exit status.
 */
static int
input_kind(struct args *a)
{
	const char *in = a->inputs[0];
	struct stat st;

	if (a->ninputs == 1 && !a->idx && !a->test && !a->text) {
		if (strcmp(in, "-") == 0)
			return cg_usage("standard input needs --format jsonl "
			                "or tsv");
		if (stat(in, &st) != 0)
			return cg_failx("%s: %s", in, strerror(errno));
		if (S_ISDIR(st.st_mode))
			a->text = !cg_idx_dir(in);
		else if (cg_text_format_guess(in) != CG_TEXT_AUTO)
			a->text = 1;
		else
			return cg_failx("%s: not a directory, and not named "
			                ".jsonl, .json or .tsv (give IMAGES "
			                "LABELS, or --format)",
			                in);
	}
	if (a->text && a->conditions)
		return cg_usage("--conditions names IDX labels; text names its "
		                "own conditions");
	if (!a->text && a->topts.max_entry)
		return cg_usage("--max-entry applies to text input only");
	return CG_CONTINUE;
}

/* The examples of the input into d, named; 0, or -1 said. */
static int
load(struct args *a, struct cg_dataset *d)
{
	const char *images = NULL, *labels = NULL;
	char *found[2] = {NULL, NULL};
	int rc = -1, said = 0;

	if (a->text) {
		a->topts.limit = a->limit;
		/* the input stays where it is (standard input in a
		 * temporary file) until its shards are written: memory by
		 * examples, not by bytes */
		a->topts.stream = 1;
		a->topts.hash = a->split.strategy == CG_SPLIT_HASHED;
		a->topts.hash_seed = a->split.seed;
		if (cg_text_load(a->inputs[0], &a->topts, d) != 0)
			goto out;
	} else {
		/* find_inputs says what is wrong itself */
		if (find_inputs(a->ninputs, a->inputs, a->test, &images,
		                &labels, found) != 0) {
			said = 1;
			goto out;
		}
		/* the pixels stay in the file until the shards are written */
		if (cg_idx_stream(images, labels, a->limit,
		                  a->split.strategy == CG_SPLIT_HASHED
		                      ? &a->split.seed
		                      : NULL,
		                  d) != 0)
			goto out;
	}
	if (a->conditions) {
		if (cg_dataset_read_conditions(d, a->conditions) != 0)
			goto out;
	} else if (!a->text && cg_idx_name_conditions(d, images) != 0)
		goto out;
	rc = 0;
out:
	if (rc != 0 && !said)
		cg_warn(NULL);
	free(found[0]);
	free(found[1]);
	return rc;
}

/* Split d, write the shards, say what was written; 0, or -1 said. */
static int
split_write(struct args *a, struct cg_dataset *d)
{
	char **paths = NULL;
	int *assign = NULL, rc = -1;

	a->split.nshards = (int)a->nshards;
	a->split.weights = a->weights;
	if (a->holdout)
		a->split.holdout =
		    a->have_count ? a->count
		                  : cg_split_holdout_count(d->n, a->fraction);
	if ((assign = malloc(d->n * sizeof(*assign))) == NULL) {
		cg_warnx("out of memory");
		goto out;
	}
	if (cg_split_assign(d, &a->split, assign) != 0) {
		cg_warn(NULL);
		goto out;
	}
	if ((paths = cg_split_paths(a->prefix, a->nshards, a->holdout)) ==
	    NULL) {
		cg_warn(NULL);
		goto out;
	}
	if (write_shards(d, assign, &a->split, paths, a->compress, a->quiet) !=
	    0)
		goto out;
	if (a->verbose)
		cg_split_table(stderr, d, assign, paths, a->nshards);
	if (a->json && print_json(d, assign, paths, a->nshards) != 0) {
		cg_warnx("out of memory");
		goto out;
	}
	rc = 0;
out:
	cg_split_paths_free(paths, a->nshards);
	free(assign);
	return rc;
}

int
main(int argc, char **argv)
{
	struct args a = {
	    .split = {.strategy = CG_SPLIT_STRATIFIED},
	    .topts = {.format = CG_TEXT_AUTO},
	    .compress = CG_COMPRESS_NONE,
	    .fraction = 0.1,
	};
	struct cg_dataset d = {0};
	int rc;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE ||
	    (rc = validate(&a)) != CG_CONTINUE ||
	    (rc = input_kind(&a)) != CG_CONTINUE)
		return rc;
	rc = CG_EXIT_FAILURE;
	if (load(&a, &d) == 0 && split_write(&a, &d) == 0)
		rc = cg_finish_stdout(CG_EXIT_OK);
	cg_dataset_free(&d);
	return rc;
}
