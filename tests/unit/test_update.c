/*
 * test_update.c - the update file: written and read back field for field
 * and bit for bit, its base checked against the model with one message,
 * its weight falling back to its sample count, and what is not an update
 * (another kind, no base, a tensor that is not f32 or not the model's)
 * refused with a message naming the file; cg_update_file_check (what
 * cg-inspect --verify runs) refusing each hostile coded file with the
 * reader's own message, and no tensor standing for two views.  Exit 0
 * pass, 1 fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "cg.h"
#include "exchange/update.h"
#include "model/model.h"

#define TEST_NAME "test_update"
#include "check.h"
#include "toy.h"

static char dir[] = "/tmp/test_update.XXXXXX";

/* The number of times needle occurs in hay. */
static int
count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void
round_trip(void)
{
	struct cg_model *m = toy_model(1, 7, 1, 0);
	float buf[TOY_P], got[TOY_P];
	unsigned char d[32];
	char hex[65], path[64];
	struct cg_file *f;
	struct cg_update *u;

	toy_fill(buf, TOY_P, 2, 0.5f);
	snprintf(path, sizeof(path), "%s/g.cgg", dir);
	if ((f = cg_update_new(m, CG_UPDATE_DELTA, buf, 48, 123.5, 2.25)) ==
	        NULL ||
	    cg_file_write(f, path, CG_COMPRESS_NONE) != 0)
		die("write");
	cg_file_free(f);
	if ((u = cg_update_read(path)) == NULL)
		die("cg_update_read");
	cg_model_digest(m, d);
	cg_hex(hex, d);
	expect(u->kind == CG_UPDATE_DELTA &&
	           strcmp(cg_file_kind(u->file), "delta") == 0,
	       "round trip: the kind");
	expect(strcmp(u->base, hex) == 0 && u->base_step == 7,
	       "round trip: the base is the model's digest and step");
	expect(u->samples == 48 && u->weight == 123.5 && u->loss == 2.25 &&
	           u->inputs == 1,
	       "round trip: samples, weight, loss, inputs");
	expect(strcmp(u->name, path) == 0, "round trip: named by its path");
	expect(cg_update_get(u, m, got) == 0 && same_bits(got, buf, TOY_P),
	       "round trip: the tensors, bit for bit");
	expect(cg_update_check_base(u, m, "m.cgm") == 0,
	       "its own model: staleness 0");
	expect(cg_update_check_weight(u) == 0, "a positive weight passes");

	/* the model moves on: the update is stale, and refused */
	m->params[3] += 1.0f;
	m->step = 8;
	expect(cg_update_check_base(u, m, "m.cgm") == -1,
	       "another model's update is refused");
	const char *e = cg_errmsg();
	printf("     (%s)\n", e);
	expect(strncmp(e, path, strlen(path)) == 0 &&
	           count(e, "computed from another model") == 1 &&
	           strstr(e, "not m.cgm (step 8, ") != NULL &&
	           strstr(e, "(step 7, sha256 ") != NULL,
	       "one message: the update's name, both steps");
	cg_update_free(u);
	unlink(path);
	cg_model_free(m);
}

/* An update file in memory with its manifest edited by edit. */
static struct cg_update *
edited(struct cg_model *m, const float *buf, void (*edit)(cJSON *),
       const char *name)
{
	struct cg_file *f = cg_update_new(m, CG_UPDATE_GRAD, buf, 16, 16, 1);

	if (f == NULL)
		die("cg_update_new");
	edit(f->manifest);
	return cg_update_from_file(f, name);
}

static void
no_weight(cJSON *j)
{
	cJSON_DeleteItemFromObjectCaseSensitive(j, "weight");
}
static void
zero_samples(cJSON *j)
{
	cJSON_ReplaceItemInObjectCaseSensitive(j, "samples",
	                                       cJSON_CreateNumber(0));
}
static void
bad_weight(cJSON *j)
{
	cJSON_ReplaceItemInObjectCaseSensitive(j, "weight",
	                                       cJSON_CreateNumber(-2));
}
static void
model_kind(cJSON *j)
{
	cJSON_ReplaceItemInObjectCaseSensitive(j, "kind",
	                                       cJSON_CreateString("model"));
}
static void
no_base(cJSON *j)
{
	cJSON_DeleteItemFromObjectCaseSensitive(j, "base");
}
static void
short_base(cJSON *j)
{
	cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "base");
	cJSON_ReplaceItemInObjectCaseSensitive(b, "sha256",
	                                       cJSON_CreateString("abc"));
}

