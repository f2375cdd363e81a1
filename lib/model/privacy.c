/*
 * model/privacy.c - the manifest's "dp" record: read, checked, extended.
 *
 * The record's epsilon is never taken on trust: it is recomputed from the
 * history (core/rdp.c) on reading and compared, and recomputed on every
 * append.  The figures' limits are the accountant's (a sigma up to
 * CG_RDP_MAX_SIGMA) and a history's, which grows by a run only when a
 * round's sigma or q changes.
 */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/rdp.h"
#include "model/privacy.h"

/* Releases a run counts at most (2^53: exact in a JSON number). */
#define MAX_STEPS 9007199254740992.0

/* o's number key, checked against (lo, hi] (lo_open) or [lo, hi]; 0 or
 * -1 with a message naming the record what ("dp", "dp_share"). */
static int
get_num(const cJSON *o, const char *what, const char *key, double lo,
        int lo_open, double hi, double *v)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!cJSON_IsNumber(x))
		return cg_seterr("%s: %s missing or not a number", what, key);
	*v = x->valuedouble;
	if (!(lo_open ? *v > lo : *v >= lo) || !(*v <= hi))
		return cg_seterr("%s: %s %g is not in %c%g, %g]", what, key, *v,
		                 lo_open ? '(' : '[', lo, hi);
	return 0;
}

/* One run {"sigma", "q", "steps"} from o; 0 or -1 with a message. */
static int
get_run(const cJSON *o, struct cg_dp_run *r)
{
	double steps;

	if (!cJSON_IsObject(o))
		return cg_seterr("dp: a run of the history is not an object");
	if (get_num(o, "dp", "sigma", 0, 1, CG_RDP_MAX_SIGMA, &r->sigma) != 0 ||
	    get_num(o, "dp", "q", 0, 1, 1, &r->q) != 0 ||
	    get_num(o, "dp", "steps", 1, 0, MAX_STEPS, &steps) != 0)
		return -1;
	if (steps != floor(steps))
		return cg_seterr("dp: steps %g is not a whole number", steps);
	r->steps = (uint64_t)steps;
	return 0;
}

static double
history_epsilon(const struct cg_dp *dp)
{
	double rdp[CG_RDP_NORDERS] = {0};

	for (int i = 0; i < dp->nhist; i++)
		cg_rdp_add(rdp, dp->hist[i].q, dp->hist[i].sigma,
		           (double)dp->hist[i].steps);
	return cg_rdp_epsilon(rdp, dp->delta, NULL);
}

int
cg_dp_read(const cJSON *man, struct cg_dp *out)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(man, "dp"), *h, *r;
	struct cg_dp tmp, *dp = out ? out : &tmp;
	double eps, e;

	memset(dp, 0, sizeof(*dp));
	if (o == NULL)
		return 0;
	if (!cJSON_IsObject(o))
		return cg_seterr("dp: not an object");
	if (get_num(o, "dp", "delta", 0, 1, 1, &dp->delta) != 0)
		return -1;
	if (dp->delta >= 1)
		return cg_seterr("dp: delta %g is not under 1", dp->delta);
	h = cJSON_GetObjectItemCaseSensitive(o, "history");
	if (!cJSON_IsArray(h) || cJSON_GetArraySize(h) < 1 ||
	    cJSON_GetArraySize(h) > CG_DP_MAX_HISTORY)
		return cg_seterr("dp: history is not a list of 1 to %d runs",
		                 CG_DP_MAX_HISTORY);
	cJSON_ArrayForEach(r, h)
	{
		if (get_run(r, &dp->hist[dp->nhist]) != 0)
			return -1;
		dp->nhist++;
	}
	if ((r = cJSON_GetObjectItemCaseSensitive(o, "release")) != NULL) {
		if (get_run(r, &dp->release) != 0 ||
		    get_num(r, "dp", "clip", 0, 1, 1e30, &dp->clip) != 0)
			return -1;
	}
	if (get_num(o, "dp", "epsilon", 0, 0, INFINITY, &eps) != 0)
		return -1;
	e = history_epsilon(dp);
	if (!(fabs(eps - e) <= 1e-6 * e + 1e-9))
		return cg_seterr("dp: epsilon %.10g is not its history's %.10g",
		                 eps, e);
	dp->epsilon = e;
	return 1;
}

