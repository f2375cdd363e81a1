/*
 * test_encode.c - a worker's update encoded (train/encode.h): the residual
 * its state keeps is what the file did not carry and comes back, scaled,
 * in the next update; --no-feedback drops it; a lossless codec and a call
 * without a state keep none; the same inputs give the same bytes.  On
 * the test-only toy arch (arch_toy.c) and a shard made here.
 */
#define TEST_NAME "test_encode"
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "shards.h"
#include "train/encode.h"

#define N 6
#define D 6 /* pixels of an image */

static struct cg_model *
toy(void)
{
	cJSON *config = cJSON_CreateObject();
	struct cg_model *m;

	cJSON_AddNumberToObject(config, "in_dim", D);
	cJSON_AddNumberToObject(config, "ncond", 3);
	cJSON_AddNumberToObject(config, "shared", 1);
	cJSON_AddNumberToObject(config, "spread", 1);
	if ((m = cg_model_create("toy", config, NULL, 1)) == NULL)
		die("toy model");
	return m;
}

/* What f carries, decoded into out [nparams]; f freed. */
static void
decode(struct cg_file *f, const struct cg_model *m, float *out)
{
	struct cg_update *u = cg_update_from_file(f, "u");

	if (u == NULL || cg_update_get(u, m, out) != 0)
		die("decode");
	cg_update_free(u);
}

/* The state's residual [P], or NULL when it keeps none. */
static float *
residual(struct cg_state *st, uint64_t P)
{
	void *p = NULL;

	return cg_state_get(st, "ef.residual", CG_F32, P, &p) == 1 ? p : NULL;
}

int
main(void)
{
	struct cg_model *m = toy();
	struct cg_shard *s = image_shard(N, 2, 3, "test", NULL);
	struct cg_state *st = cg_state_new();
	const uint64_t P = m->nparams;
	float *x = xcalloc(P, sizeof(float)), *buf = xcalloc(P, sizeof(float));
	float *got = xcalloc(P, sizeof(float)), *keep = xcalloc(P, 4);
	struct cg_train_result res = {.samples = N, .weight = N};
	struct cg_uspec sign, f32;
	struct cg_file *f, *g;
	float *r;
	int ok;

	if (st == NULL || cg_uspec_parse("sign", &sign) != 0 ||
	    cg_uspec_parse("f32", &f32) != 0)
		die("setup");
	struct cg_train_enc e = {
	    .spec = &sign, .kind = CG_UPDATE_DELTA, .seed = 7, .decay = 1};
	for (uint64_t i = 0; i < P; i++)
		x[i] = (float)sin((double)i * 1.7) * (float)(1 + i % 5);

	/* no state: a file, no residual anywhere */
	memcpy(buf, x, P * 4);
	f = cg_train_encode(m, s, NULL, buf, &res, &e);
	memcpy(buf, x, P * 4);
	g = cg_train_encode(m, s, NULL, buf, &res, &e);
	expect(f && g && memcmp(buf, x, P * 4) == 0,
	       "no state: a file, buf as it was");
	char *a = f ? cJSON_PrintUnformatted(f->manifest) : NULL,
	     *b = g ? cJSON_PrintUnformatted(g->manifest) : NULL;
	expect(a && b && strcmp(a, b) == 0,
	       "the same inputs give the same manifest (digests)");
	free(a);
	free(b);
	cg_file_free(g);
	decode(f, m, got);

	/* with a state: the residual is what was not sent */
	memcpy(buf, x, P * 4);
	f = cg_train_encode(m, s, st, buf, &res, &e);
	r = residual(st, P);
	expect(f != NULL && r != NULL, "state: a residual kept");
	decode(f, m, got);
	ok = r != NULL;
	for (uint64_t i = 0; ok && i < P; i++)
		ok = r[i] == x[i] - got[i];
	expect(ok, "state: residual = update - what the file carries");
	double n2 = 0;
	for (uint64_t i = 0; r && i < P; i++)
		n2 += (double)r[i] * r[i];
	expect(n2 > 0, "sign loses something to keep");

	/* the next call adds it back, times the decay */
	memcpy(keep, r, P * 4);
	memcpy(buf, x, P * 4);
	e.decay = 0.5;
	f = cg_train_encode(m, s, st, buf, &res, &e);
	ok = f != NULL;
	for (uint64_t i = 0; ok && i < P; i++)
		ok = buf[i] == x[i] + 0.5f * keep[i];
	expect(ok, "next call: buf += decay * residual before encoding");
	cg_file_free(f);

	/* --no-feedback: the kept residual is zeroed, none is added */
	memcpy(buf, x, P * 4);
	e.no_feedback = 1;
	f = cg_train_encode(m, s, st, buf, &res, &e);
	r = residual(st, P);
	ok = f && r && memcmp(buf, x, P * 4) == 0;
	for (uint64_t i = 0; ok && i < P; i++)
		ok = r[i] == 0;
	expect(ok, "no feedback: the residual zeroed, buf as it was");
	cg_file_free(f);

	/* a lossless codec keeps none */
	struct cg_state *st2 = cg_state_new();
	e.no_feedback = 0;
	e.spec = &f32;
	memcpy(buf, x, P * 4);
	f = cg_train_encode(m, s, st2, buf, &res, &e);
	expect(f && st2 && residual(st2, P) == NULL,
	       "lossless: no residual kept");
	decode(f, m, got);
	expect(memcmp(got, x, P * 4) == 0, "lossless: the update exactly");

	cg_state_free(st2);
	cg_state_free(st);
	cg_shard_free(s);
	cg_model_free(m);
	free(x);
	free(buf);
	free(got);
	free(keep);
	return failures ? 1 : 0;
}
