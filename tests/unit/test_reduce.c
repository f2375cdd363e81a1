/*
 * test_reduce.c - the reduce operations and the reducer's two paths.
 *
 * The streaming path (one accumulator, inputs folded as they come) and
 * the sliced path (every input kept, the parameter vector walked slice by
 * slice, as operations that need all inputs at once will run) must give
 * the same bits for sum and mean, at slice sizes that cut tensors
 * anywhere; the weighted mean of partial means must be the mean of all;
 * the sum must be exact where the float sum is; and the rules of the
 * update module (one kind, one base, the same tensors) must hold on both
 * paths, one message per input.  The median, the trimmed mean and
 * centred clipping are checked against references in double (a sorted
 * column; the paper's formula with the distances over the whole update),
 * at slice sizes that cut tensors, with 4 and 5 inputs of unequal
 * weights, an input a million times off, on one thread and three; a nan
 * or an inf is refused by every operation, or left out when asked, and
 * a parameter is parsed against its row.  An update counts once: a
 * second of the same content among many, or of the same worker and
 * base, is refused naming the first, unless allowed; the result lists
 * its contributors; cg-reduce --log's object says what was reduced and
 * left out.  The operation names that cg-reduce's
 * --help lists come from the table; its manual must name each one.
 * Exit 0 pass, 1 fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "cli/cli.h"
#include "exchange/reduce.h"
#include "exchange/update.h"
#include "model/model.h"

#define TEST_NAME "test_reduce"
#include "check.h"
#include "toy.h"

#define NIN 5

static float bufs[NIN][TOY_P];
static const double weights[NIN] = {8, 3, 16, 1, 5};

/* Input i of model m: bufs[i], weight weights[i] (borrowed buffers). */
static struct cg_update *
input(const struct cg_model *m, int i, enum cg_update_kind k)
{
	struct cg_file *f =
	    cg_update_new(m, k, bufs[i], weights[i], weights[i], 1.0 + i);
	char name[16];

	if (f == NULL)
		die("cg_update_new");
	snprintf(name, sizeof(name), "in%d.cgg", i);
	return cg_update_from_file(f, name);
}

/* Reduce the inputs i in [lo, hi) whose bit i of mask is set with op
 * (a spec: "trimmed-mean:0.25"); sliced with slice elements when slice >
 * 0.  The result file (caller frees). */
static struct cg_file *
reduce_some(const struct cg_model *m, const char *op, int lo, int hi,
            unsigned mask, size_t slice)
{
	struct cg_reducer r;
	struct cg_file *f;
	double param;
	const struct cg_reduce_op *o = cg_reduce_op_parse(op, &param);

	if (o == NULL)
		die(op);
	cg_reducer_init(&r, o, param);
	if (slice) {
		r.sliced = 1;
		r.slice = slice;
	}
	for (int i = lo; i < hi; i++)
		if ((mask >> i & 1) &&
		    cg_reducer_add(&r, input(m, i, CG_UPDATE_GRAD)) != 0)
			die("cg_reducer_add");
	if ((f = cg_reducer_finish(&r)) == NULL)
		die("cg_reducer_finish");
	cg_reducer_free(&r);
	return f;
}

/* Reduce inputs [lo, hi) with op; sliced with slice elements when
 * slice > 0.  The result file (caller frees). */
static struct cg_file *
reduce(const struct cg_model *m, const char *op, int lo, int hi, size_t slice)
{
	return reduce_some(m, op, lo, hi, ~0u, slice);
}

/* Whether two results hold the same manifest and the same bits. */
static int
same_file(const struct cg_file *a, const struct cg_file *b)
{
	char *ja = cJSON_PrintUnformatted(a->manifest);
	char *jb = cJSON_PrintUnformatted(b->manifest);
	int ok = ja && jb && strcmp(ja, jb) == 0 && a->ntensors == b->ntensors;

	free(ja);
	free(jb);
	for (size_t i = 0; ok && i < a->ntensors; i++)
		ok = a->tensors[i]->nbytes == b->tensors[i]->nbytes &&
		     memcmp(a->tensors[i]->data, b->tensors[i]->data,
		            a->tensors[i]->nbytes) == 0;
	return ok;
}

/* The result's tensors back into a flat buffer in m's layout. */
static void
flat(const struct cg_model *m, struct cg_file *f, float *out)
{
	/* f stays the caller's: a view of it, not taken over */
	struct cg_update u = {.file = f, .name = "result"};

	if (cg_ubind(f, &u.spec, &u.views, &u.nviews) != 0 ||
	    cg_update_get(&u, m, out) != 0)
		die("result");
	free(u.views);
}

static void
two_paths(const struct cg_model *m)
{
	static const size_t slices[] = {1, 7, 16, 1000};
	static const char *ops[] = {"sum", "mean"};

	/* numbers whose sums round, so that an order would show */
	for (int i = 0; i < NIN; i++)
		toy_fill(bufs[i], TOY_P, 70 + (uint64_t)i, 1);

	for (int o = 0; o < 2; o++) {
		struct cg_file *s = reduce(m, ops[o], 0, NIN, 0);
		int ok = 1;
		for (size_t k = 0; k < sizeof(slices) / sizeof(slices[0]);
		     k++) {
			struct cg_file *t =
			    reduce(m, ops[o], 0, NIN, slices[k]);
			ok &= same_file(s, t);
			cg_file_free(t);
		}
		char what[80];
		snprintf(what, sizeof(what),
		         "%s: streaming and sliced (1, 7, 16, 1000) agree bit "
		         "for bit",
		         ops[o]);
		expect(ok, what);
		cg_file_free(s);
	}
	/* and one input alone */
	struct cg_file *a = reduce(m, "mean", 2, 3, 0);
	struct cg_file *b = reduce(m, "mean", 2, 3, 3);
	expect(same_file(a, b), "one input: both paths agree");
	cg_file_free(a);
	cg_file_free(b);
}

