/*
 * exchange/codec/topk_codec.c - the top-k update codec: the elements of
 * largest magnitude of each view (or of each run of C elements), as
 * indices and values.
 *
 * A view is NAME.idx, strictly increasing indices (u32; within a run,
 * u8 or u16), and NAME.val, the values in f16 or any float dtype.  The
 * selection is exact: the k largest magnitudes, ties taken in order of
 * position, whatever the path that finds them.  Fitting a budget bisects
 * the fraction kept.
 *
 * With val=lut2 NAME.val is u8: a table of four f32 (16 bytes, each
 * little-endian), then the values as 2-bit codes into it, four to a byte
 * (entry p in bits 2(p mod 4) of byte 16 + p / 4): the quantizer of
 * SparseLoCo (Sarfi et al., 2025).  The kept values' mean m and standard
 * deviation s set four bins 1.5 s wide around m (six deviations across
 * the four; a value beyond the outer bins is taken into them), and each
 * bin's entry is the mean of the values it took (m where it took none):
 * the table is fitted to the values, so a view's large positive and
 * negative values, which top-k keeps and a block scale would squeeze into
 * one side, keep both signs.  The table lives in the values' tensor, not
 * one of its own: a tensor costs a small file more in its manifest entry
 * than the table's 16 bytes.
 *
 * With idx=gap (chunked only) NAME.idx holds each run's first index and
 * then each index's difference from the one before it in the run (so at
 * least 1): the same entries, in numbers a compressor finds small (k 64
 * of 4096 averages gaps of 64, whose high byte is mostly 0: zstd makes a
 * SparseLoCo file's indices 14.1 KB as indices, 8.3 KB as gaps).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "exchange/codec/codec.h"

#define CHUNK 256 /* values decoded at a time on the stack */

static uint64_t
bytes_of(enum cg_dtype t, uint64_t n)
{
	uint64_t b = 0;

	cg_dtype_bytes(t, n, &b);
	return b;
}

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

/* Bytes of k values under lut2: the table of LUT_N f32, then the codes. */
#define LUT_N 4
#define LUT_BYTES(k) (4 * LUT_N + ((k) + 3) / 4)

static int
topk_size(const struct cg_uspec *s, const struct cg_uview *v, uint64_t *b)
{
	uint64_t k = topk_k(s, v->n);

	*b = bytes_of(topk_idx_dtype(s), k) +
	     (s->lut ? LUT_BYTES(k) : bytes_of(s->dtype, topk_nval(s, k)));
	return 0;
}

/* lut2's table entry i of a .val tensor's bytes p, on any host. */
static float
lut_get(const unsigned char *p, int i)
{
	uint32_t u = 0;
	float x;

	for (int b = 3; b >= 0; b--)
		u = u << 8 | p[4 * i + b];
	memcpy(&x, &u, 4);
	return x;
}

/*
 * The kept values val [k] (k >= 1) as lut2's bytes out [LUT_BYTES(k)]:
 * the table, then the codes (the file's header says the rule).  Sums in
 * double.
 */
static void
lut2_encode(const float *val, uint64_t k, unsigned char *out)
{
	double m = 0, ss = 0, step, sum[LUT_N] = {0};
	uint64_t cnt[LUT_N] = {0};
	unsigned char *code = out + 4 * LUT_N;

	for (uint64_t p = 0; p < k; p++)
		m += val[p];
	m /= (double)k;
	for (uint64_t p = 0; p < k; p++)
		ss += ((double)val[p] - m) * ((double)val[p] - m);
	step = k > 1 ? 1.5 * sqrt(ss / (double)(k - 1)) : 0;
	if (!(step > 0) || !isfinite(step))
		step = 1;
	memset(out, 0, LUT_BYTES(k));
	for (uint64_t p = 0; p < k; p++) {
		double c = ((double)val[p] - m) / step;
		int b = c < -2 ? 0 : c >= 1.5 ? 3 : (int)floor(c + 2.5);
		b = b < 0 ? 0 : b > 3 ? 3 : b;
		code[p / 4] |= (unsigned char)(b << (2 * (p % 4)));
		sum[b] += (double)val[p] - m;
		cnt[b]++;
	}
	for (int b = 0; b < LUT_N; b++) {
		float t = (float)(cnt[b] ? m + sum[b] / (double)cnt[b] : m);
		uint32_t u;
		memcpy(&u, &t, 4);
		for (int i = 0; i < 4; i++)
			out[4 * b + i] = (unsigned char)(u >> 8 * i);
	}
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
kth_key(const float *x, uint64_t n, uint64_t k, uint32_t *out, uint64_t *ties)
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
small_top(const float *x, uint64_t n, uint64_t kk, uint32_t *key, uint32_t *at)
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
		uint16_t h = (uint16_t)v;
		memcpy(p + 2 * i, &h, 2);
	} else
		cg_ucodec_put32(p + 4 * i, v);
}

