/*
 * train/audit.c - a deterministic call's record, and an update recomputed from
 * it.
 *
 * The record ("call" in a grad's or delta's manifest, cg(7)):
 *
 *     "deterministic": true
 *     "emit": "grad" | "delta", "steps": K, "batch": B,
 *     "seed": "N" (a string: a u64 does not fit a JSON number),
 *     "order": "shuffle" | "sequential", "clip": X,
 *     "optim": {"name", "lr", "beta1", "beta2", "eps", "momentum", "wd",
 *               "schedule", "warmup", "total", "lr_min"},
 *     "data": {"sha256": the shard's identity},
 *     "state": {"sha256": the starting state's identity} (absent: none),
 *     "chunk": C, "checkpoint": bool, and "distilled": true with a teacher,
 *     "precision": "bf16" or "f16" where not f32, and in f16
 *     "loss_scale": S, "scale_growth": N (struct cg_train_opts)
 *
 * The recomputation is cg-train-step's call again: the same plan, the
 * same state, cg_train_run, then a comparison of bits view by view.  An
 * update encoded by a codec (its rounding, its error feedback) or made
 * with a teacher is not recomputed here: refused, said so.  Reading the
 * record treats it as hostile: every figure within the bounds
 * cg-train-step accepts, before anything is allocated from it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "nn/gemm.h"
#include "train/audit.h"

/* cg-train-step's own bounds on --steps and --batch. */
#define MAX_STEPS (1 << 30)
#define MAX_BATCH (1 << 20)

static const char *const sched_names[] = {"constant", "cosine"};
static const char *const order_names[] = {"shuffle", "sequential"};

/* ------------------------------------------------------------- record */

static cJSON *
optim_json(const struct cg_optim *p)
{
	cJSON *o = cJSON_CreateObject();

	if (o == NULL)
		return NULL;
	cJSON_AddStringToObject(o, "name", cg_optim_name(p->kind));
	/* a float's value as a double: cJSON prints it back exactly */
	cJSON_AddNumberToObject(o, "lr", p->lr);
	cJSON_AddNumberToObject(o, "beta1", p->beta1);
	cJSON_AddNumberToObject(o, "beta2", p->beta2);
	cJSON_AddNumberToObject(o, "eps", p->eps);
	cJSON_AddNumberToObject(o, "momentum", p->momentum);
	cJSON_AddNumberToObject(o, "wd", p->wd);
	cJSON_AddStringToObject(o, "schedule", sched_names[p->sched]);
	cJSON_AddNumberToObject(o, "warmup", (double)p->warmup);
	cJSON_AddNumberToObject(o, "total", (double)p->total);
	cJSON_AddNumberToObject(o, "lr_min", p->lr_min);
	return o;
}

static int
add_digest(cJSON *c, const char *key, const unsigned char d[32])
{
	char hex[65];
	cJSON *o = cJSON_AddObjectToObject(c, key);

	if (o == NULL)
		return -1;
	cg_hex(hex, d);
	return cJSON_AddStringToObject(o, "sha256", hex) ? 0 : -1;
}

