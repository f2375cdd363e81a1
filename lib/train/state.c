/*
 * train/state.c - the worker state file (kind "state"): write, read, check.
 *
 * A state is a cg file whose tensors are whatever a worker keeps between
 * calls, by name (train.c keeps "cursor", "opt.t", "opt.m", "opt.v"), and
 * whose manifest names the call it was written by:
 *
 *     "emit":   "grad" | "delta" | "model"
 *     "shard":  {"sha256": identity of the shard (cg_state_identity)}
 *     "model":  {"sha256": cg_model_digest, "step": n}  the call's input
 *     "output": {"path": as given, "sha256": the file's bytes (absent for
 *                a stream), "model": {"sha256", "step"} (emit model: the
 *                model written there, which the next call starts from)}
 *     "teacher": {"sha256": cg_model_digest}  a distilled call's teacher
 *                (absent for plain training)
 *
 * The output is named by the SHA-256 of its bytes, not of its manifest,
 * so that the check needs nothing but the file (any compression, any
 * kind) and holds for bytes as they lie on disk.  Reading checks that the
 * record is whole and well formed; cg_state_check applies the rule of
 * state.h to it.  A state without the record (an older cg's) is refused:
 * nothing says what it belongs to.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "train/state.h"

struct cg_state {
	struct cg_file *f; /* the tensors, in the order put or read */
	int loaded;
	/* The record read with it (loaded only). */
	char emit[8];
	unsigned char shard[32];
	unsigned char model[32];
	uint64_t model_step;
	char *output;
	int has_output_sha;
	unsigned char output_sha[32];
	int has_next;
	unsigned char next[32];
	uint64_t next_step;
	int has_teacher;
	unsigned char teacher[32];
};

/* Largest output path a state records. */
#define STATE_MAX_PATH 4096

struct cg_state *
cg_state_new(void)
{
	struct cg_state *st = calloc(1, sizeof(*st));

	if (st == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	if ((st->f = cg_file_new("state")) == NULL) {
		free(st);
		return NULL;
	}
	return st;
}

void
cg_state_free(struct cg_state *st)
{
	if (st == NULL)
		return;
	cg_file_free(st->f);
	free(st->output);
	free(st);
}

int
cg_state_loaded(const struct cg_state *st)
{
	return st->loaded;
}

/* ------------------------------------------------------------ tensors */

int
cg_state_get(const struct cg_state *st, const char *name, enum cg_dtype dt,
             uint64_t n, void **data)
{
	struct cg_tensor *t = cg_file_find(st->f, name);

	*data = NULL;
	if (t == NULL)
		return 0;
	if (t->dtype != dt || t->nelem != n)
		return cg_seterr("tensor %s: %s [%llu], expected %s [%llu]",
		                 name, cg_dtype_name(t->dtype),
		                 (unsigned long long)t->nelem,
		                 cg_dtype_name(dt), (unsigned long long)n);
	*data = t->data;
	return 1;
}

void *
cg_state_put(struct cg_state *st, const char *name, enum cg_dtype dt,
             uint64_t n)
{
	struct cg_tensor *t;
	void *data;
	int r = cg_state_get(st, name, dt, n, &data);

	if (r != 0)
		return r > 0 ? data : NULL;
	if ((t = cg_file_add_zero(st->f, name, dt, 1, &n)) == NULL)
		return NULL;
	return t->data;
}

int
cg_state_get_u64(const struct cg_state *st, const char *name, uint64_t *v)
{
	void *p;
	int r = cg_state_get(st, name, CG_U64, 1, &p);

	if (r > 0)
		memcpy(v, p, sizeof(*v));
	return r;
}

int
cg_state_put_u64(struct cg_state *st, const char *name, uint64_t v)
{
	void *p = cg_state_put(st, name, CG_U64, 1);

	if (p == NULL)
		return -1;
	memcpy(p, &v, sizeof(v));
	return 0;
}

/* ----------------------------------------------------------- digests */

static void
update_str(EVP_MD_CTX *c, const char *s)
{
	EVP_DigestUpdate(c, s, strlen(s) + 1); /* with its NUL: unambiguous */
}

void
cg_state_identity(const struct cg_file *f, unsigned char out[32])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned int len = 32;
	char *m = cJSON_PrintUnformatted(f->manifest);
	char buf[32];

	/* Out of memory: an identity no file has, so nothing matches. */
	if (c == NULL || m == NULL ||
	    EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		memset(out, 0, 32);
		goto out;
	}
	update_str(c, m);
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		update_str(c, t->name);
		update_str(c, cg_dtype_name(t->dtype));
		for (int k = 0; k < t->ndim; k++) {
			snprintf(buf, sizeof(buf), "%llu",
			         (unsigned long long)t->shape[k]);
			update_str(c, buf);
		}
		EVP_DigestUpdate(c, t->sha256, 32);
	}
	EVP_DigestFinal_ex(c, out, &len);
