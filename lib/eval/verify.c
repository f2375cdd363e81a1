/*
 * eval/verify.c - whether a cg file is one every reader of its kind takes.
 *
 * One row per kind the format defines (cg_kind_known), each naming the
 * check of the module that owns the kind; that module's readers run the
 * same check, so --verify and the readers cannot drift apart.  A kind
 * without a row is refused: a new kind needs its rules here before
 * anything can verify a file of it.
 */
#include <stdio.h>
#include <string.h>

#include "data/shard.h"
#include "eval/verify.h"
#include "exchange/update.h"
#include "file/format.h"
#include "file/sign.h"
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

int
cg_verify_path(FILE *out, const char *path, const char *name)
{
	const struct cg_format *fmt;
	struct cg_file *f = cg_read_any(path, &fmt);
	char fp[65];

	if (f == NULL)
		return -1;
	if (fmt != &cg_format_cg) {
		/* well formed, but nothing in it can prove it unaltered */
		cg_file_free(f);
		return cg_seterr("%s: a %s file: no digests to verify", name,
		                 fmt->name);
	}
	/* and what its kind's readers check: "OK" means they take it */
	if (cg_verify_file(f) != 0) {
		cg_errprefix(name);
		cg_file_free(f);
		return -1;
	}
	if (out && !f->is_signed)
		fprintf(out, "%s: OK\n", name);
	else if (out) {
		cg_key_fingerprint(fp, f->signer);
		fprintf(out, "%s: OK, signed by %s (%s)\n", name, fp,
		        cg_trust_active() > 0 && cg_trusted(f->signer)
		            ? "trusted"
		            : "not in the trust list");
	}
	cg_file_free(f);
	return 0;
}
