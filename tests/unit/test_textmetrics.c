/*
 * test_textmetrics.c - BLEU and ROUGE-L against an independent
 * implementation, naive formulas and edge cases.
 *
 * tests/textmetrics/vectors.tsv (found through CG_SRCDIR, as the other
 * scripted tests find their files) holds pairs scored by sacrebleu and
 * rouge-score (see tests/textmetrics/make-vectors.py): sentence BLEU,
 * ROUGE-L F1 and the corpus BLEU of every prefix of the file must agree
 * to TOL.  Then the tokeniser is checked character by character against
 * Python's whitespace set, clipped n-gram counts and LCS lengths against
 * brute force on random token sequences, and the limits (empty texts,
 * identical long texts) by their known values.  Exit 0 pass, 1 fail, 77
 * skip (vectors file not found).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "data/text.h"
#include "eval/textmetrics.h"

#define TOL 1e-6
#define MIN_VECTORS 30

#define TEST_NAME "test_textmetrics"
#include "check.h"

/* ----------------------------------------------------------- vectors */

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Undo make-vectors.py's escapes in s[0..n) into out; returns the
 * length, or -1 on a bad escape. */
static long
unescape(const char *s, size_t n, uint8_t *out)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++) {
		if (s[i] != '\\') {
			out[k++] = (uint8_t)s[i];
			continue;
		}
		if (++i == n)
			return -1;
		switch (s[i]) {
		case '\\':
			out[k++] = '\\';
			break;
		case 't':
			out[k++] = '\t';
			break;
		case 'n':
			out[k++] = '\n';
			break;
		case 'r':
			out[k++] = '\r';
			break;
		case 'x':
			if (i + 2 >= n || hexval(s[i + 1]) < 0 ||
			    hexval(s[i + 2]) < 0)
				return -1;
			out[k++] =
			    (uint8_t)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
			break;
		default:
			return -1;
		}
	}
	return (long)k;
}

static int
parse_double(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return end == s || *end != '\0' || errno != 0 ? -1 : 0;
}

static int
test_vectors(void)
{
	const char *src = getenv("CG_SRCDIR");
	char path[4096], *line = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *fp;
	struct cg_bleu_stats corpus;
	double worst[3] = {0, 0, 0};
	int lineno = 0, nvec = 0;

	snprintf(path, sizeof(path), "%s/tests/textmetrics/vectors.tsv",
	         src ? src : "..");
	if ((fp = fopen(path, "r")) == NULL) {
		fprintf(stderr, "SKIP: %s: %s (set CG_SRCDIR)\n", path,
		        strerror(errno));
		return 77;
	}
	memset(&corpus, 0, sizeof(corpus));
	while ((len = getline(&line, &cap, fp)) != -1) {
		char *f[5];
		uint8_t *hyp = NULL, *ref = NULL;
		long hl, rl;
		double want[3], got[3];
		struct cg_bleu_stats one;
		int nf = 0;

		lineno++;
		if (line[0] == '#')
			continue;
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		/* strtok would merge the empty fields of empty texts. */
		for (char *p = line; nf < 5; nf++) {
			f[nf] = p;
			if ((p = strchr(p, '\t')) == NULL) {
				nf++;
				break;
			}
			*p++ = '\0';
		}
		if (nf != 5) {
			CHECK(0, "%s:%d: %d fields, not 5", path, lineno, nf);
			continue;
		}
		hyp = malloc(strlen(f[0]) + 1);
		ref = malloc(strlen(f[1]) + 1);
		if (hyp == NULL || ref == NULL) {
			free(hyp);
			free(ref);
			CHECK(0, "out of memory");
			break;
		}
		hl = unescape(f[0], strlen(f[0]), hyp);
		rl = unescape(f[1], strlen(f[1]), ref);
		if (hl < 0 || rl < 0 || parse_double(f[2], &want[0]) != 0 ||
		    parse_double(f[3], &want[1]) != 0 ||
		    parse_double(f[4], &want[2]) != 0) {
			CHECK(0, "%s:%d: bad line", path, lineno);
			free(hyp);
			free(ref);
			continue;
		}
		memset(&one, 0, sizeof(one));
		CHECK(cg_bleu_add(&one, hyp, (size_t)hl, ref, (size_t)rl) == 0,
		      "%s", cg_errmsg());
		CHECK(cg_bleu_add(&corpus, hyp, (size_t)hl, ref, (size_t)rl) ==
		          0,
		      "%s", cg_errmsg());
		got[0] = cg_bleu_smoothed(&one);
		CHECK(cg_rouge_l(hyp, (size_t)hl, ref, (size_t)rl, &got[1]) ==
		          0,
		      "%s", cg_errmsg());
		got[2] = cg_bleu_score(&corpus);
		for (int k = 0; k < 3; k++) {
			static const char *name[] = {
			    "sentence BLEU", "ROUGE-L F1", "corpus BLEU"};
			double d = fabs(got[k] - want[k]);

			if (d > worst[k])
				worst[k] = d;
			CHECK(d <= TOL && got[k] >= 0 && got[k] <= 1,
			      "%s:%d: %s %.17g, reference %.17g", path, lineno,
			      name[k], got[k], want[k]);
		}
		nvec++;
		free(hyp);
		free(ref);
	}
	CHECK(!ferror(fp), "%s: read error", path);
	fclose(fp);
	free(line);
	CHECK(nvec >= MIN_VECTORS, "%s: %d vectors, expected %d or more", path,
	      nvec, MIN_VECTORS);
	printf("vectors: %d pairs; largest differences: sentence BLEU %.3g, "
	       "ROUGE-L %.3g, corpus BLEU %.3g\n",
	       nvec, worst[0], worst[1], worst[2]);
	return 0;
}

