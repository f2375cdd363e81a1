/*
 * core/atomic.h - outputs that appear whole or not at all.
 */
#ifndef CG_ATOMIC_H
#define CG_ATOMIC_H

#include <stddef.h>
#include <stdio.h>

/*
 * Atomic output: a temporary file .NAME.XXXXXX beside path, renamed over
 * it on commit.  Temporaries still open are removed on SIGINT, SIGTERM,
 * SIGHUP and SIGPIPE (the handler is installed on first use).  A writer
 * holds a lock (flock) on its temporary until it is renamed or removed,
 * and opening path first removes the temporaries of path whose lock is
 * free: those a killed writer left (SIGKILL, a crash), never a live
 * writer's.  For "-", fp is stdout and commit only flushes.  A path that
 * exists and is not a regular file (a device such as /dev/null, a FIFO)
 * is opened and written directly, never replaced; a terminal is refused
 * there too.
 */
struct cg_out {
	FILE *fp;
	char *path;
	char *tmp;
	int fd;
	int direct;  /* path is not a regular file: written in place */
	int flushed; /* cg_out_flush done: the bytes are on disk */
	/* cg_out_write: bytes written, and of those handed to the disk */
	unsigned long long written, started;
};

int cg_out_open(struct cg_out *o, const char *path);
/*
 * Write all of buf [n] to o's descriptor (past what its stream holds:
 * flush fp first if it was written to), a short write continued and
 * EINTR retried.  A temporary's pages are handed to the disk as they
 * come, so that the commit's fsync has little left to wait for.
 * Returns 0, or -1 with a message (errno kept).
 */
int cg_out_write(struct cg_out *o, const void *buf, size_t n);
/* Flush and fsync what was written (the temporary stays, unrenamed; no
 * more may be written after it).  Idempotent.  Returns 0 or -1. */
int cg_out_flush(struct cg_out *o);
/*
 * Commit outs[0..n) together: flush and fsync every one, then rename each
 * into place in order, then fsync their directories.  A failure before
 * the renames leaves none renamed; a failed rename leaves those before it
 * in place.  Every temporary not renamed is removed.  Returns 0 or -1.
 */
int cg_out_commit_all(struct cg_out *const *outs, size_t n);
/* cg_out_commit_all of one output. */
int cg_out_commit(struct cg_out *o);
/* Remove the temporary; safe after commit and on a zeroed struct. */
void cg_out_abort(struct cg_out *o);

#endif
