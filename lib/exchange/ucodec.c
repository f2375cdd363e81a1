/*
 * exchange/ucodec.c - the update codec table: dense, block-quantized, top-k, sign
 * and low-rank forms of a gradient or delta.
 *
 * A row gives a view's size under a spec, its encoder, the checks a
 * reader makes of its tensors (bind) and a decoder of any range of its
 * elements.  Encoders report what they sent by decoding their own output
 * through the reader's path, so the error feedback a worker keeps is
 * exactly what the coordinator did not receive.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exchange/secagg.h"
#include "exchange/ucodec.h"

#define QK 32            /* elements of a quantization block */
#define CHUNK 256        /* values decoded at a time on the stack */
#define MAX_ELEMS (1ULL << 40)
#define MAX_RANK 1024

struct cg_ucodec {
	const char *name;
	const char *help;
	int (*size)(const struct cg_uspec *s, const struct cg_uview *v,
	            uint64_t *bytes);
	/* warm: lowrank's warm-start factors of this view, or NULL */
	int (*encode)(const struct cg_uspec *s, const struct cg_uview *v,
	              const float *x, struct cg_file *f, struct cg_uenc *e,
	              float *warm);
	int (*bind)(const struct cg_uspec *s, struct cg_uview *v,
	            const struct cg_file *f);
	void (*decode)(const struct cg_uspec *s, const struct cg_uview *v,
	               uint64_t lo, size_t n, float *out);
};

/* ------------------------------------------------------------ helpers */

static uint32_t
get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void
put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static uint64_t
bytes_of(enum cg_dtype t, uint64_t n)
{
	uint64_t b = 0;

	cg_dtype_bytes(t, n, &b);
	return b;
}

/* name + suffix into out [CG_MAX_NAME]; -1 when it does not fit. */
static int
suffixed(char *out, const char *name, const char *suffix)
{
	if ((size_t)snprintf(out, CG_MAX_NAME, "%s%s", name, suffix) >=
	    CG_MAX_NAME)
		return cg_seterr("tensor %s: name too long", name);
	return 0;
}

/* The tensor name+suffix of f, 1-d of n elements of dtype dt (or of any
 * float dtype when dt is CG_NDTYPES): NULL with a message otherwise. */
static const struct cg_tensor *
need(const struct cg_file *f, const char *name, const char *suffix,
     enum cg_dtype dt, int ndim, const uint64_t *shape)
{
	char full[CG_MAX_NAME];
	const struct cg_tensor *t;

	if (suffixed(full, name, suffix) != 0)
		return NULL;
	if ((t = cg_file_find(f, full)) == NULL) {
		cg_seterr("tensor %s: missing", full);
		return NULL;
	}
	if (dt == CG_NDTYPES ? cg_codec(t->dtype)->kind != CG_KIND_FLOAT
	                     : t->dtype != dt) {
		cg_seterr("tensor %s: dtype %s, not %s", full,
		          cg_dtype_name(t->dtype),
		          dt == CG_NDTYPES ? "a float type" : cg_dtype_name(dt));
		return NULL;
	}
	if (t->ndim != ndim ||
	    memcmp(t->shape, shape, (size_t)ndim * sizeof(uint64_t)) != 0) {
		cg_seterr("tensor %s: its shape is not the layout's", full);
		return NULL;
	}
	return t;
}

/* -1 with a message when one of t's values is not finite. */
static int
check_finite(const struct cg_tensor *t)
{
	float buf[CHUNK];

	for (uint64_t i = 0; i < t->nelem; i += CHUNK) {
		size_t n = t->nelem - i < CHUNK ? (size_t)(t->nelem - i) : CHUNK;
		if (cg_tensor_decode(t, i, n, buf) != 0)
			return -1;
		for (size_t j = 0; j < n; j++)
			if (!isfinite(buf[j]))
				return cg_seterr("tensor %s: element %" PRIu64
				                 " is not finite",
				                 t->name, i + j);
	}
	return 0;
}

static int
refuse_nonfinite(const struct cg_uview *v, const float *x)
{
	uint64_t i = cg_first_nonfinite(x, v->n);

	if (i < v->n)
		return cg_seterr("tensor %s: element %" PRIu64 " is not finite",
		                 v->name, i);
	return 0;
}

/* ------------------------------------------------------------- dense */

static int
dense_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	return cg_dtype_bytes(s->dtype, v->n, b);
}

static int
dense_encode(const struct cg_uspec *s, const struct cg_uview *v,
             const float *x, struct cg_file *f, struct cg_uenc *e, float *warm)
{
	struct cg_tensor *t;

	(void)e;
	(void)warm;
	if ((t = cg_file_add_zero(f, v->name, s->dtype, v->ndim, v->shape)) ==
	    NULL)
		return -1;
	return cg_codec(s->dtype)->encode(t->data, x, v->n);
}

static int
dense_bind(const struct cg_uspec *s, struct cg_uview *v,
           const struct cg_file *f)
{
	(void)s;
	v->t[0] = need(f, v->name, "", CG_NDTYPES, v->ndim, v->shape);
	return v->t[0] ? 0 : -1;
}

static void
dense_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
             size_t n, float *out)
{
	(void)s;
	/* bound: the range is inside the tensor, which cannot fail */
	cg_tensor_decode(v->t[0], lo, n, out);
}

/* ------------------------------------------------------------- block */

static uint64_t
padded(uint64_t n)
{
	return (n + QK - 1) / QK * QK;
}

static int
block_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	return cg_dtype_bytes(s->dtype, padded(v->n), b);
}

static int
block_encode(const struct cg_uspec *s, const struct cg_uview *v,
             const float *x, struct cg_file *f, struct cg_uenc *e, float *warm)
{
	const struct cg_codec *c = cg_codec(s->dtype);
	const uint64_t np = padded(v->n), whole = v->n / QK * QK;
	struct cg_tensor *t;
	unsigned char *dst;
	float tail[QK] = {0};
	int rc = 0;

	(void)warm;
	if ((t = cg_file_add_zero(f, v->name, s->dtype, 1, &np)) == NULL)
		return -1;
	dst = t->data;
	/* the whole blocks where they lie, the last one padded with zeros
	 * on the stack; stochastic rounding draws in element order */
	if (whole)
		rc = s->sr ? c->encode_sr(dst, x, whole, &e->rng)
		           : c->encode(dst, x, whole);
	if (rc == 0 && whole < v->n) {
		memcpy(tail, x + whole, (v->n - whole) * sizeof(float));
		dst += whole / QK * c->bytes;
		rc = s->sr ? c->encode_sr(dst, tail, QK, &e->rng)
		           : c->encode(dst, tail, QK);
	}
	return rc;
}

