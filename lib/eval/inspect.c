/*
 * eval/inspect.c - tensor statistics, text dumps and file summaries.
 *
 * The reading side of cg-inspect, and the comparison of two files behind
 * cg-inspect --diff.  Elements of any dtype are decoded through the
 * codec table (cg_tensor_decode_f64) to double a chunk at a time into a
 * buffer on the stack, so statistics of a tensor of any size cost two
 * passes and no allocation; only a data
 * shard's condition counts take a sorted copy of its "cond" tensor.  The
 * input is a struct cg_file that cg_file_read has already checked (shapes
 * agree with byte lengths, digests match), but the manifest's free-form
 * fields are still somebody else's bytes: they are printed with control
 * characters replaced.  A tensor of a plain type holds host words, as the
 * container reads it.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "eval/inspect.h"
#include "exchange/update.h"
#include "file/sign.h"
#include "model/model.h"
#include "model/privacy.h"

/* Elements decoded per step: a multiple of the 32-element quant block. */
#define CHUNK 2048

/* Manifest key of a data shard's condition vocabulary (an array of names,
 * index = the value stored in the "cond" tensor), as shard.c writes it. */
#define VOCAB_KEY "conditions"
/* Conditions listed one per line in the table; --json lists them all. */
#define TABLE_CONDS 32
/* Longest free-form manifest value the table shows before "...". */
#define TABLE_VALUE 200
/* Column where the values of "key: value" lines start ("conditions: "). */
#define KEY_WIDTH 12
/* Bytes cg_shape_str needs for any shape: 8 dimensions of 20 digits. */
#define SHAPE_LEN (CG_MAX_DIMS * 21 + 8)

/* ----------------------------------------------------------- statistics */

/* The elements of t from first on, CHUNK at most, into buf as doubles;
 * their count into *k.  Returns 0 or -1 with a message. */
static int
decode_chunk(const struct cg_tensor *t, uint64_t first, double buf[CHUNK],
             size_t *k)
{
	*k = t->nelem - first < CHUNK ? (size_t)(t->nelem - first) : CHUNK;
	return cg_tensor_decode_f64(t, first, *k, buf);
}

int
cg_tensor_stats(struct cg_stats *s, const struct cg_tensor *t)
{
	double buf[CHUNK], mean = 0, m2 = 0, lo = 0, hi = 0, half;
	uint64_t nf = 0;
	size_t k;

	memset(s, 0, sizeof(*s));
	s->count = t->nelem;
	/*
	 * Pass 1: count, extremes and moments.  Each chunk's mean and sum of
	 * squared deviations are exact enough on their own and are merged
	 * with Chan et al.'s pairwise update, which keeps the variance of a
	 * large tensor with a large mean from cancelling to nonsense.
	 */
	for (uint64_t first = 0; first < t->nelem; first += k) {
		double sum = 0, cm, cm2 = 0, delta;
		uint64_t c = 0, tot;

		if (decode_chunk(t, first, buf, &k) != 0)
			return -1;
		for (size_t i = 0; i < k; i++) {
			double x = buf[i];
			if (isnan(x)) {
				s->nan++;
				continue;
			}
			if (isinf(x)) {
				s->inf++;
				continue;
			}
			if (x == 0)
				s->zeros++;
			if (nf + c == 0 || x < lo)
				lo = x;
			if (nf + c == 0 || x > hi)
				hi = x;
			sum += x;
			c++;
		}
		if (c == 0)
			continue;
		cm = sum / (double)c;
		for (size_t i = 0; i < k; i++)
			if (isfinite(buf[i]))
				cm2 += (buf[i] - cm) * (buf[i] - cm);
		tot = nf + c;
		delta = cm - mean;
		mean += delta * ((double)c / (double)tot);
		m2 += cm2 +
		      delta * delta * ((double)nf * (double)c / (double)tot);
		nf = tot;
	}
	s->nfinite = nf;
	if (nf == 0)
		return 0;
	s->min = lo;
	s->max = hi;
	s->mean = mean;
	s->std = sqrt(m2 / (double)nf);
	/* Pass 2: the histogram.  Halves keep hi - lo finite even for
	 * extremes of opposite sign near DBL_MAX. */
	half = hi / 2 - lo / 2;
	for (uint64_t first = 0; first < t->nelem; first += k) {
		if (decode_chunk(t, first, buf, &k) != 0)
			return -1;
		for (size_t i = 0; i < k; i++) {
			double x = buf[i];
			int b = 0;
			if (!isfinite(x))
				continue;
			if (half > 0)
				b = (int)((x / 2 - lo / 2) / half *
				          CG_HIST_BINS);
			if (b >= CG_HIST_BINS)
				b = CG_HIST_BINS - 1;
			if (b < 0)
				b = 0;
			s->hist[b]++;
		}
	}
	return 0;
}

void
cg_hist_draw(char *out, const struct cg_stats *s, int utf8)
{
	static const char *const blocks[] = {"\u2581", "\u2582", "\u2583",
	                                     "\u2584", "\u2585", "\u2586",
	                                     "\u2587", "\u2588"};
	static const char ramp[] = ".:-=+*#%@";
	int levels = utf8 ? 8 : (int)sizeof(ramp) - 1;
	uint64_t top = 0;
	char *p = out;

	for (int i = 0; i < CG_HIST_BINS; i++)
		if (s->hist[i] > top)
			top = s->hist[i];
	for (int i = 0; i < CG_HIST_BINS; i++) {
		int lv;
		if (s->hist[i] == 0) {
			*p++ = ' ';
			continue;
		}
		/* ceil, so that 1 of a billion still shows */
		lv = (int)ceil((double)s->hist[i] * levels / (double)top);
		if (lv > levels)
			lv = levels;
		if (utf8) {
			memcpy(p, blocks[lv - 1], 3);
			p += 3;
		} else {
			*p++ = ramp[lv - 1];
		}
	}
	*p = '\0';
}

/* ----------------------------------------------------------------- dump */

