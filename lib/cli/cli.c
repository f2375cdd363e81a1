/*
 * cli/cli.c - the programs' side of the library: their name and messages,
 * options from one table, strict numbers, the thread count.
 *
 * Messages go to stderr as one line each ("NAME: ...").  The option table
 * of cli.h is turned into what getopt_long wants when parsing starts, and
 * into the --help text when asked; getopt_long's own messages are off
 * (opterr = 0) so that every program words a bad option the same way.
 * Numbers go through strtoll/strtod with the end pointer and range
 * checked, so "12abc", "" and "1e999" are errors, not 12, 0 and inf.
 */
#include <assert.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "arch/all.h"
#include "cg.h"
#include "cli/cli.h"
#include "exchange/reduce.h"
#include "exchange/stale.h"
#include "exchange/ucodec.h"
#include "file/format.h"
#include "file/seal.h"
#include "file/sign.h"
#include "model/model.h"
#include "nn/gemm.h"

/* ------------------------------------------------ names and messages */

static const char *progname = "cg";
static const struct cg_cli *usage_cli; /* the last cg_getopt_init's */

void
cg_setprogname(const char *name)
{
	progname = name;
}

const char *
cg_getprogname(void)
{
	return progname;
}

/* "NAME: MSG[: LIBMSG]" as exactly one line: control bytes, which a
 * message may quote from a hostile file, are shown as '?'. */
static void
vmessage(int lib, const char *fmt, va_list ap)
{
	char buf[4096];
	size_t n = 0;

	buf[0] = '\0';
	if (fmt) {
		int k = vsnprintf(buf, sizeof(buf), fmt, ap);
		n = k < 0                     ? 0
		    : (size_t)k < sizeof(buf) ? (size_t)k
		                              : sizeof(buf) - 1;
	}
	if (lib)
		snprintf(buf + n, sizeof(buf) - n, "%s%s", n ? ": " : "",
		         cg_errmsg());
	fprintf(stderr, "%s: ", progname);
	for (const char *p = buf; *p; p++) {
		unsigned char c = (unsigned char)*p;
		fputc(c < 0x20 || c == 0x7f ? '?' : c, stderr);
	}
	fputc('\n', stderr);
}

void
cg_warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(0, fmt, ap);
	va_end(ap);
}

void
cg_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(1, fmt, ap);
	va_end(ap);
}

int
cg_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(1, fmt, ap);
	va_end(ap);
	return CG_EXIT_FAILURE;
}

int
cg_failx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(0, fmt, ap);
	va_end(ap);
	return CG_EXIT_FAILURE;
}

/* "usage: NAME FORM" per form of synopsis; lines that start with a space
 * continue the form above, under its first word. */
static void
print_synopsis(FILE *fp, const char *name, const char *synopsis)
{
	const char *p = synopsis;
	int first = 1;

	while (*p) {
		size_t n = strcspn(p, "\n");

		if (*p == ' ') {
			while (*p == ' ' && n > 0)
				p++, n--;
			fprintf(fp, "%*s",
			        (int)(strlen("usage: ") + strlen(name) + 1),
			        "");
		} else
			fprintf(fp, "%s%s ", first ? "usage: " : "       ",
			        name);
		fprintf(fp, "%.*s\n", (int)n, p);
		first = 0;
		p += n;
		if (*p == '\n')
			p++;
	}
}

static void
usage_tail(const char *name)
{
	fprintf(stderr, "Try '%s --help' for more information.\n", name);
}

int
cg_usage(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmessage(fmt == NULL, fmt, ap);
	va_end(ap);
	if (usage_cli)
		print_synopsis(stderr, progname, usage_cli->synopsis);
	usage_tail(progname);
	return CG_EXIT_USAGE;
}

/* Whether stdout took everything; says so when not. */
static int
stdout_ok(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 1;
	cg_warnx("standard output: write error");
	return 0;
}

int
cg_finish_stdout(int status)
{
	if (stdout_ok())
		return status;
	return status > CG_EXIT_FAILURE ? status : CG_EXIT_FAILURE;
}

/* --------------------------------------------------- the option table */

#define HELP_COLUMN_MAX 30 /* longer option names put their help below */
#define HELP_WIDTH 79

/* "  -b, --batch N" or "      --json N" in buf. */
static int
opt_left(char *buf, size_t cap, const struct cg_opt *o)
{
	int k = o->key > 0 && o->key < 0x80 ? o->key : 0;

	return snprintf(buf, cap, "  %c%c%c --%s%s%s", k ? '-' : ' ',
	                k ? k : ' ', k ? ',' : ' ', o->name,
	                o->arg && o->arg[0] != '[' ? " " : "",
	                o->arg ? o->arg : "");
}

