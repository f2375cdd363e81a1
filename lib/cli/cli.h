/*
 * cli/cli.h - what every cg program does the same way: its name in messages,
 * errors and exit statuses, options from one table, strict numbers, the
 * thread count, and (progress.h) the progress line.
 *
 * This is the programs' side of the library: unlike the rest, its message
 * helpers print, on stderr, and nothing else here prints unless asked to.
 * They still never exit: a main returns its status, so that its cleanup
 * runs and each failure of a multi-input run is reported before the end.
 *
 * The dialect, as OpenBSD's err(3) and git's usage.c/parse-options.c:
 *
 *   - The program's name is set once (cg_setprogname, or by the option
 *     table's cg_cli); every message starts "NAME: ".
 *   - cg_warnx(fmt, ...) prints "NAME: MSG"; cg_warn(fmt, ...) appends
 *     the library's message (cg_errmsg) as warn(3) appends strerror:
 *     "NAME: MSG: LIBMSG", or "NAME: LIBMSG" when fmt is NULL.
 *     cg_fail and cg_failx do the same and return CG_EXIT_FAILURE (1);
 *     cg_usage says the message, the synopsis and "Try 'NAME --help'"
 *     and returns CG_EXIT_USAGE (2).  Control bytes in a message (it may
 *     quote a hostile file's names) are printed as '?'.
 *   - Options come from one table of struct cg_opt rows; it makes the
 *     getopt_long array, the short-option string and the --help lines.
 *     A row's key is what the parser returns: a letter is also the short
 *     option, anything else is an enum constant from CG_KEY_OWN up.
 *     "help" and "version" rows are answered by the parser itself, so
 *     --version prints "NAME (cg) VERSION" in every program.
 *
 * A program, whole:
 *
 *	enum { OPT_JSON = CG_KEY_OWN, OPT_SEED };
 *
 *	static const struct cg_opt opts[] = {
 *	    {"batch", 'b', "N", "examples per step (default 32)"},
 *	    {"json", OPT_JSON, NULL, "one JSON object per line"},
 *	    {"seed", OPT_SEED, "N", "seed (default 0)"},
 *	    CG_OPT_HELP,
 *	    CG_OPT_VERSION,
 *	    {0},
 *	};
 *	static const struct cg_cli cli = {
 *	    .name = "cg-frob",
 *	    .synopsis = "[-b N] [--json] FILE...",
 *	    .about = "Frobnicate cg files.",
 *	    .opts = opts,
 *	    .epilog = "Exit status: 0 success, 1 failure, 2 usage error.",
 *	};
 *
 *	// The value of option c into the struct args ctx.
 *	static int
 *	set_option(void *ctx, const struct cg_getopt *g, int c)
 *	{
 *		struct args *a = ctx;
 *		long long v;
 *
 *		switch (c) {
 *		case 'b':
 *			if (cg_parse_i64(g->name, g->arg, 1, 1 << 20,
 *					 &v) != 0)
 *				return cg_usage(NULL);
 *			a->batch = (int)v;
 *			break;
 *		...
 *		}
 *		return CG_CONTINUE;
 *	}
 *
 *	static int
 *	parse(int argc, char **argv, struct args *a)
 *	{
 *		int ind, rc;
 *
 *		// --help, --version and bad options end it here
 *		if ((rc = cg_getopt_all(&cli, argc, argv, set_option, a,
 *					&ind)) != CG_CONTINUE)
 *			return rc;
 *		a->files = argv + ind;
 *		return CG_CONTINUE;
 *	}
 *
 *	int
 *	main(int argc, char **argv)
 *	{
 *		struct args a = {.batch = 32};
 *		int rc;
 *
 *		if ((rc = parse(argc, argv, &a)) != CG_CONTINUE ||
 *		    (rc = validate(&a)) != CG_CONTINUE)
 *			return rc;
 *		rc = run(&a);
 *		return cg_finish_stdout(rc);
 *	}
 *
 * Every program is written this way: there is no other dialect.  The
 * shared optimizer options are the rows CG_OPTIM_OPTS, whose keys
 * cg_optim_cli_option takes.
 */