int
cg_tensor_dump(FILE *fp, const struct cg_tensor *t, int rows)
{
	const struct cg_codec *c = cg_codec(t->dtype);
	uint64_t rowlen = rows && t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
	union {
		double f[CHUNK];
		uint64_t u[CHUNK];
	} buf;
	size_t k = 0;

	if (c == NULL)
		return -1;
	for (uint64_t i = 0; i < t->nelem; i++) {
		int sep = (i + 1) % rowlen == 0 ? '\n' : ' ';
		size_t j = (size_t)(i % CHUNK);

		if (j == 0) {
			int rc;
			k = t->nelem - i < CHUNK ? (size_t)(t->nelem - i)
			                         : CHUNK;
			rc = c->kind == CG_KIND_FLOAT
			         ? cg_tensor_decode_f64(t, i, k, buf.f)
			         : cg_tensor_get_u64(t, i, k, buf.u);
			if (rc != 0)
				return -1;
		}
		if (c->kind == CG_KIND_SINT)
			fprintf(fp, "%" PRId64 "%c", (int64_t)buf.u[j], sep);
		else if (c->kind == CG_KIND_UINT)
			fprintf(fp, "%" PRIu64 "%c", buf.u[j], sep);
		else
			fprintf(fp, "%.9g%c", buf.f[j], sep);
		if (ferror(fp))
			break;
	}
	if (ferror(fp))
		return cg_seterr("write error");
	return 0;
}

/* ----------------------------------------------------------- formatting */

void
cg_shape_str(char *out, size_t n, const struct cg_tensor *t)
{
	size_t len = 0;

	if (n == 0)
		return;
	if (t->ndim == 0) {
		snprintf(out, n, "scalar");
		return;
	}
	out[0] = '\0';
	for (int d = 0; d < t->ndim && len < n; d++) {
		int w = snprintf(out + len, n - len, "%s%" PRIu64, d ? "x" : "",
		                 t->shape[d]);
		if (w < 0)
			break;
		len += (size_t)w;
	}
}

void
cg_human_size(char out[16], uint64_t bytes)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB",
	                                   "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(out, 16, "%" PRIu64 " B", bytes);
		return;
	}
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(out, 16, "%.1f %s", v, unit[u]);
}

/* Write s with control bytes shown as '?', cut after max bytes. */
static void
put_clean(FILE *fp, const char *s, size_t max)
{
	size_t i;

	for (i = 0; s[i] && i < max; i++)
		putc(cg_shown_byte((unsigned char)s[i], 0), fp);
	if (s[i])
		fputs("...", fp);
}

/* A manifest value for people: strings bare, integral numbers without
 * exponent, anything else as compact JSON. */
static int
put_value(FILE *fp, const cJSON *v, size_t max)
{
	char *s;

	if (cJSON_IsString(v)) {
		put_clean(fp, v->valuestring, max);
		return 0;
	}
	if (cJSON_IsNumber(v)) {
		double x = v->valuedouble;
		if (x == floor(x) && fabs(x) < 1e17)
			fprintf(fp, "%.0f", x);
		else
			fprintf(fp, "%.9g", x);
		return 0;
	}
	if ((s = cJSON_PrintUnformatted(v)) == NULL)
		return cg_seterr("out of memory");
	put_clean(fp, s, max);
	free(s);
	return 0;
}

/* "key:" padded to the column where values start; the key may come from
 * the file.  Returns that column, for a value continued on more lines. */
static int
put_key(FILE *fp, const char *key)
{
	size_t n = strlen(key) > 64 ? 64 : strlen(key);

	put_clean(fp, key, 64);
	fprintf(fp, ":%*s", n + 2 < KEY_WIDTH ? (int)(KEY_WIDTH - n - 1) : 1,
	        "");
	return n + 2 < KEY_WIDTH ? KEY_WIDTH : (int)n + 2;
}

/* The line "key: value" for manifest field key, if the manifest has it. */
static int
put_field(FILE *fp, const char *key, const struct cg_file *f, size_t max)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(f->manifest, key);

	if (v == NULL)
		return 0;
	put_key(fp, key);
	if (put_value(fp, v, max) != 0)
		return -1;
	fputc('\n', fp);
	return 0;
}

/* ------------------------------------------------------------ data shards */

struct cond_count {
	uint32_t cond;
	uint64_t count;
	const char *name; /* from the vocabulary, or NULL */
	int oov;          /* a value past the end of a vocabulary */
};

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/*
 * Count the examples of each condition of a data shard from its "cond"
 * tensor (u32, one per example).  Every vocabulary entry is listed, in
 * order and with a zero count if absent, then any value the vocabulary
 * does not cover.  Sorting a copy keeps memory linear in the examples
 * whatever values a hostile shard stores.  *out (malloc'd, caller frees)
 * is NULL and *n 0 for a file that is no shard or lacks the tensor.
 * Returns 0, or -1 with a message when out of memory.
 */
static int
cond_counts(const struct cg_file *f, struct cond_count **out, size_t *n)
{
	const struct cg_tensor *t = cg_file_find(f, "cond");
	const cJSON *vocab =
	    cJSON_GetObjectItemCaseSensitive(f->manifest, VOCAB_KEY);
	const cJSON *v;
	uint32_t *vals = NULL;
	size_t nv = 0, nextra = 0, i, k;
	struct cond_count *c = NULL;

	*out = NULL;
	*n = 0;
	if (strcmp(cg_file_kind(f), "data") != 0 || t == NULL ||
	    t->dtype != CG_U32)
		return 0;
	if (cJSON_IsArray(vocab))
		nv = (size_t)cJSON_GetArraySize(vocab);
	if ((vals = malloc(t->nelem ? (size_t)t->nelem * 4 : 1)) == NULL)
		return cg_seterr("out of memory");
	for (i = 0; i < t->nelem; i++) {
		/* host words: a u32 tensor as read */
		memcpy(&vals[i], (const unsigned char *)t->data + 4 * i, 4);
	}
	qsort(vals, (size_t)t->nelem, 4, cmp_u32);
	for (i = 0; i < t->nelem; i++)
		if (vals[i] >= nv && (i == 0 || vals[i] != vals[i - 1]))
			nextra++;
	if (nv + nextra > 0 && (c = calloc(nv + nextra, sizeof(*c))) == NULL) {
		free(vals);
		return cg_seterr("out of memory");
	}
	k = 0;
	if (nv > 0)
		cJSON_ArrayForEach(v, vocab)
		{
			c[k].cond = (uint32_t)k;
			c[k].name = cJSON_IsString(v) ? v->valuestring : NULL;
			k++;
		}
	for (i = 0; i < t->nelem; i++) {
		if (vals[i] < nv) {
			c[vals[i]].count++;
			continue;
		}
		if (i == 0 || vals[i] != vals[i - 1]) {
			c[k].cond = vals[i];
			c[k++].oov = nv > 0;
		}
		c[k - 1].count++;
	}
	free(vals);
	*out = c;
	*n = k;
	return 0;
}

