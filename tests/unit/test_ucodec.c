/*
 * test_ucodec - the update codecs: each one's error within the bound its
 * format promises (against double precision), error feedback's running
 * sum over 100 rounds, reductions of reductions over mixed codecs, and
 * the refusal of hostile coded files.
 */
#define TEST_NAME "test_ucodec"
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "exchange/codec/codec.h"
#include "exchange/reduce.h"
#include "exchange/ucodec.h"
#include "exchange/update.h"

/* Three views: a matrix, a vector whose length is no multiple of 32, a
 * small matrix. */
#define NV 3
#define P (48 * 40 + 37 + 6 * 5)

static void
views(struct cg_uview *v)
{
	memset(v, 0, NV * sizeof(*v));
	strcpy(v[0].name, "w");
	v[0].ndim = 2;
	v[0].shape[0] = 48;
	v[0].shape[1] = 40;
	strcpy(v[1].name, "b");
	v[1].ndim = 1;
	v[1].shape[0] = 37;
	strcpy(v[2].name, "s");
	v[2].ndim = 2;
	v[2].shape[0] = 6;
	v[2].shape[1] = 5;
	uint64_t off = 0;
	for (int i = 0; i < NV; i++) {
		v[i].n = v[i].shape[0] * (v[i].ndim == 2 ? v[i].shape[1] : 1);
		v[i].off = off;
		off += v[i].n;
	}
}

static void
fill(float *x, size_t n, struct cg_rng *r, double scale)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(scale * cg_rng_normal(r));
}

/* A delta file (no base needed by the codec layer) encoded under spec. */
static struct cg_file *
encode(const char *spec, const float *x, float *sent, struct cg_uenc *e)
{
	struct cg_uview v[NV];
	struct cg_uspec s;
	struct cg_file *f = cg_file_new("delta");

	views(v);
	if (f == NULL || cg_uspec_parse(spec, &s) != 0)
		die(spec);
	/* What was not sent, alone (decoded in runs), is x - sent to the
	 * bit: the same encoding again, from the same generator. */
	if (e->warm == NULL) {
		static float left[P];
		struct cg_uenc e2 = *e;
		struct cg_file *g = cg_file_new("delta");
		if (g == NULL || cg_uencode(&s, v, NV, x, g, &e2, NULL, left) != 0)
			die(spec);
		cg_file_free(g);
		if (cg_uencode(&s, v, NV, x, f, e, sent, NULL) != 0)
			die(spec);
		for (size_t i = 0; i < P; i++)
			if (memcmp(&left[i], &(float){x[i] - sent[i]},
			           sizeof(float)) != 0) {
				fprintf(stderr, "%s: left[%zu] is not x - sent\n",
				        spec, i);
				exit(1);
			}
		return f;
	}
	if (cg_uencode(&s, v, NV, x, f, e, sent, NULL) != 0)
		die(spec);
	return f;
}

/* The scale a ggml-style block of 32 gets: f16 of max / -h (h = 0: the
 * q8_0 rule amax / 127) and the f32 value before rounding. */
static void
block_scale(const float *x, int h, double *d16, double *d32)
{
	float amax = 0, max = 0;

	for (int j = 0; j < 32; j++)
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	float d = h ? max / (float)-h : amax / 127;
	*d32 = d;
	*d16 = cg_f16_to_f32(cg_f32_to_f16(d));
}

/* Each element within its block's bound; the worst ratio of error to
 * bound into *worst. */
static int
block_bound(const char *spec, int h, double qmax, double half, double *worst)
{
	struct cg_rng r;
	float x[P], pad[P + 64] = {0}, y[P];
	struct cg_uenc e = {0};
	struct cg_uview v[NV];
	int ok = 1;

	views(v);
	cg_rng_seed(&r, 11);
	cg_rng_seed(&e.rng, 5);
	*worst = 0;
	for (int trial = 0; trial < 20; trial++) {
		fill(x, P, &r, pow(10, trial % 7 - 4));
		cg_file_free(encode(spec, x, y, &e));
		for (int i = 0; i < NV; i++) {
			memset(pad, 0, sizeof(pad));
			memcpy(pad, x + v[i].off, v[i].n * sizeof(float));
			for (uint64_t j = 0; j < v[i].n; j++) {
				double d16, d32;
				block_scale(pad + j / 32 * 32, h, &d16, &d32);
				double b = half * fabs(d16) +
				           qmax * fabs(d16 - d32) +
				           1e-6 * fabs((double)x[v[i].off + j]);
				double err = fabs((double)x[v[i].off + j] -
				                  (double)y[v[i].off + j]);
				if (err > b) {
					CHECK(0, "%s: element %" PRIu64
					         " of %s: error %g > bound %g",
					      spec, j, v[i].name, err, b);
					ok = 0;
				}
				if (b > 0 && err / b > *worst)
					*worst = err / b;
			}
		}
	}
	return ok;
}

