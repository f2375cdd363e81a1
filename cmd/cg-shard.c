/*
 * cg-shard.c - split a dataset into data shards for N workers.
 *
 * Reads IDX image and label files (plain or gzip), a directory holding
 * the MNIST-style train or t10k pair, or text (a directory of fortune
 * files, JSON Lines, TSV: lib/text.c), splits the examples with one of the
 * strategies of lib/shard.c, optionally weighted and with a held-out shard,
 * and writes PREFIX-0.cgd ... PREFIX-(N-1).cgd.  The input's kind is told
 * from what it is (a directory with or without IDX files) and its name
 * (.jsonl, .json, .tsv), unless --format says.  Each file is written
 * atomically; if one fails, the ones this run already wrote are removed so
 * that no partial set is left.  An interrupt between two files still leaves
 * the files finished so far.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "cli.h"
#include "shard.h"

static const char *progname = "cg-shard";

static void
usage(FILE *fp)
{
	fprintf(fp,
	        "usage: cg-shard [options] -o PREFIX IMAGES LABELS\n"
	        "       cg-shard [options] -o PREFIX DIR\n"
	        "       cg-shard [options] -o PREFIX FILE.jsonl|FILE.tsv\n");
}

static void
help(void)
{
	usage(stdout);
	fputs("\n"
	      "Split a dataset into N data shards PREFIX-0.cgd ... "
	      "PREFIX-(N-1).cgd.\n"
	      "IMAGES and LABELS are IDX files, plain or gzip (\"-\" reads one "
	      "of them\n"
	      "from stdin); DIR holds train-images-idx3-ubyte and "
	      "train-labels-idx1-ubyte\n"
	      "(or .gz).  A DIR without them holds fortune files: each file "
	      "whose name has\n"
	      "no dot is a condition, and its entries are separated by lines "
	      "holding \"%\".\n"
	      "FILE.jsonl has one {\"cond\":...,\"text\":...} or "
	      "{\"prompt\":...,\"text\":...}\n"
	      "per line; FILE.tsv one cond<TAB>text per line, with \\n \\t \\r "
	      "\\\\ escapes.\n"
	      "Both may be gzip files, or \"-\" (stdin) with --format.\n"
	      "\n"
	      "  -n, --shards N            number of shards (default: the "
	      "number of weights,\n"
	      "                            or 1)\n"
	      "  -o, --output PREFIX       write PREFIX-I.cgd; \"-\" writes "
	      "one shard to stdout\n"
	      "  -s, --strategy NAME       contiguous, round-robin, random, "
	      "stratified\n"
	      "                            (default) or hashed\n"
	      "  -w, --weights W,W,...     relative share of each shard (one "
	      "per shard)\n"
	      "      --holdout FILE        also write a held-out shard to "
	      "FILE\n"
	      "      --holdout-fraction X  hold out this fraction (default "
	      "0.1)\n"
	      "      --holdout-count K     hold out exactly K examples\n"
	      "      --seed N              seed of the holdout, random, "
	      "stratified and hashed\n"
	      "                            choices (default 0)\n"
	      "      --limit N             use only the first N examples\n"
	      "      --test                in DIR, read t10k-* instead of "
	      "train-*\n"
	      "      --conditions FILE     condition names of IDX labels, one "
	      "per line\n"
	      "      --format NAME         read the input as idx, fortunes, "
	      "jsonl or tsv\n"
	      "                            (default: told from the input as "
	      "above)\n"
	      "      --max-entry SIZE      longest text example in bytes, K, M "
	      "or G suffix\n"
	      "                            (default 1M)\n"
	      "  -z, --compress TYPE       none (default), gzip or zstd\n"
	      "      --json                one JSON line per written shard on "
	      "stdout\n"
	      "  -v, --verbose             a table of the shards on stderr\n"
	      "  -q, --quiet               print nothing but errors\n"
	      "  -h, --help                show this help and exit\n"
	      "      --version             show the version and exit\n"
	      "\n"
	      "Exit status: 0 on success, 1 on failure, 2 on a usage "
	      "error.\n",
	      stdout);
}

static int bad_usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A usage error: one line, the synopsis, exit status 2. */
static int
bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	fprintf(stderr, "Try 'cg-shard --help' for more information.\n");
	return 2;
}

/*
 * A failure: "cg-shard: msg" as exactly one line, since the message may
 * quote file names or text taken from a hostile file.  Returns -1.
 */
