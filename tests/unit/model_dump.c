/*
 * model_dump.c - write a model case and cg's loss and gradient (and, for
 * cgpt, its logits) for PyTorch, for any architecture listed below.
 *
 * usage: model_dump DIR ARCH [KEY=VALUE ...]
 *
 * The model is made as cg-init makes it (cg_model_create, through the
 * architecture registry): every KEY=VALUE is a number of its config,
 * after the row's defaults below, except seed (of the weights and the
 * inputs), batch and, for cgpt, positions, which shape the case,
 * bf16=1, which gives every matrix product bf16 operands (nn/gemm.h),
 * f16=1, which gives them f16 operands with the trainer's loss scaling
 * (the gradient made at 65536, halved while it is not finite, the scale
 * divided out),
 * and image_h, image_w and image_c, the image shape the manifest gives
 * (what a convolutional model reads).
 * teacher=1 (cclf and cgan) distils: alpha=P, the teacher weight in
 * percent (default 70), and tau=T, the temperature (cclf; default 2),
 * go with it; config.txt then holds alpha_pct and tau.
 * lora=R (cvae and cgpt) gives the model low-rank adapters of rank R, as
 * cg-init --from MODEL --lora R makes them, on the matrices lora-on=GLOB
 * names (up to 4 such keys; the one string value taken), with scale
 * lora-alpha=A / R (A: R if not given); each B, zero at the start, is
 * given N(0, 0.2^2) values, so that the adapters matter, and the pass
 * runs as cg-train-step runs it (model/lora.h): the merged W' in the
 * arch, the adapters' gradients from dW', W's places zero.  lora.txt
 * then holds r and alpha.
 * Writes to DIR (which must exist): arch.txt (ARCH), config.txt (the
 * config's numbers, the case's keys and nparams), views.txt (name,
 * offset, count and shape of each view), params.bin, grad.bin
 * (little-endian f32), loss.txt (the loss and its parts, %.17g),
 * model.cgm (the model with the parameters of params.bin, as cg-init
 * writes one) and the inputs, which are the one
 * part that differs by architecture:
 *
 *   cvae  x.bin [B, in_dim] (half the pixels 0 or 1, half grey), eps.bin
 *         [B, latent] (f32), cond.bin [B] (int32); loss, rec and kl.  A
 *         class prior and the condition's rows are moved away from
 *         their init (N(0, 0.25) values).
 *   cclf  x.bin [B, in_dim] (as cvae's), cond.bin [B] (int32); the loss
 *         and acc; logits.bin [B, ncond] and features.bin [B, hidden]
 *         (f32).  The weights are moved away from the init (N(0, 0.1)
 *         noise), so that the biases matter.  Distilled: tlogp.bin [B,
 *         ncond] (f32), a teacher's log-probabilities at tau (its
 *         logits N(0, 2)); the loss is the mix, and data and teacher
 *         its terms (cg_cclf_distill_forward_backward).
 *   cddpm x0.bin [B, in_dim] in [-1, 1] (half the pixels -1 or 1), t.bin
 *         [B] (int32: 0, T - 1, then uniform), cond.bin [B] (int32: every
 *         condition and the null one, ncond, in turn: the drawn drop
 *         mask), eps.bin [B, in_dim] (f32); the loss.  The weights are
 *         moved away from the init (N(0, 0.1) noise).
 *   cgan  x.bin [B, in_dim] (as cvae's), z.bin [B, latent] (f32), cond.bin
 *         [B] (int32: every condition in turn), sn.bin (f32: for each
 *         spectrally normalised matrix in view order, disc.0.w ..
 *         disc.psi.w, disc.emb, the u [rows] then v [cols] the pass held
 *         fixed); the loss (L_D) and d_real, d_fake and g (L_G).  grad.bin
 *         holds L_G's gradient in the generator's views and L_D's in the
 *         discriminator's.  The weights are moved away from the init
 *         (N(0, 0.1) noise).  Distilled: target.bin [B, in_dim] (f32),
 *         a teacher's images (uniform in [0, 1], one in five 0 or 1);
 *         teacher is T, and grad.bin's generator part that of (1 -
 *         alpha) L_G + alpha T (cg_cgan_distill_forward_backward).
 *   cgpt  tokens.bin, targets.bin [B, positions] (int32), weight.bin
 *         (f32: about one position in four 0, with a target of -1 that
 *         must not be read, the others 1 / count, as arch_cgpt.c weighs
 *         a batch), logits.bin [B, positions, V] (f32); the loss.  The
 *         weights are moved well away from the init (N(0, 0.1) noise on
 *         every tensor, so that biases and gains matter).
 *
 * tests/torch_check.py recomputes all of it in PyTorch.  Exit 0 on
 * success, 1 on failure, 2 on a usage error.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "arch/cclf/cclf.h"
#include "arch/cddpm/cddpm.h"
#include "arch/cgan/cgan.h"
#include "arch/cgpt/cgpt.h"
#include "arch/cvae/cvae.h"
#include "cg.h"
#include "nn/gemm.h"
#include "nn/transformer.h"
#include "model/lora.h"
#include "model/model.h"

#define PROG "model_dump"

static const char *dir;

/* ------------------------------------------------------------- output */

