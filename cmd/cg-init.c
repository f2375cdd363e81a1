/*
 * cg-init - create a model with seeded weights.
 *
 * The architecture's sizes come from its options, which the architecture
 * declares (struct cg_arch_opt): this program knows no architecture and
 * parses, checks and lists whatever options the registry's rows declare.
 * The option table holds every architecture option name once, hidden
 * from the generic list (--help shows each architecture's options in a
 * section of its own after it); one the chosen architecture lacks is a
 * usage error naming it.  What the data fixes (input shape, the
 * condition vocabulary) comes from a data shard, so a model always fits
 * the data it was made for.  The vocabulary is copied into the model,
 * which is how cg-sample later names its rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "arch/all.h"
#include "cli/cli.h"
#include "model/model.h"

/* Distinct architecture option names the table holds, at most. */
#define MAX_NAMES (CG_OPT_MAX - 16)

/* Keys of the options that have no short form; the architectures'
 * options get OPT_ARCH + their index in names[]. */
enum {
	OPT_FROM = CG_KEY_OWN,
	OPT_LORA,
	OPT_LORA_ALPHA,
	OPT_LORA_TARGETS,
	OPT_SEED,
	OPT_ARCH /* the architectures' options: OPT_ARCH + k */
};
/* --lora-on: patterns at most */
#define MAX_TARGETS 64

struct args {
	const char *data, *out, *from;
	long long lora;   /* --lora R; 0: none */
	double lora_alpha; /* 0: R */
	const char *targets[MAX_TARGETS];
	int ntargets;
	const struct cg_arch *arch;
	uint64_t seed;
	enum cg_compress comp;
	/* The architectures' option names in the table, and what each was
	 * given (the last time it was given). */
	const char *names[MAX_NAMES];
	int nnames;
	int given[MAX_NAMES];
	const char *value[MAX_NAMES];  /* NULL: alone */
	double vals[CG_ARCH_MAX_OPTS]; /* arch->opts' values */
};

/* cg-init's own options: the first rows of the table. */
#define CG_CTX struct args
static const struct cg_opt own[] = {
    /* help: arch_help, the registry's names */
    {"arch", 'a', "NAME", NULL, CG_OPT_CUSTOM},
    {"data", 'd', "SHARD", "a data shard: input shape, conditions",
     CG_OPT_STR(data)},
    {"from", OPT_FROM, "MODEL",
     "a trained model made over for the shard's conditions",
     CG_OPT_STR(from)},
    {"lora", OPT_LORA, "R",
     "--from: low-rank adapters of rank R, only they to train",
     CG_OPT_I64(lora, 1, 65536)},
    {"lora-alpha", OPT_LORA_ALPHA, "A", "the adapters' scale is A/R (R)",
     CG_OPT_F64(lora_alpha, 1e-6, 1e6)},
    {"lora-on", OPT_LORA_TARGETS, "GLOB",
     "the matrices that get adapters (repeatable)", CG_OPT_CUSTOM},
    {"output", 'o', "FILE", "model to write (- for stdout)", CG_OPT_STR(out)},
    {"seed", OPT_SEED, "N", "weight seed (0)", CG_OPT_U64(seed)},
    {"compress", 'z', "ALG", "none, gzip or zstd (none)",
     CG_OPT_PARSE(comp, cg_opt_compress)},
    CG_OPT_ENCRYPT_TO,
    CG_OPT_SIGN,
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    CG_OPT_VERSION,
};
#define NOWN (sizeof(own) / sizeof(own[0]))

/* The table: own, then a hidden row per architecture option name. */
static struct cg_opt opts[NOWN + MAX_NAMES + 1];
static char arch_help[256];
/* Each architecture's section (or the chosen one's), then the exit
 * statuses: made by make_epilog. */
static char epilog[16384];

static const struct cg_cli cli = {
    .name = "cg-init",
    .synopsis = "-a ARCH -d SHARD [options] -o MODEL\n"
                "--from MODEL -d SHARD [--seed N] -o MODEL\n"
                "--from MODEL --lora R --lora-on GLOB [options] -o MODEL",
    .about = "Create a model of architecture ARCH with seeded weights.  "
             "After -a ARCH,\n--help lists that architecture's options "
             "only.",
    .opts = opts,
    .epilog = epilog,
    .no_operands = 1, /* --film 0 is --film=0 */
};

/* The sections of every architecture (only's, when not NULL), then the
 * exit statuses. */
static void
make_epilog(const struct cg_arch *only)
{
	cg_cli_arch_help(epilog, sizeof(epilog), &cli, only,
	                 "Exit status: 0 ok, 1 a failure, 2 a usage error.");
}

/* ---------------------------------------------------------------- help */

/* The table: cg-init's own rows, then a hidden row per architecture
 * option name, recorded in a->names; the help of --arch, the epilog. */
static void
make_table(struct args *a)
{
	memcpy(opts, own, sizeof(own));
	a->nnames = cg_cli_arch_rows(opts, NOWN, OPT_ARCH, a->names, MAX_NAMES);
	cg_cli_arch_names(arch_help, sizeof(arch_help));
	opts[0].help = arch_help;
	make_epilog(NULL);
}

