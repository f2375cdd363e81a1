/*
 * train/plan.c - the split of a model into pipeline stages over hosts of
 * given speed, memory and links that trains a batch fastest.
 *
 * plan.h says the model of time and memory.  The search is a table over
 * (stages, layers) per micro-batch count: O(N L^2) steps, with each
 * range's cost asked of the arch once per count.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parse.h"
#include "model/registry.h"
#include "train/plan.h"

/* ------------------------------------------------------------ hosts file */

#define LINE_MAX_BYTES 1024

/* A link rate: a number of bits/s with k, M or G (powers of 1000). */
static int
parse_link(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end), mul = 1;

	if (end == s)
		return -1;
	if (*end == 'k' || *end == 'K')
		mul = 1e3, end++;
	else if (*end == 'M')
		mul = 1e6, end++;
	else if (*end == 'G')
		mul = 1e9, end++;
	if (*end != '\0' || !isfinite(v) || v <= 0 || v * mul > 1e15)
		return -1;
	*out = v * mul;
	return 0;
}

/* Seconds, or milliseconds with "ms", in [0, 60]. */
static int
parse_rtt(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s)
		return -1;
	if (strcmp(end, "ms") == 0)
		v /= 1000, end += 2;
	if (*end != '\0' || !isfinite(v) || v < 0 || v > 60)
		return -1;
	*out = v;
	return 0;
}

static int
name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CG_PLAN_NAME)
		return 0;
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
		    !(*s >= '0' && *s <= '9') && !strchr("._-@:[]", *s))
			return 0;
	return 1;
}

/* One host's line of words w [nw] into h; 0 or -1 with a message. */
static int
host_line(char **w, int nw, struct cg_plan_host *h)
{
	if (nw < 4 || nw > 5)
		return cg_seterr("%d words, not NAME RATE MEMORY LINK [RTT]",
		                 nw);
	if (!name_ok(w[0]))
		return cg_seterr(
		    "host name '%.80s': 1 to %d of [A-Za-z0-9._-@:[]]", w[0],
		    CG_PLAN_NAME);
	strcpy(h->name, w[0]);
	if (cg_parse_f64("examples/s", w[1], 1e-9, 1e12, &h->rate) != 0 ||
	    cg_parse_size("memory", w[2], &h->mem) != 0)
		return -1;
	if (h->mem == 0)
		return cg_seterr("memory: 0 bytes");
	if (strcmp(w[3], "-") == 0)
		h->link = 0;
	else if (parse_link(w[3], &h->link) != 0)
		return cg_seterr("link '%.80s': not bits/s (100M, 1G) or -",
		                 w[3]);
	if (nw == 5 && parse_rtt(w[4], &h->rtt) != 0)
		return cg_seterr("round trip '%.80s': not seconds in [0, 60] "
		                 "(or 20ms)",
		                 w[4]);
	return 0;
}

/* The hosts' lines read, checked one by one; the whole checked by the
 * caller.  0 or -1 with a message naming the line. */
static int
read_lines(FILE *fp, struct cg_plan_hosts *hs)
{
	char line[LINE_MAX_BYTES + 1];
	int no = 0, rc = -1, ch = 0;

	while (ch != EOF) {
		char *w[8], *save = NULL, *t;
		int nw = 0, nul = 0;
		size_t len = 0;
		/* a line at a time, at most LINE_MAX_BYTES of it held */
		while ((ch = getc(fp)) != EOF && ch != '\n') {
			if (len == LINE_MAX_BYTES)
				break;
			nul |= ch == '\0';
			line[len++] = (char)ch;
		}
		line[len] = '\0';
		if (ch == EOF && len == 0)
			break;
		no++;
		if (ch != EOF && ch != '\n') {
			cg_seterr("line %d: longer than %d bytes", no,
			          LINE_MAX_BYTES);
			goto out;
		}
		if (nul) {
			cg_seterr("line %d: a NUL byte", no);
			goto out;
		}
		if ((t = strchr(line, '#')) != NULL)
			*t = '\0';
		for (t = strtok_r(line, " \t\r\n", &save); t && nw < 8;
		     t = strtok_r(NULL, " \t\r\n", &save))
			w[nw++] = t;
		if (nw == 0)
			continue;
		if (hs->n == CG_STAGE_MAX) {
			cg_seterr("line %d: more than %d hosts", no,
			          CG_STAGE_MAX);
			goto out;
		}
		if (host_line(w, nw, &hs->h[hs->n]) != 0) {
			char at[32];
			snprintf(at, sizeof(at), "line %d", no);
			cg_errprefix(at);
			goto out;
		}
		for (int i = 0; i < hs->n; i++)
			if (strcmp(hs->h[i].name, hs->h[hs->n].name) == 0) {
				cg_seterr("line %d: host %s a second time (a "
				          "host is one stage)",
				          no, hs->h[i].name);
				goto out;
			}
		hs->n++;
	}
	if (ferror(fp))
		cg_seterr("read error");
	else
		rc = 0;
out:
	return rc;
}

