/*
 * train/plan.h - the split of a model into pipeline stages over hosts of
 * given speed, memory and links that trains a batch fastest.
 *
 * Each host is one stage, in the order of the hosts file (host i runs
 * host i + 1 as its next stage, so a link is between neighbours).  A
 * host's speed is cg-probe's examples/s with a model of the same arch
 * (the one planned, or a smaller one the host can hold), turned into
 * operations a second by that model's count (the arch's stage cost:
 * the matrix products of a forward pass, three times that for a
 * training step).  Under that count a stage that is not the last does
 * each micro-batch's forward pass once and its backward pass (twice a
 * forward pass's work), 3 forward passes' work, where its memory holds
 * the activations of the micro-batches in flight; else (or told to
 * recompute) it runs the forward pass again before the backward pass
 * (train.h), 4.  The last stage's forward pass is its backward pass's
 * first half: 3, and it takes each micro-batch as it comes under either
 * schedule.  The step time is that of the schedule (GPipe or 1F1B, as
 * train.c runs it) played out: each stage's passes in its order, each
 * waiting for its input, each link sending its frames one after
 * another at its rate, a latency after each.  What is not counted:
 * the optimizer's step, the element-wise work, the data's reading, and
 * a host's speed at a micro-batch other than the batch it was probed
 * with.
 *
 * Memory is what a stage's call allocates (cg_train_stage): its
 * parameters, their gradient and two moments (16 bytes a parameter),
 * the arch's workspace for its layers at one micro-batch (with a set of
 * activations for each micro-batch in flight where they are kept), the
 * inputs held (every micro-batch's under GPipe, at most count - index
 * under 1F1B, one on the last stage), the batch's targets and weights,
 * and three micro-batches of activations in flight.  The program and
 * its libraries are not counted.
 *
 * The search: for each micro-batch count (the one given, or each of 1
 * to CG_PLAN_MAX_MICRO that cuts the batch differently), the
 * contiguous ranges whose slowest stage is fastest (ties: the least time
 * in all) among those that fit every host's memory (without kept
 * activations at least; each stage keeps them where they fit); of
 * those, the one whose step plays out fastest.
 */
#ifndef CG_PLAN_H
#define CG_PLAN_H

#include <stdint.h>

#include "model/model.h"
#include "model/stage.h"

#define CG_PLAN_NAME 63
/* the most micro-batches the search tries where none is given: the
 * bubble of N stages is (N - 1) / (M + N - 1) of a step, and each count
 * costs a search */
#define CG_PLAN_MAX_MICRO 64

struct cg_plan_host {
	char name[CG_PLAN_NAME + 1];
	double rate;  /* cg-probe's examples/s */
	uint64_t mem; /* bytes it may use */
	double link;  /* bits/s to the next host; 0 for the last */
	double rtt;   /* seconds there and back to the next host */
};

struct cg_plan_hosts {
	int n;
	struct cg_plan_host h[CG_STAGE_MAX];
};

/*
 * The hosts file path ("-": standard input): a host a line, in the
 * pipeline's order, "NAME RATE MEMORY LINK [RTT]", # to the end of a
 * line a comment.  RATE examples/s (> 0), MEMORY bytes (K, M, G, T:
 * powers of 1024), LINK bits/s to the next host (k, M, G: powers of
 * 1000), "-" on the last host's line and only there, RTT seconds (or
 * with "ms").  0, or -1 with a message naming the line.
 */
int cg_plan_hosts_read(const char *path, struct cg_plan_hosts *hs);

struct cg_plan_opts {
	int batch;       /* examples a step */
	int micro;       /* micro-batches; 0: the fastest */
	int one_f_one_b; /* the schedule: 1F1B, else GPipe */
	enum cg_dtype wire; /* activations on the wire: f32, bf16 or q8_0 */
	int recompute;   /* no stage keeps its activations */
	/* the training operations an example of the model the rates were
	 * probed with (cg_plan_train_flops); 0: the planned model's */
	double probe_flops;
};

struct cg_plan_stage {
	int a, b;        /* layers */
	uint64_t params; /* parameters */
	uint64_t mem;    /* peak bytes */
	int keep;        /* its activations kept, else computed again */
	double busy;     /* seconds of compute a step */
};

struct cg_plan {
	int count, micro, run; /* stages; micro-batches of run rows */
	double step;           /* seconds a step */
	uint64_t down, up;     /* bytes a step over each link, each way */
	struct cg_plan_stage st[CG_STAGE_MAX];
};

/* The operations of a training step of one example of m (3 forward
 * passes, the arch's stage cost), or -1 with a message (an arch without
 * stages). */
double cg_plan_train_flops(const struct cg_model *m);

/*
 * The peak bytes (above) of stage st of m, keeping its activations
 * (keep; the last stage's are never kept) or not, at batch in micro
 * micro-batches under the schedule and wire given, into *bytes: what a
 * stage's call holds it to (cg_train_stage's max_memory).  0, or -1
 * with a message.
 */
int cg_plan_stage_bytes(const struct cg_model *m, const struct cg_stage *st,
                        int batch, int micro, int one_f_one_b,
                        enum cg_dtype wire, int keep, uint64_t *bytes);

/* The bytes n values of activations take on the wire (f32, bf16, or
 * q8_0's 34 bytes a block of 32), fractions of a block counted. */
double cg_plan_wire_bytes(enum cg_dtype wire, double n);

/*
 * The fastest split of m over hs for o (above), into *p.  Returns 0, or
 * -1 with a message (no split fits the hosts' memory, more hosts than
 * layers, an arch that cannot be split).
 */
int cg_plan_find(const struct cg_model *m, const struct cg_plan_hosts *hs,
                 const struct cg_plan_opts *o, struct cg_plan *p);

#endif
