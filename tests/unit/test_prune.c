/*
 * test_prune.c - pruning: the mask in files (good and hostile), the
 * loader's forcing of masked weights to zero, the scores, the rankings'
 * exact counts (per tensor, global, per row, N:M), and the archs'
 * input_sq against a direct computation of what reaches each layer.
 */
#define TEST_NAME "test_prune"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "arch/cgpt/cgpt.h"
#include "arch/cvae/cvae.h"
#include "check.h"
#include "shards.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "data/split.h"
#include "eval/prune.h"
#include "exchange/apply.h"
#include "exchange/update.h"
#include "model/model.h"
#include "nn/nn.h"
#include "nn/transformer.h"
#include "train/train.h"

/* ------------------------------------------------------------- models */

static struct cg_model *
cgpt_model(int C, int L, int T, int tied, uint64_t seed)
{
	cJSON *cfg = cJSON_CreateObject();
	struct cg_model *m;

	cJSON_AddNumberToObject(cfg, "ncond", 3);
	cJSON_AddNumberToObject(cfg, "context", T);
	cJSON_AddNumberToObject(cfg, "width", C);
	cJSON_AddNumberToObject(cfg, "layers", L);
	cJSON_AddNumberToObject(cfg, "heads", 2);
	cJSON_AddNumberToObject(cfg, "tied", tied);
	if ((m = cg_model_create("cgpt", cfg, NULL, seed)) == NULL)
		die("cg_model_create cgpt");
	/* away from the init: biases and gains matter */
	struct cg_rng r;
	cg_rng_seed(&r, seed + 100);
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] += 0.1f * cg_rng_normal(&r);
	return m;
}

static struct cg_model *
cvae_model(int in_dim, int hidden, int layers, int latent, uint64_t seed)
{
	cJSON *cfg = cJSON_CreateObject();
	struct cg_model *m;

	cJSON_AddNumberToObject(cfg, "in_dim", in_dim);
	cJSON_AddNumberToObject(cfg, "ncond", 3);
	cJSON_AddNumberToObject(cfg, "hidden", hidden);
	cJSON_AddNumberToObject(cfg, "layers", layers);
	cJSON_AddNumberToObject(cfg, "latent", latent);
	if ((m = cg_model_create("cvae", cfg, NULL, seed)) == NULL)
		die("cg_model_create cvae");
	return m;
}

static int
view_of(const struct cg_model *m, const char *name)
{
	for (int i = 0; i < m->nviews; i++)
		if (strcmp(m->views[i].name, name) == 0)
			return i;
	fprintf(stderr, TEST_NAME ": no view %s\n", name);
	exit(1);
}

static const float *
W(const struct cg_model *m, const char *name)
{
	return m->params + m->views[view_of(m, name)].off;
}

/* Every prunable view chosen. */
static unsigned char *
all_prunable(const struct cg_model *m)
{
	unsigned char *c = xcalloc((size_t)m->nviews, 1);

	for (int i = 0; i < m->nviews; i++)
		c[i] = (unsigned char)cg_model_prunable(m, i);
	return c;
}

/* ------------------------------------------------------ the prunable rule */

static void
test_rule(void)
{
	struct cg_model *g = cgpt_model(8, 2, 8, 0, 1);
	struct cg_model *t = cgpt_model(8, 1, 8, 1, 1);
	struct cg_model *v = cvae_model(10, 6, 2, 2, 1);
	int ok = 1;

	for (int i = 0; i < g->nviews; i++) {
		const char *n = g->views[i].name;
		int want = strstr(n, ".w") && !strstr(n, "ln") &&
		           strcmp(n, "wte") && strcmp(n, "wpe");
		want = want || strcmp(n, "lm_head.w") == 0;
		if (cg_model_prunable(g, i) != want) {
			fprintf(stderr, "cgpt %s: prunable %d\n", n, !want);
			ok = 0;
		}
	}
	expect(ok, "cgpt: the Linear weights and lm_head.w are prunable; "
	           "embeddings, norms and biases are not");
	expect(!cg_model_prunable(t, view_of(t, "wte")),
	       "cgpt tied: wte, the output too, is an embedding: not prunable");
	ok = 1;
	for (int i = 0; i < v->nviews; i++) {
		size_t len = strlen(v->views[i].name);
		int want = v->views[i].name[len - 1] == 'w';
		ok &= cg_model_prunable(v, i) == want;
	}
	expect(ok, "cvae: every .w is prunable, no .b");
	cg_model_free(g);
	cg_model_free(t);
	cg_model_free(v);
}

/* ------------------------------------------------------------ rankings */

/* Whether every pruned weight of [lo, hi) scores at most every kept
 * one (ties allowed). */
static int
lowest_pruned(const struct cg_model *m, const float *sc, size_t lo, size_t hi,
              size_t stride, size_t n_in_row, size_t rows)
{
	for (size_t r = 0; r < rows; r++) {
		float maxp = -1, mink = INFINITY;
		for (size_t j = 0; j < n_in_row; j++) {
			size_t p = lo + r * stride + j;
			if (p >= hi)
				return 0;
			if (cg_model_pruned_at(m, p))
				maxp = sc[p] > maxp ? sc[p] : maxp;
			else
				mink = sc[p] < mink ? sc[p] : mink;
		}
		if (maxp > mink)
			return 0;
	}
	return 1;
}

