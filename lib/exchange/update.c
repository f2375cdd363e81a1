/*
 * exchange/update.c - the update file: writing, reading and the rules it obeys.
 *
 * Writing lays out one f32 tensor per view of the base model and records
 * the base's digest and step; reading checks the kind and the base digest
 * and parses the figures a reduction needs.  The staleness rule and the
 * weight rule are one function each, used by cg-reduce and cg-apply
 * alike, so their messages exist once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exchange/secagg.h"
#include "exchange/update.h"
#include "model/model.h"
#include "model/privacy.h"
#include "model/stage.h"

static const char *const kind_names[] = {"grad", "delta"};

const char *
cg_update_kind_name(enum cg_update_kind k)
{
	return (unsigned)k < 2 ? kind_names[k] : "?";
}

/* ------------------------------------------------------------ writing */

/* The manifest of an update of base, without tensors. */
static struct cg_file *
update_file(const struct cg_model *base, const unsigned char *digest,
            enum cg_update_kind kind, double samples, double weight,
            double loss)
{
	struct cg_file *f = cg_file_new(cg_update_kind_name(kind));
	unsigned char d[32];
	char hex[65];
	cJSON *b, *arch;

	if (f == NULL)
		return NULL;
	arch = cJSON_GetObjectItemCaseSensitive(base->manifest, "arch");
	cJSON_AddStringToObject(f->manifest, "arch",
	                        cJSON_IsString(arch) ? arch->valuestring : "");
	if (digest == NULL) {
		cg_model_digest(base, d);
		digest = d;
	}
	cg_hex(hex, digest);
	if ((b = cJSON_AddObjectToObject(f->manifest, "base")) == NULL) {
		cg_file_free(f);
		cg_seterr("out of memory");
		return NULL;
	}
	cJSON_AddStringToObject(b, "sha256", hex);
	cJSON_AddNumberToObject(b, "step", (double)base->step);
	cJSON_AddNumberToObject(f->manifest, "samples", samples);
	cJSON_AddNumberToObject(f->manifest, "weight", weight);
	cJSON_AddNumberToObject(f->manifest, "loss", loss);
	cJSON_AddNumberToObject(f->manifest, "inputs", 1);
	return f;
}

/*
 * Whether skip [m->nviews] (NULL: none) leaves views out: then the
 * manifest says "partial", or -1 with a message when it leaves out every
 * view (an update of nothing).
 */
static int
mark_partial(struct cg_file *f, const struct cg_model *m, const uint8_t *skip)
{
	int kept = 0;

	if (skip == NULL)
		return 0;
	for (int i = 0; i < m->nviews; i++)
		kept += !skip[i];
	if (kept == 0)
		return cg_seterr("every tensor is frozen: nothing to update");
	if (kept < m->nviews &&
	    !cJSON_AddBoolToObject(f->manifest, "partial", 1))
		return cg_seterr("out of memory");
	return 0;
}

struct cg_file *
cg_update_new_part(const struct cg_model *base, enum cg_update_kind kind,
                   const float *buf, double samples, double weight,
                   double loss, const uint8_t *skip)
{
	struct cg_file *f = update_file(base, NULL, kind, samples, weight, loss);

	if (f == NULL)
		return NULL;
	if (mark_partial(f, base, skip) != 0)
		goto fail;
	for (int i = 0; i < base->nviews; i++) {
		const struct cg_view *v = &base->views[i];
		if (skip && skip[i])
			continue;
		if (cg_file_add_ref(f, v->name, CG_F32, v->ndim, v->shape,
		                    buf + v->off) == NULL)
			goto fail;
	}
	return f;
fail:
	cg_file_free(f);
	return NULL;
}

struct cg_file *
cg_update_new_stage(const struct cg_model *base, const struct cg_stage *st,
                    enum cg_update_kind kind, const float *buf, double samples,
                    double weight, double loss)
{
	unsigned char d[32];
	struct cg_file *f;

	cg_stage_digest(base, st, d);
	if ((f = update_file(base, d, kind, samples, weight, loss)) == NULL)
		return NULL;
	if (cg_stage_put(f->manifest, st) != 0)
		goto fail;
	for (int i = st->v0; i < st->v1; i++) {
		const struct cg_view *v = &base->views[i];
		if (cg_file_add_ref(f, v->name, CG_F32, v->ndim, v->shape,
		                    buf + v->off) == NULL)
			goto fail;
	}
	return f;
fail:
	cg_file_free(f);
	return NULL;
}

const char *
cg_update_stage_name(const struct cg_update *u, char *buf, size_t n)
{
	if (u->stage.count == 0)
		snprintf(buf, n, "a whole model");
	else
		snprintf(buf, n, "stage %d of %d", u->stage.index + 1,
		         u->stage.count);
	return buf;
}

