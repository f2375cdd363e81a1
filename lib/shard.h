/*
 * shard.h - datasets in memory, how they are split, and data shards on disk.
 *
 * A dataset is N examples, each a condition (an index into a vocabulary of
 * condition names) and a variable-length byte payload: an image's pixels
 * now, a text's bytes later.  cg_split() decides which shard each example
 * goes to; cg_shard_write() stores one shard as a cg file of kind "data";
 * cg_shard_open() reads one back and checks every count and offset, so that
 * training code can index it without further checks.  All functions follow
 * cg.h: 0/-1 or NULL with a message in cg_errmsg(), nothing printed.
 *
 * Limits: at most CG_SHARD_MAX_EXAMPLES examples (the assignment array is
 * int), CG_SHARD_MAX_SHARDS shards, CG_SHARD_MAX_CONDITIONS names of at most
 * CG_SHARD_MAX_NAME bytes.  Tensors are stored in host byte order, which
 * the container defines as little-endian.
 */
#ifndef CG_SHARD_H
#define CG_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CG_SHARD_MAX_EXAMPLES ((uint64_t)1 << 31)
#define CG_SHARD_MAX_SHARDS 65536
#define CG_SHARD_MAX_CONDITIONS 65536
#define CG_SHARD_MAX_NAME 1024
#define CG_SHARD_EXT ".cgd"

/* ------------------------------------------------------------- datasets */

enum cg_payload { CG_PAYLOAD_IMAGE, CG_PAYLOAD_TEXT };

/*
 * A dataset in memory.  Every array is owned by the struct and released by
 * cg_dataset_free().  Example i has condition cond[i] and the payload bytes
 * payload[offset[i] .. offset[i+1]); index[i] is its position in the input
 * it was read from.
 */
struct cg_dataset {
	uint64_t n;
	uint32_t *cond;    /* [n], each < nconditions */
	uint64_t *index;   /* [n] */
	uint64_t *offset;  /* [n + 1], offset[0] = 0, non-decreasing */
	uint8_t *payload;  /* [offset[n]] */
	char **conditions; /* [nconditions] distinct non-empty names */
	size_t nconditions;
	enum cg_payload kind;
	uint32_t height, width, channels; /* images: every payload is h*w*c */
};

/* Release the arrays of d and zero it; d may be NULL. */
void cg_dataset_free(struct cg_dataset *d);

/*
 * Load IDX files (as in MNIST): images of type u8 with 3 dimensions
 * (N, H, W) or 4 (N, H, W, C), labels of type u8 with one dimension N.
 * Either file may be gzip-compressed and either (not both) may be "-" for
 * standard input.  limit > 0 keeps the first limit examples only.  Headers
 * are checked against the file size and sane limits before anything is
 * allocated; the label count must equal the image count.  Conditions are
 * named "0", "1", ... up to at least "9" (cg_dataset_set_conditions renames
 * them).  On success *out holds the dataset (the caller frees it with
 * cg_dataset_free) and 0 is returned; on error -1, a message naming the
 * file, and *out zeroed.
 */
int cg_idx_load(const char *images, const char *labels, uint64_t limit,
                struct cg_dataset *out);

/* The ten class names of Fashion-MNIST, in label order. */
extern const char *const cg_fashion_mnist_names[10];

/*
 * Replace the vocabulary of d by a copy of names[0..n).  Names must be
 * non-empty, free of control characters, distinct and at most
 * CG_SHARD_MAX_NAME bytes, and every condition in d must be below n.
 * Returns 0, or -1 with d unchanged.
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

/* ------------------------------------------------------------ splitting */

enum cg_split_strategy {
	CG_SPLIT_CONTIGUOUS,
	CG_SPLIT_ROUNDROBIN,
	CG_SPLIT_RANDOM,
	CG_SPLIT_STRATIFIED,
	CG_SPLIT_HASHED
};

/* "contiguous", "round-robin", "random", "stratified", "hashed". */
const char *cg_split_name(enum cg_split_strategy s);
/* Parse one of those names; -1 with a message if unknown. */
int cg_split_parse(const char *name, enum cg_split_strategy *out);

/*
 * How to split.  weights (NULL: all equal) gives each shard's share; the
 * holdout examples are chosen first, at random and stratified by
 * condition, and the rest are split among the shards:
 *
 * contiguous   shard s takes the next targets[s] examples in input order.
 * round-robin  smooth weighted round robin: shard s's k-th example falls
 *              at the ideal position (k + 1/2) * M / targets[s], ties to the
 *              lower shard; equal shares give 0, 1, ..., N-1, 0, 1, ...
 * random       a seeded Fisher-Yates shuffle, then a contiguous cut.
 * stratified   each condition is apportioned over the shards as evenly as
 *              the weights allow (each count is the floor or ceiling of its
 *              exact share; with equal weights they differ by at most one),
 *              while shard totals still equal targets[]; within a condition
 *              the examples are shuffled with the seed before they are dealt.
 * hashed       a seeded 64-bit hash of the payload bytes picks the shard by
 *              weight ranges, so equal payloads always share a shard (stable
 *              for deduplication) and shares are only approximately weighted.
 *
 * targets[] (see cg_split_targets) are the largest-remainder apportionment
 * of the M non-held-out examples by weight, so each differs from its exact
 * share by less than one.
 */