/* text from column col, its words wrapped at HELP_WIDTH; the cursor is
 * at column at.  A "\n" in the text is a space like any other: the
 * texts are broken for the source's width, and a break kept there left
 * a word alone on a line wherever the column ran out just before it. */
static void
print_wrapped(FILE *fp, const char *text, int col, int at)
{
	const char *p = text;

	while (*p) {
		size_t n = strcspn(p, " \n");

		if (at > col && at + 1 + (int)n > HELP_WIDTH) {
			fprintf(fp, "\n%*s", col, "");
			at = col;
		} else if (at > col) {
			fputc(' ', fp);
			at++;
		}
		fprintf(fp, "%.*s", (int)n, p);
		at += (int)n;
		p += n;
		while (*p == ' ' || *p == '\n')
			p++;
	}
	fputc('\n', fp);
}

/* The column the help of opts starts at: two past the widest left
 * part, at most HELP_COLUMN_MAX. */
static int
help_column(const struct cg_opt *opts)
{
	char left[128];
	int col = 0;

	for (const struct cg_opt *o = opts; o->name || o->help; o++) {
		int n =
		    o->name && o->help ? opt_left(left, sizeof(left), o) : 0;
		if (n + 2 > col && n + 2 <= HELP_COLUMN_MAX)
			col = n + 2;
	}
	return col;
}

void
cg_cli_help(FILE *fp, const struct cg_cli *cli)
{
	const struct cg_opt *o;
	char left[128];
	int col = help_column(cli->opts);

	print_synopsis(fp, cli->name, cli->synopsis);
	if (cli->about)
		fprintf(fp, "\n%s\n", cli->about);
	fputc('\n', fp);
	for (o = cli->opts; o->name || o->help; o++) {
		if (o->name == NULL) {
			fprintf(fp, "\n%s\n", o->help);
			continue;
		}
		if (o->help == NULL)
			continue;
		int n = opt_left(left, sizeof(left), o);
		fputs(left, fp);
		if (n + 2 > col) {
			fprintf(fp, "\n%*s", col, "");
			n = col;
		} else {
			fprintf(fp, "%*s", col - n, "");
			n = col;
		}
		print_wrapped(fp, o->help, col, n);
	}
	if (cli->epilog)
		fprintf(fp, "\n%s\n", cli->epilog);
}

/* ------------------------------------------ architecture options */

/* printf into buf [cap] at *n, cut at the end. */
static void __attribute__((format(printf, 4, 5)))
add(char *buf, size_t cap, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (*n >= cap)
		return;
	va_start(ap, fmt);
	k = vsnprintf(buf + *n, cap - *n, fmt, ap);
	va_end(ap);
	*n = k < 0 ? cap : *n + (size_t)k;
}

/* One option's lines: "      --NAME N   help (default D; A to B)", the
 * parenthesis on a line of its own when the line would pass
 * HELP_WIDTH, the help under the name when the name reaches col. */
static void
add_arch_opt(char *buf, size_t cap, size_t *n, const struct cg_arch_opt *o,
             int col)
{
	char flag[96], range[96];
	int at;

	snprintf(flag, sizeof(flag), "      --%s%s", o->name,
	         o->type == CG_ARCH_OPT_BOOL  ? "[=0|1]"
	         : o->type == CG_ARCH_OPT_INT ? " N"
	                                      : " X");
	if (o->type == CG_ARCH_OPT_BOOL)
		snprintf(range, sizeof(range), "(default %.0f; --%s alone: 1)",
		         o->dflt, o->name);
	else if (o->type == CG_ARCH_OPT_INT)
		snprintf(range, sizeof(range), "(default %.0f; %.0f to %.0f)",
		         o->dflt, o->min, o->max);
	else
		snprintf(range, sizeof(range), "(default %g; %g to %g)",
		         o->dflt, o->min, o->max);
	at = (int)strlen(flag);
	if (at + 2 > col) {
		add(buf, cap, n, "%s\n", flag);
		at = 0;
		flag[0] = '\0';
	}
	int wrap =
	    col + (int)(strlen(o->help) + 1 + strlen(range)) > HELP_WIDTH;
	add(buf, cap, n, "%s%*s%s%s%*s%s\n", flag, col - at, "", o->help,
	    wrap ? "\n" : " ", wrap ? col : 0, "", range);
}

