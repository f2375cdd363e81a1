/*
 * test_codec.c - the codec table against stored vectors and its own rules.
 *
 * tests/codec-vectors/DTYPE.txt hold what independent implementations
 * (numpy's float16, exact rounding in Python, the gguf package's ggml
 * quantizers; see gen.py there) say each row must give: every encode and
 * decode there is checked bit for bit.  Then round trips, the edge cases
 * (nan, inf, -0, subnormals, saturation), the rules for block sizes and
 * byte lengths, and slices of a tensor against the whole.  Exit 0 pass, 1
 * fail (automake convention).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"

#define TEST_NAME "test_codec"
#include "check.h"

static float
from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint32_t
to_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

/* ------------------------------------------------------ stored vectors */

/* Parse hex bytes from *s up to a space, '=' or the end into out (at most
 * max); returns the count, or -1. */
static int
parse_bytes(char **s, unsigned char *out, int max)
{
	int n = 0;

	while (**s == ' ')
		(*s)++;
	while ((*s)[0] && (*s)[0] != ' ' && (*s)[0] != '\n') {
		unsigned v;
		if (n == max || sscanf(*s, "%2x", &v) != 1)
			return -1;
		out[n++] = (unsigned char)v;
		*s += 2;
	}
	return n;
}

/* n f32 bit patterns from *s into out; 0 or -1. */
static int
parse_f32(char **s, float *out, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		char *end;
		unsigned long u = strtoul(*s, &end, 16);
		if (end == *s || u > 0xffffffffUL)
			return -1;
		out[i] = from_bits((uint32_t)u);
		*s = end;
	}
	return 0;
}

static int
expect_eq(char **s)
{
	while (**s == ' ')
		(*s)++;
	if (**s != '=')
		return -1;
	(*s)++;
	return 0;
}

/* Check one dtype against its stored file; the number of checks made. */
static int
test_vectors(const char *dir, enum cg_dtype t)
{
	const struct cg_codec *c = cg_codec(t);
	char path[1024], line[8192];
	int checks = 0, lineno = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/tests/codec-vectors/%s.txt", dir,
	         c->name);
	if ((fp = fopen(path, "r")) == NULL) {
		CHECK(0, "%s: cannot open", path);
		return 0;
	}
	while (fgets(line, sizeof(line), fp)) {
		float x[32], y[32];
		unsigned char b[64], want[64];
		char *s = line + 4;
		int nb;

		lineno++;
		if (line[0] == '#')
			continue;
		memset(b, 0xab, sizeof(b));
		if (strncmp(line, "enc ", 4) == 0) {
			if (parse_f32(&s, x, c->block) != 0 ||
			    expect_eq(&s) != 0 ||
			    (nb = parse_bytes(&s, want, 64)) != (int)c->bytes) {
				CHECK(0, "%s:%d: bad line", path, lineno);
				continue;
			}
			CHECK(c->encode(b, x, c->block) == 0, "%s:%d: %s", path,
			      lineno, cg_errmsg());
			/* the vectors are a file's bytes: a plain type's
			 * host words turned little-endian, as its writer
			 * turns them */
			cg_le_words(b, c->bytes, cg_dtype_word(t));
			CHECK(memcmp(b, want, c->bytes) == 0,
			      "%s:%d: %s encode of %g (x[0]) gives bytes "
			      "%02x%02x..., "
			      "not %02x%02x...",
			      path, lineno, c->name, (double)x[0], b[0], b[1],
			      want[0], want[1]);
		} else if (strncmp(line, "dec ", 4) == 0) {
			if ((nb = parse_bytes(&s, b, 64)) != (int)c->bytes ||
			    expect_eq(&s) != 0 ||
			    parse_f32(&s, x, c->block) != 0) {
				CHECK(0, "%s:%d: bad line", path, lineno);
				continue;
			}
			cg_le_words(b, c->bytes, cg_dtype_word(t));
			c->decode(y, b, c->block);
			for (unsigned i = 0; i < c->block; i++)
				CHECK(to_bits(y[i]) == to_bits(x[i]),
				      "%s:%d: %s decode element %u: %08x, "
				      "not %08x",
				      path, lineno, c->name, i, to_bits(y[i]),
				      to_bits(x[i]));
		} else if (strncmp(line, "nan ", 4) == 0) {
			if (parse_f32(&s, x, c->block) != 0) {
				CHECK(0, "%s:%d: bad line", path, lineno);
				continue;
			}
			CHECK(c->encode(b, x, c->block) == -1,
			      "%s:%d: %s encode accepted what it must refuse",
			      path, lineno, c->name);
			for (int i = 0; i < 64; i++)
				CHECK(b[i] == 0xab,
				      "%s:%d: refused encode wrote byte %d",
				      path, lineno, i);
		} else {
			CHECK(0, "%s:%d: bad line", path, lineno);
			continue;
		}
		checks++;
	}
	fclose(fp);
	CHECK(checks >= 100, "%s: only %d checks", path, checks);
	return checks;
}

