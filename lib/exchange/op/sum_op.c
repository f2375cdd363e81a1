/*
 * exchange/op/sum_op.c - the reduce operation "sum": the plain sum,
 * streaming, the inputs' weights ignored.
 */
#include "exchange/op/op.h"

static void
sum_init(float *acc, const float *x, size_t n, double w)
{
	(void)w;
	cg_op_scale_into(acc, x, n, 1.0);
}

static void
sum_add(float *acc, const float *x, size_t n, double w)
{
	(void)w;
	cg_op_add_scaled(acc, x, n, 1.0);
}

const struct cg_reduce_op cg_reduce_op_sum = {
    .name = "sum",
    .help = "the plain sum",
    .streams = 1,
    .tree = 1,
    .init = sum_init,
    .add = sum_add,
};
