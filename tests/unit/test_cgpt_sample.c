/*
 * test_cgpt_sample.c - text generation of the conditional GPT: the
 * key/value cache against the full forward pass, and the token sampler.
 *
 * The cache: for several configs (tied and untied, a context shorter and
 * longer than a prefill chunk, the edge contexts 1, 2 and 3), a window is
 * started with a prompt (short, chunked, just fitting beside the start
 * mark, just not, longer than the context) and fed token after token well
 * past several slides; at every step the window must be as cgpt.h says
 * (the condition token, the start mark EOT and everything fed until the
 * first slide when the prompt fits beside it, else the condition token
 * then a suffix of everything fed), and the generator's logits must match
 * cg_cgpt_forward over that window at its last position within ATOL +
 * RTOL |ref| (cg_attention_row gives the full pass's bits, checked here
 * too, so what differs is cg_sgemm's summation order for one row and for
 * many).  The weights are larger than GPT-2's init so that attention is
 * far from uniform and a wrong cache row shows.  The sampler: greedy is
 * the argmax of the allowed tokens, top-k 1 and a tiny top-p are greedy
 * at any temperature, ties go to the lower token, condition tokens are
 * never drawn even when they dominate, the frequencies of many draws
 * match the (filtered, tempered) softmax within 5 standard deviations, a
 * seed fixes the draws; and cg_cgpt_sample stops at EOT, at max_bytes and
 * when emit says so, and refuses bad arguments.  Generators and
 * workspaces over matrices as stored (cg_cgpt_gen_new_mats,
 * cg_cgpt_ws_set_mats): f32 ones give the params path's bits, f16, q8_0
 * and q4_0 ones logits close to the decoded model's.  Exit 0 pass, 1 fail
 * (automake convention).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/cgpt/cgpt.h"
#include "cg.h"
#include "model/model.h"
#include "nn/transformer.h"

#define TEST_NAME "test_cgpt_sample"
#include "check.h"

#define ATOL 1e-4
#define RTOL 1e-4
#define DRAWS 200000

static struct cg_rng rng;

/* Weights with some spread: normal(0, 0.3) everywhere, LayerNorm gains
 * around 1 (every view of one element per channel is a gain or bias). */
static float *
random_params(const struct cg_cgpt_config *c)
{
	size_t n = cg_cgpt_nparams(c);
	float *p = xcalloc(n, sizeof(float));

	if (n == 0)
		die("nparams");
	for (size_t i = 0; i < n; i++)
		p[i] = 0.3f * cg_rng_normal(&rng);
	int nv = cg_cgpt_nviews(c);
	struct cg_view *v = xcalloc((size_t)nv, sizeof(*v));
	cg_cgpt_views(c, v, nv);
	for (int i = 0; i < nv; i++) {
		size_t len = strlen(v[i].name);
		if (len > 2 && strcmp(v[i].name + len - 2, ".w") == 0 &&
		    v[i].ndim == 1)
			for (size_t j = 0; j < v[i].n; j++)
				p[v[i].off + j] += 1.0f;
	}
	free(v);
	return p;
}

/* ------------------------------------------------- cache vs forward */

/* Largest |a - b| - RTOL |b| over V logits (<= ATOL passes), into *diff
 * the largest plain |a - b|. */
static double
compare(const float *a, const float *b, int V, double *diff)
{
	double worst = -INFINITY;

	for (int i = 0; i < V; i++) {
		double d = fabs((double)a[i] - b[i]);
		if (d > *diff)
			*diff = d;
		if (d - RTOL * fabs(b[i]) > worst)
			worst = d - RTOL * fabs(b[i]);
	}
	return worst;
}

/*
 * Start with cond and a prompt of plen bytes, push steps tokens, and
 * check the window and the logits at every step.  Returns the largest
 * logit difference; *slides counts the slides seen.
 */
