/*
 * file/magic.h - what a file's first bytes say it is, known without
 * reading it as any format: a reader that is handed the wrong kind says
 * which kind it got.
 */
#ifndef CG_MAGIC_H
#define CG_MAGIC_H

#include <stddef.h>

/* Bytes cg_safetensors_probe looks at. */
#define CG_SAFETENSORS_PROBE 9

/*
 * Whether the first n bytes of a file (n >= CG_SAFETENSORS_PROBE for a
 * yes) begin as a safetensors file: a header length, then '{'.  A cg file
 * (a tar archive, or gzip or zstd) never does.  1 or 0.
 */
int cg_safetensors_probe(const void *buf, size_t n);

/* A sealed file's first bytes (file/seal.h), the last the version. */
#define CG_SEAL_MAGIC "CGSEAL\0\1"
#define CG_SEAL_MAGIC_LEN 8

/*
 * Whether the first n bytes of a file (n >= CG_SEAL_MAGIC_LEN for a yes)
 * begin a sealed file: CG_SEAL_MAGIC.  Neither a tar archive, gzip, zstd
 * nor safetensors ever does.  1 or 0.
 */
int cg_seal_probe(const void *buf, size_t n);

#endif
