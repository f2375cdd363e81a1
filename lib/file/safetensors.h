/*
 * file/safetensors.h - reading and writing safetensors files as cg files.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes
 * of JSON ({"NAME": {"dtype", "shape", "data_offsets": [begin, end]},
 * ..., "__metadata__": {string: string}}, padded with spaces), then the
 * tensors' bytes, each at its offsets from the end of the header, one
 * after another with no gap and no overlap.  cg keeps its manifest (the
 * cg.json a cg file would hold, digests and all) as a JSON string under
 * the metadata key "cg.json", so that a cg file survives the trip there
 * and back bit for bit.
 *
 * dtypes: F32, F16, BF16, I8, U8, U16, U32 and U64 are cg's f32, f16,
 * bf16, i8, u8, u16, u32 and u64, byte for byte.  The writer decodes the
 * block-quantized ones (q8_0, q4_0, q2_0), which safetensors lacks, to
 * f32 through the codec table; the reader refuses every other dtype
 * (BOOL, I16, I32, I64, F64, the F8 kinds, ...) by name.
 */
#ifndef CG_SAFETENSORS_H
#define CG_SAFETENSORS_H

#include <stddef.h>

#include "cg.h"
#include "file/format.h"
#include "file/magic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest header a reader takes, as the reference implementation. */
#define CG_SAFETENSORS_MAX_HEADER 100000000ull
/* The metadata key that holds cg's manifest. */
#define CG_SAFETENSORS_KEY "cg.json"
/*
 * The safetensors file in buf [n] as a cg file.  The manifest is the
 * "cg.json" of __metadata__ when there is one (checked as a cg file's:
 * format "cg/1", a kind the format defines; when it lists tensors it
 * must list exactly the header's, with the same dtypes, shapes and
 * digests, and gives their order); else {"format": "cg/1", "kind":
 * "model"}, with the other
 * metadata pairs, if any, under "safetensors_metadata".  Without a
 * listing the tensors come in the order of their offsets.  Every size,
 * offset and shape is checked against n and the limits (cg_max_bytes)
 * before anything is allocated; every tensor is copied into memory of its
 * own and its digest computed.  Returns a new file the caller frees with
 * cg_file_free, or NULL with a message starting "display: ".
 */
struct cg_file *cg_safetensors_read_mem(const void *buf, size_t n,
                                        const char *display);

/*
 * The same from fd, whose first npre bytes the caller has already read
 * into pre (npre may be 0).  A regular file (npre 0) is mapped; a pipe is
 * read to its end, memory growing only as bytes arrive, and a header
 * length over the limit stops it after 8 bytes.
 */
struct cg_file *cg_safetensors_read_fd(int fd, const char *display,
                                       const void *pre, size_t npre);

/* The safetensors row of the format table (file/format.h). */
extern const struct cg_format cg_format_safetensors;

/*
 * Write f as a safetensors file into o (opened with cg_out_open; not
 * committed).  Tensors of a dtype safetensors lacks are first decoded to
 * f32 in f itself (cg_tensor_make_f32), so that the manifest stored under
 * "cg.json" describes the tensors written.  The header is the reference
 * writer's: __metadata__ first ("cg.json", then the string pairs of the
 * manifest's "safetensors_metadata" object), the tensors sorted by dtype
 * (widest first) then name, compact JSON padded with spaces to a multiple
 * of 8 bytes.  Returns 0 or -1 with a message.
 */
int cg_safetensors_write_to(struct cg_file *f, struct cg_out *o);
/* The same to path ("-": stdout), atomically (cg_out_open, commit). */
int cg_safetensors_write(struct cg_file *f, const char *path);

#ifdef __cplusplus
}
#endif
#endif
