/*
 * file/sign.c - Ed25519 keys, signature members and the trust list (OpenSSL 3).
 *
 * The one place where cg signs and verifies: the container calls
 * cg_sign_member when it writes and cg_sign_check when it reads, and asks
 * cg_trusted about the signer.  A signature covers the bytes of cg.json
 * only; the tensors are bound to it by their SHA-256 digests, which every
 * read checks whether a file is signed or not.  Keys are Ed25519 (RFC
 * 8032, pure: no prehash), so a signature is 64 bytes and a public key 32.
 * Key files of X25519 (RFC 7748), the masking keys of secagg.c, have the
 * same two shapes and are made and listed here too; a trust list holds
 * Ed25519 keys only.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "cg.h"
#include "file/sign.h"

#define PUB_LINE_MAX 1024 /* bytes of one .pub line */
#define TRUST_MAX 65536   /* keys of a trust list */
#define PRIV_MAX 65536    /* bytes of a private key file */

void
cg_key_fingerprint(char out[65], const unsigned char pub[32])
{
	unsigned char d[32];

	cg_sha256(d, pub, 32);
	cg_tohex(out, d, 32);
}

/* ------------------------------------------------------------ key files */

static const char *const alg_names[] = {"ed25519", "x25519"};

const char *
cg_key_alg_name(enum cg_key_alg alg)
{
	return alg == CG_KEY_X25519 ? alg_names[1] : alg_names[0];
}

/*
 * One .pub line s (its newline removed): "ALG HEX [COMMENT]", ALG being
 * want's name (either, for CG_KEY_ANY).  The key into pub and a pointer
 * to the comment (in s) into *comment.  Returns 0 or -1 with a message.
 */
static int
parse_pub_line(char *s, enum cg_key_alg want, unsigned char pub[32],
               const char **comment)
{
	const char *wname = cg_key_alg_name(want);
	char *alg = s, *hex, *rest;

	alg += strspn(alg, " \t");
	hex = alg + strcspn(alg, " \t");
	if (*hex == '\0')
		return cg_seterr("not a public key line (want \"%s HEX "
		                 "COMMENT\")",
		                 wname);
	*hex++ = '\0';
	hex += strspn(hex, " \t");
	rest = hex + strcspn(hex, " \t");
	if (*rest)
		*rest++ = '\0';
	rest += strspn(rest, " \t");
	if (want == CG_KEY_ANY ? strcmp(alg, alg_names[0]) != 0 &&
	                             strcmp(alg, alg_names[1]) != 0
	                       : strcmp(alg, wname) != 0)
		return cg_seterr("key algorithm '%.32s', not %s", alg,
		                 want == CG_KEY_ANY ? "ed25519 or x25519"
		                                    : wname);
	if (cg_unhex(pub, hex, 32, 1) != 0)
		return cg_seterr("public key is not 64 hex digits");
	if (comment)
		*comment = rest;
	return 0;
}

/* The private key of the PEM file at path, of algorithm want (either,
 * for CG_KEY_ANY), or NULL with a message. */
static EVP_PKEY *
read_private(const char *path, enum cg_key_alg want)
{
	FILE *fp = fopen(path, "rb");
	EVP_PKEY *k;
	int id;

	if (fp == NULL) {
		cg_seterr("%s: %s", path, strerror(errno));
		return NULL;
	}
	k = PEM_read_PrivateKey(fp, NULL, NULL, NULL);
	fclose(fp);
	if (k == NULL) {
		cg_seterr("%s: not a private key (PEM PKCS#8)", path);
		return NULL;
	}
	id = EVP_PKEY_get_id(k);
	if (want == CG_KEY_ANY
	        ? id != EVP_PKEY_ED25519 && id != EVP_PKEY_X25519
	        : id != (want == CG_KEY_X25519 ? EVP_PKEY_X25519
	                                       : EVP_PKEY_ED25519)) {
		EVP_PKEY_free(k);
		cg_seterr("%s: not an %s key", path,
		          want == CG_KEY_ANY      ? "Ed25519 or X25519"
		          : want == CG_KEY_X25519 ? "X25519"
		                                  : "Ed25519");
		return NULL;
	}
	return k;
}

struct evp_pkey_st *
cg_key_read_private(const char *path, enum cg_key_alg alg)
{
	return read_private(path, alg);
}

