/*
 * model/cond.c - conditions by name or index: lookup, the text default, and
 * the list of valid ones.
 *
 * Names come from the model's manifest ("conditions", checked by
 * cg_model_conditions against the arch's count); an index is the
 * fallback, so that a model without names can still be asked for its
 * condition 3, and "3" finds a condition named "3" first.  Nothing here
 * prints: the program says the user's slip, with cg_conds_valid's words.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"
#include "data/text.h"
#include "model/cond.h"
#include "model/model.h"

int
cg_conds_get(const struct cg_model *m, int need_names, struct cg_conds *c)
{
	memset(c, 0, sizeof(*c));
	return cg_model_conditions(m, need_names, &c->names, &c->n);
}

void
cg_conds_free(struct cg_conds *c)
{
	free(c->names);
	c->names = NULL;
	c->n = 0;
}

int
cg_conds_find(const struct cg_conds *c, const char *s)
{
	long long v;

	for (int i = 0; c->names && i < c->n; i++)
		if (strcmp(c->names[i], s) == 0)
			return i;
	if (cg_parse_i64("condition", s, 0, c->n - 1, &v) == 0)
		return (int)v;
	return -1;
}

int
cg_conds_lookup(const struct cg_conds *c, const char *const *given, int ngiven,
                int *rows)
{
	for (int i = 0; i < ngiven; i++)
		if ((rows[i] = cg_conds_find(c, given[i])) < 0)
			return i;
	return ngiven;
}

int
cg_conds_default(const struct cg_conds *c, int prompt)
{
	int pick = c->n == 1 ? 0 : -1;

	for (int i = 0; prompt && c->names && i < c->n; i++)
		if (strcmp(c->names[i], CG_TEXT_PROMPT_CONDITION) == 0)
			pick = i;
	return pick;
}

char *
cg_conds_valid(const struct cg_conds *c, const char *lead, char *buf,
               size_t size)
{
	size_t k;

	k = (size_t)snprintf(buf, size, "%s", lead);
	for (int i = 0; c->names && i < c->n && i < CG_CONDS_LISTED; i++)
		if (k < size)
			k += (size_t)snprintf(buf + k, size - k, "%s\"%s\"",
			                      i ? ", " : "", c->names[i]);
	if (k < size)
		snprintf(buf + k, size - k, "%s%san index 0 to %d",
		         c->names && c->n > CG_CONDS_LISTED ? ", ..." : "",
		         c->names ? ", or " : "", c->n - 1);
	return buf;
}

const char *
cg_conds_name(const struct cg_model *m, int i)
{
	struct cg_conds c;
	const char *s = NULL;

	if (cg_conds_get(m, 0, &c) == 0 && c.names && i < c.n)
		s = c.names[i];
	cg_conds_free(&c);
	return s;
}