static void
bounds(void)
{
	double w;

	expect(block_bound("q8", 0, 127, 0.5, &w), "q8: |x-y| <= d/2 + 127|d-d32|");
	printf("     (worst error / bound %.3f)\n", w);
	expect(block_bound("q4", 8, 8, 1, &w), "q4: |x-y| <= d + 8|d-d32|");
	printf("     (worst error / bound %.3f)\n", w);
	expect(block_bound("q2", 2, 2, 1, &w), "q2: |x-y| <= d + 2|d-d32|");
	printf("     (worst error / bound %.3f)\n", w);
	expect(block_bound("q8:sr", 0, 127, 1, &w) &&
	           block_bound("q4:sr", 8, 8, 1, &w) &&
	           block_bound("q2:sr", 2, 2, 1, &w),
	       "stochastic rounding: |x-y| <= d + qmax|d-d32|");

	/* stochastic rounding is unbiased inside the range: the mean of
	 * many roundings of one vector comes close to it */
	struct cg_rng r;
	struct cg_uenc e = {0};
	float x[P], y[P];
	double *acc = xcalloc(P, sizeof(double));
	cg_rng_seed(&r, 3);
	cg_rng_seed(&e.rng, 4);
	fill(x, P, &r, 1);
	for (int t = 0; t < 400; t++) {
		cg_file_free(encode("q2:sr", x, y, &e));
		for (int i = 0; i < P; i++)
			acc[i] += y[i];
	}
	double bias = 0, plain = 0;
	cg_file_free(encode("q2", x, y, &e));
	for (int i = 0; i < P; i++) {
		bias += fabs(acc[i] / 400 - x[i]);
		plain += fabs((double)y[i] - x[i]);
	}
	printf("     (q2 mean |error|: nearest %.4f, mean of 400 "
	       "stochastic %.4f)\n",
	       plain / P, bias / P);
	expect(bias < plain / 3, "q2:sr: the mean of roundings is near x");
	free(acc);

	/* f16, bf16: relative 2^-11, 2^-8 */
	cg_rng_seed(&r, 9);
	fill(x, P, &r, 1);
	int ok = 1;
	cg_file_free(encode("f16", x, y, &e));
	for (int i = 0; i < P; i++)
		ok &= fabs((double)y[i] - x[i]) <= fabs(x[i]) * 0x1p-11 + 0x1p-25;
	cg_file_free(encode("bf16", x, y, &e));
	for (int i = 0; i < P; i++)
		ok &= fabs((double)y[i] - x[i]) <= fabs(x[i]) * 0x1p-8;
	cg_file_free(encode("f32", x, y, &e));
	for (int i = 0; i < P; i++)
		ok &= y[i] == x[i];
	expect(ok, "f16 and bf16 to half an ulp, f32 exactly");

	/* top-k: k of each view, the largest, values to f16 */
	struct cg_uview v[NV];
	views(v);
	ok = 1;
	cg_file_free(encode("topk:0.1", x, y, &e));
	for (int i = 0; i < NV; i++) {
		uint64_t k = 0, want = (uint64_t)ceil(0.1 * (double)v[i].n);
		float minsent = INFINITY, maxleft = 0;
		for (uint64_t j = 0; j < v[i].n; j++) {
			float a = x[v[i].off + j], b = y[v[i].off + j];
			if (b != 0) {
				k++;
				ok &= b == cg_f16_to_f32(cg_f32_to_f16(a));
				minsent = fminf(minsent, fabsf(a));
			} else
				maxleft = fmaxf(maxleft, fabsf(a));
		}
		CHECK(k == want, "topk: %s kept %" PRIu64 " not %" PRIu64,
		      v[i].name, k, want);
		ok &= k == want && maxleft <= minsent;
	}
	expect(ok, "topk:0.1: ceil(0.1 n) of each view, none left larger, "
	           "values as f16");

	/* top-k with ties: exactly the positions of a brute-force choice
	 * (larger magnitude first, then the lower position), both when the
	 * k-th's bin is small and when most values share it (zeros) */
	for (int kind = 0; kind < 3; kind++) {
		static float t[P], ty[P];
		struct cg_rng tr;
		cg_rng_seed(&tr, 7 + (uint64_t)kind);
		for (int i = 0; i < P; i++) {
			uint64_t rv = cg_rng_u64(&tr);
			t[i] = kind == 0   ? (float)(rv % 5) - 2.0f
			       : kind == 1 ? (rv % 10 ? 0.0f : (float)(rv % 3) + 1)
			                   : (float)cg_rng_normal(&tr);
		}
		const char *spec = kind == 2 ? "topk:0.3,val=f32"
		                             : "topk:0.05,val=f32";
		double frac = kind == 2 ? 0.3 : 0.05;
		cg_file_free(encode(spec, t, ty, &e));
		ok = 1;
		for (int i = 0; i < NV; i++) {
			uint64_t n = v[i].n, want = (uint64_t)ceil(frac * (double)n);
			const float *a = t + v[i].off, *b = ty + v[i].off;
			for (uint64_t j = 0; j < n; j++) {
				/* j is kept iff fewer than want come before it */
				uint64_t before = 0;
				for (uint64_t q = 0; q < n; q++)
					before += fabsf(a[q]) > fabsf(a[j]) ||
					          (fabsf(a[q]) == fabsf(a[j]) && q < j);
				int kept = before < want;
				ok &= kept ? b[j] == a[j] : b[j] == 0;
			}
		}
		expect(ok, kind == 0   ? "topk ties (5 values): the brute-force choice"
		           : kind == 1 ? "topk ties (mostly zeros): the brute-force choice"
		                       : "topk:0.3 of normal values: the brute-force choice");
	}

	/* in runs, with ties: each run's brute-force choice (every way of
	 * finding a run's k largest: runs of 16 keeping 2 and of 64
	 * keeping 4, by bit masks; of 100 keeping 5, the branchless scan;
	 * of 16 keeping 12, the sorted insertion) */
	static const struct {
		const char *spec;
		uint64_t C, kc;
	} runs[] = {
	    {"topk:0.125,chunk=16,val=f32", 16, 2},
	    {"topk:0.75,chunk=16,val=f32", 16, 12},
	    {"topk:0.0625,chunk=64,val=f32", 64, 4},
	    {"topk:0.05,chunk=100,val=f32", 100, 5},
	};
	for (int kind = 0; kind < 4; kind++) {
		static float t[P], ty[P];
		struct cg_rng tr;
		const uint64_t C = runs[kind].C, kc = runs[kind].kc;
		cg_rng_seed(&tr, 11 + (uint64_t)kind);
		for (int i = 0; i < P; i++) {
			uint64_t rv = cg_rng_u64(&tr);
			t[i] = rv % 3 ? (float)(rv % 4) - 1.5f : 0.0f;
		}
		cg_file_free(encode(runs[kind].spec, t, ty, &e));
		ok = 1;
		for (int i = 0; i < NV; i++)
			for (uint64_t lo = 0; lo < v[i].n; lo += C) {
				uint64_t len = v[i].n - lo < C ? v[i].n - lo : C;
				uint64_t want = len < kc ? len : kc;
				const float *a = t + v[i].off + lo;
				const float *b = ty + v[i].off + lo;
				for (uint64_t j = 0; j < len; j++) {
					uint64_t before = 0;
					for (uint64_t q = 0; q < len; q++)
						before += fabsf(a[q]) > fabsf(a[j]) ||
						          (fabsf(a[q]) == fabsf(a[j]) &&
						           q < j);
					ok &= before < want ? b[j] == a[j] : b[j] == 0;
				}
			}
		char what[96];
		snprintf(what, sizeof(what), "topk runs of %d keeping %d, "
		         "ties: the brute-force choice", (int)C, (int)kc);
		expect(ok, what);
	}

	/* top-k in runs: each run of 16 keeps its 2 largest, u8 indices */
	ok = 1;
	struct cg_file *cf = encode("topk:0.125,chunk=16,val=f32", x, y, &e);
	ok &= cg_file_find(cf, "w.idx")->dtype == CG_U8;
	cg_file_free(cf);
	for (int i = 0; i < NV; i++)
		for (uint64_t lo = 0; lo < v[i].n; lo += 16) {
			uint64_t len = v[i].n - lo < 16 ? v[i].n - lo : 16, k = 0;
			float minsent = INFINITY, maxleft = 0;
			for (uint64_t j = lo; j < lo + len; j++) {
				float a = x[v[i].off + j], b = y[v[i].off + j];
				if (b != 0) {
					k++;
					ok &= a == b;
					minsent = fminf(minsent, fabsf(a));
				} else
					maxleft = fmaxf(maxleft, fabsf(a));
			}
			ok &= k == (len < 2 ? len : 2) && maxleft <= minsent;
		}
	/* values quantized: a run's kept values through q2_0's bound */
	cf = encode("topk:0.05,chunk=300,val=q2_0", x, y, &e);
	ok &= cg_file_find(cf, "w.idx")->dtype == CG_U16 &&
	      cg_file_find(cf, "w.val")->nelem % 32 == 0;
	cg_file_free(cf);
	expect(ok, "topk in runs: each run's largest, exactly; u8 and u16 "
	           "indices; block-quantized values");

	/* sign: +-mean|x| with x's sign */
	ok = 1;
	cg_file_free(encode("sign", x, y, &e));
	for (int i = 0; i < NV; i++) {
		double m = 0;
		for (uint64_t j = 0; j < v[i].n; j++)
			m += fabs(x[v[i].off + j]);
		m /= (double)v[i].n;
		for (uint64_t j = 0; j < v[i].n; j++) {
			float a = x[v[i].off + j], b = y[v[i].off + j];
			ok &= fabs(fabs(b) - m) <= 1e-6 * m &&
			      (a < 0) == (b < 0);
		}
	}
	expect(ok, "sign: every element +-mean|x| with its sign");

	/* low rank: a rank-2 matrix comes back (one power iteration from
	 * any start spans its columns); a random one no larger than it is */
	float *u = xcalloc(P, sizeof(float));
	for (int a = 0; a < 48; a++)
		for (int b = 0; b < 40; b++)
			x[a * 40 + b] = (float)(sin(a + 1.0) * cos(b * 0.3) +
			                        0.5 * cos(a * 0.7) * sin(b + 2.0));
	cg_file_free(encode("lowrank:2", x, y, &e));
	double err = 0, nrm = 0;
	for (int i = 0; i < 48 * 40; i++) {
		err += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
		nrm += (double)x[i] * x[i];
	}
	int rest = 1;
	for (int i = 48 * 40; i < 48 * 40 + 37; i++)
		rest &= y[i] == x[i]; /* the vector: f32 */
	printf("     (rank-2 matrix through lowrank:2: relative error %.2g)\n",
	       sqrt(err / nrm));
	expect(sqrt(err / nrm) < 1e-5 && rest,
	       "lowrank:2: a rank-2 matrix exactly, a vector as f32");
	free(u);
}

