/*
 * test_qrun.c - the cclf, cddpm and cgan run on weights as stored (their
 * ws_set_mats, nn/qlinear.h's cg_wset) against the same weights decoded
 * to f32.
 *
 * For each architecture (the MLPs, the CNN, the U-Net with attention,
 * the convolutional GAN) and each dtype (f16, bf16, q8_0, q4_0, q4_1),
 * the weights the arch keeps are encoded by the codec table; the
 * reference runs on their decoded floats, the other on the encoded
 * bytes with those weights zeroed in its parameters (as an inference
 * model holds them: model.h), so that a weight read from the buffer
 * instead of the bytes shows.  Where the arch decodes a layer before it
 * uses it (bf16, q4_1, a convolution, a matrix whose rows are not whole
 * blocks) the arithmetic is the reference's: the outputs must be equal
 * bit for bit, which they are for bf16 and q4_1 everywhere.  Where a
 * Linear layer is multiplied as stored (f16, q8_0, q4_0, on fewer than
 * CG_WSET_GEMM_ROWS rows: more decode, and are checked bit for bit at
 * 16 rows, but q8_0 packed for the VNNI path, within the tolerance at
 * any number) the outputs
 * must lie within a tolerance of the reference's largest magnitude: f16
 * 1e-5 (the same products summed in another order), q8_0 and q4_0 2e-2
 * (each layer's input rounded to q8_0 blocks, at most d/2 an element:
 * qlinear.h's bound, a few 1e-3 of a layer's outputs, through up to
 * five layers).  The largest relative difference is printed.  A
 * gradient through stored weights, a wrong view count and a dtype no
 * codec decodes are refused.  A q8_0 model read to run from a plain file
 * has its matrices packed where the VNNI path runs, from a compressed
 * one not, with logits within the tolerance.  Exit 0 pass, 1 fail.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch/all.h"
#include "arch/cclf/cclf.h"
#include "arch/cddpm/cddpm.h"
#include "arch/cgan/cgan.h"
#include "cg.h"
#include "cli/cli.h"
#include "eval/quantize.h"
#include "model/model.h"
#include "nn/qlinear.h"

#define TEST_NAME "test_qrun"
#include "check.h"

static struct cg_rng rng;

static const enum cg_dtype types[] = {CG_F16, CG_BF16, CG_Q8_0, CG_Q4_0,
                                      CG_Q4_1};
#define NTYPES (sizeof(types) / sizeof(types[0]))

/* Which views an arch keeps (its _arch.c's keeps rule). */
enum rule { EVEN, DOT_W, GEN_DOT_W };

static int
kept(enum rule r, const struct cg_view *v, int i)
{
	size_t len = strlen(v->name);
	int dotw = len > 2 && strcmp(v->name + len - 2, ".w") == 0;

	switch (r) {
	case EVEN:
		return i % 2 == 0;
	case DOT_W:
		return dotw;
	default:
		return dotw && strncmp(v->name, "gen.", 4) == 0;
	}
}

/* Whether the last encode_model packed a view (cg_wmat_pack: q8_0 on
 * the VNNI path, whose products of any number of rows are the stored
 * ones, so within the tolerance, not bit for bit, at 16 rows too). */
static int packed_any;

/*
 * The stored form of params [np] in dt: mats [nv] (each kept view's
 * bytes in bytes[], the others CG_F32 into dec), dec the decoded model
 * (every kept view decoded), zero the inference model's buffer (kept
 * views zero).  Returns how many views are kept; the caller frees
 * bytes[i].
 */
static int
encode_model(enum rule r, const struct cg_view *v, int nv, enum cg_dtype dt,
             const float *params, size_t np, float *dec, float *zero,
             struct cg_wmat *mats, void **bytes)
{
	const struct cg_codec *c = cg_codec(dt);
	int n = 0;