static double
check_cache(const struct cg_cgpt_config *c, int tied_tag, size_t plen,
            int steps, int *slides)
{
	const int T = c->T, V = cg_cgpt_vocab(c);
	float *params = random_params(c);
	struct cg_cgpt_gen *g = cg_cgpt_gen_new(c, params);
	struct cg_cgpt_ws *ws = cg_cgpt_ws_new(c, 1, 0);
	size_t nhist = plen + (size_t)steps;
	int *hist = xcalloc(nhist, sizeof(int)); /* everything fed */
	uint8_t *prompt = xcalloc(plen, 1);
	double diff = 0, worst = -INFINITY;
	int win_ok = 1, prev_len = 0, cond = c->ncond - 1;
	/* Whether the window holds the start mark: a prompt that fits beside
	 * it, until the first slide. */
	int marked = T >= 2 && plen <= (size_t)T - 2;
	char what[160];

	if (g == NULL || ws == NULL)
		die("generator");
	for (size_t i = 0; i < plen; i++)
		hist[i] = prompt[i] = (uint8_t)cg_rng_below(&rng, 256);
	if (cg_cgpt_gen_start(g, cond, prompt, plen) != 0)
		die("start");
	*slides = 0;
	for (int s = 0; s <= steps; s++) {
		size_t fed = plen + (size_t)s;
		int len;
		const int *w = cg_cgpt_gen_window(g, &len);

		if (s > 0) {
			int tok = (int)cg_rng_below(&rng, (uint64_t)V);
			hist[fed - 1] = tok;
			if (cg_cgpt_gen_push(g, tok) != 0)
				die("push");
			w = cg_cgpt_gen_window(g, &len);
			if (len <= prev_len && T > 1) {
				(*slides)++;
				marked = 0;
			}
		}
		prev_len = len;
		/* The condition, the start mark EOT and everything fed; or,
		 * unmarked, the condition and the last len - 1 tokens fed. */
		int at = 1 + marked;
		if (len < at || len > T || w[0] != 256 + cond ||
		    (marked && w[1] != 256 + c->ncond) ||
		    (size_t)(len - at) > fed ||
		    (marked && (size_t)len != 2 + fed))
			win_ok = 0;
		else
			for (int i = at; i < len; i++)
				if (w[i] != hist[fed - (len - at) + i - at])
					win_ok = 0;
		/* A fresh window holds everything that fits. */
		if (s == 0 &&
		    (size_t)len !=
		        (marked ? 2 + plen
		                : 1 + (plen < (size_t)T - 1 ? plen
		                                            : (size_t)T - 1)))
			win_ok = 0;
		if (cg_cgpt_forward(c, params, ws, w, 1, len) != 0)
			die("forward");
		double e = compare(cg_cgpt_gen_logits(g),
		                   cg_cgpt_logits(ws) + (size_t)(len - 1) * V,
		                   V, &diff);
		if (e > worst)
			worst = e;
	}
	snprintf(what, sizeof(what),
	         "T=%d C=%d L=%d NH=%d %s, prompt %zu, %d steps: window as "
	         "documented",
	         T, c->C, c->L, c->NH, tied_tag ? "tied" : "untied", plen,
	         steps);
	expect(win_ok, what);
	snprintf(what, sizeof(what),
	         "    cached logits = full forward at every step (%d slides, "
	         "max |diff| %.3g)",
	         *slides, diff);
	expect(worst <= ATOL, what);
	cg_cgpt_ws_free(ws);
	cg_cgpt_gen_free(g);
	free(prompt);
	free(hist);
	free(params);
	return diff;
}

static void
test_cache(void)
{
	static const struct {
		struct cg_cgpt_config c;
		size_t plen;
		int steps, min_slides;
	} t[] = {
	    /* Chunked prefill (64 + 13 rows), then slides of 39 rows. */
	    {{3, 80, 32, 2, 4, 0, 0, 0}, 75, 150, 3},
	    {{3, 80, 32, 2, 4, 1, 0, 0}, 0, 100, 1},
	    /* A prompt longer than the context: no start mark. */
	    {{2, 9, 16, 2, 2, 1, 0, 0}, 30, 40, 8},
	    {{2, 9, 16, 3, 4, 0, 0, 0}, 3, 40, 8},
	    /* The prompt just fits beside the mark (7), or just not (8). */
	    {{2, 9, 16, 2, 2, 0, 0, 0}, 7, 20, 4},
	    {{2, 9, 16, 2, 2, 0, 0, 0}, 8, 20, 4},
	    {{1, 16, 8, 1, 1, 0, 0, 0}, 0, 60, 6},
	    /* Edge contexts: slide every step (3, 2), or never feed (1). */
	    {{2, 3, 8, 1, 2, 0, 0, 0}, 5, 10, 9},
	    {{2, 3, 8, 1, 2, 0, 0, 0}, 1, 10, 9},
	    {{2, 2, 8, 1, 2, 1, 0, 0}, 0, 10, 9},
	    {{2, 1, 8, 1, 2, 0, 0, 0}, 4, 5, 0},
	};
	double most = 0;
	int slides_ok = 1;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int slides;
		double d = check_cache(&t[i].c, t[i].c.tied, t[i].plen,
		                       t[i].steps, &slides);
		if (d > most)
			most = d;
		if (slides < t[i].min_slides) {
			printf("     config %zu: %d slides, wanted %d\n", i,
			       slides, t[i].min_slides);
			slides_ok = 0;
		}
	}
	expect(slides_ok, "the windows slid as often as expected");
	printf("     largest |cached - full| logit difference: %.3g\n", most);
}

