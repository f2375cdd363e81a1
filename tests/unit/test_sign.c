/*
 * test_sign.c - Ed25519 keys, signed cg files and trust lists.
 *
 * A key pair made and read back (mode 0600, the .pub line, refusal to
 * overwrite); RFC 8032's first test vector through cg_sign_check, so the
 * check is held to the standard and not only to cg's own signer; files
 * written signed and read back, their signer known; an unsigned file's
 * bytes unchanged by the signing code; altered manifests, signatures and
 * tensors, malformed signature members, untrusted and unsigned files all
 * refused with a message that says which; trust lists from a file with
 * comments and from a directory; unknown kinds refused.  Exit 0 pass, 1
 * fail (automake convention).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "file/sign.h"

#define TEST_NAME "test_sign"
#include "check.h"

static char dir[64];

static const char *
tmp(const char *name)
{
	static char buf[4][256];
	static int k;

	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

static char *
slurp(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	char *buf;
	long len;

	if (fp == NULL)
		return NULL;
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	rewind(fp);
	buf = malloc((size_t)len + 1);
	if (fread(buf, 1, (size_t)len, fp) != (size_t)len)
		len = 0;
	fclose(fp);
	buf[len] = '\0';
	*n = (size_t)len;
	return buf;
}

static void
spit(const char *path, const char *buf, size_t n)
{
	FILE *fp = fopen(path, "wb");

	fwrite(buf, 1, n, fp);
	fclose(fp);
}

static void
unhex(unsigned char *out, const char *s)
{
	for (size_t i = 0; s[2 * i]; i++)
		sscanf(s + 2 * i, "%2hhx", &out[i]);
}

static struct cg_file *
sample_file(const char *kind)
{
	struct cg_file *f = cg_file_new(kind);
	float w[15];

	for (int i = 0; i < 15; i++)
		w[i] = (float)i - 7.0f;
	cJSON_AddNumberToObject(f->manifest, "step", 3);
	cg_file_add(f, "w", CG_F32, 2, (uint64_t[]){3, 5}, w);
	return f;
}

/* Whether reading path fails with a message holding want. */
static int
refused(const char *path, const char *want)
{
	struct cg_file *f = cg_file_read(path);

	if (f) {
		cg_file_free(f);
		fprintf(stderr, "%s: read, but should be refused (%s)\n", path,
		        want);
		return 0;
	}
	if (strstr(cg_errmsg(), want) == NULL) {
		fprintf(stderr, "%s: '%s', not '%s'\n", path, cg_errmsg(),
		        want);
		return 0;
	}
	return 1;
}

/* The file at path with the first "from" after byte at replaced by
 * "to" (same length) written to out; 0, or -1 where it is not there. */
static int
patch(const char *path, size_t at, const char *from, const char *to,
      const char *out)
{
	size_t n;
	char *b = slurp(path, &n), *p = NULL;

	for (size_t i = at; b && i + strlen(from) <= n; i++)
		if (memcmp(b + i, from, strlen(from)) == 0) {
			p = b + i;
			break;
		}
	if (p == NULL) {
		free(b);
		return -1;
	}
	memcpy(p, to, strlen(to));
	spit(out, b, n);
	free(b);
	return 0;
}

/* Offset of the first s in path's bytes, or 0. */
static size_t
offset_of(const char *path, const char *s)
{
	size_t n, at = 0;
	char *b = slurp(path, &n);

	for (size_t i = 0; b && i + strlen(s) <= n; i++)
		if (memcmp(b + i, s, strlen(s)) == 0) {
			at = i;
			break;
		}
	free(b);
	return at;
}

/* -------------------------------------------------------------- keys */

static void
test_keys(unsigned char pub[32])
{
	unsigned char a[32], b[32];
	const char *comment;
	struct stat st;
	char line[256];
	FILE *fp;

	expect(cg_key_generate(tmp("k"), "worker one", 0) == 0,
	       "a key pair is made");
	expect(stat(tmp("k"), &st) == 0 && (st.st_mode & 0777) == 0600,
	       "the private key is of mode 0600");
	fp = fopen(tmp("k.pub"), "r");
	expect(fp && fgets(line, sizeof(line), fp) &&
	           strncmp(line, "ed25519 ", 8) == 0 &&
	           strlen(line) == 8 + 64 + 1 + 10 + 1 &&
	           strcmp(line + 73, "worker one\n") == 0,
	       ".pub is one line: ed25519 HEX COMMENT");
	if (fp)
		fclose(fp);
	expect(cg_key_read_public(tmp("k"), a, NULL) == 0 &&
	           cg_key_read_public(tmp("k.pub"), b, &comment) == 0 &&
	           memcmp(a, b, 32) == 0 && strcmp(comment, "worker one") == 0,
	       "the private key and .pub give the same public key");
	memcpy(pub, a, 32);
	expect(cg_key_generate(tmp("k"), "again", 0) == -1 &&
	           strstr(cg_errmsg(), "exists") != NULL,
	       "an existing key is not replaced without force");
	expect(cg_key_read_public(tmp("k"), b, NULL) == 0 &&
	           memcmp(a, b, 32) == 0,
	       "... and is left as it was");
	expect(cg_key_generate(tmp("k2"), "two", 0) == 0 &&
	           cg_key_generate(tmp("k2"), "two", 1) == 0,
	       "force replaces a key pair");
	expect(cg_key_generate(tmp("k3"), "bad\ncomment", 0) == -1,
	       "a comment of two lines is refused");
	spit(tmp("bad.pub"), "ssh-rsa AAAA x\n", 15);
	expect(cg_key_read_public(tmp("bad.pub"), b, NULL) == -1,
	       "a key of another algorithm is refused");
	spit(tmp("bad2.pub"), "ed25519 00ff\n", 13);
	expect(cg_key_read_public(tmp("bad2.pub"), b, NULL) == -1,
	       "a short public key is refused");
	spit(tmp("bad3"), "-----BEGIN PRIVATE KEY-----\nAAAA\n", 33);
	expect(cg_key_read_public(tmp("bad3"), b, NULL) == -1 &&
	           cg_sign_use(tmp("bad3")) == -1,
	       "a broken PEM file is refused");
	expect(cg_sign_use(tmp("k.pub")) == -1, "a public key does not sign");
}

