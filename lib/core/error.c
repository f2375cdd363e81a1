/*
 * core/error.c - the recorded error message.
 *
 * The library never prints: a failing function records one line here and
 * returns -1 or NULL; the program prefixes its own name and prints it.
 * The message is per thread, so OpenMP regions cannot garble it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static _Thread_local char errbuf[1024] = "unknown error";

int
cg_seterr(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	/* Names from hostile files end up here: keep the message one line
	 * and free of terminal escapes. */
	for (char *p = errbuf; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			*p = '?';
	return -1;
}

void
cg_errprefix(const char *prefix)
{
	char tmp[sizeof(errbuf)];
	size_t n = strlen(prefix);

	/* Built by hand: the result is cut to the buffer, never overrun. */
	if (n > sizeof(tmp) / 2)
		n = sizeof(tmp) / 2;
	memcpy(tmp, prefix, n);
	memcpy(tmp + n, ": ", 2);
	snprintf(tmp + n + 2, sizeof(tmp) - n - 2, "%.*s",
		 (int)(sizeof(tmp) - n - 3), errbuf);
	memcpy(errbuf, tmp, sizeof(errbuf));
}

const char *
cg_errmsg(void)
{
	return errbuf;
}