void
cg_cli_arch_help(char *buf, size_t cap, const struct cg_cli *cli,
                 const struct cg_arch *only, const char *tail)
{
	int col = help_column(cli->opts);
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < cg_arch_count(); i++) {
		const struct cg_arch *a = cg_arch_at(i);
		if (only && a != only)
			continue;
		add(buf, cap, &n, "-a %s: %s\n", a->name, a->summary);
		for (int j = 0; j < a->nopts; j++)
			add_arch_opt(buf, cap, &n, &a->opts[j], col);
		add(buf, cap, &n, "\n");
	}
	add(buf, cap, &n, "%s", tail);
}

void
cg_cli_arch_names(char *buf, size_t cap)
{
	size_t n = 0;

	add(buf, cap, &n, "architecture:");
	for (int i = 0; i < cg_arch_count(); i++)
		add(buf, cap, &n, "%s %s", i ? "," : "", cg_arch_at(i)->name);
}

/* "  NAME:P          help" (NAME alone where it takes no parameter). */
static void
table_row(char *buf, size_t cap, size_t *n, const char *name, const char *param,
          const char *help)
{
	char s[64];

	snprintf(s, sizeof(s), "%s%s%s", name, param ? ":" : "",
	         param ? param : "");
	add(buf, cap, n, "  %-15s %s\n", s, help);
}

void
cg_cli_reduce_help(char *buf, size_t cap, const char *tail)
{
	const struct cg_reduce_op *op;
	size_t n = 0;

	add(buf, cap, &n, "Operations (--op):\n");
	for (int i = 0; (op = cg_reduce_op_at(i)) != NULL; i++)
		table_row(buf, cap, &n, op->name, op->param, op->help);
	add(buf, cap, &n,
	    "\nStaleness rules (--staleness-weight; s: --model's step minus "
	    "the\ninput's base step):\n");
	for (const struct cg_stale_rule *w = cg_stale_rules; w->name; w++)
		table_row(buf, cap, &n, w->name, w->params, w->help);
	add(buf, cap, &n, "%s", tail);
}

int
cg_cli_arch_rows(struct cg_opt *opts, int nown, int key0, const char **names,
                 int max)
{
	int nnames = 0;

	for (int i = 0; i < cg_arch_count(); i++) {
		const struct cg_arch *ar = cg_arch_at(i);
		for (int j = 0; j < ar->nopts; j++) {
			const struct cg_arch_opt *o = &ar->opts[j];
			int k = 0;
			while (k < nnames && strcmp(names[k], o->name))
				k++;
			if (k < nnames || nnames == max)
				continue;
			names[k] = o->name;
			opts[nown + k] = (struct cg_opt){
			    o->name, key0 + k,
			    o->type == CG_ARCH_OPT_BOOL ? "[=0|1]" : "X", NULL,
			    CG_OPT_CUSTOM};
			nnames++;
		}
	}
	opts[nown + nnames] = (struct cg_opt){0};
	return nnames;
}

void
cg_getopt_init(struct cg_getopt *g, const struct cg_cli *cli, int argc,
               char **argv)
{
	const struct cg_opt *o;
	char *s;
	int n = 0;

	memset(g, 0, sizeof(*g));
	g->cli = cli;
	g->argc = argc;
	g->argv = argv;
	s = g->shortopts;
	*s++ = ':'; /* a missing argument is ':', not '?' */
	for (o = cli->opts; o->name || o->help; o++) {
		if (o->name == NULL)
			continue;
		assert(n < CG_OPT_MAX && o->key > 0);
		for (int i = 0; i < n; i++)
			assert(g->longopts[i].val != o->key);
		g->longopts[n].name = o->name;
		g->longopts[n].has_arg = o->arg == NULL     ? no_argument
		                         : o->arg[0] == '[' ? optional_argument
		                                            : required_argument;
		g->longopts[n].flag = NULL;
		g->longopts[n].val = o->key;
		n++;
		if (o->key < 0x80) {
			*s++ = (char)o->key;
			if (o->arg)
				*s++ = ':';
			if (o->arg && o->arg[0] == '[')
				*s++ = ':';
		}
	}
	*s = '\0';
	cg_setprogname(cli->name);
	usage_cli = cli;
	/* every program: the built-in architectures join the registry */
	g->arch_failed = cg_arch_all() != 0;
	opterr = 0;
	optind = 0; /* glibc: start afresh, as for a new argv */
}

/* The row of key, or NULL. */
static const struct cg_opt *
find_key(const struct cg_cli *cli, int key)
{
	for (const struct cg_opt *o = cli->opts; o->name || o->help; o++)
		if (o->name && o->key == key)
			return o;
	return NULL;
}