static void
sums_and_means(const struct cg_model *m)
{
	float got[TOY_P], part[TOY_P];
	double worst = 0;

	for (int i = 0; i < NIN; i++)
		for (int j = 0; j < TOY_P; j++)
			bufs[i][j] = (float)((i * 7 + j * 3) % 17 - 8);

	/* sum of small integers: exact in float whatever the order */
	struct cg_file *f = reduce(m, "sum", 0, NIN, 0);
	flat(m, f, got);
	int ok = 1;
	for (int j = 0; j < TOY_P; j++) {
		float want = 0;
		for (int i = 0; i < NIN; i++)
			want += bufs[i][j];
		ok &= got[j] == want;
	}
	expect(ok && strcmp(cJSON_GetStringValue(
	                        cJSON_GetObjectItem(f->manifest, "reduce")),
	                    "sum") == 0,
	       "sum: the elementwise sum, reduce \"sum\"");
	cg_file_free(f);

	/* mean of partial means = mean of all: (0 1) (2 3 4) then both */
	struct cg_reducer r;
	struct cg_file *p1 = reduce(m, "mean", 0, 2, 0);
	struct cg_file *p2 = reduce(m, "mean", 2, NIN, 0);
	cg_reducer_init(&r, cg_reduce_op_find("mean"), 0);
	if (cg_reducer_add(&r, cg_update_from_file(p1, "p1")) != 0 ||
	    cg_reducer_add(&r, cg_update_from_file(p2, "p2")) != 0 ||
	    (f = cg_reducer_finish(&r)) == NULL)
		die("tree");
	cg_reducer_free(&r);
	struct cg_file *all = reduce(m, "mean", 0, NIN, 0);
	flat(m, all, got);
	flat(m, f, part);
	double wsum = 0;
	for (int i = 0; i < NIN; i++)
		wsum += weights[i];
	for (int j = 0; j < TOY_P; j++) {
		double want = 0;
		for (int i = 0; i < NIN; i++)
			want += weights[i] * bufs[i][j];
		want /= wsum;
		double e1 = fabs(got[j] - want), e2 = fabs(part[j] - want);
		worst = fmax(worst, fmax(e1, e2));
	}
	/*
	 * Inputs are integers in [-8, 8], weights at most 16, 33 in all: a
	 * flat mean rounds each product and running sum once (float, under
	 * 2^-24 relative of at most 33 * 8), the tree once more per level
	 * and scale; 1e-4 is over ten times that bound.
	 */
	printf("     (largest difference from the exact mean: %.3g)\n", worst);
	expect(worst < 1e-4, "mean: partial means reduce to the mean of all");
	expect(cg_json_num(f->manifest, "weight", 0) == wsum &&
	           cg_json_num(f->manifest, "samples", 0) == wsum &&
	           cg_json_u64(f->manifest, "inputs", 0) == NIN &&
	           fabs(cg_json_num(f->manifest, "loss", 0) -
	                cg_json_num(all->manifest, "loss", 0)) < 1e-12,
	       "mean of means: weight, samples, inputs and loss of all");
	cg_file_free(f);
	cg_file_free(all);
}

static void
rules(const struct cg_model *m, const struct cg_model *other)
{
	for (int sliced = 0; sliced < 2; sliced++) {
		struct cg_reducer r;
		int ok = 1;

		cg_reducer_init(&r, cg_reduce_op_find("mean"), 0);
		r.sliced = sliced;
		ok &= cg_reducer_add(&r, input(m, 0, CG_UPDATE_GRAD)) == 0;
		ok &= cg_reducer_add(&r, input(m, 1, CG_UPDATE_DELTA)) == -1 &&
		      strcmp(cg_errmsg(), "in1.cgg: a delta among grads") == 0;
		const char *stale = "in2.cgg: computed from another model "
		                    "(step 3, sha256 ";
		ok &=
		    cg_reducer_add(&r, input(other, 2, CG_UPDATE_GRAD)) == -1 &&
		    strncmp(cg_errmsg(), stale, strlen(stale)) == 0 &&
		    strstr(cg_errmsg(), "not the first input's (step 0, ");
		struct cg_update *u = input(m, 3, CG_UPDATE_GRAD);
		/* a view dropped: bound again (the file no longer frees the
		 * tensor: this does, once the reducer has let u go) */
		struct cg_tensor *dropped = u->file->tensors[3];
		u->file->ntensors = 3;
		free(u->views);
		if (cg_ubind(u->file, &u->spec, &u->views, &u->nviews) != 0)
			die("bind");
		ok &= cg_reducer_add(&r, u) == -1 &&
		      strcmp(cg_errmsg(),
		             "in3.cgg: 3 tensors, the first input has 4") == 0;
		free(dropped);
		ok &= cg_reducer_add(&r, input(m, 4, CG_UPDATE_GRAD)) == 0;
		struct cg_file *f = cg_reducer_finish(&r);
		ok &= f && cg_json_u64(f->manifest, "inputs", 0) == 2;
		cg_file_free(f);
		cg_reducer_free(&r);
		expect(ok, sliced ? "sliced: each rule broken, one message each"
		                  : "streaming: each rule broken, one message "
		                    "each");
	}
	struct cg_reducer r;
	cg_reducer_init(&r, cg_reduce_op_find("sum"), 0);
	expect(cg_reducer_finish(&r) == NULL &&
	           strcmp(cg_errmsg(), "no inputs") == 0,
	       "no inputs: no result");
	cg_reducer_free(&r);
}

