/*
 * test_image.c - the image grid writer: layout, pixel values, formats and
 * the size guards.
 *
 * Writes small grids as netpbm (whose bytes are the pixels, easy to check
 * one by one) and as PNG (checked for its header and for byte-identical
 * rewrites), in grayscale and RGB, and checks that bad sizes fail with a
 * message and leave no file.  Exit 0 pass, 1 fail (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg.h"
#include "data/image.h"

#define TEST_NAME "test_image"
#include "check.h"

/* The whole file at path into a new buffer (NULL if unreadable). */
static unsigned char *
slurp(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	unsigned char *buf;
	long len;

	*n = 0;
	if (fp == NULL)
		return NULL;
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	rewind(fp);
	if ((buf = malloc((size_t)len + 1)) == NULL ||
	    fread(buf, 1, (size_t)len, fp) != (size_t)len) {
		free(buf);
		fclose(fp);
		return NULL;
	}
	fclose(fp);
	*n = (size_t)len;
	return buf;
}

/* Three 2x2 grayscale images in a grid of 2 columns, padding 1: a 7x7
 * P5 whose pad pixels are 128 and whose cells hold the clamped values. */
static void
test_gray_layout(const char *dir)
{
	/* Values of image i, pixel j: NaN, below 0 and above 1 clamp. */
	const float imgs[3 * 4] = {0.0f,  1.0f, 0.5f, NAN,  -3.0f, 2.0f,
	                           0.25f, 1.0f, 1.0f, 1.0f, 0.0f,  0.0f};
	const unsigned char want_cell[3][4] = {
	    {0, 255, 128, 0}, {0, 255, 64, 255}, {255, 255, 0, 0}};
	char path[512];
	unsigned char *buf;
	size_t n;
	const char *hdr = "P5\n7 7\n255\n";

	snprintf(path, sizeof(path), "%s/g.pgm", dir);
	CHECK(cg_image_grid_write(path, imgs, 3, 2, 2, 1, 2, 1, CG_IMAGE_PGM) ==
	          0,
	      "write: %s", cg_errmsg());
	buf = slurp(path, &n);
	CHECK(buf != NULL && n == strlen(hdr) + 49, "size %zu", n);
	if (buf == NULL || n != strlen(hdr) + 49)
		goto done;
	CHECK(memcmp(buf, hdr, strlen(hdr)) == 0, "header");
	const unsigned char *px = buf + strlen(hdr);
	for (int y = 0; y < 7; y++)
		for (int x = 0; x < 7; x++) {
			int cy = y % 3 == 0 ? -1 : y / 3;
			int cx = x % 3 == 0 ? -1 : x / 3;
			int i = cy * 2 + cx;
			int want = 128;
			if (cy >= 0 && cx >= 0 && i < 3)
				want =
				    want_cell[i][(y % 3 - 1) * 2 + x % 3 - 1];
			CHECK(px[y * 7 + x] == want, "(%d,%d) is %d, not %d", x,
			      y, px[y * 7 + x], want);
		}
done:
	free(buf);
}

/* An RGB image goes to P6 with its channels in order, and to a PNG of
 * colour type 2; rewriting gives the same bytes. */
static void
test_rgb(const char *dir)
{
	const float img[2 * 3] = {1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f};
	const unsigned char want[] = "P6\n4 3\n255\n";
	char a[512], b[512];
	unsigned char *x = NULL, *y = NULL;
	size_t nx, ny;

	snprintf(a, sizeof(a), "%s/c.ppm", dir);
	CHECK(cg_image_grid_write(a, img, 1, 1, 2, 3, 1, 1, CG_IMAGE_PGM) == 0,
	      "write: %s", cg_errmsg());
	x = slurp(a, &nx);
	CHECK(x && nx == 11 + 4 * 3 * 3, "ppm size %zu", nx);
	if (x && nx == 11 + 4 * 3 * 3) {
		const unsigned char *p = x + 11 + (4 + 1) * 3;
		CHECK(memcmp(x, want, 11) == 0, "ppm header");
		CHECK(p[0] == 255 && p[1] == 0 && p[2] == 0, "red pixel");
		CHECK(p[3] == 0 && p[4] == 0 && p[5] == 255, "blue pixel");
	}
	free(x);

	snprintf(a, sizeof(a), "%s/c1.png", dir);
	snprintf(b, sizeof(b), "%s/c2.png", dir);
	CHECK(cg_image_grid_write(a, img, 1, 1, 2, 3, 1, 1, CG_IMAGE_PNG) == 0,
	      "write: %s", cg_errmsg());
	CHECK(cg_image_grid_write(b, img, 1, 1, 2, 3, 1, 1, CG_IMAGE_PNG) == 0,
	      "write: %s", cg_errmsg());
	x = slurp(a, &nx);
	y = slurp(b, &ny);
	CHECK(x && y && nx == ny && memcmp(x, y, nx) == 0, "two writes differ");
	CHECK(x && nx > 26 && memcmp(x, "\x89PNG\r\n\x1a\n", 8) == 0 &&
	          memcmp(x + 12, "IHDR", 4) == 0 && x[19] == 4 && x[23] == 3 &&
	          x[24] == 8 && x[25] == 2,
	      "PNG header of a 4x3 RGB picture");
	CHECK(x && memmem(x, nx, "tIME", 4) == NULL, "a time chunk");
	free(x);
	free(y);
}