#ifndef CG_CLI_H
#define CG_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "cg.h"
#include "cli/progress.h"
#include "core/parse.h"
#include "nn/optim.h"

#define CG_VERSION "0.1.0"

/* ------------------------------------------------ names and messages */

/* Exit statuses; CG_CONTINUE is what parse and validate functions return
 * when main is to go on. */
enum {
	CG_CONTINUE = -1,
	CG_EXIT_OK = 0,
	CG_EXIT_FAILURE = 1,
	CG_EXIT_USAGE = 2
};

/* The name every message starts with (set once, early in main; a
 * struct cg_cli sets it too). */
void cg_setprogname(const char *name);
const char *cg_getprogname(void);

/* "NAME: MSG" on stderr. */
void cg_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "NAME: MSG: LIBMSG", or "NAME: LIBMSG" with fmt NULL. */
void cg_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* As cg_warn and cg_warnx; return CG_EXIT_FAILURE. */
int cg_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cg_failx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * A usage error: "NAME: MSG" (the library's message with fmt NULL), the
 * synopsis of the cg_cli given to cg_getopt_init, and "Try 'NAME --help'
 * for more information.", on stderr.  Returns CG_EXIT_USAGE.
 */
int cg_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Flush stdout at the end of main: status when the data reached it,
 * else "NAME: standard output: write error" and CG_EXIT_FAILURE (or
 * status, if that says more, as a 2 of cg-inspect --diff).
 */
int cg_finish_stdout(int status);

/* --------------------------------------------------- the option table */

/* Keys of long-only options: 0x100-0x1ff are the library's groups
 * (CG_OPTIM_OPTS), a program's own start at CG_KEY_OWN. */
#define CG_KEY_LIB 0x100
#define CG_KEY_OWN 0x200
#define CG_OPT_MAX 64 /* rows of a table, headings included */

struct cg_opt {
	/* Long name, without "--".  NULL with help set: a heading line in
	 * --help; NULL and help NULL: the end of the table. */
	const char *name;
	int key; /* a letter (also -KEY) or an enum from CG_KEY_OWN */
	/* The argument's name in --help; NULL: takes none; "[=...]": it is
	 * optional, and given only as --NAME=ARG (getopt's
	 * optional_argument; g->arg is NULL without it). */
	const char *arg;
	const char *help; /* may hold "\n"; longer lines are wrapped */
};

/* The rows every program has, answered by the parser. */
/* clang-format off */
#define CG_OPT_HELP {"help", 'h', NULL, "show this help and exit"}
#define CG_OPT_VERSION {"version", 'V', NULL, "show the version and exit"}
/* clang-format on */

struct cg_cli {
	const char *name; /* "cg-eval": the name in every message */
	/* The forms of a call, one per line, each after "usage: NAME ";
	 * a line starting with a space continues the form above. */
	const char *synopsis;
	const char *about;         /* --help: what the program does */
	const struct cg_opt *opts; /* ends with {0} */
	const char *epilog;        /* --help: after the options (or NULL) */
};

/* Print --help: the synopsis, about, the options, the epilog. */
void cg_cli_help(FILE *fp, const struct cg_cli *cli);

#define CG_OPT_END (-1)  /* cg_getopt_next: no more options */
#define CG_OPT_EXIT (-2) /* cg_getopt_next: return g.status from main */

/* The parser of one command line; everything in it is its own. */
struct cg_getopt {
	const struct cg_cli *cli;
	int argc;
	char **argv;
	const struct cg_opt *opt; /* the current option's row */
	const char *arg;          /* its argument, or NULL */
	const char *name; /* its long name with "--", for messages; valid
	                     until the next call */
	int ind;          /* after CG_OPT_END: argv[ind] is the first operand */
	int status;       /* after CG_OPT_EXIT: what main returns */
	const char *sign, *trust; /* --sign and --trust, used at the end */
	int arch_failed; /* cg_arch_all() failed: said at the first option */
	struct option longopts[CG_OPT_MAX + 1];
	char shortopts[3 * CG_OPT_MAX + 2];
	char namebuf[64];
};

/* Get ready to parse argv with cli's table; sets the program's name and
 * hands the built-in architectures to the registry (cg_arch_all).
 * A table that is too long or repeats a key is a bug, caught by
 * assert. */
void cg_getopt_init(struct cg_getopt *g, const struct cg_cli *cli, int argc,
                    char **argv);
/*
 * The key of the next option, with g->opt, g->arg and g->name set; CG_OPT_END
 * when the options end (operands may have stood among them: they are
 * moved after, from g->ind on); CG_OPT_EXIT after --help or --version
 * (g->status 0, or 1 when stdout failed) or after a usage error already
 * reported (g->status 2): an unknown or ambiguous option, a missing
 * argument, or one given to an option that takes none.
 */
int cg_getopt_next(struct cg_getopt *g);

/*
 * The whole loop: each option's key to set(ctx, g, key), which returns
 * CG_CONTINUE or an exit status (a usage error already said).  Returns
 * CG_CONTINUE with *ind the index of the first operand, or what main
 * returns: g.status after --help, --version or a bad option, or set's.
 */
typedef int (*cg_opt_set_fn)(void *ctx, const struct cg_getopt *g, int key);
int cg_getopt_all(const struct cg_cli *cli, int argc, char **argv,
                  cg_opt_set_fn set, void *ctx, int *ind);

/* "none", "gzip" or "zstd"; -1 with a message otherwise. */
int cg_compress_parse(const char *s, enum cg_compress *out);

/* Use n threads for OpenMP and the BLAS (n <= 0: OMP_NUM_THREADS where
 * set, else all cores). */
void cg_set_threads(int n);
/* The threads a parallel region of this process runs on now. */
int cg_threads(void);

/* ------------------------------------------------ signing and trust */

/*
 * The rows of --sign KEY (every program that writes cg files) and
 * --trust KEYS (every program that reads them), answered by the parser
 * itself as --help is: once the options end, it hands the files to
 * cg_sign_use and cg_trust_use (sign.h), and a key file it cannot use
 * ends the program, status 1.
 */
enum { CG_KEY_SIGN = CG_KEY_LIB + 0x80, CG_KEY_TRUST };
/* clang-format off */
#define CG_OPT_SIGN {"sign", CG_KEY_SIGN, "KEY", \
	"sign the files written with the private key KEY (cg-key)"}
