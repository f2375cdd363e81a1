/*
 * eval/evalgen.c - generate from a text model and score against references.
 *
 * Example i of a text shard is condition cond[i] and payload p[0..n), of
 * which the first P = prompt_len[i] bytes (0 without prompts) are the
 * prompt and p[P..n) the reference.  The model continues after the
 * condition and the prompt through its arch's sample_text hook; the
 * continuation stops at end-of-text or at the byte budget.  BLEU is the
 * corpus score over all examples (statistics summed, then one score), as
 * BLEU is meant to be used; ROUGE-L F1 is averaged over examples.  One
 * buffer holds the continuation, grown to the largest budget.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/evalgen.h"
#include "eval/textmetrics.h"

#define GEN_TAG 0x67656e6576616cULL /* "geneval" */

struct sink {
	uint8_t *p;
	size_t len, cap;
};

/* The arch stops at max_bytes itself; the check keeps a faulty arch from
 * writing past the buffer. */
static int
put_byte(void *ctx, int byte)
{
	struct sink *k = ctx;

	if (k->len >= k->cap)
		return 1;
	k->p[k->len++] = (uint8_t)byte;
	return 0;
}

int
cg_eval_generate(struct cg_model *m, const struct cg_shard *s,
                 const struct cg_gen_opts *o, struct cg_gen_result *out)
{
	struct cg_bleu_stats st;
	struct sink k = {NULL, 0, 0};
	double rouge = 0;
	uint64_t n;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	memset(&st, 0, sizeof(st));
	if (m->arch->sample_text == NULL)
		return cg_seterr("%s models do not generate text",
		                 m->arch->name);
	if (m->arch->check_data(m, s) != 0)
		return -1;
	n = o->limit > 0 && o->limit < s->n ? o->limit : s->n;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t len, P = s->prompt_len ? s->prompt_len[i] : 0;
		const uint8_t *p = cg_shard_example(s, i, &len);
		struct cg_sampler smp = o->sampler;
		struct cg_rng r;
		double f;
		long got;

		if (smp.max_bytes == 0)
			smp.max_bytes = len - P + CG_GEN_EXTRA < CG_GEN_CAP
			                    ? (size_t)(len - P) + CG_GEN_EXTRA
			                    : CG_GEN_CAP;
		if (smp.max_bytes > k.cap) {
			uint8_t *q = realloc(k.p, smp.max_bytes);
			if (q == NULL) {
				cg_seterr("out of memory");
				goto done;
			}
			k.p = q;
			k.cap = smp.max_bytes;
		}
		k.len = 0;
		cg_rng_derive(&r, o->seed, GEN_TAG, s->index[i]);
		got = m->arch->sample_text(m, (int)s->cond[i], p, (size_t)P,
		                           &smp, &r, put_byte, &k);
		if (got < 0)
			goto done;
		if (cg_bleu_add(&st, k.p, k.len, p + P, (size_t)(len - P)) !=
		        0 ||
		    cg_rouge_l(k.p, k.len, p + P, (size_t)(len - P), &f) != 0)
			goto done;
		rouge += f;
		out->bytes += k.len;
		if (o->progress) {
			/* counted in an int: scaled down past INT_MAX */
			uint64_t tot = n > INT_MAX ? INT_MAX : n;
			o->progress(o->progress_ctx, (int)((i + 1) * tot / n),
			            (int)tot, NAN);
		}
	}
	out->n = n;
	out->bleu = cg_bleu_score(&st);
	out->rouge_l = n > 0 ? rouge / (double)n : 0;
	rc = 0;
done:
	free(k.p);
	return rc;
}