/* Bad sizes fail with a message naming the file, and leave nothing. */
static void
test_guards(const char *dir)
{
	static const float one[4];
	struct {
		int n, h, w, c, cols, pad;
		const char *msg;
	} bad[] = {
	    {0, 2, 2, 1, 1, 0, "no images"},
	    {1, 0, 2, 1, 1, 0, "pixels"},
	    {1, 2, -1, 1, 1, 0, "pixels"},
	    {1, 2, 2, 2, 1, 0, "channels"},
	    {1, 2, 2, 4, 1, 0, "channels"},
	    {1, 2, 2, 1, 0, 0, "columns"},
	    {1, 2, 2, 1, 1, -1, "padding"},
	    {1, 65536, 1, 1, 1, 0, "at most 65535"},
	    {1, 1, 65534, 1, 1, 1, "at most 65535"},
	    {2147483647, 2147483647, 2147483647, 3, 2147483647, 2147483647,
	     "at most 65535"},
	    {2147483647, 1, 1, 1, 1, 0, "at most 65535"},
	};
	char path[512];
	uint32_t w, h;

	snprintf(path, sizeof(path), "%s/bad.png", dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = cg_image_grid_write(path, one, bad[i].n, bad[i].h,
		                             bad[i].w, bad[i].c, bad[i].cols,
		                             bad[i].pad, CG_IMAGE_PNG);
		CHECK(rc == -1, "case %zu accepted", i);
		CHECK(strstr(cg_errmsg(), bad[i].msg) != NULL &&
		          strncmp(cg_errmsg(), path, strlen(path)) == 0,
		      "case %zu: message '%s'", i, cg_errmsg());
		CHECK(access(path, F_OK) != 0, "case %zu left a file", i);
		CHECK(cg_image_grid_size(bad[i].n, bad[i].h, bad[i].w, bad[i].c,
		                         bad[i].cols, bad[i].pad, &w, &h) == -1,
		      "case %zu: size accepted", i);
	}
	/* The largest side allowed, and columns beyond n count as n. */
	CHECK(cg_image_grid_size(1, 1, 65533, 1, 1, 1, &w, &h) == 0 &&
	          w == 65535 && h == 3,
	      "65535 wide: %s", cg_errmsg());
	CHECK(cg_image_grid_size(3, 28, 28, 1, 10, 2, &w, &h) == 0 && w == 92 &&
	          h == 32,
	      "3 images in 10 columns: %ux%u", w, h);
	/* A directory that does not exist. */
	CHECK(cg_image_grid_write("/nonexistent/dir/a.png", one, 1, 2, 2, 1, 1,
	                          0, CG_IMAGE_PNG) == -1,
	      "a missing directory accepted");
}

static void
test_formats(void)
{
	enum cg_image_format f;

	CHECK(cg_image_format_parse("png", &f) == 0 && f == CG_IMAGE_PNG,
	      "png");
	CHECK(cg_image_format_parse("pgm", &f) == 0 && f == CG_IMAGE_PGM,
	      "pgm");
	CHECK(cg_image_format_parse("jpeg", &f) == -1 &&
	          strstr(cg_errmsg(), "png or pgm") != NULL,
	      "jpeg: %s", cg_errmsg());
	CHECK(cg_image_format_guess("a.PGM") == CG_IMAGE_PGM, "a.PGM");
	CHECK(cg_image_format_guess("x/b.ppm") == CG_IMAGE_PGM, "b.ppm");
	CHECK(cg_image_format_guess("c.png") == CG_IMAGE_PNG, "c.png");
	CHECK(cg_image_format_guess("-") == CG_IMAGE_PNG, "-");
	CHECK(cg_image_format_guess(".pgm") == CG_IMAGE_PNG, ".pgm alone");
	CHECK(strcmp(cg_image_format_name(CG_IMAGE_PGM), "pgm") == 0, "name");
}

int
main(void)
{
	char dir[] = "/tmp/cg-test-image.XXXXXX";
	char cmd[600];

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_gray_layout(dir);
	test_rgb(dir);
	test_guards(dir);
	test_formats();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
