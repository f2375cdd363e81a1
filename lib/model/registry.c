/*
 * model/registry.c - the registry of architectures, and what cg-init
 * needs of one.
 *
 * Every architecture is one struct cg_arch (model/registry.h), and the
 * registry names none of them: the table of built-in ones lives above
 * this layer, in lib/arch/all.c, and is handed in by cg_arch_install()
 * (cg_arch_all() does it; every program does it before it parses its
 * options).  To add an architecture:
 *
 *   1. Write lib/arch/NAME/NAME_arch.c defining `const struct cg_arch
 *      cg_arch_NAME`: its name and one-line summary, the names of its
 *      objective and parts, its config options (struct cg_arch_opt rows:
 *      cg-init's --NAME, parsed, range-checked and listed in --help from
 *      the row), its config keys (struct cg_arch_key rows: where each
 *      value goes in its config struct; cg_arch_read_config reads and
 *      checks them all, each option in its own range, so a key is checked
 *      in one place), config_from_shard (the config keys and manifest
 *      entries the data gives), nconds, layout, init, check_data, batch,
 *      free_ws, and sample_image (with image_shape) or sample_text, or
 *      for a classifier classify and nfeatures (with image_shape);
 *      ws_bytes if it chunks or checkpoints (with checkpoints, and
 *      can_checkpoint where only some forms do).  An image arch takes
 *      config_from_shard, nconds, image_shape and check_data from
 *      lib/arch/common.h.  Its kernels
 *      live beside it in lib/arch/NAME/.
 *   2. Add X(NAME) to the list in lib/arch/all.c, and the files to
 *      lib_libcg_a_SOURCES in Makefile.am.
 *
 * Nothing else changes: cg-init, cg-train-step, cg-apply, cg-eval and
 * cg-sample handle it from the struct.  An architecture outside the
 * table (a test's) joins with cg_arch_register(), e.g. from a function
 * marked __attribute__((constructor)) in the file that defines it, as
 * tests/unit/arch_toy.c does.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/parse.h"
#include "model/model.h"

#define MAX_REGISTERED 16

static const struct cg_arch *const *table; /* cg_arch_install's */
static int ntable;
static const struct cg_arch *registered[MAX_REGISTERED];
static int nregistered;

/* cg-init's own long options, which no arch option may shadow. */
static const char *const reserved[] = {"arch",   "compress", "data",   "help",
                                       "output", "seed",     "version"};

int
cg_arch_count(void)
{
	return ntable + nregistered;
}

const struct cg_arch *
cg_arch_at(int i)
{
	if (i < 0 || i >= cg_arch_count())
		return NULL;
	return i < ntable ? table[i] : registered[i - ntable];
}

/* The arch called name, or NULL (no message). */
static const struct cg_arch *
lookup(const char *name)
{
	for (int i = 0; i < cg_arch_count(); i++)
		if (strcmp(cg_arch_at(i)->name, name) == 0)
			return cg_arch_at(i);
	return NULL;
}

const struct cg_arch *
cg_arch_find(const char *name)
{
	const struct cg_arch *a = lookup(name);

	if (a == NULL)
		cg_seterr("unknown architecture '%.32s'", name);
	return a;
}

const struct cg_arch_opt *
cg_arch_opt_find(const struct cg_arch *a, const char *name)
{
	for (int i = 0; i < a->nopts; i++)
		if (strcmp(a->opts[i].name, name) == 0)
			return &a->opts[i];
	return NULL;
}

/* Whether name is [a-z0-9-]+, starting with a letter, at most 32 bytes. */
static int
good_name(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 32 || name[0] < 'a' || name[0] > 'z')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '-'))
			return 0;
	return 1;
}

/* Option o of arch a: valid on its own; -1 with a message if not. */
static int
check_opt(const struct cg_arch *a, const struct cg_arch_opt *o)
{
	if (!good_name(o->name))
		return cg_seterr("arch %s: option '%.32s': not a valid name",
		                 a->name, o->name ? o->name : "");
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strcmp(o->name, reserved[i]) == 0)
			return cg_seterr(
			    "arch %s: option --%s is cg-init's own", a->name,
			    o->name);
	if (o->help == NULL)
		return cg_seterr("arch %s: option --%s: no help", a->name,
		                 o->name);
	switch (o->type) {
	case CG_ARCH_OPT_BOOL:
		if (o->min != 0 || o->max != 1)
			return cg_seterr("arch %s: option --%s: a bool's range "
			                 "is [0, 1]",
			                 a->name, o->name);
		/* fall through */
	case CG_ARCH_OPT_INT:
		if (o->min != floor(o->min) || o->max != floor(o->max) ||
		    o->dflt != floor(o->dflt) || fabs(o->min) > 9.0e15 ||
		    fabs(o->max) > 9.0e15)
			return cg_seterr("arch %s: option --%s: not whole "
			                 "numbers",
			                 a->name, o->name);
		break;
	case CG_ARCH_OPT_FLOAT:
		if (!isfinite(o->min) || !isfinite(o->max))
			return cg_seterr("arch %s: option --%s: an infinite "
			                 "range",
			                 a->name, o->name);
		break;
	default:
		return cg_seterr("arch %s: option --%s: unknown type", a->name,
		                 o->name);
	}
	if (!(o->min <= o->dflt && o->dflt <= o->max))
		return cg_seterr("arch %s: option --%s: default %g outside "
		                 "[%g, %g]",
		                 a->name, o->name, o->dflt, o->min, o->max);
	return 0;
}

