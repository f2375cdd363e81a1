/*
 * arch/all.c - the table of built-in architectures, one X() per
 * lib/arch/NAME/NAME_arch.c, in the order cg-init lists them.
 */
#include "arch/all.h"
#include "model/model.h"

#define CG_ARCHS X(cvae) X(cgpt) X(cclf) X(cddpm) X(cgan)

#define X(name) extern const struct cg_arch cg_arch_##name;
CG_ARCHS
#undef X

#define X(name) &cg_arch_##name,
static const struct cg_arch *const table[] = {CG_ARCHS};
#undef X

int
cg_arch_all(void)
{
	return cg_arch_install(table, (int)(sizeof(table) / sizeof(table[0])));
}