static int
fail(const char *fmt, ...)
{
	char buf[2048];
	const char *msg = buf;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: ", progname);
	for (; *msg; msg++) {
		unsigned char c = (unsigned char)*msg;
		fputc(c < 0x20 || c == 0x7f ? '?' : c, stderr);
	}
	fputc('\n', stderr);
	return -1;
}

/*
 * DIR/SET-WHAT-idxD-ubyte, or the same with ".idx" or a ".gz" suffix:
 * the first that exists, as a new string, or NULL.
 */
static char *
find_idx(const char *dir, const char *set, const char *what)
{
	int dims = strcmp(what, "images") == 0 ? 3 : 1;
	struct stat st;

	for (int i = 0; i < 4; i++) {
		char *p;
		if (asprintf(&p, "%s/%s-%s%cidx%d-ubyte%s", dir, set, what,
		             i < 2 ? '-' : '.', dims, i % 2 ? ".gz" : "") < 0)
			return NULL;
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
			return p;
		free(p);
	}
	return NULL;
}

/* Whether dir holds an IDX pair (of either set), and so is no text. */
static int
has_idx(const char *dir)
{
	char *p = find_idx(dir, "train", "images");
	int found;

	if (p == NULL)
		p = find_idx(dir, "t10k", "images");
	found = p != NULL;
	free(p);
	return found;
}

/* Whether a path names Fashion-MNIST, whose labels have known names. */
static int
is_fashion(const char *path)
{
	return strcasestr(path, "fashion") != NULL;
}

/*
 * The IDX pair to read: IMAGES LABELS as given, or found in a directory
 * (*found keeps the strings to free).  Prints the error and returns -1.
 */