/* The same for heads and an MLP of their own widths, as cg-prune
 * --structured leaves them (run last: its draws leave the others'
 * weights as they were). */
static void
test_cache_pruned(void)
{
	struct cg_cgpt_config c = {2, 9, 16, 2, 3, 0, 4, 20};
	int slides;

	check_cache(&c, 0, 7, 20, &slides);
	expect(slides >= 4, "3 heads of 4 in a width of 16, an MLP of 20: "
	                    "the windows slid");
}

/*
 * The cache's attention rows are cg_attention_forward's, from keys and
 * values copied out of the packed qkv into per-head arrays [T, hs] (as
 * the cache keeps them): the same to float rounding, as the forward pass
 * sums the same products in the order of a matrix kernel.
 */
static void
test_attention_row(void)
{
	enum { T = 13, C = 24, NH = 3, hs = C / NH };
	static float qkv[T * 3 * C], out[T * C], att[NH * T * T];
	static float kc[T * hs], vc[T * hs], o[hs], a[T];
	double worst = 0;

	for (int i = 0; i < T * 3 * C; i++)
		qkv[i] = 2.0f * cg_rng_normal(&rng);
	cg_attention_forward(out, att, qkv, 1, T, C, NH);
	for (int h = 0; h < NH; h++) {
		for (int j = 0; j < T; j++) {
			memcpy(kc + j * hs, qkv + j * 3 * C + C + h * hs,
			       sizeof(float) * hs);
			memcpy(vc + j * hs, qkv + j * 3 * C + 2 * C + h * hs,
			       sizeof(float) * hs);
		}
		for (int t = 0; t < T; t++) {
			cg_attention_row(o, a, qkv + t * 3 * C + h * hs, kc, vc,
			                 hs, t, hs);
			/* Outputs are O(|v|) = O(2), weights in [0, 1]. */
			for (int i = 0; i < hs; i++) {
				double d = fabs(o[i] - out[t * C + h * hs + i]);
				worst = d > worst ? d : worst;
			}
			for (int j = 0; j < T; j++) {
				double d = fabs((j <= t ? a[j] : 0) -
				                att[(h * T + t) * T + j]);
				worst = d > worst ? d : worst;
			}
		}
	}
	printf("     largest difference: %.3g\n", worst);
	expect(worst < 1e-5, "cg_attention_row: cg_attention_forward's rows "
	                     "to float rounding");
}

static void
test_gen_errors(void)
{
	struct cg_cgpt_config c = {2, 8, 8, 1, 2, 0, 0, 0};
	float *params = random_params(&c);
	struct cg_cgpt_gen *g = cg_cgpt_gen_new(&c, params);
	struct cg_cgpt_config bad = {2, 8, 8, 1, 3, 0, 0, 0};

	if (g == NULL)
		die("generator");
	expect(cg_cgpt_gen_logits(g) == NULL, "no logits before a start");
	expect(cg_cgpt_gen_push(g, 'a') == -1, "a push before a start fails");
	expect(cg_cgpt_gen_start(g, 2, NULL, 0) == -1 &&
	           cg_cgpt_gen_start(g, -1, NULL, 0) == -1,
	       "a condition out of range is refused");
	expect(cg_cgpt_gen_start(g, 1, NULL, 0) == 0 &&
	           cg_cgpt_gen_push(g, 259) == -1 &&
	           cg_cgpt_gen_push(g, -1) == -1,
	       "a token out of range is refused");
	expect(cg_cgpt_gen_new(&bad, params) == NULL,
	       "a bad config is refused");
	cg_cgpt_gen_free(g);
	cg_cgpt_gen_free(NULL);
	free(params);
}

/* ------------------------------------------------------------ sampler */

#define NCOND 5
#define VOCAB (257 + NCOND)
#define EOT (256 + NCOND)

static int
argmax_allowed(const float *l)
{
	int best = 0;

	for (int t = 1; t < VOCAB; t++)
		if ((t < 256 || t == EOT) && l[t] > l[best])
			best = t;
	return best;
}

