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
 *   - A row also says where its value goes and what it may be: a type,
 *     a range and a member of the program's args struct (enum
 *     cg_opt_type).  cg_getopt_all stores those itself; only the rows
 *     that need the program's own logic (CG_OPT_CUSTOM) reach its set
 *     function.
 *
 * A program, whole:
 *
 *	enum { OPT_JSON = CG_KEY_OWN, OPT_SEED };
 *
 *	struct args {
 *		int batch, json;
 *		uint64_t seed;
 *		char **files;
 *	};
 *
 *	#define CG_CTX struct args
 *	static const struct cg_opt opts[] = {
 *	    {"batch", 'b', "N", "examples per step (default 32)",
 *	     CG_OPT_INT(batch, 1, 1 << 20)},
 *	    {"json", OPT_JSON, NULL, "one JSON object per line",
 *	     CG_OPT_FLAG(json)},
 *	    {"seed", OPT_SEED, "N", "seed (default 0)", CG_OPT_U64(seed)},
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
 *	static int
 *	parse(int argc, char **argv, struct args *a)
 *	{
 *		int ind, rc;
 *
 *		// --help, --version and bad options end it here; no row
 *		// is CG_OPT_CUSTOM, so there is no set function
 *		if ((rc = cg_getopt_all(&cli, argc, argv, NULL, a,
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
 * shared optimizer options are the rows CG_OPTIM_OPTS, the diffusion
 * sampler's CG_DIFFUSION_OPTS.
 */
#ifndef CG_CLI_H
#define CG_CLI_H

#include <getopt.h>
#include <stddef.h>
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
#define CG_OPT_MAX 80 /* rows of a table, headings included */

/*
 * How a row's argument is stored: at the row's off in the ctx given to
 * cg_getopt_all, checked against the row's range, so that the program
 * has nothing to do for it; CG_TYPE_CUSTOM rows go to the program's set
 * function instead.  Numbers go through cg_parse_* (core/parse.h) with
 * the option's name, and a bad one is a usage error saying theirs.
 */
enum cg_opt_type {
	CG_TYPE_CUSTOM, /* set(ctx, g, key) does it */
	CG_TYPE_FLAG,   /* int: 1 */
	CG_TYPE_STR,    /* const char *: the argument */
	CG_TYPE_INT,    /* int in [lo, hi] */
	CG_TYPE_I64,    /* long long in [lo, hi] */
	CG_TYPE_U64,    /* uint64_t (size_t: LP64); in [lo, hi] when hi > 0 */
	CG_TYPE_SIZE,   /* uint64_t: a byte size, K, M, G, T suffixes */
	CG_TYPE_F64,    /* double in [flo, fhi] */
	CG_TYPE_F32,    /* float in [flo, fhi] */
	CG_TYPE_ENUM,   /* int (an enum): the argument's index in names */
	CG_TYPE_PARSE   /* parse(arg, where) */
};

/* A row's flags. */
enum {
	CG_OPT_F_POSITIVE = 1, /* above 0, or "--NAME: must be positive" */
	CG_OPT_F_PREFIX = 2,   /* parse's message as "--NAME: MSG" */
	CG_OPT_F_LAST = 4      /* seen: the last row given, not the first */
};

/* Parse arg into where (a row's destination): 0, or -1 with a message. */
typedef int (*cg_opt_parse_fn)(const char *arg, void *where);

struct cg_opt {
	/* Long name, without "--".  NULL with help set: a heading line in
	 * --help; NULL and help NULL: the end of the table. */
	const char *name;
	int key; /* a letter (also -KEY) or an enum from CG_KEY_OWN */
	/* The argument's name in --help; NULL: takes none; "[=...]": it is
	 * optional (getopt's optional_argument; g->arg is NULL without
	 * it), given as --NAME=ARG, or as --NAME ARG where the program
	 * takes no operands (struct cg_cli's no_operands) and ARG does
	 * not start with '-'. */
	const char *arg;
	const char *help; /* may hold "\n"; longer lines are wrapped */
	enum cg_opt_type type;
	size_t off;               /* the destination: offsetof in ctx */
	long long lo, hi;         /* CG_TYPE_INT, CG_TYPE_I64, CG_TYPE_U64 */
	double flo, fhi;          /* CG_TYPE_F64, CG_TYPE_F32 */
	const char *const *names; /* CG_TYPE_ENUM: NULL-terminated */
	cg_opt_parse_fn parse;    /* CG_TYPE_PARSE */
	int flags;                /* CG_OPT_F_ */
	/* 1 + the offsetof in ctx of a const char * that is set to the
	 * row's name when the row is given (the first of the rows that
	 * share it, or with CG_OPT_F_LAST the last); 0: none. */
	size_t seen;
};

/*
 * The typed part of a row, after its four fields: {"batch", 'b', "N",
 * "help", CG_OPT_INT(batch, 1, 1024)}.  The destination names a member
 * of CG_CTX, which the program defines as its args struct before the
 * table.  Every row carries one (CG_OPT_CUSTOM for the set function's,
 * CG_OPT_HEADING for a heading), so that no row leaves fields out.
 * CG_OPT_SEEN_LAST, CG_OPT_POSITIVE and CG_OPT_PREFIX each set .flags:
 * a row that wants two says .flags = CG_OPT_F_A | CG_OPT_F_B itself.
 */
#define CG_OPT_AT(f) offsetof(CG_CTX, f)
#define CG_OPT_CUSTOM .type = CG_TYPE_CUSTOM
#define CG_OPT_FLAG(f) .type = CG_TYPE_FLAG, .off = CG_OPT_AT(f)
#define CG_OPT_STR(f) .type = CG_TYPE_STR, .off = CG_OPT_AT(f)
#define CG_OPT_INT(f, min, max)                                                \
	.type = CG_TYPE_INT, .off = CG_OPT_AT(f), .lo = (min), .hi = (max)
#define CG_OPT_I64(f, min, max)                                                \
	.type = CG_TYPE_I64, .off = CG_OPT_AT(f), .lo = (min), .hi = (max)
#define CG_OPT_U64(f) .type = CG_TYPE_U64, .off = CG_OPT_AT(f)
#define CG_OPT_U64_IN(f, min, max)                                             \
	.type = CG_TYPE_U64, .off = CG_OPT_AT(f), .lo = (min), .hi = (max)
#define CG_OPT_SIZE(f) .type = CG_TYPE_SIZE, .off = CG_OPT_AT(f)
#define CG_OPT_F64(f, min, max)                                                \
	.type = CG_TYPE_F64, .off = CG_OPT_AT(f), .flo = (min), .fhi = (max)
#define CG_OPT_F32(f, min, max)                                                \
	.type = CG_TYPE_F32, .off = CG_OPT_AT(f), .flo = (min), .fhi = (max)
#define CG_OPT_ENUM(f, list)                                                   \
	.type = CG_TYPE_ENUM, .off = CG_OPT_AT(f), .names = (list)
#define CG_OPT_PARSE(f, fn)                                                    \
	.type = CG_TYPE_PARSE, .off = CG_OPT_AT(f), .parse = (fn)
#define CG_OPT_SEEN(f) .seen = CG_OPT_AT(f) + 1
#define CG_OPT_SEEN_LAST(f) CG_OPT_SEEN(f), .flags = CG_OPT_F_LAST
#define CG_OPT_POSITIVE .flags = CG_OPT_F_POSITIVE
#define CG_OPT_PREFIX .flags = CG_OPT_F_PREFIX
/* clang-format off */
#define CG_OPT_HEADING(text) {NULL, 0, NULL, text, CG_OPT_CUSTOM}
/* clang-format on */

/* The parsers of CG_TYPE_PARSE rows that several programs share:
 * --compress (enum cg_compress) and --codec (struct cg_uspec). */
int cg_opt_compress(const char *arg, void *where);
int cg_opt_codec(const char *arg, void *where);
/* A float dtype other than f32 to store weights in (enum cg_dtype):
 * cg-train-step --qat. */
int cg_opt_wtype(const char *arg, void *where);

/* The rows every program has, answered by the parser. */
/* clang-format off */
#define CG_OPT_HELP {"help", 'h', NULL, "show this help and exit", \
	CG_OPT_CUSTOM}
#define CG_OPT_VERSION {"version", 'V', NULL, "show the version and exit", \
	CG_OPT_CUSTOM}
/* clang-format on */

struct cg_cli {
	const char *name; /* "cg-eval": the name in every message */
	/* The forms of a call, one per line, each after "usage: NAME ";
	 * a line starting with a space continues the form above. */
	const char *synopsis;
	const char *about;         /* --help: what the program does */
	const struct cg_opt *opts; /* ends with {0} */
	const char *epilog;        /* --help: after the options (or NULL) */
	/* The program takes no operands (its main says "unexpected
	 * argument" to any): a row's optional argument may then be the
	 * next word, --film 0 as --film=0, which elsewhere would be an
	 * operand (cg-reduce --x 1 FILE: the file 1). */
	int no_operands;
};

/* Print --help: the synopsis, about, the options, the epilog. */
void cg_cli_help(FILE *fp, const struct cg_cli *cli);

/*
 * The architectures' options (struct cg_arch_opt, model/registry.h) as
 * rows and help, for a table that takes every architecture's:
 * cg_cli_arch_rows puts after the nown rows of opts (room for nown +
 * max + 1) a row per option name (the registry keeps options of one
 * name alike in taking an argument), key key0 + its index in names[],
 * no help, then the end; it returns how many names.  cg_cli_arch_help
 * writes into buf [cap] the section of each architecture (only's, when
 * not NULL), a line per option with its default and range, aligned
 * with cli's --help, then tail; cg_cli_arch_names "architecture: NAME,
 * ...".
 */
struct cg_arch;
int cg_cli_arch_rows(struct cg_opt *opts, int nown, int key0,
                     const char **names, int max);
void cg_cli_arch_help(char *buf, size_t cap, const struct cg_cli *cli,
                      const struct cg_arch *only, const char *tail);
void cg_cli_arch_names(char *buf, size_t cap);

/*
 * cg-reduce's sections for --help into buf [cap]: "Operations (--op):",
 * a line per row of the reducer's table (NAME:P for a row that takes a
 * parameter P), then the staleness rules (exchange/stale.h) alike, then
 * tail; cut at cap.
 */
void cg_cli_reduce_help(char *buf, size_t cap, const char *tail);

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
	const char *seal_to, *seal_key; /* --encrypt-to and --seal-key */
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
 * The whole loop: each typed row's argument stored in ctx (a bad one is
 * a usage error), each CG_OPT_CUSTOM row's key to set(ctx, g, key),
 * which returns CG_CONTINUE or an exit status (a usage error already
 * said); set may be NULL when no row is custom.  Returns CG_CONTINUE
 * with *ind the index of the first operand, or what main returns:
 * g.status after --help, --version or a bad option, the usage error's
 * status, or set's.
 */
typedef int (*cg_opt_set_fn)(void *ctx, const struct cg_getopt *g, int key);
int cg_getopt_all(const struct cg_cli *cli, int argc, char **argv,
                  cg_opt_set_fn set, void *ctx, int *ind);

/*
 * The whole input path names (- : standard input), at most max bytes,
 * into *buf [*n] (malloc'd; NULL when empty).  0, or -1 with a message
 * naming it ("standard input" for -), *buf NULL.
 */
int cg_read_input(const char *path, size_t max, uint8_t **buf, size_t *n);

/*
 * The inputs named on a command line, names [n], as paths: a name with
 * a wildcard (* ? [) that is no file and that glob(3) matches stands for
 * its matches, in glob's order (a pattern the shell left alone: quoted,
 * or for a remote inbox); any other name is taken as it is; no name at
 * all is "-".  Returns a NULL-terminated array of *count paths that the
 * caller frees with cg_inputs_free, or NULL with a message when out of
 * memory.
 */
char **cg_inputs_expand(char *const *names, int n, size_t *count);
void cg_inputs_free(char **paths);

/* ------------------------------------------------------ JSON lines */

/*
 * j as one line on fp (--json), or appended to the file path as one
 * line (--log): 0, or -1 with a message ("out of memory", "PATH:
 * cannot append", "PATH: write failed").  j is freed either way; a
 * NULL j is out of memory.
 */
struct cJSON;
int cg_json_print(FILE *fp, struct cJSON *j);
int cg_json_append(const char *path, struct cJSON *j);

/* "none", "gzip" or "zstd"; -1 with a message otherwise. */
int cg_compress_parse(const char *s, enum cg_compress *out);

/* The --threads row, into the int member f of CG_CTX: 0 is the
 * default of cg_set_threads. */
#define CG_MAX_THREADS 4096
#define CG_THREADS_HELP "threads (OMP_NUM_THREADS, else all cores)"
/* clang-format off */
#define CG_OPT_THREADS(f, help) \
	{"threads", 'j', "N", help, CG_OPT_INT(f, 0, CG_MAX_THREADS)}
/* clang-format on */

/*
 * The --precision row (cg-train-step, cg-eval, cg-sample), into the int
 * member f of CG_CTX: an enum cg_precision (nn/gemm.h), f32 by default.
 */
extern const char *const cg_precision_names[];
#define CG_PRECISION_HELP                                                      \
	"f32, bf16 or f16: the operands of every matrix product (f32)"
/* clang-format off */
#define CG_OPT_PRECISION(key, f) \
	{"precision", key, "P", CG_PRECISION_HELP, \
	 CG_OPT_ENUM(f, cg_precision_names)}
/* clang-format on */

/*
 * How this process multiplies matrices: the engine CG_GEMM_ENGINE names
 * (auto, blas, builtin or dnnl; unset or empty: auto), deterministic mode
 * (on != 0) and the precision.  Where bf16 is asked for and this CPU or
 * build has no bf16 products, and wherever f16 is, one line on stderr
 * says that they are emulated (unless quiet).  0, or -1 with a message: an engine that is
 * not a name or not built in.
 */
int cg_set_compute(int deterministic, int precision, int quiet);

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
enum {
	CG_KEY_SIGN = CG_KEY_LIB + 0x80,
	CG_KEY_TRUST,
	CG_KEY_ENCRYPT_TO,
	CG_KEY_SEAL_KEY
};
/* clang-format off */
#define CG_OPT_SIGN {"sign", CG_KEY_SIGN, "KEY", \
	"sign the files written with the private key KEY (cg-key)", \
	CG_OPT_CUSTOM}
#define CG_OPT_TRUST {"trust", CG_KEY_TRUST, "KEYS", \
	"read only cg files signed by a key of KEYS, a file of .pub\n" \
	"lines or a directory of .pub files (default: $CG_TRUST)", \
	CG_OPT_CUSTOM}
