/*
 * test_secagg.c - secure aggregation: pairwise masks that cancel, the
 * masked mean against the true one, and what the reducer refuses.
 *
 * Keys are made fresh (OpenSSL's randomness) on every run; nothing here
 * depends on which keys come out.  Checked: the masks of 2, 3 and 5
 * peers sum to zero modulo 2^64 at every element, whatever pieces a
 * vector is masked in; the reduced mean of masked updates lies within
 * the stated bound (2^-(F+1) from the fixed point, plus f32 rounding) of
 * the exact weighted mean and of cg-reduce's plain mean, at F = 32 and
 * F = 12, the largest difference printed; one masked update's words
 * correlate with its values below 0.01 (over 2^20 values); a missing
 * peer, a second update of one key, another round, an update masked
 * with another key or base (the masks do not cancel), a value past the
 * clip, a weight that is not whole, the median and a plain input among
 * masked ones are refused, each with its message; a hostile "mask"
 * object or tensor is refused by the reader.  Shamir's sharing over
 * GF(2^61 - 1): its product against a 128-bit remainder, any t of n
 * shares giving the secret back, t - 1 of them (with a wrong one) not,
 * and bad points refused; in a round of a threshold, a lost worker's
 * update stripped of every pairwise mask (what the survivors reveal)
 * still correlates with its values below 0.01: its self-mask stays on.
 * Exit 0 pass, 1 fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "core/shamir.h"
#include "exchange/reduce.h"
#include "exchange/secagg.h"
#include "exchange/update.h"
#include "file/sign.h"
#include "model/model.h"

#define TEST_NAME "test_secagg"
#include "check.h"
#include "toy.h"

#define MAXW 5

static char dir[] = "/tmp/test_secagg.XXXXXX";

static const char *
tmp(const char *name)
{
	static char buf[8][256];
	static int k;
	char *p = buf[k++ % 8];

	snprintf(p, 256, "%s/%s", dir, name);
	return p;
}

/* Keys k0..k(n-1) (X25519) and the peer list "peersN" of all of them;
 * keys already made are kept.  The list's path. */
static const char *
make_peers(int n)
{
	char name[32], list[32];
	FILE *out;

	snprintf(list, sizeof(list), "peers%d", n);
	if ((out = fopen(tmp(list), "w")) == NULL)
		die("fopen");
	for (int i = 0; i < n; i++) {
		char line[256];
		FILE *in;
		snprintf(name, sizeof(name), "k%d", i);
		if (access(tmp(name), F_OK) != 0 &&
		    cg_key_generate_alg(tmp(name), name, 0, CG_KEY_X25519) != 0)
			die("cg_key_generate_alg");
		snprintf(name, sizeof(name), "k%d.pub", i);
		if ((in = fopen(tmp(name), "r")) == NULL ||
		    fgets(line, sizeof(line), in) == NULL)
			die("read .pub");
		fclose(in);
		fputs(line, out);
	}
	fclose(out);
	return tmp(list);
}

static void
init_mask(struct cg_mask *m, int i, const char *peers, const char *round, int F,
          const unsigned char base[32])
{
	char name[16];

	snprintf(name, sizeof(name), "k%d", i);
	if (cg_mask_init(m, tmp(name), peers, round, F) != 0 ||
	    cg_mask_round(m, base) != 0)
		die("cg_mask_init");
}

/* ------------------------------------------------------------ cancel */

/* The masks of n peers over P elements sum to 0 at every element, when
 * each peer masks the vector whole and in pieces cut at odd places. */
