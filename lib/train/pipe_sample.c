/*
 * train/pipe_sample.c - text drawn across a pipeline's stages.
 *
 * pipe_sample.h says what the stages say.  The arch's generator (struct
 * cg_stage_ops's gen_*) does the numbers; this file carries its rows
 * down and the logits back, and checks what arrives as hostile before
 * the arch sees it: the frame's own checks (file/frame.c), the head
 * against this stage and its model, and rows within the window.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "file/frame.h"
#include "train/pipe_sample.h"

/* The message so far, led by "the next stage" or "the previous stage":
 * -1. */
static int
blame(const char *who)
{
	char was[512];

	snprintf(was, sizeof(was), "%s", cg_errmsg());
	return cg_seterr("%s: %s", who, was);
}

/* struct cg_stage_link's rows: a chunk to the next stage, its logits
 * back. */
static int
send_rows(void *ctx, int p0, const float *x, int n, float *logits)
{
	struct cg_stage_gen *g = ctx;
	uint64_t at[2] = {(uint64_t)p0, (uint64_t)n};
	uint64_t sx[2] = {(uint64_t)n, (uint64_t)g->st.C};
	uint64_t sl[1] = {(uint64_t)g->V};

	if (cg_pipe_say(g->p.down_out, "at", at, 2) != 0 ||
	    cg_frame_write(g->p.down_out, "x", CG_F32, 2, sx, x) != 0 ||
	    cg_frame_expect(g->p.down_in, "logits", CG_F32, 1, sl, logits) != 0)
		return blame("the next stage");
	return 0;
}

/* The head: stage 0 says it, the others hear and check it and pass it
 * on.  0, or -1 with a message. */
static int
head(struct cg_stage_gen *g)
{
	const struct cg_stage *st = &g->st;
	uint64_t h[6] = {(uint64_t)st->index, (uint64_t)st->count,
	                 (uint64_t)st->T, (uint64_t)st->C, (uint64_t)g->V,
	                 (uint64_t)st->b};

	if (st->index > 0) {
		uint64_t in[6];
		if (cg_pipe_hear(g->p.up_in, "head", in, 6) != 0)
			return -1;
		if (in[0] != h[0] || in[1] != h[1])
			return cg_seterr("the previous stage sends to stage "
			                 "%llu of %llu, this is stage %d of %d",
			                 (unsigned long long)in[0] + 1,
			                 (unsigned long long)in[1],
			                 st->index + 1, st->count);
		if (in[2] != h[2] || in[3] != h[3] || in[4] != h[4])
			return cg_seterr(
			    "the previous stage's model has "
			    "window %llu, width %llu, %llu logits; "
			    "this one %d, %d, %d",
			    (unsigned long long)in[2],
			    (unsigned long long)in[3],
			    (unsigned long long)in[4], st->T, st->C, g->V);
		if (in[5] != (uint64_t)st->a)
			return cg_seterr("the previous stage ends at layer %llu, "
			                 "this one starts at %d: stages of "
			                 "different cuts",
			                 (unsigned long long)in[5], st->a);
	}
	h[0]++;
	if (st->index < st->count - 1 &&
	    cg_pipe_say(g->p.down_out, "head", h, 6))
		return -1;
	return 0;
}

int
cg_stage_gen_open(struct cg_stage_gen *g, struct cg_model *m,
                  const struct cg_stage *st, const char *next)
{
	struct cg_pipe none = CG_PIPE_NONE;

	memset(g, 0, sizeof(*g));
	g->p = none;
	g->st = *st;
	g->ops = m->arch->stages;
	if (g->ops == NULL || g->ops->gen_new == NULL)
		return cg_seterr("a %s model is not sampled across stages",
		                 m->arch->name);
	if ((next != NULL) != (st->index < st->count - 1))
		return cg_seterr("stage %d of %d: %s", st->index + 1, st->count,
		                 next ? "the last stage runs no other: no "
		                        "--next"
		                      : "give --next CMD, the next stage");
	g->link.rows = send_rows;
	g->link.ctx = g;
	if ((g->gen = g->ops->gen_new(m, st->a, st->b, next ? &g->link : NULL,
	                              &g->V)) == NULL)
		return -1;
	if ((g->logits = malloc((size_t)g->V * sizeof(float))) == NULL ||
	    (st->index > 0 &&
	     (g->x = malloc((size_t)st->T * st->C * sizeof(float))) == NULL))
		return cg_seterr("out of memory");
	if (st->index > 0)
		g->p.up_in = 0, g->p.up_out = 1;
	if (next != NULL && cg_pipe_spawn(&g->p, next) != 0)
		return -1;
	return head(g);
}

int
cg_stage_gen_serve(struct cg_stage_gen *g)
{
	const uint64_t sl[1] = {(uint64_t)g->V};

	for (;;) {
		struct cg_frame f;
		uint64_t at[2];
		int got = cg_frame_read(g->p.up_in, &f, sizeof(at));

		if (got == 0)
			return cg_seterr("the previous stage: the stream ends "
			                 "without \"end\"");
		if (got < 0)
			return blame("the previous stage");
		if (strcmp(f.name, "end") == 0) {
			cg_frame_clear(&f);
			return cg_stage_gen_end(g);
		}
		if (strcmp(f.name, "at") != 0 || f.dtype != CG_U64 ||
		    f.ndim != 1 || f.shape[0] != 2) {
			cg_seterr("the previous stage: frame \"%s\": not "
			          "\"at\" u64 [2] or \"end\"",
			          f.name);
			cg_frame_clear(&f);
			return -1;
		}
		memcpy(at, f.data, sizeof(at));
		cg_frame_clear(&f);
		/* Bounded before the rows are read into x [T, C]. */
		if (at[1] < 1 || at[1] > (uint64_t)g->st.T ||
		    at[0] > (uint64_t)g->st.T - at[1])
			return cg_seterr("the previous stage: %llu rows at "
			                 "position %llu: not within the window "
			                 "of %d",
			                 (unsigned long long)at[1],
			                 (unsigned long long)at[0], g->st.T);
		uint64_t sx[2] = {at[1], (uint64_t)g->st.C};
		if (cg_frame_expect(g->p.up_in, "x", CG_F32, 2, sx, g->x) != 0)
			return blame("the previous stage");
		if (g->ops->gen_rows(g->gen, (int)at[0], g->x, (int)at[1],
		                     g->logits) != 0 ||
		    cg_frame_write(g->p.up_out, "logits", CG_F32, 1, sl,
		                   g->logits) != 0)
			return -1;
	}
}

int
cg_stage_gen_end(struct cg_stage_gen *g)
{
	uint64_t zero = 0;

	if (g->st.index < g->st.count - 1 &&
	    cg_pipe_say(g->p.down_out, "end", &zero, 1) != 0)
		return -1;
	return 0;
}

int
cg_stage_gen_close(struct cg_stage_gen *g)
{
	int rc;

	if (g->gen != NULL)
		g->ops->gen_free(g->gen);
	free(g->x);
	free(g->logits);
	g->gen = NULL;
	g->x = g->logits = NULL;
	/* stdin and stdout are the caller's: only the child's are closed */
	g->p.up_in = g->p.up_out = -1;
	rc = cg_pipe_close(&g->p);
	return rc;
}
