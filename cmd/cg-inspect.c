/*
 * cg-inspect.c - show what is inside cg files, or check them.
 *
 * One mode per run: a table for people (the default), one JSON object per
 * file (--json), digest verification (--verify), the values of one
 * tensor as text (--tensor), or two files compared tensor by tensor
 * (--diff A B).  Each mode is one function.  Every input, a cg file or a
 * safetensors file, is read whole and checked by cg_read_any before
 * anything is shown, so a damaged file prints nothing but its one-line
 * error.  --verify adds the checks of the file's kind (verify.h), so that
 * "OK" means every reader of that kind takes it.  A safetensors file has
 * no digests, so --verify refuses it.  With
 * several inputs each failure is reported and the exit status is 1 at the end.
 *
 * --diff alone follows diff(1) and cmp(1), so that scripts can ask "did
 * the weights change?": 0 the same, 1 different, 2 trouble (a usage error
 * or a file that cannot be read).
 */
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "cli/cli.h"
#include "eval/inspect.h"
#include "eval/verify.h"
#include "file/format.h"

enum {
	OPT_DIFF = CG_KEY_OWN,
	OPT_NO_STATS,
	OPT_ROWS,
	OPT_TOLERANCE,
	OPT_VERIFY
};

struct args {
	int json;
	int quiet;
	int rows;
	int diff;
	int verify;
	int no_stats;
	const char *tensor;
	double tolerance; /* --diff; < 0: identical bytes only */
	struct cg_inspect_opts io;
	char **files; /* NULL-terminated */
	int nfiles;
	int (*run)(const char *); /* every mode but --diff */
};

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"diff", OPT_DIFF, NULL, "compare files A and B tensor by tensor",
     CG_OPT_FLAG(diff)},
    {"json", 'j', NULL, "one JSON object per file, one per line",
     CG_OPT_FLAG(json)},
    {"no-stats", OPT_NO_STATS, NULL, "skip min/max/mean/std/histogram (fast)",
     CG_OPT_FLAG(no_stats)},
    {"quiet", 'q', NULL,
     "--verify: print nothing for good files;\n--diff: print nothing at all",
     CG_OPT_FLAG(quiet)},
    {"rows", OPT_ROWS, NULL,
     "--tensor: one line per row of the last\ndimension instead of one "
     "value per line",
     CG_OPT_FLAG(rows)},
    {"tensor", 't', "NAME", "print the values of tensor NAME as text",
     CG_OPT_STR(tensor)},
    {"tolerance", OPT_TOLERANCE, "X",
     "--diff: tensors of the same shape whose\nvalues differ by at most X "
     "are equal",
     CG_OPT_F64(tolerance, 0, 1e30)},
    {"verify", OPT_VERIFY, NULL,
     "check every digest and what the readers of\nthe file's kind check; "
     "print FILE: OK",
     CG_OPT_FLAG(verify)},
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-inspect",
    .synopsis = "[-q] [--no-stats] [FILE...]\n"
                "--json [-q] [--no-stats] [FILE...]\n"
                "--verify [-q] [FILE...]\n"
                "--tensor NAME [--rows] [FILE]\n"
                "--diff [-jq] [--tolerance X] A B",
    .about = "Show the manifest and per-tensor statistics of cg files (or\n"
             "safetensors files); no FILE, or -, reads standard input.",
    .opts = opts,
    .epilog = "Exit status: 0 success, 1 a file could not be read or failed\n"
              "verification, 2 usage error.  --diff as diff(1): 0 no tensor\n"
              "differs, 1 some tensor differs or is in one file only, 2\n"
              "trouble.",
};

static struct args opt = {.tolerance = -1};

/* The name cg_read_any uses for path in its messages. */
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
	struct cg_file *f = cg_read_any(path, NULL);
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
	struct cg_file *f = cg_read_any(path, NULL);
	struct cJSON *j;
	int rc = -1;

	if (f == NULL)
		return -1;
	if ((j = cg_inspect_json(display(path), f, &opt.io)) != NULL)
		rc = cg_json_print(stdout, j);
	if (rc != 0)
		cg_errprefix(display(path));
	cg_file_free(f);
	return rc;
}