/* --------------------------------------------------------- tokeniser */

static size_t
ntokens(const char *s)
{
	size_t n = strlen(s), pos = 0, len, count = 0;

	while ((len = cg_text_token((const uint8_t *)s, n, &pos)) > 0) {
		count++;
		pos += len;
	}
	return count;
}

static void
test_tokens(void)
{
	/* Every character Python's str.split() splits on, in UTF-8. */
	static const char *spaces[] = {"\t",           "\n",
	                               "\v",           "\f",
	                               "\r",           "\x1c",
	                               "\x1d",         "\x1e",
	                               "\x1f",         " ",
	                               "\xc2\x85",     "\xc2\xa0",
	                               "\xe1\x9a\x80", "\xe2\x80\x80",
	                               "\xe2\x80\x81", "\xe2\x80\x82",
	                               "\xe2\x80\x83", "\xe2\x80\x84",
	                               "\xe2\x80\x85", "\xe2\x80\x86",
	                               "\xe2\x80\x87", "\xe2\x80\x88",
	                               "\xe2\x80\x89", "\xe2\x80\x8a",
	                               "\xe2\x80\xa8", "\xe2\x80\xa9",
	                               "\xe2\x80\xaf", "\xe2\x81\x9f",
	                               "\xe3\x80\x80"};
	/* Near misses that it does not split on: U+200B, U+180E, U+0084,
	 * U+00A1, U+2010, U+2030, U+205E, U+3001, U+1681, ESC, DEL, NUL,
	 * and truncated or lone bytes of the sequences above. */
	static const char *others[] = {
	    "\xe2\x80\x8b", "\xe1\xa0\x8e", "\xc2\x84",     "\xc2\xa1",
	    "\xe2\x80\x90", "\xe2\x80\xb0", "\xe2\x81\x9e", "\xe3\x80\x81",
	    "\xe1\x9a\x81", "\x1b",         "\x7f",         "\xc2",
	    "\xe2\x80",     "\xe3",         "\x80",         "\xa0"};
	char buf[32];

	for (size_t i = 0; i < sizeof(spaces) / sizeof(*spaces); i++) {
		snprintf(buf, sizeof(buf), "x%sy", spaces[i]);
		CHECK(ntokens(buf) == 2, "space %zu: %zu tokens, not 2", i,
		      ntokens(buf));
		snprintf(buf, sizeof(buf), "%s%s", spaces[i], spaces[i]);
		CHECK(ntokens(buf) == 0, "space %zu alone: %zu tokens", i,
		      ntokens(buf));
	}
	for (size_t i = 0; i < sizeof(others) / sizeof(*others); i++) {
		snprintf(buf, sizeof(buf), "x%sy z", others[i]);
		CHECK(ntokens(buf) == 2, "non-space %zu: %zu tokens, not 2", i,
		      ntokens(buf));
	}
	/* A NUL byte is a token byte too (strlen would stop at it). */
	{
		const uint8_t s[] = {'a', 0, 'b', ' ', 0};
		size_t pos = 0, len = cg_text_token(s, sizeof(s), &pos);
		CHECK(pos == 0 && len == 3, "NUL: token at %zu, length %zu",
		      pos, len);
		pos += len;
		len = cg_text_token(s, sizeof(s), &pos);
		CHECK(pos == 4 && len == 1, "NUL: token at %zu, length %zu",
		      pos, len);
		pos += len;
		CHECK(cg_text_token(s, sizeof(s), &pos) == 0 &&
		          pos == sizeof(s),
		      "NUL: no end");
	}
	/* A multi-byte space cut short by the end of the text. */
	{
		const uint8_t s[] = {'a', 0xe3, 0x80};
		size_t pos = 0;
		CHECK(cg_text_token(s, sizeof(s), &pos) == 3 && pos == 0,
		      "truncated U+3000 is part of the token");
	}
	CHECK(ntokens("") == 0 && ntokens("   ") == 0, "empty texts");
}