static uint32_t
get_index(const unsigned char *p, enum cg_dtype t, uint64_t i)
{
	if (t == CG_U8)
		return p[i];
	if (t == CG_U16) {
		uint16_t h;
		memcpy(&h, p + 2 * i, 2);
		return h;
	}
	return cg_ucodec_get32(p + 4 * i);
}

static int
topk_encode(const struct cg_uspec *s, const struct cg_uview *v, const float *x,
            struct cg_file *f, struct cg_uenc *e, float *warm)
{
	const uint64_t k = topk_k(s, v->n), nval = topk_nval(s, k);
	const uint64_t ncode = LUT_BYTES(k);
	const enum cg_dtype it = topk_idx_dtype(s);
	char name[CG_MAX_NAME];
	struct cg_tensor *ti, *tv;
	uint32_t *at = NULL;
	float *val = NULL;
	int rc = -1;

	(void)e;
	(void)warm;
	if (cg_ucodec_refuse_nonfinite(v, x) != 0)
		return -1;
	if (cg_ucodec_suffixed(name, v->name, ".idx") != 0 ||
	    (ti = cg_file_add_zero(f, name, it, 1, &k)) == NULL ||
	    cg_ucodec_suffixed(name, v->name, ".val") != 0 ||
	    (tv = s->lut
	              ? cg_file_add_zero(f, name, CG_U8, 1, &ncode)
	              : cg_file_add_zero(f, name, s->dtype, 1, &nval)) == NULL)
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
				uint32_t prev = s->gap && m ? at[p + m - 1] : 0;
				put_index(ti->data, it, p + m, at[p + m] - prev);
				val[p + m] = x[lo + at[p + m]];
			}
			p += kk;
		}
		free(keys);
	}
	if (s->lut) {
		lut2_encode(val, k, tv->data);
		rc = 0;
	} else
		rc = cg_codec(s->dtype)->encode(tv->data, val, nval);
out:
	free(at);
	free(val);
	return rc;
}

static int
topk_bind(const struct cg_uspec *s, struct cg_uview *v, const struct cg_file *f)
{
	const uint64_t k = topk_k(s, v->n), nval = topk_nval(s, k);
	const enum cg_dtype it = topk_idx_dtype(s);
	const struct cg_tensor *ti, *tv;
	const unsigned char *p;
	const uint64_t C = s->chunk ? s->chunk : v->n;
	const uint64_t kc = s->chunk ? topk_kc(s) : k, ncode = LUT_BYTES(k);

	if ((ti = cg_ucodec_need(f, v->name, ".idx", it, 1, &k)) == NULL ||
	    (tv = s->lut ? cg_ucodec_need(f, v->name, ".val", CG_U8, 1, &ncode)
	                 : cg_ucodec_need(f, v->name, ".val", s->dtype, 1,
	                                  &nval)) == NULL)
		return -1;
	for (int b = 0; s->lut && b < LUT_N; b++)
		if (!isfinite(lut_get(tv->data, b)))
			return cg_seterr("tensor %s: table entry %d is not "
			                 "finite",
			                 tv->name, b);
	p = ti->data;
	/* within each run, strictly increasing and inside the run (gaps:
	 * their sum, each after the first at least 1) */
	for (uint64_t i = 0, at = 0; i < k; i++) {
		uint64_t run = kc ? i / kc : 0, lo = run * C;
		uint64_t len = v->n - lo < C ? v->n - lo : C;
		uint64_t prev = at;
		uint32_t got = get_index(p, it, i);
		at = s->gap && i % kc != 0 ? prev + got : got;
		if (at >= len)
			return cg_seterr("tensor %s: index %" PRIu64
			                 " outside its %" PRIu64 " elements",
			                 ti->name, at, len);
		if (i % kc != 0 && at <= prev)
			return cg_seterr("tensor %s: index %" PRIu64
			                 " at %" PRIu64
			                 " repeated or out of order",
			                 ti->name, at, i);
	}
	if (!s->lut && cg_ucodec_check_finite(tv) != 0)
		return -1;
	v->k = k;
	v->t[0] = ti;
	v->t[1] = tv;
	return 0;
}