static int
find_inputs(int argc, char **argv, int test, const char **images,
            const char **labels, char *found[2])
{
	const char *set = test ? "t10k" : "train";
	struct stat st;

	if (argc == 2) {
		*images = argv[0];
		*labels = argv[1];
		return 0;
	}
	if (stat(argv[0], &st) != 0)
		return fail("%s: %s", argv[0], strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return fail("%s: not a directory (give IMAGES LABELS, or a "
		            "directory holding them)",
		            argv[0]);
	found[0] = find_idx(argv[0], set, "images");
	found[1] = find_idx(argv[0], set, "labels");
	if (found[0] == NULL || found[1] == NULL)
		return fail("%s: no %s-%s-idx%d-ubyte[.gz] here", argv[0], set,
		            found[0] ? "labels" : "images", found[0] ? 1 : 3);
	*images = found[0];
	*labels = found[1];
	return 0;
}

/* paths[i] for shard i, paths[n] for the holdout (NULL without one). */
static char **
shard_paths(const char *prefix, uint64_t n, const char *holdout)
{
	char **paths = calloc(n + 1, sizeof(*paths));

	if (paths == NULL)
		goto oom;
	for (uint64_t i = 0; i < n; i++) {
		if (strcmp(prefix, "-") == 0)
			paths[i] = strdup("-");
		else if (asprintf(&paths[i], "%s-%llu%s", prefix,
		                  (unsigned long long)i, CG_SHARD_EXT) < 0)
			paths[i] = NULL;
		if (paths[i] == NULL)
			goto oom;
		if (holdout && strcmp(paths[i], holdout) == 0) {
			fail("%s: both a shard and the holdout", holdout);
			goto fail;
		}
	}
	if (holdout && (paths[n] = strdup(holdout)) == NULL)
		goto oom;
	return paths;
oom:
	fail("%s", "out of memory");
fail:
	for (uint64_t i = 0; paths && i <= n; i++)
		free(paths[i]);
	free(paths);
	return NULL;
}

/*
 * Write every shard, then the holdout.  On a failure, remove the files
 * this run already wrote, so that no partial set is left; returns -1.
 */
static int
write_shards(const struct cg_dataset *d, const int *assign,
             const struct cg_split *s, char **paths, enum cg_compress c)
{
	int n = s->nshards;

	for (int i = 0; i <= n; i++) {
		if (paths[i] == NULL)
			continue;
		if (cg_shard_write(d, assign, i < n ? i : -1, s, paths[i], c) ==
		    0)
			continue;
		fail("%s", cg_errmsg());
		while (i-- > 0)
			if (paths[i] && strcmp(paths[i], "-") != 0)
				unlink(paths[i]);
		return -1;
	}
	return 0;
}

static void
print_table(const struct cg_dataset *d, const int *assign, char **paths,
            uint64_t n)
{
	fprintf(stderr, "%-8s %10s  %s\n", "shard", "examples", "path");
	for (uint64_t i = 0; i <= n; i++) {
		char id[24];
		int shard = i < n ? (int)i : -1;

		if (paths[i] == NULL)
			continue;
		if (shard < 0)
			snprintf(id, sizeof(id), "holdout");
		else
			snprintf(id, sizeof(id), "%d", shard);
		fprintf(
		    stderr, "%-8s %10llu  %s\n", id,
		    (unsigned long long)cg_split_count(d, assign, shard, NULL),
		    paths[i]);
	}
}

/* One JSON object per written shard: path, shard, holdout, examples and
 * the count of each condition by name. */
static int
print_json(const struct cg_dataset *d, const int *assign, char **paths,
           uint64_t n)
{
	uint64_t *counts = malloc(d->nconditions * sizeof(*counts));
	int rc = -1;

	if (counts == NULL)
		return -1;
	for (uint64_t i = 0; i <= n; i++) {
		int shard = i < n ? (int)i : -1;
		cJSON *o, *c;
		char *line;

		if (paths[i] == NULL)
			continue;
		uint64_t total = cg_split_count(d, assign, shard, counts);
		if ((o = cJSON_CreateObject()) == NULL)
			goto out;
		cJSON_AddStringToObject(o, "path", paths[i]);
		cJSON_AddNumberToObject(o, "shard", shard);
		cJSON_AddBoolToObject(o, "holdout", shard < 0);
		cJSON_AddNumberToObject(o, "examples", (double)total);
		c = cJSON_AddObjectToObject(o, "counts");
		for (size_t k = 0; c && k < d->nconditions; k++)
			cJSON_AddNumberToObject(c, d->conditions[k],
			                        (double)counts[k]);
		line = c ? cJSON_PrintUnformatted(o) : NULL;
		cJSON_Delete(o);
		if (line == NULL)
			goto out;
		printf("%s\n", line);
		free(line);
	}
	rc = 0;
out:
	free(counts);
	return rc;
}

enum {
	OPT_CONDITIONS = 256,
	OPT_FORMAT,
	OPT_HOLDOUT,
	OPT_HOLDOUT_COUNT,
	OPT_HOLDOUT_FRACTION,
	OPT_JSON,
	OPT_LIMIT,
	OPT_MAX_ENTRY,
	OPT_SEED,
	OPT_TEST,
	OPT_VERSION,
};

static const struct option longopts[] = {
    {"compress", required_argument, NULL, 'z'},
    {"conditions", required_argument, NULL, OPT_CONDITIONS},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"help", no_argument, NULL, 'h'},
    {"holdout", required_argument, NULL, OPT_HOLDOUT},
    {"holdout-count", required_argument, NULL, OPT_HOLDOUT_COUNT},
    {"holdout-fraction", required_argument, NULL, OPT_HOLDOUT_FRACTION},
    {"json", no_argument, NULL, OPT_JSON},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"max-entry", required_argument, NULL, OPT_MAX_ENTRY},
    {"output", required_argument, NULL, 'o'},
    {"quiet", no_argument, NULL, 'q'},
    {"seed", required_argument, NULL, OPT_SEED},
    {"shards", required_argument, NULL, 'n'},
    {"strategy", required_argument, NULL, 's'},
    {"test", no_argument, NULL, OPT_TEST},
    {"verbose", no_argument, NULL, 'v'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"weights", required_argument, NULL, 'w'},
    {NULL, 0, NULL, 0},
};