static int
block_bind(const struct cg_uspec *s, struct cg_uview *v,
           const struct cg_file *f)
{
	const uint64_t np = padded(v->n);

	/* the block scales were checked on reading (codec row's check) */
	v->t[0] = need(f, v->name, "", s->dtype, 1, &np);
	return v->t[0] ? 0 : -1;
}

/* -------------------------------------------------------------- topk */

/*
 * Without a chunk the kept elements of a view are its ceil(frac n) (or
 * count) largest, indexed by u32.  With chunk C each run of C elements
 * keeps its kc = min(C, ceil(frac C) or count) largest (the last run at
 * most its length), indexed within the run by u8 (C <= 256) or u16, so
 * entry p belongs to run p / kc.  Values of a block dtype are padded with
 * zeros to whole blocks.
 */
static uint64_t
topk_kc(const struct cg_uspec *s)
{
	uint64_t kc;

	if (s->count)
		kc = s->count;
	else {
		double want = ceil(s->frac * (double)s->chunk);
		kc = want >= (double)s->chunk ? s->chunk : (uint64_t)want;
	}
	return kc > s->chunk ? s->chunk : kc;
}

static uint64_t
topk_k(const struct cg_uspec *s, uint64_t n)
{
	uint64_t k;

	if (s->chunk) {
		uint64_t kc = topk_kc(s), rem = n % s->chunk;
		return n / s->chunk * kc + (rem < kc ? rem : kc);
	}
	if (s->count)
		k = s->count;
	else {
		double want = ceil(s->frac * (double)n);
		k = want >= (double)n ? n : (uint64_t)want;
	}
	return k > n ? n : k;
}

static enum cg_dtype
topk_idx_dtype(const struct cg_uspec *s)
{
	return s->chunk == 0 ? CG_U32 : s->chunk <= 256 ? CG_U8 : CG_U16;
}

/* Values stored for k kept: k, padded to a whole block. */
static uint64_t
topk_nval(const struct cg_uspec *s, uint64_t k)
{
	unsigned b = cg_codec(s->dtype)->block;

	return (k + b - 1) / b * b;
}

static int
topk_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	uint64_t k = topk_k(s, v->n);

	*b = bytes_of(topk_idx_dtype(s), k) +
	     bytes_of(s->dtype, topk_nval(s, k));
	return 0;
}

/* The bits of |x|: for magnitudes, ordered as the values are. */
static uint32_t
mag_key(float x)
{
	uint32_t u;

	memcpy(&u, &x, 4);
	return u & 0x7fffffffu;
}

/*
 * The k-th largest magnitude of x [n] (1 <= k <= n) as its key, and how
 * many of the keys equal to it the k largest take (*ties; the rest are
 * above it): a radix selection over the key's 31 bits in digits of 11,
 * 10 and 10, a pass a digit over the elements whose higher digits match,
 * counted on the stack.
 */
static void
kth_key(const float *x, uint64_t n, uint64_t k, uint32_t *out,
        uint64_t *ties)
{
	static const int shift[3] = {20, 10, 0};
	uint64_t h[2048];
	uint32_t prefix = 0;

	for (int d = 0; d < 3; d++) {
		const int sh = shift[d], hs = sh + (d == 0 ? 11 : 10);
		const uint32_t nb = d == 0 ? 2048 : 1024;
		memset(h, 0, nb * sizeof(*h));
		for (uint64_t i = 0; i < n; i++) {
			uint32_t u = mag_key(x[i]);
			/* the elements whose digits above this one match */
			if (d == 0 || u >> hs == prefix >> hs)
				h[(u >> sh) & (nb - 1)]++;
		}
		uint32_t b = nb;
		while (b-- > 0) {
			if (h[b] >= k)
				break;
			k -= h[b];
		}
		prefix |= b << sh;
	}
	*out = prefix;
	*ties = k;
}

/* The k indices of x [n] in order whose keys are above thr, and the
 * first ties of those equal to it, into at [k]. */
static void
pick(const float *x, uint64_t n, uint64_t k, uint32_t thr, uint64_t ties,
     uint32_t *at)
{
	uint64_t m = 0;

	for (uint64_t i = 0; i < n && m < k; i++) {
		uint32_t a = mag_key(x[i]);
		if (a > thr || (a == thr && ties > 0)) {
			if (a == thr)
				ties--;
			at[m++] = (uint32_t)i;
		}
	}
}

/*
 * The k largest magnitudes' positions of x [n] into at [k], as pick
 * chooses them, in fewer passes: a histogram of the keys' top 11 bits
 * finds the bin the k-th falls in; one more pass copies the keys (and
 * positions) of that bin and those above it, and the rest of the
 * selection runs on the copy alone.  Where that copy would be large
 * (most keys in one bin: many zeros), kth_key and pick run on x.
 */
static int
top_positions(const float *x, uint64_t n, uint64_t k, uint32_t *at)
{
	uint64_t h[2048] = {0}, kk = k, above = 0;
	uint32_t b = 2048;

	for (uint64_t i = 0; i < n; i++)
		h[mag_key(x[i]) >> 20]++;
	while (b-- > 0) {
		if (h[b] >= kk)
			break;
		kk -= h[b];
		above += h[b];
	}
	const uint64_t c = above + h[b];
	if (c > n / 4 + 64) {
		uint32_t thr;
		uint64_t ties;
		kth_key(x, n, k, &thr, &ties);
		pick(x, n, k, thr, ties, at);
		return 0;
	}
	uint32_t *key = cg_alloc(c * sizeof(*key));
	uint32_t *pos = cg_alloc(c * sizeof(*pos));
	if (key == NULL || pos == NULL) {
		free(key);
		free(pos);
		return -1;
	}
	uint64_t m = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t u = mag_key(x[i]);
		if (u >> 20 >= b) {
			key[m] = u;
			pos[m++] = (uint32_t)i;
		}
	}
	/* the two lower digits, over the copy's keys of bin b */
	uint32_t prefix = b << 20;
	for (int d = 1; d < 3; d++) {
		const int sh = d == 1 ? 10 : 0, hs = sh + 10;
		memset(h, 0, 1024 * sizeof(*h));
		for (uint64_t i = 0; i < c; i++)
			if (key[i] >> hs == prefix >> hs)
				h[(key[i] >> sh) & 1023]++;
		uint32_t e = 1024;
		while (e-- > 0) {
			if (h[e] >= kk)
				break;
			kk -= h[e];
		}
		prefix |= e << sh;
	}
	/* kk is now the ties at the threshold prefix */
	for (uint64_t i = 0, j = 0; i < c && j < k; i++)
		if (key[i] > prefix || (key[i] == prefix && kk > 0)) {
			if (key[i] == prefix)
				kk--;
			at[j++] = pos[i];
		}
	free(key);
	free(pos);
	return 0;
}