/* ---------------------------------------------------- brute force */

#define VOCAB 5
static const char *const words[VOCAB] = {"a", "bb", "a\xc3\xa9", "B", "c"};
static const char *const seps[] = {" ",  "  ",       "\t",
                                   "\n", "\xc2\xa0", "\xe3\x80\x80"};

static struct cg_rng rng;

/* A random text of n tokens (ids [n]) into buf; returns its length. */
static size_t
random_text(int *ids, size_t n, char *buf)
{
	size_t k = 0;

	if (cg_rng_below(&rng, 2))
		k += (size_t)sprintf(buf + k, "%s", seps[0]);
	for (size_t i = 0; i < n; i++) {
		ids[i] = (int)cg_rng_below(&rng, VOCAB);
		if (i > 0)
			k += (size_t)sprintf(
			    buf + k, "%s",
			    seps[cg_rng_below(&rng,
			                      sizeof(seps) / sizeof(*seps))]);
		k += (size_t)sprintf(buf + k, "%s", words[ids[i]]);
	}
	return k;
}

static size_t
count_gram(const int *x, size_t nx, const int *g, int n)
{
	size_t c = 0;

	for (size_t i = 0; i + (size_t)n <= nx; i++)
		c += memcmp(x + i, g, (size_t)n * sizeof(int)) == 0;
	return c;
}

/* Clipped matches of order n, straight from the definition. */
static uint64_t
naive_match(const int *h, size_t nh, const int *r, size_t nr, int n)
{
	uint64_t m = 0;

	for (size_t i = 0; i + (size_t)n <= nh; i++) {
		/* Count each distinct n-gram once: at its first place. */
		if (count_gram(h, i + (size_t)n - 1, h + i, n) > 0)
			continue;
		size_t ch = count_gram(h, nh, h + i, n);
		size_t cr = count_gram(r, nr, h + i, n);
		m += ch < cr ? ch : cr;
	}
	return m;
}

static size_t
naive_lcs(const int *x, size_t nx, const int *y, size_t ny)
{
	size_t *t = calloc((nx + 1) * (ny + 1), sizeof(*t)), l;

	if (t == NULL)
		return 0;
	for (size_t i = 1; i <= nx; i++)
		for (size_t j = 1; j <= ny; j++) {
			size_t up = t[(i - 1) * (ny + 1) + j];
			size_t left = t[i * (ny + 1) + j - 1];
			t[i * (ny + 1) + j] =
			    x[i - 1] == y[j - 1]
			        ? t[(i - 1) * (ny + 1) + j - 1] + 1
			        : (up > left ? up : left);
		}
	l = t[nx * (ny + 1) + ny];
	free(t);
	return l;
}

static void
test_brute_force(void)
{
	int h[48], r[48];
	char hb[48 * 8], rb[48 * 8];

	cg_rng_seed(&rng, 7);
	for (int trial = 0; trial < 3000; trial++) {
		size_t nh = cg_rng_below(&rng, 40), nr = cg_rng_below(&rng, 40);
		size_t hl = random_text(h, nh, hb), rl = random_text(r, nr, rb);
		struct cg_bleu_stats st;
		double f, want;
		size_t l;

		memset(&st, 0, sizeof(st));
		if (cg_bleu_add(&st, (uint8_t *)hb, hl, (uint8_t *)rb, rl) !=
		    0) {
			CHECK(0, "%s", cg_errmsg());
			continue;
		}
		CHECK(st.hyp_len == nh && st.ref_len == nr,
		      "trial %d: lengths %llu %llu, not %zu %zu", trial,
		      (unsigned long long)st.hyp_len,
		      (unsigned long long)st.ref_len, nh, nr);
		for (int n = 1; n <= CG_BLEU_N; n++) {
			uint64_t m = naive_match(h, nh, r, nr, n);
			uint64_t t = nh >= (size_t)n ? nh - n + 1 : 0;
			CHECK(st.match[n - 1] == m && st.total[n - 1] == t,
			      "trial %d, order %d: %llu/%llu, not %llu/%llu",
			      trial, n, (unsigned long long)st.match[n - 1],
			      (unsigned long long)st.total[n - 1],
			      (unsigned long long)m, (unsigned long long)t);
		}
		CHECK(cg_rouge_l((uint8_t *)hb, hl, (uint8_t *)rb, rl, &f) == 0,
		      "%s", cg_errmsg());
		l = naive_lcs(h, nh, r, nr);
		want = nh && nr ? 2.0 * l / (double)(nh + nr) : 0;
		CHECK(fabs(f - want) <= 1e-12,
		      "trial %d: ROUGE-L %.17g, LCS %zu says %.17g", trial, f,
		      l, want);
		/* F1 is symmetric in the two texts. */
		double g;
		CHECK(cg_rouge_l((uint8_t *)rb, rl, (uint8_t *)hb, hl, &g) ==
		              0 &&
		          fabs(f - g) <= 1e-15,
		      "trial %d: ROUGE-L not symmetric", trial);
	}
}

