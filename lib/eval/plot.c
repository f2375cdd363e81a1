/*
 * eval/plot.c - a run's logs drawn by gnuplot, or as sparklines.
 *
 * gnuplot rather than pixels of our own: axes, ticks, legends and type
 * are its trade, and its start (bench/RESULTS.md has the figure) is small
 * beside any run worth plotting.  The script carries the figures inline
 * as datablocks, one per log, a "?" where a line has no such figure;
 * every panel plots from them with its own columns.
 */
#include "eval/plot.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/atomic.h"
#include "core/error.h"

/* -------------------------------------------------------- the script */

/* The datablock's columns, from 1. */
enum {
	COL_STEP = 1,
	COL_EXAMPLES,
	COL_SECONDS,
	COL_LOSS,
	COL_METRIC,
	COL_BYTES,
	COL_BYTES_DOWN,
	COL_STALE_MEAN,
	COL_STALE_MAX,
	COL_ROUND, /* the line's number among the file's with bytes */
	COL_REDUCE /* the same among those with a staleness */
};

#define OFF(f) offsetof(struct cg_runlog_point, f)

static const struct {
	int bit, col;
	size_t off;
	const char *label;
} xaxes[] = {
    {CG_PLOT_STEP, COL_STEP, OFF(step), "step"},
    {CG_PLOT_EXAMPLES, COL_EXAMPLES, OFF(examples), "examples"},
    {CG_PLOT_SECONDS, COL_SECONDS, OFF(seconds),
     "seconds (the log's lines summed)"},
};

struct panel {
	const char *title, *xlabel;
	int x, y, y2;        /* columns; y2: a second dashed line, or 0 */
	size_t xoff, yoff;   /* of x and y in struct cg_runlog_point */
	const char *t1, *t2; /* the legends' suffixes of y and y2 */
};

static void
put_num(FILE *fp, double v)
{
	if (isnan(v))
		fputs(" ?", fp);
	else
		fprintf(fp, " %.9g", v);
}

/* s on fp, control bytes (a file's name may hold any) as '?'. */
static void
put_clean(FILE *fp, const char *s)
{
	for (; *s; s++)
		putc((unsigned char)*s < ' ' || *s == 0x7f ? '?' : *s, fp);
}

/* s as a gnuplot string in double quotes, control bytes as '?'. */
static void
put_str(FILE *fp, const char *s)
{
	putc('"', fp);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(fp, "\\%c", c);
		else
			putc(c < ' ' || c == 0x7f ? '?' : c, fp);
	}
	putc('"', fp);
}

static void
put_block(FILE *fp, const struct cg_runlog *lg, int i)
{
	long round = 0, reduce = 0;

	fprintf(fp, "$s%d << EOD\n", i);
	for (size_t k = 0; k < lg->n; k++) {
		const struct cg_runlog_point *p = &lg->p[k];
		put_num(fp, p->step);
		put_num(fp, p->examples);
		put_num(fp, p->seconds);
		put_num(fp, p->loss);
		put_num(fp, p->metric);
		put_num(fp, p->bytes);
		put_num(fp, p->bytes_down);
		put_num(fp, p->stale_mean);
		put_num(fp, p->stale_max);
		put_num(fp, isnan(p->bytes) ? NAN : (double)++round);
		put_num(fp, isnan(p->stale_mean) ? NAN : (double)++reduce);
		putc('\n', fp);
	}
	fputs("EOD\n", fp);
}