int
cg_call_record(cJSON *manifest, const struct cg_train_opts *o,
               const struct cg_shard *s, const unsigned char *state,
               const struct cg_model *m)
{
	cJSON *c = cJSON_CreateObject(), *op = optim_json(&o->opt);
	unsigned char id[32];
	char seed[24];

	if (c == NULL || op == NULL)
		goto oom;
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)o->seed);
	cJSON_AddBoolToObject(c, "deterministic", 1);
	cJSON_AddStringToObject(c, "emit",
	                        o->emit == CG_EMIT_GRAD ? "grad" : "delta");
	cJSON_AddNumberToObject(c, "steps", o->steps);
	cJSON_AddNumberToObject(c, "batch", o->batch);
	cJSON_AddStringToObject(c, "seed", seed);
	cJSON_AddStringToObject(c, "order", order_names[o->order]);
	cJSON_AddNumberToObject(c, "clip", o->clip);
	cJSON_AddItemToObject(c, "optim", op);
	op = NULL;
	cg_state_identity(s->file, id);
	if (add_digest(c, "data", id) != 0 ||
	    (state && add_digest(c, "state", state) != 0))
		goto oom;
	cJSON_AddNumberToObject(c, "chunk", m->chunk);
	cJSON_AddBoolToObject(c, "checkpoint", m->checkpoint != 0);
	if (o->distill)
		cJSON_AddBoolToObject(c, "distilled", 1);
	/* f32, the default, is not said: such records keep their bytes */
	if (cg_get_precision() == CG_PREC_BF16)
		cJSON_AddStringToObject(c, "precision", "bf16");
	if (cg_get_precision() == CG_PREC_F16) {
		cJSON_AddStringToObject(c, "precision", "f16");
		cJSON_AddNumberToObject(c, "loss_scale", o->loss_scale);
		cJSON_AddNumberToObject(c, "scale_growth", o->scale_growth);
	}
	cJSON_DeleteItemFromObjectCaseSensitive(manifest, "call");
	cJSON_AddItemToObject(manifest, "call", c);
	return 0;
oom:
	cJSON_Delete(c);
	cJSON_Delete(op);
	return cg_seterr("out of memory");
}

/* --------------------------------------------------------------- read */

/* The number under key within [lo, hi]: 0, or -1. */
static int
num(const cJSON *o, const char *key, double lo, double hi, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo) ||
	    !(v->valuedouble <= hi))
		return -1;
	*out = v->valuedouble;
	return 0;
}

/* A whole number under key within [lo, hi]. */
static int
whole(const cJSON *o, const char *key, double lo, double hi, double *out)
{
	return num(o, key, lo, hi, out) != 0 || *out != floor(*out) ? -1 : 0;
}

/* The index of the string under key among names[0..n): >= 0, or -1. */
static int
name_of(const cJSON *o, const char *key, const char *const *names, int n)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	for (int i = 0; cJSON_IsString(v) && i < n; i++)
		if (strcmp(v->valuestring, names[i]) == 0)
			return i;
	return -1;
}

/* {"sha256": hex} under key into d: 1, 0 where key is absent, -1. */
static int
digest_of(const cJSON *o, const char *key, unsigned char d[32])
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(v, "sha256");

	if (v == NULL)
		return 0;
	return cJSON_IsString(h) && cg_hex_parse(d, h->valuestring) == 0 ? 1
	                                                                 : -1;
}

static int
optim_read(const cJSON *o, struct cg_optim *p)
{
	static const char *const kinds[] = {"sgd", "momentum", "adam", "adamw"};
	double lr, b1, b2, eps, mom, wd, warm, total, lrmin;
	int k = name_of(o, "name", kinds, 4);
	int sc = name_of(o, "schedule", sched_names, 2);

	if (k < 0 || sc < 0 || num(o, "lr", 0, 1e30, &lr) ||
	    num(o, "beta1", 0, 1, &b1) || num(o, "beta2", 0, 1, &b2) ||
	    num(o, "eps", 0, 1e30, &eps) || num(o, "momentum", 0, 1, &mom) ||
	    num(o, "wd", 0, 1e30, &wd) ||
	    whole(o, "warmup", 0, 9007199254740992.0, &warm) ||
	    whole(o, "total", 0, 9007199254740992.0, &total) ||
	    num(o, "lr_min", 0, 1e30, &lrmin))
		return -1;
	p->kind = (enum cg_opt_kind)k;
	p->lr = (float)lr;
	p->beta1 = (float)b1;
	p->beta2 = (float)b2;
	p->eps = (float)eps;
	p->momentum = (float)mom;
	p->wd = (float)wd;
	p->sched = (enum cg_sched)sc;
	p->warmup = (uint64_t)warm;
	p->total = (uint64_t)total;
	p->lr_min = (float)lrmin;
	return 0;
}

