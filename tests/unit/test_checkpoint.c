/*
 * test_checkpoint.c - activation checkpointing of the image archs
 * through struct cg_arch and the memory planner.
 *
 * For each form that checkpoints (the cddpm's U-Net, with and without
 * FiLM and attention; the cvae's convolutional nets, with and without
 * FiLM; the cgan's convolutional generator, with and without the R1
 * penalty and the auxiliary classifier), a batch through the arch's
 * batch function: the loss and the gradient are the same bits
 * checkpointed or not, whole or in chunks, and at f16's loss scale 2^10
 * the gradient is 2^10 times, bit for bit
 * (the noise of each example is drawn from the seed before the forward
 * pass, so a recomputation draws nothing); its ws_bytes is smaller
 * checkpointed, whole and in chunks of one.  The planner: a budget
 * between the least a step needs checkpointed and the least it needs
 * without (chunks of one example both) is met, checkpointed, with a plan
 * under the budget; without a budget, asking for checkpointing gets it.
 * The MLP forms have nothing to recompute: their workspace is the same
 * either way, the planner never checkpoints them, and asking for it is
 * an error that says which form has it.  Exit 0 pass, 1 fail.
 */
#define TEST_NAME "test_checkpoint"
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "check.h"
#include "model/model.h"
#include "model/registry.h"
#include "nn/gemm.h"
#include "train/train.h"

#include "shards.h"

/* Examples per batch. */
#define B 6

/* A model of arch on s, its options the defaults but for the n keys
 * given their values. */
static struct cg_model *
make(const char *arch, const struct cg_shard *s, const char *const *keys,
     const double *vals, int n)
{
	const struct cg_arch *a = cg_arch_find(arch);
	cJSON *config, *extra;
	struct cg_model *m;

	if (a == NULL || cg_arch_config(a, s, NULL, &config, &extra) != 0)
		die(arch);
	for (int i = 0; i < n; i++) {
		cJSON_DeleteItemFromObjectCaseSensitive(config, keys[i]);
		cJSON_AddNumberToObject(config, keys[i], vals[i]);
	}
	if ((m = cg_model_create(arch, config, extra, 3)) == NULL)
		die(arch);
	return m;
}

/* The planner's options of a grad call of one batch of B. */
static struct cg_train_opts
grad_call(void)
{
	struct cg_train_opts o;

	memset(&o, 0, sizeof(o));
	o.steps = 1;
	o.batch = B;
	o.seed = 1;
	o.emit = CG_EMIT_GRAD;
	o.opt.kind = CG_OPT_SGD;
	return o;
}

/* A form that checkpoints: the same bits through batch, a smaller
 * workspace, and a budget only checkpointing meets. */
static void
test_form(const char *what, struct cg_model *m, const struct cg_shard *s)
{
	const uint64_t ex[B] = {5, 0, 3, 1, 4, 2};
	const size_t np = m->nparams;
	char msg[200];

	/* chunk 0 (whole) and 2, each plain and checkpointed */
	for (int chunk = 0; chunk <= 2; chunk += 2) {
		float *g[2];
		struct cg_metrics mt[2];
		for (int k = 0; k < 2; k++) {
			g[k] = xcalloc(np, sizeof(float));
			m->arch->free_ws(m);
			m->checkpoint = k;
			m->chunk = chunk;
			if (m->arch->batch(m, s, ex, B, 77, g[k], &mt[k]) != 0)
				die("batch");
		}
		snprintf(msg, sizeof(msg),
		         "%s, chunks of %d: the same loss (%.9g) and "
		         "gradient checkpointed, bit for bit",
		         what, chunk ? chunk : B, mt[0].loss);
		expect(mt[0].loss == mt[1].loss && mt[0].loss > 0 &&
		           mt[0].part[0] == mt[1].part[0] &&
		           mt[0].part[1] == mt[1].part[1] &&
		           mt[0].n == mt[1].n &&
		           memcmp(g[0], g[1], np * sizeof(float)) == 0,
		       msg);
		/* f16's loss scale: 2^10 times the gradient, bit for bit */
		float *g2 = xcalloc(np, sizeof(float));
		struct cg_metrics m2;
		m->arch->free_ws(m);
		m->checkpoint = 0;
		cg_set_loss_scale(1024);
		if (m->arch->batch(m, s, ex, B, 77, g2, &m2) != 0)
			die("batch");
		cg_set_loss_scale(1);
		size_t off = 0;
		for (size_t i = 0; i < np && off == 0; i++)
			if (g2[i] != 1024 * g[0][i])
				off = i + 1;
		snprintf(msg, sizeof(msg),
		         "%s, chunks of %d: at loss scale 2^10 the gradient "
		         "is 2^10 times, bit for bit (first off: %zu)",
		         what, chunk ? chunk : B, off);
		expect(off == 0 && m2.loss == mt[0].loss, msg);
		free(g2);
		free(g[0]);
		free(g[1]);
	}
	m->arch->free_ws(m);
	m->checkpoint = m->chunk = 0;

	const size_t w0 = m->arch->ws_bytes(m, B, 0, 0);
	const size_t w1 = m->arch->ws_bytes(m, B, 0, 1);
	const size_t o0 = m->arch->ws_bytes(m, B, 1, 0);
	const size_t o1 = m->arch->ws_bytes(m, B, 1, 1);
	snprintf(msg, sizeof(msg),
	         "    workspace: whole %zu bytes, checkpointed %zu; chunks "
	         "of one %zu, checkpointed %zu",
	         w0, w1, o0, o1);
	expect(o1 > 0 && o1 < o0 && w1 < w0 && o1 < w1, msg);

	/* The planner: the least a step needs checkpointed is its floor;
	 * without, a chunk of one's workspace more than that. */
	struct cg_train_opts o = grad_call();
	struct cg_memplan p;
	if (cg_train_plan(m, &o, NULL, 0, 0, 0, &p) != 0)
		die("cg_train_plan");
	expect(p.checkpoint == 0 && p.chunk == 0 && m->checkpoint == 0,
	       "    no budget: the whole batch, not checkpointed");
	const uint64_t floor1 = p.floor, floor0 = p.floor - o1 + o0;
	const uint64_t budget = (floor1 + floor0) / 2;
	int rc = cg_train_plan(m, &o, NULL, budget, 0, 0, &p);
	snprintf(msg, sizeof(msg),
	         "    a budget of %llu bytes, under the %llu chunks alone "
	         "need: met checkpointed (chunk %d, plan %llu)",
	         (unsigned long long)budget, (unsigned long long)floor0,
	         p.chunk, (unsigned long long)p.estimate);
	expect(rc == 0 && p.checkpoint == 1 && m->checkpoint == 1 &&
	           p.chunk >= 1 && p.chunk < B && m->chunk == p.chunk &&
	           p.estimate <= budget && p.estimate >= floor1,
	       msg);
	rc = cg_train_plan(m, &o, NULL, floor1 - 1, 0, 0, &p);
	expect(rc == -1 && strstr(cg_errmsg(), "a step needs at least"),
	       "    a byte less than the floor: refused");
	rc = cg_train_plan(m, &o, NULL, 0, 0, 1, &p);
	expect(rc == 0 && p.checkpoint == 1 && m->checkpoint == 1 &&
	           p.chunk == 0 && p.estimate == p.floor - o1 + w1,
	       "    asked for: checkpointed, the whole batch");
	m->checkpoint = m->chunk = 0;
}