/* The ties pick takes at threshold t from the kk largest keys top
 * [kk] (run_kth_key's, t the last): those equal to t among them. */
static uint64_t
ties_in(const uint32_t *top, uint64_t kk, uint32_t t)
{
	uint64_t n = 0;

	while (kk > 0 && top[kk - 1] == t) {
		n++;
		kk--;
	}
	return n;
}

/* The k-th largest magnitude key of a run x [n] (1 <= k <= n): the k
 * largest kept in top [k], in decreasing order, by insertion. */
static uint32_t
run_kth_key(const float *x, uint64_t n, uint64_t k, uint32_t *top)
{
	uint64_t have = 0;

	/* few kept: each key through a row of k compare-exchanges, no
	 * branch; the slots start at key 0, the least, which n >= k keys
	 * push out or equal */
	if (k <= 8) {
		uint32_t t[8] = {0};
		for (uint64_t i = 0; i < n; i++) {
			uint32_t c = mag_key(x[i]);
			for (int j = 0; j < 8; j++) {
				uint32_t hi = t[j] > c ? t[j] : c;
				c = t[j] > c ? c : t[j];
				t[j] = hi;
			}
		}
		memcpy(top, t, k * sizeof(*top));
		return top[k - 1];
	}

	for (uint64_t i = 0; i < n; i++) {
		uint32_t key = mag_key(x[i]);
		uint64_t j;
		if (have == k && key <= top[k - 1])
			continue;
		j = have < k ? have++ : k - 1;
		while (j > 0 && top[j - 1] < key) {
			top[j] = top[j - 1];
			j--;
		}
		top[j] = key;
	}
	return top[k - 1];
}

/*
 * The positions of the kk largest magnitudes of a short run x [n]
 * (n <= 256, 1 <= kk <= 8, kk <= n) into at [kk + 1] (the last one
 * scratch), as pick chooses them.
 * The keys are taken once into key [n]; then each pass finds the
 * largest key below the last pass's and counts it, until the kk largest
 * are reached: at most kk passes of two loops over the run, each loop
 * without a branch (a vector loop), where a sorted insertion costs each
 * element a chain of compare-exchanges; and a run of up to 64 is picked
 * from by bit masks, not by a scan with a branch an element.
 */
static void
small_top(const float *x, uint64_t n, uint64_t kk, uint32_t *key,
          uint32_t *at)
{
	uint32_t below = 0x80000000u, t = 0; /* keys are 31 bits */
	uint64_t above = 0, ties = 0, m = 0;

	for (uint64_t i = 0; i < n; i++)
		key[i] = mag_key(x[i]);
	for (;;) {
		uint32_t hi = 0;
		uint64_t c = 0;
		for (uint64_t i = 0; i < n; i++) {
			/* the key where below it, else 0: a mask, no branch */
			uint32_t u = key[i] & -(uint32_t)(key[i] < below);
			hi = u > hi ? u : hi;
		}
		for (uint64_t i = 0; i < n; i++)
			c += key[i] == hi;
		if (above + c >= kk) {
			t = hi;
			ties = kk - above;
			break;
		}
		above += c;
		below = hi;
	}
	if (n <= 64) {
		/* pick's rule by bit masks: those above t, then the first
		 * ties of those equal to it, in order of position */
		uint64_t gt = 0, eq = 0;
		for (uint64_t i = 0; i < n; i++) {
			gt |= (uint64_t)(key[i] > t) << i;
			eq |= (uint64_t)(key[i] == t) << i;
		}
		for (; ties > 0; ties--) {
			gt |= eq & -eq;
			eq &= eq - 1;
		}
		for (; gt; gt &= gt - 1)
			at[m++] = (uint32_t)__builtin_ctzll(gt);
		return;
	}
	/* pick's rule without a branch: every position is written, the
	 * count moves on past those taken (at [kk + 1] has room for the
	 * write after the last) */
	for (uint64_t i = 0; i < n; i++) {
		uint32_t a = key[i];
		uint64_t take = (a > t) | ((a == t) & (ties > 0));
		ties -= (a == t) & take;
		at[m] = (uint32_t)i;
		m += take;
	}
}

static void
put_index(unsigned char *p, enum cg_dtype t, uint64_t i, uint32_t v)
{
	if (t == CG_U8)
		p[i] = (unsigned char)v;
	else if (t == CG_U16) {
		p[2 * i] = (unsigned char)v;
		p[2 * i + 1] = (unsigned char)(v >> 8);
	} else
		put32(p + 4 * i, v);
}