static void
test_greedy(void)
{
	float l[VOCAB];
	int greedy = 1, topk = 1, topp = 1, ties = 1;

	for (int trial = 0; trial < 200; trial++) {
		for (int t = 0; t < VOCAB; t++)
			l[t] = 3 * cg_rng_normal(&rng);
		for (int t = 256; t < EOT; t++)
			l[t] += 100; /* conditions dominate; never chosen */
		if (trial % 4 == 0)
			l[EOT] += 20;
		int want = argmax_allowed(l);
		struct cg_sampler g = {0, 0, 1, 0}, k1 = {1.5, 1, 1, 0},
		                  p0 = {2.0, 0, 1e-9, 0};
		greedy &= cg_cgpt_pick(l, NCOND, &g, &rng) == want;
		topk &= cg_cgpt_pick(l, NCOND, &k1, &rng) == want;
		topp &= cg_cgpt_pick(l, NCOND, &p0, &rng) == want;
		/* A tie with a higher token goes to the lower one. */
		if (want < 255) {
			l[255] = l[want];
			ties &= cg_cgpt_pick(l, NCOND, &g, &rng) == want;
		}
	}
	expect(greedy, "temperature 0 picks the argmax of bytes and EOT");
	expect(topk, "top-k 1 is greedy at any temperature");
	expect(topp, "a tiny top-p is greedy at any temperature");
	expect(ties, "ties go to the lower token");

	/* Non-finite logits. */
	for (int t = 0; t < VOCAB; t++)
		l[t] = NAN;
	l['x'] = -INFINITY;
	struct cg_sampler s = {1, 0, 1, 0};
	int tok = cg_cgpt_pick(l, NCOND, &s, &rng);
	expect(tok >= 0 && tok < 256, "all-NaN logits still give a byte");
	for (int t = 0; t < VOCAB; t++)
		l[t] = t == 'q' ? 1 : NAN;
	expect(cg_cgpt_pick(l, NCOND, &s, &rng) == 'q',
	       "NaN logits are never drawn");
}

/*
 * Draw DRAWS tokens from logits l with s and compare the frequencies
 * with the probabilities want [VOCAB]; returns whether every token is
 * within 5 standard deviations (+ 1 count) and condition tokens never
 * come.
 */
static int
frequencies(const float *l, const struct cg_sampler *s, const double *want,
            const char *what)
{
	static long count[VOCAB];
	double worst = 0;
	int ok = 1;
	char msg[160];

	memset(count, 0, sizeof(count));
	for (int i = 0; i < DRAWS; i++) {
		int t = cg_cgpt_pick(l, NCOND, s, &rng);
		if (t < 0 || t >= VOCAB) {
			ok = 0;
			continue;
		}
		count[t]++;
	}
	for (int t = 0; t < VOCAB; t++) {
		double e = want[t] * DRAWS;
		double sd = sqrt(e * (1 - want[t]));
		double z = (fabs(count[t] - e) - 1) / (sd > 0 ? sd : 1);
		if (z > worst)
			worst = z;
		if (z > 5 || (want[t] == 0 && count[t] != 0))
			ok = 0;
	}
	snprintf(msg, sizeof(msg),
	         "%s: frequencies match (worst %.2f sd, %d draws)", what, worst,
	         DRAWS);
	expect(ok, msg);
	return ok;
}

static void
test_distribution(void)
{
	float l[VOCAB];
	double want[VOCAB], z[VOCAB];
	int order[VOCAB], n = 0;

	/* A few likely tokens above a flat floor; conditions large. */
	for (int t = 0; t < VOCAB; t++)
		l[t] = -4 + 0.01f * (t % 7);
	l['a'] = 2.0f;
	l['b'] = 1.5f;
	l['c'] = 1.0f;
	l['\n'] = 0.5f;
	l[EOT] = 1.2f;
	for (int t = 256; t < EOT; t++)
		l[t] = 50;

	/* The candidates by logit, for the filters below. */
	for (int t = 0; t < VOCAB; t++)
		if (t < 256 || t == EOT)
			order[n++] = t;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && l[order[j]] > l[order[j - 1]]; j--) {
			int x = order[j];
			order[j] = order[j - 1];
			order[j - 1] = x;
		}

	static const struct {
		double temp;
		int k;
		double p;
		const char *name;
	} cases[] = {
	    {1.0, 0, 1.0, "softmax at temperature 1"},
	    {0.7, 0, 1.0, "temperature 0.7"},
	    {2.5, 0, 1.0, "temperature 2.5"},
	    {1.0, 3, 1.0, "top-k 3"},
	    {1.0, 0, 0.8, "top-p 0.8"},
	    {1.3, 4, 0.9, "temperature 1.3, top-k 4, top-p 0.9"},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct cg_sampler s = {cases[c].temp, cases[c].k, cases[c].p,
		                       0};
		int keep = cases[c].k > 0 ? cases[c].k : n;
		double sum = 0;

		memset(want, 0, sizeof(want));
		for (int i = 0; i < keep; i++) {
			z[i] = exp((l[order[i]] - l[order[0]]) / cases[c].temp);
			sum += z[i];
		}
		/* Nucleus: the smallest prefix with mass >= p. */
		double acc = 0;
		int m = 0;
		while (m < keep && (m == 0 || acc < cases[c].p * sum))
			acc += z[m++];
		for (int i = 0; i < m; i++)
			want[order[i]] = z[i] / acc;
		frequencies(l, &s, want, cases[c].name);
	}
}

