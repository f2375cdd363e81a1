/*
 * test_shard.c - invariants of cg_split, shard round trips, hostile IDX
 * files and hostile shards, and the text readers.
 *
 * The split tests are property tests: a few thousand random datasets
 * (skewed and empty conditions, duplicate payloads), strategies, shard
 * counts, weights and holdout sizes, each checked for exact holdout size,
 * stratified holdout, weighted totals within one example, even per-
 * condition counts, order properties and determinism.  Shards are built,
 * written, read back and compared; damaged shards and IDX files must fail
 * with a message.  The text readers are fed edge cases whose exact bytes
 * are known (separators, escapes, NULs, invalid UTF-8, byte order marks,
 * gzip, limits) and hostile files that must fail naming their line.
 * Exit 0 pass, 1 fail, 77 skip (no temporary directory).
 */
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "cg.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/shard.h"
#include "data/split.h"
#include "data/text.h"

#define TEST_NAME "test_shard"
#include "check.h"
static char tmpdir[256];

/* ---------------------------------------------------------------- data */

/*
 * A random text-like dataset: n examples over k conditions with skewed
 * sizes (some conditions empty), payloads of 0..8 bytes drawn from a small
 * alphabet so that duplicates are common.
 */
static void
make_dataset(struct cg_dataset *d, struct cg_rng *r, uint64_t n, size_t k)
{
	uint64_t bytes = 0;
	char name[32];

	memset(d, 0, sizeof(*d));
	d->n = n;
	d->kind = CG_PAYLOAD_TEXT;
	d->cond = malloc((n + 1) * sizeof(*d->cond));
	d->index = malloc((n + 1) * sizeof(*d->index));
	d->offset = malloc((n + 1) * sizeof(*d->offset));
	d->payload = malloc(8 * n + 1);
	d->conditions = calloc(k, sizeof(char *));
	d->nconditions = k;
	for (size_t c = 0; c < k; c++) {
		snprintf(name, sizeof(name), "c%zu", c);
		d->conditions[c] = strdup(name);
	}
	/* skew: condition c drawn with weight (c % 4) (c=0 mod 4 empty,
	 * unless k == 1) */
	for (uint64_t i = 0; i < n; i++) {
		uint32_t c;
		do
			c = (uint32_t)cg_rng_below(r, k);
		while (k > 1 && c % 4 == 0 && cg_rng_below(r, 8) != 0);
		d->cond[i] = c;
		d->index[i] = i;
		d->offset[i] = bytes;
		uint64_t len = cg_rng_below(r, 9);
		for (uint64_t j = 0; j < len; j++)
			d->payload[bytes++] =
			    (uint8_t)('a' + cg_rng_below(r, 2));
	}
	d->offset[n] = bytes;
}

/* ------------------------------------------------------------ splitting */

static double
weight(const struct cg_split *s, int i)
{
	return s->weights ? s->weights[i] : 1.0;
}

static void
check_split(const struct cg_dataset *d, const struct cg_split *s, const int *a,
            const char *what)
{
	int ns = s->nshards;
	size_t k = d->nconditions;
	uint64_t *tot = calloc((size_t)ns, sizeof(uint64_t));
	uint64_t *cell = calloc(k * (size_t)ns, sizeof(uint64_t));
	uint64_t *hold = calloc(k, sizeof(uint64_t));
	uint64_t *size = calloc(k, sizeof(uint64_t));
	uint64_t *rest = calloc(k, sizeof(uint64_t));
	uint64_t *targets = calloc((size_t)ns, sizeof(uint64_t));
	uint64_t nh = 0, m;
	double wsum = 0;

	for (int i = 0; i < ns; i++)
		wsum += weight(s, i);
	for (uint64_t i = 0; i < d->n; i++) {
		size[d->cond[i]]++;
		if (a[i] == -1) {
			nh++;
			hold[d->cond[i]]++;
			continue;
		}
		if (a[i] < 0 || a[i] >= ns) {
			CHECK(0, "%s: example %llu assigned to %d", what,
			      (unsigned long long)i, a[i]);
			goto out;
		}
		tot[a[i]]++;
		rest[d->cond[i]]++;
		cell[d->cond[i] * (size_t)ns + (size_t)a[i]]++;
	}
	m = d->n - nh;

	/* the holdout: exact size, stratified within one per condition */
	CHECK(nh == s->holdout, "%s: holdout %llu, asked %llu", what,
	      (unsigned long long)nh, (unsigned long long)s->holdout);
	for (size_t c = 0; c < k && d->n > 0; c++) {
		double ideal = (double)s->holdout * size[c] / d->n;
		CHECK(fabs(hold[c] - ideal) < 1.0 + 1e-9,
		      "%s: holdout of condition %zu is %llu, ideal %.3f", what,
		      c, (unsigned long long)hold[c], ideal);
	}

	CHECK(cg_split_targets(m, ns, s->weights, targets) == 0, "%s: %s", what,
	      cg_errmsg());
	for (int i = 0; i < ns; i++) {
		double ideal = m * weight(s, i) / wsum;
		CHECK(fabs(targets[i] - ideal) < 1.0 + 1e-9,
		      "%s: target %d is %llu, ideal %.3f", what, i,
		      (unsigned long long)targets[i], ideal);
		if (s->strategy != CG_SPLIT_HASHED)
			CHECK(tot[i] == targets[i],
			      "%s: shard %d has %llu, target %llu", what, i,
			      (unsigned long long)tot[i],
			      (unsigned long long)targets[i]);
	}

	switch (s->strategy) {
	case CG_SPLIT_CONTIGUOUS: {
		int last = 0;
		for (uint64_t i = 0; i < d->n; i++)
			if (a[i] >= 0) {
				CHECK(a[i] >= last,
				      "%s: contiguous goes back at %llu", what,
				      (unsigned long long)i);
				last = a[i];
			}
		break;
	}
	case CG_SPLIT_ROUNDROBIN: {
		int equal = 1;
		uint64_t j = 0;
		for (int i = 1; i < ns; i++)
			equal &= weight(s, i) == weight(s, 0);
		for (uint64_t i = 0; i < d->n && equal; i++)
			if (a[i] >= 0) {
				CHECK(a[i] == (int)(j % (uint64_t)ns),
				      "%s: round-robin %llu-th went to %d",
				      what, (unsigned long long)j, a[i]);
				j++;
			}
		/* smooth: no prefix strays far from the shard's share */
		uint64_t *seen = calloc((size_t)ns, sizeof(uint64_t));
		j = 0;
		for (uint64_t i = 0; i < d->n; i++) {
			if (a[i] < 0)
				continue;
			seen[a[i]]++;
			j++;
			for (int t = 0; t < ns; t++) {
				double ideal = (double)j * targets[t] / m;
				CHECK(fabs(seen[t] - ideal) < 2.0,
				      "%s: round-robin prefix %llu: shard %d "
				      "has %llu, ideal %.2f",
				      what, (unsigned long long)j, t,
				      (unsigned long long)seen[t], ideal);
			}
		}
		free(seen);
		break;
	}
	case CG_SPLIT_STRATIFIED:
		for (size_t c = 0; c < k; c++) {
			uint64_t lo = UINT64_MAX, hi = 0;
			for (int i = 0; i < ns; i++) {
				uint64_t x = cell[c * (size_t)ns + (size_t)i];
				double byw = rest[c] * weight(s, i) / wsum;
				double byt =
				    m ? (double)rest[c] * targets[i] / m : 0;
				CHECK(fabs(x - byw) < 1.0 + 1e-9 ||
				          fabs(x - byt) < 1.0 + 1e-9,
				      "%s: condition %zu shard %d has %llu, "
				      "share %.3f",
				      what, c, i, (unsigned long long)x, byw);
				lo = x < lo ? x : lo;
				hi = x > hi ? x : hi;
			}
			if (s->weights == NULL)
				CHECK(hi - lo <= 1,
				      "%s: condition %zu spread %llu..%llu",
				      what, c, (unsigned long long)lo,
				      (unsigned long long)hi);
		}
		break;
	case CG_SPLIT_HASHED:
		/* equal payloads share a shard */
		for (uint64_t i = 0; i < d->n && i < 300; i++)
			for (uint64_t j = i + 1; j < d->n && j < 300; j++) {
				uint64_t li = d->offset[i + 1] - d->offset[i];
				uint64_t lj = d->offset[j + 1] - d->offset[j];
				if (a[i] < 0 || a[j] < 0 || li != lj ||
				    memcmp(d->payload + d->offset[i],
				           d->payload + d->offset[j], li) != 0)
					continue;
				CHECK(a[i] == a[j],
				      "%s: equal payloads %llu, %llu in "
				      "shards %d, %d",
				      what, (unsigned long long)i,
				      (unsigned long long)j, a[i], a[j]);
			}
		break;
	case CG_SPLIT_RANDOM:
		break;
	}
out:
	free(tot);
	free(cell);
	free(hold);
	free(size);
	free(rest);
	free(targets);
}

