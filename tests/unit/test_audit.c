/*
 * test_audit.c - the call record of a deterministic update read back,
 * hostile records refused, and the draw of a round's audited fraction.
 *
 * A well-formed record is parsed into the options it names; records with
 * one field out of range or malformed are refused with one message each.
 * The draw picks exactly ceil(fraction * n) updates, the same for a seed,
 * and each update equally often over many seeds.  A round's list is read
 * back, and lists that are not one are refused naming their line; the
 * files of an audit that cannot be read are named.  Exit 0 pass, 1 fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "train/audit.h"

#define TEST_NAME "test_audit"
#include "check.h"

static const char *good =
    "{\"deterministic\":true,\"emit\":\"delta\",\"steps\":3,\"batch\":8,"
    "\"seed\":\"18446744073709551615\",\"order\":\"sequential\",\"clip\":2,"
    "\"optim\":{\"name\":\"adamw\",\"lr\":0.5,\"beta1\":0.9,\"beta2\":0.99,"
    "\"eps\":1e-8,\"momentum\":0.9,\"wd\":0.01,\"schedule\":\"cosine\","
    "\"warmup\":2,\"total\":10,\"lr_min\":0},"
    "\"data\":{\"sha256\":\"" /* 64 hex digits */
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"},"
    "\"chunk\":4,\"checkpoint\":true}";

/* Read the record text (NULL: none) of a delta; the result of
 * cg_call_read, its message kept in msg. */
static int
read_record(const char *text, struct cg_call *c, char *msg, size_t len)
{
	struct cg_update u;
	int rc;

	memset(&u, 0, sizeof(u));
	u.name = "u.cgg";
	u.kind = CG_UPDATE_DELTA;
	if ((u.file = cg_file_new("delta")) == NULL)
		die("cg_file_new");
	if (text) {
		cJSON *r = cJSON_Parse(text);
		if (r == NULL) {
			fprintf(stderr, "bad test record: %s\n", text);
			exit(1);
		}
		cJSON_AddItemToObject(u.file->manifest, "call", r);
	}
	rc = cg_call_read(&u, c);
	snprintf(msg, len, "%s", rc ? cg_errmsg() : "");
	cg_file_free(u.file);
	return rc;
}

/* good with the text from at: replaced (the first occurrence of from). */
static char *
edit(const char *from, const char *to)
{
	const char *p = strstr(good, from);
	char *s;

	if (p == NULL) {
		fprintf(stderr, "edit: '%s' not in the record\n", from);
		exit(1);
	}
	s = xcalloc(strlen(good) + strlen(to) + 1, 1);
	memcpy(s, good, (size_t)(p - good));
	strcat(s, to);
	strcat(s, p + strlen(from));
	return s;
}

