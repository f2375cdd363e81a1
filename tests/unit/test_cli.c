/*
 * test_cli.c - the programs' dialect: an option table parsed and turned
 * into --help, the messages of cli.h, and a separator's escapes.
 *
 * stderr and stdout are caught in temporary files to compare the lines
 * the helpers print.  Then cg-reduce's help sections from its tables,
 * and inputs named by patterns the shell left alone.  Exit 0 pass, 1
 * fail.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEST_NAME "test_cli"
#include "check.h"
#include "cli/cli.h"

enum { OPT_JSON = CG_KEY_OWN, OPT_SEED, OPT_SEQUENTIAL };

/* Where the optimizer's rows store, in the tables of this file. */
struct optim_ctx {
	struct cg_optim_cli oc;
};
#define CG_CTX struct optim_ctx

static const struct cg_opt opts[] = {
    {"batch", 'b', "N", "examples per step (default 32)", CG_OPT_CUSTOM},
    {"json", OPT_JSON, NULL, "one JSON object per line", CG_OPT_CUSTOM},
    {"seed", OPT_SEED, "N", "the seed", CG_OPT_CUSTOM},
    {"sequential", OPT_SEQUENTIAL, NULL,
     "read the examples in order rather than shuffled, which is what a "
     "long help text looks like when it is wrapped",
     CG_OPT_CUSTOM},
    {"quiet", 'q', NULL, "say nothing\nbut errors", CG_OPT_CUSTOM},
    {"hidden", 'H', NULL, NULL, CG_OPT_CUSTOM},
    CG_OPT_HEADING("Optimizer:"),
    CG_OPTIM_OPTS(oc),
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-test",
    .synopsis = "[-b N] [--json] FILE...\n [--seed N]\n--version",
    .about = "Test the dialect.",
    .opts = opts,
    .epilog = "Exit status: 0.",
};

/* Output of fd (1 or 2) caught in a temporary file. */
struct catch
{
	FILE *tmp;
	int saved, fd;
	char text[8192];
};

static void
catch_start(struct catch *c, int fd)
{
	fflush(fd == 1 ? stdout : stderr);
	c->fd = fd;
	c->tmp = tmpfile();
	c->saved = dup(fd);
	if (c->tmp == NULL || c->saved < 0 || dup2(fileno(c->tmp), fd) < 0) {
		fprintf(stderr, TEST_NAME ": cannot catch fd %d\n", fd);
		exit(1);
	}
}

static const char *
catch_end(struct catch *c)
{
	size_t n;

	fflush(c->fd == 1 ? stdout : stderr);
	dup2(c->saved, c->fd);
	close(c->saved);
	rewind(c->tmp);
	n = fread(c->text, 1, sizeof(c->text) - 1, c->tmp);
	c->text[n] = '\0';
	fclose(c->tmp);
	return c->text;
}

/* Parse argv to the end; the keys seen in keys[], their arguments in
 * args[].  Returns the last cg_getopt_next result. */
static int
parse(struct cg_getopt *g, int argc, char **argv, int *keys, const char **args,
      int *n)
{
	int c;

	*n = 0;
	cg_getopt_init(g, &cli, argc, argv);
	while ((c = cg_getopt_next(g)) >= 0) {
		keys[*n] = c;
		args[(*n)++] = g->arg;
	}
	return c;
}

