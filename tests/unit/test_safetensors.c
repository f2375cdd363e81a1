/*
 * test_safetensors.c - the safetensors reader and writer
 * (lib/file/safetensors.c).
 *
 * Files are built here byte by byte (a header length, a header written
 * out as text, the tensors' bytes), so that each check says exactly what
 * the reader is given: good files with their keys in any order, padded
 * headers, every dtype both formats know, scalars and empty tensors, cg's
 * manifest under "cg.json" and foreign metadata; then hostile ones, each
 * of which must fail with a message that names the file and says what is
 * wrong.  A cg file written as safetensors and read back must come back
 * with the same manifest, order and bytes.  Exit 0 pass, 1 fail.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cg.h"
#include "file/safetensors.h"

#define TEST_NAME "test_safetensors"
#include "check.h"

/* A file: 8-byte length of hdr, hdr, then data [ndata], into a new
 * buffer of *n bytes. */
static unsigned char *
build(const char *hdr, const void *data, size_t ndata, size_t *n)
{
	size_t h = strlen(hdr);
	unsigned char *b = xcalloc(8 + h + ndata, 1);

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)h >> (8 * i));
	memcpy(b + 8, hdr, h);
	if (ndata)
		memcpy(b + 8 + h, data, ndata);
	*n = 8 + h + ndata;
	return b;
}

/* hdr and data read: the file, or NULL with the message in cg_errmsg. */
static struct cg_file *
read_hdr(const char *hdr, const void *data, size_t ndata)
{
	size_t n;
	unsigned char *b = build(hdr, data, ndata, &n);
	struct cg_file *f = cg_safetensors_read_mem(b, n, "x.st");

	free(b);
	return f;
}

/* hdr and data [ndata] must be refused with a message that starts with
 * the file's name and holds want. */
static void
refused(const char *what, const char *hdr, size_t ndata, const char *want)
{
	unsigned char data[64] = {0};
	struct cg_file *f;

	if (ndata > sizeof(data))
		ndata = sizeof(data);
	f = read_hdr(hdr, data, ndata);
	CHECK(f == NULL, "%s: accepted", what);
	if (f == NULL)
		CHECK(strncmp(cg_errmsg(), "x.st: ", 6) == 0 &&
		          strstr(cg_errmsg(), want) != NULL,
		      "%s: message '%s' lacks '%s'", what, cg_errmsg(), want);
	cg_file_free(f);
}

/* ------------------------------------------------------------ good files */

static void
test_good(void)
{
	/* a: 2 f32, b: f16 1x2 before it in the buffer; keys in another
	 * order than the offsets, header padded */
	const float a[2] = {1.5f, -2};
	const uint16_t b[2] = {0x3c00, 0xc000}; /* 1, -2 */
	unsigned char data[12];
	struct cg_file *f;
	float out[2];

	memcpy(data, b, 4);
	memcpy(data + 4, a, 8);
	cg_le_words(data, 4, 2); /* a file's words are little-endian */
	cg_le_words(data + 4, 8, 4);
	f = read_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
	             "[4,12]},\"b\":{\"shape\":[1,2],\"dtype\":\"F16\","
	             "\"data_offsets\":[0,4]}}    ",
	             data, sizeof(data));
	expect(f != NULL, "a good file is read");
	if (f == NULL) {
		fprintf(stderr, "  %s\n", cg_errmsg());
		return;
	}
	CHECK(f->ntensors == 2, "%zu tensors", f->ntensors);
	CHECK(strcmp(f->tensors[0]->name, "b") == 0 &&
	          strcmp(f->tensors[1]->name, "a") == 0,
	      "not in offset order: %s %s", f->tensors[0]->name,
	      f->tensors[1]->name);
	CHECK(f->tensors[0]->dtype == CG_F16 && f->tensors[0]->ndim == 2 &&
	          f->tensors[0]->shape[0] == 1 && f->tensors[0]->shape[1] == 2,
	      "b: dtype or shape");
	CHECK(cg_tensor_to_f32(f->tensors[0], out) == 0 && out[0] == 1 &&
	          out[1] == -2,
	      "b: values %g %g", out[0], out[1]);
	CHECK(cg_tensor_to_f32(f->tensors[1], out) == 0 && out[0] == 1.5f &&
	          out[1] == -2,
	      "a: values %g %g", out[0], out[1]);
	CHECK(strcmp(cg_file_kind(f), "model") == 0, "kind '%s'",
	      cg_file_kind(f));
	CHECK(cJSON_GetObjectItem(f->manifest, "safetensors_metadata") == NULL,
	      "metadata made up");
	{
		unsigned char d[32];
		cg_sha256(d, data + 4, 8); /* of the file's bytes */
		CHECK(memcmp(d, f->tensors[1]->sha256, 32) == 0,
		      "a: digest not computed");
	}
	cg_file_free(f);
}