static int
raw_public(EVP_PKEY *k, unsigned char pub[32])
{
	size_t n = 32;

	if (EVP_PKEY_get_raw_public_key(k, pub, &n) != 1 || n != 32)
		return cg_seterr("cannot get the public key");
	return 0;
}

/* Whether the first line of path's bytes head [n] starts a PEM block. */
static int
looks_pem(const char *head, size_t n)
{
	return n >= 10 && memcmp(head, "-----BEGIN", 10) == 0;
}

/* cg_key_read_public for keys of algorithm want. */
static int
read_public(const char *path, enum cg_key_alg want, unsigned char pub[32],
            const char **comment)
{
	static char line[PUB_LINE_MAX + 2];
	FILE *fp = fopen(path, "rb");
	size_t n;

	if (comment)
		*comment = "";
	if (fp == NULL)
		return cg_seterr("%s: %s", path, strerror(errno));
	n = fread(line, 1, sizeof(line) - 1, fp);
	fclose(fp);
	line[n] = '\0';
	if (looks_pem(line, n)) {
		EVP_PKEY *k = read_private(path, want);
		int rc;
		if (k == NULL)
			return -1;
		rc = raw_public(k, pub);
		EVP_PKEY_free(k);
		if (rc != 0)
			cg_errprefix(path);
		return rc;
	}
	line[strcspn(line, "\n")] = '\0';
	if (strlen(line) > PUB_LINE_MAX ||
	    parse_pub_line(line, want, pub, comment) != 0) {
		if (strlen(line) > PUB_LINE_MAX)
			cg_seterr("line too long");
		cg_errprefix(path);
		return -1;
	}
	return 0;
}

int
cg_key_read_public(const char *path, unsigned char pub[32],
                   const char **comment)
{
	return read_public(path, CG_KEY_ED25519, pub, comment);
}

int
cg_key_generate(const char *path, const char *comment, int force)
{
	return cg_key_generate_alg(path, comment, force, CG_KEY_ED25519);
}

int
cg_key_generate_alg(const char *path, const char *comment, int force,
                    enum cg_key_alg alg)
{
	struct cg_out priv = {0}, pub = {0};
	struct cg_out *both[2] = {&priv, &pub};
	EVP_PKEY *k = NULL;
	BIO *bio = NULL;
	char *pubpath = NULL, *pem;
	unsigned char raw[32];
	char hex[65];
	long npem;
	int rc = -1;