/* A bad option, reported as a usage error: CG_OPT_EXIT. */
static int
bad_option(struct cg_getopt *g, int c)
{
	const char *word =
	    optind > 0 && optind <= g->argc ? g->argv[optind - 1] : "";
	const struct cg_opt *o = find_key(g->cli, optopt);
	size_t len = strcspn(word, "=");
	int matches = 0;

	g->status = CG_EXIT_USAGE;
	/* A short option lacks its argument only at the end of its word,
	 * and so getopt has moved past it: word is the option either way. */
	if (c == ':' && strncmp(word, "--", 2) == 0 && o)
		return cg_usage("option '--%s' needs an argument", o->name),
		       CG_OPT_EXIT;
	if (c == ':')
		return cg_usage("option '-%c' needs an argument", optopt),
		       CG_OPT_EXIT;
	if (optopt == 0) {
		/* getopt_long says the same of a prefix of two names */
		for (o = g->cli->opts; o->name || o->help; o++)
			if (o->name && len > 2 &&
			    strncmp(o->name, word + 2, len - 2) == 0)
				matches++;
		if (matches > 1)
			return cg_usage("option '%.*s' is ambiguous", (int)len,
			                word),
			       CG_OPT_EXIT;
		return cg_usage("unknown option '%.*s'", (int)len, word),
		       CG_OPT_EXIT;
	}
	if (o && strncmp(word, "--", 2) == 0)
		return cg_usage("option '--%s' takes no argument", o->name),
		       CG_OPT_EXIT;
	if (optopt > 0 && optopt < 0x80)
		return cg_usage("unknown option '-%c'", optopt), CG_OPT_EXIT;
	return cg_usage("unknown option '%.*s'", (int)len, word), CG_OPT_EXIT;
}

/* -------------------------------------------------- --list-options */

/* enum cg_compress's names, in its order (cg_compress_parse reads
 * them); cg_opt_sampler's words */
static const char *const compress_names[] = {"none", "gzip", "zstd", NULL};
static const char *const sampler_names[] = {"ddim", "ddpm", NULL};

/* Arguments that name a file, by their name in --help ("DIR": a
 * directory). */
static const char *const file_args[] = {
    "FILE", "SHARD", "KEY", "KEYS", "PUB", "CLF", "GRAD", "PREFIX", NULL};

/* w after a space at the end of buf [cap], if there is room. */
/* Whether t is a type weights are quantized to (a float type but f32). */
static int
is_wtype(enum cg_dtype t)
{
	return t != CG_F32 && cg_codec(t)->kind == CG_KIND_FLOAT;
}

static void
add_word(char *buf, size_t cap, const char *w)
{
	size_t n = strlen(buf);

	if (n + strlen(w) + 2 <= cap)
		snprintf(buf + n, cap - n, " %s", w);
}

/* The words that o's argument may be into buf [cap], each after a space,
 * from the list or registry its parser reads: the names of an enum row,
 * of the compressions, codecs, optimizers, samplers, architectures,
 * reduce operations, staleness rules and formats. */
static void
words_of(char *buf, size_t cap, const struct cg_opt *o)
{
	const char *w;

	buf[0] = '\0';
	if (o->type == CG_TYPE_ENUM) {
		for (int i = 0; o->names[i]; i++)
			add_word(buf, cap, o->names[i]);
	} else if (o->parse == cg_opt_compress) {
		for (int i = 0; compress_names[i]; i++)
			add_word(buf, cap, compress_names[i]);
	} else if (o->parse == cg_opt_codec) {
		for (int i = 0; (w = cg_ucodec_name_at(i)) != NULL; i++)
			add_word(buf, cap, w);
	} else if (o->parse == cg_opt_wtype) {
		for (int t = 0; t < CG_NDTYPES; t++)
			if (is_wtype((enum cg_dtype)t))
				add_word(buf, cap, cg_dtype_name((enum cg_dtype)t));
	} else if (o->parse == cg_opt_optim) {
		for (int k = CG_OPT_SGD; k <= CG_OPT_ADAMW; k++)
			add_word(buf, cap, cg_optim_name((enum cg_opt_kind)k));
	} else if (o->parse == cg_opt_sampler) {
		for (int i = 0; sampler_names[i]; i++)
			add_word(buf, cap, sampler_names[i]);
	} else if (strcmp(o->name, "arch") == 0) {
		for (int i = 0; i < cg_arch_count(); i++)
			add_word(buf, cap, cg_arch_at(i)->name);
	} else if (strcmp(o->name, "op") == 0) {
		for (int i = 0; i < cg_reduce_op_count(); i++)
			add_word(buf, cap, cg_reduce_op_at(i)->name);
	} else if (strcmp(o->name, "staleness-weight") == 0) {
		for (int i = 0; cg_stale_rules[i].name; i++)
			add_word(buf, cap, cg_stale_rules[i].name);
	} else if (strcmp(o->name, "to") == 0) {
		for (int i = 0; i < cg_format_count(); i++)
			add_word(buf, cap, cg_format_at(i)->name);
	}
}