#define CG_OPT_TRUST {"trust", CG_KEY_TRUST, "KEYS", \
	"read only cg files signed by a key of KEYS, a file of .pub\n" \
	"lines or a directory of .pub files (default: $CG_TRUST)"}
/* clang-format on */

/* ---------------------------------------------- optimizer options */

/* Keys of the options shared by the programs that step an optimizer. */
enum {
	CG_KEY_BETA1 = CG_KEY_LIB + 1,
	CG_KEY_BETA2,
	CG_KEY_EPS,
	CG_KEY_LR,
	CG_KEY_LR_MIN,
	CG_KEY_MOMENTUM,
	CG_KEY_OPT,
	CG_KEY_SCHEDULE,
	CG_KEY_TOTAL,
	CG_KEY_WARMUP,
	CG_KEY_WD
};

/* Their help. */
#define CG_OPTIM_HELP_OPT "sgd, momentum, adam or adamw (adam)"
#define CG_OPTIM_HELP_LR "learning rate (adam: 1e-3, sgd: 1e-2)"
#define CG_OPTIM_HELP_WD "weight decay, matrices only (adamw: 0.01)"
#define CG_OPTIM_HELP_BETA1 "Adam's first moment decay (0.9)"
#define CG_OPTIM_HELP_BETA2 "Adam's second moment decay (0.999)"
#define CG_OPTIM_HELP_EPS "Adam's epsilon (1e-8)"
#define CG_OPTIM_HELP_MOMENTUM "SGD momentum (0.9)"
#define CG_OPTIM_HELP_SCHEDULE "constant or cosine (constant)"
#define CG_OPTIM_HELP_WARMUP "linear warm-up steps (0)"
#define CG_OPTIM_HELP_TOTAL "cosine: steps to decay over"
#define CG_OPTIM_HELP_LR_MIN "cosine: final learning rate (0)"

