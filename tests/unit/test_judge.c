/*
 * test_judge.c - lib/eval/judge.c: a classifier's verdict on a generator.
 *
 * The generator here is a test arch, "replay", whose samples of
 * condition c are the shard's own images of c, in order (or, shifted,
 * those of condition c + 1).  Replaying the real images must give a
 * conditional accuracy equal to the judge's accuracy on them and a
 * Fréchet distance of 0, overall and per condition; the shifted replay
 * must give the distances computed here directly, from the judge's
 * features through a naive mean and covariance and cg_frechet (itself
 * checked against scipy by test_frechet).  Then cg_judge_check refuses
 * what cannot be judged, each with its message.
 */
#define TEST_NAME "test_judge"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "arch/common.h"
#include "cg.h"
#include "check.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "data/split.h"
#include "eval/frechet.h"
#include "eval/judge.h"
#include "model/model.h"

#define K 3
#define H 4
#define W 4
#define PER 20 /* examples per condition */

static struct cg_shard *shard; /* what replay replays */
static int shift;              /* replay condition c + shift */
static uint64_t cursor[K];     /* the next example of each condition */

/* An image shard: conditions "a", "b", "c", PER examples of each,
 * interleaved, pixels brighter on a side that depends on the condition. */
static struct cg_shard *
image_shard(int h, int w, int k)
{
	static const char *const names[] = {"a", "b", "c", "d"};
	const int n = PER * k;
	struct cg_dataset d;
	struct cg_split sp = {CG_SPLIT_CONTIGUOUS, 1, NULL, 0, 0};
	int *assign = xcalloc((size_t)n, sizeof(int));
	struct cg_rng r;

	cg_rng_seed(&r, 5);
	memset(&d, 0, sizeof(d));
	d.kind = CG_PAYLOAD_IMAGE;
	d.n = (uint64_t)n;
	d.height = (uint32_t)h;
	d.width = (uint32_t)w;
	d.channels = 1;
	d.cond = xcalloc((size_t)n, sizeof(uint32_t));
	d.index = xcalloc((size_t)n, sizeof(uint64_t));
	d.offset = xcalloc((size_t)n + 1, sizeof(uint64_t));
	d.payload = xcalloc((size_t)n * h * w, 1);
	for (int i = 0; i < n; i++) {
		d.cond[i] = (uint32_t)(i % k);
		d.index[i] = (uint64_t)i;
		d.offset[i + 1] = (uint64_t)(i + 1) * h * w;
		for (int j = 0; j < h * w; j++)
			d.payload[(size_t)i * h * w + j] =
			    (uint8_t)(cg_rng_below(&r, 128) +
			              (j % k == i % k ? 127 : 0));
	}
	if (cg_dataset_set_conditions(&d, names, k) != 0)
		die("cg_dataset_set_conditions");
	struct cg_file *f = cg_shard_build(&d, assign, 0, &sp);
	struct cg_shard *s;
	if (f == NULL || (s = cg_shard_from_file(f, "test")) == NULL)
		die("shard");
	cg_dataset_free(&d);
	free(assign);
	return s;
}

/* ------------------------------------------------------ the replay arch */

static int
replay_nconds(const struct cg_model *m)
{
	int k;

	return cg_arch_config_int(m->config, "ncond", 1, 1000, &k) ? -1 : k;
}

static int
replay_shape(const struct cg_model *m, int shape[3])
{
	int d;

	if (cg_arch_config_int(m->config, "in_dim", 1, 1 << 20, &d) != 0)
		return -1;
	return cg_arch_image_shape(m, (uint64_t)d, shape);
}

static int
replay_layout(struct cg_model *m)
{
	m->nparams = 1;
	if ((m->views = calloc(1, sizeof(*m->views))) == NULL)
		return cg_seterr("out of memory");
	strcpy(m->views[0].name, "unused");
	m->views[0].n = 1;
	m->views[0].ndim = 1;
	m->views[0].shape[0] = 1;
	m->nviews = 1;
	return 0;
}

static void
replay_init(struct cg_model *m, struct cg_rng *r)
{
	(void)r;
	m->params[0] = 0;
}

static int
replay_check(struct cg_model *m, const struct cg_shard *s)
{
	(void)m;
	(void)s;
	return 0;
}