struct cg_split {
	enum cg_split_strategy strategy;
	int nshards;           /* 1 .. CG_SHARD_MAX_SHARDS */
	const double *weights; /* [nshards] positive, or NULL */
	uint64_t holdout;      /* examples held out, at most n */
	uint64_t seed;
};

/*
 * Largest-remainder apportionment of m items over nshards shares
 * proportional to weights (NULL: equal); ties go to the lower shard.
 * targets[nshards] sums to m.  Returns 0, or -1 on bad weights.
 */
int cg_split_targets(uint64_t m, int nshards, const double *weights,
                     uint64_t *targets);

/*
 * The number of examples a holdout fraction in [0, 1] of n means: n * frac
 * rounded to nearest.
 */
uint64_t cg_split_holdout_count(uint64_t n, double frac);

/*
 * Fill assign[d->n] with each example's shard, 0 .. nshards-1, or -1 for
 * the holdout.  Deterministic: the same dataset and split give the same
 * assignment on every machine.  Returns 0, or -1 with a message (bad
 * weights, too many shards, holdout larger than the data, out of memory).
 */
int cg_split_assign(const struct cg_dataset *d, const struct cg_split *s,
                    int *assign);

/*
 * Count shard's examples per condition into counts[d->nconditions], unless
 * counts is NULL (shard -1 is the holdout).  Returns the shard's total.
 */
uint64_t cg_split_count(const struct cg_dataset *d, const int *assign,
                        int shard, uint64_t *counts);

/* ------------------------------------------------------- shards on disk */

/*
 * Build the cg file of one shard (shard -1: the holdout): the examples with
 * assign[i] == shard in input order, tensors "cond" u32 [N], "index" u64
 * [N], "offset" u64 [N+1], "payload" u8 [bytes], and a manifest recording
 * the vocabulary, payload kind, image shape and split s.  Returns a new
 * file the caller frees with cg_file_free, or NULL.
 */
struct cg_file *cg_shard_build(const struct cg_dataset *d, const int *assign,
                               int shard, const struct cg_split *s);

/*
 * Build one shard as above and write it atomically to path ("-": standard
 * output, refused on a terminal).  Returns 0, or -1 with a message; no
 * file appears under path on error.
 */
int cg_shard_write(const struct cg_dataset *d, const int *assign, int shard,
                   const struct cg_split *s, const char *path,
                   enum cg_compress c);

/*
 * A data shard read back and validated: every pointer is into file's
 * tensors and manifest, valid until cg_shard_free().  Guarantees: offset[0]
 * is 0, offsets never decrease and offset[n] == payload_bytes; every cond
 * is below nconditions; index strictly increases; for images every payload
 * is height * width * channels bytes.
 */
struct cg_shard {
	struct cg_file *file;
	uint64_t n;
	const uint32_t *cond;   /* [n] */
	const uint64_t *index;  /* [n] */
	const uint64_t *offset; /* [n + 1] */
	const uint8_t *payload; /* [payload_bytes] */
	uint64_t payload_bytes;
	const char **conditions; /* [nconditions] */
	size_t nconditions;
	enum cg_payload kind;
	uint32_t height, width, channels; /* images only, else 0 */
	int shard, nshards;               /* shard is -1 for a holdout */
	uint64_t source_examples;         /* examples in the split input */
};

/*
 * Read path ("-": standard input) and validate it as a data shard.
 * Returns a shard the caller frees with cg_shard_free, or NULL with a
 * message naming the file and what is wrong.
 */
struct cg_shard *cg_shard_open(const char *path);

/*
 * Validate an already read file as a data shard.  Takes ownership of f in
 * every case (it is freed on failure).  display names the file in
 * messages.  Returns the shard or NULL.
 */
struct cg_shard *cg_shard_from_file(struct cg_file *f, const char *display);

/* Release s and its file; s may be NULL. */
void cg_shard_free(struct cg_shard *s);

/* Example i's payload (i < s->n); its length into *len. */
static inline const uint8_t *
cg_shard_example(const struct cg_shard *s, uint64_t i, uint64_t *len)
{
	*len = s->offset[i + 1] - s->offset[i];
	return s->payload + s->offset[i];
}

#ifdef __cplusplus
}
#endif
#endif