	if (strchr(comment, '\n'))
		return cg_seterr("a comment of one line");
	if ((pubpath = malloc(strlen(path) + 5)) == NULL)
		return cg_seterr("out of memory");
	sprintf(pubpath, "%s.pub", path);
	if (!force && (access(path, F_OK) == 0 || access(pubpath, F_OK) == 0)) {
		cg_seterr("%s: exists (-f replaces it)",
		          access(path, F_OK) == 0 ? path : pubpath);
		goto out;
	}
	if ((k = EVP_PKEY_Q_keygen(
	         NULL, NULL, alg == CG_KEY_X25519 ? "X25519" : "ED25519")) ==
	        NULL ||
	    raw_public(k, raw) != 0) {
		cg_seterr("cannot make an %s key",
		          alg == CG_KEY_X25519 ? "X25519" : "Ed25519");
		goto out;
	}
	if ((bio = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_PrivateKey(bio, k, NULL, NULL, 0, NULL, NULL) != 1 ||
	    (npem = BIO_get_mem_data(bio, &pem)) <= 0) {
		cg_seterr("cannot write the private key");
		goto out;
	}
	if (cg_out_open(&priv, path) != 0)
		goto out;
	/* before a byte of it is written: the private key is its owner's */
	if (priv.direct || fchmod(priv.fd, 0600) != 0) {
		cg_seterr("%s: cannot make it private", path);
		goto out;
	}
	if (cg_out_open(&pub, pubpath) != 0)
		goto out;
	cg_tohex(hex, raw, 32);
	if (fwrite(pem, 1, (size_t)npem, priv.fp) != (size_t)npem ||
	    fprintf(pub.fp, "%s %s %s\n", cg_key_alg_name(alg), hex, comment) <
	        0) {
		cg_seterr("%s: write error", path);
		goto out;
	}
	rc = cg_out_commit_all(both, 2);
out:
	cg_out_abort(&priv);
	cg_out_abort(&pub);
	BIO_free(bio);
	EVP_PKEY_free(k);
	free(pubpath);
	return rc;
}

/* -------------------------------------------------------------- signing */

static EVP_PKEY *sign_key;
static unsigned char sign_pub[32];

int
cg_sign_use(const char *path)
{
	EVP_PKEY *k;

	if (path == NULL) {
		EVP_PKEY_free(sign_key);
		sign_key = NULL;
		return 0;
	}
	if ((k = read_private(path, CG_KEY_ED25519)) == NULL)
		return -1;
	if (raw_public(k, sign_pub) != 0) {
		EVP_PKEY_free(k);
		cg_errprefix(path);
		return -1;
	}
	EVP_PKEY_free(sign_key);
	sign_key = k;
	return 0;
}

int
cg_sign_active(void)
{
	return sign_key != NULL;
}

int
cg_sign_member(const void *json, size_t n, char **out, size_t *outn)
{
	EVP_MD_CTX *ctx = NULL;
	unsigned char sig[64];
	size_t siglen = sizeof(sig);
	char hkey[65], hsig[129];
	int rc = -1, len;

	*out = NULL;
	if (sign_key == NULL)
		return cg_seterr("no signing key");
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestSignInit(ctx, NULL, NULL, NULL, sign_key) != 1 ||
	    EVP_DigestSign(ctx, sig, &siglen, json, n) != 1 || siglen != 64) {
		cg_seterr("cannot sign the manifest");
		goto out;
	}
	cg_tohex(hkey, sign_pub, 32);
	cg_tohex(hsig, sig, 64);
	len = snprintf(NULL, 0,
	               "{\"alg\":\"%s\",\"key\":\"%s\",\"sig\":\"%s\"}\n",
	               CG_KEY_PUB_ALG, hkey, hsig);
	if ((*out = malloc((size_t)len + 1)) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	snprintf(*out, (size_t)len + 1,
	         "{\"alg\":\"%s\",\"key\":\"%s\",\"sig\":\"%s\"}\n",
	         CG_KEY_PUB_ALG, hkey, hsig);
	*outn = (size_t)len;
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

int
cg_sign_check(const void *json, size_t n, const void *sig, size_t sn,
              unsigned char pub[32])
{
	cJSON *j = NULL;
	const cJSON *alg, *key, *s;
	unsigned char raw[64];
	EVP_PKEY *k = NULL;
	EVP_MD_CTX *ctx = NULL;
	int rc = -1;

	if (sn > CG_SIG_MAX || (j = cJSON_ParseWithLength(sig, sn)) == NULL ||
	    !cJSON_IsObject(j)) {
		cg_seterr("%s: malformed (not a signature object)",
		          CG_SIG_MEMBER);
		goto out;
	}
	alg = cJSON_GetObjectItemCaseSensitive(j, "alg");
	key = cJSON_GetObjectItemCaseSensitive(j, "key");
	s = cJSON_GetObjectItemCaseSensitive(j, "sig");
	if (!cJSON_IsString(alg) ||
	    strcmp(alg->valuestring, CG_KEY_PUB_ALG) != 0) {
		cg_seterr("%s: malformed (algorithm not %s)", CG_SIG_MEMBER,
		          CG_KEY_PUB_ALG);
		goto out;
	}
	if (!cJSON_IsString(key) || cg_unhex(pub, key->valuestring, 32, 1) != 0 ||
	    !cJSON_IsString(s) || cg_unhex(raw, s->valuestring, 64, 1) != 0) {
		cg_seterr("%s: malformed (key or signature not hex of 32 "
		          "and 64 bytes)",
		          CG_SIG_MEMBER);
		goto out;
	}
	if ((k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub,
	                                     32)) == NULL) {
		cg_seterr("%s: malformed (not an Ed25519 public key)",
		          CG_SIG_MEMBER);
		goto out;
	}
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k) != 1) {
		cg_seterr("cannot verify: out of memory");
		goto out;
	}
	if (EVP_DigestVerify(ctx, raw, 64, json, n) != 1) {
		cg_seterr("%s: the signature does not match cg.json (altered "
		          "after signing)",
		          CG_SIG_MEMBER);
		goto out;
	}
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(k);
	cJSON_Delete(j);
	return rc;
}