/* Their rows in a struct cg_opt table. */
#define CG_OPTIM_OPTS                                                          \
	{"opt", CG_KEY_OPT, "NAME", CG_OPTIM_HELP_OPT},                        \
	    {"lr", CG_KEY_LR, "X", CG_OPTIM_HELP_LR},                          \
	    {"wd", CG_KEY_WD, "X", CG_OPTIM_HELP_WD},                          \
	    {"beta1", CG_KEY_BETA1, "X", CG_OPTIM_HELP_BETA1},                 \
	    {"beta2", CG_KEY_BETA2, "X", CG_OPTIM_HELP_BETA2},                 \
	    {"eps", CG_KEY_EPS, "X", CG_OPTIM_HELP_EPS},                       \
	    {"momentum", CG_KEY_MOMENTUM, "X", CG_OPTIM_HELP_MOMENTUM},        \
	    {"schedule", CG_KEY_SCHEDULE, "NAME", CG_OPTIM_HELP_SCHEDULE},     \
	    {"warmup", CG_KEY_WARMUP, "N", CG_OPTIM_HELP_WARMUP},              \
	    {"total", CG_KEY_TOTAL, "N", CG_OPTIM_HELP_TOTAL},                 \
	{                                                                      \
		"lr-min", CG_KEY_LR_MIN, "X", CG_OPTIM_HELP_LR_MIN             \
	}

struct cg_optim_cli {
	enum cg_opt_kind kind;
	double lr, wd, beta1, beta2, eps, momentum, lr_min; /* < 0: default */
	uint64_t warmup, total;
	enum cg_sched sched;
};

void cg_optim_cli_init(struct cg_optim_cli *a, enum cg_opt_kind dflt);
/* Handle option c (a CG_OPT_ key of CG_OPTIM_OPTS): 1 if handled, 0 if c
 * is not one of them, -1 with a message on a bad value. */
int cg_optim_cli_option(struct cg_optim_cli *a, int c, const char *arg);
/* The optimizer the options describe. */
void cg_optim_cli_finish(const struct cg_optim_cli *a, struct cg_optim *o);

/* ---------------------------------------------- diffusion options */

/*
 * How a diffusion model draws (cg-sample, and cg-eval --judge): the
 * rows, their keys and one parser, so that both programs take the same
 * words with the same limits.
 */
enum { CG_KEY_GUIDANCE = CG_KEY_LIB + 0x40, CG_KEY_SAMPLER, CG_KEY_STEPS };
#define CG_DIFFUSION_MAX_GUIDANCE 1000.0
#define CG_DIFFUSION_MAX_STEPS 100000

/* clang-format off */
#define CG_DIFFUSION_OPTS \
	{"guidance", CG_KEY_GUIDANCE, "W", \
	 "classifier-free guidance: eps = (1 + W) eps(x, c) - W eps(x) " \
	 "(default 0: the conditional model alone)"}, \
	{"sampler", CG_KEY_SAMPLER, "NAME", \
	 "ddim (deterministic after the first noise, the default) or ddpm " \
	 "(ancestral)"}, \
	{"steps", CG_KEY_STEPS, "N", \
	 "denoising steps, spread over the model's T (default 50, or T if " \
	 "fewer)"}
/* clang-format on */

/* Handle option c (a key of CG_DIFFUSION_OPTS) into d: 1 if handled, 0
 * if c is not one of them, -1 with a message on a bad value. */
struct cg_diffusion_opts;
int cg_diffusion_cli_option(struct cg_diffusion_opts *d, int c,
                            const char *arg);

#endif
