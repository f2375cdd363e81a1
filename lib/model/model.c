/*
 * model/model.c - models in memory and in files, independent of architecture.
 *
 * A model file's manifest carries "arch", "config", "step" and whatever
 * the creator added (the condition vocabulary, image shape); its tensors
 * are the views of the flat parameter buffer in layout order, the mask of
 * a pruned model (lib/model/mask.c), then the optimizer's flat state.  Reading
 * rebuilds the layout from the config and demands every view with its
 * exact shape, so a file cannot smuggle in a buffer of another size.
 *
 * A model of one parameter group (every arch so far) keeps that group's
 * step count in the manifest's "opt_t", as it always has.  A model of
 * several keeps instead "groups": one object per group in layout order,
 * {"name", "offset", "size", "frozen", "opt_t"} (offset and size in
 * parameters); the reader demands the layout's names, ranges and frozen
 * flags and takes only the step counts.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cjson/cJSON.h>

#include "model/model.h"
#include "model/privacy.h"
#include "nn/gemm.h"

int
cg_model_conditions(const struct cg_model *m, int need, const char ***names,
                    int *n)
{
	const cJSON *list =
	    cJSON_GetObjectItemCaseSensitive(m->manifest, "conditions");
	const cJSON *v;
	int ncond, i = 0;

	*names = NULL;
	*n = 0;
	if ((ncond = m->arch->nconds(m)) < 0)
		return -1;
	if (list == NULL && !need) {
		if (ncond > CG_SHARD_MAX_CONDITIONS)
			return cg_seterr("the model has %d conditions: out of "
			                 "range",
			                 ncond);
		*n = ncond;
		return 0;
	}
	if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) < 1 ||
	    cJSON_GetArraySize(list) > CG_SHARD_MAX_CONDITIONS)
		return cg_seterr("manifest: no \"conditions\" list");
	if (ncond != cJSON_GetArraySize(list))
		return cg_seterr("manifest: %d condition names, but the model "
		                 "has %d conditions",
		                 cJSON_GetArraySize(list), ncond);
	if ((*names = calloc((size_t)ncond, sizeof(**names))) == NULL)
		return cg_seterr("out of memory");
	cJSON_ArrayForEach(v, list)
	{
		if (!cJSON_IsString(v)) {
			free(*names);
			*names = NULL;
			return cg_seterr("manifest: condition %d is not a "
			                 "string",
			                 i);
		}
		(*names)[i++] = v->valuestring;
	}
	*n = ncond;
	return 0;
}

int
cg_model_check_conditions(const struct cg_model *m, const struct cg_shard *s)
{
	const char **names;
	int n, rc = 0;

	if (cg_model_conditions(m, 0, &names, &n) != 0)
		return -1;
	if (names == NULL) /* a model without names takes any */
		return 0;
	/* where the arch can, a model is made over for the data's */
	const char *hint = m->arch->recondition
	                       ? " (cg-init --from MODEL -d SHARD makes it "
	                         "over for the data's)"
	                       : "";
	if ((size_t)n != s->nconditions)
		rc = cg_seterr("%zu conditions in the data, %d in the model%s",
		               s->nconditions, n, hint);
	for (int i = 0; rc == 0 && i < n; i++)
		if (strcmp(names[i], s->conditions[i]) != 0)
			rc = cg_seterr("condition %d is \"%.64s\" in the data "
			               "but \"%.64s\" in the model%s",
			               i, s->conditions[i], names[i], hint);
	free(names);
	return rc;
}

struct cg_model *
cg_model_recondition(const struct cg_model *old, const struct cg_shard *s,
                     uint64_t seed)
{
	const struct cg_arch *a = old->arch;
	cJSON *config = NULL, *extra = NULL, *fresh = NULL, *conds, *it;
	const char **names = NULL;
	struct cg_model *m = NULL;
	int *map = NULL, n;

	if (a->recondition == NULL) {
		cg_seterr("%s models cannot take other conditions", a->name);
		return NULL;
	}
	if (old->lora) {
		cg_seterr("a model with adapters: merge them first "
		          "(cg-convert --merge-lora)");
		return NULL;
	}
	if (cg_model_conditions(old, 1, &names, &n) != 0)
		return NULL;
	if ((config = cJSON_Duplicate(old->config, 1)) == NULL ||
	    (fresh = cJSON_CreateObject()) == NULL ||
	    (extra = cJSON_CreateObject()) == NULL ||
	    (conds = cJSON_AddArrayToObject(extra, "conditions")) == NULL ||
	    (map = calloc(s->nconditions + 1, sizeof(*map))) == NULL)
		goto oom;
	for (size_t i = 0; i < s->nconditions; i++) {
		cJSON *name = cJSON_CreateString(s->conditions[i]);
		if (name == NULL || !cJSON_AddItemToArray(conds, name)) {
			cJSON_Delete(name);
			goto oom;
		}
		map[i] = -1;
		for (int k = 0; k < n; k++)
			if (strcmp(names[k], s->conditions[i]) == 0)
				map[i] = k;
	}
	/* the keys the shard fixes replace old's: the rest is old's */
	if (a->config_from_shard(a, s, fresh, extra) != 0)
		goto fail;
	cJSON_ArrayForEach(it, fresh)
	{
		cJSON *dup = cJSON_Duplicate(it, 1);
		if (dup == NULL)
			goto oom;
		if (cJSON_GetObjectItemCaseSensitive(config, it->string)
		        ? !cJSON_ReplaceItemInObjectCaseSensitive(
		              config, it->string, dup)
		        : !cJSON_AddItemToObject(config, it->string, dup)) {
			cJSON_Delete(dup);
			goto oom;
		}
	}
	m = cg_model_create(a->name, config, extra, seed);
	config = extra = NULL; /* taken over */
	if (m == NULL || a->recondition(m, old, map) != 0)
		goto fail;
	free(names);
	free(map);
	cJSON_Delete(fresh);
	return m;
oom:
	cg_seterr("out of memory");
fail:
	cg_model_free(m);
	cJSON_Delete(config);
	cJSON_Delete(extra);
	cJSON_Delete(fresh);
	free(names);
	free(map);
	return NULL;
}

