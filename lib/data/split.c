/*
 * data/split.c - splitting a dataset into weighted shards, and writing
 * each shard as a cg file of kind "data".
 *
 * Splitting is a pure function of the dataset, the strategy, the weights,
 * the holdout size and the seed: it fills an array with each example's
 * shard and never touches payload bytes except to hash them.  Everything
 * is in memory: a dataset must fit in RAM once, plus 4 bytes of assignment
 * per example.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "data/split.h"

/* Seeds above this would not survive a round trip through JSON. */
#define MAX_SEED (((uint64_t)1 << 53) - 1)
/* Cells of the condition x shard table of a stratified split. */
#define MAX_CELLS ((uint64_t)1 << 28)

/* Independent random streams, one per use, derived from the seed. */
enum { STREAM_HOLDOUT = 1, STREAM_STRATIFIED, STREAM_RANDOM };

/* ---------------------------------------------------------- apportioning */

struct rem {
	uint64_t num; /* remainder, as a numerator over a common denominator */
	double frac;  /* or as a fraction, for real weights */
	int i;
};

static int
cmp_rem_int(const void *a, const void *b)
{
	const struct rem *x = a, *y = b;

	if (x->num != y->num)
		return x->num > y->num ? -1 : 1;
	return x->i - y->i;
}

static int
cmp_rem_real(const void *a, const void *b)
{
	const struct rem *x = a, *y = b;

	if (x->frac != y->frac)
		return x->frac > y->frac ? -1 : 1;
	return x->i - y->i;
}

/*
 * Largest remainder over integer sizes: out[i] = floor(total * a[i] / A)
 * plus one for the largest remainders, ties to the lower i.  total * a[i]
 * must fit in 64 bits: callers keep total below 2^31 and a[i] at most
 * 2^31 (a count of examples) or 2^30 (an integral weight).
 */
static int
apportion_int(uint64_t total, const uint64_t *a, size_t k, uint64_t *out)
{
	uint64_t sum = 0, given = 0;
	struct rem *r;

	for (size_t i = 0; i < k; i++)
		sum += a[i];
	if (sum == 0) {
		memset(out, 0, k * sizeof(*out));
		return 0;
	}
	if ((r = malloc(k * sizeof(*r))) == NULL)
		return cg_seterr("out of memory");
	for (size_t i = 0; i < k; i++) {
		out[i] = total * a[i] / sum;
		r[i] = (struct rem){.num = total * a[i] % sum, .i = (int)i};
		given += out[i];
	}
	qsort(r, k, sizeof(*r), cmp_rem_int);
	for (size_t i = 0; given < total; i++, given++)
		out[r[i].i]++;
	free(r);
	return 0;
}

/* Whether weights are all equal (or absent), and all small integers. */
static void
weight_kind(int n, const double *w, int *equal, int *integral)
{
	*equal = 1;
	*integral = 1;
	if (w == NULL)
		return;
	for (int i = 0; i < n; i++) {
		if (w[i] != w[0])
			*equal = 0;
		if (w[i] != floor(w[i]) || w[i] > (double)(1 << 30))
			*integral = 0;
	}
}

static int
check_weights(int n, const double *w)
{
	double sum = 0;

	if (n < 1 || n > CG_SHARD_MAX_SHARDS)
		return cg_seterr("%d shards (1 to %d allowed)", n,
		                 CG_SHARD_MAX_SHARDS);
	if (w == NULL)
		return 0;
	for (int i = 0; i < n; i++) {
		if (!isfinite(w[i]) || w[i] <= 0)
			return cg_seterr("weight %d (%g) is not a positive "
			                 "number",
			                 i, w[i]);
		sum += w[i];
	}
	if (!isfinite(sum))
		return cg_seterr("weights sum to infinity");
	return 0;
}

int
cg_split_targets(uint64_t m, int nshards, const double *w, uint64_t *targets)
{
	int equal, integral, rc;
	uint64_t *a, given = 0;
	struct rem *r;
	double sum = 0;

	if (check_weights(nshards, w) != 0)
		return -1;
	if (m > CG_SHARD_MAX_EXAMPLES)
		return cg_seterr("%llu examples (at most %llu)",
		                 (unsigned long long)m,
		                 (unsigned long long)CG_SHARD_MAX_EXAMPLES);
	weight_kind(nshards, w, &equal, &integral);
	if (equal || integral) {
		/* Exact arithmetic whenever the weights allow it. */
		if ((a = malloc((size_t)nshards * sizeof(*a))) == NULL)
			return cg_seterr("out of memory");
		for (int i = 0; i < nshards; i++)
			a[i] = equal ? 1 : (uint64_t)w[i];
		rc = apportion_int(m, a, (size_t)nshards, targets);
		free(a);
		return rc;
	}
	if ((r = malloc((size_t)nshards * sizeof(*r))) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < nshards; i++)
		sum += w[i];
	for (int i = 0; i < nshards; i++) {
		double q = (double)m * (w[i] / sum);
		double f = floor(q);
		targets[i] = (uint64_t)f;
		r[i] = (struct rem){.frac = q - f, .i = i};
		given += targets[i];
	}
	qsort(r, (size_t)nshards, sizeof(*r), cmp_rem_real);
	/* Rounding may overshoot by a hair: take back from the smallest
	 * remainders first. */
	for (int i = nshards - 1; given > m && i >= 0; i--)
		if (targets[r[i].i] > 0) {
			targets[r[i].i]--;
			given--;
		}
	for (int i = 0; given < m; i = (i + 1) % nshards, given++)
		targets[r[i].i]++;
	free(r);
	return 0;
}

