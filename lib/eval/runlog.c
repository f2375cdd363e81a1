/*
 * eval/runlog.c - the --log JSON lines of a run, read back as series.
 *
 * A line at a time, each at most CG_RUNLOG_LINE_MAX bytes, parsed whole by
 * cJSON; the figures a plot needs are taken by name and checked to be
 * numbers.  Nothing else of a line is kept.
 */
#include "eval/runlog.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* -------------------------------------------------------- one line */

/*
 * The next line of fp into *buf [*cap] (no newline, NUL-ended), its
 * length in *len and whether it ended in a newline in *nl.  1, 0 at the
 * end, -1 with a message (too long, a read error, out of memory).
 */
static int
next_line(FILE *fp, char **buf, size_t *cap, size_t *len, int *nl)
{
	size_t n = 0;
	int c;

	*nl = 0;
	while ((c = getc(fp)) != EOF) {
		if (c == '\n') {
			*nl = 1;
			break;
		}
		if (n + 2 > *cap) {
			size_t want = *cap ? *cap * 2 : 256;
			char *b;
			if (n + 2 > CG_RUNLOG_LINE_MAX)
				return cg_seterr("line longer than %d bytes",
				                 CG_RUNLOG_LINE_MAX);
			if ((b = realloc(*buf, want)) == NULL)
				return cg_seterr("out of memory");
			*buf = b, *cap = want;
		}
		(*buf)[n++] = (char)c;
	}
	if (ferror(fp))
		return cg_seterr("read error");
	if (n == 0 && !*nl)
		return 0;
	if (*buf == NULL && (*buf = malloc(*cap = 1)) == NULL)
		return cg_seterr("out of memory");
	(*buf)[n] = '\0';
	*len = n;
	return 1;
}

/* The number named key of o into *out (NAN where o has none): 0, or -1
 * with a message when it is there and not a finite number. */
static int
number(const cJSON *o, const char *key, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	*out = NAN;
	if (v == NULL || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return cg_seterr("\"%s\" is not a number", key);
	*out = v->valuedouble;
	return 0;
}

/* Mean and largest of the numbers of the array a into p: 0, or -1. */
static int
stale_of(struct cg_runlog_point *p, const cJSON *a, const char *member)
{
	double sum = 0, max = 0;
	int n = 0;
	const cJSON *e;

	if (a == NULL)
		return 0;
	if (!cJSON_IsArray(a))
		return cg_seterr("staleness is not an array");
	cJSON_ArrayForEach(e, a)
	{
		double s;
		if (member) {
			if (!cJSON_IsObject(e))
				return cg_seterr("staleness: an input is not "
				                 "an object");
			if (number(e, member, &s) != 0)
				return -1;
		} else {
			if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble))
				return cg_seterr("staleness: not a number");
			s = e->valuedouble;
		}
		if (isnan(s) || s < 0)
			return cg_seterr("staleness: not a number of steps");
		sum += s;
		max = n == 0 || s > max ? s : max;
		n++;
	}
	if (n > 0)
		p->stale_mean = sum / n, p->stale_max = max;
	return 0;
}

/* The first figure of an eval line that is a metric, into name. */
static void
first_metric(const cJSON *o, char *name, size_t cap)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, o)
	{
		if (!cJSON_IsNumber(e) || e->string == NULL ||
		    strlen(e->string) >= cap || !strcmp(e->string, "step") ||
		    !strcmp(e->string, "seed") ||
		    !strcmp(e->string, "examples"))
			continue;
		strcpy(name, e->string);
		return;
	}
}

/*
 * The figures of the object o into p, its kind told by its members;
 * 1 when it is a kind of line plotted, 0 when not, -1 with a message.
 */
static int
point_of(struct cg_runlog *lg, const cJSON *o, struct cg_runlog_point *p)
{
	double samples = NAN, secs = NAN;
	int has = 1;

	if (cJSON_HasObjectItem(o, "emit")) {
		p->kind = CG_RUNLOG_TRAIN;
		has = number(o, "step", &p->step) == 0 &&
		      number(o, "samples", &samples) == 0 &&
		      number(o, "loss", &p->loss) == 0 &&
		      number(o, "seconds", &secs) == 0 &&
		      number(o, "update_bytes", &p->bytes) == 0;
	} else if (cJSON_HasObjectItem(o, "round")) {
		p->kind = CG_RUNLOG_ROUND;
		has = number(o, "published", &p->step) == 0 &&
		      number(o, "samples", &samples) == 0 &&
		      number(o, "loss", &p->loss) == 0 &&
		      number(o, "seconds", &secs) == 0 &&
		      number(o, "bytes_up", &p->bytes) == 0 &&
		      number(o, "bytes_down", &p->bytes_down) == 0;
	} else if (cJSON_HasObjectItem(o, "published")) {
		p->kind = CG_RUNLOG_INBOX;
		has = number(o, "published", &p->step) == 0 &&
		      number(o, "samples", &samples) == 0 &&
		      number(o, "loss", &p->loss) == 0 &&
		      number(o, "seconds", &secs) == 0 &&
		      stale_of(p,
		               cJSON_GetObjectItemCaseSensitive(o, "staleness"),
		               NULL) == 0;
	} else if (cJSON_HasObjectItem(o, "fold_seconds")) {
		const cJSON *st =
		    cJSON_GetObjectItemCaseSensitive(o, "staleness");
		p->kind = CG_RUNLOG_REDUCE;
		has = number(o, "seconds", &secs) == 0;
		if (has && st != NULL) {
			if (!cJSON_IsObject(st))
				return cg_seterr("staleness is not an object");
			has = stale_of(p,
			               cJSON_GetObjectItemCaseSensitive(
			                   st, "inputs"),
			               "staleness") == 0;
		}
	} else if (cJSON_HasObjectItem(o, "examples")) {
		p->kind = CG_RUNLOG_EVAL;
		if (lg->metric[0] == '\0')
			first_metric(o, lg->metric, sizeof lg->metric);
		has = number(o, "step", &p->step) == 0 &&
		      (lg->metric[0] == '\0' ||
		       number(o, lg->metric, &p->metric) == 0);
	} else {
		return 0;
	}
	if (!has)
		return -1;
	if (!isnan(samples) && samples < 0)
		return cg_seterr("\"samples\" is negative");
	if (!isnan(secs) && secs < 0)
		return cg_seterr("\"seconds\" is negative");
	/* the sums so far, NAN until a line has the figure */
	p->examples = lg->n > 0 ? lg->p[lg->n - 1].examples : NAN;
	p->seconds = lg->n > 0 ? lg->p[lg->n - 1].seconds : NAN;
	if (!isnan(samples))
		p->examples = (isnan(p->examples) ? 0 : p->examples) + samples;
	if (!isnan(secs))
		p->seconds = (isnan(p->seconds) ? 0 : p->seconds) + secs;
	if (isinf(p->examples) || isinf(p->seconds))
		return cg_seterr("the samples or seconds so far pass the "
		                 "largest number");
	return 1;
}