int
cg_call_read(const struct cg_update *u, struct cg_call *c)
{
	const cJSON *m = u->file->manifest;
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "call");
	const cJSON *seed = cJSON_GetObjectItemCaseSensitive(r, "seed");
	const cJSON *det = cJSON_GetObjectItemCaseSensitive(r, "deterministic");
	static const char *const emits[] = {"grad", "delta"};
	double steps, batch, clip, chunk;
	int emit, order, st;
	char *end;

	memset(c, 0, sizeof(*c));
	if (r == NULL || !cJSON_IsTrue(det))
		return cg_seterr("%s: not made in deterministic mode "
		                 "(cg-train-step --deterministic): it cannot "
		                 "be recomputed",
		                 u->name);
	emit = name_of(r, "emit", emits, 2);
	order = name_of(r, "order", order_names, 2);
	if (emit < 0 || order < 0 || !cJSON_IsString(seed) ||
	    whole(r, "steps", 1, MAX_STEPS, &steps) ||
	    whole(r, "batch", 1, MAX_BATCH, &batch) ||
	    num(r, "clip", 0, 1e30, &clip) ||
	    whole(r, "chunk", 0, batch, &chunk) ||
	    !cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(r, "checkpoint")) ||
	    optim_read(cJSON_GetObjectItemCaseSensitive(r, "optim"),
	               &c->o.opt) != 0 ||
	    digest_of(r, "data", c->data) != 1 ||
	    (st = digest_of(r, "state", c->state)) < 0)
		return cg_seterr("%s: its call record is not well formed",
		                 u->name);
	/* digits only: strtoull takes a sign and spaces too */
	c->o.seed = strtoull(seed->valuestring, &end, 10);
	if (seed->valuestring[0] < '0' || seed->valuestring[0] > '9' ||
	    *end != '\0' || strlen(seed->valuestring) > 20 ||
	    (c->o.seed == UINT64_MAX &&
	     strcmp(seed->valuestring, "18446744073709551615") != 0))
		return cg_seterr("%s: its call record's seed is not a number",
		                 u->name);
	if ((emit == 0) != (u->kind == CG_UPDATE_GRAD))
		return cg_seterr("%s: a %s whose call record says --emit %s",
		                 u->name, cg_update_kind_name(u->kind),
		                 emits[emit]);
	c->o.emit = emit == 0 ? CG_EMIT_GRAD : CG_EMIT_DELTA;
	c->o.order = (enum cg_order)order;
	c->o.steps = (int)steps;
	c->o.batch = (int)batch;
	c->o.clip = clip;
	c->chunk = (int)chunk;
	c->checkpoint =
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "checkpoint"));
	c->has_state = st == 1;
	c->distilled =
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "distilled"));
	if (cJSON_GetObjectItemCaseSensitive(r, "precision") != NULL) {
		static const char *const precs[] = {"f32", "bf16", "f16"};
		int p = name_of(r, "precision", precs, 3);
		double ls, sg;
		if (p < 0)
			return cg_seterr("%s: its call record's precision is "
			                 "not f32, bf16 or f16",
			                 u->name);
		c->precision = p;
		/* f16's loss scaling: a power of two cg_train_run checks */
		if (p == CG_PREC_F16 &&
		    (num(r, "loss_scale", 1, 16777216, &ls) ||
		     whole(r, "scale_growth", 0, 1 << 30, &sg)))
			return cg_seterr("%s: its call record's loss scaling is "
			                 "not well formed",
			                 u->name);
		if (p == CG_PREC_F16) {
			c->o.loss_scale = ls;
			c->o.scale_growth = (int)sg;
		}
	}
	return 0;
}

/* -------------------------------------------------------------- audit */

/* Bits of x and y [n] compared into v. */
static void
compare(struct cg_audit_view *v, const float *x, const float *y, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint32_t a, b;
		memcpy(&a, &x[i], 4);
		memcpy(&b, &y[i], 4);
		if (a == b)
			continue;
		double d = fabs((double)x[i] - (double)y[i]);
		v->ndiff++;
		if (isnan(d))
			d = INFINITY;
		if (d > v->maxdiff)
			v->maxdiff = d;
	}
}

