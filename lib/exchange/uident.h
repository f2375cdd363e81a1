/*
 * exchange/uident.h - an update's identity: what it holds, and which worker
 * computed it from which model; the set of identities a reduction has
 * taken, so that no update counts twice.
 *
 * An update's content is SHA-256 over its tensors' names, dtypes,
 * shapes and member digests: a copy under another name, or the same
 * file sent twice, has the content of the first whatever its manifest
 * says.  Its worker is
 *
 *   - for a reduction (a manifest with "reduce"), the workers it was
 *     made of, as its "contributors" list them: each a worker, the base
 *     its update was computed from and that base's step;
 *   - else, for a signed file, the key that signed it ("key:FP", FP the
 *     key's fingerprint): a signer can write anything in its manifest,
 *     so one key is one worker;
 *   - else the "worker" record cg-train-step writes, {"shard": the
 *     shard's identity (cg_state_identity), "seed": "N"}: the shard and
 *     the seed choose the examples a call sees, and are the same on any
 *     host, run after run ("shard:HEX,seed:N");
 *   - else none: an update written by hand or by an older cg is known by
 *     its content alone.
 *
 * A worker's state file is no part of it: a state belongs to one shard
 * (state.h) and its bytes change with every call, so the same worker
 * called twice from one model would be two.
 *
 * Everything here is read from a file that may be hostile: a "worker"
 * or a "contributors" list that is not of the forms above is refused.
 */
#ifndef CG_UIDENT_H
#define CG_UIDENT_H

#include <stddef.h>
#include <stdint.h>

#include "exchange/update.h"

struct cJSON;

/* "shard:", 64 hex digits, ",seed:", 20 digits, the NUL: 97 bytes at most. */
#define CG_WORKER_MAX 104

/* One worker's update of one base model. */
struct cg_contrib {
	char worker[CG_WORKER_MAX]; /* "key:FP" or "shard:HEX,seed:N" */
	char base[65];              /* hex digest of the base's parameters */
	uint64_t step;              /* the base's step (for messages) */
};

/* An update's identity. */
struct cg_uident {
	unsigned char content[32];
	struct cg_contrib *who; /* [n]: a leaf's one worker, a reduction's
	                         * contributors, or none */
	size_t n;
};

/*
 * Add the record of the worker that computes an update from the shard
 * whose identity is shard (cg_state_identity) with seed to manifest
 * (a grad's or delta's): "worker": {"shard": HEX, "seed": "N"}.  0, or
 * -1 with a message.
 */
int cg_uident_record(struct cJSON *manifest, const unsigned char shard[32],
                     uint64_t seed);

/*
 * The identity of u (its file still whole: before a reducer takes it)
 * into id, which the caller frees with cg_uident_free.  0, or -1 with
 * a message starting with u's name when u's "worker" or "contributors"
 * is malformed.
 */
int cg_uident_of(const struct cg_update *u, struct cg_uident *id);
void cg_uident_free(struct cg_uident *id);

/* The identities taken so far: a table of their contents and their
 * (worker, base) pairs, each with the name of the input that brought
 * it, and every pair once, in the order taken. */
struct cg_uident_slot;
struct cg_uident_set {
	struct cg_uident_slot *slot; /* [cap], open addressing */
	size_t cap, used;
	char **names; /* [nnames]: the inputs' names */
	size_t nnames, capnames;
	char *pending;          /* the name cg_uident_set_reserve copied */
	struct cg_contrib *who; /* [nwho]: every pair taken, once */
	size_t nwho, capwho;
};

void cg_uident_set_init(struct cg_uident_set *s);
void cg_uident_set_free(struct cg_uident_set *s);
/*
 * Whether id, of the input called name, is new to s: 0, or -1 with a
 * one-line message naming both inputs when s holds its content already,
 * or one of its (worker, base) pairs.
 */
int cg_uident_set_check(const struct cg_uident_set *s,
                        const struct cg_uident *id, const char *name);
/* Room in s for id and a copy of name, so that cg_uident_set_add
 * cannot fail: 0, or -1 with a message. */
int cg_uident_set_reserve(struct cg_uident_set *s, const struct cg_uident *id,
                          const char *name);
/* Add id under the name given to the last cg_uident_set_reserve; what s
 * holds already (--allow-duplicates) is kept as it was. */
void cg_uident_set_add(struct cg_uident_set *s, const struct cg_uident *id);
/*
 * A reduction's "contributors" into manifest: every pair of s, sorted
 * (the order of the inputs does not show), or none where s has none.
 * 0, or -1 with a message.
 */
int cg_uident_set_put(const struct cg_uident_set *s, struct cJSON *manifest);

#endif