/* ----------------------------------------------------------- the table */

static void
test_table(void)
{
	for (int i = 0; i < CG_NDTYPES; i++) {
		const struct cg_codec *c = cg_codec((enum cg_dtype)i);
		enum cg_dtype back;
		uint64_t n;

		CHECK(c && c->name && c->decode && c->encode, "row %d", i);
		if (c == NULL)
			continue;
		CHECK(cg_dtype_parse(c->name, &back) == 0 && (int)back == i,
		      "parse(name(%d))", i);
		CHECK(strcmp(cg_dtype_name((enum cg_dtype)i), c->name) == 0,
		      "name %d", i);
		CHECK((c->to_u64 != NULL) == (c->kind != CG_KIND_FLOAT),
		      "%s: to_u64 exactly for integers", c->name);
		CHECK(cg_dtype_bytes((enum cg_dtype)i, 3 * c->block, &n) == 0 &&
		          n == 3 * c->bytes,
		      "%s: bytes of 3 blocks", c->name);
	}
	CHECK(cg_codec(CG_NDTYPES) == NULL, "row past the end");
	CHECK(strcmp(cg_dtype_name(CG_NDTYPES), "?") == 0, "name past the end");
	enum cg_dtype t;
	CHECK(cg_dtype_parse("f128", &t) == -1 &&
	          strstr(cg_errmsg(), "unknown dtype") != NULL,
	      "unknown name: %s", cg_errmsg());
	uint64_t n;
	CHECK(cg_dtype_bytes(CG_Q8_0, 33, &n) == -1 &&
	          strstr(cg_errmsg(), "multiple of 32") != NULL,
	      "q8_0 of 33: %s", cg_errmsg());
	CHECK(cg_dtype_bytes(CG_Q4_0, 64, &n) == 0 && n == 36, "q4_0 of 64");
	CHECK(cg_dtype_bytes(CG_U64, UINT64_MAX / 4, &n) == -1, "overflow");
	CHECK(cg_dtype_bytes(CG_F16, 0, &n) == 0 && n == 0, "empty");
}

/* ------------------------------------------------- half, against double */

/* The half nearest x (ties to even), from its value in double: the
 * exponent of the spacing, the scaled value rounded by nearbyint (the
 * default mode rounds to nearest even), then the half's fields. */
static uint16_t
ref_half(float x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	double a = fabs((double)x);

	if (isnan(x))
		return sign | 0x7e00;
	if (a >= 65520.0) /* halfway to 2^16 and beyond: inf */
		return sign | 0x7c00;
	int e;
	frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
	if (e < -13)
		e = -13; /* subnormals: the spacing of 2^-14's binade */
	double q = nearbyint(ldexp(a, 11 - e)); /* 11 bits: 1 + 10 */
	if (a == 0 || q == 0)
		return sign;
	int he = e - 1 + 15; /* the biased exponent of 2^(e-1) */
	if (q >= 2048) {     /* rounded up into the next binade */
		q /= 2;
		he++;
	}
	if (he <= 0 || q < 1024) /* subnormal: q counts 2^-24 */
		return sign | (uint16_t)q;
	return sign | (uint16_t)(he << 10) | (uint16_t)((int)q - 1024);
}

/* The host word at b: a plain type's element as the codec table holds
 * it. */
static uint16_t
host16(const unsigned char *b)
{
	uint16_t h;

	memcpy(&h, b, 2);
	return h;
}

