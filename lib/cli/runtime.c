/*
 * cli/runtime.c - settings the OpenMP and BLAS runtimes read before main.
 *
 * Both libraries read their environment once, in their own constructors,
 * before any code of ours runs, and setting the environment that early is
 * not possible from an executable.  So a cg program that finds the
 * settings unset sets them and executes itself again (once: the second
 * run finds them set), which costs a few milliseconds at start.
 *
 * How long OpenMP's threads spin before they sleep after a parallel
 * region: GNU OpenMP (GCC's) spins 300000 rounds by default, which on a
 * machine with other work to do (or, before the BLAS ran on our own
 * threads, with the BLAS's threads) takes the cores from whoever has work:
 * a cvae step was four times slower.  Never spinning (passive) costs a
 * wake-up per region instead: 13% of a cvae step on an idle machine.
 * GOMP_SPINCOUNT=1000 keeps most of the idle machine's speed (cvae 100
 * steps, median of 5: passive 1.67 s, 1000 rounds 1.46 s, 3000 rounds
 * 1.35 s) and little of the cost when another process competes for the
 * cores (1.75, 1.83, 2.23 s).  Other OpenMP runtimes get
 * OMP_WAIT_POLICY=passive.
 * OPENBLAS_NUM_THREADS=1: the BLAS runs on our threads (lib/nn/gemm.c), and
 * OpenBLAS otherwise starts threads of its own at load, which spin for a
 * while on the cores we need (7% of a cg-reduce run).
 * OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512 (F, BW, VL):
 * OpenBLAS builds that do not recognise a newer CPU fall back to their
 * oldest x86-64 kernels, several times slower.  The unit tests compare
 * the BLAS results with a reference kernel.
 *
 * Anything the user set is left alone; CG_NO_REEXEC=1 turns this off.
 *
 * The kernel names a process (its "comm", what ps, top and pgrep show)
 * after the file it executes, here "exe"; the name the process had
 * before travels in the mark CG_NO_REEXEC=exec:NAME and is given back
 * after the exec, so that `pgrep -x cg-train-step` finds the program.
 * /proc/self/exe is executed rather than a path read from it, as that
 * is the very file running even if the path has been replaced since.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cg.h"

/* Our mark from the exec below: "exec", or "exec:NAME" with the name the
 * process had before it. */
static int
is_mark(const char *v)
{
	return strncmp(v, "exec", 4) == 0 && (v[4] == '\0' || v[4] == ':');
}

/* Give the process back its name from the mark (comm is at most 15
 * bytes; the kernel cuts a longer one). */
static void
keep_name(const char *mark)
{
#if defined(__linux__) && defined(PR_SET_NAME)
	char name[16];

	if (mark[4] != ':' || mark[5] == '\0')
		return;
	snprintf(name, sizeof(name), "%s", mark + 5);
	prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
#else
	(void)mark;
#endif
}

/* CG_NO_REEXEC's value for the exec: the mark with the process's name. */
static void
make_mark(char *buf, size_t cap)
{
	snprintf(buf, cap, "exec");
#if defined(__linux__) && defined(PR_GET_NAME)
	char name[17] = "";

	if (prctl(PR_GET_NAME, (unsigned long)name, 0UL, 0UL, 0UL) == 0 &&
	    name[0] != '\0')
		snprintf(buf, cap, "exec:%.16s", name);
#endif
}

__attribute__((constructor)) static void
cg_runtime_init(int argc, char **argv, char **envp)
{
	int change = 0;

	(void)envp;
	if (argc < 1 || argv == NULL)
		return;
	if (getenv("CG_NO_REEXEC") != NULL) {
		/* Our own mark from the exec below, or the user's wish. */
		const char *mark = getenv("CG_NO_REEXEC");
		if (is_mark(mark)) {
			keep_name(mark);
			unsetenv("CG_NO_REEXEC");
		}
		return;
	}
	if (getenv("OMP_WAIT_POLICY") == NULL) {
#if defined(__GNUC__) && !defined(__clang__)
		if (getenv("GOMP_SPINCOUNT") == NULL) {
			setenv("GOMP_SPINCOUNT", "1000", 1);
			change = 1;
		}
#else
		setenv("OMP_WAIT_POLICY", "passive", 1);
		change = 1;
#endif
	}
#if defined(CG_HAVE_CBLAS)
	/* lib/nn/gemm.c runs the BLAS on the calling thread; told so only
	 * after start, OpenBLAS has already made its own threads, which
	 * spin (sched_yield) for a while on cores we need. */
	if (getenv("OPENBLAS_NUM_THREADS") == NULL) {
		setenv("OPENBLAS_NUM_THREADS", "1", 1);
		change = 1;
	}
#endif
#if defined(CG_HAVE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	if (getenv("OPENBLAS_CORETYPE") == NULL &&
	    __builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl")) {
		setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
		change = 1;
	}
#endif
	if (change) {
		char mark[32];

		/* Mark the attempt so that a failed exec is not retried. */
		make_mark(mark, sizeof(mark));
		setenv("CG_NO_REEXEC", mark, 1);
		execv("/proc/self/exe", argv);
		/* No /proc: carry on with the settings as they were. */
		unsetenv("CG_NO_REEXEC");
	}
}

/* Referenced by cg_set_threads so that every program links this file. */
volatile int cg_runtime_linked = 1;
