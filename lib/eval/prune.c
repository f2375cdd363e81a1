/*
 * eval/prune.c - which weights to prune: scores, rankings, calibration.
 *
 * Every ranking is a sort of (score, position) pairs, so that ties go to
 * the lower position and the mask is a function of the scores alone.  A
 * weight the model already prunes scores -1, below any real score (all
 * are >= 0): pruning a pruned model keeps what it pruned and counts it.
 * The new mask is built beside the model's and put in place only when
 * complete.
 *
 * Wanda (Sun et al. 2023, "A Simple and Effective Pruning Approach for
 * Large Language Models") scores w_ij by |w_ij| times the L2 norm of the
 * layer's input column j over calibration rows, and compares weights
 * within each output row i; the norms come from the arch's input_sq.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "eval/prune.h"

const char *const cg_importance_names[] = {"magnitude", "wanda", "grad", NULL};

int
cg_importance_parse(const char *s, enum cg_importance *out)
{
	int i = cg_name_index(cg_importance_names, 0, 2, s);

	if (i < 0)
		return cg_seterr("--importance: '%s' is not magnitude, wanda "
		                 "or grad",
		                 s);
	*out = (enum cg_importance)i;
	return 0;
}

const char *
cg_importance_name(enum cg_importance i)
{
	return (unsigned)i <= CG_IMPORTANCE_GRAD ? cg_importance_names[i] : "?";
}

/* ---------------------------------------------------------------- scores */

int
cg_prune_scores(const struct cg_model *m, enum cg_importance imp,
                const float *g, const double *sq, float *score)
{
	size_t *off = cg_alloc((size_t)m->nviews * sizeof(*off));

	if (off == NULL)
		return -1;
	cg_model_input_cols(m, off);
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		if (!cg_model_prunable(m, i))
			continue;
		const size_t OC = v->shape[0], IC = v->shape[1];
		for (size_t r = 0; r < OC; r++)
			for (size_t j = 0; j < IC; j++) {
				size_t p = v->off + r * IC + j;
				double w = fabs((double)m->params[p]), x;
				switch (imp) {
				case CG_IMPORTANCE_WANDA:
					x = w * sqrt(sq[off[i] + j]);
					break;
				case CG_IMPORTANCE_GRAD:
					x = fabs((double)m->params[p] * g[p]);
					break;
				default:
					x = w;
					break;
				}
				/* nan (and a negative sum) count as 0 */
				score[p] = x >= 0 ? (float)x : 0.0f;
			}
	}
	free(off);
	return 0;
}

/* ------------------------------------------------------------- rankings */

struct rank {
	float s;
	size_t p; /* the weight's position in the flat buffer */
};

static int
cmp_rank(const void *a, const void *b)
{
	const struct rank *x = a, *y = b;

	if (x->s != y->s)
		return x->s < y->s ? -1 : 1;
	return (x->p > y->p) - (x->p < y->p);
}

/* round(x * n), to the nearest, halves up, within [0, n]. */
static size_t
count_of(double x, size_t n)
{
	double k = floor(x * (double)n + 0.5);

	return k <= 0 ? 0 : k >= (double)n ? n : (size_t)k;
}

static int
pruned_in(const uint8_t *mk, size_t p)
{
	return !(mk[p / 8] >> (p % 8) & 1);
}

static void
prune_at(uint8_t *mk, size_t p)
{
	mk[p / 8] &= (uint8_t) ~(1u << (p % 8));
}

/* The pair of weight p, scored -1 when the mask already prunes it. */
static struct rank
pair(const uint8_t *mk, const float *score, size_t p)
{
	struct rank r = {pruned_in(mk, p) ? -1.0f : score[p], p};

	return r;
}

/* Sort r [n] and prune its first k. */
static void
prune_lowest(uint8_t *mk, struct rank *r, size_t n, size_t k)
{
	qsort(r, n, sizeof(*r), cmp_rank);
	for (size_t i = 0; i < k; i++)
		prune_at(mk, r[i].p);
}