struct cg_model *
cg_model_add_lora(const struct cg_model *old, int r, double alpha,
                  const char *const *glob, int n, uint64_t seed)
{
	cJSON *man = NULL, *lo, *tg;
	struct cg_model *m;

	if (old->lora)
		return cg_seterr("the model has adapters already"), NULL;
	if (old->mask)
		return cg_seterr("a pruned model takes no adapters"), NULL;
	if ((man = cJSON_Duplicate(old->manifest, 1)) == NULL)
		goto oom;
	cJSON_DeleteItemFromObjectCaseSensitive(man, "step");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "lora");
	if ((lo = cJSON_AddObjectToObject(man, "lora")) == NULL ||
	    !cJSON_AddNumberToObject(lo, "r", r) ||
	    !cJSON_AddNumberToObject(lo, "alpha", alpha) ||
	    (tg = cJSON_AddArrayToObject(lo, "targets")) == NULL)
		goto oom;
	for (int k = 0; k < n; k++) {
		int hit = 0;
		for (int i = 0; i < old->nviews && !hit; i++)
			hit = old->views[i].ndim == 2 &&
			      fnmatch(glob[k], old->views[i].name, 0) == 0;
		if (!hit) {
			cJSON_Delete(man);
			cg_seterr("--lora-on '%s': matches no matrix of "
			          "the model (cg-inspect lists them)",
			          glob[k]);
			return NULL;
		}
	}
	for (int i = 0; i < old->nviews; i++) {
		const struct cg_view *v = &old->views[i];
		int hit = 0;
		for (int k = 0; k < n && !hit; k++)
			hit = v->ndim == 2 && fnmatch(glob[k], v->name, 0) == 0;
		if (!hit)
			continue;
		cJSON *name = cJSON_CreateString(v->name);
		if (name == NULL || !cJSON_AddItemToArray(tg, name)) {
			cJSON_Delete(name);
			goto oom;
		}
	}
	cJSON *config = cJSON_DetachItemFromObjectCaseSensitive(man, "config");
	if (config == NULL)
		goto oom;
	if ((m = cg_model_create(old->arch->name, config, man, seed)) == NULL)
		return NULL;
	/* the arch's views come first, where old has them */
	memcpy(m->params, old->params, old->nparams * sizeof(float));
	return m;
oom:
	cJSON_Delete(man);
	cg_seterr("out of memory");
	return NULL;
}

struct cg_model *
cg_model_merge_lora(const struct cg_model *m)
{
	const struct cg_lora *l = m->lora;
	struct cg_model *out = NULL;
	cJSON *man, *config;

	if (l == NULL)
		return cg_seterr("the model has no adapters"), NULL;
	if ((man = cJSON_Duplicate(m->manifest, 1)) == NULL)
		goto oom;
	cJSON_DeleteItemFromObjectCaseSensitive(man, "lora");
	if ((config = cJSON_DetachItemFromObjectCaseSensitive(man, "config")) ==
	    NULL) {
		cJSON_Delete(man);
		goto oom;
	}
	if ((out = cg_model_create(m->arch->name, config, man,
	                           cg_json_u64(m->manifest, "seed", 0))) ==
	    NULL)
		return NULL;
	/* the merged weights: W' over a copy of m's */
	memcpy(out->params, m->params, out->nparams * sizeof(float));
	if (l->merged == 0) {
		for (int k = 0; k < l->n; k++) {
			const struct cg_view *v = &m->views[l->w[k]];
			const struct cg_view *a = &m->views[l->a[k]];
			const struct cg_view *b = &m->views[l->b[k]];
			const int o = (int)v->shape[0], in = (int)v->shape[1];
			cg_sgemm(0, 0, o, in, l->r, (float)l->scale,
			         m->params + b->off, l->r, m->params + a->off,
			         in, 1.0f, out->params + v->off, in);
		}
	}
	out->step = m->step;
	return out;
oom:
	cg_seterr("out of memory");
	return NULL;
}