/* Whether option o agrees with every option of that name of the
 * registered archs other than a on taking an argument (a bool's is
 * optional): cg-init has one getopt entry per name. */
static int
check_shared(const struct cg_arch *a, const struct cg_arch_opt *o)
{
	for (int i = 0; i < cg_arch_count(); i++) {
		const struct cg_arch *b = cg_arch_at(i);
		const struct cg_arch_opt *p;

		if (b == a || (p = cg_arch_opt_find(b, o->name)) == NULL)
			continue;
		if ((p->type == CG_ARCH_OPT_BOOL) !=
		    (o->type == CG_ARCH_OPT_BOOL))
			return cg_seterr("arch %s: option --%s is a bool in "
			                 "one of %s and %s, not in the other",
			                 a->name, o->name, a->name, b->name);
	}
	return 0;
}

/* The key row of a called name, or NULL. */
static const struct cg_arch_key *
key_find(const struct cg_arch *a, const char *name)
{
	for (int i = 0; i < a->nkeys; i++)
		if (strcmp(a->keys[i].name, name) == 0)
			return &a->keys[i];
	return NULL;
}

/* Whether a's option name is one of its quiet ones. */
static int
quiet(const struct cg_arch *a, const char *name)
{
	for (const char *const *q = a->quiet; q && *q; q++)
		if (strcmp(*q, name) == 0)
			return 1;
	return 0;
}

/* a's key table: distinct names, each in the struct, every option a key,
 * a key of no option a range of whole numbers, a quiet option's key
 * optional with its default as absent. */
static int
check_keys(const struct cg_arch *a)
{
	if (a->nkeys == 0)
		return 0;
	if (a->nkeys < 0 || a->keys == NULL || a->config_size == 0 ||
	    a->config_size > CG_ARCH_MAX_CONFIG)
		return cg_seterr("arch %s: a bad config key table", a->name);
	for (int i = 0; i < a->nkeys; i++) {
		const struct cg_arch_key *k = &a->keys[i];
		const struct cg_arch_opt *o = cg_arch_opt_find(a, k->name);
		size_t sz = o && o->type == CG_ARCH_OPT_FLOAT ? sizeof(double)
		                                              : sizeof(int);

		if (k->name == NULL || key_find(a, k->name) != k)
			return cg_seterr("arch %s: config key %d: no name or "
			                 "a name twice",
			                 a->name, i);
		if (a->config_size < sz || k->offset > a->config_size - sz ||
		    k->offset % sz != 0)
			return cg_seterr("arch %s: config key %s: outside "
			                 "its struct",
			                 a->name, k->name);
		if (o == NULL && !(k->min <= k->max && k->min == floor(k->min) &&
		                   k->max == floor(k->max) &&
		                   fabs(k->min) <= INT_MAX &&
		                   fabs(k->max) <= INT_MAX))
			return cg_seterr("arch %s: config key %s: a bad range",
			                 a->name, k->name);
	}
	for (int i = 0; i < a->nopts; i++)
		if (key_find(a, a->opts[i].name) == NULL)
			return cg_seterr("arch %s: option --%s: no config key",
			                 a->name, a->opts[i].name);
	for (const char *const *q = a->quiet; q && *q; q++) {
		const struct cg_arch_key *k = key_find(a, *q);
		const struct cg_arch_opt *o = cg_arch_opt_find(a, *q);
		if (k == NULL || o == NULL || !k->optional ||
		    k->absent != o->dflt)
			return cg_seterr("arch %s: quiet option %s: not an "
			                 "option whose key is optional with "
			                 "its default",
			                 a->name, *q);
	}
	return 0;
}

int
cg_arch_check(const struct cg_arch *a)
{
	if (a == NULL || !good_name(a->name))
		return cg_seterr("an architecture without a valid name");
	if (lookup(a->name) != NULL && lookup(a->name) != a)
		return cg_seterr("arch %s: the name is taken", a->name);
	if (a->summary == NULL || a->config_from_shard == NULL ||
	    a->nconds == NULL || a->layout == NULL || a->init == NULL ||
	    a->check_data == NULL || a->batch == NULL)
		return cg_seterr("arch %s: a required field is missing",
		                 a->name);
	/* A generator of images or text, or a classifier of images. */
	int kinds = (a->sample_image != NULL) + (a->sample_text != NULL) +
	            (a->classify != NULL);
	if (kinds != 1 ||
	    (a->sample_text == NULL) != (a->image_shape != NULL) ||
	    (a->classify != NULL) != (a->nfeatures != NULL))
		return cg_seterr("arch %s: needs sample_image and image_shape, "
		                 "sample_text, or classify, nfeatures and "
		                 "image_shape",
		                 a->name);
	if (a->diffusion && a->sample_image == NULL)
		return cg_seterr("arch %s: the diffusion options without "
		                 "sample_image",
		                 a->name);
	if (a->nopts < 0 || a->nopts > CG_ARCH_MAX_OPTS ||
	    (a->nopts > 0 && a->opts == NULL))
		return cg_seterr("arch %s: a bad option table", a->name);
	if (check_keys(a) != 0)
		return -1;
	for (int i = 0; i < a->nopts; i++) {
		if (check_opt(a, &a->opts[i]) != 0 ||
		    check_shared(a, &a->opts[i]) != 0)
			return -1;
		for (int j = 0; j < i; j++)
			if (strcmp(a->opts[i].name, a->opts[j].name) == 0)
				return cg_seterr("arch %s: option --%s twice",
				                 a->name, a->opts[i].name);
	}
	return 0;
}

