/*
 * cg-prune - a sparser model: the least important weights set to zero
 * and masked, so that later training keeps them at zero; or, with
 * --structured, a smaller model: whole heads, rows or units removed.
 *
 * Per tensor, global or N:M; importance by magnitude, Wanda (a
 * calibration shard's activations) or a gradient.  The work is the
 * library's (prune.c chooses, mask.c keeps, the arch's shrink cuts);
 * this program parses, reads the inputs, and writes the model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "data/shard.h"
#include "eval/prune.h"
#include "exchange/update.h"
#include "model/model.h"

#define MAX_EXCLUDE 64

enum {
	OPT_CALIB = CG_KEY_OWN,
	OPT_EXCLUDE,
	OPT_GLOBAL,
	OPT_GROUP,
	OPT_KEEP_SHAPE,
	OPT_NM,
	OPT_REMOVE,
	OPT_SEED,
	OPT_STRUCTURED,
};

struct args {
	const char *model, *grad, *out, *data;
	const char *exclude[MAX_EXCLUDE];
	int nexclude;
	struct cg_prune_opts po;
	const char *sparsity_given;
	int global_given;
	int group; /* -1: the importance's own, 0: tensor, 1: row */
	enum cg_importance imp;
	const char *wanda_only; /* the first option only wanda takes */
	long long calib, batch;
	int threads;
	uint64_t seed;
	enum cg_compress comp;
	const char *structured; /* the structures to remove, or NULL */
	double remove;
	const char *remove_given;
	int keep_shape;
};

static const char *const group_names[] = {"tensor", "row", NULL};

/* "N:M" into the struct cg_prune_opts at where. */
static int
parse_nm(const char *s, void *where)
{
	struct cg_prune_opts *o = where;
	char *end;
	const char *q;
	long n = strtol(s, &end, 10), m;

	if (end == s || *end != ':')
		return cg_seterr("--nm: '%s' is not N:M", s);
	q = end + 1;
	m = strtol(q, &end, 10);
	if (end == q || *end != '\0' || n < 1 || m > 256 || n >= m)
		return cg_seterr("--nm: '%s': not N:M with 1 <= N < M <= 256",
		                 s);
	o->nm_n = (int)n;
	o->nm_m = (int)m;
	return 0;
}

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"output", 'o', "FILE", "the pruned model (- or a pipe: stdout)",
     CG_OPT_STR(out)},
    {"compress", 'z', "ALG", "none, gzip or zstd (none)",
     CG_OPT_PARSE(comp, cg_opt_compress)},
    CG_OPT_THREADS(threads, CG_THREADS_HELP),
    CG_OPT_ENCRYPT_TO,
    CG_OPT_SIGN,
    CG_OPT_SEAL_KEY,
    CG_OPT_TRUST,
    CG_OPT_HELP,
    CG_OPT_VERSION,
    CG_OPT_HEADING("How much:"),
    {"sparsity", 's', "X", "prune the fraction X (0 to 1) of each tensor",
     CG_OPT_F64(po.sparsity, 0, 1), CG_OPT_SEEN(sparsity_given)},
    {"global", OPT_GLOBAL, NULL,
     "rank all tensors' weights together: X of them all",
     CG_OPT_FLAG(global_given)},
    {"group", OPT_GROUP, "NAME",
     "-s ranks within each tensor or each output row (tensor; wanda: row)",
     CG_OPT_ENUM(group, group_names)},
    {"nm", OPT_NM, "N:M", "keep N of each M consecutive inputs (2:4)",
     CG_OPT_PARSE(po, parse_nm)},
    {"exclude", OPT_EXCLUDE, "GLOB",
     "leave the tensors whose names match GLOB dense (repeatable)",
     CG_OPT_CUSTOM},
    CG_OPT_HEADING("A smaller model:"),
    {"structured", OPT_STRUCTURED, "LIST",
     "remove whole structures, as the model's arch names them: "
     "heads,rows; units",
     CG_OPT_STR(structured)},
    {"remove", OPT_REMOVE, "X",
     "--structured: the fraction X (0 to 1) of each layer's to remove",
     CG_OPT_F64(remove, 0, 1), CG_OPT_SEEN(remove_given)},
    {"keep-shape", OPT_KEEP_SHAPE, NULL,
     "--structured: zero them in the model instead of removing them",
     CG_OPT_FLAG(keep_shape)},
    CG_OPT_HEADING("Which first (the least important):"),
    {"importance", 'i', "NAME",
     "magnitude |w|, wanda |w| ||x|| (needs -d) or grad |w g| (needs "
     "GRAD) (magnitude)",
     CG_OPT_ENUM(imp, cg_importance_names)},
    {"data", 'd', "SHARD", "wanda: the calibration shard", CG_OPT_STR(data),
     CG_OPT_SEEN(wanda_only)},
    {"calib", OPT_CALIB, "N", "wanda: examples of it to run (128; 0: all)",
     CG_OPT_I64(calib, 0, 1LL << 40), CG_OPT_SEEN(wanda_only)},
    {"batch", 'b', "N", "wanda: examples per pass (32)",
     CG_OPT_I64(batch, 1, 1 << 20), CG_OPT_SEEN(wanda_only)},
    {"seed", OPT_SEED, "N", "wanda: which examples, and their noise (0)",
     CG_OPT_U64(seed), CG_OPT_SEEN(wanda_only)},
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-prune",
    .synopsis = "-s X [--global] [-i NAME] [-d SHARD] [-o OUT] MODEL [GRAD]\n"
                "--nm N:M [-i NAME] [-d SHARD] [-o OUT] MODEL [GRAD]\n"
                "--structured LIST --remove X [--keep-shape] [-o OUT] MODEL",
    .about = "Prune a model (-: standard input): the least important "
             "weights of its Linear\nlayers become 0, and a mask keeps "
             "them 0 through later training; with\n--structured, whole "
             "heads, rows or units go, and the model written is smaller.",
    .opts = opts,
    .epilog = "Exit status: 0 success, 1 failure, 2 usage error.",
};