int
cg_model_check_teacher(const struct cg_model *m, struct cg_model *t,
                       const struct cg_shard *s)
{
	if (m->arch != t->arch)
		return cg_seterr("the teacher is a %s model, not %s",
		                 t->arch->name, m->arch->name);
	if (m->arch->distill == NULL || m->arch->check_teacher == NULL)
		return cg_seterr("%s models cannot learn from a teacher",
		                 m->arch->name);
	if (t->arch->check_data(t, s) != 0) {
		cg_errprefix("the teacher");
		return -1;
	}
	return m->arch->check_teacher(m, t);
}

int
cg_model_distilled(const struct cg_model *m, double *guidance)
{
	const cJSON *d =
	    cJSON_GetObjectItemCaseSensitive(m->manifest, "distilled");
	const cJSON *n, *g;

	*guidance = 0;
	if (d == NULL)
		return 0;
	n = cJSON_GetObjectItemCaseSensitive(d, "steps");
	g = cJSON_GetObjectItemCaseSensitive(d, "guidance");
	if (!cJSON_IsObject(d) || !cJSON_IsNumber(n) || !cJSON_IsNumber(g) ||
	    !(n->valuedouble >= 2 && n->valuedouble <= 100000) ||
	    n->valuedouble != floor(n->valuedouble) ||
	    !(g->valuedouble >= 0) || !isfinite(g->valuedouble))
		return cg_seterr("manifest: \"distilled\" is not {\"steps\": "
		                 "N in [2, 100000], \"guidance\": w >= 0}");
	*guidance = g->valuedouble;
	return (int)n->valuedouble;
}

int
cg_model_set_distilled(struct cg_model *m, int steps, double guidance)
{
	cJSON *d = cJSON_CreateObject();

	if (d == NULL || !cJSON_AddNumberToObject(d, "steps", steps) ||
	    !cJSON_AddNumberToObject(d, "guidance", guidance)) {
		cJSON_Delete(d);
		return cg_seterr("out of memory");
	}
	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "distilled");
	if (!cJSON_AddItemToObject(m->manifest, "distilled", d)) {
		cJSON_Delete(d);
		return cg_seterr("out of memory");
	}
	return 0;
}

void
cg_model_free(struct cg_model *m)
{
	if (m == NULL)
		return;
	if (m->arch && m->arch->free_ws)
		m->arch->free_ws(m);
	cJSON_Delete(m->manifest);
	if (m->params_map)
		munmap(m->params, m->params_map);
	else
		free(m->params);
	free(m->stored);
	free(m->pack);
	cg_file_free(m->src);
	free(m->views);
	free(m->groups);
	cg_lora_free(m->lora);
	free(m->opt_m);
	free(m->opt_v);
	free(m->outer_mom);
	free(m->ef_down);
	free(m->mask);
	free(m);
}

/*
 * A model with manifest man (taken over) laid out, parameters zeroed.
 * With lazy, the parameters are an anonymous mapping, whose pages take
 * memory only once written: the views an inference model keeps as
 * stored are never written and cost nothing.  from, when not NULL, is
 * the file the parameters are to be read from: every view must be one
 * of its tensors, so a config that lays out more parameters than all
 * its tensors hold is refused before they are allocated (a file of a
 * few bytes could otherwise ask for gigabytes).
 */
static struct cg_model *
model_new(cJSON *man, int lazy, const struct cg_file *from)
{
	struct cg_model *m = calloc(1, sizeof(*m));
	const cJSON *arch = cJSON_GetObjectItemCaseSensitive(man, "arch");

	if (m == NULL) {
		cJSON_Delete(man);
		cg_seterr("out of memory");
		return NULL;
	}
	m->manifest = man;
	if (!cJSON_IsString(arch)) {
		cg_seterr("manifest: no \"arch\"");
		goto fail;
	}
	if ((m->arch = cg_arch_find(arch->valuestring)) == NULL)
		goto fail;
	m->config = cJSON_GetObjectItemCaseSensitive(man, "config");
	if (!cJSON_IsObject(m->config)) {
		cg_seterr("manifest: no \"config\" object");
		goto fail;
	}
	if (m->arch->layout(m) != 0 || cg_lora_layout(m) != 0)
		goto fail;
	if (from) {
		uint64_t held = 0;
		for (size_t i = 0; i < from->ntensors; i++)
			held += from->tensors[i]->nelem;
		if (m->nparams > held) {
			cg_seterr("config: %zu parameters, more than the file's "
				  "tensors hold (%llu)",
				  m->nparams, (unsigned long long)held);
			goto fail;
		}
	}
	if (m->ngroups == 0) {
		struct cg_group all = {.name = "all", .n = m->nparams};
		if (cg_model_set_groups(m, &all, 1) != 0)
			goto fail;
	}
	if (lazy) {
		size_t n = m->nparams ? m->nparams * sizeof(float) : 1;
		void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			cg_seterr("out of memory (%zu bytes)", n);
			goto fail;
		}
#ifdef MADV_NOHUGEPAGE
		/* A huge page would make a small view cost 2 MiB. */
		madvise(p, n, MADV_NOHUGEPAGE);
#endif
		m->params = p;
		m->params_map = n;
	} else if ((m->params = cg_alloc(m->nparams * sizeof(float))) == NULL)
		goto fail;
	m->step = cg_json_u64(man, "step", 0);
	return m;
