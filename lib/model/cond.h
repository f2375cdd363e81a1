/*
 * model/cond.h - a model's conditions as a user names them: by name from
 * the manifest's vocabulary, or by index.
 *
 * What cg-sample asks of -c, and what any caller that draws from a model
 * for conditions a person typed needs: a lookup, the default a text
 * model draws without one, and the words that list the valid ones.
 */
#ifndef CG_COND_H
#define CG_COND_H

#include <stddef.h>

struct cg_model;

/* Names listed by cg_conds_valid before it cuts the list with "...". */
#define CG_CONDS_LISTED 32

/* A model's conditions. */
struct cg_conds {
	const char **names; /* [n], the manifest's strings; NULL: the model
	                     * has no names (its conditions by index) */
	int n;
};

/*
 * m's conditions into *c, as cg_model_conditions reads them (need_names
 * 1: a model without names is an error).  Returns 0 (the caller frees
 * with cg_conds_free), or -1 with a message and *c empty.
 */
int cg_conds_get(const struct cg_model *m, int need_names, struct cg_conds *c);
/* Free c's array (not the manifest's strings); c may be empty. */
void cg_conds_free(struct cg_conds *c);

/*
 * The index of the condition s names: the first name equal to s, failing
 * that s as an index 0 to n - 1 in decimal; -1 if neither.
 */
int cg_conds_find(const struct cg_conds *c, const char *s);
/*
 * given [ngiven] as indices into rows [ngiven], in order.  Returns how
 * many were found before the first that is no condition of c: ngiven
 * when all are (rows past the one not found are left as they were).
 */
int cg_conds_lookup(const struct cg_conds *c, const char *const *given,
                    int ngiven, int *rows);
/*
 * The condition a text model draws when none is given: the only one, or
 * with prompt nonzero the CG_TEXT_PROMPT_CONDITION where c names it (it
 * wins over an only one).  -1 when neither: a model's categories are too
 * different to pick one silently.
 */
int cg_conds_default(const struct cg_conds *c, int prompt);
/*
 * Into buf [size] (cut to fit), lead and then the ways a condition of c
 * may be given: its first CG_CONDS_LISTED names quoted, ", ..." when
 * there are more, then ", or an index 0 to N-1" ("an index 0 to N-1"
 * alone for a model without names).  Returns buf.
 */
char *cg_conds_valid(const struct cg_conds *c, const char *lead, char *buf,
                     size_t size);

/*
 * The name of condition i in m's manifest, a string of the manifest's
 * (valid while m is), or NULL where m has no names or no condition i.
 */
const char *cg_conds_name(const struct cg_model *m, int i);

#endif