static int
replay_batch(struct cg_model *m, const struct cg_shard *s, const uint64_t *ex,
             int B, uint64_t seed, float *grad, struct cg_metrics *out)
{
	(void)m, (void)s, (void)ex, (void)seed, (void)grad;
	memset(out, 0, sizeof(*out));
	out->n = (uint64_t)B;
	return 0;
}

/* The next real image of condition cond[j] + shift, for each j. */
static int
replay_sample(struct cg_model *m, const int *cond, int n, double temperature,
              struct cg_rng *r, float *out)
{
	const size_t D = (size_t)shard->height * shard->width;

	(void)m, (void)temperature, (void)r;
	for (int j = 0; j < n; j++) {
		int c = (cond[j] + shift) % K;
		uint64_t i = cursor[c], len;

		while (shard->cond[i % shard->n] != (uint32_t)c)
			i++;
		const uint8_t *px = cg_shard_example(shard, i % shard->n, &len);
		for (size_t p = 0; p < D; p++)
			out[j * D + p] = px[p] / 255.0f;
		cursor[c] = i + 1;
	}
	return 0;
}

static void
replay_free(struct cg_model *m)
{
	(void)m;
}

static const struct cg_arch replay = {
    .name = "replay",
    .summary = "the shard's own images (tests only)",
    .loss_name = "none",
    .config_from_shard = cg_arch_image_from_shard,
    .nconds = replay_nconds,
    .image_shape = replay_shape,
    .layout = replay_layout,
    .init = replay_init,
    .check_data = replay_check,
    .batch = replay_batch,
    .sample_image = replay_sample,
    .free_ws = replay_free,
};

/* A fresh model of arch on s (cg-init's defaults, and hidden 6 for
 * cclf). */
static struct cg_model *
model(const char *arch, const struct cg_shard *s)
{
	const struct cg_arch *a = cg_arch_find(arch);
	double vals[CG_ARCH_MAX_OPTS];
	cJSON *config, *extra;
	struct cg_model *m;

	for (int i = 0; a && i < a->nopts; i++)
		vals[i] = strcmp(a->opts[i].name, "hidden") == 0 ? 6
		          : strcmp(a->opts[i].name, "latent") == 0
		              ? 2
		              : a->opts[i].dflt;
	if (a == NULL || cg_arch_config(a, s, vals, &config, &extra) != 0 ||
	    (m = cg_model_create(arch, config, extra, 3)) == NULL)
		die(arch);
	return m;
}

static struct cg_judge_result
judge(struct cg_model *gen, struct cg_model *clf, int samples)
{
	struct cg_judge_opts o = {samples, 1, 1.0, 7, NULL, NULL};
	struct cg_judge_result r;

	memset(cursor, 0, sizeof(cursor));
	if (cg_judge_eval(gen, clf, shard, &o, &r) != 0)
		die("cg_judge_eval");
	return r;
}

/* ---------------------------------------------------------------- tests */

static void
test_replay(struct cg_model *gen, struct cg_model *clf)
{
	struct cg_judge_result r;
	int ok = 1;
	char what[200];

	shift = 0;
	r = judge(gen, clf, PER);
	for (int c = 0; c < K; c++) {
		const struct cg_judge_cond *jc = &r.cond[c];
		ok &= jc->drawn == PER && jc->real == PER &&
		      jc->right == jc->real_right && fabs(jc->frechet) < 1e-9;
		CHECK(fabs(jc->frechet) < 1e-9, "condition %d: frechet %.3g", c,
		      jc->frechet);
	}
	snprintf(what, sizeof(what),
	         "the real images replayed: acc %g = real_acc %g, frechet "
	         "%.3g (and per condition) ~ 0",
	         r.acc, r.real_acc, r.frechet);
	expect(ok && r.acc == r.real_acc && r.drawn == K * PER &&
	           r.real == K * PER && fabs(r.frechet) < 1e-9 &&
	           r.nfeatures == 6,
	       what);
	cg_judge_result_free(&r);
	cg_judge_result_free(&r);
}