/* Every 4093rd float bit pattern, and every float near
 * each half and each midpoint between halves, encodes as the double
 * reference rounds it; every half decodes to its value in double. */
static void
test_half_reference(void)
{
	const struct cg_codec *f16 = cg_codec(CG_F16);
	unsigned char b[2];
	long bad = 0;

	for (uint64_t u = 0; u <= 0xffffffffu; u += 4093) {
		uint32_t v = (uint32_t)u;
		float x;
		memcpy(&x, &v, 4);
		f16->encode(b, &x, 1);
		uint16_t h = host16(b);
		if (h != ref_half(x) && bad++ < 5)
			CHECK(0, "f16 of %08x: %04x, the reference %04x", v, h,
			      ref_half(x));
	}
	for (uint32_t p = 0; p < 0x7c00; p++) {
		/* the half's value, and its midpoint with the next */
		int e = (int)(p >> 10), m = (int)(p & 0x3ff);
		double val = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
		double mid = val + (e ? ldexp(1, e - 26) : ldexp(1, -25));
		float x;
		uint16_t hp = (uint16_t)p;
		f16->decode(&x, &hp, 1);
		CHECK((double)x == val, "f16 %04x decodes to %.17g, not %.17g",
		      p, (double)x, val);
		for (int side = -1; side <= 1; side++) {
			float y = nextafterf((float)mid, side < 0 ? 0.0f
			                                          : INFINITY);
			float z = side == 0 ? (float)mid : y;
			for (int sg = 0; sg < 2; sg++) {
				float w = sg ? -z : z;
				f16->encode(b, &w, 1);
				uint16_t h = host16(b);
				if (h != ref_half(w) && bad++ < 5)
					CHECK(0, "f16 of %a: %04x, the "
					      "reference %04x", (double)w, h,
					      ref_half(w));
			}
		}
	}
	CHECK(bad == 0, "f16: %ld conversions unlike the reference", bad);
}

/* ---------------------------------------------------------- round trips */