/* lowrank at every rank from 1 to 9 on matrices of 12 x 1500 and 9 x 37:
 * the factors are those of plain loops (P = M Q in double in index
 * order from the first Q drawn, Gram-Schmidt, Q = M^T P with P as sent)
 * and every window decodes to P's row times Q's row summed in float
 * in rank order, to the bit. */
static void
lowrank_plain(void)
{
	static const uint64_t shp[2][2] = {{12, 1500}, {9, 37}};
	int all = 1;

	for (int m = 0; m < 2; m++)
		for (int r = 1; r <= 9; r++) {
			int ok = 1;
			const uint64_t rows = shp[m][0], cols = shp[m][1];
			if ((uint64_t)r * (rows + cols) >= rows * cols)
				continue;
			struct cg_uview v = {0};
			struct cg_uspec s;
			struct cg_uenc e = {0};
			struct cg_rng g;
			char spec[32], nm[16];
			strcpy(v.name, "w");
			v.ndim = 2;
			v.shape[0] = rows;
			v.shape[1] = cols;
			v.n = rows * cols;
			float *x = xcalloc(v.n, sizeof(float));
			float *y = xcalloc(v.n, sizeof(float));
			double *p = xcalloc(rows * r, sizeof(double));
			double *q = xcalloc(cols * r, sizeof(double));
			float *q0 = xcalloc(cols * r, sizeof(float));
			float *pf = xcalloc(rows * r, sizeof(float));
			cg_rng_seed(&g, 40 + r);
			fill(x, v.n, &g, 0.05);
			cg_rng_seed(&e.rng, 60 + r);
			g = e.rng;
			for (uint64_t i = 0; i < cols * r; i++)
				q0[i] = cg_rng_normal(&g);
			snprintf(spec, sizeof(spec), "lowrank:%d", r);
			struct cg_file *f = cg_file_new("delta");
			if (f == NULL || cg_uspec_parse(spec, &s) != 0 ||
			    cg_uencode(&s, &v, 1, x, f, &e, y, NULL) != 0)
				die(spec);
			/* P a column at a time (pc [c] is P's column c) */
			for (int c = 0; c < r; c++) {
				double *pc = p + c * rows;
				for (uint64_t i = 0; i < rows; i++)
					for (uint64_t j = 0; j < cols; j++)
						pc[i] += (double)x[i * cols + j] *
						         (double)q0[j * r + c];
				for (int b = 0; b < c; b++) {
					const double *pb = p + b * rows;
					double dot = 0;
					for (uint64_t i = 0; i < rows; i++)
						dot += pc[i] * pb[i];
					for (uint64_t i = 0; i < rows; i++)
						pc[i] -= dot * pb[i];
				}
				double len = 0;
				for (uint64_t i = 0; i < rows; i++)
					len += pc[i] * pc[i];
				len = sqrt(len);
				for (uint64_t i = 0; i < rows; i++)
					pc[i] = len > 1e-30 ? pc[i] / len : 0;
			}
			for (uint64_t i = 0; i < rows; i++)
				for (int c = 0; c < r; c++)
					pf[i * r + c] = (float)p[c * rows + i];
			for (uint64_t i = 0; i < rows; i++)
				for (uint64_t j = 0; j < cols; j++)
					for (int c = 0; c < r; c++)
						q[j * r + c] += (double)x[i * cols + j] *
						                (double)pf[i * r + c];
			const struct cg_tensor *tp = cg_file_find(f, "w.p");
			const struct cg_tensor *tq = cg_file_find(f, "w.q");
			if (tp == NULL || tq == NULL)
				die("lowrank factors");
			const float *fp = tp->data, *fq = tq->data;
			for (uint64_t i = 0; i < rows * r; i++)
				ok &= fp[i] == pf[i];
			for (uint64_t i = 0; i < cols * r; i++)
				ok &= fq[i] == (float)q[i];
			/* decoding: the whole view (y) and windows of it */
			struct cg_uview *b;
			struct cg_uspec bs;
			int nb;
			if (cg_ubind(f, &bs, &b, &nb) != 0 || nb != 1)
				die("lowrank bind");
			for (uint64_t k = 0; k < v.n; k++) {
				float a = 0;
				for (int c = 0; c < r; c++)
					a += fp[(k / cols) * r + c] *
					     fq[(k % cols) * r + c];
				ok &= memcmp(&a, &y[k], sizeof(a)) == 0;
			}
			for (uint64_t lo = 0; lo < v.n; lo += 977) {
				float w[2500];
				size_t n = v.n - lo < 2500 ? v.n - lo : 2500;
				cg_udecode(&bs, &b[0], lo, n, w);
				ok &= memcmp(w, y + lo, n * sizeof(float)) == 0;
			}
			snprintf(nm, sizeof(nm), "%d", r);
			all &= ok;
			if (!ok)
				fprintf(stderr, "lowrank:%s on %" PRIu64 "x%" PRIu64
				        ": not the plain loops' bits\n",
				        nm, rows, cols);
			free(b);
			cg_file_free(f);
			free(x);
			free(y);
			free(p);
			free(q);
			free(q0);
			free(pf);
		}
	expect(all, "lowrank:1-9: the plain loops' factors and sums, to the bit");
}

