/*
 * eval/bitalloc.c - quantized types per tensor under a bits-per-weight
 * budget, by measured sensitivity (see bitalloc.h).
 *
 * Measuring costs one pass over the shard per tensor and type of the
 * ladder, and one for the f32 model: 4 N + 1 passes for N tensors, so
 * the shard is best a few hundred examples.  The choice then runs over
 * the splits of the sensitivity order into the four types: for each
 * count of f16 and q8_0 tensors, the most q4_0 tensors the budget
 * leaves room for (a wider type is never predicted worse), found by
 * bisection: O(N^2 log N).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/bitalloc.h"
#include "model/qat.h"
#include "train/train.h"

const enum cg_dtype cg_bitalloc_ladder[CG_BITALLOC_RUNGS] = {CG_Q2_0, CG_Q4_0,
                                                             CG_Q8_0, CG_F16};

/* Bits a weight of type t. */
static double
bits_of(enum cg_dtype t)
{
	const struct cg_codec *c = cg_codec(t);

	return 8.0 * c->bytes / c->block;
}

double
cg_bitalloc_min_bits(void)
{
	return bits_of(cg_bitalloc_ladder[0]);
}

double
cg_bitalloc_max_bits(void)
{
	return bits_of(cg_bitalloc_ladder[CG_BITALLOC_RUNGS - 1]);
}

void
cg_bitalloc_free(struct cg_bitalloc *a)
{
	if (a == NULL)
		return;
	free(a->v);
	a->v = NULL;
	a->n = 0;
}

/* The held-out loss of m on s, finite; 0 or -1 with a message. */
static int
loss_of(struct cg_model *m, const struct cg_shard *s, int B, uint64_t seed,
        double *loss)
{
	struct cg_metrics mt;

	if (cg_eval_shard(m, s, B, seed, &mt, NULL, NULL) != 0)
		return -1;
	if (!isfinite(mt.loss))
		return cg_seterr("the held-out loss is %g", mt.loss);
	*loss = mt.loss;
	return 0;
}

/* Most sensitive first: the change at the narrowest type per weight,
 * what a bit spent on the tensor buys back; ties in the model's order. */
static int
by_sensitivity(const void *x, const void *y)
{
	const struct cg_bitalloc_view *a = x, *b = y;
	double sa = a->delta[0] / (double)a->n, sb = b->delta[0] / (double)b->n;

	if (sa != sb)
		return sa > sb ? -1 : 1;
	return a->view - b->view;
}

int
cg_bitalloc_measure(struct cg_model *m, const struct cg_shard *s,
                    const struct cg_quant_rule *r, int B, uint64_t seed,
                    struct cg_bitalloc *a)
{
	struct cg_quant_rule narrow = *r;
	enum cg_dtype *types = NULL;
	int rc = -1;

	memset(a, 0, sizeof(*a));
	narrow.type = cg_bitalloc_ladder[0];
	narrow.types = NULL;
	if ((a->v = calloc((size_t)m->nviews, sizeof(*a->v))) == NULL ||
	    (types = calloc((size_t)m->nviews, sizeof(*types))) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (int i = 0; i < m->nviews; i++) {
		enum cg_dtype to;
		const char *why;
		if (cg_quant_choose(m, &m->views[i], &narrow, &to, &why) != 0)
			goto out;
		if (to == CG_F32)
			continue;
		struct cg_bitalloc_view *v = &a->v[a->n++];
		v->view = i;
		v->n = m->views[i].n;
		for (int k = 0; k < CG_BITALLOC_RUNGS; k++)
			if (cg_dtype_bytes(cg_bitalloc_ladder[k], v->n,
			                   &v->bytes[k]) != 0)
				goto out;
	}
	if (a->n == 0) {
		cg_seterr("no tensor of the model takes a quantized type");
		goto out;
	}
	if (loss_of(m, s, B, seed, &a->base) != 0)
		goto out;
	for (int j = 0; j < a->n; j++) {
		struct cg_bitalloc_view *v = &a->v[j];
		for (int k = 0; k < CG_BITALLOC_RUNGS; k++) {
			struct cg_qat *q;
			double l = 0;
			types[v->view] = cg_bitalloc_ladder[k];
			q = cg_qat_new(m, CG_F32, types, r->reference);
			types[v->view] = CG_F32;
			if (q == NULL || cg_qat_apply(q, m) != 0) {
				cg_qat_free(q);
				goto out;
			}
			int e = loss_of(m, s, B, seed, &l);
			cg_qat_restore(q, m);
			cg_qat_free(q);
			if (e != 0)
				goto out;
			v->delta[k] = l - a->base;
		}
	}
	qsort(a->v, (size_t)a->n, sizeof(*a->v), by_sensitivity);
	rc = 0;
out:
	free(types);
	if (rc != 0)
		cg_bitalloc_free(a);
	return rc;
}

int
cg_bitalloc_choose(struct cg_bitalloc *a, const struct cg_model *m, double bpw,
                   enum cg_dtype *types)
{
	const int N = a->n, R = CG_BITALLOC_RUNGS;
	/* prefix sums over the order: weights, bytes and the predicted
	 * change at each type */
	double *d = calloc((size_t)(N + 1) * R, sizeof(double));
	uint64_t *by = calloc((size_t)(N + 1) * R, sizeof(uint64_t));
	uint64_t W = 0;
	double best = INFINITY;
	uint64_t best_bytes = 0;
	int ba = -1, bb = -1, bc = -1;

