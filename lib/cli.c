/*
 * cli.c - strict number parsing, thread control and progress bars shared
 * by the programs.
 *
 * Numbers go through strtoll/strtod with the end pointer and range
 * checked, so "12abc", "" and "1e999" are errors, not 12, 0 and inf.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cg.h"
#include "cli.h"

int
cg_parse_i64(const char *what, const char *s, long long min, long long max,
	     long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
		return cg_seterr("%s: '%s' is not a whole number in [%lld, "
				 "%lld]",
				 what, s, min, max);
	*out = v;
	return 0;
}

int
cg_parse_u64(const char *what, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s == '\0' || *s == '-' || *end != '\0' || errno != 0)
		return cg_seterr("%s: '%s' is not a non-negative whole number",
				 what, s);
	*out = v;
	return 0;
}

int
cg_parse_f64(const char *what, const char *s, double min, double max,
	     double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(v) ||
	    v < min || v > max)
		return cg_seterr("%s: '%s' is not a number in [%g, %g]", what, s,
				 min, max);
	*out = v;
	return 0;
}

int
cg_parse_size(const char *what, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s == '\0' || *s == '-' || end == s || errno != 0)
		goto bad;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	}
	if (strcmp(end, "") != 0 && strcmp(end, "B") != 0 &&
	    strcmp(end, "iB") != 0)
		goto bad;
	if (v > (UINT64_MAX >> shift))
		goto bad;
	*out = (uint64_t)v << shift;
	return 0;
bad:
	return cg_seterr("%s: '%s' is not a size (like 256M or 2G)", what, s);
}

int
cg_parse_list(const char *what, const char *s, double *out, int max)
{
	char buf[4096], *tok, *save = NULL;
	int n = 0;

	if (strlen(s) >= sizeof(buf))
		return cg_seterr("%s: list too long", what);
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == max)
			return cg_seterr("%s: more than %d values", what, max);
		if (cg_parse_f64(what, tok, 1e-12, 1e12, &out[n]) != 0)
			return -1;
		n++;
	}
	if (n == 0)
		return cg_seterr("%s: empty list", what);
	return n;
}

int
cg_usage_error(const char *prog, const char *synopsis, const char *msg)
{
	if (msg)
		fprintf(stderr, "%s: %s\n", prog, msg);
	fprintf(stderr, "usage: %s %s\nTry '%s --help' for more.\n", prog,
		synopsis, prog);
	return 2;
}

int
cg_compress_parse(const char *s, enum cg_compress *out)
{
	if (strcmp(s, "none") == 0)
		*out = CG_COMPRESS_NONE;
	else if (strcmp(s, "gzip") == 0)
		*out = CG_COMPRESS_GZIP;
	else if (strcmp(s, "zstd") == 0)
		*out = CG_COMPRESS_ZSTD;
	else
		return cg_seterr("unknown compression '%s' (none, gzip, zstd)",
				 s);
	return 0;
}

extern volatile int cg_runtime_linked;

void
cg_set_threads(int n)
{
	cg_runtime_linked = 1;
	/* OpenMP read OMP_NUM_THREADS at start: by default, keep that. */
	if (n <= 0 && getenv("OMP_NUM_THREADS") != NULL &&
	    *getenv("OMP_NUM_THREADS") != '\0')
		return;
	if (n <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n = c > 0 ? (int)c : 1;
	}
#ifdef _OPENMP
	omp_set_num_threads(n);
#endif
	/* The BLAS stays on one thread: cg_sgemm shares products out among
	 * OpenMP's threads (lib/gemm.c). */
}

double
cg_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void
cg_progress_init(struct cg_progress *p, FILE *fp, const char *label,
		 int quiet)
{
	memset(p, 0, sizeof(*p));
	p->fp = fp;
	p->label = label;
	p->on = !quiet && isatty(fileno(fp));
	p->t0 = cg_now();
	p->last_pct = -1;
}

