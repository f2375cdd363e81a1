/*
 * core/clock.h - seconds from a monotonic clock.
 */
#ifndef CG_CLOCK_H
#define CG_CLOCK_H

/* Seconds from a monotonic clock (for progress, deadlines and
 * benchmarks only; never written into a file). */
double cg_now(void);

#endif
