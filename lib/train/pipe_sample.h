/*
 * train/pipe_sample.h - text drawn across a pipeline's stages: the first
 * stage embeds and samples, each later one runs its blocks on the rows
 * the one before sends, the last adds the head and answers the logits.
 *
 * Over the links of train/pipe.h, frames of file/frame.h:
 *
 *   down  "head" u64 [6]: the receiver's index, the count of stages, the
 *         window T, the width C, the logits' length V, the layer the
 *         sender's stage ends at (the receiver's first)
 *   per chunk of rows (the unsplit generator's chunks, so its numbers):
 *   down  "at" u64 [2]: the first row's position p0 (0: a new window),
 *         the rows n
 *   down  "x" f32 [n, C]: the rows out of the stage's last block
 *   up    "logits" f32 [V]: those of the chunk's last row
 *   down  "end" u64 [1]: no more; each stage passes it on and exits
 *
 * Each stage keeps the keys and values of its own blocks only.  A stage
 * that fails says nothing more and exits; its neighbours meet the end of
 * a stream or a broken pipe and fail in turn.
 */
#ifndef CG_PIPE_SAMPLE_H
#define CG_PIPE_SAMPLE_H

#include "model/model.h"
#include "model/stage.h"
#include "train/pipe.h"

struct cg_stage_gen {
	const struct cg_stage_ops *ops;
	struct cg_stage st;
	struct cg_pipe p;
	struct cg_stage_link link;
	void *gen; /* the arch's generator */
	int V;
	float *x;      /* [T, C] rows from the previous stage */
	float *logits; /* [V] */
};

/*
 * Stage st of m (from cg_stage_read) as a generator: run next (sh -c) as
 * the next stage, NULL for the last; a stage past the first hears the
 * head on standard input and answers on standard output.  Says or
 * checks the head.  Returns 0, or -1 with a message; close g either way.
 */
int cg_stage_gen_open(struct cg_stage_gen *g, struct cg_model *m,
                      const struct cg_stage *st, const char *next);

/* A stage past the first: answer the previous stage's chunks until
 * "end" (passed on).  0, or -1 with a message. */
int cg_stage_gen_serve(struct cg_stage_gen *g);

/* The first stage, once its texts are drawn: say "end".  0 or -1. */
int cg_stage_gen_end(struct cg_stage_gen *g);

/* Free g and wait for the next stage: 0, or -1 with a message when it
 * failed.  close of a zeroed g is 0. */
int cg_stage_gen_close(struct cg_stage_gen *g);

#endif