static void
rules(void)
{
	struct cg_model *m = toy_model(3, 0, 1, 0);
	float buf[TOY_P];
	struct cg_update *u;

	toy_fill(buf, TOY_P, 4, 1);
	u = edited(m, buf, no_weight, "nw.cgg");
	expect(u && u->weight == 16 && u->samples == 16 &&
	           cg_update_check_weight(u) == 0,
	       "no weight: the sample count is the weight");
	cg_update_free(u);

	u = edited(m, buf, zero_samples, "z.cgg");
	expect(u && cg_update_check_weight(u) == -1 &&
	           strcmp(cg_errmsg(),
	                  "z.cgg: no positive sample count and weight") == 0,
	       "no samples: refused, named");
	cg_update_free(u);
	u = edited(m, buf, bad_weight, "w.cgg");
	expect(u && cg_update_check_weight(u) == -1, "a negative weight: "
	                                             "refused");
	cg_update_free(u);

	u = edited(m, buf, model_kind, "m.cgm");
	expect(u == NULL && strcmp(cg_errmsg(), "m.cgm: a model file, not a "
	                                        "grad or delta") == 0,
	       "a model is not an update");
	u = edited(m, buf, no_base, "nb.cgg");
	expect(u == NULL &&
	           strcmp(cg_errmsg(), "nb.cgg: no base model digest") == 0,
	       "no base: refused");
	u = edited(m, buf, short_base, "sb.cgg");
	expect(u == NULL, "a base digest that is no digest: refused");
	cg_model_free(m);
}

/* f (freed) without its last tensor: a new file whose tensors borrow
 * the data f borrowed. */
static struct cg_file *
without_last(struct cg_file *f)
{
	struct cg_file *g = f ? cg_file_new(cg_file_kind(f)) : NULL;

	if (g == NULL)
		die("cg_file_new");
	cJSON_Delete(g->manifest);
	if ((g->manifest = cJSON_Duplicate(f->manifest, 1)) == NULL)
		die("cJSON_Duplicate");
	for (size_t i = 0; i + 1 < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		if (!cg_file_add_ref(g, t->name, t->dtype, t->ndim, t->shape,
		                     t->data))
			die("cg_file_add_ref");
	}
	cg_file_free(f);
	return g;
}

static void
tensors(void)
{
	struct cg_model *m = toy_model(5, 0, 1, 0);
	float buf[TOY_P];
	struct cg_file *f;
	struct cg_update *u;
	uint64_t shape[2] = {3, 5};

	toy_fill(buf, TOY_P, 6, 1);
	/* a.w as f16: read as its values through the codec table */
	f = cg_file_new("grad");
	cJSON *b = cJSON_AddObjectToObject(f->manifest, "base");
	cJSON_AddStringToObject(b, "sha256",
	                        "0000000000000000000000000000000000000000000000"
	                        "000000000000000000");
	cJSON_AddNumberToObject(f->manifest, "samples", 1);
	uint16_t half[15];
	for (int i = 0; i < 15; i++)
		half[i] = (uint16_t)(0x3c00 + 0x123 * i); /* 1.0 and up */
	cg_file_add(f, "a.w", CG_F16, 2, shape, half);
	if ((u = cg_update_from_file(f, "h.cgg")) == NULL)
		die("from_file");
	float x[15];
	cg_update_decode(u, 0, 0, 15, x);
	int same = cg_update_view_f32(u, 0) == NULL;
	for (int i = 0; same && i < 15; i++)
		same = x[i] == cg_f16_to_f32(half[i]);
	expect(same, "an f16 tensor is read as its f32 values");
	expect(cg_update_get(u, m, buf) == -1 &&
	           strcmp(cg_errmsg(), "h.cgg: tensor a.b: missing") == 0,
	       "and its missing views are still named");
	cg_update_free(u);

	/* a view missing, a view misshapen */
	f = without_last(cg_update_new(m, CG_UPDATE_GRAD, buf, 1, 1, 0));
	u = cg_update_from_file(f, "s.cgg"); /* b.b dropped */
	expect(u && cg_update_get(u, m, buf) == -1 &&
	           strcmp(cg_errmsg(), "s.cgg: tensor b.b: missing") == 0,
	       "a missing view is named");
	cg_update_free(u);
	f = cg_update_new(m, CG_UPDATE_GRAD, buf, 1, 1, 0);
	f->tensors[0]->shape[0] = 5;
	f->tensors[0]->shape[1] = 3;
	u = cg_update_from_file(f, "t.cgg");
	expect(u && cg_update_get(u, m, buf) == -1 &&
	           strcmp(cg_errmsg(), "t.cgg: tensor a.w: shape differs "
	                               "from the model's") == 0,
	       "a transposed view is named");
	cg_update_free(u);
	cg_model_free(m);
}