static void
test_parse(void)
{
	char *argv[] = {"x",        "-b",   "3",    "f1", "--json",
	                "--seed=7", "-qb4", "--ba", "5",  "f2",
	                "--lr",     "0.5",  "--",   "-x", NULL};
	struct cg_getopt g;
	const char *args[16];
	int keys[16], n;

	int c = parse(&g, 14, argv, keys, args, &n);
	expect(c == CG_OPT_END && n == 7, "parse: seven options, then end");
	expect(keys[0] == 'b' && strcmp(args[0], "3") == 0, "-b 3");
	expect(keys[1] == OPT_JSON && args[1] == NULL, "--json: no argument");
	expect(keys[2] == OPT_SEED && strcmp(args[2], "7") == 0, "--seed=7");
	expect(keys[3] == 'q' && keys[4] == 'b' && strcmp(args[4], "4") == 0,
	       "-qb4: -q and -b 4");
	expect(keys[5] == 'b' && strcmp(args[5], "5") == 0,
	       "--ba: a unique prefix of --batch");
	expect(keys[6] == CG_KEY_LR && strcmp(args[6], "0.5") == 0,
	       "--lr from CG_OPTIM_OPTS");
	expect(g.ind == 11 && strcmp(argv[g.ind], "f1") == 0 &&
	           strcmp(argv[g.ind + 1], "f2") == 0 &&
	           strcmp(argv[g.ind + 2], "-x") == 0,
	       "operands moved after the options, -x after -- among them");
	expect(strcmp(cg_getprogname(), "cg-test") == 0,
	       "the table names the program");
}

/* The first line a bad command line prints, and its status. */
static void
bad(const char *word, const char *word2, const char *line)
{
	char *argv[] = {"x", (char *)word, (char *)word2, NULL};
	struct cg_getopt g;
	struct catch k;
	const char *args[4], *t;
	int keys[4], n, c;
	char what[160];

	catch_start(&k, 2);
	c = parse(&g, word2 ? 3 : 2, argv, keys, args, &n);
	t = catch_end(&k);
	snprintf(what, sizeof(what), "%s: \"%s\"", word, line);
	expect(c == CG_OPT_EXIT && g.status == 2 &&
	           strncmp(t, line, strlen(line)) == 0 &&
	           t[strlen(line)] == '\n' &&
	           strncmp(t + strlen(line) + 1, "usage: cg-test [-b N]", 21) ==
	               0 &&
	           strstr(t, "\nTry 'cg-test --help' for more information.\n"),
	       what);
}

static void
test_errors(void)
{
	bad("--bogus", NULL, "cg-test: unknown option '--bogus'");
	bad("--bogus=1", NULL, "cg-test: unknown option '--bogus'");
	bad("-Z", NULL, "cg-test: unknown option '-Z'");
	bad("-qZ", NULL, "cg-test: unknown option '-Z'");
	bad("-b", NULL, "cg-test: option '-b' needs an argument");
	bad("-qb", NULL, "cg-test: option '-b' needs an argument");
	bad("--batch", NULL, "cg-test: option '--batch' needs an argument");
	bad("--seed", NULL, "cg-test: option '--seed' needs an argument");
	bad("--json=1", NULL, "cg-test: option '--json' takes no argument");
	bad("--quiet=1", NULL, "cg-test: option '--quiet' takes no argument");
	bad("--se", "1", "cg-test: option '--se' is ambiguous");
}