/*
 * Whether a manifest's figure x is y as a manifest holds it: cJSON prints
 * a number with 15 digits where they read back within a few ulp of it,
 * so y goes through the same print and parse before the comparison.
 */
static int
same_figure(double x, double y)
{
	cJSON *n = cJSON_CreateNumber(y), *back = NULL;
	char *s = n ? cJSON_PrintUnformatted(n) : NULL;

	if (s && (back = cJSON_Parse(s)) != NULL && cJSON_IsNumber(back))
		y = back->valuedouble;
	cJSON_Delete(n);
	cJSON_Delete(back);
	free(s);
	return x == y || (isnan(x) && isnan(y));
}

int
cg_audit_update(const struct cg_update *u, struct cg_model *m,
                const char *mname, const struct cg_shard *s, const char *sname,
                struct cg_state *st, const char *stname, struct cg_audit *a)
{
	struct cg_call c;
	struct cg_state *own = NULL;
	struct cg_train_result res;
	struct cg_memplan plan;
	unsigned char id[32];
	float *sent = NULL, *got = NULL;
	int rc = -1;

	memset(a, 0, sizeof(*a));
	if (stname == NULL)
		stname = "(state)";
	if (cg_call_read(u, &c) != 0)
		return -1;
	if (c.distilled)
		return cg_seterr("%s: made with a teacher: not audited",
		                 u->name);
	if (u->spec.codec != NULL && !cg_uspec_lossless(&u->spec))
		return cg_seterr("%s: encoded with a lossy codec: not audited",
		                 u->name);
	/* the inputs, each the one the update names */
	if (cg_update_check_base(u, m, mname) < 0)
		return -1;
	cg_state_identity(s->file, id);
	if (memcmp(id, c.data, 32) != 0)
		return cg_seterr("%s: not the shard %s was made from", sname,
		                 u->name);
	int loaded = cg_state_digest(st, id);
	if (c.has_state && !loaded)
		return cg_seterr("%s: made from a state: the worker's state "
		                 "before the call is needed",
		                 u->name);
	if (!c.has_state && loaded)
		return cg_seterr("%s: %s was made without a state", stname,
		                 u->name);
	if (c.has_state && memcmp(id, c.state, 32) != 0)
		return cg_seterr("%s: not the state %s started from", stname,
		                 u->name);
	/* The state is the worker's, byte for byte: its own call checked
	 * it against its inputs (cg_state_check), and the output it names
	 * may have been overwritten since, as a next call does. */
	if (st == NULL && (st = own = cg_state_new()) == NULL)
		return -1;
	/* the call again, as cg-train-step made it */
	cg_set_deterministic(1);
	cg_set_precision((enum cg_precision)c.precision);
	if (cg_train_plan(m, &c.o, st, 0, 0, c.checkpoint, &plan) != 0)
		goto out;
	m->chunk = c.chunk;
	m->checkpoint = c.checkpoint;
	if (cg_train_state_init(st, m, &c.o) != 0)
		goto out;
	if ((sent = cg_alloc(m->nparams * sizeof(float))) == NULL ||
	    (got = cg_alloc(m->nparams * sizeof(float))) == NULL ||
	    cg_update_get(u, m, sent) != 0)
		goto out;
	if (cg_train_run(m, s, &c.o, st, got, &res) != 0)
		goto out;
	if ((a->v = calloc((size_t)m->nviews, sizeof(*a->v))) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	a->nviews = m->nviews;
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *w = &m->views[i];
		struct cg_audit_view *v = &a->v[i];
		snprintf(v->name, sizeof(v->name), "%s", w->name);
		v->n = w->n;
		compare(v, sent + w->off, got + w->off, w->n);
		a->nbad += v->ndiff > 0;
	}
	a->samples[0] = u->samples;
	a->samples[1] = (double)res.samples;
	a->weight[0] = u->weight;
	a->weight[1] = res.weight;
	a->loss[0] = u->loss;
	a->loss[1] = res.mean.loss;
	a->fig_ok[0] = same_figure(a->samples[0], a->samples[1]);
	a->fig_ok[1] = same_figure(a->weight[0], a->weight[1]);
	a->fig_ok[2] = same_figure(a->loss[0], a->loss[1]);
	a->figures_ok = a->fig_ok[0] && a->fig_ok[1] && a->fig_ok[2];
	a->match = a->nbad == 0 && a->figures_ok;
	rc = 0;
out:
	if (rc != 0)
		cg_audit_free(a);
	free(sent);
	free(got);
	cg_state_free(own);
	return rc;
}

