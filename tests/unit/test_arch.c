/*
 * test_arch.c - the registry of architectures, the option rows cg-init
 * reads, the configs it writes, and the test-only toy architecture
 * (arch_toy.c): its loss, and its gradient against finite differences.
 *
 * The toy joins the registry from its constructor, so that this program
 * sees three architectures: the table's two and the toy.
 */
#define TEST_NAME "test_arch"
#include <math.h>
#include <stddef.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "arch/common.h"
#include "arch/cddpm/cddpm.h"
#include "check.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "data/split.h"
#include "model/model.h"

#include "fd.h"
#include "shards.h"

extern const struct cg_arch cg_arch_toy;

#define H 2
#define W 3
#define N 6

/* Pixels of every value from 0 to 255. */
static void
extremes(struct cg_dataset *d)
{
	d->payload[0] = 0;
	d->payload[1] = 255;
}

/* Whether obj's keys are keys[0..n), in that order. */
static int
keys_are(const cJSON *obj, const char *const *keys, int n)
{
	const cJSON *it = obj ? obj->child : NULL;

	for (int i = 0; i < n; i++, it = it->next)
		if (it == NULL || strcmp(it->string, keys[i]) != 0)
			return 0;
	return it == NULL;
}

static void
test_registry(void)
{
	static const struct cg_arch_opt seed_opt[] = {
	    {"seed", CG_ARCH_OPT_INT, 1, 0, 9, "shadows cg-init's --seed"}};
	static const struct cg_arch_opt tied_int[] = {
	    {"tied", CG_ARCH_OPT_INT, 1, 0, 9,
	     "an int where cgpt's is a "
	     "bool"}};
	static const struct cg_arch_opt bad_dflt[] = {
	    {"depth", CG_ARCH_OPT_INT, 0, 1, 9, "default below the range"}};
	struct cg_arch a;
	int found = 0, ok = 1;

	expect(cg_arch_count() == 6,
	       "six architectures: cvae, cgpt, cclf, cddpm, cgan, toy");
	expect(cg_arch_at(0) == cg_arch_find("cvae") &&
	           cg_arch_at(1) == cg_arch_find("cgpt") &&
	           cg_arch_at(2) == cg_arch_find("cclf") &&
	           cg_arch_at(3) == cg_arch_find("cddpm") &&
	           cg_arch_at(4) == cg_arch_find("cgan") &&
	           cg_arch_at(5) == &cg_arch_toy &&
	           cg_arch_find("toy") == &cg_arch_toy &&
	           cg_arch_at(6) == NULL && cg_arch_at(-1) == NULL,
	       "the table's rows, then the registered toy");
	expect(cg_arch_find("nope") == NULL &&
	           strstr(cg_errmsg(), "unknown architecture 'nope'"),
	       "an unknown name: NULL and a message");
	for (int i = 0; i < cg_arch_count(); i++)
		ok &= cg_arch_check(cg_arch_at(i)) == 0;
	expect(ok, "every architecture passes cg_arch_check");
	expect(cg_arch_register(&cg_arch_toy) == 0 && cg_arch_count() == 6,
	       "registering the toy again changes nothing");

	a = cg_arch_toy;
	a.name = "cvae";
	expect(cg_arch_register(&a) == -1 && strstr(cg_errmsg(), "taken"),
	       "a second arch named cvae is refused");
	a.name = "toy2";
	a.opts = seed_opt;
	a.nopts = 1;
	expect(cg_arch_register(&a) == -1 && strstr(cg_errmsg(), "cg-init"),
	       "an option named as one of cg-init's own is refused");
	a.opts = tied_int;
	expect(cg_arch_register(&a) == -1 && strstr(cg_errmsg(), "bool"),
	       "--tied as an int beside cgpt's bool --tied is refused");
	a.opts = bad_dflt;
	expect(cg_arch_register(&a) == -1 && strstr(cg_errmsg(), "default"),
	       "a default outside its range is refused");
	a = cg_arch_toy;
	a.name = "toy2";
	a.sample_text = NULL;
	a.image_shape = NULL;
	expect(cg_arch_register(&a) == -1,
	       "an image arch without image_shape is refused");
	a = *cg_arch_find("cclf");
	a.name = "toy2";
	a.nfeatures = NULL;
	expect(cg_arch_register(&a) == -1,
	       "a classifier without nfeatures is refused");
	a.nfeatures = cg_arch_find("cclf")->nfeatures;
	a.sample_image = cg_arch_toy.sample_image;
	expect(cg_arch_register(&a) == -1,
	       "a classifier that also samples is refused");
	a = *cg_arch_find("cclf");
	a.name = "toy2";
	a.diffusion = 1;
	expect(cg_arch_register(&a) == -1 && strstr(cg_errmsg(), "diffusion"),
	       "a classifier that takes the diffusion options is refused");
	expect(cg_arch_count() == 6, "refused archs are not registered");
	for (int i = 0; i < cg_arch_count(); i++)
		found += cg_arch_opt_find(cg_arch_at(i), "layers") != NULL;
	expect(found == 5,
	       "cvae, cgpt, cclf, cddpm and cgan all declare --layers");
}