static void
test_help_version(void)
{
	char *argv[] = {"x", "--help", NULL};
	char *argv2[] = {"x", "-V", NULL};
	struct cg_getopt g;
	struct catch k;
	const char *args[4], *t, *p;
	int keys[4], n, c, col = -1, wide = 0, aligned = 1;

	catch_start(&k, 1);
	c = parse(&g, 2, argv, keys, args, &n);
	t = catch_end(&k);
	expect(c == CG_OPT_EXIT && g.status == 0, "--help: exit 0");
	static const char head[] = "usage: cg-test [-b N] [--json] FILE...\n"
	                           "               [--seed N]\n"
	                           "       cg-test --version\n"
	                           "\nTest the dialect.\n\n";
	expect(strncmp(t, head, strlen(head)) == 0,
	       "--help: synopsis with a continued form, then about");
	expect(strstr(t, "  -b, --batch N") && strstr(t, "      --json ") &&
	           strstr(t, "\nOptimizer:\n") &&
	           strstr(t, "  -V, --version") && strstr(t, "      --lr X ") &&
	           !strstr(t, "hidden") && strstr(t, "\n\nExit status: 0.\n"),
	       "--help: each listed option, the heading, the epilog");
	/* every option's help starts in one column; no line over 79 */
	for (p = t; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "") {
		size_t len = strcspn(p, "\n");
		if (len > 79)
			wide++;
		if (strncmp(p, "  -", 3) == 0 ||
		    strncmp(p, "      --", 8) == 0) {
			/* "  -b, --batch N  help": the help starts after
			 * the first two spaces past the option */
			const char *o = p + strspn(p, " ");
			const char *gap = strstr(o, "  ");
			int at = gap && gap < p + len
			             ? (int)(gap + strspn(gap, " ") - p)
			             : -1;
			if (col < 0)
				col = at;
			else if (at != col)
				aligned = 0;
		}
	}
	expect(wide == 0, "--help: no line over 79 columns");
	expect(aligned && col > 0, "--help: the help texts in one column");
	expect(strstr(t, "read the examples in order rather than shuffled,") &&
	           strstr(t, "\n                       ") != NULL,
	       "--help: a long help text wrapped under its column");
	expect(strstr(t, "say nothing but errors\n") != NULL,
	       "--help: a \\n in a help text is a space, the text filled "
	       "(a break kept from the source left a word alone on a line)");

	catch_start(&k, 1);
	c = parse(&g, 2, argv2, keys, args, &n);
	t = catch_end(&k);
	expect(c == CG_OPT_EXIT && g.status == 0 &&
	           strcmp(t, "cg-test (cg) " CG_VERSION "\n") == 0,
	       "-V: 'NAME (cg) VERSION', exit 0");
}

static void
test_messages(void)
{
	struct catch k;
	const char *t;
	int a, b, c;

	cg_setprogname("cg-frob");
	cg_seterr("m.cgm: tensor\tdec.w: bad\n");
	catch_start(&k, 2);
	cg_warnx("plain %d", 1);
	cg_warn(NULL);
	a = cg_fail("%s", "while reading");
	b = cg_failx("x\033[2Jy");
	c = cg_usage(NULL);
	t = catch_end(&k);
	expect(a == 1 && b == 1 && c == 2, "cg_fail 1, cg_usage 2");
	static const char want[] =
	    "cg-frob: plain 1\n"
	    "cg-frob: m.cgm: tensor?dec.w: bad?\n"
	    "cg-frob: while reading: m.cgm: tensor?dec.w: bad?\n"
	    "cg-frob: x?[2Jy\n"
	    "cg-frob: m.cgm: tensor?dec.w: bad?\n"
	    "usage: cg-frob [-b N]";
	expect(strncmp(t, want, strlen(want)) == 0,
	       "messages: one line each, control bytes as '?', the library's "
	       "message after");
	printf("%s", t);
}

/* ------------------------------------ cg_getopt_all, optional arguments */

enum { OPT_TIED = CG_KEY_OWN + 40 };

static const struct cg_opt opts_all[] = {
    {"tied", OPT_TIED, "[=0|1]", "tie them", CG_OPT_CUSTOM},
    {"stop", 's', NULL, "a key that set refuses", CG_OPT_CUSTOM},
    {0},
};

static const struct cg_cli cli_all = {
    .name = "cg-all", .synopsis = "[--tied[=0|1]]", .opts = opts_all};
/* The same table in a program that takes no operands. */
static const struct cg_cli cli_none = {.name = "cg-none",
                                       .synopsis = "[--tied[=0|1]]",
                                       .opts = opts_all,
                                       .no_operands = 1};

struct seen {
	int n, keys[8];
	const char *args[8];
};

static int
record(void *ctx, const struct cg_getopt *g, int key)
{
	struct seen *s = ctx;

	if (key == 's')
		return 7;
	if (s->n < 8) {
		s->keys[s->n] = key;
		s->args[s->n] = g->arg;
	}
	s->n++;
	return CG_CONTINUE;
}