static uint32_t
get_index(const unsigned char *p, enum cg_dtype t, uint64_t i)
{
	if (t == CG_U8)
		return p[i];
	if (t == CG_U16)
		return (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
	return get32(p + 4 * i);
}

static int
topk_encode(const struct cg_uspec *s, const struct cg_uview *v,
            const float *x, struct cg_file *f, struct cg_uenc *e, float *warm)
{
	const uint64_t k = topk_k(s, v->n), nval = topk_nval(s, k);
	const enum cg_dtype it = topk_idx_dtype(s);
	char name[CG_MAX_NAME];
	struct cg_tensor *ti, *tv;
	uint32_t *at = NULL;
	float *val = NULL;
	int rc = -1;

	(void)e;
	(void)warm;
	if (refuse_nonfinite(v, x) != 0)
		return -1;
	if (suffixed(name, v->name, ".idx") != 0 ||
	    (ti = cg_file_add_zero(f, name, it, 1, &k)) == NULL ||
	    suffixed(name, v->name, ".val") != 0 ||
	    (tv = cg_file_add_zero(f, name, s->dtype, 1, &nval)) == NULL)
		return -1;
	if (k == 0)
		return 0;
	/* one more than k: small_top writes one past its run's */
	if ((at = cg_alloc((k + 1) * sizeof(*at))) == NULL ||
	    (val = cg_alloc(nval * sizeof(float))) == NULL)
		goto out;
	if (s->chunk == 0) {
		if (top_positions(x, v->n, k, at) != 0)
			goto out;
		for (uint64_t m = 0; m < k; m++) {
			put_index(ti->data, it, m, at[m]);
			val[m] = x[at[m]];
		}
	} else {
		const uint64_t C = s->chunk, kc = topk_kc(s);
		const int small = C <= 256 && kc <= 8;
		uint64_t nk = small ? C : kc ? kc : 1;
		uint32_t *keys = cg_alloc(nk * sizeof(*keys));
		uint64_t p = 0;
		if (keys == NULL)
			goto out;
		for (uint64_t lo = 0; lo < v->n; lo += C) {
			uint64_t len = v->n - lo < C ? v->n - lo : C;
			uint64_t kk = len < kc ? len : kc;
			if (kk == 0)
				continue;
			if (small)
				small_top(x + lo, len, kk, keys, at + p);
			else {
				uint32_t t = run_kth_key(x + lo, len, kk, keys);
				pick(x + lo, len, kk, t, ties_in(keys, kk, t),
				     at + p);
			}
			for (uint64_t m = 0; m < kk; m++) {
				put_index(ti->data, it, p + m, at[p + m]);
				val[p + m] = x[lo + at[p + m]];
			}
			p += kk;
		}
		free(keys);
	}
	rc = cg_codec(s->dtype)->encode(tv->data, val, nval);
out:
	free(at);
	free(val);
	return rc;
}

static int
topk_bind(const struct cg_uspec *s, struct cg_uview *v,
          const struct cg_file *f)
{
	const uint64_t k = topk_k(s, v->n), nval = topk_nval(s, k);
	const enum cg_dtype it = topk_idx_dtype(s);
	const struct cg_tensor *ti, *tv;
	const unsigned char *p;
	const uint64_t C = s->chunk ? s->chunk : v->n;
	const uint64_t kc = s->chunk ? topk_kc(s) : k;

	if ((ti = need(f, v->name, ".idx", it, 1, &k)) == NULL ||
	    (tv = need(f, v->name, ".val", s->dtype, 1, &nval)) == NULL)
		return -1;
	p = ti->data;
	/* within each run, strictly increasing and inside the run */
	for (uint64_t i = 0; i < k; i++) {
		uint64_t run = kc ? i / kc : 0, lo = run * C;
		uint64_t len = v->n - lo < C ? v->n - lo : C;
		uint32_t at = get_index(p, it, i);
		if (at >= len)
			return cg_seterr("tensor %s: index %" PRIu32
			                 " outside its %" PRIu64 " elements",
			                 ti->name, at, len);
		if (i % kc != 0 && at <= get_index(p, it, i - 1))
			return cg_seterr("tensor %s: index %" PRIu32 " at %" PRIu64
			                 " repeated or out of order",
			                 ti->name, at, i);
	}
	if (check_finite(tv) != 0)
		return -1;
	v->k = k;
	v->t[0] = ti;
	v->t[1] = tv;
	return 0;
}

/* The first entry whose element (its run's start + its index) is >= at:
 * entries are in increasing element order. */
static uint64_t
lower_bound(const struct cg_uspec *s, const struct cg_uview *v, uint64_t at)
{
	const enum cg_dtype it = topk_idx_dtype(s);
	const unsigned char *idx = v->t[0]->data;
	const uint64_t C = s->chunk, kc = C ? topk_kc(s) : 0;
	uint64_t lo = 0, hi = v->k;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		uint64_t el = get_index(idx, it, mid) + (C ? mid / kc * C : 0);
		if (el < at)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void
topk_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
            size_t n, float *out)
{
	const enum cg_dtype it = topk_idx_dtype(s);
	const unsigned char *idx = v->t[0]->data;
	const uint64_t C = s->chunk, kc = C ? topk_kc(s) : 0;
	uint64_t p0, p1;
	float buf[CHUNK];

	memset(out, 0, n * sizeof(float));
	if (v->k == 0)
		return;
	p0 = lower_bound(s, v, lo);
	p1 = lower_bound(s, v, lo + n);
	for (uint64_t p = p0; p < p1; p += CHUNK) {
		size_t m = p1 - p < CHUNK ? (size_t)(p1 - p) : CHUNK;
		cg_tensor_decode(v->t[1], p, m, buf);
		for (size_t j = 0; j < m; j++) {
			uint64_t q = p + j;
			uint64_t el = get_index(idx, it, q) + (C ? q / kc * C : 0);
			out[el - lo] = buf[j];
		}
	}
}

/* -------------------------------------------------------------- sign */

static int
sign_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	(void)s;
	*b = (v->n + 7) / 8 + 4;
	return 0;
}

static int
sign_encode(const struct cg_uspec *s, const struct cg_uview *v,
            const float *x, struct cg_file *f, struct cg_uenc *e, float *warm)
{
	const uint64_t nb = (v->n + 7) / 8, one = 1;
	char name[CG_MAX_NAME];
	struct cg_tensor *tb, *ts;
	unsigned char *bits;
	double sum = 0;
	float scale;

	(void)s;
	(void)e;
	(void)warm;
	if (refuse_nonfinite(v, x) != 0)
		return -1;
	if (suffixed(name, v->name, ".sign") != 0 ||
	    (tb = cg_file_add_zero(f, name, CG_U8, 1, &nb)) == NULL ||
	    suffixed(name, v->name, ".scale") != 0 ||
	    (ts = cg_file_add_zero(f, name, CG_F32, 1, &one)) == NULL)
		return -1;
	bits = tb->data;
	for (uint64_t i = 0; i < v->n; i++)
		sum += fabs((double)x[i]);
	for (uint64_t i = 0; i < v->n; i += 8) {
		unsigned byte = 0;
		for (uint64_t k = 0; k < 8 && i + k < v->n; k++)
			byte |= (unsigned)(x[i + k] < 0) << k;
		bits[i / 8] = (unsigned char)byte;
	}
	scale = (float)(sum / (double)v->n);
	return cg_codec(CG_F32)->encode(ts->data, &scale, 1);
}

static int
sign_bind(const struct cg_uspec *s, struct cg_uview *v,
          const struct cg_file *f)
{
	const uint64_t nb = (v->n + 7) / 8, one = 1;
	const struct cg_tensor *tb, *ts;
	float scale;

	(void)s;
	if ((tb = need(f, v->name, ".sign", CG_U8, 1, &nb)) == NULL ||
	    (ts = need(f, v->name, ".scale", CG_F32, 1, &one)) == NULL)
		return -1;
	cg_tensor_decode(ts, 0, 1, &scale);
	if (!isfinite(scale) || scale < 0)
		return cg_seterr("tensor %s: scale %g is not a magnitude",
		                 ts->name, (double)scale);
	if (v->n % 8 &&
	    ((const unsigned char *)tb->data)[nb - 1] >> (v->n % 8))
		return cg_seterr("tensor %s: bits set past its %" PRIu64
		                 " elements",
		                 tb->name, v->n);
	v->t[0] = tb;
	v->t[1] = ts;
	return 0;
}