out:
	EVP_MD_CTX_free(c);
	free(m);
}

int
cg_state_split(const struct cg_file *f, unsigned char out[32], int *index)
{
	const cJSON *sh =
	    cJSON_GetObjectItemCaseSensitive(f->manifest, "shard");
	const cJSON *src =
	    cJSON_GetObjectItemCaseSensitive(f->manifest, "source");
	const cJSON *ix = cJSON_GetObjectItemCaseSensitive(sh, "index");
	EVP_MD_CTX *c = NULL;
	cJSON *cut = NULL;
	char *a = NULL, *b = NULL;
	unsigned int len = 32;
	int rc = 0;

	if (!cJSON_IsObject(sh) || !cJSON_IsObject(src) ||
	    !cJSON_IsNumber(ix) ||
	    !(ix->valuedouble >= -1 && ix->valuedouble < 1 << 24) ||
	    ix->valuedouble != (int)ix->valuedouble)
		return 0;
	if ((cut = cJSON_Duplicate(sh, 1)) == NULL)
		return 0;
	cJSON_DeleteItemFromObjectCaseSensitive(cut, "index");
	cJSON_DeleteItemFromObjectCaseSensitive(cut, "holdout");
	if ((a = cJSON_PrintUnformatted(cut)) == NULL ||
	    (b = cJSON_PrintUnformatted(src)) == NULL ||
	    (c = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1)
		goto out;
	update_str(c, a);
	update_str(c, b);
	EVP_DigestFinal_ex(c, out, &len);
	*index = (int)ix->valuedouble;
	rc = 1;
out:
	EVP_MD_CTX_free(c);
	cJSON_Delete(cut);
	free(a);
	free(b);
	return rc;
}

int
cg_state_digest(const struct cg_state *st, unsigned char out[32])
{
	if (st == NULL || !st->loaded)
		return 0;
	cg_state_identity(st->f, out);
	return 1;
}

/*
 * SHA-256 of what fd holds, from offset 0 to its end (pread: the file
 * offset is left alone).  Returns 0, or -1 with errno set.
 */
static int
hash_fd(int fd, unsigned char out[32])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	const size_t N = 1 << 20;
	unsigned char *buf = malloc(N);
	unsigned int len = 32;
	off_t off = 0;
	int rc = -1;

	if (c == NULL || buf == NULL ||
	    EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		errno = ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t r = pread(fd, buf, N, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		EVP_DigestUpdate(c, buf, (size_t)r);
		off += r;
	}
	EVP_DigestFinal_ex(c, out, &len);
	rc = 0;
out:
	EVP_MD_CTX_free(c);
	free(buf);
	return rc;
}

/*
 * SHA-256 of the regular file at path: 0, 1 when there is no file there,
 * 2 when it is not a regular file, -1 with a message.
 */
static int
hash_path(const char *path, unsigned char out[32])
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), rc;

	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR
		           ? 1
		           : cg_seterr("%s: %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return 2;
	}
	rc = hash_fd(fd, out);
	if (rc != 0)
		cg_seterr("%s: %s", path, strerror(errno));
	close(fd);
	return rc;
}

/* ------------------------------------------------------------- record */

/* A JSON string of a digest in hex into out: 0 or -1. */
static int
parse_hex(const cJSON *j, unsigned char out[32])
{
	return cJSON_IsString(j) ? cg_hex_parse(out, j->valuestring) : -1;
}

/* {"sha256": hex, "step": n} (step only if step != NULL). */
static int
parse_ref(const cJSON *o, unsigned char d[32], uint64_t *step)
{
	const cJSON *s;

	if (!cJSON_IsObject(o) ||
	    parse_hex(cJSON_GetObjectItemCaseSensitive(o, "sha256"), d) != 0)
		return -1;
	if (step == NULL)
		return 0;
	s = cJSON_GetObjectItemCaseSensitive(o, "step");
	if (!cJSON_IsNumber(s) || s->valuedouble < 0 ||
	    s->valuedouble > 9007199254740992.0 ||
	    s->valuedouble != (double)(uint64_t)s->valuedouble)
		return -1;
	*step = (uint64_t)s->valuedouble;
	return 0;
}

