/*
 * data/text.h - datasets from text files: one entry per line, fortune
 * files, JSON lines and tab-separated prompts.
 */
#ifndef CG_TEXT_H
#define CG_TEXT_H

#include <stdint.h>

#include "data/dataset.h"

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
	/* Leave the payload in the input: the dataset's fetch reads each
	 * example again when it is wanted (data/dataset.h), decoding a
	 * record from its line again, and its payload bytes are never held
	 * together.  A gzip input is decompressed again for that, standard
	 * input (and a pipe) is copied to a temporary file in $TMPDIR first
	 * (data/reread.h); fortune files are opened again one at a time. */
	int stream;
	/* With stream: compute each payload's hash with hash_seed, which a
	 * hashed split of a streamed dataset needs (dataset.h). */
	int hash;
	uint64_t hash_seed;
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
 * CG_SHARD_MAX_EXAMPLES examples or, read whole (not o->stream), more
 * than cg_max_bytes() of payload.
 * Returns 0 with *out filled (free it with cg_dataset_free), or -1 with
 * *out zeroed and a message naming the file and, for a bad record, its
 * line.
 */
int cg_text_load(const char *path, const struct cg_text_options *o,
                 struct cg_dataset *out);

#endif
