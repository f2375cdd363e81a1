/*
 * arch/all.h - the built-in architectures, each under lib/arch/NAME/.
 */
#ifndef CG_ARCH_ALL_H
#define CG_ARCH_ALL_H

/*
 * Hand the table of built-in architectures to the registry
 * (cg_arch_install); programs do it before they parse their options
 * (cg_getopt_init), tests before they look one up.  Returns 0, or -1 with
 * a message when an architecture registered before clashes with one of
 * the table (it leaves the registry).  Calling it again does nothing.
 */
int cg_arch_all(void);

#endif