/* RFC 8032, 7.1, TEST 1: the empty message. */
static void
test_rfc8032(void)
{
	static const char pubhex[] = "d75a980182b10ab7d54bfed3c964073a0ee172f3"
	                             "daa62325af021a68f707511a";
	static const char sighex[] =
	    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901"
	    "555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a"
	    "100b";
	unsigned char pub[32], want[32];
	char m[512];

	unhex(want, pubhex);
	snprintf(m, sizeof(m),
	         "{\"alg\":\"ed25519\",\"key\":\"%s\",\"sig\":"
	         "\"%s\"}\n",
	         pubhex, sighex);
	expect(cg_sign_check("", 0, m, strlen(m), pub) == 0 &&
	           memcmp(pub, want, 32) == 0,
	       "RFC 8032 test 1 verifies");
	expect(cg_sign_check("x", 1, m, strlen(m), pub) == -1 &&
	           strstr(cg_errmsg(), "altered") != NULL,
	       "... and not for another message");
	m[strlen(m) - 5] ^= 1;
	expect(cg_sign_check("", 0, m, strlen(m), pub) == -1,
	       "... nor with a bit of the signature changed");
	expect(cg_sign_check("", 0, "garbage", 7, pub) == -1 &&
	           strstr(cg_errmsg(), "malformed") != NULL,
	       "garbage is a malformed signature");
	snprintf(m, sizeof(m),
	         "{\"alg\":\"rsa\",\"key\":\"%s\",\"sig\":"
	         "\"%s\"}",
	         pubhex, sighex);
	expect(cg_sign_check("", 0, m, strlen(m), pub) == -1 &&
	           strstr(cg_errmsg(), "malformed") != NULL,
	       "another algorithm is a malformed signature");
	snprintf(m, sizeof(m),
	         "{\"alg\":\"ed25519\",\"key\":\"%s\",\"sig\":"
	         "\"%.64s\"}",
	         pubhex, sighex);
	expect(cg_sign_check("", 0, m, strlen(m), pub) == -1 &&
	           strstr(cg_errmsg(), "malformed") != NULL,
	       "a short signature is malformed");
}

/* ------------------------------------------------------------- files */