/* The shifted replay against the figures computed here. */
static void
test_shifted(struct cg_model *gen, struct cg_model *clf)
{
	const int F = 6;
	const size_t D = H * W;
	float *x = xcalloc(D * PER * K, sizeof(float));
	float *feat = xcalloc((size_t)F * PER * K, sizeof(float));
	float *logits = xcalloc((size_t)K * PER * K, sizeof(float));
	int *cls = xcalloc((size_t)PER * K, sizeof(int));
	double mu[2][6], cov[2][36], want[K + 1];
	struct cg_judge_result r;
	int right[K] = {0}, ok = 1;

	/* Every real image through the judge, in shard order. */
	for (uint64_t i = 0; i < shard->n; i++) {
		uint64_t len;
		const uint8_t *px = cg_shard_example(shard, i, &len);
		for (size_t p = 0; p < D; p++)
			x[i * D + p] = px[p] / 255.0f;
	}
	if (clf->arch->classify(clf, x, PER * K, logits, feat) != 0)
		die("classify");
	for (int i = 0; i < PER * K; i++) {
		int arg = 0;
		for (int k = 1; k < K; k++)
			if (logits[i * K + k] > logits[i * K + arg])
				arg = k;
		cls[i] = arg;
	}
	/* Condition c is scored on the images of c + 1 against those of
	 * c; overall, the two sets are the same. */
	for (int c = 0; c <= K; c++) {
		for (int side = 0; side < 2; side++) {
			int want_c = (c + side) % K, n = 0;
			memset(mu[side], 0, sizeof(mu[side]));
			memset(cov[side], 0, sizeof(cov[side]));
			for (int i = 0; i < PER * K; i++) {
				if (c < K && (int)shard->cond[i] != want_c)
					continue;
				for (int a = 0; a < F; a++)
					mu[side][a] += feat[i * F + a];
				n++;
			}
			for (int a = 0; a < F; a++)
				mu[side][a] /= n;
			for (int i = 0; i < PER * K; i++) {
				if (c < K && (int)shard->cond[i] != want_c)
					continue;
				for (int a = 0; a < F; a++)
					for (int b = 0; b < F; b++)
						cov[side][a * F + b] +=
						    (feat[i * F + a] -
						     mu[side][a]) *
						    (feat[i * F + b] -
						     mu[side][b]) /
						    (n - 1);
			}
		}
		if (cg_frechet(&want[c], mu[1], cov[1], mu[0], cov[0], F) != 0)
			die("cg_frechet");
	}
	for (int i = 0; i < PER * K; i++)
		right[(shard->cond[i] + K - 1) % K] +=
		    cls[i] == (int)(shard->cond[i] + K - 1) % K;
	shift = 1;
	r = judge(gen, clf, PER);
	for (int c = 0; c < K; c++) {
		/* The judge classifies in batches of 7, here all at once:
		 * features that differ in float rounding. */
		ok &=
		    fabs(r.cond[c].frechet - want[c]) <= 1e-5 * (1 + want[c]) &&
		    r.cond[c].right == (uint64_t)right[c] && want[c] > 1e-3;
		CHECK(fabs(r.cond[c].frechet - want[c]) <= 1e-5 * (1 + want[c]),
		      "condition %d: frechet %.12g, here %.12g", c,
		      r.cond[c].frechet, want[c]);
	}
	expect(ok && fabs(r.frechet - want[K]) < 1e-5,
	       "images of the next condition: each condition's distance and "
	       "accuracy as computed here, 0 overall");
	cg_judge_result_free(&r);
	free(x);
	free(feat);
	free(logits);
	free(cls);
}