static void
test_dtypes(void)
{
	static const char *names[] = {"U8",   "I8",  "U16", "F16",
	                              "BF16", "U32", "F32", "U64"};
	static const enum cg_dtype want[] = {CG_U8,   CG_I8,  CG_U16, CG_F16,
	                                     CG_BF16, CG_U32, CG_F32, CG_U64};
	static const size_t size[] = {1, 1, 2, 2, 2, 4, 4, 8};
	unsigned char data[32] = {0};
	char hdr[256];

	for (int i = 0; i < 8; i++) {
		struct cg_file *f;
		/* 3 elements, then a scalar and an empty tensor at the end */
		snprintf(hdr, sizeof(hdr),
		         "{\"t\":{\"dtype\":\"%s\",\"shape\":[3],"
		         "\"data_offsets\":[0,%zu]},"
		         "\"s\":{\"dtype\":\"%s\",\"shape\":[],"
		         "\"data_offsets\":[%zu,%zu]},"
		         "\"e\":{\"dtype\":\"F32\",\"shape\":[2,0],"
		         "\"data_offsets\":[%zu,%zu]}}",
		         names[i], 3 * size[i], names[i], 3 * size[i],
		         4 * size[i], 4 * size[i], 4 * size[i]);
		f = read_hdr(hdr, data, 4 * size[i]);
		CHECK(f != NULL, "%s: refused: %s", names[i], cg_errmsg());
		if (f == NULL)
			continue;
		CHECK(f->ntensors == 3 && f->tensors[0]->dtype == want[i] &&
		          f->tensors[0]->nelem == 3 && f->tensors[1]->ndim == 0 &&
		          f->tensors[1]->nelem == 1 && f->tensors[2]->nelem == 0,
		      "%s: read wrong", names[i]);
		cg_file_free(f);
	}
	expect(1, "every dtype both formats know is read");
}

static void
test_metadata(void)
{
	struct cg_file *f;
	const cJSON *m;

	f = read_hdr("{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":"
	             "\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
	             "\x07", 1);
	m = f ? cJSON_GetObjectItem(f->manifest, "safetensors_metadata") : NULL;
	expect(m && cJSON_IsString(cJSON_GetObjectItem(m, "format")) &&
	           strcmp(cJSON_GetObjectItem(m, "format")->valuestring,
	                  "pt") == 0,
	       "foreign metadata is kept under safetensors_metadata");
	cg_file_free(f);

	/* cg's manifest: its fields, and its listing's order */
	f = read_hdr(
	    "{\"__metadata__\":{\"cg.json\":\"{\\\"format\\\":"
	    "\\\"cg/1\\\",\\\"kind\\\":\\\"grad\\\",\\\"step\\\":7}\"},"
	    "\"w\":{\"dtype\":\"U8\",\"shape\":[1],"
	    "\"data_offsets\":[0,1]}}",
	    "\x07", 1);
	expect(f && strcmp(cg_file_kind(f), "grad") == 0 &&
	           cg_json_u64(f->manifest, "step", 0) == 7,
	       "the manifest comes from cg.json");
	if (f == NULL)
		fprintf(stderr, "  %s\n", cg_errmsg());
	cg_file_free(f);
}

/* ------------------------------------------------------------- hostile */

#define W(DT, SH, OFF)                                                         \
	"\"w\":{\"dtype\":\"" DT "\",\"shape\":" SH ",\"data_offsets\":" OFF "}"