static void
test_per_tensor(void)
{
	struct cg_model *m = cvae_model(10, 6, 2, 3, 2);
	unsigned char *ch = all_prunable(m);
	float *sc = xcalloc(m->nparams, sizeof(float));
	struct cg_prune_opts o = {.sparsity = 0.5};
	int counts = 1, order = 1, dense = 1;

	if (cg_prune_scores(m, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc) != 0 ||
	    cg_prune_apply(m, &o, ch, sc) != 0)
		die("prune");
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		uint64_t want = ch[i] ? (uint64_t)floor(0.5 * v->n + 0.5) : 0;
		if (cg_model_pruned(m, i) != want) {
			fprintf(stderr, "%s: %llu pruned, want %llu\n", v->name,
			        (unsigned long long)cg_model_pruned(m, i),
			        (unsigned long long)want);
			counts = 0;
		}
		if (ch[i])
			order &= lowest_pruned(m, sc, v->off, v->off + v->n,
			                       v->n, v->n, 1);
		for (size_t j = 0; j < v->n; j++)
			if (cg_model_pruned_at(m, v->off + j))
				dense &= m->params[v->off + j] == 0.0f;
	}
	expect(counts, "per tensor 0.5: round(0.5 n) of each prunable view, "
	               "none elsewhere");
	expect(order, "per tensor: the pruned have the lowest |w|");
	expect(dense, "every pruned weight is 0.0");

	/* again at 0.7 (an odd count: 0.7 * 78 = 54.6 -> 55): the earlier
	 * pruned stay and count */
	unsigned char *was = xcalloc(m->nparams, 1);
	for (size_t p = 0; p < m->nparams; p++)
		was[p] = (unsigned char)cg_model_pruned_at(m, p);
	o.sparsity = 0.7;
	cg_prune_scores(m, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc);
	if (cg_prune_apply(m, &o, ch, sc) != 0)
		die("prune again");
	int kept = 1;
	counts = 1;
	for (size_t p = 0; p < m->nparams; p++)
		kept &= !was[p] || cg_model_pruned_at(m, p);
	for (int i = 0; i < m->nviews; i++)
		if (ch[i])
			counts &= cg_model_pruned(m, i) ==
			          (uint64_t)floor(0.7 * m->views[i].n + 0.5);
	expect(kept && counts, "pruned again at 0.7: what was pruned stays, "
	                       "round(0.7 n) in all");
	free(was);
	free(sc);
	free(ch);
	cg_model_free(m);
}

static void
test_global(void)
{
	struct cg_model *m = cvae_model(10, 6, 2, 3, 3);
	unsigned char *ch = all_prunable(m);
	float *sc = xcalloc(m->nparams, sizeof(float));
	struct cg_prune_opts o = {.sparsity = 0.3, .global = 1};
	uint64_t N = 0, pruned = 0;
	float maxp = -1, mink = INFINITY;

	/* make the layers' scales differ, so global and per tensor part */
	for (int i = 0; i < m->nviews; i++)
		for (size_t j = 0; j < m->views[i].n; j++)
			m->params[m->views[i].off + j] *= (float)(i + 1);
	cg_prune_scores(m, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc);
	if (cg_prune_apply(m, &o, ch, sc) != 0)
		die("prune global");
	int uneven = 0;
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		if (!ch[i])
			continue;
		N += v->n;
		pruned += cg_model_pruned(m, i);
		uneven |=
		    cg_model_pruned(m, i) != (uint64_t)floor(0.3 * v->n + 0.5);
		for (size_t j = 0; j < v->n; j++) {
			size_t p = v->off + j;
			if (cg_model_pruned_at(m, p))
				maxp = sc[p] > maxp ? sc[p] : maxp;
			else
				mink = sc[p] < mink ? sc[p] : mink;
		}
	}
	printf("     global: %llu of %llu pruned\n", (unsigned long long)pruned,
	       (unsigned long long)N);
	expect(pruned == (uint64_t)floor(0.3 * N + 0.5),
	       "global 0.3: round(0.3 N) of all N prunable weights");
	expect(maxp <= mink, "global: one threshold over every view");
	expect(uneven, "global: the views lose different fractions");
	free(sc);
	free(ch);
	cg_model_free(m);
}

static void
test_per_row_and_nm(void)
{
	struct cg_model *m = cvae_model(10, 6, 1, 3, 4);
	unsigned char *ch = all_prunable(m);
	float *sc = xcalloc(m->nparams, sizeof(float));
	struct cg_prune_opts o = {.sparsity = 0.4, .per_row = 1};
	int rows = 1, order = 1;

	cg_prune_scores(m, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc);
	if (cg_prune_apply(m, &o, ch, sc) != 0)
		die("prune per row");
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		if (!ch[i])
			continue;
		size_t OC = v->shape[0], IC = v->shape[1];
		uint64_t k = (uint64_t)floor(0.4 * IC + 0.5);
		for (size_t r = 0; r < OC; r++) {
			uint64_t n = 0;
			for (size_t j = 0; j < IC; j++)
				n += cg_model_pruned_at(m, v->off + r * IC + j);
			rows &= n == k;
		}
		order &=
		    lowest_pruned(m, sc, v->off, v->off + v->n, IC, IC, OC);
	}
	expect(rows, "per row 0.4: round(0.4 IC) of every row");
	expect(order, "per row: the lowest of each row");
	cg_model_free(m);

	/* 2:4 on rows of 13 (enc.0: 10 pixels + 3 conditions) and 6 */
	m = cvae_model(10, 6, 1, 3, 5);
	struct cg_prune_opts nm = {.nm_n = 2, .nm_m = 4};
	cg_prune_scores(m, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc);
	if (cg_prune_apply(m, &nm, ch, sc) != 0)
		die("prune 2:4");
	int groups = 1;
	order = 1;
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		if (!ch[i])
			continue;
		size_t OC = v->shape[0], IC = v->shape[1];
		for (size_t r = 0; r < OC; r++)
			for (size_t g = 0; g < IC; g += 4) {
				size_t len = IC - g < 4 ? IC - g : 4;
				size_t p0 = v->off + r * IC + g, n = 0;
				for (size_t j = 0; j < len; j++)
					n += cg_model_pruned_at(m, p0 + j);
				groups &= n == (len > 2 ? len - 2 : 0);
				order &= lowest_pruned(m, sc, p0, p0 + len, len,
				                       len, 1);
			}
	}
	expect(groups, "2:4: exactly 2 of each run of 4 along each row (a "
	               "last run of 1 keeps it, of 3 loses 1)");
	expect(order, "2:4: the 2 lowest of each run");
	expect(cg_model_pruned(m, view_of(m, "enc.0.w")) == 6 * (3 * 2 + 0),
	       "2:4 on 6 rows of 13: 6 per row");

	struct cg_prune_opts bad = {.nm_n = 4, .nm_m = 4};
	expect(cg_prune_apply(m, &bad, ch, sc) == -1, "4:4 is refused");
	bad = (struct cg_prune_opts){.sparsity = 1.5};
	expect(cg_prune_apply(m, &bad, ch, sc) == -1, "sparsity 1.5 refused");
	ch[view_of(m, "enc.0.b")] = 1;
	bad = (struct cg_prune_opts){.sparsity = 0.5};
	expect(cg_prune_apply(m, &bad, ch, sc) == -1 &&
	           strstr(cg_errmsg(), "enc.0.b cannot be pruned"),
	       "a bias chosen: refused");
	free(sc);
	free(ch);
	cg_model_free(m);
}

