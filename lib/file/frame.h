/*
 * file/frame.h - tensors framed one after another on a byte stream.
 *
 * The stages of a pipeline (lib/train/pipe.c) hand each other
 * activations and their gradients as a stream of frames over a pipe, a
 * FIFO or ssh: no container, no seeking, one frame read as soon as it
 * is whole.  A frame is
 *
 *     "CGF1"  u8 name length (1..CG_FRAME_NAME)  the name ([a-z0-9._])
 *     u8 dtype (enum cg_dtype)  u8 ndim (0..CG_FRAME_DIMS)  u16 zero
 *     u64 shape[ndim]  u64 bytes  the payload [bytes]
 *
 * every word little-endian, the payload the dtype's words (as a cg file
 * stores a tensor).  A reader treats the stream as hostile: the magic,
 * the name, the dtype, the shape and the byte count are checked against
 * each other and against the caller's limit before anything is
 * allocated, and a stream that ends inside a frame is "truncated".
 */
#ifndef CG_FRAME_H
#define CG_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

#define CG_FRAME_NAME 31
#define CG_FRAME_DIMS 4

struct cg_frame {
	char name[CG_FRAME_NAME + 1];
	enum cg_dtype dtype;
	int ndim;
	uint64_t shape[CG_FRAME_DIMS];
	uint64_t nbytes;
	void *data; /* [nbytes] host words, owned; NULL when nbytes is 0 */
};

/*
 * Write one frame to fd: name, dtype dt, shape [ndim] and the values
 * data (host words; nbytes as dt and shape say).  A short write is
 * continued, EINTR retried.  Returns 0, or -1 with a message (a bad
 * name or shape, the peer gone: "pipe: ...").
 */
int cg_frame_write(int fd, const char *name, enum cg_dtype dt, int ndim,
                   const uint64_t *shape, const void *data);

/*
 * Read the next frame of fd into *f (cleared first; free it with
 * cg_frame_clear), its payload at most max_bytes.  Returns 1 with a
 * frame, 0 at the end of the stream before a frame's first byte, -1
 * with a message (what was wrong with it).
 */
int cg_frame_read(int fd, struct cg_frame *f, uint64_t max_bytes);

/*
 * Read the next frame of fd, which must be called name, of dtype dt and
 * shape [ndim], into out (nbytes of them: nothing is allocated).
 * Returns 0, or -1 with a message naming what came instead (the end of
 * the stream too).
 */
int cg_frame_expect(int fd, const char *name, enum cg_dtype dt, int ndim,
                    const uint64_t *shape, void *out);

void cg_frame_clear(struct cg_frame *f);

#endif
