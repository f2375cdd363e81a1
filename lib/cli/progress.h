/*
 * cli/progress.h - one progress line on a terminal, for programs that run
 * long.
 *
 * The line is drawn on the stream given (stderr), only when that stream is a
 * terminal and the program is not quiet, and it never takes more than the
 * terminal's width less one column, so that a redraw ("\r" and the new line)
 * never scrolls: as columns run out the bar goes first, then the elapsed time,
 * the count, the label and the loss.  The width is read again at each redraw,
 * so a resized window is followed.  Times are h:mm:ss.
 *
 *	struct cg_progress pb;
 *
 *	cg_progress_init(&pb, stderr, "cg-eval", quiet);
 *	for (long i = 0; i < n; i++) {
 *		work(i);
 *		cg_progress_update(&pb, i + 1, n, NAN); // NAN: no loss
 *	}
 *	cg_progress_done(&pb); // ends the line; say errors after this
 *
 * A library loop reports through a callback of type cg_progress_fn and
 * never draws itself; cg_progress_cb is that callback for a struct
 * cg_progress passed as its context.
 */
#ifndef CG_PROGRESS_H
#define CG_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

#include "core/clock.h"

/* Called by a library loop after each unit of work: done of total so far
 * and the running mean of the loss over those (NAN: no loss). */
typedef void (*cg_progress_fn)(void *ctx, int done, int total, double loss);

struct cg_progress {
	FILE *fp;
	int on; /* fp is a terminal and the program is not quiet */
	const char *label;
	double t0;    /* start, cg_now() */
	double shown; /* cg_now() of the last redraw */
	int last_pct; /* percentage of the last redraw */
	int drawn;    /* columns the line holds now; 0: nothing drawn */
};

void cg_progress_init(struct cg_progress *p, FILE *fp, const char *label,
                      int quiet);
/* Redraw when the percentage changes, a second has passed, or at the
 * end; loss is shown unless it is NAN. */
void cg_progress_update(struct cg_progress *p, long done, long total,
                        double loss);
/* End the line (a newline) when one was drawn.  A second call does
 * nothing. */
void cg_progress_done(struct cg_progress *p);
/* A cg_progress_fn: ctx is a struct cg_progress. */
void cg_progress_cb(void *ctx, int done, int total, double loss);

/*
 * The progress line for a terminal of width columns, without "\r", in
 * buf (cap bytes, NUL-terminated): at most width - 1 characters (and
 * cap - 1).  elapsed is in seconds; loss NAN is left out.  Returns the
 * line's length.
 */
size_t cg_progress_format(char *buf, size_t cap, int width, const char *label,
                          long done, long total, double elapsed, double loss);

/* secs as h:mm:ss ("0:00:07", "27:46:40"), rounded down to the second;
 * "-:--:--" when secs is negative or not finite.  Returns buf. */
#define CG_HMS_LEN 64
char *cg_hms(char buf[CG_HMS_LEN], double secs);

#endif