static void
test_all(void)
{
	char *argv[] = {"x", "--tied", "f", "--tied=1", NULL};
	char *stop[] = {"x", "--tied", "-s", "--tied", NULL};
	struct seen s = {0};
	struct catch c;
	int ind = -1;

	expect(cg_getopt_all(&cli_all, 4, argv, record, &s, &ind) ==
	               CG_CONTINUE &&
	           s.n == 2 && s.keys[0] == OPT_TIED && s.args[0] == NULL &&
	           s.keys[1] == OPT_TIED && strcmp(s.args[1], "1") == 0 &&
	           ind == 3 && strcmp(argv[3], "f") == 0,
	       "cg_getopt_all: each option to set, \"[=...]\" optional, the "
	       "operand after");
	/* with operands, a word after the option stays one, a file 1 too */
	char *one[] = {"x", "--tied", "1", NULL};
	s.n = 0;
	expect(cg_getopt_all(&cli_all, 3, one, record, &s, &ind) ==
	               CG_CONTINUE &&
	           s.n == 1 && s.args[0] == NULL && ind == 2 &&
	           strcmp(one[2], "1") == 0,
	       "cg_getopt_all: with operands, --tied 1 is --tied and the "
	       "operand 1");
	/* without, the next word is the argument unless it starts with -;
	 * one that is not a value is the row's to refuse */
	char *none[] = {"x",      "--tied", "0",      "--tied", "--tied=1",
	                "--tied", "yes",    "--tied", NULL};
	s.n = 0;
	expect(cg_getopt_all(&cli_none, 8, none, record, &s, &ind) ==
	               CG_CONTINUE &&
	           s.n == 5 && strcmp(s.args[0], "0") == 0 &&
	           s.args[1] == NULL && strcmp(s.args[2], "1") == 0 &&
	           strcmp(s.args[3], "yes") == 0 && s.keys[3] == OPT_TIED &&
	           s.args[4] == NULL && ind == 8,
	       "cg_getopt_all: without operands, --tied 0 is --tied=0");
	char *mixed[] = {"x", "f", "--tied", "0", "g", NULL};
	s.n = 0;
	expect(cg_getopt_all(&cli_none, 5, mixed, record, &s, &ind) ==
	               CG_CONTINUE &&
	           s.n == 1 && strcmp(s.args[0], "0") == 0 && ind == 3 &&
	           strcmp(mixed[3], "f") == 0 && strcmp(mixed[4], "g") == 0,
	       "cg_getopt_all: --tied 0 among stray words: they are moved "
	       "after, the 0 taken");
	s.n = 0;
	expect(cg_getopt_all(&cli_all, 4, stop, record, &s, &ind) == 7 &&
	           s.n == 1,
	       "cg_getopt_all: set's status ends the loop");
	catch_start(&c, 1);
	cg_cli_help(stdout, &cli_all);
	const char *t = catch_end(&c);
	expect(strstr(t, "\n      --tied[=0|1]  tie them\n") != NULL,
	       "--help: an optional argument follows its name");
}

/* ------------------------------------------------------- typed rows */

struct typed {
	int n, flag, colour;
	uint64_t size;
	double x;
	float f;
	const char *s, *seen;
	struct cg_optim_cli oc;
};
#undef CG_CTX
#define CG_CTX struct typed

static const char *const colours[] = {"red", "green", "blue", NULL};

static const struct cg_opt opts_typed[] = {
    {"n", 'n', "N", "a number", CG_OPT_INT(n, 1, 9), CG_OPT_SEEN(seen)},
    {"flag", 'f', NULL, "a flag", CG_OPT_FLAG(flag), CG_OPT_SEEN(seen)},
    {"size", 'z', "SIZE", "a size", CG_OPT_SIZE(size), CG_OPT_POSITIVE},
    {"x", 'x', "X", "a fraction", CG_OPT_F64(x, 0, 1)},
    {"float", 'F', "X", "a float", CG_OPT_F32(f, -1, 1)},
    {"colour", 'c', "NAME", "a colour", CG_OPT_ENUM(colour, colours)},
    {"str", 's', "S", "a string", CG_OPT_STR(s)},
    CG_OPTIM_OPTS(oc),
    {0},
};