static int
check_opts(const struct cg_model *m, const struct cg_prune_opts *o,
           const unsigned char *chosen)
{
	if (o->nm_m) {
		if (o->nm_n < 1 || o->nm_n >= o->nm_m || o->nm_m > 256)
			return cg_seterr("N:M = %d:%d: not 1 <= N < M <= 256",
			                 o->nm_n, o->nm_m);
		if (o->global || o->per_row)
			return cg_seterr("N:M ranks within each run of M "
			                 "weights: not globally or per row");
	} else {
		if (!(o->sparsity >= 0 && o->sparsity <= 1))
			return cg_seterr("sparsity %g: not in [0, 1]",
			                 o->sparsity);
		if (o->global && o->per_row)
			return cg_seterr("a ranking is global or per row, not "
			                 "both");
	}
	for (int i = 0; i < m->nviews; i++)
		if (chosen[i] && !cg_model_prunable(m, i))
			return cg_seterr("tensor %s cannot be pruned",
			                 m->views[i].name);
	return 0;
}

int
cg_prune_apply(struct cg_model *m, const struct cg_prune_opts *o,
               const unsigned char *chosen, const float *score)
{
	const size_t nb = (m->nparams + 7) / 8;
	struct rank *r = NULL;
	uint8_t *mk = NULL;
	size_t most = 0, total = 0, at = 0;
	int rc = -1;

	if (check_opts(m, o, chosen) != 0)
		return -1;
	/* the largest ranking: a run, a row, a view or all of them */
	for (int i = 0; i < m->nviews; i++)
		if (chosen[i]) {
			size_t n = o->nm_m      ? (size_t)o->nm_m
			           : o->per_row ? m->views[i].shape[1]
			                        : m->views[i].n;
			total += m->views[i].n;
			most = n > most ? n : most;
		}
	if (o->global)
		most = total;
	if ((mk = cg_alloc(nb)) == NULL ||
	    (r = cg_alloc((most ? most : 1) * sizeof(*r))) == NULL)
		goto out;
	if (m->mask)
		memcpy(mk, m->mask, nb);
	else
		memset(mk, 0xff, nb);

	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		const size_t OC = v->shape[0], IC = v->shape[1];
		if (!chosen[i])
			continue;
		if (o->nm_m) {
			const size_t M = (size_t)o->nm_m, N = (size_t)o->nm_n;
			for (size_t row = 0; row < OC; row++)
				for (size_t g = 0; g < IC; g += M) {
					size_t len = IC - g < M ? IC - g : M;
					size_t p0 = v->off + row * IC + g;
					for (size_t j = 0; j < len; j++)
						r[j] = pair(mk, score, p0 + j);
					prune_lowest(mk, r, len,
					             len > N ? len - N : 0);
				}
		} else if (o->per_row) {
			size_t k = count_of(o->sparsity, IC);
			for (size_t row = 0; row < OC; row++) {
				size_t p0 = v->off + row * IC;
				for (size_t j = 0; j < IC; j++)
					r[j] = pair(mk, score, p0 + j);
				prune_lowest(mk, r, IC, k);
			}
		} else if (o->global) {
			for (size_t j = 0; j < v->n; j++)
				r[at++] = pair(mk, score, v->off + j);
		} else {
			for (size_t j = 0; j < v->n; j++)
				r[j] = pair(mk, score, v->off + j);
			prune_lowest(mk, r, v->n, count_of(o->sparsity, v->n));
		}
	}
	if (o->global)
		prune_lowest(mk, r, at, count_of(o->sparsity, at));
	free(m->mask);
	m->mask = mk;
	mk = NULL;
	cg_model_mask_all(m);
	rc = 0;
out:
	free(mk);
	free(r);
	return rc;
}

/* ----------------------------------------------------------- calibration */

#define CALIB_TAG 0x63616c6962ULL /* "calib" */

