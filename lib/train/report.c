/*
 * train/report.c - a cg-train-step call's --log line and summary.
 *
 * An encoded update's sizes are read back from its manifest's "codec"
 * object (exchange/ucodec.h writes them), so that the log and the
 * summary say what the file says.
 */
#include <stdio.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "train/report.h"

/* An encoded update's manifest "codec" object, or NULL. */
static const cJSON *
codec_of(const struct cg_train_report *r)
{
	if (r->coded == NULL)
		return NULL;
	return cJSON_GetObjectItemCaseSensitive(r->coded->manifest, "codec");
}

struct cJSON *
cg_train_log_json(const struct cg_train_report *r)
{
	const struct cg_model *m = r->m;
	const struct cg_train_result *res = r->res;
	const cJSON *c = codec_of(r);
	cJSON *o = cJSON_CreateObject();

	if (o == NULL)
		return NULL;
	cJSON_AddStringToObject(o, "emit", r->emit);
	cJSON_AddNumberToObject(o, "step", (double)m->step);
	cJSON_AddNumberToObject(o, "steps", res->steps);
	cJSON_AddNumberToObject(o, "samples", (double)res->samples);
	cJSON_AddNumberToObject(o, "loss", res->mean.loss);
	for (int i = 0; i < 3 && r->stage == NULL; i++)
		if (m->arch->part_names[i])
			cJSON_AddNumberToObject(o, m->arch->part_names[i],
			                        res->mean.part[i]);
	if (r->distill) {
		cJSON_AddNumberToObject(o, "data", res->mean.data);
		cJSON_AddNumberToObject(o, "teacher", res->mean.teacher);
		cJSON_AddNumberToObject(o, "teacher_weight", r->distill->alpha);
		cJSON_AddNumberToObject(o, "teacher_temp", r->distill->tau);
	}
	cJSON_AddNumberToObject(o, "seconds", r->secs);
	if (res->loss_scale > 0) { /* f16 */
		cJSON_AddNumberToObject(o, "loss_scale", res->loss_scale);
		cJSON_AddNumberToObject(o, "skipped", res->skipped);
	}
	if (r->plan) {
		cJSON_AddNumberToObject(o, "chunk", r->plan->chunk);
		cJSON_AddBoolToObject(o, "checkpoint", r->plan->checkpoint);
		cJSON_AddNumberToObject(o, "memory_plan",
		                        (double)r->plan->estimate);
	}
	if (r->stage) {
		const struct cg_stage_opts *so = r->stage;
		cJSON_AddNumberToObject(o, "stage", r->stage_index + 1);
		cJSON_AddNumberToObject(o, "stages", r->stage_count);
		cJSON_AddStringToObject(o, "schedule",
		                        so->one_f_one_b ? "1f1b" : "gpipe");
		cJSON_AddNumberToObject(o, "micro_batches", so->micro);
		cJSON_AddStringToObject(o, "wire", cg_dtype_name(so->wire));
		cJSON_AddNumberToObject(o, "wait_seconds", so->wait_s);
		cJSON_AddNumberToObject(o, "first_step_seconds",
		                        so->first_step_s);
		cJSON_AddNumberToObject(o, "first_wait_seconds",
		                        so->first_wait_s);
		cJSON_AddBoolToObject(o, "checkpoint", !so->kept);
		cJSON_AddNumberToObject(o, "memory_plan", (double)so->mem);
	}
	cJSON_AddNumberToObject(o, "memory_peak", (double)cg_rss_peak());
	if (cg_json_num(c, "dense_bytes", 0) > 0) {
		cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "spec");
		cJSON_AddStringToObject(
		    o, "codec", cJSON_IsString(sp) ? sp->valuestring : "");
		cJSON_AddNumberToObject(o, "update_bytes",
		                        cg_json_num(c, "bytes", 0));
		cJSON_AddNumberToObject(o, "dense_bytes",
		                        cg_json_num(c, "dense_bytes", 0));
		cJSON_AddNumberToObject(o, "encode_seconds", r->enc_secs);
	}
	return o;
}

int
cg_train_summary(const struct cg_train_report *r,
                 char lines[][CG_TRAIN_SUMMARY_LINE])
{
	const struct cg_train_result *res = r->res;
	const struct cg_memplan *p = r->plan;
	const cJSON *c = codec_of(r);
	double coded = cg_json_num(c, "bytes", 0);
	double dense = cg_json_num(c, "dense_bytes", 0);
	char chunks[64] = "";
	int n = 0;

	if (p->chunk || p->checkpoint)
		snprintf(chunks, sizeof(chunks), ", chunks of %d%s", p->chunk,
		         p->checkpoint ? " checkpointed" : "");
	if (res->steps < r->steps)
		snprintf(lines[n++], CG_TRAIN_SUMMARY_LINE,
		         "--time-limit: stopped after %d of %d steps",
		         res->steps, r->steps);
	snprintf(lines[n++], CG_TRAIN_SUMMARY_LINE,
	         "%llu examples, loss %.4f, %.0f examples/s%s, peak memory "
	         "%.0f MiB (planned %.0f)",
	         (unsigned long long)res->samples, res->mean.loss,
	         r->secs > 0 ? res->samples / r->secs : 0, chunks,
	         cg_rss_peak() / 1048576.0, p->estimate / 1048576.0);
	if (r->distill)
		snprintf(lines[n++], CG_TRAIN_SUMMARY_LINE,
		         "data term %.4f, teacher term %.4f (weight %g, "
		         "temperature %g)",
		         res->mean.data, res->mean.teacher, r->distill->alpha,
		         r->distill->tau);
	if (dense > 0 && r->npeers > 0)
		snprintf(lines[n++], CG_TRAIN_SUMMARY_LINE,
		         "masked update: %.0f bytes for %.0f of f32, among %d "
		         "peers",
		         coded, dense, r->npeers);
	else if (dense > 0)
		snprintf(lines[n++], CG_TRAIN_SUMMARY_LINE,
		         "encoded update: %.0f bytes of %.0f dense (%.1fx "
		         "smaller)",
		         coded, dense, dense / (coded > 0 ? coded : 1));
	return n;
}