/* The median of v [k] by sorting a copy in double. */
static float
ref_median(const float *v, int k)
{
	double d[NIN];

	for (int i = 0; i < k; i++)
		d[i] = v[i];
	for (int i = 1; i < k; i++)
		for (int t = i; t > 0 && d[t - 1] > d[t]; t--) {
			double x = d[t];
			d[t] = d[t - 1];
			d[t - 1] = x;
		}
	return k % 2 ? (float)d[k / 2] : (float)((d[k / 2 - 1] + d[k / 2]) / 2);
}

/*
 * sent-mean: each element's weighted mean over the inputs nonzero there,
 * against a reference in double, on inputs made sparse (each element
 * kept by some of the inputs, none, or all), sliced small and whole; on
 * dense inputs the weighted mean; a staleness rule refused.
 */
static void
sent_means(const struct cg_model *m, const struct cg_model *other)
{
	float got[TOY_P], mean[TOY_P];
	int ok = 1, none = 0, one = 0;

	for (int i = 0; i < NIN; i++) {
		toy_fill(bufs[i], TOY_P, 120 + (uint64_t)i, 1);
		for (int j = 0; j < TOY_P; j++)
			if ((((uint32_t)(j + 1) * 2654435761u ^
			      (uint32_t)(i + 1) * 40503u) >> 7) % 3 != 0)
				bufs[i][j] = 0;
	}
	for (size_t slice = 0; slice <= 7; slice += 7) {
		struct cg_file *f = reduce(m, "sent-mean", 0, NIN, slice);
		flat(m, f, got);
		for (int j = 0; j < TOY_P; j++) {
			double s = 0, ws = 0;
			int c = 0;
			for (int i = 0; i < NIN; i++)
				if (bufs[i][j] != 0) {
					s += weights[i] * (double)bufs[i][j];
					ws += weights[i];
					c++;
				}
			none += c == 0;
			one += c == 1;
			CHECK(got[j] == (ws > 0 ? (float)(s / ws) : 0.0f),
			      "sent-mean [%d]: %g, want %g of %d", j, got[j],
			      ws > 0 ? s / ws : 0, c);
			ok &= got[j] == (ws > 0 ? (float)(s / ws) : 0.0f);
		}
		cg_file_free(f);
	}
	printf("     (%d elements sent by none, %d by one)\n", none / 2, one / 2);
	expect(ok && none > 0 && one > 0,
	       "sent-mean: each element's weighted mean over the inputs that "
	       "sent it (one, several, none), in slices of 7 and whole");

	for (int i = 0; i < NIN; i++)
		toy_fill(bufs[i], TOY_P, 130 + (uint64_t)i, 1);
	struct cg_file *f = reduce(m, "sent-mean", 0, NIN, 0);
	struct cg_file *g = reduce(m, "mean", 0, NIN, 0);
	flat(m, f, got);
	flat(m, g, mean);
	cg_file_free(f);
	cg_file_free(g);
	double worst = 0;
	for (int j = 0; j < TOY_P; j++) {
		double d = fabs((double)got[j] - mean[j]) /
		           (1e-6 + 1e-6 * fabs((double)mean[j]));
		worst = d > worst ? d : worst;
	}
	printf("     (dense: largest difference %.3g of the tolerance)\n",
	       worst);
	expect(worst < 1, "sent-mean of dense inputs: the weighted mean");

	struct cg_reducer r;
	cg_reducer_init(&r, cg_reduce_op_find("sent-mean"), 0);
	struct cg_stale_weight sw;
	ok = cg_stale_weight_parse("poly:0.5", &sw) == 0 &&
	     cg_reducer_set_model(&r, other, "other", UINT64_MAX, &sw) == -1 &&
	     strstr(cg_errmsg(), "weighs no input") != NULL;
	cg_reducer_free(&r);
	expect(ok, "sent-mean: a staleness rule is refused");
}

/* median: each element's, odd and even counts, sliced small and whole;
 * an input a million times off moves nothing; a nan is refused */
static void
medians(const struct cg_model *m)
{
	float got[TOY_P], col[NIN];
	int ok = 1;

	for (int i = 0; i < NIN; i++)
		toy_fill(bufs[i], TOY_P, 90 + (uint64_t)i, 1);
	for (int k = 4; k <= NIN; k++)
		for (size_t slice = 0; slice <= 7; slice += 7) {
			struct cg_file *f = reduce(m, "median", 0, k, slice);
			flat(m, f, got);
			for (int j = 0; j < TOY_P; j++) {
				for (int i = 0; i < k; i++)
					col[i] = bufs[i][j];
				ok &= got[j] == ref_median(col, k);
			}
			cg_file_free(f);
		}
	expect(ok, "median: each element's, of 4 and of 5 inputs, in "
	           "slices of 7 and whole");

	/* one input of five poisoned: the median stays among the others */
	for (int j = 0; j < TOY_P; j++)
		bufs[3][j] *= 1e6f;
	struct cg_file *f = reduce(m, "median", 0, NIN, 0);
	flat(m, f, got);
	ok = 1;
	for (int j = 0; j < TOY_P; j++) {
		float lo = INFINITY, hi = -INFINITY;
		for (int i = 0; i < NIN; i++)
			if (i != 3) {
				lo = fminf(lo, bufs[i][j]);
				hi = fmaxf(hi, bufs[i][j]);
			}
		ok &= got[j] >= lo && got[j] <= hi;
	}
	cg_file_free(f);
	expect(ok, "median: an input a million times too large stays out");

	/* a nan: the input is refused as it comes, named */
	bufs[2][5] = NAN;
	struct cg_reducer r;
	cg_reducer_init(&r, cg_reduce_op_find("median"), 0);
	ok = 1;
	for (int i = 0; i < NIN; i++)
		ok &= cg_reducer_add(&r, input(m, i, CG_UPDATE_GRAD)) ==
		      (i == 2 ? -1 : 0);
	expect(ok &&
	           strcmp(cg_errmsg(),
	                  "in2.cgg: tensor a.w: element 5 is not finite") == 0,
	       "median: a nan is refused, the input named");
	cg_reducer_free(&r);
}

