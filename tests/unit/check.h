/*
 * check.h - what the C unit tests share: a failure count, a line per
 * check, and allocation that stops the test rather than fail quietly.
 *
 * Each test defines TEST_NAME (its program name, for messages) before
 * including this; main returns failures ? 1 : 0, the automake convention.
 */
#ifndef CG_TEST_CHECK_H
#define CG_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"

static int failures;

/* Print "ok WHAT" or "FAIL WHAT" and count a failure. */
static inline void
expect(int cond, const char *what)
{
	printf("%-4s %s\n", cond ? "ok" : "FAIL", what);
	if (!cond)
		failures++;
}

/* expect that the string got (malloc'd, freed here) is want; both on
 * stderr when not. */
static inline void
expect_str(char *got, const char *want, const char *what)
{
	int ok = got != NULL && strcmp(got, want) == 0;

	expect(ok, what);
	if (!ok)
		fprintf(stderr, "got:\n%s\nwant:\n%s\n", got ? got : "(null)",
		        want);
	free(got);
}

/* The same for checks that explain a failure in printf's words, on
 * stderr with the file and line; nothing is printed when cond holds. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			failures++;                                            \
		}                                                              \
	} while (0)

/* calloc that never returns NULL (n may be 0). */
static inline void *
xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz);

	if (p == NULL) {
		fprintf(stderr, TEST_NAME ": out of memory\n");
		exit(1);
	}
	return p;
}

/* A library call the test depends on failed: stop with its message. */
static inline void
die(const char *what)
{
	fprintf(stderr, TEST_NAME ": %s: %s\n", what, cg_errmsg());
	exit(1);
}

#endif
