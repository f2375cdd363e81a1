/*
 * fuzz_safetensors.c - libFuzzer target: a safetensors file.
 *
 * The input goes to cg_safetensors_read_mem, as cg-convert and
 * cg-inspect read one (header length, JSON header, dtypes, shapes,
 * offsets tiling the buffer, a cg manifest in __metadata__); a file that
 * passes is summed up as cg-inspect does and goes on to the reader of its
 * kind.
 */
#include "file/safetensors.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cg_file *f = cg_safetensors_read_mem(data, size, "fuzz");

	if (f) {
		fuzz_inspect(f);
		fuzz_use_file(f);
	}
	return 0;
}
