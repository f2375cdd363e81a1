/*
 * test_state.c - the worker state file: tensors by name, the record of
 * the call that wrote it, the rule that refuses a state of another call,
 * and hostile records.
 *
 * A state is written beside an output file, read back, and checked
 * against calls that differ in one thing each (emit kind, shard, model
 * digest or step, the output's bytes).  Records with a field missing or
 * malformed are refused on reading.  Exit 0 pass, 1 fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "train/state.h"

#define TEST_NAME "test_state"
#include "check.h"

static char dir[] = "/tmp/test_state.XXXXXX";
static char spath[300], opath[300];

/* A call of emit at model step, on shard (one byte picks it), to o. */
static struct cg_state_call
call(const char *emit, int shard, int model, uint64_t step)
{
	struct cg_state_call c;

	memset(&c, 0, sizeof(c));
	c.emit = emit;
	memset(c.shard, shard, 32);
	memset(c.model, model, 32);
	c.model_step = step;
	c.output = opath;
	return c;
}

/* Write st as the state of call c beside an output holding text. */
static void
write_pair(struct cg_state *st, const struct cg_state_call *c, const char *text)
{
	struct cg_out o, s;

	if (cg_out_open(&o, opath) != 0 || cg_out_open(&s, spath) != 0)
		die("cg_out_open");
	fputs(text, o.fp);
	struct cg_out *outs[2] = {&o, &s};
	if (cg_state_write_to(st, &s, c, &o) != 0 ||
	    cg_out_commit_all(outs, 2) != 0)
		die("write");
}

/* Read spath and check it against c: the check's result. */
static int
check(const struct cg_state_call *c)
{
	struct cg_state *st;
	int rc;

	if (cg_state_read(&st, spath) != 0)
		die("cg_state_read");
	rc = cg_state_check(st, spath, c);
	cg_state_free(st);
	return rc;
}

/* Rewrite spath's manifest through edit (a jq-less cJSON edit) and
 * whether reading it is then refused. */
static int
refused_after(void (*edit)(cJSON *m))
{
	struct cg_file *f = cg_file_read_copy(spath);
	struct cg_state *st;
	char bad[320];
	int rc;

	if (f == NULL)
		die("cg_file_read_copy");
	edit(f->manifest);
	snprintf(bad, sizeof(bad), "%s/bad.state", dir);
	if (cg_file_write(f, bad, CG_COMPRESS_NONE) != 0)
		die("cg_file_write");
	cg_file_free(f);
	rc = cg_state_read(&st, bad);
	cg_state_free(st);
	return rc == -1 && st == NULL;
}

static void
bad_teacher(cJSON *m)
{
	cJSON_DeleteItemFromObject(m, "teacher");
	cJSON *t = cJSON_AddObjectToObject(m, "teacher");
	cJSON_AddStringToObject(t, "sha256", "not hex");
}
static void
no_emit(cJSON *m)
{
	cJSON_DeleteItemFromObject(m, "emit");
}
static void
bad_emit(cJSON *m)
{
	cJSON_ReplaceItemInObject(m, "emit", cJSON_CreateString("median"));
}
static void
short_digest(cJSON *m)
{
	cJSON *s = cJSON_GetObjectItem(m, "shard");
	cJSON_ReplaceItemInObject(s, "sha256", cJSON_CreateString("abc"));
}
static void
upper_digest(cJSON *m)
{
	cJSON *s = cJSON_GetObjectItem(m, "model");
	char hex[65];
	memset(hex, 'A', 64);
	hex[64] = '\0';
	cJSON_ReplaceItemInObject(s, "sha256", cJSON_CreateString(hex));
}
static void
negative_step(cJSON *m)
{
	cJSON *s = cJSON_GetObjectItem(m, "model");
	cJSON_ReplaceItemInObject(s, "step", cJSON_CreateNumber(-1));
}
static void
fraction_step(cJSON *m)
{
	cJSON *s = cJSON_GetObjectItem(m, "model");
	cJSON_ReplaceItemInObject(s, "step", cJSON_CreateNumber(1.5));
}
static void
empty_path(cJSON *m)
{
	cJSON *s = cJSON_GetObjectItem(m, "output");
	cJSON_ReplaceItemInObject(s, "path", cJSON_CreateString(""));
}
static void
no_output(cJSON *m)
{
	cJSON_DeleteItemFromObject(m, "output");
}
static void
output_number(cJSON *m)
{
	cJSON_ReplaceItemInObject(m, "output", cJSON_CreateNumber(3));
}