/* clang-format on */

/*
 * The rows of --encrypt-to PUB (every program that writes cg files) and
 * --seal-key KEY (every program that reads them), answered as --sign and
 * --trust are: the files go to cg_seal_to and cg_seal_key_use (seal.h)
 * once the options end.
 */
/* clang-format off */
#define CG_OPT_ENCRYPT_TO {"encrypt-to", CG_KEY_ENCRYPT_TO, "PUB", \
	"seal the files written to the X25519 key PUB\n" \
	"(an X25519 pair of cg-key; default: $CG_ENCRYPT_TO)", CG_OPT_CUSTOM}
#define CG_OPT_SEAL_KEY {"seal-key", CG_KEY_SEAL_KEY, "KEY", \
	"open sealed files with the X25519 private key KEY\n" \
	"(default: $CG_SEAL_KEY)", CG_OPT_CUSTOM}
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

/*
 * Their rows in a struct cg_opt table, storing into the struct
 * cg_optim_cli member m of CG_CTX (set up by cg_optim_cli_init);
 * CG_OPTIM_OPTS_SEEN also notes the first given in CG_CTX's member seen.
 */
#define CG_OPTIM_AT(m, f) (CG_OPT_AT(m) + offsetof(struct cg_optim_cli, f))
#define CG_OPTIM_F64(m, f, min, max)                                           \
	.type = CG_TYPE_F64, .off = CG_OPTIM_AT(m, f), .flo = (min),           \
	.fhi = (max)
