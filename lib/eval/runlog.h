/*
 * eval/runlog.h - the --log JSON lines of a run, read back as series a
 * plot is drawn from.
 *
 * The programs append one JSON object a line (--log FILE); this reads a
 * file of them, hostile: a line that is not a JSON object, or whose
 * figures are not numbers, is an error naming the line.  Lines of a kind
 * it does not know (a later program's, a later field) are passed over.
 * The one exception is the last line when it does not end in a newline
 * and does not parse: a writer cut short (a crash, a full disk) leaves
 * such a line, and the run before it is worth plotting; it is skipped and
 * its number kept for the program to warn about.
 *
 * The kinds of line, by the member that tells them apart:
 *
 *   "emit"         cg-train-step: step, samples, loss, seconds, and with
 *                  --codec update_bytes
 *   "round"        cg-cluster: published (the step), loss, bytes_up,
 *                  bytes_down, seconds
 *   "published"    cg-inbox (no "round"): the step, loss, staleness (an
 *                  array of numbers), seconds
 *   "fold_seconds" cg-reduce: staleness.inputs[].staleness with --model
 *   "examples"     cg-eval --json: step, and the held-out metric
 *
 * Each line becomes a point with its x three ways: the step, the examples
 * (samples) and the seconds summed over the file's lines so far (NAN
 * until a line has them).
 */
#ifndef CG_RUNLOG_H
#define CG_RUNLOG_H

#include <stddef.h>
#include <stdio.h>

enum cg_runlog_kind {
	CG_RUNLOG_TRAIN,
	CG_RUNLOG_ROUND,
	CG_RUNLOG_INBOX,
	CG_RUNLOG_REDUCE,
	CG_RUNLOG_EVAL
};

#define CG_RUNLOG_LINE_MAX (1 << 20) /* bytes of one line */
#define CG_RUNLOG_POINTS_MAX 10000000
#define CG_RUNLOG_NAME_MAX 64 /* of a metric */

/* One line's figures; NAN where the line has none. */
struct cg_runlog_point {
	enum cg_runlog_kind kind;
	long line;         /* its number in the file, from 1 */
	double step;       /* the model's step */
	double examples;   /* samples of the file's lines up to this one */
	double seconds;    /* seconds of the file's lines up to this one */
	double loss;       /* training loss (train, round, inbox) */
	double metric;     /* the held-out metric (eval) */
	double bytes;      /* train: update_bytes; round: bytes_up */
	double bytes_down; /* round */
	double stale_mean, stale_max; /* reduce, inbox: over its inputs */
};

struct cg_runlog {
	char *name; /* for a legend: the file's name, no folder, no .log */
	struct cg_runlog_point *p;
	size_t n, cap;
	/* The held-out metric: the one asked for, or the first figure of
	 * the first eval line that is not step, seed or examples. */
	char metric[CG_RUNLOG_NAME_MAX];
	long partial; /* a cut-short last line skipped: its number, or 0 */
};

/*
 * Read the lines of fp (named path in messages; "-" is "standard input")
 * into lg, zeroed by the caller.  metric: the eval member to plot, or
 * NULL for the first.  0, or -1 with a message "PATH:LINE: ..." (lg
 * then holds what was read, for cg_runlog_free).
 */
int cg_runlog_read(struct cg_runlog *lg, FILE *fp, const char *path,
                   const char *metric);
void cg_runlog_free(struct cg_runlog *lg);

/*
 * Points of lg with a finite figure at off (offsetof a double of struct
 * cg_runlog_point): how many.
 */
size_t cg_runlog_count(const struct cg_runlog *lg, size_t off);
/* Points with a finite figure at both xoff and yoff: how many. */
size_t cg_runlog_count2(const struct cg_runlog *lg, size_t xoff, size_t yoff);

#endif
