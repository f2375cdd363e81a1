/*
 * data/split.h - splitting a dataset into weighted shards, and writing each
 * shard as a cg file of kind "data" (cg-shard's side).
 */
#ifndef CG_SPLIT_H
#define CG_SPLIT_H

#include <stdint.h>
#include <stdio.h>

#include "data/dataset.h"

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

/*
 * A table of a split's files on fp, for people: a header "shard examples
 * path", then a row for each of paths [n + 1] (cg_split_paths) that is not
 * NULL, the holdout's shard named "holdout".  Write errors are fp's
 * (ferror).
 */
void cg_split_table(FILE *fp, const struct cg_dataset *d, const int *assign,
                    char *const *paths, uint64_t n);
/*
 * The file at path of shard shard (-1: the holdout) as one JSON object:
 * "path", "shard", "holdout", "examples" and "counts", each condition's
 * count by name.  A new object the caller frees, or NULL when out of
 * memory.
 */
struct cJSON *cg_split_json(const struct cg_dataset *d, const int *assign,
                            int shard, const char *path);

/* ------------------------------------------------------- shards on disk */

/*
 * Build the cg file of one shard (shard -1: the holdout): the examples with
 * assign[i] == shard in input order, tensors "cond" u32 [N], "index" u64
 * [N], "offset" u64 [N+1], "payload" u8 [bytes], and "prompt_len" u32 [N]
 * if d->prompt_len is set (in every shard of the split, so that all share
 * one layout), and a manifest recording the vocabulary, payload kind
 * ("image" with an "image" shape object, or "text"), and split s.
 * Returns a new file the caller frees with cg_file_free, or NULL.
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
 * The files of a split into n shards: paths[i] is PREFIX-I.cgd for shard
 * i (prefix "-": "-", standard output, for each), paths[n] the holdout
 * or NULL without one.  Returns a new array of n + 1 (free it with
 * cg_split_paths_free), or NULL with a message: out of memory, or
 * "HOLDOUT: both a shard and the holdout" where one path is both.
 */
char **cg_split_paths(const char *prefix, uint64_t n, const char *holdout);
/* Free paths [n + 1] and its strings; paths may be NULL. */
void cg_split_paths_free(char **paths, uint64_t n);

/*
 * Write the shards of split s, shard i to paths[i], then the holdout to
 * paths[s->nshards] unless it is NULL (each as cg_shard_write does), and
 * after each of the nshards + 1, done(ctx, k, nshards + 1) with k the
 * count handled so far, unless done is NULL (a progress line).  All or
 * nothing: on a failure the files this call wrote before are removed (not
 * standard output), so that no partial set is left.  Returns 0, or -1
 * with the failing file's message.
 */
int cg_split_write(const struct cg_dataset *d, const int *assign,
                   const struct cg_split *s, char *const *paths,
                   enum cg_compress c, void (*done)(void *ctx, int k, int n),
                   void *ctx);

#endif