uint64_t
cg_split_holdout_count(uint64_t n, double frac)
{
	double k;

	if (!(frac > 0))
		return 0;
	if (frac >= 1)
		return n;
	k = floor((double)n * frac + 0.5);
	return k > (double)n ? n : (uint64_t)k;
}

/* ----------------------------------------------------------- strategies */

static void
shuffle(uint32_t *a, uint64_t n, struct cg_rng *r)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = cg_rng_below(r, i);
		uint32_t t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

/* Members of each condition, in input order: members[start[c] ..
 * start[c+1]).  With assign, held-out examples (assign[i] < 0) are left
 * out. */
static int
group(const struct cg_dataset *d, const int *assign, uint32_t **members,
      uint64_t **start)
{
	size_t k = d->nconditions;
	uint64_t *pos;

	*members = NULL;
	if ((*start = calloc(k + 1, sizeof(**start))) == NULL ||
	    (pos = calloc(k, sizeof(*pos))) == NULL) {
		free(*start);
		return cg_seterr("out of memory");
	}
	for (uint64_t i = 0; i < d->n; i++)
		if (assign == NULL || assign[i] >= 0)
			(*start)[d->cond[i] + 1]++;
	for (size_t c = 0; c < k; c++)
		(*start)[c + 1] += (*start)[c];
	if ((*members = malloc(((*start)[k] ? (*start)[k] : 1) *
	                       sizeof(**members))) == NULL) {
		free(pos);
		free(*start);
		return cg_seterr("out of memory");
	}
	for (uint64_t i = 0; i < d->n; i++)
		if (assign == NULL || assign[i] >= 0) {
			uint32_t c = d->cond[i];
			(*members)[(*start)[c] + pos[c]++] = (uint32_t)i;
		}
	free(pos);
	return 0;
}

