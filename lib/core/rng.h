/*
 * core/rng.h - the one source of randomness.
 */
#ifndef CG_RNG_H
#define CG_RNG_H

#include <stddef.h>
#include <stdint.h>

/* xoshiro256** seeded through splitmix64: the one source of randomness.
 * Same seed, same stream, on every machine. */
struct cg_rng {
	uint64_t s[4];
};

void cg_rng_seed(struct cg_rng *r, uint64_t seed);
uint64_t cg_rng_u64(struct cg_rng *r);
/* Uniform in [0, n) without modulo bias; n > 0. */
uint64_t cg_rng_below(struct cg_rng *r, uint64_t n);
/* Uniform float in [0, 1). */
float cg_rng_uniform(struct cg_rng *r);
/* Standard normal (Box-Muller, both values used in turn is not kept:
 * one call, one fresh pair, first value returned - stateless). */
float cg_rng_normal(struct cg_rng *r);
/* n standard normals into out, two from each pair of draws (Box-Muller,
 * both values used), in float with IEEE's basic operations alone so that
 * the loop vectorises and the bits are the same on every machine: for
 * noise drawn by the hundred thousand (a diffusion model's pixels).  Not
 * the values of n calls of cg_rng_normal. */
void cg_rng_normals(struct cg_rng *r, float *out, size_t n);
/* Derive an independent stream from (seed, a, b): used to make batch
 * choice a pure function of seed, step and shard. */
void cg_rng_derive(struct cg_rng *r, uint64_t seed, uint64_t a, uint64_t b);

#endif