static void
test_roundtrips(void)
{
	const struct cg_codec *f16 = cg_codec(CG_F16);
	const struct cg_codec *bf16 = cg_codec(CG_BF16);

	/* every non-nan half pattern decodes to a float that encodes back
	 * to it (both halves are subsets of f32) */
	for (uint32_t p = 0; p < 65536; p++) {
		unsigned char b[2] = {(unsigned char)p,
		                      (unsigned char)(p >> 8)};
		unsigned char e[2];
		float x;

		cg_le_words(b, 2, 2); /* p as a host word */

		f16->decode(&x, b, 1);
		if (!isnan(x)) {
			f16->encode(e, &x, 1);
			CHECK(memcmp(b, e, 2) == 0, "f16 %04x round trip", p);
		} else {
			CHECK((p & 0x7c00) == 0x7c00 && (p & 0x3ff),
			      "f16 %04x is not nan", p);
		}
		bf16->decode(&x, b, 1);
		if (!isnan(x)) {
			bf16->encode(e, &x, 1);
			CHECK(memcmp(b, e, 2) == 0, "bf16 %04x round trip", p);
		}
	}
	/* small integer types: every value decodes exactly and back */
	static const enum cg_dtype small[] = {CG_I8, CG_U8, CG_U16};
	for (size_t k = 0; k < 3; k++) {
		const struct cg_codec *c = cg_codec(small[k]);
		uint32_t top = c->bytes == 1 ? 256 : 65536;
		for (uint32_t p = 0; p < top; p++) {
			unsigned char b[2] = {(unsigned char)p,
			                      (unsigned char)(p >> 8)};
			unsigned char e[2] = {0, 0};
			uint64_t u;
			float x;
			c->decode(&x, b, 1);
			c->to_u64(&u, b, 1);
			CHECK(c->encode(e, &x, 1) == 0 &&
			          memcmp(b, e, c->bytes) == 0,
			      "%s %u round trip", c->name, p);
			CHECK(c->kind == CG_KIND_SINT ? (double)(int64_t)u == x
			                              : (double)u == x,
			      "%s %u: to_u64 and decode agree", c->name, p);
		}
	}
	/*
	 * Quantized: each element comes back within the rounding the format
	 * allows.  q8_0: |q d - x| <= d/2 with d = max|x|/127; the scale is
	 * stored in f16, off by e <= max(d 2^-11, 2^-25) (relative rounding,
	 * or half the spacing 2^-24 of f16's subnormals), which moves q d by
	 * at most 127 e; the float products add 2^-23 relative.  q4_0: the
	 * element of opposite sign to the extreme can need q = 16, clamped
	 * to 15, an error of up to d (not d/2); the f16 scale moves it by at
	 * most 8 e.
	 */
	struct cg_rng r;
	cg_rng_seed(&r, 7);
	for (int trial = 0; trial < 200; trial++) {
		float x[32], y[32], amax = 0, max = 0;
		unsigned char b[34];
		float scale = powf(10.0f, (float)(trial % 11) - 6); /* to 1e4 */

		for (int j = 0; j < 32; j++) {
			x[j] = cg_rng_normal(&r) * scale;
			if (fabsf(x[j]) > amax) {
				amax = fabsf(x[j]);
				max = x[j];
			}
		}
		const struct cg_codec *q8 = cg_codec(CG_Q8_0);
		const struct cg_codec *q4 = cg_codec(CG_Q4_0);
		double d8 = amax / 127.0, d4 = fabs(max) / 8.0;
		double e8 = fmax(d8 * 0x1p-11, 0x1p-25);
		double e4 = fmax(d4 * 0x1p-11, 0x1p-25);
		CHECK(q8->encode(b, x, 32) == 0, "q8_0 encode");
		q8->decode(y, b, 32);
		for (int j = 0; j < 32; j++)
			CHECK(fabs(y[j] - x[j]) <=
			          d8 / 2 + 127 * e8 + 0x1p-23 * fabs(x[j]),
			      "q8_0 trial %d element %d: %g for %g", trial, j,
			      (double)y[j], (double)x[j]);
		CHECK(q4->encode(b, x, 32) == 0, "q4_0 encode");
		q4->decode(y, b, 32);
		for (int j = 0; j < 32; j++)
			CHECK(fabs(y[j] - x[j]) <=
			          d4 + 8 * e4 + 0x1p-22 * fabs(x[j]),
			      "q4_0 trial %d element %d: %g for %g", trial, j,
			      (double)y[j], (double)x[j]);
		/* q4_1: |x - y| <= d/2 from the rounding with d = (max - min)
		 * / 15, plus 15 e from the f16 scale and the f16 minimum's own
		 * rounding em; the float steps add 2^-21 of the block's span. */
		const struct cg_codec *q41 = cg_codec(CG_Q4_1);
		double mn = x[0], mx = x[0];
		for (int j = 1; j < 32; j++) {
			mn = fmin(mn, x[j]);
			mx = fmax(mx, x[j]);
		}
		double d1 = (mx - mn) / 15, e1 = fmax(d1 * 0x1p-11, 0x1p-25);
		double em = fmax(fabs(mn) * 0x1p-11, 0x1p-25);
		unsigned char b1[20];
		CHECK(q41->encode(b1, x, 32) == 0, "q4_1 encode");
		q41->decode(y, b1, 32);
		for (int j = 0; j < 32; j++)
			CHECK(fabs(y[j] - x[j]) <= d1 / 2 + 15 * e1 + em +
			                                0x1p-21 * (mx - mn +
			                                           fabs(mn)),
			      "q4_1 trial %d element %d: %g for %g", trial, j,
			      (double)y[j], (double)x[j]);
	}
}

/* ------------------------------------------------------- fitted blocks */

/* The weighted squared error of a decoded block y of x (cg.h's
 * encode_fit: w = |x| + the block's root mean square). */
static double
fit_err(const float *x, const float *y)
{
	double ms = 0, e = 0;

	for (int j = 0; j < 32; j++)
		ms += (double)x[j] * x[j];
	float rms = (float)sqrt(ms / 32);
	for (int j = 0; j < 32; j++) {
		double d = (double)y[j] - x[j];
		e += (fabsf(x[j]) + rms) * d * d;
	}
	return e;
}