int
cg_arch_register(const struct cg_arch *a)
{
	if (cg_arch_check(a) != 0)
		return -1;
	if (lookup(a->name) == a)
		return 0;
	if (nregistered == MAX_REGISTERED)
		return cg_seterr("arch %s: the registry is full (%d)", a->name,
		                 MAX_REGISTERED);
	registered[nregistered++] = a;
	return 0;
}

int
cg_arch_install(const struct cg_arch *const *t, int n)
{
	const struct cg_arch *before[MAX_REGISTERED];
	int nbefore = nregistered, rc = 0;

	if (t == table && n == ntable)
		return 0;
	/* One registered before the table came may clash with it: it
	 * leaves, and the message says why. */
	memcpy(before, registered, sizeof(before));
	nregistered = 0;
	table = t;
	ntable = n;
	for (int i = 0; i < n; i++)
		if (cg_arch_check(t[i]) != 0) {
			ntable = i; /* the rows before it stay */
			rc = -1;
			break;
		}
	for (int i = 0; i < nbefore; i++)
		if (cg_arch_check(before[i]) == 0)
			registered[nregistered++] = before[i];
		else
			rc = -1;
	return rc;
}

int
cg_arch_read_config(const struct cg_arch *a, const cJSON *config, void *out)
{
	memset(out, 0, a->config_size);
	for (int i = 0; i < a->nkeys; i++) {
		const struct cg_arch_key *k = &a->keys[i];
		const struct cg_arch_opt *o = cg_arch_opt_find(a, k->name);
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, k->name);
		int whole = o == NULL || o->type != CG_ARCH_OPT_FLOAT;
		double lo = o ? o->min : k->min, hi = o ? o->max : k->max, x;

		if (v == NULL && k->optional)
			x = k->absent;
		else if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo) ||
		         !(v->valuedouble <= hi) ||
		         (whole && v->valuedouble != floor(v->valuedouble)))
			return cg_seterr("config: \"%s\" missing or out of "
			                 "range",
			                 k->name);
		else
			x = v->valuedouble;
		if (whole)
			*(int *)((char *)out + k->offset) = (int)x;
		else
			*(double *)((char *)out + k->offset) = x;
	}
	return a->check_config ? a->check_config(out) : 0;
}

int
cg_arch_opt_parse(const struct cg_arch_opt *o, const char *arg, double *out)
{
	char what[40];
	long long v;

	snprintf(what, sizeof(what), "--%s", o->name);
	if (arg == NULL) {
		if (o->type != CG_ARCH_OPT_BOOL)
			return cg_seterr("%s: needs a value", what);
		*out = 1;
		return 0;
	}
	if (o->type == CG_ARCH_OPT_FLOAT)
		return cg_parse_f64(what, arg, o->min, o->max, out);
	if (cg_parse_i64(what, arg, (long long)o->min, (long long)o->max, &v) !=
	    0)
		return -1;
	*out = (double)v;
	return 0;
}

int
cg_arch_config(const struct cg_arch *a, const struct cg_shard *s,
               const double *vals, cJSON **config, cJSON **extra)
{
	cJSON *conds;

	*config = cJSON_CreateObject();
	*extra = cJSON_CreateObject();
	if (*config == NULL || *extra == NULL ||
	    (conds = cJSON_AddArrayToObject(*extra, "conditions")) == NULL)
		goto oom;
	for (size_t i = 0; i < s->nconditions; i++) {
		cJSON *name = cJSON_CreateString(s->conditions[i]);
		if (name == NULL || !cJSON_AddItemToArray(conds, name)) {
			cJSON_Delete(name);
			goto oom;
		}
	}
	if (a->config_from_shard(a, s, *config, *extra) != 0)
		goto fail;
	for (int i = 0; i < a->nopts; i++) {
		const double v = vals ? vals[i] : a->opts[i].dflt;
		if (v == a->opts[i].dflt && quiet(a, a->opts[i].name))
			continue;
		if (cJSON_AddNumberToObject(*config, a->opts[i].name, v) ==
		    NULL)
			goto oom;
	}
	return 0;
oom:
	cg_seterr("out of memory");
fail:
	cJSON_Delete(*config);
	cJSON_Delete(*extra);
	*config = *extra = NULL;
	return -1;
}
