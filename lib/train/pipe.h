/*
 * train/pipe.h - a pipeline stage's links: the next stage run as a
 * child command, and the frames the stages say to each other.
 *
 * Stage i reads what comes from stage i - 1 on its standard input and
 * answers on its standard output; it runs stage i + 1 itself, as rsync
 * runs its remote half (`sh -c CMD`, where CMD may be `ssh HOST
 * cg-train-step ...`), or talks to it over a pair of FIFOs.  What is
 * said, in order (frames of file/frame.h):
 *
 *   down  "head" u64 [10]: the receiver's index, the count of stages,
 *         steps K, batch B, micro-batches M, the model's step, 1 where
 *         "x" and "dx" cross as bf16 (else 0: f32), 1 for 1F1B (else
 *         0: GPipe), what the call emits (enum cg_emit: 0 grad, 1
 *         delta, 2 model), the layer the sender's stage ends at (the
 *         receiver's first)
 *   down  a grad or delta call: "worker" u64 [5], the shard's identity
 *         and the seed of the update's worker (train.h)
 *   per step:
 *   down  a grad or delta call: "tokens" u64 [1], the bits of the
 *         step's scored tokens (a double), what the step weighs
 *   then in the schedule's order (each side's frames in the order of
 *   the micro-batches):
 *   down  per micro-batch: "x" f32 [b, T, C], "targets" u32 [b, T],
 *         "weight" f32 [b, T]
 *   up    per micro-batch, in the same order: "dx" f32 [b, T, C],
 *         "loss" u64 [1] (the bits of the micro-batch's loss, a double)
 *   down  "end" u64 [2]: the bits of the call's mean loss, examples
 *   up    "ready" u64 [1]: every stage from here down has its output
 *         written under a temporary name
 *   down  "commit" u64 [1]: rename it into place
 *
 * A stage that fails says nothing more and exits; its neighbours then
 * meet the end of a stream or a broken pipe, and fail before "commit":
 * no stage's output is renamed unless every stage's is written.
 */
#ifndef CG_PIPE_H
#define CG_PIPE_H

#include <stdint.h>
#include <sys/types.h>

#include "core/dtype.h"

/* The links of one stage; a side that is absent is -1. */
struct cg_pipe {
	int up_in, up_out;     /* from and to the previous stage */
	int down_in, down_out; /* from and to the next stage */
	pid_t child;           /* the next stage's command, or 0 */
};

#define CG_PIPE_NONE                                                           \
	{                                                                      \
		-1, -1, -1, -1, 0                                              \
	}

/*
 * Run cmd (sh -c) as the next stage, its standard input and output
 * piped to p->down_out and p->down_in.  Returns 0, or -1 with a message.
 */
int cg_pipe_spawn(struct cg_pipe *p, const char *cmd);

/* Close the descriptors and wait for the child.  Returns 0, or -1 with
 * a message when the child failed ("the next stage: exit 1"). */
int cg_pipe_close(struct cg_pipe *p);

/*
 * Where fd is a pipe (or FIFO) whose buffer is smaller than bytes,
 * make it that large, or as large as the kernel allows (Linux's
 * F_SETPIPE_SZ; at most 16 MiB): a frame is then written whole without
 * waiting for the reader, and read in one go.  Nothing where fd is no
 * pipe or the system has no such call.
 */
void cg_pipe_widen(int fd, size_t bytes);

/* The u64 words v [n] as frame name to fd; 0 or -1. */
int cg_pipe_say(int fd, const char *name, const uint64_t *v, int n);
/* Frame name of n u64 words from fd into v; 0 or -1 with a message. */
int cg_pipe_hear(int fd, const char *name, uint64_t *v, int n);

/*
 * A sender: frames written to fd by a thread of its own, in the order
 * they were put, so that a stage never waits for its neighbour to read
 * (with 1F1B both neighbours send before they read: written in line,
 * frames larger than a pipe's buffer would wait on each other for
 * ever).  cg_sender_put copies the frame (cg_frame_write's arguments)
 * and returns at once: 0, or -1 with the message of an earlier write
 * that failed.  cg_sender_stop waits until every frame is written and
 * ends the thread: 0, or -1 with the message of a write that failed;
 * stop(NULL) is 0.  cg_sender_start returns NULL with a message.
 */
struct cg_sender;
struct cg_sender *cg_sender_start(int fd);
int cg_sender_put(struct cg_sender *s, const char *name, enum cg_dtype dt,
                  int ndim, const uint64_t *shape, const void *data);
int cg_sender_stop(struct cg_sender *s);

/*
 * The end of a call, for stage index of count (pipe.h's last three
 * frames).  cg_pipe_end: stage 0 says v [2] (the bits of the mean loss,
 * the examples), the others hear it into v and pass it on.
 * cg_pipe_ready, once this stage's output is written under its
 * temporary name: hear that the stages below are ready, say so above.
 * cg_pipe_commit, before this stage renames its output: stage 0 says
 * it, the others hear it and pass it on.  Each returns 0, or -1 with a
 * message (a stage below or above failed).
 */
int cg_pipe_end(const struct cg_pipe *p, int index, int count, uint64_t v[2]);
int cg_pipe_ready(const struct cg_pipe *p, int index, int count);
int cg_pipe_commit(const struct cg_pipe *p, int index, int count);

#endif