/* The mean of v [k] less its b smallest and b largest, sorted in
 * double. */
static double
ref_trimmed(const float *v, int k, int b)
{
	double d[NIN], s = 0;

	for (int i = 0; i < k; i++)
		d[i] = v[i];
	for (int i = 1; i < k; i++)
		for (int t = i; t > 0 && d[t - 1] > d[t]; t--) {
			double x = d[t];
			d[t] = d[t - 1];
			d[t - 1] = x;
		}
	for (int i = b; i < k - b; i++)
		s += d[i];
	return s / (k - 2 * b);
}

/*
 * Centred clipping of bufs[0..k) in double, as the paper writes it: the
 * centre v the coordinate median, the distances over the whole vector,
 * one step.  *nclipped: the inputs farther than tau.
 */
static void
ref_clip(double *out, int k, double tau, int *nclipped)
{
	float v[TOY_P], col[NIN];
	double c[NIN];

	for (int j = 0; j < TOY_P; j++) {
		for (int i = 0; i < k; i++)
			col[i] = bufs[i][j];
		v[j] = ref_median(col, k);
	}
	*nclipped = 0;
	for (int i = 0; i < k; i++) {
		double d2 = 0;
		for (int j = 0; j < TOY_P; j++)
			d2 += ((double)bufs[i][j] - v[j]) *
			      ((double)bufs[i][j] - v[j]);
		c[i] = sqrt(d2) > tau ? tau / sqrt(d2) : 1;
		*nclipped += sqrt(d2) > tau;
	}
	for (int j = 0; j < TOY_P; j++) {
		double s = 0;
		for (int i = 0; i < k; i++)
			s += c[i] * ((double)bufs[i][j] - v[j]);
		out[j] = v[j] + s / k;
	}
}

/* The largest |got - want| / (1e-6 + 1e-6 |want|) over TOY_P elements:
 * below 1 passes. */
static double
worst_of(const float *got, const double *want)
{
	double w = 0;

	for (int j = 0; j < TOY_P; j++)
		w = fmax(w, fabs(got[j] - want[j]) /
		                (1e-6 + 1e-6 * fabs(want[j])));
	return w;
}

/* trimmed-mean:F against a sorted reference: 4 and 5 inputs (their
 * weights differ, and must not count), F dropping none, one or two at
 * each end, slices of 7 (across views) and whole; an input a million
 * times off stays out */
static void
trimmed(const struct cg_model *m)
{
	static const double fs[] = {0, 0.2, 0.25, 0.4, 0.49};
	float got[TOY_P], col[NIN];
	double want[TOY_P], worst = 0;
	int ok = 1;

	for (int i = 0; i < NIN; i++)
		toy_fill(bufs[i], TOY_P, 110 + (uint64_t)i, 1);
	for (int k = 4; k <= NIN; k++)
		for (size_t f = 0; f < sizeof(fs) / sizeof(fs[0]); f++)
			for (size_t slice = 0; slice <= 7; slice += 7) {
				char op[64];
				int b = (int)(fs[f] * k + 1e-9);
				snprintf(op, sizeof(op), "trimmed-mean:%g",
				         fs[f]);
				struct cg_file *r = reduce(m, op, 0, k, slice);
				flat(m, r, got);
				for (int j = 0; j < TOY_P; j++) {
					for (int i = 0; i < k; i++)
						col[i] = bufs[i][j];
					want[j] = ref_trimmed(col, k, b);
				}
				worst = fmax(worst, worst_of(got, want));
				ok &= strcmp(cJSON_GetStringValue(
				                 cJSON_GetObjectItem(
				                     r->manifest, "reduce")),
				             op) == 0;
				cg_file_free(r);
			}
	printf("     (largest difference from the reference, in "
	       "1e-6 + 1e-6 |ref|: %.3g)\n",
	       worst);
	expect(worst < 1 && ok, "trimmed-mean: each element's, 4 and 5 "
	                        "inputs, F 0 to 0.49, slices of 7 and whole; "
	                        "reduce names F");

	/* F 0 is the unweighted mean, whatever the weights */
	struct cg_file *r = reduce(m, "trimmed-mean:0", 0, NIN, 0);
	flat(m, r, got);
	for (int j = 0; j < TOY_P; j++) {
		want[j] = 0;
		for (int i = 0; i < NIN; i++)
			want[j] += bufs[i][j] / (double)NIN;
	}
	expect(worst_of(got, want) < 1, "trimmed-mean:0: the unweighted mean");
	cg_file_free(r);

	/* one input of five poisoned: trimmed at 0.2 it stays out */
	for (int j = 0; j < TOY_P; j++)
		bufs[1][j] *= 1e6f;
	r = reduce(m, "trimmed-mean:0.2", 0, NIN, 0);
	flat(m, r, got);
	ok = 1;
	for (int j = 0; j < TOY_P; j++) {
		float lo = INFINITY, hi = -INFINITY;
		for (int i = 0; i < NIN; i++)
			if (i != 1) {
				lo = fminf(lo, bufs[i][j]);
				hi = fmaxf(hi, bufs[i][j]);
			}
		ok &= got[j] >= lo && got[j] <= hi;
	}
	cg_file_free(r);
	expect(ok, "trimmed-mean:0.2: an input a million times too large "
	           "stays out");
}

