/*
 * exchange/codec/lowrank_codec.c - the low-rank update codec (PowerSGD):
 * matrices as the product of two rank-R factors.
 *
 * A matrix view [m, n] with R (m + n) < m n is NAME.p f32 [m, R], with
 * orthonormal columns, and NAME.q f32 [n, R], one power iteration from
 * the last call's Q (the warm start, kept in the worker's state as
 * "lowrank.q"); other views are f32 as they are.  The sums run in double
 * in a fixed order, so the factors are the same bits on any x86-64.
 * Fitting a budget takes the largest rank that fits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exchange/codec/codec.h"

#define MAX_RANK 1024

/* The rank a view is sent at under s: 0 (dense f32) unless it is a
 * matrix that R (m + n) floats carry in fewer than m n. */
static uint64_t
lowrank_rank(const struct cg_uspec *s, const struct cg_uview *v)
{
	uint64_t r = (uint64_t)s->rank;

	if (v->ndim != 2 || r == 0)
		return 0;
	return r * (v->shape[0] + v->shape[1]) < v->n ? r : 0;
}

static int
lowrank_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	uint64_t r = lowrank_rank(s, v);

	*b = 4 * (r ? r * (v->shape[0] + v->shape[1]) : v->n);
	return 0;
}

/* Q [cols, r] of view v, as dq [cols, r4] in double (the rest zero),
 * from the warm start where there is one, else normal draws from e's
 * stream in Q's element order. */
static void
lowrank_start(struct cg_uenc *e, const float *warm, uint64_t cols, uint64_t r,
              uint64_t r4, double *dq)
{
	int have = 0;

	for (uint64_t i = 0; warm && i < cols * r && !have; i++)
		have = warm[i] != 0;
	for (uint64_t j = 0; j < cols; j++)
		for (uint64_t c = 0; c < r; c++)
			dq[j * r4 + c] =
			    have ? warm[j * r + c] : cg_rng_normal(&e->rng);
}

/* Four doubles, one AVX register (two SSE2 ones elsewhere): a lane's
 * product and sum are the scalar ones, so the bits are those of plain
 * loops over the same sums in the same order. */
typedef double v4d __attribute__((vector_size(4 * sizeof(double))));

/* P [rows, r] = M Q with Q as dq [cols, r4] (r4 = r rounded up to 4, the
 * rest zero): each sum in index order from zero, four rows at a time
 * (four independent sums a lane where one row gives one). */
static void
lowrank_mq(const float *x, uint64_t rows, uint64_t cols, const double *dq,
           uint64_t r, uint64_t r4, double *p)
{
	for (uint64_t i0 = 0; i0 < rows; i0 += 4) {
		const uint64_t nb = rows - i0 < 4 ? rows - i0 : 4;
		const float *x0 = x + i0 * cols;
		for (uint64_t cb = 0; cb < r4; cb += 4) {
			v4d a[4] = {{0}};
			if (nb == 4)
				for (uint64_t j = 0; j < cols; j++) {
					const v4d q =
					    *(const v4d *)(dq + j * r4 + cb);
					a[0] += (double)x0[j] * q;
					a[1] += (double)x0[cols + j] * q;
					a[2] += (double)x0[2 * cols + j] * q;
					a[3] += (double)x0[3 * cols + j] * q;
				}
			else
				for (uint64_t j = 0; j < cols; j++) {
					const v4d q =
					    *(const v4d *)(dq + j * r4 + cb);
					for (uint64_t k = 0; k < nb; k++)
						a[k] +=
						    (double)x0[k * cols + j] *
						    q;
				}
			for (uint64_t k = 0; k < nb; k++)
				for (uint64_t c = cb; c < cb + 4 && c < r; c++)
					p[(i0 + k) * r + c] = a[k][c - cb];
		}
	}
}

/* Q [cols, r4] += M^T P with P as dp [rows, r4]: each sum in row order,
 * four rows at a time. */
static void
lowrank_mtp(const float *x, uint64_t rows, uint64_t cols, const double *dp,
            uint64_t r4, double *q)
{
	for (uint64_t i0 = 0; i0 < rows; i0 += 4) {
		const uint64_t nb = rows - i0 < 4 ? rows - i0 : 4;
		const float *x0 = x + i0 * cols;
		const double *p0 = dp + i0 * r4;
		for (uint64_t j = 0; j < cols; j++) {
			v4d *qj = (v4d *)(q + j * r4);
			double m[4];
			for (uint64_t k = 0; k < nb; k++)
				m[k] = x0[k * cols + j];
			for (uint64_t cb = 0; cb < r4; cb += 4) {
				const v4d *pc = (const v4d *)(p0 + cb);
				v4d a = qj[cb / 4];
				if (nb == 4) {
					a += m[0] * pc[0];
					a += m[1] * pc[r4 / 4];
					a += m[2] * pc[2 * r4 / 4];
					a += m[3] * pc[3 * r4 / 4];
				} else
					for (uint64_t k = 0; k < nb; k++)
						a += m[k] * pc[k * r4 / 4];
				qj[cb / 4] = a;
			}
		}
	}
}

