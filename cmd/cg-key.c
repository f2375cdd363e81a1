/*
 * cg-key - make an Ed25519 key pair for signing cg files (or an X25519
 * pair for masking updates), or print a key's fingerprint.
 *
 * "cg-key -o NAME" writes the private key NAME (PEM PKCS#8, mode 0600)
 * and the public key NAME.pub (one line: "ed25519 HEX COMMENT"), which
 * is what a trust list holds; with --x25519 the pair masks updates for
 * secure aggregation (cg-train-step --mask), its .pub line "x25519 HEX
 * COMMENT" what a peer list holds; the same pair seals files
 * (--encrypt-to NAME.pub, --seal-key NAME).  "cg-key -l FILE" prints
 * the fingerprint of each key of a private key, a .pub file or a trust
 * list: the SHA-256 of the 32 bytes of the public key, in hex, then the
 * comment.
 * lib/file/sign.c does the work.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "file/sign.h"

enum { OPT_LIST = 'l', OPT_X25519 = CG_KEY_OWN };

struct args {
	const char *out, *comment;
	int force, list, x25519;
	char **files;
	int nfiles;
};

#define CG_CTX struct args
static const struct cg_opt opts[] = {
    {"comment", 'C', "TEXT", "the comment of the public key (cg-key)",
     CG_OPT_STR(comment)},
    {"force", 'f', NULL, "replace NAME and NAME.pub where they exist",
     CG_OPT_FLAG(force)},
    {"list", OPT_LIST, NULL, "print the fingerprint of each FILE",
     CG_OPT_FLAG(list)},
    {"output", 'o', "NAME", "write the key pair NAME and NAME.pub",
     CG_OPT_STR(out)},
    {"x25519", OPT_X25519, NULL,
     "an X25519 pair, for masking (cg-train-step --mask) and\n"
     "sealing (--encrypt-to, --seal-key)",
     CG_OPT_FLAG(x25519)},
    CG_OPT_HELP,
    CG_OPT_VERSION,
    {0},
};

static const struct cg_cli cli = {
    .name = "cg-key",
    .synopsis = "[-f] [--x25519] [-C TEXT] -o NAME\n"
                "-l FILE...",
    .about =
        "Make an Ed25519 key pair for --sign and --trust: the private\n"
        "key NAME (mode 0600) and the public key NAME.pub; with --x25519,\n"
        "an X25519 pair that masks updates for secure aggregation and\n"
        "seals files (--encrypt-to, --seal-key).  With -l,\n"
        "print the fingerprint of each key of each FILE (a private key,\n"
        "a .pub file or a trust list): the SHA-256 of the public key in\n"
        "hex, and its comment.",
    .opts = opts,
    .epilog = "Exit status: 0 success, 1 failure, 2 usage error.",
};

/* The command line into a, checked; CG_CONTINUE or the exit status. */
static int
parse(int argc, char **argv, struct args *a)
{
	int ind, rc;

	if ((rc = cg_getopt_all(&cli, argc, argv, NULL, a, &ind)) !=
	    CG_CONTINUE)
		return rc;
	a->files = argv + ind;
	a->nfiles = argc - ind;
	if (a->list && a->x25519)
		return cg_usage("-l lists keys of both kinds: no --x25519");
	if (a->list && a->out)
		return cg_usage("-l and -o cannot be combined");
	if (!a->list && a->out == NULL)
		return cg_usage("-o NAME or -l FILE is needed");
	if (a->list && a->nfiles == 0)
		return cg_usage("-l needs a key file");
	if (!a->list && a->nfiles > 0)
		return cg_usage("unexpected operand '%s'", a->files[0]);
	if (a->out && (strcmp(a->out, "-") == 0 || a->out[0] == '\0'))
		return cg_usage("-o: a key pair needs a file name");
	if (a->comment && strchr(a->comment, '\n'))
		return cg_usage("-C: a comment of one line");
	return CG_CONTINUE;
}

/* "FINGERPRINT COMMENT" of one key. */
static int
print_key(void *ctx, const unsigned char pub[32], const char *comment)
{
	char fp[65];

	cg_key_fingerprint(fp, pub);
	printf("%s %s\n", fp, *comment ? comment : (const char *)ctx);
	return 0;
}

/* Each key of each file (a private key, or a file of .pub lines: a
 * trust list is listed whole); the exit status. */
static int
list(const struct args *a)
{
	int rc = CG_EXIT_OK;

	for (int i = 0; i < a->nfiles; i++)
		if (cg_key_each_alg(a->files[i], CG_KEY_ANY, print_key,
		                    (void *)a->files[i]) != 0)
			rc = cg_fail(NULL);
	return rc;
}

int
main(int argc, char **argv)
{
	struct args a = {.comment = "cg-key"};
	int rc;

	if ((rc = parse(argc, argv, &a)) != CG_CONTINUE)
		return rc;
	if (a.list)
		rc = list(&a);
	else
		rc = cg_key_generate_alg(a.out, a.comment, a.force,
		                         a.x25519 ? CG_KEY_X25519
		                                  : CG_KEY_ED25519) == 0
		         ? CG_EXIT_OK
		         : cg_fail(NULL);
	return cg_finish_stdout(rc);
}
