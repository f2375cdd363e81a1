/*
 * exchange/op/median_op.c - the reduce operation "median": each
 * element's median over the inputs, their weights ignored, all at once.
 *
 * The middle value, or the mean of the two middle values (in double) for
 * an even k: one input far off, or a few (fewer than half), cannot move
 * it past the others' values.  The slice is op.c's (cg_op_median_slice),
 * which clip-mean starts from too.
 */
#include "exchange/op/op.h"

const struct cg_reduce_op cg_reduce_op_median = {
    .name = "median",
    .help = "each element's median, unweighted (robust)",
    .slice = cg_op_median_slice,
};
