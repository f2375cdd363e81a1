/*
 * data/reread.h - an input read again: once through as a stream when a
 * dataset is loaded, then at the offsets of its bytes when each shard is
 * written (a dataset's fetch, data/dataset.h), so that its payload is
 * never held whole.
 */
#ifndef CG_REREAD_H
#define CG_REREAD_H

#include <stddef.h>
#include <stdint.h>

struct cg_reread;

/*
 * Open path ("-": standard input, which is first copied to an unlinked
 * temporary file in $TMPDIR, else /tmp: it costs disk the size of the
 * input as it came, not memory).  name names it in messages.  Offsets
 * are those of the input's bytes, decompressed where it is gzip.
 * Returns a new reread the caller frees (cg_reread_free), or NULL with a
 * message naming name.
 */
struct cg_reread *cg_reread_open(const char *path, const char *name);

/*
 * A new descriptor of r's input at its start, for the first pass (plain
 * or gzip bytes as they are on disk; the caller closes it).  While it is
 * read, r is not (the two may share a file position).  -1 with a
 * message.
 */
int cg_reread_fd(struct cg_reread *r);

/*
 * Bytes [off, off + n) of r's input into buf: 0, or -1 with a message,
 * "NAME: changed while it was read" when the input is no longer the one
 * first opened (its size, time or inode differ, or it ends early).  A
 * gzip input is inflated at its first read into an unlinked temporary
 * file in $TMPDIR (else /tmp) that then stands for it; after
 * cg_reread_rest it is instead decompressed as it is read: forward from
 * where the last read ended, and from its start again for an offset
 * before that, so read it in increasing order.
 */
int cg_reread_at(struct cg_reread *r, uint64_t off, void *buf, size_t n);

/*
 * Close r's descriptors until its next read, which opens its path again
 * and checks that it is the same file (for inputs that are many files;
 * standard input's copy stays open).
 */
void cg_reread_rest(struct cg_reread *r);

/* Release r; r may be NULL. */
void cg_reread_free(struct cg_reread *r);

#endif