/* f written to dir, read back, bound and decoded into out [P]; 0, or -1
 * with the message in msg [256]. */
static int
readback(struct cg_file *f, const char *dir, float *out, char *msg)
{
	char path[4200];
	struct cg_uspec s;
	struct cg_uview *v;
	int nv, rc = -1;

	snprintf(path, sizeof(path), "%s/rb.cgu", dir);
	if (cg_file_write(f, path, CG_COMPRESS_NONE) != 0)
		die("write");
	struct cg_file *g = cg_file_read(path);
	if (g == NULL || cg_ubind(g, &s, &v, &nv) != 0) {
		snprintf(msg, 256, "%s", cg_errmsg());
		cg_file_free(g);
		return -1;
	}
	if (nv == NV) {
		uint64_t off = 0;
		for (int i = 0; i < nv; i++) {
			cg_udecode(&s, &v[i], 0, v[i].n, out + off);
			off += v[i].n;
		}
		rc = off == P ? 0 : -1;
	}
	snprintf(msg, 256, "%s", rc ? "views not the layout's" : "");
	free(v);
	cg_file_free(g);
	return rc;
}

/*
 * topk's val=lut2: the same elements kept as with f32 values; a table of
 * four per view, each kept value decoded to its bin's entry, bins 1.5
 * standard deviations wide around the kept values' mean, each entry the
 * mean of its bin's values (against a reference in double); the codes
 * packed four to a byte; the same values read back from a file.
 */
static void
lut2(const char *dir)
{
	static const char *spec[] = {"topk:0.1,chunk=16,val=lut2",
	                             "topk:k=7,val=lut2"};
	static const char *plain[] = {"topk:0.1,chunk=16,val=f32",
	                              "topk:k=7,val=f32"};
	struct cg_rng r;
	struct cg_uenc e = {0};
	static float x[P], y[P], z[P], back[P];
	struct cg_uview v[NV];
	char msg[256];

	views(v);
	cg_rng_seed(&r, 61);
	fill(x, P, &r, 0.01);
	for (int i = 0; i < P; i += 3)
		x[i] += 0.004f; /* a mean that is not zero */
	for (int c = 0; c < 2; c++) {
		int ok = 1;
		double worst = 0;
		cg_file_free(encode(plain[c], x, z, &e));
		struct cg_file *f = encode(spec[c], x, y, &e);
		for (int i = 0; i < NV; i++) {
			char name[32];
			const float *xv = x + v[i].off, *zv = z + v[i].off,
			            *yv = y + v[i].off;
			uint64_t k = 0;
			double m = 0, ss = 0, sum[4] = {0};
			uint64_t cnt[4] = {0};
			for (uint64_t j = 0; j < v[i].n; j++) {
				/* kept where f32 values keep (x's are nonzero) */
				ok &= (zv[j] != 0) == (zv[j] == xv[j]);
				if (zv[j] != 0) {
					k++;
					m += xv[j];
				}
			}
			m /= (double)k;
			for (uint64_t j = 0; j < v[i].n; j++)
				if (zv[j] != 0)
					ss += (xv[j] - m) * (xv[j] - m);
			double step = k > 1 ? 1.5 * sqrt(ss / (double)(k - 1)) : 1;
			int bin[P];
			for (uint64_t j = 0; j < v[i].n; j++) {
				if (zv[j] == 0) {
					ok &= yv[j] == 0;
					continue;
				}
				double q = ((double)xv[j] - m) / step + 2;
				int b = (int)floor(q + 0.5);
				b = b < 0 ? 0 : b > 3 ? 3 : b;
				bin[j] = b;
				sum[b] += xv[j] - m;
				cnt[b]++;
			}
			snprintf(name, sizeof(name), "%.16s.val", v[i].name);
			const struct cg_tensor *tv = cg_file_find(f, name);
			ok &= tv && tv->dtype == CG_U8 &&
			      tv->nelem == 16 + (k + 3) / 4;
			if (!ok)
				break;
			/* the table: four little-endian f32 */
			float tab[4];
			for (int b = 0; b < 4; b++) {
				const unsigned char *q =
				    (const unsigned char *)tv->data + 4 * b;
				uint32_t u = (uint32_t)q[0] | (uint32_t)q[1] << 8 |
				             (uint32_t)q[2] << 16 |
				             (uint32_t)q[3] << 24;
				memcpy(&tab[b], &u, 4);
			}
			for (int b = 0; b < 4; b++) {
				double want = cnt[b] ? m + sum[b] / (double)cnt[b] : m;
				double d = fabs(tab[b] - want) /
				           (1e-7 + 1e-6 * fabs(want));
				worst = fmax(worst, d);
			}
			for (uint64_t j = 0; j < v[i].n; j++)
				if (zv[j] != 0)
					ok &= yv[j] == tab[bin[j]];
		}
		ok &= readback(f, dir, back, msg) == 0 &&
		      memcmp(back, y, sizeof(y)) == 0;
		cg_file_free(f);
		printf("     (%s: table within %.3g of the tolerance)\n", spec[c],
		       worst);
		char what[128];
		snprintf(what, sizeof(what),
		         "%s: the f32 code's elements, each its bin's mean, "
		         "read back the same",
		         spec[c]);
		expect(ok && worst < 1, what);
	}

	/* one kept value a view, and all of them equal: a table of it */
	for (int i = 0; i < P; i++)
		x[i] = i % 2 ? 0.5f : -0.5f;
	cg_file_free(encode("topk:k=1,val=lut2", x, y, &e));
	int ok = 1;
	for (int i = 0; i < NV; i++)
		ok &= y[v[i].off] == x[v[i].off];
	/* one of each run of two: 960 + 19 + 15 runs */
	cg_file_free(encode("topk:0.5,chunk=2,val=lut2", x, y, &e));
	int sent = 0;
	for (int i = 0; i < P; i++) {
		ok &= y[i] == 0 || y[i] == x[i];
		sent += y[i] != 0;
	}
	ok &= sent == 960 + 19 + 15;
	expect(ok, "lut2: one value a view, and equal magnitudes, sent "
	           "exactly");
}

