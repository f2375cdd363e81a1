/*
 * exchange/dp.h - differential privacy at the reduction: each worker's
 * update clipped to an L2 norm, Gaussian noise added once to the mean.
 *
 * This is DP-FedAvg's user-level privacy (McMahan et al. 2018, "Learning
 * differentially private recurrent language models"): a worker's whole
 * update x_i, over all its tensors, is scaled to norm at most C, the W
 * clipped updates are averaged with equal weights, and noise N(0,
 * (sigma C / W)^2) is added to every coordinate of the average, which
 * is the Gaussian mechanism of noise multiplier sigma on their sum (one
 * worker changes the sum by at most C).  What that spends is the
 * accountant's (core/rdp.h) and is recorded in the result (privacy.h).
 *
 * The reducer (reduce.h) calls these; they know nothing of the options.
 */
#ifndef CG_DP_H
#define CG_DP_H

#include <stdint.h>

#include "exchange/update.h"

/* The L2 norm of u over every view, decoded to f32 and summed in double
 * in one fixed order (the same figure at any thread count). */
double cg_dp_update_norm(const struct cg_update *u);

/* The factor that brings an update of norm norm within clip: min(1,
 * clip / norm). */
double cg_dp_clip_factor(double norm, double clip);

/* Add N(0, std^2) to every element of every tensor of f (dense f32, as a
 * reduction's result is), drawn in tensor and element order from one
 * stream seeded with seed: the same bytes for the same seed on any
 * machine and thread count. */
void cg_dp_add_noise(struct cg_file *f, double std, uint64_t seed);

/* A worker's share (privacy.h's struct cg_dp_share): x [n] scaled to L2
 * norm at most clip (its norm summed in double, in order), then N(0,
 * std^2) added to each element from a stream seeded with seed (std 0:
 * none).  Returns x's norm before the clip. */
double cg_dp_clip_noise(float *x, uint64_t n, double clip, double std,
                        uint64_t seed);

#endif