/* ------------------------------------------------------------ a file */

/* The legend's name of path: no folder, no .log or .jsonl. */
static char *
name_of(const char *path)
{
	const char *b = strrchr(path, '/');
	char *s;
	size_t n;

	if (!strcmp(path, "-"))
		return strdup("stdin");
	b = b && b[1] ? b + 1 : path;
	if ((s = strdup(b)) == NULL)
		return NULL;
	n = strlen(s);
	if (n > 4 && !strcmp(s + n - 4, ".log"))
		s[n - 4] = '\0';
	else if (n > 6 && !strcmp(s + n - 6, ".jsonl"))
		s[n - 6] = '\0';
	return s;
}

int
cg_runlog_read(struct cg_runlog *lg, FILE *fp, const char *path,
               const char *metric)
{
	const char *shown = strcmp(path, "-") ? path : "standard input";
	char *buf = NULL;
	size_t cap = 0, len = 0;
	long line = 0;
	int nl, rc = -1, got;

	if ((lg->name = name_of(path)) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	if (metric) {
		if (strlen(metric) >= sizeof lg->metric) {
			cg_seterr("--metric %s: too long", metric);
			goto out;
		}
		strcpy(lg->metric, metric);
	}
	while ((got = next_line(fp, &buf, &cap, &len, &nl)) == 1) {
		struct cg_runlog_point p = {.step = NAN,
		                            .loss = NAN,
		                            .metric = NAN,
		                            .bytes = NAN,
		                            .bytes_down = NAN,
		                            .stale_mean = NAN,
		                            .stale_max = NAN};
		const char *end = NULL;
		cJSON *o;
		int k;

		p.line = ++line;
		/* cJSON takes a NUL for a space: refused here */
		o = memchr(buf, '\0', len)
		        ? NULL
		        : cJSON_ParseWithLengthOpts(buf, len, &end, 0);
		if (o != NULL && end != NULL)
			end += strspn(end, " \t\r");
		if (o == NULL || end == NULL || end != buf + len ||
		    !cJSON_IsObject(o)) {
			cJSON_Delete(o);
			if (!nl) {
				/* a writer cut short: the end of a line, or
				 * the zeros a crash leaves past it */
				lg->partial = line;
				break;
			}
			if (strspn(buf, " \t\r") == len)
				continue; /* an empty line */
			cg_seterr("%s:%ld: not a JSON object", shown, line);
			goto out;
		}
		k = point_of(lg, o, &p);
		cJSON_Delete(o);
		if (k < 0) {
			goto prefix;
		}
		if (k == 0)
			continue;
		if (lg->n == lg->cap) {
			size_t want = lg->cap ? lg->cap * 2 : 64;
			struct cg_runlog_point *q;
			if (lg->n >= CG_RUNLOG_POINTS_MAX) {
				cg_seterr("%s:%ld: more than %d lines", shown,
				          line, CG_RUNLOG_POINTS_MAX);
				goto out;
			}
			if ((q = realloc(lg->p, want * sizeof *q)) == NULL) {
				cg_seterr("out of memory");
				goto out;
			}
			lg->p = q, lg->cap = want;
		}
		lg->p[lg->n++] = p;
	}
	if (got < 0) {
		line++;
		goto prefix;
	}
	rc = 0;
	goto out;
prefix : {
	char where[4200];
	snprintf(where, sizeof where, "%s:%ld", shown, line);
	cg_errprefix(where);
}
out:
	free(buf);
	return rc;
}

void
cg_runlog_free(struct cg_runlog *lg)
{
	if (lg == NULL)
		return;
	free(lg->name);
	free(lg->p);
	memset(lg, 0, sizeof *lg);
}

static double
at(const struct cg_runlog_point *p, size_t off)
{
	return *(const double *)((const char *)p + off);
}

size_t
cg_runlog_count(const struct cg_runlog *lg, size_t off)
{
	return cg_runlog_count2(lg, off, off);
}

size_t
cg_runlog_count2(const struct cg_runlog *lg, size_t xoff, size_t yoff)
{
	size_t k = 0;

	for (size_t i = 0; i < lg->n; i++)
		if (!isnan(at(&lg->p[i], xoff)) && !isnan(at(&lg->p[i], yoff)))
			k++;
	return k;
}
