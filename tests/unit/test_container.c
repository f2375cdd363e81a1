/*
 * test_container.c - round trips and hostile inputs for the cg container.
 *
 * Writes files of every compression, reads them back, checks bytes are
 * identical across writes, then damages copies (truncation, a flipped byte,
 * a lying manifest) and checks that every reader call fails with a message
 * naming the tensor.  Exit 0 pass, 1 fail (automake convention).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cg.h"

#define TEST_NAME "test_container"
#include "check.h"

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

static struct cg_file *
sample_file(void)
{
	struct cg_file *f = cg_file_new("model");
	uint64_t sh[2] = {3, 5}, sh1[1] = {7};
	float w[15];
	uint32_t u[7];

	for (int i = 0; i < 15; i++)
		w[i] = (float)i * 0.25f - 1.0f;
	for (int i = 0; i < 7; i++)
		u[i] = (uint32_t)(i * 1000003u);
	cg_file_add(f, "enc.0.w", CG_F32, 2, sh, w);
	cg_file_add(f, "idx", CG_U32, 1, sh1, u);
	cg_file_add_zero(f, "empty", CG_F32, 1, (uint64_t[]){0});
	return f;
}

static void
test_roundtrip(const char *dir)
{
	static const char *ext[] = {"plain", "gz", "zst"};
	char p1[512], p2[512];

	for (int c = 0; c < 3; c++) {
		struct cg_file *f = sample_file(), *g;
		size_t n1, n2;
		char *b1, *b2;

		snprintf(p1, sizeof(p1), "%s/a.%s", dir, ext[c]);
		snprintf(p2, sizeof(p2), "%s/b.%s", dir, ext[c]);
		CHECK(cg_file_write(f, p1, (enum cg_compress)c) == 0, "%s",
		      cg_errmsg());
		CHECK(cg_file_write(f, p2, (enum cg_compress)c) == 0, "%s",
		      cg_errmsg());
		b1 = slurp(p1, &n1);
		b2 = slurp(p2, &n2);
		CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0,
		      "%s: two writes differ", ext[c]);
		free(b1);
		free(b2);
		g = cg_file_read(p1);
		CHECK(g != NULL, "read %s: %s", ext[c], cg_errmsg());
		if (g) {
			CHECK(strcmp(cg_file_kind(g), "model") == 0, "kind");
			CHECK(g->ntensors == 3, "ntensors %zu", g->ntensors);
			struct cg_tensor *t = cg_file_need(g, "enc.0.w", CG_F32);
			CHECK(t && t->ndim == 2 && t->shape[1] == 5 &&
				  memcmp(t->data, f->tensors[0]->data, 60) == 0,
			      "tensor content");
			CHECK(cg_file_need(g, "idx", CG_F32) == NULL &&
				  strstr(cg_errmsg(), "dtype"),
			      "dtype check");
			/* A plain file's members are used where they lie in
			 * the file read whole (64-byte aligned); compressed
			 * ones are copies. */
			int inplace = 1, borrowed = 0;
			for (size_t i = 0; i < g->ntensors; i++) {
				const char *d = g->tensors[i]->data;
				borrowed |= g->tensors[i]->borrowed;
				/* a big-endian host turns a plain
				 * type's words around in a copy */
				if (g->tensors[i]->nbytes == 0 ||
				    (CG_BIG_ENDIAN &&
				     cg_dtype_word(g->tensors[i]->dtype) > 1))
					continue;
				inplace &= g->tensors[i]->borrowed && g->blob &&
					   d >= (char *)g->blob &&
					   ((uintptr_t)d & 63) == 0;
			}
			CHECK(c == 0 ? inplace : !borrowed && g->blob == NULL,
			      "%s: members in place: %d, borrowed: %d", ext[c],
			      inplace, borrowed);
		}
		cg_file_free(g);
		/* Read as copies: each tensor its own, none borrowed. */
		g = cg_file_read_copy(p1);
		CHECK(g && g->blob == NULL && !g->tensors[0]->borrowed &&
			  !g->tensors[1]->borrowed &&
			  memcmp(g->tensors[1]->data, f->tensors[1]->data, 28) == 0,
		      "%s: cg_file_read_copy", ext[c]);
		cg_file_free(g);
		/* The same bytes from memory: the same tensors, each a
		 * copy, the buffer only read. */
		b1 = slurp(p1, &n1);
		b2 = b1 ? malloc(n1) : NULL;
		if (b2)
			memcpy(b2, b1, n1);
		g = b1 ? cg_file_read_mem(b1, n1, "mem") : NULL;
		CHECK(g && g->blob == NULL && g->ntensors == 3 &&
			  !g->tensors[0]->borrowed &&
			  memcmp(g->tensors[0]->data, f->tensors[0]->data, 60) ==
			      0 &&
			  memcmp(b1, b2, n1) == 0,
		      "%s: cg_file_read_mem: %s", ext[c],
		      g ? "tensors differ" : cg_errmsg());
		cg_file_free(g);
		free(b1);
		free(b2);
		/* Borrowed tensors write the same bytes as copies. */
		struct cg_file *h = cg_file_new("model");
		for (size_t i = 0; i < f->ntensors; i++)
			cg_file_add_ref(h, f->tensors[i]->name,
					f->tensors[i]->dtype, f->tensors[i]->ndim,
					f->tensors[i]->shape, f->tensors[i]->data);
		CHECK(cg_file_write(h, p2, (enum cg_compress)c) == 0, "%s",
		      cg_errmsg());
		b1 = slurp(p1, &n1);
		b2 = slurp(p2, &n2);
		CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0,
		      "%s: borrowed tensors write other bytes", ext[c]);
		free(b1);
		free(b2);
		cg_file_free(h);
		cg_file_free(f);
	}
}