static void
test_determinism(void)
{
	float l[VOCAB];
	struct cg_rng a, b;
	struct cg_sampler s = {1.0, 0, 1.0, 0};
	int same = 1, differ = 0;

	for (int t = 0; t < VOCAB; t++)
		l[t] = cg_rng_normal(&rng);
	cg_rng_seed(&a, 7);
	cg_rng_seed(&b, 7);
	for (int i = 0; i < 1000; i++)
		same &= cg_cgpt_pick(l, NCOND, &s, &a) ==
		        cg_cgpt_pick(l, NCOND, &s, &b);
	cg_rng_seed(&b, 8);
	for (int i = 0; i < 1000; i++)
		differ |= cg_cgpt_pick(l, NCOND, &s, &a) !=
		          cg_cgpt_pick(l, NCOND, &s, &b);
	expect(same, "the same seed draws the same tokens");
	expect(differ, "another seed draws other tokens");
}

/* ----------------------------------------------------- cg_cgpt_sample */

struct sink {
	char buf[4096];
	size_t n;
	size_t stop_at; /* emit returns 1 at this many bytes; 0: never */
};

static int
collect(void *ctx, int byte)
{
	struct sink *k = ctx;

	if (byte < 0 || byte > 255 || k->n >= sizeof(k->buf))
		return 1;
	k->buf[k->n++] = (char)byte;
	return k->stop_at && k->n >= k->stop_at;
}

/*
 * An untied model whose logits are the same after any input: lnf's gain
 * 0 and bias 1 make its output all ones, so logit v is the sum of
 * lm_head row v; row fav is 1, the rest 0.
 */
static float *
fixed_model(const struct cg_cgpt_config *c, int fav)
{
	float *p = random_params(c);
	int nv = cg_cgpt_nviews(c);
	struct cg_view *v = xcalloc((size_t)nv, sizeof(*v));

	cg_cgpt_views(c, v, nv);
	for (int i = 0; i < nv; i++) {
		float *x = p + v[i].off;
		if (strcmp(v[i].name, "lnf.w") == 0)
			memset(x, 0, v[i].n * sizeof(float));
		else if (strcmp(v[i].name, "lnf.b") == 0)
			for (size_t j = 0; j < v[i].n; j++)
				x[j] = 1;
		else if (strcmp(v[i].name, "lm_head.w") == 0)
			for (size_t j = 0; j < v[i].n; j++)
				x[j] = (int)(j / c->C) == fav;
	}
	free(v);
	return p;
}

/* Make EOT's logit about -10 * 5 * C whatever the input: lnf's bias 5
 * everywhere and lm_head row EOT -10 everywhere (untied c). */
static void
no_eot(const struct cg_cgpt_config *c, float *p)
{
	int nv = cg_cgpt_nviews(c), eot = 256 + c->ncond;
	struct cg_view *v = xcalloc((size_t)nv, sizeof(*v));

	cg_cgpt_views(c, v, nv);
	for (int i = 0; i < nv; i++) {
		float *x = p + v[i].off;
		if (strcmp(v[i].name, "lnf.b") == 0)
			for (size_t j = 0; j < v[i].n; j++)
				x[j] = 5;
		else if (strcmp(v[i].name, "lm_head.w") == 0)
			for (int j = 0; j < c->C; j++)
				x[(size_t)eot * c->C + j] = -10;
	}
	free(v);
}

