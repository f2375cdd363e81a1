/*
 * core/util.h - small helpers of every layer: aligned allocation, memory,
 * hex and digests, bytes shown to people, byte order.
 */
#ifndef CG_UTIL_H
#define CG_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* 64-byte aligned zeroed allocation (free with free()); NULL on failure
 * with a message. */
void *cg_alloc(size_t n);
/* The same, not zeroed: for a buffer written whole before it is read
 * (the first write is then the kernel's first touch of each page). */
void *cg_alloc_raw(size_t n);
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

/*
 * Byte order.  cg's files are little-endian on every host; in memory a
 * tensor of a plain multi-byte type holds host values, and its reader and
 * writer turn the words around on a big-endian host (s390x).  On a
 * little-endian host CG_BIG_ENDIAN is 0 and every turn below compiles
 * to nothing.
 */
#if !defined(__BYTE_ORDER__)
#error "cg needs the compiler to say the byte order (__BYTE_ORDER__)"
#elif __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define CG_BIG_ENDIAN 1
#else
#define CG_BIG_ENDIAN 0
#endif
/* Reverse the bytes of each w-byte word of p [n] (w 2, 4 or 8, n a
 * multiple of w; any other w leaves p alone), on any host. */
void cg_bswap_words(void *p, size_t n, unsigned w);
/* Between little-endian words of w bytes and host words, in place: the
 * same turn both ways; nothing on a little-endian host. */
static inline void
cg_le_words(void *p, size_t n, unsigned w)
{
	if (CG_BIG_ENDIAN && w > 1)
		cg_bswap_words(p, n, w);
}
/* The SHA-256 of host words of w bytes p [n] as written little-endian:
 * cg_sha256 itself on a little-endian host, or where w is 1. */
void cg_sha256_le(unsigned char out[32], const void *p, size_t n, unsigned w);
/* The little-endian 64-bit word at p, on any host. */
static inline uint64_t
cg_get_le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

#endif
