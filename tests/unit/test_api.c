/*
 * test_api.c - the public interface of libcg (include/cg/), as a program
 * outside cg calls it: a file made, written in each compression, read
 * back to the same values and manifest; every argument out of range a
 * message and -1 (or NULL), never a crash; a model saved, read back,
 * and refused what it cannot do.  tests/078-libcg.bats runs the same
 * interface through the installed shared library.  Exit 0 pass, 1 fail.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cg/cg.h>
#include <config.h>

#include "model/model.h"

#define TEST_NAME "test_api"
#include "check.h"

/* Whether the last message contains s. */
static int
said(const char *s)
{
	return strstr(cg_errmsg(), s) != NULL;
}

static void
test_file(const char *dir)
{
	static const char *const zs[] = {NULL, "none", "gzip", "zstd"};
	float w[6] = {1, -2, 3.5f, 4, 5, 6}, back[6];
	uint64_t shape[2] = {2, 3}, got[8];
	char path[512];
	struct cg_file *f = cg_file_new("model");
	const void *raw;
	size_t n;
	char *json;

	if (f == NULL)
		die("cg_file_new");
	expect(cg_file_add_f32(f, "w", 2, shape, w) == 0, "add a 2x3 tensor");
	expect(cg_file_add_f32(f, "w", 2, shape, w) == -1 && said("twice"),
	       "a name taken twice is refused");
	expect(cg_file_add_f32(f, "../x", 2, shape, w) == -1 &&
	           said("bad tensor name"),
	       "a name with a slash is refused");
	expect(cg_file_add_f32(f, "v", 0, shape, w) == -1 &&
	           cg_file_add_f32(f, "v", 9, shape, w) == -1,
	       "0 or 9 dimensions are refused");
	expect(cg_file_set_number(f, "step", 7) == 0, "set the step");
	expect(cg_file_set_number(f, "kind", 7) == -1 &&
	           cg_file_set_number(f, "", 7) == -1,
	       "kind and an empty key are the library's");
	expect(cg_file_save(f, "x.cgm", "lz4") == -1 && said("lz4"),
	       "an unknown compression is refused");
	for (int z = 0; z < 4; z++) {
		struct cg_file *g;

		snprintf(path, sizeof(path), "%s/w%d.cgm", dir, z);
		if (cg_file_save(f, path, zs[z]) != 0)
			die(path);
		if ((g = cg_file_read(path)) == NULL)
			die(path);
		expect(strcmp(cg_file_kind(g), "model") == 0 &&
		           cg_file_ntensors(g) == 1,
		       "read back: the kind and one tensor");
		expect(strcmp(cg_file_tensor_name(g, 0), "w") == 0 &&
		           strcmp(cg_file_tensor_dtype(g, 0), "f32") == 0,
		       "read back: its name and dtype");
		expect(cg_file_tensor_shape(g, 0, got, 8) == 2 && got[0] == 2 &&
		           got[1] == 3,
		       "read back: its shape");
		raw = cg_file_tensor_data(g, 0, &n);
		expect(raw && n == sizeof(w) && memcmp(raw, w, n) == 0,
		       "read back: its bytes");
		expect(cg_file_tensor_f32(g, 0, back, 6) == 0 &&
		           memcmp(back, w, sizeof(w)) == 0,
		       "read back: its values");
		expect(cg_file_tensor_f32(g, 0, back, 5) == -1 &&
		           said("6 elements"),
		       "a wrong element count is refused");
		expect(cg_file_tensor_name(g, 1) == NULL &&
		           cg_file_tensor_dtype(g, 1) == NULL &&
		           cg_file_tensor_shape(g, 1, got, 8) == -1 &&
		           cg_file_tensor_data(g, 1, &n) == NULL &&
		           cg_file_tensor_f32(g, 1, back, 6) == -1 &&
		           said("no such tensor"),
		       "tensor 1 of one is refused by every accessor");
		if ((json = cg_file_manifest_json(g)) == NULL)
			die("cg_file_manifest_json");
		cJSON *m = cJSON_Parse(json);
		cJSON *t = cJSON_GetObjectItem(m, "tensors");
		expect(m && cJSON_GetObjectItem(m, "step") &&
		           cJSON_GetObjectItem(m, "step")->valuedouble == 7 &&
		           cJSON_GetArraySize(t) == 1,
		       "its manifest: the step and the tensor");
		cJSON_Delete(m);
		free(json);
		cg_file_free(g);
	}
	cg_file_free(f);
	cg_file_free(NULL);

	/* a kind no reader takes is not written */
	f = cg_file_new("picture");
	snprintf(path, sizeof(path), "%s/p.cgm", dir);
	expect(f && cg_file_save(f, path, NULL) == -1 && said("picture"),
	       "an unknown kind is not written");
	cg_file_free(f);
	expect(cg_file_read(path) == NULL && said("p.cgm"),
	       "and nothing is left under its name");
	expect(cg_file_ntensors(NULL) == 0, "a NULL file has no tensors");
}

