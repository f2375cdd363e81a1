/*
 * test_report.c - lib/train/report.c: cg-train-step's --log line and
 * summary.
 *
 * A bare model (an arch with two named parts), a result, a memory plan,
 * a teacher's terms and an encoded update's manifest, with figures
 * chosen so that every printed number is exact.  The keys of the log
 * line are what scripts read and the summary's lines what people do,
 * so each is held letter for letter; the process's peak memory, the one
 * figure measured here, only to be there and positive.
 */
#define TEST_NAME "test_report"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "check.h"
#include "train/report.h"

static const struct cg_arch vae = {.name = "vae", .part_names = {"rec", "kl"}};

/* The log line of r without its memory_peak (checked apart), malloc'd. */
static char *
log_line(const struct cg_train_report *r)
{
	cJSON *j = cg_train_log_json(r), *peak;
	char *s;

	if (j == NULL)
		die("cg_train_log_json");
	peak = cJSON_DetachItemFromObjectCaseSensitive(j, "memory_peak");
	expect(cJSON_IsNumber(peak) && peak->valuedouble > 0,
	       "log: memory_peak, the process's peak, is there");
	cJSON_Delete(peak);
	if ((s = cJSON_PrintUnformatted(j)) == NULL)
		die("cJSON_PrintUnformatted");
	cJSON_Delete(j);
	return s;
}

/* The summary's lines joined by "|". */
static char *
summary(const struct cg_train_report *r)
{
	char lines[CG_TRAIN_SUMMARY_LINES][CG_TRAIN_SUMMARY_LINE];
	char *s = xcalloc(CG_TRAIN_SUMMARY_LINES, CG_TRAIN_SUMMARY_LINE + 1);
	int n = cg_train_summary(r, lines);

	for (int i = 0; i < n; i++) {
		if (i)
			strcat(s, "|");
		strcat(s, lines[i]);
	}
	return s;
}

/* The peak memory as the summary says it: measured, so taken again. */
static void
strip_peak(char *s)
{
	char *p = strstr(s, "peak memory ");

	if (p) {
		char *e = strchr(p, '(');
		memmove(p + strlen("peak memory "), e, strlen(e) + 1);
	}
}

int
main(void)
{
	struct cg_model m = {.arch = &vae, .step = 12};
	struct cg_train_result res = {
	    .mean = {.loss = 2.5, .part = {2, 0.5}, .data = 3, .teacher = 0.5},
	    .steps = 4,
	    .samples = 64};
	struct cg_memplan plan = {.estimate = 3 << 20};
	struct cg_distill d = {.alpha = 0.75, .tau = 2};
	struct cg_train_report r = {.emit = "delta",
	                            .m = &m,
	                            .res = &res,
	                            .plan = &plan,
	                            .steps = 4,
	                            .secs = 2};
	struct cg_file f = {0};
	char *s;

	expect_str(
	    log_line(&r),
	    "{\"emit\":\"delta\",\"step\":12,\"steps\":4,\"samples\":64,"
	    "\"loss\":2.5,\"rec\":2,\"kl\":0.5,\"seconds\":2,\"chunk\":0,"
	    "\"checkpoint\":false,\"memory_plan\":3145728}",
	    "log: the call, the arch's parts, the plan");
	s = summary(&r);
	strip_peak(s);
	expect_str(s,
	           "64 examples, loss 2.5000, 32 examples/s, peak memory "
	           "(planned 3)",
	           "summary: examples, loss, speed, memory");

	/* a teacher, a time limit, a chunked and checkpointed plan, an
	 * encoded update */
	r.distill = &d;
	r.steps = 10;
	plan.chunk = 8;
	plan.checkpoint = 1;
	f.manifest = cJSON_Parse("{\"codec\":{\"spec\":\"q8\",\"bytes\":100,"
	                         "\"dense_bytes\":400}}");
	if (f.manifest == NULL)
		die("cJSON_Parse");
	r.coded = &f;
	r.enc_secs = 0.25;
	expect_str(
	    log_line(&r),
	    "{\"emit\":\"delta\",\"step\":12,\"steps\":4,\"samples\":64,"
	    "\"loss\":2.5,\"rec\":2,\"kl\":0.5,\"data\":3,\"teacher\":0.5,"
	    "\"teacher_weight\":0.75,\"teacher_temp\":2,\"seconds\":2,"
	    "\"chunk\":8,\"checkpoint\":true,\"memory_plan\":3145728,"
	    "\"codec\":\"q8\",\"update_bytes\":100,\"dense_bytes\":400,"
	    "\"encode_seconds\":0.25}",
	    "log: the teacher's terms, the codec's sizes");
	s = summary(&r);
	strip_peak(s);
	expect_str(s,
	           "--time-limit: stopped after 4 of 10 steps|"
	           "64 examples, loss 2.5000, 32 examples/s, chunks of 8 "
	           "checkpointed, peak memory (planned 3)|"
	           "data term 3.0000, teacher term 0.5000 (weight 0.75, "
	           "temperature 2)|"
	           "encoded update: 100 bytes of 400 dense (4.0x smaller)",
	           "summary: time limit, chunks, teacher, encoded update");
	r.npeers = 3;
	r.distill = NULL;
	r.steps = 4;
	s = summary(&r);
	strip_peak(s);
	expect_str(s,
	           "64 examples, loss 2.5000, 32 examples/s, chunks of 8 "
	           "checkpointed, peak memory (planned 3)|"
	           "masked update: 100 bytes for 400 of f32, among 3 peers",
	           "summary: a masked update among its peers");

	/* a codec object without dense bytes is no encoded update */
	cJSON_Delete(f.manifest);
	f.manifest = cJSON_Parse("{\"codec\":{\"spec\":\"f32\"}}");
	if (f.manifest == NULL)
		die("cJSON_Parse");
	r.secs = 0;
	s = summary(&r);
	strip_peak(s);
	expect_str(s,
	           "64 examples, loss 2.5000, 0 examples/s, chunks of 8 "
	           "checkpointed, peak memory (planned 3)",
	           "summary: no sizes, no update line; no time, no speed");
	s = log_line(&r);
	expect(strstr(s, "codec") == NULL, "log: no sizes, no codec keys");
	free(s);
	cJSON_Delete(f.manifest);
	return failures ? 1 : 0;
}