/* -------------------------------------------------------------- parsing */

/* -a NAME, or an architecture option; CG_CONTINUE, or a usage error. */
static int
set_option(void *ctx, const struct cg_getopt *g, int c)
{
	struct args *a = ctx;

	if (c == OPT_LORA_TARGETS) {
		if (a->ntargets == MAX_TARGETS)
			return cg_usage("--lora-on: more than %d",
			                MAX_TARGETS);
		a->targets[a->ntargets++] = g->arg;
	} else if (c != 'a') {
		a->given[c - OPT_ARCH] = 1;
		a->value[c - OPT_ARCH] = g->arg;
	} else if ((a->arch = cg_arch_find(g->arg)) == NULL)
		return cg_usage(NULL);
	else
		make_epilog(a->arch); /* for a --help after it */
	return CG_CONTINUE;
}

/* The command line into a; CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	if (cg_arch_all() != 0) { /* the table lists every arch's options */
		cg_setprogname(cli.name);
		return cg_fail(NULL);
	}
	make_table(a);
	if ((rc = cg_getopt_all(&cli, argc, argv, set_option, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	if (ind != argc)
		return cg_usage("unexpected argument");
	return CG_CONTINUE;
}

/*
 * Check what parse() left; fill a->vals from the architecture's defaults
 * and the options given.  CG_CONTINUE, or a usage error.
 */
static int
validate(struct args *a)
{
	if ((a->lora_alpha > 0 || a->ntargets) && !a->lora)
		return cg_usage("--%s needs --lora R",
		                a->ntargets ? "lora-on" : "lora-alpha");
	if (a->lora && a->from == NULL)
		return cg_usage("--lora adds adapters to a model: --from MODEL");
	if (a->lora && a->ntargets == 0)
		return cg_usage("--lora needs --lora-on GLOB");
	if (a->lora && a->data)
		return cg_usage("--lora and -d: one at a time (first -d, then "
		                "--lora)");
	if (a->data == NULL && !a->lora)
		return cg_usage("no data shard (-d)");
	if (a->from) {
		if (a->arch)
			return cg_usage("--from takes the architecture from "
			                "the model: no -a");
		for (int k = 0; k < a->nnames; k++)
			if (a->given[k])
				return cg_usage("--from takes the options from "
				                "the model: no --%s",
				                a->names[k]);
		if (a->data && strcmp(a->from, "-") == 0 &&
		    strcmp(a->data, "-") == 0)
			return cg_usage("the model and the shard cannot both "
			                "be standard input");
		return CG_CONTINUE;
	}
	if (a->arch == NULL)
		return cg_usage("no architecture (-a)");
	for (int i = 0; i < a->arch->nopts; i++)
		a->vals[i] = a->arch->opts[i].dflt;
	for (int k = 0; k < a->nnames; k++) {
		const struct cg_arch_opt *o;
		if (!a->given[k])
			continue;
		if ((o = cg_arch_opt_find(a->arch, a->names[k])) == NULL)
			return cg_usage("--%s is not an option of %s (see "
			                "cg-init -a %s --help)",
			                a->names[k], a->arch->name,
			                a->arch->name);
		if (cg_arch_opt_parse(o, a->value[k],
		                      &a->vals[o - a->arch->opts]) != 0)
			return cg_usage(NULL);
	}
	return CG_CONTINUE;
}

/* --from MODEL --lora R: the model with adapters.  0 or -1 said. */
static int
add_lora(const struct args *a)
{
	struct cg_model *old, *m;
	int rc = -1;

	if ((old = cg_model_read(a->from)) == NULL)
		return -1;
	m = cg_model_add_lora(old, (int)a->lora,
	                      a->lora_alpha > 0 ? a->lora_alpha
	                                        : (double)a->lora,
	                      a->targets, a->ntargets, a->seed);
	cg_model_free(old);
	if (m == NULL)
		cg_errprefix(strcmp(a->from, "-") ? a->from : "(stdin)");
	else if (cg_model_write(m, a->out, a->comp) == 0)
		rc = 0;
	cg_model_free(m);
	return rc;
}

/* Make the model and write it.  Returns 0 or -1 with a message. */
static int
run(const struct args *a)
{
	struct cg_shard *s;
	struct cg_model *m = NULL;
	cJSON *config, *extra;
	int rc = -1;

	if (a->lora)
		return add_lora(a);
	if ((s = cg_shard_open(a->data)) == NULL)
		return -1;
	if (a->from) {
		struct cg_model *old = cg_model_read(a->from);
		if (old == NULL)
			goto out;
		m = cg_model_recondition(old, s, a->seed);
		cg_model_free(old);
		if (m == NULL) {
			cg_errprefix(strcmp(a->from, "-") ? a->from : "(stdin)");
			goto out;
		}
		if (cg_model_write(m, a->out, a->comp) != 0)
			goto out;
		rc = 0;
		goto out;
	}
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
	static struct args a = {.out = "-"};
	int rc;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE ||
	    (rc = validate(&a)) != CG_CONTINUE)
		return rc;
	return run(&a) == 0 ? CG_EXIT_OK : cg_fail(NULL);
}