static void
sign_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
            size_t n, float *out)
{
	const unsigned char *bits = v->t[0]->data;
	float scale;

	(void)s;
	cg_tensor_decode(v->t[1], 0, 1, &scale);
	size_t j = 0;
	/* to a whole byte, then a byte (8 elements) at a time */
	for (; j < n && (lo + j) % 8; j++) {
		uint64_t i = lo + j;
		out[j] = bits[i / 8] >> (i % 8) & 1 ? -scale : scale;
	}
	for (; j + 8 <= n; j += 8) {
		unsigned byte = bits[(lo + j) / 8];
		for (int k = 0; k < 8; k++)
			out[j + k] = byte >> k & 1 ? -scale : scale;
	}
	for (; j < n; j++) {
		uint64_t i = lo + j;
		out[j] = bits[i / 8] >> (i % 8) & 1 ? -scale : scale;
	}
}

/* ----------------------------------------------------------- lowrank */

/* The rank a view is sent at under s: 0 (dense f32) unless it is a
 * matrix that R (m + n) floats carry in fewer than m n. */
static uint64_t
lowrank_rank(const struct cg_uspec *s, const struct cg_uview *v)
{
	uint64_t r = (uint64_t)s->rank;

	if (v->ndim != 2 || r == 0)
		return 0;
	return r * (v->shape[0] + v->shape[1]) < v->n ? r : 0;
}

static int
lowrank_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	uint64_t r = lowrank_rank(s, v);

	*b = 4 * (r ? r * (v->shape[0] + v->shape[1]) : v->n);
	return 0;
}

/* Q [cols, r] of view v, as dq [cols, r4] in double (the rest zero),
 * from the warm start where there is one, else normal draws from e's
 * stream in Q's element order. */
static void
lowrank_start(struct cg_uenc *e, const float *warm, uint64_t cols,
              uint64_t r, uint64_t r4, double *dq)
{
	int have = 0;

	for (uint64_t i = 0; warm && i < cols * r && !have; i++)
		have = warm[i] != 0;
	for (uint64_t j = 0; j < cols; j++)
		for (uint64_t c = 0; c < r; c++)
			dq[j * r4 + c] =
			    have ? warm[j * r + c] : cg_rng_normal(&e->rng);
}

/* Four doubles, one AVX register (two SSE2 ones elsewhere): a lane's
 * product and sum are the scalar ones, so the bits are those of plain
 * loops over the same sums in the same order. */
typedef double v4d __attribute__((vector_size(4 * sizeof(double))));

/* P [rows, r] = M Q with Q as dq [cols, r4] (r4 = r rounded up to 4, the
 * rest zero): each sum in index order from zero, four rows at a time
 * (four independent sums a lane where one row gives one). */
static void
lowrank_mq(const float *x, uint64_t rows, uint64_t cols, const double *dq,
           uint64_t r, uint64_t r4, double *p)
{
	for (uint64_t i0 = 0; i0 < rows; i0 += 4) {
		const uint64_t nb = rows - i0 < 4 ? rows - i0 : 4;
		const float *x0 = x + i0 * cols;
		for (uint64_t cb = 0; cb < r4; cb += 4) {
			v4d a[4] = {{0}};
			if (nb == 4)
				for (uint64_t j = 0; j < cols; j++) {
					const v4d q = *(const v4d *)(dq + j * r4 + cb);
					a[0] += (double)x0[j] * q;
					a[1] += (double)x0[cols + j] * q;
					a[2] += (double)x0[2 * cols + j] * q;
					a[3] += (double)x0[3 * cols + j] * q;
				}
			else
				for (uint64_t j = 0; j < cols; j++) {
					const v4d q = *(const v4d *)(dq + j * r4 + cb);
					for (uint64_t k = 0; k < nb; k++)
						a[k] += (double)x0[k * cols + j] * q;
				}
			for (uint64_t k = 0; k < nb; k++)
				for (uint64_t c = cb; c < cb + 4 && c < r; c++)
					p[(i0 + k) * r + c] = a[k][c - cb];
		}
	}
}

/* Q [cols, r4] += M^T P with P as dp [rows, r4]: each sum in row order,
 * four rows at a time. */
static void
lowrank_mtp(const float *x, uint64_t rows, uint64_t cols, const double *dp,
            uint64_t r4, double *q)
{
	for (uint64_t i0 = 0; i0 < rows; i0 += 4) {
		const uint64_t nb = rows - i0 < 4 ? rows - i0 : 4;
		const float *x0 = x + i0 * cols;
		const double *p0 = dp + i0 * r4;
		for (uint64_t j = 0; j < cols; j++) {
			v4d *qj = (v4d *)(q + j * r4);
			double m[4];
			for (uint64_t k = 0; k < nb; k++)
				m[k] = x0[k * cols + j];
			for (uint64_t cb = 0; cb < r4; cb += 4) {
				const v4d *pc = (const v4d *)(p0 + cb);
				v4d a = qj[cb / 4];
				if (nb == 4) {
					a += m[0] * pc[0];
					a += m[1] * pc[r4 / 4];
					a += m[2] * pc[2 * r4 / 4];
					a += m[3] * pc[3 * r4 / 4];
				} else
					for (uint64_t k = 0; k < nb; k++)
						a += m[k] * pc[k * r4 / 4];
				qj[cb / 4] = a;
			}
		}
	}
}

