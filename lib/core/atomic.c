/*
 * core/atomic.c - output files that appear whole or not at all.
 *
 * A file is written under a temporary name in its destination directory
 * (rename is atomic only within one file system), flushed, fsynced, renamed
 * over the final name, and the directory is fsynced.  Temporaries still open
 * when SIGINT, SIGTERM, SIGHUP or SIGPIPE arrives are unlinked by the handler
 * before the signal is re-raised, so an interrupted run leaves nothing.
 * A path that exists and is not a regular file (/dev/null, a FIFO) is
 * opened and written in place instead: renaming over it would replace it.
 * SIGBUS from a mapped input that shrank is a failure like a bad input:
 * the temporaries go, one line, exit 1.
 *
 * Several outputs of one call (an output and its state) are committed
 * together: every one is written and fsynced under its temporary name
 * before the first is renamed, then each is renamed in turn, then each
 * directory is fsynced.  A crash can then leave only the first renamed
 * and not the rest, never a file renamed before its bytes are on disk.
 *
 * SIGKILL cannot be caught: a killed writer leaves its temporary.  Each
 * writer holds a lock (flock) on its temporary while it lives, and opening
 * an output removes the temporaries of the same target whose lock is free,
 * those of dead writers (as git removes a stale lock file, but without
 * guessing from its age): a live writer's temporary is never removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic.h"
#include "core/error.h"
#include "core/util.h"

/* Temporaries that exist now; read by the signal handler, so plain
 * pointers to strings that stay alive until the slot is cleared. */
#define MAXTMP 256
static char *volatile tmps[MAXTMP];
static int handler_installed;

