/*
 * fuzz_idx.c - libFuzzer target: a pair of IDX files (images, labels).
 *
 * The first 4 bytes of the input (little-endian) say how many of the
 * rest are the images file; the others are the labels file.  Both go to
 * cg_idx_load through memfds (fuzz.h), plain or gzip, once whole and, if that
 * loads, once with a limit on the examples kept; then to cg_idx_stream,
 * whose images are read again, each one.
 */
#include <stdlib.h>

#include "data/dataset.h"
#include "data/idx.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char images[32], labels[32];
	struct cg_dataset d;
	size_t k;

	if (size < 4)
		return 0;
	k = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 |
	    (size_t)data[3] << 24;
	data += 4;
	size -= 4;
	if (k > size)
		k = size;
	fuzz_memfd(0, data, k, images);
	fuzz_memfd(1, data + k, size - k, labels);
	if (cg_idx_load(images, labels, 0, &d) != 0)
		return 0;
	cg_dataset_free(&d);
	if (cg_idx_load(images, labels, 3, &d) == 0)
		cg_dataset_free(&d);
	if (cg_idx_stream(images, labels, 0, &(uint64_t){1}, &d) == 0) {
		uint8_t *px = malloc(d.offset[1] ? d.offset[1] : 1);
		for (uint64_t i = 0; px && i < d.n; i++)
			if (d.fetch(d.fetch_ctx, i, px) != 0)
				abort(); /* the file was read through already */
		free(px);
		cg_dataset_free(&d);
	}
	return 0;
}