/* A form without checkpointing: the same workspace, never planned, and
 * refused when asked for. */
static void
test_mlp(const char *what, struct cg_model *m)
{
	struct cg_train_opts o = grad_call();
	struct cg_memplan p;
	char msg[200];

	expect(m->arch->ws_bytes(m, B, 1, 1) == m->arch->ws_bytes(m, B, 1, 0),
	       "    the MLP's workspace: the same checkpointed");
	if (cg_train_plan(m, &o, NULL, 0, 0, 0, &p) != 0)
		die("cg_train_plan");
	int rc = cg_train_plan(m, &o, NULL, p.floor, 0, 0, &p);
	expect(rc == 0 && p.checkpoint == 0 && p.chunk == 1,
	       "    the MLP at its floor: chunks of one, not checkpointed");
	rc = cg_train_plan(m, &o, NULL, 0, 0, 1, &p);
	snprintf(msg, sizeof(msg), "%s: checkpointing refused (\"%s\")", what,
	         rc == -1 ? cg_errmsg() : "");
	expect(rc == -1 && strstr(cg_errmsg(), "the MLP has no activation "
	                                       "checkpointing") != NULL,
	       msg);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	struct cg_shard *s = image_shard(12, 8, 8, "img", NULL);

	static const char *const dk[] = {"hidden", "embed", "timesteps",
	                                 "unet",   "film",  "attn"};
	const double unet[][6] = {
	    {16, 8, 100, 4, 1, 0}, {16, 8, 100, 4, 0, 1}, {8, 4, 50, 2, 1, 1}};
	for (int i = 0; i < 3; i++) {
		struct cg_model *m = make("cddpm", s, dk, unet[i], 6);
		char what[96];
		snprintf(what, sizeof(what), "cddpm --unet %g, film %g attn %g",
		         unet[i][3], unet[i][4], unet[i][5]);
		test_form(what, m, s);
		cg_model_free(m);
	}
	const double mlp[] = {16, 8, 100, 0, 1, 0};
	struct cg_model *m = make("cddpm", s, dk, mlp, 6);
	test_mlp("cddpm, the MLP", m);
	cg_model_free(m);

	static const char *const vk[] = {"latent", "conv", "class-prior",
	                                 "cond-every"};
	const double conv[][4] = {{4, 4, 1, 1}, {3, 2, 0, 0}};
	for (int i = 0; i < 2; i++) {
		char what[96];
		m = make("cvae", s, vk, conv[i], 4);
		snprintf(what, sizeof(what),
		         "cvae --conv %g, prior and FiLM %g", conv[i][1],
		         conv[i][2]);
		test_form(what, m, s);
		cg_model_free(m);
	}
	static const char *const mk[] = {"latent", "hidden"};
	const double vmlp[] = {4, 16};
	m = make("cvae", s, mk, vmlp, 2);
	test_mlp("cvae, the MLP", m);
	cg_model_free(m);

	static const char *const gk[] = {"latent", "hidden", "conv", "r1",
	                                 "aux"};
	const double gan[][5] = {{8, 16, 4, 0, 0}, {8, 16, 2, 1, 2}};
	for (int i = 0; i < 2; i++) {
		char what[96];
		m = make("cgan", s, gk, gan[i], 5);
		snprintf(what, sizeof(what), "cgan --conv %g, r1 %g, aux %g",
		         gan[i][2], gan[i][3], gan[i][4]);
		test_form(what, m, s);
		cg_model_free(m);
	}
	const double gmlp[] = {8, 16, 0, 0, 0};
	m = make("cgan", s, gk, gmlp, 5);
	test_mlp("cgan, the MLP", m);
	cg_model_free(m);
	cg_shard_free(s);
	if (failures) {
		printf(TEST_NAME ": %d check(s) FAILED\n", failures);
		return 1;
	}
	printf(TEST_NAME ": all checks passed\n");
	return 0;
}
