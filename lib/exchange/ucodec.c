/*
 * exchange/ucodec.c - the update codecs' table and what they share: the
 * spec (parsing, writing back, fitting a budget), the manifest's "codec"
 * and "layout", binding a file's views and the encode and decode drivers.
 *
 * Each codec is one row (struct cg_ucodec, exchange/codec/codec.h) in a
 * file of its own under exchange/codec/, and one X() in the list below;
 * nothing here names a codec, or asks which a row is: the row says what
 * differs.  A codec outside the list (a test's) joins with
 * cg_ucodec_register(), e.g. from a function marked
 * __attribute__((constructor)) in the file that defines it, as
 * tests/unit/codec_toy.c does.
 *
 * Encoders report what they sent by decoding their own output through
 * the reader's path, so the error feedback a worker keeps is exactly
 * what the coordinator did not receive.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exchange/codec/codec.h"
#include "exchange/ucodec.h"

#define MAX_ELEMS (1ULL << 40)
#define MAX_REGISTERED 16

/* The built-in codecs, one X() per exchange/codec/NAME_codec.c, in the
 * order --help lists them. */
#define CG_UCODECS X(dense) X(block) X(topk) X(sign) X(lowrank) X(masked)

#define X(name) extern const struct cg_ucodec cg_ucodec_##name;
CG_UCODECS
#undef X

#define X(name) &cg_ucodec_##name,
static const struct cg_ucodec *const table[] = {CG_UCODECS};
#undef X

#define NTABLE ((int)(sizeof(table) / sizeof(table[0])))

static const struct cg_ucodec *registered[MAX_REGISTERED];
static int nregistered;

/* ------------------------------------------------------------- table */

/* Row i of the built-in table and then of those registered; NULL past
 * the last. */
static const struct cg_ucodec *
row(int i)
{
	if (i < NTABLE)
		return table[i];
	return i - NTABLE < nregistered ? registered[i - NTABLE] : NULL;
}

/* The row a name of --codec means, and its entry in the row; NULL. */
static const struct cg_ucodec *
lookup(const char *name, const struct cg_uname **u)
{
	const struct cg_ucodec *c;

	for (int i = 0; (c = row(i)) != NULL; i++)
		for (int j = 0; j < CG_UCODEC_NAMES && c->names[j].name; j++)
			if (strcmp(c->names[j].name, name) == 0) {
				*u = &c->names[j];
				return c;
			}
	return NULL;
}

/* A name a spec may start with: letters, digits, '-' and '_'. */
static int
good_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 32)
		return 0;
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
		    !(*s >= '0' && *s <= '9') && *s != '-' && *s != '_')
			return 0;
	return 1;
}

int
cg_ucodec_register(const struct cg_ucodec *c)
{
	const struct cg_ucodec *o;
	const struct cg_uname *u;

	if (c == NULL || c->name == NULL)
		return cg_seterr("codec without a name");
	if (c->help == NULL || c->names[0].name == NULL || c->size == NULL ||
	    c->encode == NULL || c->bind == NULL || c->decode == NULL ||
	    (c->state_floats != NULL && c->state_name == NULL))
		return cg_seterr(
		    "codec %s: help, a name to give --codec, size, "
		    "encode, bind and decode wanted (and a "
		    "state_name with state_floats)",
		    c->name);
	for (int i = 0; (o = row(i)) != NULL; i++)
		if (o == c || strcmp(o->name, c->name) == 0)
			return cg_seterr("codec %s: registered already",
			                 c->name);
	for (int j = 0; j < CG_UCODEC_NAMES && c->names[j].name; j++) {
		if (!good_name(c->names[j].name))
			return cg_seterr("codec %s: name '%.40s' is not 1 to "
			                 "32 letters, digits, '-' or '_'",
			                 c->name, c->names[j].name);
		if ((o = lookup(c->names[j].name, &u)) != NULL)
			return cg_seterr("codec %s: name %s is codec %s's",
			                 c->name, c->names[j].name, o->name);
	}
	if (nregistered == MAX_REGISTERED)
		return cg_seterr("codec %s: more than %d codecs registered",
		                 c->name, MAX_REGISTERED);
	registered[nregistered++] = c;
	return 0;
}

