/*
 * cg.h - the base of libcg, the library every cg program links: the
 * layers core/ and file/container.h in one include.
 *
 * Conventions: functions return 0 on success and -1 on failure (or NULL),
 * after recording a one-line message that cg_errmsg() returns.  The library
 * never prints and never exits.  Objects are created by _init/_read/_new and
 * released by _free; every _free accepts NULL.
 *
 * The library is in layers, each a folder of lib/ that uses only the
 * folders below it (HACKING says which and why): core, file, nn, data,
 * model, arch, exchange, train, eval, cli.  This header gathers the two
 * lowest, which every other layer uses: errors, randomness, dtypes,
 * tensors, atomic output, helpers, and the cg file.
 */
#ifndef CG_H
#define CG_H

#ifdef __cplusplus
extern "C" {
#endif

#include "core/atomic.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/util.h"
#include "file/container.h"

#ifdef __cplusplus
}
#endif
#endif
