/*
 * data/dataset.h - datasets in memory: N examples, each a condition (an
 * index into a vocabulary of condition names) and a byte payload, an
 * image's pixels or a text's bytes (a text may begin with a prompt).
 * Datasets come from IDX files (data/idx.h) or text files (data/text.h);
 * cg_split_assign (data/split.h) decides which shard each example goes to,
 * cg_shard_write stores one shard as a cg file of kind "data", and
 * cg_shard_open (data/shard.h) reads one back.
 *
 * Limits: at most CG_SHARD_MAX_EXAMPLES examples (the assignment array is
 * int), CG_SHARD_MAX_SHARDS shards, CG_SHARD_MAX_CONDITIONS names of at most
 * CG_SHARD_MAX_NAME bytes.  Tensors are host words in memory and
 * little-endian in the file (the container turns them around).
 */
#ifndef CG_DATASET_H
#define CG_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"

#define CG_SHARD_MAX_EXAMPLES ((uint64_t)1 << 31)
#define CG_SHARD_MAX_SHARDS 65536
#define CG_SHARD_MAX_CONDITIONS 65536
#define CG_SHARD_MAX_NAME 1024
#define CG_SHARD_EXT ".cgd"



enum cg_payload { CG_PAYLOAD_IMAGE, CG_PAYLOAD_TEXT };

/*
 * A dataset in memory.  Every array is owned by the struct and released by
 * cg_dataset_free().  Example i has condition cond[i] and the payload bytes
 * payload[offset[i] .. offset[i+1]); index[i] is its position in the input
 * it was read from.  A text example with a prompt stores the prompt's
 * prompt_len[i] bytes first and its text after them; prompt_len is NULL
 * when no example has a prompt (and always for images).
 *
 * A dataset larger than memory leaves its payload where it was read
 * from: payload is NULL, and fetch(fetch_ctx, i, out) reads example i's
 * offset[i+1] - offset[i] bytes again into out (0, or -1 with a
 * message: the input changed or cannot be read); cg_dataset_free calls
 * fetch_free(fetch_ctx).  Its loader computes hash[i], cg_payload_hash
 * of each payload with hash_seed, where a split asks for it (hashed),
 * since the bytes are not at hand then; hash is NULL otherwise.
 */
struct cg_dataset {
	uint64_t n;
	uint32_t *cond;       /* [n], each < nconditions */
	uint64_t *index;      /* [n] */
	uint64_t *offset;     /* [n + 1], offset[0] = 0, non-decreasing */
	uint8_t *payload;     /* [offset[n]] */
	uint32_t *prompt_len; /* [n], each <= its payload's length, or NULL */
	char **conditions;    /* [nconditions] distinct non-empty names */
	size_t nconditions;
	enum cg_payload kind;
	uint32_t height, width, channels; /* images: every payload is h*w*c */
	int (*fetch)(void *ctx, uint64_t i, uint8_t *out);
	void (*fetch_free)(void *ctx);
	void *fetch_ctx;
	uint64_t *hash; /* [n], or NULL */
	uint64_t hash_seed;
};

/*
 * A seeded 64-bit hash of p [n] (FNV-1a, then a splitmix64 finalizer so
 * that every output bit depends on every input bit): what a hashed split
 * assigns an example by.
 */
uint64_t cg_payload_hash(const uint8_t *p, uint64_t n, uint64_t seed);

/* Release the arrays of d and zero it; d may be NULL. */
void cg_dataset_free(struct cg_dataset *d);

/* The ten class names of Fashion-MNIST, in label order. */
extern const char *const cg_fashion_mnist_names[10];

/*
 * Why name cannot be a condition name (a static string: empty, too long,
 * a control character, not valid UTF-8), or NULL if it can.
 */
const char *cg_condition_name_check(const char *name);

/* The first name that occurs twice in names[n], or NULL; *err is -1 when
 * out of memory (with a message), else 0. */
const char *cg_condition_name_twice(const char *const *names, size_t n,
                                    int *err);

/*
 * Replace the vocabulary of d by a copy of names[0..n).  Names must pass
 * cg_condition_name_check and be distinct, and every condition in d must be
 * below n.  Returns 0, or -1 with d unchanged.
 */
int cg_dataset_set_conditions(struct cg_dataset *d, const char *const *names,
                              size_t n);

/*
 * Read a vocabulary from a text file, one name per line (a final newline
 * and CR of CRLF endings are ignored), and set it as cg_dataset_set_
 * conditions does.  Returns 0, or -1 with a message naming the file and
 * line.
 */
int cg_dataset_read_conditions(struct cg_dataset *d, const char *path);

#endif