/* clip-mean:TAU against the paper's formula in double: a tau that clips
 * none, some and all, slices of 7 and 3 (the distances add up across
 * slices and views: a norm per slice would differ), 4 and 5 inputs; one
 * input a million times off moves it by tau / k at most */
static void
clipped(const struct cg_model *m)
{
	static const double taus[] = {1e3, 5, 0.5};
	static const size_t slices[] = {0, 7, 3};
	float got[TOY_P];
	double want[TOY_P], worst = 0;
	int some = 0, none = 0, all = 0, ok = 1;

	for (int i = 0; i < NIN; i++)
		toy_fill(bufs[i], TOY_P, 130 + (uint64_t)i, 1);
	for (int k = 4; k <= NIN; k++)
		for (size_t t = 0; t < sizeof(taus) / sizeof(taus[0]); t++) {
			int nc;
			ref_clip(want, k, taus[t], &nc);
			none += nc == 0;
			some += nc > 0 && nc < k;
			all += nc == k;
			for (size_t s = 0;
			     s < sizeof(slices) / sizeof(slices[0]); s++) {
				char op[64];
				snprintf(op, sizeof(op), "clip-mean:%g",
				         taus[t]);
				struct cg_file *r =
				    reduce(m, op, 0, k, slices[s]);
				flat(m, r, got);
				worst = fmax(worst, worst_of(got, want));
				ok &= strcmp(cJSON_GetStringValue(
				                 cJSON_GetObjectItem(
				                     r->manifest, "reduce")),
				             op) == 0;
				cg_file_free(r);
			}
		}
	printf("     (largest difference from the reference, in "
	       "1e-6 + 1e-6 |ref|: %.3g)\n",
	       worst);
	expect(worst < 1 && ok && none && some && all,
	       "clip-mean: the paper's step from the median, clipping none, "
	       "some and all, whole-update norms across slices of 7 and 3");

	/* a tau that clips none: the unweighted mean */
	struct cg_file *r = reduce(m, "clip-mean:1e3", 0, NIN, 0);
	flat(m, r, got);
	for (int j = 0; j < TOY_P; j++) {
		want[j] = 0;
		for (int i = 0; i < NIN; i++)
			want[j] += bufs[i][j] / (double)NIN;
	}
	expect(worst_of(got, want) < 1,
	       "clip-mean with a tau past every input: the unweighted mean");
	cg_file_free(r);

	/* one input of five a million times off: the result moves less
	 * than any clean input lies from it (the median moves within the
	 * others' values, the far input's step is tau / k), where the mean
	 * goes with the far input */
	float clean[TOY_P], bad[TOY_P], mean[TOY_P];
	double spread = INFINITY;
	r = reduce(m, "clip-mean:0.5", 0, NIN, 0);
	flat(m, r, clean);
	cg_file_free(r);
	for (int i = 0; i < NIN; i++) {
		double d = 0;
		for (int j = 0; j < TOY_P; j++)
			d += ((double)bufs[i][j] - clean[j]) *
			     ((double)bufs[i][j] - clean[j]);
		spread = fmin(spread, sqrt(d));
	}
	for (int j = 0; j < TOY_P; j++)
		bufs[4][j] *= 1e6f;
	r = reduce(m, "clip-mean:0.5", 0, NIN, 0);
	flat(m, r, bad);
	cg_file_free(r);
	r = reduce(m, "mean", 0, NIN, 0);
	flat(m, r, mean);
	cg_file_free(r);
	double dist = 0, mdist = 0;
	for (int j = 0; j < TOY_P; j++) {
		dist +=
		    ((double)bad[j] - clean[j]) * ((double)bad[j] - clean[j]);
		mdist +=
		    ((double)mean[j] - clean[j]) * ((double)mean[j] - clean[j]);
	}
	printf("     (clip-mean moved %.3g by the poisoned input, the mean "
	       "%.3g; the nearest clean input lies %.3g away)\n",
	       sqrt(dist), sqrt(mdist), spread);
	expect(sqrt(dist) < spread && sqrt(mdist) > 1e4,
	       "clip-mean:0.5: an input a million times too large stays out");
}

/* Every operation: a nan or an inf refused, the input and tensor named;
 * with skip_nonfinite left out, and the result that of the others, its
 * counts theirs; a result that overflows is refused */