void
cg_progress_update(struct cg_progress *p, long done, long total, double loss)
{
	char bar[31];
	int pct, fill;

	if (!p->on || total <= 0)
		return;
	pct = (int)(100 * done / total);
	if (pct == p->last_pct && done != total)
		return;
	p->last_pct = pct;
	fill = (int)(30 * done / total);
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '.', (size_t)(30 - fill));
	bar[30] = '\0';
	double el = cg_now() - p->t0;
	double eta = done > 0 ? el * (double)(total - done) / done : 0;
	fprintf(p->fp, "\r%s [%s] %3d%% %ld/%ld loss %.4f eta %.0fs ",
		p->label, bar, pct, done, total, loss, eta);
	fflush(p->fp);
}

void
cg_progress_done(struct cg_progress *p)
{
	if (p->on)
		fputc('\n', p->fp);
}

/* ---------------------------------------------- optimizer options */

const char cg_optim_help[] =
    "      --opt NAME         sgd, momentum, adam or adamw (adam)\n"
    "      --lr X             learning rate (adam: 1e-3, sgd: 1e-2)\n"
    "      --wd X             weight decay, matrices only (adamw: 0.01)\n"
    "      --beta1 X          Adam's first moment decay (0.9)\n"
    "      --beta2 X          Adam's second moment decay (0.999)\n"
    "      --eps X            Adam's epsilon (1e-8)\n"
    "      --momentum X       SGD momentum (0.9)\n"
    "      --schedule NAME    constant or cosine (constant)\n"
    "      --warmup N         linear warm-up steps (0)\n"
    "      --total N          cosine: steps to decay over\n"
    "      --lr-min X         cosine: final learning rate (0)\n";

void
cg_optim_cli_init(struct cg_optim_cli *a, enum cg_opt_kind dflt)
{
	memset(a, 0, sizeof(*a));
	a->kind = dflt;
	a->lr = a->wd = a->beta1 = a->beta2 = a->eps = a->momentum = -1;
	a->lr_min = 0;
	a->sched = CG_SCHED_CONSTANT;
}

int
cg_optim_cli_option(struct cg_optim_cli *a, int c, const char *arg)
{
	int e = 0;

	switch (c) {
	case 0x101:
		e = cg_parse_f64("--beta1", arg, 0, 0.999999, &a->beta1);
		break;
	case 0x102:
		e = cg_parse_f64("--beta2", arg, 0, 0.99999999, &a->beta2);
		break;
	case 0x103:
		e = cg_parse_f64("--eps", arg, 0, 1, &a->eps);
		break;
	case 0x104:
		e = cg_parse_f64("--lr", arg, 0, 1e6, &a->lr);
		break;
	case 0x105:
		e = cg_parse_f64("--lr-min", arg, 0, 1e6, &a->lr_min);
		break;
	case 0x106:
		e = cg_parse_f64("--momentum", arg, 0, 1, &a->momentum);
		break;
	case 0x107:
		e = cg_optim_parse(arg, &a->kind);
		break;
	case 0x108:
		if (strcmp(arg, "constant") == 0)
			a->sched = CG_SCHED_CONSTANT;
		else if (strcmp(arg, "cosine") == 0)
			a->sched = CG_SCHED_COSINE;
		else
			e = cg_seterr("--schedule: '%s' is not constant or "
				      "cosine",
				      arg);
		break;
	case 0x109:
		e = cg_parse_u64("--total", arg, &a->total);
		break;
	case 0x10a:
		e = cg_parse_u64("--warmup", arg, &a->warmup);
		break;
	case 0x10b:
		e = cg_parse_f64("--wd", arg, 0, 1e6, &a->wd);
		break;
	default:
		return 0;
	}
	return e ? -1 : 1;
}

void
cg_optim_cli_finish(const struct cg_optim_cli *a, struct cg_optim *o)
{
	cg_optim_defaults(o, a->kind);
	if (a->lr >= 0)
		o->lr = (float)a->lr;
	if (a->wd >= 0)
		o->wd = (float)a->wd;
	if (a->beta1 >= 0)
		o->beta1 = (float)a->beta1;
	if (a->beta2 >= 0)
		o->beta2 = (float)a->beta2;
	if (a->eps >= 0)
		o->eps = (float)a->eps;
	if (a->momentum >= 0)
		o->momentum = (float)a->momentum;
	o->sched = a->sched;
	o->warmup = a->warmup;
	o->total = a->total;
	o->lr_min = (float)a->lr_min;
}
