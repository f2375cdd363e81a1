/*
 * train/report.h - what one cg-train-step call did: its --log line and
 * its summary.
 *
 * The figures are the call's (train.h's result and memory plan, the
 * teacher's terms, an encoded update's sizes from its manifest) and the
 * process's peak memory; nothing is measured here but that peak.  The
 * --log line is one JSON object whose keys scripts read; the summary is
 * a few lines for people, which the program prints as its messages.
 */
#ifndef CG_TRAIN_REPORT_H
#define CG_TRAIN_REPORT_H

#include "cg.h"
#include "model/model.h"
#include "train/train.h"

/* One call's figures; the caller owns everything pointed to. */
struct cg_train_report {
	const char *emit; /* "grad", "delta" or "model" */
	const struct cg_model *m;
	const struct cg_train_result *res;
	const struct cg_memplan *plan;
	const struct cg_distill *distill; /* with a teacher, else NULL */
	int steps;                        /* asked for (--steps) */
	double secs;                      /* the training's, in seconds */
	/* An encoded update (--codec, --mask), else NULL: its file, whose
	 * manifest's "codec" holds its spec and sizes; the seconds its
	 * encoding took; the peers it is masked among (0: not masked). */
	const struct cg_file *coded;
	double enc_secs;
	int npeers;
	/* A pipeline stage's call (then plan is NULL), else NULL: its
	 * schedule and timings, and which stage of how many it is. */
	const struct cg_stage_opts *stage;
	int stage_index, stage_count;
};

/*
 * The --log line's object: emit, step, steps, samples, loss, the arch's
 * parts, the teacher's terms, seconds, the memory plan and peak, and an
 * encoded update's codec, update_bytes, dense_bytes and encode_seconds.
 * A pipeline stage's has no parts and no plan, but its stage (from 1),
 * stages, schedule, micro_batches, wire, and its timings: seconds (of
 * its steps), wait_seconds, first_step_seconds and first_wait_seconds,
 * checkpoint (its forward passes run again, no activations kept) and
 * memory_plan (train.h's struct cg_stage_opts).
 * A new object the caller owns, or NULL when out of memory.
 */
struct cJSON *cg_train_log_json(const struct cg_train_report *r);

/* The summary's lines at most, and each line's room. */
#define CG_TRAIN_SUMMARY_LINES 4
#define CG_TRAIN_SUMMARY_LINE 256

/*
 * The summary into lines, one a row: a --time-limit that stopped the
 * call early, examples, loss, speed and memory, the teacher's terms, an
 * encoded update's size against dense f32.  Returns how many.
 */
int cg_train_summary(const struct cg_train_report *r,
                     char lines[][CG_TRAIN_SUMMARY_LINE]);

#endif
