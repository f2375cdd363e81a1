/*
 * data/image.h - a batch of images laid out as one grid picture, written as PNG
 * or as a netpbm file.
 *
 * The grid is what cg-sample shows a person: cell i is at row i / cols,
 * column i % cols, cells are separated and framed by pad pixels of mid
 * grey (so they stand apart on black and on white backgrounds alike).
 * Output is 8 bits per sample, grayscale (1 channel) or RGB (3), and a
 * pure function of the arguments: no time chunk, no text chunk, fixed
 * compression settings.  Sides are limited to CG_IMAGE_MAX_SIDE pixels;
 * the picture is written row by row, so memory use is one row.
 */
#ifndef CG_IMAGE_H
#define CG_IMAGE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest width or height of a written picture, in pixels. */
#define CG_IMAGE_MAX_SIDE 65535

enum cg_image_format {
	CG_IMAGE_PNG,
	/* Netpbm: P5 (PGM) for grayscale, P6 (PPM) for RGB, as PGM holds
	 * one channel only. */
	CG_IMAGE_PGM
};

/* "png" or "pgm". */
const char *cg_image_format_name(enum cg_image_format fmt);
/* Parse "png", "pgm" (or "ppm", the same netpbm writer); -1 with a
 * message naming the valid ones otherwise. */
int cg_image_format_parse(const char *s, enum cg_image_format *out);
/* The format a file name's suffix asks for (".pgm", ".ppm", ".pnm":
 * netpbm; anything else, "-" included: PNG). */
enum cg_image_format cg_image_format_guess(const char *path);

/*
 * The picture size of a grid of n images of h x w pixels in cols columns
 * (fewer when n < cols) with pad pixels around every cell, into *width
 * and *height.  Returns 0, or -1 with a message when a size is not
 * positive, c is not 1 or 3, or a side exceeds CG_IMAGE_MAX_SIDE.
 */
int cg_image_grid_size(int n, int h, int w, int c, int cols, int pad,
                       uint32_t *width, uint32_t *height);

/*
 * Write n images imgs [n, h * w * c] (each row-major, channels
 * interleaved, values in [0, 1]; outside values are clamped and NaN is
 * black) as a grid of cols columns (fewer when n < cols) and
 * ceil(n / cols) rows with pad pixels around every cell, to path
 * atomically ("-": standard output, refused on a terminal).  c is 1 or 3.
 * Returns 0, or -1 with a message (bad sizes, a picture side over
 * CG_IMAGE_MAX_SIDE, a write error); no file appears under path on error.
 */
int cg_image_grid_write(const char *path, const float *imgs, int n, int h,
                        int w, int c, int cols, int pad,
                        enum cg_image_format fmt);

#ifdef __cplusplus
}
#endif
#endif
