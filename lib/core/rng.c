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
