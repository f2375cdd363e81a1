/*
 * cg-reduce - combine many gradients or deltas into one.
 *
 * Inputs are read one after another and handed to the reducer
 * (lib/reduce.c), which folds a streaming operation into one accumulator,
 * so memory does not grow with their number.  The output is a valid input
 * again, so a reduction tree over ssh is a shell expression:
 * cg-reduce a b | cg-reduce - c equals cg-reduce a b c.
 */
#include <getopt.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "reduce.h"

static const char *prog = "cg-reduce";
static const char *synopsis = "[options] [FILE...]";

enum { OPT_OP = 1 };

struct args {
	const char *out;
	const struct cg_reduce_op *op;
	enum cg_compress comp;
	long long threads;
};

static void
usage(FILE *fp)
{
	fprintf(fp,
	        "usage: %s %s\n"
	        "Combine gradients or deltas (- or none: standard input).\n"
	        "  -o, --output FILE    where to write (- or a pipe: stdout)\n"
	        "      --op NAME        how to combine (%s):\n",
	        prog, synopsis, cg_reduce_ops[0].name);
	for (const struct cg_reduce_op *op = cg_reduce_ops; op->name; op++)
		fprintf(fp, "                         %-9s %s\n", op->name,
		        op->help);
	fputs("  -z, --compress ALG   none, gzip or zstd (none)\n"
	      "  -j, --threads N      threads (all cores)\n"
	      "  -q, --quiet          nothing on stderr but errors\n"
	      "  -h, --help, -V, --version\n",
	      fp);
}

/* The command line into a: -1 to go on, else the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
	    {"compress", required_argument, NULL, 'z'},
	    {"help", no_argument, NULL, 'h'},
	    {"op", required_argument, NULL, OPT_OP},
	    {"output", required_argument, NULL, 'o'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"threads", required_argument, NULL, 'j'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0}};
	int c, e;

	a->out = "-";
	a->op = &cg_reduce_ops[0];
	a->comp = CG_COMPRESS_NONE;
	a->threads = 0;
	while ((c = getopt_long(argc, argv, "hj:o:qVz:", opts, NULL)) != -1) {
		e = 0;
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'j':
			e = cg_parse_i64("--threads", optarg, 0, 4096,
			                 &a->threads);
			break;
		case 'o':
			a->out = optarg;
			break;
		case 'q':
			break;
		case 'V':
			printf("%s (cg) %s\n", prog, CG_VERSION);
			return 0;
		case 'z':
			e = cg_compress_parse(optarg, &a->comp);
			break;
		case OPT_OP:
			if ((a->op = cg_reduce_op_find(optarg)) == NULL) {
				cg_errprefix("--op");
				e = 1;
			}
			break;
		default:
			return cg_usage_error(prog, synopsis, NULL);
		}
		if (e)
			return cg_usage_error(prog, synopsis, cg_errmsg());
	}
	return -1;
}

/* Read path into r; 1 (reported on stderr) if it fails. */
static int
add_one(struct cg_reducer *r, const char *path, int *stdin_used)
{
	struct cg_update *u;

	if (strcmp(path, "-") == 0 && (*stdin_used)++) {
		fprintf(stderr, "%s: standard input named twice\n", prog);
		return 1;
	}
	if ((u = cg_update_read(path)) == NULL || cg_reducer_add(r, u) != 0) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		return 1;
	}
	return 0;
}

/* Every input named on the command line into r; the failures counted. */
static int
add_all(struct cg_reducer *r, char **names, int n)
{
	int errors = 0, stdin_used = 0;

	if (n == 0)
		return add_one(r, "-", &stdin_used);
	for (int i = 0; i < n; i++) {
		glob_t g;
		/* A pattern the shell left alone (quoted, or for a remote
		 * inbox) is expanded here; a plain name is taken as is. */
		if (strpbrk(names[i], "*?[") && access(names[i], F_OK) != 0 &&
		    glob(names[i], 0, NULL, &g) == 0) {
			for (size_t j = 0; j < g.gl_pathc; j++)
				errors +=
				    add_one(r, g.gl_pathv[j], &stdin_used);
			globfree(&g);
		} else {
			errors += add_one(r, names[i], &stdin_used);
		}
	}
	return errors;
}

int
main(int argc, char **argv)
{
	struct args a;
	struct cg_reducer r;
	struct cg_file *f = NULL;
	int rc = parse(argc, argv, &a);

	if (rc >= 0)
		return rc;
	cg_set_threads((int)a.threads);
	cg_reducer_init(&r, a.op);
	rc = 1;
	if (add_all(&r, argv + optind, argc - optind) != 0)
		goto out;
	if ((f = cg_reducer_finish(&r)) == NULL ||
	    cg_file_write(f, a.out, a.comp) != 0) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		goto out;
	}
	rc = 0;
out:
	cg_file_free(f);
	cg_reducer_free(&r);
	return rc;
}
