/*
 * data/image.c - image grids written as PNG (libpng) or as netpbm P5/P6.
 *
 * Both writers share one row renderer, so the two formats always hold the
 * same pixels.  The picture never exists whole in memory: each output row
 * is built from the float images and written at once.  libpng reports
 * errors by calling back and never returning; the callback records the
 * message and long-jumps to the one cleanup point, and its warnings are
 * swallowed, since the library prints nothing.  Output goes through
 * cg_out_open/cg_out_commit, so a failed or interrupted write leaves no
 * file behind.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <png.h>

#include "cg.h"
#include "data/image.h"

/* The colour of padding: mid grey, visible against black and white. */
#define PAD_VALUE 128

struct grid {
	const float *imgs; /* [n, h * w * c] */
	int n, h, w, c, cols, pad;
	uint32_t width, height; /* of the whole picture, in pixels */
	size_t img_len;         /* h * w * c */
	size_t row_len;         /* width * c bytes */
};

/* ---------------------------------------------------------- formats */

const char *
cg_image_format_name(enum cg_image_format fmt)
{
	return fmt == CG_IMAGE_PGM ? "pgm" : "png";
}

int
cg_image_format_parse(const char *s, enum cg_image_format *out)
{
	if (strcmp(s, "png") == 0)
		*out = CG_IMAGE_PNG;
	else if (strcmp(s, "pgm") == 0 || strcmp(s, "ppm") == 0)
		*out = CG_IMAGE_PGM;
	else
		return cg_seterr("unknown image format '%.32s' (png or pgm)",
		                 s);
	return 0;
}

enum cg_image_format
cg_image_format_guess(const char *path)
{
	static const char *const netpbm[] = {".pgm", ".ppm", ".pnm"};
	size_t n = strlen(path);

	for (size_t i = 0; i < sizeof(netpbm) / sizeof(netpbm[0]); i++)
		if (n > 4 && strcasecmp(path + n - 4, netpbm[i]) == 0)
			return CG_IMAGE_PGM;
	return CG_IMAGE_PNG;
}

/* ------------------------------------------------------------- layout */

/* Check the sizes and fill g.  Every product is taken in 64 bits before
 * it is compared, so no int can wrap; the side limit then bounds
 * n * h * w * c by CG_IMAGE_MAX_SIDE^2 * 3, which fits a size_t. */
static int
grid_init(struct grid *g, const float *imgs, int n, int h, int w, int c,
          int cols, int pad)
{
	uint64_t rows, width, height;

	memset(g, 0, sizeof(*g));
	if (imgs == NULL || n < 1)
		return cg_seterr("no images to write");
	if (h < 1 || w < 1)
		return cg_seterr("images of %dx%d pixels", h, w);
	if (c != 1 && c != 3)
		return cg_seterr("images of %d channels (1 or 3 supported)", c);
	if (cols < 1 || pad < 0)
		return cg_seterr("a grid of %d columns with padding %d", cols,
		                 pad);
	if (cols > n)
		cols = n;
	rows = ((uint64_t)n + (uint64_t)cols - 1) / (uint64_t)cols;
	width = (uint64_t)cols * ((uint64_t)w + (uint64_t)pad) + (uint64_t)pad;
	height = rows * ((uint64_t)h + (uint64_t)pad) + (uint64_t)pad;
	if (width > CG_IMAGE_MAX_SIDE || height > CG_IMAGE_MAX_SIDE)
		return cg_seterr("a picture of %llux%llu pixels (at most %d a "
		                 "side): fewer images or columns",
		                 (unsigned long long)width,
		                 (unsigned long long)height, CG_IMAGE_MAX_SIDE);
	g->imgs = imgs;
	g->n = n;
	g->h = h;
	g->w = w;
	g->c = c;
	g->cols = cols;
	g->pad = pad;
	g->width = (uint32_t)width;
	g->height = (uint32_t)height;
	g->img_len = (size_t)h * (size_t)w * (size_t)c;
	g->row_len = (size_t)width * (size_t)c;
	return 0;
}

int
cg_image_grid_size(int n, int h, int w, int c, int cols, int pad,
                   uint32_t *width, uint32_t *height)
{
	static const float one;
	struct grid g;

	/* Any non-NULL pointer: only the sizes are looked at. */
	if (grid_init(&g, &one, n, h, w, c, cols, pad) != 0)
		return -1;
	*width = g.width;
	*height = g.height;
	return 0;
}

static uint8_t
to_byte(float v)
{
	if (!(v > 0.0f)) /* also NaN */
		return 0;
	if (v >= 1.0f)
		return 255;
	return (uint8_t)(v * 255.0f + 0.5f);
}

