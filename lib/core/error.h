/*
 * core/error.h - the one error convention: a function fails by returning -1 (or
 * NULL) after recording a one-line message, which cg_errmsg() returns.
 */
#ifndef CG_ERROR_H
#define CG_ERROR_H

#include <stddef.h>

/* Record a message for the caller (printf format).  Always returns -1 so
 * that "return cg_seterr(...)" reads naturally. */
int cg_seterr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prefix the recorded message with "prefix: " (e.g. a file name). */
void cg_errprefix(const char *prefix);
/* The last recorded message; never NULL. */
const char *cg_errmsg(void);

#endif