static void
test_record(void)
{
	struct cg_call c;
	char msg[512];

	expect(read_record(good, &c, msg, sizeof(msg)) == 0,
	       "a well-formed record is read");
	expect(c.o.emit == CG_EMIT_DELTA && c.o.steps == 3 && c.o.batch == 8 &&
	           c.o.seed == UINT64_MAX && c.o.order == CG_ORDER_SEQUENTIAL &&
	           c.o.clip == 2,
	       "its options");
	expect(c.o.opt.kind == CG_OPT_ADAMW && c.o.opt.lr == 0.5f &&
	           c.o.opt.beta2 == 0.99f && c.o.opt.wd == 0.01f &&
	           c.o.opt.sched == CG_SCHED_COSINE && c.o.opt.warmup == 2 &&
	           c.o.opt.total == 10,
	       "its optimizer");
	expect(c.chunk == 4 && c.checkpoint == 1 && !c.has_state &&
	           c.data[0] == 0x00 && c.data[31] == 0xff && !c.distilled,
	       "its plan and the shard's identity; no state");

	expect(read_record(NULL, &c, msg, sizeof(msg)) != 0 &&
	           strcmp(msg, "u.cgg: not made in deterministic mode "
	                       "(cg-train-step --deterministic): it cannot be "
	                       "recomputed") == 0,
	       "no record: not made in deterministic mode");

	/* one field wrong at a time: each refused */
	static const char *const bad[][2] = {
	    {"\"deterministic\":true", "\"deterministic\":false"},
	    {"\"deterministic\":true", "\"deterministic\":1"},
	    {"\"emit\":\"delta\"", "\"emit\":\"grad\""},
	    {"\"emit\":\"delta\"", "\"emit\":\"model\""},
	    {"\"steps\":3", "\"steps\":0"},
	    {"\"steps\":3", "\"steps\":1.5"},
	    {"\"steps\":3", "\"steps\":1e12"},
	    {"\"steps\":3", "\"steps\":\"3\""},
	    {"\"batch\":8", "\"batch\":-8"},
	    {"\"batch\":8", "\"batch\":2000000"},
	    {"\"chunk\":4", "\"chunk\":9"},
	    {"\"chunk\":4", "\"chunk\":-1"},
	    {"\"checkpoint\":true", "\"checkpoint\":1"},
	    {"\"seed\":\"18446744073709551615\"",
	     "\"seed\":\"18446744073709551616\""},
	    {"\"seed\":\"18446744073709551615\"", "\"seed\":\"-1\""},
	    {"\"seed\":\"18446744073709551615\"", "\"seed\":\" 5\""},
	    {"\"seed\":\"18446744073709551615\"", "\"seed\":\"5x\""},
	    {"\"seed\":\"18446744073709551615\"", "\"seed\":\"\""},
	    {"\"seed\":\"18446744073709551615\"", "\"seed\":5"},
	    {"\"order\":\"sequential\"", "\"order\":\"random\""},
	    {"\"clip\":2", "\"clip\":-1"},
	    {"\"name\":\"adamw\"", "\"name\":\"lion\""},
	    {"\"lr\":0.5", "\"lr\":-0.5"},
	    {"\"beta1\":0.9", "\"beta1\":1.5"},
	    {"\"schedule\":\"cosine\"", "\"schedule\":\"step\""},
	    {"\"warmup\":2", "\"warmup\":2.5"},
	    {"\"sha256\":\"0011", "\"sha256\":\"zz11"},
	    {"\"data\":{", "\"state\":{\"sha256\":\"00\"},\"data\":{"},
	    {"\"data\":{\"sha256\"", "\"data\":{\"sha\""},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t = edit(bad[i][0], bad[i][1]);
		char what[600];
		int rc = read_record(t, &c, msg, sizeof(msg));
		snprintf(what, sizeof(what), "refused: %s (%s)", bad[i][1],
		         rc ? msg : "read");
		expect(rc != 0 && strncmp(msg, "u.cgg: ", 7) == 0 &&
		           strchr(msg, '\n') == NULL,
		       what);
		free(t);
	}
	/* a state named, well formed */
	char *t = edit("\"data\":{",
	               "\"state\":{\"sha256\":\"ff112233445566778899aabbccdd"
	               "eeff00112233445566778899aabbccddeeff\"},\"data\":{");
	expect(read_record(t, &c, msg, sizeof(msg)) == 0 && c.has_state &&
	           c.state[0] == 0xff,
	       "a state's identity is read");
	free(t);
}

