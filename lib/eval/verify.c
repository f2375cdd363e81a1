/*
 * eval/verify.c - whether a cg file is one every reader of its kind takes.
 *
 * One row per kind the format defines (cg_kind_known), each naming the
 * check of the module that owns the kind; that module's readers run the
 * same check, so --verify and the readers cannot drift apart.  A kind
 * without a row is refused: a new kind needs its rules here before
 * anything can verify a file of it.
 */
#include <string.h>

#include "data/shard.h"
#include "eval/verify.h"
#include "exchange/update.h"
#include "model/model.h"
#include "train/state.h"

static const struct {
	const char *kind;
	int (*check)(const struct cg_file *f);
} kinds[] = {
    {"model", cg_model_file_check},  {"grad", cg_update_file_check},
    {"delta", cg_update_file_check}, {"data", cg_shard_file_check},
    {"state", cg_state_file_check},
};

int
cg_verify_file(const struct cg_file *f)
{
	const char *kind = cg_file_kind(f);

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].kind, kind) == 0)
			return kinds[i].check(f);
	return cg_seterr("cg.json: no rules for kind '%.32s'", kind);
}