static void
nonfinite(const struct cg_model *m)
{
	static const char *ops[] = {"mean", "sum", "median",
	                            "trimmed-mean:0.25", "clip-mean:2"};
	int refused = 1, skipped = 1, same = 1;

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (int sliced = 0; sliced < 2; sliced++) {
			for (int i = 0; i < NIN; i++)
				toy_fill(bufs[i], TOY_P, 150 + (uint64_t)i, 1);
			bufs[2][17] = o % 2 ? -INFINITY : NAN;
			for (int skip = 0; skip < 2; skip++) {
				struct cg_reducer r;
				double p;
				const struct cg_reduce_op *op =
				    cg_reduce_op_parse(ops[o], &p);
				cg_reducer_init(&r, op, p);
				r.sliced |= sliced;
				r.slice = 7;
				r.skip_nonfinite = skip;
				int *ok = skip ? &skipped : &refused;
				for (int i = 0; i < NIN; i++) {
					int rc = cg_reducer_add(
					    &r, input(m, i, CG_UPDATE_GRAD));
					if (i != 2) {
						*ok &= rc == 0;
						continue;
					}
					const char *want =
					    skip ? "in2.cgg: tensor a.b: "
					           "element 2 "
					           "is not finite; left out"
					         : "in2.cgg: tensor a.b: "
					           "element 2 "
					           "is not finite";
					int good =
					    rc == (skip ? 1 : -1) &&
					    strcmp(cg_errmsg(), want) == 0;
					*ok &= good;
				}
				/* the one left out, by name, for --log */
				*ok &= skip ? r.nleft_out == 1 &&
				                  strcmp(r.left_out[0],
				                         "in2.cgg") == 0
				            : r.nleft_out == 0;
				struct cg_file *f = cg_reducer_finish(&r);
				/* still there for a report after the end */
				*ok &= r.nleft_out == (size_t)skip;
				cg_reducer_free(&r);
				if (!skip) {
					/* the others alone reduce still */
					refused &= f != NULL;
					cg_file_free(f);
					continue;
				}
				struct cg_file *g =
				    reduce_some(m, ops[o], 0, NIN, ~(1u << 2),
				                sliced ? 7 : 0);
				skipped &= f != NULL &&
				           cg_json_u64(f->manifest, "inputs",
				                       0) == NIN - 1 &&
				           cg_json_num(f->manifest, "samples",
				                       0) == 8 + 3 + 1 + 5;
				same &= f && same_file(f, g);
				cg_file_free(f);
				cg_file_free(g);
			}
		}
	expect(refused, "a nan or an inf: refused by every operation, "
	                "input, tensor and element named");
	expect(skipped, "skip_nonfinite: the input left out, said so, noted "
	                "by name, the counts those of the others");
	expect(same, "skip_nonfinite: the result that of the other inputs, "
	             "bit for bit");

	/* finite inputs whose sum is no float (two updates: the same one
	 * twice would count once) */
	for (int i = 0; i < NIN; i++)
		for (int j = 0; j < TOY_P; j++)
			bufs[i][j] = 3e38f - (float)i * 1e37f;
	struct cg_reducer r;
	cg_reducer_init(&r, cg_reduce_op_find("sum"), 0);
	for (int i = 0; i < 2; i++)
		if (cg_reducer_add(&r, input(m, i, CG_UPDATE_GRAD)) != 0)
			die("add");
	expect(cg_reducer_finish(&r) == NULL &&
	           strcmp(cg_errmsg(),
	                  "the result's tensor a.w: element 0 is not finite "
	                  "(the inputs overflow a float)") == 0,
	       "a result that overflows is refused");
	cg_reducer_free(&r);

	/* every input left out: no result */
	toy_fill(bufs[0], TOY_P, 1, 1);
	bufs[0][0] = NAN;
	cg_reducer_init(&r, cg_reduce_op_find("mean"), 0);
	r.skip_nonfinite = 1;
	expect(cg_reducer_add(&r, input(m, 0, CG_UPDATE_GRAD)) == 1 &&
	           cg_reducer_finish(&r) == NULL &&
	           strcmp(cg_errmsg(), "no inputs: every one left out") == 0,
	       "every input left out: no result, said so");
	cg_reducer_free(&r);
}

/* Update i of many, worker w (w < 0: none) of shard identity {w, 0...}
 * and seed 3, named name. */
#define NMANY 40
static float many[NMANY][TOY_P];

static struct cg_update *
one_of_many(const struct cg_model *m, int i, int w, const char *name)
{
	struct cg_file *f = cg_update_new(m, CG_UPDATE_GRAD, many[i], 1, 1, 0);
	unsigned char shard[32] = {0};

	if (f == NULL)
		die("cg_update_new");
	shard[0] = (unsigned char)w;
	if (w >= 0 && cg_uident_record(f->manifest, shard, 3) != 0)
		die("cg_uident_record");
	return cg_update_from_file(f, name);
}

/* every update counts once: by content among many (the table grows),
 * by worker and base; allowed, taken; the result's contributors */