void
cg_audit_free(struct cg_audit *a)
{
	if (a == NULL)
		return;
	free(a->v);
	a->v = NULL;
	a->nviews = a->nbad = 0;
}

int
cg_audit_draw(int n, double fraction, uint64_t seed, unsigned char *pick)
{
	struct cg_rng r;
	double want = ceil(fraction * n - 1e-9);
	int k = want < 0 ? 0 : want > n ? n : (int)want;

	if (fraction > 0 && k == 0 && n > 0)
		k = 1;
	/* selection sampling (Knuth's algorithm S): each index in turn,
	 * taken with chance (still wanted) / (still left) */
	cg_rng_derive(&r, seed, 0x61756469ULL, (uint64_t)n); /* "audi" */
	for (int i = 0, need = k; i < n; i++) {
		pick[i] = cg_rng_below(&r, (uint64_t)(n - i)) < (uint64_t)need;
		need -= pick[i];
	}
	return k;
}

/* ------------------------------------------------------------ reports */

void
cg_audit_table(FILE *fp, const char *name, const struct cg_audit *a)
{
	static const char *const fig[] = {"samples", "weight", "loss"};
	const double *x[] = {a->samples, a->weight, a->loss};

	if (a->match) {
		fprintf(fp, "%s: match (%d tensors)\n", name, a->nviews);
		return;
	}
	fprintf(fp, "%s: mismatch: %d of %d tensors differ%s\n", name, a->nbad,
	        a->nviews, a->figures_ok ? "" : ", and its figures");
	for (int i = 0; i < a->nviews; i++) {
		const struct cg_audit_view *v = &a->v[i];
		if (v->ndiff)
			fprintf(fp,
			        "  %s: %llu of %llu differ, largest difference "
			        "%.9g\n",
			        v->name, (unsigned long long)v->ndiff,
			        (unsigned long long)v->n, v->maxdiff);
	}
	for (int i = 0; i < 3; i++)
		if (!a->fig_ok[i])
			fprintf(fp, "  %s: sent %.17g, recomputed %.17g\n",
			        fig[i], x[i][0], x[i][1]);
}

cJSON *
cg_audit_json(const char *name, const char *result, const struct cg_audit *a)
{
	cJSON *o = cJSON_CreateObject(), *t;

	if (o == NULL)
		return NULL;
	cJSON_AddStringToObject(o, "update", name);
	cJSON_AddStringToObject(o, "result", result);
	if (a && (t = cJSON_AddArrayToObject(o, "differ")) != NULL) {
		for (int i = 0; i < a->nviews; i++) {
			const struct cg_audit_view *v = &a->v[i];
			cJSON *e;
			if (!v->ndiff || (e = cJSON_CreateObject()) == NULL)
				continue;
			cJSON_AddStringToObject(e, "tensor", v->name);
			cJSON_AddNumberToObject(e, "elements", (double)v->n);
			cJSON_AddNumberToObject(e, "differ", (double)v->ndiff);
			/* JSON has no infinity: a NaN's difference is null */
			if (isinf(v->maxdiff))
				cJSON_AddNullToObject(e, "max_diff");
			else
				cJSON_AddNumberToObject(e, "max_diff",
				                        v->maxdiff);
			cJSON_AddItemToArray(t, e);
		}
		cJSON_AddNumberToObject(o, "tensors", a->nviews);
		cJSON_AddBoolToObject(o, "figures_match", a->figures_ok);
	}
	return o;
}

