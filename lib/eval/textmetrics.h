/*
 * eval/textmetrics.h - BLEU and ROUGE-L of a generated text against a
 * reference.
 *
 * Texts are byte arrays (UTF-8 expected, any bytes accepted); scores are
 * doubles in [0, 1], never 0-100.  Both metrics work on the same tokens:
 * the maximal runs of bytes that are not whitespace, whitespace being
 * exactly what Python's str.split() splits on - ASCII \t \n \v \f \r and
 * space, the separators U+001C..U+001F, and U+0085, U+00A0, U+1680,
 * U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 in UTF-8.  No
 * lowercasing or other normalisation; a byte that is not valid UTF-8 is a
 * token byte.  This is sacrebleu's tokenize="none" and what rouge-score
 * does with a str.split() tokenizer, against which tests/textmetrics/
 * vectors.tsv checks this code.
 */
#ifndef CG_TEXTMETRICS_H
#define CG_TEXTMETRICS_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CG_BLEU_N 4 /* longest n-gram */

/*
 * The length of the token of s[0..n) that starts at or after *pos, with
 * *pos moved to its first byte; 0 (and *pos = n) when no token is left.
 * The next call should start at *pos plus the length.
 */
size_t cg_text_token(const uint8_t *s, size_t n, size_t *pos);

/*
 * BLEU's sufficient statistics, summed over the pairs of a corpus (zero
 * the struct to start): for each order n = 1..CG_BLEU_N, match[n-1] is
 * the hypothesis n-grams matched in the reference, each distinct n-gram
 * counted at most as often as the reference has it ("clipped"), and
 * total[n-1] the hypothesis n-grams; hyp_len and ref_len count tokens.
 */
struct cg_bleu_stats {
	uint64_t match[CG_BLEU_N];
	uint64_t total[CG_BLEU_N];
	uint64_t hyp_len, ref_len;
};

/*
 * Add the statistics of hypothesis hyp[0..hlen) against the one reference
 * ref[0..rlen) to st.  Time O(k log k) in the k tokens of both; the
 * memory is O(k), allocated and freed within the call.  Returns 0, or -1
 * with a message (out of memory, or 2^31 tokens or more) and st
 * unchanged.
 */
int cg_bleu_add(struct cg_bleu_stats *st, const uint8_t *hyp, size_t hlen,
                const uint8_t *ref, size_t rlen);

/*
 * Corpus BLEU (Papineni et al., 2002) of st: BP * exp(mean over n of log
 * p_n), p_n = match / total, BP = 1 when hyp_len >= ref_len, else
 * exp(1 - ref_len / hyp_len).  Unsmoothed: 0 if any p_n is 0 or has no
 * n-grams (no matches at all, a hypothesis shorter than 4 tokens) or the
 * hypotheses are empty.  As sacrebleu's corpus_score with smooth_method
 * "none", divided by 100.
 */
double cg_bleu_score(const struct cg_bleu_stats *st);

/*
 * Sentence-level BLEU of st (one pair's statistics), smoothed "add-1"
 * after Lin and Och (2004) - method 2 of Chen and Cherry (2014),
 * sacrebleu's smooth_method "add-k" with k = 1: p_1 = match / total as
 * above, p_n = (match + 1) / (total + 1) for n >= 2, so that a short or
 * partly right hypothesis scores above 0.  0 when the hypothesis is empty
 * or no unigram matches.
 */
double cg_bleu_smoothed(const struct cg_bleu_stats *st);

/*
 * ROUGE-L F1 (Lin, 2004) of hypothesis hyp against reference ref: with L
 * the length of their longest common token subsequence, P = L / hyp
 * tokens, R = L / ref tokens, F = 2PR / (P + R) (beta = 1); 0 when either
 * text has no tokens or L = 0, as in rouge-score.  Time O(m n), memory
 * O(m + n) for the tokens and O(min(m, n)) for the LCS.  Returns 0 with
 * *f1 set, or -1 with a message (as cg_bleu_add).
 */
int cg_rouge_l(const uint8_t *hyp, size_t hlen, const uint8_t *ref, size_t rlen,
               double *f1);

#ifdef __cplusplus
}
#endif
#endif
