/*
 * model/privacy.h - what a model or an update says it spent of a privacy
 * budget: the manifest's "dp" record, read, checked and extended.
 *
 * A program that adds noise for differential privacy (cg-reduce
 * --dp-noise) records in its output's manifest
 *
 *     "dp": {"delta": D, "epsilon": E,
 *            "history": [{"sigma": S, "q": Q, "steps": T}, ...],
 *            "release": {"clip": C, "sigma": S, "q": Q, "steps": 1}}
 *
 * "history" being every release of the Gaussian mechanism that went into
 * the model so far (T releases of noise multiplier S at sampling rate Q;
 * runs of the same S and Q merged, as Opacus' accountant merges them),
 * "epsilon" the (epsilon, delta) they spend together (core/rdp.h), and
 * "release" (an update's only) the one this update adds.  cg-apply
 * carries a model's record forward, the update's release appended, so
 * that the next round adds to it.
 *
 * Every reader treats the record as hostile: every figure is checked for
 * its range (a sigma not positive, a q outside (0, 1], a nan anywhere is
 * refused) and the epsilon is recomputed from the history: a record
 * whose epsilon is not its history's is refused too, so no file can
 * claim to have spent less than it did.
 */
#ifndef CG_PRIVACY_H
#define CG_PRIVACY_H

#include <stdint.h>

struct cJSON;

/* Distinct (sigma, q) runs a history holds at most. */
#define CG_DP_MAX_HISTORY 256

struct cg_dp_run {
	double sigma, q;
	uint64_t steps;
};

struct cg_dp {
	double delta;
	double epsilon; /* of the history at delta */
	struct cg_dp_run hist[CG_DP_MAX_HISTORY];
	int nhist;
	/* an update's release: clip > 0 where it has one */
	double clip;
	struct cg_dp_run release;
};

/*
 * A worker's share of the noise under secure aggregation (cg-train-step
 * --mask --dp-clip --dp-noise): its masked update, of weight 1, was
 * clipped to L2 norm clip and given noise of std sigma clip / sqrt(peers),
 * so that the mean of the round's peers carries std sigma clip / peers
 * and no one sees it without.  The manifest's "dp_share": {"clip": C,
 * "sigma": S, "peers": W}.
 */
struct cg_dp_share {
	double clip, sigma; /* clip > 0; sigma 0: clipped, no noise */
	int peers;
};

/* man's "dp_share" into *s (unless NULL).  1 when present and sound,
 * 0 when absent, -1 with a message ("dp_share: clip -1 is not in (0,
 * 1e+30]"). */
int cg_dp_share_read(const struct cJSON *man, struct cg_dp_share *s);
/* s as man's "dp_share".  0, or -1 with a message. */
int cg_dp_share_write(struct cJSON *man, const struct cg_dp_share *s);

/*
 * man's "dp" into *dp (unless NULL: checked only).  1 when present and
 * sound, 0 when absent (*dp zeroed), -1 with a message ("dp: sigma -1 is
 * not in (0, 1e+06]", "dp: epsilon 0.5 is not its history's 3.2") when
 * not sound.
 */
int cg_dp_read(const struct cJSON *man, struct cg_dp *dp);

/* Append steps releases of (sigma, q) to dp's history (merged with the
 * last run when of the same sigma and q) and recompute its epsilon.  0,
 * or -1 with a message: the history is full. */
int cg_dp_append(struct cg_dp *dp, double sigma, double q, uint64_t steps);

/* The releases dp's history counts (the rounds, at one a round). */
uint64_t cg_dp_rounds(const struct cg_dp *dp);

/* dp as man's "dp", replacing any.  0, or -1 with a message. */
int cg_dp_write(struct cJSON *man, const struct cg_dp *dp);

#endif
