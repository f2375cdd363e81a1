/*
 * toy.h - a small model built by hand for the update, reduce and apply
 * tests: four views (two weight matrices, two biases) of 40 parameters in
 * all, in one group "all" or two, "gen" (a.*) and "disc" (b.*), the way a
 * GAN's layout would declare them.  Its arch "toy" is no registered
 * architecture: nothing here reads a model file by arch name.
 *
 * Include after check.h.
 */
#ifndef CG_TEST_TOY_H
#define CG_TEST_TOY_H

#include <string.h>

#include <cjson/cJSON.h>

#include "model/model.h"

#define TOY_P 40

static const struct cg_view toy_views[] = {
    {"a.w", 0, 15, 2, {3, 5}, 1},
    {"a.b", 15, 5, 1, {5}, 0},
    {"b.w", 20, 16, 2, {4, 4}, 1},
    {"b.b", 36, 4, 1, {4}, 0},
};

/* A toy model at step `step` with parameters drawn from seed; groups 1
 * (one group over all) or 2 (gen, disc; disc frozen when frozen). */
static inline struct cg_model *
toy_model(uint64_t seed, uint64_t step, int groups, int frozen)
{
	struct cg_model *m = xcalloc(1, sizeof(*m));
	struct cg_rng r;

	m->manifest = cJSON_CreateObject();
	if (m->manifest == NULL)
		die("cJSON_CreateObject");
	cJSON_AddStringToObject(m->manifest, "arch", "toy");
	m->config = cJSON_AddObjectToObject(m->manifest, "config");
	m->nparams = TOY_P;
	m->nviews = 4;
	m->views = xcalloc(4, sizeof(*m->views));
	memcpy(m->views, toy_views, sizeof(toy_views));
	if ((m->params = cg_alloc(TOY_P * sizeof(float))) == NULL)
		die("cg_alloc");
	m->step = step;
	cg_rng_seed(&r, seed);
	for (int i = 0; i < TOY_P; i++)
		m->params[i] = cg_rng_normal(&r);
	if (groups == 1) {
		struct cg_group all = {.name = "all", .n = TOY_P};
		if (cg_model_set_groups(m, &all, 1) != 0)
			die("cg_model_set_groups");
	} else {
		struct cg_group g[2] = {
		    {.name = "gen", .off = 0, .n = 20},
		    {.name = "disc", .off = 20, .n = 20, .frozen = frozen}};
		if (cg_model_set_groups(m, g, 2) != 0)
			die("cg_model_set_groups");
	}
	return m;
}

/* n floats drawn from seed, scaled by k. */
static inline void
toy_fill(float *x, size_t n, uint64_t seed, float k)
{
	struct cg_rng r;

	cg_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++)
		x[i] = k * cg_rng_normal(&r);
}

/* Whether n floats are the same bits. */
static inline int
same_bits(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof(float)) == 0;
}

#endif