static int
lowrank_encode(const struct cg_uspec *s, const struct cg_uview *v,
               const float *x, struct cg_file *f, struct cg_uenc *e,
               float *warm)
{
	const uint64_t r = lowrank_rank(s, v);
	const uint64_t rows = v->shape[0], cols = v->shape[1];
	const uint64_t r4 = (r + 3) & ~(uint64_t)3;
	uint64_t shp[2];
	char name[CG_MAX_NAME];
	struct cg_tensor *tp, *tq;
	double *p = NULL, *dq = NULL, *dp = NULL;
	float *pf = NULL, *qf = NULL;
	int rc = -1;

	if (refuse_nonfinite(v, x) != 0)
		return -1;
	if (r == 0) {
		struct cg_tensor *t =
		    cg_file_add_zero(f, v->name, CG_F32, v->ndim, v->shape);
		return t ? cg_codec(CG_F32)->encode(t->data, x, v->n) : -1;
	}
	shp[0] = rows;
	shp[1] = r;
	if (suffixed(name, v->name, ".p") != 0 ||
	    (tp = cg_file_add_zero(f, name, CG_F32, 2, shp)) == NULL)
		return -1;
	shp[0] = cols;
	if (suffixed(name, v->name, ".q") != 0 ||
	    (tq = cg_file_add_zero(f, name, CG_F32, 2, shp)) == NULL)
		return -1;
	if ((p = cg_alloc(rows * r * sizeof(double))) == NULL ||
	    (dq = cg_alloc(cols * r4 * sizeof(double))) == NULL ||
	    (dp = cg_alloc(rows * r4 * sizeof(double))) == NULL ||
	    (pf = cg_alloc(rows * r * sizeof(float))) == NULL ||
	    (qf = cg_alloc(cols * r * sizeof(float))) == NULL)
		goto out;
	lowrank_start(e, warm, cols, r, r4, dq);
	/* P = M Q, in double, each sum in index order */
	lowrank_mq(x, rows, cols, dq, r, r4, p);
	/* orthonormal columns (modified Gram-Schmidt); a column with
	 * nothing left of it becomes zero */
	for (uint64_t c = 0; c < r; c++) {
		double nn = 0;
		for (uint64_t b = 0; b < c; b++) {
			double d = 0;
			for (uint64_t i = 0; i < rows; i++)
				d += p[i * r + c] * p[i * r + b];
			for (uint64_t i = 0; i < rows; i++)
				p[i * r + c] -= d * p[i * r + b];
		}
		for (uint64_t i = 0; i < rows; i++)
			nn += p[i * r + c] * p[i * r + c];
		nn = sqrt(nn);
		for (uint64_t i = 0; i < rows; i++)
			p[i * r + c] = nn > 1e-30 ? p[i * r + c] / nn : 0;
	}
	for (uint64_t i = 0; i < rows; i++)
		for (uint64_t c = 0; c < r; c++) {
			pf[i * r + c] = (float)p[i * r + c];
			dp[i * r4 + c] = pf[i * r + c];
		}
	/* Q = M^T P, with P as sent */
	memset(dq, 0, cols * r4 * sizeof(double));
	lowrank_mtp(x, rows, cols, dp, r4, dq);
	for (uint64_t j = 0; j < cols; j++)
		for (uint64_t c = 0; c < r; c++)
			qf[j * r + c] = (float)dq[j * r4 + c];
	if (warm)
		memcpy(warm, qf, cols * r * sizeof(float));
	if (cg_codec(CG_F32)->encode(tp->data, pf, rows * r) == 0 &&
	    cg_codec(CG_F32)->encode(tq->data, qf, cols * r) == 0)
		rc = 0;
out:
	free(p);
	free(dq);
	free(dp);
	free(pf);
	free(qf);
	return rc;
}

static int
lowrank_bind(const struct cg_uspec *s, struct cg_uview *v,
             const struct cg_file *f)
{
	const uint64_t r = lowrank_rank(s, v);
	uint64_t shp[2];

	if (r == 0) {
		v->k = 0;
		v->t[0] = need(f, v->name, "", CG_F32, v->ndim, v->shape);
		return v->t[0] ? 0 : -1;
	}
	shp[0] = v->shape[0];
	shp[1] = r;
	if ((v->t[0] = need(f, v->name, ".p", CG_F32, 2, shp)) == NULL)
		return -1;
	shp[0] = v->shape[1];
	if ((v->t[1] = need(f, v->name, ".q", CG_F32, 2, shp)) == NULL)
		return -1;
	if (check_finite(v->t[0]) != 0 || check_finite(v->t[1]) != 0)
		return -1;
	v->k = r;
	return 0;
}

/* o [m] = the rows of q [m, r] (f32 bytes) times pr [r], each summed in
 * float from zero in rank order; inlined with r a constant, the
 * compiler takes m elements at once through the stride. */
static inline __attribute__((always_inline)) void
lowrank_dot(float *o, const unsigned char *q, const float *pr, uint64_t m,
            uint64_t r)
{
	for (uint64_t a = 0; a < m; a++) {
		float acc = 0;
		for (uint64_t t = 0; t < r; t++) {
			uint32_t u = get32(q + 4 * (a * r + t));
			float qv;
			memcpy(&qv, &u, 4);
			acc += pr[t] * qv;
		}
		o[a] = acc;
	}
}

/* lowrank_dot for any r: a tile of q's rows transposed on the stack,
 * then each rank step one loop along the tile (the same sums) */
static void
lowrank_tiled(float *o, const unsigned char *q, const float *pr, uint64_t m,
              uint64_t r)
{
	float qt[4096];
	const uint64_t tile = sizeof(qt) / sizeof(qt[0]) / r;

	for (uint64_t a0 = 0; a0 < m; a0 += tile) {
		const uint64_t w = m - a0 < tile ? m - a0 : tile;
		for (uint64_t a = 0; a < w; a++)
			for (uint64_t t = 0; t < r; t++) {
				uint32_t u = get32(q + 4 * ((a0 + a) * r + t));
				memcpy(&qt[t * w + a], &u, 4);
			}
		for (uint64_t a = 0; a < w; a++)
			o[a0 + a] = 0;
		for (uint64_t t = 0; t < r; t++)
			for (uint64_t a = 0; a < w; a++)
				o[a0 + a] += pr[t] * qt[t * w + a];
	}
}

static void
lowrank_decode(const struct cg_uspec *s, const struct cg_uview *v,
               uint64_t lo, size_t n, float *out)
{
	const uint64_t r = v->k, cols = v->shape[1];
	const unsigned char *qd;
	float pr[MAX_RANK];

	(void)s;
	if (r == 0) {
		cg_tensor_decode(v->t[0], lo, n, out);
		return;
	}
	/* the factors are f32 (bound so): Q's rows read where they lie */
	qd = v->t[1]->data;
	uint64_t i = lo / cols, c = lo % cols;
	size_t j = 0;
	while (j < n) {
		const uint64_t m = cols - c < n - j ? cols - c : n - j;
		const unsigned char *q = qd + 4 * c * r;
		cg_tensor_decode(v->t[0], i * r, r, pr);
		switch (r) {
		case 1: lowrank_dot(out + j, q, pr, m, 1); break;
		case 2: lowrank_dot(out + j, q, pr, m, 2); break;
		case 4: lowrank_dot(out + j, q, pr, m, 4); break;
		case 8: lowrank_dot(out + j, q, pr, m, 8); break;
		default:
			lowrank_tiled(out + j, q, pr, m, r);
			break;
		}
		j += m;
		i++;
		c = 0;
	}
}

/* ------------------------------------------------------------ masked */

static int
masked_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	(void)s;
	return cg_dtype_bytes(CG_U64, v->n, b);
}