/* One panel at (col, row) of a cols x rows grid. */
static void
put_panel(FILE *fp, const struct panel *pn, const struct cg_runlog *logs, int n,
          int col, int row, int cols, int rows)
{
	const char *sep = "plot ";

	fprintf(fp, "set origin %.6f,%.6f\nset size %.6f,%.6f\n",
	        (double)col / cols, 1.0 - (double)(row + 1) / rows, 1.0 / cols,
	        1.0 / rows);
	fputs("set title ", fp);
	put_str(fp, pn->title);
	fputs("\nset xlabel ", fp);
	put_str(fp, pn->xlabel);
	fputc('\n', fp);
	for (int i = 0; i < n; i++) {
		char t[300];
		size_t k = cg_runlog_count2(&logs[i], pn->xoff, pn->yoff);
		if (k == 0)
			continue;
		/* a point at each line, where they do not crowd */
		fprintf(fp, "%s$s%d using %d:%d with %s lc %d dt 1 title ", sep,
		        i, pn->x, pn->y,
		        k <= 100 ? "linespoints pt 7 ps 0.4" : "lines", i + 1);
		snprintf(t, sizeof t, "%s%s", logs[i].name, pn->t1);
		put_str(fp, t);
		if (pn->y2) {
			fprintf(fp,
			        ", $s%d using %d:%d with lines lc %d dt 2 "
			        "title ",
			        i, pn->x, pn->y2, i + 1);
			snprintf(t, sizeof t, "%s%s", logs[i].name, pn->t2);
			put_str(fp, t);
		}
		sep = ", \\\n     ";
	}
	fputc('\n', fp);
}

/* Whether some log of logs [n] has a point with figures at xoff and
 * yoff. */
static int
any(const struct cg_runlog *logs, int n, size_t xoff, size_t yoff)
{
	for (int i = 0; i < n; i++)
		if (cg_runlog_count2(&logs[i], xoff, yoff) > 0)
			return 1;
	return 0;
}

int
cg_plot_script(FILE *fp, const struct cg_runlog *logs, int n,
               const struct cg_plot_opts *o)
{
	struct panel pn[16];
	int np = 0, rows = 0, cols = 0, at[16][2];
	int has_bytes = any(logs, n, OFF(bytes), OFF(bytes));
	int has_stale = any(logs, n, OFF(stale_mean), OFF(stale_mean));
	char mtitle[CG_RUNLOG_NAME_MAX + 16];
	const char *metric = "held-out";

	for (int i = 0; i < n; i++)
		if (logs[i].metric[0]) {
			metric = logs[i].metric;
			break;
		}
	snprintf(mtitle, sizeof mtitle, "held-out %s", metric);
	/* a column for each x asked for, where it has a panel: the loss
	 * above, the held-out metric below */
	for (size_t k = 0; k < sizeof xaxes / sizeof xaxes[0]; k++) {
		int row = 0, x = xaxes[k].col;
		size_t xo = xaxes[k].off;
		const char *xl = xaxes[k].label;
		if (!(o->xs & xaxes[k].bit))
			continue;
		if (any(logs, n, xo, OFF(loss))) {
			pn[np] = (struct panel){"training loss", xl, x,
			                        COL_LOSS,        0,  xo,
			                        OFF(loss),       "", ""};
			at[np][0] = cols, at[np++][1] = row++;
		}
		if (any(logs, n, xo, OFF(metric))) {
			pn[np] = (struct panel){mtitle,      xl, x,
			                        COL_METRIC,  0,  xo,
			                        OFF(metric), "", ""};
			at[np][0] = cols, at[np++][1] = row++;
		}
		if (row > 0)
			cols++;
		rows = row > rows ? row : rows;
	}
	/* then a row of the bytes and the staleness */
	if (has_bytes || has_stale) {
		int c = 0;
		if (has_bytes) {
			pn[np] = (struct panel){"bytes sent per round",
			                        "round",
			                        COL_ROUND,
			                        COL_BYTES,
			                        COL_BYTES_DOWN,
			                        OFF(bytes),
			                        OFF(bytes),
			                        " up",
			                        " down"};
			at[np][0] = c++, at[np++][1] = rows;
		}
		if (has_stale) {
			pn[np] =
			    (struct panel){"staleness of the inputs (steps)",
			                   "reduction",
			                   COL_REDUCE,
			                   COL_STALE_MEAN,
			                   COL_STALE_MAX,
			                   OFF(stale_mean),
			                   OFF(stale_mean),
			                   " mean",
			                   " max"};
			at[np][0] = c++, at[np++][1] = rows;
		}
		rows++;
		cols = cols > c ? cols : c;
	}
	if (np == 0)
		return cg_seterr("nothing to plot: no line of a log has a "
		                 "loss, metric, bytes or staleness");
	fprintf(fp,
	        "set terminal pngcairo size %d,%d noenhanced font "
	        "\"sans,9\"\n",
	        o->width > 0 ? o->width : 480 * cols,
	        o->height > 0 ? o->height : 320 * rows);
	fputs("set datafile missing \"?\"\nset key top right font \",8\"\n"
	      "set grid\nset format y \"%g\"\nset format x \"%g\"\n"
	      "set offsets graph 0.02, graph 0.02, graph 0.05, graph 0.05\n",
	      fp);
	for (int i = 0; i < n; i++)
		put_block(fp, &logs[i], i);
	fputs("set multiplot", fp);
	if (o->title) {
		fputs(" title ", fp);
		put_str(fp, o->title);
	}
	fputc('\n', fp);
	for (int k = 0; k < np; k++)
		put_panel(fp, &pn[k], logs, n, at[k][0], at[k][1], cols, rows);
	fputs("unset multiplot\n", fp);
	if (fflush(fp) != 0 || ferror(fp))
		return cg_seterr("gnuplot: write error: %s", strerror(errno));
	return 0;
}