/* -------------------------------------------------------------- spec */

const char *
cg_ucodec_help(void)
{
	static char buf[1024];
	const struct cg_ucodec *c;
	size_t len = 0;

	buf[0] = '\0';
	for (int i = 0; (c = row(i)) != NULL && len < sizeof(buf); i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s  %s",
		                        i ? "\n" : "", c->help);
	return buf;
}

const char *
cg_ucodec_name_at(int i)
{
	const struct cg_ucodec *c;

	for (int r = 0; i >= 0 && (c = row(r)) != NULL; r++)
		for (int j = 0; j < CG_UCODEC_NAMES && c->names[j].name; j++)
			if (i-- == 0)
				return c->names[j].name;
	return NULL;
}

const char *
cg_uspec_name(const struct cg_uspec *s)
{
	const struct cg_ucodec *c = s->codec;

	if (c->names[1].name == NULL)
		return c->names[0].name;
	for (int j = 0; j < CG_UCODEC_NAMES && c->names[j].name; j++)
		if (c->names[j].dtype == s->dtype)
			return c->names[j].name;
	return cg_dtype_name(s->dtype);
}

int
cg_uspec_lossless(const struct cg_uspec *s)
{
	return (s->codec->flags & CG_UCODEC_PLAIN) && s->dtype == CG_F32;
}

int
cg_uspec_masked(const struct cg_uspec *s)
{
	return (s->codec->flags & CG_UCODEC_SUM_ONLY) != 0;
}

const char *
cg_uspec_state_name(const struct cg_uspec *s)
{
	return s->codec->state_floats ? s->codec->state_name : NULL;
}

int
cg_uspec_parse(const char *str, struct cg_uspec *s)
{
	const struct cg_ucodec *c;
	const struct cg_uname *u;
	char buf[128], *colon, *p;

	memset(s, 0, sizeof(*s));
	if (strlen(str) >= sizeof(buf))
		return cg_seterr("codec '%.32s...': too long", str);
	strcpy(buf, str);
	if ((colon = strchr(buf, ':')) != NULL)
		*colon = '\0';
	if ((c = lookup(buf, &u)) == NULL) {
		char list[256] = "";
		size_t len = 0;
		for (int i = 0; (c = row(i)) != NULL; i++)
			for (int j = 0; j < CG_UCODEC_NAMES && c->names[j].name;
			     j++) {
				len += (size_t)snprintf(
				    list + len, sizeof(list) - len, "%s%s",
				    len ? ", " : "", c->names[j].name);
				if (len >= sizeof(list))
					len = sizeof(list) - 1;
			}
		return cg_seterr("unknown codec '%.32s' (%s)", buf, list);
	}
	s->codec = c;
	s->dtype = u->dtype;
	if (c->defaults)
		c->defaults(s);
	for (p = colon ? colon + 1 : NULL; p;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (c->param == NULL || c->param(s, p) != 0)
			return cg_seterr("codec '%.64s': bad parameter '%.32s'",
			                 str, p);
		p = comma ? comma + 1 : NULL;
	}
	/* a gap is counted from the run's start: there must be runs */
	if (s->gap && s->chunk == 0)
		return cg_seterr("codec '%.64s': idx=gap needs chunk=C", str);
	return 0;
}

void
cg_uspec_format(const struct cg_uspec *s, char *buf, size_t n)
{
	const char *name = cg_uspec_name(s);

	if (s->codec->format)
		s->codec->format(s, name, buf, n);
	else
		snprintf(buf, n, "%s", name);
}

int
cg_uspec_size(const struct cg_uspec *s, const struct cg_uview *v, int nv,
              uint64_t *bytes)
{
	return cg_ucodec_bytes(s, v, nv, bytes);
}

