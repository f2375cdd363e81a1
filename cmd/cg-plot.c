/*
 * cg-plot - draw a run from its --log lines: a PNG of panels, or a
 * sparkline a log for a terminal.
 *
 * A program of its own rather than a mode of cg-inspect: cg-inspect
 * reads cg files (tar containers), this reads the JSON lines that
 * cg-train-step, cg-reduce, cg-cluster, cg-inbox and cg-eval --json
 * append, several logs at once (one line per worker), and it runs
 * gnuplot.  lib/eval/runlog.c reads the logs, lib/eval/plot.c draws.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "eval/plot.h"

enum { OPT_METRIC = CG_KEY_OWN, OPT_SIZE, OPT_TITLE };

struct args {
	const char *out, *metric, *title;
	int quiet, text, width;
	struct cg_plot_opts p;
	char **files;
	int nfiles;
};

/* -x: a comma list of step, examples, seconds into an int of bits. */
static int
parse_x(const char *arg, void *where)
{
	static const char *const names[] = {"step", "examples", "seconds"};
	int *xs = where;
	const char *s = arg;

	*xs = 0;
	while (*s) {
		size_t n = strcspn(s, ","), k;
		for (k = 0; k < 3; k++)
			if (strlen(names[k]) == n && !strncmp(s, names[k], n))
				break;
		if (k == 3)
			return cg_seterr("--x: '%s' is not a list of step, "
			                 "examples and seconds",
			                 arg);
		*xs |= 1 << k;
		s += n + (s[n] == ',');
	}
	return *xs ? 0 : cg_seterr("--x: empty");
}

/* --size WxH into the struct cg_plot_opts at where. */
static int
parse_size(const char *arg, void *where)
{
	struct cg_plot_opts *p = where;
	char tail;

	if (sscanf(arg, "%dx%d%c", &p->width, &p->height, &tail) != 2 ||
	    p->width < 16 || p->height < 16 || p->width > CG_PLOT_MAX_PIXELS ||
	    p->height > CG_PLOT_MAX_PIXELS)
		return cg_seterr("--size: '%s' is not WxH, each 16 to %d", arg,
		                 CG_PLOT_MAX_PIXELS);
	return 0;
}

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"metric", OPT_METRIC, "NAME",
     "the held-out figure of cg-eval --json lines to plot\n"
     "(default: the first, as nelbo or nll)",
     CG_OPT_STR(metric)},
    {"output", 'o', "FILE", "write the PNG to FILE (- : standard output)",
     CG_OPT_STR(out)},
    {"quiet", 'q', NULL, "no warning of a cut-short last line",
     CG_OPT_FLAG(quiet)},
    {"size", OPT_SIZE, "WxH", "the PNG's pixels (480 a column, 320 a row)",
     CG_OPT_PARSE(p, parse_size)},
    {"text", 't', NULL, "a sparkline of each log's loss on standard output",
     CG_OPT_FLAG(text)},
    {"title", OPT_TITLE, "TEXT", "a title over the panels", CG_OPT_STR(title)},
    {"width", 'w', "N", "characters of a sparkline (40)",
     CG_OPT_INT(width, 1, 1000)},
    {"x", 'x', "LIST",
     "the x axes, a comma list of step, examples and\n"
     "seconds (step,examples,seconds)",
     CG_OPT_PARSE(p.xs, parse_x)},
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-plot",
    .synopsis = "[-x LIST] [--size WxH] [--metric NAME] -o FILE.png "
                "[LOG...]\n"
                "-t [-w N] [LOG...]",
    .about =
        "Draw a run from the JSON lines its programs append with --log\n"
        "(cg-train-step, cg-reduce, cg-cluster, cg-inbox) and those of\n"
        "cg-eval --json: the training loss and the held-out metric against\n"
        "step, examples and seconds, the bytes of each update, the\n"
        "staleness of each reduction; a line per LOG (one per worker).\n"
        "With -t, or with no -o on a terminal, a sparkline of each LOG's\n"
        "loss instead.  No LOG: standard input.  gnuplot draws the PNG.",
    .opts = opts,
    .epilog = "Exit status: 0 success, 1 failure, 2 usage error.",
};

static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	if ((rc = cg_getopt_all(&cli, argc, argv, NULL, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	a->files = argv + ind;
	a->nfiles = argc - ind;
	if (a->text && a->out)
		return cg_usage("-t writes text to standard output: no -o");
	if (!a->text && a->out == NULL && isatty(STDOUT_FILENO))
		a->text = 1;
	a->p.title = a->title;
	return CG_CONTINUE;
}

/* Every log into logs; 0, or -1 said. */
static int
read_all(const struct args *a, struct cg_runlog *logs, int n)
{
	for (int i = 0; i < n; i++) {
		const char *path = a->nfiles ? a->files[i] : "-";
		FILE *fp = strcmp(path, "-") ? fopen(path, "r") : stdin;
		int rc;
		if (fp == NULL)
			return cg_failx("%s: %s", path, strerror(errno));
		rc = cg_runlog_read(&logs[i], fp, path, a->metric);
		if (fp != stdin)
			fclose(fp);
		if (rc != 0)
			return cg_fail(NULL);
		if (logs[i].partial && !a->quiet)
			cg_warnx("%s:%ld: a partial last line (the writer cut "
			         "short?): skipped",
			         path, logs[i].partial);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct args a = {.width = 40,
	                 .p.xs =
	                     CG_PLOT_STEP | CG_PLOT_EXAMPLES | CG_PLOT_SECONDS};
	struct cg_runlog logs[256] = {{0}};
	int rc, n;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE)
		return rc;
	n = a.nfiles ? a.nfiles : 1;
	if (n > 256)
		return cg_usage("at most 256 logs");
	rc = read_all(&a, logs, n) != 0 ? CG_EXIT_FAILURE : CG_EXIT_OK;
	for (int i = 0; rc == CG_EXIT_OK && a.text && i < n; i++)
		if (cg_plot_text(stdout, &logs[i], a.width) != 0)
			rc = cg_fail("standard output");
	if (rc == CG_EXIT_OK && !a.text &&
	    cg_plot_png(a.out ? a.out : "-", logs, n, &a.p) != 0)
		rc = cg_fail(NULL);
	for (int i = 0; i < n; i++)
		cg_runlog_free(&logs[i]);
	return cg_finish_stdout(rc);
}
