/*
 * train/pipe.c - a pipeline stage's links: the next stage as a child
 * command or over FIFOs, and the small frames of the protocol.
 *
 * pipe.h says what the stages say; lib/train/train.c's cg_train_stage
 * runs the steps over these links.  A broken pipe is an error to report
 * (EPIPE), not a signal to die of: SIGPIPE is ignored once a link is
 * made.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "file/frame.h"
#include "train/pipe.h"

int
cg_pipe_spawn(struct cg_pipe *p, const char *cmd)
{
	int to[2], from[2];
	pid_t pid;

	if (pipe(to) != 0)
		return cg_seterr("pipe: %s", strerror(errno));
	if (pipe(from) != 0) {
		close(to[0]);
		close(to[1]);
		return cg_seterr("pipe: %s", strerror(errno));
	}
	if ((pid = fork()) < 0) {
		close(to[0]);
		close(to[1]);
		close(from[0]);
		close(from[1]);
		return cg_seterr("fork: %s", strerror(errno));
	}
	if (pid == 0) {
		if (dup2(to[0], 0) < 0 || dup2(from[1], 1) < 0)
			_exit(127);
		close(to[0]);
		close(to[1]);
		close(from[0]);
		close(from[1]);
		signal(SIGPIPE, SIG_DFL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	fcntl(to[1], F_SETFD, FD_CLOEXEC);
	fcntl(from[0], F_SETFD, FD_CLOEXEC);
	p->down_out = to[1];
	p->down_in = from[0];
	p->child = pid;
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

int
cg_pipe_close(struct cg_pipe *p)
{
	int st, rc = 0;

	if (p->down_out >= 0)
		close(p->down_out);
	if (p->down_in >= 0)
		close(p->down_in);
	p->down_out = p->down_in = -1;
	if (p->child > 0) {
		while (waitpid(p->child, &st, 0) < 0)
			if (errno != EINTR)
				return cg_seterr("the next stage: %s",
				                 strerror(errno));
		p->child = 0;
		if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
			rc = cg_seterr("the next stage: exit %d",
			               WEXITSTATUS(st));
		else if (WIFSIGNALED(st))
			rc = cg_seterr("the next stage: killed by signal %d",
			               WTERMSIG(st));
	}
	return rc;
}

void
cg_pipe_widen(int fd, size_t bytes)
{
#ifdef F_SETPIPE_SZ
	int now;

	if (fd < 0 || (now = fcntl(fd, F_GETPIPE_SZ)) < 0 ||
	    (size_t)now >= bytes)
		return;
	/* the most the kernel lets this process have, down to what it has */
	for (size_t want = bytes > 1u << 24 ? 1u << 24 : bytes;
	     want > (size_t)now; want /= 2)
		if (fcntl(fd, F_SETPIPE_SZ, (int)want) >= 0)
			return;
#else
	(void)fd;
	(void)bytes;
#endif
}

int
cg_pipe_say(int fd, const char *name, const uint64_t *v, int n)
{
	uint64_t shape[1] = {(uint64_t)n};

	return cg_frame_write(fd, name, CG_U64, 1, shape, v);
}

int
cg_pipe_hear(int fd, const char *name, uint64_t *v, int n)
{
	uint64_t shape[1] = {(uint64_t)n};

	return cg_frame_expect(fd, name, CG_U64, 1, shape, v);
}

int
cg_pipe_end(const struct cg_pipe *p, int index, int count, uint64_t v[2])
{
	if (index > 0 && cg_pipe_hear(p->up_in, "end", v, 2) != 0)
		return -1;
	if (index < count - 1 && cg_pipe_say(p->down_out, "end", v, 2) != 0)
		return -1;
	return 0;
}

int
cg_pipe_ready(const struct cg_pipe *p, int index, int count)
{
	uint64_t one = 1;

	if (index < count - 1 && cg_pipe_hear(p->down_in, "ready", &one, 1))
		return cg_seterr("the next stage is not ready: %s",
		                 cg_errmsg());
	if (index > 0 && cg_pipe_say(p->up_out, "ready", &one, 1) != 0)
		return -1;
	return 0;
}

int
cg_pipe_commit(const struct cg_pipe *p, int index, int count)
{
	uint64_t one = 1;

	if (index > 0 && cg_pipe_hear(p->up_in, "commit", &one, 1) != 0)
		return -1;
	if (index < count - 1 && cg_pipe_say(p->down_out, "commit", &one, 1))
		return -1;
	return 0;
}

/* ---------------------------------------------------------------- sender */

struct frame_job {
	struct frame_job *next;
	char name[CG_FRAME_NAME + 1];
	enum cg_dtype dt;
	int ndim;
	uint64_t shape[CG_FRAME_DIMS];
	void *data;
};

struct cg_sender {
	int fd;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct frame_job *head, *tail;
	int stop;
	int failed;
	char err[256];
};

static void *
sender_main(void *arg)
{
	struct cg_sender *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (s->head == NULL && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		struct frame_job *j = s->head;
		if (j == NULL)
			break;
		s->head = j->next;
		if (s->head == NULL)
			s->tail = NULL;
		int failed = s->failed;
		pthread_mutex_unlock(&s->mu);
		int rc = failed ? 0
		                : cg_frame_write(s->fd, j->name, j->dt, j->ndim,
		                                 j->shape, j->data);
		pthread_mutex_lock(&s->mu);
		if (rc != 0 && !s->failed) {
			s->failed = 1;
			snprintf(s->err, sizeof(s->err), "%s", cg_errmsg());
		}
		free(j->data);
		free(j);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

struct cg_sender *
cg_sender_start(int fd)
{
	struct cg_sender *s = calloc(1, sizeof(*s));

	if (s == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	s->fd = fd;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->thread, NULL, sender_main, s) != 0) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		free(s);
		cg_seterr("pipe: cannot start a thread");
		return NULL;
	}
	return s;
}

int
cg_sender_put(struct cg_sender *s, const char *name, enum cg_dtype dt, int ndim,
              const uint64_t *shape, const void *data)
{
	struct frame_job *j = calloc(1, sizeof(*j));
	uint64_t nelem = 1, nbytes;

	if (j == NULL)
		return cg_seterr("out of memory");
	if (strlen(name) > CG_FRAME_NAME || ndim < 0 || ndim > CG_FRAME_DIMS) {
		free(j);
		return cg_seterr("frame %s: bad name or rank", name);
	}
	for (int i = 0; i < ndim; i++)
		nelem *= shape[i];
	if (cg_dtype_bytes(dt, nelem, &nbytes) != 0 ||
	    (j->data = malloc(nbytes ? (size_t)nbytes : 1)) == NULL) {
		free(j);
		return cg_seterr("frame %s: out of memory", name);
	}
	memcpy(j->data, data, (size_t)nbytes);
	snprintf(j->name, sizeof(j->name), "%s", name);
	j->dt = dt;
	j->ndim = ndim;
	memcpy(j->shape, shape, (size_t)ndim * sizeof(*shape));
	pthread_mutex_lock(&s->mu);
	int failed = s->failed;
	if (!failed) {
		if (s->tail)
			s->tail->next = j;
		else
			s->head = j;
		s->tail = j;
		pthread_cond_signal(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	if (failed) {
		free(j->data);
		free(j);
		return cg_seterr("%s", s->err);
	}
	return 0;
}

int
cg_sender_stop(struct cg_sender *s)
{
	int rc;

	if (s == NULL)
		return 0;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	rc = s->failed ? cg_seterr("%s", s->err) : 0;
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	return rc;
}