/* ----------------------------------------------------------- limits */

static void
test_limits(void)
{
	struct cg_bleu_stats st;
	double f;
	const uint8_t *e = (const uint8_t *)"";
	const char *s = "the the the the the the the";
	const char *ref = "the cat is on the mat";

	/* Papineni's clipping example: 2 of 7 unigrams. */
	memset(&st, 0, sizeof(st));
	CHECK(cg_bleu_add(&st, (const uint8_t *)s, strlen(s),
	                  (const uint8_t *)ref, strlen(ref)) == 0,
	      "%s", cg_errmsg());
	CHECK(st.match[0] == 2 && st.total[0] == 7 && st.match[1] == 0 &&
	          st.total[1] == 6,
	      "clipping: %llu/%llu", (unsigned long long)st.match[0],
	      (unsigned long long)st.total[0]);
	CHECK(cg_bleu_score(&st) == 0, "no bigram match: corpus BLEU 0");

	/* Empty texts: zero statistics, zero scores, no failure. */
	memset(&st, 0, sizeof(st));
	CHECK(cg_bleu_add(&st, e, 0, e, 0) == 0, "%s", cg_errmsg());
	CHECK(st.hyp_len == 0 && st.ref_len == 0 && st.total[0] == 0,
	      "empty pair: statistics not zero");
	CHECK(cg_bleu_score(&st) == 0 && cg_bleu_smoothed(&st) == 0,
	      "empty pair: BLEU not 0");
	CHECK(cg_rouge_l(e, 0, e, 0, &f) == 0 && f == 0, "empty ROUGE-L");
	CHECK(cg_rouge_l((const uint8_t *)ref, strlen(ref), e, 0, &f) == 0 &&
	          f == 0,
	      "empty reference ROUGE-L");

	/* A long text against itself: every score 1. */
	size_t n = 200000, k = 0;
	char *big = malloc(n * 8);
	if (big == NULL) {
		CHECK(0, "out of memory");
		return;
	}
	cg_rng_seed(&rng, 11);
	for (size_t i = 0; i < n; i++)
		k += (size_t)sprintf(big + k, "%s%u", i ? " " : "",
		                     (unsigned)cg_rng_below(&rng, 1000));
	memset(&st, 0, sizeof(st));
	CHECK(cg_bleu_add(&st, (uint8_t *)big, k, (uint8_t *)big, k) == 0, "%s",
	      cg_errmsg());
	CHECK(st.hyp_len == n && st.match[3] == n - 3,
	      "long text: %llu tokens, %llu 4-gram matches",
	      (unsigned long long)st.hyp_len, (unsigned long long)st.match[3]);
	CHECK(fabs(cg_bleu_score(&st) - 1) <= 1e-15, "long text: BLEU %.17g",
	      cg_bleu_score(&st));
	/* 20000 tokens each way: a full LCS table would be 1.6 GB. */
	size_t cut = 0;
	for (size_t i = 0, t = 0; i < k && t < 20000; i++)
		if (big[i] == ' ' && ++t == 20000)
			cut = i;
	CHECK(cg_rouge_l((uint8_t *)big, cut, (uint8_t *)big, cut, &f) == 0 &&
	          f == 1,
	      "long text: ROUGE-L %.17g", f);
	free(big);
}

int
main(void)
{
	int rc = test_vectors();

	test_tokens();
	test_brute_force();
	test_limits();
	if (failures) {
		fprintf(stderr, "test_textmetrics: %d failures\n", failures);
		return 1;
	}
	if (rc == 77)
		return 77;
	printf("test_textmetrics: all passed\n");
	return 0;
}
