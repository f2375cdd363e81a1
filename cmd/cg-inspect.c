/*
 * cg-inspect.c - show what is inside cg files, or check them.
 *
 * One mode per run: a table for people (the default), one JSON object per
 * file (--json), digest verification (--verify), the values of one
 * tensor as text (--tensor), or two files compared tensor by tensor
 * (--diff A B).  Each mode is one function.  Every input is read whole
 * and checked by cg_file_read before anything is shown, so a damaged
 * file prints nothing but its one-line error.  With several inputs each
 * failure is reported and the exit status is 1 at the end.
 *
 * --diff alone follows diff(1) and cmp(1), so that scripts can ask "did
 * the weights change?": 0 the same, 1 different, 2 trouble (a usage error
 * or a file that cannot be read).
 */
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "cli.h"
#include "inspect.h"

#define PROG "cg-inspect"

static struct {
	int json;
	int quiet;
	int rows;
	const char *tensor;
	double tolerance; /* --diff; < 0: identical bytes only */
	struct cg_inspect_opts io;
} opt = {.tolerance = -1, .io = {.stats = 1}};

static void
usage(FILE *fp)
{
	fprintf(fp, "usage: " PROG " [-q] [--no-stats] [FILE...]\n"
	            "       " PROG " --json [-q] [--no-stats] [FILE...]\n"
	            "       " PROG " --verify [-q] [FILE...]\n"
	            "       " PROG " --tensor NAME [--rows] [FILE]\n"
	            "       " PROG " --diff [-jq] [--tolerance X] A B\n");
}

static void
help(void)
{
	usage(stdout);
	fputs("\n"
	      "Show the manifest and per-tensor statistics of cg files; no\n"
	      "FILE, or -, reads standard input.\n"
	      "\n"
	      "      --diff         compare files A and B tensor by tensor\n"
	      "  -j, --json         one JSON object per file, one per line\n"
	      "      --no-stats     skip min/max/mean/std/histogram (fast)\n"
	      "  -q, --quiet        --verify: print nothing for good files;\n"
	      "                     --diff: print nothing at all\n"
	      "      --rows         --tensor: one line per row of the last\n"
	      "                     dimension instead of one value per line\n"
	      "  -t, --tensor NAME  print the values of tensor NAME as text\n"
	      "      --tolerance X  --diff: tensors of the same shape whose\n"
	      "                     values differ by at most X are equal\n"
	      "      --verify       check every digest; print FILE: OK\n"
	      "  -h, --help         show this help\n"
	      "  -V, --version      show the version\n"
	      "\n"
	      "Exit status: 0 success, 1 a file could not be read or failed\n"
	      "verification, 2 usage error.  --diff as diff(1): 0 no tensor\n"
	      "differs, 1 some tensor differs or is in one file only, 2\n"
	      "trouble.\n",
	      stdout);
}

/*
 * Print "cg-inspect: msg" as exactly one line: the message may quote a
 * file name or a member name taken from a hostile archive.
 */
static void
report(const char *msg)
{
	fputs(PROG ": ", stderr);
	for (; *msg; msg++) {
		unsigned char c = (unsigned char)*msg;
		fputc(c < 0x20 || c == 0x7f ? '?' : c, stderr);
	}
	fputc('\n', stderr);
}

/* The name cg_file_read uses for path in its messages. */
static const char *
display(const char *path)
{
	return strcmp(path, "-") == 0 ? "(stdin)" : path;
}

/* ---------------------------------------------------------------- modes */

static int
do_table(const char *path)
{
	static int shown; /* tables so far, to separate them */
	struct cg_file *f = cg_file_read(path);
	int rc = 0;

	if (f == NULL)
		return -1;
	if (shown++)
		putchar('\n');
	if (cg_inspect_table(stdout, display(path), f, &opt.io) != 0) {
		cg_errprefix(display(path));
		rc = -1;
	}
	cg_file_free(f);
	return rc;
}