static void
test_draw(void)
{
	enum { N = 10, RUNS = 20000 };
	unsigned char a[N], b[N];
	int counts[N] = {0};
	int k, same = 1, diff = 0;

	k = cg_audit_draw(N, 0.25, 7, a);
	int sum = 0;
	for (int i = 0; i < N; i++)
		sum += a[i];
	expect(k == 3 && sum == 3, "fraction 0.25 of 10: 3 drawn");
	cg_audit_draw(N, 0.25, 7, b);
	same = memcmp(a, b, N) == 0;
	expect(same, "the same seed, the same draw");
	for (uint64_t s = 8; s < 40 && !diff; s++) {
		cg_audit_draw(N, 0.25, s, b);
		diff = memcmp(a, b, N) != 0;
	}
	expect(diff, "another seed, another draw");
	k = cg_audit_draw(N, 1, 3, a);
	sum = 0;
	for (int i = 0; i < N; i++)
		sum += a[i];
	expect(k == N && sum == N, "fraction 1: every update");
	k = cg_audit_draw(N, 1e-9, 3, a);
	sum = 0;
	for (int i = 0; i < N; i++)
		sum += a[i];
	expect(k == 1 && sum == 1, "a tiny fraction: one update");
	k = cg_audit_draw(4, 0.5, 3, a);
	expect(k == 2, "fraction 0.5 of 4: 2 drawn");

	/* each update as often as any other: k/N of the draws, within 5
	 * standard deviations of the binomial count */
	for (uint64_t s = 0; s < RUNS; s++) {
		cg_audit_draw(N, 0.25, s, a);
		for (int i = 0; i < N; i++)
			counts[i] += a[i];
	}
	double p = 0.3, mean = RUNS * p, sd = sqrt(RUNS * p * (1 - p));
	double worst = 0;
	for (int i = 0; i < N; i++) {
		double z = fabs(counts[i] - mean) / sd;
		worst = z > worst ? z : worst;
	}
	printf("     draw: largest deviation %.2f sd over %d seeds\n", worst,
	       RUNS);
	expect(worst < 5, "each update drawn with the same chance");
}

/* ------------------------------------------------------------ reports */

/* j as one line of text (malloc'd), j freed; NULL for a NULL j. */
static char *
json_text(cJSON *j)
{
	char *s = j ? cJSON_PrintUnformatted(j) : NULL;

	cJSON_Delete(j);
	return s;
}

static void
test_report(void)
{
	struct cg_audit_view v[2] = {{"enc.w", 12, 0, 0},
	                             {"dec.b", 4, 2, INFINITY}};
	struct cg_audit a = {.match = 0,
	                     .nviews = 2,
	                     .nbad = 1,
	                     .v = v,
	                     .samples = {8, 8},
	                     .weight = {1, 1},
	                     .loss = {0.5, 0.25},
	                     .fig_ok = {1, 1, 0},
	                     .figures_ok = 0};
	char *buf = NULL, *js;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);

	if (fp == NULL)
		die("open_memstream");
	cg_audit_table(fp, "g.cgg", &a);
	a.match = 1;
	cg_audit_table(fp, "h.cgg", &a);
	fclose(fp);
	expect(strcmp(buf, "g.cgg: mismatch: 1 of 2 tensors differ, and its "
	                   "figures\n"
	                   "  dec.b: 2 of 4 differ, largest difference inf\n"
	                   "  loss: sent 0.5, recomputed 0.25\n"
	                   "h.cgg: match (2 tensors)\n") == 0,
	       "table: a mismatch's tensors and figures, a match's count");
	free(buf);

	a.match = 0;
	js = json_text(cg_audit_json("g.cgg", "mismatch", &a));
	expect(js && strcmp(js, "{\"update\":\"g.cgg\",\"result\":"
	                        "\"mismatch\",\"differ\":[{\"tensor\":"
	                        "\"dec.b\",\"elements\":4,\"differ\":2,"
	                        "\"max_diff\":null}],\"tensors\":2,"
	                        "\"figures_match\":false}") == 0,
	       "json: the tensors that differ, a NaN's difference null");
	free(js);
	js = json_text(cg_audit_json("u.cgg", "skipped", NULL));
	expect(js && strcmp(js, "{\"update\":\"u.cgg\",\"result\":"
	                        "\"skipped\"}") == 0,
	       "json: no audit, no figures");
	free(js);
}

/* ------------------------------------------------------------ a round */

/* A file of text in a new temporary path (the caller unlinks and frees). */
static char *
list_file(const char *text)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *p = xcalloc(strlen(base) + 32, 1);
	int fd;
	FILE *fp;

	sprintf(p, "%s/test_audit.XXXXXX", base);
	if ((fd = mkstemp(p)) < 0 || (fp = fdopen(fd, "w")) == NULL ||
	    fputs(text, fp) < 0 || fclose(fp) != 0) {
		fprintf(stderr, "test_audit: cannot write %s\n", p);
		exit(1);
	}
	return p;
}

