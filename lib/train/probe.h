/*
 * train/probe.h - a host's training speed for one model on one shard: what
 * cg-shard --weights takes to give each host a share of the data in
 * proportion to what it can train.
 */
#ifndef CG_PROBE_H
#define CG_PROBE_H

#include "data/shard.h"
#include "model/model.h"

#define CG_PROBE_MAX_WINDOWS 64

struct cg_probe_opts {
	int batch;	/* examples per step */
	double warmup;	/* seconds of steps not timed, first */
	double seconds; /* seconds of timed steps, in all */
	int windows;	/* the timed seconds cut into this many, 1..64 */
	uint64_t seed;
};

struct cg_probe_result {
	double rate;		/* examples/s: the median of the windows' */
	double lo, hi;		/* the slowest and fastest window's */
	double window[CG_PROBE_MAX_WINDOWS]; /* each window's examples/s */
	int nwindows;
	uint64_t samples; /* examples trained in the timed windows */
	double secs;	  /* the timed windows' wall time */
	double cpu;	  /* the CPU time they used (every thread's) */
	double cap;	  /* cg_probe_cpu_cap(): CPUs, INFINITY if no limit */
	int steps;	  /* steps taken in them */
};

/*
 * The CPUs this process may use in the long run: the least of its
 * cgroups' CFS bandwidth limits (cgroup v2 cpu.max, v1 cfs_quota_us /
 * cfs_period_us, each level up to the mount's root) and the CPUs its
 * affinity allows; INFINITY where none can be read.
 */
double cg_probe_cpu_cap(void);

/*
 * Time real training steps of m on s as a DiLoCo worker takes them
 * (--emit delta: forward, backward and an Adam step, batches of
 * o->batch), on the threads set for the process: o->warmup seconds
 * untimed (caches, the allocator, the CPU's clock), then o->windows
 * windows of o->seconds / o->windows each, every window at least one
 * step.  Each window counts the longer of its wall time and its CPU
 * time over cg_probe_cpu_cap(): a capped host is held to the CPU its
 * cap allows over a round, whatever a few seconds of it got.  The median
 * window is what a host sustains, apart from a moment's stall.  m's weights are left as they were.  Returns 0, or
 * -1 with a message.
 */
int cg_probe_run(struct cg_model *m, const struct cg_shard *s,
		 const struct cg_probe_opts *o, struct cg_probe_result *r);

#endif