int
cg_plan_hosts_read(const char *path, struct cg_plan_hosts *hs)
{
	int stdin_ = strcmp(path, "-") == 0;
	FILE *fp = stdin_ ? stdin : fopen(path, "r");
	int rc;

	memset(hs, 0, sizeof(*hs));
	if (fp == NULL)
		return cg_seterr("%s: %s", path, strerror(errno));
	rc = read_lines(fp, hs);
	if (!stdin_)
		fclose(fp);
	if (rc == 0 && hs->n == 0)
		rc = cg_seterr("no hosts");
	for (int i = 0; rc == 0 && i < hs->n; i++)
		if ((hs->h[i].link > 0) != (i < hs->n - 1))
			rc = cg_seterr("host %s: %s", hs->h[i].name,
			               i < hs->n - 1
			                   ? "no link to the next host (-)"
			                   : "the last host has no next: "
			                     "its link is -");
	if (rc != 0)
		cg_errprefix(stdin_ ? "(stdin)" : path);
	return rc;
}

/* ------------------------------------------------------------ the costs */

double
cg_plan_train_flops(const struct cg_model *m)
{
	const struct cg_stage_ops *ops = m->arch->stages;
	double f;
	size_t ws;
	int T, C, L;

	if (ops == NULL || ops->cost == NULL)
		return cg_seterr("a %s model has no stage costs",
		                 m->arch->name);
	if ((L = ops->layers(m, 1, &T, &C)) < 0 ||
	    ops->cost(m, 0, L, 1, 0, &f, &ws) != 0)
		return -1;
	return 3 * f;
}

/* The peak bytes of a stage (plan.h) of P parameters, workspace ws, the
 * first or another, sets micro-batches' inputs held. */
static uint64_t
mem_of(uint64_t P, uint64_t ws, uint64_t bt, uint64_t rtc, uint64_t sets,
       int first, enum cg_dtype wire)
{
	uint64_t b = 16 * P + ws + 8 * bt + 12 * rtc;

	if (wire != CG_F32) /* the encoded words */
		b += (uint64_t)ceil(cg_plan_wire_bytes(wire, (double)rtc));
	return b + (first ? 4 * bt : 4 * sets * rtc);
}

/* The micro-batches' inputs (and kept sets) of stage i of N: every
 * one's under GPipe, at most N - i under 1F1B, one on the last stage
 * (it takes each as it comes). */
static int
sets_of(int i, int N, int nmb, int one_f_one_b)
{
	if (i == N - 1)
		return 1;
	return one_f_one_b && N - i < nmb ? N - i : nmb;
}

int
cg_plan_stage_bytes(const struct cg_model *m, const struct cg_stage *st,
                    int batch, int micro, int one_f_one_b,
                    enum cg_dtype wire, int keep, uint64_t *bytes)
{
	const struct cg_stage_ops *ops = m->arch->stages;
	int most = (batch + micro - 1) / micro;
	int nch = (batch + most - 1) / most;
	int run = (batch + nch - 1) / nch, nmb = (batch + run - 1) / run;
	double f;
	size_t ws;

	int sets = sets_of(st->index, st->count, nmb, one_f_one_b);
	if (ops == NULL || ops->cost == NULL)
		return cg_seterr("a %s model has no stage costs",
		                 m->arch->name);
	if (ops->cost(m, st->a, st->b, run, keep ? sets : 0, &f, &ws) != 0)
		return -1;
	*bytes = mem_of(st->hi - st->lo, ws, (uint64_t)batch * st->T,
	                (uint64_t)run * st->T * st->C, (uint64_t)sets,
	                st->index == 0, wire);
	return 0;
}

/* What a search for one micro-batch count works on. */
struct search {
	const struct cg_model *m;
	const struct cg_plan_hosts *hs;
	const struct cg_plan_opts *o;
	int L, N, T, C;
	double R[CG_STAGE_MAX]; /* operations a second, per host */
	uint64_t *poff;         /* [L + 1] the flat offset of layer l */
	double *flops;          /* [(L + 1)^2] forward, one row, [a, b) */
	size_t *ws;             /* [(L + 1)^2] workspace at run rows */
	size_t *set;            /* [(L + 1)^2] the bytes of a set kept more */
	int run, nmb, last_rows;
};