static void
cancel(int n)
{
	const uint64_t P = 1000;
	const char *peers = make_peers(n);
	unsigned char base[32];
	uint64_t *sum = xcalloc(P, 8), *w = xcalloc(P, 8),
	         *piece = xcalloc(P, 8);
	int nonzero = 0, pieces_same = 1, zero_masks = 0;
	char what[96];

	cg_sha256(base, "a base", 6);
	for (int i = 0; i < n; i++) {
		struct cg_mask m;
		init_mask(&m, i, peers, "", CG_MASK_FRAC_BITS, base);
		if (cg_mask_words(&m, 0, P, w) != 0 ||
		    cg_mask_words(&m, 0, 13, piece) != 0 ||
		    cg_mask_words(&m, 13, 500, piece + 13) != 0 ||
		    cg_mask_words(&m, 513, P - 513, piece + 513) != 0)
			die("cg_mask_words");
		pieces_same &= memcmp(w, piece, P * 8) == 0;
		for (uint64_t p = 0; p < P; p++) {
			sum[p] += w[p];
			zero_masks += w[p] == 0;
		}
		cg_mask_free(&m);
	}
	for (uint64_t p = 0; p < P; p++)
		nonzero += sum[p] != 0;
	snprintf(what, sizeof(what),
	         "%d peers: the masks sum to 0 mod 2^64 at all %d elements", n,
	         (int)P);
	expect(nonzero == 0 && zero_masks == 0, what);
	snprintf(what, sizeof(what),
	         "%d peers: masked in pieces, the same words", n);
	expect(pieces_same, what);
	free(sum);
	free(w);
	free(piece);
}

/* ------------------------------------------------------ masked mean */

static float xs[MAXW][TOY_P];
static const double ws[MAXW] = {16, 3, 250, 1, 37};

/* Worker i's update of m, masked under mk. */
static struct cg_update *
masked_input(const struct cg_model *m, struct cg_mask *mk, int i,
             const char *name)
{
	struct cg_uspec s;
	struct cg_uenc e = {0};
	struct cg_file *f;

	cg_uspec_parse("masked", &s);
	e.mask = mk;
	e.mask_weight = (uint64_t)ws[i];
	f = cg_update_encode(m, NULL, CG_UPDATE_DELTA, xs[i], ws[i], ws[i], 1.0,
	                     &s, &e, NULL, NULL);
	if (f == NULL)
		die("cg_update_encode");
	return cg_update_from_file(f, name);
}

static struct cg_update *
plain_input(const struct cg_model *m, int i)
{
	struct cg_file *f =
	    cg_update_new(m, CG_UPDATE_DELTA, xs[i], ws[i], ws[i], 1.0);

	if (f == NULL)
		die("cg_update_new");
	return cg_update_from_file(f, "plain");
}

/* The masked mean of n workers at F fraction bits against the exact
 * weighted mean and the plain reducer's, as bounds. */