/* Output row y (< g->height) into row [g->row_len]. */
static void
render_row(const struct grid *g, uint32_t y, uint8_t *row)
{
	const uint32_t cell = (uint32_t)g->h + (uint32_t)g->pad;
	uint32_t r, yy;

	memset(row, PAD_VALUE, g->row_len);
	if (y < (uint32_t)g->pad)
		return;
	r = (y - (uint32_t)g->pad) / cell;
	yy = (y - (uint32_t)g->pad) % cell;
	if (yy >= (uint32_t)g->h)
		return;
	for (int k = 0; k < g->cols; k++) {
		size_t i = (size_t)r * (size_t)g->cols + (size_t)k;
		if (i >= (size_t)g->n)
			break;
		const float *src =
		    g->imgs + i * g->img_len + (size_t)yy * g->w * g->c;
		uint8_t *dst = row + ((size_t)g->pad +
		                      (size_t)k * ((size_t)g->w + g->pad)) *
		                         (size_t)g->c;
		for (size_t j = 0; j < (size_t)g->w * (size_t)g->c; j++)
			dst[j] = to_byte(src[j]);
	}
}

/* ------------------------------------------------------------- netpbm */

static int
write_netpbm(const struct grid *g, FILE *fp, const char *path, uint8_t *row)
{
	if (fprintf(fp, "P%c\n%u %u\n255\n", g->c == 1 ? '5' : '6', g->width,
	            g->height) < 0)
		return cg_seterr("%s: write failed: %s", path, strerror(errno));
	for (uint32_t y = 0; y < g->height; y++) {
		render_row(g, y, row);
		if (fwrite(row, 1, g->row_len, fp) != g->row_len)
			return cg_seterr("%s: write failed: %s", path,
			                 strerror(errno));
	}
	return 0;
}

/* ---------------------------------------------------------------- png */

struct png_io {
	jmp_buf jb;
	FILE *fp;
	const char *path;
};

static void
png_on_error(png_structp png, png_const_charp msg)
{
	struct png_io *io = png_get_error_ptr(png);

	cg_seterr("%s: png: %s", io->path, msg);
	longjmp(io->jb, 1);
}

static void
png_on_warning(png_structp png, png_const_charp msg)
{
	/* The library prints nothing; a warning changes no byte we write. */
}

/* Our own write callback, so that a failed write names the file and the
 * system's reason instead of libpng's "Write Error". */
static void
png_on_write(png_structp png, png_bytep data, size_t len)
{
	struct png_io *io = png_get_io_ptr(png);

	if (fwrite(data, 1, len, io->fp) != len) {
		cg_seterr("%s: write failed: %s", io->path, strerror(errno));
		longjmp(io->jb, 1);
	}
}

static void
png_on_flush(png_structp png)
{
	/* cg_out_commit flushes and syncs once at the end. */
}

static int
write_png(const struct grid *g, FILE *fp, const char *path, uint8_t *row)
{
	struct png_io io;
	png_structp png;
	png_infop info = NULL;
	/* Written after setjmp and read after a long jump. */
	volatile int rc = -1;

	io.fp = fp;
	io.path = path;
	png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io, png_on_error,
	                              png_on_warning);
	if (png == NULL)
		return cg_seterr("out of memory");
	if ((info = png_create_info_struct(png)) == NULL) {
		cg_seterr("out of memory");
		goto done;
	}
	if (setjmp(io.jb) != 0)
		goto done; /* the message is recorded */
	png_set_write_fn(png, &io, png_on_write, png_on_flush);
	/* Fixed settings: the same pixels always give the same bytes. */
	png_set_compression_level(png, 9);
	png_set_IHDR(png, info, g->width, g->height, 8,
	             g->c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB,
	             PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
	             PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (uint32_t y = 0; y < g->height; y++) {
		render_row(g, y, row);
		png_write_row(png, row);
	}
	png_write_end(png, NULL);
	rc = 0;
done:
	png_destroy_write_struct(&png, info ? &info : NULL);
	return rc;
}

/* ------------------------------------------------------------- public */

int
cg_image_grid_write(const char *path, const float *imgs, int n, int h, int w,
                    int c, int cols, int pad, enum cg_image_format fmt)
{
	/* The name messages give the output. */
	const char *name = strcmp(path, "-") == 0 ? "standard output" : path;
	struct grid g;
	struct cg_out o;
	uint8_t *row;
	int rc;

	if (grid_init(&g, imgs, n, h, w, c, cols, pad) != 0) {
		cg_errprefix(name);
		return -1;
	}
	if ((row = malloc(g.row_len)) == NULL)
		return cg_seterr("out of memory");
	if (cg_out_open(&o, path) != 0) {
		free(row);
		return -1;
	}
	if (fmt == CG_IMAGE_PGM)
		rc = write_netpbm(&g, o.fp, name, row);
	else
		rc = write_png(&g, o.fp, name, row);
	free(row);
	if (rc != 0) {
		cg_out_abort(&o);
		return -1;
	}
	return cg_out_commit(&o);
}