static void
test_opts(void)
{
	const struct cg_arch *cvae = cg_arch_find("cvae");
	const struct cg_arch *cgpt = cg_arch_find("cgpt");
	const struct cg_arch_opt *o;
	double v = -1;

	o = cg_arch_opt_find(cvae, "layers");
	expect(o && o->dflt == 2 && cg_arch_opt_find(cgpt, "layers")->dflt == 4,
	       "--layers: default 2 for cvae, 4 for cgpt");
	expect(cg_arch_opt_parse(o, "7", &v) == 0 && v == 7,
	       "an int option parses");
	expect(cg_arch_opt_parse(o, "65", &v) == -1 &&
	           strstr(cg_errmsg(), "--layers"),
	       "out of range: refused, the message names --layers");
	expect(cg_arch_opt_parse(o, NULL, &v) == -1,
	       "an int option needs a value");
	o = cg_arch_opt_find(cgpt, "tied");
	expect(o && cg_arch_opt_parse(o, NULL, &v) == 0 && v == 1 &&
	           cg_arch_opt_parse(o, "0", &v) == 0 && v == 0 &&
	           cg_arch_opt_parse(o, "2", &v) == -1,
	       "a bool: alone 1, =0 0, =2 refused");
	o = cg_arch_opt_find(&cg_arch_toy, "spread");
	expect(o && cg_arch_opt_parse(o, "0.25", &v) == 0 && v == 0.25 &&
	           cg_arch_opt_parse(o, "11", &v) == -1 &&
	           cg_arch_opt_parse(o, "nan", &v) == -1,
	       "a float: 0.25 parses, 11 and nan are refused");
	expect(cg_arch_opt_find(cvae, "width") == NULL, "cvae has no --width");
}

