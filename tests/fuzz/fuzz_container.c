/*
 * fuzz_container.c - libFuzzer target: the bytes of a cg file, as every
 * program reads one.
 *
 * The input goes through cg_file_read_mem (the tar container, gzip and
 * zstd filters, the manifest's format, kind and tensor table, digests,
 * the codecs' block checks, a signature member); a file that passes is
 * summed up as cg-inspect does (table and JSON, with statistics) and goes
 * on to the reader of its kind: a shard, an update and its codec, a
 * model (also as cg-eval reads one), a worker's state.  Digests are
 * checked as they are for any file, so changes inside members stop
 * there; fuzz_shard and fuzz_update go past them.
 */
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cg_file *f = cg_file_read_mem(data, size, "fuzz");

	if (f) {
		int model = strcmp(cg_file_kind(f), "model") == 0;
		fuzz_inspect(f);
		fuzz_use_file(f);
		if (model)
			fuzz_infer(data, size);
	}
	return 0;
}
