/*
 * core/parse.c - whole strings as numbers, sizes and lists, each checked
 * against its range, with a message naming what was parsed; escapes.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parse.h"

int
cg_parse_i64(const char *what, const char *s, long long min, long long max,
             long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
		return cg_seterr("%s: '%s' is not a whole number in [%lld, "
		                 "%lld]",
		                 what, s, min, max);
	*out = v;
	return 0;
}

int
cg_parse_u64(const char *what, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s == '\0' || *s == '-' || *end != '\0' || errno != 0)
		return cg_seterr("%s: '%s' is not a non-negative whole number",
		                 what, s);
	*out = v;
	return 0;
}

int
cg_parse_f64(const char *what, const char *s, double min, double max,
             double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(v) ||
	    v < min || v > max)
		return cg_seterr("%s: '%s' is not a number in [%g, %g]", what,
		                 s, min, max);
	*out = v;
	return 0;
}

int
cg_parse_size(const char *what, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s == '\0' || *s == '-' || end == s || errno != 0)
		goto bad;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	}
	if (strcmp(end, "") != 0 && strcmp(end, "B") != 0 &&
	    strcmp(end, "iB") != 0)
		goto bad;
	if (v > (UINT64_MAX >> shift))
		goto bad;
	*out = (uint64_t)v << shift;
	return 0;
bad:
	return cg_seterr("%s: '%s' is not a size (like 256M or 2G)", what, s);
}

int
cg_parse_list(const char *what, const char *s, double *out, int max)
{
	char buf[4096], *tok, *save = NULL;
	int n = 0;

	if (strlen(s) >= sizeof(buf))
		return cg_seterr("%s: list too long", what);
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == max)
			return cg_seterr("%s: more than %d values", what, max);
		if (cg_parse_f64(what, tok, 1e-12, 1e12, &out[n]) != 0)
			return -1;
		n++;
	}
	if (n == 0)
		return cg_seterr("%s: empty list", what);
	return n;
}

char *
cg_unescape(const char *s)
{
	char *out = malloc(strlen(s) + 1), *d = out;

	if (out == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	for (; *s; s++) {
		if (s[0] == '\\' &&
		    (s[1] == 'n' || s[1] == 't' || s[1] == '\\')) {
			*d++ = s[1] == 'n' ? '\n' : s[1] == 't' ? '\t' : '\\';
			s++;
		} else
			*d++ = *s;
	}
	*d = '\0';
	return out;
}