static void
test_hostile(void)
{
	size_t n;
	unsigned char *b;
	struct cg_file *f;

	/* shorter than the length field */
	f = cg_safetensors_read_mem("\x02\0\0", 3, "x.st");
	CHECK(f == NULL && strstr(cg_errmsg(), "x.st: truncated"),
	      "3 bytes: %s", cg_errmsg());
	/* a length past the end, and one over the limit */
	b = build("{}", NULL, 0, &n);
	b[0] = 3;
	f = cg_safetensors_read_mem(b, n, "x.st");
	CHECK(f == NULL && strstr(cg_errmsg(), "past the end of the file"),
	      "length past the end: %s", cg_errmsg());
	b[0] = 0x01, b[1] = 0xe1, b[2] = 0xf5, b[3] = 0x05; /* 100000001 */
	f = cg_safetensors_read_mem(b, n, "x.st");
	CHECK(f == NULL && strstr(cg_errmsg(), "header of 100000001 bytes"),
	      "header over 100 MB: %s", cg_errmsg());
	b[7] = 0xff;
	f = cg_safetensors_read_mem(b, n, "x.st");
	CHECK(f == NULL && strstr(cg_errmsg(), "at most 100000000"),
	      "absurd header length: %s", cg_errmsg());
	free(b);
	f = read_hdr("{}", NULL, 0);
	CHECK(f != NULL && f->ntensors == 0,
	      "a header without tensors is read");
	cg_file_free(f);

	refused("not JSON", "{\"w\":", 0, "not a JSON object");
	refused("an array", "[1, 2]", 0, "not a JSON object");
	refused("a string", "\"{}\"", 0, "not a JSON object");
	refused("bytes after", "{} x", 0, "bytes after the JSON object");
	refused("two objects", "{}{}", 0, "bytes after the JSON object");
	refused("not an object", "{\"w\":[1]}", 0, "tensor w: not an object");
	refused("no dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
	        "tensor w: no dtype");
	refused("unknown dtype", "{" W("F33", "[1]", "[0,4]") "}", 4,
	        "tensor w: unknown dtype 'F33'");
	refused("F64", "{" W("F64", "[1]", "[0,8]") "}", 8,
	        "tensor w: dtype F64 has no cg equivalent");
	refused("I64", "{" W("I64", "[1]", "[0,8]") "}", 8,
	        "dtype I64 has no cg equivalent");
	refused("length", "{" W("F32", "[3]", "[0,8]") "}", 8,
	        "tensor w: 8 bytes, but dtype and shape make 12");
	refused("past the end", "{" W("F32", "[4]", "[0,16]") "}", 8,
	        "tensor w: data_offsets [0, 16] past the end of the file");
	refused("backwards", "{" W("U8", "[0]", "[8,0]") "}", 8,
	        "run backwards");
	refused("trailing bytes", "{" W("U8", "[4]", "[0,4]") "}", 6,
	        "bytes after the last tensor's data (2)");
	refused("a gap first", "{" W("U8", "[4]", "[2,6]") "}", 6,
	        "tensor w: a gap of 2 bytes before its data");
	refused("a gap",
	        "{" W("U8", "[4]",
	              "[0,4]") ",\"v\":{\"dtype\":"
	                       "\"U8\",\"shape\":[2],\"data_offsets\":[6,8]}}",
	        8, "tensor v: a gap of 2 bytes");
	refused("overlap",
	        "{" W("U8", "[4]",
	              "[0,4]") ",\"v\":{\"dtype\":"
	                       "\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
	        6, "tensor v: data_offsets [2, 6] overlap tensor w");
	refused("the same bytes twice",
	        "{" W("U8", "[4]", "[0,4]") ",\"v\":"
	                                    "{\"dtype\":\"U8\",\"shape\":[4],"
	                                    "\"data_offsets\":[0,4]}}",
	        4, "overlap tensor");
	refused("duplicate names",
	        "{" W("U8", "[2]", "[0,2]") "," W("U8", "[2]", "[2,4]") "}", 4,
	        "tensor w: defined twice");
	refused("overflowing shape",
	        "{" W("F32", "[4294967296,4294967296,4294967296]", "[0,4]") "}",
	        4, "tensor w: shape overflows");
	refused("shape times size overflows",
	        "{" W("U64", "[4294967296,4294967296]", "[0,4]") "}", 4,
	        "tensor w: shape overflows");
	refused("a dimension past 2^53",
	        "{" W("U8", "[9007199254740994]", "[0,4]") "}", 4,
	        "tensor w: bad shape");
	refused("a dimension of 1e300", "{" W("U8", "[1e300]", "[0,4]") "}", 4,
	        "tensor w: bad shape");
	refused("a negative dimension", "{" W("U8", "[-1]", "[0,4]") "}", 4,
	        "tensor w: bad shape");
	refused("a fractional dimension", "{" W("U8", "[1.5]", "[0,4]") "}", 4,
	        "tensor w: bad shape");
	refused("nine dimensions",
	        "{" W("U8", "[1,1,1,1,1,1,1,1,1]", "[0,1]") "}", 1,
	        "9 dimensions (at most 8)");
	refused("a string dimension", "{" W("U8", "[\"1\"]", "[0,1]") "}", 1,
	        "tensor w: bad shape");
	refused("an offset past 2^53",
	        "{" W("U8", "[0]",
	              "[18446744073709551615,"
	              "18446744073709551615]") "}",
	        0, "tensor w: bad data_offsets");
	refused("three offsets", "{" W("U8", "[1]", "[0,1,1]") "}", 1,
	        "tensor w: bad data_offsets");
	refused("a bad name",
	        "{\"a/b\":{\"dtype\":\"U8\",\"shape\":[1],"
	        "\"data_offsets\":[0,1]}}",
	        1, "bad tensor name");
	refused("metadata not strings", "{\"__metadata__\":{\"k\":1}}", 0,
	        "__metadata__: the value of 'k' is not a string");
	refused("metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}",
	        0, "__metadata__ given twice");
	refused("cg.json not JSON", "{\"__metadata__\":{\"cg.json\":\"{\"}}", 0,
	        "cg.json in __metadata__: not valid JSON");
	refused("cg.json of another format",
	        "{\"__metadata__\":{\"cg.json\":\"{\\\"format\\\":\\\"x\\\","
	        "\\\"kind\\\":\\\"model\\\"}\"}}",
	        0, "cg.json: unsupported format");
	refused("cg.json listing another tensor",
	        "{\"__metadata__\":{\"cg.json\":\"{\\\"format\\\":\\\"cg/1\\\","
	        "\\\"kind\\\":\\\"model\\\",\\\"tensors\\\":[{\\\"name\\\":"
	        "\\\"v\\\"}]}\"}," W("U8", "[1]", "[0,1]") "}",
	        1, "tensor v: in cg.json, not in the header");
	refused("cg.json listing too few",
	        "{\"__metadata__\":{\"cg.json\":\"{\\\"format\\\":\\\"cg/1\\\","
	        "\\\"kind\\\":\\\"model\\\",\\\"tensors\\\":[]}\"}," W(
	            "U8", "[1]", "[0,1]") "}",
	        1, "cg.json: lists 0 tensors, the header 1");
	{
		/* a value bomb: 2 MB of "[0,0,..." would be 80 MB of cJSON;
		 * as many commas inside a string are no values */
		size_t nv = 16u * CG_MAX_TENSORS + 1;
		char *bomb = xcalloc(2 * nv + 64, 1), *p = bomb;

		p += sprintf(p, "{\"x\":[0");
		for (size_t i = 1; i < nv; i++)
			p += sprintf(p, ",0");
		strcpy(p, "]}");
		refused("a value bomb", bomb, 0,
		        "header: more than 1048576 JSON values");
		p = bomb + sprintf(bomb, "{\"__metadata__\":{\"k\":\"");
		for (size_t i = 0; i < nv; i++)
			*p++ = ',';
		strcpy(p, "\"}}");
		f = read_hdr(bomb, NULL, 0);
		CHECK(f != NULL, "commas in a string counted: %s", cg_errmsg());
		cg_file_free(f);
		free(bomb);
	}
	expect(failures == 0, "every hostile header is refused, by name");
}

