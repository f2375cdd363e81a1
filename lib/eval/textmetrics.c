/*
 * eval/textmetrics.c - BLEU and ROUGE-L F1 over whitespace-separated tokens.
 *
 * Both metrics first turn the two texts into arrays of token ids, equal
 * ids for byte-equal tokens (one sort of all tokens), so that n-grams and
 * LCS compare integers.  BLEU's clipped counts come from sorting each
 * text's positions by the ids of the CG_BLEU_N tokens from there on (an
 * n-gram's occurrences are then adjacent for every n at once) and merging
 * the two sorted lists once per order.  Each call allocates its arrays
 * once, sized by the token counts; nothing is kept between calls.
 * Tokenisation and the formulas follow sacrebleu 2.x and rouge-score 0.1
 * exactly (see textmetrics.h); tests/unit/test_textmetrics.c checks it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/textmetrics.h"

/* Token ids are uint32_t below this; it also marks "past the end". */
#define MAX_TOKENS ((size_t)1 << 31)
#define NONE UINT32_MAX

/* --------------------------------------------------------- tokenising */

/*
 * The length of the whitespace character at s[0..n), or 0 if s[0] does
 * not start one.  A byte-wise scan finds exactly the characters Python's
 * UTF-8 decoder would: lead bytes are never continuation bytes, so a
 * match here starts a character there too, even after invalid bytes.
 */
static size_t
space_len(const uint8_t *s, size_t n)
{
	uint8_t c = s[0];

	if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f))
		return 1;
	if (c == 0xc2)
		return n >= 2 && (s[1] == 0x85 || s[1] == 0xa0) ? 2 : 0;
	if (n < 3 || c < 0xe1 || c > 0xe3)
		return 0;
	switch (c) {
	case 0xe1: /* U+1680 */
		return s[1] == 0x9a && s[2] == 0x80 ? 3 : 0;
	case 0xe2: /* U+2000..200A, 2028, 2029, 202F; U+205F */
		if (s[1] == 0x80)
			return (s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 ||
			               s[2] == 0xa9 || s[2] == 0xaf
			           ? 3
			           : 0;
		return s[1] == 0x81 && s[2] == 0x9f ? 3 : 0;
	default: /* 0xe3: U+3000 */
		return s[1] == 0x80 && s[2] == 0x80 ? 3 : 0;
	}
}

size_t
cg_text_token(const uint8_t *s, size_t n, size_t *pos)
{
	size_t i = *pos, j, k;

	while (i < n && (k = space_len(s + i, n - i)) > 0)
		i += k;
	*pos = i;
	for (j = i; j < n && space_len(s + j, n - j) == 0; j++)
		;
	return j - i;
}

static size_t
count_tokens(const uint8_t *s, size_t n)
{
	size_t pos = 0, len, count = 0;

	while ((len = cg_text_token(s, n, &pos)) > 0) {
		count++;
		pos += len;
	}
	return count;
}

struct tok {
	const uint8_t *p;
	size_t len;
	size_t at; /* index into the id array */
};

static int
tok_cmp(const void *x, const void *y)
{
	const struct tok *a = x, *b = y;
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->p, b->p, n) : 0;

	if (c != 0)
		return c;
	return (a->len > b->len) - (a->len < b->len);
}

/*
 * Token ids of a[0..alen) then b[0..blen): *ids [*na + *nb] (the caller
 * frees it; NULL when both have no token), byte-equal tokens getting
 * equal ids below *na + *nb.  Returns 0, or -1 with a message.
 */
static int
token_ids(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
          uint32_t **ids, size_t *na, size_t *nb)
{
	struct tok *t;
	size_t n, k = 0, pos, len;
	uint32_t id = 0;

	*ids = NULL;
	*na = count_tokens(a, alen);
	*nb = count_tokens(b, blen);
	n = *na + *nb;
	if (n >= MAX_TOKENS)
		return cg_seterr("text metrics: %zu tokens: too many", n);
	if (n == 0)
		return 0;
	if ((t = malloc(n * sizeof(*t))) == NULL)
		return cg_seterr("out of memory");
	if ((*ids = malloc(n * sizeof(**ids))) == NULL) {
		free(t);
		return cg_seterr("out of memory");
	}
	for (int side = 0; side < 2; side++) {
		const uint8_t *s = side ? b : a;
		size_t sn = side ? blen : alen;

		for (pos = 0; (len = cg_text_token(s, sn, &pos)) > 0;
		     pos += len) {
			t[k].p = s + pos;
			t[k].len = len;
			t[k].at = k;
			k++;
		}
	}
	qsort(t, n, sizeof(*t), tok_cmp);
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && tok_cmp(&t[i - 1], &t[i]) != 0)
			id++;
		(*ids)[t[i].at] = id;
	}
	free(t);
	return 0;
}

/* --------------------------------------------------------------- BLEU */

/* The ids of the CG_BLEU_N tokens from one position on (NONE past the
 * end): sorted, the positions of any n-gram are adjacent. */
struct gram {
	uint32_t k[CG_BLEU_N];
};

static int
gram_cmp_n(const struct gram *a, const struct gram *b, int n)
{
	for (int j = 0; j < n; j++)
		if (a->k[j] != b->k[j])
			return a->k[j] < b->k[j] ? -1 : 1;
	return 0;
}

static int
gram_cmp(const void *x, const void *y)
{
	return gram_cmp_n(x, y, CG_BLEU_N);
}