/* 100 rounds of error feedback: the sum sent stays within the last
 * update's error of the sum of the updates; without it, it drifts. */
static void
feedback(const char *spec)
{
	struct cg_rng r;
	struct cg_uenc e = {0};
	float x[P], u[P], y[P], res[P] = {0}, warm[P] = {0};
	double *sx = xcalloc(P, sizeof(double)), *sy = xcalloc(P, sizeof(double));
	double *sn = xcalloc(P, sizeof(double));
	double worst = 0, drift = 0, scale = 0;
	char what[128];

	cg_rng_seed(&r, 21);
	cg_rng_seed(&e.rng, 22);
	e.warm = warm;
	for (int t = 0; t < 100; t++) {
		/* a steady direction plus noise: what compressed updates of
		 * a training run look like */
		fill(x, P, &r, 0.01);
		for (int i = 0; i < P; i++)
			x[i] += 0.01f * (float)sin(i * 0.37);
		for (int i = 0; i < P; i++)
			u[i] = x[i] + res[i];
		cg_file_free(encode(spec, u, y, &e));
		for (int i = 0; i < P; i++) {
			res[i] = u[i] - y[i];
			sx[i] += x[i];
			sy[i] += y[i];
		}
		e.warm = NULL; /* no feedback: same codec, fresh */
		cg_file_free(encode(spec, x, y, &e));
		e.warm = warm;
		for (int i = 0; i < P; i++)
			sn[i] += y[i];
	}
	for (int i = 0; i < P; i++) {
		/* the invariant, up to the float sums of the residual */
		double gap = fabs(sx[i] - sy[i] - res[i]);
		worst = fmax(worst, gap);
		drift = fmax(drift, fabs(sx[i] - sn[i]));
		scale = fmax(scale, fabs(sx[i] - sy[i]));
	}
	snprintf(what, sizeof(what),
	         "%s: over 100 rounds sum(x) - sum(sent) is the last "
	         "residual",
	         spec);
	printf("     (%s: |sum x - sum sent| <= %.3g with feedback, %.3g "
	       "without; off the residual by %.2g)\n",
	       spec, scale, drift, worst);
	expect(worst < 1e-4 && scale < drift, what);
	free(sx);
	free(sy);
	free(sn);
}

/* ----------------------------------------------- reduce of reduces */

/* An update file of the base digest "00..0" holding x encoded by spec,
 * as a reader gets it. */
static struct cg_update *
update(const char *spec, const float *x, const char *name)
{
	struct cg_uenc e = {0};
	float y[P];
	struct cg_file *f = encode(spec, x, y, &e);
	cJSON *b = cJSON_AddObjectToObject(f->manifest, "base");

	cJSON_AddStringToObject(b, "sha256",
	                        "0000000000000000000000000000000000000000000000"
	                        "000000000000000000");
	cJSON_AddNumberToObject(b, "step", 0);
	cJSON_AddNumberToObject(f->manifest, "samples", 1);
	struct cg_update *u = cg_update_from_file(f, name);
	if (u == NULL)
		die(name);
	return u;
}

static struct cg_file *
reduce_of(const char *op, struct cg_update **u, int n)
{
	struct cg_reducer r;

	cg_reducer_init(&r, cg_reduce_op_find(op), 0);
	for (int i = 0; i < n; i++)
		if (cg_reducer_add(&r, u[i]) != 0)
			die("add");
	struct cg_file *f = cg_reducer_finish(&r);
	if (f == NULL)
		die("finish");
	return f;
}

static int
same_tensors(const struct cg_file *a, const struct cg_file *b, double tol)
{
	if (a->ntensors != b->ntensors)
		return 0;
	for (size_t i = 0; i < a->ntensors; i++) {
		const float *x = a->tensors[i]->data, *y = b->tensors[i]->data;
		if (a->tensors[i]->nelem != b->tensors[i]->nelem)
			return 0;
		for (uint64_t j = 0; j < a->tensors[i]->nelem; j++)
			if (fabs((double)x[j] - y[j]) > tol ||
			    (tol == 0 && memcmp(&x[j], &y[j], 4) != 0 &&
			     x[j] != 0))
				return 0;
	}
	return 1;
}

static void
trees(void)
{
	static const char *specs[4] = {"topk:0.25", "q4", "f16", "f32"};
	float x[4][P];
	struct cg_rng r;

	/* values on a grid of 2^-8 below 2: every codec holds them and
	 * every sum of them exactly, so any order of additions agrees */
	cg_rng_seed(&r, 31);
	for (int k = 0; k < 4; k++)
		for (int i = 0; i < P; i++) {
			int q = (int)cg_rng_below(&r, 16) - 8;
			/* q4 holds d (q - 8) with d = max / -8: one block
			 * element is -8 d so the scale is exact */
			x[k][i] = (float)q / 256.0f;
			if (i % 32 == 0)
				x[k][i] = -8.0f / 256.0f;
		}
	for (int k = 0; k < 4; k++) {
		float y[P];
		struct cg_uenc e = {0};
		cg_file_free(encode(specs[k], x[k], y, &e));
		/* top-k keeps a quarter: the grid decides only which */
		for (int i = 0; k > 0 && i < P; i++)
			CHECK(y[i] == x[k][i], "%s does not hold the grid",
			      specs[k]);
	}
	struct cg_update *u[4], *w[2];
	for (int k = 0; k < 4; k++)
		u[k] = update(specs[k], x[k], specs[k]);
	struct cg_file *flat = reduce_of("sum", u, 4);
	for (int k = 0; k < 4; k++)
		u[k] = update(specs[k], x[k], specs[k]);
	struct cg_file *left = reduce_of("sum", u, 2);
	struct cg_file *right = reduce_of("sum", u + 2, 2);
	w[0] = cg_update_from_file(left, "left");
	w[1] = cg_update_from_file(right, "right");
	if (w[0] == NULL || w[1] == NULL)
		die("tree");
	struct cg_file *tree = reduce_of("sum", w, 2);
	expect(same_tensors(flat, tree, 0),
	       "sum over topk, q4, f16, f32: (a+b)+(c+d) is a+b+c+d, exactly");
	cg_file_free(flat);
	cg_file_free(tree);

	/* the weighted mean of partial means: equal to rounding */
	for (int k = 0; k < 4; k++)
		fill(x[k], P, &r, 1);
	for (int k = 0; k < 4; k++)
		u[k] = update(specs[k], x[k], specs[k]);
	flat = reduce_of("mean", u, 4);
	for (int k = 0; k < 4; k++)
		u[k] = update(specs[k], x[k], specs[k]);
	w[0] = cg_update_from_file(reduce_of("mean", u, 3), "three");
	w[1] = u[3];
	tree = reduce_of("mean", w, 2);
	expect(same_tensors(flat, tree, 1e-6),
	       "mean over mixed codecs: the mean of a partial mean and the "
	       "rest is the mean");
	cg_file_free(flat);
	cg_file_free(tree);
}

