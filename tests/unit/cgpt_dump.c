/*
 * cgpt_dump.c - write a cgpt case and cg's logits, loss and gradient for
 * PyTorch.
 *
 * usage: cgpt_dump DIR [ncond context width layers heads tied batch
 *                       positions seed]
 *
 * Writes to DIR (which must exist): config.txt, views.txt (name, offset,
 * count and shape of each view), params.bin, weight.bin, logits.bin
 * [B, T, V], grad.bin (little-endian f32), tokens.bin, targets.bin
 * (little-endian int32) and loss.txt (%.17g).  The parameters are GPT-2's
 * init moved well away from it (every tensor gets N(0, 0.1) noise, so
 * that biases and gains matter); about one position in four has weight 0
 * (and a target of -1, which must not be read), the others weight
 * 1 / count, as arch_cgpt.c weighs a batch.  tests/torch_cgpt_check.py
 * recomputes all of it in PyTorch.  Exit 0 on success, 1 on failure, 2 on
 * a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "cgpt.h"

static const char *dir;

static FILE *
openout(const char *name)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "wb")) == NULL)
		fprintf(stderr, "cgpt_dump: %s: %s\n", path, strerror(errno));
	return fp;
}

static int
closeout(FILE *fp, const char *name)
{
	if (ferror(fp) | (fclose(fp) != 0)) {
		fprintf(stderr, "cgpt_dump: %s/%s: write error\n", dir, name);
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
		fprintf(stderr, "cgpt_dump: %s: not a number in [%d, %d]\n", s,
		        lo, hi);
		return -1;
	}
	*out = (int)v;
	return 0;
}

int
main(int argc, char **argv)
{
	struct cg_cgpt_config c = {3, 8, 16, 2, 2, 0};
	int B = 3, T = 7, seed = 1, rc = 1;
	int *vals[] = {&c.ncond, &c.T, &c.C, &c.L, &c.NH,
	               &c.tied,  &B,   &T,   &seed};
	const int lo[] = {1, 1, 1, 1, 1, 0, 1, 1, 0};
	struct cg_view *v = NULL;
	struct cg_cgpt_ws *ws = NULL;
	struct cg_rng r;
	float *params = NULL, *grad = NULL, *weight = NULL;
	int32_t *tokens = NULL, *targets = NULL;
	double loss;
	int nv, V, count = 0;
	FILE *fp;

	if (argc != 2 && argc != 11) {
		fprintf(stderr, "usage: cgpt_dump DIR [ncond context width "
		                "layers heads tied batch positions seed]\n");
		return 2;
	}
	dir = argv[1];
	for (int i = 2; i < argc; i++)
		if (arg(argv[i], lo[i - 2], 1 << 20, vals[i - 2]) != 0)
			return 2;
	size_t np = cg_cgpt_nparams(&c);
	if (np == 0) {
		fprintf(stderr, "cgpt_dump: %s\n", cg_errmsg());
		return 1;
	}
	if (T > c.T) {
		fprintf(stderr,
		        "cgpt_dump: %d positions: more than the "
		        "context %d\n",
		        T, c.T);
		return 2;
	}
	V = cg_cgpt_vocab(&c);
	nv = cg_cgpt_nviews(&c);
	v = calloc((size_t)nv, sizeof(*v));
	params = calloc(np, sizeof(float));
	grad = calloc(np, sizeof(float));
	weight = calloc((size_t)B * T, sizeof(float));
	tokens = calloc((size_t)B * T, sizeof(int32_t));
	targets = calloc((size_t)B * T, sizeof(int32_t));
	ws = cg_cgpt_ws_new(&c, B, 0);
	if (!v || !params || !grad || !weight || !tokens || !targets || !ws) {
		fprintf(stderr, "cgpt_dump: %s\n",
		        ws ? "out of memory" : cg_errmsg());
		goto out;
	}
	cg_cgpt_views(&c, v, nv);

	cg_rng_seed(&r, seed);
	cg_cgpt_init(&c, params, &r);
	for (size_t i = 0; i < np; i++)
		params[i] += 0.1f * cg_rng_normal(&r);
	for (int i = 0; i < B * T; i++) {
		tokens[i] = (int32_t)cg_rng_below(&r, V);
		if (cg_rng_below(&r, 4) == 0) {
			targets[i] = -1;
		} else {
			targets[i] = (int32_t)cg_rng_below(&r, V);
			weight[i] = 1;
			count++;
		}
	}
	for (int i = 0; i < B * T; i++)
		weight[i] /= count > 0 ? count : 1;
	if (cg_cgpt_forward_backward(&c, params, ws, tokens, targets, weight, B,
	                             T, grad, &loss) != 0) {
		fprintf(stderr, "cgpt_dump: %s\n", cg_errmsg());
		goto out;
	}

	if ((fp = openout("config.txt")) == NULL)
		goto out;
	fprintf(fp,
	        "ncond %d\ncontext %d\nwidth %d\nlayers %d\nheads %d\n"
	        "tied %d\nbatch %d\npositions %d\nvocab %d\nnparams %zu\n",
	        c.ncond, c.T, c.C, c.L, c.NH, c.tied, B, T, V, np);
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
	fprintf(fp, "loss %.17g\n", loss);
	if (closeout(fp, "loss.txt") != 0)
		goto out;
	if (write32("params.bin", params, np) != 0 ||
	    write32("grad.bin", grad, np) != 0 ||
	    write32("weight.bin", weight, (size_t)B * T) != 0 ||
	    write32("logits.bin", cg_cgpt_logits(ws), (size_t)B * T * V) != 0 ||
	    write32("tokens.bin", tokens, (size_t)B * T) != 0 ||
	    write32("targets.bin", targets, (size_t)B * T) != 0)
		goto out;
	rc = 0;
out:
	cg_cgpt_ws_free(ws);
	free(v);
	free(params);
	free(grad);
	free(weight);
	free(tokens);
	free(targets);
	return rc;
}
