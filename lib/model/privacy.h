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
 * Example-level DP-SGD (cg-train-step --example-clip) records the shard
 * its release trained on in the release:
 *
 *     "release": {"clip": C, "sigma": S, "q": Q, "steps": T,
 *                 "shard": {"sha256": HEX, "split": HEX, "index": I}}
 *
 * sha256 the shard file's identity, split that of the cut it is one
 * shard of (cg-shard's record less the index: two shards of one split
 * hold no example in common), I its index there.  Releases on disjoint
 * shards compose in parallel (McSherry 2009): a mean of W such updates
 * of one model spends, for any one example, what the one worker whose
 * shard holds it spent, so at most the pointwise maximum of the
 * workers' RDP curves at every order (Mironov 2017).  A reduction of
 * them records
 *
 *     "release": {"clip": C, "max": [{"sigma", "q", "steps", "shard"},
 *                                    ...]}
 *
 * and its history ends in the item {"max": [{"sigma", "q", "steps"},
 * ...]}: the maximum of those runs' curves, added to the history's sum
 * at each order.  A max item keeps only the runs no other one bounds at
 * every order, sorted (so the same releases give the same item); where
 * one is left it is a plain run, merged with the run before it.  The
 * next round's worker adds its own release after the whole record: for
 * an example of its shard that bounds what the rounds spent on it,
 * since every earlier round's item bounds that round's spend on any
 * shard.
 *
 * Every reader treats the record as hostile: every figure is checked for
 * its range (a sigma not positive, a q outside (0, 1], a nan anywhere is
 * refused) and the epsilon is recomputed from the history: a record
 * whose epsilon is not its history's is refused too, so no file can
 * claim to have spent less than it did.  What no reader can check is
 * the noise itself: a worker that claims a sigma it did not add, or a
 * rate its shard does not give, is taken at its word (its signature,
 * --trust, says who gave it).
 */
#ifndef CG_PRIVACY_H
#define CG_PRIVACY_H

#include <stdint.h>

struct cJSON;

/* Runs a history holds at most, the runs of its max items included. */
#define CG_DP_MAX_HISTORY 512
/* Releases a parallel one (a max item) holds at most: workers a round. */
#define CG_DP_MAX_BRANCHES 256

struct cg_dp_run {
	double sigma, q;
	uint64_t steps;
	int alt; /* in a history: 1 where the next run is another one of
	          * the same max item */
};

/* The shard a DP-SGD release trained on (hex digests, NUL-ended). */
struct cg_dp_shard {
	char sha256[65], split[65];
	int index;
};

struct cg_dp {
	double delta;
	double epsilon; /* of the history at delta */
	struct cg_dp_run hist[CG_DP_MAX_HISTORY];
	int nhist;
	/* an update's release: clip > 0 where it has one, of nrelease runs
	 * (1, or the runs of a parallel release), each of the shard of the
	 * same index where has_shard */
	double clip;
	struct cg_dp_run release[CG_DP_MAX_BRANCHES];
	int nrelease, has_shard;
	struct cg_dp_shard shard[CG_DP_MAX_BRANCHES];
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
 * last run when of the same sigma and q and no max item's) and recompute
 * its epsilon.  0, or -1 with a message: the history is full. */
int cg_dp_append(struct cg_dp *dp, double sigma, double q, uint64_t steps);

/* Append the parallel release of runs r [n] (n >= 1) to dp's history: the
 * max item of those no other bounds (a plain run where one is left), and
 * recompute its epsilon.  0, or -1 with a message: the history is full,
 * or out of memory. */
int cg_dp_append_max(struct cg_dp *dp, const struct cg_dp_run *r, int n);

/* dp, an update's record, with its release taken off the end of its
 * history, into *base (no release): the record of the model the update
 * was computed from.  0, or -1 with a message: the history does not end
 * with the release, or dp has none. */
int cg_dp_base(const struct cg_dp *dp, struct cg_dp *base);

/* Whether a and b hold the same delta and history: 1 or 0. */
int cg_dp_same_history(const struct cg_dp *a, const struct cg_dp *b);

/*
 * Take the release of in (an update's, of shards) into acc's (the
 * parallel release of a reduction so far, nrelease 0 before the first):
 * its runs and shards after acc's, clip the larger.  0, or -1 with a
 * message when in's shards cannot be told apart from acc's: the same
 * shard ("the shard ... counts already"), another split, or the same
 * index of one split; or there are too many.
 */
int cg_dp_join(struct cg_dp *acc, const struct cg_dp *in);

/* The releases dp's history counts (the rounds, at one a round). */
uint64_t cg_dp_rounds(const struct cg_dp *dp);

/* dp as man's "dp", replacing any.  0, or -1 with a message. */
int cg_dp_write(struct cJSON *man, const struct cg_dp *dp);

#endif
