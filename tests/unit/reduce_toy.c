/*
 * reduce_toy.c - a test-only reduce operation: each element's largest
 * value over the inputs.
 *
 * It shows that a reduce operation is its own row and nothing else: it
 * is not in lib/exchange/reduce.c's table and no program names it, yet
 * the copy of cg-reduce that the suite links with this file (tests/toy/,
 * never installed) runs it as --op toy-max, listed in its --help, because
 * the constructor below registers it with cg_reduce_op_register().
 *
 * toy-max streams: the first input is copied, each next one raises an
 * element to its value where that is larger.  Weights are ignored; the
 * result's weight is still the inputs' total, as for any operation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/reduce.h"

static void
max_init(float *acc, const float *x, size_t n, double w)
{
	(void)w;
	memcpy(acc, x, n * sizeof(float));
}

static void
max_add(float *acc, const float *x, size_t n, double w)
{
	(void)w;
	for (size_t j = 0; j < n; j++)
		acc[j] = x[j] > acc[j] ? x[j] : acc[j];
}

static const struct cg_reduce_op toy_max = {
    .name = "toy-max",
    .help = "each element's largest value (a test's)",
    .streams = 1,
    .init = max_init,
    .add = max_add,
};

__attribute__((constructor)) static void
register_toy(void)
{
	if (cg_reduce_op_register(&toy_max) != 0) {
		fprintf(stderr, "reduce_toy: %s\n", cg_errmsg());
		abort();
	}
}