static const struct cg_cli cli_typed = {
    .name = "cg-typed", .synopsis = "[-n N]", .opts = opts_typed};

/* The status of parsing argv into t, and the first line it said. */
static int
typed(char **argv, struct typed *t, char *line, size_t cap)
{
	struct catch c;
	int argc = 0, ind, rc;

	while (argv[argc])
		argc++;
	memset(t, 0, sizeof(*t));
	cg_optim_cli_init(&t->oc, CG_OPT_ADAM);
	catch_start(&c, 2);
	rc = cg_getopt_all(&cli_typed, argc, argv, NULL, t, &ind);
	snprintf(line, cap, "%.*s", (int)strcspn(catch_end(&c), "\n"), c.text);
	return rc;
}

static void
test_typed(void)
{
	char *good[] = {"x",    "-z",   "2K",   "-x",   "0.5", "-c",
	                "blue", "-s",   "hi",   "-n",   "3",   "--flag",
	                "-F",   "-0.5", "--lr", "0.25", NULL};
	char *bad_n[] = {"x", "-n", "0", NULL};
	char *bad_c[] = {"x", "--colour", "pink", NULL};
	char *bad_z[] = {"x", "-z", "0", NULL};
	char *bad_opt[] = {"x", "--opt", "lion", NULL};
	struct typed t;
	struct cg_optim o;
	char line[256];

	expect(typed(good, &t, line, sizeof(line)) == CG_CONTINUE && t.n == 3 &&
	           t.flag == 1 && t.size == 2048 && t.x == 0.5 &&
	           t.f == -0.5f && t.colour == 2 && strcmp(t.s, "hi") == 0,
	       "typed rows: each value stored in its member");
	expect(t.seen && strcmp(t.seen, "n") == 0,
	       "seen: the first row given of those that share it");
	cg_optim_cli_finish(&t.oc, &o);
	expect(o.lr == 0.25f, "--lr 0.25 reaches the optimizer");
	expect(typed(bad_n, &t, line, sizeof(line)) == CG_EXIT_USAGE &&
	           strcmp(line, "cg-typed: --n: '0' is not a whole number in "
	                        "[1, 9]") == 0,
	       "an int out of range: cg_parse_i64's message, a usage error");
	expect(typed(bad_c, &t, line, sizeof(line)) == CG_EXIT_USAGE &&
	           strcmp(line, "cg-typed: --colour: 'pink' is not red, "
	                        "green or blue") == 0,
	       "an unknown name: the names listed");
	expect(typed(bad_z, &t, line, sizeof(line)) == CG_EXIT_USAGE &&
	           strcmp(line, "cg-typed: --size: must be positive") == 0,
	       "CG_OPT_POSITIVE: 0 refused");
	expect(typed(bad_opt, &t, line, sizeof(line)) == CG_EXIT_USAGE &&
	           strstr(line, "unknown optimizer 'lion'") != NULL,
	       "--opt: the optimizer's own message");
}

/* The escapes of a --separator (core/parse.h). */
static void
test_unescape(void)
{
	static const char *const cases[][2] = {
	    {"\\n%\\n", "\n%\n"},
	    {"a\\tb\\\\c", "a\tb\\c"},
	    {"\\r \\x \\", "\\r \\x \\"},
	    {"\\\\n", "\\n"},
	    {"", ""},
	};
	int ok = 1;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = cg_unescape(cases[i][0]);
		if (got == NULL || strcmp(got, cases[i][1]) != 0) {
			fprintf(stderr, "unescape '%s': '%s'\n", cases[i][0],
			        got ? got : "NULL");
			ok = 0;
		}
		free(got);
	}
	expect(ok, "unescape: \\n \\t \\\\ expanded, other backslashes "
	           "kept, a trailing one too");
}

