/*
 * cvae_dump.c - write a CVAE case and cg's loss and gradient for PyTorch.
 *
 * usage: cvae_dump DIR [in_dim ncond hidden layers latent batch seed]
 *
 * Writes to DIR (which must exist): config.txt, views.txt (name, offset,
 * count and shape of each view), params.bin, x.bin, eps.bin, grad.bin
 * (little-endian f32), cond.bin (little-endian int32) and loss.txt (loss,
 * rec and kl, %.17g).  tests/torch_cvae_check.py recomputes all of it in
 * PyTorch.  Exit 0 on success, 1 on failure, 2 on a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "cvae.h"

static const char *dir;

static FILE *
openout(const char *name)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "wb")) == NULL)
		fprintf(stderr, "cvae_dump: %s: %s\n", path, strerror(errno));
	return fp;
}

static int
closeout(FILE *fp, const char *name)
{
	if (ferror(fp) | (fclose(fp) != 0)) {
		fprintf(stderr, "cvae_dump: %s/%s: write error\n", dir, name);
		return -1;
	}
	return 0;
}

/* 32-bit words in little-endian order, whatever the host's. */
static int
write32(const char *name, const void *p, size_t n)
{
	FILE *fp = openout(name);
	const uint32_t *w = p;

	if (fp == NULL)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char b[4] = {w[i] & 0xff, (w[i] >> 8) & 0xff,
		                      (w[i] >> 16) & 0xff, w[i] >> 24};
		fwrite(b, 1, 4, fp);
	}
	return closeout(fp, name);
}

static int
arg(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "cvae_dump: %s: not a number in [%d, %d]\n", s,
		        lo, hi);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int
main(int argc, char **argv)
{
	struct cg_cvae_config c = {20, 4, 16, 2, 5};
	int B = 6, seed = 1, rc = 1;
	int *vals[] = {&c.in_dim, &c.ncond, &c.hidden, &c.layers,
	               &c.latent, &B,       &seed};
	struct cg_view v[256];
	struct cg_cvae_ws *ws = NULL;
	struct cg_rng r;
	float *params = NULL, *grad = NULL, *x = NULL, *eps = NULL;
	int32_t *cond = NULL;
	double loss, rec, kl;
	int nv;
	FILE *fp;

	if (argc != 2 && argc != 9) {
		fprintf(stderr, "usage: cvae_dump DIR [in_dim ncond hidden "
		                "layers latent batch seed]\n");
		return 2;
	}
	dir = argv[1];
	for (int i = 2; i < argc; i++)
		if (arg(argv[i], i == 8 ? 0 : 1, 1 << 20, vals[i - 2]) != 0)
			return 2;
	size_t np = cg_cvae_nparams(&c);
	if (np == 0 || (nv = cg_cvae_views(&c, v, 256)) < 0) {
		fprintf(stderr, "cvae_dump: %s\n", cg_errmsg());
		return 1;
	}
	params = calloc(np, sizeof(float));
	grad = calloc(np, sizeof(float));
	x = calloc((size_t)B * c.in_dim, sizeof(float));
	eps = calloc((size_t)B * c.latent, sizeof(float));
	cond = calloc(B, sizeof(int32_t));
	ws = cg_cvae_ws_new(&c, B);
	if (!params || !grad || !x || !eps || !cond || !ws) {
		fprintf(stderr, "cvae_dump: out of memory\n");
		goto out;
	}

	cg_rng_seed(&r, seed);
	cg_cvae_init(&c, params, &r);
	/* Half the pixels at 0 or 1 as in real images, half grey. */
	for (size_t i = 0; i < (size_t)B * c.in_dim; i++) {
		float u = cg_rng_uniform(&r);
		x[i] = i % 2 ? u : (u < 0.5f ? 0.0f : 1.0f);
	}
	for (size_t i = 0; i < (size_t)B * c.latent; i++)
		eps[i] = cg_rng_normal(&r);
	for (int b = 0; b < B; b++)
		cond[b] = (int32_t)(b % c.ncond);
	if (cg_cvae_forward_backward(&c, params, ws, x, cond, eps, B, grad,
	                             &loss, &rec, &kl) != 0) {
		fprintf(stderr, "cvae_dump: %s\n", cg_errmsg());
		goto out;
	}

	if ((fp = openout("config.txt")) == NULL)
		goto out;
	fprintf(fp,
	        "in_dim %d\nncond %d\nhidden %d\nlayers %d\nlatent %d\n"
	        "batch %d\nnparams %zu\n",
	        c.in_dim, c.ncond, c.hidden, c.layers, c.latent, B, np);
	if (closeout(fp, "config.txt") != 0)
		goto out;
	if ((fp = openout("views.txt")) == NULL)
		goto out;
	for (int i = 0; i < nv; i++) {
		fprintf(fp, "%s %zu %zu", v[i].name, v[i].off, v[i].n);
		for (int d = 0; d < v[i].ndim; d++)
			fprintf(fp, " %llu", (unsigned long long)v[i].shape[d]);
		fputc('\n', fp);
	}
	if (closeout(fp, "views.txt") != 0)
		goto out;
	if ((fp = openout("loss.txt")) == NULL)
		goto out;
	fprintf(fp, "loss %.17g\nrec %.17g\nkl %.17g\n", loss, rec, kl);
	if (closeout(fp, "loss.txt") != 0)
		goto out;
	if (write32("params.bin", params, np) != 0 ||
	    write32("grad.bin", grad, np) != 0 ||
	    write32("x.bin", x, (size_t)B * c.in_dim) != 0 ||
	    write32("eps.bin", eps, (size_t)B * c.latent) != 0 ||
	    write32("cond.bin", cond, B) != 0)
		goto out;
	rc = 0;
out:
	cg_cvae_ws_free(ws);
	free(params);
	free(grad);
	free(x);
	free(eps);
	free(cond);
	return rc;
}