/* ----------------------------------------------------- files, a round */

int
cg_audit_files(const char *upath, const char *mpath, const char *spath,
               const char *stpath, struct cg_audit *a)
{
	struct cg_update *u = NULL;
	struct cg_model *m = NULL;
	struct cg_shard *s = NULL;
	struct cg_state *st = NULL;
	int rc = -1;

	if ((u = cg_update_read(upath)) == NULL ||
	    (m = cg_model_read(mpath)) == NULL ||
	    (s = cg_shard_open(spath)) == NULL ||
	    (stpath && cg_state_read(&st, stpath) != 0))
		goto out;
	if (stpath && !cg_state_loaded(st)) {
		cg_seterr("%s: no such state", stpath);
		goto out;
	}
	rc = cg_audit_update(u, m, mpath, s, spath, st, stpath, a);
out:
	cg_state_free(st);
	cg_shard_free(s);
	cg_model_free(m);
	cg_update_free(u);
	return rc;
}

void
cg_audit_round_free(struct cg_audit_item *it, int n)
{
	for (int i = 0; it && i < n; i++) {
		free(it[i].update);
		free(it[i].shard);
		free(it[i].state);
	}
	free(it);
}

/* A copy of s, or NULL with a message. */
static char *
dup(const char *s)
{
	char *d = strdup(s);
	if (d == NULL)
		cg_seterr("out of memory");
	return d;
}

int
cg_audit_round_read(const char *path, struct cg_audit_item **out)
{
	FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	char *line = malloc(CG_AUDIT_MAX_LINE + 2);
	struct cg_audit_item *it = NULL;
	int n = 0, lineno = 0, rc = -1;

	*out = NULL;
	if (fp == NULL) {
		cg_seterr("%s: %s", path, strerror(errno));
		goto out;
	}
	if (line == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	while (fgets(line, CG_AUDIT_MAX_LINE + 2, fp) != NULL) {
		char *f[4] = {0}, *save = NULL, *w;
		int nf = 0;

		lineno++;
		if (strlen(line) > CG_AUDIT_MAX_LINE) {
			cg_seterr("%s: line %d: longer than %d bytes", path,
			          lineno, CG_AUDIT_MAX_LINE);
			goto out;
		}
		for (w = strtok_r(line, " \t\r\n", &save); w && nf < 4;
		     w = strtok_r(NULL, " \t\r\n", &save))
			f[nf++] = w;
		if (nf == 0 || f[0][0] == '#')
			continue;
		if (nf < 2 || nf > 3) {
			cg_seterr("%s: line %d: not UPDATE SHARD [STATE]", path,
			          lineno);
			goto out;
		}
		if (n == CG_AUDIT_MAX_UPDATES) {
			cg_seterr("%s: more than %d updates", path,
			          CG_AUDIT_MAX_UPDATES);
			goto out;
		}
		struct cg_audit_item *m =
		    realloc(it, (size_t)(n + 1) * sizeof(*it));
		if (m == NULL) {
			cg_seterr("out of memory");
			goto out;
		}
		it = m;
		memset(&it[n], 0, sizeof(*it));
		n++;
		if ((it[n - 1].update = dup(f[0])) == NULL ||
		    (it[n - 1].shard = dup(f[1])) == NULL ||
		    (nf == 3 && (it[n - 1].state = dup(f[2])) == NULL))
			goto out;
	}
	if (ferror(fp)) {
		cg_seterr("%s: read failed", path);
		goto out;
	}
	if (n == 0) {
		cg_seterr("%s: no update listed", path);
		goto out;
	}
	*out = it;
	it = NULL;
	rc = n;
out:
	if (fp && fp != stdin)
		fclose(fp);
	free(line);
	cg_audit_round_free(it, n);
	return rc;
}