	if (d == NULL || by == NULL) {
		free(d);
		free(by);
		return cg_seterr("out of memory");
	}
	for (int j = 0; j < N; j++) {
		const struct cg_bitalloc_view *v = &a->v[j];
		double least = -INFINITY;
		W += v->n;
		/* from the widest: a narrower type at least as bad */
		for (int k = R - 1; k >= 0; k--) {
			least = fmax(least, v->delta[k]);
			d[(j + 1) * R + k] = d[j * R + k] + least;
			by[(j + 1) * R + k] = by[j * R + k] + v->bytes[k];
		}
	}
	/* the budget in bytes (bits over W weights), whole bytes */
	const double cap = floor(bpw * (double)W / 8.0 + 1e-9);
#define SUM(arr, k, lo, hi) (arr[(hi)*R + (k)] - arr[(lo)*R + (k)])
	for (int x = 0; x <= N; x++)
		for (int y = x; y <= N; y++) {
			/* [0, x) f16, [x, y) q8_0, [y, z) q4_0, [z, N) q2_0:
			 * the largest z in [y, N] that fits */
			uint64_t fixed = SUM(by, 3, 0, x) + SUM(by, 2, x, y);
			int lo = y, hi = N;
			if ((double)(fixed + SUM(by, 0, y, N)) > cap)
				continue;
			while (lo < hi) {
				int z = lo + (hi - lo + 1) / 2;
				uint64_t b =
				    fixed + SUM(by, 1, y, z) + SUM(by, 0, z, N);
				if ((double)b <= cap)
					lo = z;
				else
					hi = z - 1;
			}
			const int z = lo;
			uint64_t b =
			    fixed + SUM(by, 1, y, z) + SUM(by, 0, z, N);
			double c = SUM(d, 3, 0, x) + SUM(d, 2, x, y) +
			           SUM(d, 1, y, z) + SUM(d, 0, z, N);
			if (c < best || (c == best && b > best_bytes)) {
				best = c;
				best_bytes = b;
				ba = x, bb = y, bc = z;
			}
		}
#undef SUM
	free(d);
	free(by);
	if (ba < 0)
		return cg_seterr("%g bits per weight cannot be met: the "
		                 "narrowest type, %s, takes %.2f",
		                 bpw, cg_dtype_name(cg_bitalloc_ladder[0]),
		                 cg_bitalloc_min_bits());
	for (int i = 0; i < m->nviews; i++)
		types[i] = CG_F32;
	for (int j = 0; j < N; j++) {
		int k = j < ba ? 3 : j < bb ? 2 : j < bc ? 1 : 0;
		a->v[j].type = cg_bitalloc_ladder[k];
		types[a->v[j].view] = a->v[j].type;
	}
	a->bits = 8.0 * (double)best_bytes / (double)W;
	a->predicted = best;
	return 0;
}
