/*
 * test_draw.c - drawing per condition (model/draw.h): a row of images
 * and a text depend on the seed, the condition and the text's number
 * alone, so any part of a draw is the same bytes as in the whole; texts
 * come in order with the separator between them; a stop asked by emit or
 * by the separator ends the draw without an error, a model's failure is
 * one.  On a stand-in arch whose draws show their noise.  A grid file is
 * the same bytes as the images drawn and written apart, a picture too
 * large is refused before any drawing; a text sink writes bytes as they
 * are, on a terminal shows control bytes as '?' and ends the line, and
 * keeps the first write error.
 */
#define TEST_NAME "test_draw"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model/draw.h"

#define PIX 4

static int
fake_shape(const struct cg_model *m, int shape[3])
{
	(void)m;
	shape[0] = 2;
	shape[1] = 2;
	shape[2] = 1;
	return 0;
}

/* Each image: its condition, then noise. */
static int
fake_image(struct cg_model *m, const int *cond, int n, double temperature,
           struct cg_rng *r, float *out)
{
	(void)m;
	for (int i = 0; i < n; i++) {
		out[i * PIX] = (float)cond[i];
		for (int j = 1; j < PIX; j++)
			out[i * PIX + j] =
			    (float)temperature * cg_rng_normal(r);
	}
	return 0;
}

/* A text: 'a' + the condition, then two letters of noise; condition 9
 * fails. */
static long
fake_text(struct cg_model *m, int cond, const uint8_t *prompt, size_t plen,
          const struct cg_sampler *s, struct cg_rng *r, cg_emit_fn emit,
          void *ctx)
{
	(void)m, (void)prompt, (void)plen, (void)s;
	if (cond == 9)
		return cg_seterr("condition 9 fails");
	if (emit(ctx, 'a' + cond) != 0)
		return 1;
	for (int i = 0; i < 2; i++)
		if (emit(ctx, 'k' + (int)cg_rng_below(r, 10)) != 0)
			return i + 2;
	return 3;
}

static const struct cg_arch fake = {
    .name = "fake",
    .image_shape = fake_shape,
    .sample_image = fake_image,
    .sample_text = fake_text,
};

static int
failing_image(struct cg_model *m, const int *cond, int n, double temperature,
              struct cg_rng *r, float *out)
{
	(void)m, (void)cond, (void)n, (void)temperature, (void)r, (void)out;
	return cg_seterr("no images today");
}

static const struct cg_arch failing = {
    .name = "failing",
    .image_shape = fake_shape,
    .sample_image = failing_image,
};

/* Where texts go: bytes, and a stop after `limit` of them (0: none). */
struct out {
	char buf[256];
	int n, limit, sep_stop;
};

static int
put(void *ctx, int byte)
{
	struct out *o = ctx;

	o->buf[o->n++] = (char)byte;
	o->buf[o->n] = '\0';
	return o->limit && o->n >= o->limit;
}

static int
sep(void *ctx)
{
	struct out *o = ctx;

	if (o->sep_stop)
		return 1;
	return put(ctx, '|');
}

static void
test_images(struct cg_model *m)
{
	const int all[] = {2, 0, 2, 1}, one[] = {1};
	float a[4 * 3 * PIX], b[3 * PIX], c[4 * 3 * PIX];

	expect(cg_draw_images(m, all, 4, 3, 1.0, 42, a) == 0 &&
	           cg_draw_images(m, one, 1, 3, 1.0, 42, b) == 0,
	       "images: drawn");
	expect(memcmp(a + 3 * 3 * PIX, b, sizeof(b)) == 0,
	       "images: a condition's row alone is the row in the grid");
	expect(memcmp(a, a + 2 * 3 * PIX, 3 * PIX * sizeof(float)) == 0 &&
	           memcmp(a, a + 3 * PIX, 3 * PIX * sizeof(float)) != 0,
	       "images: the same condition, the same row; another, another");
	expect(a[0] == 2 && a[3 * PIX] == 0 && a[PIX] == 2,
	       "images: row r holds rows[r]'s images");
	cg_draw_images(m, all, 4, 3, 1.0, 43, c);
	expect(memcmp(a, c, sizeof(a)) != 0, "images: another seed, others");
}

static void
test_texts(struct cg_model *m)
{
	const int rows[] = {0, 1}, one[] = {1}, bad[] = {0, 9};
	struct out all = {0}, part = {0}, stop = {.limit = 5},
	           sstop = {.sep_stop = 1}, fail = {0};

	expect(cg_draw_texts(m, rows, 2, 2, NULL, 0, NULL, 7, put, sep, &all) ==
	               0 &&
	           all.n == 4 * 3 + 3,
	       "texts: count of each condition, with separators between");
	printf("     %s\n", all.buf);
	expect(all.buf[0] == 'a' && all.buf[3] == '|' && all.buf[4] == 'a' &&
	           all.buf[8] == 'b' && all.buf[12] == 'b',
	       "texts: in order, condition by condition");
	expect(cg_draw_texts(m, one, 1, 2, NULL, 0, NULL, 7, put, sep, &part) ==
	               0 &&
	           strcmp(part.buf, all.buf + 8) == 0,
	       "texts: text i of a condition is the same in any draw");
	expect(cg_draw_texts(m, rows, 2, 2, NULL, 0, NULL, 7, put, sep,
	                     &stop) == 0 &&
	           stop.n == 5 && strncmp(stop.buf, all.buf, 5) == 0,
	       "texts: emit stops the draw, no error");
	expect(cg_draw_texts(m, rows, 2, 2, NULL, 0, NULL, 7, put, sep,
	                     &sstop) == 0 &&
	           sstop.n == 3,
	       "texts: the separator stops it too");
	expect(cg_draw_texts(m, bad, 2, 1, NULL, 0, NULL, 7, put, NULL,
	                     &fail) == -1 &&
	           strcmp(cg_errmsg(), "condition 9 fails") == 0 && fail.n == 3,
	       "texts: a model's failure is -1 with its message");
}