static void
test_split_properties(void)
{
	struct cg_rng r;
	double w[16];

	cg_rng_seed(&r, 12345);
	for (int iter = 0; iter < 3000; iter++) {
		struct cg_dataset d;
		struct cg_split s = {0};
		uint64_t n = cg_rng_below(&r, 4) == 0 ? cg_rng_below(&r, 8)
		                                      : cg_rng_below(&r, 400);
		size_t k = 1 + cg_rng_below(&r, 12);
		char what[160];
		int *a, *b;

		make_dataset(&d, &r, n, k);
		s.strategy = (enum cg_split_strategy)cg_rng_below(&r, 5);
		s.nshards = 1 + (int)cg_rng_below(&r, 9);
		switch (cg_rng_below(&r, 4)) {
		case 0:
			s.weights = NULL;
			break;
		case 1: /* equal, spelled out */
			for (int i = 0; i < s.nshards; i++)
				w[i] = 3;
			s.weights = w;
			break;
		case 2: /* small integers, like --weights 4,2,1,1 */
			for (int i = 0; i < s.nshards; i++)
				w[i] = (double)(1 + cg_rng_below(&r, 5));
			s.weights = w;
			break;
		default: /* arbitrary reals */
			for (int i = 0; i < s.nshards; i++)
				w[i] = 0.05 + 3 * cg_rng_uniform(&r);
			s.weights = w;
			break;
		}
		s.holdout =
		    cg_rng_below(&r, 3) == 0 ? 0 : cg_rng_below(&r, n + 1);
		s.seed = cg_rng_below(&r, 1000);
		snprintf(what, sizeof(what),
		         "iter %d: %s n=%llu k=%zu shards=%d holdout=%llu "
		         "seed=%llu weights=%s",
		         iter, cg_split_name(s.strategy), (unsigned long long)n,
		         k, s.nshards, (unsigned long long)s.holdout,
		         (unsigned long long)s.seed,
		         s.weights == NULL ? "none" : "given");
		a = malloc((n + 1) * sizeof(int));
		b = malloc((n + 1) * sizeof(int));
		if (cg_split_assign(&d, &s, a) != 0) {
			CHECK(0, "%s: %s", what, cg_errmsg());
		} else {
			check_split(&d, &s, a, what);
			CHECK(cg_split_assign(&d, &s, b) == 0 &&
			          memcmp(a, b, n * sizeof(int)) == 0,
			      "%s: not deterministic", what);
		}
		free(a);
		free(b);
		cg_dataset_free(&d);
	}
}

/* Large and exact cases the brief names. */
static void
test_split_cases(void)
{
	struct cg_rng r;
	struct cg_dataset d;
	uint64_t t[4];
	int *a, *b;

	/* --weights 2,1,1 gives 50/25/25 */
	CHECK(cg_split_targets(1000, 3, (double[]){2, 1, 1}, t) == 0 &&
	          t[0] == 500 && t[1] == 250 && t[2] == 250,
	      "2,1,1 of 1000: %llu %llu %llu", (unsigned long long)t[0],
	      (unsigned long long)t[1], (unsigned long long)t[2]);
	CHECK(cg_split_targets(10, 4, NULL, t) == 0 && t[0] == 3 && t[1] == 3 &&
	          t[2] == 2 && t[3] == 2,
	      "10 over 4: %llu %llu %llu %llu", (unsigned long long)t[0],
	      (unsigned long long)t[1], (unsigned long long)t[2],
	      (unsigned long long)t[3]);
	CHECK(cg_split_targets(10, 2, (double[]){1, -1}, t) == -1,
	      "negative weight accepted");
	CHECK(cg_split_targets(10, 2, (double[]){1, NAN}, t) == -1,
	      "NaN weight accepted");
	CHECK(cg_split_targets(10, 0, NULL, t) == -1, "0 shards accepted");
	CHECK(cg_split_holdout_count(60000, 0.1) == 6000, "10%% of 60000");
	CHECK(cg_split_holdout_count(7, 0.5) == 4, "half of 7 rounds up");
	CHECK(cg_split_holdout_count(7, 0) == 0, "0 of 7");

	/* a big stratified split with many conditions and shards */
	cg_rng_seed(&r, 7);
	make_dataset(&d, &r, 20000, 37);
	a = malloc(d.n * sizeof(int));
	b = malloc(d.n * sizeof(int));
	for (int ns = 1; ns <= 64; ns = ns * 2 + 1) {
		struct cg_split s = {.strategy = CG_SPLIT_STRATIFIED,
		                     .nshards = ns,
		                     .holdout = 1234,
		                     .seed = 5};
		char what[64];
		snprintf(what, sizeof(what), "stratified 20000/%d", ns);
		CHECK(cg_split_assign(&d, &s, a) == 0, "%s: %s", what,
		      cg_errmsg());
		check_split(&d, &s, a, what);
		s.seed = 6;
		CHECK(cg_split_assign(&d, &s, b) == 0 &&
		          (ns == 1 || memcmp(a, b, d.n * sizeof(int)) != 0),
		      "%s: seed makes no difference", what);
	}

	/* hashed shares are near the weights on big inputs */
	{
		struct cg_split s = {.strategy = CG_SPLIT_HASHED,
		                     .nshards = 3,
		                     .weights = (double[]){2, 1, 1}};
		uint64_t cnt[3] = {0};
		for (uint64_t i = 0; i < d.n; i++) /* make payloads unique */
			d.index[i] = i;
		free(d.payload);
		d.payload = malloc(d.n * 8);
		for (uint64_t i = 0; i < d.n; i++) {
			memcpy(d.payload + 8 * i, &i, 8);
			d.offset[i] = 8 * i;
		}
		d.offset[d.n] = 8 * d.n;
		CHECK(cg_split_assign(&d, &s, a) == 0, "hashed: %s",
		      cg_errmsg());
		for (uint64_t i = 0; i < d.n; i++)
			cnt[a[i]]++;
		CHECK(fabs(cnt[0] - 10000.0) < 400 &&
		          fabs(cnt[1] - 5000.0) < 300 &&
		          fabs(cnt[2] - 5000.0) < 300,
		      "hashed 2,1,1 of 20000: %llu %llu %llu",
		      (unsigned long long)cnt[0], (unsigned long long)cnt[1],
		      (unsigned long long)cnt[2]);
	}

	/* bad splits are refused */
	{
		struct cg_split s = {.strategy = CG_SPLIT_RANDOM,
		                     .nshards = 2,
		                     .holdout = d.n + 1};
		CHECK(cg_split_assign(&d, &s, a) == -1, "holdout > n accepted");
		s.holdout = 0;
		s.nshards = CG_SHARD_MAX_SHARDS + 1;
		CHECK(cg_split_assign(&d, &s, a) == -1, "too many shards");
		s.nshards = 2;
		s.seed = (uint64_t)1 << 60;
		CHECK(cg_split_assign(&d, &s, a) == -1, "seed above 2^53");
	}
	free(a);
	free(b);
	cg_dataset_free(&d);
}

/* -------------------------------------------------------------- shards */

static struct cg_file *
build(const struct cg_dataset *d, const int *a, int shard,
      const struct cg_split *s)
{
	struct cg_file *f = cg_shard_build(d, a, shard, s);

	CHECK(f != NULL, "build shard %d: %s", shard, cg_errmsg());
	return f;
}

/* Damage a fresh copy of shard 0 with fn and expect the reader to fail
 * with a message containing want. */
static void
expect_bad(const struct cg_dataset *d, const int *a, const struct cg_split *s,
           void (*fn)(struct cg_file *), const char *want)
{
	struct cg_file *f = build(d, a, 0, s);
	struct cg_shard *sh;

	if (f == NULL)
		return;
	fn(f);
	sh = cg_shard_from_file(f, "x.cgd");
	CHECK(sh == NULL, "damage '%s' not detected", want);
	CHECK(sh != NULL || (strstr(cg_errmsg(), want) != NULL &&
	                     strncmp(cg_errmsg(), "x.cgd: ", 7) == 0),
	      "damage '%s': message '%s'", want, cg_errmsg());
	cg_shard_free(sh);
}

static uint64_t *
u64s(struct cg_file *f, const char *name)
{
	return cg_file_find(f, name)->data;
}

static void
bad_offset0(struct cg_file *f)
{
	u64s(f, "offset")[0] = 1;
}

