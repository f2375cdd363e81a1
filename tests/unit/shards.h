/*
 * shards.h - small shards built in memory for the unit tests: images
 * whose pixels run through every byte value, or texts given, with example
 * i of condition i % nconds, the conditions named "a", "b", "c", ...
 *
 * Include after check.h.
 */
#ifndef CG_TEST_SHARDS_H
#define CG_TEST_SHARDS_H

#include <string.h>

#include "data/dataset.h"
#include "data/shard.h"
#include "data/split.h"

/* d's examples of conditions i % nconds (at most 8) made a shard named
 * name; d freed. */
static inline struct cg_shard *
shard_of(struct cg_dataset *d, int nconds, const char *name)
{
	static const char *const names[] = {"a", "b", "c", "d",
	                                    "e", "f", "g", "h"};
	struct cg_split sp = {CG_SPLIT_CONTIGUOUS, 1, NULL, 0, 0};
	int *assign = xcalloc(d->n, sizeof(int));
	struct cg_file *f;
	struct cg_shard *s;

	d->cond = xcalloc(d->n, sizeof(uint32_t));
	d->index = xcalloc(d->n, sizeof(uint64_t));
	for (uint64_t i = 0; i < d->n; i++) {
		d->cond[i] = (uint32_t)(i % (uint64_t)nconds);
		d->index[i] = i;
	}
	if (cg_dataset_set_conditions(d, names, (size_t)nconds) != 0)
		die("cg_dataset_set_conditions");
	f = cg_shard_build(d, assign, 0, &sp);
	if ((s = f ? cg_shard_from_file(f, name) : NULL) == NULL)
		die(name);
	cg_dataset_free(d);
	free(assign);
	return s;
}

/*
 * n images of h x w x 1 pixels over three conditions: pixel j of image i
 * is (37 i + 101 j) mod 256, then edit (unless NULL) may change them.
 */
static inline struct cg_shard *
image_shard(int n, int h, int w, const char *name,
            void (*edit)(struct cg_dataset *))
{
	struct cg_dataset d;
	const int px = h * w;

	memset(&d, 0, sizeof(d));
	d.kind = CG_PAYLOAD_IMAGE;
	d.n = (uint64_t)n;
	d.height = (uint32_t)h;
	d.width = (uint32_t)w;
	d.channels = 1;
	d.offset = xcalloc((size_t)n + 1, sizeof(uint64_t));
	d.payload = xcalloc((size_t)n * px, 1);
	for (int i = 0; i < n; i++) {
		d.offset[i + 1] = (uint64_t)(i + 1) * px;
		for (int j = 0; j < px; j++)
			d.payload[i * px + j] =
			    (uint8_t)((i * 37 + j * 101) % 256);
	}
	if (edit)
		edit(&d);
	return shard_of(&d, 3, name);
}

/* The texts [n] over nconds conditions. */
static inline struct cg_shard *
text_shard(const char *const *texts, int n, int nconds, const char *name)
{
	struct cg_dataset d;
	uint64_t bytes = 0;

	memset(&d, 0, sizeof(d));
	d.kind = CG_PAYLOAD_TEXT;
	d.n = (uint64_t)n;
	d.offset = xcalloc((size_t)n + 1, sizeof(uint64_t));
	for (int i = 0; i < n; i++)
		bytes += strlen(texts[i]);
	d.payload = xcalloc(bytes, 1);
	bytes = 0;
	for (int i = 0; i < n; i++) {
		d.offset[i] = bytes;
		memcpy(d.payload + bytes, texts[i], strlen(texts[i]));
		bytes += strlen(texts[i]);
	}
	d.offset[n] = bytes;
	return shard_of(&d, nconds, name);
}

#endif
