/*
 * test_atomic.c - atomic outputs: committing several together, and the
 * removal of stale temporaries.
 *
 * A writer killed by SIGKILL leaves its temporary .NAME.XXXXXX behind;
 * the next writer of NAME removes it.  A temporary whose writer is alive
 * (another process, or this one through another output) is left alone,
 * and so is every file that is not a temporary of NAME.  The writers are
 * child processes that open an output, write to it, report the
 * temporary's name through a pipe and wait to be killed.  Exit 0 pass,
 * 1 fail.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cg.h"

#define TEST_NAME "test_atomic"
#include "check.h"

static char dir[] = "/tmp/test_atomic.XXXXXX";

static int
exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

/* A child that opens path as an output, writes, and waits; its pid, and
 * the temporary's name in tmp. */
static pid_t
writer(const char *path, char *tmp, size_t n)
{
	int p[2];
	pid_t pid;

	if (pipe(p) != 0)
		die("pipe");
	if ((pid = fork()) < 0)
		die("fork");
	if (pid == 0) {
		struct cg_out o;
		close(p[0]);
		if (cg_out_open(&o, path) != 0)
			_exit(1);
		fputs("half a file", o.fp);
		fflush(o.fp);
		if (write(p[1], o.tmp, strlen(o.tmp) + 1) < 0)
			_exit(1);
		close(p[1]);
		for (;;)
			pause();
	}
	close(p[1]);
	ssize_t got = read(p[0], tmp, n - 1);
	close(p[0]);
	if (got <= 1) {
		fprintf(stderr, TEST_NAME ": the writer did not start\n");
		exit(1);
	}
	tmp[got] = '\0';
	return pid;
}

static void
reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Open path and abort at once: what a writer does to stale temporaries. */
static void
open_abort(const char *path)
{
	struct cg_out o;

	if (cg_out_open(&o, path) != 0)
		die("cg_out_open");
	cg_out_abort(&o);
}

static void
touch(const char *path)
{
	FILE *fp = fopen(path, "w");

	if (fp == NULL || fclose(fp) != 0)
		die(path);
}

int
main(void)
{
	char path[256], other[256], tmp1[512], tmp2[512], name[512];
	pid_t a, b;

	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	snprintf(path, sizeof(path), "%s/x.cgm", dir);
	snprintf(other, sizeof(other), "%s/y.cgm", dir);

	/* A killed writer's temporary goes; a live one's stays. */
	a = writer(path, tmp1, sizeof(tmp1));
	b = writer(path, tmp2, sizeof(tmp2));
	expect(exists(tmp1) && exists(tmp2), "two writers, two temporaries");
	reap(a);
	expect(exists(tmp1), "SIGKILL leaves the temporary");
	open_abort(path);
	expect(!exists(tmp1), "the next writer removes the killed one's");
	expect(exists(tmp2), "and not the one of a writer still alive");
	reap(b);
	expect(exists(tmp2), "until that writer is killed too");

	/* Not ours: another target's temporary, other names, a link. */
	b = writer(other, tmp1, sizeof(tmp1));
	reap(b);
	snprintf(name, sizeof(name), "%s/.x.cgm.abc", dir);
	touch(name);
	snprintf(name, sizeof(name), "%s/.x.cgm.abcdefg", dir);
	touch(name);
	snprintf(name, sizeof(name), "%s/.x.cgm.ab-def", dir);
	touch(name);
	snprintf(name, sizeof(name), "%s/.x.cgm.Ab3dEf", dir);
	if (symlink("x.cgm", name) != 0)
		die("symlink");
	open_abort(path);
	expect(!exists(tmp2), "a second open removes the second killed one");
	expect(exists(tmp1), "another target's temporary stays");
	snprintf(name, sizeof(name), "%s/.x.cgm.abc", dir);
	expect(exists(name), "a name too short stays");
	snprintf(name, sizeof(name), "%s/.x.cgm.abcdefg", dir);
	expect(exists(name), "a name too long stays");
	snprintf(name, sizeof(name), "%s/.x.cgm.ab-def", dir);
	expect(exists(name), "a name mkstemp does not make stays");
	snprintf(name, sizeof(name), "%s/.x.cgm.Ab3dEf", dir);
	expect(exists(name), "a symbolic link stays");
	unlink(name);

	/* This process's own open temporary survives its next open of the
	 * same target (the lock belongs to the open file). */
	struct cg_out o1, o2;
	if (cg_out_open(&o1, path) != 0 || cg_out_open(&o2, path) != 0)
		die("cg_out_open");
	expect(exists(o1.tmp) && exists(o2.tmp),
	       "two outputs of one process to one target: both temporaries");
	snprintf(tmp1, sizeof(tmp1), "%s", o1.tmp);

	/* Committed together: both in place, no temporary left. */
	struct cg_out *outs[2] = {&o1, &o2};
	fputs("one", o1.fp);
	cg_out_abort(&o2);
	if (cg_out_open(&o2, other) != 0)
		die("cg_out_open");
	snprintf(tmp2, sizeof(tmp2), "%s", o2.tmp);
	fputs("two", o2.fp);
	expect(cg_out_commit_all(outs, 2) == 0, "commit two outputs");
	expect(exists(path) && exists(other), "both in place");
	expect(!exists(tmp1) && !exists(tmp2), "no temporary left");

	/* A rename that fails: what was renamed before it stays, the rest
	 * is removed. */
	char sub[300], subfile[320];
	snprintf(sub, sizeof(sub), "%s/d", dir);
	if (cg_out_open(&o1, path) != 0 || cg_out_open(&o2, sub) != 0)
		die("cg_out_open");
	snprintf(tmp2, sizeof(tmp2), "%s", o2.tmp);
	fputs("three", o1.fp);
	/* sub becomes a directory that is not empty: rename onto it fails */
	snprintf(subfile, sizeof(subfile), "%s/f", sub);
	if (mkdir(sub, 0700) != 0)
		die("mkdir");
	touch(subfile);
	expect(cg_out_commit_all(outs, 2) == -1, "a failed rename is an error");
	FILE *fp = fopen(path, "r");
	char got[8] = "";
	if (fp == NULL || fgets(got, sizeof(got), fp) == NULL)
		die(path);
	fclose(fp);
	expect(strcmp(got, "three") == 0, "the first was renamed");
	expect(!exists(tmp2), "the second's temporary is removed");
	cg_out_abort(&o1);
	cg_out_abort(&o2);

	/* Clean up: whatever is left in dir. */
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, TEST_NAME ": could not remove %s\n", dir);
	return failures ? 1 : 0;
}