static void
test_model(const char *dir)
{
	cJSON *cfg = cJSON_CreateObject();
	struct cg_model *m, *r;
	char path[512], buf[16];
	int shape[3];
	float img[1];
	double loss;

	cJSON_AddNumberToObject(cfg, "ncond", 3);
	cJSON_AddNumberToObject(cfg, "context", 16);
	cJSON_AddNumberToObject(cfg, "width", 16);
	cJSON_AddNumberToObject(cfg, "layers", 1);
	cJSON_AddNumberToObject(cfg, "heads", 2);
	cJSON_AddNumberToObject(cfg, "tied", 0);
	if ((m = cg_model_create("cgpt", cfg, NULL, 5)) == NULL)
		die("cg_model_create");
	snprintf(path, sizeof(path), "%s/m.cgm", dir);
	if (cg_model_save(m, path) != 0 || (r = cg_model_read(path)) == NULL)
		die(path);
	expect(strcmp(cg_model_arch(r), "cgpt") == 0 && cg_model_step(r) == 0 &&
	           cg_model_nparams(r) == cg_model_nparams(m) &&
	           cg_model_nparams(r) > 0,
	       "a model saved and read back: its arch, step, parameters");
	expect(cg_model_image_shape(r, shape) == -1 && said("text"),
	       "a text model has no image shape");
	expect(cg_model_sample_images(r, 0, 1, 1, 1, img) == -1 && said("text"),
	       "and draws no images");
	expect(cg_model_sample_text(r, 3, NULL, 1, 1, buf, sizeof(buf)) == -1 &&
	           cg_model_sample_text(r, -1, NULL, 1, 1, buf, sizeof(buf)) ==
	               -1,
	       "a condition out of range is refused");
	expect(cg_model_sample_text(r, 0, NULL, -1, 1, buf, sizeof(buf)) ==
	               -1 &&
	           cg_model_sample_text(r, 0, NULL, 1, 1, NULL, 4) == -1,
	       "a negative temperature or no buffer is refused");
	long k = cg_model_sample_text(r, 2, "ab", 0, 1, buf, sizeof(buf));
	expect(k >= 0 && k <= 15 && buf[k] == '\0',
	       "a text of at most 15 bytes in 16, then a NUL");
	k = cg_model_sample_text(r, 2, "ab", 0, 1, buf, 4);
	expect(k >= 0 && k <= 3 && buf[k] == '\0',
	       "a text of at most 3 bytes in 4, then a NUL");
	expect(cg_model_sample_text(r, 2, "ab", 0, 1, buf, 1) == 0 &&
	           buf[0] == '\0',
	       "a buffer of one byte holds the empty text");
	expect(cg_model_train(r, NULL, 0, 8, NULL, 0, 1, &loss) == -1 &&
	           cg_model_train(r, NULL, 1, 0, NULL, 0, 1, &loss) == -1,
	       "no steps or no batch is refused");
	expect(cg_model_train(r, NULL, 1, 8, "adagrad", 0, 1, &loss) == -1 &&
	           said("adagrad"),
	       "an unknown optimizer is refused");
	expect(cg_model_train(r, NULL, 1, 8, NULL, -1, 1, &loss) == -1,
	       "a negative learning rate is refused");
	expect(cg_model_step(r) == 0, "and none of them trained");
	cg_model_free(r);
	cg_model_free(m);
	cg_model_free(NULL);
	cg_shard_free(NULL);
	expect(cg_shard_open(path) == NULL && said("m.cgm"),
	       "a model is not a shard");
	expect(cg_shard_examples(NULL) == 0, "a NULL shard has no examples");
}

int
main(void)
{
	char dir[] = "/tmp/cgtest.XXXXXX", cmd[600];

	if (mkdtemp(dir) == NULL)
		return 1;
	expect(strcmp(cg_version(), VERSION) == 0, "cg_version");
	test_file(dir);
	test_model(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		failures++;
	printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
