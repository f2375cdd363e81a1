/*
 * file/format.h - the formats a cg file can be read from and written as,
 * one row each, told apart by their first bytes: the cg container
 * (file/container.h) and safetensors (file/safetensors.h), as libarchive
 * registers its formats.
 *
 * A format is one file defining a `const struct cg_format` row and one
 * X(NAME) in file/format.c's list; the programs that read any format
 * (cg-convert, cg-inspect, cg-quantize) then read it, and cg-convert
 * writes it.  A test's format joins with cg_format_register().
 */
#ifndef CG_FORMAT_H
#define CG_FORMAT_H

#include <stddef.h>

#include "file/container.h"

struct cg_format {
	const char *name; /* in messages: "a NAME file" */
	/*
	 * Whether buf [n], the first n bytes of a file (n at least
	 * probe_bytes when the file has that many), begin a file of this
	 * format: 1 or 0.  NULL: the format of every file no other row
	 * claims (the cg container, last).
	 */
	size_t probe_bytes;
	int (*probe)(const void *buf, size_t n);
	/* Read fd as this format, its first npre bytes already read into
	 * pre (npre 0: none; fd is then at the start).  A new file, or
	 * NULL with a message starting "display: ". */
	struct cg_file *(*read_fd)(int fd, const char *display,
	                           const void *pre, size_t npre);
	/* Write f to path ("-": stdout) atomically, compressed by c if
	 * compresses.  0, or -1 with a message. */
	int (*write)(struct cg_file *f, const char *path, enum cg_compress c);
	int compresses; /* write honours --compress */
	int signs;      /* the file carries cg's signature */
};

/* The cg container's row. */
extern const struct cg_format cg_format_cg;

/* The rows: the registered ones, then the built-in ones, the cg
 * container last.  i in [0, cg_format_count()); NULL outside. */
int cg_format_count(void);
const struct cg_format *cg_format_at(int i);
/* The row called name, or NULL with a message. */
const struct cg_format *cg_format_find(const char *name);
/* Add a format (a test's); it is probed before the built-in ones.
 * 0, or -1 with a message (a name taken, no probe, a field missing, the
 * table full). */
int cg_format_register(const struct cg_format *f);

/*
 * Read path ("-": standard input) in whichever format its first bytes
 * say, and *fmt (when not NULL) says which, also on failure (NULL where
 * the file could not be opened).  A file of a format without signatures
 * is refused while a trust list is in force (cg_trust_active).  Returns
 * a new file, or NULL with a message naming the file.
 */
struct cg_file *cg_read_any(const char *path, const struct cg_format **fmt);

#endif