/* ---------------------------------------------------------- hostile */

/* f written and read back: the message of the first failure, "" when
 * reading and binding both succeed. */
static const char *
verdict(struct cg_file *f, const char *dir)
{
	static char msg[512];
	char path[1024];
	struct cg_uspec s;
	struct cg_uview *v;
	int nv;

	snprintf(path, sizeof(path), "%s/h.cgu", dir);
	if (cg_file_write(f, path, CG_COMPRESS_NONE) != 0)
		die("write");
	cg_file_free(f);
	struct cg_file *g = cg_file_read(path);
	msg[0] = '\0';
	if (g == NULL || cg_ubind(g, &s, &v, &nv) != 0)
		snprintf(msg, sizeof(msg), "%s", cg_errmsg());
	else
		free(v);
	cg_file_free(g);
	return msg;
}

static struct cg_tensor *
tensor(struct cg_file *f, const char *name)
{
	struct cg_tensor *t = cg_file_find(f, name);

	if (t == NULL) {
		fprintf(stderr, "no tensor %s\n", name);
		exit(1);
	}
	return t;
}

static void
hostile(const char *dir)
{
	struct cg_rng r;
	struct cg_uenc e = {0};
	float x[P], y[P];
	struct cg_file *f;
	const char *m;

	cg_rng_seed(&r, 41);
	fill(x, P, &r, 1);

	f = encode("topk:0.1", x, y, &e);
	expect(strcmp(verdict(f, dir), "") == 0, "a sound topk file reads");

	f = encode("topk:0.1", x, y, &e);
	memset(tensor(f, "w.idx")->data, 0xff, 4);
	m = verdict(f, dir);
	printf("     (%s)\n", m);
	expect(strstr(m, "w.idx: index 4294967295 outside") != NULL,
	       "an index out of range is refused");

	f = encode("topk:0.1", x, y, &e);
	unsigned char *p = tensor(f, "b.idx")->data;
	memcpy(p + 4, p, 4);
	m = verdict(f, dir);
	expect(strstr(m, "b.idx: index") && strstr(m, "repeated or out of order"),
	       "a repeated index is refused");

	f = encode("topk:0.1", x, y, &e);
	uint16_t nan16 = 0x7e00;
	memcpy(tensor(f, "s.val")->data, &nan16, 2);
	m = verdict(f, dir);
	expect(strstr(m, "s.val: element 0 is not finite") != NULL,
	       "a NaN value is refused");

	/* a block's scale is little-endian bytes on every host (a plain
	 * tensor's elements, above, are host words) */
	f = encode("q4", x, y, &e);
	memcpy(tensor(f, "w")->data, "\x00\x7e", 2);
	m = verdict(f, dir);
	printf("     (%s)\n", m);
	expect(strstr(m, "tensor w: block 0 has a scale that is not finite") !=
	           NULL,
	       "a NaN block scale is refused on reading");

	/* a block count that does not match the layout's shape */
	f = encode("q8", x, y, &e);
	cJSON *lay = cJSON_GetObjectItemCaseSensitive(f->manifest, "layout");
	cJSON *sh = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(lay, 1),
	                                             "shape");
	cJSON_ReplaceItemInArray(sh, 0, cJSON_CreateNumber(90));
	m = verdict(f, dir);
	printf("     (%s)\n", m);
	expect(strstr(m, "tensor b: its shape is not the layout's") != NULL,
	       "blocks that do not match the layout's shape are refused");

	f = encode("sign", x, y, &e);
	((unsigned char *)tensor(f, "b.sign")->data)[4] |= 0x80;
	m = verdict(f, dir);
	expect(strstr(m, "b.sign: bits set past its 37 elements") != NULL,
	       "sign bits past the end are refused");

	f = encode("sign", x, y, &e);
	float bad = -1;
	memcpy(tensor(f, "s.scale")->data, &bad, 4);
	m = verdict(f, dir);
	expect(strstr(m, "s.scale: scale -1 is not a magnitude") != NULL,
	       "a negative sign scale is refused");

	f = encode("lowrank:2", x, y, &e);
	bad = NAN;
	memcpy(tensor(f, "w.q")->data, &bad, 4);
	m = verdict(f, dir);
	expect(strstr(m, "w.q: element 0 is not finite") != NULL,
	       "a NaN low-rank factor is refused");

	f = encode("topk:0.25,chunk=8", x, y, &e);
	((unsigned char *)tensor(f, "b.idx")->data)[9] = 200;
	m = verdict(f, dir);
	expect(strstr(m, "b.idx: index 200 outside its 5 elements") != NULL,
	       "an index outside its run is refused");

	f = encode("topk:0.1,chunk=64,val=lut2", x, y, &e);
	expect(strcmp(verdict(f, dir), "") == 0, "a sound topk lut2 file reads");

	f = encode("topk:0.1,chunk=64,val=lut2", x, y, &e);
	memcpy((unsigned char *)tensor(f, "b.val")->data + 8, "\0\0\xc0\x7f",
	       4);
	m = verdict(f, dir);
	printf("     (%s)\n", m);
	expect(strstr(m, "b.val: table entry 2 is not finite") != NULL,
	       "lut2: a NaN in the table is refused");

	/* a file of f16 values that says lut2: its values are not codes */
	f = encode("topk:0.1,chunk=64", x, y, &e);
	cJSON *c2 = cJSON_GetObjectItemCaseSensitive(f->manifest, "codec");
	cJSON_ReplaceItemInObject(
	    c2, "spec", cJSON_CreateString("topk:0.1,val=lut2,chunk=64"));
	m = verdict(f, dir);
	printf("     (%s)\n", m);
	expect(strstr(m, "tensor w.val: dtype f16, not u8") != NULL,
	       "lut2: values of another dtype are refused");

	/* codes cut short: one byte less than the kept values need */
	f = encode("topk:0.1,chunk=64,val=lut2", x, y, &e);
	struct cg_file *g = cg_file_new("delta");
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		uint64_t n = t->nelem - (strcmp(t->name, "w.val") == 0);
		struct cg_tensor *u =
		    cg_file_add_zero(g, t->name, t->dtype, 1, &n);
		memcpy(u->data, t->data, u->nbytes);
	}
	cJSON_Delete(g->manifest);
	g->manifest = cJSON_Duplicate(f->manifest, 1);
	cg_file_free(f);
	m = verdict(g, dir);
	printf("     (%s)\n", m);
	expect(strstr(m, "tensor w.val: its shape is not the layout's") !=
	           NULL,
	       "lut2: codes cut short are refused");

	f = encode("topk:0.1", x, y, &e);
	cg_file_add_zero(f, "extra", CG_F32, 1, (uint64_t[]){3});
	m = verdict(f, dir);
	expect(strstr(m, "7 tensors, of which the codec's layout uses 6") != NULL,
	       "a tensor the layout does not name is refused");

	f = encode("topk:0.1", x, y, &e);
	cJSON *c = cJSON_GetObjectItemCaseSensitive(f->manifest, "codec");
	cJSON_ReplaceItemInObject(c, "spec", cJSON_CreateString("zip"));
	m = verdict(f, dir);
	expect(strstr(m, "manifest: unknown codec 'zip'") != NULL,
	       "an unknown codec is refused");

	f = encode("topk:0.1", x, y, &e);
	cJSON_DeleteItemFromObject(f->manifest, "layout");
	cJSON_AddStringToObject(f->manifest, "layout", "w");
	m = verdict(f, dir);
	expect(strstr(m, "manifest: no layout") != NULL,
	       "a layout that is not one is refused");

	f = encode("topk:0.1", x, y, &e);
	lay = cJSON_GetObjectItemCaseSensitive(f->manifest, "layout");
	sh = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(lay, 0),
	                                      "shape");
	cJSON_ReplaceItemInArray(sh, 0, cJSON_CreateNumber(1e300));
	m = verdict(f, dir);
	expect(strstr(m, "layout view 0 is not a name and a shape") != NULL,
	       "a view of absurd size is refused before anything is "
	       "allocated");
}