int
cg_dp_append(struct cg_dp *dp, double sigma, double q, uint64_t steps)
{
	struct cg_dp_run *last = dp->nhist ? &dp->hist[dp->nhist - 1] : NULL;

	if (last && last->sigma == sigma && last->q == q) {
		last->steps += steps;
	} else {
		if (dp->nhist == CG_DP_MAX_HISTORY)
			return cg_seterr("dp: more than %d runs of sigma and q "
			                 "in the history",
			                 CG_DP_MAX_HISTORY);
		dp->hist[dp->nhist++] =
		    (struct cg_dp_run){.sigma = sigma, .q = q, .steps = steps};
	}
	dp->epsilon = history_epsilon(dp);
	return 0;
}

uint64_t
cg_dp_rounds(const struct cg_dp *dp)
{
	uint64_t n = 0;

	for (int i = 0; i < dp->nhist; i++)
		n += dp->hist[i].steps;
	return n;
}

/* {"sigma", "q", "steps"} of r into a new object of o under key (or into
 * the array o when key is NULL); the object, or NULL. */
static cJSON *
put_run(cJSON *o, const char *key, const struct cg_dp_run *r)
{
	cJSON *x = cJSON_CreateObject();

	if (x == NULL)
		return NULL;
	if (key)
		cJSON_AddItemToObject(o, key, x);
	else
		cJSON_AddItemToArray(o, x);
	cJSON_AddNumberToObject(x, "sigma", r->sigma);
	cJSON_AddNumberToObject(x, "q", r->q);
	cJSON_AddNumberToObject(x, "steps", (double)r->steps);
	return x;
}

int
cg_dp_write(cJSON *man, const struct cg_dp *dp)
{
	cJSON *o, *h, *r;

	cJSON_DeleteItemFromObjectCaseSensitive(man, "dp");
	if ((o = cJSON_AddObjectToObject(man, "dp")) == NULL ||
	    cJSON_AddNumberToObject(o, "delta", dp->delta) == NULL ||
	    cJSON_AddNumberToObject(o, "epsilon", dp->epsilon) == NULL ||
	    (h = cJSON_AddArrayToObject(o, "history")) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < dp->nhist; i++)
		if (put_run(h, NULL, &dp->hist[i]) == NULL)
			return cg_seterr("out of memory");
	if (dp->clip > 0) {
		if ((r = put_run(o, "release", &dp->release)) == NULL ||
		    cJSON_AddNumberToObject(r, "clip", dp->clip) == NULL)
			return cg_seterr("out of memory");
	}
	return 0;
}

int
cg_dp_share_read(const cJSON *man, struct cg_dp_share *out)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(man, "dp_share");
	struct cg_dp_share tmp, *s = out ? out : &tmp;
	double peers;

	memset(s, 0, sizeof(*s));
	if (o == NULL)
		return 0;
	if (!cJSON_IsObject(o))
		return cg_seterr("dp_share: not an object");
	if (get_num(o, "dp_share", "clip", 0, 1, 1e30, &s->clip) != 0 ||
	    get_num(o, "dp_share", "sigma", 0, 0, CG_RDP_MAX_SIGMA,
	            &s->sigma) != 0 ||
	    get_num(o, "dp_share", "peers", 2, 0, 1 << 20, &peers) != 0)
		return -1;
	if (peers != floor(peers))
		return cg_seterr("dp_share: peers %g is not a whole number",
		                 peers);
	s->peers = (int)peers;
	return 1;
}

int
cg_dp_share_write(cJSON *man, const struct cg_dp_share *s)
{
	cJSON *o;

	cJSON_DeleteItemFromObjectCaseSensitive(man, "dp_share");
	if ((o = cJSON_AddObjectToObject(man, "dp_share")) == NULL ||
	    cJSON_AddNumberToObject(o, "clip", s->clip) == NULL ||
	    cJSON_AddNumberToObject(o, "sigma", s->sigma) == NULL ||
	    cJSON_AddNumberToObject(o, "peers", s->peers) == NULL)
		return cg_seterr("out of memory");
	return 0;
}
