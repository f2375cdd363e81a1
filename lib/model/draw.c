/*
 * model/draw.c - drawing images and texts per condition, each from a noise
 * stream of its own.
 *
 * A stream depends on the seed, the condition and (text) the text's
 * number, never on what else a call draws, so a subset of a draw is the
 * same bytes as in the whole: the property cg-sample(1) promises.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/draw.h"

void
cg_draw_rng(struct cg_rng *r, uint64_t seed, int c, uint64_t i)
{
	cg_rng_derive(r, seed, (uint64_t)c, i);
}

int
cg_draw_images(struct cg_model *m, const int *rows, int nrows, int count,
               double temperature, uint64_t seed, float *imgs)
{
	size_t pixels;
	int shape[3], *cond;

	if (m->arch->image_shape(m, shape) != 0)
		return -1;
	pixels = (size_t)shape[0] * shape[1] * shape[2];
	if ((cond = malloc((size_t)count * sizeof(*cond))) == NULL)
		return cg_seterr("out of memory");
	for (int r = 0; r < nrows; r++) {
		struct cg_rng rng;
		for (int i = 0; i < count; i++)
			cond[i] = rows[r];
		cg_draw_rng(&rng, seed, rows[r], 0);
		if (m->arch->sample_image(m, cond, count, temperature, &rng,
		                          imgs + (size_t)r * count * pixels) !=
		    0) {
			free(cond);
			return -1;
		}
	}
	free(cond);
	return 0;
}

/* The caller's emit, and whether it asked to stop. */
struct tap {
	cg_emit_fn emit;
	void *ctx;
	int stopped;
};

static int
tap_emit(void *ctx, int byte)
{
	struct tap *t = ctx;

	if (t->emit(t->ctx, byte) != 0)
		t->stopped = 1;
	return t->stopped;
}

/* cg_text_fn of a whole model. */
static long
model_text(void *g, int cond, const uint8_t *prompt, size_t plen,
           const struct cg_sampler *s, struct cg_rng *r, cg_emit_fn emit,
           void *ctx)
{
	struct cg_model *m = g;

	return m->arch->sample_text(m, cond, prompt, plen, s, r, emit, ctx);
}

int
cg_draw_texts(struct cg_model *m, const int *rows, int nrows, int count,
              const uint8_t *prompt, size_t plen, const struct cg_sampler *sm,
              uint64_t seed, cg_emit_fn emit, int (*between)(void *ctx),
              void *ctx)
{
	return cg_draw_texts_by(model_text, m, rows, nrows, count, prompt, plen,
	                        sm, seed, emit, between, ctx);
}

int
cg_draw_texts_by(cg_text_fn fn, void *g, const int *rows, int nrows,
                 int count, const uint8_t *prompt, size_t plen,
                 const struct cg_sampler *sm, uint64_t seed, cg_emit_fn emit,
                 int (*between)(void *ctx), void *ctx)
{
	struct tap t = {emit, ctx, 0};

	for (int r = 0; r < nrows; r++)
		for (int i = 0; i < count; i++) {
			struct cg_rng rng;

			if ((r > 0 || i > 0) && between && between(ctx) != 0)
				return 0;
			cg_draw_rng(&rng, seed, rows[r], (uint64_t)i);
			if (fn(g, rows[r], prompt, plen, sm, &rng, tap_emit,
			       &t) < 0)
				return -1;
			if (t.stopped)
				return 0;
		}
	return 0;
}

/* ------------------------------------------------------------ a grid */

int
cg_draw_grid(struct cg_model *m, const char *mname, const int shape[3],
             const int *rows, int nrows, int count, double temperature,
             uint64_t seed, const char *path, int pad, enum cg_image_format fmt)
{
	size_t pixels = (size_t)shape[0] * shape[1] * shape[2];
	uint32_t gw, gh;
	float *imgs;
	int rc;

	/* Refuse a picture too large before drawing a single image. */
	if (cg_image_grid_size(nrows * count, shape[0], shape[1], shape[2],
	                       count, pad, &gw, &gh) != 0) {
		cg_errprefix(strcmp(path, "-") == 0 ? "standard output" : path);
		return -1;
	}
	if ((imgs = malloc((size_t)nrows * count * pixels * sizeof(*imgs))) ==
	    NULL)
		return cg_seterr("out of memory");
	if ((rc = cg_draw_images(m, rows, nrows, count, temperature, seed,
	                         imgs)) != 0)
		cg_errprefix(mname);
	else
		rc = cg_image_grid_write(path, imgs, nrows * count, shape[0],
		                         shape[1], shape[2], count, pad, fmt);
	free(imgs);
	return rc;
}

/* -------------------------------------------------------- a text sink */

void
cg_text_sink_init(struct cg_text_sink *k, FILE *fp, int tty, const char *sep)
{
	*k =
	    (struct cg_text_sink){.fp = fp, .tty = tty, .last = -1, .sep = sep};
}

/* Write byte as it is; nonzero on a write error (in k->err). */
static int
put_byte(struct cg_text_sink *k, int byte)
{
	if (putc(byte, k->fp) == EOF || (k->tty && fflush(k->fp) != 0)) {
		k->err = errno ? errno : EIO;
		return 1;
	}
	k->last = byte;
	return 0;
}

int
cg_text_sink_byte(void *ctx, int byte)
{
	struct cg_text_sink *k = ctx;

	return put_byte(k, k->tty ? cg_shown_byte(byte, 1) : byte);
}

int
cg_text_sink_sep(void *ctx)
{
	struct cg_text_sink *k = ctx;

	for (const char *s = k->sep; *s; s++)
		if (put_byte(k, (unsigned char)*s) != 0)
			return -1;
	return 0;
}

int
cg_text_sink_end(struct cg_text_sink *k)
{
	/* A terminal's prompt should not follow the text on its line. */
	if (k->tty && !k->err && k->last >= 0 && k->last != '\n')
		put_byte(k, '\n');
	if (!k->err && fflush(k->fp) != 0)
		k->err = errno ? errno : EIO;
	return k->err;
}