/*
 * The hidden option --list-options, alone on the command line: a line
 * per option of cli's table, for scripts/bash-completion: "--LONG -S ARG
 * KIND [WORD...]", where -S is "-" without a short option, ARG the
 * argument's name in --help ("-": none) and KIND flag (no argument),
 * optional (an argument that may be left out), file, dir, word (one of
 * the WORDs) or value (anything else).  Returns what main returns.
 */
static int
list_options(const struct cg_cli *cli)
{
	char words[4096];

	for (const struct cg_opt *o = cli->opts; o->name || o->help; o++) {
		const char *kind = "value";
		words[0] = '\0';
		if (o->name == NULL)
			continue;
		if (o->arg == NULL)
			kind = "flag";
		else if (o->arg[0] == '[')
			kind = "optional";
		else if (strcmp(o->arg, "DIR") == 0)
			kind = "dir";
		for (int i = 0; kind[0] == 'v' && file_args[i]; i++)
			if (strcmp(o->arg, file_args[i]) == 0)
				kind = "file";
		if (kind[0] == 'v')
			words_of(words, sizeof words, o);
		printf("--%s %s%c %s %s%s\n", o->name, o->key < 0x80 ? "-" : "",
		       o->key < 0x80 ? o->key : '-', o->arg ? o->arg : "-",
		       words[0] ? "word" : kind, words);
	}
	return stdout_ok() ? CG_EXIT_OK : CG_EXIT_FAILURE;
}

int
cg_getopt_next(struct cg_getopt *g)
{
	const struct cg_opt *o;
	int c;

	g->opt = NULL;
	g->arg = NULL;
	g->name = NULL;
	if (g->argc == 2 && strcmp(g->argv[1], "--list-options") == 0) {
		g->status = list_options(g->cli);
		return CG_OPT_EXIT;
	}
	if (g->arch_failed) {
		g->arch_failed = 0;
		g->status = cg_fail(NULL);
		return CG_OPT_EXIT;
	}
	c = getopt_long(g->argc, g->argv, g->shortopts, g->longopts, NULL);
	if (c == -1) {
		g->ind = optind;
		/* the keys once the whole line is known good: a usage error
		 * is said as one, whatever the keys */
		if ((g->sign && cg_sign_use(g->sign) != 0) ||
		    (g->trust && cg_trust_use(g->trust) != 0)) {
			cg_warn("%s", cg_sign_active() || !g->sign ? "--trust"
			                                           : "--sign");
			g->status = CG_EXIT_FAILURE;
			return CG_OPT_EXIT;
		}
		if ((g->seal_to && cg_seal_to(g->seal_to) != 0) ||
		    (g->seal_key && cg_seal_key_use(g->seal_key) != 0)) {
			cg_warn("%s", g->seal_to && cg_seal_active() <= 0
			                  ? "--encrypt-to"
			                  : "--seal-key");
			g->status = CG_EXIT_FAILURE;
			return CG_OPT_EXIT;
		}
		return CG_OPT_END;
	}
	if (c == ':' || c == '?' || (o = find_key(g->cli, c)) == NULL)
		return bad_option(g, c);
	snprintf(g->namebuf, sizeof(g->namebuf), "--%s", o->name);
	g->name = g->namebuf;
	g->opt = o;
	g->arg = optarg;
	/* --NAME ARG for an optional argument, where no operand can be
	 * meant: the word is the argument, as getopt takes a required one
	 * (moving optind past it keeps its permutation right) */
	if (optarg == NULL && o->arg && o->arg[0] == '[' &&
	    g->cli->no_operands && optind < g->argc &&
	    g->argv[optind][0] != '-')
		g->arg = g->argv[optind++];
	if (strcmp(o->name, "help") == 0 || strcmp(o->name, "version") == 0) {
		if (o->name[0] == 'h')
			cg_cli_help(stdout, g->cli);
		else
			printf("%s (cg) %s\n", g->cli->name, CG_VERSION);
		g->status = stdout_ok() ? CG_EXIT_OK : CG_EXIT_FAILURE;
		return CG_OPT_EXIT;
	}
	if (c == CG_KEY_SIGN || c == CG_KEY_TRUST) {
		*(c == CG_KEY_SIGN ? &g->sign : &g->trust) = optarg;
		return cg_getopt_next(g);
	}
	if (c == CG_KEY_ENCRYPT_TO || c == CG_KEY_SEAL_KEY) {
		*(c == CG_KEY_ENCRYPT_TO ? &g->seal_to : &g->seal_key) = optarg;
		return cg_getopt_next(g);
	}
	return c;
}

