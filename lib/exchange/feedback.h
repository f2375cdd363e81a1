/*
 * exchange/feedback.h - error feedback: what a lossy code did not send
 * is kept, and added to the next update, so that it arrives late rather
 * than never.
 *
 * Both ends of an exchange do the same two steps around an encode, the
 * worker on its gradient or delta (the residual "ef.residual" of its
 * state file, scaled by --feedback-decay), the coordinator on the change
 * it publishes (the model's "ef.down", never scaled):
 *
 *	cg_feedback_add(x, residual, n, decay);       x += decay residual
 *	cg_update_encode(..., x, ..., sent, residual); residual = x - sent
 *
 * cg_update_encode (exchange/update.h) computes x minus what a reader
 * decodes into its last argument, so the second step is the encoder's.
 */
#ifndef CG_FEEDBACK_H
#define CG_FEEDBACK_H

#include <stdint.h>

/* x [n] += decay * residual [n]; decay 1 adds the residual as it is (no
 * product, so the sum is the same bits as a plain add).  decay in
 * [0, 1]. */
void cg_feedback_add(float *x, const float *residual, uint64_t n,
                     float decay);

#endif
