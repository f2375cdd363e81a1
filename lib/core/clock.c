/*
 * core/clock.c - seconds from a monotonic clock.
 */
#include <time.h>

#include "core/clock.h"

double
cg_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