/* clang-format off */
#define CG_OPTIM_ROWS(m, ...) \
	{"opt", CG_KEY_OPT, "NAME", CG_OPTIM_HELP_OPT, .type = CG_TYPE_PARSE, \
	 .off = CG_OPTIM_AT(m, kind), .parse = cg_opt_optim, __VA_ARGS__}, \
	{"lr", CG_KEY_LR, "X", CG_OPTIM_HELP_LR, \
	 CG_OPTIM_F64(m, lr, 0, 1e6), __VA_ARGS__}, \
	{"wd", CG_KEY_WD, "X", CG_OPTIM_HELP_WD, \
	 CG_OPTIM_F64(m, wd, 0, 1e6), __VA_ARGS__}, \
	{"beta1", CG_KEY_BETA1, "X", CG_OPTIM_HELP_BETA1, \
	 CG_OPTIM_F64(m, beta1, 0, 0.999999), __VA_ARGS__}, \
	{"beta2", CG_KEY_BETA2, "X", CG_OPTIM_HELP_BETA2, \
	 CG_OPTIM_F64(m, beta2, 0, 0.99999999), __VA_ARGS__}, \
	{"eps", CG_KEY_EPS, "X", CG_OPTIM_HELP_EPS, \
	 CG_OPTIM_F64(m, eps, 0, 1), __VA_ARGS__}, \
	{"momentum", CG_KEY_MOMENTUM, "X", CG_OPTIM_HELP_MOMENTUM, \
	 CG_OPTIM_F64(m, momentum, 0, 1), __VA_ARGS__}, \
	{"schedule", CG_KEY_SCHEDULE, "NAME", CG_OPTIM_HELP_SCHEDULE, \
	 .type = CG_TYPE_ENUM, .off = CG_OPTIM_AT(m, sched), \
	 .names = cg_sched_names, __VA_ARGS__}, \
	{"warmup", CG_KEY_WARMUP, "N", CG_OPTIM_HELP_WARMUP, \
	 .type = CG_TYPE_U64, .off = CG_OPTIM_AT(m, warmup), __VA_ARGS__}, \
	{"total", CG_KEY_TOTAL, "N", CG_OPTIM_HELP_TOTAL, \
	 .type = CG_TYPE_U64, .off = CG_OPTIM_AT(m, total), __VA_ARGS__}, \
	{"lr-min", CG_KEY_LR_MIN, "X", CG_OPTIM_HELP_LR_MIN, \
	 CG_OPTIM_F64(m, lr_min, 0, 1e6), __VA_ARGS__}