static void
test_fit(void)
{
	static const enum cg_dtype types[] = {CG_Q4_0, CG_Q4_1};
	/* what the fit measured here leaves of the reference's error
	 * (q4_0 0.970, q4_1 0.797), with room */
	static const double most[] = {0.99, 0.9};
	struct cg_rng r;

	for (size_t k = 0; k < 2; k++) {
		const struct cg_codec *c = cg_codec(types[k]);
		double tref = 0, tfit = 0;
		int worse = 0, better = 0;

		cg_rng_seed(&r, 11);
		for (int trial = 0; trial < 400; trial++) {
			float x[32], y[32], z[32];
			unsigned char a[20], b[20], b2[20];
			float scale = powf(10.0f, (float)(trial % 9) - 5);

			for (int j = 0; j < 32; j++) {
				x[j] = cg_rng_normal(&r) * scale;
				if (trial % 3 == 1) /* skewed blocks */
					x[j] = fabsf(x[j]) + 0.3f * scale;
				if (trial % 5 == 2 && j == 7) /* an outlier */
					x[j] *= 8;
			}
			CHECK(c->encode(a, x, 32) == 0 &&
			          c->encode_fit(b, x, 32) == 0 &&
			          c->encode_fit(b2, x, 32) == 0,
			      "%s encode", c->name);
			CHECK(memcmp(b, b2, c->bytes) == 0,
			      "%s fitted bytes a function of the block",
			      c->name);
			c->decode(y, a, 32);
			c->decode(z, b, 32);
			double er = fit_err(x, y), ef = fit_err(x, z);
			tref += er / (scale * scale * scale);
			tfit += ef / (scale * scale * scale);
			worse += ef > er;
			better += ef < er;
		}
		char what[128];
		snprintf(what, sizeof(what),
		         "%s fitted: no block worse than the reference, %d of "
		         "400 better, weighted error %.3f of the reference's",
		         c->name, better, tfit / tref);
		expect(worse == 0 && better > 200 && tfit < most[k] * tref, what);
	}
	/* the same refusals as encode */
	float bad[32] = {0};
	unsigned char q[20];
	bad[3] = NAN;
	expect(cg_codec(CG_Q4_1)->encode_fit(q, bad, 32) == -1 &&
	           cg_codec(CG_Q4_0)->encode_fit(q, bad, 32) == -1,
	       "fitted encoders refuse nan");
	bad[3] = 70000.0f;
	expect(cg_codec(CG_Q4_1)->encode_fit(q, bad, 32) == -1,
	       "q4_1 fitted refuses a value beyond f16");
	expect(cg_codec(CG_Q8_0)->encode_fit == NULL &&
	           cg_codec(CG_F16)->encode_fit == NULL,
	       "only q4_0 and q4_1 have a fitted encoder");
}

/* q4_0's and q4_1's fitted encoders work their starts out side by side;
 * their bytes must be those of the loop their definition states, block
 * for block: blocks at every scale, skewed, with outliers, on the grid,
 * all zero or all but one, tiny (scales f16 holds as subnormals or not
 * at all) and large enough that a start's scale passes f16's range (the
 * encoder then fits the block by the loop). */
