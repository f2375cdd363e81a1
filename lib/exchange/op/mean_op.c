/*
 * exchange/op/mean_op.c - the reduce operation "mean", the default: the
 * mean weighted by each input's weight, streaming.
 *
 * The running weighted sum and the total weight make any tree of
 * reductions equal to one flat reduction, up to float rounding.  It is
 * the one operation that takes masked updates (secagg.h).
 */
#include "exchange/op/op.h"

static void
mean_finish(float *acc, size_t n, double wsum)
{
	const float inv = (float)(1.0 / wsum);

	for (size_t j = 0; j < n; j++)
		acc[j] *= inv;
}

const struct cg_reduce_op cg_reduce_op_mean = {
    .name = "mean",
    .help = "the mean weighted by each input's weight",
    .streams = 1,
    .tree = 1,
    .weighs = 1,
    .masked = 1,
    .init = cg_op_scale_into,
    .add = cg_op_add_scaled,
    .finish = mean_finish,
};
