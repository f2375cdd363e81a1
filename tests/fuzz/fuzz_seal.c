/*
 * fuzz_seal.c - libFuzzer target: sealed files (file/seal.h), read as
 * hostile input and sealed and damaged as the fuzzer says.
 *
 * A fixed X25519 key (made once from 32 fixed bytes, its PEM in a memfd)
 * is the key in use for opening and sealing.  The first byte chooses:
 *
 *   even: the rest is a file as every program reads one
 *         (cg_file_read_mem): a sealed one is opened with the key
 *         (header, chunk framing, tags) and what it holds read as a cg
 *         file, as fuzz_container does;
 *   odd:  the rest is a plaintext, sealed in 4096-byte chunks and then
 *         damaged by the edits its last bytes describe (each three
 *         bytes: a position, an xor mask, and the edit: flip, cut or
 *         append); it is opened from a memfd (the chunks in parallel)
 *         and from memory (one at a time).  Undamaged, both must give
 *         back the plaintext; damaged, both must refuse it.  Anything
 *         else aborts: a tag that let an edit through is a finding.
 */
#include <fcntl.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "file/seal.h"
#include "fuzz.h"

#define CHUNK 4096

static unsigned char pub[32];

/* The key in use, once. */
static void
key_once(void)
{
	static const unsigned char raw[32] = {
	    0x77, 0x07, 0x6d, 0x0a, 0x73, 0x18, 0xa5, 0x7d, 0x3c, 0x16, 0xc1,
	    0x72, 0x51, 0xb2, 0x66, 0x45, 0xdf, 0x4c, 0x2f, 0x87, 0xeb, 0xc0,
	    0x99, 0x2a, 0xb1, 0x77, 0xfb, 0xa5, 0x1d, 0xb9, 0x2c, 0x2a};
	static int done;
	EVP_PKEY *k;
	char path[32];
	size_t n = 32;
	int fd;
	FILE *fp;

	if (done)
		return;
	done = 1;
	k = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, raw, 32);
	if (k == NULL || EVP_PKEY_get_raw_public_key(k, pub, &n) != 1 ||
	    (fd = memfd_create("key", 0)) < 0 ||
	    (fp = fdopen(fd, "w")) == NULL ||
	    PEM_write_PrivateKey(fp, k, NULL, NULL, 0, NULL, NULL) != 1 ||
	    fflush(fp) != 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (cg_seal_key_use(path) != 0)
		abort();
	EVP_PKEY_free(k);
	/* fp stays open: the memfd is the key's file */
}

static int
put(void *ctx, const void *buf, size_t n)
{
	fuzz_put(ctx, buf, n);
	return 0;
}

/* The plaintext of opening b [n]: its length, -1 refused; the bytes
 * into *out (malloc'd). */
static long
open_it(const unsigned char *b, size_t n, int mapped, unsigned char **out)
{
	char path[32];
	int in = -1, pfd;
	long len;

	*out = NULL;
	if (mapped) {
		fuzz_memfd(0, b, n, path);
		if ((in = open(path, O_RDONLY)) < 0)
			abort();
		pfd = cg_unseal_fd(in, NULL, 0, 1 << 24);
		close(in);
	} else
		pfd = cg_unseal_fd(-1, b, n, 1 << 24);
	if (pfd < 0)
		return -1;
	len = lseek(pfd, 0, SEEK_END);
	if (len < 0 || lseek(pfd, 0, SEEK_SET) != 0 ||
	    (*out = malloc(len ? (size_t)len : 1)) == NULL ||
	    read(pfd, *out, (size_t)len) != len)
		abort();
	close(pfd);
	return len;
}

static void
round_trip(const uint8_t *data, size_t size)
{
	size_t nedit = size >= 1 ? data[size - 1] % 4 : 0, plain;
	struct fuzz_buf b = {0};
	struct cg_sealer *s;
	unsigned char *orig;
	size_t norig;
	int damaged;

	if (3 * nedit + 1 > size)
		nedit = 0;
	plain = size - (nedit ? 3 * nedit + 1 : 0);
	if ((s = cg_sealer_new_to(pub, CHUNK, put, &b)) == NULL ||
	    cg_sealer_write(s, data, plain) != 0 || cg_sealer_close(s) != 0)
		abort();
	cg_sealer_free(s);
	if ((orig = malloc(b.len)) == NULL)
		abort();
	memcpy(orig, b.p, b.len);
	norig = b.len;
	for (size_t e = 0; e < nedit; e++) {
		const uint8_t *ed = data + plain + 3 * e;
		size_t at = ed[0] * b.len / 256;
		switch (ed[2] % 3) {
		case 0: /* flip */
			if (at < b.len)
				b.p[at] ^= ed[1];
			break;
		case 1: /* cut */
			if (at < b.len)
				b.len = at;
			break;
		default: /* append */
			fuzz_put(&b, &ed[1], 1);
		}
	}
	/* edits may undo each other: damaged is what differs */
	damaged = b.len != norig || memcmp(b.p, orig, norig) != 0;
	free(orig);
	for (int mapped = 0; mapped < 2; mapped++) {
		unsigned char *got;
		long n = open_it(b.p, b.len, mapped, &got);
		if (damaged ? n >= 0
		            : n != (long)plain || memcmp(got, data, plain) != 0)
			abort();
		free(got);
	}
	free(b.p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	key_once();
	if (size == 0)
		return 0;
	if (data[0] % 2 == 0) {
		struct cg_file *f =
		    cg_file_read_mem(data + 1, size - 1, "fuzz");
		if (f) {
			fuzz_inspect(f);
			fuzz_use_file(f);
		}
	} else if (size - 1 <= 5 * CHUNK)
		round_trip(data + 1, size - 1);
	return 0;
}
