/*
 * core/util.c - small shared helpers: aligned allocation, digests, hex, the
 * bytes of text shown to people.
 *
 * Kept apart so that kernels and file code can share them without pulling
 * each other in.  SHA-256 comes from OpenSSL's EVP interface.
 */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core/atomic.h"
#include "core/error.h"
#include "core/util.h"

/*
 * Huge pages for the whole 2 MiB pages inside a big allocation, where
 * the kernel gives them on request (transparent huge pages "madvise"):
 * one fault a 2 MiB page instead of 512, and fewer TLB misses.  Only
 * memory the allocation owns is advised, so nothing more is resident.
 */
static void
advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
	const uintptr_t H = (uintptr_t)2 << 20;
	uintptr_t lo = ((uintptr_t)p + H - 1) & ~(H - 1);
	uintptr_t hi = ((uintptr_t)p + n) & ~(H - 1);

	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
	(void)p;
	(void)n;
#endif
}

uint64_t
cg_first_nonfinite(const float *x, uint64_t n)
{
	const uint64_t R = 1024;

	/* every exponent bit set: an inf or a nan */
	for (uint64_t lo = 0; lo < n; lo += R) {
		uint64_t hi = n - lo < R ? n : lo + R;
		uint32_t bad = 0;
		for (uint64_t i = lo; i < hi; i++) {
			uint32_t u;
			memcpy(&u, &x[i], sizeof(u));
			bad |= (u & 0x7f800000u) == 0x7f800000u;
		}
		for (uint64_t i = lo; bad && i < hi; i++)
			if (!isfinite(x[i]))
				return i;
	}
	return n;
}

/*
 * From this size on an allocation starts on a 2 MiB boundary, so that all
 * of it but its tail is huge pages (advise_huge): where 64 bytes was
 * the alignment, a 5.5 MiB buffer had one or two of them.  Zeroing fresh
 * memory is the kernel's first touch of each page, and in a virtual
 * machine the host's too: a 24 MiB buffer took 14 ms in small pages, 3.5
 * in huge ones.  The space skipped to the boundary is never touched.
 */
#define HUGE_FROM ((size_t)4 << 20)

void *
cg_alloc_raw(size_t n)
{
	void *p = NULL;
	size_t sz = (n + 63) & ~(size_t)63;
	size_t align = sz >= HUGE_FROM ? (size_t)2 << 20 : 64;

	if (sz < n || posix_memalign(&p, align, sz ? sz : 64) != 0) {
		cg_seterr("out of memory (%zu bytes)", n);
		return NULL;
	}
	if (sz >= HUGE_FROM)
		advise_huge(p, sz);
	return p;
}

void *
cg_alloc(size_t n)
{
	void *p = cg_alloc_raw(n);
	size_t sz = (n + 63) & ~(size_t)63;

	if (p != NULL)
		memset(p, 0, sz ? sz : 64);
	return p;
}

uint64_t
cg_rss_now(void)
{
	FILE *fp = fopen("/proc/self/statm", "r");
	unsigned long long size, res;
	long page = sysconf(_SC_PAGESIZE);
	int n;

	if (fp == NULL)
		return 0;
	n = fscanf(fp, "%llu %llu", &size, &res);
	fclose(fp);
	return n == 2 && page > 0 ? (uint64_t)res * (uint64_t)page : 0;
}

uint64_t
cg_rss_peak(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0)
		return 0;
	return (uint64_t)ru.ru_maxrss * 1024; /* Linux: kilobytes */
}

int
cg_shown_byte(int c, int keep_space)
{
	if (keep_space && (c == '\n' || c == '\t'))
		return c;
	return c < 0x20 || c == 0x7f ? '?' : c;
}

void
cg_tohex(char *out, const unsigned char *p, size_t n)
{
	static const char hx[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[p[i] >> 4];
		out[2 * i + 1] = hx[p[i] & 15];
	}
	out[2 * n] = '\0';
}

void
cg_hex(char out[65], const unsigned char d[32])
{
	cg_tohex(out, d, 32);
}

int
cg_name_index(const char *const *names, int lo, int hi, const char *s)
{
	for (int i = lo; i <= hi; i++)
		if (names[i] != NULL && strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

static int
hexval(int c, int any_case)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (any_case && c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
cg_unhex(unsigned char *out, const char *s, size_t n, int any_case)
{
	if (strlen(s) != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int hi = hexval((unsigned char)s[2 * i], any_case);
		int lo = hexval((unsigned char)s[2 * i + 1], any_case);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int
cg_hex_parse(unsigned char out[32], const char *s)
{
	if (cg_unhex(out, s, 32, 0) != 0)
		return cg_seterr("not 64 lower-case hex digits");
	return 0;
}

void
cg_sha256(unsigned char out[32], const void *data, size_t n)
{
	unsigned int len = 32;

	EVP_Digest(data, n, out, &len, EVP_sha256(), NULL);
}

/* ---------------------------------------------------------- byte order */

void
cg_bswap_words(void *p, size_t n, unsigned w)
{
	unsigned char *b = p;

	if (w == 2)
		for (size_t i = 0; i + 2 <= n; i += 2) {
			uint16_t v;
			memcpy(&v, b + i, 2);
			v = __builtin_bswap16(v);
			memcpy(b + i, &v, 2);
		}
	else if (w == 4)
		for (size_t i = 0; i + 4 <= n; i += 4) {
			uint32_t v;
			memcpy(&v, b + i, 4);
			v = __builtin_bswap32(v);
			memcpy(b + i, &v, 4);
		}
	else if (w == 8)
		for (size_t i = 0; i + 8 <= n; i += 8) {
			uint64_t v;
			memcpy(&v, b + i, 8);
			v = __builtin_bswap64(v);
			memcpy(b + i, &v, 8);
		}
}

void
cg_sha256_le(unsigned char out[32], const void *p, size_t n, unsigned w)
{
	enum { CHUNK = 1 << 16 };
	unsigned char *buf;
	unsigned int len = 32;
	EVP_MD_CTX *c;

	if (!CG_BIG_ENDIAN || w <= 1) {
		cg_sha256(out, p, n);
		return;
	}
	/* out of memory: a digest nothing has, so nothing matches */
	memset(out, 0, 32);
	if ((buf = malloc(CHUNK)) == NULL)
		return;
	if ((c = EVP_MD_CTX_new()) != NULL &&
	    EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1) {
		const unsigned char *b = p;
		for (size_t off = 0; off < n; off += CHUNK) {
			size_t k = n - off < CHUNK ? n - off : CHUNK;
			memcpy(buf, b + off, k);
			cg_bswap_words(buf, k, w);
			EVP_DigestUpdate(c, buf, k);
		}
		EVP_DigestFinal_ex(c, out, &len);
	}
	EVP_MD_CTX_free(c);
	free(buf);
}
