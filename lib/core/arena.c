/*
 * core/arena.c - a workspace of many buffers in one allocation, counted
 * then assigned.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/util.h"

#define ALIGN 64

void *
cg_arena_take(struct cg_arena *a, size_t rows, size_t cols, size_t size)
{
	size_t n;
	char *p;

	if (a->overflow || (cols != 0 && rows > SIZE_MAX / cols) ||
	    (size != 0 && rows * cols > (SIZE_MAX - ALIGN) / size)) {
		a->overflow = 1;
		return NULL;
	}
	n = (rows * cols * size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	if (a->used > SIZE_MAX - ALIGN - n) {
		a->overflow = 1;
		return NULL;
	}
	p = a->base ? a->base + a->used : NULL;
	a->used += n;
	return p;
}

int
cg_arena_alloc(struct cg_arena *a, const char *what)
{
	size_t n = a->used;

	if (a->overflow)
		return cg_seterr("%s: too large", what);
	if ((a->base = cg_alloc(n ? n : ALIGN)) == NULL)
		return cg_seterr("%s: %zu bytes: out of memory", what, n);
	a->used = 0;
	return 0;
}

int
cg_arena_make(struct cg_arena *a, void (*lay)(void *ws, struct cg_arena *a),
              void *ws, const char *arch, int batch)
{
	char what[64];

	*a = (struct cg_arena){0};
	snprintf(what, sizeof(what), "%s: workspace for batch %d", arch, batch);
	lay(ws, a);
	if (cg_arena_alloc(a, what) != 0)
		return -1;
	lay(ws, a);
	return 0;
}

size_t
cg_arena_bytes(void (*lay)(void *ws, struct cg_arena *a), void *ws,
               size_t extra, const char *arch, int batch)
{
	struct cg_arena a = {0};

	lay(ws, &a);
	if (a.overflow || a.used > SIZE_MAX - extra) {
		cg_seterr("%s: workspace for batch %d: too large", arch, batch);
		return 0;
	}
	return a.used + extra;
}
