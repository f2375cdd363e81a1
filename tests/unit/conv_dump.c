/*
 * conv_dump.c - the convolutional kernels' inputs and outputs, for a check
 * against PyTorch (tests/torch_conv.py).
 *
 * usage: conv_dump DIR
 *
 * Runs every kernel of nn/conv.h forward and backward on random inputs
 * (a fixed seed) for a few shapes, and writes into DIR, for case number
 * N, the file N.txt (the kernel and its sizes, one "key value" a line,
 * then each array's name and element count) and N.NAME.bin for each
 * array: raw little-endian float32, channels-last as the kernels keep
 * them.  The backward's gradients start at zero, so that they are the
 * gradients themselves.  Exit 0, or 1 on an I/O error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "nn/conv.h"

static struct cg_rng rng;
static const char *dir;
static int ncase;
static FILE *txt;

static void *
xalloc(size_t n)
{
	void *p = calloc(n ? n : 1, sizeof(float));

	if (p == NULL) {
		fprintf(stderr, "conv_dump: out of memory\n");
		exit(1);
	}
	return p;
}

static float *
rnd(size_t n, float lo, float hi)
{
	float *p = xalloc(n);

	for (size_t i = 0; i < n; i++)
		p[i] = lo + (hi - lo) * cg_rng_uniform(&rng);
	return p;
}

static void
begin(const char *op)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%d.txt", dir, ncase);
	if ((txt = fopen(path, "w")) == NULL) {
		perror(path);
		exit(1);
	}
	fprintf(txt, "op %s\n", op);
}

static void
put(const char *name, const float *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d.%s.bin", dir, ncase, name);
	if ((f = fopen(path, "wb")) == NULL ||
	    fwrite(p, sizeof(float), n, f) != n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	fprintf(txt, "array %s %zu\n", name, n);
}

static void
end(void)
{
	if (fclose(txt) != 0) {
		perror("conv_dump");
		exit(1);
	}
	ncase++;
}

static void
conv_case(int B, int C, int H, int W, int OC, int K, int s, int p)
{
	struct cg_conv c;
	size_t nin = (size_t)B * H * W * C, nw, nout, ncol;
	float *x, *w, *b, *o, *d, *dx, *dw, *db, *col;

	if (cg_conv_shape(&c, C, H, W, OC, K, s, p) != 0) {
		fprintf(stderr, "conv_dump: bad shape\n");
		exit(1);
	}
	nw = cg_conv_wsize(&c);
	nout = (size_t)B * c.OH * c.OW * OC;
	ncol = cg_conv_scratch(&c, B, (size_t)1 << 24);
	x = rnd(nin, -1, 1), w = rnd(nw, -0.5f, 0.5f), b = rnd(OC, -0.5f, 0.5f);
	d = rnd(nout, -1, 1), o = xalloc(nout), col = xalloc(ncol);
	dx = xalloc(nin), dw = xalloc(nw), db = xalloc(OC);
	cg_conv_forward(&c, o, x, w, b, B, col, ncol);
	cg_conv_backward(&c, dx, dw, db, d, x, w, B, col, ncol);
	begin("conv");
	fprintf(txt, "B %d\nC %d\nH %d\nW %d\nOC %d\nK %d\nstride %d\npad %d\n"
	        "OH %d\nOW %d\n", B, C, H, W, OC, K, s, p, c.OH, c.OW);
	put("x", x, nin), put("w", w, nw), put("b", b, OC), put("dout", d, nout);
	put("out", o, nout), put("dx", dx, nin), put("dw", dw, nw);
	put("db", db, OC);
	end();
	free(x), free(w), free(b), free(o), free(d), free(dx), free(dw);
	free(db), free(col);
}

static void
groupnorm_case(int B, int H, int W, int C, int G)
{
	size_t n = (size_t)B * H * W * C;
	float *x = rnd(n, -2, 3), *g = rnd(C, 0.5f, 1.5f), *be = rnd(C, -1, 1);
	float *d = rnd(n, -1, 1), *o = xalloc(n), *dx = xalloc(n);
	float *dg = xalloc(C), *db = xalloc(C);
	float *m = xalloc((size_t)B * G), *r = xalloc((size_t)B * G);

	cg_groupnorm_forward(o, m, r, x, g, be, B, H * W, C, G);
	cg_groupnorm_backward(dx, dg, db, d, x, g, m, r, B, H * W, C, G);
	begin("groupnorm");
	fprintf(txt, "B %d\nH %d\nW %d\nC %d\nG %d\n", B, H, W, C, G);
	put("x", x, n), put("gamma", g, C), put("beta", be, C);
	put("dout", d, n), put("out", o, n), put("dx", dx, n);
	put("dgamma", dg, C), put("dbeta", db, C);
	end();
	free(x), free(g), free(be), free(d), free(o), free(dx), free(dg);
	free(db), free(m), free(r);
}

static void
upsample_silu_case(int B, int H, int W, int C)
{
	size_t n = (size_t)B * H * W * C;
	float *x = rnd(n, -6, 6), *d4 = rnd(4 * n, -1, 1), *d = rnd(n, -1, 1);
	float *o4 = xalloc(4 * n), *o = xalloc(n), *dx = xalloc(n);
	float *dxs = xalloc(n);

	cg_upsample2_forward(o4, x, B, H, W, C);
	cg_upsample2_backward(dx, d4, B, H, W, C);
	begin("upsample2");
	fprintf(txt, "B %d\nH %d\nW %d\nC %d\n", B, H, W, C);
	put("x", x, n), put("dout", d4, 4 * n), put("out", o4, 4 * n);
	put("dx", dx, n);
	end();
	cg_silu_forward(o, x, n);
	cg_silu_backward(dxs, d, x, n);
	begin("silu");
	fprintf(txt, "B %d\nH %d\nW %d\nC %d\n", B, H, W, C);
	put("x", x, n), put("dout", d, n), put("out", o, n), put("dx", dxs, n);
	end();
	free(x), free(d4), free(d), free(o4), free(o), free(dx), free(dxs);
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: conv_dump DIR\n");
		return 2;
	}
	dir = argv[1];
	cg_rng_seed(&rng, 7);
	conv_case(2, 3, 9, 8, 5, 3, 1, 1);
	conv_case(3, 4, 10, 10, 6, 3, 2, 1);
	conv_case(2, 2, 8, 7, 3, 4, 2, 1);
	conv_case(2, 5, 6, 6, 4, 1, 1, 0);
	conv_case(1, 1, 28, 28, 8, 5, 1, 2);
	groupnorm_case(2, 5, 4, 8, 4);
	groupnorm_case(3, 7, 7, 12, 3);
	upsample_silu_case(2, 4, 3, 5);
	return 0;
}