/* The record of what st belongs to, from manifest man: 0 or -1. */
static int
parse_record(struct cg_state *st, const cJSON *man)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(man, "emit");
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(man, "output");
	const cJSON *p, *h;

	if (!cJSON_IsString(e) || (strcmp(e->valuestring, "grad") != 0 &&
	                           strcmp(e->valuestring, "delta") != 0 &&
	                           strcmp(e->valuestring, "model") != 0))
		return -1;
	strcpy(st->emit, e->valuestring);
	if (parse_ref(cJSON_GetObjectItemCaseSensitive(man, "shard"), st->shard,
	              NULL) != 0 ||
	    parse_ref(cJSON_GetObjectItemCaseSensitive(man, "model"), st->model,
	              &st->model_step) != 0 ||
	    !cJSON_IsObject(o))
		return -1;
	p = cJSON_GetObjectItemCaseSensitive(o, "path");
	if (!cJSON_IsString(p) || p->valuestring[0] == '\0' ||
	    strlen(p->valuestring) > STATE_MAX_PATH ||
	    (st->output = strdup(p->valuestring)) == NULL)
		return -1;
	if ((h = cJSON_GetObjectItemCaseSensitive(o, "sha256")) != NULL) {
		if (parse_hex(h, st->output_sha) != 0)
			return -1;
		st->has_output_sha = 1;
	}
	if ((h = cJSON_GetObjectItemCaseSensitive(man, "teacher")) != NULL) {
		if (parse_ref(h, st->teacher, NULL) != 0)
			return -1;
		st->has_teacher = 1;
	}
	if (strcmp(st->emit, "model") == 0) {
		if (parse_ref(cJSON_GetObjectItemCaseSensitive(o, "model"),
		              st->next, &st->next_step) != 0)
			return -1;
		st->has_next = 1;
	}
	return 0;
}

/*
 * The rules of a state file, once: kind "state" and a whole record of
 * the call that wrote it, into st's record.  0, or -1 with a message
 * that does not name the file.
 */
static int
parse(struct cg_state *st, const struct cg_file *f)
{
	if (strcmp(cg_file_kind(f), "state") != 0)
		return cg_seterr("a %s file, not a state file",
		                 cg_file_kind(f));
	if (parse_record(st, f->manifest) != 0)
		return cg_seterr(
		    "no whole record of the call that wrote it (an "
		    "older cg's state?): remove it to start this "
		    "worker afresh");
	return 0;
}

int
cg_state_file_check(const struct cg_file *f)
{
	struct cg_state st = {0};
	int rc = parse(&st, f);

	free(st.output);
	return rc;
}

int
cg_state_read(struct cg_state **out, const char *path)
{
	struct cg_state *st;
	struct cg_file *f;

	*out = NULL;
	if (access(path, F_OK) == 0) {
		/* Each tensor in its own buffer: the caller updates them. */
		if ((f = cg_file_read_copy(path)) == NULL)
			return -1;
		return cg_state_from_file(out, f, path);
	}
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return cg_seterr("out of memory");
	if ((st->f = cg_file_new("state")) == NULL) {
		cg_state_free(st);
		return -1;
	}
	*out = st;
	return 0;
}

int
cg_state_from_file(struct cg_state **out, struct cg_file *f,
                   const char *display)
{
	struct cg_state *st;

	*out = NULL;
	if ((st = calloc(1, sizeof(*st))) == NULL) {
		cg_file_free(f);
		return cg_seterr("out of memory");
	}
	st->f = f;
	if (parse(st, f) != 0) {
		cg_errprefix(display);
		cg_state_free(st);
		return -1;
	}
	st->loaded = 1;
	*out = st;
	return 0;
}

/* ------------------------------------------------------------- check */

void
cg_state_call_init(struct cg_state_call *c, const char *emit,
                   const struct cg_shard *s, const struct cg_model *m,
                   const char *output)
{
	memset(c, 0, sizeof(*c));
	c->emit = emit;
	cg_state_identity(s->file, c->shard);
	cg_model_digest(m, c->model);
	c->model_step = m->step;
	c->output = output;
}

void
cg_state_call_next(struct cg_state_call *c, const struct cg_model *m)
{
	cg_model_digest(m, c->next);
	c->next_step = m->step;
	c->has_next = 1;
}

void
cg_state_call_teacher(struct cg_state_call *c, const struct cg_model *t)
{
	cg_model_digest(t, c->teacher);
	c->has_teacher = 1;
}