static void
bad_offset_order(struct cg_file *f)
{
	u64s(f, "offset")[2] = 0;
}

static void
bad_offset_end(struct cg_file *f)
{
	struct cg_tensor *t = cg_file_find(f, "offset");
	((uint64_t *)t->data)[t->nelem - 1] -= 1;
}

static void
bad_cond(struct cg_file *f)
{
	((uint32_t *)cg_file_find(f, "cond")->data)[1] = 99;
}

static void
bad_index(struct cg_file *f)
{
	u64s(f, "index")[1] = u64s(f, "index")[0];
}

static void
bad_kind(struct cg_file *f)
{
	cJSON_ReplaceItemInObject(f->manifest, "kind",
	                          cJSON_CreateString("model"));
}

static void
bad_examples(struct cg_file *f)
{
	cJSON_ReplaceItemInObject(f->manifest, "examples",
	                          cJSON_CreateNumber(3));
}

static void
bad_names(struct cg_file *f)
{
	cJSON *c = cJSON_GetObjectItem(f->manifest, "conditions");
	cJSON_ReplaceItemInArray(c, 1, cJSON_CreateString("c0"));
}

static void
bad_holdout(struct cg_file *f)
{
	cJSON *s = cJSON_GetObjectItem(f->manifest, "shard");
	cJSON_ReplaceItemInObject(s, "holdout", cJSON_CreateTrue());
}

static void
bad_dtype(struct cg_file *f)
{
	cg_file_find(f, "cond")->dtype = CG_I8;
}

static void
bad_missing(struct cg_file *f)
{
	snprintf(cg_file_find(f, "index")->name, CG_MAX_NAME, "other");
}

static void
bad_image(struct cg_file *f)
{
	cJSON_ReplaceItemInObject(f->manifest, "payload",
	                          cJSON_CreateString("image"));
	cJSON *o = cJSON_AddObjectToObject(f->manifest, "image");
	cJSON_AddNumberToObject(o, "height", 2);
	cJSON_AddNumberToObject(o, "width", 2);
	cJSON_AddNumberToObject(o, "channels", 1);
}

static void
test_shards(void)
{
	struct cg_rng r;
	struct cg_dataset d;
	struct cg_split s = {.strategy = CG_SPLIT_RANDOM,
	                     .nshards = 3,
	                     .weights = (double[]){1, 2, 3},
	                     .holdout = 17,
	                     .seed = 9};
	uint8_t *seen;
	char path[512];
	int *a;

	cg_rng_seed(&r, 99);
	make_dataset(&d, &r, 300, 5);
	a = malloc(d.n * sizeof(int));
	seen = calloc(d.n, 1);
	CHECK(cg_split_assign(&d, &s, a) == 0, "split: %s", cg_errmsg());

	for (int shard = -1; shard < s.nshards; shard++) {
		struct cg_shard *sh;
		uint64_t counts[5], total;

		snprintf(path, sizeof(path), "%s/s%d.cgd", tmpdir, shard);
		CHECK(cg_shard_write(&d, a, shard, &s, path,
		                     shard == 1 ? CG_COMPRESS_GZIP
		                                : CG_COMPRESS_NONE) == 0,
		      "write %s: %s", path, cg_errmsg());
		if ((sh = cg_shard_open(path)) == NULL) {
			CHECK(0, "open %s: %s", path, cg_errmsg());
			continue;
		}
		total = cg_split_count(&d, a, shard, counts);
		CHECK(sh->n == total, "%s: %llu examples, want %llu", path,
		      (unsigned long long)sh->n, (unsigned long long)total);
		CHECK(sh->shard == shard && sh->nshards == 3 &&
		          sh->source_examples == d.n &&
		          sh->kind == CG_PAYLOAD_TEXT && sh->nconditions == 5 &&
		          strcmp(sh->conditions[4], "c4") == 0,
		      "%s: manifest fields", path);
		for (uint64_t j = 0; j < sh->n; j++) {
			uint64_t i = sh->index[j], len;
			const uint8_t *p = cg_shard_example(sh, j, &len);
			CHECK(i < d.n && a[i] == shard && !seen[i] &&
			          sh->cond[j] == d.cond[i] &&
			          len == d.offset[i + 1] - d.offset[i] &&
			          memcmp(p, d.payload + d.offset[i], len) == 0,
			      "%s: example %llu differs from input %llu", path,
			      (unsigned long long)j, (unsigned long long)i);
			if (i < d.n)
				seen[i] = 1;
		}
		cg_shard_free(sh);
	}
	for (uint64_t i = 0; i < d.n; i++)
		CHECK(seen[i], "example %llu in no shard",
		      (unsigned long long)i);

	/* an image dataset keeps its shape */
	{
		struct cg_dataset im = {0};
		struct cg_shard *sh;
		const char *names[] = {"a", "b"};
		im.n = 4;
		im.kind = CG_PAYLOAD_IMAGE;
		im.height = 2;
		im.width = 3;
		im.channels = 1;
		im.cond = calloc(4, sizeof(uint32_t));
		im.index = calloc(4, sizeof(uint64_t));
		im.offset = calloc(5, sizeof(uint64_t));
		im.payload = calloc(24, 1);
		for (int i = 0; i < 4; i++) {
			im.index[i] = (uint64_t)i;
			im.offset[i + 1] = 6 * (uint64_t)(i + 1);
			im.cond[i] = (uint32_t)(i & 1);
		}
		CHECK(cg_dataset_set_conditions(&im, names, 2) == 0, "%s",
		      cg_errmsg());
		int ia[4] = {0, 0, 0, 0};
		struct cg_split one = {.nshards = 1};
		snprintf(path, sizeof(path), "%s/img.cgd", tmpdir);
		CHECK(cg_shard_write(&im, ia, 0, &one, path,
		                     CG_COMPRESS_ZSTD) == 0,
		      "%s", cg_errmsg());
		sh = cg_shard_open(path);
		CHECK(sh && sh->height == 2 && sh->width == 3 &&
		          sh->channels == 1 && sh->n == 4 &&
		          sh->payload_bytes == 24,
		      "image shard: %s", sh ? "fields" : cg_errmsg());
		cg_shard_free(sh);
		CHECK(cg_dataset_set_conditions(&im, names, 1) == -1,
		      "vocabulary too small accepted");
		CHECK(cg_dataset_set_conditions(&im, (const char *[]){"a", "a"},
		                                2) == -1,
		      "duplicate names accepted");
		CHECK(cg_dataset_set_conditions(
		          &im, (const char *[]){"a", "b\n"}, 2) == -1,
		      "control character accepted");
		CHECK(cg_dataset_set_conditions(
		          &im, (const char *[]){"a", "\xc3("}, 2) == -1,
		      "bad UTF-8 accepted");
		cg_dataset_free(&im);
	}

	/* damaged shards */
	expect_bad(&d, a, &s, bad_offset0, "offset");
	expect_bad(&d, a, &s, bad_offset_order, "offset");
	expect_bad(&d, a, &s, bad_offset_end, "offset");
	expect_bad(&d, a, &s, bad_cond, "tensor cond");
	expect_bad(&d, a, &s, bad_index, "tensor index");
	expect_bad(&d, a, &s, bad_kind, "not a data shard");
	expect_bad(&d, a, &s, bad_examples, "elements");
	expect_bad(&d, a, &s, bad_names, "listed twice");
	expect_bad(&d, a, &s, bad_holdout, "holdout");
	expect_bad(&d, a, &s, bad_dtype, "dtype");
	expect_bad(&d, a, &s, bad_missing, "missing");
	expect_bad(&d, a, &s, bad_image, "an image has");

	/* a file that is not there, and one that is not a shard */
	CHECK(cg_shard_open("/nonexistent/x.cgd") == NULL &&
	          strstr(cg_errmsg(), "/nonexistent/x.cgd") != NULL,
	      "missing file: '%s'", cg_errmsg());

	free(seen);
	free(a);
	cg_dataset_free(&d);
}

/* ------------------------------------------------------------- prompts */

static void
bad_prompt_long(struct cg_file *f)
{
	struct cg_tensor *t = cg_file_find(f, "prompt_len");
	((uint32_t *)t->data)[t->nelem - 1] = 1000;
}

static void
bad_prompt_dtype(struct cg_file *f)
{
	cg_file_find(f, "prompt_len")->dtype = CG_I8;
}

static void
bad_prompt_shape(struct cg_file *f)
{
	cg_file_find(f, "prompt_len")->shape[0] += 1;
}