fail:
	cg_model_free(m);
	return NULL;
}

struct cg_model *
cg_model_laid_out(cJSON *man, int lazy)
{
	return model_new(man, lazy, NULL);
}

struct cg_model *
cg_model_create(const char *arch, cJSON *config, cJSON *extra, uint64_t seed)
{
	cJSON *man = extra ? extra : cJSON_CreateObject();
	struct cg_model *m;
	struct cg_rng r;

	if (man == NULL) {
		cJSON_Delete(config);
		cg_seterr("out of memory");
		return NULL;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(man, "arch");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "config");
	cJSON_AddStringToObject(man, "arch", arch);
	cJSON_AddItemToObject(man, "config", config);
	cJSON_DeleteItemFromObjectCaseSensitive(man, "seed");
	cJSON_AddNumberToObject(man, "seed", (double)seed);
	if ((m = model_new(man, 0, NULL)) == NULL)
		return NULL;
	cg_rng_seed(&r, seed);
	m->arch->init(m, &r);
	/* after the arch's draws: its weights are those of no adapters */
	cg_lora_init(m, &r);
	return m;
}

int
cg_model_put_views(const struct cg_model *m, struct cg_file *f,
		   const float *buf)
{
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		if (cg_file_add_ref(f, v->name, CG_F32, v->ndim, v->shape,
				    buf + v->off) == NULL)
			return -1;
	}
	return 0;
}

/* View v's tensor in f, its name and shape checked; NULL with a message. */
static struct cg_tensor *
view_tensor(const struct cg_view *v, const struct cg_file *f)
{
	struct cg_tensor *t = cg_file_find(f, v->name);

	if (t == NULL) {
		cg_seterr("tensor %s: missing", v->name);
		return NULL;
	}
	if (t->ndim != v->ndim || t->nelem != v->n ||
	    memcmp(t->shape, v->shape, v->ndim * sizeof(uint64_t))) {
		cg_seterr("tensor %s: shape differs from the model's", v->name);
		return NULL;
	}
	return t;
}

int
cg_model_get_views(const struct cg_model *m, const struct cg_file *f,
		   float *buf)
{
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		struct cg_tensor *t = view_tensor(v, f);
		if (t == NULL)
			return -1;
		/* any dtype: an f16, bf16 or quantized view is decoded */
		if (cg_tensor_to_f32(t, buf + v->off) != 0)
			return -1;
	}
	return 0;
}

/* The flat tensors of a model file: optimizer state, each [nparams]. */
static const char *const flat_names[] = {"opt.m", "opt.v", "outer.mom",
					 "ef.down"};

/* Whether flat tensor t (may be NULL: absent) fits m; -1 with a message. */
static int
flat_fits(const struct cg_model *m, const struct cg_tensor *t)
{
	if (t != NULL && t->nelem != m->nparams)
		return cg_seterr("tensor %s: expected [%zu] values", t->name,
				 m->nparams);
	return 0;
}

/*
 * Flat tensor name [nparams] of f into *dst (replacing what it held): a
 * copy, or with steal the file's own buffer (f gives it up); absent is
 * fine.
 */
static int
get_flat(const struct cg_model *m, const struct cg_file *f, const char *name,
	 float **dst, int steal)
{
	struct cg_tensor *t = cg_file_find(f, name);

	if (t == NULL)
		return 0;
	if (flat_fits(m, t) != 0 || cg_tensor_make_f32(t) != 0)
		return -1;
	free(*dst);
	*dst = NULL;
	if (steal && !t->borrowed) {
		*dst = t->data;
		t->data = NULL;
		return 0;
	}
	if ((*dst = cg_alloc(m->nparams * sizeof(float))) == NULL)
		return -1;
	memcpy(*dst, t->data, t->nbytes);
	if (steal)
		cg_file_let_go(f, t);
	return 0;
}

/* The step counts of m's groups from manifest man. */
static int
load_groups(struct cg_model *m, const cJSON *man)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(man, "groups");
	const cJSON *it;
	int i = 0;

	if (m->ngroups == 1 && arr == NULL) {
		m->groups[0].opt_t = cg_json_u64(man, "opt_t", 0);
		return 0;
	}
	if (arr == NULL)
		return 0; /* several groups, none has stepped yet */
	if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != m->ngroups)
		return cg_seterr("manifest: \"groups\" is not the %d group%s "
		                 "of the layout",
		                 m->ngroups, m->ngroups == 1 ? "" : "s");
	cJSON_ArrayForEach(it, arr)
	{
		struct cg_group *g = &m->groups[i++];
		const cJSON *name =
		    cJSON_GetObjectItemCaseSensitive(it, "name");
		const cJSON *fz =
		    cJSON_GetObjectItemCaseSensitive(it, "frozen");
		if (!cJSON_IsString(name) ||
		    strcmp(name->valuestring, g->name) != 0 ||
		    cg_json_u64(it, "offset", UINT64_MAX) != g->off ||
		    cg_json_u64(it, "size", UINT64_MAX) != g->n ||
		    !cJSON_IsBool(fz) || cJSON_IsTrue(fz) != (g->frozen != 0))
			return cg_seterr("manifest: group %d differs from the "
			                 "layout's %s",
			                 i - 1, g->name);
		g->opt_t = cg_json_u64(it, "opt_t", 0);
	}
	return 0;
}