/* clang-format on */
#define CG_OPTIM_OPTS(m) CG_OPTIM_ROWS(m, .seen = 0)
#define CG_OPTIM_OPTS_SEEN(m, s) CG_OPTIM_ROWS(m, CG_OPT_SEEN(s))

/* --opt's parser (enum cg_opt_kind) and --schedule's names. */
int cg_opt_optim(const char *arg, void *where);
extern const char *const cg_sched_names[];

struct cg_optim_cli {
	enum cg_opt_kind kind;
	double lr, wd, beta1, beta2, eps, momentum, lr_min; /* < 0: default */
	uint64_t warmup, total;
	enum cg_sched sched;
};

void cg_optim_cli_init(struct cg_optim_cli *a, enum cg_opt_kind dflt);
/* The optimizer the options describe. */
void cg_optim_cli_finish(const struct cg_optim_cli *a, struct cg_optim *o);

/* ---------------------------------------------- diffusion options */

/*
 * How a diffusion model draws (cg-sample, and cg-eval --judge): the
 * rows, storing into the struct cg_diffusion_opts member m of CG_CTX and
 * noting the last given in its member seen, so that both programs take
 * the same words with the same limits.
 */
enum {
	CG_KEY_GUIDANCE = CG_KEY_LIB + 0x40,
	CG_KEY_SAMPLER,
	CG_KEY_STEPS,
	CG_KEY_GUIDANCE_INTERVAL
};
#define CG_DIFFUSION_MAX_GUIDANCE 1000.0
#define CG_DIFFUSION_MAX_STEPS 100000