/* g [n] from ids [n], sorted. */
static void
make_grams(struct gram *g, const uint32_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < CG_BLEU_N; j++)
			g[i].k[j] = i + j < n ? ids[i + j] : NONE;
	qsort(g, n, sizeof(*g), gram_cmp);
}

/*
 * Clipped matches of order n between sorted h [nh] and r [nr]: the sum
 * over distinct n-grams of min(count in h, count in r).  A position whose
 * n-gram runs past the end (k[n-1] == NONE) is no n-gram.
 */
static uint64_t
clipped(const struct gram *h, size_t nh, const struct gram *r, size_t nr, int n)
{
	size_t i = 0, j = 0;
	uint64_t match = 0;

	while (i < nh) {
		size_t i2 = i + 1, cr = 0;

		if (h[i].k[n - 1] == NONE) {
			i++;
			continue;
		}
		while (i2 < nh && gram_cmp_n(&h[i2], &h[i], n) == 0)
			i2++;
		while (j < nr && (r[j].k[n - 1] == NONE ||
		                  gram_cmp_n(&r[j], &h[i], n) < 0))
			j++;
		while (j < nr && r[j].k[n - 1] != NONE &&
		       gram_cmp_n(&r[j], &h[i], n) == 0) {
			cr++;
			j++;
		}
		match += i2 - i < cr ? i2 - i : cr;
		i = i2;
	}
	return match;
}

int
cg_bleu_add(struct cg_bleu_stats *st, const uint8_t *hyp, size_t hlen,
            const uint8_t *ref, size_t rlen)
{
	uint32_t *ids;
	struct gram *g = NULL;
	size_t nh, nr;

	if (token_ids(hyp, hlen, ref, rlen, &ids, &nh, &nr) != 0)
		return -1;
	if (nh > 0 && nr > 0) {
		if ((g = malloc((nh + nr) * sizeof(*g))) == NULL) {
			free(ids);
			return cg_seterr("out of memory");
		}
		make_grams(g, ids, nh);
		make_grams(g + nh, ids + nh, nr);
		for (int n = 1; n <= CG_BLEU_N; n++)
			st->match[n - 1] += clipped(g, nh, g + nh, nr, n);
	}
	for (int n = 1; n <= CG_BLEU_N; n++)
		st->total[n - 1] += nh >= (size_t)n ? nh - n + 1 : 0;
	st->hyp_len += nh;
	st->ref_len += nr;
	free(g);
	free(ids);
	return 0;
}

/* BLEU of st; smooth: add one to match and total of orders 2 and up. */
static double
bleu(const struct cg_bleu_stats *st, int smooth)
{
	double logp = 0, bp = 1;
	int any = 0;

	/* No match of any order is 0 before smoothing (as sacrebleu). */
	for (int n = 0; n < CG_BLEU_N; n++)
		any |= st->match[n] != 0;
	if (!any || st->hyp_len == 0)
		return 0;
	for (int n = 0; n < CG_BLEU_N; n++) {
		double m = (double)st->match[n], t = (double)st->total[n];

		if (smooth && n > 0) {
			m += 1;
			t += 1;
		}
		if (m == 0 || t == 0)
			return 0;
		logp += log(m / t);
	}
	if (st->hyp_len < st->ref_len)
		bp = exp(1 - (double)st->ref_len / (double)st->hyp_len);
	return bp * exp(logp / CG_BLEU_N);
}

double
cg_bleu_score(const struct cg_bleu_stats *st)
{
	return bleu(st, 0);
}

double
cg_bleu_smoothed(const struct cg_bleu_stats *st)
{
	return bleu(st, 1);
}

/* ------------------------------------------------------------ ROUGE-L */

/* Length of the longest common subsequence of x [nx] and y [ny], ny <=
 * nx, with one row row [ny + 1] of the usual table. */
static size_t
lcs(const uint32_t *x, size_t nx, const uint32_t *y, size_t ny, uint32_t *row)
{
	memset(row, 0, (ny + 1) * sizeof(*row));
	for (size_t i = 0; i < nx; i++) {
		uint32_t diag = 0; /* the previous row's row[j - 1] */

		for (size_t j = 1; j <= ny; j++) {
			uint32_t up = row[j];

			if (x[i] == y[j - 1])
				row[j] = diag + 1;
			else if (row[j - 1] > up)
				row[j] = row[j - 1];
			diag = up;
		}
	}
	return row[ny];
}

int
cg_rouge_l(const uint8_t *hyp, size_t hlen, const uint8_t *ref, size_t rlen,
           double *f1)
{
	uint32_t *ids, *row;
	size_t nh, nr, l;
	double p, r;

	*f1 = 0;
	if (token_ids(hyp, hlen, ref, rlen, &ids, &nh, &nr) != 0)
		return -1;
	if (nh == 0 || nr == 0) {
		free(ids);
		return 0;
	}
	const uint32_t *h = ids, *rf = ids + nh;
	size_t ny = nh < nr ? nh : nr;
	if ((row = malloc((ny + 1) * sizeof(*row))) == NULL) {
		free(ids);
		return cg_seterr("out of memory");
	}
	l = nh < nr ? lcs(rf, nr, h, nh, row) : lcs(h, nh, rf, nr, row);
	free(row);
	free(ids);
	/* rouge-score's formula, so that rounding agrees too. */
	p = (double)l / (double)nh;
	r = (double)l / (double)nr;
	*f1 = p + r > 0 ? 2 * p * r / (p + r) : 0;
	return 0;
}