/* --------------------------------------------------------------- scores */

static void
test_scores(void)
{
	struct cg_model *m = cgpt_model(8, 1, 8, 0, 6);
	float *sc = xcalloc(m->nparams, sizeof(float));
	float *g = xcalloc(m->nparams, sizeof(float));
	size_t *off = xcalloc((size_t)m->nviews, sizeof(size_t));
	size_t ncols = cg_model_input_cols(m, off);
	double *sq = xcalloc(ncols, sizeof(double));
	struct cg_rng r;
	int mag = 1, wan = 1, grd = 1, untouched = 1;

	cg_rng_seed(&r, 9);
	for (size_t i = 0; i < ncols; i++)
		sq[i] = 5 * cg_rng_uniform(&r);
	for (size_t i = 0; i < m->nparams; i++)
		g[i] = cg_rng_normal(&r);
	for (size_t i = 0; i < m->nparams; i++)
		sc[i] = -7;
	cg_prune_scores(m, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc);
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		for (size_t j = 0; j < v->n; j++) {
			float w = m->params[v->off + j];
			if (cg_model_prunable(m, i))
				mag &= sc[v->off + j] == fabsf(w);
			else
				untouched &= sc[v->off + j] == -7;
		}
	}
	expect(mag, "magnitude: |w|");
	expect(untouched, "scores: views that cannot be pruned left alone");
	cg_prune_scores(m, CG_IMPORTANCE_WANDA, NULL, sq, sc);
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		if (!cg_model_prunable(m, i))
			continue;
		size_t IC = v->shape[1];
		for (size_t j = 0; j < v->n; j++) {
			double want = fabs((double)m->params[v->off + j]) *
			              sqrt(sq[off[i] + j % IC]);
			wan &= fabs(sc[v->off + j] - want) <= 1e-6 * want;
		}
	}
	expect(wan, "wanda: |w_ij| sqrt(sum x_j^2), column j of the input");
	cg_prune_scores(m, CG_IMPORTANCE_GRAD, g, NULL, sc);
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		if (!cg_model_prunable(m, i))
			continue;
		for (size_t j = 0; j < v->n; j++) {
			size_t p = v->off + j;
			double want = fabs((double)m->params[p] * g[p]);
			grd &= fabs(sc[p] - want) <= 1e-6 * want;
		}
	}
	expect(grd, "grad: |w g|");
	m->params[m->views[view_of(m, "h.0.mlp.fc.w")].off] = NAN;
	cg_prune_scores(m, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc);
	expect(sc[m->views[view_of(m, "h.0.mlp.fc.w")].off] == 0,
	       "a nan weight scores 0");
	free(sq);
	free(off);
	free(g);
	free(sc);
	cg_model_free(m);
}

/* ----------------------------------------------------------- the file */

/* m written to a cg file and read back, as a program would. */
static struct cg_model *
round_trip(struct cg_model *m)
{
	char path[] = "/tmp/test_prune.XXXXXX";
	int fd = mkstemp(path);
	struct cg_model *b;

	if (fd < 0)
		die("mkstemp");
	if (cg_model_write(m, path, CG_COMPRESS_NONE) != 0)
		die("cg_model_write");
	b = cg_model_read(path);
	remove(path);
	return b;
}

/* A file of m (no mask) with one more tensor, name dtype [n] bytes. */
static struct cg_model *
with_mask(struct cg_model *m, const char *name, enum cg_dtype dt, uint64_t n,
          unsigned fill)
{
	struct cg_file *f = cg_model_file(m);
	struct cg_tensor *t;
	struct cg_model *b;

	if (f == NULL || (t = cg_file_add_zero(f, name, dt, 1, &n)) == NULL)
		die("with_mask");
	memset(t->data, (int)fill, t->nbytes);
	b = cg_model_from_file(f, "hostile.cgm");
	cg_file_free(f);
	return b;
}