static void
specs(void)
{
	struct cg_uspec s;
	char buf[64];
	int ok = 1;
	static const char *good[] = {"f32",        "f16",  "bf16",
	                             "q8",         "q4:sr", "q2",
	                             "topk:0.01",  "topk:k=100,val=f32",
	                             "topk:0.03,chunk=64,val=q2_0",
	                             "topk:k=64,chunk=4096,val=lut2",
	                             "topk:k=64,chunk=4096,val=lut2,idx=gap",
	                             "sign",       "lowrank:8"};
	static const char *bad[] = {"q3", "topk:2", "topk:k=0", "topk:val=u8",
	                            "topk:val=lut3", "topk:val=lut",
	                            "topk:chunk=1", "topk:chunk=70000",
	                            "lowrank:0", "q8:fast", "topk:0.1,x=1",
	                            "topk:0.1,idx=gap", "topk:0.1,chunk=64,idx=gaps",
	                            ""};

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
		ok &= cg_uspec_parse(good[i], &s) == 0;
		cg_uspec_format(&s, buf, sizeof(buf));
		struct cg_uspec t;
		ok &= cg_uspec_parse(buf, &t) == 0;
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ok &= cg_uspec_parse(bad[i], &s) == -1;
	expect(ok, "codec specs: each good one parses and formats back, "
	           "each bad one is refused");

	/* --budget: the largest k, the most bits, the largest rank */
	struct cg_uview v[NV];
	uint64_t b;
	views(v);
	cg_uspec_parse("topk", &s);
	ok = cg_uspec_fit(&s, v, NV, 600) == 0 &&
	     cg_uspec_size(&s, v, NV, &b) == 0 && b <= 600 && b > 600 - 3 * 6;
	CHECK(ok, "topk fitted to 600 bytes takes %" PRIu64, b);
	cg_uspec_parse("q8", &s);
	ok &= cg_uspec_fit(&s, v, NV, 1200) == 0 && s.dtype == CG_Q4_0;
	CHECK(ok, "q fitted to 1200 bytes: %s", cg_dtype_name(s.dtype));
	cg_uspec_parse("lowrank", &s);
	ok &= cg_uspec_fit(&s, v, NV, 4 * (88 * 3 + 37 + 30)) == 0 &&
	      s.rank == 3;
	CHECK(ok, "lowrank fitted: rank %d", s.rank);
	cg_uspec_parse("q8", &s);
	ok &= cg_uspec_fit(&s, v, NV, 100) == -1 &&
	      strstr(cg_errmsg(), "the smallest q2 update takes") != NULL;
	expect(ok, "budget: topk, q and lowrank fitted; too small refused");
}

/* A row joins the table at run time (cg_ucodec_register), after the
 * built-in ones, unless it is incomplete or a name of it is taken. */
static void
registry(void)
{
	static struct cg_ucodec r;
	struct cg_uspec s;
	int ok = 1;

	if (cg_uspec_parse("f32", &s) != 0) {
		expect(0, "f32 parses");
		return;
	}
	r = *s.codec;
	r.name = "dense";
	ok &= cg_ucodec_register(&r) == -1 &&
	      strcmp(cg_errmsg(), "codec dense: registered already") == 0;
	r.name = "again";
	r.help = "again: the dense f32 row again";
	r.names[0].name = "q4";
	r.names[1].name = NULL;
	ok &= cg_ucodec_register(&r) == -1 &&
	      strcmp(cg_errmsg(), "codec again: name q4 is codec q's") == 0;
	r.names[0].name = "again:1";
	ok &= cg_ucodec_register(&r) == -1 &&
	      strstr(cg_errmsg(), "name 'again:1' is not 1 to 32") != NULL;
	r.names[0].name = "again";
	r.decode = NULL;
	ok &= cg_ucodec_register(&r) == -1 &&
	      strstr(cg_errmsg(), "codec again: help, a name") != NULL;
	expect(ok, "register: a name taken, a bad name, a row incomplete: "
	           "refused");

	r.decode = s.codec->decode;
	ok =
	    cg_ucodec_register(&r) == 0 && cg_uspec_parse("again", &s) == 0 &&
	    s.codec == &r && strcmp(cg_uspec_name(&s), "again") == 0 &&
	    strstr(cg_ucodec_help(), "(--mask)\n  again: the dense") != NULL &&
	    cg_uspec_parse("zip", &s) == -1 &&
	    strcmp(cg_errmsg(), "unknown codec 'zip' (f32, f16, bf16, q8, q4, "
	                        "q2, topk, sign, lowrank, masked, again)") == 0;
	expect(ok, "register: a row joins after the built-in ones, parsed "
	           "by its name");
}

