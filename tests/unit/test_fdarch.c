/*
 * test_fdarch.c - every registered architecture's gradient against finite
 * differences, through struct cg_arch alone.
 *
 * Each row of the table below is a small model of one architecture: a
 * config over its defaults, a shard (images of 7 pixels or short texts),
 * a batch, a noise seed, a chunk size and the tolerances.  The model is
 * made as cg-init makes one (cg_arch_config, cg_model_create), its
 * gradient comes from the arch's batch hook, added to a buffer that is
 * not zero (backward adds), and fd_views checks every view of it against
 * the loss the same hook reports.  A gradient spoilt in one element must
 * fail the check.  A row with a teacher (its config over the defaults,
 * the model made from another seed) checks the distilled gradient of
 * the arch's distill hook, the teacher run as cg-train-step runs it.
 * Every registered architecture (the built-in ones and
 * the test-only toy of arch_toy.c) needs a row: a new one without one
 * fails here.  Low-rank adapters (model/lora.h) on a cgpt and a cvae
 * have their own check, test_lora.  The kernel tests of each arch (test_cvae, ...) check more
 * configs and their parts on their own.  Exit 0 pass, 1 fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "cg.h"
#include "cli/cli.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "data/split.h"
#include "model/model.h"
#include "nn/gemm.h"

#define TEST_NAME "test_fdarch"
#include "check.h"

#include "fd.h"
#include "shards.h"

static struct cg_rng rng;

/* ------------------------------------------------------------- shards */

#define NIMG 8
#define PIX 7
#define NTEXT 4

/* Four short texts, conditions "a" "b". */
static const char *const texts[NTEXT] = {"ab ba", "cab", "a bc abc", "ba"};

/* -------------------------------------------------------- the table */

struct fd_arch;

/*
 * A GAN's gradient holds d L_G / d (generator) and d L_D / d
 * (discriminator): the loss the batch reports is L_D, and L_G its third
 * part.  Distilled, the generator's is (1 - alpha) L_G + alpha T, T the
 * teacher term.
 */
static double
gan_loss(const struct fd_arch *row, const struct cg_model *m, int v,
         const struct cg_metrics *r);

struct fd_arch {
	const char *arch;
	const char *config; /* JSON: the config keys set over the defaults */
	int text;           /* 1: the text shard; 0: the image one */
	int B;              /* examples in the batch, cycling the shard's */
	uint64_t noise_seed;
	int chunk;    /* m->chunk: most examples through at once; 0: any */
	float jitter; /* normal noise of this scale added to the weights */
	const struct fd_tol *tol;
	/* The figure view v's gradient is of; NULL: the loss. */
	double (*loss)(const struct fd_arch *row, const struct cg_model *m,
	               int v, const struct cg_metrics *r);
	/* Distilled: the teacher's config keys over the defaults (NULL:
	 * no teacher), its weight and temperature. */
	const char *teacher;
	double alpha, tau;
};

static double
gan_loss(const struct fd_arch *row, const struct cg_model *m, int v,
         const struct cg_metrics *r)
{
	for (int g = 0; g < m->ngroups; g++)
		if (v >= m->groups[g].view0 &&
		    v < m->groups[g].view0 + m->groups[g].nviews) {
			if (strcmp(m->groups[g].name, "gen") != 0)
				return r->loss;
			return row->teacher ? (1 - row->alpha) * r->data +
			                          row->alpha * r->teacher
			                    : r->part[2];
		}
	die("a view in no group");
	return 0;
}