uint64_t
cg_uspec_state_floats(const struct cg_uspec *s, const struct cg_uview *v,
                      int nv)
{
	uint64_t n = 0;

	if (s->codec->state_floats == NULL)
		return 0;
	for (int i = 0; i < nv; i++)
		n += s->codec->state_floats(s, &v[i]);
	return n;
}

int
cg_uspec_fit(struct cg_uspec *s, const struct cg_uview *v, int nv,
             uint64_t budget)
{
	uint64_t b;

	if (s->codec->fit) {
		int rc = s->codec->fit(s, v, nv, budget);
		if (rc <= 0)
			return rc;
	} else {
		if (cg_uspec_size(s, v, nv, &b) != 0)
			return -1;
		if (b <= budget)
			return 0;
	}
	/* s at its smallest */
	if (cg_uspec_size(s, v, nv, &b) != 0)
		return -1;
	return cg_seterr("--budget %" PRIu64 ": the smallest %s update "
	                 "takes %" PRIu64 " bytes",
	                 budget, cg_uspec_name(s), b);
}

/* ---------------------------------------------------------- manifest */

static int
put_manifest(const struct cg_uspec *s, const struct cg_uview *v, int nv,
             struct cg_file *f)
{
	char text[64];
	uint64_t bytes, dense = 0;
	cJSON *c, *lay;

	if (cg_uspec_size(s, v, nv, &bytes) != 0)
		return -1;
	for (int i = 0; i < nv; i++)
		dense += 4 * v[i].n;
	cg_uspec_format(s, text, sizeof(text));
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "codec");
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "layout");
	if ((c = cJSON_AddObjectToObject(f->manifest, "codec")) == NULL)
		return cg_seterr("out of memory");
	cJSON_AddStringToObject(c, "spec", text);
	cJSON_AddStringToObject(c, "name", cg_uspec_name(s));
	cJSON_AddStringToObject(c, "dtype", cg_dtype_name(s->dtype));
	if (s->codec->manifest && s->codec->manifest(s, c) != 0)
		return -1;
	cJSON_AddNumberToObject(c, "bytes", (double)bytes);
	cJSON_AddNumberToObject(c, "dense_bytes", (double)dense);
	if (s->codec->flags & CG_UCODEC_PLAIN)
		return 0;
	if ((lay = cJSON_AddArrayToObject(f->manifest, "layout")) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < nv; i++) {
		cJSON *o = cJSON_CreateObject(), *sh = cJSON_CreateArray();
		if (o == NULL || sh == NULL) {
			cJSON_Delete(o);
			cJSON_Delete(sh);
			return cg_seterr("out of memory");
		}
		cJSON_AddItemToArray(lay, o);
		cJSON_AddStringToObject(o, "name", v[i].name);
		for (int d = 0; d < v[i].ndim; d++)
			cJSON_AddItemToArray(
			    sh, cJSON_CreateNumber((double)v[i].shape[d]));
		cJSON_AddItemToObject(o, "shape", sh);
	}
	return 0;
}

/* The spec of a "codec" object; -1 with a message. */
static int
get_spec(const cJSON *c, struct cg_uspec *s)
{
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(c, "spec");

	if (!cJSON_IsString(spec))
		return cg_seterr("manifest: codec without a spec");
	if (cg_uspec_parse(spec->valuestring, s) != 0) {
		cg_errprefix("manifest");
		return -1;
	}
	return 0;
}

