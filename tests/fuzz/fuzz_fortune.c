/*
 * fuzz_fortune.c - libFuzzer target: a directory of fortune files.
 *
 * The input is cut at NUL bytes into at most 8 files; each file's first
 * line is its name (a condition name: the reader checks it; one the file
 * system cannot hold is replaced by "f" and the file's number), the rest
 * its text.  The files are written to a directory of their own under
 * $TMPDIR (a tmpfs is best: the reader takes a directory; it is removed
 * at exit) and read as cg-shard reads fortunes; a lone file is also read
 * as one file.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "data/dataset.h"
#include "data/text.h"
#include "fuzz.h"

#define MAXFILES 8

static char dir[256];

/* Remove every file of the directory. */
static void
clean(void)
{
	DIR *dp = opendir(dir);
	struct dirent *e;

	if (dp == NULL)
		abort();
	while ((e = readdir(dp)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			unlinkat(dirfd(dp), e->d_name, 0);
	closedir(dp);
}

/* The directory and its files gone at exit. */
static void
remove_dir(void)
{
	clean();
	rmdir(dir);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	char name[300], path[600], one[600] = "";
	struct cg_dataset d;
	int nfiles = 0;

	if (dir[0] == '\0') {
		const char *tmp = getenv("TMPDIR");
		snprintf(dir, sizeof(dir), "%s/cg-fuzz-fortune.XXXXXX",
		         tmp && *tmp ? tmp : "/tmp");
		if (mkdtemp(dir) == NULL)
			abort();
		atexit(remove_dir);
	}
	clean();
	while (p < end && nfiles < MAXFILES) {
		const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
		const uint8_t *stop = nul ? nul : end;
		const uint8_t *nl = memchr(p, '\n', (size_t)(stop - p));
		const uint8_t *text = nl ? nl + 1 : stop;
		size_t k = (size_t)((nl ? nl : stop) - p);
		int fd;

		if (k == 0 || k > 200 || memchr(p, '/', k) ||
		    (k == 1 && p[0] == '.') ||
		    (k == 2 && p[0] == '.' && p[1] == '.'))
			snprintf(name, sizeof(name), "f%d", nfiles);
		else
			snprintf(name, sizeof(name), "%.*s", (int)k, p);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0)
			abort();
		if (write(fd, text, (size_t)(stop - text)) !=
		    (ssize_t)(stop - text))
			abort();
		close(fd);
		snprintf(one, sizeof(one), "%s", path);
		nfiles++;
		p = nul ? nul + 1 : end;
	}
	struct cg_text_options o = {.format = CG_TEXT_FORTUNES};
	if (cg_text_load(dir, &o, &d) == 0)
		cg_dataset_free(&d);
	if (nfiles == 1 && cg_text_load(one, &o, &d) == 0)
		cg_dataset_free(&d);
	/* streamed: the entries are read again from their files */
	o.stream = 1;
	if (cg_text_load(dir, &o, &d) == 0) {
		uint8_t *buf = malloc(d.offset[d.n] + 1);
		for (uint64_t i = 0; buf && i < d.n; i++)
			if (d.fetch(d.fetch_ctx, i, buf) != 0)
				abort(); /* nothing changed them */
		free(buf);
		cg_dataset_free(&d);
	}
	return 0;
}
