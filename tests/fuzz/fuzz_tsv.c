/*
 * fuzz_tsv.c - libFuzzer target: a TSV text dataset (cond<TAB>text).
 *
 * The input is the file (plain or gzip), given to cg_text_load through a
 * memfd (fuzz.h) with the format named, as cg-shard --format tsv
 * reads it: once with the default entry limit and, if that loads, once
 * with a small one and a limit on the examples; then streamed, each
 * record fetched again.
 */
#include "data/dataset.h"
#include "data/text.h"
#include "fuzz.h"

#define FORMAT CG_TEXT_TSV

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cg_text_options o = {.format = FORMAT};
	struct cg_dataset d;
	char path[32];

	fuzz_memfd(0, data, size, path);
	if (cg_text_load(path, &o, &d) != 0)
		return 0;
	cg_dataset_free(&d);
	o.max_entry = 7;
	o.limit = 2;
	if (cg_text_load(path, &o, &d) == 0)
		cg_dataset_free(&d);
	/* streamed: every record decoded again from the file */
	o.max_entry = 0;
	o.limit = 0;
	o.stream = 1;
	if (cg_text_load(path, &o, &d) == 0) {
		uint8_t *buf = malloc(d.offset[d.n] + 1);
		for (uint64_t i = 0; buf && i < d.n; i++)
			if (d.fetch(d.fetch_ctx, i, buf) != 0)
				abort(); /* nothing changed the file */
		free(buf);
		cg_dataset_free(&d);
	}
	return 0;
}