static void
test_fit_loop(void)
{
	enum { N = 20000 };
	static float x[N * 32];
	static unsigned char a[N * 20], b[N * 20];
	static const enum cg_dtype types[] = {CG_Q4_0, CG_Q4_1};
	int (*loop[])(void *, const float *, size_t) = {
		cg_q4_0_encode_fit_loop, cg_q4_1_encode_fit_loop};
	struct cg_rng r;

	cg_rng_seed(&r, 29);
	for (int i = 0; i < N; i++) {
		float *v = x + (size_t)i * 32;
		float scale = powf(10.0f, (float)(i % 13) - 9);
		int kind = (i / 13) % 8;
		for (int j = 0; j < 32; j++) {
			float g = cg_rng_normal(&r);
			switch (kind) {
			case 0: v[j] = g * scale; break;
			case 1: v[j] = fabsf(g) * scale + 0.3f * scale; break;
			case 2: v[j] = j == 5 ? 40 * scale : g * scale; break;
			case 3: v[j] = (float)((int)(g * 4) % 8) * scale; break;
			case 4: v[j] = j == 9 ? g * scale : 0; break;
			case 5: v[j] = 0; break;
			case 6: v[j] = g * 1e-7f; break;
			default: /* q4_0: a start's scale max / 6 beyond f16 */
				v[j] = j == 0 ? -500000.0f : g * 60000.0f;
				if (i % 4 == 1) /* q4_1: a span near f16's */
					v[j] = j == 0 ? -60000.0f : fabsf(g) * 8000.0f;
				if (i % 4 == 3) /* q4_1: a refit past it */
					v[j] = (j % 2 ? 65504.0f : -65504.0f) *
					       (1 - fabsf(g) / 64);
				break;
			}
		}
	}
	for (int t = 0; t < 2; t++) {
		const struct cg_codec *c = cg_codec(types[t]);
		size_t bb = c->bytes;
		int differ = 0, first = -1, ok;
		/* q4_1 refuses q4_0's largest blocks (beyond f16): those
		 * are left out of its count */
		int kept = 0;
		for (int i = 0; i < N; i++) {
			const float *v = x + (size_t)i * 32;
			if (c->encode_fit(a + (size_t)kept * bb, v, 32) != 0)
				continue;
			ok = loop[t](b + (size_t)kept * bb, v, 32) == 0;
			CHECK(ok, "%s fitted loop encodes block %d", c->name, i);
			if (memcmp(a + (size_t)kept * bb, b + (size_t)kept * bb,
			           bb) != 0) {
				differ++;
				if (first < 0)
					first = i;
			}
			kept++;
		}
		char what[160];
		snprintf(what, sizeof(what),
		         "%s fitted side by side = the loop, %d blocks (%d "
		         "differ, the first %d)", c->name, kept, differ, first);
		expect(differ == 0 && kept > N * 9 / 10, what);
	}
}

/* ----------------------------------------------------------- edge cases */

static uint16_t
enc16(enum cg_dtype t, float x)
{
	unsigned char b[2];

	cg_codec(t)->encode(b, &x, 1);
	return host16(b);
}

static uint64_t
enc_int(enum cg_dtype t, float x)
{
	const struct cg_codec *c = cg_codec(t);
	unsigned char b[8];
	uint64_t u = 0;

	if (c->encode(b, &x, 1) != 0)
		return 0xdeadbeef;
	c->to_u64(&u, b, 1);
	return u;
}

