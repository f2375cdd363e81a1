/*
 * exchange/dp.c - differential privacy at the reduction: clipping each
 * update, and the noise added once to their mean.
 *
 * Both run in one thread, in a fixed order: the norm decides by how much
 * an update is scaled and the noise is the result's last word, so each
 * must be the same bits whatever the thread count.  Their cost is one
 * pass over each input and one over the result, small beside reading
 * them.
 */
#include <math.h>

#include "core/rng.h"
#include "exchange/dp.h"

/* Values decoded at a time. */
#define CHUNK 2048

double
cg_dp_update_norm(const struct cg_update *u)
{
	float tmp[CHUNK];
	double ss = 0;

	for (int i = 0; i < u->nviews; i++) {
		const float *x = cg_update_view_f32(u, i);
		const uint64_t n = u->views[i].n;
		for (uint64_t lo = 0; lo < n; lo += CHUNK) {
			size_t m = n - lo < CHUNK ? (size_t)(n - lo) : CHUNK;
			const float *y = x ? x + lo : tmp;
			if (x == NULL)
				cg_update_decode(u, i, lo, m, tmp);
			for (size_t j = 0; j < m; j++)
				ss += (double)y[j] * y[j];
		}
	}
	return sqrt(ss);
}

double
cg_dp_clip_factor(double norm, double clip)
{
	return norm > clip ? clip / norm : 1;
}

double
cg_dp_clip_noise(float *x, uint64_t n, double clip, double std, uint64_t seed)
{
	double ss = 0, c;
	struct cg_rng r;

	for (uint64_t j = 0; j < n; j++)
		ss += (double)x[j] * x[j];
	c = cg_dp_clip_factor(sqrt(ss), clip);
	cg_rng_derive(&r, seed, 0x6470 /* "dp" */, 1);
	for (uint64_t j = 0; j < n; j++)
		x[j] =
		    (float)(x[j] * c + (std > 0 ? std * cg_rng_normal(&r) : 0));
	return sqrt(ss);
}

void
cg_dp_add_noise(struct cg_file *f, double std, uint64_t seed)
{
	struct cg_rng r;

	/* a stream of its own, apart from any other use of the seed */
	cg_rng_derive(&r, seed, 0x6470 /* "dp" */, 0);
	for (size_t t = 0; t < f->ntensors; t++) {
		float *x = f->tensors[t]->data;
		for (uint64_t j = 0; j < f->tensors[t]->nelem; j++)
			x[j] = (float)(x[j] + std * cg_rng_normal(&r));
	}
}