static void
test_sample(void)
{
	struct cg_cgpt_config c = {3, 16, 16, 2, 2, 0, 0, 0};
	const int eot = 256 + c.ncond;
	float *params = random_params(&c);
	struct cg_sampler s = {1.0, 0, 1.0, 100};
	struct sink k1 = {{0}, 0, 0}, k2 = {{0}, 0, 0};
	struct cg_rng a, b;
	long n1, n2;

	/* Same seed, same bytes, with slides (100 > T). */
	no_eot(&c, params);
	cg_rng_seed(&a, 11);
	cg_rng_seed(&b, 11);
	n1 = cg_cgpt_sample(&c, params, 1, (const uint8_t *)"ab", 2, &s, &a,
	                    collect, &k1);
	n2 = cg_cgpt_sample(&c, params, 1, (const uint8_t *)"ab", 2, &s, &b,
	                    collect, &k2);
	expect(n1 >= 0 && n1 == n2 && (size_t)n1 == k1.n &&
	           memcmp(k1.buf, k2.buf, k1.n) == 0,
	       "cg_cgpt_sample: the same seed gives the same bytes");
	expect(n1 == 100, "without EOT, exactly max_bytes");
	k2.n = 0;
	cg_rng_seed(&b, 12);
	cg_cgpt_sample(&c, params, 1, (const uint8_t *)"ab", 2, &s, &b, collect,
	               &k2);
	expect(k2.n != k1.n || memcmp(k1.buf, k2.buf, k1.n) != 0,
	       "another seed, other bytes");

	/* Greedy on a model that always favours 'z': exactly max_bytes. */
	free(params);
	params = fixed_model(&c, 'z');
	s.temperature = 0;
	s.max_bytes = 37;
	k1.n = 0;
	n1 = cg_cgpt_sample(&c, params, 0, NULL, 0, &s, &a, collect, &k1);
	int all_z = k1.n == 37;
	for (size_t i = 0; i < k1.n; i++)
		all_z &= k1.buf[i] == 'z';
	expect(n1 == 37 && all_z, "greedy stops at exactly max_bytes");
	s.max_bytes = 0;
	k1.n = 0;
	expect(cg_cgpt_sample(&c, params, 0, NULL, 0, &s, &a, collect, &k1) ==
	               0 &&
	           k1.n == 0,
	       "max_bytes 0 generates nothing");
	s.max_bytes = 50;
	k1.n = 0;
	k1.stop_at = 5;
	expect(cg_cgpt_sample(&c, params, 0, NULL, 0, &s, &a, collect, &k1) ==
	               5 &&
	           k1.n == 5,
	       "a nonzero return from emit stops generation");

	/* EOT favoured: nothing is emitted. */
	free(params);
	params = fixed_model(&c, eot);
	s.temperature = 0.5;
	k1.n = 0;
	k1.stop_at = 0;
	expect(cg_cgpt_sample(&c, params, 2, (const uint8_t *)"x", 1, &s, &a,
	                      collect, &k1) == 0 &&
	           k1.n == 0,
	       "EOT stops generation before any byte");

	/*
	 * A condition token favoured: never emitted, bytes come instead.
	 * Bytes and EOT tie; top-k 256 keeps the bytes (lower tokens win
	 * ties), so that nothing but a condition token could stop it early.
	 */
	free(params);
	params = fixed_model(&c, 257);
	s.temperature = 1;
	s.top_k = 256;
	s.max_bytes = 200;
	k1.n = 0;
	n1 = cg_cgpt_sample(&c, params, 0, NULL, 0, &s, &a, collect, &k1);
	expect(n1 == 200, "a dominant condition token is never drawn");

	/* Bad arguments. */
	s.top_k = 0;
	struct cg_sampler bad[] = {
	    {-1, 0, 1, 10}, {NAN, 0, 1, 10}, {INFINITY, 0, 1, 10},
	    {1, -1, 1, 10}, {1, 0, 1.5, 10}, {1, 0, NAN, 10},
	};
	int refused = 1;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused &= cg_cgpt_sample(&c, params, 0, NULL, 0, &bad[i], &a,
		                          collect, &k1) == -1;
	refused &=
	    cg_cgpt_sample(&c, params, 3, NULL, 0, &s, &a, collect, &k1) == -1;
	expect(refused, "bad samplers and conditions are refused");
	free(params);
}

/* ------------------------------------------- matrices as stored */