/* Damage a plain file and expect the message to contain want. */
static void
expect_bad(const char *dir, const char *buf, size_t n, const char *want)
{
	char p[512];
	struct cg_file *g;

	snprintf(p, sizeof(p), "%s/bad", dir);
	spit(p, buf, n);
	char said[512];

	g = cg_file_read(p);
	CHECK(g == NULL, "damaged file (%s) was accepted", want);
	if (g == NULL)
		CHECK(strstr(cg_errmsg(), want) != NULL,
		      "message '%s' lacks '%s'", cg_errmsg(), want);
	cg_file_free(g);
	/* the memory reader refuses it with the same words after the name */
	snprintf(said, sizeof(said), "mem%s",
		 strncmp(cg_errmsg(), p, strlen(p)) == 0
		     ? cg_errmsg() + strlen(p)
		     : ": (the file's message does not name it)");
	g = cg_file_read_mem(buf, n, "mem");
	CHECK(g == NULL, "damaged bytes (%s) were accepted", want);
	if (g == NULL)
		CHECK(strcmp(cg_errmsg(), said) == 0,
		      "memory: '%s', file: '%s'", cg_errmsg(), said);
	cg_file_free(g);
}

static void
test_hostile(const char *dir)
{
	struct cg_file *f = sample_file();
	char p[512], *b, *c;
	size_t n;

	snprintf(p, sizeof(p), "%s/good", dir);
	CHECK(cg_file_write(f, p, CG_COMPRESS_NONE) == 0, "%s", cg_errmsg());
	b = slurp(p, &n);
	c = malloc(n);

	expect_bad(dir, b, 0, "empty");
	expect_bad(dir, "hello world, this is not a tar file\n", 36, "bad");
	/* cut inside the last tensor's data */
	memcpy(c, b, n);
	/* The last 1024 bytes are the end-of-archive blocks: a cut there
	 * loses no data, so only earlier cuts must fail. */
	for (size_t cut = 600; cut < n - 1024; cut += 517) {
		memcpy(c, b, n);
		char p2[512];
		snprintf(p2, sizeof(p2), "%s/cut", dir);
		spit(p2, c, cut);
		struct cg_file *g = cg_file_read(p2);
		CHECK(g == NULL, "file cut at %zu of %zu accepted", cut, n);
		cg_file_free(g);
	}
	/* flip one byte of the first tensor's data: find the float -1.0 */
	memcpy(c, b, n);
	const unsigned char m1[4] = {0, 0, 0x80, 0xbf}; /* little-endian */
	char *at = memmem(c, n, m1, 4);
	CHECK(at != NULL, "tensor bytes not found");
	if (at) {
		at[1] ^= 0x40;
		expect_bad(dir, c, n, "enc.0.w: digest mismatch");
	}
	/* a manifest claiming an enormous tensor */
	memcpy(c, b, n);
	char *sh = memmem(c, n, "\"shape\":\t[3, 5]", 15);
	if (sh == NULL)
		sh = memmem(c, n, "[3, 5]", 6);
	CHECK(sh != NULL, "shape text not found");
	if (sh) {
		char *q = memmem(c, n, "[3, 5]", 6);
		memcpy(q, "[9e12]", 6);
		expect_bad(dir, c, n, "enc.0.w");
	}
	free(b);
	free(c);
	cg_file_free(f);

	/* bad names are refused on the way in */
	f = cg_file_new("model");
	CHECK(cg_file_add_zero(f, "../x", CG_F32, 1, (uint64_t[]){1}) == NULL,
	      "../x accepted");
	CHECK(cg_file_add_zero(f, "a/b", CG_F32, 1, (uint64_t[]){1}) == NULL,
	      "a/b accepted");
	CHECK(cg_file_add_zero(f, "q", CG_Q8_0, 1, (uint64_t[]){33}) == NULL,
	      "q8_0 of 33 accepted");
	cg_file_free(f);
}

