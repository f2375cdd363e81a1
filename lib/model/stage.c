/*
 * model/stage.c - a model cut by layers into pipeline stages, and the
 * stages joined back.
 *
 * The cut is the arch's (struct cg_stage_ops); this file only carries
 * ranges of the flat buffer in and out of files, so that a stage's file
 * is that range and the manifest, and the join is the concatenation.
 * A stage's model is laid out whole on an anonymous mapping (the moments
 * on calloc's, which maps large blocks as well): only the pages of its
 * range are ever written, and only those take memory.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model/stage.h"

/* Stage index of count for m, st->T and st->C set, *L its layers, or
 * -1 with a message. */
static int
layers_of(const struct cg_model *m, int index, int count,
          struct cg_stage *st, int *L)
{
	const struct cg_stage_ops *ops = m->arch->stages;

	memset(st, 0, sizeof(*st));
	if (ops == NULL)
		return cg_seterr("a %s model cannot be split into stages",
		                 m->arch->name);
	if (count < 1 || count > CG_STAGE_MAX || index < 0 || index >= count)
		return cg_seterr("stage %d of %d: not a stage", index + 1,
		                 count);
	if (m->mask || m->lora || m->ngroups != 1 || m->ef_down)
		return cg_seterr("a model with a mask, adapters, parameter "
		                 "groups or a downlink's residual is not cut "
		                 "into stages");
	if ((*L = ops->layers(m, count, &st->T, &st->C)) < 0)
		return -1;
	return 0;
}

int
cg_stage_plan_at(const struct cg_model *m, int index, int count, int a, int b,
                 struct cg_stage *st)
{
	const struct cg_stage_ops *ops = m->arch->stages;
	int L;

	if (layers_of(m, index, count, st, &L) != 0)
		return -1;
	/* the first stage holds the input's layer, the last the output's,
	 * and each of the others one layer at least (the join checks that
	 * they meet) */
	if (a < 0 || b <= a || b > L || (index == 0) != (a == 0) ||
	    (index == count - 1) != (b == L) || a < index ||
	    L - b < count - 1 - index)
		return cg_seterr("stage %d of %d: layers [%d, %d) of %d: not "
		                 "a stage's",
		                 index + 1, count, a, b, L);
	st->index = index;
	st->count = count;
	st->a = a;
	st->b = b;
	st->v0 = ops->layer_view(m, st->a);
	st->v1 = ops->layer_view(m, st->b);
	if (st->v0 < 0 || st->v1 > m->nviews || st->v1 <= st->v0)
		return cg_seterr("stage %d of %d: no views", index + 1, count);
	st->lo = m->views[st->v0].off;
	st->hi = st->v1 == m->nviews ? m->nparams : m->views[st->v1].off;
	return 0;
}

int
cg_stage_plan(const struct cg_model *m, int index, int count,
              struct cg_stage *st)
{
	int L;

	if (layers_of(m, index, count, st, &L) != 0)
		return -1;
	int base = L / count, extra = L % count;
	int a = index * base + (index < extra ? index : extra);
	return cg_stage_plan_at(m, index, count, a, a + base + (index < extra),
	                        st);
}

struct cg_file *
cg_stage_file(struct cg_model *m, const struct cg_stage *st)
{
	struct cg_file *f = cg_file_new("model");
	uint64_t n[1] = {st->hi - st->lo};

	if (f == NULL)
		return NULL;
	/* as cg_model_file: the step and the step count first */
	cg_json_set_num(m->manifest, "step", (double)m->step);
	if (m->opt_m || m->opt_v || m->groups[0].opt_t > 0)
		cg_json_set_num(m->manifest, "opt_t",
		                (double)m->groups[0].opt_t);
	for (cJSON *it = m->manifest->child; it; it = it->next) {
		cJSON *dup = cJSON_Duplicate(it, 1);
		if (dup == NULL)
			goto oom;
		cJSON_AddItemToObject(f->manifest, it->string, dup);
	}
	if (cg_stage_put(f->manifest, st) != 0)
		goto fail;
	for (int i = st->v0; i < st->v1; i++) {
		const struct cg_view *v = &m->views[i];
		if (cg_file_add_ref(f, v->name, CG_F32, v->ndim, v->shape,
		                    m->params + v->off) == NULL)
			goto fail;
	}
	if (m->opt_m &&
	    !cg_file_add_ref(f, "opt.m", CG_F32, 1, n, m->opt_m + st->lo))
		goto fail;
	if (m->opt_v &&
	    !cg_file_add_ref(f, "opt.v", CG_F32, 1, n, m->opt_v + st->lo))
		goto fail;
	if (m->outer_mom && !cg_file_add_ref(f, "outer.mom", CG_F32, 1, n,
	                                     m->outer_mom + st->lo))
		goto fail;
	return f;
oom:
	cg_seterr("out of memory");
fail:
	cg_file_free(f);
	return NULL;
}