static void
test_config(const struct cg_shard *s)
{
	static const char *const cvae_keys[] = {
	    "in_dim", "ncond",       "hidden",    "layers",
	    "latent", "class-prior", "cond-every"};
	static const char *const toy_keys[] = {"in_dim", "ncond", "spread",
	                                       "shared"};
	static const char *const extra_keys[] = {"conditions", "image"};
	const double vals[] = {0.25, 1};
	cJSON *config, *extra;

	if (cg_arch_config(cg_arch_find("cvae"), s, NULL, &config, &extra) != 0)
		die("cg_arch_config cvae");
	expect(keys_are(config, cvae_keys, 7) && keys_are(extra, extra_keys, 2),
	       "cvae: config keys in the order models have them");
	expect(cg_json_u64(config, "in_dim", 0) == H * W &&
	           cg_json_u64(config, "ncond", 0) == 3 &&
	           cg_json_u64(config, "hidden", 0) == 512 &&
	           cg_json_u64(config, "layers", 0) == 2 &&
	           cg_json_u64(config, "latent", 0) == 32 &&
	           cg_json_u64(config, "class-prior", 0) == 1 &&
	           cg_json_u64(config, "cond-every", 0) == 1,
	       "cvae: the shard's sizes and the defaults");
	cJSON_Delete(config);
	cJSON_Delete(extra);
	if (cg_arch_config(&cg_arch_toy, s, vals, &config, &extra) != 0)
		die("cg_arch_config toy");
	expect(keys_are(config, toy_keys, 4) &&
	           cg_json_num(config, "spread", 0) == 0.25 &&
	           cg_json_num(config, "shared", 0) == 1,
	       "toy: data keys, then the options as given");
	cJSON_Delete(config);
	cJSON_Delete(extra);
	expect(cg_arch_config(cg_arch_find("cgpt"), s, NULL, &config, &extra) ==
	               -1 &&
	           strcmp(cg_errmsg(), "cgpt needs text data") == 0 &&
	           config == NULL && extra == NULL,
	       "cgpt refuses an image shard");
}

/* The int or double of key row k in the config struct c. */
static double
key_value(const struct cg_arch *a, const struct cg_arch_key *k,
          const unsigned char *c)
{
	const struct cg_arch_opt *o = cg_arch_opt_find(a, k->name);
	int i;
	double d;

	if (o && o->type == CG_ARCH_OPT_FLOAT) {
		memcpy(&d, c + k->offset, sizeof(d));
		return d;
	}
	memcpy(&i, c + k->offset, sizeof(i));
	return i;
}

/* Each arch's config is read through its key table, in one place: the
 * options' ranges (cg-init's) hold for a model file too, keys models
 * made before them lack get their old value, and a table that misses an
 * option is refused at registration. */