/* ------------------------------------------------------------ round trip */

static struct cg_file *
sample(void)
{
	struct cg_file *f = cg_file_new("model");
	float w[64];
	uint16_t h[3] = {0x3c00, 0x8000, 0x7c00}, bf[2] = {0x3f80, 0xff80};

	for (int i = 0; i < 64; i++)
		w[i] = (float)(i - 20) / 8;
	cJSON_AddStringToObject(f->manifest, "arch", "cvae");
	cJSON_AddNumberToObject(f->manifest, "step", 12);
	/* manifest order on purpose neither by name nor by dtype */
	if (!cg_file_add(f, "z.w", CG_F32, 2, (uint64_t[]){4, 16}, w) ||
	    !cg_file_add(f, "b.h", CG_F16, 1, (uint64_t[]){3}, h) ||
	    !cg_file_add(f, "a.bf", CG_BF16, 2, (uint64_t[]){1, 2}, bf) ||
	    !cg_file_add(f, "mask", CG_U8, 1, (uint64_t[]){3}, "\1\0\1") ||
	    !cg_file_add(f, "s", CG_F32, 0, NULL, w + 3) ||
	    !cg_file_add_zero(f, "empty", CG_F32, 1, (uint64_t[]){0}))
		die("sample");
	return f;
}