/* ------------------------------------------------------------ checks */

/* A topk:0.5 update of the toy model, each time the same. */
static struct cg_file *
topk_file(struct cg_model *m, const float *buf)
{
	struct cg_uspec s;
	struct cg_uenc e = {0};
	struct cg_file *f;

	if (cg_uspec_parse("topk:0.5", &s) != 0 ||
	    (f = cg_update_encode(m, NULL, CG_UPDATE_DELTA, buf, 8, 8, 1, &s,
	                          &e, NULL, NULL)) == NULL)
		die("cg_update_encode");
	return f;
}

/*
 * f (freed) is refused alike by cg_update_file_check, which leaves it as
 * it is, and by cg_update_from_file, which names it: the message want,
 * once each, and the two the same but for the name.
 */
static void
refused_alike(struct cg_file *f, const char *want, const char *what)
{
	char first[512], line[600];
	int checked = cg_update_file_check(f);
	struct cg_update *u;

	snprintf(first, sizeof(first), "%s", cg_errmsg());
	u = cg_update_from_file(f, "x.cgu");
	snprintf(line, sizeof(line), "x.cgu: %s", first);
	CHECK(checked == -1, "%s: cg_update_file_check took it", what);
	CHECK(u == NULL, "%s: cg_update_from_file took it", what);
	CHECK(strcmp(first, want) == 0, "%s: '%s', not '%s'", what, first,
	      want);
	CHECK(strcmp(cg_errmsg(), line) == 0, "%s: the reader said '%s'", what,
	      cg_errmsg());
	cg_update_free(u);
}

/* The layout entry {"name": name, "shape": [a, b]} (b 0: [a]). */
static void
add_view(cJSON *lay, const char *name, double a, double b)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *sh = cJSON_AddArrayToObject(o, "shape");

	cJSON_AddStringToObject(o, "name", name);
	cJSON_AddItemToArray(sh, cJSON_CreateNumber(a));
	if (b > 0)
		cJSON_AddItemToArray(sh, cJSON_CreateNumber(b));
	cJSON_AddItemToArray(lay, o);
}

/* An empty grad with a base, codec spec and an empty layout. */
static struct cg_file *
coded_by_hand(const char *spec, cJSON **lay)
{
	struct cg_file *f = cg_file_new("grad");
	cJSON *b = cJSON_AddObjectToObject(f->manifest, "base");
	cJSON *c = cJSON_AddObjectToObject(f->manifest, "codec");

	cJSON_AddStringToObject(b, "sha256",
	                        "0000000000000000000000000000000000000000000000"
	                        "000000000000000000");
	cJSON_AddNumberToObject(f->manifest, "samples", 1);
	cJSON_AddStringToObject(c, "spec", spec);
	*lay = cJSON_AddArrayToObject(f->manifest, "layout");
	return f;
}