int
cg_prune_input_sq(struct cg_model *m, const struct cg_shard *s, uint64_t n,
                  int B, uint64_t seed, double **sq, uint64_t *rows)
{
	size_t *off = NULL, ncols;
	uint64_t *idx = NULL, N;
	double *acc = NULL;
	struct cg_rng r;
	int rc = -1;

	*sq = NULL;
	*rows = 0;
	if (m->arch->input_sq == NULL)
		return cg_seterr("%s has no calibration pass: Wanda's "
		                 "importance is not available for it",
		                 m->arch->name);
	if (B < 1)
		return cg_seterr("batch %d: not positive", B);
	if (s->n == 0)
		return cg_seterr("the shard holds no examples");
	if (m->arch->check_data(m, s) != 0)
		return -1;
	N = n == 0 || n >= s->n ? s->n : n;
	if ((off = cg_alloc((size_t)m->nviews * sizeof(*off))) == NULL ||
	    (idx = cg_alloc((size_t)s->n * sizeof(*idx))) == NULL)
		goto out;
	ncols = cg_model_input_cols(m, off);
	if ((acc = cg_alloc((ncols ? ncols : 1) * sizeof(*acc))) == NULL)
		goto out;
	for (uint64_t i = 0; i < s->n; i++)
		idx[i] = i;
	/* the first N of a Fisher-Yates shuffle: N drawn without
	 * replacement */
	cg_rng_derive(&r, seed, CALIB_TAG, 0);
	if (N < s->n)
		for (uint64_t i = 0; i < N; i++) {
			uint64_t j = i + cg_rng_below(&r, s->n - i);
			uint64_t t = idx[i];
			idx[i] = idx[j];
			idx[j] = t;
		}
	uint64_t nseed = cg_rng_u64(&r);
	for (uint64_t b0 = 0; b0 < N; b0 += (uint64_t)B) {
		int nb = N - b0 < (uint64_t)B ? (int)(N - b0) : B;
		if (m->arch->input_sq(m, s, idx + b0, nb, nseed, acc, rows) !=
		    0)
			goto out;
	}
	*sq = acc;
	acc = NULL;
	rc = 0;
out:
	free(off);
	free(idx);
	free(acc);
	return rc;
}

/* ---------------------------------------------- which views, the record */

int
cg_prune_choose(const struct cg_model *m, const char *const *exclude,
                int nexclude, unsigned char *chosen)
{
	for (int i = 0; i < m->nviews; i++)
		chosen[i] = (unsigned char)cg_model_prunable(m, i);
	for (int k = 0; k < nexclude; k++) {
		int hit = 0;
		for (int i = 0; i < m->nviews; i++)
			if (chosen[i] < 2 && cg_model_prunable(m, i) &&
			    fnmatch(exclude[k], m->views[i].name, 0) == 0) {
				chosen[i] = 2; /* excluded */
				hit = 1;
			}
		if (!hit)
			return k;
	}
	for (int i = 0; i < m->nviews; i++)
		chosen[i] = chosen[i] == 1;
	return nexclude;
}

void
cg_prune_record(struct cg_model *m, enum cg_importance imp,
                const struct cg_prune_opts *o)
{
	cJSON *r;
	char nm[32];

	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "pruning");
	if ((r = cJSON_AddObjectToObject(m->manifest, "pruning")) == NULL)
		return;
	cJSON_AddStringToObject(r, "importance", cg_importance_name(imp));
	if (o->nm_m) {
		snprintf(nm, sizeof(nm), "%d:%d", o->nm_n, o->nm_m);
		cJSON_AddStringToObject(r, "nm", nm);
	} else {
		cJSON_AddNumberToObject(r, "sparsity", o->sparsity);
		cJSON_AddBoolToObject(r, "global", o->global);
		if (!o->global)
			cJSON_AddStringToObject(r, "group",
			                        o->per_row ? "row" : "tensor");
	}
	cJSON_AddNumberToObject(r, "pruned", (double)cg_model_pruned(m, -1));
}

/* ------------------------------------------------ structured pruning */