/* clang-format off */
static const struct fd_arch rows[] = {
    {.arch = "cvae",
     .config = "{\"hidden\":6,\"layers\":1,\"latent\":3,\"class-prior\":0,"
               "\"cond-every\":0}",
     .B = 4, .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE},
    {.arch = "cvae",
     .config = "{\"hidden\":6,\"layers\":2,\"latent\":3,\"class-prior\":0,"
               "\"cond-every\":0}",
     .B = 4, .noise_seed = 8, .jitter = 0.1f, .tol = &FD_IMAGE},
    /* Texts longer than the context: windows drawn from the seed. */
    {.arch = "cgpt",
     .config = "{\"context\":6,\"width\":8,\"layers\":2,\"heads\":2}",
     .text = 1, .B = 3, .noise_seed = 7, .jitter = 0.1f,
     .tol = &FD_TEXT_FINE},
    /* Tied, and in chunks of 2 sequences. */
    {.arch = "cgpt",
     .config = "{\"context\":6,\"width\":8,\"layers\":2,\"heads\":2,"
               "\"tied\":1}",
     .text = 1, .B = 5, .noise_seed = 7, .chunk = 2, .jitter = 0.1f,
     .tol = &FD_TEXT_FINE},
    /* As cg-prune --structured leaves it: 3 heads of 2 in a width of
     * 8, an MLP 5 wide. */
    {.arch = "cgpt",
     .config = "{\"context\":6,\"width\":8,\"layers\":2,\"heads\":3,"
               "\"head_size\":2,\"ffn\":5}",
     .text = 1, .B = 3, .noise_seed = 7, .jitter = 0.1f,
     .tol = &FD_TEXT_FINE},
    {.arch = "cclf", .config = "{\"hidden\":6,\"layers\":1}", .B = 4,
     .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE},
    {.arch = "cclf", .config = "{\"hidden\":6,\"layers\":2}", .B = 5,
     .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE},
    {.arch = "cddpm",
     .config = "{\"hidden\":6,\"layers\":2,\"embed\":6,\"timesteps\":100,"
               "\"snr-clip\":5,\"predict-x0\":0}",
     .B = 6, .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE},
    {.arch = "cddpm",
     .config = "{\"hidden\":6,\"layers\":1,\"embed\":4,\"timesteps\":1000,"
               "\"snr-clip\":2,\"predict-x0\":1}",
     .B = 5, .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE},
    /* Enough power iterations that sigma is exact to float, so that the
     * gradient with u, v held fixed is the true one. */
    {.arch = "cgan",
     .config = "{\"latent\":4,\"hidden\":6,\"layers\":1,\"sn-iters\":300}",
     .B = 6, .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE,
     .loss = gan_loss},
    {.arch = "cgan",
     .config = "{\"latent\":4,\"hidden\":6,\"layers\":2,\"sn-iters\":300}",
     .B = 6, .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE,
     .loss = gan_loss},
    {.arch = "toy", .config = "{\"spread\":0.7,\"shared\":1}", .B = 6,
     .jitter = 0.1f, .tol = &FD_TOY},
    /* The cvae with a prior per class and the condition at every
     * layer (cg-init's default). */
    {.arch = "cvae", .config = "{\"hidden\":6,\"layers\":1,\"latent\":3}",
     .B = 4, .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE},
    {.arch = "cvae", .config = "{\"hidden\":6,\"layers\":2,\"latent\":3}",
     .B = 4, .noise_seed = 8, .jitter = 0.1f, .tol = &FD_IMAGE},
    /* Distilled: a wider teacher, a CNN teacher, and in chunks (the
     * teacher in the same chunks).  Last, so that the rows above keep
     * their draws (each row's seed is its index). */
    {.arch = "cclf", .config = "{\"hidden\":6,\"layers\":1}", .B = 4,
     .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE,
     .teacher = "{\"hidden\":9,\"layers\":2}", .alpha = 0.7, .tau = 2},
    {.arch = "cclf", .config = "{\"hidden\":6,\"layers\":2}", .B = 5,
     .noise_seed = 7, .chunk = 2, .jitter = 0.1f, .tol = &FD_IMAGE,
     .teacher = "{\"hidden\":5,\"layers\":1,\"conv\":2}", .alpha = 0.4,
     .tau = 1},
    {.arch = "cgan",
     .config = "{\"latent\":4,\"hidden\":6,\"layers\":1,\"sn-iters\":300}",
     .B = 6, .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE,
     .loss = gan_loss, .teacher = "{\"latent\":4,\"hidden\":10,"
     "\"layers\":2}", .alpha = 0.6, .tau = 1},
    {.arch = "cgan",
     .config = "{\"latent\":4,\"hidden\":6,\"layers\":2,\"sn-iters\":300}",
     .B = 6, .noise_seed = 7, .chunk = 4, .jitter = 0.1f, .tol = &FD_IMAGE,
     .loss = gan_loss, .teacher = "{\"latent\":4,\"hidden\":8,"
     "\"layers\":1}", .alpha = 1, .tau = 1},
};
/* clang-format on */

#define NROWS (int)(sizeof(rows) / sizeof(rows[0]))

/* ---------------------------------------------------------- the check */

struct fd_case {
	const struct fd_arch *row;
	struct cg_model *m;
	const struct cg_shard *s;
	uint64_t ex[16];
	const struct cg_distill *d; /* the row's teacher, or NULL */
};

