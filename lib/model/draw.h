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

#endif