#define CG_DIFFUSION_AT(m, f)                                                  \
	(CG_OPT_AT(m) + offsetof(struct cg_diffusion_opts, f))
/* clang-format off */
#define CG_DIFFUSION_OPTS(m, s) \
	{"guidance", CG_KEY_GUIDANCE, "W", \
	 "classifier-free guidance: eps = (1 + W) eps(x, c) - W eps(x) " \
	 "(default 0: the conditional model alone)", \
	 .type = CG_TYPE_F64, .off = CG_DIFFUSION_AT(m, guidance), .flo = 0, \
	 .fhi = CG_DIFFUSION_MAX_GUIDANCE, CG_OPT_SEEN(s), \
	 .flags = CG_OPT_F_LAST}, \
	{"guidance-interval", CG_KEY_GUIDANCE_INTERVAL, "LO:HI", \
	 "guide only the steps from noise levels t/T in [LO, HI] (0 clean, " \
	 "1 pure noise; default 0:1)", \
	 .type = CG_TYPE_PARSE, .off = CG_OPT_AT(m), \
	 .parse = cg_opt_guidance_interval, CG_OPT_SEEN(s), \
	 .flags = CG_OPT_F_LAST}, \
	{"sampler", CG_KEY_SAMPLER, "NAME", \
	 "ddim (deterministic after the first noise, the default) or ddpm " \
	 "(ancestral)", \
	 .type = CG_TYPE_PARSE, .off = CG_DIFFUSION_AT(m, sampler), \
	 .parse = cg_opt_sampler, CG_OPT_SEEN(s), .flags = CG_OPT_F_LAST}, \
	{"steps", CG_KEY_STEPS, "N", \
	 "denoising steps, spread over the model's T (default 50, or T if " \
	 "fewer)", \
	 .type = CG_TYPE_INT, .off = CG_DIFFUSION_AT(m, steps), .lo = 1, \
	 .hi = CG_DIFFUSION_MAX_STEPS, CG_OPT_SEEN(s), .flags = CG_OPT_F_LAST}
/* clang-format on */

/* --sampler's parser (enum cg_diffusion_sampler). */
int cg_opt_sampler(const char *arg, void *where);
/* --guidance-interval's parser (LO:HI into a struct cg_diffusion_opts). */
int cg_opt_guidance_interval(const char *arg, void *where);

#endif