/* ---------------------------------------------------------------- table */

/* Manifest fields the table shows first, in this order; the rest follow
 * as they come. */
static const char *const known[] = {"arch",    "config", "step",  "seed",
                                    "samples", "loss",   "base",  "examples",
                                    "payload", "image",  "shard", "source"};

static int
is_known(const char *k)
{
	if (strcmp(k, "format") == 0 || strcmp(k, "kind") == 0 ||
	    strcmp(k, "dp") == 0 || strcmp(k, VOCAB_KEY) == 0)
		return 1;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(k, known[i]) == 0)
			return 1;
	return 0;
}

static int
table_conds(FILE *fp, const struct cg_file *f)
{
	struct cond_count *c;
	size_t n, w = 4;

	if (cond_counts(f, &c, &n) != 0)
		return -1;
	if (c == NULL)
		return 0;
	for (size_t i = 0; i < n && i < TABLE_CONDS; i++)
		if (c[i].name && strlen(c[i].name) > w)
			w = strlen(c[i].name) > 40 ? 40 : strlen(c[i].name);
	put_key(fp, "conditions");
	fprintf(fp, "%zu\n", n);
	for (size_t i = 0; i < n && i < TABLE_CONDS; i++) {
		char num[16];
		const char *name = c[i].name;
		if (name == NULL) {
			snprintf(num, sizeof(num), "%" PRIu32, c[i].cond);
			name = num;
		}
		fputs("  ", fp);
		put_clean(fp, name, 40);
		fprintf(fp, "%*s %10" PRIu64 "%s\n",
		        (int)(w - (strlen(name) > w ? w : strlen(name))), "",
		        c[i].count,
		        c[i].oov ? "  (not in the vocabulary)" : "");
	}
	if (n > TABLE_CONDS)
		fprintf(fp, "  (%zu more; --json lists all)\n",
		        n - TABLE_CONDS);
	free(c);
	return 0;
}

static void
put_stat(FILE *fp, const struct cg_stats *s, double x)
{
	if (s->nfinite)
		fprintf(fp, " %10.4g", x);
	else
		fprintf(fp, " %10s", "-");
}

/*
 * For a pruned model: *out [ntensors] gets, for each view with a mask
 * tensor "mask.VIEW", how many of its weights the mask prunes, and
 * UINT64_MAX for every other tensor; NULL when f has no mask.  The masks
 * are checked as a model's reader checks them.  Returns 0 or -1.
 */
static int
pruned_counts(const struct cg_file *f, uint64_t **out)
{
	uint64_t *c;
	int any = 0;

	*out = NULL;
	for (size_t i = 0; i < f->ntensors; i++)
		any |= strncmp(f->tensors[i]->name, "mask.", 5) == 0;
	const cJSON *arch =
	    cJSON_GetObjectItemCaseSensitive(f->manifest, "arch");
	if (!any || strcmp(cg_file_kind(f), "model") != 0)
		return 0;
	/* a model of an arch this build does not know: no layout to check
	 * its masks against, shown as it is */
	if (!cJSON_IsString(arch) || cg_arch_find(arch->valuestring) == NULL)
		return 0;
	if (cg_model_file_check_mask(f) != 0)
		return -1;
	if ((c = malloc(f->ntensors * sizeof(*c))) == NULL)
		return cg_seterr("out of memory");
	for (size_t i = 0; i < f->ntensors; i++)
		c[i] = UINT64_MAX;
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *w = f->tensors[i];
		const struct cg_tensor *t;
		char name[CG_MAX_NAME + 8];
		snprintf(name, sizeof(name), "mask.%s", w->name);
		/* checked: a mask has a bit for each weight of its w */
		if ((t = cg_file_find(f, name)) == NULL)
			continue;
		const uint8_t *b = t->data;
		uint64_t n = 0;
		for (uint64_t j = 0; j < w->nelem; j++)
			n += !(b[j / 8] >> (j % 8) & 1);
		c[i] = n;
	}
	*out = c;
	return 0;
}

/* The privacy line of a table: the (epsilon, delta) f's record says
 * was spent (recomputed from its history as it is read), and an update's
 * release; nothing without a record.  0, or -1: a record not sound. */
static int
table_dp(FILE *fp, const struct cg_file *f)
{
	struct cg_dp dp;
	int rc;

	if ((rc = cg_dp_read(f->manifest, &dp)) <= 0)
		return rc;
	put_key(fp, "privacy");
	fprintf(fp, "epsilon %.4g at delta %g, %llu release%s\n", dp.epsilon,
	        dp.delta, (unsigned long long)cg_dp_rounds(&dp),
	        cg_dp_rounds(&dp) == 1 ? "" : "s");
	/* the runs of a max item (parallel releases) marked "|" */
	for (int i = 0; i < dp.nhist; i++)
		fprintf(fp, "  %s%llu x sigma %g, q %g\n",
		        dp.hist[i].alt || (i > 0 && dp.hist[i - 1].alt) ? "| "
		                                                        : "",
		        (unsigned long long)dp.hist[i].steps, dp.hist[i].sigma,
		        dp.hist[i].q);
	if (dp.clip > 0 && dp.nrelease == 1)
		fprintf(fp, "  this update: clip %g, sigma %g, q %g\n", dp.clip,
		        dp.release[0].sigma, dp.release[0].q);
	else if (dp.clip > 0)
		fprintf(fp,
		        "  this update: the most of %d releases on disjoint "
		        "shards, clip %g\n",
		        dp.nrelease, dp.clip);
	return 0;
}

