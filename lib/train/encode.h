/*
 * train/encode.h - a worker's update encoded under a codec, with what it
 * keeps between calls in its state: the error-feedback residual and the
 * codec's own state.
 *
 * cg-train-step --codec (or --mask) is the program; the rules of the
 * worker's side of a compressed exchange are here, the encoders in
 * exchange/ (ucodec.h), the residual's arithmetic in exchange/feedback.h.
 */
#ifndef CG_ENCODE_H
#define CG_ENCODE_H

#include <stdint.h>

#include "data/shard.h"
#include "exchange/secagg.h"
#include "exchange/ucodec.h"
#include "exchange/update.h"
#include "model/model.h"
#include "train/state.h"
#include "train/train.h"

/* How a worker's update is encoded. */
struct cg_train_enc {
	const struct cg_uspec *spec; /* the codec, fitted to any budget */
	enum cg_update_kind kind;    /* CG_UPDATE_GRAD or CG_UPDATE_DELTA */
	uint64_t seed;               /* the call's seed */
	int no_feedback;             /* keep no residual, drop one kept */
	double decay;                /* of the residual added back, [0, 1] */
	/* secure aggregation: the worker's masks (cg_mask_round done) and
	 * the update's whole weight (cg_mask_check_weight); NULL: none */
	const struct cg_mask *mask;
	uint64_t mask_weight;
	/* the digest of the model the update was computed from, as the
	 * state took it before training; NULL: m's own */
	const unsigned char *base;
	/* the views left out (struct cg_train_opts's frozen): NULL, none */
	const uint8_t *frozen;
};

/*
 * The update buf [nparams] that a call made on model m and shard s (its
 * figures in res) as a new file under e's codec.  Stochastic rounding and
 * a low-rank codec's first factor draw from (e->seed, m's step, s's
 * identity).  With a state st (NULL: none), the codec's state between
 * calls lives in the member cg_uspec_state_name names; and unless the
 * codec is lossless, the update is masked or e->no_feedback is set, the
 * residual "ef.residual" is added to buf first (times e->decay) and
 * replaced by what the file did not carry (zero at pruned weights, which
 * the coordinator zeroes).  With e->no_feedback a residual st kept is
 * zeroed.  buf is changed.  Returns the file (the caller frees it), or
 * NULL with a message; st may then hold part of the changes.
 */
struct cg_file *cg_train_encode(const struct cg_model *m,
                                const struct cg_shard *s, struct cg_state *st,
                                float *buf, const struct cg_train_result *res,
                                const struct cg_train_enc *e);

#endif
