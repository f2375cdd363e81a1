/*
 * test_figures.c - lib/eval/figures.c: cg-eval's row, judge line and
 * JSON object for each kind of model.
 *
 * The models are bare structs whose arch holds only what the figures
 * read (its names and its kind's flags), the shards only their kind and
 * image shape, and the figures are chosen so that every printed number
 * is exact: bits/dim 2 from a loss of 2 ln 2 per pixel value, ppl 8
 * from 3 bits per byte.  The column widths and the keys are what users'
 * scripts read, so each is held here letter for letter.
 */
#define TEST_NAME "test_figures"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "check.h"
#include "eval/figures.h"

static int
classify(struct cg_model *m, const float *x, int n, float *logits, float *feat)
{
	(void)m, (void)x, (void)n, (void)logits, (void)feat;
	return -1;
}

static const struct cg_arch vae = {
    .name = "vae", .loss_name = "nelbo", .part_names = {"rec", "kl"}};
static const struct cg_arch clf = {.name = "clf",
                                   .loss_name = "xent",
                                   .part_names = {"acc"},
                                   .classify = classify};
static const struct cg_arch dm = {
    .name = "dm", .loss_name = "mse", .diffusion = 1};
static const struct cg_arch gan = {
    .name = "gan", .adversarial = 1, .part_names = {"d", "g"}};
static const struct cg_arch gpt = {.name = "gpt"};

static const struct cg_shard image = {
    .kind = CG_PAYLOAD_IMAGE, .height = 4, .width = 2, .channels = 3};
static const struct cg_shard text = {.kind = CG_PAYLOAD_TEXT};

/* The table of f (with *header as given) as a malloc'd string. */
static char *
table(const struct cg_figures *f, int *header)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&buf, &n);

	if (fp == NULL)
		die("open_memstream");
	cg_figures_table(fp, f, header);
	fclose(fp);
	return buf;
}

/* f as one line of JSON, malloc'd. */
static char *
json(const struct cg_figures *f)
{
	cJSON *j = cg_figures_json(f);
	char *s;

	if (j == NULL)
		die("cg_figures_json");
	s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (s == NULL)
		die("cJSON_PrintUnformatted");
	return s;
}

/* An image model: its objective and parts; bits/dim only for a bound in
 * nats per image (not a classifier, diffusion or adversarial model). */
static void
test_images(void)
{
	struct cg_model m = {.arch = &vae, .step = 7};
	struct cg_metrics r = {
	    .n = 12, .loss = 2 * M_LN2 * 24, .part = {0.5, 0.25}};
	struct cg_figures f = {.model = "m.cgm",
	                       .data = "d.cgd",
	                       .seed = 3,
	                       .m = &m,
	                       .s = &image,
	                       .r = &r};
	int header = 0;

	expect_str(
	    table(&f, &header),
	    "  examples      nelbo        rec         kl   bits/dim  data\n"
	    "        12    33.2711     0.5000     0.2500     2.0000  d.cgd\n",
	    "table: the header, then a vae's row with bits/dim");
	expect(header == 1, "table: the header is noted");
	expect_str(
	    table(&f, &header),
	    "        12    33.2711     0.5000     0.2500     2.0000  d.cgd\n",
	    "table: no second header");
	expect_str(json(&f),
	           "{\"model\":\"m.cgm\",\"data\":\"d.cgd\",\"arch\":\"vae\","
	           "\"step\":7,\"seed\":3,\"examples\":12,"
	           "\"nelbo\":33.271064666877372,\"rec\":0.5,\"kl\":0.25,"
	           "\"bits_per_dim\":2}",
	           "json: a vae's keys, bits_per_dim");
	f.deterministic = 1;
	m.arch = &clf;
	header = 0;
	expect_str(
	    table(&f, &header),
	    "  examples       xent        acc  data\n"
	    "        12    33.2711     0.5000  d.cgd\n",
	    "table: a classifier's cross-entropy is no bound: no bits/dim");
	expect_str(
	    json(&f),
	    "{\"model\":\"m.cgm\",\"data\":\"d.cgd\",\"arch\":\"clf\","
	    "\"step\":7,\"seed\":3,\"deterministic\":true,\"examples\":12,"
	    "\"xent\":33.271064666877372,\"acc\":0.5}",
	    "json: --deterministic said, no bits_per_dim");
	m.arch = &dm;
	header = 0;
	expect_str(table(&f, &header),
	           "  examples        mse  data\n"
	           "        12    33.2711  d.cgd\n",
	           "table: a diffusion model's mse alone");
	m.arch = &gan;
	header = 0;
	expect_str(table(&f, &header),
	           "  examples       loss          d          g  data\n"
	           "        12    33.2711     0.5000     0.2500  d.cgd\n",
	           "table: an arch without a loss name: \"loss\"");
}