static void
test_file(void)
{
	struct cg_model *m = cgpt_model(8, 1, 8, 0, 7);
	unsigned char *ch = all_prunable(m);
	float *sc = xcalloc(m->nparams, sizeof(float));
	struct cg_prune_opts o = {.sparsity = 0.5};

	if (cg_model_ensure_opt(m, 1, 1) != 0)
		die("ensure_opt");
	for (size_t i = 0; i < m->nparams; i++)
		m->opt_m[i] = m->opt_v[i] = 1;
	cg_prune_scores(m, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc);
	cg_prune_apply(m, &o, ch, sc);
	int moments = 1;
	for (size_t i = 0; i < m->nparams; i++)
		moments &= cg_model_pruned_at(m, i)
		               ? m->opt_m[i] == 0 && m->opt_v[i] == 0
		               : m->opt_m[i] == 1;
	expect(moments, "pruning zeroes the moments of the pruned weights");

	struct cg_model *b = round_trip(m);
	expect(b && b->mask &&
	           memcmp(b->mask, m->mask, (m->nparams + 7) / 8) == 0 &&
	           memcmp(b->params, m->params, m->nparams * 4) == 0,
	       "the mask and the weights survive a file");
	cg_model_free(b);

	struct cg_file *f = cg_model_file(m);
	int names = 1, nmask = 0;
	for (size_t k = 0; f && k < f->ntensors; k++) {
		const struct cg_tensor *t = f->tensors[k];
		if (strncmp(t->name, "mask.", 5))
			continue;
		int i = view_of(m, t->name + 5);
		nmask++;
		names &= cg_model_prunable(m, i) && t->dtype == CG_U8 &&
		         t->ndim == 1 && t->shape[0] == (m->views[i].n + 7) / 8;
		/* bit j of byte j/8 set where weight j is kept */
		const uint8_t *bits = t->data;
		for (size_t j = 0; j < m->views[i].n; j++)
			names &= (bits[j / 8] >> (j % 8) & 1) ==
			         !cg_model_pruned_at(m, m->views[i].off + j);
	}
	expect(
	    names && nmask == 5,
	    "one u8 mask [ceil(n/8)] per pruned view, bit j = weight j kept");

	/* the loader forces the masked weights to 0: a file whose weights
	 * are not (a 4-bit dtype keeps no exact zero) reads as 0 */
	size_t p = 0;
	while (!cg_model_pruned_at(m, p))
		p++;
	float saved = m->params[p];
	m->params[p] = 0.25f; /* the file borrows the model's arrays */
	b = cg_model_from_file(f, "forced.cgm");
	expect(b && b->params[p] == 0.0f && m->params[p] == 0.25f,
	       "a masked weight stored as 0.25 loads as 0.0");
	m->params[p] = saved;
	unsigned char digest_m[32], digest_f[32];
	cg_model_digest(b, digest_m);
	m->params[p] = 0.25f;
	expect(cg_model_file_digest(f, digest_f) == 0 &&
	           memcmp(digest_m, digest_f, 32) == 0,
	       "a file's digest is of its weights as loaded, masked");
	m->params[p] = saved;
	cg_model_free(b);
	cg_file_free(f);

	/* hostile masks, each refused with a message naming it */
	struct cg_model *d = cgpt_model(8, 1, 8, 0, 7);
	size_t nq = (d->views[view_of(d, "h.0.attn.qkv.w")].n + 7) / 8;
	struct {
		const char *name;
		enum cg_dtype dt;
		uint64_t n;
		unsigned fill;
		const char *msg;
	} bad[] = {
	    {"mask.h.0.attn.qkv.w", CG_U16, nq, 0xff, "expected u8 ["},
	    {"mask.h.0.attn.qkv.w", CG_U8, nq - 1, 0xff, "expected u8 ["},
	    {"mask.h.0.attn.qkv.w", CG_U8, nq + 1, 0xff, "expected u8 ["},
	    {"mask.wte", CG_U8, (d->views[0].n + 7) / 8, 0xff,
	     "which cannot be pruned"},
	    {"mask.h.0.ln1.w", CG_U8, 1, 0xff, "which cannot be pruned"},
	    {"mask.h.9.mlp.fc.w", CG_U8, 1, 0xff, "which is no tensor"},
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		b = with_mask(d, bad[k].name, bad[k].dt, bad[k].n, bad[k].fill);
		char what[160];
		snprintf(what, sizeof(what), "hostile %s %s [%llu]: refused",
		         bad[k].name, cg_dtype_name(bad[k].dt),
		         (unsigned long long)bad[k].n);
		expect(b == NULL && strstr(cg_errmsg(), bad[k].msg) &&
		           strstr(cg_errmsg(), "hostile.cgm: tensor mask."),
		       what);
		if (b == NULL)
			printf("     %s\n", cg_errmsg());
		cg_model_free(b);
	}
	/* bits past the view's weights: lm_head.w has 260 x 8 weights, a
	 * multiple of 8; the mlp.proj.w of width 8 too: use width 6 */
	struct cg_model *e = cgpt_model(6, 1, 8, 0, 7);
	size_t n = e->views[view_of(e, "h.0.attn.qkv.w")].n; /* 108 */
	b = with_mask(e, "mask.h.0.attn.qkv.w", CG_U8, (n + 7) / 8, 0xff);
	expect(n % 8 != 0 && b == NULL &&
	           strstr(cg_errmsg(), "bits set past the 108 weights"),
	       "a mask with bits set past its view's end: refused");
	cg_model_free(b);
	b = with_mask(e, "mask.h.0.attn.qkv.w", CG_U8, (n + 7) / 8, 0x00);
	expect(b && cg_model_pruned(b, -1) == n &&
	           cg_model_pruned(b, view_of(b, "h.0.attn.qkv.w")) == n,
	       "a mask of all zeros prunes the whole view");
	cg_model_free(b);
	cg_model_free(e);
	cg_model_free(d);
	free(sc);
	free(ch);
	cg_model_free(m);
}