static void
test_halves(void)
{
	float worst = 0;

	for (int i = -2000; i <= 2000; i++) {
		float x = (float)i * 0.173f;
		float y = cg_f16_to_f32(cg_f32_to_f16(x));
		float e = x != 0 ? (y - x) / x : y;
		if (e < 0)
			e = -e;
		if (e > worst)
			worst = e;
		CHECK(cg_bf16_to_f32(cg_f32_to_bf16(x)) == x ||
			      (cg_bf16_to_f32(cg_f32_to_bf16(x)) - x) / x <
				  0.0079f,
		      "bf16 %g", x);
	}
	CHECK(worst < 0.0005f, "f16 relative error %g", worst);
	CHECK(cg_f32_to_f16(65504.0f) == 0x7bff, "f16 max");
	CHECK(cg_f32_to_f16(1e6f) == 0x7c00, "f16 overflow to inf");
	CHECK(cg_f16_to_f32(0x0001) == 5.9604645e-8f, "f16 subnormal");
	printf("f16 round-trip worst relative error %.3g\n", worst);
}

static void
test_rng(void)
{
	struct cg_rng a, b;
	double s = 0, s2 = 0;

	cg_rng_seed(&a, 42);
	cg_rng_seed(&b, 42);
	for (int i = 0; i < 1000; i++)
		CHECK(cg_rng_u64(&a) == cg_rng_u64(&b), "same seed differs");
	for (int i = 0; i < 100000; i++) {
		double x = cg_rng_normal(&a);
		s += x;
		s2 += x * x;
	}
	s /= 100000;
	s2 = s2 / 100000 - s * s;
	CHECK(s > -0.02 && s < 0.02 && s2 > 0.98 && s2 < 1.02,
	      "normal mean %g var %g", s, s2);
	for (int i = 0; i < 1000; i++)
		CHECK(cg_rng_below(&a, 7) < 7, "below");
}

/*
 * A mapped input that another process truncates: touching the lost pages
 * is SIGBUS, which the reader turns into a one-line error and exit 1,
 * not a crash.  In a child, so that the test survives either way.
 */
static void
test_truncated_mapping(const char *dir)
{
	char p[512];
	static unsigned char big[16384];
	struct cg_file *f = cg_file_new("model");
	int status = 0;

	/* bytes: a tensor whose words a big-endian host turns around is
	 * copied out of the mapping, these are left in it on every host */
	snprintf(p, sizeof(p), "%s/shrinks", dir);
	for (int i = 0; i < 16384; i++)
		big[i] = (unsigned char)i;
	cg_file_add(f, "a", CG_U8, 1, (uint64_t[]){16384}, big);
	cg_file_add(f, "b", CG_U8, 1, (uint64_t[]){16384}, big);
	CHECK(cg_file_write(f, p, CG_COMPRESS_NONE) == 0, "%s", cg_errmsg());
	cg_file_free(f);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
#ifdef _OPENMP
		/* The parent's OpenMP threads are not in the child. */
		omp_set_num_threads(1);
#endif
		struct cg_file *g = cg_file_read(p);
		volatile unsigned char x;
		if (g == NULL || g->blob == NULL)
			_exit(3);
		if (truncate(p, 512) != 0)
			_exit(4);
		x = ((unsigned char *)g->tensors[1]->data)[16383];
		(void)x;
		_exit(5); /* not reached: the page is gone */
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1,
	      "a mapped input truncated meanwhile: exit 1, not a crash "
	      "(status %d)",
	      status);
}

/* cg_hex_parse reads back what cg_hex writes and nothing else; the
 * enum name lookup finds a name only inside its range. */