static void
duplicates(const struct cg_model *m)
{
	struct cg_reducer r;
	struct cg_file *f;
	char name[16];
	int ok = 1;

	for (int i = 0; i < NMANY; i++)
		toy_fill(many[i], TOY_P, 900 + (uint64_t)i, 1);
	cg_reducer_init(&r, cg_reduce_op_find("mean"), 0);
	for (int i = 0; i < NMANY; i++) {
		snprintf(name, sizeof(name), "u%d", i);
		ok &= cg_reducer_add(&r, one_of_many(m, i, -1, name)) == 0;
	}
	ok &=
	    cg_reducer_add(&r, one_of_many(m, 17, -1, "again")) == -1 &&
	    strncmp(cg_errmsg(),
	            "again: the same update as u17 (tensors sha256 ", 46) == 0;
	r.allow_duplicates = 1;
	ok &= cg_reducer_add(&r, one_of_many(m, 17, -1, "again")) == 0;
	f = cg_reducer_finish(&r);
	ok &= f && cg_json_u64(f->manifest, "inputs", 0) == NMANY + 1 &&
	      !cJSON_GetObjectItemCaseSensitive(f->manifest, "contributors");
	cg_file_free(f);
	cg_reducer_free(&r);
	expect(ok, "the same content among 40 inputs: refused, naming the "
	           "first; allowed, taken");

	/* workers 1 and 2, then worker 1 again with other numbers */
	ok = 1;
	cg_reducer_init(&r, cg_reduce_op_find("median"), 0);
	ok &= cg_reducer_add(&r, one_of_many(m, 0, 2, "a")) == 0;
	ok &= cg_reducer_add(&r, one_of_many(m, 1, 1, "b")) == 0;
	ok &= cg_reducer_add(&r, one_of_many(m, 2, 1, "c")) == -1 &&
	      strcmp(cg_errmsg(), "c: the same worker (shard 010000000000..., "
	                          "seed 3) and base (step 0) as b") == 0;
	f = cg_reducer_finish(&r);
	const cJSON *c =
	    f ? cJSON_GetObjectItemCaseSensitive(f->manifest, "contributors")
	      : NULL;
	const cJSON *w0 = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetArrayItem(c, 0), "worker");
	ok &= cJSON_GetArraySize(c) == 2 && cJSON_IsString(w0) &&
	      strncmp(w0->valuestring, "shard:01", 8) == 0 &&
	      !cJSON_GetObjectItemCaseSensitive(f->manifest, "worker");
	cg_file_free(f);
	cg_reducer_free(&r);
	expect(ok, "the same worker and base: refused, naming the first; "
	           "the result's contributors sorted, no worker of its own");
}

/* The same bits on one thread and on three (clip-mean's norms are
 * summed in a fixed order) */
static void
threads(const struct cg_model *m)
{
	static const char *ops[] = {"median", "trimmed-mean:0.25",
	                            "clip-mean:2"};
	int ok = 1;

	for (int i = 0; i < NIN; i++)
		toy_fill(bufs[i], TOY_P, 170 + (uint64_t)i, 1);
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		cg_set_threads(1);
		struct cg_file *a = reduce(m, ops[o], 0, NIN, 3);
		cg_set_threads(3);
		struct cg_file *b = reduce(m, ops[o], 0, NIN, 3);
		ok &= same_file(a, b);
		cg_file_free(a);
		cg_file_free(b);
	}
	cg_set_threads(0);
	expect(ok, "median, trimmed-mean, clip-mean: one thread and three "
	           "agree bit for bit");
}

/* A parameter is the row's: wanted, refused where the row takes none,
 * checked against the row's range, one message each */
static void
params(void)
{
	static const struct {
		const char *spec, *err; /* err NULL: accepted */
		double want;
	} cases[] = {
	    {"mean", NULL, 0},
	    {"trimmed-mean:0.25", NULL, 0.25},
	    {"trimmed-mean:0", NULL, 0},
	    {"clip-mean:1e-3", NULL, 1e-3},
	    {"trimmed-mean",
	     "trimmed-mean: wants a parameter "
	     "(trimmed-mean:F)",
	     0},
	    {"trimmed-mean:0.5",
	     "trimmed-mean: F '0.5' is not a number in "
	     "[0, 0.5)",
	     0},
	    {"trimmed-mean:-0.1",
	     "trimmed-mean: F '-0.1' is not a number in "
	     "[0, 0.5)",
	     0},
	    {"trimmed-mean:",
	     "trimmed-mean: F '' is not a number in "
	     "[0, 0.5)",
	     0},
	    {"trimmed-mean:0.1x",
	     "trimmed-mean: F '0.1x' is not a number in "
	     "[0, 0.5)",
	     0},
	    {"clip-mean:0", "clip-mean: TAU '0' is not a number in (0, inf)",
	     0},
	    {"clip-mean:inf",
	     "clip-mean: TAU 'inf' is not a number in "
	     "(0, inf)",
	     0},
	    {"clip-mean:nan",
	     "clip-mean: TAU 'nan' is not a number in "
	     "(0, inf)",
	     0},
	    {"median:3", "median: takes no parameter", 0},
	    {"mean:", "mean: takes no parameter", 0},
	    {"clip:1",
	     "unknown operation 'clip' (mean, sum, median, "
	     "trimmed-mean, clip-mean, sent-mean)",
	     0},
	};
	int ok = 1;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double p = -1;
		const struct cg_reduce_op *op =
		    cg_reduce_op_parse(cases[i].spec, &p);
		if (cases[i].err == NULL)
			CHECK(op && p == cases[i].want, "%s: %s", cases[i].spec,
			      op ? "wrong parameter" : cg_errmsg());
		else
			CHECK(op == NULL &&
			          strcmp(cg_errmsg(), cases[i].err) == 0,
			      "%s: '%s'", cases[i].spec, op ? "" : cg_errmsg());
		ok &= cases[i].err
		          ? op == NULL && strcmp(cg_errmsg(), cases[i].err) == 0
		          : op && p == cases[i].want;
	}
	expect(ok, "--op NAME:PARAM: the row's parameter wanted, its range "
	           "checked, one message each");
}

/* cg-reduce --log's object: the counts, the times given, the inputs
 * left out by name, the result's staleness as its manifest has it. */