static void
test_files(const unsigned char pub[32])
{
	struct cg_file *f;
	size_t n0, n1, at;
	char *u0, *u1, fp[65], pubhex[65], line[200];
	unsigned char other[32];

	cg_file_write_free(sample_file("model"), tmp("u0.cgm"),
	                   CG_COMPRESS_NONE);
	expect(cg_sign_use(tmp("k")) == 0, "the key signs");
	expect(cg_file_write_free(sample_file("model"), tmp("s.cgm"),
	                          CG_COMPRESS_NONE) == 0 &&
	           cg_file_write_free(sample_file("model"), tmp("s.cgm.gz"),
	                              CG_COMPRESS_GZIP) == 0,
	       "signed files are written");
	cg_sign_use(NULL);
	cg_file_write_free(sample_file("model"), tmp("u1.cgm"),
	                   CG_COMPRESS_NONE);
	u0 = slurp(tmp("u0.cgm"), &n0);
	u1 = slurp(tmp("u1.cgm"), &n1);
	expect(u0 && u1 && n0 == n1 && memcmp(u0, u1, n0) == 0,
	       "an unsigned file's bytes do not depend on signing");
	free(u0);
	free(u1);

	f = cg_file_read(tmp("s.cgm"));
	expect(f && f->is_signed && memcmp(f->signer, pub, 32) == 0,
	       "a signed file is read with its signer");
	cg_file_free(f);
	f = cg_file_read(tmp("s.cgm.gz"));
	expect(f && f->is_signed && memcmp(f->signer, pub, 32) == 0,
	       "... compressed too");
	cg_file_free(f);
	f = cg_file_read(tmp("u0.cgm"));
	expect(f && !f->is_signed, "an unsigned file is read, unsigned");
	cg_file_free(f);

	/* cJSON_Print indents with tabs: a space for one leaves the JSON
	 * what it was but not its bytes */
	at = offset_of(tmp("s.cgm"), "cg.json");
	expect(patch(tmp("s.cgm"), at + 512, "\t", " ", tmp("m.cgm")) == 0 &&
	           refused(tmp("m.cgm"), "altered after signing"),
	       "a manifest changed after signing is refused");
	expect(patch(tmp("s.cgm"), at + 512, "\"step\":\t3", "\"step\":\t4",
	             tmp("m2.cgm")) == 0 &&
	           refused(tmp("m2.cgm"), "altered after signing"),
	       "... its step changed too");
	at = offset_of(tmp("s.cgm"), "\"sig\":\"");
	expect(at != 0, "the signature member is found");
	{
		size_t n;
		char *b = slurp(tmp("s.cgm"), &n);
		b[at + 10] = b[at + 10] == '0' ? '1' : '0';
		spit(tmp("sig.cgm"), b, n);
		memcpy(b + at, "garbage", 7);
		spit(tmp("garbage.cgm"), b, n);
		free(b);
	}
	expect(refused(tmp("sig.cgm"), "altered after signing"),
	       "a changed signature is refused");
	expect(refused(tmp("garbage.cgm"), "malformed"),
	       "a signature member that is not one is refused");
	{
		/* the tensor's first element, -7.0f */
		static const char first[4] = {0, 0, (char)0xe0, (char)0xc0};
		size_t n;
		char *b = slurp(tmp("s.cgm"), &n), *w = memmem(b, n, first, 4);
		if (w)
			w[0] ^= 1;
		spit(tmp("t.cgm"), b, n);
		free(b);
	}
	expect(refused(tmp("t.cgm"), "digest mismatch"),
	       "a tensor changed after signing is refused");

	/* trust */
	cg_key_fingerprint(fp, pub);
	for (int i = 0; i < 32; i++)
		snprintf(pubhex + 2 * i, 3, "%02x", pub[i]);
	snprintf(line, sizeof(line), "# the workers\n\n  ed25519 %s w1\n",
	         pubhex);
	spit(tmp("trust"), line, strlen(line));
	expect(cg_trust_use(tmp("trust")) == 0 && cg_trust_active() == 1 &&
	           cg_trusted(pub),
	       "a trust list with comments is read");
	f = cg_file_read(tmp("s.cgm"));
	expect(f != NULL, "a file signed by a trusted key is read");
	cg_file_free(f);
	expect(refused(tmp("u0.cgm"), "unsigned"),
	       "an unsigned file is refused under a trust list");
	expect(refused(tmp("m.cgm"), "altered"),
	       "an altered manifest is refused under a trust list");
	expect(refused(tmp("t.cgm"), "digest mismatch"),
	       "an altered tensor is refused under a trust list");
	cg_key_read_public(tmp("k2.pub"), other, NULL);
	expect(cg_trust_use(tmp("k2.pub")) == 0 && !cg_trusted(pub) &&
	           cg_trusted(other),
	       "a .pub file is a trust list");
	expect(refused(tmp("s.cgm"), "not in the trust list") &&
	           strstr(cg_errmsg(), fp) != NULL,
	       "a file signed by another key is refused, its key named");
	spit(tmp("bad-trust"), "ed25519 123\n", 12);
	expect(cg_trust_use(tmp("bad-trust")) == -1 &&
	           strstr(cg_errmsg(), "bad-trust:1") != NULL,
	       "a trust list with a bad line is refused, the line named");
	mkdir(tmp("keys"), 0755);
	rename(tmp("trust"), tmp("keys/w1.pub"));
	spit(tmp("keys/README"), "not a key\n", 10);
	expect(cg_trust_use(tmp("keys")) == 0 && cg_trusted(pub) &&
	           !cg_trusted(other),
	       "a directory of .pub files is a trust list");
	f = cg_file_read(tmp("s.cgm"));
	expect(f != NULL, "... and lets its keys' files in");
	cg_file_free(f);
	cg_trust_use(NULL);
	expect(cg_trust_active() == 0, "no trust list after NULL");
}

static void
test_kinds(void)
{
	static const char *const good[] = {"model", "grad", "delta", "data",
	                                   "state"};

	for (int i = 0; i < 5; i++)
		CHECK(cg_kind_known(good[i]), "%s", good[i]);
	expect(!cg_kind_known("frob") && !cg_kind_known("") &&
	           !cg_kind_known("Model"),
	       "only the format's kinds are known");
	cg_file_write_free(sample_file("frob"), tmp("frob.cgm"),
	                   CG_COMPRESS_NONE);
	expect(refused(tmp("frob.cgm"), "unknown kind 'frob'"),
	       "a file of an unknown kind is refused");
}

int
main(void)
{
	unsigned char pub[32];
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/test_sign.XXXXXX");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	test_keys(pub);
	test_rfc8032();
	test_files(pub);
	test_kinds();
	if (getenv("KEEP"))
		return failures ? 1 : 0;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "%s: cannot remove %s\n", TEST_NAME, dir);
	return failures ? 1 : 0;
}