struct cg_file *
cg_update_new(const struct cg_model *base, enum cg_update_kind kind,
              const float *buf, double samples, double weight, double loss)
{
	return cg_update_new_part(base, kind, buf, samples, weight, loss, NULL);
}

int
cg_update_views_of(const struct cg_model *m, const uint8_t *skip,
                   struct cg_uview **out, int *n)
{
	struct cg_uview *v = calloc((size_t)m->nviews, sizeof(*v));
	int k = 0;

	if (v == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *w = &m->views[i];
		if (skip && skip[i])
			continue;
		snprintf(v[k].name, sizeof(v[k].name), "%s", w->name);
		v[k].ndim = w->ndim;
		memcpy(v[k].shape, w->shape, (size_t)w->ndim * sizeof(uint64_t));
		v[k].n = w->n;
		v[k].off = w->off;
		k++;
	}
	*out = v;
	*n = k;
	return 0;
}

int
cg_update_model_views(const struct cg_model *m, struct cg_uview **out)
{
	int n;

	return cg_update_views_of(m, NULL, out, &n);
}

struct cg_file *
cg_update_encode(const struct cg_model *base, const unsigned char *digest,
                 enum cg_update_kind kind, const float *buf, double samples,
                 double weight, double loss, const struct cg_uspec *s,
                 struct cg_uenc *e, float *sent, float *left)
{
	return cg_update_encode_part(base, digest, kind, buf, samples, weight,
	                             loss, s, e, sent, left, NULL);
}

struct cg_file *
cg_update_encode_part(const struct cg_model *base, const unsigned char *digest,
                      enum cg_update_kind kind, const float *buf,
                      double samples, double weight, double loss,
                      const struct cg_uspec *s, struct cg_uenc *e,
                      float *sent, float *left, const uint8_t *skip)
{
	struct cg_file *f = update_file(base, digest, kind, samples, weight,
	                                loss);
	struct cg_uview *v = NULL;
	int nv;

	if (f == NULL || mark_partial(f, base, skip) != 0 ||
	    cg_update_views_of(base, skip, &v, &nv) != 0)
		goto fail;
	if (cg_uencode(s, v, nv, buf, f, e, sent, left) != 0)
		goto fail;
	free(v);
	return f;
fail:
	free(v);
	cg_file_free(f);
	return NULL;
}

