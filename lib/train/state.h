/*
 * train/state.h - a worker's state file (kind "state"): named tensors kept
 * between calls, and the call they belong to.
 *
 * A state is a list of named tensors ("cursor" u64[1], "opt.t" u64[1],
 * "opt.m" and "opt.v" f32[P]; error-feedback residuals and low-rank
 * factors are more names), got and put by name, so that keeping one more
 * thing between calls changes no struct.  A state also names what it was
 * written with: the emit kind, the shard, the model it was computed from,
 * and the output written beside it; cg_state_check() refuses a state that
 * does not belong to the call about to use it (another shard, an older
 * model, an output that is not the one written with it).  The rule is in
 * state.c and in cg-train-step(1), FILES.
 */
#ifndef CG_STATE_H
#define CG_STATE_H

#include <stdint.h>

#include "cg.h"
#include "data/shard.h"
#include "model/model.h"

struct cg_state;

/* A new empty state (no tensors, no owner), or NULL with a message. */
struct cg_state *cg_state_new(void);
void cg_state_free(struct cg_state *st);

/*
 * Read the state file path into *out.  A path that does not exist gives
 * an empty state (cg_state_loaded() is 0) and returns 0.  A file that is
 * not a state, or whose record of what it belongs to is missing or
 * malformed, is -1 with a message naming the file; *out is then NULL.
 * The caller frees *out.
 */
int cg_state_read(struct cg_state **out, const char *path);
/* The same for the file f already read (taken: freed on error too);
 * display names it in messages. */
int cg_state_from_file(struct cg_state **out, struct cg_file *f,
                       const char *display);
/*
 * Whether f is a state file cg_state_from_file takes (kind "state", a
 * whole record of the call that wrote it), f left as it is: what
 * --verify asks of a state.  Returns 0, or -1 with a message that does
 * not name the file.
 */
int cg_state_file_check(const struct cg_file *f);
/* 1 when st was read from a file, else 0. */
int cg_state_loaded(const struct cg_state *st);

/*
 * The tensor called name, which must hold n elements of dtype dt: 1 with
 * *data pointing at them (owned by st, valid until st is freed), 0 when
 * st has no such tensor, -1 with a message when it has another dtype or
 * element count.
 */
int cg_state_get(const struct cg_state *st, const char *name, enum cg_dtype dt,
                 uint64_t n, void **data);
/*
 * The tensor called name, of n elements of dtype dt, made zeroed when st
 * has none; its data (owned by st, valid until st is freed).  NULL with a
 * message when st holds it with another dtype or count, or on failure.
 * Tensors are written in the order they were first put (or read).
 */
void *cg_state_put(struct cg_state *st, const char *name, enum cg_dtype dt,
                   uint64_t n);
/* One u64 by name: cg_state_get and cg_state_put for u64[1]. */
int cg_state_get_u64(const struct cg_state *st, const char *name, uint64_t *v);
int cg_state_put_u64(struct cg_state *st, const char *name, uint64_t v);

/*
 * The call a state belongs to, by identities rather than pointers (a
 * model trained in place is no longer the one the call started from).
 * emit is "grad", "delta" or "model"; shard is cg_state_identity of the
 * shard's file; model is cg_model_digest and step of the model the call
 * starts from; output is the output's path as given ("-": standard
 * output); for "model", next is the model written there, the one the
 * next call starts from.
 */
struct cg_state_call {
	const char *emit;
	unsigned char shard[32];
	unsigned char model[32];
	uint64_t model_step;
	const char *output;
	int has_next;
	unsigned char next[32];
	uint64_t next_step;
	/* A distilled call: cg_model_digest of its teacher. */
	int has_teacher;
	unsigned char teacher[32];
};

/* Fill c for a call of emit on shard s from model m to output (before
 * the call runs; has_next is 0). */
void cg_state_call_init(struct cg_state_call *c, const char *emit,
                        const struct cg_shard *s, const struct cg_model *m,
                        const char *output);
/* Record m, the model a "model" call is about to write, as c's next. */
void cg_state_call_next(struct cg_state_call *c, const struct cg_model *m);
/* Record t as the teacher of a distilled call. */
void cg_state_call_teacher(struct cg_state_call *c, const struct cg_model *t);

/*
 * Whether st, read from path, may be used by the call c (c's output and
 * next are not used): -1 with a one-line message that says what to do
 * when it may not, 0 when it may or st is empty.  The rule:
 *   - the emit kind and the shard are the ones the state was written with;
 *   - the teacher is the one the state was written with (the same
 *     digest), or there is none for both;
 *   - "model": c's model is the one the state was written beside (same
 *     digest and step): the output of a call is the next call's model;
 *   - "grad", "delta": c's model is the model the state was computed from
 *     or one of a later step (DiLoCo: the coordinator's next model); a
 *     model of a lower step, or of the same step and another digest, is
 *     refused;
 *   - the file at the output path the state names, if there is one, is
 *     the output written with the state (SHA-256 of its bytes); if not, a
 *     call was cut short between renaming the one and the other.  An
 *     output that is gone (the coordinator took it) or that went to a
 *     stream is not checked.
 */
int cg_state_check(const struct cg_state *st, const char *path,
                   const struct cg_state_call *c);

/*
 * Write st into o (opened with cg_out_open, not committed), recording c as
 * the call it belongs to.  output is the output written beside it, which
 * must be written in full: it is flushed and fsynced here and, a regular
 * file, its bytes are hashed (a stream has no digest).  The caller then
 * commits both, the output first (cg_out_commit_all).  Returns 0 or -1
 * with a message.
 */
int cg_state_write_to(struct cg_state *st, struct cg_out *o,
                      const struct cg_state_call *c, struct cg_out *output);

/*
 * The identity of a file already read: SHA-256 over its manifest (less
 * the tensor table, printed unformatted) and, for each tensor in order,
 * its name, dtype, shape and member digest.  Every member digest is
 * verified on reading, so equal identities mean equal content, whatever
 * the compression.  What a state names a shard by.
 */
void cg_state_identity(const struct cg_file *f, unsigned char out[32]);

/*
 * The split a shard file f is one shard of, as cg-shard records it: the
 * SHA-256 of its "shard" record less "index" and "holdout", and of its
 * "source", printed unformatted, into out, and its index into *index
 * (-1: the hold-out).  Two shards of one split share no example, so
 * their DP-SGD releases compose in parallel (model/privacy.h).  1 with
 * out set, 0 for a shard without such a record (out untouched).
 */
int cg_state_split(const struct cg_file *f, unsigned char out[32], int *index);

/* The identity (cg_state_identity) of st as it was read, before a call
 * changed it: 1 with out set, or 0 for a state that was not read from a
 * file (out untouched).  Take it before the call changes st's tensors. */
int cg_state_digest(const struct cg_state *st, unsigned char out[32]);

#endif