static int
masked_encode(const struct cg_uspec *s, const struct cg_uview *v,
              const float *x, struct cg_file *f, struct cg_uenc *e,
              float *warm)
{
	struct cg_tensor *t;
	uint64_t *y;

	(void)s;
	(void)warm;
	if (e == NULL || e->mask == NULL)
		return cg_seterr("no masking key (cg-train-step --mask)");
	if ((t = cg_file_add_zero(f, v->name, CG_U64, v->ndim, v->shape)) ==
	    NULL)
		return -1;
	y = t->data; /* 64-byte aligned */
	if (cg_mask_encode(e->mask, e->mask_weight, x, v->off, v->n, y) != 0)
		return -1;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	for (uint64_t i = 0; i < v->n; i++)
		y[i] = __builtin_bswap64(y[i]);
#endif
	if (cJSON_GetObjectItemCaseSensitive(f->manifest, "mask") == NULL) {
		cJSON *o = cg_mask_manifest(e->mask);
		if (o == NULL)
			return -1;
		cJSON_AddItemToObject(f->manifest, "mask", o);
	}
	return 0;
}

static int
masked_bind(const struct cg_uspec *s, struct cg_uview *v,
            const struct cg_file *f)
{
	(void)s;
	v->t[0] = need(f, v->name, "", CG_U64, v->ndim, v->shape);
	return v->t[0] ? 0 : -1;
}

/* A masked word alone is noise: a reader that decodes one gets NaN, never
 * numbers that look like an update. */
static void
masked_decode(const struct cg_uspec *s, const struct cg_uview *v, uint64_t lo,
              size_t n, float *out)
{
	(void)s;
	(void)v;
	(void)lo;
	for (size_t j = 0; j < n; j++)
		out[j] = NAN;
}

/* ------------------------------------------------------------- table */

static const struct cg_ucodec ucodecs[] = {
    {"dense", "f32, f16, bf16: every element, in that dtype", dense_size,
     dense_encode, dense_bind, dense_decode},
    {"q", "q8, q4, q2[:sr]: blocks of 32 with an f16 scale; sr: "
          "stochastic rounding",
     block_size, block_encode, block_bind, dense_decode},
    {"topk", "topk:F or topk:k=N[,val=DTYPE][,chunk=C]: the largest of "
             "each tensor (or of each run of C)",
     topk_size, topk_encode, topk_bind, topk_decode},
    {"sign", "sign: one bit an element and the mean magnitude", sign_size,
     sign_encode, sign_bind, sign_decode},
    {"lowrank", "lowrank:R: matrices as rank-R factors (PowerSGD)",
     lowrank_size, lowrank_encode, lowrank_bind, lowrank_decode},
    {"masked", "masked: 64-bit fixed point plus pairwise masks (--mask)",
     masked_size, masked_encode, masked_bind, masked_decode},
};

enum { U_DENSE, U_BLOCK, U_TOPK, U_SIGN, U_LOWRANK, U_MASKED };

const char *
cg_ucodec_help(void)
{
	static char buf[1024];

	if (buf[0] == '\0') {
		size_t len = 0;
		for (size_t i = 0; i < sizeof(ucodecs) / sizeof(ucodecs[0]); i++)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len,
			                        "%s  %s", i ? "\n" : "",
			                        ucodecs[i].help);
	}
	return buf;
}

const char *
cg_uspec_name(const struct cg_uspec *s)
{
	if (s->codec == &ucodecs[U_BLOCK])
		return s->dtype == CG_Q8_0 ? "q8" : s->dtype == CG_Q4_0 ? "q4"
		                                                        : "q2";
	if (s->codec == &ucodecs[U_DENSE])
		return cg_dtype_name(s->dtype);
	return s->codec->name;
}

int
cg_uspec_lossless(const struct cg_uspec *s)
{
	return s->codec == &ucodecs[U_DENSE] && s->dtype == CG_F32;
}

int
cg_uspec_masked(const struct cg_uspec *s)
{
	return s->codec == &ucodecs[U_MASKED];
}

/* One "key=value" or bare "value" of a spec's parameters. */
static int
parse_param(struct cg_uspec *s, const char *p, const char *whole)
{
	const char *eq = strchr(p, '=');
	char *end;

	if (s->codec == &ucodecs[U_BLOCK] && strcmp(p, "sr") == 0) {
		s->sr = 1;
		return 0;
	}
	if (s->codec == &ucodecs[U_TOPK]) {
		if (eq == NULL || strncmp(p, "frac=", 5) == 0) {
			double v = strtod(eq ? eq + 1 : p, &end);
			if (*end != '\0' || !(v > 0) || v > 1)
				goto bad;
			s->frac = v;
			s->count = 0;
			return 0;
		}
		if (strncmp(p, "k=", 2) == 0) {
			unsigned long long v = strtoull(p + 2, &end, 10);
			if (*end != '\0' || v == 0 || p[2] == '-')
				goto bad;
			s->count = v;
			return 0;
		}
		if (strncmp(p, "val=", 4) == 0) {
			if (cg_dtype_parse(p + 4, &s->dtype) != 0 ||
			    cg_codec(s->dtype)->kind != CG_KIND_FLOAT)
				goto bad;
			return 0;
		}
		if (strncmp(p, "chunk=", 6) == 0) {
			unsigned long v = strtoul(p + 6, &end, 10);
			if (*end != '\0' || v < 2 || v > 65536 || p[6] == '-')
				goto bad;
			s->chunk = (uint32_t)v;
			return 0;
		}
	}
	if (s->codec == &ucodecs[U_LOWRANK] &&
	    (eq == NULL || strncmp(p, "r=", 2) == 0)) {
		long v = strtol(eq ? eq + 1 : p, &end, 10);
		if (*end != '\0' || v < 1 || v > MAX_RANK)
			goto bad;
		s->rank = (int)v;
		return 0;
	}
bad:
	return cg_seterr("codec '%.64s': bad parameter '%.32s'", whole, p);
}