#define AT(s, a, b) ((size_t)(a) * ((s)->L + 1) + (b))

double
cg_plan_wire_bytes(enum cg_dtype wire, double n)
{
	const struct cg_codec *c = cg_codec(wire);

	return c == NULL ? 4 * n : n * c->bytes / c->block;
}

/* Frame bytes (file/frame.h): the header, then the payload. */
static uint64_t
frame(size_t name, int ndim, uint64_t payload)
{
	return 17 + name + 8 * (uint64_t)ndim + payload;
}

/* Peak bytes of stage i holding [a, b), its activations kept (keep)
 * or not. */
static uint64_t
stage_mem(const struct search *s, int i, int a, int b, int keep)
{
	uint64_t sets = (uint64_t)sets_of(i, s->N, s->nmb, s->o->one_f_one_b);
	uint64_t ws = s->ws[AT(s, a, b)];

	if (keep)
		ws += (sets - 1) * s->set[AT(s, a, b)];
	return mem_of(s->poff[b] - s->poff[a], ws, (uint64_t)s->o->batch * s->T,
	              (uint64_t)s->run * s->T * s->C, sets, i == 0, s->o->wire);
}

/* Whether stage i at [a, b) keeps its activations: not the last
 * stage, not told to recompute, and its host's memory holds them. */
static int
stage_keeps(const struct search *s, int i, int a, int b)
{
	return i < s->N - 1 && !s->o->recompute &&
	       stage_mem(s, i, a, b, 1) <= s->hs->h[i].mem;
}

/* Seconds of compute of one micro-batch of rows through stage i at
 * [a, b): forward (not the last stage) and backward, which runs the
 * forward pass again unless kept (and on the last stage, for the
 * first time). */
static void
stage_time(const struct search *s, int i, int a, int b, double rows, int keep,
           double *fwd, double *bwd)
{
	double f = s->flops[AT(s, a, b)] * rows / s->R[i];

	*fwd = i < s->N - 1 ? f : 0;
	*bwd = keep && i < s->N - 1 ? 2 * f : 3 * f;
}

/* ------------------------------------------------------------ playing it */

/* The step of split cut [N + 1] (stage i holds [cut[i], cut[i+1]),
 * keeping its activations where keep[i]), played out (plan.h);
 * seconds, busy [N] each stage's compute. */
static double
play(const struct search *s, const int *cut, const int *keep, double *busy)
{
	const int N = s->N, M = s->nmb;
	double *dn = malloc(sizeof(double) * (size_t)N * M * 2), *up;
	double wire = cg_plan_wire_bytes(s->o->wire, 1), end = 0;
	int *next, done = 0;

	if (dn == NULL || (next = calloc((size_t)N, sizeof(int))) == NULL) {
		free(dn);
		return -1;
	}
	up = dn + (size_t)N * M;
	for (size_t k = 0; k < (size_t)N * M * 2; k++)
		dn[k] = NAN;
	double free_at[CG_STAGE_MAX] = {0}, ldn[CG_STAGE_MAX] = {0},
	       lup[CG_STAGE_MAX] = {0};
	for (int i = 0; i < N; i++)
		busy[i] = 0;
	while (done < N) {
		int moved = 0;
		for (int i = 0; i < N; i++) {
			const int w0 =
			    s->o->one_f_one_b || i == N - 1 ? N - 1 - i : M;
			const int w = w0 > M ? M : w0;
			for (;;) {
				int k = next[i], j, bw;
				if (k == 2 * M)
					break;
				/* the schedule's k-th pass: w forward, then
				 * one forward and one backward in turn */
				if (k < w)
					j = k, bw = 0;
				else if (k < w + 2 * (M - w))
					j = (k - w) % 2 ? (k - w) / 2
					                : w + (k - w) / 2,
					bw = (k - w) % 2;
				else
					j = k - M, bw = 1;
				double ready = free_at[i];
				double t = bw ? up[(size_t)i * M + j]
				              : dn[(size_t)i * M + j];
				if (bw ? i < N - 1 : i > 0) {
					if (isnan(t))
						break;
					if (t > ready)
						ready = t;
				}
				double rows =
				    j == M - 1 ? s->last_rows : s->run;
				double fw, bk;
				stage_time(s, i, cut[i], cut[i + 1], rows,
				           keep[i], &fw, &bk);
				double fin = ready + (bw ? bk : fw);
				busy[i] += bw ? bk : fw;
				free_at[i] = fin;
				double act = rows * s->T * s->C * wire;
				const struct cg_plan_host *h = &s->hs->h[i];
				if (!bw && i < N - 1) {
					double bytes =
					    (double)frame(1, 3, (uint64_t)act) +
					    (double)frame(7, 2,
					                  rows * s->T * 4) +
					    (double)frame(6, 2,
					                  rows * s->T * 4);
					double st = fin > ldn[i] ? fin : ldn[i];
					ldn[i] = st + bytes * 8 / h->link;
					dn[(size_t)(i + 1) * M + j] =
					    ldn[i] + h->rtt / 2;
				}
				if (bw && i > 0) {
					const struct cg_plan_host *p =
					    &s->hs->h[i - 1];
					double bytes =
					    (double)frame(2, 3, (uint64_t)act) +
					    (double)frame(4, 1, 8);
					double st = fin > lup[i] ? fin : lup[i];
					lup[i] = st + bytes * 8 / p->link;
					up[(size_t)(i - 1) * M + j] =
					    lup[i] + p->rtt / 2;
				}
				next[i]++;
				moved = 1;
				if (next[i] == 2 * M) {
					done++;
					if (fin > end)
						end = fin;
				}
			}
		}
		if (!moved) { /* not for a schedule train.c runs */
			end = -1;
			break;
		}
	}
	free(next);
	free(dn);
	return end;
}

