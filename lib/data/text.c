/*
 * data/text.c - reading text datasets: fortune files, JSON Lines and TSV.
 *
 * Each reader turns its input into a struct cg_dataset of kind text, one
 * example per entry or record, with the entry's bytes kept exactly (see
 * cg_text_load in shard.h for the formats).  Input is hostile: lines are
 * read through a bounded buffer, so a file without newlines costs no more
 * memory than the --max-entry cap allows; the payload grows only as data
 * arrives and is capped by cg_max_bytes(); condition names are checked as
 * cg_dataset_set_conditions checks them, with the line that brought them.
 * Files are read through zlib, so JSON Lines and TSV may be gzip streams.
 * Read whole, everything is in memory, and the dataset must fit in RAM
 * once.  Streamed (cg_text_options.stream), only each example's
 * condition, length and place in its input are kept (about 40 bytes an
 * example), and its bytes are read again when a shard is written
 * (data/reread.h: a gzip input is decompressed again, standard input is
 * copied to a temporary file first): a record decoded from its line
 * again, a fortune taken as it lies in its file, where an entry is
 * always one run of bytes (its lines but the last newline).
 *
 * JSON Lines records are validated by cJSON, but their strings are taken
 * from the line by a small scanner of our own: cJSON hands out strings as
 * C strings, which would silently cut a text at an escaped NUL (\u0000).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "data/reread.h"
#include "data/text.h"

#define RD_CHUNK (1u << 16)
/* Room for the keys and other members of a JSON Lines record, beyond its
 * escaped strings. */
#define JSONL_SLACK (64u << 10)
/* Escapes make a JSON string at most 6 times (\u00XX) and a TSV field at
 * most twice as long as the bytes they stand for. */
#define JSONL_EXPAND 6
#define TSV_EXPAND 2

/* ---------------------------------------------------------------- lines */

/* A growable byte buffer; p is NUL-terminated after each line read. */
struct buf {
	unsigned char *p;
	size_t len, cap;
};

static int
buf_reserve(struct buf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 256;
	unsigned char *p;

	if (need <= b->cap)
		return 0;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : 2 * cap;
	if ((p = realloc(b->p, cap)) == NULL)
		return cg_seterr("out of memory");
	b->p = p;
	b->cap = cap;
	return 0;
}

/* An input file, read in chunks through zlib (plain or gzip). */
struct rd {
	gzFile gz;
	const char *name; /* for messages */
	unsigned char *chunk;
	size_t pos, len;
	int eof;
	uint64_t lineno; /* of the line last returned */
	uint64_t base;   /* bytes of the input before chunk */
	uint64_t start;  /* the input offset of the line last returned */
};

/* Open fd (taken: closed on failure too) as the input name. */
static int
rd_open_fd(struct rd *r, int fd, const char *name)
{
	struct stat st;

	memset(r, 0, sizeof(*r));
	r->name = name;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return cg_seterr("%s: is a directory", name);
	}
	if ((r->chunk = malloc(RD_CHUNK)) == NULL ||
	    (r->gz = gzdopen(fd, "rb")) == NULL) {
		free(r->chunk);
		r->chunk = NULL;
		close(fd);
		return cg_seterr("%s: out of memory", name);
	}
	return 0;
}

/* Open path ("-": standard input), or where rr is not NULL, rr's input
 * from its start. */
static int
rd_open(struct rd *r, const char *path, const char *name, struct cg_reread *rr)
{
	int fd;

	if (rr) {
		memset(r, 0, sizeof(*r));
		if ((fd = cg_reread_fd(rr)) < 0)
			return -1;
	} else {
		fd = strcmp(path, "-") == 0 ? dup(STDIN_FILENO)
		                            : open(path, O_RDONLY);
		if (fd < 0) {
			memset(r, 0, sizeof(*r));
			return cg_seterr("%s: %s", name, strerror(errno));
		}
	}
	return rd_open_fd(r, fd, name);
}

static void
rd_close(struct rd *r)
{
	if (r->gz)
		gzclose_r(r->gz);
	free(r->chunk);
	memset(r, 0, sizeof(*r));
}

/* Refill the chunk; at the end of the input r->len is 0 and r->eof set. */
static int
rd_fill(struct rd *r)
{
	int got, errnum;
	const char *msg;

	r->base += r->len;
	r->pos = r->len = 0;
	if ((got = gzread(r->gz, r->chunk, RD_CHUNK)) < 0) {
		msg = gzerror(r->gz, &errnum);
		return cg_seterr("%s: %s", r->name,
		                 errnum == Z_ERRNO ? strerror(errno) : msg);
	}
	if (got == 0) {
		/* zlib reports a cut-off gzip stream only here */
		msg = gzerror(r->gz, &errnum);
		if (errnum == Z_BUF_ERROR)
			return cg_seterr("%s: truncated gzip stream", r->name);
		if (errnum != Z_OK)
			return cg_seterr("%s: %s", r->name, msg);
		r->eof = 1;
	}
	r->len = (size_t)got;
	return 0;
}

/*
 * The next line into line (without its newline; *nl says whether it had
 * one).  A line of more than max bytes is an error: it is never held
 * whole.  Returns 1 for a line, 0 at the end of the input, -1 on error.
 */
static int
rd_line(struct rd *r, struct buf *line, uint64_t max, int *nl)
{
	line->len = 0;
	*nl = 0;
	r->start = r->base + r->pos;
	for (;;) {
		unsigned char *start, *end;
		size_t n;

		if (r->pos == r->len) {
			if (r->eof)
				break;
			if (rd_fill(r) != 0)
				return -1;
			if (line->len == 0)
				r->start = r->base;
			if (r->eof)
				break;
		}
		start = r->chunk + r->pos;
		end = memchr(start, '\n', r->len - r->pos);
		n = end ? (size_t)(end - start) : r->len - r->pos;
		if (line->len + n > max)
			return cg_seterr("%s: line %llu: longer than %llu "
			                 "bytes (see --max-entry)",
			                 r->name,
			                 (unsigned long long)r->lineno + 1,
			                 (unsigned long long)max);
		if (buf_reserve(line, line->len + n + 1) != 0)
			return cg_seterr("%s: out of memory", r->name);
		memcpy(line->p + line->len, start, n);
		line->len += n;
		r->pos += n + (end != NULL);
		if (end) {
			*nl = 1;
			break;
		}
	}
	if (line->len == 0 && !*nl)
		return 0;
	if (buf_reserve(line, line->len + 1) != 0)
		return cg_seterr("%s: out of memory", r->name);
	line->p[line->len] = '\0';
	r->lineno++;
	return 1;
}