static void
test_hex_names(void)
{
	static const char *const names[] = {"a", "bb", NULL, "d"};
	unsigned char d[32], back[32];
	char hex[65], bad[65];

	for (int i = 0; i < 32; i++)
		d[i] = (unsigned char)(i * 37 + 11);
	cg_hex(hex, d);
	CHECK(cg_hex_parse(back, hex) == 0 && memcmp(back, d, 32) == 0,
	      "hex: cg_hex_parse reads back cg_hex");
	memcpy(bad, hex, sizeof(bad));
	bad[7] = 'A';
	CHECK(cg_hex_parse(back, bad) != 0, "hex: upper case refused");
	bad[7] = 'g';
	CHECK(cg_hex_parse(back, bad) != 0, "hex: a non-digit refused");
	bad[7] = hex[7];
	bad[63] = '\0';
	CHECK(cg_hex_parse(back, bad) != 0 && cg_hex_parse(back, "") != 0,
	      "hex: 63 digits and none refused");
	CHECK(cg_name_index(names, 0, 3, "bb") == 1 &&
	          cg_name_index(names, 0, 3, "d") == 3 &&
	          cg_name_index(names, 1, 3, "a") == -1 &&
	          cg_name_index(names, 0, 3, "") == -1,
	      "names: found in range only, a NULL gap skipped");
}

/*
 * cg_file_read_late: the late tensor's digest on a thread, every other
 * one at once; a good file's verdict 0, a flipped byte of the late
 * tensor -1 with the message, of another tensor the read refused; a file
 * freed before its verdict stops the thread; without the late tensor,
 * the read is cg_file_read.
 */
static void
test_late(const char *dir)
{
	struct cg_file *f = cg_file_new("data"), *g;
	const uint64_t big = 9u << 20; /* more than one step of the thread */
	unsigned char *p = xcalloc(big, 1);
	char path[512], *buf;
	size_t n, at;
	int rc;

	for (uint64_t i = 0; i < big; i++)
		p[i] = (unsigned char)(i * 2654435761u >> 13);
	cg_file_add(f, "small", CG_U8, 1, (uint64_t[]){3}, "\x01\x02\x03");
	cg_file_add(f, "payload", CG_U8, 1, &big, p);
	snprintf(path, sizeof(path), "%s/late.cgd", dir);
	CHECK(cg_file_write(f, path, CG_COMPRESS_NONE) == 0, "%s",
	      cg_errmsg());
	cg_file_free(f);

	g = cg_file_read_late(path, "payload");
	CHECK(g != NULL && g->late != NULL, "late read: %s", cg_errmsg());
	rc = g ? cg_file_late(g, 0) : -2;
	CHECK(rc == 0 || rc == 1, "late poll: %d", rc);
	CHECK(g && cg_file_late(g, 1) == 0 && cg_file_late(g, 0) == 0,
	      "late verdict: %s", cg_errmsg());
	cg_file_free(g);
	g = cg_file_read_late(path, "nothing");
	CHECK(g != NULL && g->late == NULL && cg_file_late(g, 1) == 0,
	      "no such late tensor: read as ever");
	cg_file_free(g);

	buf = slurp(path, &n);
	at = n - 1024 - big / 2; /* in the payload, the last member */
	buf[at] ^= 1;
	spit(path, buf, n);
	g = cg_file_read_late(path, "payload");
	CHECK(g != NULL, "late read of a flipped payload: %s", cg_errmsg());
	if (g) {
		CHECK(cg_file_late(g, 1) == -1 &&
		          strcmp(cg_errmsg(), "tensor payload: digest mismatch "
		                              "(file truncated or altered)") ==
		              0,
		      "flipped payload: %s", cg_errmsg());
		/* the verdict stays */
		CHECK(cg_file_late(g, 0) == -1, "flipped payload: polled");
	}
	cg_file_free(g);
	/* freed at once: the thread is stopped and joined */
	cg_file_free(cg_file_read_late(path, "payload"));
	/* a flipped byte elsewhere is the read's own refusal */
	buf[at] ^= 1;
	at = (size_t)((char *)memmem(buf, n, "\x01\x02\x03", 3) - buf);
	buf[at] ^= 1;
	spit(path, buf, n);
	g = cg_file_read_late(path, "payload");
	CHECK(g == NULL && strstr(cg_errmsg(), "tensor small: digest "
	                                       "mismatch") != NULL,
	      "flipped small tensor: %s", g ? "accepted" : cg_errmsg());
	cg_file_free(g);
	free(buf);
	free(p);
}