/* ------------------------------------------------------------ masking */

static void
test_mask_ops(void)
{
	struct cg_model *m = cvae_model(10, 6, 1, 3, 8);
	float *x = xcalloc(m->nparams, sizeof(float));
	int ok = 1;

	cg_model_mask(m, x); /* no mask: nothing */
	if (cg_model_ensure_mask(m) != 0)
		die("ensure_mask");
	expect(cg_model_pruned(m, -1) == 0, "a new mask keeps everything");
	/* prune every third weight of enc.0.w by hand */
	const struct cg_view *v = &m->views[view_of(m, "enc.0.w")];
	for (size_t j = 0; j < v->n; j += 3)
		m->mask[(v->off + j) / 8] &=
		    (uint8_t) ~(1u << ((v->off + j) % 8));
	for (size_t i = 0; i < m->nparams; i++)
		x[i] = 1;
	cg_model_mask(m, x);
	for (size_t i = 0; i < m->nparams; i++) {
		int in =
		    i >= v->off && i < v->off + v->n && (i - v->off) % 3 == 0;
		ok &= x[i] == (in ? 0.0f : 1.0f);
	}
	expect(ok, "cg_model_mask zeroes exactly the pruned positions");
	expect(cg_model_pruned(m, view_of(m, "enc.0.w")) == (v->n + 2) / 3,
	       "cg_model_pruned counts them");
	free(x);
	cg_model_free(m);
}

/* ------------------------------------------ what reaches each layer */

/* sq [W] += sum over rows r of rows[r] * x[r]^2. */
static void
ref_sq(double *sq, const float *x, const float *rows, size_t R, size_t Wd)
{
	for (size_t r = 0; r < R; r++)
		for (size_t j = 0; j < Wd; j++)
			sq[j] += (rows ? rows[r] : 1.0) *
			         (double)x[r * Wd + j] * x[r * Wd + j];
}

/*
 * The direct computation for cgpt: its forward pass written out again
 * from the kernels and the views found by name, each Linear layer's
 * input summed into sq at the place cg_model_input_cols gives its view.
 */
static void
cgpt_direct(const struct cg_model *m, const struct cg_cgpt_config *c,
            const int *tok, const float *rows, int B, int T, double *sq)
{
	const size_t C = c->C, R = (size_t)B * T;
	size_t *off = xcalloc((size_t)m->nviews, sizeof(size_t));
	float *x = xcalloc(R * C, 4), *x2 = xcalloc(R * C, 4);
	float *ln = xcalloc(R * C, 4), *qkv = xcalloc(R * 3 * C, 4);
	float *att = xcalloc((size_t)B * c->NH * T * T, 4);
	float *y = xcalloc(R * C, 4), *br = xcalloc(R * C, 4);
	float *h = xcalloc(R * 4 * C, 4), *mean = xcalloc(R, 4),
	      *rstd = xcalloc(R, 4);
	char name[64];

	cg_model_input_cols(m, off);
	cg_embed_forward(x, tok, W(m, "wte"), W(m, "wpe"), B, T, c->C);
#define AT(n) (snprintf(name, sizeof(name), "h.%d.%s", l, n), name)
#define SQ(n) (sq + off[view_of(m, AT(n))])
	for (int l = 0; l < c->L; l++) {
		cg_layernorm_forward(ln, mean, rstd, x, W(m, AT("ln1.w")),
		                     W(m, AT("ln1.b")), B, T, c->C);
		ref_sq(SQ("attn.qkv.w"), ln, rows, R, C);
		cg_linear_forward(qkv, ln, W(m, AT("attn.qkv.w")),
		                  W(m, AT("attn.qkv.b")), (int)R, c->C,
		                  3 * c->C);
		cg_attention_forward(y, att, qkv, B, T, c->C, c->NH);
		ref_sq(SQ("attn.proj.w"), y, rows, R, C);
		cg_linear_forward(br, y, W(m, AT("attn.proj.w")),
		                  W(m, AT("attn.proj.b")), (int)R, c->C, c->C);
		cg_residual_forward(x2, x, br, R * C);
		cg_layernorm_forward(ln, mean, rstd, x2, W(m, AT("ln2.w")),
		                     W(m, AT("ln2.b")), B, T, c->C);
		ref_sq(SQ("mlp.fc.w"), ln, rows, R, C);
		cg_linear_forward(h, ln, W(m, AT("mlp.fc.w")),
		                  W(m, AT("mlp.fc.b")), (int)R, c->C, 4 * c->C);
		cg_gelu_forward(h, h, R * 4 * C);
		ref_sq(SQ("mlp.proj.w"), h, rows, R, 4 * C);
		cg_linear_forward(br, h, W(m, AT("mlp.proj.w")),
		                  W(m, AT("mlp.proj.b")), (int)R, 4 * c->C,
		                  c->C);
		cg_residual_forward(x, x2, br, R * C);
	}
#undef SQ
#undef AT
	if (!c->tied) {
		cg_layernorm_forward(ln, mean, rstd, x, W(m, "lnf.w"),
		                     W(m, "lnf.b"), B, T, c->C);
		ref_sq(sq + off[view_of(m, "lm_head.w")], ln, rows, R, C);
	}
	free(off);
	free(x);
	free(x2);
	free(ln);
	free(qkv);
	free(att);
	free(y);
	free(br);
	free(h);
	free(mean);
	free(rstd);
}

/* The largest relative difference of a [n] and b [n]. */
static double
rel_diff(const double *a, const double *b, size_t n)
{
	double worst = 0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs(a[i] - b[i]) / (fabs(b[i]) + 1e-12);
		worst = d > worst ? d : worst;
	}
	return worst;
}