/* Entry q's index within its run: of gaps, the sum from the run's first
 * entry (runs hold at most kc <= chunk entries). */
static uint64_t
index_at(const struct cg_uspec *s, const unsigned char *idx, enum cg_dtype it,
         uint64_t kc, uint64_t q)
{
	uint64_t at = 0;

	if (!s->gap)
		return get_index(idx, it, q);
	for (uint64_t i = q - q % kc; i <= q; i++)
		at += get_index(idx, it, i);
	return at;
}

/* The first entry whose element (its run's start + its index) is >= at:
 * entries are in increasing element order.  Of gaps, the run's entries
 * are summed in turn (at most kc). */
static uint64_t
lower_bound(const struct cg_uspec *s, const struct cg_uview *v, uint64_t at)
{
	const enum cg_dtype it = topk_idx_dtype(s);
	const unsigned char *idx = v->t[0]->data;
	const uint64_t C = s->chunk, kc = C ? topk_kc(s) : 0;
	uint64_t lo = 0, hi = v->k;

	if (s->gap) {
		uint64_t q = at / C * kc, el = at / C * C;
		for (; q < v->k && q < (at / C + 1) * kc; q++) {
			el += get_index(idx, it, q);
			if (el >= at)
				return q;
		}
		return q < v->k ? q : v->k;
	}
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
	uint64_t p0, p1, at = 0;
	float buf[CHUNK];

	memset(out, 0, n * sizeof(float));
	if (v->k == 0)
		return;
	p0 = lower_bound(s, v, lo);
	p1 = lower_bound(s, v, lo + n);
	/* of gaps, the index before p0 in its run, which p0's adds to */
	if (s->gap && p0 < p1 && p0 % kc != 0)
		at = index_at(s, idx, it, kc, p0 - 1);
	for (uint64_t p = p0; p < p1; p += CHUNK) {
		size_t m = p1 - p < CHUNK ? (size_t)(p1 - p) : CHUNK;
		if (s->lut) {
			const unsigned char *c = v->t[1]->data;
			float tab[LUT_N];
			for (int b = 0; b < LUT_N; b++)
				tab[b] = lut_get(c, b);
			c += 4 * LUT_N;
			for (size_t j = 0; j < m; j++) {
				uint64_t q = p + j;
				buf[j] = tab[(c[q / 4] >> (2 * (q % 4))) & 3];
			}
		} else
			cg_tensor_decode(v->t[1], p, m, buf);
		for (size_t j = 0; j < m; j++) {
			uint64_t q = p + j, g = get_index(idx, it, q);
			at = s->gap && q % kc != 0 ? at + g : g;
			out[at + (C ? q / kc * C : 0) - lo] = buf[j];
		}
	}
}

/* ------------------------------------------------------------- spec */

static void
topk_defaults(struct cg_uspec *s)
{
	s->frac = 0.01;
}

