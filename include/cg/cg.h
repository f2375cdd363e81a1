/*
 * cg/cg.h - the public interface of libcg, the library of the cg
 * programs: read and write cg files, load a model, train it on a data
 * shard, draw from it.  libcg(3) is its manual.
 *
 * This header and the two it includes are all a program outside cg
 * sees; everything else in the library is hidden (the shared library
 * exports these functions alone, each at symbol version CG_0).  The
 * objects are opaque: a program holds pointers to them and frees them
 * with their _free, which accepts NULL.
 *
 * Errors: a function fails by returning -1 (or NULL) after recording a
 * one-line message, which cg_errmsg() returns; the message is per
 * thread.  The library never prints and never exits.
 *
 * ABI: the soname is libcg.so.0.  A release that adds a function adds a
 * version node (CG_0.1, ...) that inherits CG_0, and a program linked
 * against an older node keeps working; a release that removes a
 * function or changes what one takes, returns or means moves to
 * libcg.so.1 and node CG_1.  No struct of the interface is ever seen
 * from outside, so none can change size under a program.
 */
#ifndef CG_CG_PUBLIC_H
#define CG_CG_PUBLIC_H

#ifdef __cplusplus
extern "C" {
#endif

/* The release of the library the program runs with, "0.1.0" (the
 * package's version); static, never NULL. */
const char *cg_version(void);

/* The message of the last failure on this thread; never NULL. */
const char *cg_errmsg(void);

#ifdef __cplusplus
}
#endif

#include <cg/file.h>
#include <cg/model.h>

#endif