/* ------------------------------------------------------------ searching */

/* The split of s's micro-batch count whose slowest stage is fastest
 * among those that fit (ties: the least in all), into cut [N + 1].
 * 1 found, 0 none fits, -1 out of memory. */
static int
best_cut(const struct search *s, int *cut)
{
	const int N = s->N, L = s->L;
	size_t cells = (size_t)(N + 1) * (L + 1);
	double *mx = malloc(cells * sizeof(double) * 2), *sum;
	int *from = malloc(cells * sizeof(int)), found = 0;

	if (mx == NULL || from == NULL) {
		free(mx);
		free(from);
		return -1;
	}
	sum = mx + cells;
	for (size_t k = 0; k < cells; k++)
		mx[k] = INFINITY, sum[k] = INFINITY;
	mx[0] = sum[0] = 0;
	/* mx[i (L+1) + b]: the best of stages [0, i) over layers [0, b) */
	for (int i = 0; i < N; i++)
		for (int a = i; a <= L - (N - i); a++) {
			size_t k0 = (size_t)i * (L + 1) + a;
			if (!isfinite(mx[k0]))
				continue;
			int bmax = i == N - 1 ? L : L - (N - 1 - i);
			for (int b = i == N - 1 ? L : a + 1; b <= bmax; b++) {
				if (stage_mem(s, i, a, b, 0) > s->hs->h[i].mem)
					continue;
				double fw, bk;
				stage_time(s, i, a, b, s->run,
				           stage_keeps(s, i, a, b), &fw, &bk);
				double c = fw + bk;
				double nm = c > mx[k0] ? c : mx[k0];
				double ns = sum[k0] + c;
				size_t k1 = (size_t)(i + 1) * (L + 1) + b;
				if (nm < mx[k1] ||
				    (nm == mx[k1] && ns < sum[k1])) {
					mx[k1] = nm;
					sum[k1] = ns;
					from[k1] = a;
				}
			}
		}
	size_t kend = (size_t)N * (L + 1) + L;
	if (isfinite(mx[kend])) {
		found = 1;
		cut[N] = L;
		for (int i = N; i > 0; i--)
			cut[i - 1] = from[(size_t)i * (L + 1) + cut[i]];
	}
	free(mx);
	free(from);
	return found;
}

/* The costs of every range at s->run rows into s's tables; 0 or -1. */
static int
fill_costs(struct search *s)
{
	const struct cg_stage_ops *ops = s->m->arch->stages;

	for (int a = 0; a < s->L; a++)
		for (int b = a + 1; b <= s->L; b++) {
			size_t two;
			if (ops->cost(s->m, a, b, s->run, 0,
			              &s->flops[AT(s, a, b)],
			              &s->ws[AT(s, a, b)]) != 0 ||
			    ops->cost(s->m, a, b, s->run, 2,
			              &s->flops[AT(s, a, b)], &two) != 0)
				return -1;
			/* one set of activations, kept or not; each more
			 * the same bytes */
			s->set[AT(s, a, b)] = two - s->ws[AT(s, a, b)];
		}
	return 0;
}

/* The chunks of a batch B in M micro-batches, as cg_train_stage cuts it:
 * *run rows each, *nmb of them, the last *last rows. */