static void
test_keys(const struct cg_shard *s)
{
	_Alignas(max_align_t) unsigned char c[CG_ARCH_MAX_CONFIG];
	const struct cg_arch *dd = cg_arch_find("cddpm");
	cJSON *config, *extra;

	for (int i = 0; i < cg_arch_count(); i++) {
		const struct cg_arch *a = cg_arch_at(i);
		int ok = 1;

		if (a->nkeys == 0 || a->sample_text != NULL)
			continue;
		if (cg_arch_config(a, s, NULL, &config, &extra) != 0)
			die("cg_arch_config");
		ok = cg_arch_read_config(a, config, c) == 0;
		for (int j = 0; ok && j < a->nkeys; j++) {
			const struct cg_arch_opt *o =
			    cg_arch_opt_find(a, a->keys[j].name);
			double want = o ? o->dflt
			                : cg_json_num(config, a->keys[j].name, -1);
			ok = key_value(a, &a->keys[j], c) == want;
		}
		printf("%-4s %s: every key read, at its default\n",
		       ok ? "ok" : "FAIL", a->name);
		failures += !ok;
		cJSON_Delete(config);
		cJSON_Delete(extra);
	}
	if (cg_arch_config(dd, s, NULL, &config, &extra) != 0)
		die("cg_arch_config cddpm");
	cJSON_ReplaceItemInObject(config, "layers", cJSON_CreateNumber(64));
	expect(cg_arch_read_config(dd, config, c) == 0,
	       "cddpm: 64 layers, the top of --layers, read");
	cJSON_ReplaceItemInObject(config, "layers", cJSON_CreateNumber(65));
	expect(cg_arch_read_config(dd, config, c) == -1 &&
	           strcmp(cg_errmsg(),
	                  "config: \"layers\" missing or out of range") == 0,
	       "cddpm: 65 layers, past --layers, refused in a model file");
	cJSON_ReplaceItemInObject(config, "layers", cJSON_CreateNumber(2.5));
	expect(cg_arch_read_config(dd, config, c) == -1,
	       "cddpm: a fraction of a layer refused");
	cJSON_ReplaceItemInObject(config, "layers", cJSON_CreateNumber(3));
	cJSON_DeleteItemFromObject(config, "snr-clip");
	cJSON_DeleteItemFromObject(config, "predict-x0");
	int ok = cg_arch_read_config(dd, config, c) == 0;
	for (int j = 0; ok && j < dd->nkeys; j++)
		if (strcmp(dd->keys[j].name, "snr-clip") == 0)
			ok = key_value(dd, &dd->keys[j], c) == CG_CDDPM_EPS_LOSS;
		else if (strcmp(dd->keys[j].name, "predict-x0") == 0)
			ok = key_value(dd, &dd->keys[j], c) == 0;
	expect(ok, "cddpm: a model made before snr-clip and predict-x0 "
	           "reads with the old loss");
	cJSON_DeleteItemFromObject(config, "cond-drop");
	expect(cg_arch_read_config(dd, config, c) == -1 &&
	           strstr(cg_errmsg(), "\"cond-drop\"") != NULL,
	       "cddpm: a required key missing refused");
	cJSON_Delete(config);
	cJSON_Delete(extra);

	const struct cg_arch *cv = cg_arch_find("cvae");
	if (cg_arch_config(cv, s, NULL, &config, &extra) != 0)
		die("cg_arch_config cvae");
	cJSON_DeleteItemFromObject(config, "class-prior");
	cJSON_DeleteItemFromObject(config, "cond-every");
	ok = cg_arch_read_config(cv, config, c) == 0;
	for (int j = 0; ok && j < cv->nkeys; j++)
		if (strcmp(cv->keys[j].name, "class-prior") == 0 ||
		    strcmp(cv->keys[j].name, "cond-every") == 0)
			ok = key_value(cv, &cv->keys[j], c) == 0;
	expect(ok, "cvae: a model made before class-prior and cond-every "
	           "reads without them");
	cJSON_Delete(config);
	cJSON_Delete(extra);

	struct cg_arch a = *cg_arch_find("cvae");
	a.name = "cvae-short";
	a.nkeys--; /* conv, an option, no longer read */
	expect(cg_arch_register(&a) == -1 &&
	           strcmp(cg_errmsg(), "arch cvae-short: option --conv: "
	                               "no config key") == 0,
	       "an option without a config key refused at registration");
	a = *cg_arch_find("cvae");
	a.name = "cvae-loud";
	static const char *const loud[] = {"hidden", NULL};
	a.quiet = loud; /* a key that is not optional */
	expect(cg_arch_register(&a) == -1 &&
	           strstr(cg_errmsg(), "quiet option hidden") != NULL,
	       "a quiet option whose key is not optional refused at "
	       "registration");
	a.nkeys++;
	a.config_size = 2;
	expect(cg_arch_register(&a) == -1 &&
	           strstr(cg_errmsg(), "outside its struct") != NULL,
	       "a key past the config struct refused at registration");
}

struct fd_ctx {
	struct cg_model *m;
	const struct cg_shard *s;
	const uint64_t *ex;
	int B;
};

static double
toy_loss(void *p)
{
	struct fd_ctx *c = p;
	struct cg_metrics r;

	if (c->m->arch->batch(c->m, c->s, c->ex, c->B, 0, NULL, &r) != 0)
		die("toy batch");
	return r.loss;
}