static int
do_json(const char *path)
{
	struct cg_file *f = cg_file_read(path);
	struct cJSON *j = NULL;
	char *s = NULL;
	int rc = -1;

	if (f == NULL)
		return -1;
	if ((j = cg_inspect_json(display(path), f, &opt.io)) == NULL)
		goto out;
	if ((s = cJSON_PrintUnformatted(j)) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	puts(s);
	rc = 0;
out:
	if (rc != 0)
		cg_errprefix(display(path));
	free(s);
	cJSON_Delete(j);
	cg_file_free(f);
	return rc;
}

static int
do_verify(const char *path)
{
	struct cg_file *f = cg_file_read(path);

	if (f == NULL)
		return -1;
	if (!opt.quiet)
		printf("%s: OK\n", display(path));
	cg_file_free(f);
	return 0;
}

static int
do_tensor(const char *path)
{
	struct cg_file *f = cg_file_read(path);
	const struct cg_tensor *t;
	int rc = -1;

	if (f == NULL)
		return -1;
	if ((t = cg_file_find(f, opt.tensor)) == NULL)
		cg_seterr("tensor %s: missing", opt.tensor);
	else if (cg_tensor_dump(stdout, t, opt.rows) == 0)
		rc = 0;
	if (rc != 0)
		cg_errprefix(display(path));
	cg_file_free(f);
	return rc;
}

/*
 * Compare the files at pa and pb.  Returns the exit status: 0 no tensor
 * differs, 1 some do, 2 trouble (already reported).
 */
static int
do_diff(const char *pa, const char *pb)
{
	struct cg_file *a, *b;
	struct cg_diff *d = NULL;
	struct cJSON *j = NULL;
	char *s = NULL;
	int rc = -1; /* -1: a failure not yet reported */

	/* both are read whatever becomes of the first, so that two bad
	 * files give two lines */
	if ((a = cg_file_read(pa)) == NULL)
		report(cg_errmsg());
	if ((b = cg_file_read(pb)) == NULL)
		report(cg_errmsg());
	if (a == NULL || b == NULL) {
		rc = 2;
		goto out;
	}
	if ((d = cg_diff_new(a, b, opt.tolerance)) == NULL)
		goto out;
	if (!opt.quiet && !opt.json &&
	    cg_diff_table(stdout, display(pa), display(pb), d) != 0)
		goto out;
	if (!opt.quiet && opt.json) {
		/* a line per tensor, then the summary */
		for (size_t i = 0; i <= d->ntensors; i++) {
			j = i < d->ntensors
			        ? cg_diff_json_tensor(&d->tensors[i])
			        : cg_diff_json_summary(display(pa), display(pb),
			                               d);
			if (j == NULL)
				goto out;
			if ((s = cJSON_PrintUnformatted(j)) == NULL) {
				cg_seterr("out of memory");
				goto out;
			}
			puts(s);
			free(s);
			s = NULL;
			cJSON_Delete(j);
			j = NULL;
		}
	}
	rc = cg_diff_differs(d);
out:
	if (rc < 0) {
		fflush(stdout);
		report(cg_errmsg());
		rc = 2;
	}
	free(s);
	cJSON_Delete(j);
	cg_diff_free(d);
	cg_file_free(b);
	cg_file_free(a);
	return rc;
}

/* ----------------------------------------------------------------- main */

/* A usage error: the message, the synopsis, exit status 2. */
static int
bad_usage(const char *msg)
{
	report(msg);
	usage(stderr);
	return 2;
}

enum { OPT_DIFF = 256, OPT_NO_STATS, OPT_ROWS, OPT_TOLERANCE, OPT_VERIFY };

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"diff", no_argument, NULL, OPT_DIFF},
	    {"help", no_argument, NULL, 'h'},
	    {"json", no_argument, NULL, 'j'},
	    {"no-stats", no_argument, NULL, OPT_NO_STATS},
	    {"quiet", no_argument, NULL, 'q'},
	    {"rows", no_argument, NULL, OPT_ROWS},
	    {"tensor", required_argument, NULL, 't'},
	    {"tolerance", required_argument, NULL, OPT_TOLERANCE},
	    {"verify", no_argument, NULL, OPT_VERIFY},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	static char *stdin_only[] = {"-", NULL};
	int (*run)(const char *);
	int c, diff = 0, verify = 0, failed = 0, rc;
	char **files;

	/* getopt_long names the program by argv[0] in its messages, which
	 * must start with the name alone, whatever path ran it */
	argv[0] = PROG;
	while ((c = getopt_long(argc, argv, "hjqt:V", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_DIFF:
			diff = 1;
			break;
		case 'h':
			help();
			return fflush(stdout) == 0 ? 0 : 1;
		case 'j':
			opt.json = 1;
			break;
		case OPT_NO_STATS:
			opt.io.stats = 0;
			break;
		case 'q':
			opt.quiet = 1;
			break;
		case OPT_ROWS:
			opt.rows = 1;
			break;
		case 't':
			opt.tensor = optarg;
			break;
		case OPT_TOLERANCE:
			if (cg_parse_f64("--tolerance", optarg, 0, 1e30,
			                 &opt.tolerance) != 0)
				return bad_usage(cg_errmsg());
			break;
		case OPT_VERIFY:
			verify = 1;
			break;
		case 'V':
			puts(PROG " (cg) " CG_VERSION);
			return fflush(stdout) == 0 ? 0 : 1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (diff && verify)
		return bad_usage("--diff and --verify cannot be combined");
	if (diff && opt.tensor)
		return bad_usage("--tensor cannot be combined with --diff");
	if (diff && !opt.io.stats)
		return bad_usage("--no-stats cannot be combined with --diff");
	if (!diff && opt.tolerance >= 0)
		return bad_usage("--tolerance needs --diff");
	if (diff && argc - optind != 2)
		return bad_usage("--diff compares two files");
	if (opt.json && verify)
		return bad_usage("--json and --verify cannot be combined");
	if (opt.tensor && opt.json)
		return bad_usage("--tensor cannot be combined with --json");
	if (opt.tensor && verify)
		return bad_usage("--tensor cannot be combined with --verify");
	if (opt.rows && opt.tensor == NULL)
		return bad_usage("--rows needs --tensor");
	if (opt.tensor && argc - optind > 1)
		return bad_usage("--tensor reads one file");
	if (opt.tensor)
		run = do_tensor;
	else if (verify)
		run = do_verify;
	else if (opt.json)
		run = do_json;
	else
		run = do_table;

	/* Only the character type: numbers keep their C spelling, which
	 * --json and the dumps depend on. */
	setlocale(LC_CTYPE, "");
	opt.io.utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;

	files = optind < argc ? argv + optind : stdin_only;
	for (int i = 0, n = 0; files[i]; i++) {
		if (strcmp(files[i], "-") != 0)
			continue;
		if (n++)
			return bad_usage("standard input named twice");
		/* as gzip does: nobody types a tar archive, so a bare
		 * "cg-inspect" at a prompt shows the usage, not a hang */
		if (isatty(STDIN_FILENO))
			return bad_usage("standard input is a terminal");
	}
	if (diff) {
		rc = do_diff(files[0], files[1]);
		if (fflush(stdout) != 0 || ferror(stdout)) {
			report("standard output: write error");
			return 2;
		}
		return rc;
	}
	for (int i = 0; files[i]; i++) {
		if (run(files[i]) != 0) {
			fflush(stdout);
			report(cg_errmsg());
			failed = 1;
		}
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		report("standard output: write error");
		return 1;
	}
	return failed;
}