	packed_any = 0;
	memcpy(dec, params, np * sizeof(float));
	memcpy(zero, params, np * sizeof(float));
	for (int i = 0; i < nv; i++) {
		bytes[i] = NULL;
		mats[i].pack = NULL;
		mats[i].dtype = CG_F32;
		mats[i].data = dec + v[i].off;
		if (!kept(r, &v[i], i) || v[i].n % c->block != 0)
			continue;
		bytes[i] = xcalloc(v[i].n / c->block, c->bytes);
		if (c->encode(bytes[i], params + v[i].off, v[i].n) != 0) {
			expect(0, "encode");
			continue;
		}
		c->decode(dec + v[i].off, bytes[i], v[i].n);
		memset(zero + v[i].off, 0, v[i].n * sizeof(float));
		mats[i].dtype = dt;
		mats[i].data = bytes[i];
		/* packed for the VNNI path as a model read to run is */
		if (v[i].ndim == 2) {
			int N = (int)v[i].shape[0], K = (int)v[i].shape[1];
			size_t pb = cg_wmat_pack_bytes(&mats[i], N, K);
			if (pb > 0)
				cg_wmat_pack(&mats[i], N, K, xcalloc(pb, 1));
		}
		packed_any |= mats[i].pack != NULL;
		n++;
	}
	return n;
}

/* max |a - b| / max |b| over n, and whether they are equal bit for bit. */
static double
reldiff(const float *a, const float *b, size_t n, int *same)
{
	double d = 0, m = 0;

	*same = memcmp(a, b, n * sizeof(float)) == 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - b[i]);
		d = e > d ? e : d;
		m = fabs(b[i]) > m ? fabs(b[i]) : m;
	}
	return m > 0 ? d / m : d;
}

/* Judge one comparison: exact types equal, the others within tol. */
static void
judge(const char *what, enum cg_dtype dt, const float *got, const float *want,
      size_t n, int B)
{
	int same, exact = dt == CG_BF16 || dt == CG_Q4_1 ||
	                  (B >= CG_WSET_GEMM_ROWS && !packed_any);
	double tol = dt == CG_F16 ? 1e-5 : 2e-2;
	double d = reldiff(got, want, n, &same);
	char msg[160];
	int finite = 1;

	for (size_t i = 0; i < n; i++)
		finite &= isfinite(got[i]);
	if (exact)
		snprintf(msg, sizeof(msg), "%s %s: equal bit for bit", what,
		         cg_dtype_name(dt));
	else
		snprintf(msg, sizeof(msg),
		         "%s %s: within %g of the decoded model's (%.3g)", what,
		         cg_dtype_name(dt), tol, d);
	expect(finite && (exact ? same : d <= tol), msg);
}

static float
unif(void)
{
	return 2 * cg_rng_uniform(&rng) - 1;
}

/* ---------------------------------------------------------------- cclf */

static void
run_cclf(struct cg_cclf_config c, int B, const char *what)
{
	size_t np = cg_cclf_nparams(&c);
	int nv = 2 * (c.layers + 1 + (c.conv ? CG_CCLF_STAGES : 0));
	struct cg_view *v = xcalloc((size_t)nv, sizeof(*v));
	float *p = xcalloc(np, sizeof(float)), *dec = xcalloc(np, 4);
	float *zero = xcalloc(np, 4), *x = xcalloc((size_t)B * c.in_dim, 4);
	float *grad = xcalloc(np, 4);
	struct cg_wmat *mats = xcalloc((size_t)nv, sizeof(*mats));
	void **bytes = xcalloc((size_t)nv, sizeof(void *));
	struct cg_cclf_ws *wr = cg_cclf_ws_new(&c, B),
	                  *ws = cg_cclf_ws_new(&c, B);
	int *cond = xcalloc((size_t)B, sizeof(int));
	char msg[128];

	expect(np > 0 && wr && ws && cg_cclf_views(&c, v, nv) == nv, what);
	for (int b = 0; b < B; b++)
		cond[b] = b % c.ncond;
	cg_cclf_init(&c, p, &rng);
	for (size_t i = 0; i < (size_t)B * c.in_dim; i++)
		x[i] = cg_rng_uniform(&rng);
	for (size_t t = 0; t < NTYPES; t++) {
		int k = encode_model(EVEN, v, nv, types[t], p, np, dec, zero,
		                     mats, bytes);
		size_t nl = (size_t)B * c.ncond, nf = (size_t)B * c.hidden;
		float *lr = xcalloc(nl + nf, 4), *ls = xcalloc(nl + nf, 4);

		if (cg_cclf_ws_set_mats(ws, mats, nv) != 0 ||
		    cg_cclf_forward_backward(&c, dec, wr, x, NULL, B, NULL,
		                             NULL, NULL) != 0 ||
		    cg_cclf_forward_backward(&c, zero, ws, x, NULL, B, NULL,
		                             NULL, NULL) != 0) {
			expect(0, cg_errmsg());
			continue;
		}
		memcpy(lr, cg_cclf_logits(wr), nl * 4);
		memcpy(lr + nl, cg_cclf_features(wr), nf * 4);
		memcpy(ls, cg_cclf_logits(ws), nl * 4);
		memcpy(ls + nl, cg_cclf_features(ws), nf * 4);
		snprintf(msg, sizeof(msg),
		         "%s (%d views kept), logits and "
		         "features",
		         what, k);
		judge(msg, types[t], ls, lr, nl + nf, B);
		snprintf(msg, sizeof(msg),
		         "%s %s: no gradient through stored "
		         "weights",
		         what, cg_dtype_name(types[t]));
		expect(cg_cclf_forward_backward(&c, zero, ws, x, cond, B, grad,
		                                NULL, NULL) != 0 &&
		           cg_cclf_dp_forward_backward(&c, zero, ws, x, cond, B,
		                                       1.0, grad, NULL, NULL,
		                                       NULL) != 0,
		       msg);
		for (int i = 0; i < nv; i++) {
			free(mats[i].pack);
			mats[i].pack = NULL;
			free(bytes[i]);
		}
		free(lr);
		free(ls);
	}
	/* back to params: the reference's bits */
	expect(cg_cclf_ws_set_mats(ws, NULL, 0) == 0 &&
	           cg_cclf_forward_backward(&c, p, ws, x, cond, B, grad, NULL,
	                                    NULL) == 0,
	       "cclf: set_mats(NULL) trains again");
	expect(cg_cclf_ws_set_mats(ws, mats, nv - 1) != 0,
	       "cclf: a wrong view count refused");
	cg_cclf_ws_free(wr);
	cg_cclf_ws_free(ws);
	free(v), free(p), free(dec), free(zero), free(x), free(grad);
	free(mats), free(bytes), free(cond);
}