/* The view indices of the matrices in CG_CGPT_NMATS order. */
static void
mat_views(const struct cg_cgpt_config *c, const struct cg_view *v, int *idx)
{
	static const int in_block[4] = {2, 4, 8, 10};

	for (int l = 0; l < c->L; l++)
		for (int j = 0; j < 4; j++)
			idx[4 * l + j] = 2 + 12 * l + in_block[j];
	idx[4 * c->L] = c->tied ? 0 : 4 + 12 * c->L;
	(void)v;
}

/* Start a window with a prompt and push a few tokens on g, the logits of
 * every step appended to out [steps + 1, V]. */
static void
run_gen(struct cg_cgpt_gen *g, int V, int steps, float *out)
{
	static const uint8_t prompt[] = "stored";

	if (cg_cgpt_gen_start(g, 1, prompt, sizeof(prompt) - 1) != 0)
		die("gen_start");
	memcpy(out, cg_cgpt_gen_logits(g), (size_t)V * sizeof(float));
	for (int i = 1; i <= steps; i++) {
		if (cg_cgpt_gen_push(g, 'a' + i % 26) != 0)
			die("gen_push");
		memcpy(out + (size_t)i * V, cg_cgpt_gen_logits(g),
		       (size_t)V * sizeof(float));
	}
}

/*
 * Generators and workspaces over matrices as stored: f32 entries give
 * the params path's bits; f16, q8_0 and q4_0 ones come close to the
 * params path on their decoded values (f16: the same products in another
 * order: 1e-5 of the largest logit; q8_0, q4_0: every input rounded
 * to 8 bits, an error of about 0.6% of its size (up to 1/254 of a block's
 * largest value), through 11 products: 5% allowed, some three times the
 * 1.5% measured); bad matrices and a gradient are refused.
 */