static unsigned char *
slurp(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	unsigned char *b = NULL;
	long len;

	if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0)
		die(path);
	rewind(fp);
	b = xcalloc((size_t)len, 1);
	if (fread(b, 1, (size_t)len, fp) != (size_t)len)
		die(path);
	fclose(fp);
	*n = (size_t)len;
	return b;
}

static void
test_round_trip(const char *dir)
{
	char p1[512], p2[512], p3[512], p4[512];
	struct cg_file *f = sample(), *g, *q;
	unsigned char *a, *b;
	size_t na, nb;
	const struct cg_format *st = NULL;

	snprintf(p1, sizeof(p1), "%s/a.cgm", dir);
	snprintf(p2, sizeof(p2), "%s/a.safetensors", dir);
	snprintf(p3, sizeof(p3), "%s/b.cgm", dir);
	snprintf(p4, sizeof(p4), "%s/q.safetensors", dir);
	if (cg_file_write(f, p1, CG_COMPRESS_NONE) != 0 ||
	    cg_safetensors_write(f, p2) != 0)
		die("write");
	if ((g = cg_read_any(p2, &st)) == NULL)
		die("read back");
	expect(st == &cg_format_safetensors,
	       "cg_read_any tells a safetensors file");
	CHECK(g->ntensors == f->ntensors, "%zu tensors", g->ntensors);
	for (size_t i = 0; i < g->ntensors && i < f->ntensors; i++)
		CHECK(strcmp(g->tensors[i]->name, f->tensors[i]->name) == 0 &&
		          g->tensors[i]->dtype == f->tensors[i]->dtype &&
		          g->tensors[i]->nbytes == f->tensors[i]->nbytes &&
		          memcmp(g->tensors[i]->data, f->tensors[i]->data,
		                 f->tensors[i]->nbytes) == 0,
		      "tensor %zu (%s) came back different", i,
		      f->tensors[i]->name);
	CHECK(cJSON_Compare(f->manifest, g->manifest, 1),
	      "the manifest came back different");
	if (cg_file_write(g, p3, CG_COMPRESS_NONE) != 0)
		die("write again");
	a = slurp(p1, &na);
	b = slurp(p3, &nb);
	expect(na == nb && memcmp(a, b, na) == 0,
	       "cg -> safetensors -> cg gives the same bytes");
	free(a);
	free(b);
	cg_file_free(g);

	/* the reference writer's layout: widest dtype first, then names;
	 * the header padded to a multiple of 8 */
	a = slurp(p2, &na);
	{
		uint64_t h = 0;
		const char *hdr = (const char *)a + 8, *zw, *s, *bh, *abf, *m;
		for (int i = 7; i >= 0; i--)
			h = h << 8 | a[i];
		CHECK(h % 8 == 0 && h <= na - 8, "header length %llu",
		      (unsigned long long)h);
		zw = strstr(hdr, "\"z.w\":{\"dtype\":\"F32\",\"shape\":[4,16],"
		                 "\"data_offsets\":[");
		s = strstr(hdr, "\"s\":{");
		abf = strstr(hdr, "\"a.bf\":{\"dtype\":\"BF16\"");
		bh = strstr(hdr, "\"b.h\":{\"dtype\":\"F16\"");
		m = strstr(hdr, "\"mask\":{\"dtype\":\"U8\"");
		CHECK(strncmp(hdr, "{\"__metadata__\":{\"cg.json\":\"{", 29) ==
		          0,
		      "metadata not first");
		CHECK(zw && s && abf && bh && m &&
		          strstr(hdr, "\"empty\":{") < s && s < zw &&
		          zw < abf && abf < bh && bh < m,
		      "tensors not in the reference writer's order");
	}
	free(a);

	/* q8_0 goes out as f32, and the manifest says so */
	q = sample();
	{
		float x[32];
		struct cg_tensor *t;
		for (int i = 0; i < 32; i++)
			x[i] = (float)i / 4;
		t = cg_file_add_zero(q, "q", CG_Q8_0, 1, (uint64_t[]){32});
		if (t == NULL || cg_codec(CG_Q8_0)->encode(t->data, x, 32) != 0)
			die("q8_0");
		if (cg_safetensors_write(q, p4) != 0 ||
		    (g = cg_read_any(p4, NULL)) == NULL)
			die("q8_0 round trip");
		t = cg_file_find(g, "q");
		expect(t && t->dtype == CG_F32 && t->nelem == 32,
		       "q8_0 is written as f32");
		cg_file_free(g);
	}
	cg_file_free(q);

	/* altered after writing: the digests in cg.json catch it */
	a = slurp(p2, &na);
	a[na - 1] ^= 1; /* in mask, the last tensor of the buffer */
	g = cg_safetensors_read_mem(a, na, "alt");
	CHECK(g == NULL && strstr(cg_errmsg(), "digest mismatch"),
	      "altered data accepted (%s)", g ? "read" : cg_errmsg());
	cg_file_free(g);
	free(a);
	cg_file_free(f);
}