/* Shards of a text dataset with prompts carry prompt_len, checked. */
static void
test_prompt_shards(void)
{
	struct cg_rng r;
	struct cg_dataset d;
	struct cg_split s = {.strategy = CG_SPLIT_STRATIFIED,
	                     .nshards = 2,
	                     .holdout = 5,
	                     .seed = 4};
	char path[512];
	int *a;

	cg_rng_seed(&r, 7);
	make_dataset(&d, &r, 60, 3);
	d.prompt_len = malloc(d.n * sizeof(*d.prompt_len));
	for (uint64_t i = 0; i < d.n; i++)
		d.prompt_len[i] = (uint32_t)cg_rng_below(
		    &r, d.offset[i + 1] - d.offset[i] + 1);
	a = malloc(d.n * sizeof(int));
	CHECK(cg_split_assign(&d, &s, a) == 0, "split: %s", cg_errmsg());
	for (int shard = -1; shard < s.nshards; shard++) {
		struct cg_shard *sh;

		snprintf(path, sizeof(path), "%s/p%d.cgd", tmpdir, shard);
		CHECK(cg_shard_write(&d, a, shard, &s, path,
		                     CG_COMPRESS_NONE) == 0,
		      "write %s: %s", path, cg_errmsg());
		if ((sh = cg_shard_open(path)) == NULL) {
			CHECK(0, "open %s: %s", path, cg_errmsg());
			continue;
		}
		CHECK(sh->prompt_len != NULL, "%s: no prompt_len", path);
		for (uint64_t j = 0; sh->prompt_len && j < sh->n; j++)
			CHECK(sh->prompt_len[j] == d.prompt_len[sh->index[j]],
			      "%s: example %llu: prompt_len %u, want %u", path,
			      (unsigned long long)j, sh->prompt_len[j],
			      d.prompt_len[sh->index[j]]);
		cg_shard_free(sh);
	}
	expect_bad(&d, a, &s, bad_prompt_long, "tensor prompt_len");
	expect_bad(&d, a, &s, bad_prompt_dtype, "dtype");
	expect_bad(&d, a, &s, bad_prompt_shape, "elements");
	expect_bad(&d, a, &s, bad_image, "not text");

	/* the builder refuses a prompt longer than its example */
	for (uint64_t i = 0; i < d.n; i++)
		if (a[i] == 0) {
			d.prompt_len[i] = 9;
			break;
		}
	CHECK(cg_shard_build(&d, a, 0, &s) == NULL &&
	          strstr(cg_errmsg(), "prompt") != NULL,
	      "prompt longer than its example accepted: '%s'", cg_errmsg());

	/* without prompts, no tensor and a NULL pointer */
	free(d.prompt_len);
	d.prompt_len = NULL;
	snprintf(path, sizeof(path), "%s/np.cgd", tmpdir);
	CHECK(cg_shard_write(&d, a, 0, &s, path, CG_COMPRESS_NONE) == 0, "%s",
	      cg_errmsg());
	struct cg_shard *sh = cg_shard_open(path);
	CHECK(sh && sh->prompt_len == NULL &&
	          cg_file_find(sh->file, "prompt_len") == NULL,
	      "shard without prompts: %s", sh ? "has prompt_len" : cg_errmsg());
	cg_shard_free(sh);
	free(a);
	cg_dataset_free(&d);
}

/* ----------------------------------------------------------------- IDX */