/* --------------------------------------------------------------- cddpm */

static void
run_cddpm(struct cg_cddpm_config c, const char *what)
{
	const int B = 4;
	size_t np = cg_cddpm_nparams(&c);
	int nv = c.unet ? CG_CDDPM_UNET_VIEWS + c.attn * CG_CDDPM_ATTN_VIEWS
	                : 2 * c.layers + 5;
	struct cg_view *v = xcalloc((size_t)nv, sizeof(*v));
	float *p = xcalloc(np, 4), *dec = xcalloc(np, 4),
	      *zero = xcalloc(np, 4);
	float *xt = xcalloc((size_t)B * c.in_dim, 4);
	float *eps = xcalloc((size_t)B * c.in_dim, 4);
	float *o1 = xcalloc((size_t)B * c.in_dim, 4);
	float *o2 = xcalloc((size_t)B * c.in_dim, 4);
	float *grad = xcalloc(np, 4);
	struct cg_wmat *mats = xcalloc((size_t)nv, sizeof(*mats));
	void **bytes = xcalloc((size_t)nv, sizeof(void *));
	struct cg_cddpm_ws *wr = cg_cddpm_ws_new(&c, B, 0),
	                   *ws = cg_cddpm_ws_new(&c, B, 0);
	int cond[4] = {0, 1, c.ncond, 2}, t[4] = {0, 7, 19, c.timesteps - 1};
	char msg[128];

	expect(np > 0 && wr && ws && cg_cddpm_views(&c, v, nv) == nv, what);
	cg_cddpm_init(&c, p, &rng);
	/* a trained net's weights are not init's: some spread to the
	 * biases and the condition table so that every path matters */
	for (size_t i = 0; i < np; i++)
		p[i] += 0.05f * unif();
	for (size_t i = 0; i < (size_t)B * c.in_dim; i++) {
		xt[i] = unif();
		eps[i] = unif();
	}
	for (size_t k = 0; k < NTYPES; k++) {
		int n = encode_model(DOT_W, v, nv, types[k], p, np, dec, zero,
		                     mats, bytes);

		if (cg_cddpm_ws_set_mats(ws, mats, nv) != 0 ||
		    cg_cddpm_predict(&c, dec, wr, xt, cond, t, B, o1) != 0 ||
		    cg_cddpm_predict(&c, zero, ws, xt, cond, t, B, o2) != 0) {
			expect(0, cg_errmsg());
			continue;
		}
		snprintf(msg, sizeof(msg), "%s (%d views kept), eps_hat", what,
		         n);
		judge(msg, types[k], o2, o1, (size_t)B * c.in_dim, B);
		/* a DDIM step with guidance runs 2B rows */
		snprintf(msg, sizeof(msg),
		         "%s %s: no gradient through stored "
		         "weights",
		         what, cg_dtype_name(types[k]));
		expect(cg_cddpm_forward_backward(&c, zero, ws, xt, cond, t, eps,
		                                 B, grad, NULL) != 0,
		       msg);
		for (int i = 0; i < nv; i++) {
			free(mats[i].pack);
			mats[i].pack = NULL;
			free(bytes[i]);
		}
	}
	expect(cg_cddpm_ws_set_mats(ws, NULL, 0) == 0 &&
	           cg_cddpm_forward_backward(&c, p, ws, xt, cond, t, eps, B,
	                                     grad, NULL) == 0,
	       "cddpm: set_mats(NULL) trains again");
	expect(cg_cddpm_ws_set_mats(ws, mats, nv + 1) != 0,
	       "cddpm: a wrong view count refused");
	cg_cddpm_ws_free(wr);
	cg_cddpm_ws_free(ws);
	free(v), free(p), free(dec), free(zero), free(xt), free(eps);
	free(o1), free(o2), free(grad), free(mats), free(bytes);
}

