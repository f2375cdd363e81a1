/*
 * cg-init - create a model with seeded weights.
 *
 * The architecture's sizes come from its options, which the architecture
 * declares (struct cg_arch_opt): this program knows no architecture and
 * parses, checks and lists whatever options the registry's rows declare.
 * getopt sees every option of every architecture; one the chosen
 * architecture lacks is a usage error naming it.  What the data fixes
 * (input shape, the condition vocabulary) comes from a data shard, so a
 * model always fits the data it was made for.  The vocabulary is copied
 * into the model, which is how cg-sample later names its rows.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "model.h"

#define PROG "cg-init"
#define SYNOPSIS "-a ARCH -d SHARD [options] -o MODEL"
/* Distinct architecture option names getopt is given, at most. */
#define MAX_NAMES 256

/* Codes of the options that have no short form; the architectures'
 * options get OPT_ARCH + their index in names[]. */
enum { OPT_SEED = 256, OPT_ARCH = 512 };

struct args {
	const char *arch_name, *data, *out;
	const struct cg_arch *arch; /* after validate() */
	uint64_t seed;
	enum cg_compress comp;
	int help;
	/* The architectures' option names getopt knows, and what each was
	 * given (the last time it was given). */
	const char *names[MAX_NAMES];
	int nnames;
	int given[MAX_NAMES];
	const char *value[MAX_NAMES];  /* NULL: alone */
	double vals[CG_ARCH_MAX_OPTS]; /* arch->opts' values */
};

static int
bad_usage(const char *msg)
{
	return cg_usage_error(PROG, SYNOPSIS, msg);
}

/* One option's help: "      --NAME N             help (default D; A to B)",
 * the parenthesis on a line of its own when the line would pass 79. */