static int
topk_param(struct cg_uspec *s, const char *p)
{
	const char *eq = strchr(p, '=');
	char *end;

	if (eq == NULL || strncmp(p, "frac=", 5) == 0) {
		double v = strtod(eq ? eq + 1 : p, &end);
		if (*end != '\0' || !(v > 0) || v > 1)
			return -1;
		s->frac = v;
		s->count = 0;
		return 0;
	}
	if (strncmp(p, "k=", 2) == 0) {
		unsigned long long v = strtoull(p + 2, &end, 10);
		if (*end != '\0' || v == 0 || p[2] == '-')
			return -1;
		s->count = v;
		return 0;
	}
	if (strcmp(p, "val=lut2") == 0) {
		s->lut = 1;
		s->dtype = CG_U8;
		return 0;
	}
	if (strncmp(p, "val=", 4) == 0) {
		s->lut = 0;
		if (cg_dtype_parse(p + 4, &s->dtype) != 0 ||
		    cg_codec(s->dtype)->kind != CG_KIND_FLOAT)
			return -1;
		return 0;
	}
	if (strcmp(p, "idx=gap") == 0) {
		s->gap = 1;
		return 0;
	}
	if (strncmp(p, "chunk=", 6) == 0) {
		unsigned long v = strtoul(p + 6, &end, 10);
		if (*end != '\0' || v < 2 || v > 65536 || p[6] == '-')
			return -1;
		s->chunk = (uint32_t)v;
		return 0;
	}
	return -1;
}

static void
topk_format(const struct cg_uspec *s, const char *name, char *buf, size_t n)
{
	char ch[40] = "";
	const char *vn = s->lut ? "lut2" : cg_dtype_name(s->dtype);

	(void)name;
	if (s->chunk)
		snprintf(ch, sizeof(ch), ",chunk=%" PRIu32 "%s", s->chunk,
		         s->gap ? ",idx=gap" : "");
	if (s->count)
		snprintf(buf, n, "topk:k=%" PRIu64 ",val=%s%s", s->count, vn,
		         ch);
	else {
		/* the shortest decimal that reads back as frac */
		char fr[32];
		for (int prec = 6; prec <= 17; prec++) {
			snprintf(fr, sizeof(fr), "%.*g", prec, s->frac);
			if (strtod(fr, NULL) == s->frac)
				break;
		}
		snprintf(buf, n, "topk:%s,val=%s%s", fr, vn, ch);
	}
}

static int
topk_manifest(const struct cg_uspec *s, cJSON *c)
{
	if (s->count)
		cJSON_AddNumberToObject(c, "k", (double)s->count);
	else
		cJSON_AddNumberToObject(c, "frac", s->frac);
	if (s->chunk)
		cJSON_AddNumberToObject(c, "chunk", s->chunk);
	if (s->gap)
		cJSON_AddStringToObject(c, "idx", "gap");
	return 0;
}

/* The largest count per element that fits: the fraction bisected (sizes
 * only grow with it); at the smallest, one element a view. */
static int
topk_fit(struct cg_uspec *s, const struct cg_uview *v, int nv, uint64_t budget)
{
	double lo = 0, hi = 1;
	uint64_t b;

	s->count = 0;
	for (int it = 0; it < 60; it++) {
		s->frac = (lo + hi) / 2;
		if (cg_ucodec_bytes(s, v, nv, &b) != 0)
			return -1;
		if (b <= budget)
			lo = s->frac;
		else
			hi = s->frac;
	}
	s->frac = lo;
	if (lo == 0 || cg_ucodec_bytes(s, v, nv, &b) != 0 || b > budget) {
		s->frac = 0;
		s->count = 1;
		return 1;
	}
	return 0;
}

const struct cg_ucodec cg_ucodec_topk = {
    .name = "topk",
    .help = "topk:F or topk:k=N[,val=DTYPE|lut2][,chunk=C[,idx=gap]]: the "
            "largest of each tensor (or of each run of C)",
    .names = {{"topk", CG_F16}},
    .defaults = topk_defaults,
    .param = topk_param,
    .format = topk_format,
    .manifest = topk_manifest,
    .fit = topk_fit,
    .size = topk_size,
    .encode = topk_encode,
    .bind = topk_bind,
    .decode = topk_decode,
};