static int
load_opt(struct cg_model *m, const struct cg_file *f, int steal)
{
	if (get_flat(m, f, flat_names[0], &m->opt_m, steal) != 0 ||
	    get_flat(m, f, flat_names[1], &m->opt_v, steal) != 0 ||
	    get_flat(m, f, flat_names[2], &m->outer_mom, steal) != 0 ||
	    get_flat(m, f, flat_names[3], &m->ef_down, steal) != 0)
		return -1;
	return load_groups(m, f->manifest);
}

/*
 * The rules of a model file, once: what every reader of f checks
 * against m (laid out from f's manifest by model_new, which checked the
 * arch, the config and that the tensors hold enough numbers) before it
 * reads a value: each view a tensor of the view's shape (of any dtype:
 * the container checked its bytes), the flat optimizer tensors of
 * nparams elements, the groups' record, the masks.  Sets m's groups'
 * step counts and mask; 0, or -1 with a message.
 */
static int
check_file(struct cg_model *m, const struct cg_file *f)
{
	for (int i = 0; i < m->nviews; i++)
		if (view_tensor(&m->views[i], f) == NULL)
			return -1;
	for (size_t i = 0; i < sizeof(flat_names) / sizeof(*flat_names); i++)
		if (flat_fits(m, cg_file_find(f, flat_names[i])) != 0)
			return -1;
	if (load_groups(m, f->manifest) != 0)
		return -1;
	return cg_model_read_mask(m, f);
}

/* f's manifest, less what is the container's, for model_new; NULL with
 * a message when f is not a model, or its privacy record is not sound
 * (privacy.h). */
static cJSON *
model_manifest(const struct cg_file *f)
{
	cJSON *man;

	if (strcmp(cg_file_kind(f), "model") != 0) {
		cg_seterr("a %s file, not a model", cg_file_kind(f));
		return NULL;
	}
	if (cJSON_GetObjectItemCaseSensitive(f->manifest, "stage")) {
		cg_seterr("a pipeline stage, not a whole model (cg-train-step "
		          "--next trains it, cg-convert --join makes the model "
		          "of its stages)");
		return NULL;
	}
	if (cg_dp_read(f->manifest, NULL) < 0)
		return NULL;
	if ((man = cJSON_Duplicate(f->manifest, 1)) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(man, "format");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "kind");
	return man;
}

int
cg_model_file_check(const struct cg_file *f)
{
	const cJSON *arch = cJSON_GetObjectItemCaseSensitive(f->manifest,
							    "arch");
	struct cg_model *m;
	cJSON *man;
	int rc;

	if ((man = model_manifest(f)) == NULL)
		return -1;
	/* no layout to check it against: tensors from elsewhere (what
	 * cg-convert makes of a safetensors file), or an arch this build
	 * lacks (a plug-in's) */
	if (!cJSON_IsString(arch) || cg_arch_find(arch->valuestring) == NULL) {
		cJSON_Delete(man);
		return 0;
	}
	/* lazy: the parameters are never written, and cost nothing */
	if ((m = model_new(man, 1, f)) == NULL)
		return -1;
	rc = check_file(m, f);
	cg_model_free(m);
	return rc;
}

int
cg_model_load_opt(struct cg_model *m, const struct cg_file *f)
{
	return load_opt(m, f, 0);
}

/*
 * The model in f.  With steal, f's buffers are taken or given back as
 * they are used (f is left fit only for cg_file_free), so that a model
 * and its optimizer state are never held twice over: a mapped file's
 * pages are let go of once copied (cg_file_let_go).
 */
static struct cg_model *
from_file(struct cg_file *f, const char *display, int steal)
{
	struct cg_model *m = NULL;
	cJSON *man;

	if ((man = model_manifest(f)) == NULL)
		goto fail;
	if ((m = model_new(man, 0, f)) == NULL || check_file(m, f) != 0)
		goto fail;
	if (cg_model_get_views(m, f, m->params) != 0)
		goto fail;
	if (steal)
		for (int i = 0; i < m->nviews; i++) {
			struct cg_tensor *t = cg_file_find(f, m->views[i].name);
			if (t)
				cg_file_let_go(f, t);
		}
	/* after the moments: they are masked too */
	if (load_opt(m, f, steal) != 0 || cg_model_load_mask(m, f) != 0)
		goto fail;
	return m;
fail:
	cg_model_free(m);
	cg_errprefix(display);
	return NULL;
}

struct cg_model *
cg_model_from_file(const struct cg_file *f, const char *display)
{
	return from_file((struct cg_file *)f, display, 0);
}

