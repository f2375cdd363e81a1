/*
 * cg-reduce - combine many gradients or deltas into one.
 *
 * Inputs are read one after another and folded into one accumulator, so
 * memory does not grow with their number.  The output is a valid input
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

static void
usage(FILE *fp)
{
	fprintf(fp,
		"usage: %s [options] [FILE...]\n"
		"Combine gradients or deltas (- or none: standard input).\n"
		"  -o, --output FILE    where to write (- or a pipe: stdout)\n"
		"      --op NAME        mean (weighted by samples) or sum\n"
		"  -z, --compress ALG   none, gzip or zstd (none)\n"
		"  -j, --threads N      threads (all cores)\n"
		"  -q, --quiet          nothing on stderr but errors\n"
		"  -h, --help, -V, --version\n",
		prog);
}

static int
bad_usage(const char *msg)
{
	return cg_usage_error(prog, "[options] [FILE...]", msg);
}

static int
add_one(struct cg_reducer *r, const char *path, int *stdin_used)
{
	struct cg_file *f;
	const char *name = strcmp(path, "-") == 0 ? "(stdin)" : path;

	if (strcmp(path, "-") == 0) {
		if ((*stdin_used)++) {
			fprintf(stderr, "%s: standard input named twice\n",
				prog);
			return -1;
		}
	}
	if ((f = cg_file_read(path)) == NULL) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		return -1;
	}
	if (cg_reducer_add(r, f) != 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, name, cg_errmsg());
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"compress", required_argument, NULL, 'z'},
	    {"help", no_argument, NULL, 'h'},
	    {"op", required_argument, NULL, 1},
	    {"output", required_argument, NULL, 'o'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"threads", required_argument, NULL, 'j'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0}};
	const char *out = "-";
	enum cg_reduce_op op = CG_REDUCE_MEAN;
	enum cg_compress comp = CG_COMPRESS_NONE;
	struct cg_reducer r;
	struct cg_file *f = NULL;
	long long threads = 0;
	int c, errors = 0, stdin_used = 0;

	while ((c = getopt_long(argc, argv, "hj:o:qVz:", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'j':
			if (cg_parse_i64("--threads", optarg, 0, 4096,
					 &threads) != 0)
				return bad_usage(cg_errmsg());
			break;
		case 'o':
			out = optarg;
			break;
		case 'q':
			break;
		case 'V':
			printf("%s (cg) %s\n", prog, CG_VERSION);
			return 0;
		case 'z':
			if (cg_compress_parse(optarg, &comp) != 0)
				return bad_usage(cg_errmsg());
			break;
		case 1:
			if (strcmp(optarg, "mean") == 0)
				op = CG_REDUCE_MEAN;
			else if (strcmp(optarg, "sum") == 0)
				op = CG_REDUCE_SUM;
			else
				return bad_usage("--op: not mean or sum");
			break;
		default:
			return bad_usage(NULL);
		}
	}
	cg_set_threads((int)threads);
	cg_reducer_init(&r, op);
	if (optind == argc)
		errors += add_one(&r, "-", &stdin_used) != 0;
	for (int i = optind; i < argc; i++) {
		glob_t g;
		/* A pattern the shell left alone (quoted, or for a remote
		 * inbox) is expanded here; a plain name is taken as is. */
		if (strpbrk(argv[i], "*?[") && access(argv[i], F_OK) != 0 &&
		    glob(argv[i], 0, NULL, &g) == 0) {
			for (size_t j = 0; j < g.gl_pathc; j++)
				errors += add_one(&r, g.gl_pathv[j],
						  &stdin_used) != 0;
			globfree(&g);
		} else {
			errors += add_one(&r, argv[i], &stdin_used) != 0;
		}
	}
	if (errors) {
		cg_reducer_free(&r);
		return 1;
	}
	if ((f = cg_reducer_finish(&r)) == NULL ||
	    cg_file_write(f, out, comp) != 0) {
		fprintf(stderr, "%s: %s\n", prog, cg_errmsg());
		cg_file_free(f);
		cg_reducer_free(&r);
		return 1;
	}
	cg_file_free(f);
	cg_reducer_free(&r);
	return 0;
}
