/*
 * atomic.c - output files that appear whole or not at all.
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
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cg.h"

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
 * A file mapped for reading (lib/container.c) that another process
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
		/* Leave an inherited "ignore" alone (nohup, background jobs). */
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
	snprintf(o->tmp, n, "%s/.%s.XXXXXX", dir, base);
	track(o->tmp, 1);
	if ((o->fd = mkstemp(o->tmp)) < 0) {
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

int
cg_out_commit(struct cg_out *o)
{
	char *d = NULL;
	int dfd;

	if (o->direct) {
		int rc = fclose(o->fp);
		o->fp = NULL;
		o->fd = -1;
		if (rc != 0)
			cg_seterr("%s: write failed: %s", o->path,
				  strerror(errno));
		free(o->path);
		o->path = NULL;
		o->direct = 0;
		return rc != 0 ? -1 : 0;
	}
	if (o->tmp == NULL) { /* stdout */
		if (o->fp && fflush(o->fp) != 0)
			return cg_seterr("standard output: %s", strerror(errno));
		return 0;
	}
	if (fflush(o->fp) != 0 || fsync(o->fd) != 0) {
		cg_seterr("%s: write failed: %s", o->path, strerror(errno));
		goto fail;
	}
	if (fclose(o->fp) != 0) {
		o->fp = NULL;
		o->fd = -1;
		cg_seterr("%s: write failed: %s", o->path, strerror(errno));
		goto fail;
	}
	o->fp = NULL;
	o->fd = -1;
	if (rename(o->tmp, o->path) != 0) {
		cg_seterr("%s: cannot rename into place: %s", o->path,
			  strerror(errno));
		goto fail;
	}
	track(o->tmp, 0);
	if ((d = strdup(o->path)) != NULL &&
	    (dfd = open(dirname(d), O_RDONLY | O_DIRECTORY)) >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(d);
	free(o->tmp);
	free(o->path);
	o->tmp = o->path = NULL;
	return 0;
fail:
	cg_out_abort(o);
	return -1;
}

void
cg_out_abort(struct cg_out *o)
{
	if (o->direct) {
		/* Written in place: nothing to remove. */
		if (o->fp)
			fclose(o->fp);
		else if (o->fd >= 0)
			close(o->fd);
		free(o->path);
		memset(o, 0, sizeof(*o));
		o->fd = -1;
		return;
	}
	if (o->tmp == NULL) {
		free(o->path);
		o->path = NULL;
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
