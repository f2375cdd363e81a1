/*
 * probe.c - a host's training speed, in examples a second, for one model
 * on one shard.
 *
 * The steps are real ones (lib/train.c's, delta mode, the default inner
 * optimizer) through cg_train_run's deadline, so what is timed is what
 * a worker's call spends a step on, data loading included; reading the
 * files and planning memory are not timed.  Wall time, not CPU time: a
 * host whose CPU is shared or capped (a cgroup's cpu.max, a busy
 * neighbour) trains slower, and that is what a weight must say.
 */
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "optim.h"
#include "probe.h"
#include "progress.h"
#include "train.h"

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int
cg_probe_run(struct cg_model *m, const struct cg_shard *s,
             const struct cg_probe_opts *o, struct cg_probe_result *r)
{
	struct cg_train_opts t = {0};
	struct cg_train_result res;
	struct cg_memplan plan;
	double sorted[CG_PROBE_MAX_WINDOWS], win, t0, t1;
	float *out = NULL;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (o->windows < 1 || o->windows > CG_PROBE_MAX_WINDOWS ||
	    !(o->seconds > 0) || !(o->warmup >= 0) || o->batch < 1)
		return cg_seterr("probe: bad options");
	t.steps = 1 << 30;
	t.batch = o->batch;
	t.seed = o->seed;
	t.emit = CG_EMIT_DELTA;
	t.order = CG_ORDER_SHUFFLE;
	cg_optim_defaults(&t.opt, CG_OPT_ADAM);
	if (cg_train_plan(m, &t, NULL, 0, 0, 0, &plan) != 0)
		return -1;
	if ((out = cg_alloc(m->nparams * sizeof(float))) == NULL)
		return -1;
	/* the warm-up: at least one step, then until its deadline */
	t.deadline = cg_now() + o->warmup;
	if (cg_train_run(m, s, &t, NULL, out, &res) != 0)
		goto out;
	win = o->seconds / o->windows;
	for (int i = 0; i < o->windows; i++) {
		t0 = cg_now();
		t.deadline = t0 + win;
		/* each window sees other batches: its seed */
		t.seed = o->seed + 1 + (uint64_t)i;
		if (cg_train_run(m, s, &t, NULL, out, &res) != 0)
			goto out;
		t1 = cg_now();
		r->window[i] = t1 > t0 ? (double)res.samples / (t1 - t0) : 0;
		r->samples += res.samples;
		r->secs += t1 - t0;
		r->steps += res.steps;
	}
	r->nwindows = o->windows;
	memcpy(sorted, r->window, sizeof(double) * (size_t)o->windows);
	qsort(sorted, (size_t)o->windows, sizeof(double), cmp_double);
	r->lo = sorted[0];
	r->hi = sorted[o->windows - 1];
	r->rate =
	    o->windows % 2
	        ? sorted[o->windows / 2]
	        : (sorted[o->windows / 2 - 1] + sorted[o->windows / 2]) / 2;
	rc = 0;
out:
	free(out);
	return rc;
}