/* ---------------------------------------------------------------- cgan */

static void
run_cgan(struct cg_cgan_config c, const char *what)
{
	const int B = 4;
	size_t np = cg_cgan_nparams(&c);
	int nv = c.conv ? CG_CGAN_CONV_VIEWS : 4 * c.layers + 6;
	struct cg_view *v = xcalloc((size_t)nv, sizeof(*v));
	float *p = xcalloc(np, 4), *dec = xcalloc(np, 4),
	      *zero = xcalloc(np, 4);
	float *z = xcalloc((size_t)B * c.latent, 4);
	float *x = xcalloc((size_t)B * c.in_dim, 4);
	float *o1 = xcalloc((size_t)B * c.in_dim, 4);
	float *o2 = xcalloc((size_t)B * c.in_dim, 4);
	float *grad = xcalloc(np, 4);
	struct cg_wmat *mats = xcalloc((size_t)nv, sizeof(*mats));
	void **bytes = xcalloc((size_t)nv, sizeof(void *));
	struct cg_cgan_ws *wr = cg_cgan_ws_new(&c, B, 0),
	                  *ws = cg_cgan_ws_new(&c, B, 0);
	int cond[4] = {0, 1, 2, 1};
	struct cg_cgan_loss l1, l2;
	char msg[128];

	expect(np > 0 && wr && ws && cg_cgan_views(&c, v, nv) == nv, what);
	cg_cgan_init(&c, p, &rng);
	for (size_t i = 0; i < np; i++)
		p[i] += 0.05f * unif();
	for (size_t i = 0; i < (size_t)B * c.latent; i++)
		z[i] = unif();
	for (size_t i = 0; i < (size_t)B * c.in_dim; i++)
		x[i] = cg_rng_uniform(&rng);
	for (size_t k = 0; k < NTYPES; k++) {
		int n = encode_model(GEN_DOT_W, v, nv, types[k], p, np, dec,
		                     zero, mats, bytes);

		if (cg_cgan_ws_set_mats(ws, mats, nv) != 0 ||
		    cg_cgan_generate(&c, dec, wr, z, cond, B, o1) != 0 ||
		    cg_cgan_generate(&c, zero, ws, z, cond, B, o2) != 0 ||
		    cg_cgan_forward_backward(&c, dec, wr, x, cond, z, B, NULL,
		                             &l1) != 0 ||
		    cg_cgan_forward_backward(&c, zero, ws, x, cond, z, B, NULL,
		                             &l2) != 0) {
			expect(0, cg_errmsg());
			continue;
		}
		snprintf(msg, sizeof(msg), "%s (%d views kept), G(z, y)", what,
		         n);
		judge(msg, types[k], o2, o1, (size_t)B * c.in_dim, B);
		float a[2] = {(float)l2.d, (float)l2.g};
		float b[2] = {(float)l1.d, (float)l1.g};
		snprintf(msg, sizeof(msg), "%s, the losses", what);
		judge(msg, types[k], a, b, 2, B);
		snprintf(msg, sizeof(msg),
		         "%s %s: no gradient through stored "
		         "weights",
		         what, cg_dtype_name(types[k]));
		expect(cg_cgan_forward_backward(&c, zero, ws, x, cond, z, B,
		                                grad, NULL) != 0,
		       msg);
		for (int i = 0; i < nv; i++) {
			free(mats[i].pack);
			mats[i].pack = NULL;
			free(bytes[i]);
		}
	}
	/* the discriminator's weights are read as f32 */
	for (int i = 0; i < nv; i++)
		mats[i] = (struct cg_wmat){CG_F32, p + v[i].off, NULL};
	mats[nv - 2].dtype = CG_F16;
	expect(cg_cgan_ws_set_mats(ws, mats, nv) != 0,
	       "cgan: a discriminator's weight not f32 refused");
	expect(cg_cgan_ws_set_mats(ws, NULL, 0) == 0 &&
	           cg_cgan_forward_backward(&c, p, ws, x, cond, z, B, grad,
	                                    NULL) == 0,
	       "cgan: set_mats(NULL) trains again");
	cg_cgan_ws_free(wr);
	cg_cgan_ws_free(ws);
	free(v), free(p), free(dec), free(zero), free(z), free(x);
	free(o1), free(o2), free(grad), free(mats), free(bytes);
}