/* cg-reduce's sections: a row per operation and per staleness rule, a
 * parameter after its name, aligned as cg_cli_help aligns, then tail;
 * cut, never overrun, in a small buffer. */
static void
test_reduce_help(void)
{
	const char *head = "Operations (--op):\n"
	                   "  mean            the mean weighted by each "
	                   "input's weight\n"
	                   "  sum             the plain sum\n";
	char buf[4096], small[40];

	memset(small, 'x', sizeof(small));
	cg_cli_reduce_help(buf, sizeof(buf), "\nTAIL");
	expect(strncmp(buf, head, strlen(head)) == 0,
	       "reduce help: the operations, the first first, aligned");
	expect(strstr(buf, "\n  trimmed-mean:F  each element's mean") &&
	           strstr(buf, "\n  clip-mean:TAU   centred clipping"),
	       "reduce help: an operation's parameter after its name");
	expect(strstr(buf, "\n\nStaleness rules (--staleness-weight; s: "
	                   "--model's step minus the\ninput's base step):\n"
	                   "  constant        every kept update in full\n"
	                   "  poly:A          (1+s)^-A\n"
	                   "  hinge:A,B       1 up to s = B, then "
	                   "1/(A(s-B)+1)\n\nTAIL") != NULL,
	       "reduce help: the staleness rules, then the tail, last");
	cg_cli_reduce_help(small, 32, "");
	expect(strlen(small) == 31 && small[32] == 'x' &&
	           strncmp(buf, small, 31) == 0,
	       "reduce help: cut at the buffer's end, nothing past it");
}

/* A pattern no file is named as is expanded, in glob's order; a file
 * whose name has a wildcard is itself; no pattern matching is taken as
 * it is; no name at all is "-". */
static void
test_inputs(void)
{
	char dir[] = "/tmp/test_cli.XXXXXX", path[64], pat[64], odd[64];
	char *names[4];
	char **v;
	size_t n;
	FILE *fp;

	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	for (const char *f = "bac"; *f; f++) {
		snprintf(path, sizeof(path), "%s/u%c.cgu", dir, *f);
		if ((fp = fopen(path, "w")) == NULL)
			die("fopen");
		fclose(fp);
	}
	snprintf(odd, sizeof(odd), "%s/u[a].cgu", dir); /* a file */
	if ((fp = fopen(odd, "w")) == NULL)
		die("fopen");
	fclose(fp);
	snprintf(pat, sizeof(pat), "%s/u?.cgu", dir);
	names[0] = "-";
	names[1] = pat;
	names[2] = odd;
	names[3] = "none*.cgu";
	v = cg_inputs_expand(names, 4, &n);
	int ok = v != NULL && n == 6 && v[6] == NULL &&
	         strcmp(v[0], "-") == 0 && strcmp(v[4], odd) == 0 &&
	         strcmp(v[5], "none*.cgu") == 0;
	for (int i = 0; ok && i < 3; i++) {
		snprintf(path, sizeof(path), "%s/u%c.cgu", dir, "abc"[i]);
		ok = strcmp(v[1 + i], path) == 0;
	}
	expect(ok, "inputs: a pattern expanded in order, a file with a "
	           "wildcard and a pattern matching nothing as they are");
	cg_inputs_free(v);
	v = cg_inputs_expand(names, 0, &n);
	expect(v && n == 1 && strcmp(v[0], "-") == 0 && v[1] == NULL,
	       "inputs: none named: standard input");
	cg_inputs_free(v);
	cg_inputs_free(NULL);
	for (const char *f = "abc"; *f; f++) {
		snprintf(path, sizeof(path), "%s/u%c.cgu", dir, *f);
		remove(path);
	}
	remove(odd);
	rmdir(dir);
}

int
main(void)
{
	test_parse();
	test_all();
	test_typed();
	test_errors();
	test_help_version();
	test_messages();
	test_unescape();
	test_reduce_help();
	test_inputs();
	return failures ? 1 : 0;
}