/*
 * topk's idx=gap: the same file as without it but for the indices, which
 * are each run's first and then the differences (each >= 1); every
 * window of every view, at any start, decodes to the bits of the plain
 * file's; gaps that run past the run, or a gap of 0, are refused.
 */
static void
gaps(const char *dir)
{
	static const char *spec[] = {"topk:0.1,chunk=16,val=lut2",
	                             "topk:0.3,chunk=7,val=f32",
	                             "topk:k=3,chunk=300,val=q2_0",
	                             "topk:0.05,chunk=1000,val=f16"};
	struct cg_rng r;
	struct cg_uenc e = {0};
	static float x[P], y[P], yg[P];
	char gs[64], path[1024], path2[1024];
	int ok = 1;

	cg_rng_seed(&r, 77);
	fill(x, P, &r, 1);
	snprintf(path, sizeof(path), "%s/plain.cgu", dir);
	snprintf(path2, sizeof(path2), "%s/gap.cgu", dir);
	for (size_t si = 0; si < sizeof(spec) / sizeof(*spec); si++) {
		snprintf(gs, sizeof(gs), "%s,idx=gap", spec[si]);
		struct cg_file *f = encode(spec[si], x, y, &e);
		struct cg_file *g = encode(gs, x, yg, &e);
		int same = memcmp(y, yg, sizeof(y)) == 0;
		for (size_t i = 0; i < f->ntensors; i++) {
			const struct cg_tensor *a = f->tensors[i];
			const struct cg_tensor *b = cg_file_find(g, a->name);
			size_t len = strlen(a->name);
			if (b == NULL || b->nbytes != a->nbytes) {
				same = 0;
				continue;
			}
			if (strcmp(a->name + len - 4, ".idx") != 0) {
				same &= memcmp(a->data, b->data, a->nbytes) == 0;
				continue;
			}
			/* the plain indices are the gaps' sums in each run */
			struct cg_uspec s;
			cg_uspec_parse(spec[si], &s);
			uint64_t kc = s.count ? s.count : (uint64_t)ceil(s.frac * s.chunk);
			uint64_t sum = 0, wide = a->dtype == CG_U8 ? 1 : 2;
			for (uint64_t q = 0; q < a->nelem; q++) {
				uint64_t pa = 0, pb = 0;
				memcpy(&pa, (unsigned char *)a->data + q * wide, wide);
				memcpy(&pb, (unsigned char *)b->data + q * wide, wide);
				sum = q % kc ? sum + pb : pb;
				same &= sum == pa && (q % kc == 0 || pb >= 1);
			}
		}
		if (cg_file_write(f, path, CG_COMPRESS_NONE) != 0 ||
		    cg_file_write(g, path2, CG_COMPRESS_NONE) != 0)
			die("write");
		cg_file_free(f);
		cg_file_free(g);
		/* windows of every start and length up to 40, read back */
		struct cg_file *fa = cg_file_read(path), *fb = cg_file_read(path2);
		struct cg_uspec sa, sb;
		struct cg_uview *va, *vb;
		int na, nb;
		if (fa == NULL || fb == NULL || cg_ubind(fa, &sa, &va, &na) != 0 ||
		    cg_ubind(fb, &sb, &vb, &nb) != 0)
			die(cg_errmsg());
		for (int i = 0; i < na; i++)
			for (uint64_t lo = 0; lo < va[i].n; lo++)
				for (size_t n = 1; n <= 40 && lo + n <= va[i].n; n++) {
					float oa[40], ob[40];
					cg_udecode(&sa, &va[i], lo, n, oa);
					cg_udecode(&sb, &vb[i], lo, n, ob);
					same &= memcmp(oa, ob, n * sizeof(float)) == 0;
				}
		free(va);
		free(vb);
		cg_file_free(fa);
		cg_file_free(fb);
		ok &= same;
		CHECK(same, "%s: the plain file's values, bit for bit, at every "
		            "window", gs);
	}
	expect(ok, "idx=gap: indices as gaps within their runs, the same "
	           "values decoded");

	/* hostile gaps */
	struct cg_file *f = encode("topk:0.25,chunk=8,idx=gap", x, y, &e);
	unsigned char *p = tensor(f, "w.idx")->data;
	p[1] = 0; /* the second of a run's two: a gap of 0 */
	const char *m = verdict(f, dir);
	printf("     (%s)\n", m);
	expect(strstr(m, "w.idx: index") && strstr(m, "repeated or out of order"),
	       "idx=gap: a gap of 0 is refused");
	f = encode("topk:0.25,chunk=8,idx=gap", x, y, &e);
	p = tensor(f, "w.idx")->data;
	p[1] = 255; /* past the run of 8 */
	m = verdict(f, dir);
	printf("     (%s)\n", m);
	expect(strstr(m, "w.idx: index") && strstr(m, "outside its 8 elements"),
	       "idx=gap: gaps that sum past the run are refused");
	f = encode("topk:0.25,chunk=8,idx=gap", x, y, &e);
	cJSON *c2 = cJSON_GetObjectItemCaseSensitive(f->manifest, "codec");
	cJSON_ReplaceItemInObject(c2, "spec",
	                          cJSON_CreateString("topk:0.25,idx=gap"));
	m = verdict(f, dir);
	printf("     (%s)\n", m);
	expect(strstr(m, "idx=gap needs chunk=C") != NULL,
	       "idx=gap without runs is refused");
}

int
main(int argc, char **argv)
{
	char dir[] = "/tmp/test_ucodec.XXXXXX";

	(void)argc;
	(void)argv;
	if (mkdtemp(dir) == NULL)
		return 1;
	specs();
	bounds();
	feedback("q2");
	feedback("topk:0.05");
	feedback("topk:0.1,chunk=64,val=lut2");
	feedback("sign");
	feedback("lowrank:2");
	lowrank_plain();
	trees();
	hostile(dir);
	lut2(dir);
	gaps(dir);
	registry();
	char cmd[1100];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return failures ? 1 : 0;
}