int
main(void)
{
	struct cg_state *st;
	struct cg_state_call c;
	uint64_t v;
	void *p;

	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	snprintf(spath, sizeof(spath), "%s/w.state", dir);
	snprintf(opath, sizeof(opath), "%s/d.cgg", dir);

	/* ---- tensors by name */
	c = call("delta", 1, 2, 5);
	if (cg_state_read(&st, spath) != 0)
		die("cg_state_read");
	expect(!cg_state_loaded(st), "a missing file is an empty state");
	expect(cg_state_check(st, spath, &c) == 0, "which any call may use");
	expect(cg_state_get(st, "opt.m", CG_F32, 4, &p) == 0 && p == NULL,
	       "get of an absent tensor: 0");
	float *m = cg_state_put(st, "opt.m", CG_F32, 4);
	expect(m && m[0] == 0 && m[3] == 0, "put makes it, zeroed");
	m[2] = 2.5f;
	expect(cg_state_put(st, "opt.m", CG_F32, 4) == m,
	       "put again gives the same tensor");
	expect(cg_state_put(st, "opt.m", CG_F32, 5) == NULL &&
	           strstr(cg_errmsg(), "opt.m") != NULL,
	       "put with another count is an error naming the tensor");
	expect(cg_state_get(st, "opt.m", CG_U64, 4, &p) == -1,
	       "get with another dtype is an error");
	expect(cg_state_put_u64(st, "cursor", 48) == 0 &&
	           cg_state_get_u64(st, "cursor", &v) == 1 && v == 48,
	       "a u64 by name");
	expect(cg_state_put(st, "ef.dec.w", CG_F32, 3) != NULL,
	       "a residual is one more name");

	/* ---- written, read back */
	write_pair(st, &c, "delta 1");
	cg_state_free(st);
	if (cg_state_read(&st, spath) != 0)
		die("cg_state_read");
	expect(cg_state_loaded(st), "read back");
	expect(cg_state_get(st, "opt.m", CG_F32, 4, &p) == 1 &&
	           ((float *)p)[2] == 2.5f,
	       "the tensor's values come back");
	expect(cg_state_get_u64(st, "cursor", &v) == 1 && v == 48,
	       "the u64 comes back");
	expect(cg_state_get(st, "ef.dec.w", CG_F32, 3, &p) == 1,
	       "the residual comes back");
	cg_state_free(st);

	/* ---- the rule */
	struct cg_state_call d;
	expect(check(&c) == 0, "the same call: accepted");
	d = call("delta", 1, 9, 6);
	expect(check(&d) == 0, "a later model (the coordinator's): accepted");
	d = call("delta", 1, 9, 4);
	expect(check(&d) == -1 && strstr(cg_errmsg(), "step 5") != NULL,
	       "an older model: refused");
	d = call("delta", 1, 9, 5);
	expect(check(&d) == -1, "another model of the same step: refused");
	d = call("delta", 7, 2, 5);
	expect(check(&d) == -1 && strstr(cg_errmsg(), "another shard"),
	       "another shard: refused");
	d = call("grad", 1, 2, 5);
	expect(check(&d) == -1 && strstr(cg_errmsg(), "--emit delta"),
	       "another emit kind: refused");
	FILE *fp = fopen(opath, "w");
	if (fp == NULL || fputs("delta 2", fp) < 0 || fclose(fp) != 0)
		die(opath);
	expect(check(&c) == -1 && strstr(cg_errmsg(), "is not the output"),
	       "an output other than the one written with it: refused");
	unlink(opath);
	expect(check(&c) == 0, "an output that is gone: not checked");

	/* ---- model: the output is the next call's model */
	if (cg_state_read(&st, spath) != 0)
		die("cg_state_read");
	c = call("model", 1, 2, 5);
	c.has_next = 1;
	memset(c.next, 3, 32);
	c.next_step = 7;
	write_pair(st, &c, "model 7");
	cg_state_free(st);
	d = call("model", 1, 3, 7);
	expect(check(&d) == 0, "model: the model written beside it");
	d = call("model", 1, 2, 5);
	expect(check(&d) == -1 && strstr(cg_errmsg(), "written beside"),
	       "model: the model it started from: refused");
	d = call("model", 1, 4, 7);
	expect(check(&d) == -1, "model: another model of that step: refused");

	/* ---- a distilled call: the teacher is the state's */
	if (cg_state_read(&st, spath) != 0)
		die("cg_state_read");
	c = call("delta", 1, 2, 5);
	c.has_teacher = 1;
	memset(c.teacher, 8, 32);
	write_pair(st, &c, "delta 3");
	cg_state_free(st);
	expect(check(&c) == 0, "distilled: the same teacher accepted");
	d = c;
	memset(d.teacher, 9, 32);
	expect(check(&d) == -1 && strstr(cg_errmsg(), "another teacher"),
	       "distilled: another teacher refused");
	d.has_teacher = 0;
	expect(check(&d) == -1 && strstr(cg_errmsg(), "made with a teacher"),
	       "distilled: no teacher refused");
	expect(refused_after(bad_teacher), "a teacher digest not in hex: "
	                                   "refused on reading");
	if (cg_state_read(&st, spath) != 0)
		die("cg_state_read");
	write_pair(st, &d, "delta 4");
	cg_state_free(st);
	expect(check(&c) == -1 && strstr(cg_errmsg(), "without a teacher"),
	       "a plain state: a teacher refused");
	expect(check(&d) == 0, "a plain state: a plain call accepted");

	/* ---- hostile records */
	expect(refused_after(no_emit), "no emit: refused on reading");
	expect(strstr(cg_errmsg(), "bad.state: no whole record") != NULL,
	       "with a message naming the file");
	expect(refused_after(bad_emit), "an unknown emit: refused");
	expect(refused_after(short_digest), "a short digest: refused");
	expect(refused_after(upper_digest), "a digest not in hex: refused");
	expect(refused_after(negative_step), "a negative step: refused");
	expect(refused_after(fraction_step), "a fractional step: refused");
	expect(refused_after(empty_path), "an empty output path: refused");
	expect(refused_after(no_output), "no output: refused");
	expect(refused_after(output_number),
	       "an output not an object: refused");

	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, TEST_NAME ": could not remove %s\n", dir);
	return failures ? 1 : 0;
}