/* Hold out k examples: stratified by condition, chosen at random. */
static int
split_holdout(const struct cg_dataset *d, uint64_t k, uint64_t seed,
              int *assign)
{
	uint32_t *members;
	uint64_t *start, *size, *take;
	struct cg_rng rng;
	size_t nc = d->nconditions;
	int rc = -1;

	if (k == 0)
		return 0;
	if (group(d, NULL, &members, &start) != 0)
		return -1;
	size = calloc(nc, sizeof(*size));
	take = calloc(nc, sizeof(*take));
	if (size == NULL || take == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (size_t c = 0; c < nc; c++)
		size[c] = start[c + 1] - start[c];
	if (apportion_int(k, size, nc, take) != 0)
		goto out;
	cg_rng_derive(&rng, seed, STREAM_HOLDOUT, 0);
	for (size_t c = 0; c < nc; c++) {
		uint32_t *m = members + start[c];
		/* partial Fisher-Yates: the first take[c] become a uniform
		 * sample without replacement */
		for (uint64_t i = 0; i < take[c]; i++) {
			uint64_t j = i + cg_rng_below(&rng, size[c] - i);
			uint32_t t = m[i];
			m[i] = m[j];
			m[j] = t;
			assign[m[i]] = -1;
		}
	}
	rc = 0;
out:
	free(size);
	free(take);
	free(members);
	free(start);
	return rc;
}

/* Deal rest[0..m) to shards in runs: shard s takes targets[s] in turn. */
static void
deal_runs(const uint32_t *rest, const uint64_t *targets, int nshards,
          int *assign)
{
	uint64_t p = 0;

	for (int s = 0; s < nshards; s++)
		for (uint64_t j = 0; j < targets[s]; j++)
			assign[rest[p++]] = s;
}

/*
 * Smooth weighted round robin: shard s's k-th example (k = 0 ..
 * targets[s]-1) belongs at time (2k + 1) / (2 targets[s]) of the run; a
 * binary heap of shards keyed by their next time merges the N sequences.
 * Times compare exactly by cross-multiplication ((2k+1) t < 2^63 for the
 * sizes allowed).
 */
struct rr {
	uint64_t k, t;
	int s;
};

static int
rr_before(const struct rr *a, const struct rr *b)
{
	uint64_t x = (2 * a->k + 1) * b->t, y = (2 * b->k + 1) * a->t;

	return x != y ? x < y : a->s < b->s;
}

static void
rr_down(struct rr *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && rr_before(&h[l], &h[m]))
			m = l;
		if (r < n && rr_before(&h[r], &h[m]))
			m = r;
		if (m == i)
			return;
		struct rr t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static int
split_roundrobin(const uint32_t *rest, uint64_t m, const uint64_t *targets,
                 int nshards, int *assign)
{
	struct rr *h;
	size_t n = 0;

	if ((h = malloc((size_t)nshards * sizeof(*h))) == NULL)
		return cg_seterr("out of memory");
	for (int s = 0; s < nshards; s++)
		if (targets[s] > 0)
			h[n++] = (struct rr){0, targets[s], s};
	for (size_t i = n / 2; i-- > 0;)
		rr_down(h, n, i);
	for (uint64_t p = 0; p < m; p++) {
		assign[rest[p]] = h[0].s;
		if (++h[0].k == h[0].t)
			h[0] = h[--n];
		rr_down(h, n, 0);
	}
	free(h);
	return 0;
}

static int
split_hashed(const struct cg_dataset *d, const struct cg_split *s, int *assign)
{
	double *bound, sum = 0, acc = 0;
	int n = s->nshards;

	if ((bound = malloc((size_t)n * sizeof(*bound))) == NULL)
		return cg_seterr("out of memory");
	for (int i = 0; i < n; i++)
		sum += s->weights ? s->weights[i] : 1;
	for (int i = 0; i < n; i++) {
		acc += s->weights ? s->weights[i] : 1;
		bound[i] = acc / sum;
	}
	for (uint64_t i = 0; i < d->n; i++) {
		if (assign[i] < 0)
			continue;
		uint64_t h =
		    d->payload == NULL
		        ? d->hash[i]
		        : cg_payload_hash(d->payload + d->offset[i],
		                          d->offset[i + 1] - d->offset[i],
		                          s->seed);
		double u = (double)(h >> 11) * 0x1p-53;
		int j = 0;
		while (j < n - 1 && u >= bound[j])
			j++;
		assign[i] = j;
	}
	free(bound);
	return 0;
}

/*
 * The condition x shard table of a stratified split.  ideal[c][s] is
 * condition c's exact share of shard s; each cell gets its floor, and the
 * residues (resid[c] per condition, need[s] per shard) are then placed one
 * per cell, only in cells whose share is fractional: a 0/1 matrix with
 * given row and column sums, i.e. a bipartite flow.  A greedy pass that
 * gives each condition's extras to the shards that still need most
 * (rotating among equals, so remainders do not pile on shard 0) almost
 * always finishes; augmenting paths finish the rest.
 */
struct table {
	size_t nc;
	int ns;
	uint64_t *cell;  /* [nc * ns] floors, then the final counts */
	uint8_t *frac;   /* [nc * ns] 1 where the share is fractional */
	uint8_t *extra;  /* [nc * ns] 1 where a residue was placed */
	uint64_t *resid; /* [nc] extras still to place per condition */
	uint64_t *need;  /* [ns] extras still wanted per shard */
};

struct cand {
	uint64_t need;
	int dist; /* distance after the rotor */
	int s;
};

static int
cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->need != y->need)
		return x->need > y->need ? -1 : 1;
	return x->dist - y->dist;
}

static void
table_greedy(struct table *t)
{
	struct cand *order = malloc((size_t)t->ns * sizeof(*order));
	int rot = 0;

	if (order == NULL)
		return; /* augmenting alone still finds the table */
	for (size_t c = 0; c < t->nc; c++) {
		size_t row = c * (size_t)t->ns;
		size_t m = 0;

		if (t->resid[c] == 0)
			continue;
		for (int j = 0; j < t->ns; j++) {
			int s = (rot + j) % t->ns;
			if (t->frac[row + s] && t->need[s] > 0)
				order[m++] = (struct cand){t->need[s], j, s};
		}
		qsort(order, m, sizeof(*order), cmp_cand);
		for (size_t j = 0; j < m && t->resid[c] > 0; j++) {
			int s = order[j].s;
			t->extra[row + s] = 1;
			t->resid[c]--;
			t->need[s]--;
			rot = (s + 1) % t->ns;
		}
	}
	free(order);
}

/*
 * Place the residues still left by augmenting paths: from a condition
 * with residue, alternate unused fractional cells (condition to shard) and
 * used ones (shard back to condition) until a shard that still needs one.
 * Returns 0 when all are placed, 1 if no placement exists, -1 on error.
 */
