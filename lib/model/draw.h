/*
 * model/draw.h - drawing from a model so that any draw can be made again:
 * a condition's images from (seed, condition) alone, text i of a
 * condition from (seed, condition, i) alone.
 *
 * So "cg-sample -c Dress" draws the very row that the full grid shows
 * for Dress, and eval/judge.c draws what cg-sample draws.  The arch's
 * sample_image and sample_text (registry.h) do the drawing.
 */
#ifndef CG_DRAW_H
#define CG_DRAW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "data/image.h"
#include "model/model.h"

/* The noise of condition c's images, or of text i of it, from seed. */
void cg_draw_rng(struct cg_rng *r, uint64_t seed, int c, uint64_t i);

/*
 * count images of each condition rows [nrows] into imgs [nrows * count,
 * pixels] (pixels: the shape m->arch->image_shape gives), row r's from
 * the noise of rows[r] at temperature.  Returns 0, or -1 with a message.
 */
int cg_draw_images(struct cg_model *m, const int *rows, int nrows, int count,
                   double temperature, uint64_t seed, float *imgs);

/*
 * count texts of each condition rows [nrows], each a continuation of
 * prompt [plen] drawn as sm says, byte by byte to emit (as sample_text
 * gives them), with between(ctx) before each text but the first (between
 * may be NULL).  Stops, and returns 0, as soon as emit or between returns
 * nonzero.  Returns 0, or -1 with a message when the model fails.
 */
int cg_draw_texts(struct cg_model *m, const int *rows, int nrows, int count,
                  const uint8_t *prompt, size_t plen,
                  const struct cg_sampler *sm, uint64_t seed, cg_emit_fn emit,
                  int (*between)(void *ctx), void *ctx);

/* What draws one text: sample_text's contract (registry.h) on g. */
typedef long (*cg_text_fn)(void *g, int cond, const uint8_t *prompt,
                           size_t plen, const struct cg_sampler *s,
                           struct cg_rng *r, cg_emit_fn emit, void *ctx);
/* cg_draw_texts through fn on g (a pipeline's first stage). */
int cg_draw_texts_by(cg_text_fn fn, void *g, const int *rows, int nrows,
                     int count, const uint8_t *prompt, size_t plen,
                     const struct cg_sampler *sm, uint64_t seed,
                     cg_emit_fn emit, int (*between)(void *ctx), void *ctx);

/*
 * cg_draw_images's images of m (named mname in messages), of shape
 * [3] (image_shape's), as one picture at path (cg_image_grid_write: a
 * row of count per condition, pad pixels around each; "-": standard
 * output) in fmt.  A picture too large is refused before anything is
 * drawn, its message starting with path ("standard output" for -); a
 * model's failure starts with mname.  Returns 0, or -1 with a message.
 */
int cg_draw_grid(struct cg_model *m, const char *mname, const int shape[3],
                 const int *rows, int nrows, int count, double temperature,
                 uint64_t seed, const char *path, int pad,
                 enum cg_image_format fmt);

/*
 * Where cg_draw_texts's bytes go: fp, raw; but on a terminal (tty) each
 * byte flushed and a control byte (newline and tab aside) shown as
 * cg-inspect shows one (cg_shown_byte), so that a model cannot send the
 * terminal escape sequences.  sep, the user's own bytes, goes between
 * texts as given.
 */
struct cg_text_sink {
	FILE *fp;
	int tty;
	int err;         /* errno of the first failed write; 0 if none */
	int last;        /* the last byte written, or -1 */
	const char *sep; /* borrowed */
};

void cg_text_sink_init(struct cg_text_sink *k, FILE *fp, int tty,
                       const char *sep);
/* cg_draw_texts's emit and between, ctx a struct cg_text_sink: nonzero
 * (stop) after a failed write. */
int cg_text_sink_byte(void *ctx, int byte);
int cg_text_sink_sep(void *ctx);
/* The end: a terminal's last line ended, the stream flushed.  Returns
 * the errno of the sink's first failed write, or 0. */
int cg_text_sink_end(struct cg_text_sink *k);

#endif
