/*
 * model.c - models in memory and in files, independent of architecture.
 *
 * A model file's manifest carries "arch", "config", "step" and whatever
 * the creator added (the condition vocabulary, image shape); its tensors
 * are the views of the flat parameter buffer in layout order, then the
 * optimizer's flat state.  Reading rebuilds the layout from the config and
 * demands every view with its exact shape, so a file cannot smuggle in a
 * buffer of another size.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model.h"

extern const struct cg_arch cg_arch_cvae;
extern const struct cg_arch cg_arch_cgpt;

static const struct cg_arch *const archs[] = {&cg_arch_cvae, &cg_arch_cgpt};

const struct cg_arch *
cg_arch_find(const char *name)
{
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
		if (strcmp(archs[i]->name, name) == 0)
			return archs[i];
	cg_seterr("unknown architecture '%.32s'", name);
	return NULL;
}

uint64_t
cg_json_u64(const cJSON *obj, const char *key, uint64_t dflt)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(j) || j->valuedouble < 0 ||
	    j->valuedouble > 9007199254740992.0)
		return dflt;
	return (uint64_t)j->valuedouble;
}

double
cg_json_num(const cJSON *obj, const char *key, double dflt)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNumber(j) ? j->valuedouble : dflt;
}

int
cg_model_check_conditions(const struct cg_model *m, const struct cg_shard *s)
{
	const cJSON *names =
	    cJSON_GetObjectItemCaseSensitive(m->manifest, "conditions");
	const cJSON *n;
	size_t i = 0;

	if (!cJSON_IsArray(names))
		return 0;
	if ((size_t)cJSON_GetArraySize(names) != s->nconditions)
		return cg_seterr("%zu conditions in the data, %d in the model",
				 s->nconditions, cJSON_GetArraySize(names));
	cJSON_ArrayForEach(n, names)
	{
		if (!cJSON_IsString(n) ||
		    strcmp(n->valuestring, s->conditions[i]) != 0)
			return cg_seterr("condition %zu is \"%.64s\" in the "
					 "data but \"%.64s\" in the model",
					 i, s->conditions[i],
					 cJSON_IsString(n) ? n->valuestring
							   : "?");
		i++;
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
	free(m->params);
	free(m->views);
	free(m->opt_m);
	free(m->opt_v);
	free(m->outer_mom);
	free(m);
}

/* A model with manifest man (taken over) laid out, parameters zeroed. */
static struct cg_model *
model_new(cJSON *man)
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
	if (m->arch->layout(m) != 0)
		goto fail;
	if ((m->params = cg_alloc(m->nparams * sizeof(float))) == NULL)
		goto fail;
	m->step = cg_json_u64(man, "step", 0);
	return m;
fail:
	cg_model_free(m);
	return NULL;
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
	if ((m = model_new(man)) == NULL)
		return NULL;
	cg_rng_seed(&r, seed);
	m->arch->init(m, &r);
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

int
cg_model_get_views(const struct cg_model *m, const struct cg_file *f,
		   float *buf)
{
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		struct cg_tensor *t = cg_file_find(f, v->name);
		if (t == NULL)
			return cg_seterr("tensor %s: missing", v->name);
		if (t->ndim != v->ndim || t->nelem != v->n ||
		    memcmp(t->shape, v->shape, v->ndim * sizeof(uint64_t)))
			return cg_seterr("tensor %s: shape differs from the "
					 "model's",
					 v->name);
		/* any dtype: an f16, bf16 or quantized view is decoded */
		if (cg_tensor_to_f32(t, buf + v->off) != 0)
			return -1;
	}
	return 0;
}

/*
 * Flat tensor name [nparams] of f into *dst: a copy, or with steal the
 * file's own buffer (f gives it up); absent is fine.
 */
static int
get_flat(const struct cg_model *m, const struct cg_file *f, const char *name,
	 float **dst, int steal)
{
	struct cg_tensor *t = cg_file_find(f, name);

	if (t == NULL)
		return 0;
	if (t->dtype != CG_F32 || t->nelem != m->nparams)
		return cg_seterr("tensor %s: expected f32 [%zu]", name,
				 m->nparams);
	if (steal && !t->borrowed) {
		*dst = t->data;
		t->data = NULL;
		return 0;
	}
	if ((*dst = cg_alloc(m->nparams * sizeof(float))) == NULL)
		return -1;
	memcpy(*dst, t->data, t->nbytes);
	return 0;
}