/* A text model: nats per token in a wider column, bpb and ppl, then
 * --generate's scores. */
static void
test_text(void)
{
	struct cg_model m = {.arch = &gpt, .step = 1};
	struct cg_metrics r = {.n = 5, .loss = 0.5, .bits_per = 3};
	struct cg_sampler sm = {.temperature = 0.5, .top_k = 4, .top_p = 0.75};
	struct cg_gen_result g = {
	    .n = 2, .bytes = 40, .bleu = 0.125, .rouge_l = 0.375};
	struct cg_figures f = {
	    .model = "-", .data = "t.cgd", .m = &m, .s = &text, .r = &r};
	int header = 0;

	expect_str(table(&f, &header),
	           "  examples nats_per_token        bpb        ppl  data\n"
	           "         5         0.5000     3.0000     8.0000  t.cgd\n",
	           "table: text: nats_per_token, bpb, ppl = 2^bpb");
	expect_str(
	    json(&f),
	    "{\"model\":\"-\",\"data\":\"t.cgd\",\"arch\":\"gpt\",\"step\":1,"
	    "\"seed\":0,\"examples\":5,\"loss\":0.5,\"nats_per_token\":0.5,"
	    "\"bpb\":3,\"ppl\":8}",
	    "json: text");
	f.sampler = &sm;
	f.gen = &g;
	header = 0;
	expect_str(
	    table(&f, &header),
	    "  examples nats_per_token        bpb        ppl       bleu    "
	    "rouge_l  data\n"
	    "         5         0.5000     3.0000     8.0000     0.1250     "
	    "0.3750  t.cgd\n",
	    "table: --generate's bleu and rouge_l");
	expect_str(
	    json(&f),
	    "{\"model\":\"-\",\"data\":\"t.cgd\",\"arch\":\"gpt\",\"step\":1,"
	    "\"seed\":0,\"examples\":5,\"loss\":0.5,\"nats_per_token\":0.5,"
	    "\"bpb\":3,\"ppl\":8,\"generated\":2,\"generated_bytes\":40,"
	    "\"temperature\":0.5,\"top_k\":4,\"top_p\":0.75,\"bleu\":0.125,"
	    "\"rouge_l\":0.375}",
	    "json: --generate's sampler and scores");
}

/* --judge: the call's line and table after the row, the header asked
 * for again; a diffusion model's sampler said. */
