/*
 * cli/runtime.c - the settings the OpenMP and BLAS runtimes read before
 * main.
 *
 * Both libraries read their environment once, in their own constructors,
 * before any code of ours runs, and the environment cannot be set that
 * early from an executable (a function in .preinit_array runs first, but
 * the C library's own initializer then sets environ back to the kernel's
 * array).  So the programs answer the libraries' question themselves:
 * this file defines getenv and secure_getenv, and the dynamic linker
 * binds every library's calls to an executable's definition ahead of the
 * C library's.  They answer from the environment as it is and, for the
 * names below where the user set none, with the programs' default.
 * Nothing is written into the environment: a cg program started by
 * another makes the same choice itself, and any other program the
 * libraries' own.  (The programs used to set the variables and execute
 * themselves again, which loaded every library twice: 5-8 ms a call.)
 * The C library's own reads (locale, tunables) do not come here and need
 * not.  libcg.so is built without this file: a program of one's own
 * keeps the C library's getenv.
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
 * Anything the user set is taken as set; CG_NO_RUNTIME_DEFAULTS (or its
 * older name, CG_NO_REEXEC) set to anything turns the defaults off.
 */
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/auxv.h>
#endif

#include "cg.h"

extern char **environ;

/* name's value in the environment, or NULL: as the C library's getenv. */
static char *
lookup(const char *name)
{
	size_t n;

	if (name == NULL || environ == NULL || strchr(name, '=') != NULL)
		return NULL;
	n = strlen(name);
	for (char **e = environ; *e != NULL; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

#if defined(CG_HAVE_CBLAS)
/* Whether the OpenBLAS kernels for Skylake-X run on this CPU. */
static int
avx512(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	/* May run before the constructor that fills in what
	 * __builtin_cpu_supports reads: fill it in first (idempotent). */
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl");
#else
	return 0;
#endif
}
#endif

/* The programs' value for an unset name, or NULL.  The strings are
 * constant; getenv's callers do not write to what it returns. */
static char *
preset(const char *name)
{
	if (lookup("CG_NO_RUNTIME_DEFAULTS") != NULL ||
	    lookup("CG_NO_REEXEC") != NULL)
		return NULL;
#if defined(__GNUC__) && !defined(__clang__)
	if (strcmp(name, "GOMP_SPINCOUNT") == 0 &&
	    lookup("OMP_WAIT_POLICY") == NULL)
		return (char *)"1000";
#else
	if (strcmp(name, "OMP_WAIT_POLICY") == 0)
		return (char *)"passive";
#endif
#if defined(CG_HAVE_CBLAS)
	if (strcmp(name, "OPENBLAS_NUM_THREADS") == 0)
		return (char *)"1";
	if (strcmp(name, "OPENBLAS_CORETYPE") == 0 && avx512())
		return (char *)"SkylakeX";
#endif
	return NULL;
}

char *
getenv(const char *name)
{
	char *v = lookup(name);

	return v != NULL ? v : preset(name);
}

/* As the C library's: nothing for a set-user-ID or set-group-ID run. */
char *
secure_getenv(const char *name)
{
#ifdef __linux__
	if (getauxval(AT_SECURE) != 0)
		return NULL;
#endif
	return getenv(name);
}

/* Referenced by cg_set_threads so that every program links this file. */
volatile int cg_runtime_linked = 1;
