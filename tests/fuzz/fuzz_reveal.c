/*
 * fuzz_reveal.c - libFuzzer target: the reveals of a secure aggregation
 * round with a threshold (cg_mask_sum_reveal), and the threshold part of
 * a masked update's mask record (cg_mask_info_read: shares and
 * commitments), read as hostile input against one valid round.
 *
 * The round is made once: three X25519 keys from fixed bytes (their PEM
 * and the peer list in memfds), threshold 2, 64 elements; workers A and
 * B mask their values, C is lost, and A and B reveal (cg_mask_reveal).
 * Closed with those reveals, the round gives the exact mean of A's and
 * B's values, kept as the answer.  The first byte chooses:
 *
 *   even: the rest is up to four reveals, one a line: a fresh sum of
 *         the round (A's and B's records and masked words) takes each
 *         and is closed;
 *   odd:  the rest is the manifest of B's update (its "mask" object
 *         read with B's weight): read, and where it reads, joined to a
 *         fresh sum after A's, both masked words added, the two valid
 *         reveals given and the round closed.
 *
 * Anything refused is the expected outcome.  A round that closes must
 * give exactly the answer: the commitments bind every share and key a
 * reveal may carry, so a reveal that got through with other numbers is
 * a finding (abort).  With CG_FUZZ_SEEDS=DIR set, the target writes its
 * seeds (the valid reveals, alone and together, and B's manifest) into
 * DIR and exits: make-corpus.sh makes corpus/reveal so.
 */
#include <math.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "exchange/secagg.h"
#include "file/sign.h"
#include "fuzz.h"

#define NP 3
#define P 64

static struct {
	struct cg_mask_info *info[2]; /* A's, B's */
	double weight[2];
	uint64_t words[2][P];
	char *reveal[2];  /* A's, B's, one line each */
	char *manifest_b; /* B's manifest: {"mask": ...} */
	float answer[P];
} R;

/* A PEM private key from raw [32] into a memfd; its path into path. */
static void
key_file(const unsigned char raw[32], unsigned char pub[32], char path[32])
{
	EVP_PKEY *k =
	    EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, raw, 32);
	size_t n = 32;
	int fd;
	FILE *fp;

	if (k == NULL || EVP_PKEY_get_raw_public_key(k, pub, &n) != 1 ||
	    (fd = memfd_create("key", 0)) < 0 ||
	    (fp = fdopen(fd, "w")) == NULL ||
	    PEM_write_PrivateKey(fp, k, NULL, NULL, 0, NULL, NULL) != 1 ||
	    fflush(fp) != 0)
		abort();
	snprintf(path, 32, "/proc/self/fd/%d", fd);
	EVP_PKEY_free(k);
	/* fp stays open: the memfd is the key's file */
}

/* A fresh sum of the round with A's record and words in, and B's record
 * b (NULL: none) and words; NULL where b is refused. */
static struct cg_mask_sum *
sum_of(const struct cg_mask_info *b)
{
	static unsigned char data[2][P * 8] __attribute__((aligned(64)));
	struct cg_tensor t[2] = {0};
	struct cg_mask_sum *s = cg_mask_sum_new(R.info[0], P);
	const struct cg_mask_info *in[2] = {R.info[0], b};

	if (s == NULL)
		abort();
	for (int w = 0; w < 2; w++) {
		struct cg_uview v = {0};
		if (cg_mask_sum_join(s, in[w], "in") != 0) {
			if (w == 0)
				abort();
			cg_mask_sum_free(s);
			return NULL;
		}
		memcpy(data[w], R.words[w], sizeof(data[w]));
		snprintf(t[w].name, sizeof(t[w].name), "w");
		t[w].dtype = CG_U64;
		t[w].ndim = 1;
		t[w].shape[0] = t[w].nelem = P;
		t[w].nbytes = P * 8;
		t[w].data = data[w];
		snprintf(v.name, sizeof(v.name), "w");
		v.ndim = 1;
		v.shape[0] = v.n = P;
		v.t[0] = &t[w];
		if (cg_mask_sum_add(s, &v) != 0)
			abort();
	}
	return s;
}

/* Close s; where it closes, its mean must be the answer (into got). */
static int
close_and_check(struct cg_mask_sum *s, float got[P])
{
	struct cg_uview v = {0};

	if (cg_mask_sum_close(s) != 0)
		return -1;
	v.ndim = 1;
	v.shape[0] = v.n = P;
	snprintf(v.name, sizeof(v.name), "w");
	if (cg_mask_sum_mean(s, &v, got) != 0)
		return -1;
	return 0;
}