/* ------------------------------------------------------------- gnuplot */

/* The first line of the file fp, read from its start, into buf. */
static void
first_line(FILE *fp, char *buf, size_t cap)
{
	buf[0] = '\0';
	rewind(fp);
	while (fgets(buf, (int)cap, fp)) {
		buf[strcspn(buf, "\n")] = '\0';
		if (buf[strspn(buf, " \t^")] != '\0')
			return;
	}
	buf[0] = '\0';
}

int
cg_plot_png(const char *path, const struct cg_runlog *logs, int n,
            const struct cg_plot_opts *o)
{
	const char *prog = getenv("CG_GNUPLOT");
	struct cg_out out = {0};
	FILE *err = NULL, *to = NULL;
	int fds[2] = {-1, -1}, rc = -1, st, wrote;
	pid_t pid = -1;
	char msg[512];
	void (*old)(int);

	if (prog == NULL || *prog == '\0')
		prog = "gnuplot";
	if (cg_out_open(&out, path) != 0)
		return -1;
	if ((err = tmpfile()) == NULL || pipe(fds) != 0) {
		cg_seterr("cannot start gnuplot: %s", strerror(errno));
		goto out;
	}
	fflush(NULL);
	if ((pid = fork()) < 0) {
		cg_seterr("cannot start gnuplot: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		/* gnuplot's stdin the script, stdout the PNG, stderr err */
		if (dup2(fds[0], 0) < 0 || dup2(out.fd, 1) < 0 ||
		    dup2(fileno(err), 2) < 0)
			_exit(126);
		close(fds[0]), close(fds[1]);
		execlp(prog, prog, (char *)NULL);
		fprintf(stderr, "%s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	close(fds[0]);
	fds[0] = -1;
	old = signal(SIGPIPE, SIG_IGN); /* a gnuplot that died early */
	if ((to = fdopen(fds[1], "w")) == NULL) {
		signal(SIGPIPE, old);
		cg_seterr("out of memory");
		goto out;
	}
	fds[1] = -1;
	wrote = cg_plot_script(to, logs, n, o);
	if (fclose(to) != 0 && wrote == 0)
		wrote = cg_seterr("gnuplot: write error: %s", strerror(errno));
	to = NULL;
	signal(SIGPIPE, old);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			cg_seterr("gnuplot: %s", strerror(errno));
			goto out;
		}
	pid = -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
		cg_seterr("cannot run %s (install gnuplot-nox, or name one "
		          "in CG_GNUPLOT)",
		          prog);
		goto out;
	}
	/* gnuplot's failure first: it is why a write to it failed */
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		first_line(err, msg, sizeof msg);
		cg_seterr("%s failed: %s", prog, msg[0] ? msg : "no message");
		goto out;
	}
	if (wrote != 0)
		goto out; /* "nothing to plot": gnuplot read nothing */
	if (!out.direct && strcmp(path, "-") != 0) {
		struct stat sb;
		unsigned char sig[8];
		if (fstat(out.fd, &sb) != 0 || sb.st_size < 8 ||
		    pread(out.fd, sig, 8, 0) != 8 ||
		    memcmp(sig, "\x89PNG\r\n\x1a\n", 8) != 0) {
			first_line(err, msg, sizeof msg);
			cg_seterr("%s wrote no PNG%s%s", prog,
			          msg[0] ? ": " : "", msg);
			goto out;
		}
	}
	rc = cg_out_commit(&out);
out:
	if (to)
		fclose(to);
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	if (err)
		fclose(err);
	if (rc != 0)
		cg_out_abort(&out);
	return rc;
}