static int
table_augment(struct table *t)
{
	size_t nc = t->nc, ns = (size_t)t->ns;
	long *from_s = malloc(ns * sizeof(long)); /* condition reaching s */
	long *from_c = malloc(nc * sizeof(long)); /* shard reaching c */
	size_t *queue = malloc(nc * sizeof(size_t));
	int rc = -1;

	if (from_s == NULL || from_c == NULL || queue == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (size_t c0 = 0; c0 < nc; c0++) {
		while (t->resid[c0] > 0) {
			size_t head = 0, tail = 0;
			long found = -1;

			for (size_t s = 0; s < ns; s++)
				from_s[s] = -1;
			for (size_t c = 0; c < nc; c++)
				from_c[c] = -1;
			from_c[c0] = -2;
			queue[tail++] = c0;
			while (head < tail && found < 0) {
				size_t c = queue[head++];
				for (size_t s = 0; s < ns && found < 0; s++) {
					size_t i = c * ns + s;
					if (!t->frac[i] || t->extra[i] ||
					    from_s[s] != -1)
						continue;
					from_s[s] = (long)c;
					if (t->need[s] > 0) {
						found = (long)s;
						break;
					}
					for (size_t c2 = 0; c2 < nc; c2++)
						if (t->extra[c2 * ns + s] &&
						    from_c[c2] == -1) {
							from_c[c2] = (long)s;
							queue[tail++] = c2;
						}
				}
			}
			if (found < 0) {
				rc = 1;
				goto out;
			}
			t->need[found]--;
			t->resid[c0]--;
			/* flip the path back to c0 */
			for (long s = found; s >= 0;) {
				size_t c = (size_t)from_s[s];
				t->extra[c * ns + (size_t)s] = 1;
				long prev = from_c[c];
				if (prev == -2)
					break;
				t->extra[c * ns + (size_t)prev] = 0;
				s = prev;
			}
		}
	}
	rc = 0;
out:
	free(from_s);
	free(from_c);
	free(queue);
	return rc;
}

/*
 * Fill t for condition sizes size[nc] and shard totals targets[ns].
 * exact: shares are size[c] * targets[s] / M, rational and always
 * feasible; otherwise size[c] * w[s] / W, which keeps conditions as even
 * as the weights themselves say (with equal weights: within one) but may,
 * rarely, have no solution.  Returns 0, 1 (no solution) or -1.
 */
static int
table_fill(struct table *t, const uint64_t *size, const uint64_t *targets,
           const double *w, int exact)
{
	size_t nc = t->nc, ns = (size_t)t->ns;
	int equal, integral;
	uint64_t m = 0;
	double wsum = 0;

	for (size_t c = 0; c < nc; c++)
		m += size[c];
	weight_kind(t->ns, w, &equal, &integral);
	for (size_t s = 0; s < ns; s++)
		wsum += w ? w[s] : 1;
	memset(t->extra, 0, nc * ns);
	for (size_t s = 0; s < ns; s++)
		t->need[s] = targets[s];
	for (size_t c = 0; c < nc; c++) {
		t->resid[c] = size[c];
		for (size_t s = 0; s < ns; s++) {
			size_t i = c * ns + s;
			uint64_t f;
			if (exact) { /* m > 0 here, or every size is 0 */
				f = m ? size[c] * targets[s] / m : 0;
				t->frac[i] = m && size[c] * targets[s] % m != 0;
			} else if (equal) {
				f = size[c] / ns;
				t->frac[i] = size[c] % ns != 0;
			} else {
				double q = (double)size[c] * (w[s] / wsum);
				double fl = floor(q + 1e-9);
				f = (uint64_t)fl;
				t->frac[i] = q - fl > 1e-9;
			}
			if (f > t->resid[c] || f > t->need[s])
				return 1;
			t->cell[i] = f;
			t->resid[c] -= f;
			t->need[s] -= f;
		}
	}
	table_greedy(t);
	return table_augment(t);
}

static int
split_stratified(const struct cg_dataset *d, const struct cg_split *sp,
                 const uint64_t *targets, int *assign)
{
	struct table t = {.nc = d->nconditions, .ns = sp->nshards};
	size_t nc = t.nc, ns = (size_t)t.ns;
	uint32_t *members = NULL;
	uint64_t *start = NULL, *size = NULL;
	struct cg_rng rng;
	int rc = -1, r;

	if ((uint64_t)nc * ns > MAX_CELLS)
		return cg_seterr("stratified split of %zu conditions over %zu "
		                 "shards is too large",
		                 nc, ns);
	if (group(d, assign, &members, &start) != 0)
		return -1;
	t.cell = malloc(nc * ns * sizeof(*t.cell));
	t.frac = malloc(nc * ns);
	t.extra = malloc(nc * ns);
	t.resid = malloc(nc * sizeof(*t.resid));
	t.need = malloc(ns * sizeof(*t.need));
	size = malloc(nc * sizeof(*size));
	if (!t.cell || !t.frac || !t.extra || !t.resid || !t.need || !size) {
		cg_seterr("out of memory");
		goto out;
	}
	for (size_t c = 0; c < nc; c++)
		size[c] = start[c + 1] - start[c];
	if ((r = table_fill(&t, size, targets, sp->weights, 0)) == 1)
		r = table_fill(&t, size, targets, sp->weights, 1);
	if (r < 0)
		goto out;
	if (r > 0) {
		cg_seterr("stratified split: no table fits the targets "
		          "(internal error)");
		goto out;
	}
	for (size_t c = 0; c < nc; c++) {
		uint32_t *m = members + start[c];
		uint64_t p = 0;

		cg_rng_derive(&rng, sp->seed, STREAM_STRATIFIED, c);
		shuffle(m, size[c], &rng);
		for (size_t s = 0; s < ns; s++) {
			uint64_t k = t.cell[c * ns + s] + t.extra[c * ns + s];
			for (uint64_t j = 0; j < k; j++)
				assign[m[p++]] = (int)s;
		}
	}
	rc = 0;
out:
	free(t.cell);
	free(t.frac);
	free(t.extra);
	free(t.resid);
	free(t.need);
	free(size);
	free(members);
	free(start);
	return rc;
}

/* ------------------------------------------------------------ splitting */

static const char *const split_names[] = {
    [CG_SPLIT_CONTIGUOUS] = "contiguous", [CG_SPLIT_ROUNDROBIN] = "round-robin",
    [CG_SPLIT_RANDOM] = "random",         [CG_SPLIT_STRATIFIED] = "stratified",
    [CG_SPLIT_HASHED] = "hashed",
};

const char *
cg_split_name(enum cg_split_strategy s)
{
	return (unsigned)s <= CG_SPLIT_HASHED ? split_names[s] : "?";
}

int
cg_split_parse(const char *name, enum cg_split_strategy *out)
{
	int i = cg_name_index(split_names, 0, CG_SPLIT_HASHED, name);

	if (i >= 0) {
		*out = (enum cg_split_strategy)i;
		return 0;
	}
	return cg_seterr("unknown strategy '%.32s' (contiguous, round-robin, "
	                 "random, stratified or hashed)",
	                 name);
}

static int
check_split(const struct cg_dataset *d, const struct cg_split *s)
{
	if ((unsigned)s->strategy > CG_SPLIT_HASHED)
		return cg_seterr("unknown split strategy %d", s->strategy);
	if (check_weights(s->nshards, s->weights) != 0)
		return -1;
	if (s->seed > MAX_SEED)
		return cg_seterr("seed %llu is above 2^53-1",
		                 (unsigned long long)s->seed);
	if (d->n > CG_SHARD_MAX_EXAMPLES)
		return cg_seterr("%llu examples (at most %llu)",
		                 (unsigned long long)d->n,
		                 (unsigned long long)CG_SHARD_MAX_EXAMPLES);
	if (s->holdout > d->n)
		return cg_seterr("holdout of %llu examples, but there are "
		                 "only %llu",
		                 (unsigned long long)s->holdout,
		                 (unsigned long long)d->n);
	if (d->nconditions == 0)
		return cg_seterr("dataset without conditions");
	if (d->payload == NULL && d->fetch == NULL)
		return cg_seterr("dataset without a payload");
	if (d->payload == NULL && s->strategy == CG_SPLIT_HASHED &&
	    (d->hash == NULL || d->hash_seed != s->seed))
		return cg_seterr("hashed split of a dataset read without "
		                 "the hashes of seed %llu",
		                 (unsigned long long)s->seed);
	for (uint64_t i = 0; i < d->n; i++)
		if (d->cond[i] >= d->nconditions)
			return cg_seterr("example %llu: condition %u out of "
			                 "range",
			                 (unsigned long long)i, d->cond[i]);
	return 0;
}

int
cg_split_assign(const struct cg_dataset *d, const struct cg_split *s,
                int *assign)
{
	uint32_t *rest = NULL;
	uint64_t *targets = NULL, m = 0;
	struct cg_rng rng;
	int rc = -1;

	if (check_split(d, s) != 0)
		return -1;
	for (uint64_t i = 0; i < d->n; i++)
		assign[i] = 0;
	if (split_holdout(d, s->holdout, s->seed, assign) != 0)
		return -1;
	if (s->strategy == CG_SPLIT_HASHED)
		return split_hashed(d, s, assign);

	/* The examples left to split, in input order. */
	if ((rest = malloc((d->n - s->holdout + 1) * sizeof(*rest))) == NULL ||
	    (targets = malloc((size_t)s->nshards * sizeof(*targets))) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < d->n; i++)
		if (assign[i] >= 0)
			rest[m++] = (uint32_t)i;
	if (cg_split_targets(m, s->nshards, s->weights, targets) != 0)
		goto out;
	switch (s->strategy) {
	case CG_SPLIT_CONTIGUOUS:
		deal_runs(rest, targets, s->nshards, assign);
		break;
	case CG_SPLIT_ROUNDROBIN:
		if (split_roundrobin(rest, m, targets, s->nshards, assign) != 0)
			goto out;
		break;
	case CG_SPLIT_RANDOM:
		cg_rng_derive(&rng, s->seed, STREAM_RANDOM, 0);
		shuffle(rest, m, &rng);
		deal_runs(rest, targets, s->nshards, assign);
		break;
	case CG_SPLIT_STRATIFIED:
		if (split_stratified(d, s, targets, assign) != 0)
			goto out;
		break;
	case CG_SPLIT_HASHED:
		break;
	}
	rc = 0;
out:
	free(rest);
	free(targets);
	return rc;
}

uint64_t
cg_split_count(const struct cg_dataset *d, const int *assign, int shard,
               uint64_t *counts)
{
	uint64_t total = 0;

	if (counts)
		memset(counts, 0, d->nconditions * sizeof(*counts));
	for (uint64_t i = 0; i < d->n; i++)
		if (assign[i] == shard) {
			if (counts)
				counts[d->cond[i]]++;
			total++;
		}
	return total;
}

/* -------------------------------------------------------------- writing */

static int
add_manifest(cJSON *m, const struct cg_dataset *d, uint64_t n, int shard,
             const struct cg_split *s)
{
	cJSON *names, *o;

	cJSON_AddNumberToObject(m, "examples", (double)n);
	if ((names = cJSON_AddArrayToObject(m, "conditions")) == NULL)
		return -1;
	for (size_t c = 0; c < d->nconditions; c++) {
		cJSON *str = cJSON_CreateString(d->conditions[c]);
		if (str == NULL || !cJSON_AddItemToArray(names, str))
			return -1;
	}
	if (d->kind == CG_PAYLOAD_IMAGE) {
		cJSON_AddStringToObject(m, "payload", "image");
		if ((o = cJSON_AddObjectToObject(m, "image")) == NULL)
			return -1;
		cJSON_AddNumberToObject(o, "height", d->height);
		cJSON_AddNumberToObject(o, "width", d->width);
		cJSON_AddNumberToObject(o, "channels", d->channels);
	} else {
		cJSON_AddStringToObject(m, "payload", "text");
	}
	if ((o = cJSON_AddObjectToObject(m, "shard")) == NULL)
		return -1;
	cJSON_AddNumberToObject(o, "index", shard);
	cJSON_AddNumberToObject(o, "count", s->nshards);
	cJSON_AddStringToObject(o, "strategy", cg_split_name(s->strategy));
	cJSON_AddNumberToObject(o, "seed", (double)s->seed);
	if (s->weights) {
		cJSON *w = cJSON_CreateDoubleArray(s->weights, s->nshards);
		if (w == NULL || !cJSON_AddItemToObject(o, "weights", w))
			return -1;
	}
	cJSON_AddBoolToObject(o, "holdout", shard < 0);
	if ((o = cJSON_AddObjectToObject(m, "source")) == NULL)
		return -1;
	if (cJSON_AddNumberToObject(o, "examples", (double)d->n) == NULL)
		return -1;
	return 0;
}

/*
 * The payload of one shard of a dataset whose payload is not in memory
 * (d->fetch): the writer reads it in order, from 0 to the end, twice; a
 * read at 0 starts again from the first example.  buf holds the example
 * being read, fetched whole.
 */
struct shard_src {
	const struct cg_dataset *d;
	const int *assign;
	int shard;
	uint64_t i;     /* the example in buf, an index into d */
	uint64_t at;    /* the payload offset of buf's first byte */
	uint64_t len;   /* bytes in buf */
	uint64_t next;  /* the offset the next read must start at */
	uint8_t *buf;   /* [the shard's longest example] */
};

/* Fetch the shard's next example after src->i (from the first, with
 * first set) into buf. */
static int
shard_src_next(struct shard_src *src, int first)
{
	const struct cg_dataset *d = src->d;
	uint64_t i = first ? 0 : src->i + 1;

	if (!first)
		src->at += src->len;
	while (i < d->n && src->assign[i] != src->shard)
		i++;
	if (i == d->n)
		return cg_seterr("payload: past the shard's last example");
	src->i = i;
	src->len = d->offset[i + 1] - d->offset[i];
	if (d->fetch(d->fetch_ctx, i, src->buf) != 0)
		return -1;
	return 0;
}

static int
shard_src_read(void *ctx, uint64_t off, void *buf, size_t n)
{
	struct shard_src *src = ctx;
	uint8_t *out = buf;

	if (off == 0) {
		src->i = 0;
		src->at = 0;
		src->len = 0;
		if (shard_src_next(src, 1) != 0)
			return -1;
	} else if (off != src->next) {
		return cg_seterr("payload: read out of order");
	}
	src->next = off + n;
	while (n > 0) {
		uint64_t in = off - src->at, k;
		if (in >= src->len) {
			if (shard_src_next(src, 0) != 0)
				return -1;
			continue;
		}
		k = src->len - in < n ? src->len - in : n;
		memcpy(out, src->buf + in, k);
		out += k;
		off += k;
		n -= k;
	}
	return 0;
}

static void
shard_src_free(struct shard_src *src)
{
	if (src) {
		free(src->buf);
		free(src);
	}
}

/*
 * cg_shard_build for any dataset, one whose payload is not in memory too
 * (d->fetch): its "payload" tensor is then a source (cg_file_add_source)
 * that reads each example again as the file is written, and *srcp the
 * state it reads with, for the caller to free (shard_src_free) after the
 * file; NULL for a dataset in memory.
 */
static struct cg_file *
shard_build(const struct cg_dataset *d, const int *assign, int shard,
            const struct cg_split *s, struct shard_src **srcp)
{
	struct shard_src *src = NULL;
	uint64_t longest = 0;
	struct cg_tensor *tc, *ti, *to, *tp, *tl;
	uint64_t n = 0, bytes = 0, j = 0;
	struct cg_file *f;

	if (check_split(d, s) != 0)
		return NULL;
	if (shard < -1 || shard >= s->nshards) {
		cg_seterr("shard %d out of range", shard);
		return NULL;
	}
	if (d->prompt_len && d->kind != CG_PAYLOAD_TEXT) {
		cg_seterr("prompts in a dataset that is not text");
		return NULL;
	}
	for (uint64_t i = 0; i < d->n; i++)
		if (assign[i] == shard) {
			uint64_t len = d->offset[i + 1] - d->offset[i];
			n++;
			bytes += len;
			longest = len > longest ? len : longest;
		}
	if (d->payload == NULL) {
		if (srcp == NULL) {
			cg_seterr("a shard of a dataset not in memory is "
			          "written (cg_shard_write), not built");
			return NULL;
		}
		if ((src = calloc(1, sizeof(*src))) == NULL ||
		    (src->buf = malloc(longest ? longest : 1)) == NULL) {
			free(src);
			cg_seterr("out of memory");
			return NULL;
		}
		src->d = d;
		src->assign = assign;
		src->shard = shard;
	}
	if ((f = cg_file_new("data")) == NULL) {
		shard_src_free(src);
		return NULL;
	}
	if (add_manifest(f->manifest, d, n, shard, s) != 0) {
		cg_seterr("out of memory");
		goto fail;
	}
	if ((tc = cg_file_add_zero(f, "cond", CG_U32, 1, &n)) == NULL ||
	    (ti = cg_file_add_zero(f, "index", CG_U64, 1, &n)) == NULL ||
	    (to = cg_file_add_zero(f, "offset", CG_U64, 1,
	                           (uint64_t[]){n + 1})) == NULL)
		goto fail;
	if (src ? cg_file_add_source(f, "payload", CG_U8, 1, &bytes,
	                             shard_src_read, src) == NULL
	        : cg_file_add_zero(f, "payload", CG_U8, 1, &bytes) == NULL)
		goto fail;
	/* Last, so that the first four members are the same for every kind
	 * of shard. */
	if (d->prompt_len &&
	    cg_file_add_zero(f, "prompt_len", CG_U32, 1, &n) == NULL)
		goto fail;
	/* cg_file_add_zero may move the tensor table: look them up again. */
	tc = cg_file_find(f, "cond");
	ti = cg_file_find(f, "index");
	to = cg_file_find(f, "offset");
	tp = cg_file_find(f, "payload");
	tl = cg_file_find(f, "prompt_len");
	uint32_t *cond = tc->data;
	uint32_t *plen = tl ? tl->data : NULL;
	uint64_t *index = ti->data, *offset = to->data;
	uint8_t *payload = tp->read ? NULL : tp->data;
	offset[0] = 0;
	for (uint64_t i = 0; i < d->n; i++) {
		if (assign[i] != shard)
			continue;
		uint64_t len = d->offset[i + 1] - d->offset[i];
		if (plen && d->prompt_len[i] > len) {
			cg_seterr("example %llu: prompt of %u bytes, longer "
			          "than the example's %llu",
			          (unsigned long long)i, d->prompt_len[i],
			          (unsigned long long)len);
			goto fail;
		}
		if (plen)
			plen[j] = d->prompt_len[i];
		cond[j] = d->cond[i];
		index[j] = d->index[i];
		if (payload)
			memcpy(payload + offset[j], d->payload + d->offset[i],
			       len);
		offset[j + 1] = offset[j] + len;
		j++;
	}
	if (srcp)
		*srcp = src;
	return f;
fail:
	cg_file_free(f);
	shard_src_free(src);
	return NULL;
}

struct cg_file *
cg_shard_build(const struct cg_dataset *d, const int *assign, int shard,
               const struct cg_split *s)
{
	return shard_build(d, assign, shard, s, NULL);
}

int
cg_shard_write(const struct cg_dataset *d, const int *assign, int shard,
               const struct cg_split *s, const char *path, enum cg_compress c)
{
	struct shard_src *src = NULL;
	int rc = cg_file_write_free(shard_build(d, assign, shard, s, &src),
	                            path, c);

	shard_src_free(src);
	return rc;
}

/* --------------------------------------------------- a split's files */

void
cg_split_table(FILE *fp, const struct cg_dataset *d, const int *assign,
               char *const *paths, uint64_t n)
{
	fprintf(fp, "%-8s %10s  %s\n", "shard", "examples", "path");
	for (uint64_t i = 0; i <= n; i++) {
		char id[24];
		int shard = i < n ? (int)i : -1;

		if (paths[i] == NULL)
			continue;
		if (shard < 0)
			snprintf(id, sizeof(id), "holdout");
		else
			snprintf(id, sizeof(id), "%d", shard);
		fprintf(
		    fp, "%-8s %10llu  %s\n", id,
		    (unsigned long long)cg_split_count(d, assign, shard, NULL),
		    paths[i]);
	}
}

cJSON *
cg_split_json(const struct cg_dataset *d, const int *assign, int shard,
              const char *path)
{
	uint64_t *counts = malloc((d->nconditions + 1) * sizeof(*counts));
	cJSON *o = NULL, *c;

	if (counts == NULL || (o = cJSON_CreateObject()) == NULL)
		goto out;
	uint64_t total = cg_split_count(d, assign, shard, counts);
	cJSON_AddStringToObject(o, "path", path);
	cJSON_AddNumberToObject(o, "shard", shard);
	cJSON_AddBoolToObject(o, "holdout", shard < 0);
	cJSON_AddNumberToObject(o, "examples", (double)total);
	c = cJSON_AddObjectToObject(o, "counts");
	for (size_t k = 0; c && k < d->nconditions; k++)
		cJSON_AddNumberToObject(c, d->conditions[k], (double)counts[k]);
	if (c == NULL) {
		cJSON_Delete(o);
		o = NULL;
	}
out:
	free(counts);
	return o;
}

char **
cg_split_paths(const char *prefix, uint64_t n, const char *holdout)
{
	char **paths = calloc(n + 1, sizeof(*paths));

	if (paths == NULL)
		goto oom;
	for (uint64_t i = 0; i < n; i++) {
		if (strcmp(prefix, "-") == 0)
			paths[i] = strdup("-");
		else if (asprintf(&paths[i], "%s-%llu%s", prefix,
		                  (unsigned long long)i, CG_SHARD_EXT) < 0)
			paths[i] = NULL;
		if (paths[i] == NULL)
			goto oom;
		if (holdout && strcmp(paths[i], holdout) == 0) {
			cg_seterr("%s: both a shard and the holdout", holdout);
			goto fail;
		}
	}
	if (holdout && (paths[n] = strdup(holdout)) == NULL)
		goto oom;
	return paths;
oom:
	cg_seterr("out of memory");
fail:
	cg_split_paths_free(paths, n);
	return NULL;
}

void
cg_split_paths_free(char **paths, uint64_t n)
{
	for (uint64_t i = 0; paths && i <= n; i++)
		free(paths[i]);
	free(paths);
}

int
cg_split_write(const struct cg_dataset *d, const int *assign,
               const struct cg_split *s, char *const *paths, enum cg_compress c,
               void (*done)(void *ctx, int k, int n), void *ctx)
{
	int n = s->nshards;

	for (int i = 0; i <= n; i++) {
		if (paths[i] != NULL &&
		    cg_shard_write(d, assign, i < n ? i : -1, s, paths[i], c) !=
		        0) {
			while (i-- > 0)
				if (paths[i] && strcmp(paths[i], "-") != 0)
					unlink(paths[i]);
			return -1;
		}
		if (done)
			done(ctx, i + 1, n + 1);
	}
	return 0;
}
