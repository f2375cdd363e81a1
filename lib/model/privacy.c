/*
 * model/privacy.c - the manifest's "dp" record: read, checked, extended.
 *
 * The record's epsilon is never taken on trust: it is recomputed from the
 * history (core/rdp.c) on reading and compared, and recomputed on every
 * append.  The figures' limits are the accountant's (a sigma up to
 * CG_RDP_MAX_SIGMA) and a history's, which grows by a run only when a
 * round's sigma or q changes, or by a max item when a parallel release's
 * runs do not all lie under one of them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/rdp.h"
#include "core/util.h"
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

/* The runs of dp's history item starting at run i: the index after it. */
static int
item_end(const struct cg_dp_run *h, int n, int i)
{
	while (i < n && h[i].alt)
		i++;
	return i < n ? i + 1 : n;
}

/* rdp [CG_RDP_NORDERS] += the curve of the item r [n]: one run's, or the
 * pointwise maximum of n runs' (nan at an order where any is nan: that
 * order says nothing) */
static void
add_item(double *rdp, const struct cg_dp_run *r, int n)
{
	if (n == 1) {
		cg_rdp_add(rdp, r->q, r->sigma, (double)r->steps);
		return;
	}
	for (int i = 0; i < CG_RDP_NORDERS; i++) {
		const double a = cg_rdp_order(i);
		double m = 0;
		for (int k = 0; k < n && !isnan(m); k++) {
			double v = (double)r[k].steps *
			           cg_rdp_sgm(r[k].q, r[k].sigma, a);
			if (isnan(v) || v > m)
				m = v;
		}
		rdp[i] += m;
	}
}

static double
history_epsilon(const struct cg_dp *dp)
{
	double rdp[CG_RDP_NORDERS] = {0};

	for (int i = 0, e; i < dp->nhist; i = e) {
		e = item_end(dp->hist, dp->nhist, i);
		add_item(rdp, dp->hist + i, e - i);
	}
	return cg_rdp_epsilon(rdp, dp->delta, NULL);
}

/* A release's "shard" {"sha256", "split", "index"} from o into *sh; 0 or
 * -1 with a message. */
static int
get_shard(const cJSON *o, struct cg_dp_shard *sh)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "shard");
	unsigned char d[32];
	double index;

	if (!cJSON_IsObject(x))
		return cg_seterr("dp: a release's shard is missing or not an "
		                 "object");
	const char *k[2] = {"sha256", "split"};
	char *to[2] = {sh->sha256, sh->split};
	for (int i = 0; i < 2; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, k[i]);
		if (!cJSON_IsString(v) || cg_hex_parse(d, v->valuestring) != 0)
			return cg_seterr("dp: a release's shard %s is not 64 "
			                 "hex digits",
			                 k[i]);
		cg_hex(to[i], d);
	}
	if (get_num(x, "dp", "index", -1, 0, 1 << 24, &index) != 0)
		return -1;
	if (index != floor(index))
		return cg_seterr("dp: a shard index %g is not a whole number",
		                 index);
	sh->index = (int)index;
	return 0;
}

/* A record's "release" r into dp: one run, or the runs of "max", with
 * their shards; 0 or -1 with a message. */
