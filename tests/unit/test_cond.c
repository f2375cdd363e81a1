/*
 * test_cond.c - conditions by name or index (model/cond.h): the lookup,
 * the default of a text model, the list of valid ones and its cut, and
 * the names read from a model's manifest (the test-only toy arch).
 */
#define TEST_NAME "test_cond"
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "data/text.h"
#include "model/cond.h"
#include "model/model.h"

static void
test_find(void)
{
	const char *names[] = {"Dress", "3", "Bag"};
	const struct cg_conds c = {names, 3}, idx = {NULL, 4};
	const char *given[] = {"Bag", "0", "2", "Coat", "Dress"};
	int rows[5] = {-7, -7, -7, -7, -7};

	expect(cg_conds_find(&c, "Dress") == 0 && cg_conds_find(&c, "Bag") == 2,
	       "find: by name");
	expect(cg_conds_find(&c, "3") == 1,
	       "find: a name that reads as a number is the name");
	expect(cg_conds_find(&c, "2") == 2 && cg_conds_find(&c, "0") == 0,
	       "find: else by index");
	expect(cg_conds_find(&c, "dress") < 0 && cg_conds_find(&c, "-1") < 0 &&
	           cg_conds_find(&c, "3x") < 0 && cg_conds_find(&c, "") < 0,
	       "find: no other case, no negative index, no junk, no blank");
	expect(cg_conds_find(&idx, "3") == 3 && cg_conds_find(&idx, "4") < 0 &&
	           cg_conds_find(&idx, "Dress") < 0,
	       "find: a model without names, by index 0 to n-1 only");
	expect(cg_conds_lookup(&c, given, 3, rows) == 3 && rows[0] == 2 &&
	           rows[1] == 0 && rows[2] == 2 && rows[3] == -7,
	       "lookup: every one found, in order, nothing past ngiven");
	expect(cg_conds_lookup(&c, given, 5, rows) == 3,
	       "lookup: stops at the first unknown, and says where");
	expect(cg_conds_lookup(&c, given, 0, rows) == 0, "lookup: none given");
}

static void
test_default(void)
{
	const char *one[] = {"a"}, *two[] = {"a", "b"};
	const char *prompt[] = {"a", CG_TEXT_PROMPT_CONDITION};
	const char *only_prompt[] = {CG_TEXT_PROMPT_CONDITION};
	const struct cg_conds c1 = {one, 1}, c2 = {two, 2}, cp = {prompt, 2},
	                      cq = {only_prompt, 1}, noname = {NULL, 1};

	expect(cg_conds_default(&c1, 0) == 0 && cg_conds_default(&c1, 1) == 0 &&
	           cg_conds_default(&noname, 0) == 0,
	       "default: the only condition");
	expect(cg_conds_default(&c2, 0) < 0 && cg_conds_default(&c2, 1) < 0 &&
	           cg_conds_default(&cp, 0) < 0,
	       "default: none among several, without a prompt condition");
	expect(cg_conds_default(&cp, 1) == 1 && cg_conds_default(&cq, 1) == 0,
	       "default: with a prompt, the prompt condition");
}

static void
test_valid(void)
{
	const char *names[] = {"a", "b"};
	const char *many[CG_CONDS_LISTED + 1];
	const struct cg_conds c = {names, 2}, idx = {NULL, 10},
	                      cm = {many, CG_CONDS_LISTED + 1};
	char buf[512], small[16];

	expect(strcmp(cg_conds_valid(&c, "valid: ", buf, sizeof(buf)),
	              "valid: \"a\", \"b\", or an index 0 to 1") == 0,
	       "valid: the names, or an index");
	expect(strcmp(cg_conds_valid(&idx, "", buf, sizeof(buf)),
	              "an index 0 to 9") == 0,
	       "valid: a model without names: an index only");
	for (int i = 0; i <= CG_CONDS_LISTED; i++)
		many[i] = i == CG_CONDS_LISTED ? "last" : "x";
	cg_conds_valid(&cm, "", buf, sizeof(buf));
	expect(strstr(buf, "\"last\"") == NULL &&
	           strstr(buf, "\"x\", ..., or an index 0 to 32") != NULL,
	       "valid: the first CG_CONDS_LISTED names, then \"...\"");
	expect(cg_conds_valid(&c, "a long lead here: ", small, sizeof(small)) ==
	               small &&
	           strcmp(small, "a long lead her") == 0,
	       "valid: cut to the buffer");
}

extern const struct cg_arch cg_arch_toy;

/* A toy model of ncond conditions, named by names (NULL: none). */
static struct cg_model *
toy(int ncond, const char *const *names, int nnames)
{
	cJSON *config = cJSON_CreateObject(), *extra = NULL;
	struct cg_model *m;

	cJSON_AddNumberToObject(config, "in_dim", 4);
	cJSON_AddNumberToObject(config, "ncond", ncond);
	cJSON_AddNumberToObject(config, "shared", 0);
	cJSON_AddNumberToObject(config, "spread", 1);
	if (names) {
		extra = cJSON_CreateObject();
		cJSON_AddItemToObject(extra, "conditions",
		                      cJSON_CreateStringArray(names, nnames));
	}
	if ((m = cg_model_create("toy", config, extra, 1)) == NULL)
		die("toy model");
	return m;
}

static void
test_model(void)
{
	const char *names[] = {"cat", "dog", "owl"};
	struct cg_model *m = toy(3, names, 3), *bare = toy(2, NULL, 0),
	                *wrong = toy(2, names, 3);
	struct cg_conds c;

	expect(cg_conds_get(m, 1, &c) == 0 && c.n == 3 && c.names &&
	           strcmp(c.names[2], "owl") == 0 &&
	           cg_conds_find(&c, "dog") == 1,
	       "get: the manifest's names");
	cg_conds_free(&c);
	expect(c.names == NULL && c.n == 0, "free: empties it");
	expect(cg_conds_get(bare, 0, &c) == 0 && c.names == NULL && c.n == 2,
	       "get: no names, the arch's count");
	expect(cg_conds_get(bare, 1, &c) != 0 && c.names == NULL,
	       "get: no names where they are needed: an error");
	expect(cg_conds_get(wrong, 0, &c) != 0 && c.names == NULL,
	       "get: three names for two conditions: an error");
	printf("     %s\n", cg_errmsg());
	expect(strcmp(cg_conds_name(m, 1), "dog") == 0 &&
	           cg_conds_name(m, 3) == NULL &&
	           cg_conds_name(bare, 0) == NULL &&
	           cg_conds_name(wrong, 0) == NULL,
	       "name: condition i's, or NULL");
	cg_model_free(m);
	cg_model_free(bare);
	cg_model_free(wrong);
}

int
main(void)
{
	test_find();
	test_default();
	test_valid();
	test_model();
	return failures ? 1 : 0;
}