int
cg_prune_structures(const struct cg_arch *a, const char *list, double remove,
                    double *out)
{
	char names[128] = "", *save = NULL, *tok, *buf;
	int n = 0;

	for (int k = 0; k < CG_ARCH_MAX_STRUCTURES; k++)
		out[k] = 0;
	if (a->shrink == NULL || a->structures == NULL)
		return cg_seterr("%s models have no structures to remove "
		                 "(-s or --nm prune their weights)",
		                 a->name);
	if (!(remove >= 0 && remove < 1))
		return cg_seterr("--remove %g: not in [0, 1)", remove);
	for (; a->structures[n] != NULL && n < CG_ARCH_MAX_STRUCTURES; n++)
		snprintf(names + strlen(names), sizeof(names) - strlen(names),
		         "%s%s", n ? ", " : "", a->structures[n]);
	if ((buf = strdup(list)) == NULL)
		return cg_seterr("out of memory");
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		int k = 0;
		while (k < n && strcmp(a->structures[k], tok) != 0)
			k++;
		if (k == n) {
			cg_seterr("--structured '%s': %s models have %s", tok,
			          a->name, names);
			free(buf);
			return -1;
		}
		out[k] = remove;
	}
	free(buf);
	return 0;
}

/* m's manifest's "pruning" record of remove; 0 or -1 (no memory). */
static int
shrink_record(struct cg_model *m, const double *remove, size_t params,
              int zeroed)
{
	cJSON *r, *st;

	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "pruning");
	if ((r = cJSON_AddObjectToObject(m->manifest, "pruning")) == NULL ||
	    (st = cJSON_AddObjectToObject(r, "structures")) == NULL)
		return cg_seterr("out of memory");
	for (int k = 0; m->arch->structures[k] != NULL; k++)
		if (remove[k] > 0 &&
		    !cJSON_AddNumberToObject(st, m->arch->structures[k],
		                             remove[k]))
			return cg_seterr("out of memory");
	if (zeroed ? !cJSON_AddTrueToObject(r, "zeroed")
	           : !cJSON_AddNumberToObject(r, "params", (double)params))
		return cg_seterr("out of memory");
	return 0;
}

struct cg_model *
cg_prune_shrink(struct cg_model *m, const double *remove, int keep_shape)
{
	const struct cg_arch *a = m->arch;
	struct cg_model *small = NULL;
	cJSON *man = NULL, *config;

	if (a->shrink == NULL)
		return cg_seterr("%s models have no structures to remove",
		                 a->name),
		       NULL;
	if (m->lora)
		return cg_seterr("a model with adapters: merge them first "
		                 "(cg-convert --merge-lora)"),
		       NULL;
	if (m->mask)
		return cg_seterr("a model pruned weight by weight (a mask): "
		                 "remove structures from the dense one"),
		       NULL;
	if (keep_shape) {
		if (a->shrink(m, remove, NULL, NULL) != 0 ||
		    shrink_record(m, remove, m->nparams, 1) != 0)
			return NULL;
		return m;
	}
	if ((man = cJSON_Duplicate(m->manifest, 1)) == NULL)
		goto oom;
	/* no optimizer state: a fresh start, as cg_model_create's */
	cJSON_DeleteItemFromObjectCaseSensitive(man, "step");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "opt_t");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "groups");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "loss");
	if ((config = cJSON_DetachItemFromObjectCaseSensitive(man, "config")) ==
	    NULL)
		goto oom;
	if (a->shrink(m, remove, config, NULL) != 0) {
		cJSON_Delete(config);
		cJSON_Delete(man);
		return NULL;
	}
	small = cg_model_create(a->name, config, man,
	                        cg_json_u64(m->manifest, "seed", 0));
	if (small == NULL || a->shrink(m, remove, NULL, small) != 0 ||
	    shrink_record(small, remove, m->nparams, 0) != 0) {
		cg_model_free(small);
		return NULL;
	}
	return small;
oom:
	cJSON_Delete(man);
	cg_seterr("out of memory");
	return NULL;
}
