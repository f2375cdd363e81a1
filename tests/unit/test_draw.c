/*
 * test_draw.c - drawing per condition (model/draw.h): a row of images
 * and a text depend on the seed, the condition and the text's number
 * alone, so any part of a draw is the same bytes as in the whole; texts
 * come in order with the separator between them; a stop asked by emit or
 * by the separator ends the draw without an error, a model's failure is
 * one.  On a stand-in arch whose draws show their noise.
 */
#define TEST_NAME "test_draw"
#include <string.h>

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

int
main(void)
{
	struct cg_model m = {.arch = &fake};

	test_images(&m);
	test_texts(&m);
	return failures ? 1 : 0;
}