static void
mean_bound(int n, int F)
{
	struct cg_model *m = toy_model(3, 0, 1, 0);
	const char *peers = make_peers(n);
	unsigned char base[32];
	struct cg_reducer r, rp;
	struct cg_file *g, *gp;
	double worst_exact = 0, worst_plain = 0, maxdiff = 0;
	int nview = 0;
	char what[160];

	cg_model_digest(m, base);
	cg_reducer_init(&r, cg_reduce_op_find("mean"), 0);
	cg_reducer_init(&rp, cg_reduce_op_find("mean"), 0);
	for (int i = 0; i < n; i++) {
		struct cg_mask mk;
		init_mask(&mk, i, peers, "r1", F, base);
		if (cg_reducer_add(&r, masked_input(m, &mk, i, "masked")) !=
		        0 ||
		    cg_reducer_add(&rp, plain_input(m, i)) != 0)
			die("cg_reducer_add");
		cg_mask_free(&mk);
	}
	if ((g = cg_reducer_finish(&r)) == NULL ||
	    (gp = cg_reducer_finish(&rp)) == NULL)
		die("cg_reducer_finish");
	double W = 0;
	for (int i = 0; i < n; i++)
		W += ws[i];
	for (size_t t = 0; t < g->ntensors; t++) {
		const float *a = g->tensors[t]->data, *b = gp->tensors[t]->data;
		const uint64_t off = m->views[t].off;
		nview += g->tensors[t]->dtype == CG_F32;
		for (uint64_t j = 0; j < g->tensors[t]->nelem; j++) {
			double exact = 0, mag = 0;
			for (int i = 0; i < n; i++) {
				exact += ws[i] * xs[i][off + j];
				mag += ws[i] * fabs(xs[i][off + j]);
			}
			exact /= W;
			mag /= W;
			/* the fixed point's rounding, then f32's */
			double fixed = ldexp(1, -(F + 1));
			double bound =
			    (fixed + fabs(exact) * ldexp(1, -24)) * (1 + 1e-9);
			/* the plain mean's own f32 fold: n + 2 roundings */
			double pbound = bound + (n + 2) * mag * ldexp(1, -24);
			double d = fabs(a[j] - exact), dp = fabs(a[j] - b[j]);
			if (d / bound > worst_exact)
				worst_exact = d / bound;
			if (dp / pbound > worst_plain)
				worst_plain = dp / pbound;
			if (dp > maxdiff)
				maxdiff = dp;
		}
	}
	snprintf(what, sizeof(what),
	         "%d peers, F %d: masked mean within 2^-(F+1) + f32 of the "
	         "exact mean (worst %.3f of the bound)",
	         n, F, worst_exact);
	expect(worst_exact <= 1 && nview == 4, what);
	snprintf(what, sizeof(what),
	         "%d peers, F %d: and of the plain reduction's (largest "
	         "difference %.3g, %.3f of the bound)",
	         n, F, maxdiff, worst_plain);
	expect(worst_plain <= 1, what);
	expect(
	    cg_json_num(g->manifest, "weight", 0) == W &&
	        cg_json_num(g->manifest, "masked", 0) == n &&
	        cJSON_GetObjectItemCaseSensitive(g->manifest, "mask") == NULL &&
	        cJSON_GetObjectItemCaseSensitive(g->manifest, "codec") == NULL,
	    "the result: its total weight, \"masked\" peers, plain f32");
	cg_file_free(g);
	cg_file_free(gp);
	cg_model_free(m);
}

/* ------------------------------------------------------- correlation */

/* Pearson's correlation of a [n] and b [n]. */
static double
corr(const double *a, const double *b, size_t n)
{
	double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;

	for (size_t i = 0; i < n; i++) {
		ma += a[i];
		mb += b[i];
	}
	ma /= (double)n;
	mb /= (double)n;
	for (size_t i = 0; i < n; i++) {
		sab += (a[i] - ma) * (b[i] - mb);
		saa += (a[i] - ma) * (a[i] - ma);
		sbb += (b[i] - mb) * (b[i] - mb);
	}
	return sab / sqrt(saa * sbb);
}

static void
correlation(void)
{
	const size_t P = (size_t)1 << 20;
	const char *peers = make_peers(3);
	float *x = xcalloc(P, sizeof(float));
	uint64_t *y = xcalloc(P, 8);
	double *a = xcalloc(P, sizeof(double)), *b = xcalloc(P, sizeof(double));
	double *c = xcalloc(P, sizeof(double));
	unsigned char base[32];
	struct cg_mask m;
	struct cg_rng r;
	char what[128];

	cg_rng_seed(&r, 7);
	for (size_t i = 0; i < P; i++)
		x[i] = 0.01f * cg_rng_normal(&r) + (i % 1000 < 10 ? 3 : 0);
	cg_sha256(base, "corr", 4);
	init_mask(&m, 1, peers, "", CG_MASK_FRAC_BITS, base);
	if (cg_mask_encode(&m, 40, x, 0, P, y) != 0)
		die("cg_mask_encode");
	for (size_t i = 0; i < P; i++) {
		a[i] = x[i];
		b[i] = (double)(int64_t)y[i]; /* as signed words */
		c[i] = (double)y[i];          /* as unsigned ones */
	}
	double rs = corr(a, b, P), ru = corr(a, c, P);
	snprintf(what, sizeof(what),
	         "one masked update: correlation with its values %.5f "
	         "(signed), %.5f (unsigned), below 0.01",
	         rs, ru);
	expect(fabs(rs) < 0.01 && fabs(ru) < 0.01, what);
	cg_mask_free(&m);
	free(x);
	free(y);
	free(a);
	free(b);
	free(c);
}