static int
lowrank_encode(const struct cg_uspec *s, const struct cg_uview *v,
               const float *x, struct cg_file *f, struct cg_uenc *e,
               float *warm)
{
	const uint64_t r = lowrank_rank(s, v);
	const uint64_t rows = v->shape[0], cols = v->shape[1];
	const uint64_t r4 = (r + 3) & ~(uint64_t)3;
	uint64_t shp[2];
	char name[CG_MAX_NAME];
	struct cg_tensor *tp, *tq;
	double *p = NULL, *dq = NULL, *dp = NULL;
	float *pf = NULL, *qf = NULL;
	int rc = -1;

	if (cg_ucodec_refuse_nonfinite(v, x) != 0)
		return -1;
	if (r == 0) {
		struct cg_tensor *t =
		    cg_file_add_zero(f, v->name, CG_F32, v->ndim, v->shape);
		return t ? cg_codec(CG_F32)->encode(t->data, x, v->n) : -1;
	}
	shp[0] = rows;
	shp[1] = r;
	if (cg_ucodec_suffixed(name, v->name, ".p") != 0 ||
	    (tp = cg_file_add_zero(f, name, CG_F32, 2, shp)) == NULL)
		return -1;
	shp[0] = cols;
	if (cg_ucodec_suffixed(name, v->name, ".q") != 0 ||
	    (tq = cg_file_add_zero(f, name, CG_F32, 2, shp)) == NULL)
		return -1;
	if ((p = cg_alloc(rows * r * sizeof(double))) == NULL ||
	    (dq = cg_alloc(cols * r4 * sizeof(double))) == NULL ||
	    (dp = cg_alloc(rows * r4 * sizeof(double))) == NULL ||
	    (pf = cg_alloc(rows * r * sizeof(float))) == NULL ||
	    (qf = cg_alloc(cols * r * sizeof(float))) == NULL)
		goto out;
	lowrank_start(e, warm, cols, r, r4, dq);
	/* P = M Q, in double, each sum in index order */
	lowrank_mq(x, rows, cols, dq, r, r4, p);
	/* orthonormal columns (modified Gram-Schmidt); a column with
	 * nothing left of it becomes zero */
	for (uint64_t c = 0; c < r; c++) {
		double nn = 0;
		for (uint64_t b = 0; b < c; b++) {
			double d = 0;
			for (uint64_t i = 0; i < rows; i++)
				d += p[i * r + c] * p[i * r + b];
			for (uint64_t i = 0; i < rows; i++)
				p[i * r + c] -= d * p[i * r + b];
		}
		for (uint64_t i = 0; i < rows; i++)
			nn += p[i * r + c] * p[i * r + c];
		nn = sqrt(nn);
		for (uint64_t i = 0; i < rows; i++)
			p[i * r + c] = nn > 1e-30 ? p[i * r + c] / nn : 0;
	}
	for (uint64_t i = 0; i < rows; i++)
		for (uint64_t c = 0; c < r; c++) {
			pf[i * r + c] = (float)p[i * r + c];
			dp[i * r4 + c] = pf[i * r + c];
		}
	/* Q = M^T P, with P as sent */
	memset(dq, 0, cols * r4 * sizeof(double));
	lowrank_mtp(x, rows, cols, dp, r4, dq);
	for (uint64_t j = 0; j < cols; j++)
		for (uint64_t c = 0; c < r; c++)
			qf[j * r + c] = (float)dq[j * r4 + c];
	if (warm)
		memcpy(warm, qf, cols * r * sizeof(float));
	if (cg_codec(CG_F32)->encode(tp->data, pf, rows * r) == 0 &&
	    cg_codec(CG_F32)->encode(tq->data, qf, cols * r) == 0)
		rc = 0;
out:
	free(p);
	free(dq);
	free(dp);
	free(pf);
	free(qf);
	return rc;
}

static int
lowrank_bind(const struct cg_uspec *s, struct cg_uview *v,
             const struct cg_file *f)
{
	const uint64_t r = lowrank_rank(s, v);
	uint64_t shp[2];

	if (r == 0) {
		v->k = 0;
		v->t[0] =
		    cg_ucodec_need(f, v->name, "", CG_F32, v->ndim, v->shape);
		return v->t[0] ? 0 : -1;
	}
	shp[0] = v->shape[0];
	shp[1] = r;
	if ((v->t[0] = cg_ucodec_need(f, v->name, ".p", CG_F32, 2, shp)) ==
	    NULL)
		return -1;
	shp[0] = v->shape[1];
	if ((v->t[1] = cg_ucodec_need(f, v->name, ".q", CG_F32, 2, shp)) ==
	    NULL)
		return -1;
	if (cg_ucodec_check_finite(v->t[0]) != 0 ||
	    cg_ucodec_check_finite(v->t[1]) != 0)
		return -1;
	v->k = r;
	return 0;
}