/* cg_audit_round_read of text: its result, the message after the path
 * in msg. */
static int
round_of(const char *text, struct cg_audit_item **it, char *msg, size_t len)
{
	char *p = list_file(text);
	int n = cg_audit_round_read(p, it);

	snprintf(msg, len, "%s",
	         n < 0 && strncmp(cg_errmsg(), p, strlen(p)) == 0
	             ? cg_errmsg() + strlen(p)
	             : cg_errmsg());
	unlink(p);
	free(p);
	return n;
}

static void
test_round(void)
{
	struct cg_audit_item *it;
	char msg[256], *big;
	int n;

	n = round_of("# a round\n\n g0.cgg\ts0.cgd w0.state \n"
	             "g1.cgg s1.cgd\r\n  # g9.cgg s9.cgd\n",
	             &it, msg, sizeof(msg));
	expect(n == 2 && strcmp(it[0].update, "g0.cgg") == 0 &&
	           strcmp(it[0].shard, "s0.cgd") == 0 &&
	           strcmp(it[0].state, "w0.state") == 0 &&
	           strcmp(it[1].shard, "s1.cgd") == 0 && it[1].state == NULL,
	       "round: updates, shards and states; comments, blanks skipped");
	cg_audit_round_free(it, n);
	cg_audit_round_free(NULL, 0);

	n = round_of("g0.cgg s0.cgd\ng1.cgg\n", &it, msg, sizeof(msg));
	expect(n < 0 && it == NULL &&
	           strcmp(msg, ": line 2: not UPDATE SHARD [STATE]") == 0,
	       "round: one word is refused, naming the line");
	n = round_of("a b c d\n", &it, msg, sizeof(msg));
	expect(n < 0 && strcmp(msg, ": line 1: not UPDATE SHARD [STATE]") == 0,
	       "round: four words too");
	n = round_of("# nothing\n\n", &it, msg, sizeof(msg));
	expect(n < 0 && strcmp(msg, ": no update listed") == 0,
	       "round: an empty list is refused");
	big = xcalloc(CG_AUDIT_MAX_LINE + 16, 1);
	memset(big, 'x', CG_AUDIT_MAX_LINE + 1);
	n = round_of(big, &it, msg, sizeof(msg));
	expect(n < 0 && strcmp(msg, ": line 1: longer than 16384 bytes") == 0,
	       "round: a line longer than CG_AUDIT_MAX_LINE");
	free(big);
	big = xcalloc((size_t)(CG_AUDIT_MAX_UPDATES + 1) * 4 + 1, 1);
	for (int i = 0; i <= CG_AUDIT_MAX_UPDATES; i++)
		strcat(big + (size_t)i * 4, "u s\n");
	n = round_of(big, &it, msg, sizeof(msg));
	expect(n < 0 && strcmp(msg, ": more than 65536 updates") == 0,
	       "round: more than CG_AUDIT_MAX_UPDATES");
	free(big);
	n = cg_audit_round_read("/nonexistent/round", &it);
	expect(n < 0 && it == NULL &&
	           strcmp(cg_errmsg(),
	                  "/nonexistent/round: No such file or directory") == 0,
	       "round: a missing list names itself");
}

/* What cg_audit_files refuses before any recomputation. */
static void
test_files(void)
{
	struct cg_audit a = {0};

	expect(cg_audit_files("/nonexistent/g.cgg", "m.cgm", "s.cgd", NULL,
	                      &a) != 0 &&
	           strstr(cg_errmsg(), "/nonexistent/g.cgg") != NULL,
	       "files: a missing update, named");
	printf("     %s\n", cg_errmsg());
	cg_audit_free(&a);
}

int
main(void)
{
	test_record();
	test_draw();
	test_report();
	test_round();
	test_files();
	return failures ? 1 : 0;
}