int
cg_uspec_parse(const char *str, struct cg_uspec *s)
{
	static const struct {
		const char *name;
		int row;
		enum cg_dtype dt;
	} names[] = {
	    {"f32", U_DENSE, CG_F32},   {"f16", U_DENSE, CG_F16},
	    {"bf16", U_DENSE, CG_BF16}, {"q8", U_BLOCK, CG_Q8_0},
	    {"q4", U_BLOCK, CG_Q4_0},   {"q2", U_BLOCK, CG_Q2_0},
	    {"topk", U_TOPK, CG_F16},   {"sign", U_SIGN, CG_F32},
	    {"lowrank", U_LOWRANK, CG_F32}, {"masked", U_MASKED, CG_U64},
	};
	char buf[128], *colon, *p;
	size_t i;

	memset(s, 0, sizeof(*s));
	if (strlen(str) >= sizeof(buf))
		return cg_seterr("codec '%.32s...': too long", str);
	strcpy(buf, str);
	if ((colon = strchr(buf, ':')) != NULL)
		*colon = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(buf, names[i].name) == 0)
			break;
	if (i == sizeof(names) / sizeof(names[0]))
		return cg_seterr("unknown codec '%.32s' (f32, f16, bf16, q8, "
		                 "q4, q2, topk, sign, lowrank, masked)",
		                 buf);
	s->codec = &ucodecs[names[i].row];
	s->dtype = names[i].dt;
	if (names[i].row == U_TOPK)
		s->frac = 0.01;
	if (names[i].row == U_LOWRANK)
		s->rank = 4;
	for (p = colon ? colon + 1 : NULL; p;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		if (parse_param(s, p, str) != 0)
			return -1;
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

void
cg_uspec_format(const struct cg_uspec *s, char *buf, size_t n)
{
	const char *name = cg_uspec_name(s);

	if (s->codec == &ucodecs[U_TOPK]) {
		char ch[24] = "";
		if (s->chunk)
			snprintf(ch, sizeof(ch), ",chunk=%" PRIu32, s->chunk);
		if (s->count)
			snprintf(buf, n, "topk:k=%" PRIu64 ",val=%s%s", s->count,
			         cg_dtype_name(s->dtype), ch);
		else {
			/* the shortest decimal that reads back as frac */
			char fr[32];
			for (int prec = 6; prec <= 17; prec++) {
				snprintf(fr, sizeof(fr), "%.*g", prec, s->frac);
				if (strtod(fr, NULL) == s->frac)
					break;
			}
			snprintf(buf, n, "topk:%s,val=%s%s", fr,
			         cg_dtype_name(s->dtype), ch);
		}
	} else if (s->codec == &ucodecs[U_LOWRANK])
		snprintf(buf, n, "lowrank:%d", s->rank);
	else
		snprintf(buf, n, "%s%s", name, s->sr ? ":sr" : "");
}

int
cg_uspec_size(const struct cg_uspec *s, const struct cg_uview *v, int nv,
              uint64_t *bytes)
{
	uint64_t sum = 0;

	for (int i = 0; i < nv; i++) {
		uint64_t b;
		if (s->codec->size(s, &v[i], &b) != 0)
			return -1;
		if (b > UINT64_MAX - sum)
			return cg_seterr("update size overflows");
		sum += b;
	}
	*bytes = sum;
	return 0;
}

uint64_t
cg_uspec_state_floats(const struct cg_uspec *s, const struct cg_uview *v,
                      int nv)
{
	uint64_t n = 0;

	if (s->codec != &ucodecs[U_LOWRANK])
		return 0;
	for (int i = 0; i < nv; i++)
		n += lowrank_rank(s, &v[i]) * v[i].shape[1];
	return n;
}

int
cg_uspec_fit(struct cg_uspec *s, const struct cg_uview *v, int nv,
             uint64_t budget)
{
	uint64_t b;

	if (s->codec == &ucodecs[U_TOPK]) {
		/* the largest count per element that fits: bisect the
		 * fraction (sizes only grow with it) */
		double lo = 0, hi = 1;
		s->count = 0;
		for (int it = 0; it < 60; it++) {
			s->frac = (lo + hi) / 2;
			if (cg_uspec_size(s, v, nv, &b) != 0)
				return -1;
			if (b <= budget)
				lo = s->frac;
			else
				hi = s->frac;
		}
		s->frac = lo;
		if (lo == 0 || cg_uspec_size(s, v, nv, &b) != 0 || b > budget)
			goto small;
		return 0;
	}
	if (s->codec == &ucodecs[U_BLOCK]) {
		static const enum cg_dtype q[] = {CG_Q8_0, CG_Q4_0, CG_Q2_0};
		for (int i = 0; i < 3; i++) {
			s->dtype = q[i];
			if (cg_uspec_size(s, v, nv, &b) != 0)
				return -1;
			if (b <= budget)
				return 0;
		}
		goto small;
	}
	if (s->codec == &ucodecs[U_LOWRANK]) {
		for (s->rank = MAX_RANK; s->rank > 0; s->rank--) {
			if (cg_uspec_size(s, v, nv, &b) != 0)
				return -1;
			if (b <= budget)
				return 0;
		}
		s->rank = 1;
		goto small;
	}
	if (cg_uspec_size(s, v, nv, &b) != 0)
		return -1;
	if (b <= budget)
		return 0;
small:
	if (s->codec == &ucodecs[U_TOPK]) {
		s->frac = 0;
		s->count = 1;
	}
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
	if (s->codec == &ucodecs[U_TOPK]) {
		if (s->count)
			cJSON_AddNumberToObject(c, "k", (double)s->count);
		else
			cJSON_AddNumberToObject(c, "frac", s->frac);
		if (s->chunk)
			cJSON_AddNumberToObject(c, "chunk", s->chunk);
	}
	if (s->codec == &ucodecs[U_LOWRANK])
		cJSON_AddNumberToObject(c, "rank", s->rank);
	if (s->codec == &ucodecs[U_BLOCK])
		cJSON_AddBoolToObject(c, "stochastic", s->sr);
	cJSON_AddNumberToObject(c, "bytes", (double)bytes);
	cJSON_AddNumberToObject(c, "dense_bytes", (double)dense);
	if (s->codec == &ucodecs[U_DENSE])
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
	const cJSON *lay = cJSON_GetObjectItemCaseSensitive(f->manifest, "layout");
	struct cg_uview *v = NULL;
	int n = 0;

	if (c == NULL) {
		cg_uspec_parse("f32", s);
		if (tensor_layout(f, &v, &n) != 0)
			return -1;
	} else {
		if (get_spec(c, s) != 0)
			return -1;
		if (s->codec == &ucodecs[U_DENSE] && lay == NULL) {
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
	if (s->codec != &ucodecs[U_DENSE] || v->t[0]->dtype != CG_F32 ||
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
 * decodes to nan, and only its sum means anything: not checked.)  0, or -1 with a
 * message naming the view and the element.
 */
static int
check_sent(const struct cg_uspec *s, const struct cg_uspec *bs,
           const struct cg_uview *b, const float *x, float *sent,
           float *left)
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
		if (s->codec == &ucodecs[U_LOWRANK] && e->lowrank_q) {
			warm = e->lowrank_q + woff;
			woff += lowrank_rank(s, &v[i]) * v[i].shape[1];
		}
		if (s->codec->encode(s, &v[i], x + v[i].off, f, e, warm) != 0) {
			char why[256];
			snprintf(why, sizeof(why), "%s", cg_errmsg());
			/* the element codecs' messages do not name the view */
			if (strncmp(why, "tensor ", 7) == 0)
				return cg_seterr("codec %s: %s", cg_uspec_name(s),
				                 why);
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
