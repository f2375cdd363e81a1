/*
 * test_verify.c - lib/eval/verify.c: cg-inspect --verify of one file.
 *
 * A toy model's delta written as a cg file verifies, with its "OK" line
 * (none when quiet); the same tensors written as safetensors are refused,
 * having no digests; a truncated copy and an update without its base
 * are refused with a message naming the file by the name given.  A
 * signed file's line is 035-verify's (it needs a key in use).
 * Exit 0 pass, 1 fail.
 */
#define TEST_NAME "test_verify"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "check.h"
#include "eval/verify.h"
#include "exchange/update.h"
#include "file/safetensors.h"
#include "toy.h"

static char dir[] = "/tmp/test_verify.XXXXXX";

/* cg_verify_path(out, path, name) with out caught: its status, and what
 * it wrote into got [size]. */
static int
verify(const char *path, const char *name, int quiet, char *got, size_t size)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&buf, &n);
	int rc;

	if (fp == NULL)
		die("open_memstream");
	rc = cg_verify_path(quiet ? NULL : fp, path, name);
	fclose(fp);
	snprintf(got, size, "%s", buf);
	free(buf);
	return rc;
}

int
main(void)
{
	struct cg_model *m = toy_model(1, 3, 1, 0);
	float buf[TOY_P];
	char path[96], got[512];
	struct cg_file *f;
	FILE *fp;
	int rc;

	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	toy_fill(buf, TOY_P, 2, 0.5f);
	if ((f = cg_update_new(m, CG_UPDATE_DELTA, buf, 8, 8, 1)) == NULL)
		die("cg_update_new");
	snprintf(path, sizeof(path), "%s/d.cgd", dir);
	if (cg_file_write(f, path, CG_COMPRESS_NONE) != 0)
		die("cg_file_write");
	expect(verify(path, "d.cgd", 0, got, sizeof(got)) == 0 &&
	           strcmp(got, "d.cgd: OK\n") == 0,
	       "a delta verifies: \"NAME: OK\"");
	expect(verify(path, "d.cgd", 1, got, sizeof(got)) == 0 && !*got,
	       "quiet: the status alone");

	/* the same, cut short: the container's message, by its path */
	snprintf(path, sizeof(path), "%s/d.cgd", dir);
	char cut[96];
	snprintf(cut, sizeof(cut), "%s/cut.cgd", dir);
	FILE *in = fopen(path, "rb");
	static char bytes[1 << 16];
	size_t len = in ? fread(bytes, 1, sizeof(bytes), in) : 0;
	if (in)
		fclose(in);
	if ((fp = fopen(cut, "wb")) == NULL || len < 200)
		die("copy");
	fwrite(bytes, 1, len / 2, fp);
	fclose(fp);
	rc = verify(cut, "cut", 0, got, sizeof(got));
	fprintf(stderr, "     (%s)\n", cg_errmsg());
	expect(rc != 0 && !*got && strstr(cg_errmsg(), cut) == cg_errmsg(),
	       "a truncated file: refused, its message names it");

	/* as safetensors: read, but nothing to verify */
	snprintf(path, sizeof(path), "%s/d.safetensors", dir);
	if (cg_format_safetensors.write(f, path, CG_COMPRESS_NONE) != 0)
		die("safetensors write");
	rc = verify(path, "d.st", 0, got, sizeof(got));
	expect(rc != 0 && !*got &&
	           strcmp(cg_errmsg(),
	                  "d.st: a safetensors file: no digests to verify") ==
	               0,
	       "a safetensors file: no digests to verify");

	/* a well-made container whose update breaks its kind's rules */
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "base");
	snprintf(path, sizeof(path), "%s/nobase.cgd", dir);
	if (cg_file_write(f, path, CG_COMPRESS_NONE) != 0)
		die("cg_file_write");
	rc = verify(path, "nobase", 0, got, sizeof(got));
	expect(rc != 0 && !*got && strncmp(cg_errmsg(), "nobase: ", 8) == 0,
	       "an update without its base: the reader's refusal, by name");
	fprintf(stderr, "     (%s)\n", cg_errmsg());

	cg_file_free(f);
	cg_model_free(m);
	const char *names[] = {"d.cgd", "cut.cgd", "d.safetensors",
	                       "nobase.cgd"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
	return failures ? 1 : 0;
}