static int
get_release(const cJSON *r, struct cg_dp *dp)
{
	const cJSON *mx = cJSON_GetObjectItemCaseSensitive(r, "max"), *b;

	if (!cJSON_IsObject(r))
		return cg_seterr("dp: the release is not an object");
	if (get_num(r, "dp", "clip", 0, 1, 1e30, &dp->clip) != 0)
		return -1;
	if (mx == NULL) {
		dp->nrelease = 1;
		if (get_run(r, &dp->release[0]) != 0)
			return -1;
		if (cJSON_GetObjectItemCaseSensitive(r, "shard") == NULL)
			return 0;
		dp->has_shard = 1;
		return get_shard(r, &dp->shard[0]);
	}
	if (!cJSON_IsArray(mx) || cJSON_GetArraySize(mx) < 1 ||
	    cJSON_GetArraySize(mx) > CG_DP_MAX_BRANCHES)
		return cg_seterr("dp: the release's max is not a list of 1 to "
		                 "%d runs",
		                 CG_DP_MAX_BRANCHES);
	dp->has_shard = 1;
	cJSON_ArrayForEach(b, mx)
	{
		if (get_run(b, &dp->release[dp->nrelease]) != 0 ||
		    get_shard(b, &dp->shard[dp->nrelease]) != 0)
			return -1;
		dp->nrelease++;
	}
	return 0;
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
		return cg_seterr("dp: history is not a list of 1 to %d items",
		                 CG_DP_MAX_HISTORY);
	cJSON_ArrayForEach(r, h)
	{
		const cJSON *mx = cJSON_GetObjectItemCaseSensitive(r, "max"),
		            *b;
		if (mx == NULL) {
			if (dp->nhist == CG_DP_MAX_HISTORY)
				return cg_seterr("dp: more than %d runs in the "
				                 "history",
				                 CG_DP_MAX_HISTORY);
			if (get_run(r, &dp->hist[dp->nhist]) != 0)
				return -1;
			dp->nhist++;
			continue;
		}
		if (!cJSON_IsArray(mx) || cJSON_GetArraySize(mx) < 2 ||
		    cJSON_GetArraySize(mx) > CG_DP_MAX_HISTORY - dp->nhist)
			return cg_seterr("dp: a max item is not a list of 2 "
			                 "runs or more (%d in the history at "
			                 "most)",
			                 CG_DP_MAX_HISTORY);
		cJSON_ArrayForEach(b, mx)
		{
			if (get_run(b, &dp->hist[dp->nhist]) != 0)
				return -1;
			dp->hist[dp->nhist++].alt = 1;
		}
		dp->hist[dp->nhist - 1].alt = 0;
	}
	if ((r = cJSON_GetObjectItemCaseSensitive(o, "release")) != NULL &&
	    get_release(r, dp) != 0)
		return -1;
	if (get_num(o, "dp", "epsilon", 0, 0, INFINITY, &eps) != 0)
		return -1;
	e = history_epsilon(dp);
	if (!(fabs(eps - e) <= 1e-6 * e + 1e-9))
		return cg_seterr("dp: epsilon %.10g is not its history's %.10g",
		                 eps, e);
	dp->epsilon = e;
	return 1;
}

/* Whether the history's last run is a plain item (none of a max one). */
static int
last_plain(const struct cg_dp *dp)
{
	return dp->nhist > 0 &&
	       (dp->nhist == 1 || !dp->hist[dp->nhist - 2].alt);
}