/* --exclude GLOB: one more pattern. */
static int
exclude_option(void *ctx, const struct cg_getopt *g, int c)
{
	struct args *a = ctx;

	(void)c;
	if (a->nexclude == MAX_EXCLUDE)
		return cg_usage("--exclude: more than %d", MAX_EXCLUDE);
	a->exclude[a->nexclude++] = g->arg;
	return CG_CONTINUE;
}

static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	memset(a, 0, sizeof(*a));
	a->out = "-";
	a->calib = 128;
	a->batch = 32;
	a->group = -1;
	if ((rc = cg_getopt_all(&cli, argc, argv, exclude_option, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	if (ind < argc)
		a->model = argv[ind++];
	if (ind < argc)
		a->grad = argv[ind++];
	if (ind < argc)
		return cg_usage("more than a model and a gradient");
	return CG_CONTINUE;
}

/* --structured's checks: it goes with none of the weight-by-weight
 * options. */
static int
validate_structured(const struct args *a)
{
	if (a->structured == NULL)
		return a->remove_given || a->keep_shape
		           ? cg_usage("--%s is for --structured",
		                      a->remove_given ? "remove" : "keep-shape")
		           : CG_CONTINUE;
	if (!a->remove_given)
		return cg_usage("--structured needs --remove X");
	if (a->remove >= 1)
		return cg_usage("--remove %g: a layer keeps one at least: X "
		                "in [0, 1)",
		                a->remove);
	if (a->sparsity_given || a->po.nm_m || a->global_given ||
	    a->group >= 0 || a->nexclude || a->grad || a->data ||
	    a->imp != CG_IMPORTANCE_MAGNITUDE)
		return cg_usage("--structured removes whole structures by "
		                "their weights' norms: no -s, --nm, --global, "
		                "--group, --exclude, -i, -d or GRAD");
	return CG_CONTINUE;
}

static int
validate(struct args *a)
{
	int rc;

	if (a->model == NULL)
		return cg_usage("no model");
	if ((rc = validate_structured(a)) != CG_CONTINUE || a->structured)
		return rc;
	if (!a->sparsity_given && a->po.nm_m == 0)
		return cg_usage("nothing to prune: give --sparsity X or --nm "
		                "N:M");
	if (a->sparsity_given && a->po.nm_m)
		return cg_usage("--sparsity and --nm: choose one");
	if (a->global_given && !a->sparsity_given)
		return cg_usage("--global ranks for --sparsity: N:M ranks "
		                "within each run of M weights");
	if (a->group >= 0 && !a->sparsity_given)
		return cg_usage("--group is for --sparsity: N:M ranks within "
		                "each run of M weights");
	if (a->group >= 0 && a->global_given)
		return cg_usage("--global and --group: a ranking is over all "
		                "tensors, or within a tensor or a row");
	if (a->imp == CG_IMPORTANCE_WANDA && a->global_given)
		return cg_usage("--global: wanda compares weights within each "
		                "output row, whose scores are not comparable "
		                "across layers");
	if (a->imp == CG_IMPORTANCE_WANDA && a->data == NULL)
		return cg_usage("--importance wanda needs a calibration shard "
		                "(-d SHARD)");
	if (a->imp != CG_IMPORTANCE_WANDA && a->wanda_only)
		return cg_usage("--%s is for --importance wanda",
		                a->wanda_only);
	if (a->imp == CG_IMPORTANCE_GRAD && a->grad == NULL)
		return cg_usage("--importance grad needs a gradient file: "
		                "cg-prune --importance grad MODEL GRAD");
	if (a->imp != CG_IMPORTANCE_GRAD && a->grad)
		return cg_usage("a gradient (%s) is for --importance grad",
		                a->grad);
	if (a->grad && strcmp(a->model, "-") == 0 && strcmp(a->grad, "-") == 0)
		return cg_usage("the model and the gradient cannot both be "
		                "standard input");
	if (a->data && strcmp(a->data, "-") == 0 && strcmp(a->model, "-") == 0)
		return cg_usage("the model and the shard cannot both be "
		                "standard input");
	a->po.global = a->global_given;
	/* Wanda's own comparison is per output row; N:M ranks within runs
	 * of a row already */
	a->po.per_row = a->group >= 0
	                    ? a->group
	                    : a->imp == CG_IMPORTANCE_WANDA && a->po.nm_m == 0;
	return CG_CONTINUE;
}

/* The scores of m's weights by a's importance into score [nparams]. */
static int
score(const struct args *a, struct cg_model *m, const char *mname, float *score)
{
	struct cg_update *u = NULL;
	struct cg_shard *s = NULL;
	double *sq = NULL;
	float *g = NULL;
	uint64_t rows;
	int rc = -1;

	if (a->imp == CG_IMPORTANCE_GRAD) {
		if ((u = cg_update_read(a->grad)) == NULL)
			goto out;
		if (u->kind != CG_UPDATE_GRAD) {
			cg_seterr("%s: a %s, not a gradient", u->name,
			          cg_update_kind_name(u->kind));
			goto out;
		}
		if (cg_update_check_base(u, m, mname) < 0 ||
		    (g = cg_alloc(m->nparams * sizeof(float))) == NULL ||
		    cg_update_get(u, m, g) != 0)
			goto out;
	} else if (a->imp == CG_IMPORTANCE_WANDA) {
		if ((s = cg_shard_open(a->data)) == NULL)
			goto out;
		if (cg_prune_input_sq(m, s, (uint64_t)a->calib, (int)a->batch,
		                      a->seed, &sq, &rows) != 0) {
			cg_errprefix(strcmp(a->data, "-") ? a->data
			                                  : "(stdin)");
			goto out;
		}
	}
	rc = cg_prune_scores(m, a->imp, g, sq, score);
out:
	cg_update_free(u);
	cg_shard_free(s);
	free(sq);
	free(g);
	return rc;
}

/* --structured: m smaller (or zeroed) written to a->out; 0 or -1. */
static int
shrink(const struct args *a, struct cg_model *m, const char *mname)
{
	double remove[CG_ARCH_MAX_STRUCTURES];
	struct cg_model *small;
	int rc;

	if (cg_prune_structures(m->arch, a->structured, a->remove, remove) !=
	        0 ||
	    (small = cg_prune_shrink(m, remove, a->keep_shape)) == NULL) {
		cg_errprefix(mname);
		return -1;
	}
	rc = cg_model_write(small, a->out, a->comp);
	if (small != m)
		cg_model_free(small);
	return rc;
}

int
main(int argc, char **argv)
{
	struct args a;
	struct cg_model *m = NULL;
	unsigned char *chosen = NULL;
	float *sc = NULL;
	int rc, k;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE ||
	    (rc = validate(&a)) != CG_CONTINUE)
		return rc;
	cg_set_threads(a.threads);
	const char *mname = strcmp(a.model, "-") ? a.model : "(stdin)";
	rc = CG_EXIT_FAILURE;
	if ((m = cg_model_read(a.model)) == NULL) {
		cg_warn(NULL);
		goto out;
	}
	if (a.structured) {
		rc = shrink(&a, m, mname) ? (cg_warn(NULL), CG_EXIT_FAILURE)
		                          : CG_EXIT_OK;
		goto out;
	}
	if ((chosen = calloc((size_t)m->nviews, 1)) == NULL ||
	    (sc = cg_alloc(m->nparams * sizeof(float))) == NULL) {
		cg_warnx("out of memory");
		goto out;
	}
	if ((k = cg_prune_choose(m, a.exclude, a.nexclude, chosen)) <
	    a.nexclude)
		cg_seterr("--exclude '%s': names no tensor that may be pruned",
		          a.exclude[k]);
	if (k < a.nexclude || score(&a, m, mname, sc) != 0 ||
	    cg_prune_apply(m, &a.po, chosen, sc) != 0) {
		cg_warn(NULL);
		goto out;
	}
	cg_prune_record(m, a.imp, &a.po);
	if (cg_model_write(m, a.out, a.comp) != 0) {
		cg_warn(NULL);
		goto out;
	}
	rc = CG_EXIT_OK;
out:
	free(sc);
	free(chosen);
	cg_model_free(m);
	return cg_finish_stdout(rc);
}
