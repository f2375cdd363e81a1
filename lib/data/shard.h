/*
 * data/shard.h - datasets in memory, how they are split, and data shards on disk.
 *
 * A dataset is N examples, each a condition (an index into a vocabulary of
 * condition names) and a variable-length byte payload: an image's pixels
 * or a text's bytes (a text may begin with a prompt).  Datasets come from
 * IDX files (idx.c) or text files (text.c).  cg_split() decides which shard
 * each example goes to; cg_shard_write() stores one shard as a cg file of
 * kind "data"; cg_shard_open() reads one back and checks every count and
 * offset, so that training code can index it without further checks.  All
 * functions follow cg.h: 0/-1 or NULL with a message in cg_errmsg(),
 * nothing printed.
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
 * it was read from.  A text example with a prompt stores the prompt's
 * prompt_len[i] bytes first and its text after them; prompt_len is NULL
 * when no example has a prompt (and always for images).
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
 * Why name cannot be a condition name (a static string: empty, too long,
 * a control character, not valid UTF-8), or NULL if it can.
 */
const char *cg_condition_name_check(const char *name);

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

/* ----------------------------------------------------------- text input */

enum cg_text_format {
	CG_TEXT_AUTO, /* a directory: fortunes; a file: by its name */
	CG_TEXT_FORTUNES,
	CG_TEXT_JSONL,
	CG_TEXT_TSV
};

#define CG_TEXT_MAX_ENTRY ((uint64_t)1 << 20) /* default cap, bytes */
#define CG_TEXT_MAX_ENTRY_LIMIT ((uint64_t)1 << 30)
/* The condition of JSON Lines records that give a prompt and no "cond". */
#define CG_TEXT_PROMPT_CONDITION "(prompt)"

struct cg_text_options {
	enum cg_text_format format;
	uint64_t max_entry; /* bytes of one example, 1 .. CG_TEXT_MAX_ENTRY_
	                     * LIMIT; 0: CG_TEXT_MAX_ENTRY */
	uint64_t limit;     /* > 0: keep the first limit examples only */
};

/* "auto", "fortunes", "jsonl", "tsv". */
const char *cg_text_format_name(enum cg_text_format f);
/* Parse "fortunes", "jsonl" or "tsv"; -1 with a message otherwise. */
int cg_text_format_parse(const char *name, enum cg_text_format *out);
/*
 * The format a file name says: .jsonl or .json is JSON Lines, .tsv is
 * TSV, each also with .gz after it; CG_TEXT_AUTO if the name says nothing.
 */
enum cg_text_format cg_text_format_guess(const char *path);

/*
 * Load a text dataset (kind CG_PAYLOAD_TEXT) from path:
 *
 * fortunes  a directory of fortune(6) files: each regular file whose name
 *           has no dot (so not *.dat, *.u8, hidden files) is one
 *           condition, named after the file; subdirectories are not read.
 *           Entries are separated by lines holding only "%"; each entry
 *           keeps its bytes but for the newline before the separator (or
 *           before the end of the file), and empty entries are dropped.
 *           A path that is a file is read as one such file.
 * jsonl     one JSON object per line with a string "text" and a string
 *           "cond" or "prompt" or both; other members are ignored.  The
 *           payload is the prompt's bytes, then the text's;
 *           d->prompt_len is set if any record has a prompt, and records
 *           with a prompt but no cond get CG_TEXT_PROMPT_CONDITION.
 * tsv       one "cond<TAB>text" per line; in both fields \n, \t, \r
 *           and \\ stand for newline, tab, carriage return and
 *           backslash, and any other backslash is an error.
 *
 * JSON Lines and TSV may be gzip-compressed and may be "-" for standard
 * input; their empty lines are skipped, as is a UTF-8 byte order mark at
 * the start.  Bytes are kept exactly: NUL bytes and invalid UTF-8 in text
 * are data, but condition names must pass cg_condition_name_check.
 * Examples are in input order (fortunes: files by name, then entries in
 * file order) and index[i] = i.  Conditions are sorted by name (strcmp);
 * for fortunes every file is a condition, even one without entries.
 * An example longer than max_entry bytes is an error, as are more than
 * CG_SHARD_MAX_EXAMPLES examples or more than cg_max_bytes() of payload.
 * Returns 0 with *out filled (free it with cg_dataset_free), or -1 with
 * *out zeroed and a message naming the file and, for a bad record, its
 * line.
 */
int cg_text_load(const char *path, const struct cg_text_options *o,
                 struct cg_dataset *out);

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
 * A data shard read back and validated: every pointer is into file's
 * tensors and manifest, valid until cg_shard_free().  Guarantees: offset[0]
 * is 0, offsets never decrease and offset[n] == payload_bytes; every cond
 * is below nconditions; index strictly increases; for images every payload
 * is height * width * channels bytes; prompt_len, present in text shards
 * only, never exceeds its example's payload length.
 */
struct cg_shard {
	struct cg_file *file;
	uint64_t n;
	const uint32_t *cond;       /* [n] */
	const uint64_t *index;      /* [n] */
	const uint64_t *offset;     /* [n + 1] */
	const uint8_t *payload;     /* [payload_bytes] */
	const uint32_t *prompt_len; /* [n], or NULL: no prompts */
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

/*
 * Whether f is a data shard cg_shard_from_file takes (the same checks of
 * its manifest and of every offset, condition and index), f left as it
 * is: what --verify asks of a shard.  Returns 0, or -1 with a message
 * that does not name the file.
 */
int cg_shard_file_check(const struct cg_file *f);

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