static void
test_judge(void)
{
	struct cg_model m = {.arch = &vae};
	struct cg_metrics r = {.n = 1, .loss = 2 * M_LN2 * 24};
	struct cg_judge_result jr = {.nfeatures = 32,
	                             .drawn = 6,
	                             .right = 3,
	                             .acc = 0.5,
	                             .real = 4,
	                             .real_acc = 0.75,
	                             .frechet = NAN};
	struct cg_diffusion_opts d = {.guidance = 1.5,
	                              .sampler = CG_SAMPLER_DDPM};
	struct cg_figures f = {.model = "m",
	                       .data = "d",
	                       .seed = 9,
	                       .m = &m,
	                       .s = &image,
	                       .r = &r,
	                       .judge = "clf.cgm",
	                       .judge_samples = 6,
	                       .judge_temperature = 1,
	                       .diffusion = &d,
	                       .jr = &jr};
	const char *all = "condition             drawn        acc       real"
	                  "   real_acc      frechet\n"
	                  "all                       6     0.5000          4"
	                  "     0.7500            -\n";
	char want[1024];
	int header = 0;

	snprintf(
	    want, sizeof(want),
	    "  examples      nelbo        rec         kl   bits/dim  data\n"
	    "         1    33.2711     0.0000     0.0000     2.0000  d\n"
	    "judge clf.cgm (6 images per condition, seed 9, 32 "
	    "features)\n%s",
	    all);
	expect_str(table(&f, &header), want,
	           "table: the judge's line and table");
	expect(header == 0, "table: after a judge, the next row has a header");
	expect_str(
	    json(&f),
	    "{\"model\":\"m\",\"data\":\"d\",\"arch\":\"vae\",\"step\":0,"
	    "\"seed\":9,\"examples\":1,\"nelbo\":33.271064666877372,\"rec\":0,"
	    "\"kl\":0,\"bits_per_dim\":2,\"judge\":\"clf.cgm\","
	    "\"judge_samples\":6,\"judge_features\":32,\"temperature\":1,"
	    "\"cond_acc\":0.5,\"judge_real_acc\":0.75,\"frechet\":null,"
	    "\"per_condition\":[]}",
	    "json: the judge's call and figures");
	/* a temperature other than 1 is named in the table */
	f.judge_temperature = 0.5;
	header = 1;
	snprintf(want, sizeof(want),
	         "         1    33.2711     0.0000     0.0000     2.0000  d\n"
	         "judge clf.cgm (6 images per condition, seed 9, 32 features; "
	         "temperature 0.5)\n%s",
	         all);
	expect_str(table(&f, &header), want,
	           "table: a temperature other than 1");
	char *t = json(&f);
	expect(strstr(t, "\"temperature\":0.5,") != NULL,
	       "json: the temperature");
	free(t);
	f.judge_temperature = 1;
	header = 0;
	m.arch = &dm;
	snprintf(want, sizeof(want),
	         "  examples        mse  data\n"
	         "         1    33.2711  d\n"
	         "judge clf.cgm (6 images per condition, seed 9, 32 features; "
	         "guidance 1.5, ddpm, its default steps)\n%s",
	         all);
	expect_str(
	    table(&f, &header), want,
	    "table: a diffusion model's guidance, sampler, default steps");
	d.sampler = CG_SAMPLER_DEFAULT;
	d.steps = 5;
	header = 1;
	snprintf(want, sizeof(want),
	         "         1    33.2711  d\n"
	         "judge clf.cgm (6 images per condition, seed 9, 32 features; "
	         "guidance 1.5, ddim, 5 steps)\n%s",
	         all);
	expect_str(table(&f, &header), want,
	           "table: the default sampler is ddim");
	expect_str(
	    json(&f),
	    "{\"model\":\"m\",\"data\":\"d\",\"arch\":\"dm\",\"step\":0,"
	    "\"seed\":9,\"examples\":1,\"mse\":33.271064666877372,"
	    "\"judge\":\"clf.cgm\",\"judge_samples\":6,\"judge_features\":32,"
	    "\"temperature\":1,\"guidance\":1.5,\"sampler\":\"ddim\",\"steps\":5,"
	    "\"cond_acc\":0.5,\"judge_real_acc\":0.75,\"frechet\":null,"
	    "\"per_condition\":[]}",
	    "json: a diffusion model's steps");
	d.steps = 0;
	char *s = json(&f);
	expect(strstr(s, "\"steps\":null") != NULL,
	       "json: the default steps are null");
	free(s);
}

int
main(void)
{
	test_images();
	test_text();
	test_judge();
	return failures ? 1 : 0;
}