struct cg_file *
cg_update_recode(const struct cg_file *f, const struct cg_uspec *s,
                 uint64_t budget)
{
	struct cg_uspec spec = *s, in;
	struct cg_uview *v = NULL;
	struct cg_uenc e = {0};
	struct cg_file *out = NULL;
	float *x = NULL;
	uint64_t P = 0;
	int nv;

	if (cg_ubind(f, &in, &v, &nv) != 0)
		return NULL;
	for (int i = 0; i < nv; i++)
		P += v[i].n;
	if ((x = cg_alloc(P * sizeof(float))) == NULL)
		goto fail;
	for (int i = 0; i < nv; i++)
		cg_udecode(&in, &v[i], 0, v[i].n, x + v[i].off);
	if (budget && cg_uspec_fit(&spec, v, nv, budget) != 0)
		goto fail;
	if ((out = cg_file_new(cg_file_kind(f))) == NULL)
		goto fail;
	cJSON_Delete(out->manifest);
	if ((out->manifest = cJSON_Duplicate(f->manifest, 1)) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	cg_rng_seed(&e.rng, 0x7265636fULL);
	if (cg_uencode(&spec, v, nv, x, out, &e, NULL, NULL) != 0)
		goto fail;
	free(v);
	free(x);
	return out;
fail:
	cg_file_free(out);
	free(v);
	free(x);
	return NULL;
}

/* ------------------------------------------------------------ reading */

void
cg_update_free(struct cg_update *u)
{
	if (u == NULL)
		return;
	cg_file_free(u->file);
	cg_mask_info_free(u->mask);
	free(u->views);
	free(u->name);
	free(u);
}

/*
 * The rules of an update, once: f's kind and base, its codec and layout
 * with every view bound to its tensors (cg_ubind), the figures a
 * reduction weighs it by and, for a masked update, its "mask".  Fills u
 * (its views and mask allocated; u->file and u->name untouched), or -1
 * with a message that does not name the file.
 */
static int
parse(struct cg_update *u, const struct cg_file *f)
{
	const char *kind = cg_file_kind(f);
	const cJSON *b, *d;

	if (strcmp(kind, "grad") == 0)
		u->kind = CG_UPDATE_GRAD;
	else if (strcmp(kind, "delta") == 0)
		u->kind = CG_UPDATE_DELTA;
	else
		return cg_seterr("a %s file, not a grad or delta", kind);
	b = cJSON_GetObjectItemCaseSensitive(f->manifest, "base");
	d = cJSON_GetObjectItemCaseSensitive(b, "sha256");
	if (!cJSON_IsString(d) || strlen(d->valuestring) != 64)
		return cg_seterr("no base model digest");
	memcpy(u->base, d->valuestring, 65);
	/* its numbers are read through its codec (ucodec.h) */
	if (cg_ubind(f, &u->spec, &u->views, &u->nviews) != 0)
		return -1;
	u->base_step = cg_json_u64(b, "step", 0);
	u->samples = cg_json_num(f->manifest, "samples", 0);
	u->weight = cg_json_num(f->manifest, "weight", u->samples);
	u->loss = cg_json_num(f->manifest, "loss", 0);
	u->inputs = cg_json_u64(f->manifest, "inputs", 1);
	if (cg_dp_read(f->manifest, NULL) < 0 ||
	    cg_dp_share_read(f->manifest, NULL) < 0)
		return -1;
	{
		const cJSON *pt =
		    cJSON_GetObjectItemCaseSensitive(f->manifest, "partial");
		if (pt && !cJSON_IsBool(pt))
			return cg_seterr("manifest: \"partial\" is no boolean");
		u->partial = cJSON_IsTrue(pt);
	}
	if (cg_stage_get(f->manifest, &u->stage.index, &u->stage.count,
	                 &u->stage.a, &u->stage.b) < 0)
		return -1;
	if (u->stage.count && u->partial)
		return cg_seterr("manifest: a stage's update is not "
		                 "\"partial\"");
	{
		const cJSON *sl =
		    cJSON_GetObjectItemCaseSensitive(f->manifest, "slice");
		const cJSON *si = cJSON_GetObjectItemCaseSensitive(sl, "index");
		const cJSON *sn = cJSON_GetObjectItemCaseSensitive(sl, "of");
		/* (the ranges first: a cast of a double past int's) */
		if (sl &&
		    (!cJSON_IsNumber(si) || !cJSON_IsNumber(sn) ||
		     sn->valuedouble < 1 || sn->valuedouble > CG_SLICE_MAX ||
		     sn->valuedouble != (int)sn->valuedouble ||
		     si->valuedouble < 0 ||
		     si->valuedouble >= sn->valuedouble ||
		     si->valuedouble != (int)si->valuedouble))
			return cg_seterr(
			    "manifest: \"slice\" is not {\"index\": "
			    "I, \"of\": N} with 0 <= I < N <= %d",
			    CG_SLICE_MAX);
		u->slice_i = sl ? si->valueint : 0;
		u->slice_n = sl ? sn->valueint : 0;
	}
	/* a masked update says so in its codec; its "mask" must then be
	 * whole, and no other update may carry one */
	if (cg_uspec_masked(&u->spec)) {
		if ((u->mask = cg_mask_info_read(f->manifest, u->weight)) ==
		    NULL)
			return -1;
	} else if (cJSON_GetObjectItemCaseSensitive(f->manifest, "mask"))
		return cg_seterr("manifest: \"mask\" without the masked "
		                 "codec");
	return 0;
}

struct cg_update *
cg_update_from_file(struct cg_file *f, const char *name)
{
	struct cg_update *u = calloc(1, sizeof(*u));

	if (u == NULL || (u->name = strdup(name)) == NULL) {
		free(u);
		cg_file_free(f);
		cg_seterr("out of memory");
		return NULL;
	}
	u->file = f;
	if (parse(u, f) != 0) {
		cg_errprefix(u->name);
		cg_update_free(u);
		return NULL;
	}
	return u;
}

int
cg_update_file_check(const struct cg_file *f)
{
	struct cg_update u = {0};
	int rc = parse(&u, f);

	cg_mask_info_free(u.mask);
	free(u.views);
	return rc;
}

struct cg_update *
cg_update_read(const char *path)
{
	struct cg_file *f = cg_file_read(path);

	if (f == NULL)
		return NULL;
	return cg_update_from_file(f, strcmp(path, "-") ? path : "(stdin)");
}

/* -------------------------------------------------------------- rules */

int
cg_update_check_weight(const struct cg_update *u)
{
	if (!(u->samples > 0) || !(u->weight > 0) || !isfinite(u->weight)) {
		cg_seterr("no positive sample count and weight");
		cg_errprefix(u->name);
		return -1;
	}
	return 0;
}

int64_t
cg_update_staleness(const struct cg_update *u, const char base_hex[65],
                    uint64_t base_step, const char *whose)
{
	/* Equal digests: the same parameters, hence no step in between. */
	if (strcmp(u->base, base_hex) == 0)
		return 0;
	if (u->base_step < base_step)
		return (int64_t)(base_step - u->base_step);
	cg_seterr("computed from %s model (step %llu, sha256 %.12s...) than "
	          "%s (step %llu, %.12s...)",
	          u->base_step > base_step ? "a later" : "another",
	          (unsigned long long)u->base_step, u->base, whose,
	          (unsigned long long)base_step, base_hex);
	cg_errprefix(u->name);
	return -1;
}

int64_t
cg_update_check_base_of(const struct cg_update *u, const char base_hex[65],
                        uint64_t base_step, const char *whose)
{
	if (strcmp(u->base, base_hex) != 0) {
		cg_seterr("computed from another model (step %llu, sha256 "
		          "%.12s...), not %s (step %llu, %.12s...)",
		          (unsigned long long)u->base_step, u->base, whose,
		          (unsigned long long)base_step, base_hex);
		cg_errprefix(u->name);
		return -1;
	}
	/* Equal digests: the same parameters, hence no step in between. */
	return 0;
}

int64_t
cg_update_check_base(const struct cg_update *u, const struct cg_model *m,
                     const char *mname)
{
	unsigned char d[32];
	char hex[65];

	cg_model_digest(m, d);
	cg_hex(hex, d);
	return cg_update_check_base_of(u, hex, m->step, mname);
}

int
cg_update_base_of_model(const struct cg_file *f, char hex[65])
{
	unsigned char d[32];

	if (cg_model_file_digest(f, d) != 0)
		return -1;
	cg_hex(hex, d);
	return 0;
}

/* ------------------------------------------------------------ numbers */

const float *
cg_update_f32(const struct cg_tensor *t)
{
	/* cg_update_from_file decoded every tensor to f32; this holds for
	 * files put together by hand too. */
	if (t->dtype != CG_F32) {
		cg_seterr("tensor %s: dtype %s, not decoded to f32", t->name,
		          cg_dtype_name(t->dtype));
		return NULL;
	}
	return t->data;
}

void
cg_update_decode(const struct cg_update *u, int i, uint64_t lo, size_t n,
                 float *out)
{
	cg_udecode(&u->spec, &u->views[i], lo, n, out);
}

const float *
cg_update_view_f32(const struct cg_update *u, int i)
{
	return cg_uview_f32(&u->spec, &u->views[i]);
}

/* u's view called name, trying index hint first; -1 when none. */
static int
find_view(const struct cg_update *u, const char *name, int hint)
{
	if (hint < u->nviews && strcmp(u->views[hint].name, name) == 0)
		return hint;
	for (int i = 0; i < u->nviews; i++)
		if (strcmp(u->views[i].name, name) == 0)
			return i;
	return -1;
}

int
cg_update_get(const struct cg_update *u, const struct cg_model *m, float *buf)
{
	if (u->mask) {
		cg_seterr("masked (secure aggregation): only cg-reduce of "
		          "every peer's update unmasks it");
		goto fail;
	}
	if (u->slice_n) {
		cg_seterr("slice %d of %d of a reduction: join the %d slices "
		          "first (cg-reduce --join)",
		          u->slice_i + 1, u->slice_n, u->slice_n);
		goto fail;
	}
	int found = 0;

	for (int i = 0; i < m->nviews; i++) {
		const struct cg_view *v = &m->views[i];
		int k = find_view(u, v->name, i);
		const struct cg_uview *x;
		if (k < 0 && u->stage.count)
			continue; /* another stage's */
		if (k < 0 && u->partial) {
			/* left out: a frozen tensor, which does not change */
			memset(buf + v->off, 0, v->n * sizeof(float));
			continue;
		}
		if (k < 0) {
			cg_seterr("tensor %s: missing", v->name);
			goto fail;
		}
		found++;
		x = &u->views[k];
		if (x->ndim != v->ndim || x->n != v->n ||
		    memcmp(x->shape, v->shape, v->ndim * sizeof(uint64_t))) {
			cg_seterr("tensor %s: shape differs from the model's",
			          v->name);
			goto fail;
		}
		cg_update_decode(u, k, 0, v->n, buf + v->off);
	}
	if (found != u->nviews ||
	    (!u->partial && !u->stage.count && u->nviews != m->nviews)) {
		cg_seterr("%d tensors, %d of them the model's (it has %d)",
		          u->nviews, found, m->nviews);
		goto fail;
	}
	return 0;
fail:
	cg_errprefix(u->name);
	return -1;
}

int
cg_update_present(const struct cg_update *u, const struct cg_model *m,
                  uint8_t *present)
{
	int n = 0;

	for (int i = 0; i < m->nviews; i++) {
		present[i] = find_view(u, m->views[i].name, i) >= 0;
		n += present[i];
	}
	return n;
}