static void
test_cgpt_input_sq(void)
{
	for (int tied = 0; tied < 2; tied++)
		for (int ckpt = 0; ckpt < 2; ckpt++) {
			struct cg_model *m = cgpt_model(8, 2, 6, tied, 10);
			struct cg_cgpt_config c = {3, 6, 8, 2, 2, tied, 0, 0};
			const int B = 3, T = 6, V = cg_cgpt_vocab(&c);
			int tok[18];
			float rows[18];
			struct cg_rng r;
			size_t *off =
			    xcalloc((size_t)m->nviews, sizeof(size_t));
			size_t n = cg_model_input_cols(m, off);
			double *got = xcalloc(n, 8), *want = xcalloc(n, 8);
			struct cg_cgpt_ws *w = cg_cgpt_ws_new(&c, B, ckpt);

			expect(n == (size_t)(2 * 7 * 8 + (tied ? 0 : 8)),
			       "cgpt: 7 C input columns a block, C more for "
			       "lm_head.w");
			cg_rng_seed(&r, 11);
			for (int i = 0; i < B * T; i++) {
				tok[i] = (int)cg_rng_below(&r, (uint64_t)V);
				rows[i] = i % 5 == 4 ? 0.0f : 1.0f;
			}
			if (w == NULL || cg_cgpt_input_sq(&c, m->params, w, tok,
			                                  rows, B, T, got) != 0)
				die("cg_cgpt_input_sq");
			cgpt_direct(m, &c, tok, rows, B, T, want);
			double d = rel_diff(got, want, n);
			char what[128];
			snprintf(what, sizeof(what),
			         "cgpt input_sq (%s, %s) = the direct sums "
			         "(largest rel. diff %.2g)",
			         tied ? "tied" : "untied",
			         ckpt ? "checkpointed" : "plain", d);
			expect(d <= 1e-6, what);
			cg_cgpt_ws_free(w);
			free(got);
			free(want);
			free(off);
			cg_model_free(m);
		}
}

static void
test_cgpt_arch(void)
{
	static const char *const texts[] = {"ab", "hello", "q", "xyz!"};
	struct cg_model *m = cgpt_model(8, 2, 12, 0, 12);
	struct cg_cgpt_config c = {3, 12, 8, 2, 2, 0, 0, 0};
	struct cg_shard *s = text_shard(texts, 4, 3, "test");
	const int B = 4, T = 12, EOT = 256 + 3;
	uint64_t ex[4] = {0, 1, 2, 3}, rows = 0, want_rows = 0;
	size_t *off = xcalloc((size_t)m->nviews, sizeof(size_t));
	size_t n = cg_model_input_cols(m, off);
	double *got = xcalloc(n, 8), *want = xcalloc(n, 8);
	int tok[48];
	float in[48];

	/* COND, EOT, the text, EOT; then padding, which is not counted */
	for (int b = 0; b < B; b++) {
		int len = (int)strlen(texts[b]);
		for (int t = 0; t < T; t++) {
			int *k = &tok[b * T + t];
			*k = t == 0        ? 256 + b % 3
			     : t == 1      ? EOT
			     : t - 2 < len ? (unsigned char)texts[b][t - 2]
			                   : EOT;
			in[b * T + t] = t <= len + 2;
			want_rows += t <= len + 2;
		}
	}
	if (m->arch->input_sq(m, s, ex, B, 77, got, &rows) != 0)
		die("input_sq");
	cgpt_direct(m, &c, tok, in, B, T, want);
	double d = rel_diff(got, want, n);
	char what[128];
	snprintf(what, sizeof(what),
	         "cgpt arch: input_sq of a shard's batch = the direct sums of "
	         "its windows (%.2g)",
	         d);
	expect(d <= 1e-6, what);
	expect(rows == want_rows, "cgpt arch: rows counts the positions that "
	                          "are not padding");

	/* cg_prune_input_sq: all examples, in batches of 3 */
	double *all;
	uint64_t r2;
	if (cg_prune_input_sq(m, s, 0, 3, 5, &all, &r2) != 0)
		die("cg_prune_input_sq");
	expect(r2 == want_rows && rel_diff(all, want, n) <= 1e-6,
	       "cg_prune_input_sq over the whole shard in batches of 3: the "
	       "same sums");
	free(all);
	free(got);
	free(want);
	free(off);
	cg_shard_free(s);
	cg_model_free(m);
}

