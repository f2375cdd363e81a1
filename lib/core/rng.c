/*
 * core/rng.c - the seeded random generator (xoshiro256**, seeded by
 * splitmix64).
 *
 * Every random choice in cg draws from a struct cg_rng passed by pointer, so
 * a seed fixes every bit of every output.  Floats are built from the top bits
 * only; the normal variate uses Box-Muller with a fresh pair per call, which
 * keeps the generator free of hidden state.
 */
#include <math.h>
#include <string.h>

#include "core/rng.h"

static uint64_t
splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void
cg_rng_seed(struct cg_rng *r, uint64_t seed)
{
	uint64_t x = seed;

	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

void
cg_rng_derive(struct cg_rng *r, uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t x = seed;
	uint64_t h = splitmix64(&x);

	x = h ^ a;
	h = splitmix64(&x);
	x = h ^ b;
	cg_rng_seed(r, splitmix64(&x));
}

uint64_t
cg_rng_u64(struct cg_rng *r)
{
	uint64_t *s = r->s;
	uint64_t res = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return res;
}

uint64_t
cg_rng_below(struct cg_rng *r, uint64_t n)
{
	/* Rejection keeps every value equally likely. */
	uint64_t lim = UINT64_MAX - UINT64_MAX % n;
	uint64_t v;

	do
		v = cg_rng_u64(r);
	while (v >= lim);
	return v % n;
}

float
cg_rng_uniform(struct cg_rng *r)
{
	return (float)(cg_rng_u64(r) >> 40) * (1.0f / 16777216.0f);
}

float
cg_rng_normal(struct cg_rng *r)
{
	/* u1 in (0, 1] so that log() is finite. */
	double u1 = ((cg_rng_u64(r) >> 11) + 1) * (1.0 / 9007199254740992.0);
	double u2 = (cg_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);

	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ------------------------------------------------- many normals at once */

/*
 * ln u for u in (0, 1], normal floats only: u = m 2^e with m in
 * [sqrt(1/2), sqrt(2)), ln m = 2 atanh s = 2 (s + s^3/3 + ... + s^9/9)
 * for s = (m - 1) / (m + 1), |s| <= 0.172 (the next term is under 1e-9
 * of ln m).  IEEE's basic operations only, so the same bits everywhere.
 */
static inline float
log_unit(float u)
{
	uint32_t b, mb;
	float m;

	memcpy(&b, &u, 4);
	int e = (int)(b >> 23) - 127;
	mb = (b & 0x007fffffu) | 0x3f800000u;
	memcpy(&m, &mb, 4);
	const int big = m > 1.41421356f;
	m = big ? m * 0.5f : m;
	e += big;
	const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
	const float p =
	    s2 * (1.0f / 3 +
	          s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9))));
	return (float)e * 0.693147181f + (2.0f * s + 2.0f * s * p);
}

/*
 * cos and sin of 2 pi u for u in [0, 1): the quarter turn q = floor(4u)
 * and x = (4u - q) pi/2 in [0, pi/2) (both exact), Taylor polynomials of
 * x to x^13 and x^14 (the next terms under 1e-9), turned by q.
 */
static inline void
turn(float u, float *c, float *s)
{
	const float a = u * 4.0f;
	const int q = (int)a;
	const float x = (a - (float)q) * 1.57079633f, x2 = x * x;
	const float sn =
	    x * (1.0f + x2 * (-1.0f / 6 + x2 * (1.0f / 120 +
	    x2 * (-1.0f / 5040 + x2 * (1.0f / 362880 +
	    x2 * (-1.0f / 39916800 + x2 * (1.0f / 6227020800.0f)))))));
	const float cs =
	    1.0f + x2 * (-0.5f + x2 * (1.0f / 24 + x2 * (-1.0f / 720 +
	    x2 * (1.0f / 40320 + x2 * (-1.0f / 3628800 +
	    x2 * (1.0f / 479001600 + x2 * (-1.0f / 87178291200.0f)))))));

	*c = q == 0 ? cs : q == 1 ? -sn : q == 2 ? -cs : sn;
	*s = q == 0 ? sn : q == 1 ? cs : q == 2 ? -sn : -cs;
}

void
cg_rng_normals(struct cg_rng *r, float *out, size_t n)
{
	const size_t pairs = n / 2;
	float last[2];

	/* The draws, in order (the generator is serial): u1 in (0, 1]
	 * from 48 bits (to 2^-48, a radius of 8.2), u2 in [0, 1) from 24,
	 * held in out until the pass below turns each pair into two. */
	for (size_t i = 0; i <= pairs; i++) {
		float *o = i < pairs ? out + 2 * i : last;
		if (i == pairs && n % 2 == 0)
			break;
		uint64_t a = cg_rng_u64(r), b = cg_rng_u64(r);
		o[0] = (float)(a >> 40) * 0x1p-24f +
		       (float)(((a >> 16) & 0xffffffu) + 1) * 0x1p-48f;
		o[1] = (float)(b >> 40) * 0x1p-24f;
	}
#pragma omp simd
	for (size_t i = 0; i < pairs; i++) {
		float c, s;
		const float rad = sqrtf(-2.0f * log_unit(out[2 * i]));
		turn(out[2 * i + 1], &c, &s);
		out[2 * i] = rad * c;
		out[2 * i + 1] = rad * s;
	}
	if (n % 2) {
		float c, s;
		turn(last[1], &c, &s);
		out[n - 1] = sqrtf(-2.0f * log_unit(last[0])) * c;
	}
}
