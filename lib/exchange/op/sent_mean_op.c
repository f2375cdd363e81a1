/*
 * exchange/op/sent_mean_op.c - the reduce operation "sent-mean": each
 * element's weighted mean over the inputs that sent it, all at once.
 *
 * A sparse code (topk) sends a few elements of each worker's update and
 * decodes to zero elsewhere.  The plain mean divides every element by
 * the weight of all the inputs, so an element that one worker of four
 * sent moves the model by a quarter of it; here it is divided by the
 * weight of the inputs that sent it (a nonzero value: an exact zero is
 * taken as not sent, whatever the code), and an element none sent stays
 * zero.  This is how SparseLoCo (Sarfi et al., 2025) aggregates the
 * union of the workers' indices.  On dense inputs without zeros it is
 * the mean, up to rounding: the sums are in double, rounded once.
 * The weights are the inputs' own; a staleness rule other than
 * constant is refused (weighs = 0), as a stale input's discount has no
 * meaning in a mean over those that sent an element.
 */
#include "exchange/op/op.h"

static void
sent_slice(struct cg_reduce_pass *p, float *out, const float *const *in,
           size_t n)
{
	const size_t k = p->k;
	const double *w = p->w;

#pragma omp parallel for schedule(static)
	for (size_t j = 0; j < n; j++) {
		double s = 0, ws = 0;
		for (size_t i = 0; i < k; i++)
			if (in[i][j] != 0) {
				s += w[i] * (double)in[i][j];
				ws += w[i];
			}
		out[j] = ws > 0 ? (float)(s / ws) : 0.0f;
	}
}

const struct cg_reduce_op cg_reduce_op_sent_mean = {
    .name = "sent-mean",
    .help = "each element's mean over the inputs that sent it (topk)",
    .slice = sent_slice,
};
