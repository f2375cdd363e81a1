/*
 * core/parse.h - whole strings as numbers, sizes and lists, each checked
 * against its range; on failure -1 with a message naming what was parsed
 * (an option or a config key); and a string's escapes.
 */
#ifndef CG_PARSE_H
#define CG_PARSE_H

#include <stdint.h>

/* Whole string s as an integer in [min, max]; -1 with a message naming
 * what (an option name) otherwise. */
int cg_parse_i64(const char *what, const char *s, long long min, long long max,
                 long long *out);
int cg_parse_u64(const char *what, const char *s, uint64_t *out);
/* Whole string s as a finite number in [min, max]. */
int cg_parse_f64(const char *what, const char *s, double min, double max,
                 double *out);
/* A byte size: digits with an optional K, M, G or T suffix (powers of
 * 1024, an optional trailing "B" or "iB"). */
int cg_parse_size(const char *what, const char *s, uint64_t *out);
/* Comma-separated positive numbers; returns the count, or -1. */
int cg_parse_list(const char *what, const char *s, double *out, int max);
/*
 * s with the escapes \n, \t and \\ expanded (any other backslash stays
 * as it is), as a new string the caller frees; NULL with a message when
 * out of memory.
 */
char *cg_unescape(const char *s);

#endif
