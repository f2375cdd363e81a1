/*
 * cgls.c - list the tensors of cg files, through libcg.
 *
 * usage: cgls FILE...
 *
 * For each file: a line "FILE: KIND, N tensors", then one line per
 * tensor, "NAME DTYPE SHAPE MEAN", the shape as 784x64 and the mean of
 * its values (decoded from any dtype that holds numbers; "-" where
 * none does).  A file that cannot be read is one line on stderr; the
 * status is then 1, after the other files.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cg/cg.h>

/* The mean of tensor i of f into *mean: 0, or -1 (no numbers). */
static int
tensor_mean(const struct cg_file *f, size_t i, double *mean)
{
	uint64_t shape[8], n = 1;
	int ndim = cg_file_tensor_shape(f, i, shape, 8);
	float *v;
	double sum = 0;

	for (int d = 0; d < ndim; d++)
		n *= shape[d];
	if (ndim < 0 || n == 0 || n > ((size_t)1 << 32) ||
	    (v = malloc(n * sizeof(*v))) == NULL)
		return -1;
	if (cg_file_tensor_f32(f, i, v, n) != 0) {
		free(v);
		return -1;
	}
	for (uint64_t k = 0; k < n; k++)
		sum += v[k];
	free(v);
	*mean = sum / (double)n;
	return 0;
}

static int
list(const char *path)
{
	struct cg_file *f = cg_file_read(path);
	size_t nt;

	if (f == NULL) {
		fprintf(stderr, "cgls: %s\n", cg_errmsg());
		return 1;
	}
	nt = cg_file_ntensors(f);
	printf("%s: %s, %zu tensors\n", path, cg_file_kind(f), nt);
	for (size_t i = 0; i < nt; i++) {
		uint64_t shape[8];
		int ndim = cg_file_tensor_shape(f, i, shape, 8);
		double mean;

		printf("%s %s ", cg_file_tensor_name(f, i),
		       cg_file_tensor_dtype(f, i));
		for (int d = 0; d < ndim; d++)
			printf("%s%llu", d ? "x" : "",
			       (unsigned long long)shape[d]);
		if (tensor_mean(f, i, &mean) == 0)
			printf(" %.6g\n", mean);
		else
			printf(" -\n");
	}
	cg_file_free(f);
	return 0;
}

int
main(int argc, char **argv)
{
	int status = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: cgls FILE...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++)
		status |= list(argv[i]);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		perror("cgls: standard output");
		return 1;
	}
	return status;
}
