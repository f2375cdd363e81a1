/*
 * runtime.c - settings the OpenMP and BLAS runtimes read before main.
 *
 * Both libraries read their environment once, in their own constructors,
 * before any code of ours runs, and setting the environment that early is
 * not possible from an executable.  So a cg program that finds the
 * settings unset sets them and executes itself again (once: the second
 * run finds them set), which costs a few milliseconds at start.
 *
 * OMP_WAIT_POLICY=passive: after each parallel region OpenMP's threads
 * otherwise spin, on the very cores the BLAS threads need; on two cores
 * that made a cvae training step four times slower.
 * OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512 (F, BW, VL):
 * OpenBLAS builds that do not recognise a newer CPU fall back to their
 * oldest x86-64 kernels, several times slower.  The unit tests compare
 * the BLAS results with a reference kernel.
 *
 * Anything the user set is left alone; CG_NO_REEXEC=1 turns this off.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg.h"

__attribute__((constructor)) static void
cg_runtime_init(int argc, char **argv, char **envp)
{
	int change = 0;

	(void)envp;
	if (argc < 1 || argv == NULL)
		return;
	if (getenv("CG_NO_REEXEC") != NULL) {
		/* Our own mark from the exec below, or the user's wish. */
		if (strcmp(getenv("CG_NO_REEXEC"), "exec") == 0)
			unsetenv("CG_NO_REEXEC");
		return;
	}
	if (getenv("OMP_WAIT_POLICY") == NULL) {
		setenv("OMP_WAIT_POLICY", "passive", 1);
		change = 1;
	}
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
		/* Mark the attempt so that a failed exec is not retried. */
		setenv("CG_NO_REEXEC", "exec", 1);
		execv("/proc/self/exe", argv);
		/* No /proc: carry on with the settings as they were. */
		unsetenv("CG_NO_REEXEC");
	}
}

/* Referenced by cg_set_threads so that every program links this file. */
volatile int cg_runtime_linked = 1;
