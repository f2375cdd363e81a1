/*
 * fuzz_frame.c - libFuzzer target: the frames pipeline stages say to
 * each other (file/frame.h), read from a stream.
 *
 * The input is the stream, in a memfd read through a descriptor of its
 * own, as a stage reads its standard input: once frame by frame
 * (cg_frame_read, each payload at most 1 MiB) to the end or the first
 * refusal, and once as a stage's first reads expect them
 * (cg_frame_expect: the head, u64 [8], then an "x" f32 [2, 4, 8]).
 */
#include <fcntl.h>

#include "file/frame.h"
#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[32];
	struct cg_frame f;
	int fd;

	fuzz_memfd(0, data, size, path);
	if ((fd = open(path, O_RDONLY)) < 0)
		abort();
	while (cg_frame_read(fd, &f, 1 << 20) == 1)
		cg_frame_clear(&f);
	close(fd);
	if ((fd = open(path, O_RDONLY)) < 0)
		abort();
	uint64_t head[10], hs[1] = {10}, xs[3] = {2, 4, 8};
	float x[64];
	if (cg_frame_expect(fd, "head", CG_U64, 1, hs, head) == 0)
		(void)cg_frame_expect(fd, "x", CG_F32, 3, xs, x);
	close(fd);
	return 0;
}