static void
test_stored(void)
{
	const struct cg_cgpt_config c = {.ncond = 3, .T = 12, .C = 64, .L = 2,
	                                 .NH = 2, .tied = 0};
	const int V = cg_cgpt_vocab(&c), nm = CG_CGPT_NMATS(c.L), steps = 20;
	int nv = cg_cgpt_nviews(&c);
	struct cg_view *v = xcalloc((size_t)nv, sizeof(*v));
	float *params = xcalloc(cg_cgpt_nparams(&c), sizeof(float));
	float *deq = xcalloc(cg_cgpt_nparams(&c), sizeof(float));
	struct cg_wmat *mats = xcalloc((size_t)nm, sizeof(*mats));
	void **bytes = xcalloc((size_t)nm, sizeof(*bytes));
	int *idx = xcalloc((size_t)nm, sizeof(int));
	size_t nl = (size_t)(steps + 1) * V;
	float *a = xcalloc(nl, sizeof(float)), *b = xcalloc(nl, sizeof(float));
	static const enum cg_dtype dts[] = {CG_F16, CG_Q8_0, CG_Q4_0};
	static const double tol[] = {1e-5, 0.05, 0.05};

	/* GPT-2's init, scaled up 5 times (normal(0, 0.1)) so that the
	 * logits spread; random_params' weights make attention so sharp that
	 * 8-bit inputs flip which key it picks, which says nothing of the
	 * kernels */
	cg_cgpt_init(&c, params, &rng);
	cg_cgpt_views(&c, v, nv);
	for (int i = 0; i < nv; i++)
		if (v[i].ndim == 2)
			for (size_t j = 0; j < v[i].n; j++)
				params[v[i].off + j] *= 5;
	mat_views(&c, v, idx);

	/* f32 entries: the very bits of the params path */
	for (int i = 0; i < nm; i++)
		mats[i] =
		    (struct cg_wmat){CG_F32, params + v[idx[i]].off, NULL};
	struct cg_cgpt_gen *g = cg_cgpt_gen_new(&c, params);
	struct cg_cgpt_gen *h = cg_cgpt_gen_new_mats(&c, params, mats);
	if (g == NULL || h == NULL)
		die("gen_new");
	run_gen(g, V, steps, a);
	run_gen(h, V, steps, b);
	expect(memcmp(a, b, nl * sizeof(float)) == 0,
	       "a generator of f32 matrices as stored: the params path's bits");
	cg_cgpt_gen_free(h);

	int tokens[8] = {256, 259, 'h', 'e', 'l', 'l', 'o', '!'};
	struct cg_cgpt_ws *w0 = cg_cgpt_ws_new(&c, 1, 0);
	struct cg_cgpt_ws *w1 = cg_cgpt_ws_new(&c, 1, 0);
	if (w0 == NULL || w1 == NULL || cg_cgpt_ws_set_mats(w1, mats) != 0 ||
	    cg_cgpt_forward(&c, params, w0, tokens, 1, 8) != 0 ||
	    cg_cgpt_forward(&c, params, w1, tokens, 1, 8) != 0)
		die("forward");
	expect(memcmp(cg_cgpt_logits(w0), cg_cgpt_logits(w1),
	              (size_t)8 * V * sizeof(float)) == 0,
	       "a workspace of f32 matrices as stored: the params path's bits");
	float *gr = xcalloc(cg_cgpt_nparams(&c), sizeof(float));
	float wt[8] = {1, 1, 1, 1, 1, 1, 1, 1};
	expect(cg_cgpt_forward_backward(&c, params, w1, tokens, tokens, wt, 1,
	                                8, gr, NULL) == -1,
	       "no gradient through matrices as stored");
	free(gr);

	for (int t = 0; t < 3; t++) {
		const struct cg_codec *cd = cg_codec(dts[t]);
		memcpy(deq, params, cg_cgpt_nparams(&c) * sizeof(float));
		for (int i = 0; i < nm; i++) {
			const struct cg_view *x = &v[idx[i]];
			free(bytes[i]);
			bytes[i] = xcalloc(x->n / cd->block * cd->bytes, 1);
			if (cd->encode(bytes[i], params + x->off, x->n) != 0)
				die("encode");
			cd->decode(deq + x->off, bytes[i], x->n);
			mats[i] = (struct cg_wmat){dts[t], bytes[i], NULL};
		}
		struct cg_cgpt_gen *gd = cg_cgpt_gen_new(&c, deq);
		struct cg_cgpt_gen *gq = cg_cgpt_gen_new_mats(&c, deq, mats);
		if (gd == NULL || gq == NULL)
			die("gen_new");
		run_gen(gd, V, steps, a);
		run_gen(gq, V, steps, b);
		double big = 0, diff = 0;
		for (size_t i = 0; i < nl; i++) {
			big = fabs(a[i]) > big ? fabs(a[i]) : big;
			diff = fabs(a[i] - b[i]) > diff ? fabs(a[i] - b[i])
			                                : diff;
		}
		printf("     %s as stored: logits within %.3g of the decoded "
		       "model's (largest %.3g)\n",
		       cg_dtype_name(dts[t]), diff, big);
		char what[96];
		snprintf(what, sizeof(what),
		         "%s matrices as stored: within %g of the largest "
		         "logit of the decoded model",
		         cg_dtype_name(dts[t]), tol[t]);
		/* q8_0 and q4_0 round the inputs: not the decoded path */
		expect(diff <= tol[t] * big && (t == 0 || diff > 0), what);
		cg_cgpt_gen_free(gd);
		cg_cgpt_gen_free(gq);
	}

	/* q8_0 rows of 48 inputs are not whole blocks: refused */
	const struct cg_cgpt_config c48 = {.ncond = 3, .T = 8, .C = 48,
	                                   .L = 1, .NH = 2, .tied = 1};
	struct cg_wmat m48[CG_CGPT_NMATS(1)];
	for (int i = 0; i < CG_CGPT_NMATS(1); i++)
		m48[i] =
		    (struct cg_wmat){i == 1 ? CG_Q8_0 : CG_F32, params, NULL};
	struct cg_cgpt_ws *w48 = cg_cgpt_ws_new(&c48, 1, 0);
	expect(w48 && cg_cgpt_ws_set_mats(w48, m48) == -1 &&
	           cg_cgpt_gen_new_mats(&c48, params, m48) == NULL,
	       "q8_0 matrices of rows not whole blocks are refused");

	cg_cgpt_ws_free(w48);
	cg_cgpt_ws_free(w0);
	cg_cgpt_ws_free(w1);
	cg_cgpt_gen_free(g);
	for (int i = 0; i < nm; i++)
		free(bytes[i]);
	free(bytes);
	free(idx);
	free(mats);
	free(deq);
	free(params);
	free(v);
	free(a);
	free(b);
}

int
main(void)
{
	cg_rng_seed(&rng, 5150);
	test_attention_row();
	test_cache();
	test_gen_errors();
	test_greedy();
	test_distribution();
	test_determinism();
	test_sample();
	test_stored();
	test_cache_pruned();
	if (failures) {
		printf("test_cgpt_sample: %d failure(s)\n", failures);
		return 1;
	}
	printf("test_cgpt_sample: all passed\n");
	return 0;
}