/* The case's batch: grad (or NULL) += its gradient; the figures. */
static struct cg_metrics
case_batch(struct fd_case *c, float *grad)
{
	struct cg_metrics r;
	struct cg_model *m = c->m;

	if ((c->d ? m->arch->distill(m, c->d, c->s, c->ex, c->row->B,
	                             c->row->noise_seed, grad, &r)
	          : m->arch->batch(m, c->s, c->ex, c->row->B,
	                           c->row->noise_seed, grad, &r)) != 0)
		die(c->row->arch);
	return r;
}

static double
case_loss(void *ctx, int v)
{
	struct fd_case *c = ctx;
	struct cg_metrics r = case_batch(c, NULL);

	return c->row->loss ? c->row->loss(c->row, c->m, v, &r) : r.loss;
}

/* The model of row (its config's defaults, then the keys of config),
 * its weights from seed. */
static struct cg_model *
row_model(const struct fd_arch *row, const char *keys, uint64_t seed,
          const struct cg_shard *s)
{
	const struct cg_arch *a = cg_arch_find(row->arch);
	cJSON *config, *extra, *set = cJSON_Parse(keys), *it;
	struct cg_model *m;

	if (a == NULL || set == NULL ||
	    cg_arch_config(a, s, NULL, &config, &extra) != 0)
		die(row->arch);
	cJSON_ArrayForEach(it, set)
	{
		/* a key no option sets (cgpt's head_size) is added */
		cJSON *dup = cJSON_Duplicate(it, 1);
		if (dup == NULL ||
		    !(cJSON_HasObjectItem(config, it->string)
		          ? cJSON_ReplaceItemInObjectCaseSensitive(
		                config, it->string, dup)
		          : cJSON_AddItemToObject(config, it->string, dup)))
			die(it->string);
	}
	cJSON_Delete(set);
	if ((m = cg_model_create(row->arch, config, extra, seed)) == NULL ||
	    m->arch->check_data(m, s) != 0)
		die(row->arch);
	return m;
}

static void
test_row(const struct fd_arch *row, const struct cg_shard *s)
{
	struct fd_case c = {row, row_model(row, row->config, 5, s), s, {0},
	                    NULL};
	struct cg_model *m = c.m, *t = NULL;
	struct cg_distill d = {0};
	struct cg_metrics r;
	char what[256];

	for (int b = 0; b < row->B; b++)
		c.ex[b] = (uint64_t)b % s->n;
	m->chunk = row->chunk;
	if (row->teacher) {
		/* as cg-train-step runs one: the student's chunks,
		 * checkpointed */
		t = row_model(row, row->teacher, 9, s);
		if (cg_model_check_teacher(m, t, s) != 0)
			die(cg_errmsg());
		t->chunk = m->chunk;
		t->checkpoint = 1;
		for (size_t i = 0; i < t->nparams; i++)
			t->params[i] += 0.3f * cg_rng_normal(&rng);
		d = (struct cg_distill){t, row->alpha, row->tau, 0, 0};
		c.d = &d;
	}
	/* Biases and the toy's shared logits away from 0, so that they
	 * matter. */
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] += row->jitter * cg_rng_normal(&rng);
	/* Not zero on entry: backward must add to it. */
	float *g = xcalloc(m->nparams, sizeof(float));
	for (size_t i = 0; i < m->nparams; i++)
		g[i] = 1.0f;
	r = case_batch(&c, g);
	for (size_t i = 0; i < m->nparams; i++)
		g[i] -= 1.0f;
	printf("     %s %s, B=%d, chunk %d, %zu params, loss %.6g\n", row->arch,
	       row->config, row->B, row->chunk, m->nparams, r.loss);
	if (t)
		printf("       distilled: teacher %s, alpha %g, tau %g: data "
		       "%.6g, teacher term %.6g\n",
		       row->teacher, row->alpha, row->tau, r.data, r.teacher);
	if (t)
		expect(r.teacher > 0 && r.data != 0,
		       "distilled: both terms reported");
	double worst = fd_views(row->tol, m->views, m->nviews, m->params, g,
	                        case_loss, &c, NULL, &rng, 0);
	snprintf(what, sizeof(what),
	         "%s %s%s: every view's gradient vs central differences "
	         "(worst rel err %.3g)",
	         row->arch, row->config, t ? " distilled" : "", worst);
	expect(worst <= row->tol->tol, what);

	/* The check must be able to fail: spoil one element of the last
	 * view by 0.05. */
	const struct cg_view *v = &m->views[m->nviews - 1];
	g[v->off] += 0.05f;
	snprintf(what, sizeof(what),
	         "%s: a gradient off by 0.05 in %s is caught", row->arch,
	         v->name);
	expect(fd_views(row->tol, v, 1, m->params, g, case_loss, &c, NULL, &rng,
	                1) > row->tol->tol,
	       what);
	free(g);

	/* f16's loss scale (nn/gemm.h): the gradient made at 2^10 is 2^10
	 * times the one made at 1, bit for bit (the arch scales every
	 * term of its seed), and the loss is the same. */
	float *g1 = xcalloc(m->nparams, sizeof(float)),
	      *g2 = xcalloc(m->nparams, sizeof(float));
	struct cg_metrics r1 = case_batch(&c, g1);
	cg_set_loss_scale(1024);
	struct cg_metrics r2 = case_batch(&c, g2);
	cg_set_loss_scale(1);
	size_t off = 0, nz = 0;
	for (size_t i = 0; i < m->nparams; i++) {
		nz += g1[i] != 0;
		if (g2[i] != 1024 * g1[i] && off == 0)
			off = i + 1;
	}
	snprintf(what, sizeof(what),
	         "%s %s%s: at loss scale 2^10 the gradient is 2^10 times, "
	         "bit for bit (%zu of %zu nonzero; first off: %zu)",
	         row->arch, row->config, t ? " distilled" : "", nz, m->nparams,
	         off);
	expect(off == 0 && nz > 0 && r1.loss == r2.loss, what);
	free(g1);
	free(g2);
	cg_model_free(m);
	cg_model_free(t);
}

