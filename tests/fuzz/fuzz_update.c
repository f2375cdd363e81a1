/*
 * fuzz_update.c - libFuzzer target: a gradient or delta and its codec.
 *
 * The input is a manifest, a NUL and the tensors' bytes (fuzz.h:
 * fuzz_cg_file), made into a cg file with the right digests and read as
 * cg-reduce reads an update: cg_file_read_mem, then cg_update_from_file
 * (the update codec table of ucodec.c: layout, index lists, scales,
 * factors) and every view decoded.  Files of other kinds go to their
 * own readers.
 */
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_buf b;
	struct cg_file *f;

	fuzz_cg_file(data, size, &b);
	if ((f = cg_file_read_mem(b.p, b.len, "fuzz")) != NULL) {
		int model = strcmp(cg_file_kind(f), "model") == 0;
		fuzz_use_file(f);
		if (model)
			fuzz_infer(b.p, b.len);
	}
	free(b.p);
	return 0;
}