/* o [m] = the rows of q [m, r] (f32 bytes) times pr [r], each summed in
 * float from zero in rank order; inlined with r a constant, the
 * compiler takes m elements at once through the stride. */
static inline __attribute__((always_inline)) void
lowrank_dot(float *o, const unsigned char *q, const float *pr, uint64_t m,
            uint64_t r)
{
	for (uint64_t a = 0; a < m; a++) {
		float acc = 0;
		for (uint64_t t = 0; t < r; t++) {
			uint32_t u = cg_ucodec_get32(q + 4 * (a * r + t));
			float qv;
			memcpy(&qv, &u, 4);
			acc += pr[t] * qv;
		}
		o[a] = acc;
	}
}

/* lowrank_dot for any r: a tile of q's rows transposed on the stack,
 * then each rank step one loop along the tile (the same sums) */
static void
lowrank_tiled(float *o, const unsigned char *q, const float *pr, uint64_t m,
              uint64_t r)
{
	float qt[4096];
	const uint64_t tile = sizeof(qt) / sizeof(qt[0]) / r;

	for (uint64_t a0 = 0; a0 < m; a0 += tile) {
		const uint64_t w = m - a0 < tile ? m - a0 : tile;
		for (uint64_t a = 0; a < w; a++)
			for (uint64_t t = 0; t < r; t++) {
				uint32_t u =
				    cg_ucodec_get32(q + 4 * ((a0 + a) * r + t));
				memcpy(&qt[t * w + a], &u, 4);
			}
		for (uint64_t a = 0; a < w; a++)
			o[a0 + a] = 0;
		for (uint64_t t = 0; t < r; t++)
			for (uint64_t a = 0; a < w; a++)
				o[a0 + a] += pr[t] * qt[t * w + a];
	}
}

static void
lowrank_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
               size_t n, float *out)
{
	const uint64_t r = v->k, cols = v->shape[1];
	const unsigned char *qd;
	float pr[MAX_RANK];

	(void)s;
	if (r == 0) {
		cg_tensor_decode(v->t[0], lo, n, out);
		return;
	}
	/* the factors are f32 (bound so): Q's rows read where they lie */
	qd = v->t[1]->data;
	uint64_t i = lo / cols, c = lo % cols;
	size_t j = 0;
	while (j < n) {
		const uint64_t m = cols - c < n - j ? cols - c : n - j;
		const unsigned char *q = qd + 4 * c * r;
		cg_tensor_decode(v->t[0], i * r, r, pr);
		switch (r) {
		case 1:
			lowrank_dot(out + j, q, pr, m, 1);
			break;
		case 2:
			lowrank_dot(out + j, q, pr, m, 2);
			break;
		case 4:
			lowrank_dot(out + j, q, pr, m, 4);
			break;
		case 8:
			lowrank_dot(out + j, q, pr, m, 8);
			break;
		default:
			lowrank_tiled(out + j, q, pr, m, r);
			break;
		}
		j += m;
		i++;
		c = 0;
	}
}

/* ------------------------------------------------------------- spec */

static void
lowrank_defaults(struct cg_uspec *s)
{
	s->rank = 4;
}

static int
lowrank_param(struct cg_uspec *s, const char *p)
{
	const char *eq = strchr(p, '=');
	char *end;
	long v;

	if (eq != NULL && strncmp(p, "r=", 2) != 0)
		return -1;
	v = strtol(eq ? eq + 1 : p, &end, 10);
	if (*end != '\0' || v < 1 || v > MAX_RANK)
		return -1;
	s->rank = (int)v;
	return 0;
}

static void
lowrank_format(const struct cg_uspec *s, const char *name, char *buf, size_t n)
{
	snprintf(buf, n, "%s:%d", name, s->rank);
}

static int
lowrank_manifest(const struct cg_uspec *s, cJSON *c)
{
	cJSON_AddNumberToObject(c, "rank", s->rank);
	return 0;
}

static int
lowrank_fit(struct cg_uspec *s, const struct cg_uview *v, int nv,
            uint64_t budget)
{
	uint64_t b;

	for (s->rank = MAX_RANK; s->rank > 0; s->rank--) {
		if (cg_ucodec_bytes(s, v, nv, &b) != 0)
			return -1;
		if (b <= budget)
			return 0;
	}
	s->rank = 1;
	return 1;
}

static uint64_t
lowrank_state(const struct cg_uspec *s, const struct cg_uview *v)
{
	return lowrank_rank(s, v) * v->shape[1];
}

const struct cg_ucodec cg_ucodec_lowrank = {
    .name = "lowrank",
    .help = "lowrank:R: matrices as rank-R factors (PowerSGD)",
    .names = {{"lowrank", CG_F32}},
    .defaults = lowrank_defaults,
    .param = lowrank_param,
    .format = lowrank_format,
    .manifest = lowrank_manifest,
    .fit = lowrank_fit,
    .state_floats = lowrank_state,
    .state_name = "lowrank.q",
    .size = lowrank_size,
    .encode = lowrank_encode,
    .bind = lowrank_bind,
    .decode = lowrank_decode,
};