/*
 * The model in f.  With steal, f's buffers are taken or freed as they are
 * used (f is left fit only for cg_file_free), so that a model and its
 * optimizer state are never held twice over.
 */
static struct cg_model *
from_file(struct cg_file *f, const char *display, int steal)
{
	struct cg_model *m = NULL;
	cJSON *man;

	if (strcmp(cg_file_kind(f), "model") != 0) {
		cg_seterr("%s: a %s file, not a model", display,
			  cg_file_kind(f));
		return NULL;
	}
	if ((man = cJSON_Duplicate(f->manifest, 1)) == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(man, "format");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "kind");
	if ((m = model_new(man)) == NULL)
		goto fail;
	if (cg_model_get_views(m, f, m->params) != 0)
		goto fail;
	if (steal)
		for (int i = 0; i < m->nviews; i++) {
			struct cg_tensor *t = cg_file_find(f, m->views[i].name);
			if (t && !t->borrowed) {
				free(t->data);
				t->data = NULL;
			}
		}
	if (get_flat(m, f, "opt.m", &m->opt_m, steal) != 0 ||
	    get_flat(m, f, "opt.v", &m->opt_v, steal) != 0 ||
	    get_flat(m, f, "outer.mom", &m->outer_mom, steal) != 0)
		goto fail;
	m->opt_t = cg_json_u64(m->manifest, "opt_t", 0);
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
	struct cg_file *f = cg_file_read_copy(path);
	struct cg_model *m;

	if (f == NULL)
		return NULL;
	m = from_file(f, strcmp(path, "-") ? path : "(stdin)", 1);
	cg_file_free(f);
	return m;
}

static void
set_num(cJSON *o, const char *key, double v)
{
	cJSON_DeleteItemFromObjectCaseSensitive(o, key);
	cJSON_AddNumberToObject(o, key, v);
}

struct cg_file *
cg_model_file(struct cg_model *m)
{
	struct cg_file *f = cg_file_new("model");
	uint64_t n[1] = {m->nparams};

	if (f == NULL)
		return NULL;
	set_num(m->manifest, "step", (double)m->step);
	/* Plain SGD has no moments but its schedule still counts steps. */
	if (m->opt_m || m->opt_v || m->opt_t > 0)
		set_num(m->manifest, "opt_t", (double)m->opt_t);
	for (cJSON *it = m->manifest->child; it; it = it->next) {
		cJSON *dup = cJSON_Duplicate(it, 1);
		if (dup == NULL)
			goto fail;
		cJSON_AddItemToObject(f->manifest, it->string, dup);
	}
	if (cg_model_put_views(m, f, m->params) != 0)
		goto fail;
	if (m->opt_m && !cg_file_add_ref(f, "opt.m", CG_F32, 1, n, m->opt_m))
		goto fail;
	if (m->opt_v && !cg_file_add_ref(f, "opt.v", CG_F32, 1, n, m->opt_v))
		goto fail;
	if (m->outer_mom &&
	    !cg_file_add_ref(f, "outer.mom", CG_F32, 1, n, m->outer_mom))
		goto fail;
	return f;
fail:
	cg_file_free(f);
	return NULL;
}

int
cg_model_write(struct cg_model *m, const char *path, enum cg_compress c)
{
	struct cg_file *f = cg_model_file(m);
	int rc;

	if (f == NULL)
		return -1;
	rc = cg_file_write(f, path, c);
	cg_file_free(f);
	return rc;
}

void
cg_model_digest(const struct cg_model *m, unsigned char out[32])
{
	cg_sha256(out, m->params, m->nparams * sizeof(float));
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
cg_model_ensure_outer(struct cg_model *m)
{
	if (m->outer_mom == NULL &&
	    (m->outer_mom = cg_alloc(m->nparams * sizeof(float))) == NULL)
		return -1;
	return 0;
}