/* The pruned line of a table: weights, tensors, the share of theirs. */
static void
table_pruned(FILE *fp, const struct cg_file *f, const uint64_t *c)
{
	uint64_t n = 0, of = 0;
	size_t k = 0;

	for (size_t i = 0; i < f->ntensors; i++)
		if (c[i] != UINT64_MAX) {
			n += c[i];
			of += f->tensors[i]->nelem;
			k++;
		}
	put_key(fp, "pruned");
	fprintf(fp,
	        "%" PRIu64 " weights of %zu tensor%s (%.1f%% of their %" PRIu64
	        ")\n",
	        n, k, k == 1 ? "" : "s",
	        of ? 100.0 * (double)n / (double)of : 0.0, of);
}

/*
 * Whether f is a masked update (secagg.h): its words are noise alone,
 * so no statistics of them are shown, as if they were values.
 */
static int
is_masked(const struct cg_file *f)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(f->manifest, "codec");
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(c, "spec");

	return cJSON_IsString(sp) && strcmp(sp->valuestring, "masked") == 0;
}

int
cg_inspect_table(FILE *fp, const char *display, const struct cg_file *f,
                 const struct cg_inspect_opts *o)
{
	struct cg_inspect_opts mo = *o;
	const cJSON *v;
	uint64_t total = 0, *pruned = NULL;
	int wname = 4, wshape = 5;
	char size[16], shape[SHAPE_LEN];

	/* checked before a line is printed: a bad mask prints nothing */
	if (pruned_counts(f, &pruned) != 0 || cg_dp_read(f->manifest, NULL) < 0 ||
	    cg_dp_share_read(f->manifest, NULL) < 0)
		goto fail;
	if (is_masked(f))
		mo.stats = 0;
	o = &mo;
	put_key(fp, "file");
	put_clean(fp, display, SIZE_MAX);
	fputc('\n', fp);
	put_key(fp, "kind");
	put_clean(fp, cg_file_kind(f), TABLE_VALUE);
	fputc('\n', fp);
	if (put_field(fp, "format", f, TABLE_VALUE) != 0)
		goto fail;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		/* config is the one field people read whole */
		if (put_field(fp, known[i], f,
		              strcmp(known[i], "config") == 0
		                  ? SIZE_MAX
		                  : TABLE_VALUE) != 0)
			goto fail;
	/* A model's identity: what the base of an update of it must be. */
	char hex[65];
	if (strcmp(cg_file_kind(f), "model") == 0 &&
	    cg_update_base_of_model(f, hex) == 0 && put_key(fp, "params"))
		fprintf(fp, "sha256 %s (an update's base)\n", hex);
	/* who signed it (the signature checked as the file was read) */
	if (f->is_signed && put_key(fp, "signer")) {
		cg_key_fingerprint(hex, f->signer);
		fprintf(fp, "%s\n", hex);
	}
	if (table_conds(fp, f) != 0 || table_dp(fp, f) != 0)
		goto fail;
	cJSON_ArrayForEach(v, f->manifest)
	{
		if (v->string == NULL || is_known(v->string))
			continue;
		if (put_field(fp, v->string, f, TABLE_VALUE) != 0)
			goto fail;
	}
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		int len = (int)strlen(t->name);
		total += t->nbytes;
		if (len > wname)
			wname = len;
		cg_shape_str(shape, sizeof(shape), t);
		len = (int)strlen(shape);
		if (len > wshape)
			wshape = len;
	}
	if (pruned)
		table_pruned(fp, f, pruned);
	cg_human_size(size, total);
	put_key(fp, "tensors");
	fprintf(fp, "%zu, %s\n", f->ntensors, size);
	if (f->ntensors == 0)
		goto out;
	fprintf(fp, "\n%-*s  %-5s  %-*s  %10s", wname, "NAME", "DTYPE", wshape,
	        "SHAPE", "SIZE");
	if (pruned)
		fprintf(fp, " %7s", "PRUNED%");
	if (o->stats)
		fprintf(fp, " %10s %10s %10s %10s %6s  %s", "MIN", "MAX",
		        "MEAN", "STD", "ZERO%", "HISTOGRAM");
	fputc('\n', fp);
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct cg_tensor *t = f->tensors[i];
		struct cg_stats s;
		char hist[CG_HIST_DRAWN];

		cg_shape_str(shape, sizeof(shape), t);
		cg_human_size(size, t->nbytes);
		/* names were checked by the reader: printable ASCII */
		fprintf(fp, "%-*s  %-5s  %-*s  %10s", wname, t->name,
		        cg_dtype_name(t->dtype), wshape, shape, size);
		if (pruned && pruned[i] == UINT64_MAX)
			fprintf(fp, " %7s", "-");
		else if (pruned)
			fprintf(fp, " %7.1f",
			        100.0 * (double)pruned[i] / (double)t->nelem);
		if (o->stats) {
			if (cg_tensor_stats(&s, t) != 0)
				goto fail;
			put_stat(fp, &s, s.min);
			put_stat(fp, &s, s.max);
			put_stat(fp, &s, s.mean);
			put_stat(fp, &s, s.std);
			if (s.count)
				fprintf(fp, " %6.1f",
				        100.0 * (double)s.zeros /
				            (double)s.count);
			else
				fprintf(fp, " %6s", "-");
			cg_hist_draw(hist, &s, o->utf8);
			fprintf(fp, "  %s", hist);
			if (s.nan || s.inf)
				fprintf(fp, "  nan %" PRIu64 " inf %" PRIu64,
				        s.nan, s.inf);
		}
		fputc('\n', fp);
	}
out:
	free(pruned);
	if (ferror(fp))
		return cg_seterr("write error");
	return 0;
