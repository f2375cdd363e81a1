/*
 * core/arena.h - a workspace of many buffers in one allocation, laid out
 * by one function run twice: first counting, then assigning, so that the
 * sizes allocated and the pointers handed out cannot disagree.
 *
 *	static void lay(struct ws *w, struct cg_arena *a) {
 *		w->x = CG_ARENA_FLOATS(a, B, D);    // B x D floats
 *		w->loss = cg_arena_take(a, B, 1, sizeof(double));
 *	}
 *
 *	struct cg_arena a = {0};
 *	lay(w, &a);                  // counts; every pointer NULL
 *	if (cg_arena_alloc(&a, "what") != 0) // too large, or no memory
 *		fail;
 *	lay(w, &a);                  // the same layout, now in a.base
 *	...
 *	free(a.base);
 *
 * (cg_arena_make does those three steps.)
 *
 * Every buffer starts on 64 bytes (a cache line, an AVX-512 vector) and
 * is zeroed when the arena is allocated.
 */
#ifndef CG_ARENA_H
#define CG_ARENA_H

#include <stddef.h>

struct cg_arena {
	char *base;   /* NULL while counting */
	size_t used;  /* bytes laid out so far */
	int overflow; /* a size past SIZE_MAX was asked for */
};

/* rows * cols elements of size bytes: a pointer into the arena, or NULL
 * while counting (and after an overflow). */
void *cg_arena_take(struct cg_arena *a, size_t rows, size_t cols,
                    size_t size);
#define CG_ARENA_FLOATS(a, rows, cols)                                         \
	((float *)cg_arena_take((a), (rows), (cols), sizeof(float)))

/* After the counting pass: allocate what it counted (zeroed, 64-byte
 * aligned) into a->base, and start the assigning pass.  Returns 0, or -1
 * with a message naming what (e.g. "cvae: workspace for batch 8") when it
 * overflowed or memory ran out. */
int cg_arena_alloc(struct cg_arena *a, const char *what);

/*
 * The whole of it for a workspace ws of a model of arch for batches of
 * up to batch: lay(ws, a) counting, cg_arena_alloc, lay(ws, a) assigning.
 * 0 with a->base the memory (the caller frees it), or -1 with the
 * message "ARCH: workspace for batch B: too large" (or out of memory).
 */
int cg_arena_make(struct cg_arena *a, void (*lay)(void *ws, struct cg_arena *a),
                  void *ws, const char *arch, int batch);

/*
 * What cg_arena_make would allocate for ws, counted without allocating,
 * plus extra bytes (the caller's struct): the sum, or 0 with the message
 * cg_arena_make would give where it overflows.
 */
size_t cg_arena_bytes(void (*lay)(void *ws, struct cg_arena *a), void *ws,
                      size_t extra, const char *arch, int batch);

#endif