/* ------------------------------------------------------------ the set */

static void
test_wset(void)
{
	struct cg_view v[2];
	struct cg_wmat m[2];
	struct cg_wset s;
	float w[64];

	cg_view_set(&v[0], "a.w", 0, 2, 32, 1);
	cg_view_set(&v[1], "b.w", 64, 2, 32, 1);
	m[0] = (struct cg_wmat){CG_F32, w, NULL};
	m[1] = (struct cg_wmat){CG_U8, w, NULL};
	expect(cg_wset_make(&s, v, m, 2, 4) != 0 && s.n == 0,
	       "wset: a dtype no float codec decodes refused, the set empty");
	m[1] = (struct cg_wmat){CG_F32, w, NULL};
	expect(cg_wset_make(&s, v, m, 2, 4) == 0 && s.n == 0 &&
	           cg_wset_at(&s, 0) == NULL,
	       "wset: f32 views leave the set empty");
	cg_wset_free(&s);
	cg_wset_free(&s);
}

/* ---------------------------------------------------- a model read to run */

/*
 * A q8_0 cclf written as cg-quantize writes it, read to run
 * (cg_model_read_infer) from the plain file and from a gzip copy: where
 * the VNNI path runs, the plain file's matrices of 16 rows or more are
 * packed (nn/qlinear.h), the compressed one's are not (reading it made
 * a copy of its bytes already); elsewhere neither is.  Both give logits
 * within the tolerance of each other.
 */