/* The reader given a pipe with its first bytes already taken. */
static void
test_pipe(void)
{
	size_t n;
	unsigned char *b =
	    build("{" W("U8", "[3]", "[0,3]") "}  ", "abc", 3, &n);
	struct cg_file *f;
	int fd[2];

	if (pipe(fd) != 0 || write(fd[1], b + 9, n - 9) != (ssize_t)(n - 9))
		die("pipe");
	close(fd[1]);
	f = cg_safetensors_read_fd(fd[0], "(stdin)", b, 9);
	expect(f && f->ntensors == 1 &&
	           memcmp(f->tensors[0]->data, "abc", 3) == 0,
	       "a pipe is read, its first bytes handed over");
	close(fd[0]);
	cg_file_free(f);

	/* a pipe that claims a header over the limit stops at once */
	b[4] = 1;
	if (pipe(fd) != 0 || write(fd[1], b + 9, n - 9) != (ssize_t)(n - 9))
		die("pipe");
	f = cg_safetensors_read_fd(fd[0], "(stdin)", b, 9);
	CHECK(f == NULL && strstr(cg_errmsg(), "(stdin): header of"),
	      "a huge header on a pipe: %s", f ? "read" : cg_errmsg());
	close(fd[0]);
	close(fd[1]);
	cg_file_free(f);
	free(b);
}

static void
test_probe(void)
{
	expect(cg_safetensors_probe("\x02\0\0\0\0\0\0\0{}", 10) &&
	           !cg_safetensors_probe("cg.json\0\0\0\0", 11) &&
	           !cg_safetensors_probe("\x1f\x8b\x08\0\0\0\0\0{", 9) &&
	           !cg_safetensors_probe("\x28\xb5\x2f\xfd\0\0\0\0{", 9) &&
	           !cg_safetensors_probe("\x02\0\0\0\0\0\0\0", 8),
	       "the probe tells safetensors from cg files");
}

int
main(void)
{
	char dir[] = "/tmp/cgst.XXXXXX";
	char cmd[64];

	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	test_probe();
	test_good();
	test_dtypes();
	test_metadata();
	test_hostile();
	test_pipe();
	test_round_trip(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, TEST_NAME ": could not remove %s\n", dir);
	return failures ? 1 : 0;
}