/* Whether a 512-byte block of b [n] opens with pat [k] and zeros up to
 * its 8th byte (a member of k bytes, padded). */
static int
opens_block(const char *b, size_t n, const unsigned char *pat, size_t k)
{
	static const char zero[8];

	for (size_t at = 512; at + 8 <= n; at += 512)
		if (memcmp(b + at, pat, k) == 0 &&
		    memcmp(b + at + k, zero, 8 - k) == 0)
			return 1;
	return 0;
}

/* Whether tensor name of f holds the k bytes p. */
static int
holds(const struct cg_file *f, const char *name, const void *p, size_t k)
{
	const struct cg_tensor *t = cg_file_find(f, name);

	return t && t->nbytes == k && memcmp(t->data, p, k) == 0;
}

/*
 * The words of a file are little-endian on every host: a u16, a u32, a
 * u64 and an f32 tensor written hold their values' little-endian bytes
 * in the file, a q8_0 block its scale's, and read back (in place and as
 * a copy, plain and compressed) they are the host's values again.
 */
static void
test_byte_order(const char *dir)
{
	static const unsigned char le[] = {
	    0x02, 0x01,                                     /* u16 0x0102 */
	    0x04, 0x03, 0x02, 0x01,                         /* u32 */
	    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* u64 */
	    0x00, 0x00, 0xa0, 0xc0,                         /* f32 -5 */
	};
	const uint16_t h = 0x0102;
	const uint32_t w = 0x01020304u;
	const uint64_t d = 0x0102030405060708u;
	const float x = -5.0f;
	float q[32] = {0};
	unsigned char blk[34];
	struct cg_file *f = cg_file_new("data");
	char p[512];
	size_t n;

	q[0] = 2.0f; /* scale 2/127 */
	cg_codec(CG_Q8_0)->encode(blk, q, 32);
	cg_file_add(f, "h", CG_U16, 1, (uint64_t[]){1}, &h);
	cg_file_add(f, "w", CG_U32, 1, (uint64_t[]){1}, &w);
	cg_file_add(f, "d", CG_U64, 1, (uint64_t[]){1}, &d);
	cg_file_add(f, "x", CG_F32, 1, (uint64_t[]){1}, &x);
	cg_file_add(f, "q", CG_Q8_0, 1, (uint64_t[]){32}, blk);
	snprintf(p, sizeof(p), "%s/order", dir);
	CHECK(cg_file_write(f, p, CG_COMPRESS_NONE) == 0, "%s", cg_errmsg());
	char *b = slurp(p, &n);
	/* members are padded to 512 bytes: each value opens a block */
	int found = 0;
	found += opens_block(b, n, le, 2);
	found += opens_block(b, n, le + 2, 4);
	found += opens_block(b, n, le + 6, 8);
	found += opens_block(b, n, le + 14, 4);
	CHECK(found == 4, "little-endian words in the file: %d of 4", found);
	/* q8_0: the f16 scale 2/127 (0x2408), little-endian, then 127 */
	CHECK(memmem(b, n, "\x08\x24\x7f", 3) != NULL,
	      "a block's scale little-endian in the file");
	free(b);
	for (int c = 0; c < 2; c++) {
		if (c == 1)
			CHECK(cg_file_write(f, p, CG_COMPRESS_GZIP) == 0, "%s",
			      cg_errmsg());
		for (int copy = 0; copy < 2; copy++) {
			struct cg_file *g =
			    copy ? cg_file_read_copy(p) : cg_file_read(p);
			CHECK(g != NULL, "read: %s", cg_errmsg());
			if (g == NULL)
				continue;
			CHECK(holds(g, "h", &h, 2) && holds(g, "w", &w, 4) &&
			          holds(g, "d", &d, 8) &&
			          holds(g, "x", &x, 4) &&
			          holds(g, "q", blk, 34),
			      "host words read back (%s, %s)",
			      c ? "gzip" : "plain", copy ? "copy" : "in place");
			cg_file_free(g);
		}
	}
	cg_file_free(f);
}

int
main(void)
{
	char dir[] = "/tmp/cgtest.XXXXXX";

	if (mkdtemp(dir) == NULL)
		return 1;
	test_roundtrip(dir);
	test_hostile(dir);
	test_truncated_mapping(dir);
	test_late(dir);
	test_byte_order(dir);
	test_halves();
	test_rng();
	test_hex_names();
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		failures++;
	printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