/* Write an IDX file: header (magic type ndim, dims) then body. */
static void
write_idx(const char *path, int gz, int ndim, const uint32_t *dims,
          const uint8_t *body, size_t n, int cut)
{
	uint8_t head[4 + 16];
	size_t h = 4 + 4 * (size_t)ndim;

	head[0] = head[1] = 0;
	head[2] = 0x08;
	head[3] = (uint8_t)ndim;
	for (int i = 0; i < ndim; i++) {
		head[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
		head[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
		head[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
		head[7 + 4 * i] = (uint8_t)dims[i];
	}
	if (gz) {
		gzFile g = gzopen(path, "wb");
		gzwrite(g, head, (unsigned)h);
		if (n)
			gzwrite(g, body, (unsigned)n);
		gzclose(g);
		if (cut) { /* chop the end of the compressed stream */
			FILE *fp = fopen(path, "rb+");
			fseek(fp, 0, SEEK_END);
			long len = ftell(fp);
			fclose(fp);
			CHECK(truncate(path, len - cut) == 0, "truncate");
		}
	} else {
		FILE *fp = fopen(path, "wb");
		fwrite(head, 1, h, fp);
		if (n > (size_t)cut)
			fwrite(body, 1, n - (size_t)cut, fp);
		fclose(fp);
	}
}

/*
 * cg_idx_load and cg_idx_stream (with hashes) of the same pair: both
 * succeed or fail alike, and the streamed dataset's fetch gives the
 * bytes, and its hashes the hashes, of the one read whole.
 */
static void
expect_idx(const char *im, const char *lb, uint64_t limit, int ok,
           const char *want)
{
	struct cg_dataset d, s;
	const uint64_t seed = 5;
	int rc = cg_idx_load(im, lb, limit, &d), rs;

	if (ok)
		CHECK(rc == 0, "%s: %s", want, cg_errmsg());
	else
		CHECK(rc == -1 && strstr(cg_errmsg(), want) != NULL,
		      "expected '%s', got rc %d '%s'", want, rc,
		      rc ? cg_errmsg() : "");
	rs = cg_idx_stream(im, lb, limit, &seed, &s);
	if (ok) {
		CHECK(rs == 0 && s.payload == NULL && s.fetch != NULL &&
		          s.hash != NULL && s.n == d.n &&
		          memcmp(s.offset, d.offset,
		                 (d.n + 1) * sizeof(*d.offset)) == 0 &&
		          memcmp(s.cond, d.cond, d.n * sizeof(*d.cond)) == 0,
		      "%s, streamed: %s", want, rs ? cg_errmsg() : "differs");
		for (uint64_t i = 0; rs == 0 && i < s.n; i++) {
			uint64_t len = d.offset[i + 1] - d.offset[i];
			uint8_t buf[64];
			CHECK(len <= sizeof(buf) &&
			          s.fetch(s.fetch_ctx, i, buf) == 0 &&
			          memcmp(buf, d.payload + d.offset[i], len) ==
			              0 &&
			          s.hash[i] == cg_payload_hash(buf, len, seed),
			      "%s, streamed: example %llu differs", want,
			      (unsigned long long)i);
		}
	} else {
		CHECK(rs == -1 && strstr(cg_errmsg(), want) != NULL,
		      "streamed: expected '%s', got rc %d '%s'", want, rs,
		      rs ? cg_errmsg() : "");
	}
	cg_dataset_free(&d);
	cg_dataset_free(&s);
}

/* A streamed IDX file that changes before its images are read again:
 * an error, never other bytes.  A gzip file is inflated into a copy at
 * its first read again: changed before that, an error; after, the
 * copy's bytes, which are those first read. */
static void
test_idx_changed(const char *lb, int gz)
{
	uint8_t px[5 * 4 * 3] = {0}, other[5 * 4 * 3];
	char p[512];
	struct cg_dataset s;
	uint8_t buf[12];

	memset(other, 7, sizeof(other));
	snprintf(p, sizeof(p), "%s/changing%s", tmpdir, gz ? ".gz" : "");
	for (int early = 0; early <= gz; early++) {
		write_idx(p, gz, 3, (uint32_t[]){5, 4, 3}, px, sizeof(px),
		          0);
		CHECK(cg_idx_stream(p, lb, 0, NULL, &s) == 0,
		      "changing: %s", cg_errmsg());
		if (!early)
			CHECK(s.fetch(s.fetch_ctx, 4, buf) == 0 &&
			          s.fetch(s.fetch_ctx, 0, buf) == 0,
			      "changing, before: %s", cg_errmsg());
		/* one image fewer: another size */
		write_idx(p, gz, 3, (uint32_t[]){4, 4, 3}, other,
		          sizeof(px) - 12, 0);
		if (gz && !early) {
			memset(buf, 1, sizeof(buf));
			CHECK(s.fetch(s.fetch_ctx, 1, buf) == 0 &&
			          memcmp(buf, px, sizeof(buf)) == 0,
			      "changing, copied: %s", cg_errmsg());
		} else {
			CHECK(s.fetch(s.fetch_ctx, 1, buf) == -1 &&
			          strstr(cg_errmsg(),
			                 "changed while it was read") != NULL,
			      "changing: got '%s'", cg_errmsg());
		}
		cg_dataset_free(&s);
	}
}

static void
test_idx(void)
{
	uint8_t px[5 * 4 * 3], lab[5] = {0, 1, 2, 1, 12};
	char im[512], lb[512], img[512], lbg[512], p[512];
	struct cg_dataset d;

	for (size_t i = 0; i < sizeof(px); i++)
		px[i] = (uint8_t)(i * 7);
	snprintf(im, sizeof(im), "%s/im", tmpdir);
	snprintf(lb, sizeof(lb), "%s/lb", tmpdir);
	snprintf(img, sizeof(img), "%s/im.gz", tmpdir);
	snprintf(lbg, sizeof(lbg), "%s/lb.gz", tmpdir);
	write_idx(im, 0, 3, (uint32_t[]){5, 4, 3}, px, sizeof(px), 0);
	write_idx(lb, 0, 1, (uint32_t[]){5}, lab, 5, 0);
	write_idx(img, 1, 3, (uint32_t[]){5, 4, 3}, px, sizeof(px), 0);
	write_idx(lbg, 1, 1, (uint32_t[]){5}, lab, 5, 0);

	CHECK(cg_idx_load(im, lbg, 0, &d) == 0, "load: %s", cg_errmsg());
	CHECK(d.n == 5 && d.height == 4 && d.width == 3 && d.channels == 1 &&
	          d.nconditions == 13 && strcmp(d.conditions[12], "12") == 0 &&
	          d.cond[4] == 12 && d.offset[5] == sizeof(px) &&
	          memcmp(d.payload, px, sizeof(px)) == 0,
	      "loaded dataset differs");
	cg_dataset_free(&d);
	CHECK(cg_idx_load(img, lb, 2, &d) == 0 && d.n == 2 &&
	          d.offset[2] == 24 && d.nconditions == 10,
	      "limit 2: %s", cg_errmsg());
	cg_dataset_free(&d);

	/* conditions file */
	snprintf(p, sizeof(p), "%s/names", tmpdir);
	FILE *fp = fopen(p, "w");
	for (int i = 0; i < 13; i++)
		fprintf(fp, "name %d\r\n", i);
	fclose(fp);
	CHECK(cg_idx_load(im, lb, 0, &d) == 0 &&
	          cg_dataset_read_conditions(&d, p) == 0 &&
	          d.nconditions == 13 &&
	          strcmp(d.conditions[12], "name 12") == 0,
	      "conditions file: %s", cg_errmsg());
	fp = fopen(p, "w");
	fprintf(fp, "a\n\nb\n");
	fclose(fp);
	CHECK(cg_dataset_read_conditions(&d, p) == -1 &&
	          strstr(cg_errmsg(), "line 2: empty name"),
	      "empty name: '%s'", cg_errmsg());
	fp = fopen(p, "w");
	fprintf(fp, "a\nb\n");
	fclose(fp);
	CHECK(cg_dataset_read_conditions(&d, p) == -1 &&
	          strstr(cg_errmsg(), "has condition"),
	      "too few names: '%s'", cg_errmsg());
	cg_dataset_free(&d);

	/* hostile files */
	expect_idx(im, im, 0, 0, "3 dimensions, expected 1");
	expect_idx(lb, lb, 0, 0, "1 dimensions, expected 3 or 4");
	snprintf(p, sizeof(p), "%s/cut", tmpdir);
	write_idx(p, 0, 3, (uint32_t[]){5, 4, 3}, px, sizeof(px), 7);
	expect_idx(p, lb, 0, 0, "truncated");
	expect_idx(p, lb, 1, 0, "truncated"); /* even with a limit */
	write_idx(p, 1, 3, (uint32_t[]){5, 4, 3}, px, sizeof(px), 12);
	expect_idx(p, lb, 0, 0, "truncated");
	write_idx(p, 0, 3, (uint32_t[]){6, 4, 3}, px, sizeof(px), 0);
	expect_idx(p, lb, 0, 0, "6 images");
	write_idx(p, 1, 3, (uint32_t[]){4, 4, 3}, px, sizeof(px), 0);
	write_idx(lbg, 1, 1, (uint32_t[]){4}, lab, 4, 0);
	expect_idx(p, lbg, 0, 0, "trailing");
	expect_idx(p, lbg, 3, 1, "limit skips the trailing check");
	/* a header that promises 4 billion huge images from a few bytes:
	 * refused from the file size, or (compressed) when data runs out */
	write_idx(p, 0, 3, (uint32_t[]){0xffffffffu, 16384, 16384}, px, 8, 0);
	expect_idx(p, lb, 0, 0, "");
	write_idx(p, 1, 3, (uint32_t[]){0x7fffffffu, 2, 2}, px, 8, 0);
	write_idx(lbg, 1, 1, (uint32_t[]){0x7fffffffu}, lab, 5, 0);
	expect_idx(p, lbg, 0, 0, "truncated");
	write_idx(p, 0, 3, (uint32_t[]){5, 0, 3}, px, 0, 0);
	expect_idx(p, lb, 0, 0, "out of range");
	fp = fopen(p, "w");
	fprintf(fp, "hello, world");
	fclose(fp);
	expect_idx(p, lb, 0, 0, "bad magic");
	fp = fopen(p, "w");
	fclose(fp);
	expect_idx(p, lb, 0, 0, "too short");
	fp = fopen(p, "wb");
	fwrite("\0\0\x0d\x03", 1, 4, fp);
	fclose(fp);
	expect_idx(p, lb, 0, 0, "element type 0x0d");
	expect_idx("/nonexistent", lb, 0, 0, "/nonexistent: No such file");
	expect_idx(tmpdir, lb, 0, 0, "is a directory");
	expect_idx("-", "-", 0, 0, "both be standard input");
	test_idx_changed(lb, 0);
	test_idx_changed(lb, 1);
}

/* ---------------------------------------------------------------- text */

/* Write n bytes to tmpdir/name; its path into path. */
static void
put(char *path, size_t cap, const char *name, const void *data, size_t n)
{
	FILE *fp;

	snprintf(path, cap, "%s/%s", tmpdir, name);
	if ((fp = fopen(path, "wb")) == NULL) {
		CHECK(0, "cannot write %s", path);
		return;
	}
	if (n)
		fwrite(data, 1, n, fp);
	fclose(fp);
}

#define PUT(path, name, lit) put(path, sizeof(path), name, lit, sizeof(lit) - 1)

struct want {
	const char *cond;
	const char *bytes;
	size_t len;
	uint32_t prompt;
};
#define W(c, lit, p)                                                           \
	{                                                                      \
		c, lit, sizeof(lit) - 1, p                                     \
	}

/*
 * Load path whole into d; and streamed (cg_text_options.stream, with
 * hashes), which must succeed or fail as the whole read does, with the
 * same message, and give the same examples through its fetch.
 */
static int
load(const char *path, enum cg_text_format f, uint64_t max, uint64_t limit,
     struct cg_dataset *d)
{
	struct cg_text_options o = {
	    .format = f, .max_entry = max, .limit = limit};
	struct cg_dataset s;
	char msg[512];
	int rc = cg_text_load(path, &o, d), rs;
	uint8_t *buf = NULL;

	snprintf(msg, sizeof(msg), "%s", rc ? cg_errmsg() : "");
	o.stream = o.hash = 1;
	o.hash_seed = 9;
	rs = cg_text_load(path, &o, &s);
	/* the bytes in memory are what CG_MAX_BYTES bounds: not a stream's */
	if (rc != 0 && strstr(msg, "CG_MAX_BYTES") != NULL)
		CHECK(rs == 0, "%s streamed: '%s'", path, cg_errmsg());
	else
		CHECK(rs == rc && (rc == 0 || strcmp(msg, cg_errmsg()) == 0),
		      "%s streamed: rc %d '%s', read whole: rc %d '%s'", path,
		      rs, rs ? cg_errmsg() : "", rc, msg);
	if (rc == 0 && rs == 0) {
		CHECK(s.payload == NULL && s.n == d->n &&
		          s.nconditions == d->nconditions &&
		          (s.prompt_len == NULL) == (d->prompt_len == NULL) &&
		          memcmp(s.offset, d->offset,
		                 (d->n + 1) * sizeof(*d->offset)) == 0 &&
		          memcmp(s.cond, d->cond, d->n * sizeof(*d->cond)) == 0,
		      "%s streamed: another dataset", path);
		buf = malloc(d->offset[d->n] + 1);
		for (uint64_t i = 0; buf && i < d->n && i < s.n; i++) {
			uint64_t len = d->offset[i + 1] - d->offset[i];
			CHECK(s.fetch(s.fetch_ctx, i, buf) == 0 &&
			          memcmp(buf, d->payload + d->offset[i], len) ==
			              0 &&
			          s.hash[i] == cg_payload_hash(buf, len, 9),
			      "%s streamed: example %llu differs (%s)", path,
			      (unsigned long long)i, cg_errmsg());
		}
		free(buf);
	}
	if (rs == 0)
		cg_dataset_free(&s);
	if (rc != 0)
		cg_seterr("%s", msg);
	return rc;
}

/* d holds exactly w[n], in order; prompts says whether prompt_len is set */
static void
expect_text(const char *what, const struct cg_dataset *d, const struct want *w,
            size_t n, int prompts)
{
	CHECK(d->kind == CG_PAYLOAD_TEXT, "%s: not text", what);
	CHECK(d->n == n, "%s: %llu examples, want %zu", what,
	      (unsigned long long)d->n, n);
	CHECK((d->prompt_len != NULL) == prompts, "%s: prompt_len %s", what,
	      d->prompt_len ? "set" : "missing");
	for (uint64_t i = 0; i < d->n && i < n; i++) {
		uint64_t len = d->offset[i + 1] - d->offset[i];
		CHECK(d->index[i] == i, "%s: index[%llu]", what,
		      (unsigned long long)i);
		CHECK(strcmp(d->conditions[d->cond[i]], w[i].cond) == 0,
		      "%s: example %llu: condition '%s', want '%s'", what,
		      (unsigned long long)i, d->conditions[d->cond[i]],
		      w[i].cond);
		CHECK(len == w[i].len && memcmp(d->payload + d->offset[i],
		                                w[i].bytes, len) == 0,
		      "%s: example %llu: %llu bytes '%.*s', want %zu '%s'",
		      what, (unsigned long long)i, (unsigned long long)len,
		      (int)len, d->payload + d->offset[i], w[i].len,
		      w[i].bytes);
		if (d->prompt_len)
			CHECK(d->prompt_len[i] == w[i].prompt,
			      "%s: example %llu: prompt_len %u, want %u", what,
			      (unsigned long long)i, d->prompt_len[i],
			      w[i].prompt);
	}
}

static void
expect_names(const char *what, const struct cg_dataset *d, const char *joined)
{
	char buf[512] = "";

	for (size_t c = 0; c < d->nconditions; c++) {
		if (c)
			strncat(buf, ",", sizeof(buf) - strlen(buf) - 1);
		strncat(buf, d->conditions[c], sizeof(buf) - strlen(buf) - 1);
	}
	CHECK(strcmp(buf, joined) == 0, "%s: conditions '%s', want '%s'", what,
	      buf, joined);
}

static void
expect_text_error(const char *path, enum cg_text_format f, uint64_t max,
                  const char *want)
{
	struct cg_dataset d;
	int rc = load(path, f, max, 0, &d);

	CHECK(rc == -1 && strstr(cg_errmsg(), want) != NULL,
	      "%s: expected '%s', got rc %d '%s'", path, want, rc,
	      rc ? cg_errmsg() : "");
	CHECK(d.n == 0 && d.payload == NULL && d.conditions == NULL,
	      "%s: *out not zeroed on error", path);
	cg_dataset_free(&d);
}

static void
test_fortunes(void)
{
	char dir[512], p[512];
	struct cg_dataset d;
	static const struct want all[] = {
	    W("a", "a1\r\n%\r\nstill a1", 0),
	    W("b", "b1", 0),
	    W("b", "b2\n", 0),
	    W("b", "b3 \0 \377", 0),
	};

	snprintf(dir, sizeof(dir), "%s/fort", tmpdir);
	mkdir(dir, 0777);
	snprintf(p, sizeof(p), "%s/fort/sub", tmpdir);
	mkdir(p, 0777);
	/* "%\r" separates nothing; a leading "%", "%%" and an entry of one
	 * empty line make empty entries, which are dropped */
	PUT(p, "fort/a", "%\na1\r\n%\r\nstill a1\n%\n");
	PUT(p, "fort/b", "b1\n%\n\n%\nb2\n\n%\n%\nb3 \0 \377");
	PUT(p, "fort/c", "");
	PUT(p, "fort/a.dat", "x\n%\ny\n");
	PUT(p, "fort/a.u8", "x\n%\ny\n");
	PUT(p, "fort/.hidden", "x\n%\ny\n");
	PUT(p, "fort/sub/d", "x\n%\ny\n");

	CHECK(load(dir, CG_TEXT_AUTO, 0, 0, &d) == 0, "fortunes: %s",
	      cg_errmsg());
	expect_text("fortunes", &d, all, 4, 0);
	expect_names("fortunes", &d, "a,b,c");
	cg_dataset_free(&d);

	CHECK(load(dir, CG_TEXT_FORTUNES, 0, 2, &d) == 0, "limit: %s",
	      cg_errmsg());
	expect_text("fortunes --limit 2", &d, all, 2, 0);
	expect_names("fortunes --limit 2", &d, "a,b,c");
	cg_dataset_free(&d);

	/* one file, named by its base name */
	snprintf(p, sizeof(p), "%s/fort/b", tmpdir);
	CHECK(load(p, CG_TEXT_FORTUNES, 0, 0, &d) == 0, "one file: %s",
	      cg_errmsg());
	expect_text("one fortune file", &d, all + 1, 3, 0);
	cg_dataset_free(&d);

	/* the entry cap, at and past the boundary */
	PUT(p, "ten", "0123456789\n%\n");
	CHECK(load(p, CG_TEXT_FORTUNES, 10, 0, &d) == 0, "cap 10: %s",
	      cg_errmsg());
	cg_dataset_free(&d);
	expect_text_error(p, CG_TEXT_FORTUNES, 9, "line 1: longer than 9");
	PUT(p, "lines", "01234\n56789\n%\n");
	expect_text_error(p, CG_TEXT_FORTUNES, 10, "line 2: entry longer");
	PUT(p, "last", "01234\n56789");
	expect_text_error(p, CG_TEXT_FORTUNES, 10, "entry ending at line 2");

	snprintf(dir, sizeof(dir), "%s/blank", tmpdir);
	mkdir(dir, 0777);
	PUT(p, "blank/e", "%\n%\n");
	PUT(p, "blank/f", "\n");
	expect_text_error(dir, CG_TEXT_AUTO, 0, "no entries in 2");
	snprintf(dir, sizeof(dir), "%s/empty", tmpdir);
	mkdir(dir, 0777);
	expect_text_error(dir, CG_TEXT_AUTO, 0, "no fortune files");
	expect_text_error("-", CG_TEXT_FORTUNES, 0, "standard input");
	expect_text_error("/nonexistent", CG_TEXT_FORTUNES, 0,
	                  "/nonexistent: No such file");
}

static void
test_jsonl(void)
{
	static const char text[] =
	    "\xef\xbb\xbf{\"cond\":\"z\",\"text\":\"nul\\u0000end\"}\n"
	    "   \n"
	    "{\"te\\u0078t\":\"\\ud83d\\ude00\\b\\f\\/\\\"\",\"prompt\":\"P\","
	    "\"cond\":\"a\"}\n"
	    "{\"prompt\":\"only prompt\",\"text\":\"\"}\n"
	    "{\"cond\":\"m\",\"text\":\"raw \xff\xfe "
	    "bytes\",\"x\":[1,{\"y\":\"}\"}],"
	    "\"n\":-1.5e3,\"t\":true,\"f\":null}";
	static const struct want all[] = {
	    W("z", "nul\0end", 0),
	    W("a", "P\xf0\x9f\x98\x80\b\f/\"", 1),
	    W("(prompt)", "only prompt", 11),
	    W("m", "raw \xff\xfe bytes", 0),
	};
	char p[512], g[512];
	struct cg_dataset d;
	gzFile gz;

	PUT(p, "a.jsonl", text);
	CHECK(load(p, CG_TEXT_AUTO, 0, 0, &d) == 0, "jsonl: %s", cg_errmsg());
	expect_text("jsonl", &d, all, 4, 1);
	expect_names("jsonl", &d, "(prompt),a,m,z");
	cg_dataset_free(&d);

	snprintf(g, sizeof(g), "%s/a.jsonl.gz", tmpdir);
	gz = gzopen(g, "wb");
	gzwrite(gz, text, sizeof(text) - 1);
	gzclose(gz);
	CHECK(load(g, CG_TEXT_AUTO, 0, 0, &d) == 0, "jsonl.gz: %s",
	      cg_errmsg());
	expect_text("jsonl.gz", &d, all, 4, 1);
	cg_dataset_free(&d);

	/* without a prompt anywhere, no prompt_len */
	PUT(p, "np.json", "{\"cond\":\"x\",\"text\":\"t\"}\n");
	CHECK(load(p, CG_TEXT_AUTO, 0, 0, &d) == 0, "%s", cg_errmsg());
	expect_text("no prompts", &d, (struct want[]){W("x", "t", 0)}, 1, 0);
	cg_dataset_free(&d);

	/* the cap counts prompt and text together, after decoding */
	PUT(p, "cap.jsonl",
	    "{\"prompt\":\"ab\",\"text\":\"\\u00e9\\u00e9\",\"cond\":\"c\"}\n");
	CHECK(load(p, CG_TEXT_JSONL, 6, 0, &d) == 0, "cap 6: %s", cg_errmsg());
	cg_dataset_free(&d);
	expect_text_error(p, CG_TEXT_JSONL, 5, "line 1: 6 bytes of prompt");

	PUT(p, "b1.jsonl", "{\"cond\":\"a\",\"text\":\"x\"}\n[1]\n");
	expect_text_error(p, CG_TEXT_AUTO, 0, "line 2: not a JSON object");
	PUT(p, "b2.jsonl",
	    "{\"cond\":\"a\",\"text\":\"x\",\"te\\u0078t\":\"y\"}");
	expect_text_error(p, CG_TEXT_AUTO, 0, "line 1: \"text\" given twice");
	PUT(p, "b3.jsonl", "{\"cond\":\"a\",\"text\":\"x\ty\"}");
	expect_text_error(p, CG_TEXT_AUTO, 0, "line 1: control character");
	PUT(p, "b4.jsonl", "{\"cond\":\"a\",\"text\":null}");
	expect_text_error(p, CG_TEXT_AUTO, 0, "\"text\" is not a string");
	PUT(p, "b5.jsonl", "{\"cond\":\"a\\u0000\",\"text\":\"x\"}");
	expect_text_error(p, CG_TEXT_AUTO, 0, "NUL byte in condition");
	PUT(p, "b6.jsonl", "{\"cond\":\"\\u00ff\\u0001\",\"text\":\"x\"}");
	expect_text_error(p, CG_TEXT_AUTO, 0, "control character in name");
	PUT(p, "b7.jsonl", "{\"cond\":\"a\",\"text\":\"x\"}\x01");
	expect_text_error(p, CG_TEXT_AUTO, 0, "line 1: ");
	PUT(p, "b8.jsonl", "{\"cond\":\"a\",\"text\":\"x\"}{}");
	expect_text_error(p, CG_TEXT_AUTO, 0, "more after the JSON value");
	PUT(p, "b9.jsonl", "{\"cond\":\"a\",\"text\":\"\\udc00\"}");
	expect_text_error(p, CG_TEXT_AUTO, 0, "line 1: ");
	PUT(p, "b10.jsonl",
	    "{\"cond\":\"a\",\"text\":\"x\"}\n\n{\"cond\":\"a\"}");
	expect_text_error(p, CG_TEXT_AUTO, 0, "line 3: no \"text\"");

	/* a line that never ends is cut off at its cap, not read whole */
	{
		size_t n = 8u << 20;
		char *big = malloc(n);
		memset(big, 'a', n);
		memcpy(big, "{\"cond\":\"a\",\"text\":\"", 21);
		put(p, sizeof(p), "big.jsonl", big, n);
		free(big);
		expect_text_error(p, CG_TEXT_AUTO, 0, "line 1: longer than");
	}

	/* the whole payload is capped by CG_MAX_BYTES */
	PUT(p, "many.jsonl",
	    "{\"cond\":\"a\",\"text\":\"0123456789\"}\n"
	    "{\"cond\":\"a\",\"text\":\"0123456789\"}\n");
	setenv("CG_MAX_BYTES", "15", 1);
	expect_text_error(p, CG_TEXT_AUTO, 0, "CG_MAX_BYTES");
	unsetenv("CG_MAX_BYTES");
}

static void
test_tsv(void)
{
	static const struct want all[] = {
	    W("x", "a\nb\tc\rd\\e", 0),
	    W("y", "", 0),
	    W("q\\r", "raw \0\377", 0),
	};
	char p[512];
	struct cg_dataset d;
	FILE *fp;

	PUT(p, "a.tsv", "x\ta\\nb\\tc\\rd\\\\e\n\ny\t\nq\\\\r\traw \0\377\n");
	CHECK(load(p, CG_TEXT_AUTO, 0, 0, &d) == 0, "tsv: %s", cg_errmsg());
	expect_text("tsv", &d, all, 3, 0);
	expect_names("tsv", &d, "q\\r,x,y");
	cg_dataset_free(&d);
	CHECK(load(p, CG_TEXT_TSV, 0, 1, &d) == 0, "%s", cg_errmsg());
	expect_text("tsv --limit 1", &d, all, 1, 0);
	cg_dataset_free(&d);
	expect_text_error(p, CG_TEXT_TSV, 8, "line 1: text of 9 bytes");

	PUT(p, "b1.tsv", "x\ty\nnotab\n");
	expect_text_error(p, CG_TEXT_AUTO, 0, "line 2: no tab");
	PUT(p, "b2.tsv", "x\ty\tz\n");
	expect_text_error(p, CG_TEXT_AUTO, 0, "line 1: more than two fields");
	PUT(p, "b3.tsv", "x\ty\\0\n");
	expect_text_error(p, CG_TEXT_AUTO, 0, "unknown escape \\0");
	PUT(p, "b4.tsv", "x\ty\\\x01\n");
	expect_text_error(p, CG_TEXT_AUTO, 0, "before byte 0x01");
	PUT(p, "b5.tsv", "x\\\ty\n");
	expect_text_error(p, CG_TEXT_AUTO, 0, "a backslash ends a field");
	PUT(p, "b6.tsv", "\ty\n");
	expect_text_error(p, CG_TEXT_AUTO, 0, "condition: empty name");
	PUT(p, "b7.tsv", "a\\tb\ty\n");
	expect_text_error(p, CG_TEXT_AUTO, 0, "control character in name");
	PUT(p, "b8.tsv", "\xc3(\ty\n");
	expect_text_error(p, CG_TEXT_AUTO, 0, "not valid UTF-8");

	/* the vocabulary has a size limit */
	snprintf(p, sizeof(p), "%s/many.tsv", tmpdir);
	if ((fp = fopen(p, "w")) != NULL) {
		for (int i = 0; i <= CG_SHARD_MAX_CONDITIONS; i++)
			fprintf(fp, "c%d\tx\n", i);
		fclose(fp);
	}
	expect_text_error(p, CG_TEXT_AUTO, 0, "distinct conditions");
}

static void
test_text(void)
{
	struct cg_dataset d;
	enum cg_text_format f;

	CHECK(cg_text_format_guess("a/b.jsonl") == CG_TEXT_JSONL &&
	          cg_text_format_guess("b.json.gz") == CG_TEXT_JSONL &&
	          cg_text_format_guess("b.tsv.gz") == CG_TEXT_TSV &&
	          cg_text_format_guess("b.tsv.bz2") == CG_TEXT_AUTO &&
	          cg_text_format_guess("b.gz") == CG_TEXT_AUTO &&
	          cg_text_format_guess(".tsv") == CG_TEXT_AUTO &&
	          cg_text_format_guess("-") == CG_TEXT_AUTO,
	      "cg_text_format_guess");
	CHECK(cg_text_format_parse("tsv", &f) == 0 && f == CG_TEXT_TSV &&
	          cg_text_format_parse("auto", &f) == -1 &&
	          strcmp(cg_text_format_name(CG_TEXT_FORTUNES), "fortunes") ==
	              0,
	      "cg_text_format_parse");
	expect_text_error("x.txt", CG_TEXT_AUTO, 0, "cannot tell");
	CHECK(load("x.tsv", CG_TEXT_TSV, CG_TEXT_MAX_ENTRY_LIMIT + 1, 0, &d) ==
	          -1,
	      "entry cap above the limit accepted");
	test_fortunes();
	test_jsonl();
	test_tsv();
}

/* ------------------------------------------------- a split's files */

static int progress_calls, progress_last, progress_total;

static void
count_progress(void *ctx, int k, int n)
{
	(void)ctx;
	progress_calls++;
	progress_last = k;
	progress_total = n;
}

static int
exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* PREFIX-I.cgd, in a static buffer. */
static const char *
keep_name(const char *prefix, int i)
{
	static char p[600];

	snprintf(p, sizeof(p), "%s-%d.cgd", prefix, i);
	return p;
}

static void
test_split_files(void)
{
	struct cg_split s = {.strategy = CG_SPLIT_CONTIGUOUS,
	                     .nshards = 2,
	                     .holdout = 2,
	                     .seed = 1};
	struct cg_dataset d;
	struct cg_rng r;
	char prefix[512], hold[512], bad[600], keep[512];
	char **paths;
	int *assign;

	cg_rng_seed(&r, 7);
	make_dataset(&d, &r, 20, 3);
	assign = xcalloc(d.n, sizeof(*assign));
	if (cg_split_assign(&d, &s, assign) != 0)
		die("cg_split_assign");
	snprintf(prefix, sizeof(prefix), "%s/part", tmpdir);
	snprintf(hold, sizeof(hold), "%s/hold.cgd", tmpdir);

	paths = cg_split_paths(prefix, 2, hold);
	CHECK(paths && strstr(paths[0], "/part-0.cgd") &&
	          strstr(paths[1], "/part-1.cgd") &&
	          strcmp(paths[2], hold) == 0,
	      "paths: PREFIX-I.cgd, then the holdout: %s",
	      paths ? paths[0] : cg_errmsg());
	CHECK(cg_split_write(&d, assign, &s, paths, CG_COMPRESS_NONE,
	                     count_progress, NULL) == 0,
	      "write: %s", cg_errmsg());
	CHECK(exists(paths[0]) && exists(paths[1]) && exists(hold) &&
	          progress_calls == 3 && progress_last == 3 &&
	          progress_total == 3,
	      "write: every file, and done after each (%d calls)",
	      progress_calls);

	/* the reports of what was written */
	char *buf = NULL, want[2048];
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);
	uint64_t c0 = cg_split_count(&d, assign, 0, NULL),
	         c1 = cg_split_count(&d, assign, 1, NULL);
	if (fp == NULL)
		die("open_memstream");
	free(paths[1]);
	paths[1] = NULL;
	cg_split_table(fp, &d, assign, paths, 2);
	fclose(fp);
	snprintf(want, sizeof(want),
	         "shard      examples  path\n"
	         "0        %10llu  %s\n"
	         "holdout  %10llu  %s\n",
	         (unsigned long long)c0, paths[0], 2ULL, hold);
	CHECK(strcmp(buf, want) == 0, "table:\n%s", buf);
	free(buf);
	paths[1] = strdup(keep_name(prefix, 1));
	cJSON *j = cg_split_json(&d, assign, 1, "p-1.cgd");
	char *js = j ? cJSON_PrintUnformatted(j) : NULL;
	uint64_t counts[3];
	cg_split_count(&d, assign, 1, counts);
	snprintf(want, sizeof(want),
	         "{\"path\":\"p-1.cgd\",\"shard\":1,\"holdout\":false,"
	         "\"examples\":%llu,\"counts\":{\"c0\":%llu,\"c1\":%llu,"
	         "\"c2\":%llu}}",
	         (unsigned long long)c1, (unsigned long long)counts[0],
	         (unsigned long long)counts[1], (unsigned long long)counts[2]);
	CHECK(js && strcmp(js, want) == 0, "json: %s", js ? js : "NULL");
	free(js);
	cJSON_Delete(j);
	j = cg_split_json(&d, assign, -1, hold);
	CHECK(j && cJSON_IsTrue(cJSON_GetObjectItem(j, "holdout")) &&
	          cJSON_GetObjectItem(j, "examples")->valuedouble == 2,
	      "json: the holdout");
	cJSON_Delete(j);
	for (int i = 0; i < 3; i++)
		unlink(paths[i]);

	/* a shard that cannot be written: the one before it goes too */
	snprintf(keep, sizeof(keep), "%s", paths[1]);
	snprintf(bad, sizeof(bad), "%s/no/such/dir.cgd", tmpdir);
	free(paths[1]);
	paths[1] = strdup(bad);
	progress_calls = 0;
	CHECK(cg_split_write(&d, assign, &s, paths, CG_COMPRESS_NONE, NULL,
	                     NULL) != 0 &&
	          strstr(cg_errmsg(), "no/such/dir.cgd") != NULL,
	      "write: a failure names its file: %s", cg_errmsg());
	CHECK(!exists(paths[0]) && !exists(hold) && !exists(keep) &&
	          progress_calls == 0,
	      "write: all or nothing (no done without a callback)");
	cg_split_paths_free(paths, 2);

	paths = cg_split_paths("-", 1, NULL);
	CHECK(paths && strcmp(paths[0], "-") == 0 && paths[1] == NULL,
	      "paths: prefix - is standard output, no holdout");
	cg_split_paths_free(paths, 1);
	cg_split_paths_free(NULL, 3);
	paths = cg_split_paths("x", 3, "x-2.cgd");
	CHECK(paths == NULL &&
	          strcmp(cg_errmsg(),
	                 "x-2.cgd: both a shard and the holdout") == 0,
	      "paths: a shard that is the holdout: %s", cg_errmsg());
	free(assign);
	cg_dataset_free(&d);
}

/* ------------------------------------------------- IDX pairs in a dir */

static void
touch(const char *dir, const char *name)
{
	char p[600];
	FILE *fp;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if ((fp = fopen(p, "w")) == NULL || fclose(fp) != 0) {
		fprintf(stderr, "test_shard: cannot create %s\n", p);
		exit(1);
	}
}

static int
ends(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);

	return n >= k && strcmp(s + n - k, tail) == 0;
}

static void
test_idx_pairs(void)
{
	char dir[512], empty[512], want[700];
	char *pair[2] = {NULL, NULL};
	struct cg_dataset d;
	struct cg_rng r;

	snprintf(dir, sizeof(dir), "%s/mnist", tmpdir);
	snprintf(empty, sizeof(empty), "%s/empty", tmpdir);
	if (mkdir(dir, 0700) != 0 || mkdir(empty, 0700) != 0)
		die("mkdir");
	touch(dir, "train-images-idx3-ubyte.gz");
	touch(dir, "train-images.idx3-ubyte");
	touch(dir, "train-labels.idx1-ubyte.gz");
	touch(dir, "t10k-images-idx3-ubyte");
	if (mkdir(strcat(strcpy(want, dir), "/t10k-labels-idx1-ubyte"), 0700) !=
	    0)
		die("mkdir");

	CHECK(cg_idx_find(dir, "train", pair) == 0 &&
	          ends(pair[0], "/train-images-idx3-ubyte.gz") &&
	          ends(pair[1], "/train-labels.idx1-ubyte.gz"),
	      "find: the first name of each that is there: %s",
	      pair[0] ? pair[0] : cg_errmsg());
	free(pair[0]);
	free(pair[1]);
	snprintf(want, sizeof(want), "%s: no t10k-labels-idx1-ubyte[.gz] here",
	         dir);
	CHECK(cg_idx_find(dir, "t10k", pair) != 0 && pair[0] == NULL &&
	          pair[1] == NULL && strcmp(cg_errmsg(), want) == 0,
	      "find: a directory is no labels file: %s", cg_errmsg());
	snprintf(want, sizeof(want), "%s: no train-images-idx3-ubyte[.gz] here",
	         empty);
	CHECK(cg_idx_find(empty, "train", pair) != 0 &&
	          strcmp(cg_errmsg(), want) == 0,
	      "find: no images: %s", cg_errmsg());
	CHECK(cg_idx_dir(dir) && !cg_idx_dir(empty),
	      "dir: the images of a pair tell IDX from text");
	touch(empty, "t10k-images.idx3-ubyte.gz");
	CHECK(cg_idx_dir(empty), "dir: either set, any of the names");

	cg_rng_seed(&r, 3);
	make_dataset(&d, &r, 30, 10);
	CHECK(cg_idx_name_conditions(&d, "data/mnist/train-images") == 0 &&
	          strcmp(d.conditions[3], "c3") == 0,
	      "names: MNIST keeps its digits");
	CHECK(cg_idx_name_conditions(&d, "data/FashionMNIST/raw/x") == 0 &&
	          strcmp(d.conditions[3], "Dress") == 0 &&
	          strcmp(d.conditions[9], "Ankle boot") == 0,
	      "names: Fashion-MNIST, in any case, gets its classes");
	cg_dataset_free(&d);
	make_dataset(&d, &r, 30, 9);
	CHECK(cg_idx_name_conditions(&d, "fashion") == 0 &&
	          strcmp(d.conditions[3], "c3") == 0,
	      "names: not with other than ten conditions");
	cg_dataset_free(&d);
}

int
main(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char cmd[600];

	snprintf(tmpdir, sizeof(tmpdir), "%s/test_shard.XXXXXX", base);
	if (mkdtemp(tmpdir) == NULL) {
		fprintf(stderr, "SKIP: no temporary directory in %s\n", base);
		return 77;
	}
	test_split_cases();
	test_split_properties();
	test_shards();
	test_prompt_shards();
	test_idx();
	test_idx_pairs();
	test_split_files();
	test_text();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "warning: could not remove %s\n", tmpdir);
	if (failures) {
		fprintf(stderr, "test_shard: %d failures\n", failures);
		return 1;
	}
	printf("test_shard: all passed\n");
	return 0;
}
