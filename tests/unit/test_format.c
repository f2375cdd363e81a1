/*
 * test_format.c - the table of file formats: a format of a test's own
 * (format_toy.c, registered from its constructor) is read by cg_read_any
 * and written through its row, with no line of lib/ naming it; the
 * built-in rows still claim their own files; a hostile toy file is
 * refused; a row without a probe, or with a name taken, is refused.
 */
#define TEST_NAME "test_format"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg.h"
#include "check.h"
#include "file/format.h"
#include "file/safetensors.h"

extern const struct cg_format cg_format_toy;

static char dir[] = "/tmp/test_format.XXXXXX";

static struct cg_file *
sample(void)
{
	const uint64_t s1[1] = {3}, s2[1] = {1};
	const float a[3] = {1.5f, -2.0f, 0.25f}, b[1] = {7};
	struct cg_file *f = cg_file_new("model");

	if (f == NULL || cg_file_add(f, "w", CG_F32, 1, s1, a) == NULL ||
	    cg_file_add(f, "b", CG_F32, 1, s2, b) == NULL)
		die("sample");
	return f;
}

static void
test_toy(void)
{
	char p1[256], p2[256], p3[256];
	const struct cg_format *fmt = NULL;
	struct cg_file *f = sample(), *g;
	FILE *fp;

	snprintf(p1, sizeof(p1), "%s/a.toyf", dir);
	snprintf(p2, sizeof(p2), "%s/a.cgm", dir);
	snprintf(p3, sizeof(p3), "%s/bad.toyf", dir);
	expect(cg_format_find("toy") == &cg_format_toy &&
	           cg_format_at(0) == &cg_format_toy,
	       "the toy format is in the table, probed first");
	if (cg_format_toy.write(f, p1, CG_COMPRESS_NONE) != 0)
		die("toy write");
	if ((g = cg_read_any(p1, &fmt)) == NULL)
		die("toy read");
	expect(fmt == &cg_format_toy, "cg_read_any tells a toy file");
	int same = g->ntensors == 2;
	for (size_t i = 0; same && i < 2; i++)
		same = strcmp(g->tensors[i]->name, f->tensors[i]->name) == 0 &&
		       g->tensors[i]->nbytes == f->tensors[i]->nbytes &&
		       memcmp(g->tensors[i]->data, f->tensors[i]->data,
		              f->tensors[i]->nbytes) == 0;
	expect(same, "a toy file reads back the tensors written");
	cg_file_free(g);
	/* the built-in rows still claim their own files */
	if (cg_file_write(f, p2, CG_COMPRESS_NONE) != 0)
		die("cg write");
	g = cg_read_any(p2, &fmt);
	expect(g != NULL && fmt == &cg_format_cg, "a cg file is still cg's");
	cg_file_free(g);
	/* hostile: a count past what the file holds */
	if ((fp = fopen(p3, "wb")) == NULL)
		die("fopen");
	fwrite("TOYF\x05\0\0\0\x01w\xff\xff\xff\x7f", 1, 14, fp);
	fclose(fp);
	g = cg_read_any(p3, &fmt);
	expect(g == NULL && fmt == &cg_format_toy &&
	           strstr(cg_errmsg(), "past the end") != NULL,
	       "a toy file whose lengths lie is refused with a message");
	printf("     %s\n", cg_errmsg());
	unlink(p1);
	unlink(p2);
	unlink(p3);
	cg_file_free(f);
}

static void
test_register(void)
{
	struct cg_format bad = cg_format_toy;

	expect(cg_format_register(&bad) == -1 &&
	           strstr(cg_errmsg(), "taken") != NULL,
	       "a format name taken is refused");
	bad.name = "toy2";
	bad.probe = NULL;
	expect(cg_format_register(&bad) == -1,
	       "a registered format without a probe is refused");
	expect(cg_format_find("nope") == NULL &&
	           strcmp(cg_errmsg(), "unknown file format 'nope'") == 0,
	       "an unknown format name");
}

int
main(void)
{
	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	test_toy();
	test_register();
	rmdir(dir);
	return failures ? 1 : 0;
}