/* ------------------------------------------------------- adapters */

/* The loss of a model with adapters, run as training runs it. */
static double
lora_loss(void *ctx, int v)
{
	struct fd_case *c = ctx;
	struct cg_metrics r;

	(void)v;
	if (cg_lora_merge(c->m, 0) != 0 ||
	    c->m->arch->batch(c->m, c->s, c->ex, c->row->B, c->row->noise_seed,
	                      NULL, &r) != 0)
		die("lora");
	cg_lora_unmerge(c->m);
	return r.loss;
}

/* A model with adapters: the arch, its config keys over the defaults,
 * the "lora" object, the shard and batch, the tolerances. */
struct lora_row {
	struct fd_arch row;
	const char *lora;
};

/* clang-format off */
static const struct lora_row lora_rows[] = {
    /* lm_head.w among the targets: the output's own rows */
    {{.arch = "cgpt",
      .config = "{\"context\":6,\"width\":8,\"layers\":2,\"heads\":2}",
      .text = 1, .B = 3, .noise_seed = 7, .jitter = 0.1f,
      .tol = &FD_TEXT_FINE},
     "{\"r\":2,\"alpha\":3,\"targets\":[\"h.0.attn.qkv.w\","
     "\"h.1.mlp.proj.w\",\"lm_head.w\"]}"},
    /* the embedding, whose rows hold the conditions', tied: the head
     * reads the merged table too */
    {{.arch = "cgpt",
      .config = "{\"context\":6,\"width\":8,\"layers\":2,\"heads\":2,"
                "\"tied\":1}",
      .text = 1, .B = 3, .noise_seed = 9, .jitter = 0.1f,
      .tol = &FD_TEXT_FINE},
     "{\"r\":2,\"alpha\":4,\"targets\":[\"wte\",\"h.1.attn.proj.w\"]}"},
    {{.arch = "cvae",
      .config = "{\"hidden\":6,\"layers\":2,\"latent\":3}",
      .B = 4, .noise_seed = 7, .jitter = 0.1f, .tol = &FD_IMAGE},
     "{\"r\":2,\"alpha\":2,\"targets\":[\"enc.1.w\",\"dec.out.w\"]}"},
};
/* clang-format on */

/*
 * Low-rank adapters (model/lora.h): every adapter's gradient (dW' of the
 * arch's backward turned into dA and dB by cg_lora_grad) against
 * differences of the loss of W + (alpha/r) B A, with B away from zero so
 * that dA matters; W's own places in the gradient zero; and the weights
 * as they were after the merge is undone.
 */