static void
test_edges(void)
{
	/* f16: -0 keeps its sign, subnormals round to nearest even, the
	 * top of the range goes to inf, nan stays nan */
	CHECK(enc16(CG_F16, -0.0f) == 0x8000, "f16 -0");
	CHECK(enc16(CG_F16, 0x1p-24f) == 0x0001, "f16 smallest subnormal");
	CHECK(enc16(CG_F16, 0x1p-25f) == 0x0000, "f16 half of it: tie to 0");
	CHECK(enc16(CG_F16, 0x3p-26f) == 0x0001, "f16 0.75 of it: to 1");
	CHECK(enc16(CG_F16, 0x3p-25f) == 0x0002, "f16 1.5 of it: tie to 2");
	CHECK(enc16(CG_F16, 0x1p-14f) == 0x0400, "f16 smallest normal");
	CHECK(enc16(CG_F16, 65519.0f) == 0x7bff, "f16 65519 to max");
	CHECK(enc16(CG_F16, 65520.0f) == 0x7c00, "f16 65520 to inf");
	CHECK(enc16(CG_F16, -INFINITY) == 0xfc00, "f16 -inf");
	CHECK((enc16(CG_F16, NAN) & 0x7fff) > 0x7c00, "f16 nan");
	CHECK(cg_f16_to_f32(0x8001) == -0x1p-24f, "f16 negative subnormal");
	CHECK(signbit(cg_f16_to_f32(0x8000)), "f16 -0 decodes to -0");
	/* bf16 likewise, its subnormals being f32's */
	CHECK(enc16(CG_BF16, -0.0f) == 0x8000, "bf16 -0");
	CHECK(enc16(CG_BF16, 0x1p-133f) == 0x0001, "bf16 subnormal");
	CHECK(enc16(CG_BF16, 0x1.01p0f) == 0x3f80, "bf16 tie to even");
	CHECK(enc16(CG_BF16, 0x1.03p0f) == 0x3f82, "bf16 tie to even up");
	CHECK(enc16(CG_BF16, 3.4e38f) == 0x7f80, "bf16 overflow to inf");
	CHECK((enc16(CG_BF16, -NAN) & 0x7fff) > 0x7f80, "bf16 nan");
	/* integers: nearest, ties to even, saturated, nan refused */
	CHECK(enc_int(CG_U8, 2.5f) == 2 && enc_int(CG_U8, 3.5f) == 4,
	      "u8 ties to even");
	CHECK(enc_int(CG_U8, 300) == 255 && enc_int(CG_U8, -5) == 0,
	      "u8 saturates");
	CHECK(enc_int(CG_U8, INFINITY) == 255 && enc_int(CG_U8, -0.0f) == 0,
	      "u8 inf, -0");
	CHECK((int64_t)enc_int(CG_I8, -1e9f) == -128 &&
	          (int64_t)enc_int(CG_I8, -0.5f) == 0 &&
	          (int64_t)enc_int(CG_I8, -1.5f) == -2,
	      "i8 saturates, ties to even");
	CHECK(enc_int(CG_U32, 4294967296.0f) == UINT32_MAX &&
	          enc_int(CG_U32, 4294967040.0f) == 4294967040u,
	      "u32 top");
	CHECK(enc_int(CG_U64, INFINITY) == UINT64_MAX &&
	          enc_int(CG_U64, 0x1p64f) == UINT64_MAX &&
	          enc_int(CG_U64, 0x1.fffffep63f) == 0xffffff0000000000u,
	      "u64 top");
	for (int t = CG_I8; t <= CG_U64; t++)
		CHECK(enc_int((enum cg_dtype)t, NAN) == 0xdeadbeef &&
		          strstr(cg_errmsg(), "nan") != NULL,
		      "%s refuses nan: %s", cg_dtype_name((enum cg_dtype)t),
		      cg_errmsg());
	/* integers beyond 2^24 decode to the nearest float, ties to even */
	uint32_t w32 = UINT32_MAX; /* host words, as in memory */
	uint64_t w64 = UINT64_MAX;
	float x;
	cg_codec(CG_U32)->decode(&x, &w32, 1);
	CHECK(x == 4294967296.0f, "u32 max decodes to 2^32");
	w32 = (1u << 24) + 1;
	cg_codec(CG_U32)->decode(&x, &w32, 1);
	CHECK(x == 16777216.0f, "2^24 + 1 ties to even 2^24");
	w32 = (1u << 24) + 3;
	cg_codec(CG_U32)->decode(&x, &w32, 1);
	CHECK(x == 16777220.0f, "2^24 + 3 ties to even 2^24 + 4");
	cg_codec(CG_U64)->decode(&x, &w64, 1);
	CHECK(x == 0x1p64f, "u64 max decodes to 2^64");
	/* quantized: an all-zero block has scale 0 and decodes to zeros;
	 * inf, nan and a scale beyond f16 are refused */
	float z[32] = {0}, y[32];
	unsigned char q[34];
	CHECK(cg_codec(CG_Q8_0)->encode(q, z, 32) == 0 && q[0] == 0 &&
	          q[1] == 0,
	      "q8_0 zeros");
	cg_codec(CG_Q8_0)->decode(y, q, 32);
	CHECK(y[0] == 0 && y[31] == 0, "q8_0 zeros decode");
	z[3] = 65504.0f * 127 * 1.01f;
	CHECK(cg_codec(CG_Q8_0)->encode(q, z, 32) == -1 &&
	          strstr(cg_errmsg(), "beyond f16") != NULL,
	      "q8_0 scale overflow: %s", cg_errmsg());
	z[3] = 65504.0f * 127 * 0.99f;
	CHECK(cg_codec(CG_Q8_0)->encode(q, z, 32) == 0, "q8_0 scale near max");
	z[3] = NAN;
	CHECK(cg_codec(CG_Q4_0)->encode(q, z, 32) == -1, "q4_0 nan");
}

/* --------------------------------------------------------------- tensors */

