/*
 * data/shard.h - reading a data shard: every count, offset and condition
 * checked before a pointer is handed out, so that training code can index
 * it without further checks.
 */
#ifndef CG_SHARD_H
#define CG_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "data/dataset.h"

/*
 * A data shard read back and validated: every pointer is into file's
 * tensors and manifest, valid until cg_shard_free().  Guarantees: offset[0]
 * is 0, offsets never decrease and offset[n] == payload_bytes; every cond
 * is below nconditions; index strictly increases; for images every payload
 * is height * width * channels bytes; prompt_len, present in text shards
 * only, never exceeds its example's payload length.
 */
struct cg_shard {
	struct cg_file *file;
	uint64_t n;
	const uint32_t *cond;       /* [n] */
	const uint64_t *index;      /* [n] */
	const uint64_t *offset;     /* [n + 1] */
	const uint8_t *payload;     /* [payload_bytes] */
	const uint32_t *prompt_len; /* [n], or NULL: no prompts */
	uint64_t payload_bytes;
	const char **conditions; /* [nconditions] */
	size_t nconditions;
	enum cg_payload kind;
	uint32_t height, width, channels; /* images only, else 0 */
	int shard, nshards;               /* shard is -1 for a holdout */
	uint64_t source_examples;         /* examples in the split input */
};

/*
 * Read path ("-": standard input) and validate it as a data shard.
 * Returns a shard the caller frees with cg_shard_free, or NULL with a
 * message naming the file and what is wrong.
 */
struct cg_shard *cg_shard_open(const char *path);

/*
 * cg_shard_open, but the payload's digest, the bulk of a shard's bytes,
 * is verified on a thread of its own while the caller goes on
 * (cg_file_read_late): every other tensor's digest and every count,
 * offset, condition and index are checked before this returns, as ever,
 * and the payload is bytes of pixels or text, which the trainers only
 * compute with.  Nothing made from the payload may leave the process
 * before cg_shard_verified(s, 1) has returned 0: written to a stream, or
 * renamed into place (lib/core/atomic.h).
 */
struct cg_shard *cg_shard_open_late(const char *path);

/*
 * cg_shard_open_late, but a compressed shard (or one from a pipe) is
 * first decompressed into a temporary file and mapped from there
 * (cg_file_read_spooled), as a plain shard is mapped where it lies: its
 * payload can then be given back a batch at a time (cg_shard_page_out)
 * instead of being held whole.  What a trainer under a memory budget
 * opens.
 */
struct cg_shard *cg_shard_open_spooled(const char *path);

/*
 * Whether s's payload is verified (cg_shard_open_late; any other shard
 * is): 0 yes, -1 no with the message "tensor payload: digest mismatch
 * (file truncated or altered)" (not naming the file); with wait 0, 1
 * while the thread is still at it.
 */
int cg_shard_verified(const struct cg_shard *s, int wait);

/*
 * Validate an already read file as a data shard.  Takes ownership of f in
 * every case (it is freed on failure).  display names the file in
 * messages.  Returns the shard or NULL.
 */
struct cg_shard *cg_shard_from_file(struct cg_file *f, const char *display);

/*
 * Whether f is a data shard cg_shard_from_file takes (the same checks of
 * its manifest and of every offset, condition and index), f left as it
 * is: what --verify asks of a shard.  Returns 0, or -1 with a message
 * that does not name the file.
 */
int cg_shard_file_check(const struct cg_file *f);

/*
 * Give back this process's copy of s's payload pages, where the payload
 * lies in the shard's mapped file (a plain file: cg_file_page_out); the
 * pointers stay valid, and the next example read maps its bytes again.
 * A trainer that calls it after each step holds a batch of the payload,
 * not the shard.  Returns 1, or 0 where the payload has memory of its
 * own (a compressed shard or standard input not opened with
 * cg_shard_open_spooled), which stays.
 */
int cg_shard_page_out(const struct cg_shard *s);

/* Release s and its file; s may be NULL. */
void cg_shard_free(struct cg_shard *s);

/* Example i's payload (i < s->n); its length into *len. */
static inline const uint8_t *
cg_shard_example(const struct cg_shard *s, uint64_t i, uint64_t *len)
{
	*len = s->offset[i + 1] - s->offset[i];
	return s->payload + s->offset[i];
}

#endif
