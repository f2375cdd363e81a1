/*
 * fuzz_encode.c - libFuzzer target: the writers of updates, every update
 * codec's encoder on random tensors and layouts, and the file it makes
 * written, read back and decoded.
 *
 * Input: a byte choosing the codec, a byte for its parameter (top-k's
 * fraction or count, the chunk, the rank), a byte of flags (a budget to
 * fit, warm-start factors for lowrank, values that are not finite), the
 * number of views (1-48, as many as a model of default size and more:
 * the encoder adds tensors to its file as it goes), each view's
 * dimensions (1-3 of them, 1-64 each), then the values, two bytes each:
 * a signed mantissa and an exponent (zeros, denormals and 3e38 among
 * them), drawn from a generator seeded by the input where the bytes run
 * out.
 *
 * Each codec is held to what its readers rely on: an encode of finite
 * values succeeds (but for values past f16's range, which a codec that
 * keeps f16 values or scales may refuse, naming the tensor) and one of
 * a nan or an inf is refused; the file, made
 * atomically under TMPDIR and read back through cg_file_read and
 * cg_ubind, decodes to exactly what the encoder said a reader gets
 * ("sent"), and "left" is the input minus it; a lossless codec sends
 * the input itself; what is sent is finite; the coded tensors take the
 * "bytes" the manifest and cg_uspec_size say.  A breach aborts: only a
 * crash, a sanitizer report or such an abort is a finding.
 */
#include <math.h>

#include "fuzz.h"

#define MAXV 48      /* views */
#define MAXN (1 << 15) /* elements in all */

#define FAIL(...)                                                        \
	do {                                                             \
		fprintf(stderr, "fuzz_encode: " __VA_ARGS__);            \
		fputc('\n', stderr);                                     \
		abort();                                                 \
	} while (0)

/* The input, read a byte at a time; past its end, a generator's bytes. */
struct input {
	const uint8_t *p;
	size_t n;
	uint64_t s;
};

static unsigned
next(struct input *in)
{
	if (in->n) {
		in->n--;
		return *in->p++;
	}
	in->s = in->s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)(in->s >> 56);
}

/* A value from two bytes: nan and inf only where allowed. */
static float
value(struct input *in, int nonfinite)
{
	int m = (int8_t)next(in);
	unsigned e = next(in);

	if (e == 0xff)
		return m < 0 ? -3e38f : 3e38f;
	if (e == 0xfe)
		return (float)m * 1e-43f; /* denormal */
	if (e == 0xfd && nonfinite)
		return m < 0 ? -INFINITY : NAN;
	return ldexpf((float)m, (int)(e % 80) - 50);
}

/* The spec the first two bytes choose into buf [n]. */
static void
spec_text(unsigned which, unsigned p, char *buf, size_t n)
{
	static const char *val[] = {"f16",  "f32",  "bf16", "q8_0",
	                            "q4_0", "q2_0", "lut2"};

	switch (which % 16) {
	case 0: snprintf(buf, n, "f32"); break;
	case 1: snprintf(buf, n, "f16"); break;
	case 2: snprintf(buf, n, "bf16"); break;
	case 3: snprintf(buf, n, "q8"); break;
	case 4: snprintf(buf, n, "q4"); break;
	case 5: snprintf(buf, n, "q2"); break;
	case 6: snprintf(buf, n, "q%d:sr", p % 2 ? 2 : 4); break;
	case 7: snprintf(buf, n, "topk:%g", (p + 1) / 256.0); break;
	case 8: snprintf(buf, n, "topk:k=%u", p + 1); break;
	case 9:
		snprintf(buf, n, "topk:%g,val=%s", (p % 64 + 1) / 64.0,
		         val[p / 64 % 7]);
		break;
	case 10:
		snprintf(buf, n, "topk:%g,chunk=%u", (p % 16 + 1) / 32.0,
		         2u << (p / 16 % 10));
		break;
	case 11:
		snprintf(buf, n, "topk:k=%u,chunk=%u,val=%s%s", p % 8 + 1,
		         8u << (p / 8 % 8), val[p % 7],
		         p / 64 % 2 ? ",idx=gap" : "");
		break;
	case 12: snprintf(buf, n, "sign"); break;
	default: snprintf(buf, n, "lowrank:%u", p % 9 + 1); break;
	}
}

/* The coded file f written to path and read back: it must read. */
static struct cg_file *
round_trip(struct cg_file *f, const char *path)
{
	struct cg_file *g;

	if (cg_file_write(f, path, CG_COMPRESS_NONE) != 0)
		FAIL("write: %s", cg_errmsg());
	if ((g = cg_file_read(path)) == NULL)
		FAIL("read back: %s", cg_errmsg());
	unlink(path);
	return g;
}