fail:
	free(pruned);
	return -1;
}

/* ----------------------------------------------------------------- json */

/* Add a number, or null where there are no finite elements. */
static void
add_stat(cJSON *o, const char *key, const struct cg_stats *s, double x)
{
	if (s->nfinite)
		cJSON_AddNumberToObject(o, key, x);
	else
		cJSON_AddNullToObject(o, key);
}

static cJSON *
json_tensor(const struct cg_tensor *t, const struct cg_inspect_opts *o,
            uint64_t pruned)
{
	cJSON *j = cJSON_CreateObject(), *a;
	struct cg_stats s;
	char hex[65];

	if (j == NULL)
		goto nomem;
	cJSON_AddStringToObject(j, "name", t->name);
	cJSON_AddStringToObject(j, "dtype", cg_dtype_name(t->dtype));
	if ((a = cJSON_AddArrayToObject(j, "shape")) == NULL)
		goto nomem;
	for (int d = 0; d < t->ndim; d++)
		cJSON_AddItemToArray(a,
		                     cJSON_CreateNumber((double)t->shape[d]));
	cJSON_AddNumberToObject(j, "bytes", (double)t->nbytes);
	cg_hex(hex, t->sha256);
	cJSON_AddStringToObject(j, "sha256", hex);
	if (pruned != UINT64_MAX) {
		cJSON_AddNumberToObject(j, "pruned", (double)pruned);
		cJSON_AddNumberToObject(
		    j, "sparsity",
		    t->nelem ? (double)pruned / (double)t->nelem : 0);
	}
	if (!o->stats)
		return j;
	if (cg_tensor_stats(&s, t) != 0)
		goto fail;
	cJSON_AddNumberToObject(j, "count", (double)s.count);
	add_stat(j, "min", &s, s.min);
	add_stat(j, "max", &s, s.max);
	add_stat(j, "mean", &s, s.mean);
	add_stat(j, "std", &s, s.std);
	cJSON_AddNumberToObject(j, "zeros", (double)s.zeros);
	cJSON_AddNumberToObject(
	    j, "zero_frac", s.count ? (double)s.zeros / (double)s.count : 0);
	cJSON_AddNumberToObject(j, "nan", (double)s.nan);
	cJSON_AddNumberToObject(j, "inf", (double)s.inf);
	if ((a = cJSON_AddArrayToObject(j, "hist")) == NULL)
		goto nomem;
	for (int b = 0; b < CG_HIST_BINS; b++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s.hist[b]));
	return j;
nomem:
	cg_seterr("out of memory");
fail:
	cJSON_Delete(j);
	return NULL;
}

static int
json_conds(cJSON *j, const struct cg_file *f)
{
	struct cond_count *c;
	cJSON *a;
	size_t n;

	if (cond_counts(f, &c, &n) != 0)
		return -1;
	if (c == NULL)
		return 0;
	if ((a = cJSON_AddArrayToObject(j, "cond_counts")) == NULL)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		cJSON *e = cJSON_CreateObject();
		if (e == NULL)
			goto nomem;
		cJSON_AddItemToArray(a, e);
		cJSON_AddNumberToObject(e, "cond", c[i].cond);
		if (c[i].name)
			cJSON_AddStringToObject(e, "name", c[i].name);
		else
			cJSON_AddNullToObject(e, "name");
		cJSON_AddNumberToObject(e, "count", (double)c[i].count);
	}
	free(c);
	return 0;
nomem:
	free(c);
	return cg_seterr("out of memory");
}

struct cJSON *
cg_inspect_json(const char *display, const struct cg_file *f,
                const struct cg_inspect_opts *o)
{
	cJSON *j = cJSON_CreateObject(), *a, *t;
	const cJSON *v;
	uint64_t *pruned = NULL;

	if (j == NULL || cJSON_AddStringToObject(j, "path", display) == NULL)
		goto nomem;
	if (pruned_counts(f, &pruned) != 0 || cg_dp_read(f->manifest, NULL) < 0 ||
	    cg_dp_share_read(f->manifest, NULL) < 0)
		goto fail;
	/* The keys this summary adds win over a manifest's own. */
	cJSON_ArrayForEach(v, f->manifest)
	{
		if (v->string == NULL || strcmp(v->string, "path") == 0 ||
		    strcmp(v->string, "tensors") == 0 ||
		    strcmp(v->string, "cond_counts") == 0)
			continue;
		cJSON *d = cJSON_Duplicate(v, 1);
		if (d == NULL)
			goto nomem;
		cJSON_AddItemToObject(j, v->string, d);
	}
	if (f->is_signed) {
		char fpr[65];
		cg_key_fingerprint(fpr, f->signer);
		cJSON_DeleteItemFromObjectCaseSensitive(j, "signer");
		if (cJSON_AddStringToObject(j, "signer", fpr) == NULL)
			goto nomem;
	}
	if ((a = cJSON_AddArrayToObject(j, "tensors")) == NULL)
		goto nomem;
	struct cg_inspect_opts mo = *o;
	if (is_masked(f))
		mo.stats = 0; /* noise alone: no statistics */
	for (size_t i = 0; i < f->ntensors; i++) {
		if ((t = json_tensor(f->tensors[i], &mo,
		                     pruned ? pruned[i] : UINT64_MAX)) == NULL)
			goto fail;
		cJSON_AddItemToArray(a, t);
	}
	if (json_conds(j, f) != 0)
		goto fail;
	free(pruned);
	return j;
nomem:
	cg_seterr("out of memory");
fail:
	free(pruned);
	cJSON_Delete(j);
	return NULL;
}

/* ----------------------------------------------------------------- diff */

/*
 * A name and where it sits in its file, sorted by name then position, so
 * that matching the names of two files costs n log n even for a hostile
 * file with 65536 tensors or a manifest of a million keys, and a name
 * given twice matches its first use.
 */
struct entry {
	const char *name;
	size_t pos;
};

static int
cmp_entry(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;
	int c = strcmp(a->name, b->name);

	if (c != 0)
		return c;
	return (a->pos > b->pos) - (a->pos < b->pos);
}