static void
on_signal(int sig)
{
	for (int i = 0; i < MAXTMP; i++)
		if (tmps[i])
			unlink(tmps[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * A file mapped for reading (lib/file/container.c) that another process
 * truncates turns a read of the lost pages into SIGBUS: say so in one
 * line, remove the temporaries and exit 1, as for any bad input.
 */
static void
on_sigbus(int sig)
{
	static const char msg[] = ": an input file shrank while it was being "
	                          "read\n";
	const char *p = program_invocation_short_name;

	(void)sig;
	for (int i = 0; i < MAXTMP; i++)
		if (tmps[i])
			unlink(tmps[i]);
	/* If the message cannot be written, exit 1 all the same. */
	ssize_t w = write(STDERR_FILENO, p, strlen(p));
	if (w >= 0)
		w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)w;
	_exit(1);
}

void
cg_guard_mapped_reads(void)
{
	static int done;
	struct sigaction sa;

	if (done)
		return;
	done = 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigbus;
	sigfillset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

static void
install_handler(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
	struct sigaction sa;

	if (handler_installed)
		return;
	handler_installed = 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;
		/* Leave an inherited "ignore" alone (nohup, background jobs).
		 */
		if (sigaction(sigs[i], NULL, &old) == 0 &&
		    old.sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
}

static void
track(char *tmp, int on)
{
	sigset_t all, old;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	for (int i = 0; i < MAXTMP; i++) {
		if (on && tmps[i] == NULL) {
			tmps[i] = tmp;
			break;
		}
		if (!on && tmps[i] == tmp) {
			tmps[i] = NULL;
			break;
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* ------------------------------------------------- stale temporaries */

/*
 * Whether name is a temporary of base: "." base "." and the six letters
 * or digits mkstemp puts in place of XXXXXX.
 */
static int
is_temporary_of(const char *name, const char *base)
{
	size_t n = strlen(base);

	if (name[0] != '.' || strncmp(name + 1, base, n) != 0 ||
	    name[n + 1] != '.' || strlen(name + n + 2) != 6)
		return 0;
	for (const char *p = name + n + 2; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			return 0;
	return 1;
}

/*
 * Remove the temporaries of dir/base whose writer is gone.  A writer holds
 * flock(LOCK_EX) on its temporary from just after creating it until it is
 * renamed or removed, and the kernel drops the lock when the process
 * dies, however it dies: a temporary whose lock can be taken has no
 * writer.  The lock is taken on a descriptor of our own (flock locks
 * belong to the open file, so a temporary of this very process stays
 * locked against it), the name is checked to still be that file, and only
 * then unlinked, lock held.  The writer checks, once locked, that its
 * name is still its file (see open_temporary), so a temporary unlinked in
 * the instant between mkstemp and flock is never written.  Failures here
 * are not errors: what cannot be removed stays.
 */
static void
remove_stale(const char *dir, const char *base)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		struct stat a, b;
		int fd;

		if (!is_temporary_of(e->d_name, base))
			continue;
		fd = openat(dirfd(d), e->d_name,
		            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (fstat(fd, &a) == 0 && S_ISREG(a.st_mode) &&
		    flock(fd, LOCK_EX | LOCK_NB) == 0 &&
		    fstatat(dirfd(d), e->d_name, &b, AT_SYMLINK_NOFOLLOW) ==
		        0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			unlinkat(dirfd(d), e->d_name, 0);
		close(fd);
	}
	closedir(d);
}

/*
 * Make and lock the temporary o->tmp (a mkstemp template): returns its
 * descriptor, or -1 with errno set.  A temporary that another writer's
 * cleanup locked or removed before we locked it is let go (the cleanup
 * removes it) and another name is drawn.
 */
static int
open_temporary(char *tmp)
{
	size_t n = strlen(tmp);

	for (int tries = 0; tries < 16; tries++) {
		struct stat a, b;
		int fd;

		memcpy(tmp + n - 6, "XXXXXX", 6);
		if ((fd = mkstemp(tmp)) < 0)
			return -1;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 &&
		    lstat(tmp, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			return fd;
		close(fd);
	}
	errno = EAGAIN;
	return -1;
}

/* ------------------------------------------------------------ outputs */

int
cg_out_open(struct cg_out *o, const char *path)
{
	char *d = NULL, *b = NULL;
	mode_t mask;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	if (strcmp(path, "-") == 0) {
		if (isatty(STDOUT_FILENO))
			return cg_seterr("refusing to write binary data to a "
			                 "terminal (use -o FILE or a pipe)");
		o->fp = stdout;
		o->fd = STDOUT_FILENO;
		return 0;
	}
	/*
	 * A device, a FIFO or a socket (/dev/null, /dev/stdout, a named
	 * pipe) is written as it is: a temporary renamed over it would
	 * replace it with a regular file.
	 */
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode))
			return cg_seterr("%s: is a directory", path);
		if ((o->path = strdup(path)) == NULL)
			goto oom;
		o->direct = 1;
		if ((o->fd = open(path, O_WRONLY)) < 0) {
			cg_seterr("%s: %s", path, strerror(errno));
			goto fail;
		}
		if (isatty(o->fd)) {
			cg_seterr("refusing to write binary data to a "
			          "terminal (%s)",
			          path);
			goto fail;
		}
		if ((o->fp = fdopen(o->fd, "wb")) == NULL) {
			cg_seterr("%s: %s", path, strerror(errno));
			goto fail;
		}
		return 0;
	}
	install_handler();
	if ((o->path = strdup(path)) == NULL || (d = strdup(path)) == NULL ||
	    (b = strdup(path)) == NULL)
		goto oom;
	const char *dir = dirname(d), *base = basename(b);
	size_t n = strlen(dir) + strlen(base) + 16;
	if ((o->tmp = malloc(n)) == NULL)
		goto oom;
	remove_stale(dir, base);
	snprintf(o->tmp, n, "%s/.%s.XXXXXX", dir, base);
	track(o->tmp, 1);
	if ((o->fd = open_temporary(o->tmp)) < 0) {
		track(o->tmp, 0);
		cg_seterr("%s: cannot create: %s", path, strerror(errno));
		goto fail;
	}
	mask = umask(0);
	umask(mask);
	fchmod(o->fd, 0666 & ~mask);
	if ((o->fp = fdopen(o->fd, "wb")) == NULL) {
		cg_seterr("%s: %s", path, strerror(errno));
		goto fail;
	}
	free(d);
	free(b);
	return 0;
oom:
	cg_seterr("out of memory");
fail:
	free(d);
	free(b);
	cg_out_abort(o);
	return -1;
}

/*
 * A temporary's writeback is started a step at a time as it is written,
 * so that the disk works while the rest is written and the fsync waits
 * for the last step only (a 16 MB model: write and fsync 33 ms in 10 KB
 * writes, 16 ms in 64 KB writes with writeback started every MiB).
 */
#define WRITEBACK_STEP (1u << 20)

int
cg_out_write(struct cg_out *o, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(o->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;
			cg_seterr("%s: write failed: %s",
			          o->path ? o->path : "standard output",
			          strerror(e));
			errno = e;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		o->written += (unsigned long long)w;
	}
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
	/* Only a temporary is synced later; a failure here is not one:
	 * the fsync writes what this did not. */
	if (o->tmp != NULL && o->written - o->started >= WRITEBACK_STEP) {
		sync_file_range(o->fd, (off_t)o->started,
		                (off_t)(o->written - o->started),
		                SYNC_FILE_RANGE_WRITE);
		o->started = o->written;
	}
#endif
	return 0;
}

int
cg_out_flush(struct cg_out *o)
{
	if (o->flushed)
		return 0;
	if (o->tmp == NULL && !o->direct) { /* stdout */
		if (o->fp && fflush(o->fp) != 0)
			return cg_seterr("standard output: %s",
			                 strerror(errno));
		o->flushed = 1;
		return 0;
	}
	/* A device or a FIFO is flushed, not synced. */
	if (fflush(o->fp) != 0 || (!o->direct && fsync(o->fd) != 0))
		return cg_seterr("%s: write failed: %s", o->path,
		                 strerror(errno));
	o->flushed = 1;
	return 0;
}

/* Close o's stream after its rename (or for good, direct); 0 or -1. */
static int
out_close(struct cg_out *o)
{
	int rc = fclose(o->fp);

	o->fp = NULL;
	o->fd = -1;
	if (rc != 0)
		return cg_seterr("%s: write failed: %s", o->path,
		                 strerror(errno));
	return 0;
}

/* fsync the directory that holds path (best effort: not every file
 * system can). */
static void
sync_dir(const char *path)
{
	char *d = strdup(path);
	int dfd;

	if (d != NULL &&
	    (dfd = open(dirname(d), O_RDONLY | O_DIRECTORY)) >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(d);
}

/* Whether paths a and b lie in the same directory (as named). */
static int
same_dir(const char *a, const char *b)
{
	char *x = strdup(a), *y = strdup(b);
	int same = x && y && strcmp(dirname(x), dirname(y)) == 0;

	free(x);
	free(y);
	return same;
}

int
cg_out_commit_all(struct cg_out *const *outs, size_t n)
{
	size_t i;
	int rc = 0;

	/* 1: every file on disk under its temporary name. */
	for (i = 0; i < n; i++)
		if (cg_out_flush(outs[i]) != 0)
			goto fail;
	/*
	 * 2: the renames, in order.  The streams stay open, temporaries
	 * locked, until renamed: a cleanup by another writer never takes
	 * one that is about to be renamed.
	 */
	for (i = 0; i < n; i++) {
		struct cg_out *o = outs[i];

		if (o->tmp == NULL) { /* stdout or in place */
			if (o->direct && out_close(o) != 0)
				goto fail;
			continue;
		}
		if (rename(o->tmp, o->path) != 0) {
			cg_seterr("%s: cannot rename into place: %s", o->path,
			          strerror(errno));
			goto fail;
		}
		track(o->tmp, 0);
		free(o->tmp);
		o->tmp = NULL;
		if (out_close(o) != 0)
			rc =
			    -1; /* renamed and synced: report it all the same */
	}
	/* 3: the directories, each once. */
	for (i = 0; i < n; i++) {
		int seen = 0;

		if (outs[i]->path == NULL || outs[i]->direct)
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = outs[j]->path && !outs[j]->direct &&
			       same_dir(outs[i]->path, outs[j]->path);
		if (!seen)
			sync_dir(outs[i]->path);
	}
	for (i = 0; i < n; i++)
		cg_out_abort(outs[i]);
	return rc;
fail:
	/* What is renamed stays; the rest is removed. */
	for (i = 0; i < n; i++)
		cg_out_abort(outs[i]);
	return -1;
}

int
cg_out_commit(struct cg_out *o)
{
	return cg_out_commit_all(&o, 1);
}

void
cg_out_abort(struct cg_out *o)
{
	if (o->tmp == NULL) {
		/* stdout, written in place, committed or zeroed: nothing to
		 * remove; a file written in place is closed. */
		if (o->direct && o->fp)
			fclose(o->fp);
		else if (o->direct && o->fd >= 0)
			close(o->fd);
		free(o->path);
		memset(o, 0, sizeof(*o));
		o->fd = -1;
		return;
	}
	if (o->fp)
		fclose(o->fp);
	else if (o->fd >= 0)
		close(o->fd);
	unlink(o->tmp);
	track(o->tmp, 0);
	free(o->tmp);
	free(o->path);
	memset(o, 0, sizeof(*o));
	o->fd = -1;
}