/* "a, b or c": the names of list into buf [cap]. */
static void
join_names(char *buf, size_t cap, const char *const *list)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; list[i] && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s",
		                      i == 0        ? ""
		                      : list[i + 1] ? ", "
		                                    : " or ",
		                      list[i]);
}

/* arg's index in o's names into *out: 0, or -1 with a message. */
static int
parse_enum(const struct cg_opt *o, const char *name, const char *arg, int *out)
{
	char all[256];

	for (int i = 0; o->names[i]; i++)
		if (strcmp(o->names[i], arg) == 0) {
			*out = i;
			return 0;
		}
	join_names(all, sizeof(all), o->names);
	return cg_seterr("%s: '%s' is not %s", name, arg, all);
}

/* Whether the number of a CG_OPT_F_POSITIVE row at p is above 0. */
static int
positive(const struct cg_opt *o, const void *p)
{
	switch (o->type) {
	case CG_TYPE_INT:
		return *(const int *)p > 0;
	case CG_TYPE_I64:
		return *(const long long *)p > 0;
	case CG_TYPE_U64:
	case CG_TYPE_SIZE:
		return *(const uint64_t *)p > 0;
	case CG_TYPE_F64:
		return *(const double *)p > 0;
	case CG_TYPE_F32:
		return *(const float *)p > 0;
	default:
		return 1;
	}
}

/* The argument of a typed row o, given as name, into its place in ctx:
 * 0, or -1 with a message. */
static int
store(const struct cg_opt *o, const char *name, const char *arg, void *ctx)
{
	void *p = (char *)ctx + o->off;
	long long v;
	double x;
	int e = 0;

	switch (o->type) {
	case CG_TYPE_FLAG:
		*(int *)p = 1;
		break;
	case CG_TYPE_STR:
		*(const char **)p = arg;
		break;
	case CG_TYPE_INT:
		if ((e = cg_parse_i64(name, arg, o->lo, o->hi, &v)) == 0)
			*(int *)p = (int)v;
		break;
	case CG_TYPE_I64:
		e = cg_parse_i64(name, arg, o->lo, o->hi, p);
		break;
	case CG_TYPE_U64:
		if (o->hi == 0)
			e = cg_parse_u64(name, arg, p);
		else if ((e = cg_parse_i64(name, arg, o->lo, o->hi, &v)) == 0)
			*(uint64_t *)p = (uint64_t)v;
		break;
	case CG_TYPE_SIZE:
		e = cg_parse_size(name, arg, p);
		break;
	case CG_TYPE_F64:
		e = cg_parse_f64(name, arg, o->flo, o->fhi, p);
		break;
	case CG_TYPE_F32:
		if ((e = cg_parse_f64(name, arg, o->flo, o->fhi, &x)) == 0)
			*(float *)p = (float)x;
		break;
	case CG_TYPE_ENUM:
		e = parse_enum(o, name, arg, p);
		break;
	case CG_TYPE_PARSE:
		e = o->parse(arg, p);
		break;
	case CG_TYPE_CUSTOM:
		break;
	}
	if (e == 0 && (o->flags & CG_OPT_F_POSITIVE) && !positive(o, p))
		e = cg_seterr("%s: must be positive", name);
	if (e != 0 && (o->flags & CG_OPT_F_PREFIX))
		cg_errprefix(name);
	return e;
}

/* Note o's name in its seen member of ctx, if it has one. */
static void
mark_seen(const struct cg_opt *o, void *ctx)
{
	const char **seen;

	if (o->seen == 0)
		return;
	seen = (const char **)((char *)ctx + o->seen - 1);
	if (*seen == NULL || (o->flags & CG_OPT_F_LAST))
		*seen = o->name;
}

int
cg_getopt_all(const struct cg_cli *cli, int argc, char **argv,
              cg_opt_set_fn set, void *ctx, int *ind)
{
	struct cg_getopt g;
	int c, rc;

	cg_getopt_init(&g, cli, argc, argv);
	while ((c = cg_getopt_next(&g)) != CG_OPT_END) {
		if (c == CG_OPT_EXIT)
			return g.status;
		if (g.opt->type != CG_TYPE_CUSTOM) {
			if (store(g.opt, g.name, g.arg, ctx) != 0)
				return cg_usage(NULL);
		} else if ((rc = set(ctx, &g, c)) != CG_CONTINUE)
			return rc;
		mark_seen(g.opt, ctx);
	}
	*ind = g.ind;
	return CG_CONTINUE;
}