static void
print_opt(const struct cg_arch_opt *o)
{
	char flag[64], range[96];

	snprintf(flag, sizeof(flag), "--%s%s", o->name,
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
	int wrap = 27 + strlen(o->help) + 1 + strlen(range) > 79;
	printf("      %-20s %s%s%*s%s\n", flag, o->help, wrap ? "\n" : " ",
	       wrap ? 27 : 0, "", range);
}

/* --help: the generic options, then each architecture's (only's, when
 * not NULL) from its table. */
static void
help(const struct cg_arch *only)
{
	printf("usage: " PROG " " SYNOPSIS "\n"
	       "Create a model of architecture ARCH with seeded weights.\n\n"
	       "  -a, --arch NAME          architecture:");
	for (int i = 0; i < cg_arch_count(); i++)
		printf("%s %s", i ? "," : "", cg_arch_at(i)->name);
	printf("\n"
	       "  -d, --data SHARD         a data shard: input shape, "
	       "conditions\n"
	       "  -o, --output FILE        model to write (- for stdout)\n"
	       "      --seed N             weight seed (0)\n"
	       "  -z, --compress ALG       none, gzip or zstd (none)\n"
	       "  -h, --help               this help (after -a ARCH: that "
	       "architecture's only)\n"
	       "  -V, --version            version\n");
	for (int i = 0; i < cg_arch_count(); i++) {
		const struct cg_arch *a = cg_arch_at(i);
		if (only && a != only)
			continue;
		printf("\n-a %s: %s\n", a->name, a->summary);
		for (int j = 0; j < a->nopts; j++)
			print_opt(&a->opts[j]);
	}
	printf("\nExit status: 0 ok, 1 a failure, 2 a usage error.\n");
}

/*
 * The long options: cg-init's own, then each architecture option name
 * once (the registry keeps options of one name alike in taking an
 * argument), recorded in a->names.  Returns a malloc'd table or NULL.
 */
static struct option *
long_options(struct args *a)
{
	static const struct option own[] = {
	    {"arch", required_argument, NULL, 'a'},
	    {"compress", required_argument, NULL, 'z'},
	    {"data", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {"output", required_argument, NULL, 'o'},
	    {"seed", required_argument, NULL, OPT_SEED},
	    {"version", no_argument, NULL, 'V'},
	};
	const size_t nown = sizeof(own) / sizeof(own[0]);
	struct option *t = calloc(nown + MAX_NAMES + 1, sizeof(*t));

	if (t == NULL)
		return NULL;
	memcpy(t, own, sizeof(own));
	for (int i = 0; i < cg_arch_count(); i++) {
		const struct cg_arch *ar = cg_arch_at(i);
		for (int j = 0; j < ar->nopts; j++) {
			const struct cg_arch_opt *o = &ar->opts[j];
			int k = 0;
			while (k < a->nnames && strcmp(a->names[k], o->name))
				k++;
			if (k < a->nnames || a->nnames == MAX_NAMES)
				continue;
			a->names[k] = o->name;
			t[nown + k] = (struct option){
			    o->name,
			    o->type == CG_ARCH_OPT_BOOL ? optional_argument
			                                : required_argument,
			    NULL, OPT_ARCH + k};
			a->nnames++;
		}
	}
	return t;
}

/* Parse argv into *a: returns -1 to go on, else the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	struct option *opts = long_options(a);
	int c, rc = -1;

	if (opts == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	a->out = "-";
	while (rc < 0 &&
	       (c = getopt_long(argc, argv, "a:d:ho:Vz:", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			a->arch_name = optarg;
			break;
		case 'd':
			a->data = optarg;
			break;
		case 'h':
			a->help = 1;
			break;
		case 'o':
			a->out = optarg;
			break;
		case 'V':
			printf("%s (cg) %s\n", PROG, CG_VERSION);
			rc = 0;
			break;
		case 'z':
			if (cg_compress_parse(optarg, &a->comp) != 0)
				rc = bad_usage(cg_errmsg());
			break;
		case OPT_SEED:
			if (cg_parse_u64("--seed", optarg, &a->seed) != 0)
				rc = bad_usage(cg_errmsg());
			break;
		default:
			if (c < OPT_ARCH || c >= OPT_ARCH + a->nnames) {
				rc = bad_usage(NULL);
				break;
			}
			a->given[c - OPT_ARCH] = 1;
			a->value[c - OPT_ARCH] = optarg;
		}
	}
	free(opts);
	if (rc < 0 && optind != argc)
		rc = bad_usage("unexpected argument");
	return rc;
}

/*
 * Check what parse() left and find the architecture; fill a->vals from
 * its defaults and the options given.  -1 to go on, else the exit status
 * (--help is handled here).
 */
static int
validate(struct args *a)
{
	char msg[160];

	if (a->arch_name && (a->arch = cg_arch_find(a->arch_name)) == NULL)
		return bad_usage(cg_errmsg());
	if (a->help) {
		help(a->arch);
		return 0;
	}
	if (a->arch == NULL)
		return bad_usage("no architecture (-a)");
	if (a->data == NULL)
		return bad_usage("no data shard (-d)");
	for (int i = 0; i < a->arch->nopts; i++)
		a->vals[i] = a->arch->opts[i].dflt;
	for (int k = 0; k < a->nnames; k++) {
		const struct cg_arch_opt *o;
		if (!a->given[k])
			continue;
		if ((o = cg_arch_opt_find(a->arch, a->names[k])) == NULL) {
			snprintf(msg, sizeof(msg),
			         "--%s is not an option of %s (see " PROG
			         " -a %s --help)",
			         a->names[k], a->arch->name, a->arch->name);
			return bad_usage(msg);
		}
		if (cg_arch_opt_parse(o, a->value[k],
		                      &a->vals[o - a->arch->opts]) != 0)
			return bad_usage(cg_errmsg());
	}
	return -1;
}

/* Make the model and write it.  Returns 0 or -1 with a message. */
static int
run(const struct args *a)
{
	struct cg_shard *s;
	struct cg_model *m = NULL;
	cJSON *config, *extra;
	int rc = -1;

	if ((s = cg_shard_open(a->data)) == NULL)
		return -1;
	if (cg_arch_config(a->arch, s, a->vals, &config, &extra) != 0) {
		cg_errprefix(a->data);
		goto out;
	}
	if ((m = cg_model_create(a->arch->name, config, extra, a->seed)) ==
	        NULL ||
	    cg_model_write(m, a->out, a->comp) != 0)
		goto out;
	rc = 0;
out:
	cg_model_free(m);
	cg_shard_free(s);
	return rc;
}

int
main(int argc, char **argv)
{
	static struct args a;
	int rc;

	if ((rc = parse(argc, argv, &a)) >= 0 || (rc = validate(&a)) >= 0)
		return rc;
	if (run(&a) != 0) {
		fprintf(stderr, PROG ": %s\n", cg_errmsg());
		return 1;
	}
	return 0;
}