/* ------------------------------------------------------------- shamir */

static void
shamir(void)
{
	const uint64_t p = CG_SHAMIR_P;
	struct cg_rng r;
	int mul_ok = 1, any_t = 1, less_not = 1;
	char what[128];

	cg_rng_seed(&r, 3);
	for (int i = 0; i < 100000; i++) {
		uint64_t a = cg_rng_u64(&r) % p, b = cg_rng_u64(&r) % p;
		if (i == 0)
			a = b = p - 1;
		mul_ok &= cg_shamir_mul(a, b) ==
		          (uint64_t)((unsigned __int128)a * b % p);
	}
	expect(mul_ok, "shamir: a b mod 2^61 - 1 as a 128-bit remainder");
	for (int t = 2; t <= 7; t++) {
		const int n = 9;
		uint64_t coef[7], px[9], py[9], x[7], y[7], s;
		for (int k = 0; k < t; k++)
			coef[k] = cg_rng_u64(&r) % p;
		for (int q = 0; q < n; q++) {
			px[q] = (uint64_t)q + 1;
			py[q] = cg_shamir_eval(coef, t, px[q]);
		}
		for (int trial = 0; trial < 20; trial++) {
			/* t different shares at random */
			int used[9] = {0};
			for (int k = 0; k < t; k++) {
				int q;
				do
					q = (int)(cg_rng_u64(&r) % n);
				while (used[q]);
				used[q] = 1;
				x[k] = px[q];
				y[k] = py[q];
			}
			any_t &=
			    cg_shamir_combine(x, y, t, &s) == 0 && s == coef[0];
			/* t - 1 of them and a made-up one */
			y[t - 1] = (y[t - 1] + 1) % p;
			less_not &=
			    cg_shamir_combine(x, y, t, &s) == 0 && s != coef[0];
		}
	}
	snprintf(what, sizeof(what),
	         "shamir: any t of 9 shares give the secret (t = 2..7; "
	         "combined, and by weights), one share off does not");
	expect(any_t && less_not, what);
	{
		uint64_t x[3] = {1, 2, 2}, y[3] = {5, 6, 7}, s;
		int dup = cg_shamir_combine(x, y, 3, &s);
		x[2] = 0;
		int zero = cg_shamir_combine(x, y, 3, &s);
		x[2] = 3;
		y[1] = p;
		int big = cg_shamir_combine(x, y, 3, &s);
		expect(dup == -1 && zero == -1 && big == -1,
		       "shamir: an x twice, an x of 0, a y of p refused");
	}
}

/* A lost worker's masked words less every pairwise mask: its values
 * under its self-mask, uncorrelated with them. */
static void
late_update(void)
{
	const size_t P = (size_t)1 << 18;
	const char *peers = make_peers(5);
	float *x = xcalloc(P, sizeof(float));
	uint64_t *y = xcalloc(P, 8), *pairs = xcalloc(P, 8);
	double *a = xcalloc(P, sizeof(double)), *b = xcalloc(P, sizeof(double));
	unsigned char base[32];
	struct cg_mask m, plain;
	struct cg_rng r;
	char what[128];

	cg_rng_seed(&r, 9);
	for (size_t i = 0; i < P; i++)
		x[i] = 0.01f * cg_rng_normal(&r) + (i % 1000 < 10 ? 3 : 0);
	cg_sha256(base, "late", 4);
	if (cg_mask_init(&m, tmp("k2"), peers, "", CG_MASK_FRAC_BITS) != 0)
		die("cg_mask_init");
	m.threshold = 3;
	if (cg_mask_round(&m, base) != 0 ||
	    cg_mask_encode(&m, 1, x, 0, P, y) != 0)
		die("cg_mask_encode");
	/* the same key and round without a threshold: the pairwise masks,
	 * every one of which the survivors' reveals would give away */
	init_mask(&plain, 2, peers, "", CG_MASK_FRAC_BITS, base);
	if (cg_mask_words(&plain, 0, P, pairs) != 0)
		die("cg_mask_words");
	for (size_t i = 0; i < P; i++) {
		a[i] = x[i];
		b[i] = (double)(int64_t)(y[i] - pairs[i]);
	}
	double rs = corr(a, b, P);
	snprintf(what, sizeof(what),
	         "a lost worker's update less its pairwise masks: correlation "
	         "with its values %.5f, below 0.01",
	         rs);
	expect(fabs(rs) < 0.01, what);
	cg_mask_free(&m);
	cg_mask_free(&plain);
	free(x);
	free(y);
	free(pairs);
	free(a);
	free(b);
}

