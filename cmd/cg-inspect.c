/*
 * cg-inspect.c - show what is inside cg files, or check them.
 *
 * One mode per run: a table for people (the default), one JSON object per
 * file (--json), digest verification (--verify), or the values of one
 * tensor as text (--tensor).  Each mode is one function taking a path;
 * comparing two files (--diff A B) will be another.  Every input is read
 * whole and checked by cg_file_read before anything is shown, so a
 * damaged file prints nothing but its one-line error.  With several
 * inputs each failure is reported and the exit status is 1 at the end.
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
	int quiet;
	int rows;
	const char *tensor;
	struct cg_inspect_opts io;
} opt = {.io = {.stats = 1}};

static void
usage(FILE *fp)
{
	fprintf(fp, "usage: " PROG " [-q] [--no-stats] [FILE...]\n"
	            "       " PROG " --json [-q] [--no-stats] [FILE...]\n"
	            "       " PROG " --verify [-q] [FILE...]\n"
	            "       " PROG " --tensor NAME [--rows] [FILE]\n");
}

static void
help(void)
{
	usage(stdout);
	fputs("\n"
	      "Show the manifest and per-tensor statistics of cg files; no\n"
	      "FILE, or -, reads standard input.\n"
	      "\n"
	      "  -j, --json         one JSON object per file, one per line\n"
	      "      --no-stats     skip min/max/mean/std/histogram (fast)\n"
	      "  -q, --quiet        --verify: print nothing for good files\n"
	      "      --rows         --tensor: one line per row of the last\n"
	      "                     dimension instead of one value per line\n"
	      "  -t, --tensor NAME  print the values of tensor NAME as text\n"
	      "      --verify       check every digest; print FILE: OK\n"
	      "  -h, --help         show this help\n"
	      "  -V, --version      show the version\n"
	      "\n"
	      "Exit status: 0 success, 1 a file could not be read or failed\n"
	      "verification, 2 usage error.\n",
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

/* ----------------------------------------------------------------- main */

enum { OPT_NO_STATS = 256, OPT_ROWS, OPT_VERIFY };

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"json", no_argument, NULL, 'j'},
	    {"no-stats", no_argument, NULL, OPT_NO_STATS},
	    {"quiet", no_argument, NULL, 'q'},
	    {"rows", no_argument, NULL, OPT_ROWS},
	    {"tensor", required_argument, NULL, 't'},
	    {"verify", no_argument, NULL, OPT_VERIFY},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	static char *stdin_only[] = {"-", NULL};
	int (*run)(const char *);
	int c, json = 0, verify = 0, failed = 0;
	char **files;

	/* getopt_long names the program by argv[0] in its messages, which
	 * must start with the name alone, whatever path ran it */
	argv[0] = PROG;
	while ((c = getopt_long(argc, argv, "hjqt:V", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			help();
			return fflush(stdout) == 0 ? 0 : 1;
		case 'j':
			json = 1;
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
	if (json && verify) {
		fputs(PROG ": --json and --verify cannot be combined\n",
		      stderr);
		usage(stderr);
		return 2;
	}
	if (opt.tensor && (json || verify)) {
		fprintf(stderr, PROG ": --tensor cannot be combined with %s\n",
		        json ? "--json" : "--verify");
		usage(stderr);
		return 2;
	}
	if (opt.rows && opt.tensor == NULL) {
		fputs(PROG ": --rows needs --tensor\n", stderr);
		usage(stderr);
		return 2;
	}
	if (opt.tensor && argc - optind > 1) {
		fputs(PROG ": --tensor reads one file\n", stderr);
		usage(stderr);
		return 2;
	}
	if (opt.tensor)
		run = do_tensor;
	else if (verify)
		run = do_verify;
	else if (json)
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
		if (n++) {
			fputs(PROG ": standard input named twice\n", stderr);
			usage(stderr);
			return 2;
		}
		/* as gzip does: nobody types a tar archive, so a bare
		 * "cg-inspect" at a prompt shows the usage, not a hang */
		if (isatty(STDIN_FILENO)) {
			fputs(PROG ": standard input is a terminal\n", stderr);
			usage(stderr);
			return 2;
		}
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