/* The checks cg-inspect --verify runs on an update are the readers'. */
static void
file_check(void)
{
	struct cg_model *m = toy_model(9, 0, 1, 0);
	float buf[TOY_P], zeros[64] = {0};
	struct cg_file *f;
	uint32_t *idx;
	cJSON *lay;

	toy_fill(buf, TOY_P, 10, 1);
	f = topk_file(m, buf);
	expect(cg_update_file_check(f) == 0, "a topk update passes the check");
	cg_file_free(f);

	/* an index past its view, a count of indices that is not the
	 * values', an unknown codec, no layout, a layout that names no
	 * member, a member missing */
	f = topk_file(m, buf);
	idx = cg_file_find(f, "a.w.idx")->data;
	idx[7] = 10000015;
	refused_alike(f,
	              "tensor a.w.idx: index 10000015 outside its 15 "
	              "elements",
	              "an index past the end");
	f = topk_file(m, buf);
	idx = cg_file_find(f, "a.w.idx")->data;
	idx[0] = 0xfffffff0u;
	refused_alike(f,
	              "tensor a.w.idx: index 4294967280 outside its 15 "
	              "elements",
	              "an index near 2^32");
	f = topk_file(m, buf);
	cg_file_find(f, "a.w.idx")->shape[0]--;
	cg_file_find(f, "a.w.idx")->nelem--;
	refused_alike(f, "tensor a.w.idx: its shape is not the layout's",
	              "one index fewer than values");
	f = topk_file(m, buf);
	cJSON_ReplaceItemInObjectCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(f->manifest, "codec"), "spec",
	    cJSON_CreateString("rocket"));
	refused_alike(f,
	              "manifest: unknown codec 'rocket' (f32, f16, bf16, "
	              "q8, q4, q2, topk, sign, lowrank, masked)",
	              "an unknown codec");
	f = topk_file(m, buf);
	cJSON_DeleteItemFromObjectCaseSensitive(f->manifest, "layout");
	refused_alike(f, "manifest: no layout of 1 to 65536 views",
	              "no layout");
	f = topk_file(m, buf);
	lay = cJSON_GetObjectItemCaseSensitive(f->manifest, "layout");
	cJSON_ReplaceItemInObjectCaseSensitive(
	    cJSON_GetArrayItem(lay, 1), "name", cJSON_CreateString("rocket"));
	refused_alike(f, "tensor rocket.idx: missing",
	              "a layout view no member stands for");
	f = topk_file(m, buf);
	snprintf(cg_file_find(f, "b.b.val")->name, CG_MAX_NAME, "b.b.vals");
	refused_alike(f, "tensor b.b.val: missing", "a .val member missing");

	/* one tensor for two views, with no member left over to count:
	 * two views of one name past the first 4096, and lowrank's factor
	 * "w.p" of matrix w that a view of that name stands for too */
	f = coded_by_hand("f32", &lay);
	add_view(lay, "v0", 1, 0);
	for (int i = 0; i <= 4096; i++) {
		char name[16];
		snprintf(name, sizeof(name), "v%d", i);
		add_view(lay, name, 1, 0);
		cg_file_add(f, name, CG_F32, 1, (uint64_t[]){1}, zeros);
	}
	cg_file_add(f, "extra", CG_F32, 1, (uint64_t[]){1}, zeros);
	refused_alike(f, "tensor v0: stands for two views of the layout",
	              "4098 views, two of one name");
	f = coded_by_hand("lowrank:1", &lay);
	add_view(lay, "w", 8, 8);
	add_view(lay, "w.p", 8, 1);
	cg_file_add(f, "w.p", CG_F32, 2, (uint64_t[]){8, 1}, zeros);
	cg_file_add(f, "w.q", CG_F32, 2, (uint64_t[]){8, 1}, zeros);
	cg_file_add(f, "extra", CG_F32, 1, (uint64_t[]){1}, zeros);
	refused_alike(f, "tensor w.p: stands for two views of the layout",
	              "a view named as another's factor");
	cg_model_free(m);
}

int
main(void)
{
	if (cg_arch_all() != 0)
		die("cg_arch_all");
	if (mkdtemp(dir) == NULL) {
		perror(TEST_NAME ": mkdtemp");
		return 1;
	}
	round_trip();
	rules();
	tensors();
	file_check();
	rmdir(dir);
	return failures ? 1 : 0;
}