static void
log_line(void)
{
	struct cg_reducer r = {.inputs = 3, .samples = 96, .fold_seconds = 0.5};
	char *left[] = {"b.cgu", "c.cgu"};
	struct cg_file f = {0};
	cJSON *j;
	char *s;

	f.manifest = cJSON_Parse("{\"kind\":\"delta\"}");
	j = cg_reducer_log_json(&r, &f, 2);
	s = j ? cJSON_PrintUnformatted(j) : NULL;
	expect(s && strcmp(s, "{\"inputs\":3,\"samples\":96,\"seconds\":2,"
	                      "\"fold_seconds\":0.5,\"skipped\":[]}") == 0,
	       "log: the counts and times, none skipped, no staleness");
	free(s);
	cJSON_Delete(j);
	cJSON_Delete(f.manifest);
	r.left_out = left;
	r.nleft_out = 2;
	f.manifest = cJSON_Parse("{\"staleness\":[{\"input\":\"a.cgu\","
	                         "\"staleness\":1}]}");
	j = cg_reducer_log_json(&r, &f, 2);
	cJSON_Delete(f.manifest); /* the log holds a copy */
	s = j ? cJSON_PrintUnformatted(j) : NULL;
	expect(s && strcmp(s, "{\"inputs\":3,\"samples\":96,\"seconds\":2,"
	                      "\"fold_seconds\":0.5,\"skipped\":[\"b.cgu\","
	                      "\"c.cgu\"],\"staleness\":[{\"input\":"
	                      "\"a.cgu\",\"staleness\":1}]}") == 0,
	       "log: the inputs left out by name, the result's staleness");
	free(s);
	cJSON_Delete(j);
}

static void
table(void)
{
	const struct cg_reduce_op *op;
	int n = 0, streams = 1;

	for (int i = 0; (op = cg_reduce_op_at(i)) != NULL; i++) {
		n++;
		streams &= !op->streams || (op->init && op->add);
		streams &= op->streams || op->slice;
		streams &= op->param == NULL || op->pmin < op->pmax;
		expect(cg_reduce_op_find(op->name) == op, op->name);
	}
	expect(n >= 2 && n == cg_reduce_op_count() &&
	           strcmp(cg_reduce_op_at(0)->name, "mean") == 0 && streams,
	       "the table: mean first, every row callable");
	expect(cg_reduce_op_find("mode") == NULL &&
	           strcmp(cg_errmsg(),
	                  "unknown operation 'mode' (mean, sum, median, "
	                  "trimmed-mean, clip-mean, sent-mean)") == 0,
	       "an unknown operation: the message lists the table");

	/* the manual names every operation of the table */
	const char *src = getenv("CG_SRCDIR");
	char path[4096];
	if (src == NULL)
		return;
	snprintf(path, sizeof(path), "%s/man/cg-reduce.1", src);
	FILE *fp = fopen(path, "r");
	static char text[1 << 16];
	size_t len = fp ? fread(text, 1, sizeof(text) - 1, fp) : 0;
	if (fp)
		fclose(fp);
	text[len] = '\0';
	int ok = len > 0;
	for (int i = 0; (op = cg_reduce_op_at(i)) != NULL; i++) {
		/* ".It Cm median", or ".It Cm trimmed-mean Ns \&: Ns Ar f"
		 * for a row that takes a parameter */
		char want[96];
		snprintf(want, sizeof(want), ".It Cm %s%s\n", op->name,
		         op->param ? " Ns \\&: Ns Ar " : "");
		if (op->param)
			want[strlen(want) - 1] = '\0';
		ok &= strstr(text, want) != NULL;
	}
	expect(ok, "cg-reduce(1) has an entry for each operation");
}

/* An operation joins the table at run time (cg_reduce_op_register),
 * after the built-in ones, unless it is incomplete or its name taken. */
static void
registry(void)
{
	static struct cg_reduce_op r;
	const int n = cg_reduce_op_count();
	int ok = 1;

	r = *cg_reduce_op_find("sum");
	ok &= cg_reduce_op_register(&r) == -1 &&
	      strcmp(cg_errmsg(), "operation sum: registered already") == 0;
	r.name = "sum:2";
	ok &= cg_reduce_op_register(&r) == -1 &&
	      strstr(cg_errmsg(), "no ':'") != NULL;
	r.name = "sum-again";
	r.add = NULL;
	ok &=
	    cg_reduce_op_register(&r) == -1 &&
	    strstr(cg_errmsg(), "operation sum-again: help, and init") != NULL;
	expect(ok && cg_reduce_op_count() == n,
	       "register: a name taken, a bad name, a row incomplete: refused");

	r.add = cg_reduce_op_find("sum")->add;
	double p = 1;
	ok = cg_reduce_op_register(&r) == 0 && cg_reduce_op_count() == n + 1 &&
	     cg_reduce_op_at(n) == &r &&
	     cg_reduce_op_parse("sum-again", &p) == &r && p == 0 &&
	     cg_reduce_op_find("mode") == NULL &&
	     strcmp(cg_errmsg(), "unknown operation 'mode' (mean, sum, median, "
	                         "trimmed-mean, clip-mean, sent-mean, "
	                         "sum-again)") == 0;
	expect(ok, "register: a row joins after the built-in ones, found by "
	           "its name");
}

int
main(void)
{
	struct cg_model *m = toy_model(1, 0, 1, 0);
	struct cg_model *other = toy_model(2, 3, 1, 0);

	two_paths(m);
	sums_and_means(m);
	rules(m, other);
	medians(m);
	trimmed(m);
	clipped(m);
	sent_means(m, other);
	nonfinite(m);
	duplicates(m);
	threads(m);
	params();
	table();
	log_line();
	registry();
	cg_model_free(m);
	cg_model_free(other);
	return failures ? 1 : 0;
}