/* The views of a "layout" array into *out [*nv]. */
static int
get_layout(const cJSON *lay, struct cg_uview **out, int *nv)
{
	const int n = cJSON_GetArraySize(lay);
	struct cg_uview *v;
	uint64_t off = 0;
	int i = 0;

	if (!cJSON_IsArray(lay) || n < 1 || n > CG_MAX_TENSORS)
		return cg_seterr("manifest: no layout of 1 to %d views",
		                 CG_MAX_TENSORS);
	if ((v = calloc((size_t)n, sizeof(*v))) == NULL)
		return cg_seterr("out of memory");
	for (const cJSON *it = lay->child; it; it = it->next, i++) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
		int nd = cJSON_GetArraySize(sh), d = 0;
		if (!cJSON_IsString(nm) ||
		    strlen(nm->valuestring) + 8 >= CG_MAX_NAME ||
		    !cJSON_IsArray(sh) || nd < 1 || nd > CG_MAX_DIMS)
			goto bad;
		strcpy(v[i].name, nm->valuestring);
		v[i].ndim = nd;
		v[i].n = 1;
		for (const cJSON *e = sh->child; e; e = e->next, d++) {
			double x = cJSON_IsNumber(e) ? e->valuedouble : -1;
			if (!(x >= 1) || x > (double)MAX_ELEMS || x != floor(x))
				goto bad;
			v[i].shape[d] = (uint64_t)x;
			if (v[i].shape[d] > MAX_ELEMS / v[i].n)
				goto bad;
			v[i].n *= v[i].shape[d];
		}
		/* u32 indices reach every element of a view */
		if (v[i].n > UINT32_MAX || off > MAX_ELEMS - v[i].n)
			goto bad;
		v[i].off = off;
		off += v[i].n;
	}
	*out = v;
	*nv = n;
	return 0;
bad:
	free(v);
	return cg_seterr("manifest: layout view %d is not a name and a "
	                 "shape",
	                 i);
}

/* A dense update without a codec: its views are its tensors. */
static int
tensor_layout(const struct cg_file *f, struct cg_uview **out, int *nv)
{
	struct cg_uview *v = calloc(f->ntensors ? f->ntensors : 1, sizeof(*v));
	uint64_t off = 0;

	if (v == NULL)
		return cg_seterr("out of memory");
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		memcpy(v[i].name, t->name, CG_MAX_NAME);
		v[i].ndim = t->ndim;
		memcpy(v[i].shape, t->shape, sizeof(v[i].shape));
		v[i].n = t->nelem;
		v[i].off = off;
		off += t->nelem;
	}
	*out = v;
	*nv = (int)f->ntensors;
	return 0;
}

static int
by_address(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (const struct cg_tensor *const *)a;
	uintptr_t y = (uintptr_t) * (const struct cg_tensor *const *)b;

	return (x > y) - (x < y);
}

/*
 * Whether views v [n], bound, stand for f's tensors one to one: no
 * tensor bound twice (two views of one name, or lowrank's "W.p" of a
 * matrix W and a view named "W.p") and none left over.  -1 with a
 * message otherwise.
 */
static int
bound_once(const struct cg_file *f, const struct cg_uview *v, int n)
{
	const struct cg_tensor **t = malloc(2 * (size_t)n * sizeof(*t) + 1);
	size_t used = 0;
	int rc = 0;

	if (t == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < n; i++)
		for (int j = 0; j < 2; j++)
			if (v[i].t[j] != NULL)
				t[used++] = v[i].t[j];
	qsort(t, used, sizeof(*t), by_address);
	for (size_t i = 1; i < used && rc == 0; i++)
		if (t[i] == t[i - 1])
			rc = cg_seterr("tensor %s: stands for two views of "
			               "the layout",
			               t[i]->name);
	if (rc == 0 && used != f->ntensors)
		rc = cg_seterr("%zu tensors, of which the codec's layout uses "
		               "%zu",
		               f->ntensors, used);
	free(t);
	return rc;
}

int
cg_ubind(const struct cg_file *f, struct cg_uspec *s, struct cg_uview **views,
         int *nv)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(f->manifest, "codec");
	const cJSON *lay =
	    cJSON_GetObjectItemCaseSensitive(f->manifest, "layout");
	struct cg_uview *v = NULL;
	int n = 0;

	if (c == NULL) {
		cg_uspec_parse("f32", s);
		if (tensor_layout(f, &v, &n) != 0)
			return -1;
	} else {
		if (get_spec(c, s) != 0)
			return -1;
		if ((s->codec->flags & CG_UCODEC_PLAIN) && lay == NULL) {
			if (tensor_layout(f, &v, &n) != 0)
				return -1;
		} else if (get_layout(lay, &v, &n) != 0)
			return -1;
	}
	for (int i = 0; i < n; i++)
		if (s->codec->bind(s, &v[i], f) != 0)
			goto fail;
	/* (two views of one name bind one tensor twice) */
	if (bound_once(f, v, n) != 0)
		goto fail;
	*views = v;
	*nv = n;
	return 0;