/* ---------------------------------------------------------------- trust */

static unsigned char (*trust_keys)[32];
static size_t ntrust, captrust;
static int trust_state; /* 0 not yet looked at, 1 in force, 2 none */

static int
trust_add(const unsigned char pub[32])
{
	if (ntrust == captrust) {
		size_t cap = captrust ? 2 * captrust : 16;
		void *p;
		if (cap > TRUST_MAX)
			return cg_seterr("more than %d keys", TRUST_MAX);
		if ((p = realloc(trust_keys, cap * sizeof(*trust_keys))) ==
		    NULL)
			return cg_seterr("out of memory");
		trust_keys = p;
		captrust = cap;
	}
	memcpy(trust_keys[ntrust++], pub, 32);
	return 0;
}

int
cg_key_each(const char *path, cg_key_fn fn, void *ctx)
{
	return cg_key_each_alg(path, CG_KEY_ED25519, fn, ctx);
}

int
cg_key_each_alg(const char *path, enum cg_key_alg alg, cg_key_fn fn, void *ctx)
{
	FILE *fp = fopen(path, "rb");
	char line[PUB_LINE_MAX + 2];
	unsigned char pub[32];
	const char *comment;
	int lineno = 0, rc = 0;

	if (fp == NULL)
		return cg_seterr("%s: %s", path, strerror(errno));
	while (rc == 0 && fgets(line, sizeof(line), fp)) {
		size_t n = strlen(line);
		char *p = line;
		if (lineno++ == 0 && looks_pem(line, n)) {
			/* a private key: its public key, once */
			fclose(fp);
			if (read_public(path, alg, pub, &comment) != 0)
				return -1;
			return fn(ctx, pub, comment);
		}
		if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
			rc = cg_seterr("%s:%d: line too long", path, lineno);
			break;
		}
		line[strcspn(line, "\r\n")] = '\0';
		p += strspn(p, " \t");
		if (*p == '\0' || *p == '#')
			continue;
		if (parse_pub_line(p, alg, pub, &comment) != 0) {
			char why[160];
			snprintf(why, sizeof(why), "%s", cg_errmsg());
			rc = cg_seterr("%s:%d: %s", path, lineno, why);
		} else
			rc = fn(ctx, pub, comment);
	}
	if (rc == 0 && ferror(fp))
		rc = cg_seterr("%s: read error", path);
	fclose(fp);
	return rc;
}

static int
trust_one(void *ctx, const unsigned char pub[32], const char *comment)
{
	(void)ctx;
	(void)comment;
	return trust_add(pub);
}

/* The keys of the .pub lines of the file at path; 0 or -1. */
static int
trust_file(const char *path)
{
	return cg_key_each(path, trust_one, NULL);
}

int
cg_trust_use(const char *path)
{
	struct stat st;
	int rc = 0;

	ntrust = 0;
	trust_state = path ? 1 : 2;
	if (path == NULL)
		return 0;
	if (stat(path, &st) != 0)
		return cg_seterr("%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return trust_file(path);
	DIR *d = opendir(path);
	struct dirent *e;
	if (d == NULL)
		return cg_seterr("%s: %s", path, strerror(errno));
	while (rc == 0 && (e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		char *p;
		if (n < 5 || e->d_name[0] == '.' ||
		    strcmp(e->d_name + n - 4, ".pub") != 0)
			continue;
		if ((p = malloc(strlen(path) + n + 2)) == NULL) {
			rc = cg_seterr("out of memory");
			break;
		}
		sprintf(p, "%s/%s", path, e->d_name);
		rc = trust_file(p);
		free(p);
	}
	closedir(d);
	return rc;
}

int
cg_trust_active(void)
{
	const char *env;

	if (trust_state == 0) {
		env = getenv("CG_TRUST");
		if (env == NULL || *env == '\0')
			trust_state = 2;
		else if (cg_trust_use(env) != 0) {
			trust_state = 0;
			cg_errprefix("CG_TRUST");
			return -1;
		}
	}
	return trust_state == 1;
}

int
cg_trusted(const unsigned char pub[32])
{
	for (size_t i = 0; i < ntrust; i++)
		if (memcmp(trust_keys[i], pub, 32) == 0)
			return 1;
	return 0;
}