/* ----------------------------------------------------------- refusals */

static int
contains(const char *needle)
{
	const char *e = cg_errmsg();
	int ok = strstr(e, needle) != NULL;

	printf("     (%s)\n", e);
	return ok;
}

/* Masked inputs of workers who[0..k) of n, under round text rounds[i]
 * and base bases[i] (NULL: the model's), keys keys[i] (NULL: k<i>),
 * reduced; the finish's result or NULL. */
static struct cg_file *
round_of(const struct cg_model *m, int n, const int *who, int k,
         const char *const *rounds, const char *peers_of_1, int *add_failed)
{
	const char *peers = make_peers(n);
	unsigned char base[32];
	struct cg_reducer r;
	struct cg_file *g;

	cg_model_digest(m, base);
	*add_failed = 0;
	cg_reducer_init(&r, cg_reduce_op_find("mean"), 0);
	for (int i = 0; i < k; i++) {
		struct cg_mask mk;
		struct cg_update *u;
		const char *pl = who[i] == 1 && peers_of_1 ? peers_of_1 : peers;
		init_mask(&mk, who[i], pl, rounds ? rounds[i] : "",
		          CG_MASK_FRAC_BITS, base);
		u = masked_input(m, &mk, who[i], "in");
		cg_mask_free(&mk);
		if (u == NULL)
			die("masked_input");
		if (who[i] == 1 && peers_of_1) {
			/* a liar: its manifest names the round's peers */
			cJSON *mo = cJSON_GetObjectItemCaseSensitive(
			    u->file->manifest, "mask");
			struct cg_mask good;
			init_mask(&good, 0, peers, "", CG_MASK_FRAC_BITS, base);
			cJSON *gm = cg_mask_manifest(&good);
			cJSON_ReplaceItemInObjectCaseSensitive(
			    mo, "peers",
			    cJSON_Duplicate(
			        cJSON_GetObjectItemCaseSensitive(gm, "peers"),
			        1));
			cJSON_Delete(gm);
			cg_mask_free(&good);
			cg_mask_info_free(u->mask);
			u->mask =
			    cg_mask_info_read(u->file->manifest, u->weight);
		}
		if (cg_reducer_add(&r, u) != 0) {
			*add_failed = 1;
			break;
		}
	}
	g = *add_failed ? NULL : cg_reducer_finish(&r);
	cg_reducer_free(&r);
	return g;
}