int
cg_dp_append(struct cg_dp *dp, double sigma, double q, uint64_t steps)
{
	struct cg_dp_run *last =
	    last_plain(dp) ? &dp->hist[dp->nhist - 1] : NULL;

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

/* ---------------------------------------------------- parallel releases */

static int
run_cmp(const void *x, const void *y)
{
	const struct cg_dp_run *a = x, *b = y;

	if (a->sigma != b->sigma)
		return a->sigma < b->sigma ? -1 : 1;
	if (a->q != b->q)
		return a->q < b->q ? -1 : 1;
	if (a->steps != b->steps)
		return a->steps < b->steps ? -1 : 1;
	return 0;
}

/*
 * The runs of r [n] that make the max item, into out [n], sorted: those
 * no other run bounds at every order (of two with the same curve, the
 * first in the order).  Their count, or -1 with a message (out of
 * memory).
 */
static int
max_item(const struct cg_dp_run *r, int n, struct cg_dp_run *out)
{
	int m = 0, k = 0;
	double *v;

	for (int i = 0; i < n; i++)
		out[i] = (struct cg_dp_run){
		    .sigma = r[i].sigma, .q = r[i].q, .steps = r[i].steps};
	qsort(out, (size_t)n, sizeof(*out), run_cmp);
	for (int i = 0; i < n; i++) /* the same run twice: once */
		if (m == 0 || run_cmp(&out[m - 1], &out[i]) != 0)
			out[m++] = out[i];
	if (m == 1)
		return 1;
	if ((v = malloc((size_t)m * CG_RDP_NORDERS * sizeof(*v))) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < m; i++)
		for (int j = 0; j < CG_RDP_NORDERS; j++)
			v[i * CG_RDP_NORDERS + j] =
			    (double)out[i].steps *
			    cg_rdp_sgm(out[i].q, out[i].sigma, cg_rdp_order(j));
	for (int i = 0; i < m; i++) {
		int beaten = 0;
		for (int j = 0; j < m && !beaten; j++) {
			int ge = j != i, gt = j < i;
			for (int o = 0; o < CG_RDP_NORDERS && ge; o++) {
				double x = v[i * CG_RDP_NORDERS + o],
				       y = v[j * CG_RDP_NORDERS + o];
				/* a nan bounds nothing and is bounded by
				 * nothing: the order says nothing */
				ge = !isnan(x) && !isnan(y) && y >= x;
				gt |= ge && y > x;
			}
			beaten = ge && gt;
		}
		if (!beaten)
			out[k++] = out[i];
	}
	free(v);
	return k;
}

int
cg_dp_append_max(struct cg_dp *dp, const struct cg_dp_run *r, int n)
{
	struct cg_dp_run *m = malloc((size_t)n * sizeof(*m));
	int k, rc = -1;

	if (m == NULL)
		return cg_seterr("out of memory");
	if ((k = max_item(r, n, m)) < 0)
		goto out;
	if (k == 1) {
		rc = cg_dp_append(dp, m[0].sigma, m[0].q, m[0].steps);
		goto out;
	}
	if (k > CG_DP_MAX_HISTORY - dp->nhist) {
		cg_seterr("dp: more than %d runs in the history",
		          CG_DP_MAX_HISTORY);
		goto out;
	}
	for (int i = 0; i < k; i++) {
		dp->hist[dp->nhist] = m[i];
		dp->hist[dp->nhist++].alt = i + 1 < k;
	}
	dp->epsilon = history_epsilon(dp);
	rc = 0;
out:
	free(m);
	return rc;
}

int
cg_dp_base(const struct cg_dp *dp, struct cg_dp *base)
{
	struct cg_dp_run *m = NULL;
	int k, i, rc = -1;

	if (dp->clip <= 0 || dp->nrelease < 1)
		return cg_seterr("dp: a record without the release that made "
		                 "it");
	*base = *dp;
	base->clip = 0;
	base->nrelease = base->has_shard = 0;
	if ((m = malloc((size_t)dp->nrelease * sizeof(*m))) == NULL)
		return cg_seterr("out of memory");
	if ((k = max_item(dp->release, dp->nrelease, m)) < 0)
		goto out;
	for (i = base->nhist;
	     i > 0 && (i == base->nhist || base->hist[i - 1].alt); i--)
		; /* i: where the last item starts */
	if (k == 1 && last_plain(base) && base->hist[i].sigma == m[0].sigma &&
	    base->hist[i].q == m[0].q && base->hist[i].steps >= m[0].steps) {
		if ((base->hist[i].steps -= m[0].steps) == 0)
			base->nhist--;
	} else if (k > 1 && base->nhist - i == k) {
		for (int j = 0; j < k; j++)
			if (run_cmp(&base->hist[i + j], &m[j]) != 0)
				goto bad;
		base->nhist = i;
	} else
		goto bad;
	base->epsilon = base->nhist ? history_epsilon(base) : 0;
	rc = 0;
	goto out;
bad:
	cg_seterr("dp: the history does not end with the release");
out:
	free(m);
	return rc;
}

int
cg_dp_same_history(const struct cg_dp *a, const struct cg_dp *b)
{
	if (a->nhist != b->nhist || (a->nhist && a->delta != b->delta))
		return 0;
	for (int i = 0; i < a->nhist; i++)
		if (run_cmp(&a->hist[i], &b->hist[i]) != 0 ||
		    a->hist[i].alt != b->hist[i].alt)
			return 0;
	return 1;
}

/* The shard as messages name it: "index I of split HEX8". */
static const char *
shard_name(const struct cg_dp_shard *s, char *buf, size_t len)
{
	snprintf(buf, len, "shard %d of split %.8s", s->index, s->split);
	return buf;
}

int
cg_dp_join(struct cg_dp *acc, const struct cg_dp *in)
{
	char x[64];

	if (!in->has_shard || in->clip <= 0)
		return cg_seterr("dp: a release of no shard");
	if (in->nrelease > CG_DP_MAX_BRANCHES - acc->nrelease)
		return cg_seterr("dp: more than %d releases in parallel",
		                 CG_DP_MAX_BRANCHES);
	for (int i = 0; i < in->nrelease; i++)
		for (int j = 0; j < acc->nrelease + i; j++) {
			const struct cg_dp_shard
			    *a = &in->shard[i],
			    *b = j < acc->nrelease
			             ? &acc->shard[j]
			             : &in->shard[j - acc->nrelease];
			if (strcmp(a->sha256, b->sha256) == 0)
				return cg_seterr("dp: trained on a shard "
				                 "(%s) that an update taken "
				                 "already trained on",
				                 shard_name(a, x, sizeof(x)));
			if (strcmp(a->split, b->split) != 0)
				return cg_seterr(
				    "dp: trained on a shard of another split "
				    "than %s: no telling that they share no "
				    "example",
				    shard_name(b, x, sizeof(x)));
			if (a->index == b->index)
				return cg_seterr(
				    "dp: trained on another %s, "
				    "which an update taken already "
				    "trained on",
				    shard_name(a, x, sizeof(x)));
		}
	for (int i = 0; i < in->nrelease; i++) {
		acc->release[acc->nrelease] = in->release[i];
		acc->shard[acc->nrelease++] = in->shard[i];
	}
	acc->has_shard = 1;
	if (in->clip > acc->clip)
		acc->clip = in->clip;
	return 0;
}

uint64_t
cg_dp_rounds(const struct cg_dp *dp)
{
	uint64_t n = 0;

	/* a max item counts as its longest run */
	for (int i = 0, e; i < dp->nhist; i = e) {
		uint64_t most = 0;
		e = item_end(dp->hist, dp->nhist, i);
		for (int k = i; k < e; k++)
			if (dp->hist[k].steps > most)
				most = dp->hist[k].steps;
		n += most;
	}
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

/* s as x's "shard"; 0 or -1 (out of memory). */
static int
put_shard(cJSON *x, const struct cg_dp_shard *s)
{
	cJSON *o = cJSON_AddObjectToObject(x, "shard");

	return o && cJSON_AddStringToObject(o, "sha256", s->sha256) &&
	               cJSON_AddStringToObject(o, "split", s->split) &&
	               cJSON_AddNumberToObject(o, "index", s->index)
	           ? 0
	           : -1;
}

int
cg_dp_write(cJSON *man, const struct cg_dp *dp)
{
	cJSON *o, *h, *r, *mx;

	cJSON_DeleteItemFromObjectCaseSensitive(man, "dp");
	if ((o = cJSON_AddObjectToObject(man, "dp")) == NULL ||
	    cJSON_AddNumberToObject(o, "delta", dp->delta) == NULL ||
	    cJSON_AddNumberToObject(o, "epsilon", dp->epsilon) == NULL ||
	    (h = cJSON_AddArrayToObject(o, "history")) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0, e; i < dp->nhist; i = e) {
		e = item_end(dp->hist, dp->nhist, i);
		cJSON *to = h;
		if (e - i > 1 &&
		    ((r = cJSON_CreateObject()) == NULL ||
		     !cJSON_AddItemToArray(h, r) ||
		     (to = cJSON_AddArrayToObject(r, "max")) == NULL))
			return cg_seterr("out of memory");
		for (int k = i; k < e; k++)
			if (put_run(to, NULL, &dp->hist[k]) == NULL)
				return cg_seterr("out of memory");
	}
	if (dp->clip <= 0)
		return 0;
	if (dp->nrelease == 1) {
		if ((r = put_run(o, "release", &dp->release[0])) == NULL ||
		    cJSON_AddNumberToObject(r, "clip", dp->clip) == NULL ||
		    (dp->has_shard && put_shard(r, &dp->shard[0]) != 0))
			return cg_seterr("out of memory");
		return 0;
	}
	if ((r = cJSON_AddObjectToObject(o, "release")) == NULL ||
	    cJSON_AddNumberToObject(r, "clip", dp->clip) == NULL ||
	    (mx = cJSON_AddArrayToObject(r, "max")) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < dp->nrelease; i++) {
		cJSON *x = put_run(mx, NULL, &dp->release[i]);
		if (x == NULL || put_shard(x, &dp->shard[i]) != 0)
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