static void
test_lora(const struct lora_row *lr, const struct cg_shard *s)
{
	const struct fd_arch *row = &lr->row;
	const struct cg_arch *a = cg_arch_find(row->arch);
	cJSON *config, *extra, *set = cJSON_Parse(row->config), *it;
	struct cg_model *m;
	struct cg_metrics r;
	char what[256];

	if (a == NULL || set == NULL ||
	    cg_arch_config(a, s, NULL, &config, &extra) != 0)
		die(row->arch);
	cJSON_ArrayForEach(it, set)
	    cJSON_ReplaceItemInObjectCaseSensitive(config, it->string,
	                                           cJSON_Duplicate(it, 1));
	cJSON_Delete(set);
	cJSON_AddItemToObject(extra, "lora", cJSON_Parse(lr->lora));
	if ((m = cg_model_create(row->arch, config, extra, 5)) == NULL ||
	    m->lora == NULL || m->arch->check_data(m, s) != 0)
		die(row->arch);
	struct fd_case c = {row, m, s, {0}, NULL};
	for (int b = 0; b < row->B; b++)
		c.ex[b] = (uint64_t)b % s->n;
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] += row->jitter * cg_rng_normal(&rng);
	float *before = xcalloc(m->nparams, sizeof(float));
	memcpy(before, m->params, m->nparams * sizeof(float));
	float *g = xcalloc(m->nparams, sizeof(float));
	if (cg_lora_merge(m, 0) != 0 ||
	    m->arch->batch(m, s, c.ex, row->B, row->noise_seed, g, &r) != 0)
		die(row->arch);
	cg_lora_grad(m, g);
	cg_lora_unmerge(m);
	snprintf(what, sizeof(what),
	         "%s lora: the weights as they were after the merge is undone",
	         row->arch);
	expect(memcmp(before, m->params, m->nparams * sizeof(float)) == 0,
	       what);
	int zero = 1;
	for (int k = 0; k < m->lora->n; k++) {
		const struct cg_view *w = &m->views[m->lora->w[k]];
		for (size_t i = 0; i < w->n; i++)
			zero &= g[w->off + i] == 0.0f;
	}
	snprintf(what, sizeof(what),
	         "%s lora: the targets' own gradient is zero", row->arch);
	expect(zero, what);
	const int first = m->lora->a[0], nad = m->nviews - first;
	printf("     %s with adapters %s, loss %.6g\n", row->arch, lr->lora,
	       r.loss);
	double worst = fd_views(row->tol, m->views + first, nad, m->params, g,
	                        lora_loss, &c, NULL, &rng, 0);
	snprintf(what, sizeof(what),
	         "%s lora: every adapter's gradient vs central differences "
	         "(worst rel err %.3g)",
	         row->arch, worst);
	expect(worst <= row->tol->tol, what);
	const struct cg_view *v = &m->views[m->lora->a[0]];
	g[v->off] += 0.05f;
	snprintf(what, sizeof(what),
	         "%s lora: a gradient off by 0.05 in an A is caught",
	         row->arch);
	expect(fd_views(row->tol, v, 1, m->params, g, lora_loss, &c, NULL,
	                &rng, 1) > row->tol->tol,
	       what);
	free(before);
	free(g);
	cg_model_free(m);
}

int
main(void)
{
	/* The BLAS as the programs run it (see lib/cli/runtime.c). */
	cg_set_threads(0);
	cg_rng_seed(&rng, 16);
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	struct cg_shard *img = image_shard(NIMG, PIX, 1, "images", NULL),
	                *txt = text_shard(texts, NTEXT, 2, "texts");

	for (int i = 0; i < cg_arch_count(); i++) {
		const struct cg_arch *a = cg_arch_at(i);
		int n = 0;

		for (int k = 0; k < NROWS; k++)
			if (strcmp(rows[k].arch, a->name) == 0) {
				/* each row its own draws, whatever rows
				 * come before it */
				cg_rng_seed(&rng, 16 + (uint64_t)k);
				test_row(&rows[k], rows[k].text ? txt : img);
				n++;
			}
		char what[128];
		snprintf(what, sizeof(what), "%s: %d row(s) in the table",
		         a->name, n);
		expect(n > 0, what);
	}
	for (size_t k = 0; k < sizeof(lora_rows) / sizeof(lora_rows[0]); k++) {
		cg_rng_seed(&rng, 99 + (uint64_t)k);
		test_lora(&lora_rows[k], lora_rows[k].row.text ? txt : img);
	}
	cg_shard_free(img);
	cg_shard_free(txt);
	if (failures) {
		printf(TEST_NAME ": %d check(s) FAILED\n", failures);
		return 1;
	}
	printf(TEST_NAME ": all checks passed\n");
	return 0;
}