/* ---------------------------------------------------------- the text */

/* The figures at off of lg's points, in order, into y [*n] (malloc'd). */
static double *
figures(const struct cg_runlog *lg, size_t off, size_t *n)
{
	double *y = malloc((lg->n ? lg->n : 1) * sizeof *y);

	*n = 0;
	for (size_t i = 0; y && i < lg->n; i++) {
		double v = *(const double *)((const char *)&lg->p[i] + off);
		if (!isnan(v))
			y[(*n)++] = v;
	}
	return y;
}

static int
text_line(FILE *fp, const struct cg_runlog *lg, const char *what, size_t off,
          int width)
{
	static const char *const bars[] = {"\u2581", "\u2582", "\u2583",
	                                   "\u2584", "\u2585", "\u2586",
	                                   "\u2587", "\u2588"};
	size_t n, imin = 0, nmin = 0;
	double *y = figures(lg, off, &n), lo, hi, step = NAN;
	int w;

	if (y == NULL)
		return -1;
	if (n == 0) {
		free(y);
		return 0;
	}
	lo = hi = y[0];
	for (size_t i = 0; i < n; i++) {
		if (y[i] < y[imin])
			imin = i;
		lo = y[i] < lo ? y[i] : lo;
		hi = y[i] > hi ? y[i] : hi;
	}
	for (size_t i = 0; i < lg->n; i++) {
		double v = *(const double *)((const char *)&lg->p[i] + off);
		if (!isnan(v) && nmin++ == imin)
			step = lg->p[i].step;
	}
	w = n < (size_t)width ? (int)n : width;
	put_clean(fp, lg->name);
	fprintf(fp, ": %s ", what);
	for (int b = 0; b < w; b++) {
		size_t i0 = n * (size_t)b / (size_t)w;
		size_t i1 = n * (size_t)(b + 1) / (size_t)w;
		/* long double: sums and spans of finite doubles stay
		 * finite */
		long double sum = 0, f = 0;
		for (size_t i = i0; i < i1; i++)
			sum += y[i];
		sum /= (long double)(i1 - i0);
		if (hi > lo)
			f = (sum - lo) / ((long double)hi - lo);
		f = f > 0 ? (f < 1 ? f : 1) : 0;
		fputs(bars[(int)(f * 7 + 0.5L)], fp);
	}
	fprintf(fp, " first %.6g last %.6g min %.6g", y[0], y[n - 1], y[imin]);
	if (!isnan(step))
		fprintf(fp, " at step %.15g", step);
	fprintf(fp, " (%zu line%s)\n", n, n == 1 ? "" : "s");
	free(y);
	return ferror(fp) ? -1 : 0;
}

int
cg_plot_text(FILE *fp, const struct cg_runlog *lg, int width)
{
	size_t lo = offsetof(struct cg_runlog_point, loss);
	size_t mo = offsetof(struct cg_runlog_point, metric);
	char what[CG_RUNLOG_NAME_MAX + 16];

	if (cg_runlog_count(lg, lo) == 0 && cg_runlog_count(lg, mo) == 0) {
		put_clean(fp, lg->name);
		fputs(": no loss\n", fp);
		return ferror(fp) ? -1 : 0;
	}
	snprintf(what, sizeof what, "held-out %s", lg->metric);
	if (text_line(fp, lg, "loss", lo, width) != 0 ||
	    text_line(fp, lg, what, mo, width) != 0)
		return cg_seterr("write error");
	return 0;
}