struct cg_model *
cg_model_read(const char *path)
{
	struct cg_file *f = cg_file_read(path);
	struct cg_model *m;

	if (f == NULL)
		return NULL;
	m = from_file(f, strcmp(path, "-") ? path : "(stdin)", 1);
	cg_file_free(f);
	return m;
}

/* Whether view i of inference model m, stored as dt, stays so (struct
 * cg_arch's keeps says when). */
static int
keep_view(const struct cg_model *m, int i, enum cg_dtype dt)
{
	const struct cg_view *v = &m->views[i];
	const struct cg_codec *c = cg_codec(dt);

	if (dt == CG_F32 || c == NULL || m->arch->keeps == NULL)
		return 0;
	switch (m->arch->keeps(m, i, dt)) {
	case CG_KEEP_PRODUCT:
		return v->ndim == 2 && cg_wmat_ok(dt, v->shape[1]);
	case CG_KEEP_ANY:
		/* decoded whole, a pruned weight of a type without an exact
		 * 0 reads as 0 below; the types the products take have one */
		if (m->mask != NULL && !cg_qlinear_keeps(dt))
			return 0;
		return c->kind == CG_KIND_FLOAT && c->decode != NULL &&
		       v->n % c->block == 0;
	default:
		return 0;
	}
}

/* The matrix of view i of m (2-D, kept) and its pack's bytes where the
 * file's pages of it can be given back for the pack (so that the model
 * still costs its file's size); 0: not packed. */
static size_t
pack_size(const struct cg_model *m, const struct cg_file *f, int i)
{
	const struct cg_view *v = &m->views[i];
	struct cg_tensor *t;

	if (m->stored[i].dtype == CG_F32 || v->ndim != 2 ||
	    v->shape[0] > INT_MAX || v->shape[1] > INT_MAX ||
	    (t = view_tensor(v, f)) == NULL || !t->borrowed)
		return 0;
	return cg_wmat_pack_bytes(&m->stored[i], (int)v->shape[0],
	                          (int)v->shape[1]);
}

/*
 * Pack m's kept matrices for the kernels' path (nn/qlinear.h: q8_0 on
 * AVX-512 VNNI) into one buffer, and give back the file's pages of each
 * (read again only by what decodes them).  One buffer of them all, so
 * that it is huge pages where the kernel has them.  0, or -1 with a
 * message.
 */
static int
pack_stored(struct cg_model *m, struct cg_file *f)
{
	size_t total = 0, at = 0;

	for (int i = 0; i < m->nviews; i++)
		total += (pack_size(m, f, i) + 63) & ~(size_t)63;
	if (total == 0)
		return 0;
	if ((m->pack = cg_alloc_raw(total)) == NULL)
		return -1;
	for (int i = 0; i < m->nviews; i++) {
		size_t n = pack_size(m, f, i);
		if (n == 0)
			continue;
		cg_wmat_pack(&m->stored[i], (int)m->views[i].shape[0],
		             (int)m->views[i].shape[1], (char *)m->pack + at);
		(void)cg_file_page_out(f, view_tensor(&m->views[i], f));
		at += (n + 63) & ~(size_t)63;
	}
	return 0;
}

struct cg_model *
cg_model_read_infer(const char *path)
{
	const char *display = strcmp(path, "-") ? path : "(stdin)";
	struct cg_model *m = NULL;
	struct cg_file *f;
	cJSON *man;
	int kept = 0;

	if (cg_qpath_init() != 0)
		return NULL;
	if ((f = cg_file_read(path)) == NULL)
		return NULL;
	if ((man = model_manifest(f)) == NULL)
		goto fail;
	if ((m = model_new(man, 1, f)) == NULL || check_file(m, f) != 0)
		goto fail;
	if ((m->stored = calloc((size_t)m->nviews, sizeof(*m->stored))) ==
	    NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		struct cg_tensor *t = view_tensor(v, f);
		uint64_t need;

		if (t == NULL)
			goto fail;
		/* The reader checked the byte length and every block's
		 * scale; checked again here, where the kernels rely on it. */
		if (cg_dtype_bytes(t->dtype, t->nelem, &need) != 0 ||
		    need != t->nbytes) {
			cg_seterr("tensor %s: byte length does not match "
			          "dtype and shape",
			          v->name);
			goto fail;
		}
		if (keep_view(m, i, t->dtype)) {
			const struct cg_codec *c = cg_codec(t->dtype);
			if (c->check && c->check(t->data, t->nelem) != 0) {
				char who[CG_MAX_NAME + 8];
				snprintf(who, sizeof(who), "tensor %s", v->name);
				cg_errprefix(who);
				goto fail;
			}
			m->stored[i].dtype = t->dtype;
			m->stored[i].data = t->data;
			kept++;
			continue;
		}
		if (cg_tensor_to_f32(t, m->params + v->off) != 0)
			goto fail;
		m->stored[i].dtype = CG_F32;
		m->stored[i].data = m->params + v->off;
		if (!t->borrowed) {
			free(t->data);
			t->data = NULL;
		}
	}
	/* Pruned weights of the decoded views read as 0 (q4_1 keeps no exact
	 * zero); the kept types (f16, q8_0, q4_0: keep_view) encode 0 as 0. */
	for (int i = 0; m->mask && i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		if (m->stored[i].dtype != CG_F32)
			continue;
		for (size_t j = v->off; j < v->off + v->n; j++)
			if (!(m->mask[j >> 3] >> (j & 7) & 1))
				m->params[j] = 0.0f;
	}
	/* a model with adapters runs merged */
	if (m->lora && kept) {
		int i = 0;
		while (m->stored[i].dtype == CG_F32)
			i++;
		cg_seterr("tensor %s: stored %s, and the model has adapters: "
		          "merge them before quantizing (cg-convert "
		          "--merge-lora)",
		          m->views[i].name, cg_dtype_name(m->stored[i].dtype));
		goto fail;
	}
	if (m->lora && cg_lora_merge(m, 1) != 0)
		goto fail;
	if (kept > 0 && pack_stored(m, f) != 0)
		goto fail;
	if (kept == 0) {
		/* Nothing lies in f: an ordinary model. */
		free(m->stored);
		m->stored = NULL;
		cg_file_free(f);
	} else
		m->src = f;
	return m;
fail:
	cg_model_free(m);
	cg_file_free(f);
	cg_errprefix(display);
	return NULL;
}