int
cg_stage_put(cJSON *man, const struct cg_stage *st)
{
	cJSON *so, *layers;

	if ((so = cJSON_AddObjectToObject(man, "stage")) == NULL ||
	    !cJSON_AddNumberToObject(so, "index", st->index) ||
	    !cJSON_AddNumberToObject(so, "count", st->count) ||
	    (layers = cJSON_AddArrayToObject(so, "layers")) == NULL ||
	    !cJSON_AddItemToArray(layers, cJSON_CreateNumber(st->a)) ||
	    !cJSON_AddItemToArray(layers, cJSON_CreateNumber(st->b)))
		return cg_seterr("out of memory");
	return 0;
}

int
cg_stage_get(const cJSON *man, int *index, int *count, int *a, int *b)
{
	const cJSON *so = cJSON_GetObjectItemCaseSensitive(man, "stage");
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(so, "layers");

	if (so == NULL)
		return 0;
	*index = (int)cg_json_u64(so, "index", UINT64_MAX >> 1);
	*count = (int)cg_json_u64(so, "count", 0);
	if (!cJSON_IsObject(so) || *count < 1 || *count > CG_STAGE_MAX ||
	    *index < 0 || *index >= *count || !cJSON_IsArray(l) ||
	    cJSON_GetArraySize(l) != 2 ||
	    !cJSON_IsNumber(cJSON_GetArrayItem(l, 0)) ||
	    !cJSON_IsNumber(cJSON_GetArrayItem(l, 1)) ||
	    cJSON_GetArrayItem(l, 0)->valuedouble < 0 ||
	    cJSON_GetArrayItem(l, 1)->valuedouble > 1 << 20)
		return cg_seterr("manifest: \"stage\" is not a stage's record");
	*a = cJSON_GetArrayItem(l, 0)->valueint;
	*b = cJSON_GetArrayItem(l, 1)->valueint;
	return 1;
}

void
cg_stage_digest(const struct cg_model *m, const struct cg_stage *st,
                unsigned char out[32])
{
	/* of the bytes a file holds: the same on every host */
	cg_sha256_le(out, m->params + st->lo, (st->hi - st->lo) * sizeof(float),
	             4);
}

/* The "stage" of f's manifest into index, count, a, b; 0 or -1. */
static int
stage_of(const struct cg_file *f, int *index, int *count, int *a, int *b)
{
	int rc;

	if (strcmp(cg_file_kind(f), "model") != 0 ||
	    (rc = cg_stage_get(f->manifest, index, count, a, b)) == 0)
		return cg_seterr("not a pipeline stage (cg-convert --stage "
		                 "cuts one)");
	return rc < 0 ? -1 : 0;
}

/* f's manifest less the container's keys and "stage"; NULL or -1. */
static cJSON *
bare_manifest(const struct cg_file *f)
{
	cJSON *man = cJSON_Duplicate(f->manifest, 1);

	if (man == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(man, "format");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "kind");
	cJSON_DeleteItemFromObjectCaseSensitive(man, "stage");
	return man;
}

/* Flat moments name of f [hi - lo] into *dst + lo ([nparams], calloc'd
 * when absent); absent in f is fine.  0 or -1. */
static int
get_range(const struct cg_model *m, const struct cg_file *f, const char *name,
          const struct cg_stage *st, float **dst)
{
	struct cg_tensor *t = cg_file_find(f, name);

	if (t == NULL)
		return 0;
	if (t->ndim != 1 || t->nelem != st->hi - st->lo)
		return cg_seterr("tensor %s: expected [%zu] values", name,
		                 st->hi - st->lo);
	if (cg_tensor_make_f32(t) != 0)
		return -1;
	if (*dst == NULL &&
	    (*dst = calloc(m->nparams ? m->nparams : 1, sizeof(float))) == NULL)
		return cg_seterr("out of memory");
	memcpy(*dst + st->lo, t->data, t->nbytes);
	cg_file_let_go(f, t);
	return 0;
}

/* Stage st's tensors of f into m: its views and moments, and nothing
 * else in f.  0 or -1 with a message. */
static int
load_range(struct cg_model *m, const struct cg_file *f,
           const struct cg_stage *st)
{
	size_t want = (size_t)(st->v1 - st->v0);

	for (int i = st->v0; i < st->v1; i++) {
		const struct cg_view *v = &m->views[i];
		struct cg_tensor *t = cg_file_find(f, v->name);
		if (t == NULL)
			return cg_seterr("tensor %s: missing", v->name);
		if (t->ndim != v->ndim || t->nelem != v->n ||
		    memcmp(t->shape, v->shape, v->ndim * sizeof(uint64_t)))
			return cg_seterr("tensor %s: shape differs from the "
			                 "model's",
			                 v->name);
		if (cg_tensor_to_f32(t, m->params + v->off) != 0)
			return -1;
		/* not held twice: the file's copy goes */
		cg_file_let_go(f, t);
	}
	want += cg_file_find(f, "opt.m") != NULL;
	want += cg_file_find(f, "opt.v") != NULL;
	want += cg_file_find(f, "outer.mom") != NULL;
	if (f->ntensors != want)
		return cg_seterr("%zu tensors, the stage's are %zu",
		                 f->ntensors, want);
	if (get_range(m, f, "opt.m", st, &m->opt_m) != 0 ||
	    get_range(m, f, "opt.v", st, &m->opt_v) != 0 ||
	    get_range(m, f, "outer.mom", st, &m->outer_mom) != 0)
		return -1;
	m->groups[0].opt_t = cg_json_u64(f->manifest, "opt_t", 0);
	return 0;
}