static void
test_cvae_input_sq(void)
{
	struct cg_model *m = cvae_model(5, 4, 2, 2, 13);
	struct cg_cvae_config c = {
	    5, 3, 4, 2, 2, (int)cg_json_u64(m->config, "class-prior", 0),
	    (int)cg_json_u64(m->config, "cond-every", 0), 0, 0, 0, 0};
	const int B = 3, D = 5, K = 3, H = 4, Z = 2;
	float x[15], eps[6];
	int cond[3] = {0, 2, 1};
	struct cg_rng r;
	size_t *off = xcalloc((size_t)m->nviews, sizeof(size_t));
	size_t n = cg_model_input_cols(m, off);
	double *got = xcalloc(n, 8), *want = xcalloc(n, 8);
	struct cg_cvae_ws *w = cg_cvae_ws_new(&c, B, 0);

	cg_rng_seed(&r, 14);
	for (int i = 0; i < B * D; i++)
		x[i] = cg_rng_uniform(&r);
	for (int i = 0; i < B * Z; i++)
		eps[i] = cg_rng_normal(&r);
	if (w == NULL ||
	    cg_cvae_input_sq(&c, m->params, w, x, cond, eps, B, got) != 0)
		die("cg_cvae_input_sq");

	/* the direct computation: plain loops over the views by name */
	for (int b = 0; b < B; b++) {
		float in[8], h0[4], h1[4], mu[2], lv[2], z[5], d0[4];
#define LIN(out, name, inp, IN, OUT, relu)                                     \
	do {                                                                   \
		const float *wt = W(m, name ".w"), *bs = W(m, name ".b");      \
		double *q = want + off[view_of(m, name ".w")];                 \
		for (int j = 0; j < (IN); j++)                                 \
			q[j] += (double)(inp)[j] * (inp)[j];                   \
		for (int oc = 0; oc < (OUT); oc++) {                           \
			float s = bs[oc];                                      \
			for (int j = 0; j < (IN); j++)                         \
				s += wt[oc * (IN) + j] * (inp)[j];             \
			(out)[oc] = (relu) && s < 0 ? 0 : s;                   \
		}                                                              \
	} while (0)
		for (int j = 0; j < D; j++)
			in[j] = x[b * D + j];
		for (int k = 0; k < K; k++)
			in[D + k] = k == cond[b];
		LIN(h0, "enc.0", in, D + K, H, 1);
		LIN(h1, "enc.1", h0, H, H, 1);
		LIN(mu, "enc.mu", h1, H, Z, 0);
		LIN(lv, "enc.logvar", h1, H, Z, 0);
		for (int j = 0; j < Z; j++)
			z[j] = mu[j] + expf(0.5f * lv[j]) * eps[b * Z + j];
		for (int k = 0; k < K; k++)
			z[Z + k] = k == cond[b];
		LIN(d0, "dec.0", z, Z + K, H, 1);
		LIN(h0, "dec.1", d0, H, H, 1);
		float logits[5];
		LIN(logits, "dec.out", h0, H, D, 0);
#undef LIN
		CHECK(isfinite(logits[0]), "dec.out: %g", logits[0]);
	}
	double d = rel_diff(got, want, n);
	char what[128];
	snprintf(what, sizeof(what),
	         "cvae input_sq = the direct sums, every layer (%.2g)", d);
	expect(n == (size_t)(D + K + H + H + H + Z + K + H + H) && d <= 1e-5,
	       what);
	cg_cvae_ws_free(w);
	free(got);
	free(want);
	free(off);
	cg_model_free(m);
}

/* ----------------------------------------------------------- training */

/* Whether every pruned weight of m is 0.0 in x [nparams] and, with
 * moved != NULL, every other prunable weight differs from moved. */
static int
zero_where_pruned(const struct cg_model *m, const float *x, const float *moved)
{
	int ok = 1;

	for (int i = 0; i < m->nviews; i++) {
		if (!cg_model_prunable(m, i))
			continue;
		for (size_t j = 0; j < m->views[i].n; j++) {
			size_t p = m->views[i].off + j;
			if (cg_model_pruned_at(m, p))
				ok &= x[p] == 0.0f;
			else if (moved)
				ok &= x[p] != moved[p];
		}
	}
	return ok;
}

static void
test_training(void)
{
	static const char *const texts[] = {"abcab", "hello",   "q",
	                                    "xyz!",  "cabbage", "pruned"};
	struct cg_model *m = cgpt_model(8, 1, 12, 0, 15);
	struct cg_shard *s = text_shard(texts, 6, 3, "test");
	unsigned char *ch = all_prunable(m);
	float *sc = xcalloc(m->nparams, sizeof(float));
	float *before = xcalloc(m->nparams, sizeof(float));
	float *out = xcalloc(m->nparams, sizeof(float));
	struct cg_prune_opts o = {.nm_n = 2, .nm_m = 4};
	struct cg_train_opts to = {.steps = 3, .batch = 4, .seed = 1};
	struct cg_train_result res;

	cg_prune_scores(m, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc);
	if (cg_prune_apply(m, &o, ch, sc) != 0)
		die("prune");
	cg_optim_defaults(&to.opt, CG_OPT_ADAMW);
	to.opt.wd = 0.5f; /* decay would pull at a weight it could reach */
	memcpy(before, m->params, m->nparams * 4);

	to.emit = CG_EMIT_GRAD;
	if (cg_train_run(m, s, &to, NULL, out, &res) != 0)
		die("train grad");
	expect(zero_where_pruned(m, out, NULL),
	       "--emit grad: the gradient is 0 at the pruned weights");
	to.emit = CG_EMIT_DELTA;
	if (cg_train_run(m, s, &to, NULL, out, &res) != 0)
		die("train delta");
	expect(zero_where_pruned(m, out, NULL),
	       "--emit delta (adamw): the delta is 0 at the pruned weights");
	/* moments from before the pruning must not move pruned weights */
	if (cg_model_ensure_opt(m, 1, 1) != 0)
		die("ensure_opt");
	for (size_t i = 0; i < m->nparams; i++)
		m->opt_m[i] = 0.01f, m->opt_v[i] = 1e-4f;
	to.emit = CG_EMIT_MODEL;
	if (cg_train_run(m, s, &to, NULL, NULL, &res) != 0)
		die("train model");
	expect(zero_where_pruned(m, m->params, before) &&
	           zero_where_pruned(m, m->opt_m, NULL) &&
	           zero_where_pruned(m, m->opt_v, NULL),
	       "--emit model (adamw, stale moments): pruned weights and "
	       "their moments 0.0, every other weight moved");

	/* cg-apply: a gradient through adamw, a delta through Nesterov */
	struct cg_apply_opts ao;
	cg_apply_defaults(&ao);
	cg_optim_defaults(&ao.opt, CG_OPT_ADAMW);
	for (size_t i = 0; i < m->nparams; i++)
		out[i] = 0.1f; /* an update from elsewhere, dense */
	for (int k = 0; k < 2; k++) {
		enum cg_update_kind kind = k ? CG_UPDATE_DELTA : CG_UPDATE_GRAD;
		struct cg_file *f = cg_update_new(m, kind, out, 4, 4, 1);
		struct cg_update *u = f ? cg_update_from_file(f, "u") : NULL;
		ao.outer = CG_OUTER_NESTEROV;
		memcpy(before, m->params, m->nparams * 4);
		if (u == NULL || cg_apply_update(m, "m", u, &ao) != 0)
			die("apply");
		expect(
		    zero_where_pruned(m, m->params, before) &&
		        (k == 0 || zero_where_pruned(m, m->outer_mom, NULL)),
		    k ? "apply a dense delta, outer nesterov: pruned weights "
		        "and outer momentum 0.0, the others moved"
		      : "apply a dense gradient, adamw: pruned weights 0.0, "
		        "the others moved");
		cg_update_free(u);
	}
	free(out);
	free(before);
	free(sc);
	free(ch);
	cg_shard_free(s);
	cg_model_free(m);
}

