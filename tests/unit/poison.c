/*
 * poison.c - a worker's update changed as a broken or hostile worker
 * would send it, for the shell tests and bench/poison.sh.
 *
 * usage: poison HOW IN OUT   (OUT "-": stdout)
 *
 * HOW is scale:X (every value times X: 1e6 for an update blown up, -1
 * for one sign-flipped), nan (every value a nan: a worker whose training
 * diverged) or nan:I (element I of the whole update alone, its tensors
 * counted in order).  IN is a dense update, every tensor f32, as
 * cg-train-step emits one without --codec.
 *
 * The copy is a valid file: cg_file_write makes its digests again, so
 * that what is wrong with it is its numbers alone, which a reducer can
 * only catch by looking at them.  (It is unsigned: a hostile worker
 * signs it with its own key, which a trust list accepts all the same.)
 * This is a tool of the tests, built with them and never installed,
 * rather than an option of an installed program: no honest worker wants
 * to send such an update, and an option that does it could be left on.
 * Exit 0 on success, 1 on failure, 2 on a usage error.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cg.h"

enum how { SCALE, NAN_ALL, NAN_ONE };

/* f's numbers changed as h and x say; 0, or -1 with a message. */
static int
poison(struct cg_file *f, enum how h, double x)
{
	uint64_t at = 0;
	const char *kind = cg_file_kind(f);

	if (strcmp(kind, "grad") != 0 && strcmp(kind, "delta") != 0)
		return cg_seterr("a %s, not an update", kind);
	if (cJSON_GetObjectItemCaseSensitive(f->manifest, "codec"))
		return cg_seterr("a coded update: dense f32 only");
	for (size_t i = 0; i < f->ntensors; i++)
		if (f->tensors[i]->dtype != CG_F32)
			return cg_seterr("tensor %s: %s, not f32",
			                 f->tensors[i]->name,
			                 cg_dtype_name(f->tensors[i]->dtype));
	for (size_t i = 0; i < f->ntensors; i++) {
		struct cg_tensor *t = f->tensors[i];
		float *v = t->data;
		for (uint64_t j = 0; j < t->nelem; j++, at++)
			if (h == SCALE)
				v[j] = (float)(v[j] * x);
			else if (h == NAN_ALL || at == (uint64_t)x)
				v[j] = NAN;
	}
	if (h == NAN_ONE && (uint64_t)x >= at)
		return cg_seterr("no element %.0f: %llu in all", x,
		                 (unsigned long long)at);
	return 0;
}

int
main(int argc, char **argv)
{
	enum how h;
	double x = 0;
	char *end = NULL;
	struct cg_file *f;

	if (argc != 4)
		goto usage;
	errno = 0;
	if (strncmp(argv[1], "scale:", 6) == 0) {
		h = SCALE;
		x = strtod(argv[1] + 6, &end);
		if (argv[1][6] == '\0' || *end || errno || !isfinite(x))
			goto usage;
	} else if (strcmp(argv[1], "nan") == 0) {
		h = NAN_ALL;
	} else if (strncmp(argv[1], "nan:", 4) == 0) {
		h = NAN_ONE;
		x = strtod(argv[1] + 4, &end);
		if (argv[1][4] == '\0' || *end || errno || !(x >= 0) ||
		    x > 9e15 || x != floor(x))
			goto usage;
	} else {
		goto usage;
	}
	if ((f = cg_file_read_copy(argv[2])) == NULL) {
		fprintf(stderr, "poison: %s\n", cg_errmsg());
		return 1;
	}
	if (poison(f, h, x) != 0) {
		fprintf(stderr, "poison: %s: %s\n", argv[2], cg_errmsg());
		cg_file_free(f);
		return 1;
	}
	if (cg_file_write(f, argv[3], CG_COMPRESS_NONE) != 0) {
		fprintf(stderr, "poison: %s\n", cg_errmsg());
		cg_file_free(f);
		return 1;
	}
	cg_file_free(f);
	return 0;
usage:
	fputs("usage: poison scale:X|nan|nan:I IN OUT\n", stderr);
	return 2;
}
