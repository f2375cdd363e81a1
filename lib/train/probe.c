/*
 * train/probe.c - a host's training speed, in examples a second, for one model
 * on one shard.
 *
 * The steps are real ones (lib/train/train.c's, delta mode, the default inner
 * optimizer) through cg_train_run's deadline, so what is timed is what
 * a worker's call spends a step on, data loading included; reading the
 * files and planning memory are not timed.  Wall time, not CPU time: a
 * host whose CPU is shared or capped (a cgroup's cpu.max, a busy
 * neighbour) trains slower, and that is what a weight must say.
 *
 * A cap is a budget of CPU time per period (CFS bandwidth: cgroup v2's
 * cpu.max, v1's cpu.cfs_quota_us over cpu.cfs_period_us), and a few
 * seconds can see more of it than a round will: runtime handed to each
 * CPU in slices and left there, a period's quota spent across a
 * window's edges.  A round lasts long enough that only the budget
 * counts.  So each window is charged the longer of its wall time and
 * its CPU time over the cap: a host never weighs more than the CPU it
 * is allowed, at the speed a CPU second of its has shown.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cg.h"
#include "core/clock.h"
#include "nn/optim.h"
#include "train/probe.h"
#include "train/train.h"

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ------------------------------------------------------- the CPU cap */

/* The number in the file dir/name into *v; -1 where there is none. */
static int
read_num(const char *dir, const char *name, double *v, int *unlimited)
{
	char path[4200], buf[64];
	FILE *fp;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "r")) == NULL)
		return -1;
	ok = fgets(buf, sizeof(buf), fp) != NULL;
	fclose(fp);
	if (!ok)
		return -1;
	*unlimited = strncmp(buf, "max", 3) == 0;
	return *unlimited || sscanf(buf, "%lf", v) == 1 ? 0 : -1;
}

/* The CPUs the bandwidth limits of cgroup directory dir and each of its
 * parents down to top allow: the least of their quota / period. */
static double
dir_cap(char *dir, size_t top, int v2)
{
	double cap = INFINITY;

	for (;;) {
		double q, p = 100000;
		int unl = 0, unl2 = 0;
		if (v2) {
			char path[4200], buf[64];
			FILE *fp;
			snprintf(path, sizeof(path), "%s/cpu.max", dir);
			if ((fp = fopen(path, "r")) != NULL) {
				if (fgets(buf, sizeof(buf), fp) &&
				    strncmp(buf, "max", 3) != 0 &&
				    sscanf(buf, "%lf %lf", &q, &p) == 2 &&
				    q > 0 && p > 0 && q / p < cap)
					cap = q / p;
				fclose(fp);
			}
		} else if (read_num(dir, "cpu.cfs_quota_us", &q, &unl) == 0 &&
		           read_num(dir, "cpu.cfs_period_us", &p, &unl2) == 0 &&
		           !unl && q > 0 && p > 0 && q / p < cap)
			cap = q / p;
		char *slash = strrchr(dir, '/');
		if (slash == NULL || (size_t)(slash - dir) < top)
			break;
		*slash = '\0';
	}
	return cap;
}

/*
 * The CPUs this process may use in the long run: the least of the CFS
 * bandwidth limits of its cgroups (v2 and v1's cpu controller, every
 * level up to the mount's root) and the CPUs its affinity allows.  Its
 * cgroups are found through /proc/self/cgroup and the mounts of
 * /proc/self/mountinfo; what cannot be read counts as no limit.
 */
double
cg_probe_cpu_cap(void)
{
	double cap = INFINITY;
	char line[4096], cg2[2048] = "", cg1[2048] = "";
	cpu_set_t set;
	FILE *fp;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		cap = CPU_COUNT(&set);
	if ((fp = fopen("/proc/self/cgroup", "r")) == NULL)
		return cap;
	while (fgets(line, sizeof(line), fp)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (b == NULL)
			continue;
		line[strcspn(line, "\n")] = '\0';
		*b = '\0';
		if (strcmp(a + 1, "") == 0)
			snprintf(cg2, sizeof(cg2), "%s", b + 1);
		for (char *t = strtok(a + 1, ","); t; t = strtok(NULL, ","))
			if (strcmp(t, "cpu") == 0)
				snprintf(cg1, sizeof(cg1), "%s", b + 1);
	}
	fclose(fp);
	if ((fp = fopen("/proc/self/mountinfo", "r")) == NULL)
		return cap;
	/* id parent maj:min root mountpoint opts [tags] - fstype src super */
	while (fgets(line, sizeof(line), fp)) {
		char root[1024], mnt[1024], fstype[64], super[512], dir[4096];
		char *dash = strstr(line, " - ");
		int v2;
		if (dash == NULL ||
		    sscanf(line, "%*s %*s %*s %1023s %1023s", root, mnt) != 2 ||
		    sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2)
			continue;
		v2 = strcmp(fstype, "cgroup2") == 0;
		const char *path = v2 ? cg2 : cg1;
		if (!v2) {
			int cpu = 0;
			if (strcmp(fstype, "cgroup") != 0)
				continue;
			for (char *t = strtok(super, ","); t; t = strtok(NULL, ","))
				cpu |= strcmp(t, "cpu") == 0;
			if (!cpu)
				continue;
		}
		size_t nr = strlen(root);
		if (*path == '\0' || strncmp(path, root, nr) != 0)
			continue;
		if (strcmp(root, "/") == 0)
			nr = 0;
		snprintf(dir, sizeof(dir), "%s%s", mnt, path + nr);
		double c = dir_cap(dir, strlen(mnt), v2);
		cap = c < cap ? c : cap;
	}
	fclose(fp);
	return cap;
}

/* The CPU time this process has used, in seconds. */
static double
cpu_now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int
cg_probe_run(struct cg_model *m, const struct cg_shard *s,
             const struct cg_probe_opts *o, struct cg_probe_result *r)
{
	struct cg_train_opts t = {0};
	struct cg_train_result res;
	struct cg_memplan plan;
	double sorted[CG_PROBE_MAX_WINDOWS], win, t0, t1, cpu;
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
	r->cap = cg_probe_cpu_cap();
	for (int i = 0; i < o->windows; i++) {
		double c0 = cpu_now(), charged;
		t0 = cg_now();
		t.deadline = t0 + win;
		/* each window sees other batches: its seed */
		t.seed = o->seed + 1 + (uint64_t)i;
		if (cg_train_run(m, s, &t, NULL, out, &res) != 0)
			goto out;
		t1 = cg_now();
		cpu = cpu_now() - c0;
		/* the cap's share of the CPU time, where it is the longer */
		charged = t1 - t0;
		if (isfinite(r->cap) && cpu / r->cap > charged)
			charged = cpu / r->cap;
		r->window[i] = charged > 0 ? (double)res.samples / charged : 0;
		r->samples += res.samples;
		r->secs += t1 - t0;
		r->cpu += cpu;
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