static void
test_toy(const struct cg_shard *s)
{
	const double vals[] = {0.7, 1};
	const uint64_t ex[] = {0, 1, 2, 3, 5, 3};
	cJSON *config, *extra;
	struct cg_model *m;
	struct cg_metrics r;
	float *g, *g2;
	struct fd_ctx c;
	int shape[3];

	if (cg_arch_config(&cg_arch_toy, s, vals, &config, &extra) != 0 ||
	    (m = cg_model_create("toy", config, extra, 5)) == NULL)
		die("toy model");
	expect(m->nparams == 3 * H * W + H * W && m->nviews == 2 &&
	           strcmp(m->views[1].name, "shared.logit") == 0,
	       "toy --shared: cond.logit [3, 6] and shared.logit [6]");
	expect(m->arch->check_data(m, s) == 0, "the shard fits the toy");
	expect(m->arch->image_shape(m, shape) == 0 && shape[0] == H &&
	           shape[1] == W && shape[2] == 1 && m->arch->nconds(m) == 3,
	       "its image shape and conditions");

	/* All logits 0: each pixel costs ln 2, whatever its value. */
	float *keep = xcalloc(m->nparams, sizeof(float));
	memcpy(keep, m->params, m->nparams * sizeof(float));
	memset(m->params, 0, m->nparams * sizeof(float));
	if (m->arch->batch(m, s, ex, 6, 0, NULL, &r) != 0)
		die("toy batch");
	printf("     zero logits: loss %.17g, H W ln 2 = %.17g\n", r.loss,
	       H * W * M_LN2);
	/* 36 terms of ln 2 summed, then divided by 6: tens of ulps of 4.2,
	 * under 1e-14. */
	expect(fabs(r.loss - H * W * M_LN2) < 1e-14 && r.n == 6,
	       "zero logits: the loss is H W ln 2 per image");
	memcpy(m->params, keep, m->nparams * sizeof(float));
	free(keep);

	/* The shared logits are not drawn: make them count. */
	for (int i = 0; i < H * W; i++)
		m->params[3 * H * W + i] = 0.3f * (float)(i - 2);
	g = xcalloc(m->nparams, sizeof(float));
	g2 = xcalloc(m->nparams, sizeof(float));
	if (m->arch->batch(m, s, ex, 6, 0, g, &r) != 0)
		die("toy batch with gradient");
	c = (struct fd_ctx){m, s, ex, 6};
	fdcheck(&FD_TOY, "toy gradient (repeats too)", m->params, g, m->nparams,
	        toy_loss, &c, 0);
	/*
	 * Backward adds: a second batch doubles what the first gave, up
	 * to the rounding of adding its six terms (each at most 1/6, the
	 * sum at most 2) one by one into a float: 6 half-ulps of 2, 1.5e-6.
	 */
	memcpy(g2, g, m->nparams * sizeof(float));
	if (m->arch->batch(m, s, ex, 6, 0, g2, &r) != 0)
		die("toy batch with gradient");
	double worst = 0;
	for (size_t i = 0; i < m->nparams; i++)
		worst = fmax(worst, fabs(g2[i] - 2.0 * g[i]));
	printf("     two batches against twice one: max abs diff %.3g\n",
	       worst);
	expect(worst <= 1.5e-6, "the gradient accumulates (+=)");
	free(g);
	free(g2);
	cg_model_free(m);
}

/* cg_arch_conv_keys: a convolutional form's key alone, before the
 * manifest gives the image, held to its range and the rest then checked
 * as the MLP's; nothing done for an MLP or a known image. */
static void
test_conv_keys(void)
{
	int conv = 0;

	expect(cg_arch_conv_keys("a", "conv", &conv, 8, 0) == 0 && conv == 0,
	       "conv keys: an MLP, nothing to do");
	conv = 8;
	expect(cg_arch_conv_keys("a", "conv", &conv, 8, 28) == 0 && conv == 8,
	       "conv keys: the image known, nothing to do");
	expect(cg_arch_conv_keys("a", "conv", &conv, 8, 0) == 1 && conv == 0,
	       "conv keys: before the image, its key in range, then the MLP");
	conv = 9;
	expect(cg_arch_conv_keys("cgan", "unet", &conv, 8, 0) == -1 &&
	           conv == 9 &&
	           strcmp(cg_errmsg(), "cgan: unet = 9: not in [0, 8]") == 0,
	       "conv keys: out of range, named by arch and key");
}

int
main(void)
{
	test_conv_keys();
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	struct cg_shard *s = image_shard(N, H, W, "test", extremes);

	test_registry();
	test_opts();
	test_config(s);
	test_keys(s);
	test_toy(s);
	cg_shard_free(s);
	return failures ? 1 : 0;
}
