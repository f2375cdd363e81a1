/*
 * eval/plot.h - a run's logs drawn: a PNG of panels by gnuplot, or a
 * line of text a series for a terminal.
 *
 * The PNG is gnuplot's (pngcairo): this writes a gnuplot script, the
 * figures inline, to a gnuplot process whose output is the PNG.  Panels,
 * each only where some log has its figure: the training loss and the
 * held-out metric against each x asked for (step, examples, seconds),
 * the bytes of each update by round, and the staleness of the inputs of
 * each reduction (mean, and largest dashed).  A series is a log file:
 * one line per worker, in the same colour in every panel.
 */
#ifndef CG_PLOT_H
#define CG_PLOT_H

#include <stdio.h>

#include "eval/runlog.h"

enum cg_plot_x { CG_PLOT_STEP = 1, CG_PLOT_EXAMPLES = 2, CG_PLOT_SECONDS = 4 };

struct cg_plot_opts {
	int xs;            /* enum cg_plot_x bits: the columns of panels */
	int width, height; /* pixels of the whole image; 0: by the panels */
	const char *title; /* or NULL */
};

#define CG_PLOT_MAX_PIXELS 20000 /* of a side */

/*
 * Write the gnuplot script of logs [n] to fp: it draws the PNG on
 * gnuplot's standard output.  0, or -1 with a message ("nothing to
 * plot": no log has a figure of a panel; a write error).
 */
int cg_plot_script(FILE *fp, const struct cg_runlog *logs, int n,
                   const struct cg_plot_opts *o);

/*
 * The PNG of logs [n] written to path ("-": standard output, refused on
 * a terminal) by running gnuplot (the program $CG_GNUPLOT names, else
 * "gnuplot"), atomically: a temporary renamed once gnuplot has exited 0
 * and written a PNG.  0, or -1 with a message: gnuplot not found, its
 * first line of error, or cg_plot_script's.
 */
int cg_plot_png(const char *path, const struct cg_runlog *logs, int n,
                const struct cg_plot_opts *o);

/*
 * The text form, a line for each series of lg that has a loss and one
 * for its held-out metric, on fp:
 *   "NAME: loss SPARK first F last L min M at step S (K lines)"
 * SPARK is width block characters (UTF-8, U+2581 to U+2588), the
 * figures in order squeezed to width by means.  0, or -1 on a write
 * error; a log without those figures prints "NAME: no loss".
 */
int cg_plot_text(FILE *fp, const struct cg_runlog *lg, int width);

#endif