fail:
	free(v);
	return -1;
}

void
cg_udecode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
           size_t n, float *out)
{
	s->codec->decode(s, v, lo, n, out);
}

const float *
cg_uview_f32(const struct cg_uspec *s, const struct cg_uview *v)
{
	if (!(s->codec->flags & CG_UCODEC_PLAIN) || v->t[0]->dtype != CG_F32 ||
	    v->t[0]->nelem != v->n)
		return NULL;
	return v->t[0]->data;
}

/* ------------------------------------------------------------ encode */

/*
 * View b of a coded file as a reader decodes it, against x [b->n], the
 * values encoded: into sent [b->n] (may be NULL), x minus it into left
 * [b->n] (may be NULL).  A finite value that the coded file carries as
 * an inf (an f16 value or scale past 65504) is refused: a reader would
 * refuse the whole update, so no such file is written.  (A masked view
 * decodes to nan, and only its sum means anything: not checked.)  0, or -1 with
 * a message naming the view and the element.
 */
static int
check_sent(const struct cg_uspec *s, const struct cg_uspec *bs,
           const struct cg_uview *b, const float *x, float *sent, float *left)
{
	float run[2048];

	for (uint64_t lo = 0; lo < b->n; lo += 2048) {
		size_t n = b->n - lo < 2048 ? (size_t)(b->n - lo) : 2048;
		float *y = sent ? sent + lo : run;
		cg_udecode(bs, b, lo, n, y);
		for (size_t j = 0; j < n && !cg_uspec_masked(s); j++)
			if (!isfinite(y[j]))
				return cg_seterr(
				    "codec %s: tensor %s: element %llu (%g) "
				    "is beyond what the codec holds",
				    cg_uspec_name(s), b->name,
				    (unsigned long long)(lo + j),
				    (double)x[lo + j]);
		if (left)
			for (size_t j = 0; j < n; j++)
				left[lo + j] = x[lo + j] - y[j];
	}
	return 0;
}

int
cg_uencode(const struct cg_uspec *s, const struct cg_uview *v, int nv,
           const float *x, struct cg_file *f, struct cg_uenc *e, float *sent,
           float *left)
{
	struct cg_uview *b = NULL;
	struct cg_uspec bs;
	uint64_t woff = 0;
	int nb;

	for (int i = 0; i < nv; i++) {
		float *warm = NULL;
		if (s->codec->state_floats && e->warm) {
			warm = e->warm + woff;
			woff += s->codec->state_floats(s, &v[i]);
		}
		if (s->codec->encode(s, &v[i], x + v[i].off, f, e, warm) != 0) {
			char why[256];
			snprintf(why, sizeof(why), "%s", cg_errmsg());
			/* the element codecs' messages do not name the view */
			if (strncmp(why, "tensor ", 7) == 0)
				return cg_seterr("codec %s: %s",
				                 cg_uspec_name(s), why);
			return cg_seterr("codec %s: tensor %s: %s",
			                 cg_uspec_name(s), v[i].name, why);
		}
	}
	if (put_manifest(s, v, nv, f) != 0)
		return -1;
	/* what a reader gets, through its own path */
	if (cg_ubind(f, &bs, &b, &nb) != 0)
		return -1;
	for (int i = 0; i < nb && (sent || left || !cg_uspec_masked(s)); i++)
		if (check_sent(s, &bs, &b[i], x + v[i].off,
		               sent ? sent + v[i].off : NULL,
		               left ? left + v[i].off : NULL) != 0) {
			free(b);
			return -1;
		}
	free(b);
	return 0;
}
