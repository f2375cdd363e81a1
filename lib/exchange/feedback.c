/*
 * exchange/feedback.c - error feedback: the residual of a lossy code
 * added to the next update.
 */
#include "exchange/feedback.h"

void
cg_feedback_add(float *x, const float *residual, uint64_t n, float decay)
{
	if (decay == 1) {
		for (uint64_t i = 0; i < n; i++)
			x[i] += residual[i];
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		x[i] += decay * residual[i];
}