static void
test_checks(struct cg_model *gen, struct cg_model *clf)
{
	struct cg_model *vae = model("cvae", shard);
	struct cg_shard *other = image_shard(H, W + 1, K);
	struct cg_shard *four = image_shard(H, W, K + 1);
	struct cg_model *wide = model("cclf", other);
	struct cg_model *more = model("cclf", four);
	struct cg_judge_opts o = {1, 0, 1.0, 8, NULL, NULL};
	struct cg_judge_result r;

	expect(cg_judge_check(clf, gen) == 0 && cg_judge_check(clf, vae) == 0,
	       "a cclf judges replay and cvae models of its data");
	expect(cg_judge_check(vae, gen) == -1 &&
	           strcmp(cg_errmsg(),
	                  "the judge is a cvae model, not a classifier") == 0,
	       "a cvae judge is refused");
	expect(cg_judge_check(clf, clf) == -1 &&
	           strcmp(cg_errmsg(),
	                  "the model is a cclf model, which draws no "
	                  "images") == 0,
	       "a model that draws no images is refused");
	expect(cg_judge_check(wide, gen) == -1 &&
	           strstr(cg_errmsg(), "reads images of 4x5x1, the model "
	                               "draws 4x4x1"),
	       "a judge of other images is refused");
	expect(cg_judge_check(more, gen) == -1 &&
	           strstr(cg_errmsg(), "knows 4 conditions, the model 3"),
	       "a judge of other conditions is refused");
	cJSON *names =
	    cJSON_GetObjectItemCaseSensitive(gen->manifest, "conditions");
	cJSON_ReplaceItemInArray(names, 1, cJSON_CreateString("B"));
	expect(cg_judge_check(clf, gen) == -1 &&
	           strstr(cg_errmsg(), "condition 1 is \"b\" to the judge but "
	                               "\"B\" to the model"),
	       "a judge of other condition names is refused");
	cJSON_ReplaceItemInArray(names, 1, cJSON_CreateString("b"));
	expect(cg_judge_eval(gen, clf, shard, &o, &r) == -1 && r.cond == NULL,
	       "one image per condition is refused (no covariance)");
	o.samples = 2;
	expect(cg_judge_eval(gen, clf, other, &o, &r) == -1 &&
	           strstr(cg_errmsg(), "the judge: images of 4x5x1"),
	       "a shard that does not fit the judge is refused");
	cg_model_free(vae);
	cg_model_free(wide);
	cg_model_free(more);
	cg_shard_free(other);
	cg_shard_free(four);
}

/* The table and the JSON of a result made here, on gen's names. */
static void
test_reports(struct cg_model *gen)
{
	struct cg_judge_cond c[3] = {
	    {10, 9, 4, 4, 0.9, 1, 2.5},
	    {10, 5, 1, 0, 0.5, 0, NAN},
	    {10, 0, 0, 0, 0, NAN, NAN},
	};
	struct cg_judge_result r = {3, 8,         30,  14,   5,
	                            4, 14 / 30.0, 0.8, 1.25, c};
	char *buf = NULL, *js;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);
	cJSON *j = cJSON_CreateObject();

	if (fp == NULL || j == NULL)
		die("open_memstream");
	cg_judge_table(fp, gen, &r);
	fclose(fp);
	expect(strcmp(buf,
	              "condition             drawn        acc       real   "
	              "real_acc      frechet\n"
	              "a                        10     0.9000          4     "
	              "1.0000       2.5000\n"
	              "b                        10     0.5000          1     "
	              "0.0000            -\n"
	              "c                        10     0.0000          0     "
	              "     -            -\n"
	              "all                      30     0.4667          5     "
	              "0.8000       1.2500\n") == 0,
	       "table: a row per condition by name, then all; NAN as -");
	if (failures)
		fputs(buf, stderr);
	free(buf);
	cg_judge_json(j, gen, &r);
	js = cJSON_PrintUnformatted(j);
	expect(js && strcmp(js, "{\"cond_acc\":0.46666666666666667,"
	                        "\"judge_real_acc\":0.8,\"frechet\":1.25,"
	                        "\"per_condition\":[{\"cond\":\"a\","
	                        "\"drawn\":10,\"acc\":0.9,\"real\":4,"
	                        "\"real_acc\":1,\"frechet\":2.5},"
	                        "{\"cond\":\"b\",\"drawn\":10,\"acc\":0.5,"
	                        "\"real\":1,\"real_acc\":0,\"frechet\":null},"
	                        "{\"cond\":\"c\",\"drawn\":10,\"acc\":0,"
	                        "\"real\":0,\"real_acc\":null,"
	                        "\"frechet\":null}]}") == 0,
	       "json: the figures, per condition by name; NAN as null");
	if (js && failures)
		fprintf(stderr, "%s\n", js);
	free(js);
	cJSON_Delete(j);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	if (cg_arch_register(&replay) != 0)
		die("cg_arch_register");
	shard = image_shard(H, W, K);
	struct cg_model *gen = model("replay", shard);
	struct cg_model *clf = model("cclf", shard);

	test_replay(gen, clf);
	test_shifted(gen, clf);
	test_checks(gen, clf);
	test_reports(gen);
	cg_model_free(gen);
	cg_model_free(clf);
	cg_shard_free(shard);
	if (failures) {
		printf("test_judge: %d check(s) FAILED\n", failures);
		return 1;
	}
	printf("test_judge: all checks passed\n");
	return 0;
}