int
cg_read_input(const char *path, size_t max, uint8_t **buf, size_t *n)
{
	const int is_stdin = strcmp(path, "-") == 0;
	const char *name = is_stdin ? "standard input" : path;
	FILE *fp = is_stdin ? stdin : fopen(path, "rb");
	size_t cap = 0;

	*buf = NULL;
	*n = 0;
	if (fp == NULL)
		return cg_seterr("%s: %s", path, strerror(errno));
	for (;;) {
		if (*n == cap) {
			uint8_t *q;
			if (cap >= max) {
				cg_seterr("%s: more than %zu bytes", name, max);
				goto fail;
			}
			cap = cap ? 2 * cap : 4096;
			if ((q = realloc(*buf, cap)) == NULL) {
				cg_seterr("out of memory");
				goto fail;
			}
			*buf = q;
		}
		size_t got = fread(*buf + *n, 1, cap - *n, fp);
		*n += got;
		if (got == 0)
			break;
	}
	if (ferror(fp)) {
		cg_seterr("%s: read error", name);
		goto fail;
	}
	if (!is_stdin)
		fclose(fp);
	return 0;
fail:
	if (!is_stdin)
		fclose(fp);
	free(*buf);
	*buf = NULL;
	return -1;
}

/* ------------------------------------------------------ JSON lines */

int
cg_json_print(FILE *fp, cJSON *j)
{
	char *s = j ? cJSON_PrintUnformatted(j) : NULL;

	cJSON_Delete(j);
	if (s == NULL)
		return cg_seterr("out of memory");
	fprintf(fp, "%s\n", s);
	free(s);
	return 0;
}

int
cg_json_append(const char *path, cJSON *j)
{
	FILE *fp;
	int rc;

	if (j == NULL)
		return cg_seterr("out of memory");
	if ((fp = fopen(path, "a")) == NULL) {
		cJSON_Delete(j);
		return cg_seterr("%s: cannot append", path);
	}
	rc = cg_json_print(fp, j);
	if (fclose(fp) != 0 && rc == 0)
		rc = cg_seterr("%s: write failed", path);
	return rc;
}

int
cg_compress_parse(const char *s, enum cg_compress *out)
{
	for (int i = 0; compress_names[i]; i++)
		if (strcmp(s, compress_names[i]) == 0) {
			*out = (enum cg_compress)i;
			return 0;
		}
	return cg_seterr("unknown compression '%s' (none, gzip, zstd)", s);
}

int
cg_opt_compress(const char *arg, void *where)
{
	return cg_compress_parse(arg, where);
}

int
cg_opt_codec(const char *arg, void *where)
{
	return cg_uspec_parse(arg, where);
}

int
cg_opt_wtype(const char *arg, void *where)
{
	enum cg_dtype t;

	if (cg_dtype_parse(arg, &t) != 0 || !is_wtype(t))
		return cg_seterr("'%.32s' is no type to quantize weights to "
		                 "(f16, bf16, q8_0, q4_1, q4_0, q2_0)",
		                 arg);
	*(enum cg_dtype *)where = t;
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
	 * OpenMP's threads (lib/nn/gemm.c). */
}

const char *const cg_precision_names[] = {"f32", "bf16", "f16", NULL};

int
cg_set_compute(int deterministic, int precision, int quiet)
{
	const char *env = getenv("CG_GEMM_ENGINE");
	const char *dot = getenv("CG_BF16_DOT"); /* gemm.c reads it */
	enum cg_engine e = CG_ENGINE_AUTO;

	if (dot != NULL && *dot == '\0')
		dot = NULL;
	if (env != NULL && *env != '\0' && cg_engine_parse(env, &e) != 0)
		return cg_seterr("CG_GEMM_ENGINE=%.40s: not an engine (auto, "
		                 "blas, builtin or dnnl)",
		                 env);
	if (dot != NULL && strcmp(dot, "fast") != 0 && strcmp(dot, "slow") != 0)
		return cg_seterr("CG_BF16_DOT=%.40s: not fast or slow", dot);
	if (cg_set_engine(e) != 0)
		return cg_seterr("CG_GEMM_ENGINE=%s: not built into this cg "
		                 "(configure --with-%s)",
		                 env, e == CG_ENGINE_BLAS ? "blas" : "dnnl");
	cg_set_deterministic(deterministic);
	cg_set_precision((enum cg_precision)precision);
	if (precision == CG_PREC_F16) {
		if (!quiet)
			cg_warnx("f16 products emulated in f32: the same "
			         "numbers, no faster");
		return 0;
	}
	if (precision && !cg_bf16_native() && !quiet)
		cg_warnx(
		    "bf16 products emulated in f32 (%s): the same numbers, "
		    "no faster",
		    deterministic ? "deterministic mode"
		    : e != CG_ENGINE_AUTO && e != CG_ENGINE_DNNL
		        ? "CG_GEMM_ENGINE"
		    : cg_bf16_hardware() == 1 && dot != NULL
		        ? "avx512_bf16 without AMX, CG_BF16_DOT=slow; "
		          "CG_GEMM_ENGINE=dnnl runs it"
		    : cg_bf16_hardware() == 1
		        ? "avx512_bf16 without AMX, measured slower than f32; "
		          "CG_GEMM_ENGINE=dnnl runs it"
		    : cg_engine_built(CG_ENGINE_DNNL)
		        ? "no avx512_bf16 or amx_bf16 on this CPU"
		        : "built without oneDNN");
	return 0;
}