/* What a reader decodes from g equals sent [P], to the bit. */
static void
check_decode(const struct cg_file *g, const struct cg_uview *v, int nv,
             const float *sent, float *tmp)
{
	struct cg_uview *b;
	struct cg_uspec s;
	int nb;

	if (cg_ubind(g, &s, &b, &nb) != 0)
		FAIL("bind: %s", cg_errmsg());
	if (nb != nv)
		FAIL("%d views read, %d written", nb, nv);
	for (int i = 0; i < nv; i++) {
		if (b[i].n != v[i].n || strcmp(b[i].name, v[i].name) != 0)
			FAIL("view %d: read as %s [%llu]", i, b[i].name,
			     (unsigned long long)b[i].n);
		cg_udecode(&s, &b[i], 0, (size_t)v[i].n, tmp);
		if (memcmp(tmp, sent + v[i].off, v[i].n * sizeof(float)) != 0)
			FAIL("view %s: decodes to other values than sent",
			     v[i].name);
	}
	free(b);
}

/* The manifest's "bytes", the tensors' and the spec's size agree. */
static void
check_size(const struct cg_file *g, const struct cg_uspec *s,
           const struct cg_uview *v, int nv)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(g->manifest, "codec");
	const cJSON *by = cJSON_GetObjectItemCaseSensitive(c, "bytes");
	uint64_t want, have = 0;

	if (cg_uspec_size(s, v, nv, &want) != 0)
		FAIL("size: %s", cg_errmsg());
	for (size_t i = 0; i < g->ntensors; i++)
		have += g->tensors[i]->nbytes;
	if (!cJSON_IsNumber(by) || (uint64_t)by->valuedouble != want ||
	    have != want)
		FAIL("codec bytes %g, tensors %llu, spec %llu",
		     cJSON_IsNumber(by) ? by->valuedouble : -1.0,
		     (unsigned long long)have, (unsigned long long)want);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static float x[MAXN], sent[MAXN], left[MAXN], tmp[MAXN];
	static char path[4096];
	struct input in = {data, size, 0x9e3779b97f4a7c15ULL};
	struct cg_uview v[MAXV];
	struct cg_uspec s;
	struct cg_uenc e = {0};
	struct cg_file *f, *g;
	char text[64];
	unsigned which, p, flags;
	uint64_t P = 0, nq;
	int nv, nonfinite = 0, rc;
	float big = 0;

	for (size_t i = 0; i < size; i++)
		in.s = (in.s ^ data[i]) * 0x100000001b3ULL;
	which = next(&in);
	p = next(&in);
	flags = next(&in);
	spec_text(which, p, text, sizeof(text));
	if (cg_uspec_parse(text, &s) != 0)
		FAIL("spec %s: %s", text, cg_errmsg());
	nv = (int)(next(&in) % MAXV) + 1;
	memset(v, 0, sizeof(v));
	for (int i = 0; i < nv; i++) {
		uint64_t n = 1;
		snprintf(v[i].name, sizeof(v[i].name), "layer.%d.w", i);
		v[i].ndim = (int)(next(&in) % 3) + 1;
		for (int d = 0; d < v[i].ndim; d++)
			n *= v[i].shape[d] = next(&in) % 64 + 1;
		if (P + n > MAXN) {
			nv = i ? i : 1;
			if (i == 0) {
				v[0].ndim = 1;
				v[0].shape[0] = n = 1;
			} else
				break;
		}
		v[i].n = n;
		v[i].off = P;
		P += n;
	}
	for (uint64_t j = 0; j < P; j++) {
		x[j] = value(&in, flags & 4);
		nonfinite |= !isfinite(x[j]);
		if (fabsf(x[j]) > big)
			big = fabsf(x[j]);
	}
	if ((flags & 1) && cg_uspec_fit(&s, v, nv,
	                                (uint64_t)next(&in) << next(&in) % 12) !=
	                       0)
		return 0; /* a budget below the smallest size: refused */
	nq = cg_uspec_state_floats(&s, v, nv);
	if (nq && (e.warm = calloc(nq, sizeof(float))) == NULL)
		abort();
	for (uint64_t j = 0; (flags & 2) && j < nq; j++)
		e.warm[j] = value(&in, 0);
	cg_rng_seed(&e.rng, in.s);

	if ((f = cg_file_new("delta")) == NULL)
		abort();
	rc = cg_uencode(&s, v, nv, x, f, &e, sent, left);
	if (nonfinite) {
		if (rc == 0)
			FAIL("%s: a nan or inf encoded", text);
		goto out;
	}
	/* a value past f16's range may be refused by a codec that stores
	 * f16 values or scales, with a message naming the tensor; nothing
	 * else may be */
	if (rc != 0 && (big <= 65504.0f || !strstr(cg_errmsg(), "tensor ")))
		FAIL("%s: %s", text, cg_errmsg());
	if (rc != 0)
		goto out;
	snprintf(path, sizeof(path), "%s/cg-fuzz-encode.%d.cgu",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	g = round_trip(f, path);
	check_size(g, &s, v, nv);
	check_decode(g, v, nv, sent, tmp);
	for (uint64_t j = 0; j < P; j++) {
		if (!isfinite(sent[j]))
			FAIL("%s: element %llu sent as %g", text,
			     (unsigned long long)j, sent[j]);
		if (left[j] != x[j] - sent[j])
			FAIL("%s: element %llu: left is not x - sent", text,
			     (unsigned long long)j);
	}
	if (cg_uspec_lossless(&s) && memcmp(sent, x, P * sizeof(float)) != 0)
		FAIL("%s: lossless, but sends other values", text);
	cg_file_free(g);
out:
	cg_file_free(f);
	free(e.warm);
	return 0;
}