/* The first entry of sorted e[n] called name, or NULL. */
static const struct entry *
find_entry(const struct entry *e, size_t n, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(e[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && strcmp(e[lo].name, name) == 0 ? &e[lo] : NULL;
}

static int
same_shape(const struct cg_tensor *a, const struct cg_tensor *b)
{
	if (a->ndim != b->ndim)
		return 0;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return 0;
	return 1;
}

int
cg_tensor_diff(struct cg_tensor_diff *td, const struct cg_tensor *a,
               const struct cg_tensor *b, double tolerance)
{
	double xa[CHUNK], xb[CHUNK], saa = 0, sbb = 0, sab = 0, sdd = 0;
	double thr = tolerance < 0 ? 0 : tolerance;
	int shape = same_shape(a, b);
	size_t k;

	memset(td, 0, sizeof(*td));
	td->a = a;
	td->b = b;
	td->status = CG_DIFF_DIFFERS;
	if (a->dtype == b->dtype && shape && a->nbytes == b->nbytes &&
	    (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0))
		td->status = CG_DIFF_IDENTICAL;
	if (a->nelem != b->nelem)
		return 0;
	td->compared = 1;
	/*
	 * Both sides a chunk at a time, side by side, so that neither is
	 * ever widened whole.  Each chunk's sums are added to the totals
	 * on their own, which keeps the rounding of a long sum in check.
	 * Squares of decoded values stay far below DBL_MAX (f32: 1e77).
	 */
	for (uint64_t first = 0; first < a->nelem; first += k) {
		double caa = 0, cbb = 0, cab = 0, cdd = 0;

		k = a->nelem - first < CHUNK ? (size_t)(a->nelem - first)
		                             : CHUNK;
		if (cg_tensor_decode_f64(a, first, k, xa) != 0 ||
		    cg_tensor_decode_f64(b, first, k, xb) != 0)
			return -1;
		for (size_t i = 0; i < k; i++) {
			double x = xa[i], y = xb[i], e;
			if (isfinite(x) && isfinite(y)) {
				e = x - y;
				caa += x * x;
				cbb += y * y;
				cab += x * y;
				cdd += e * e;
				e = fabs(e);
			} else if (x == y || (isnan(x) && isnan(y))) {
				e = 0;
			} else {
				e = INFINITY;
			}
			if (e > td->max_abs)
				td->max_abs = e;
			if (e > thr)
				td->ndiff++;
		}
		saa += caa;
		sbb += cbb;
		sab += cab;
		sdd += cdd;
	}
	if (saa > 0)
		td->rel_l2 = sqrt(sdd) / sqrt(saa);
	else
		td->rel_l2 = sdd > 0 ? INFINITY : 0;
	if (saa > 0 && sbb > 0) {
		td->cosine = sab / (sqrt(saa) * sqrt(sbb));
		/* rounding can step past the bounds by an ulp */
		td->cosine = fmax(-1, fmin(1, td->cosine));
	} else {
		td->cosine = NAN;
	}
	if (td->status != CG_DIFF_IDENTICAL && tolerance >= 0 && shape &&
	    td->max_abs <= tolerance)
		td->status = CG_DIFF_EQUAL;
	return 0;
}

/* Sorted entries for the tensors of f; NULL with a message. */
static struct entry *
tensor_entries(const struct cg_file *f)
{
	struct entry *e = malloc((f->ntensors + 1) * sizeof(*e));

	if (e == NULL) {
		cg_seterr("out of memory");
		return NULL;
	}
	for (size_t i = 0; i < f->ntensors; i++) {
		e[i].name = f->tensors[i]->name;
		e[i].pos = i;
	}
	qsort(e, f->ntensors, sizeof(*e), cmp_entry);
	return e;
}

/* Tensors of a and b into d->tensors; 0 or -1 with a message. */
static int
diff_tensors(struct cg_diff *d, const struct cg_file *a,
             const struct cg_file *b)
{
	struct entry *eb = tensor_entries(b);
	unsigned char *seen = calloc(b->ntensors + 1, 1);
	int rc = -1;

	if (eb == NULL || seen == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (size_t i = 0; i < a->ntensors; i++) {
		const struct cg_tensor *ta = a->tensors[i];
		const struct entry *hit = find_entry(eb, b->ntensors, ta->name);
		struct cg_tensor_diff *td = &d->tensors[d->ntensors++];

		if (hit == NULL) {
			td->a = ta;
			td->status = CG_DIFF_ONLY_A;
		} else {
			seen[hit->pos] = 1;
			if (cg_tensor_diff(td, ta, b->tensors[hit->pos],
			                   d->tolerance) != 0)
				goto out;
		}
		d->count[td->status]++;
	}
	for (size_t j = 0; j < b->ntensors; j++) {
		struct cg_tensor_diff *td;
		if (seen[j])
			continue;
		td = &d->tensors[d->ntensors++];
		td->b = b->tensors[j];
		td->status = CG_DIFF_ONLY_B;
		d->count[td->status]++;
	}
	rc = 0;
out:
	free(seen);
	free(eb);
	return rc;
}

/* Manifest fields of a and b that differ into d->fields; 0 or -1. */
static int
diff_fields(struct cg_diff *d, const struct cg_file *a, const struct cg_file *b)
{
	size_t nb, n;
	const cJSON **items = NULL, *v;
	struct entry *eb = NULL;
	unsigned char *seen = NULL;
	int rc = -1;

	/* objects count their members as arrays do */
	nb = (size_t)cJSON_GetArraySize(b->manifest);
	n = (size_t)cJSON_GetArraySize(a->manifest);
	items = malloc((nb + 1) * sizeof(*items));
	eb = malloc((nb + 1) * sizeof(*eb));
	seen = calloc(nb + 1, 1);
	d->fields = calloc(n + nb + 1, sizeof(*d->fields));
	if (items == NULL || eb == NULL || seen == NULL || d->fields == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	nb = 0;
	cJSON_ArrayForEach(v, b->manifest)
	{
		if (v->string == NULL)
			continue;
		items[nb] = v;
		eb[nb].name = v->string;
		eb[nb].pos = nb;
		nb++;
	}
	qsort(eb, nb, sizeof(*eb), cmp_entry);
	cJSON_ArrayForEach(v, a->manifest)
	{
		const struct entry *hit;
		const cJSON *w = NULL;

		if (v->string == NULL)
			continue;
		if ((hit = find_entry(eb, nb, v->string)) != NULL) {
			seen[hit->pos] = 1;
			w = items[hit->pos];
			if (cJSON_Compare(v, w, 1))
				continue;
		}
		d->fields[d->nfields++] =
		    (struct cg_field_diff){v->string, v, w};
	}
	for (size_t j = 0; j < nb; j++)
		if (!seen[j])
			d->fields[d->nfields++] = (struct cg_field_diff){
			    items[j]->string, NULL, items[j]};
	rc = 0;
out:
	free(seen);
	free(eb);
	free(items);
	return rc;
}

struct cg_diff *
cg_diff_new(const struct cg_file *a, const struct cg_file *b, double tolerance)
{
	struct cg_diff *d = calloc(1, sizeof(*d));

	if (d == NULL || (d->tensors = calloc(a->ntensors + b->ntensors + 1,
	                                      sizeof(*d->tensors))) == NULL) {
		cg_seterr("out of memory");
		goto fail;
	}
	d->tolerance = tolerance;
	d->na = a->ntensors;
	d->nb = b->ntensors;
	if (diff_tensors(d, a, b) != 0 || diff_fields(d, a, b) != 0)
		goto fail;
	return d;
fail:
	cg_diff_free(d);
	return NULL;
}

void
cg_diff_free(struct cg_diff *d)
{
	if (d == NULL)
		return;
	free(d->tensors);
	free(d->fields);
	free(d);
}

int
cg_diff_differs(const struct cg_diff *d)
{
	return d->count[CG_DIFF_DIFFERS] + d->count[CG_DIFF_ONLY_A] +
	           d->count[CG_DIFF_ONLY_B] >
	       0;
}

/* Words for the statuses: the table's, and --json's. */
static const char *const status_word[CG_DIFF_NSTATUS] = {
    "identical", "equal", "differs", "only in A", "only in B"};
static const char *const status_key[CG_DIFF_NSTATUS] = {
    "identical", "equal", "differs", "only_a", "only_b"};

/* "a", or "a->b" where the two sides differ. */
static void
pair_str(char *out, size_t n, const char *a, const char *b)
{
	if (strcmp(a, b) == 0)
		snprintf(out, n, "%s", a);
	else
		snprintf(out, n, "%s->%s", a, b);
}

/* The DTYPE and SHAPE cells of a row: the side present, or both. */
static void
diff_cells(char *dt, size_t ndt, char *sh, size_t nsh,
           const struct cg_tensor_diff *td)
{
	const struct cg_tensor *a = td->a ? td->a : td->b;
	const struct cg_tensor *b = td->b ? td->b : td->a;
	char sa[SHAPE_LEN], sb[SHAPE_LEN];

	cg_shape_str(sa, sizeof(sa), a);
	cg_shape_str(sb, sizeof(sb), b);
	pair_str(dt, ndt, cg_dtype_name(a->dtype), cg_dtype_name(b->dtype));
	pair_str(sh, nsh, sa, sb);
}

/* One side of a manifest field: its value, or "(absent)". */
static int
put_side(FILE *fp, const cJSON *v, const char *key)
{
	if (v == NULL) {
		fputs("(absent)", fp);
		return 0;
	}
	/* config is the one field people read whole */
	return put_value(fp, v,
	                 strcmp(key, "config") == 0 ? SIZE_MAX : TABLE_VALUE);
}

int
cg_diff_table(FILE *fp, const char *da, const char *db, const struct cg_diff *d)
{
	/* what the tensors: line counts, in this order */
	static const enum cg_diff_status order[] = {
	    CG_DIFF_IDENTICAL, CG_DIFF_EQUAL, CG_DIFF_DIFFERS, CG_DIFF_ONLY_A,
	    CG_DIFF_ONLY_B};
	char dt[2 * 16 + 4], sh[2 * SHAPE_LEN + 4];
	int wname = 4, wdt = 5, wsh = 5, listed = 0;

	put_key(fp, "A");
	put_clean(fp, da, SIZE_MAX);
	fputc('\n', fp);
	put_key(fp, "B");
	put_clean(fp, db, SIZE_MAX);
	fputc('\n', fp);
	for (size_t i = 0; i < d->nfields; i++) {
		const struct cg_field_diff *fd = &d->fields[i];
		int col = put_key(fp, fd->key);

		fputs("A ", fp);
		if (put_side(fp, fd->a, fd->key) != 0)
			return -1;
		fprintf(fp, "\n%*sB ", col, "");
		if (put_side(fp, fd->b, fd->key) != 0)
			return -1;
		fputc('\n', fp);
	}
	if (d->tolerance >= 0) {
		put_key(fp, "tolerance");
		fprintf(fp, "%g\n", d->tolerance);
	}
	put_key(fp, "tensors");
	fprintf(fp, "%zu in A, %zu in B:", d->na, d->nb);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		size_t n = d->count[order[i]];
		const char *w = status_word[order[i]];
		if (n == 0 && (order[i] != CG_DIFF_IDENTICAL || d->ntensors))
			continue;
		/* "2 differ", but "1 differs" */
		fprintf(fp, "%s %zu %s", listed++ ? "," : "", n,
		        order[i] == CG_DIFF_DIFFERS && n != 1 ? "differ" : w);
	}
	fputc('\n', fp);
	if (d->ntensors == 0)
		goto out;
	for (size_t i = 0; i < d->ntensors; i++) {
		const struct cg_tensor_diff *td = &d->tensors[i];
		int len = (int)strlen(td->a ? td->a->name : td->b->name);
		if (len > wname)
			wname = len;
		diff_cells(dt, sizeof(dt), sh, sizeof(sh), td);
		if ((len = (int)strlen(dt)) > wdt)
			wdt = len;
		if ((len = (int)strlen(sh)) > wsh)
			wsh = len;
	}
	fprintf(fp, "\n%-*s  %-9s  %-*s  %-*s %10s %10s %10s %10s\n", wname,
	        "NAME", "STATUS", wdt, "DTYPE", wsh, "SHAPE", "MAX|A-B|",
	        "REL-L2", "NDIFF", "COSINE");
	for (size_t i = 0; i < d->ntensors; i++) {
		const struct cg_tensor_diff *td = &d->tensors[i];

		diff_cells(dt, sizeof(dt), sh, sizeof(sh), td);
		/* names were checked by the reader: printable ASCII */
		fprintf(fp, "%-*s  %-9s  %-*s  %-*s", wname,
		        td->a ? td->a->name : td->b->name,
		        status_word[td->status], wdt, dt, wsh, sh);
		if (!td->compared) {
			fprintf(fp, " %10s %10s %10s %10s\n", "-", "-", "-",
			        "-");
			continue;
		}
		fprintf(fp, " %10.4g %10.4g %10" PRIu64, td->max_abs,
		        td->rel_l2, td->ndiff);
		/* fixed decimals: a cosine of 0.9999999 is not 1 */
		if (isnan(td->cosine))
			fprintf(fp, " %10s\n", "-");
		else
			fprintf(fp, " %10.7f\n", td->cosine);
	}
out:
	if (ferror(fp))
		return cg_seterr("write error");
	return 0;
}

/* A number, or null where it is not finite (JSON has no inf or nan). */
static cJSON *
add_finite(cJSON *o, const char *key, double x)
{
	return isfinite(x) ? cJSON_AddNumberToObject(o, key, x)
	                   : cJSON_AddNullToObject(o, key);
}

/* {"dtype", "shape"} of t, or null. */
static cJSON *
json_side(const struct cg_tensor *t)
{
	cJSON *o, *a;

	if (t == NULL)
		return cJSON_CreateNull();
	if ((o = cJSON_CreateObject()) == NULL)
		return NULL;
	if (cJSON_AddStringToObject(o, "dtype", cg_dtype_name(t->dtype)) ==
	        NULL ||
	    (a = cJSON_AddArrayToObject(o, "shape")) == NULL) {
		cJSON_Delete(o);
		return NULL;
	}
	for (int d = 0; d < t->ndim; d++)
		cJSON_AddItemToArray(a,
		                     cJSON_CreateNumber((double)t->shape[d]));
	return o;
}

struct cJSON *
cg_diff_json_tensor(const struct cg_tensor_diff *td)
{
	cJSON *j = cJSON_CreateObject(), *s;

	if (j == NULL ||
	    cJSON_AddStringToObject(
	        j, "tensor", td->a ? td->a->name : td->b->name) == NULL ||
	    cJSON_AddStringToObject(j, "status", status_key[td->status]) ==
	        NULL)
		goto nomem;
	if ((s = json_side(td->a)) == NULL)
		goto nomem;
	cJSON_AddItemToObject(j, "a", s);
	if ((s = json_side(td->b)) == NULL)
		goto nomem;
	cJSON_AddItemToObject(j, "b", s);
	if (td->a == NULL || td->b == NULL)
		return j;
	cJSON_AddBoolToObject(j, "same_dtype", td->a->dtype == td->b->dtype);
	cJSON_AddBoolToObject(j, "same_shape", same_shape(td->a, td->b));
	if (!td->compared)
		return j;
	cJSON_AddNumberToObject(j, "count", (double)td->a->nelem);
	add_finite(j, "max_abs", td->max_abs);
	add_finite(j, "rel_l2", td->rel_l2);
	cJSON_AddNumberToObject(j, "ndiff", (double)td->ndiff);
	if (add_finite(j, "cosine", td->cosine) == NULL)
		goto nomem;
	return j;
nomem:
	cg_seterr("out of memory");
	cJSON_Delete(j);
	return NULL;
}

struct cJSON *
cg_diff_json_summary(const char *da, const char *db, const struct cg_diff *d)
{
	cJSON *j = cJSON_CreateObject(), *a, *e, *v;

	if (j == NULL || cJSON_AddStringToObject(j, "a", da) == NULL ||
	    cJSON_AddStringToObject(j, "b", db) == NULL)
		goto nomem;
	if (d->tolerance >= 0)
		cJSON_AddNumberToObject(j, "tolerance", d->tolerance);
	else
		cJSON_AddNullToObject(j, "tolerance");
	cJSON_AddBoolToObject(j, "differ", cg_diff_differs(d));
	cJSON_AddNumberToObject(j, "tensors_a", (double)d->na);
	cJSON_AddNumberToObject(j, "tensors_b", (double)d->nb);
	for (int s = 0; s < CG_DIFF_NSTATUS; s++)
		cJSON_AddNumberToObject(j, status_key[s], (double)d->count[s]);
	if ((a = cJSON_AddArrayToObject(j, "fields")) == NULL)
		goto nomem;
	for (size_t i = 0; i < d->nfields; i++) {
		const struct cg_field_diff *fd = &d->fields[i];
		if ((e = cJSON_CreateObject()) == NULL)
			goto nomem;
		cJSON_AddItemToArray(a, e);
		if (cJSON_AddStringToObject(e, "key", fd->key) == NULL)
			goto nomem;
		/* a side that lacks the field has no key at all: a
		 * manifest may hold a real null */
		if (fd->a) {
			if ((v = cJSON_Duplicate(fd->a, 1)) == NULL)
				goto nomem;
			cJSON_AddItemToObject(e, "a", v);
		}
		if (fd->b) {
			if ((v = cJSON_Duplicate(fd->b, 1)) == NULL)
				goto nomem;
			cJSON_AddItemToObject(e, "b", v);
		}
	}
	return j;
nomem:
	cg_seterr("out of memory");
	cJSON_Delete(j);
	return NULL;
}
