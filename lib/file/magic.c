/*
 * file/magic.c - what a file's first bytes say it is.
 */
#include <string.h>

#include "file/magic.h"

int
cg_safetensors_probe(const void *buf, size_t n)
{
	const unsigned char *b = buf;

	if (n < CG_SAFETENSORS_PROBE || b[8] != '{')
		return 0;
	/* gzip and zstd magics: a compressed cg file */
	return !(b[0] == 0x1f && b[1] == 0x8b) &&
	       !(b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd);
}

int
cg_seal_probe(const void *buf, size_t n)
{
	return n >= CG_SEAL_MAGIC_LEN &&
	       memcmp(buf, CG_SEAL_MAGIC, CG_SEAL_MAGIC_LEN) == 0;
}