int
cg_threads(void)
{
#ifdef _OPENMP
	return omp_get_max_threads();
#else
	return 1;
#endif
}

/* ---------------------------------------------- optimizer options */

void
cg_optim_cli_init(struct cg_optim_cli *a, enum cg_opt_kind dflt)
{
	memset(a, 0, sizeof(*a));
	a->kind = dflt;
	a->lr = a->wd = a->beta1 = a->beta2 = a->eps = a->momentum = -1;
	a->lr_min = 0;
	a->sched = CG_SCHED_CONSTANT;
}

const char *const cg_sched_names[] = {"constant", "cosine", NULL};

int
cg_opt_optim(const char *arg, void *where)
{
	return cg_optim_parse(arg, where);
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

/* ---------------------------------------------- diffusion options */

int
cg_opt_sampler(const char *arg, void *where)
{
	enum cg_diffusion_sampler *out = where;

	if (strcmp(arg, "ddim") == 0)
		*out = CG_SAMPLER_DDIM;
	else if (strcmp(arg, "ddpm") == 0)
		*out = CG_SAMPLER_DDPM;
	else
		return cg_seterr("--sampler: '%.32s': not ddim or ddpm", arg);
	return 0;
}

int
cg_opt_guidance_interval(const char *arg, void *where)
{
	const char *what = "--guidance-interval";
	struct cg_diffusion_opts *o = where;
	const char *colon = strchr(arg, ':');
	char lo_s[64];
	double lo, hi;

	if (colon == NULL || (size_t)(colon - arg) >= sizeof(lo_s))
		return cg_seterr("%s: '%.32s': not LO:HI, each in [0, 1]",
		                 what, arg);
	memcpy(lo_s, arg, (size_t)(colon - arg));
	lo_s[colon - arg] = '\0';
	if (cg_parse_f64(what, lo_s, 0, 1, &lo) != 0 ||
	    cg_parse_f64(what, colon + 1, 0, 1, &hi) != 0)
		return -1;
	if (lo > hi)
		return cg_seterr("%s: %g:%g: LO above HI", what, lo, hi);
	o->interval = 1;
	o->glo = lo;
	o->ghi = hi;
	return 0;
}

/* ------------------------------------------------- inputs by pattern */

/* path, copied, as one more of *v [*n] (room *cap): 0, or -1. */
static int
push_path(char ***v, size_t *n, size_t *cap, const char *path)
{
	if (*n + 1 >= *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		char **q = realloc(*v, c * sizeof(*q));
		if (q == NULL)
			return -1;
		*v = q;
		*cap = c;
	}
	if (((*v)[*n] = strdup(path)) == NULL)
		return -1;
	(*v)[++*n] = NULL;
	return 0;
}

char **
cg_inputs_expand(char *const *names, int n, size_t *count)
{
	char **v = NULL;
	size_t cap = 0;
	int e = 0;

	*count = 0;
	if (n == 0)
		e = push_path(&v, count, &cap, "-");
	for (int i = 0; i < n && e == 0; i++) {
		glob_t g;
		if (strpbrk(names[i], "*?[") && access(names[i], F_OK) != 0 &&
		    glob(names[i], 0, NULL, &g) == 0) {
			for (size_t j = 0; j < g.gl_pathc && e == 0; j++)
				e = push_path(&v, count, &cap, g.gl_pathv[j]);
			globfree(&g);
		} else {
			e = push_path(&v, count, &cap, names[i]);
		}
	}
	if (e != 0) {
		cg_inputs_free(v);
		cg_seterr("out of memory");
		return NULL;
	}
	return v;
}

void
cg_inputs_free(char **paths)
{
	for (size_t i = 0; paths && paths[i]; i++)
		free(paths[i]);
	free(paths);
}
