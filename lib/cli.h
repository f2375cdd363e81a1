/*
 * cli.h - what every cg program does the same way: parse numbers and
 * sizes strictly, set the thread count, draw a progress bar.
 *
 * These helpers print only to the stream they are handed; parse errors
 * are recorded with cg_seterr like the rest of the library.
 */
#ifndef CG_CLI_H
#define CG_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "cg.h"

#define CG_VERSION "0.1.0"

/* Whole string s as an integer in [min, max]; -1 with a message naming
 * what (an option name) otherwise. */
int cg_parse_i64(const char *what, const char *s, long long min,
		 long long max, long long *out);
int cg_parse_u64(const char *what, const char *s, uint64_t *out);
/* Whole string s as a finite number in [min, max]. */
int cg_parse_f64(const char *what, const char *s, double min, double max,
		 double *out);
/* A byte size: digits with an optional K, M, G or T suffix (powers of
 * 1024, an optional trailing "B" or "iB"). */
int cg_parse_size(const char *what, const char *s, uint64_t *out);
/* Comma-separated positive numbers; returns the count, or -1. */
int cg_parse_list(const char *what, const char *s, double *out, int max);

/*
 * A usage error as every program reports it: "PROG: MSG" (when msg is not
 * NULL), then "usage: PROG SYNOPSIS" and a pointer to --help, on stderr.
 * Returns 2, the exit status of a usage error.
 */
int cg_usage_error(const char *prog, const char *synopsis, const char *msg);

/* "none", "gzip" or "zstd"; -1 with a message otherwise. */
int cg_compress_parse(const char *s, enum cg_compress *out);

/* Use n threads for OpenMP and the BLAS (n <= 0: OMP_NUM_THREADS where
 * set, else all cores). */
void cg_set_threads(int n);

/* A progress bar on fp when fp is a terminal and quiet is 0. */
struct cg_progress {
	FILE *fp;
	int on;
	const char *label;
	double t0;
	int last_pct;
};
void cg_progress_init(struct cg_progress *p, FILE *fp, const char *label,
		      int quiet);
void cg_progress_update(struct cg_progress *p, long done, long total,
			double loss);
void cg_progress_done(struct cg_progress *p);

/* Seconds from a monotonic clock (for progress and benchmarks only;
 * never written into a file). */
double cg_now(void);

#endif

/* ---------------------------------------------- optimizer options */

#include "optim.h"

/* getopt_long entries shared by the programs that step an optimizer;
 * their values are 0x100 and up, clear of any short option. */
#define CG_OPTIM_LONGOPTS                                                   \
	{"beta1", required_argument, NULL, 0x101},                         \
	    {"beta2", required_argument, NULL, 0x102},                     \
	    {"eps", required_argument, NULL, 0x103},                       \
	    {"lr", required_argument, NULL, 0x104},                        \
	    {"lr-min", required_argument, NULL, 0x105},                    \
	    {"momentum", required_argument, NULL, 0x106},                  \
	    {"opt", required_argument, NULL, 0x107},                       \
	    {"schedule", required_argument, NULL, 0x108},                  \
	    {"total", required_argument, NULL, 0x109},                     \
	    {"warmup", required_argument, NULL, 0x10a},                    \
	    {"wd", required_argument, NULL, 0x10b}

/* Their lines for --help. */
extern const char cg_optim_help[];

struct cg_optim_cli {
	enum cg_opt_kind kind;
	double lr, wd, beta1, beta2, eps, momentum, lr_min; /* < 0: default */
	uint64_t warmup, total;
	enum cg_sched sched;
};

void cg_optim_cli_init(struct cg_optim_cli *a, enum cg_opt_kind dflt);
/* Handle option c (from CG_OPTIM_LONGOPTS): 1 if handled, 0 if c is not
 * one of them, -1 with a message on a bad value. */
int cg_optim_cli_option(struct cg_optim_cli *a, int c, const char *arg);
/* The optimizer the options describe. */
void cg_optim_cli_finish(const struct cg_optim_cli *a, struct cg_optim *o);