/* The groups' step counts into m's manifest (see the top of the file). */
static int
put_groups(struct cg_model *m)
{
	cJSON *arr, *o;

	if (m->ngroups == 1) {
		/* Plain SGD has no moments but its schedule still counts
		 * steps. */
		if (m->opt_m || m->opt_v || m->groups[0].opt_t > 0)
			cg_json_set_num(m->manifest, "opt_t",
			                (double)m->groups[0].opt_t);
		return 0;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "opt_t");
	cJSON_DeleteItemFromObjectCaseSensitive(m->manifest, "groups");
	if ((arr = cJSON_AddArrayToObject(m->manifest, "groups")) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < m->ngroups; i++) {
		const struct cg_group *g = &m->groups[i];
		if ((o = cJSON_CreateObject()) == NULL)
			return cg_seterr("out of memory");
		cJSON_AddItemToArray(arr, o);
		if (!cJSON_AddStringToObject(o, "name", g->name) ||
		    !cJSON_AddNumberToObject(o, "offset", (double)g->off) ||
		    !cJSON_AddNumberToObject(o, "size", (double)g->n) ||
		    !cJSON_AddBoolToObject(o, "frozen", g->frozen != 0) ||
		    !cJSON_AddNumberToObject(o, "opt_t", (double)g->opt_t))
			return cg_seterr("out of memory");
	}
	return 0;
}

/* m's file with params in place of its parameters; its optimizer's and
 * outer loop's arrays too when full. */
static struct cg_file *
model_file(struct cg_model *m, const float *params, int full)
{
	struct cg_file *f = cg_file_new("model");
	uint64_t n[1] = {m->nparams};

	if (f == NULL)
		return NULL;
	if (m->src != NULL) {
		cg_seterr("a model read for inference has no file of its own");
		goto fail;
	}
	cg_json_set_num(m->manifest, "step", (double)m->step);
	if (put_groups(m) != 0)
		goto fail;
	for (cJSON *it = m->manifest->child; it; it = it->next) {
		cJSON *dup = cJSON_Duplicate(it, 1);
		if (dup == NULL)
			goto fail;
		cJSON_AddItemToObject(f->manifest, it->string, dup);
	}
	if (cg_model_put_views(m, f, params) != 0 ||
	    cg_model_put_mask(m, f) != 0)
		goto fail;
	if (!full)
		return f;
	/* trained on, a moving average's model is a model of its own */
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "ema");
	if (m->opt_m && !cg_file_add_ref(f, "opt.m", CG_F32, 1, n, m->opt_m))
		goto fail;
	if (m->opt_v && !cg_file_add_ref(f, "opt.v", CG_F32, 1, n, m->opt_v))
		goto fail;
	if (m->outer_mom &&
	    !cg_file_add_ref(f, "outer.mom", CG_F32, 1, n, m->outer_mom))
		goto fail;
	if (m->ef_down &&
	    !cg_file_add_ref(f, "ef.down", CG_F32, 1, n, m->ef_down))
		goto fail;
	return f;
fail:
	cg_file_free(f);
	return NULL;
}

struct cg_file *
cg_model_file(struct cg_model *m)
{
	return model_file(m, m->params, 1);
}

struct cg_file *
cg_model_file_ema(struct cg_model *m, const float *avg, double decay)
{
	struct cg_file *f = model_file(m, avg, 0);
	cJSON *man = f ? f->manifest : NULL, *g;

	if (f == NULL)
		return NULL;
	/* no moments: an optimizer that goes on from it starts anew */
	cJSON_DeleteItemFromObjectCaseSensitive(man, "opt_t");
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(man, "groups"))
		cg_json_set_num(g, "opt_t", 0);
	cJSON_DeleteItemFromObjectCaseSensitive(man, "ema");
	if (cJSON_AddNumberToObject(man, "ema", decay) == NULL) {
		cg_seterr("out of memory");
		cg_file_free(f);
		return NULL;
	}
	return f;
}

