/*
 * eval/verify.h - whether a cg file is one every reader of its kind takes.
 *
 * The container (cg.h) checks what every cg file must be: its archive,
 * sizes, digests, dtypes, signature and a kind the format defines.  Each
 * kind then has rules of its own, written once in the module that owns
 * the kind and applied by its readers: an update's codec and layout
 * (update.h), a model's layout (model.h), a shard's offsets and
 * conditions (shard.h), a state's record (state.h).  cg_verify_file runs
 * the rules of f's kind, so that a file cg-inspect --verify passes is one
 * every reader of that kind takes, and a refusal says what a reader
 * would have said.
 */
#ifndef CG_VERIFY_H
#define CG_VERIFY_H

#include <stdio.h>

#include "cg.h"

/*
 * The rules of f's kind, f left as it is.  What a reader checks against
 * other files (an update's base model, the inputs of one reduction) or
 * against a call (a state's shard and model) is not here: no file alone
 * can say it.  Returns 0, or -1 with a message that does not name the
 * file.
 */
int cg_verify_file(const struct cg_file *f);

/*
 * cg-inspect --verify of one file: path ("-": standard input) read in
 * whichever format it is (cg_read_any), refused unless a cg file (no
 * other format has digests to verify), then cg_verify_file.  On
 * success, and unless out is NULL, "NAME: OK" on out, and where the
 * file is signed ", signed by FINGERPRINT (trusted)" or "(not in the
 * trust list)"; name is path as messages say it.  Returns 0, or -1 with
 * a message naming the file.
 */
int cg_verify_path(FILE *out, const char *path, const char *name);

#endif