static int
do_verify(const char *path)
{
	return cg_verify_path(opt.quiet ? NULL : stdout, path, display(path));
}

static int
do_tensor(const char *path)
{
	struct cg_file *f = cg_read_any(path, NULL);
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
	int rc = -1; /* -1: a failure not yet reported */

	/* both are read whatever becomes of the first, so that two bad
	 * files give two lines */
	if ((a = cg_read_any(pa, NULL)) == NULL)
		cg_warn(NULL);
	if ((b = cg_read_any(pb, NULL)) == NULL)
		cg_warn(NULL);
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
			struct cJSON *j =
			    i < d->ntensors
			        ? cg_diff_json_tensor(&d->tensors[i])
			        : cg_diff_json_summary(display(pa), display(pb),
			                               d);
			if (j == NULL || cg_json_print(stdout, j) != 0)
				goto out;
		}
	}
	rc = cg_diff_differs(d);
out:
	if (rc < 0) {
		fflush(stdout);
		cg_warn(NULL);
		rc = 2;
	}
	cg_diff_free(d);
	cg_file_free(b);
	cg_file_free(a);
	return rc;
}

/* ----------------------------------------------------------------- main */

/* The command line into opt; CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv)
{
	static char *stdin_only[] = {"-", NULL};
	int ind, rc;

	if ((rc = cg_getopt_all(&cli, argc, argv, NULL, &opt, &ind)) !=
	    CG_CONTINUE)
		return rc;
	opt.io.stats = !opt.no_stats;
	opt.nfiles = argc - ind;
	opt.files = ind < argc ? argv + ind : stdin_only;
	return CG_CONTINUE;
}

/* Conflicts, each with its own message; then the mode. */
static int
validate(void)
{
	const int diff = opt.diff, verify = opt.verify;

	if (diff && verify)
		return cg_usage("--diff and --verify cannot be combined");
	if (diff && opt.tensor)
		return cg_usage("--tensor cannot be combined with --diff");
	if (diff && opt.no_stats)
		return cg_usage("--no-stats cannot be combined with --diff");
	if (!diff && opt.tolerance >= 0)
		return cg_usage("--tolerance needs --diff");
	if (diff && opt.nfiles != 2)
		return cg_usage("--diff compares two files");
	if (opt.json && verify)
		return cg_usage("--json and --verify cannot be combined");
	if (opt.tensor && opt.json)
		return cg_usage("--tensor cannot be combined with --json");
	if (opt.tensor && verify)
		return cg_usage("--tensor cannot be combined with --verify");
	if (opt.rows && opt.tensor == NULL)
		return cg_usage("--rows needs --tensor");
	if (opt.tensor && opt.nfiles > 1)
		return cg_usage("--tensor reads one file");
	for (int i = 0, n = 0; opt.files[i]; i++) {
		if (strcmp(opt.files[i], "-") != 0)
			continue;
		if (n++)
			return cg_usage("standard input named twice");
		/* as gzip does: nobody types a tar archive, so a bare
		 * "cg-inspect" at a prompt shows the usage, not a hang */
		if (isatty(STDIN_FILENO))
			return cg_usage("standard input is a terminal");
	}
	opt.run = opt.tensor ? do_tensor
	          : verify   ? do_verify
	          : opt.json ? do_json
	                     : do_table;
	return CG_CONTINUE;
}

int
main(int argc, char **argv)
{
	int rc;

	if ((rc = parse(argc, argv)) != CG_CONTINUE ||
	    (rc = validate()) != CG_CONTINUE)
		return rc;
	/* Only the character type: numbers keep their C spelling, which
	 * --json and the dumps depend on. */
	setlocale(LC_CTYPE, "");
	opt.io.utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
	if (opt.diff) {
		rc = do_diff(opt.files[0], opt.files[1]);
		/* trouble writing is trouble: 2, as diff(1) */
		return cg_finish_stdout(CG_EXIT_OK) == CG_EXIT_OK ? rc : 2;
	}
	rc = CG_EXIT_OK;
	for (int i = 0; opt.files[i]; i++) {
		if (opt.run(opt.files[i]) != 0) {
			fflush(stdout);
			cg_warn(NULL);
			rc = CG_EXIT_FAILURE;
		}
	}
	return cg_finish_stdout(rc);
}