/* The stage in f (taken: freed here) as a model, display naming it. */
static struct cg_model *
stage_from(struct cg_file *f, const char *display, struct cg_stage *st)
{
	struct cg_model *m = NULL;
	int index, count, a, b;
	cJSON *man;

	if (stage_of(f, &index, &count, &a, &b) != 0 ||
	    (man = bare_manifest(f)) == NULL ||
	    (m = cg_model_laid_out(man, 1)) == NULL ||
	    cg_stage_plan_at(m, index, count, a, b, st) != 0 ||
	    load_range(m, f, st) != 0) {
		cg_model_free(m);
		m = NULL;
		cg_errprefix(display);
	}
	cg_file_free(f);
	return m;
}

struct cg_model *
cg_stage_read(const char *path, struct cg_stage *st)
{
	const char *display = strcmp(path, "-") ? path : "(stdin)";
	struct cg_file *f = cg_file_read(path);

	if (f == NULL)
		return NULL;
	return stage_from(f, display, st);
}

struct cg_model *
cg_stage_or_model_read(const char *path, struct cg_stage *st, int *staged)
{
	const char *display = strcmp(path, "-") ? path : "(stdin)";
	struct cg_file *f = cg_file_read(path);
	struct cg_model *m;

	memset(st, 0, sizeof(*st));
	*staged = 0;
	if (f == NULL)
		return NULL;
	if (cJSON_GetObjectItemCaseSensitive(f->manifest, "stage")) {
		*staged = 1;
		return stage_from(f, display, st);
	}
	m = cg_model_from_file(f, display);
	cg_file_free(f);
	return m;
}

struct cg_model *
cg_stage_join(struct cg_file *const *f, int n, const char *const *display)
{
	const struct cg_file *by[CG_STAGE_MAX] = {0};
	int at[CG_STAGE_MAX][2], who[CG_STAGE_MAX];
	struct cg_model *m = NULL;
	cJSON *man = NULL;

	if (n < 1 || n > CG_STAGE_MAX) {
		cg_seterr("%d stages: not in [1, %d]", n, CG_STAGE_MAX);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		int index, count, a, b;
		if (stage_of(f[i], &index, &count, &a, &b) != 0)
			goto fail_in_i;
		if (count != n) {
			cg_seterr("stage %d of %d, but %d stages given",
			          index + 1, count, n);
			goto fail_in_i;
		}
		if (by[index]) {
			cg_seterr("stage %d of %d a second time", index + 1,
			          count);
			goto fail_in_i;
		}
		by[index] = f[i];
		who[index] = i;
		at[index][0] = a;
		at[index][1] = b;
		continue;
	fail_in_i:
		cg_errprefix(display[i]);
		return NULL;
	}
	if ((man = bare_manifest(by[0])) == NULL)
		return NULL;
	for (int i = 1; i < n; i++) {
		cJSON *other = bare_manifest(by[i]);
		int same = other && cJSON_Compare(man, other, 1);
		cJSON_Delete(other);
		if (!same) {
			cJSON_Delete(man);
			cg_seterr("%s: not a stage of the model %s is one of "
			          "(their manifests differ)",
			          display[who[i]], display[who[0]]);
			return NULL;
		}
	}
	if ((m = cg_model_laid_out(man, 0)) == NULL)
		return NULL;
	for (int i = 0; i < n; i++) {
		struct cg_stage st;
		if ((cg_file_find(by[0], "opt.m") != NULL) !=
		        (cg_file_find(by[i], "opt.m") != NULL) ||
		    (cg_file_find(by[0], "opt.v") != NULL) !=
		        (cg_file_find(by[i], "opt.v") != NULL) ||
		    (cg_file_find(by[0], "outer.mom") != NULL) !=
		        (cg_file_find(by[i], "outer.mom") != NULL)) {
			cg_seterr("%s: its moments are not those of the other "
			          "stages",
			          display[who[i]]);
			cg_model_free(m);
			return NULL;
		}
		if (i > 0 && at[i][0] != at[i - 1][1]) {
			cg_seterr("%s: stage %d of %d starts at layer %d, stage "
			          "%d ends at %d",
			          display[who[i]], i + 1, n, at[i][0], i,
			          at[i - 1][1]);
			cg_model_free(m);
			return NULL;
		}
		if (cg_stage_plan_at(m, i, n, at[i][0], at[i][1], &st) != 0 ||
		    load_range(m, by[i], &st) != 0) {
			cg_errprefix(display[who[i]]);
			cg_model_free(m);
			return NULL;
		}
	}
	return m;
}
