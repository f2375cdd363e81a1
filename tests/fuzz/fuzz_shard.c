/*
 * fuzz_shard.c - libFuzzer target: a data shard's manifest and tensors.
 *
 * The input is a manifest, a NUL and the tensors' bytes (fuzz.h:
 * fuzz_cg_file), made into a cg file with the right digests and read as
 * cg-train-step reads a shard: cg_file_read_mem, then cg_shard_from_file
 * (counts, offsets, conditions, prompt lengths, image shapes).  Files of
 * other kinds go to their own readers.
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