/* --------------------------------------------- which views, the record */

static void
test_choose_record(void)
{
	struct cg_model *v = cvae_model(10, 6, 2, 2, 1);
	unsigned char *chosen = xcalloc((size_t)v->nviews, 1);
	int first = -1, bias = -1, nprunable = 0, ok = 1;
	struct cg_prune_opts o = {.sparsity = 0.25, .per_row = 1};
	char *js;

	for (int i = 0; i < v->nviews; i++) {
		if (cg_model_prunable(v, i) && first < 0)
			first = i;
		if (!cg_model_prunable(v, i) && bias < 0)
			bias = i;
		nprunable += cg_model_prunable(v, i);
	}
	expect(cg_prune_choose(v, NULL, 0, chosen) == 0, "choose: no pattern");
	for (int i = 0; i < v->nviews; i++)
		ok &= chosen[i] == cg_model_prunable(v, i);
	expect(ok, "choose: every prunable view, no other");

	const char *one[] = {v->views[first].name};
	expect(cg_prune_choose(v, one, 1, chosen) == 1 && !chosen[first],
	       "choose: a pattern excludes the view it names");
	ok = 1;
	for (int i = 0; i < v->nviews; i++)
		ok &= i == first || chosen[i] == cg_model_prunable(v, i);
	expect(ok, "choose: and no other");
	const char *glob[] = {"*.w*"}, *star[] = {"*"};
	expect(cg_prune_choose(v, glob, 1, chosen) == 1 &&
	           memchr(chosen, 1, (size_t)v->nviews) == NULL &&
	           cg_prune_choose(v, star, 1, chosen) == 1,
	       "choose: fnmatch patterns");
	const char *bad[] = {v->views[first].name, v->views[bias].name};
	expect(
	    cg_prune_choose(v, bad, 2, chosen) == 1,
	    "choose: a pattern of a view not prunable names none: its index");
	const char *twice[] = {"*", v->views[first].name};
	expect(cg_prune_choose(v, twice, 2, chosen) == 1,
	       "choose: nor one that only an earlier pattern's views match");
	expect(cg_prune_choose(v, (const char *[]){"nothing"}, 1, chosen) == 0,
	       "choose: a pattern that matches nothing");
	printf("     %d of %d views prunable\n", nprunable, v->nviews);

	cg_prune_record(v, CG_IMPORTANCE_WANDA, &o);
	js = cJSON_PrintUnformatted(
	    cJSON_GetObjectItemCaseSensitive(v->manifest, "pruning"));
	expect(js && strcmp(js, "{\"importance\":\"wanda\",\"sparsity\":"
	                        "0.25,\"global\":false,\"group\":\"row\","
	                        "\"pruned\":0}") == 0,
	       "record: sparsity, per row");
	free(js);
	o = (struct cg_prune_opts){.nm_n = 2, .nm_m = 4};
	cg_prune_choose(v, NULL, 0, chosen);
	float *sc = xcalloc(v->nparams, sizeof(float));
	if (cg_prune_scores(v, CG_IMPORTANCE_MAGNITUDE, NULL, NULL, sc) != 0 ||
	    cg_prune_apply(v, &o, chosen, sc) != 0)
		die("cg_prune_apply");
	cg_prune_record(v, CG_IMPORTANCE_GRAD, &o);
	cJSON *r = cJSON_GetObjectItemCaseSensitive(v->manifest, "pruning");
	js = cJSON_PrintUnformatted(r);
	char want[128];
	snprintf(want, sizeof(want),
	         "{\"importance\":\"grad\",\"nm\":\"2:4\",\"pruned\":%llu}",
	         (unsigned long long)cg_model_pruned(v, -1));
	expect(js && strcmp(js, want) == 0 && cg_model_pruned(v, -1) > 0,
	       "record: N:M, replacing the record before, with the count");
	printf("     %s\n", js ? js : "NULL");
	free(js);
	int n = 0;
	for (cJSON *e = v->manifest->child; e; e = e->next)
		n += strcmp(e->string, "pruning") == 0;
	expect(n == 1, "record: one record");
	free(sc);
	free(chosen);
	cg_model_free(v);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	test_rule();
	test_per_tensor();
	test_global();
	test_per_row_and_nm();
	test_scores();
	test_choose_record();
	test_file();
	test_mask_ops();
	test_cgpt_input_sq();
	test_cgpt_arch();
	test_cvae_input_sq();
	test_training();
	return failures ? 1 : 0;
}