int
cg_state_check(const struct cg_state *st, const char *path,
               const struct cg_state_call *c)
{
	const int model = strcmp(st->emit, "model") == 0;
	unsigned char d[32];
	int r;

	if (!st->loaded)
		return 0;
	if (strcmp(st->emit, c->emit) != 0)
		return cg_seterr("%s: written by --emit %s, not %s: "
		                 "remove it to start this worker afresh",
		                 path, st->emit, c->emit);
	if (memcmp(st->shard, c->shard, 32) != 0)
		return cg_seterr("%s: made with another shard: give the one it "
		                 "was made with, or remove it to start this "
		                 "worker afresh",
		                 path);
	if (!st->has_teacher && c->has_teacher)
		return cg_seterr("%s: made without a teacher: remove it to "
		                 "start this worker afresh",
		                 path);
	if (st->has_teacher &&
	    (!c->has_teacher || memcmp(st->teacher, c->teacher, 32) != 0))
		return cg_seterr("%s: made with %s teacher: give --teacher "
		                 "the one it was made with, or remove it to "
		                 "start this worker afresh",
		                 path, c->has_teacher ? "another" : "a");
	if (model && (st->next_step != c->model_step ||
	              memcmp(st->next, c->model, 32) != 0))
		return cg_seterr("%s: written beside the model of step %llu, "
		                 "not this one (step %llu; a call cut short?): "
		                 "remove it to go on from this model",
		                 path, (unsigned long long)st->next_step,
		                 (unsigned long long)c->model_step);
	if (!model && c->model_step < st->model_step)
		return cg_seterr("%s: computed from a model of step %llu, "
		                 "newer than this one (step %llu): give that "
		                 "model or a later one, or remove it to start "
		                 "this worker afresh",
		                 path, (unsigned long long)st->model_step,
		                 (unsigned long long)c->model_step);
	if (!model && c->model_step == st->model_step &&
	    memcmp(st->model, c->model, 32) != 0)
		return cg_seterr("%s: computed from another model of step "
		                 "%llu: remove it to start this worker afresh",
		                 path, (unsigned long long)st->model_step);
	if (!st->has_output_sha)
		return 0;
	if ((r = hash_path(st->output, d)) < 0)
		return -1;
	if (r == 1 || (r == 0 && memcmp(d, st->output_sha, 32) == 0))
		return 0;
	if (model)
		return cg_seterr("%s: %s is not the model written with it (a "
		                 "call cut short between the two?): remove "
		                 "%s to go on from the model",
		                 path, st->output, path);
	return cg_seterr("%s: %s is not the output written with it (a call "
	                 "cut short between the two?): remove %s and rerun "
	                 "the call to write both again, or remove %s to start "
	                 "this worker afresh",
	                 path, st->output, st->output, path);
}

/* ------------------------------------------------------------- write */

static cJSON *
add_ref(cJSON *to, const char *key, const unsigned char d[32],
        const uint64_t *step)
{
	cJSON *o = cJSON_AddObjectToObject(to, key);
	char hex[65];

	if (o == NULL)
		return NULL;
	cg_hex(hex, d);
	if (cJSON_AddStringToObject(o, "sha256", hex) == NULL ||
	    (step && cJSON_AddNumberToObject(o, "step", (double)*step) == NULL))
		return NULL;
	return o;
}

int
cg_state_write_to(struct cg_state *st, struct cg_out *o,
                  const struct cg_state_call *c, struct cg_out *output)
{
	cJSON *man = st->f->manifest, *out;
	static const char *const keys[] = {"emit", "shard", "model", "output",
	                                   "teacher"};
	unsigned char d[32];

	if (cg_out_flush(output) != 0)
		return -1;
	/* A state read from a file is rewritten with this call's record. */
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cJSON_DeleteItemFromObjectCaseSensitive(man, keys[i]);
	if (cJSON_AddStringToObject(man, "emit", c->emit) == NULL ||
	    add_ref(man, "shard", c->shard, NULL) == NULL ||
	    add_ref(man, "model", c->model, &c->model_step) == NULL ||
	    (out = cJSON_AddObjectToObject(man, "output")) == NULL ||
	    cJSON_AddStringToObject(out, "path", c->output) == NULL ||
	    (c->has_teacher &&
	     add_ref(man, "teacher", c->teacher, NULL) == NULL))
		return cg_seterr("out of memory");
	/* A temporary is a regular file to be: its bytes name it. */
	if (output->tmp != NULL) {
		char hex[65];

		if (hash_fd(output->fd, d) != 0)
			return cg_seterr("%s: cannot read back: %s",
			                 output->path, strerror(errno));
		cg_hex(hex, d);
		if (cJSON_AddStringToObject(out, "sha256", hex) == NULL)
			return cg_seterr("out of memory");
	}
	if (c->has_next &&
	    add_ref(out, "model", c->next, &c->next_step) == NULL)
		return cg_seterr("out of memory");
	return cg_file_write_to(st->f, o, CG_COMPRESS_NONE);
}