static void
test_tensors(void)
{
	struct cg_file *f = cg_file_new("test");
	float x[96], whole[96], part[96];
	unsigned char q[3 * 18];
	struct cg_tensor *t;
	struct cg_rng r;

	cg_rng_seed(&r, 11);
	for (int i = 0; i < 96; i++)
		x[i] = cg_rng_normal(&r);
	if (f == NULL || cg_codec(CG_Q4_0)->encode(q, x, 96) != 0 ||
	    (t = cg_file_add(f, "w", CG_Q4_0, 2, (uint64_t[]){3, 32}, q)) ==
	        NULL) {
		CHECK(0, "setup: %s", cg_errmsg());
		cg_file_free(f);
		return;
	}
	CHECK(cg_tensor_to_f32(t, whole) == 0, "whole: %s", cg_errmsg());
	/* every slice, whatever its alignment to the blocks, gives the
	 * values of the whole */
	for (uint64_t first = 0; first <= 96; first++)
		for (size_t n = 0; first + n <= 96; n += 7) {
			memset(part, 0xff, sizeof(part));
			CHECK(cg_tensor_decode(t, first, n, part) == 0,
			      "slice %d+%zu", (int)first, n);
			CHECK(memcmp(part, whole + first, n * 4) == 0,
			      "slice %d+%zu differs", (int)first, n);
			CHECK(to_bits(part[n]) == 0xffffffffu || n == 96,
			      "slice %d+%zu wrote past its end", (int)first, n);
		}
	double dd[96];
	CHECK(cg_tensor_decode_f64(t, 5, 60, dd) == 0 && dd[0] == whole[5] &&
	          dd[59] == whole[64],
	      "f64 slice");
	CHECK(cg_tensor_decode(t, 90, 7, part) == -1 &&
	          strstr(cg_errmsg(), "tensor w") != NULL,
	      "slice past the end: %s", cg_errmsg());
	uint64_t u[4];
	CHECK(cg_tensor_get_u64(t, 0, 1, u) == -1, "get_u64 of q4_0");
	/* a byte length that does not match dtype x shape is refused */
	t->nbytes--;
	CHECK(cg_tensor_to_f32(t, whole) == -1 &&
	          strstr(cg_errmsg(), "tensor w: 53 bytes") != NULL,
	      "short member: %s", cg_errmsg());
	t->nbytes++;
	/* an element count that is not a multiple of the block */
	CHECK(cg_file_add(f, "v", CG_Q8_0, 1, (uint64_t[]){40}, q) == NULL &&
	          strstr(cg_errmsg(), "tensor v") != NULL &&
	          strstr(cg_errmsg(), "multiple of 32") != NULL,
	      "q8_0 [40]: %s", cg_errmsg());
	/* integers: exact through get_u64 and f64, rounded through f32 */
	uint64_t big[2] = {(1ull << 53), UINT64_MAX};
	t = cg_file_add(f, "u", CG_U64, 1, (uint64_t[]){2}, big);
	CHECK(t && cg_tensor_get_u64(t, 0, 2, u) == 0 && u[0] == big[0] &&
	          u[1] == UINT64_MAX,
	      "get_u64");
	CHECK(t && cg_tensor_decode_f64(t, 0, 1, dd) == 0 &&
	          dd[0] == 9007199254740992.0,
	      "f64 of 2^53");
	int8_t neg[2] = {-128, -1};
	t = cg_file_add(f, "i", CG_I8, 1, (uint64_t[]){2}, neg);
	CHECK(t && cg_tensor_decode_f64(t, 0, 2, dd) == 0 && dd[0] == -128 &&
	          dd[1] == -1,
	      "f64 of i8");
	CHECK(t && cg_tensor_get_u64(t, 0, 2, u) == 0 && (int64_t)u[0] == -128,
	      "i8 two's complement");
	cg_file_free(f);
}

int
main(void)
{
	const char *dir = getenv("CG_SRCDIR");
	int checks = 0;

	if (dir == NULL)
		dir = ".";
	for (int t = 0; t < CG_NDTYPES; t++)
		checks += test_vectors(dir, (enum cg_dtype)t);
	test_table();
	test_roundtrips();
	test_half_reference();
	test_fit();
	test_fit_loop();
	test_edges();
	test_tensors();
	printf("%s: %d stored vectors, %d failures\n",
	       failures ? "FAIL" : "PASS", checks, failures);
	return failures ? 1 : 0;
}