/* ----------------------------------------------------------- vocabulary */

/* Condition names in order of first appearance, and a hash table of
 * them: slot[h] is 0 (empty) or a name's id + 1. */
struct vocab {
	char **names;
	size_t n, cap;
	uint32_t *slot;
	size_t mask;
};

static uint64_t
hash_name(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ULL;
	return h;
}

static void
vocab_free(struct vocab *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->names[i]);
	free(v->names);
	free(v->slot);
	memset(v, 0, sizeof(*v));
}

static int
vocab_rehash(struct vocab *v, size_t nslots)
{
	uint32_t *slot = calloc(nslots, sizeof(*slot));

	if (slot == NULL)
		return cg_seterr("out of memory");
	for (size_t i = 0; i < v->n; i++) {
		size_t h = (size_t)hash_name(v->names[i]) & (nslots - 1);
		while (slot[h])
			h = (h + 1) & (nslots - 1);
		slot[h] = (uint32_t)i + 1;
	}
	free(v->slot);
	v->slot = slot;
	v->mask = nslots - 1;
	return 0;
}

/*
 * The id of name (a valid condition name), added if new.  Returns 0, or
 * -1 with a message when the vocabulary is full or memory is short.
 */
static int
vocab_id(struct vocab *v, const char *name, uint32_t *id)
{
	size_t h;

	if (v->slot == NULL && vocab_rehash(v, 64) != 0)
		return -1;
	h = (size_t)hash_name(name) & v->mask;
	for (; v->slot[h]; h = (h + 1) & v->mask)
		if (strcmp(v->names[v->slot[h] - 1], name) == 0) {
			*id = v->slot[h] - 1;
			return 0;
		}
	if (v->n == CG_SHARD_MAX_CONDITIONS)
		return cg_seterr("more than %d distinct conditions",
		                 CG_SHARD_MAX_CONDITIONS);
	if (v->n == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 64;
		char **p = realloc(v->names, cap * sizeof(*p));
		if (p == NULL)
			return cg_seterr("out of memory");
		v->names = p;
		v->cap = cap;
	}
	if ((v->names[v->n] = strdup(name)) == NULL)
		return cg_seterr("out of memory");
	*id = (uint32_t)v->n++;
	v->slot[h] = *id + 1;
	/* keep the table at most half full */
	if (2 * v->n > v->mask && vocab_rehash(v, 2 * (v->mask + 1)) != 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------- building */

/*
 * A dataset as it grows.  The payload holds the committed examples'
 * bytes, offset[n] of them, and may hold the example being read after
 * them, up to cur.
 */
struct build {
	struct cg_dataset d;
	uint64_t ncap;      /* room in cond, index, prompt_len: examples */
	uint64_t bcap;      /* room in payload: bytes */
	uint64_t cur;       /* payload bytes in use */
	uint64_t max_entry; /* bytes of one example */
	uint64_t max_bytes; /* bytes of the whole payload */
	uint64_t limit;     /* examples wanted, or 0 */
	int want_prompts;   /* keep prompt_len (JSON Lines) */
	int any_prompt;     /* some record had a prompt */
	struct vocab v;
	const char *name; /* the input, for messages */
	/* Streaming (cg_text_options.stream): payload holds only the
	 * example being read, from offset[n] on; each committed example's
	 * line is src[i], srclen[i] bytes, and its hash hash[i] where
	 * want_hash.  The line being read is at line_off, line_len. */
	int stream, want_hash;
	uint64_t seed;
	uint64_t *src, *hash;
	uint32_t *srclen;
	uint64_t line_off;
	uint32_t line_len;
	/* The input read again, one per fortune file (by condition id,
	 * which is the file's place in name order), else one. */
	struct cg_reread **rr;
	size_t nrr;
};

/* Where the example being read goes on: payload + (cur - what of it is
 * no longer held). */
static uint8_t *
build_at(struct build *b)
{
	return b->d.payload + (b->cur - (b->stream ? b->d.offset[b->d.n] : 0));
}

static int
build_init(struct build *b, const struct cg_text_options *o, const char *name)
{
	memset(b, 0, sizeof(*b));
	b->name = name;
	b->max_entry = o && o->max_entry ? o->max_entry : CG_TEXT_MAX_ENTRY;
	b->limit = o ? o->limit : 0;
	b->max_bytes = cg_max_bytes();
	b->want_hash = o ? o->hash : 0;
	b->seed = o ? o->hash_seed : 0;
	if (b->max_entry > CG_TEXT_MAX_ENTRY_LIMIT)
		return cg_seterr("entry limit of %llu bytes is above %llu",
		                 (unsigned long long)b->max_entry,
		                 (unsigned long long)CG_TEXT_MAX_ENTRY_LIMIT);
	if ((b->d.offset = calloc(1, sizeof(*b->d.offset))) == NULL)
		return cg_seterr("out of memory");
	b->d.kind = CG_PAYLOAD_TEXT;
	return 0;
}

static void
build_free(struct build *b)
{
	cg_dataset_free(&b->d);
	vocab_free(&b->v);
	free(b->src);
	free(b->srclen);
	free(b->hash);
	for (size_t i = 0; i < b->nrr; i++)
		cg_reread_free(b->rr[i]);
	free(b->rr);
}

/* Whether the example limit has been reached. */
static int
build_full(const struct build *b)
{
	return b->limit > 0 && b->d.n >= b->limit;
}

/* Make room for more payload bytes after cur.  The payload exists after
 * the first call, even one for no bytes: readers decode into
 * payload + cur, which must not be arithmetic on NULL. */
static int
build_room(struct build *b, uint64_t more)
{
	uint64_t held = b->stream ? b->d.offset[b->d.n] : 0;
	uint64_t need = b->cur - held + more, cap;
	uint8_t *p;

	if (need <= b->bcap && b->d.payload != NULL)
		return 0;
	if (need + held > b->max_bytes && !b->stream)
		return cg_seterr("%s: more than %llu bytes of text (the limit "
		                 "is CG_MAX_BYTES)",
		                 b->name, (unsigned long long)b->max_bytes);
	cap = b->bcap ? b->bcap : RD_CHUNK;
	while (cap < need)
		cap = cap > UINT64_MAX / 2 ? need : 2 * cap;
	if (cap > b->max_bytes)
		cap = b->max_bytes;
	if ((p = realloc(b->d.payload, cap)) == NULL)
		return cg_seterr("%s: out of memory", b->name);
	b->d.payload = p;
	b->bcap = cap;
	return 0;
}

/* Append n bytes to the example being read. */
static int
build_append(struct build *b, const void *src, uint64_t n)
{
	if (build_room(b, n) != 0)
		return -1;
	if (n > 0)
		memcpy(build_at(b), src, n);
	b->cur += n;
	return 0;
}

/* Commit the bytes from offset[n] to cur as example n. */
static int
build_commit(struct build *b, uint32_t cond, uint32_t prompt_len)
{
	struct cg_dataset *d = &b->d;

	if (d->n == CG_SHARD_MAX_EXAMPLES)
		return cg_seterr("%s: more than %llu examples", b->name,
		                 (unsigned long long)CG_SHARD_MAX_EXAMPLES);
	if (d->n == b->ncap) {
		uint64_t cap = b->ncap ? 2 * b->ncap : 1024;
		uint32_t *c, *l = NULL;
		uint64_t *x, *o;

		c = realloc(d->cond, cap * sizeof(*c));
		if (c)
			d->cond = c;
		x = realloc(d->index, cap * sizeof(*x));
		if (x)
			d->index = x;
		o = realloc(d->offset, (cap + 1) * sizeof(*o));
		if (o)
			d->offset = o;
		if (b->want_prompts &&
		    (l = realloc(d->prompt_len, cap * sizeof(*l))) != NULL)
			d->prompt_len = l;
		if (!c || !x || !o || (b->want_prompts && !l))
			return cg_seterr("%s: out of memory", b->name);
		if (b->stream) {
			uint64_t *sp = realloc(b->src, cap * sizeof(*sp)), *h;
			uint32_t *sl;
			if (sp)
				b->src = sp;
			sl = realloc(b->srclen, cap * sizeof(*sl));
			if (sl)
				b->srclen = sl;
			h = b->want_hash ? realloc(b->hash, cap * sizeof(*h))
			                 : NULL;
			if (h)
				b->hash = h;
			if (!sp || !sl || (b->want_hash && !h))
				return cg_seterr("%s: out of memory", b->name);
		}
		b->ncap = cap;
	}
	if (b->stream) {
		uint64_t len = b->cur - d->offset[d->n];
		b->src[d->n] = b->line_off;
		b->srclen[d->n] = b->line_len;
		if (b->want_hash)
			b->hash[d->n] = cg_payload_hash(d->payload, len, b->seed);
	}
	d->cond[d->n] = cond;
	d->index[d->n] = d->n;
	if (b->want_prompts)
		d->prompt_len[d->n] = prompt_len;
	d->offset[d->n + 1] = b->cur;
	d->n++;
	return 0;
}

/* Forget the bytes of the example being read. */
static void
build_drop(struct build *b)
{
	b->cur = b->d.offset[b->d.n];
}

/*
 * The id of a condition name given at a line of the input: checked and
 * looked up (added if new).  len is the name's length, which may differ
 * from strlen(name) if it holds a NUL.
 */
static int
build_cond(struct build *b, uint64_t lineno, const char *name, size_t len,
           uint32_t *id)
{
	const char *why;

	if (strlen(name) != len)
		return cg_seterr("%s: line %llu: NUL byte in condition name",
		                 b->name, (unsigned long long)lineno);
	if ((why = cg_condition_name_check(name)) != NULL)
		return cg_seterr("%s: line %llu: condition: %s", b->name,
		                 (unsigned long long)lineno, why);
	if (vocab_id(&b->v, name, id) != 0) {
		cg_errprefix(b->name);
		return -1;
	}
	return 0;
}

static int
cmp_name_ptr(const void *a, const void *b)
{
	return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

/*
 * Finish: renumber conditions in name order, set the vocabulary, drop
 * prompt_len if no record had a prompt, and hand the dataset to *out.
 */
static int
build_finish(struct build *b, struct cg_dataset *out)
{
	struct vocab *v = &b->v;
	char ***order = NULL;
	const char **sorted = NULL;
	uint32_t *rank = NULL;
	int rc = -1;

	if (b->d.n == 0)
		return cg_seterr("%s: no examples", b->name);
	if (b->stream && b->d.n > UINT64_MAX / sizeof(uint64_t))
		return cg_seterr("%s: out of memory", b->name);
	if ((order = malloc(v->n * sizeof(*order))) == NULL ||
	    (sorted = malloc(v->n * sizeof(*sorted))) == NULL ||
	    (rank = malloc(v->n * sizeof(*rank))) == NULL) {
		cg_seterr("out of memory");
		goto out;
	}
	for (size_t i = 0; i < v->n; i++)
		order[i] = &v->names[i];
	qsort(order, v->n, sizeof(*order), cmp_name_ptr);
	for (size_t i = 0; i < v->n; i++) {
		sorted[i] = *order[i];
		rank[order[i] - v->names] = (uint32_t)i;
	}
	for (uint64_t i = 0; i < b->d.n; i++)
		b->d.cond[i] = rank[b->d.cond[i]];
	if (cg_dataset_set_conditions(&b->d, sorted, v->n) != 0) {
		cg_errprefix(b->name);
		goto out;
	}
	if (!b->any_prompt) {
		free(b->d.prompt_len);
		b->d.prompt_len = NULL;
	}
	*out = b->d;
	memset(&b->d, 0, sizeof(b->d));
	rc = 0;
out:
	free(order);
	free(sorted);
	free(rank);
	return rc;
}

/* ------------------------------------------------------------- fortunes */

/*
 * End the entry being read at the line before lineno: without its last
 * newline (the one before the separator or the end of the file), kept if
 * anything is left.
 */
static int
fortune_entry(struct build *b, const char *name, uint64_t lineno, uint32_t cond)
{
	uint64_t start = b->d.offset[b->d.n];

	if (b->cur > start && build_at(b)[-1] == '\n')
		b->cur--;
	if (b->cur == start)
		return 0;
	if (b->cur - start > b->max_entry)
		return cg_seterr("%s: entry ending at line %llu: longer than "
		                 "%llu bytes (see --max-entry)",
		                 name, (unsigned long long)lineno,
		                 (unsigned long long)b->max_entry);
	return build_commit(b, cond, 0);
}

/* Read the entries of one fortune file as condition cond. */
static int
fortune_file(struct build *b, const char *path, const char *name, uint32_t cond)
{
	struct cg_reread *rr = NULL;
	struct buf line = {0};
	struct rd r;
	int rc = -1, got, nl;

	/* Streamed, an entry is the bytes of its lines in the file but
	 * the last newline: its place is where its first line starts. */
	if (b->stream) {
		if ((rr = cg_reread_open(path, name)) == NULL)
			return -1;
		b->rr[cond] = rr;
	}
	if (rd_open(&r, path, name, rr) != 0)
		return -1;
	/* A line longer than an entry may be cannot be part of one. */
	while (!build_full(b) &&
	       (got = rd_line(&r, &line, b->max_entry, &nl)) != 0) {
		if (got < 0)
			goto out;
		if (line.len == 1 && line.p[0] == '%') {
			if (fortune_entry(b, name, r.lineno - 1, cond) != 0)
				goto out;
			continue;
		}
		if (b->cur - b->d.offset[b->d.n] + line.len + nl >
		    b->max_entry + 1) {
			cg_seterr("%s: line %llu: entry longer than %llu "
			          "bytes (see --max-entry)",
			          name, (unsigned long long)r.lineno,
			          (unsigned long long)b->max_entry);
			goto out;
		}
		if (b->cur == b->d.offset[b->d.n])
			b->line_off = r.start;
		if (build_append(b, line.p, line.len) != 0 ||
		    (nl && build_append(b, "\n", 1) != 0))
			goto out;
	}
	if (!build_full(b) && fortune_entry(b, name, r.lineno, cond) != 0)
		goto out;
	build_drop(b);
	rc = 0;
out:
	free(line.p);
	rd_close(&r);
	/* many files are not held open at once */
	cg_reread_rest(rr);
	return rc;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The names of a directory's fortune files, sorted: regular files (after
 * symbolic links) whose names have no dot.  *files is NULL-free and owned
 * by the caller.
 */
static int
fortune_list(const char *dir, char ***files, size_t *nfiles)
{
	DIR *dp;
	struct dirent *e;
	char **list = NULL, *path;
	size_t n = 0, cap = 0;
	struct stat st;

	*files = NULL;
	*nfiles = 0;
	if ((dp = opendir(dir)) == NULL)
		return cg_seterr("%s: %s", dir, strerror(errno));
	for (;;) {
		int regular;

		errno = 0;
		if ((e = readdir(dp)) == NULL)
			break;
		if (strchr(e->d_name, '.') != NULL)
			continue;
		if (asprintf(&path, "%s/%s", dir, e->d_name) < 0)
			goto oom;
		regular = stat(path, &st) == 0 && S_ISREG(st.st_mode);
		free(path);
		if (!regular)
			continue;
		if (n == CG_SHARD_MAX_CONDITIONS) {
			cg_seterr("%s: more than %d fortune files", dir,
			          CG_SHARD_MAX_CONDITIONS);
			goto fail;
		}
		if (n == cap) {
			size_t c = cap ? 2 * cap : 64;
			char **p = realloc(list, c * sizeof(*p));
			if (p == NULL)
				goto oom;
			list = p;
			cap = c;
		}
		if ((list[n] = strdup(e->d_name)) == NULL)
			goto oom;
		n++;
	}
	if (errno != 0) {
		cg_seterr("%s: %s", dir, strerror(errno));
		goto fail;
	}
	closedir(dp);
	if (n > 0)
		qsort(list, n, sizeof(*list), cmp_str);
	*files = list;
	*nfiles = n;
	return 0;
oom:
	cg_seterr("%s: out of memory", dir);
fail:
	closedir(dp);
	while (n-- > 0)
		free(list[n]);
	free(list);
	return -1;
}

/* Room for the rereads of n fortune files, one per condition. */
static int
fortune_rr(struct build *b, size_t n)
{
	if ((b->rr = calloc(n, sizeof(*b->rr))) == NULL)
		return cg_seterr("%s: out of memory", b->name);
	b->nrr = n;
	return 0;
}

/* A directory of fortune files, or one such file. */
static int
load_fortunes(struct build *b, const char *path)
{
	char **files = NULL, *file = NULL;
	size_t nfiles = 0;
	struct stat st;
	int rc = -1;

	if (stat(path, &st) != 0)
		return cg_seterr("%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode)) {
		/* one file: its base name is the condition */
		const char *base = strrchr(path, '/'), *why;
		uint32_t id;
		base = base ? base + 1 : path;
		if ((why = cg_condition_name_check(base)) != NULL)
			return cg_seterr("%s: file name is no condition name: "
			                 "%s",
			                 path, why);
		if (vocab_id(&b->v, base, &id) != 0) {
			cg_errprefix(path);
			return -1;
		}
		if (b->stream && fortune_rr(b, 1) != 0)
			return -1;
		if (fortune_file(b, path, path, id) != 0)
			return -1;
		if (b->d.n == 0)
			return cg_seterr("%s: no entries", path);
		return 0;
	}
	if (fortune_list(path, &files, &nfiles) != 0)
		return -1;
	if (nfiles == 0) {
		cg_seterr("%s: no fortune files here (regular files whose "
		          "names have no dot)",
		          path);
		goto out;
	}
	/* Every file is a condition, named in sorted order, so ids are
	 * already in name order and stay so in build_finish. */
	for (size_t i = 0; i < nfiles; i++) {
		const char *why = cg_condition_name_check(files[i]);
		uint32_t id;
		if (why != NULL) {
			cg_seterr("%s/%s: file name is no condition name: %s",
			          path, files[i], why);
			goto out;
		}
		if (vocab_id(&b->v, files[i], &id) != 0) {
			cg_errprefix(path);
			goto out;
		}
	}
	if (b->stream && fortune_rr(b, nfiles) != 0)
		goto out;
	for (size_t i = 0; i < nfiles && !build_full(b); i++) {
		if (asprintf(&file, "%s/%s", path, files[i]) < 0) {
			file = NULL;
			cg_seterr("%s: out of memory", path);
			goto out;
		}
		if (fortune_file(b, file, file, (uint32_t)i) != 0)
			goto out;
		free(file);
		file = NULL;
	}
	if (b->d.n == 0) {
		cg_seterr("%s: no entries in %zu fortune files", path, nfiles);
		goto out;
	}
	rc = 0;
out:
	free(file);
	for (size_t i = 0; i < nfiles; i++)
		free(files[i]);
	free(files);
	return rc;
}

/* ---------------------------------------------------------- JSON Lines */

static const unsigned char *
json_ws(const unsigned char *p, const unsigned char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

static int
hex4(const unsigned char *p, const unsigned char *end, unsigned *out)
{
	unsigned v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		unsigned c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	*out = v;
	return 0;
}

/*
 * Decode the JSON string starting at p (its opening quote) into out, which
 * has room for end - p bytes (decoding never lengthens a string), and its
 * length into *n; with out NULL only check it.  Returns the byte after
 * the closing quote, or NULL if the string is malformed: a raw control
 * character, a bad escape, an unpaired surrogate, no closing quote.
 * Other bytes, invalid UTF-8 included, are copied as they are.
 */
static const unsigned char *
json_string(const unsigned char *p, const unsigned char *end,
            unsigned char *out, size_t *n)
{
	size_t k = 0;

	if (p >= end || *p++ != '"')
		return NULL;
	while (p < end) {
		unsigned c = *p++, u, lo;

		if (c == '"') {
			if (n)
				*n = k;
			return p;
		}
		if (c < 0x20)
			return NULL;
		if (c != '\\') {
			if (out)
				out[k] = (unsigned char)c;
			k++;
			continue;
		}
		if (p >= end)
			return NULL;
		switch (c = *p++) {
		case '"':
		case '\\':
		case '/':
			break;
		case 'b':
			c = '\b';
			break;
		case 'f':
			c = '\f';
			break;
		case 'n':
			c = '\n';
			break;
		case 'r':
			c = '\r';
			break;
		case 't':
			c = '\t';
			break;
		case 'u':
			if (hex4(p, end, &u) != 0)
				return NULL;
			p += 4;
			if (u >= 0xdc00 && u <= 0xdfff)
				return NULL;
			if (u >= 0xd800 && u <= 0xdbff) {
				if (end - p < 6 || p[0] != '\\' ||
				    p[1] != 'u' || hex4(p + 2, end, &lo) != 0 ||
				    lo < 0xdc00 || lo > 0xdfff)
					return NULL;
				p += 6;
				u = 0x10000 + ((u - 0xd800) << 10) +
				    (lo - 0xdc00);
			}
			if (out) {
				if (u < 0x80) {
					out[k] = (unsigned char)u;
				} else if (u < 0x800) {
					out[k] = (unsigned char)(0xc0 | u >> 6);
					out[k + 1] = 0x80 | (u & 0x3f);
				} else if (u < 0x10000) {
					out[k] =
					    (unsigned char)(0xe0 | u >> 12);
					out[k + 1] = 0x80 | (u >> 6 & 0x3f);
					out[k + 2] = 0x80 | (u & 0x3f);
				} else {
					out[k] =
					    (unsigned char)(0xf0 | u >> 18);
					out[k + 1] = 0x80 | (u >> 12 & 0x3f);
					out[k + 2] = 0x80 | (u >> 6 & 0x3f);
					out[k + 3] = 0x80 | (u & 0x3f);
				}
			}
			k += u < 0x80 ? 1 : u < 0x800 ? 2 : u < 0x10000 ? 3 : 4;
			continue;
		default:
			return NULL;
		}
		if (out)
			out[k] = (unsigned char)c;
		k++;
	}
	return NULL;
}

/*
 * Skip one JSON value at p.  The line has passed cJSON already, so this
 * only needs to find the value's end, but it still never reads past end.
 * Returns the byte after the value, or NULL.
 */
static const unsigned char *
json_skip(const unsigned char *p, const unsigned char *end)
{
	int depth = 0;

	if (p >= end)
		return NULL;
	if (*p != '{' && *p != '[') {
		if (*p == '"')
			return json_string(p, end, NULL, NULL);
		while (p < end && !strchr(",}] \t\r", *p))
			p++;
		return p;
	}
	while (p < end) {
		if (*p == '"') {
			if ((p = json_string(p, end, NULL, NULL)) == NULL)
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
		p++;
	}
	return NULL;
}

/* What is wrong at p, where a JSON value that could not be scanned
 * begins. */
static int
bad_json(const unsigned char *p, const unsigned char *end)
{
	if (p < end && *p == '"')
		return cg_seterr("control character or bad escape in a string");
	return cg_seterr("malformed JSON");
}

enum { F_COND, F_PROMPT, F_TEXT, NFIELDS };
static const char *const field_names[NFIELDS] = {"cond", "prompt", "text"};

/*
 * Find the members cond, prompt and text of the object on a line: at[f]
 * is where member f's value begins, or NULL.  Returns 0, or -1 with a
 * message after "FILE: line N: ".
 */
static int
jsonl_fields(const unsigned char *p, const unsigned char *end,
             const unsigned char *at[NFIELDS])
{
	for (int f = 0; f < NFIELDS; f++)
		at[f] = NULL;
	p = json_ws(p, end);
	if (p >= end || *p != '{')
		return cg_seterr("not a JSON object");
	p = json_ws(p + 1, end);
	if (p < end && *p == '}')
		return 0;
	for (;;) {
		const unsigned char *key = p, *value;
		unsigned char name[8];
		size_t klen = 0;
		int f = NFIELDS;

		/* Only short keys can decode to a field name. */
		if ((p = json_string(key, end, NULL, &klen)) == NULL)
			return bad_json(key, end);
		if (klen < sizeof(name)) {
			json_string(key, end, name, &klen);
			for (f = 0; f < NFIELDS; f++)
				if (strlen(field_names[f]) == klen &&
				    memcmp(field_names[f], name, klen) == 0)
					break;
		}
		p = json_ws(p, end);
		if (p >= end || *p != ':')
			return cg_seterr("malformed JSON");
		p = json_ws(p + 1, end);
		if (f < NFIELDS) {
			if (at[f] != NULL)
				return cg_seterr("\"%s\" given twice",
				                 field_names[f]);
			if (p >= end || *p != '"')
				return cg_seterr("\"%s\" is not a string",
				                 field_names[f]);
			at[f] = p;
		}
		if ((p = json_skip(value = p, end)) == NULL)
			return bad_json(value, end);
		p = json_ws(p, end);
		if (p < end && *p == ',') {
			p = json_ws(p + 1, end);
			continue;
		}
		if (p < end && *p == '}')
			return 0;
		return cg_seterr("malformed JSON");
	}
}

/* One JSON Lines record: its line and its length. */
static int
jsonl_record(struct build *b, uint64_t lineno, const unsigned char *line,
             size_t len, struct buf *scratch)
{
	const unsigned char *end = line + len, *at[NFIELDS];
	const char *stop = NULL;
	size_t plen = 0, tlen = 0, clen;
	uint32_t cond;
	cJSON *j;

	/* cJSON for the grammar; it reports where it gave up */
	j = cJSON_ParseWithLengthOpts((const char *)line, len, &stop, 0);
	if (j == NULL)
		return cg_seterr("%s: line %llu: not valid JSON (at byte "
		                 "%td)",
		                 b->name, (unsigned long long)lineno,
		                 stop ? stop - (const char *)line + 1
		                      : (ptrdiff_t)1);
	cJSON_Delete(j);
	if (json_ws((const unsigned char *)stop, end) != end)
		return cg_seterr("%s: line %llu: more after the JSON value",
		                 b->name, (unsigned long long)lineno);
	if (jsonl_fields(line, end, at) != 0) {
		char pre[64];
		snprintf(pre, sizeof(pre), "line %llu",
		         (unsigned long long)lineno);
		cg_errprefix(pre);
		cg_errprefix(b->name);
		return -1;
	}
	if (at[F_TEXT] == NULL)
		return cg_seterr("%s: line %llu: no \"text\"", b->name,
		                 (unsigned long long)lineno);
	if (at[F_COND] == NULL && at[F_PROMPT] == NULL)
		return cg_seterr("%s: line %llu: no \"cond\" or \"prompt\"",
		                 b->name, (unsigned long long)lineno);

	/* The condition, as a C string that may hide a NUL. */
	if (at[F_COND]) {
		if (buf_reserve(scratch, (size_t)(end - at[F_COND]) + 1) != 0)
			return -1;
		if (json_string(at[F_COND], end, scratch->p, &clen) == NULL)
			goto bad_string;
		scratch->p[clen] = '\0';
		if (build_cond(b, lineno, (char *)scratch->p, clen, &cond) != 0)
			return -1;
	} else if (build_cond(b, lineno, CG_TEXT_PROMPT_CONDITION,
	                      strlen(CG_TEXT_PROMPT_CONDITION), &cond) != 0) {
		return -1;
	}

	/* Measure, then decode prompt and text in place after the payload. */
	if ((at[F_PROMPT] &&
	     json_string(at[F_PROMPT], end, NULL, &plen) == NULL) ||
	    json_string(at[F_TEXT], end, NULL, &tlen) == NULL)
		goto bad_string;
	if (plen + tlen > b->max_entry)
		return cg_seterr("%s: line %llu: %llu bytes of prompt and "
		                 "text, more than %llu (see --max-entry)",
		                 b->name, (unsigned long long)lineno,
		                 (unsigned long long)(plen + tlen),
		                 (unsigned long long)b->max_entry);
	if (build_room(b, plen + tlen) != 0)
		return -1;
	if (at[F_PROMPT])
		json_string(at[F_PROMPT], end, build_at(b), &plen);
	json_string(at[F_TEXT], end, build_at(b) + plen, &tlen);
	b->cur += plen + tlen;
	if (at[F_PROMPT])
		b->any_prompt = 1;
	return build_commit(b, cond, (uint32_t)plen);
bad_string:
	return cg_seterr("%s: line %llu: control character or bad escape "
	                 "in a string",
	                 b->name, (unsigned long long)lineno);
}

/* ----------------------------------------------------------------- TSV */

/*
 * Decode a TSV field: \n, \t, \r and \\ stand for newline, tab, carriage
 * return and backslash.  out has room for n bytes.  Returns the decoded
 * length, or -1 with *bad the offending byte after a backslash (0: the
 * field ends in one).
 */
static int64_t
tsv_field(const unsigned char *p, size_t n, unsigned char *out, int *bad)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\\') {
			out[k++] = p[i];
			continue;
		}
		if (++i == n) {
			*bad = 0;
			return -1;
		}
		switch (p[i]) {
		case 'n':
			out[k++] = '\n';
			break;
		case 't':
			out[k++] = '\t';
			break;
		case 'r':
			out[k++] = '\r';
			break;
		case '\\':
			out[k++] = '\\';
			break;
		default:
			*bad = p[i];
			return -1;
		}
	}
	return (int64_t)k;
}

static int
tsv_record(struct build *b, uint64_t lineno, const unsigned char *line,
           size_t len, struct buf *scratch)
{
	const unsigned char *tab = memchr(line, '\t', len), *text;
	size_t clen, tlen;
	int64_t got;
	uint32_t cond;
	int bad;

	if (tab == NULL)
		return cg_seterr("%s: line %llu: no tab (expected "
		                 "cond<TAB>text)",
		                 b->name, (unsigned long long)lineno);
	text = tab + 1;
	tlen = len - (size_t)(text - line);
	if (memchr(text, '\t', tlen) != NULL)
		return cg_seterr("%s: line %llu: more than two fields (write "
		                 "a tab in the text as \\t)",
		                 b->name, (unsigned long long)lineno);
	clen = (size_t)(tab - line);
	if (buf_reserve(scratch, clen + 1) != 0)
		return -1;
	if ((got = tsv_field(line, clen, scratch->p, &bad)) < 0)
		goto bad_escape;
	scratch->p[got] = '\0';
	if (build_cond(b, lineno, (char *)scratch->p, (size_t)got, &cond) != 0)
		return -1;
	if (build_room(b, tlen) != 0)
		return -1;
	if ((got = tsv_field(text, tlen, build_at(b), &bad)) < 0)
		goto bad_escape;
	if ((uint64_t)got > b->max_entry)
		return cg_seterr("%s: line %llu: text of %lld bytes, more than "
		                 "%llu (see --max-entry)",
		                 b->name, (unsigned long long)lineno,
		                 (long long)got,
		                 (unsigned long long)b->max_entry);
	b->cur += (uint64_t)got;
	return build_commit(b, cond, 0);
bad_escape:
	if (bad == 0)
		return cg_seterr("%s: line %llu: a backslash ends a field",
		                 b->name, (unsigned long long)lineno);
	if (bad < 0x20 || bad >= 0x7f)
		return cg_seterr("%s: line %llu: unknown escape: a backslash "
		                 "before byte 0x%02x (only \\n, \\t, \\r "
		                 "and \\\\)",
		                 b->name, (unsigned long long)lineno, bad);
	return cg_seterr("%s: line %llu: unknown escape \\%c (only \\n, "
	                 "\\t, \\r and \\\\)",
	                 b->name, (unsigned long long)lineno, bad);
}

/* -------------------------------------------------------- line formats */

/* JSON Lines or TSV: one record per non-empty line. */
static int
load_lines(struct build *b, const char *path, enum cg_text_format fmt)
{
	struct buf line = {0}, scratch = {0};
	uint64_t max;
	struct rd r;
	int rc = -1, got, nl;

	if (fmt == CG_TEXT_JSONL)
		max = JSONL_EXPAND * b->max_entry + JSONL_SLACK;
	else
		max = TSV_EXPAND * (b->max_entry + CG_SHARD_MAX_NAME) + 1;
	b->want_prompts = fmt == CG_TEXT_JSONL;
	if (rd_open(&r, path, b->name, b->nrr ? b->rr[0] : NULL) != 0)
		return -1;
	while (!build_full(b) && (got = rd_line(&r, &line, max, &nl)) != 0) {
		const unsigned char *p = line.p;
		size_t len = line.len;

		if (got < 0)
			goto out;
		/* a byte order mark is no part of the first record */
		if (r.lineno == 1 && len >= 3 &&
		    memcmp(p, "\xef\xbb\xbf", 3) == 0) {
			p += 3;
			len -= 3;
		}
		if (fmt == CG_TEXT_JSONL && json_ws(p, p + len) == p + len)
			continue;
		if (len == 0)
			continue;
		if (b->stream && len > UINT32_MAX) {
			cg_seterr("%s: line %llu: longer than 4 GiB", b->name,
			          (unsigned long long)r.lineno);
			goto out;
		}
		b->line_off = r.start + (uint64_t)(p - line.p);
		b->line_len = (uint32_t)len;
		if ((fmt == CG_TEXT_JSONL
		         ? jsonl_record(b, r.lineno, p, len, &scratch)
		         : tsv_record(b, r.lineno, p, len, &scratch)) != 0)
			goto out;
	}
	rc = 0;
out:
	free(line.p);
	free(scratch.p);
	rd_close(&r);
	return rc;
}

/* ------------------------------------------------- reading it again */

/* What a streamed dataset reads its payloads again from. */
struct refetch {
	enum cg_text_format fmt;
	char *name;            /* the input, for messages */
	struct cg_reread **rr; /* [nrr]: fortunes, by condition; else one */
	size_t nrr;
	size_t cur;             /* the fortune file read last */
	uint64_t *src;          /* [n] each record's line (an entry): offset */
	uint32_t *srclen;       /* [n] and length (JSON Lines and TSV) */
	const uint64_t *offset; /* the dataset's, [n + 1] */
	const uint32_t *cond;   /* the dataset's, [n] */
	struct buf line, scratch;
};

static void
refetch_free(void *ctx)
{
	struct refetch *x = ctx;

	if (x == NULL)
		return;
	for (size_t i = 0; i < x->nrr; i++)
		cg_reread_free(x->rr[i]);
	free(x->rr);
	free(x->name);
	free(x->src);
	free(x->srclen);
	free(x->line.p);
	free(x->scratch.p);
	free(x);
}

/*
 * Example i's payload, read again into out [its length]: a fortune's
 * bytes as they are in its file; a record decoded from its line again.
 * The record was checked when the dataset was read, so anything else now
 * (other bytes, another length) means the file changed since.
 */
static int
refetch(void *ctx, uint64_t i, uint8_t *out)
{
	struct refetch *x = ctx;
	uint64_t want = x->offset[i + 1] - x->offset[i];
	size_t len = x->srclen[i], plen = 0, tlen = 0;
	const unsigned char *p, *end, *at[NFIELDS];

	if (x->fmt == CG_TEXT_FORTUNES) {
		size_t f = x->nrr == 1 ? 0 : x->cond[i];
		if (f != x->cur)
			cg_reread_rest(x->rr[x->cur]);
		x->cur = f;
		return cg_reread_at(x->rr[f], x->src[i], out, (size_t)want);
	}
	if (buf_reserve(&x->line, len + 1) != 0)
		return cg_seterr("%s: out of memory", x->name);
	if (cg_reread_at(x->rr[0], x->src[i], x->line.p, len) != 0)
		return -1;
	x->line.p[len] = '\0';
	p = x->line.p;
	end = p + len;
	if (x->fmt == CG_TEXT_JSONL) {
		if (jsonl_fields(p, end, at) != 0 || at[F_TEXT] == NULL ||
		    (at[F_PROMPT] &&
		     json_string(at[F_PROMPT], end, NULL, &plen) == NULL) ||
		    json_string(at[F_TEXT], end, NULL, &tlen) == NULL ||
		    plen + tlen != want)
			goto changed;
		if (at[F_PROMPT])
			json_string(at[F_PROMPT], end, out, &plen);
		json_string(at[F_TEXT], end, out + plen, &tlen);
		return 0;
	} else {
		const unsigned char *tab = memchr(p, '\t', len);
		int64_t k;
		int bad;

		if (tab == NULL)
			goto changed;
		tlen = (size_t)(end - tab - 1);
		if (buf_reserve(&x->scratch, tlen + 1) != 0)
			return cg_seterr("%s: out of memory", x->name);
		k = tsv_field(tab + 1, tlen, x->scratch.p, &bad);
		if (k < 0 || (uint64_t)k != want)
			goto changed;
		memcpy(out, x->scratch.p, (size_t)k);
		return 0;
	}
changed:
	cg_seterr("%s: changed while it was read (line at byte %llu)",
	          x->name, (unsigned long long)x->src[i]);
	return -1;
}

/* Hand a streamed build's places to d (fetch), its hashes too. */
static int
stream_finish(struct build *b, enum cg_text_format fmt, struct cg_dataset *d)
{
	struct refetch *x = calloc(1, sizeof(*x));

	if (x == NULL || (x->name = strdup(b->name)) == NULL) {
		free(x);
		return cg_seterr("out of memory");
	}
	x->fmt = fmt;
	x->rr = b->rr;
	x->nrr = b->nrr;
	x->src = b->src;
	x->srclen = b->srclen;
	x->offset = d->offset;
	/* fortune files are conditions in name order, and build_finish
	 * sorted them by name: an example's condition is its file */
	x->cond = d->cond;
	b->rr = NULL;
	b->nrr = 0;
	b->src = NULL;
	b->srclen = NULL;
	free(d->payload);
	d->payload = NULL;
	d->fetch = refetch;
	d->fetch_free = refetch_free;
	d->fetch_ctx = x;
	d->hash = b->hash;
	d->hash_seed = b->seed;
	b->hash = NULL;
	return 0;
}

/* ---------------------------------------------------------- entry point */

static const char *const format_names[] = {
    [CG_TEXT_AUTO] = "auto",
    [CG_TEXT_FORTUNES] = "fortunes",
    [CG_TEXT_JSONL] = "jsonl",
    [CG_TEXT_TSV] = "tsv",
};

const char *
cg_text_format_name(enum cg_text_format f)
{
	return (unsigned)f <= CG_TEXT_TSV ? format_names[f] : "?";
}

int
cg_text_format_parse(const char *name, enum cg_text_format *out)
{
	int f =
	    cg_name_index(format_names, CG_TEXT_FORTUNES, CG_TEXT_TSV, name);

	if (f >= 0) {
		*out = (enum cg_text_format)f;
		return 0;
	}
	return cg_seterr("unknown text format '%.32s' (fortunes, jsonl or "
	                 "tsv)",
	                 name);
}

/* Whether s ends with suffix, optionally followed by ".gz". */
static int
has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	if (n >= 3 && strcmp(s + n - 3, ".gz") == 0)
		n -= 3;
	return n > k && strncmp(s + n - k, suffix, k) == 0;
}

enum cg_text_format
cg_text_format_guess(const char *path)
{
	if (has_suffix(path, ".jsonl") || has_suffix(path, ".json"))
		return CG_TEXT_JSONL;
	if (has_suffix(path, ".tsv"))
		return CG_TEXT_TSV;
	return CG_TEXT_AUTO;
}

int
cg_text_load(const char *path, const struct cg_text_options *o,
             struct cg_dataset *out)
{
	const char *name = strcmp(path, "-") == 0 ? "(stdin)" : path;
	enum cg_text_format fmt = o ? o->format : CG_TEXT_AUTO;
	struct build b;
	struct stat st;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (fmt == CG_TEXT_AUTO) {
		if (strcmp(path, "-") != 0 && stat(path, &st) == 0 &&
		    S_ISDIR(st.st_mode))
			fmt = CG_TEXT_FORTUNES;
		else
			fmt = cg_text_format_guess(path);
	}
	if (fmt == CG_TEXT_AUTO)
		return cg_seterr("%s: cannot tell the text format from the "
		                 "name (.jsonl, .json or .tsv)",
		                 name);
	if (fmt == CG_TEXT_FORTUNES && strcmp(path, "-") == 0)
		return cg_seterr("fortunes are read from files, not standard "
		                 "input");
	if (build_init(&b, o, name) != 0)
		goto out;
	b.stream = o && o->stream;
	if (b.stream && fmt != CG_TEXT_FORTUNES) {
		/* standard input is copied to a file here */
		if ((b.rr = calloc(1, sizeof(*b.rr))) == NULL) {
			cg_seterr("out of memory");
			goto out;
		}
		b.nrr = 1;
		if ((b.rr[0] = cg_reread_open(path, name)) == NULL)
			goto out;
	}
	if ((fmt == CG_TEXT_FORTUNES ? load_fortunes(&b, path)
	                             : load_lines(&b, path, fmt)) != 0)
		goto out;
	if (build_finish(&b, out) != 0)
		goto out;
	if (b.stream && stream_finish(&b, fmt, out) != 0) {
		cg_dataset_free(out);
		goto out;
	}
	rc = 0;
out:
	build_free(&b);
	return rc;
}