int
main(int argc, char **argv)
{
	static double wbuf[CG_SHARD_MAX_SHARDS];
	struct cg_split split = {.strategy = CG_SPLIT_STRATIFIED};
	struct cg_dataset d = {0};
	struct cg_text_options topts = {.format = CG_TEXT_AUTO};
	enum cg_compress compress = CG_COMPRESS_NONE;
	const char *prefix = NULL, *holdout = NULL, *conditions = NULL;
	const char *images = NULL, *labels = NULL;
	char *found[2] = {NULL, NULL}, **paths = NULL;
	double *weights = NULL, fraction = 0.1;
	uint64_t nshards = 0, limit = 0, count = 0;
	int have_count = 0, have_fraction = 0, test = 0, json = 0;
	int verbose = 0, quiet = 0, nweights = 0, rc = 1, ch;
	int idx = 0, text = 0; /* --format idx, or a text format */
	struct stat st;
	int *assign = NULL;
	long long v;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":hn:o:qs:vw:z:", longopts,
	                         NULL)) != -1) {
		switch (ch) {
		case 'h':
			help();
			return fflush(stdout) == 0 ? 0 : 1;
		case 'n':
			if (cg_parse_i64("-n", optarg, 1, CG_SHARD_MAX_SHARDS,
			                 &v) != 0)
				return bad_usage("%s", cg_errmsg());
			nshards = (uint64_t)v;
			break;
		case 'o':
			prefix = optarg;
			break;
		case 'q':
			quiet = 1;
			break;
		case 's':
			if (cg_split_parse(optarg, &split.strategy) != 0)
				return bad_usage("-s: %s", cg_errmsg());
			break;
		case 'v':
			verbose = 1;
			break;
		case 'w':
			if ((nweights = cg_parse_list("-w", optarg, wbuf,
			                              CG_SHARD_MAX_SHARDS)) < 0)
				return bad_usage("%s", cg_errmsg());
			weights = wbuf;
			break;
		case 'z':
			if (cg_compress_parse(optarg, &compress) != 0)
				return bad_usage("-z: %s", cg_errmsg());
			break;
		case OPT_CONDITIONS:
			conditions = optarg;
			break;
		case OPT_FORMAT:
			idx = strcmp(optarg, "idx") == 0;
			text = 0;
			if (!idx &&
			    cg_text_format_parse(optarg, &topts.format) != 0)
				return bad_usage(
				    "--format: unknown format '%s' "
				    "(idx, fortunes, jsonl or tsv)",
				    optarg);
			text = !idx;
			break;
		case OPT_HOLDOUT:
			holdout = optarg;
			break;
		case OPT_HOLDOUT_COUNT:
			if (cg_parse_i64("--holdout-count", optarg, 0,
			                 (long long)CG_SHARD_MAX_EXAMPLES,
			                 &v) != 0)
				return bad_usage("%s", cg_errmsg());
			count = (uint64_t)v;
			have_count = 1;
			break;
		case OPT_HOLDOUT_FRACTION:
			if (cg_parse_f64("--holdout-fraction", optarg, 0, 1,
			                 &fraction) != 0 ||
			    fraction == 1)
				return bad_usage("--holdout-fraction: '%s' is "
				                 "not a number in [0, 1)",
				                 optarg);
			have_fraction = 1;
			break;
		case OPT_JSON:
			json = 1;
			break;
		case OPT_LIMIT:
			if (cg_parse_i64("--limit", optarg, 1,
			                 (long long)CG_SHARD_MAX_EXAMPLES,
			                 &v) != 0)
				return bad_usage("%s", cg_errmsg());
			limit = (uint64_t)v;
			break;
		case OPT_MAX_ENTRY:
			if (cg_parse_size("--max-entry", optarg,
			                  &topts.max_entry) != 0)
				return bad_usage("%s", cg_errmsg());
			if (topts.max_entry < 1 ||
			    topts.max_entry > CG_TEXT_MAX_ENTRY_LIMIT)
				return bad_usage(
				    "--max-entry: '%s' is not a size "
				    "from 1 to 1G",
				    optarg);
			break;
		case OPT_SEED:
			if (cg_parse_i64("--seed", optarg, 0, (1LL << 53) - 1,
			                 &v) != 0)
				return bad_usage("%s", cg_errmsg());
			split.seed = (uint64_t)v;
			break;
		case OPT_TEST:
			test = 1;
			break;
		case OPT_VERSION:
			printf("cg-shard (cg) %s\n", CG_VERSION);
			return fflush(stdout) == 0 ? 0 : 1;
		case ':':
			return bad_usage("option '%s' needs an argument",
			                 argv[optind - 1]);
		default:
			/* optopt is 0 for an unknown long option, the
			 * option's value for "--flag=arg", else the letter */
			if (optopt == 0)
				return bad_usage("unknown option '%s'",
				                 argv[optind - 1]);
			if (strncmp(argv[optind - 1], "--", 2) == 0 &&
			    strchr(argv[optind - 1], '=') != NULL)
				return bad_usage("option '%s' takes no "
				                 "argument",
				                 argv[optind - 1]);
			return bad_usage("unknown option '-%c'", optopt);
		}
	}
	argc -= optind;
	argv += optind;

	/* Conflicts, each with its own message. */
	if (argc < 1 || argc > 2)
		return bad_usage("%s", argc < 1
		                           ? "no input given"
		                           : "too many inputs (give IMAGES "
		                             "LABELS, or DIR)");
	if (prefix == NULL)
		return bad_usage("%s", "no output: give -o PREFIX");
	if (nshards == 0)
		nshards = weights ? (uint64_t)nweights : 1;
	if (weights && (uint64_t)nweights != nshards)
		return bad_usage("-w: %d weights for %llu shards", nweights,
		                 (unsigned long long)nshards);
	if (have_count && have_fraction)
		return bad_usage("%s", "--holdout-count and --holdout-fraction "
		                       "exclude each other");
	if ((have_count || have_fraction) && holdout == NULL)
		return bad_usage("%s", "--holdout-count and --holdout-fraction "
		                       "need --holdout FILE");
	if (test && argc != 1)
		return bad_usage("%s", "--test needs a directory input");
	if (text && argc != 1)
		return bad_usage("--format %s reads one input, not IMAGES "
		                 "LABELS",
		                 cg_text_format_name(topts.format));
	if (test && text)
		return bad_usage("--test reads IDX files, not --format %s",
		                 cg_text_format_name(topts.format));
	if (strcmp(prefix, "-") == 0 && (nshards != 1 || holdout))
		return bad_usage("%s", "-o - writes one shard: it needs -n 1 "
		                       "and no --holdout");
	if (strcmp(prefix, "-") == 0 && json)
		return bad_usage("%s", "--json and -o - both want standard "
		                       "output");
	if (holdout && strcmp(holdout, "-") == 0)
		return bad_usage("%s", "--holdout needs a file name, not -");
	if (quiet)
		verbose = 0;

	/* Which kind of input: IDX unless it is one text file or directory
	 * without IDX files, or --format says. */
	if (argc == 1 && !idx && !test && !text) {
		if (strcmp(argv[0], "-") == 0)
			return bad_usage("%s", "standard input needs --format "
			                       "jsonl or tsv");
		if (stat(argv[0], &st) != 0) {
			fail("%s: %s", argv[0], strerror(errno));
			goto out;
		}
		if (S_ISDIR(st.st_mode)) {
			text = !has_idx(argv[0]);
		} else {
			text = cg_text_format_guess(argv[0]) != CG_TEXT_AUTO;
			if (!text) {
				fail("%s: not a directory, and not named "
				     ".jsonl, .json or .tsv (give IMAGES "
				     "LABELS, or --format)",
				     argv[0]);
				goto out;
			}
		}
	}
	if (text && conditions)
		return bad_usage("%s", "--conditions names IDX labels; text "
		                       "names its own conditions");
	if (!text && topts.max_entry)
		return bad_usage("%s", "--max-entry applies to text input "
		                       "only");

	if (text) {
		topts.limit = limit;
		if (cg_text_load(argv[0], &topts, &d) != 0) {
			fail("%s", cg_errmsg());
			goto out;
		}
	} else {
		if (find_inputs(argc, argv, test, &images, &labels, found) != 0)
			goto out;
		if (cg_idx_load(images, labels, limit, &d) != 0) {
			fail("%s", cg_errmsg());
			goto out;
		}
	}
	if (conditions) {
		if (cg_dataset_read_conditions(&d, conditions) != 0) {
			fail("%s", cg_errmsg());
			goto out;
		}
	} else if (!text && is_fashion(images) && d.nconditions == 10 &&
	           cg_dataset_set_conditions(&d, cg_fashion_mnist_names, 10) !=
	               0) {
		fail("%s", cg_errmsg());
		goto out;
	}

	split.nshards = (int)nshards;
	split.weights = weights;
	if (holdout)
		split.holdout =
		    have_count ? count : cg_split_holdout_count(d.n, fraction);
	if ((assign = malloc(d.n * sizeof(*assign))) == NULL) {
		fail("%s", "out of memory");
		goto out;
	}
	if (cg_split_assign(&d, &split, assign) != 0) {
		fail("%s", cg_errmsg());
		goto out;
	}
	if ((paths = shard_paths(prefix, nshards, holdout)) == NULL)
		goto out;
	if (write_shards(&d, assign, &split, paths, compress) != 0)
		goto out;
	if (verbose)
		print_table(&d, assign, paths, nshards);
	if (json && print_json(&d, assign, paths, nshards) != 0) {
		fail("%s", "out of memory");
		goto out;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fail("standard output: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (paths)
		for (uint64_t i = 0; i <= nshards; i++)
			free(paths[i]);
	free(paths);
	free(assign);
	free(found[0]);
	free(found[1]);
	cg_dataset_free(&d);
	return rc;
}