/* The whole file at path into buf [size]: its length, or -1. */
static long
slurp(const char *path, char *buf, size_t size)
{
	FILE *fp = fopen(path, "rb");
	size_t n;

	if (fp == NULL)
		return -1;
	n = fread(buf, 1, size, fp);
	fclose(fp);
	return (long)n;
}

static void
test_grid(struct cg_model *m)
{
	const int rows[] = {1, 0}, shape[3] = {2, 2, 1};
	char dir[] = "/tmp/test_draw.XXXXXX", a[64], b[64];
	static char fa[4096], fb[4096];
	float imgs[2 * 3 * PIX];
	long na, nb;

	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	snprintf(a, sizeof(a), "%s/grid.pgm", dir);
	snprintf(b, sizeof(b), "%s/apart.pgm", dir);
	expect(cg_draw_grid(m, "m", shape, rows, 2, 3, 0.5, 42, a, 2,
	                    CG_IMAGE_PGM) == 0,
	       "grid: drawn and written");
	if (cg_draw_images(m, rows, 2, 3, 0.5, 42, imgs) != 0 ||
	    cg_image_grid_write(b, imgs, 6, 2, 2, 1, 3, 2, CG_IMAGE_PGM) != 0)
		die("apart");
	na = slurp(a, fa, sizeof(fa));
	nb = slurp(b, fb, sizeof(fb));
	expect(na > 0 && na == nb && memcmp(fa, fb, (size_t)na) == 0,
	       "grid: the images drawn and written apart, byte for byte");
	expect(cg_draw_grid(m, "m", shape, rows, 2, 40000, 0.5, 42, a, 2,
	                    CG_IMAGE_PGM) == -1 &&
	           strncmp(cg_errmsg(), a, strlen(a)) == 0 &&
	           cg_draw_grid(m, "m", shape, rows, 2, 40000, 0.5, 42, "-", 2,
	                        CG_IMAGE_PGM) == -1 &&
	           strncmp(cg_errmsg(), "standard output: a picture of ", 30) ==
	               0,
	       "grid: too large, refused naming where it would go");
	remove(a);
	struct cg_model bad = {.arch = &failing};
	expect(cg_draw_grid(&bad, "m.cgm", shape, rows, 2, 3, 0.5, 42, a, 2,
	                    CG_IMAGE_PGM) == -1 &&
	           strcmp(cg_errmsg(), "m.cgm: no images today") == 0 &&
	           access(a, F_OK) != 0,
	       "grid: a model's failure names the model, nothing written");
	remove(b);
	rmdir(dir);
}

/* Bytes 'x', ESC, '\n', 'y' then "<>" and 'z' through a sink on fp. */
static int
sink_some(FILE *fp, int tty, struct cg_text_sink *k)
{
	cg_text_sink_init(k, fp, tty, "<>");
	cg_text_sink_byte(k, 'x');
	cg_text_sink_byte(k, 0x1b);
	cg_text_sink_byte(k, '\n');
	cg_text_sink_byte(k, 'y');
	cg_text_sink_sep(k);
	cg_text_sink_byte(k, 'z');
	return cg_text_sink_end(k);
}

static void
test_sink(void)
{
	struct cg_text_sink k;
	char *buf = NULL;
	size_t n = 0;
	FILE *fp;

	if ((fp = open_memstream(&buf, &n)) == NULL)
		die("open_memstream");
	expect(sink_some(fp, 0, &k) == 0 && n == 7 &&
	           memcmp(buf, "x\x1b\ny<>z", 7) == 0,
	       "sink: bytes as they are, the separator between, no newline");
	fclose(fp);
	free(buf);
	if ((fp = open_memstream(&buf, &n)) == NULL)
		die("open_memstream");
	expect(sink_some(fp, 1, &k) == 0 && strcmp(buf, "x?\ny<>z\n") == 0,
	       "sink: a terminal sees '?' for a control byte, the line ended");
	fclose(fp);
	free(buf);
	if ((fp = fopen("/dev/null", "r")) == NULL)
		die("/dev/null");
	errno = 0;
	int e = sink_some(fp, 1, &k);
	expect(e != 0 && e == k.err && k.last == -1 &&
	           cg_text_sink_byte(&k, 'a') != 0 && cg_text_sink_sep(&k) != 0,
	       "sink: a failed write is kept, and every later one stops");
	fclose(fp);
}

int
main(void)
{
	struct cg_model m = {.arch = &fake};

	test_images(&m);
	test_texts(&m);
	test_grid(&m);
	test_sink();
	return failures ? 1 : 0;
}
