/*
 * bench/plot-png.c - the other way cg-plot could draw: lines of its own
 * into pixels, written by libpng.  What it costs to start, draw and
 * encode a plot of cg-plot's default size, for bench/plot-startup.sh to
 * set beside gnuplot's: no axes, ticks or type (a lower bound on the
 * work), three series of N points each in each of nine panels.
 *
 *   cc -O2 -o plot-png bench/plot-png.c -lpng && ./plot-png N out.png
 */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>

enum { W = 1440, H = 960 };
static unsigned char px[H][W][3];

static void
dot(int x, int y, int c)
{
	static const unsigned char rgb[3][3] = {
	    {148, 0, 211}, {0, 158, 115}, {86, 180, 233}};
	if (x >= 0 && x < W && y >= 0 && y < H)
		for (int k = 0; k < 3; k++)
			px[y][x][k] = rgb[c][k];
}

/* Bresenham's line from (x0, y0) to (x1, y1). */
static void
line(int x0, int y0, int x1, int y1, int c)
{
	int dx = abs(x1 - x0), dy = -abs(y1 - y0);
	int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;

	for (;;) {
		dot(x0, y0, c);
		if (x0 == x1 && y0 == y1)
			return;
		int e2 = 2 * e;
		if (e2 >= dy)
			e += dy, x0 += sx;
		if (e2 <= dx)
			e += dx, y0 += sy;
	}
}

int
main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	FILE *fp = fopen(argc > 2 ? argv[2] : "plot-png.png", "wb");
	png_structp p;
	png_infop info;

	if (fp == NULL || n < 2)
		return 1;
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++)
			px[y][x][0] = px[y][x][1] = px[y][x][2] = 255;
	for (int panel = 0; panel < 9; panel++) {
		int ox = panel % 3 * 480 + 40, oy = panel / 3 * 320 + 20;
		line(ox, oy, ox, oy + 280, 0);
		line(ox, oy + 280, ox + 420, oy + 280, 0);
		for (int s = 0; s < 3; s++)
			for (int i = 1; i < n; i++)
				line(ox + (i - 1) * 420 / n,
				     oy + 280 - 280 * (n - i + 1 + s * 7) / (n + 30),
				     ox + i * 420 / n,
				     oy + 280 - 280 * (n - i + s * 7) / (n + 30), s);
	}
	p = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	info = png_create_info_struct(p);
	if (p == NULL || info == NULL || setjmp(png_jmpbuf(p)))
		return 1;
	png_init_io(p, fp);
	png_set_IHDR(p, info, W, H, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
	             PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_write_info(p, info);
	for (int y = 0; y < H; y++)
		png_write_row(p, &px[y][0][0]);
	png_write_end(p, info);
	png_destroy_write_struct(&p, &info);
	return fclose(fp) != 0;
}
