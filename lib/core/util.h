/*
 * core/util.h - small helpers of every layer: aligned allocation, memory,
 * hex and digests, bytes shown to people.
 */
#ifndef CG_UTIL_H
#define CG_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* 64-byte aligned zeroed allocation (free with free()); NULL on failure
 * with a message. */
void *cg_alloc(size_t n);
/* The first element of x [n] that is an inf or a nan, or n: a run of
 * values at a time without a branch, then the element. */
uint64_t cg_first_nonfinite(const float *x, uint64_t n);
/* Turn SIGBUS (a mapped input truncated under us) into a one-line
 * error, exit 1, temporaries removed.  Idempotent. */
void cg_guard_mapped_reads(void);
/* This process's resident memory now, and the most it has had, in
 * bytes (0 where the system does not say). */
uint64_t cg_rss_now(void);
uint64_t cg_rss_peak(void);
/*
 * The byte to show people for byte c of somebody else's text: '?' for
 * a control byte (below 0x20, and DEL), but newline and tab when
 * keep_space; c itself otherwise, so UTF-8 passes.  A terminal then never
 * sees an escape sequence it would act on.
 */
int cg_shown_byte(int c, int keep_space);
/* The index i in [lo, hi] of names[] (an enum's names) whose name is s,
 * or -1 (no message: the caller names what it parses). */
int cg_name_index(const char *const *names, int lo, int hi, const char *s);
/* Lower-case hex of n bytes p into out[2n + 1]. */
void cg_tohex(char *out, const unsigned char *p, size_t n);
/* Lower-case hex of a SHA-256 digest into out[65]. */
void cg_hex(char out[65], const unsigned char d[32]);
/* s, exactly 2n hex digits (lower case, or either with any_case), into
 * out[n]: 0, or -1 with no message (out then undefined). */
int cg_unhex(unsigned char *out, const char *s, size_t n, int any_case);
/* The digest that s writes as 64 lower-case hex digits (cg_hex's form)
 * into out.  Returns 0, or -1 with a message when s is anything else (out
 * then undefined). */
int cg_hex_parse(unsigned char out[32], const char *s);
void cg_sha256(unsigned char out[32], const void *data, size_t n);

#endif