int
cg_model_write(struct cg_model *m, const char *path, enum cg_compress c)
{
	return cg_file_write_free(cg_model_file(m), path, c);
}

void
cg_model_digest(const struct cg_model *m, unsigned char out[32])
{
	/* of the bytes a file holds: the same on every host */
	cg_sha256_le(out, m->params, m->nparams * sizeof(float), 4);
}

int
cg_model_file_digest(const struct cg_file *f, unsigned char out[32])
{
	struct cg_model *m;
	cJSON *man;
	int rc;

	if (strcmp(cg_file_kind(f), "model") != 0)
		return cg_seterr("a %s file, not a model", cg_file_kind(f));
	if ((man = cJSON_Duplicate(f->manifest, 1)) == NULL)
		return cg_seterr("out of memory");
	/* The parameters alone: no optimizer state is copied. */
	if ((m = model_new(man, 0, f)) == NULL)
		return -1;
	/* the parameters as a reader holds them: masked */
	if ((rc = cg_model_get_views(m, f, m->params)) == 0 &&
	    (rc = cg_model_load_mask(m, f)) == 0)
		cg_model_digest(m, out);
	cg_model_free(m);
	return rc;
}

int
cg_model_file_check_mask(const struct cg_file *f)
{
	struct cg_model *m;
	cJSON *man;
	int rc;

	if ((man = cJSON_Duplicate(f->manifest, 1)) == NULL)
		return cg_seterr("out of memory");
	if ((m = model_new(man, 1, NULL)) == NULL)
		return -1;
	rc = cg_model_read_mask(m, f);
	cg_model_free(m);
	return rc;
}

int
cg_model_set_groups(struct cg_model *m, const struct cg_group *g, int n)
{
	struct cg_group *out;
	int v = 0;
	size_t at = 0;

	if (n < 1 || n > m->nviews)
		return cg_seterr("layout: %d parameter groups for %d views", n,
		                 m->nviews);
	if ((out = calloc((size_t)n, sizeof(*out))) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < n; i++) {
		out[i] = g[i];
		out[i].name[CG_GROUP_NAME - 1] = '\0';
		out[i].opt_t = 0;
		out[i].view0 = v;
		/* The group's views: the next ones, end to end, exactly. */
		if (g[i].off == at && g[i].n > 0)
			while (v < m->nviews && m->views[v].off == at &&
			       at + m->views[v].n <= g[i].off + g[i].n)
				at += m->views[v++].n;
		out[i].nviews = v - out[i].view0;
		if (out[i].nviews == 0 || at != g[i].off + g[i].n) {
			free(out);
			return cg_seterr("layout: group %.32s is not a run of "
			                 "whole views",
			                 g[i].name);
		}
	}
	if (v != m->nviews || at != m->nparams) {
		free(out);
		return cg_seterr("layout: the parameter groups end at %zu of "
		                 "%zu parameters",
		                 at, m->nparams);
	}
	free(m->groups);
	m->groups = out;
	m->ngroups = n;
	return 0;
}

int
cg_model_ensure_opt(struct cg_model *m, int need_m, int need_v)
{
	if (need_m && m->opt_m == NULL &&
	    (m->opt_m = cg_alloc(m->nparams * sizeof(float))) == NULL)
		return -1;
	if (need_v && m->opt_v == NULL &&
	    (m->opt_v = cg_alloc(m->nparams * sizeof(float))) == NULL)
		return -1;
	return 0;
}

int
cg_model_ensure_ef_down(struct cg_model *m)
{
	if (m->ef_down == NULL &&
	    (m->ef_down = cg_alloc(m->nparams * sizeof(float))) == NULL)
		return -1;
	return 0;
}

int
cg_model_ensure_outer(struct cg_model *m)
{
	if (m->outer_mom == NULL &&
	    (m->outer_mom = cg_alloc(m->nparams * sizeof(float))) == NULL)
		return -1;
	return 0;
}

/* ------------------------------------------------------------- values */

/* -1 with the message for element i of tensor name, x [i] not finite. */
static int
not_finite(const char *name, uint64_t i, float x)
{
	return cg_seterr("tensor %s: element %llu is %s", name,
			 (unsigned long long)i,
			 isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

int
cg_model_check_finite(const struct cg_model *m, const float *x)
{
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		uint64_t at = cg_first_nonfinite(x + v->off, v->n);
		if (at < v->n)
			return not_finite(v->name, at, x[v->off + at]);
	}
	return 0;
}

int
cg_model_check_all_finite(const struct cg_model *m)
{
	const float *flat[] = {m->opt_m, m->opt_v, m->outer_mom, m->ef_down};

	if (cg_model_check_finite(m, m->params) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(flat) / sizeof(*flat); i++) {
		uint64_t at;
		if (flat[i] == NULL ||
		    (at = cg_first_nonfinite(flat[i], m->nparams)) == m->nparams)
			continue;
		return not_finite(flat_names[i], at, flat[i][at]);
	}
	return 0;
}