static void
chunks(int B, int M, int *run, int *nmb, int *last)
{
	int most = (B + M - 1) / M;
	int nch = (B + most - 1) / most;

	*run = (B + nch - 1) / nch;
	*nmb = (B + *run - 1) / *run;
	*last = B - (*nmb - 1) * *run;
}

int
cg_plan_find(const struct cg_model *m, const struct cg_plan_hosts *hs,
             const struct cg_plan_opts *o, struct cg_plan *p)
{
	const struct cg_stage_ops *ops = m->arch->stages;
	struct search s = {.m = m, .hs = hs, .o = o, .N = hs->n};
	struct cg_stage st;
	int cut[CG_STAGE_MAX + 1], rc = -1, any = 0, prev_run = 0;
	double pf = o->probe_flops, busy[CG_STAGE_MAX];

	memset(p, 0, sizeof(*p));
	if (ops == NULL || ops->cost == NULL)
		return cg_seterr("a %s model cannot be split into stages",
		                 m->arch->name);
	if (o->batch < 1 || o->micro < 0 || o->micro > o->batch)
		return cg_seterr("batch %d in %d micro-batches", o->batch,
		                 o->micro);
	/* the model's checks: the stages' own */
	if (cg_stage_plan(m, 0, hs->n, &st) != 0)
		return -1;
	s.T = st.T;
	s.C = st.C;
	if ((s.L = ops->layers(m, hs->n, &s.T, &s.C)) < 0)
		return -1;
	if (pf <= 0 && (pf = cg_plan_train_flops(m)) < 0)
		return -1;
	for (int i = 0; i < s.N; i++)
		s.R[i] = hs->h[i].rate * pf;
	size_t t2 = (size_t)(s.L + 1) * (s.L + 1);
	s.poff = malloc((size_t)(s.L + 1) * sizeof(uint64_t));
	s.flops = calloc(t2, sizeof(double));
	s.ws = calloc(t2, sizeof(size_t));
	s.set = calloc(t2, sizeof(size_t));
	if (s.poff == NULL || s.flops == NULL || s.ws == NULL ||
	    s.set == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (int l = 0; l <= s.L; l++) {
		int v = ops->layer_view(m, l);
		s.poff[l] = v >= m->nviews ? m->nparams : m->views[v].off;
	}
	int most = o->batch < CG_PLAN_MAX_MICRO ? o->batch : CG_PLAN_MAX_MICRO;
	for (int M = o->micro ? o->micro : 1; M <= (o->micro ? o->micro : most);
	     M++) {
		int last;
		chunks(o->batch, M, &s.run, &s.nmb, &last);
		if (s.run == prev_run)
			continue;
		prev_run = s.run;
		s.last_rows = last;
		if (fill_costs(&s) != 0)
			goto out;
		int f = best_cut(&s, cut);
		if (f < 0) {
			cg_seterr("out of memory");
			goto out;
		}
		if (f == 0)
			continue;
		int keep[CG_STAGE_MAX];
		for (int i = 0; i < s.N; i++)
			keep[i] = stage_keeps(&s, i, cut[i], cut[i + 1]);
		double t = play(&s, cut, keep, busy);
		if (t < 0) {
			cg_seterr("out of memory");
			goto out;
		}
		if (any && t >= p->step)
			continue;
		any = 1;
		p->count = s.N;
		p->micro = s.nmb;
		p->run = s.run;
		p->step = t;
		double w = cg_plan_wire_bytes(o->wire, 1);
		p->down = p->up = 0;
		for (int j = 0; j < s.nmb; j++) {
			uint64_t rows =
			    j == s.nmb - 1 ? (uint64_t)last : (uint64_t)s.run;
			uint64_t act = (uint64_t)(rows * s.T * s.C * w);
			p->down += frame(1, 3, act) +
			           frame(7, 2, rows * s.T * 4) +
			           frame(6, 2, rows * s.T * 4);
			p->up += frame(2, 3, act) + frame(4, 1, 8);
		}
		for (int i = 0; i < s.N; i++) {
			struct cg_plan_stage *ps = &p->st[i];
			ps->a = cut[i];
			ps->b = cut[i + 1];
			ps->params = s.poff[ps->b] - s.poff[ps->a];
			ps->keep = keep[i];
			ps->mem = stage_mem(&s, i, ps->a, ps->b, keep[i]);
			ps->busy = busy[i];
		}
	}
	if (!any)
		cg_seterr("no split of the model's %d layers over %d host%s "
		          "fits the memory given",
		          s.L, s.N, s.N == 1 ? "" : "s");
	else
		rc = 0;
out:
	free(s.poff);
	free(s.flops);
	free(s.ws);
	free(s.set);
	return rc;
}