static FILE *
openout(const char *name)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fp = fopen(path, "wb")) == NULL)
		fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
	return fp;
}

static int
closeout(FILE *fp, const char *name)
{
	if (ferror(fp) | (fclose(fp) != 0)) {
		fprintf(stderr, PROG ": %s/%s: write error\n", dir, name);
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

/* --------------------------------------------------- the architectures */

/* What a case computed: the loss and its named parts. */
#define NPART 6
struct result {
	double loss;
	const char *part_name[NPART];
	double part[NPART];
};

/* Distilled cases (teacher=1): the teacher weight, or -1 for none, and
 * the temperature. */
static double d_alpha = -1, d_tau = 2;

/* A case's inputs and one forward and backward pass: inputs written to
 * dir, grad [nparams] += the gradient.  0, or -1 with a message. */
typedef int (*case_fn)(struct cg_model *m, int B, int T, struct cg_rng *r,
                       float *grad, struct result *res);

static int
int_of(const struct cg_model *m, const char *key)
{
	return (int)cg_json_u64(m->config, key, 0);
}

/* The cddpm's loss weighting: its config's, or the loss on eps where it
 * has none (as arch_cddpm.c reads a model made before the weighting). */
static double
snr_clip_of(const struct cg_model *m)
{
	const cJSON *v =
	    cJSON_GetObjectItemCaseSensitive(m->config, "snr-clip");

	return cJSON_IsNumber(v) ? v->valuedouble : CG_CDDPM_EPS_LOSS;
}

/* Around a case's pass: the adapters merged into their W (model/lora.h),
 * then their gradient from dW' and W back; nothing without adapters. */
static int
lora_on(struct cg_model *m)
{
	return cg_lora_merge(m, 0);
}

static void
lora_off(struct cg_model *m, float *grad, int ok)
{
	if (ok)
		cg_lora_grad(m, grad);
	cg_lora_unmerge(m);
}

static int
cvae_case(struct cg_model *m, int B, int T, struct cg_rng *r, float *grad,
          struct result *res)
{
	struct cg_cvae_config c = {
	    int_of(m, "in_dim"),    int_of(m, "ncond"),
	    int_of(m, "hidden"),    int_of(m, "layers"),
	    int_of(m, "latent"),    int_of(m, "class-prior"),
	    int_of(m, "cond-every"), int_of(m, "conv"), 0, 0, 0};
	size_t nx = (size_t)B * c.in_dim, ne = (size_t)B * c.latent;
	float *x = calloc(nx, sizeof(float)), *eps = calloc(ne, sizeof(float));
	int32_t *cond = calloc((size_t)B, sizeof(int32_t));
	struct cg_cvae_ws *ws = NULL;
	int fb, shape[3], rc = -1;

	(void)T;
	/* The convolutional nets' image shape is the manifest's. */
	if (c.conv > 0) {
		if (m->arch->image_shape(m, shape) != 0)
			goto out;
		c.height = shape[0], c.width = shape[1], c.channels = shape[2];
	}
	if (!x || !eps || !cond || (ws = cg_cvae_ws_new(&c, B, 0)) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (size_t i = 0; i < nx; i++) {
		float u = cg_rng_uniform(r);
		x[i] = i % 2 ? u : (u < 0.5f ? 0.0f : 1.0f);
	}
	for (size_t i = 0; i < ne; i++)
		eps[i] = cg_rng_normal(r);
	for (int b = 0; b < B; b++)
		cond[b] = (int32_t)(b % c.ncond);
	/* The class prior starts at N(0, I), the condition's rows at zero:
	 * move them, so that they matter. */
	for (int v = 0; v < m->nviews; v++)
		if (strncmp(m->views[v].name, "prior.", 6) == 0 ||
		    strstr(m->views[v].name, ".cond") != NULL)
			for (size_t i = 0; i < m->views[v].n; i++)
				m->params[m->views[v].off + i] =
				    0.5f * cg_rng_normal(r);
	res->part_name[0] = "rec";
	res->part_name[1] = "kl";
	if (lora_on(m) != 0)
		goto out;
	fb = cg_cvae_forward_backward(&c, m->params, ws, x, cond, eps, B, grad,
	                              &res->loss, &res->part[0], &res->part[1]);
	lora_off(m, grad, fb == 0);
	if (fb != 0 || write32("x.bin", x, nx) != 0 ||
	    write32("eps.bin", eps, ne) != 0 ||
	    write32("cond.bin", cond, (size_t)B) != 0)
		goto out;
	rc = 0;
out:
	cg_cvae_ws_free(ws);
	free(x);
	free(eps);
	free(cond);
	return rc;
}

static int
cclf_case(struct cg_model *m, int B, int T, struct cg_rng *r, float *grad,
          struct result *res)
{
	struct cg_cclf_config c = {int_of(m, "in_dim"), int_of(m, "ncond"),
	                           int_of(m, "hidden"), int_of(m, "layers"),
	                           int_of(m, "conv"), 0, 0, 0};
	size_t nx = (size_t)B * c.in_dim;
	float *x = calloc(nx, sizeof(float));
	int32_t *cond = calloc((size_t)B, sizeof(int32_t));
	struct cg_cclf_ws *ws = NULL;
	int shape[3], rc = -1;

	(void)T;
	/* A CNN's image shape is the manifest's. */
	if (c.conv > 0) {
		if (m->arch->image_shape(m, shape) != 0)
			goto out;
		c.height = shape[0], c.width = shape[1], c.channels = shape[2];
	}
	if (!x || !cond || (ws = cg_cclf_ws_new(&c, B)) == NULL) {
		if (!x || !cond)
			cg_seterr("out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] += 0.1f * cg_rng_normal(r);
	for (size_t i = 0; i < nx; i++) {
		float u = cg_rng_uniform(r);
		x[i] = i % 2 ? u : (u < 0.5f ? 0.0f : 1.0f);
	}
	for (int b = 0; b < B; b++)
		cond[b] = (int32_t)cg_rng_below(r, (uint64_t)c.ncond);
	res->part_name[0] = "acc";
	if (d_alpha >= 0) {
		float *tl = calloc((size_t)B * c.ncond, sizeof(float));
		int fb;

		if (tl == NULL) {
			cg_seterr("out of memory");
			goto out;
		}
		for (size_t i = 0; i < (size_t)B * c.ncond; i++)
			tl[i] = 2 * cg_rng_normal(r);
		cg_log_softmax_forward(tl, tl, (float)d_tau, (size_t)B,
		                       c.ncond);
		res->part_name[1] = "data";
		res->part_name[2] = "teacher";
		fb = cg_cclf_distill_forward_backward(
		    &c, m->params, ws, x, cond, tl, d_alpha, d_tau, B, grad,
		    &res->loss, &res->part[0], &res->part[1], &res->part[2]);
		if (fb != 0 ||
		    write32("tlogp.bin", tl, (size_t)B * c.ncond) != 0) {
			free(tl);
			goto out;
		}
		free(tl);
	} else if (cg_cclf_forward_backward(&c, m->params, ws, x, cond, B,
	                                    grad, &res->loss,
	                                    &res->part[0]) != 0)
		goto out;
	if (write32("x.bin", x, nx) != 0 ||
	    write32("cond.bin", cond, (size_t)B) != 0 ||
	    write32("logits.bin", cg_cclf_logits(ws), (size_t)B * c.ncond) !=
	        0 ||
	    write32("features.bin", cg_cclf_features(ws),
	            (size_t)B * c.hidden) != 0)
		goto out;
	rc = 0;
out:
	cg_cclf_ws_free(ws);
	free(x);
	free(cond);
	return rc;
}

static int
cddpm_case(struct cg_model *m, int B, int T, struct cg_rng *r, float *grad,
           struct result *res)
{
	struct cg_cddpm_config c = {int_of(m, "in_dim"),
	                            int_of(m, "ncond"),
	                            int_of(m, "hidden"),
	                            int_of(m, "layers"),
	                            int_of(m, "embed"),
	                            int_of(m, "timesteps"),
	                            snr_clip_of(m),
	                            int_of(m, "predict-x0"),
	                            int_of(m, "unet"),
	                            0,
	                            0,
	                            0,
	                            int_of(m, "attn"),
	                            int_of(m, "film"),
	                            int_of(m, "cosine")};
	size_t nx = (size_t)B * c.in_dim;
	float *x = calloc(nx, sizeof(float)), *eps = calloc(nx, sizeof(float));
	int32_t *cond = calloc((size_t)B, sizeof(int32_t));
	int32_t *t = calloc((size_t)B, sizeof(int32_t));
	struct cg_cddpm_ws *ws = NULL;
	int shape[3], rc = -1;

	(void)T;
	/* The U-Net's image shape is the manifest's. */
	if (c.unet > 0) {
		if (m->arch->image_shape(m, shape) != 0)
			goto out;
		c.height = shape[0], c.width = shape[1], c.channels = shape[2];
	}
	if (!x || !eps || !cond || !t ||
	    (ws = cg_cddpm_ws_new(&c, B, 0)) == NULL) {
		if (!x || !eps || !cond || !t)
			cg_seterr("out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] += 0.1f * cg_rng_normal(r);
	for (size_t i = 0; i < nx; i++) {
		float u = 2 * cg_rng_uniform(r) - 1;
		x[i] = i % 2 ? u : (u < 0 ? -1.0f : 1.0f);
		eps[i] = cg_rng_normal(r);
	}
	for (int b = 0; b < B; b++) {
		cond[b] = (int32_t)(b % (c.ncond + 1));
		t[b] = b == 0 ? 0
		       : b == 1
		           ? c.timesteps - 1
		           : (int32_t)cg_rng_below(r, (uint64_t)c.timesteps);
	}
	if (cg_cddpm_forward_backward(&c, m->params, ws, x, cond, t, eps, B,
	                              grad, &res->loss) != 0 ||
	    write32("x0.bin", x, nx) != 0 || write32("eps.bin", eps, nx) != 0 ||
	    write32("cond.bin", cond, (size_t)B) != 0 ||
	    write32("t.bin", t, (size_t)B) != 0)
		goto out;
	rc = 0;
out:
	cg_cddpm_ws_free(ws);
	free(x);
	free(eps);
	free(cond);
	free(t);
	return rc;
}

static int
cgan_case(struct cg_model *m, int B, int T, struct cg_rng *r, float *grad,
          struct result *res)
{
	struct cg_cgan_config c = {int_of(m, "in_dim"),
	                           int_of(m, "ncond"),
	                           int_of(m, "latent"),
	                           int_of(m, "hidden"),
	                           int_of(m, "layers"),
	                           int_of(m, "sn-iters"),
	                           int_of(m, "conv"),
	                           0,
	                           0,
	                           0,
	                           cg_json_num(m->config, "r1", 0),
	                           (int)cg_json_num(m->config, "disc-kernel", 3),
	                           cg_json_num(m->config, "aux", 0)};
	size_t nx = (size_t)B * c.in_dim, nz = (size_t)B * c.latent, nsn = 0;
	float *x = calloc(nx, sizeof(float)), *z = calloc(nz, sizeof(float));
	int32_t *cond = calloc((size_t)B, sizeof(int32_t));
	struct cg_cgan_ws *ws = NULL;
	struct cg_cgan_loss l;
	float *sn = NULL, *target = NULL;
	int shape[3], rc = -1;
	/* The discriminator's matrices: its layers (or 2 convolutions),
	 * psi and the embedding, every other view from the first. */
	const int nmat = (c.conv ? 2 : c.layers) + 2,
	          first = c.conv ? 15 : 2 * c.layers + 3;

	(void)T;
	/* The convolutional nets' image shape is the manifest's. */
	if (c.conv > 0) {
		if (m->arch->image_shape(m, shape) != 0)
			goto out;
		c.height = shape[0], c.width = shape[1], c.channels = shape[2];
	}
	if (!x || !z || !cond || (ws = cg_cgan_ws_new(&c, B, 0)) == NULL) {
		if (!x || !z || !cond)
			cg_seterr("out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] += 0.1f * cg_rng_normal(r);
	for (size_t i = 0; i < nx; i++) {
		float u = cg_rng_uniform(r);
		x[i] = i % 2 ? u : (u < 0.5f ? 0.0f : 1.0f);
	}
	for (size_t i = 0; i < nz; i++)
		z[i] = cg_rng_normal(r);
	for (int b = 0; b < B; b++)
		cond[b] = (int32_t)(b % c.ncond);
	if (d_alpha >= 0) {
		if ((target = calloc(nx, sizeof(float))) == NULL) {
			cg_seterr("out of memory");
			goto out;
		}
		for (size_t i = 0; i < nx; i++) {
			float u = cg_rng_uniform(r);
			target[i] = i % 5 == 0 ? (u < 0.5f ? 0.0f : 1.0f) : u;
		}
		if (cg_cgan_distill_forward_backward(&c, m->params, ws, x, cond,
		                                     z, target, d_alpha, B,
		                                     grad, &l) != 0 ||
		    write32("target.bin", target, nx) != 0)
			goto out;
		res->part_name[3] = "teacher";
		res->part[3] = l.teacher;
	} else if (cg_cgan_forward_backward(&c, m->params, ws, x, cond, z, B,
	                                    grad, &l) != 0)
		goto out;
	for (int i = 0; i < nmat; i++) {
		const float *u, *v;
		double sigma;
		const struct cg_view *w = &m->views[first + 2 * i];
		/* A convolution's weight is the matrix [out, in x k x k]. */
		const size_t rows = w->shape[0], cols = w->n / rows;

		(void)cg_cgan_sn_vectors(ws, i, &u, &v, &sigma);
		float *grown = realloc(sn, (nsn + rows + cols) * sizeof(float));
		if (grown == NULL) {
			cg_seterr("out of memory");
			goto out;
		}
		sn = grown;
		memcpy(sn + nsn, u, rows * sizeof(float));
		nsn += rows;
		memcpy(sn + nsn, v, cols * sizeof(float));
		nsn += cols;
	}
	/* L_D's objective: the hinge, the R1 penalty and the classifier's
	 * cross-entropy of the reals */
	res->loss = l.d + l.r1 + c.aux * l.aux_real;
	if (c.aux > 0) {
		res->part_name[4] = "aux_real";
		res->part[4] = l.aux_real;
		res->part_name[5] = "aux_fake";
		res->part[5] = l.aux_fake;
	}
	res->part_name[0] = "d_real";
	res->part[0] = l.d_real;
	res->part_name[1] = "d_fake";
	res->part[1] = l.d_fake;
	res->part_name[2] = "g";
	res->part[2] = l.g;
	if (write32("x.bin", x, nx) != 0 || write32("z.bin", z, nz) != 0 ||
	    write32("cond.bin", cond, (size_t)B) != 0 ||
	    write32("sn.bin", sn, nsn) != 0)
		goto out;
	rc = 0;
out:
	cg_cgan_ws_free(ws);
	free(x);
	free(z);
	free(cond);
	free(sn);
	free(target);
	return rc;
}

static int
cgpt_case(struct cg_model *m, int B, int T, struct cg_rng *r, float *grad,
          struct result *res)
{
	struct cg_cgpt_config c = {int_of(m, "ncond"), int_of(m, "context"),
	                           int_of(m, "width"), int_of(m, "layers"),
	                           int_of(m, "heads"), int_of(m, "tied"), 0, 0};
	size_t n = (size_t)B * T;
	int V = cg_cgpt_vocab(&c), count = 0, fb, rc = -1;
	float *weight = calloc(n, sizeof(float));
	int32_t *tokens = calloc(n, sizeof(int32_t));
	int32_t *targets = calloc(n, sizeof(int32_t));
	struct cg_cgpt_ws *ws = NULL;

	if (T < 1 || T > c.T) {
		cg_seterr("%d positions: not in [1, context %d]", T, c.T);
		goto out;
	}
	if (!weight || !tokens || !targets ||
	    (ws = cg_cgpt_ws_new(&c, B, 0)) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] += 0.1f * cg_rng_normal(r);
	for (size_t i = 0; i < n; i++) {
		tokens[i] = (int32_t)cg_rng_below(r, V);
		if (cg_rng_below(r, 4) == 0) {
			targets[i] = -1;
		} else {
			targets[i] = (int32_t)cg_rng_below(r, V);
			weight[i] = 1;
			count++;
		}
	}
	for (size_t i = 0; i < n; i++)
		weight[i] /= count > 0 ? count : 1;
	if (lora_on(m) != 0)
		goto out;
	fb = cg_cgpt_forward_backward(&c, m->params, ws, tokens, targets,
	                              weight, B, T, grad, &res->loss);
	lora_off(m, grad, fb == 0);
	if (fb != 0 || write32("tokens.bin", tokens, n) != 0 ||
	    write32("targets.bin", targets, n) != 0 ||
	    write32("weight.bin", weight, n) != 0 ||
	    write32("logits.bin", cg_cgpt_logits(ws), n * V) != 0)
		goto out;
	rc = 0;
out:
	cg_cgpt_ws_free(ws);
	free(weight);
	free(tokens);
	free(targets);
	return rc;
}

/* One row per architecture: its default config and case keys, and its
 * case. */
static const struct {
	const char *arch;
	const char *defaults;
	case_fn run;
	int adapters; /* whether the case takes lora=R */
} rows[] = {
    {"cvae",
     "in_dim=20 ncond=4 hidden=16 layers=2 latent=5 class-prior=1 "
     "cond-every=1 batch=6",
     cvae_case, 1},
    {"cclf", "in_dim=20 ncond=4 hidden=16 layers=2 batch=6", cclf_case, 0},
    /* cond-drop is the arch's draw, which the case makes itself. */
    {"cddpm",
     "in_dim=20 ncond=4 hidden=16 layers=2 embed=6 timesteps=50 "
     "cond-drop=0 batch=6",
     cddpm_case, 0},
    {"cgan", "in_dim=20 ncond=4 latent=5 hidden=16 layers=2 sn-iters=5 batch=6",
     cgan_case, 0},
    {"cgpt",
     "ncond=3 context=8 width=16 layers=2 heads=2 tied=0 batch=3 "
     "positions=7",
     cgpt_case, 1},
};

/* ------------------------------------------------------------- main */

/* lora-on= keys at most */
#define MAX_GLOBS 4

/* Case keys: what the dump takes, not the model's config. */
struct keys {
	long seed, batch, positions, bf16, f16;
	long teacher, alpha, tau; /* distilled; alpha in percent */
	long image[3];         /* height, width, channels; 0: no "image" */
	long lora, lora_alpha; /* rank (0: no adapters); 0: alpha = rank */
	const char *glob[MAX_GLOBS];
	int nglob;
};

/* KEY=VALUE into k or cfg; -1 with a message on stderr. */
static int
parse_kv(const char *s, cJSON *cfg, struct keys *k)
{
	const char *eq = strchr(s, '=');
	char key[64], *end;
	long v;

	if (eq == NULL || eq == s || (size_t)(eq - s) >= sizeof(key)) {
		fprintf(stderr, PROG ": %s: not KEY=VALUE\n", s);
		return -1;
	}
	memcpy(key, s, (size_t)(eq - s));
	key[eq - s] = '\0';
	if (strcmp(key, "lora-on") == 0) {
		if (k->nglob == MAX_GLOBS || eq[1] == '\0') {
			fprintf(stderr,
			        PROG ": %s: 1 to %d non-empty lora-on\n", s,
			        MAX_GLOBS);
			return -1;
		}
		k->glob[k->nglob++] = eq + 1;
		return 0;
	}
	errno = 0;
	v = strtol(eq + 1, &end, 10);
	if (errno || end == eq + 1 || *end != '\0' || v < 0 || v > 1 << 20) {
		fprintf(stderr, PROG ": %s: not a number in [0, %d]\n", s,
		        1 << 20);
		return -1;
	}
	if (strcmp(key, "seed") == 0)
		k->seed = v;
	else if (strcmp(key, "batch") == 0)
		k->batch = v;
	else if (strcmp(key, "positions") == 0)
		k->positions = v;
	else if (strcmp(key, "bf16") == 0)
		k->bf16 = v;
	else if (strcmp(key, "f16") == 0)
		k->f16 = v;
	else if (strcmp(key, "teacher") == 0)
		k->teacher = v;
	else if (strcmp(key, "alpha") == 0)
		k->alpha = v;
	else if (strcmp(key, "tau") == 0)
		k->tau = v;
	else if (strcmp(key, "lora") == 0)
		k->lora = v;
	else if (strcmp(key, "lora-alpha") == 0)
		k->lora_alpha = v;
	else if (strcmp(key, "image_h") == 0)
		k->image[0] = v;
	else if (strcmp(key, "image_w") == 0)
		k->image[1] = v;
	else if (strcmp(key, "image_c") == 0)
		k->image[2] = v;
	else {
		cJSON_DeleteItemFromObjectCaseSensitive(cfg, key);
		cJSON_AddNumberToObject(cfg, key, (double)v);
	}
	return 0;
}

/* The row's defaults, then argv[3..]. */
static int
parse_args(int argc, char **argv, const char *defaults, cJSON *cfg,
           struct keys *k)
{
	char buf[256];

	snprintf(buf, sizeof(buf), "%s", defaults);
	for (char *t = strtok(buf, " "); t != NULL; t = strtok(NULL, " "))
		if (parse_kv(t, cfg, k) != 0)
			return -1;
	for (int i = 3; i < argc; i++)
		if (parse_kv(argv[i], cfg, k) != 0)
			return -1;
	if (k->teacher && (k->alpha > 100 || k->tau < 1)) {
		fprintf(stderr, PROG ": alpha=%ld tau=%ld: alpha in [0, 100], "
		                     "tau at least 1\n",
		        k->alpha, k->tau);
		return -1;
	}
	if (k->batch < 1) {
		fprintf(stderr, PROG ": batch=%ld: at least 1\n", k->batch);
		return -1;
	}
	if ((k->lora > 0) != (k->nglob > 0) || (k->lora_alpha && !k->lora)) {
		fprintf(stderr, PROG ": lora=R and lora-on=GLOB go together "
		                     "(lora-alpha with them)\n");
		return -1;
	}
	return 0;
}

static int
write_text(const struct cg_model *m, const struct keys *k,
           const struct result *res)
{
	FILE *fp;
	const cJSON *e;

	if ((fp = openout("arch.txt")) == NULL)
		return -1;
	fprintf(fp, "%s\n", m->arch->name);
	if (closeout(fp, "arch.txt") != 0)
		return -1;
	if ((fp = openout("config.txt")) == NULL)
		return -1;
	cJSON_ArrayForEach(e, m->config)
	{
		if (cJSON_IsNumber(e))
			fprintf(fp, "%s %.17g\n", e->string, e->valuedouble);
	}
	fprintf(fp, "seed %ld\nbatch %ld\npositions %ld\nnparams %zu\n",
	        k->seed, k->batch, k->positions, m->nparams);
	if (k->image[0] > 0)
		fprintf(fp, "image_h %ld\nimage_w %ld\nimage_c %ld\n",
		        k->image[0], k->image[1], k->image[2]);
	if (k->teacher)
		fprintf(fp, "alpha_pct %ld\ntau %ld\n", k->alpha, k->tau);
	if (closeout(fp, "config.txt") != 0)
		return -1;
	if ((fp = openout("views.txt")) == NULL)
		return -1;
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		fprintf(fp, "%s %zu %zu", v->name, v->off, v->n);
		for (int d = 0; d < v->ndim; d++)
			fprintf(fp, " %llu", (unsigned long long)v->shape[d]);
		fputc('\n', fp);
	}
	if (closeout(fp, "views.txt") != 0)
		return -1;
	if ((fp = openout("loss.txt")) == NULL)
		return -1;
	fprintf(fp, "loss %.17g\n", res->loss);
	for (int i = 0; i < NPART; i++)
		if (res->part_name[i] != NULL)
			fprintf(fp, "%s %.17g\n", res->part_name[i],
			        res->part[i]);
	return closeout(fp, "loss.txt");
}

/* lora.txt: the adapters' rank and alpha, where m has them. */
static int
write_lora(const struct cg_model *m)
{
	FILE *fp;

	if (m->lora == NULL)
		return 0;
	if ((fp = openout("lora.txt")) == NULL)
		return -1;
	fprintf(fp, "r %d\nalpha %.17g\n", m->lora->r, m->lora->alpha);
	return closeout(fp, "lora.txt");
}

int
main(int argc, char **argv)
{
	char path[4096];
	struct keys k = {1, 0, 0, 0, 0, 0, 70, 2, {0, 0, 0}, 0, 0, {NULL}, 0};
	cJSON *extra = NULL;
	struct result res = {0};
	struct cg_model *m = NULL;
	struct cg_rng r;
	cJSON *cfg;
	float *grad = NULL;
	size_t row = 0;
	int rc = 1;

	if (argc < 3) {
		fprintf(stderr, "usage: " PROG " DIR ARCH [KEY=VALUE ...]\n");
		return 2;
	}
	dir = argv[1];
	if (cg_arch_all() != 0) {
		fprintf(stderr, PROG ": %s\n", cg_errmsg());
		return 1;
	}
	while (row < sizeof(rows) / sizeof(rows[0]) &&
	       strcmp(rows[row].arch, argv[2]) != 0)
		row++;
	if (row == sizeof(rows) / sizeof(rows[0])) {
		fprintf(stderr, PROG ": %s: no case for this architecture\n",
		        argv[2]);
		return 2;
	}
	if ((cfg = cJSON_CreateObject()) == NULL ||
	    parse_args(argc, argv, rows[row].defaults, cfg, &k) != 0) {
		cJSON_Delete(cfg);
		return 2;
	}
	/* The image's shape in the manifest, as cg-init puts it there. */
	if (k.image[0] > 0) {
		cJSON *img;

		if ((extra = cJSON_CreateObject()) == NULL ||
		    (img = cJSON_AddObjectToObject(extra, "image")) == NULL ||
		    !cJSON_AddNumberToObject(img, "height", k.image[0]) ||
		    !cJSON_AddNumberToObject(img, "width", k.image[1]) ||
		    !cJSON_AddNumberToObject(img, "channels", k.image[2])) {
			cg_seterr("out of memory");
			cJSON_Delete(cfg);
			cJSON_Delete(extra);
			goto fail;
		}
	}
	/* The weights from seed, as cg-init's; the inputs from seed + 1. */
	if ((m = cg_model_create(argv[2], cfg, extra, (uint64_t)k.seed)) ==
	    NULL)
		goto fail;
	if (k.lora > 0) {
		struct cg_model *a;

		if (!rows[row].adapters) {
			fprintf(stderr, PROG ": %s: no adapters in this case\n",
			        argv[2]);
			cg_model_free(m);
			return 2;
		}
		a = cg_model_add_lora(
		    m, (int)k.lora,
		    (double)(k.lora_alpha ? k.lora_alpha : k.lora), k.glob,
		    k.nglob, (uint64_t)k.seed);
		cg_model_free(m);
		if ((m = a) == NULL)
			goto fail;
		/* B starts at zero, where a wrong scale would go unseen. */
		cg_rng_seed(&r, (uint64_t)k.seed + 2);
		for (int i = 0; i < m->lora->n; i++) {
			const struct cg_view *b = &m->views[m->lora->b[i]];
			for (size_t j = 0; j < b->n; j++)
				m->params[b->off + j] =
				    0.2f * cg_rng_normal(&r);
		}
	}
	if ((grad = calloc(m->nparams, sizeof(float))) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	if (k.teacher) {
		if (strcmp(argv[2], "cclf") != 0 &&
		    strcmp(argv[2], "cgan") != 0) {
			fprintf(stderr, PROG ": %s: no distilled case\n",
			        argv[2]);
			cg_model_free(m);
			free(grad);
			return 2;
		}
		d_alpha = k.alpha / 100.0;
		d_tau = (double)k.tau;
	}
	cg_set_precision(k.f16    ? CG_PREC_F16
	                 : k.bf16 ? CG_PREC_BF16
	                          : CG_PREC_F32);
	/* f16: as cg-train-step scales a step's loss (train/train.c) */
	for (float scale = k.f16 ? 65536.0f : 1.0f;; scale /= 2) {
		int finite = 1;
		cg_rng_seed(&r, (uint64_t)k.seed + 1);
		memset(grad, 0, m->nparams * sizeof(float));
		cg_set_loss_scale(scale);
		int brc = rows[row].run(m, (int)k.batch, (int)k.positions, &r,
		                       grad, &res);
		cg_set_loss_scale(1);
		if (brc != 0)
			goto fail;
		for (size_t i = 0; i < m->nparams; i++) {
			grad[i] /= scale;
			finite &= isfinite(grad[i]) != 0;
		}
		if (finite || scale <= 1)
			break;
	}
	snprintf(path, sizeof(path), "%s/model.cgm", dir);
	if (write_text(m, &k, &res) != 0 || write_lora(m) != 0 ||
	    write32("params.bin", m->params, m->nparams) != 0 ||
	    write32("grad.bin", grad, m->nparams) != 0)
		goto out;
	if (cg_model_write(m, path, CG_COMPRESS_NONE) != 0)
		goto fail;
	rc = 0;
	goto out;
fail:
	fprintf(stderr, PROG ": %s: %s\n", argv[2], cg_errmsg());
out:
	cg_model_free(m);
	free(grad);
	return rc;
}