static void
round_once(void)
{
	static int done;
	unsigned char raw[NP][32], pub[NP][32], base[32];
	char key[NP][32], peers[32], *list = NULL;
	struct cg_mask m[NP];
	float x[2][P];
	size_t len = 0;
	FILE *pl;

	if (done)
		return;
	done = 1;
	if ((pl = open_memstream(&list, &len)) == NULL)
		abort();
	for (int k = 0; k < NP; k++) {
		for (int b = 0; b < 32; b++)
			raw[k][b] = (unsigned char)(17 * k + 5 * b + 1);
		key_file(raw[k], pub[k], key[k]);
		fprintf(pl, "x25519 ");
		for (int b = 0; b < 32; b++)
			fprintf(pl, "%02x", pub[k][b]);
		fprintf(pl, " k%d\n", k);
	}
	fclose(pl);
	fuzz_memfd(0, list, len, peers);
	free(list);
	cg_sha256(base, "fuzz_reveal", 11);
	for (int k = 0; k < NP; k++) {
		if (cg_mask_init(&m[k], key[k], peers, "r", 16) != 0)
			abort();
		m[k].threshold = 2;
		if (cg_mask_round(&m[k], base) != 0)
			abort();
	}
	/* A and B: workers 0 and 1, weights 3 and 5 */
	for (int w = 0; w < 2; w++) {
		cJSON *man = cJSON_CreateObject();
		R.weight[w] = 3 + 2 * w;
		for (int p = 0; p < P; p++)
			x[w][p] = (float)((p * 7 + w * 13) % 29 - 14) / 8;
		cJSON_AddItemToObject(man, "mask", cg_mask_manifest(&m[w]));
		if ((R.info[w] = cg_mask_info_read(man, R.weight[w])) == NULL ||
		    cg_mask_encode(&m[w], (uint64_t)R.weight[w], x[w], 0, P,
		                   R.words[w]) != 0)
			abort();
		if (w == 1 &&
		    (R.manifest_b = cJSON_PrintUnformatted(man)) == NULL)
			abort();
		cJSON_Delete(man);
	}
	for (int w = 0; w < 2; w++) {
		const struct cg_mask_info *in[2] = {R.info[0], R.info[1]};
		unsigned char bases[2][32];
		const char *const names[2] = {"A", "B"};
		cJSON *j;
		memcpy(bases[0], base, 32);
		memcpy(bases[1], base, 32);
		if ((j = cg_mask_reveal(&m[w], in,
		                        (const unsigned char(*)[32])bases,
		                        names, 2)) == NULL ||
		    (R.reveal[w] = cJSON_PrintUnformatted(j)) == NULL)
			abort();
		cJSON_Delete(j);
	}
	for (int k = 0; k < NP; k++)
		cg_mask_free(&m[k]);
	/* the answer: the round closed with both reveals */
	struct cg_mask_sum *s = sum_of(R.info[1]);
	if (s == NULL ||
	    cg_mask_sum_reveal(s, R.reveal[0], strlen(R.reveal[0]), "A") ||
	    cg_mask_sum_reveal(s, R.reveal[1], strlen(R.reveal[1]), "B") ||
	    close_and_check(s, R.answer) != 0)
		abort();
	cg_mask_sum_free(s);
	for (int p = 0; p < P; p++) {
		double want = (3.0 * x[0][p] + 5.0 * x[1][p]) / 8;
		if (fabs(R.answer[p] - want) > 1e-4)
			abort();
	}

	const char *dir = getenv("CG_FUZZ_SEEDS");
	if (dir) {
		/* a seed's first byte: even for reveals, odd for a manifest */
		FILE *f;
		char path[4096];
		const char *const seed[][3] = {
		    {"reveals", R.reveal[0], R.reveal[1]},
		    {"reveals-ba", R.reveal[1], R.reveal[0]},
		    {"reveal-a", R.reveal[0], NULL},
		    {"reveal-b", R.reveal[1], NULL},
		    {"reveal-a-twice", R.reveal[0], R.reveal[0]},
		};
		for (size_t k = 0; k < sizeof(seed) / sizeof(seed[0]); k++) {
			snprintf(path, sizeof(path), "%s/%s", dir, seed[k][0]);
			if ((f = fopen(path, "w")) == NULL)
				abort();
			fprintf(f, "r%s\n%s", seed[k][1],
			        seed[k][2] ? seed[k][2] : "");
			fclose(f);
		}
		snprintf(path, sizeof(path), "%s/manifest-b", dir);
		if ((f = fopen(path, "w")) == NULL)
			abort();
		fprintf(f, "m%s", R.manifest_b);
		fclose(f);
		_exit(0); /* not exit: libFuzzer takes that for a finding */
	}
}

/* The round is made before the first input, outside any input's
 * coverage. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	round_once();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cg_mask_sum *s = NULL;
	float got[P];

	round_once();
	if (size < 1)
		return 0;
	if (data[0] % 2 == 0) {
		const char *p = (const char *)data + 1, *end = p + (size - 1);
		s = sum_of(R.info[1]);
		for (int k = 0; k < 4 && p < end; k++) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			const char *e = nl ? nl : end;
			cg_mask_sum_reveal(s, p, (size_t)(e - p), "reveal");
			p = nl ? nl + 1 : end;
		}
	} else {
		cJSON *man =
		    cJSON_ParseWithLength((const char *)data + 1, size - 1);
		struct cg_mask_info *b = cg_mask_info_read(man, R.weight[1]);
		cJSON_Delete(man);
		if (b == NULL)
			return 0;
		s = sum_of(b);
		cg_mask_info_free(b);
		if (s == NULL)
			return 0;
		cg_mask_sum_reveal(s, R.reveal[0], strlen(R.reveal[0]), "A");
		cg_mask_sum_reveal(s, R.reveal[1], strlen(R.reveal[1]), "B");
	}
	if (close_and_check(s, got) == 0 &&
	    memcmp(got, R.answer, sizeof(got)) != 0) {
		fprintf(stderr, "fuzz_reveal: a round closed with another "
		                "mean than its updates'\n");
		abort();
	}
	cg_mask_sum_free(s);
	return 0;
}