static void
refusals(void)
{
	struct cg_model *m = toy_model(5, 0, 1, 0);
	const int two[] = {0, 2}, three[] = {0, 1, 2}, twice[] = {0, 1, 1};
	const char *const rounds[] = {"a", "b", "a"};
	struct cg_file *g;
	int failed;

	g = round_of(m, 3, two, 2, NULL, NULL, &failed);
	expect(g == NULL && !failed && contains("1 of 3 peers missing") &&
	           contains("every peer"),
	       "a missing peer: refused, the peer named");
	g = round_of(m, 3, twice, 3, NULL, NULL, &failed);
	expect(g == NULL && failed && contains("a second masked update"),
	       "one key twice: refused");
	g = round_of(m, 3, three, 3, rounds, NULL, &failed);
	expect(g == NULL && failed && contains("round 'b'"),
	       "another round text: refused");

	/* worker 1 masked among another key for peer 2 but says it did
	 * not: every manifest agrees, and the sum shows it */
	if (cg_key_generate_alg(tmp("k2x"), "k2x", 0, CG_KEY_X25519) != 0)
		die("keygen");
	FILE *fp = fopen(tmp("peers-x"), "w");
	char line[3][256];
	for (int i = 0; i < 3; i++) {
		static const char *const names[] = {"k0.pub", "k1.pub",
		                                    "k2x.pub"};
		FILE *in = fopen(tmp(names[i]), "r");
		if (in == NULL || fgets(line[i], 256, in) == NULL)
			die("read .pub");
		fclose(in);
		fputs(line[i], fp);
	}
	fclose(fp);
	char px[256]; /* tmp's buffers turn over: a copy */
	snprintf(px, sizeof(px), "%s", tmp("peers-x"));
	g = round_of(m, 3, three, 3, NULL, px, &failed);
	if (g)
		printf("     (accepted)\n");
	expect(g == NULL && !failed && contains("do not cancel"),
	       "masked with another peer's key: the masks do not cancel, "
	       "refused");

	/* a plain input among masked ones, and the median */
	unsigned char base[32];
	struct cg_reducer r;
	struct cg_mask mk;
	const char *peers = make_peers(3);
	cg_model_digest(m, base);
	init_mask(&mk, 0, peers, "", CG_MASK_FRAC_BITS, base);
	cg_reducer_init(&r, cg_reduce_op_find("mean"), 0);
	if (cg_reducer_add(&r, masked_input(m, &mk, 0, "m0")) != 0)
		die("add");
	expect(cg_reducer_add(&r, plain_input(m, 1)) == -1 &&
	           contains("a plain input among masked ones"),
	       "a plain input among masked ones: refused");
	cg_reducer_free(&r);
	cg_reducer_init(&r, cg_reduce_op_find("median"), 0);
	expect(cg_reducer_add(&r, masked_input(m, &mk, 0, "m0")) == -1 &&
	           contains("--op median"),
	       "the median of masked updates: refused");
	cg_reducer_free(&r);

	/* no reader takes its words for values */
	struct cg_update *u = masked_input(m, &mk, 0, "m0");
	float buf[TOY_P], v[3];
	expect(cg_update_get(u, m, buf) == -1 && contains("masked"),
	       "cg_update_get (cg-apply, cg-prune) refuses a masked update");
	cg_update_decode(u, 0, 0, 3, v);
	expect(isnan(v[0]) && isnan(v[2]) && cg_update_view_f32(u, 0) == NULL,
	       "decoding a masked view gives NaN, never numbers");

	/* the worker's side */
	float big[TOY_P] = {0};
	uint64_t y[TOY_P], wt;
	big[7] = 300;
	expect(cg_mask_encode(&mk, 1, big, 0, TOY_P, y) == -1 &&
	           contains("element 7") && contains("+-256"),
	       "a value past the clip: refused");
	big[7] = NAN;
	expect(cg_mask_encode(&mk, 1, big, 0, TOY_P, y) == -1 &&
	           contains("not finite"),
	       "a NaN: refused");
	expect(cg_mask_check_weight(2.5, 32, &wt) == -1 &&
	           contains("whole number") &&
	           cg_mask_check_weight(1e9, 32, &wt) == -1 &&
	           contains("no room") &&
	           cg_mask_check_weight(1e9, 16, &wt) == 0 && wt == 1000000000,
	       "a weight not whole, or too large for F: refused");
	struct cg_mask bad;
	expect(cg_mask_init(&bad, tmp("k2x"), peers, "", 32) == -1 &&
	           contains("not among the peers"),
	       "a key not among the peers: refused");
	expect(cg_mask_init(&bad, tmp("k0"), tmp("k0.pub"), "", 32) == -1 &&
	           contains("needs 2"),
	       "a round of one peer: refused");
	expect(cg_mask_init(&bad, tmp("k0"), peers, "", 60) == -1,
	       "fraction bits past 48: refused");

	/* a hostile "mask" object, and a hostile tensor */
	static const char *const evil[][2] = {
	    {"scheme", "\"rot13\""},
	    {"frac_bits", "99"},
	    {"clip", "1e30"},
	    {"key", "\"00\""},
	    {"round", "7"},
	    {"peers", "[]"},
	    /* out of order; in order, but its key not among them */
	    {"peers", "[\"%s\",\"%s\"]"},
	    {"peers", "[\"%s\",\"%s\"]"},
	};
	int all = 1;
	for (size_t i = 0; i < sizeof(evil) / sizeof(evil[0]); i++) {
		struct cg_update *w = masked_input(m, &mk, 0, "m0");
		cJSON *mo =
		    cJSON_GetObjectItemCaseSensitive(w->file->manifest, "mask");
		char val[200];
		const char *aa = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		                 "aaaaaaaaaaaaaaaaaaa";
		const char *bb = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
		                 "bbbbbbbbbbbbbbbbbbb";
		snprintf(val, sizeof(val), evil[i][1], i % 2 ? bb : aa,
		         i % 2 ? aa : bb);
		cJSON_ReplaceItemInObjectCaseSensitive(mo, evil[i][0],
		                                       cJSON_Parse(val));
		struct cg_file *f = w->file;
		w->file = NULL;
		cg_update_free(w);
		w = cg_update_from_file(f, "evil.cgg");
		printf("     %s=%s: %s\n", evil[i][0], evil[i][1],
		       w ? "accepted" : cg_errmsg());
		all &= w == NULL && strncmp(cg_errmsg(), "evil.cgg: ", 10) == 0;
		cg_update_free(w);
	}
	expect(all, "a hostile mask object: each refused, the file named");
	struct cg_file *f = u->file;
	u->file = NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "mask");
	struct cg_update *w = cg_update_from_file(f, "nomask.cgg");
	expect(w == NULL && contains("without \"mask\""),
	       "a masked codec without its mask object: refused");
	/* a masked tensor of f32, the layout's shape in another dtype */
	struct cg_update *x = masked_input(m, &mk, 0, "m0");
	f = x->file;
	x->file = NULL;
	f->tensors[0]->dtype = CG_F32;
	w = cg_update_from_file(f, "f32.cgg");
	expect(w == NULL && contains("not u64"),
	       "a masked tensor of another dtype: refused");
	cg_update_free(x);
	x = masked_input(m, &mk, 0, "m0");
	f = x->file;
	x->file = NULL;
	f->tensors[1]->shape[0] = 4;
	f->tensors[1]->nelem = 4;
	w = cg_update_from_file(f, "short.cgg");
	expect(w == NULL && contains("shape"),
	       "a masked tensor of another size: refused");
	/* a mask object on a plain update */
	struct cg_update *p = plain_input(m, 0);
	f = p->file;
	p->file = NULL;
	cJSON_AddItemToObject(f->manifest, "mask", cg_mask_manifest(&mk));
	w = cg_update_from_file(f, "plainmask.cgg");
	expect(w == NULL && contains("without the masked codec"),
	       "a mask object on a plain update: refused");
	cg_update_free(x);
	cg_update_free(p);
	cg_update_free(u);
	cg_mask_free(&mk);
	cg_model_free(m);
}

int
main(void)
{
	struct cg_rng r;

	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	cg_rng_seed(&r, 11);
	for (int i = 0; i < MAXW; i++)
		for (int j = 0; j < TOY_P; j++)
			/* deltas, with one large value and one exact zero */
			xs[i][j] = j == 5   ? 0
			           : j == 9 ? 200 - 77 * i
			                    : 0.01f * cg_rng_normal(&r);
	cancel(2);
	cancel(3);
	cancel(5);
	mean_bound(2, CG_MASK_FRAC_BITS);
	mean_bound(3, CG_MASK_FRAC_BITS);
	mean_bound(5, CG_MASK_FRAC_BITS);
	mean_bound(3, 12);
	correlation();
	refusals();
	shamir();
	late_update();
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		failures++;
	return failures ? 1 : 0;
}