static void
test_read_packed(void)
{
	const struct cg_cclf_config c = {64, 3, 32, 2, 0, 0, 0, 0};
	const int B = 6;
	char dir[] = "/tmp/test_qrun.XXXXXX", f32[64], q8[64], gz[64];
	cJSON *cfg =
	    cJSON_Parse("{\"in_dim\":64,\"ncond\":3,\"hidden\":32,\"layers\":2,"
	                "\"conv\":0}");
	struct cg_model *m, *a = NULL, *b = NULL;
	struct cg_file *in = NULL, *out = NULL;
	struct cg_quant_rule rule = {.type = CG_Q8_0};
	struct cg_quant_view *rep;
	int vnni, packed = 0, big = 0, unpacked = 0, same;
	double d;

	if (cg_qpath_init() != 0) /* as a read to run does: CG_QKERNEL */
		die(cg_errmsg());
	vnni = cg_qpath_current() == CG_QPATH_VNNI;
	if (mkdtemp(dir) == NULL || cfg == NULL ||
	    (m = cg_model_create("cclf", cfg, NULL, 5)) == NULL)
		die("a cclf");
	snprintf(f32, sizeof(f32), "%s/f32.cgm", dir);
	snprintf(q8, sizeof(q8), "%s/q8.cgm", dir);
	snprintf(gz, sizeof(gz), "%s/q8.cgm.gz", dir);
	rep = xcalloc((size_t)m->nviews, sizeof(*rep));
	if (cg_model_write(m, f32, CG_COMPRESS_NONE) != 0 ||
	    (in = cg_file_read(f32)) == NULL ||
	    (out = cg_quantize(in, m, &rule, rep)) == NULL ||
	    cg_file_write(out, q8, CG_COMPRESS_NONE) != 0 ||
	    cg_file_write(out, gz, CG_COMPRESS_GZIP) != 0 ||
	    (a = cg_model_read_infer(q8)) == NULL ||
	    (b = cg_model_read_infer(gz)) == NULL)
		die(cg_errmsg());
	for (int i = 0; i < a->nviews; i++) {
		const struct cg_view *v = &a->views[i];
		int wants = vnni && a->stored[i].dtype == CG_Q8_0 &&
		            v->ndim == 2 && v->shape[0] >= 16;
		big += a->stored[i].dtype == CG_Q8_0 && v->ndim == 2 &&
		       v->shape[0] >= 16;
		packed += (a->stored[i].pack != NULL) == wants;
		unpacked += b->stored[i].pack == NULL;
	}
	expect(big == 2 && packed == a->nviews && unpacked == b->nviews &&
	           (a->pack != NULL) == vnni && b->pack == NULL,
	       vnni ? "read to run from a plain file: its two q8_0 matrices "
	              "of 32 rows packed, from a gzip copy none"
	            : "read to run without the VNNI path: nothing packed");

	/* the logits of both, through the stored weights */
	struct cg_cclf_ws *wa = cg_cclf_ws_new(&c, B),
	                  *wb = cg_cclf_ws_new(&c, B);
	float *x = xcalloc((size_t)B * c.in_dim, sizeof(float));
	for (size_t i = 0; i < (size_t)B * c.in_dim; i++)
		x[i] = cg_rng_uniform(&rng);
	if (wa == NULL || wb == NULL ||
	    cg_cclf_ws_set_mats(wa, a->stored, a->nviews) != 0 ||
	    cg_cclf_ws_set_mats(wb, b->stored, b->nviews) != 0 ||
	    cg_cclf_forward_backward(&c, a->params, wa, x, NULL, B, NULL, NULL,
	                             NULL) != 0 ||
	    cg_cclf_forward_backward(&c, b->params, wb, x, NULL, B, NULL, NULL,
	                             NULL) != 0)
		die(cg_errmsg());
	d = reldiff(cg_cclf_logits(wa), cg_cclf_logits(wb), (size_t)B * c.ncond,
	            &same);
	printf("     packed against not: logits apart by %.3g of the "
	       "largest\n",
	       d);
	expect(d <= 2e-2 && (vnni || same),
	       "the logits of the two within 2e-2 (the same bits without "
	       "the VNNI path)");
	cg_cclf_ws_free(wa);
	cg_cclf_ws_free(wb);
	free(x);
	free(rep);
	cg_file_free(in);
	cg_file_free(out);
	cg_model_free(a);
	cg_model_free(b);
	cg_model_free(m);
	unlink(f32);
	unlink(q8);
	unlink(gz);
	rmdir(dir);
}

int
main(void)
{
	cg_set_threads(0);
	cg_rng_seed(&rng, 119);
	test_wset();
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	test_read_packed();
	/* rows of whole blocks (in 64), and not (in 40: decoded) */
	run_cclf((struct cg_cclf_config){64, 3, 32, 2, 0, 0, 0, 0}, 5,
	         "cclf mlp");
	run_cclf((struct cg_cclf_config){40, 3, 32, 1, 0, 0, 0, 0}, 5,
	         "cclf mlp, 40 inputs");
	run_cclf((struct cg_cclf_config){64, 3, 32, 1, 4, 8, 8, 1}, 5,
	         "cclf cnn");
	/* a batch of CG_WSET_GEMM_ROWS rows decodes every layer: the
	 * decoded model's bits in every type */
	run_cclf((struct cg_cclf_config){64, 3, 32, 2, 0, 0, 0, 0},
	         CG_WSET_GEMM_ROWS, "cclf mlp, a batch of 16");
	run_cddpm((struct cg_cddpm_config){64, 3, 32, 2, 32, 50, 5, 1, 0, 0, 0,
	                                   0, 0, 0, 0},
	          "cddpm mlp");
	run_cddpm((struct cg_cddpm_config){64, 3, 32, 2, 32, 50, 5, 1, 8, 8, 8,
	                                   1, 1, 1, 0},
	          "cddpm unet");
	run_cgan((struct cg_cgan_config){64, 3, 32, 32, 2, 3, 0, 0, 0, 0, 0, 3, 0},
	         "cgan mlp");
	run_cgan((struct cg_cgan_config){64, 3, 32, 32, 1, 3, 8, 8, 8, 1, 0, 3, 0},
	         "cgan conv");
	if (failures) {
		printf("test_qrun: %d check(s) FAILED\n", failures);
		return 1;
	}
	printf("test_qrun: all checks passed\n");
	return 0;
}
