/*
 * file/format.c - the table of file formats, and reading a file in
 * whichever one its first bytes say.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "file/format.h"
#include "file/sign.h"

/* The built-in formats, probed in this order; the cg container, which
 * claims what no other does, is last. */
#define CG_FORMATS X(safetensors) X(cg)

#define X(name) extern const struct cg_format cg_format_##name;
CG_FORMATS
#undef X

#define X(name) &cg_format_##name,
static const struct cg_format *const table[] = {CG_FORMATS};
#undef X

#define NTABLE ((int)(sizeof(table) / sizeof(table[0])))
#define MAX_REGISTERED 8
#define MAX_PROBE 64 /* bytes any probe may ask for */

static const struct cg_format *registered[MAX_REGISTERED];
static int nregistered;

int
cg_format_count(void)
{
	return nregistered + NTABLE;
}

const struct cg_format *
cg_format_at(int i)
{
	if (i < 0 || i >= cg_format_count())
		return NULL;
	return i < nregistered ? registered[i] : table[i - nregistered];
}

const struct cg_format *
cg_format_find(const char *name)
{
	for (int i = 0; i < cg_format_count(); i++)
		if (strcmp(cg_format_at(i)->name, name) == 0)
			return cg_format_at(i);
	cg_seterr("unknown file format '%.32s'", name);
	return NULL;
}

int
cg_format_register(const struct cg_format *f)
{
	if (f == NULL || f->name == NULL || f->probe == NULL ||
	    f->read_fd == NULL || f->write == NULL ||
	    f->probe_bytes == 0 || f->probe_bytes > MAX_PROBE)
		return cg_seterr("a file format needs a name, a probe of at "
		                 "most %d bytes, read_fd and write",
		                 MAX_PROBE);
	for (int i = 0; i < cg_format_count(); i++)
		if (strcmp(cg_format_at(i)->name, f->name) == 0)
			return cg_seterr("file format %s: the name is taken",
			                 f->name);
	if (nregistered == MAX_REGISTERED)
		return cg_seterr("file format %s: the table is full", f->name);
	registered[nregistered++] = f;
	return 0;
}

/* The row whose probe claims pre [n]: the first, else the cg
 * container's. */
static const struct cg_format *
which(const unsigned char *pre, size_t n)
{
	for (int i = 0; i < cg_format_count(); i++) {
		const struct cg_format *f = cg_format_at(i);
		if (f->probe && f->probe(pre, n))
			return f;
	}
	return &cg_format_cg;
}

struct cg_file *
cg_read_any(const char *path, const struct cg_format **fmt)
{
	const char *display = strcmp(path, "-") == 0 ? "(stdin)" : path;
	unsigned char pre[MAX_PROBE];
	const struct cg_format *f;
	struct cg_file *file;
	struct stat st;
	size_t want = 0, got = 0;
	int fd = STDIN_FILENO;

	if (fmt)
		*fmt = NULL;
	for (int i = 0; i < cg_format_count(); i++)
		if (cg_format_at(i)->probe_bytes > want)
			want = cg_format_at(i)->probe_bytes;
	if (strcmp(path, "-") != 0 && (fd = open(path, O_RDONLY)) < 0) {
		cg_seterr("%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		/* a file is looked at where it is, and read from there */
		off_t pos = lseek(fd, 0, SEEK_CUR);
		ssize_t r = pos < 0 ? -1 : pread(fd, pre, want, pos);
		f = which(pre, r > 0 ? (size_t)r : 0);
		file = f->read_fd(fd, display, NULL, 0);
	} else {
		while (got < want) {
			ssize_t r = read(fd, pre + got, want - got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		f = which(pre, got);
		file = f->read_fd(fd, display, pre, got);
	}
	if (fd != STDIN_FILENO)
		close(fd);
	if (file && !f->signs && cg_trust_active() != 0) {
		if (cg_trust_active() > 0)
			cg_seterr("%s: a %s file: unsigned (a trust list is in "
			          "force)",
			          display, f->name);
		cg_file_free(file);
		file = NULL;
	}
	if (fmt)
		*fmt = f;
	return file;
}
