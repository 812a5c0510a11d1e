/* SPDX-License-Identifier: MIT */
/*
 * Names for people: C++ (Itanium ABI) and Rust (legacy and v0) linkage
 * names demangled with libiberty (cplus_demangle's Rust and C++ demanglers),
 * the maintained demangler of binutils and gdb (libstdc++'s __cxa_demangle
 * knows only C++).
 */
#ifndef PTW_DEMANGLE_H
#define PTW_DEMANGLE_H

/*
 * The demangled form of name, with parameter lists ("Worker::run(void*)",
 * "mycrate::foo::bar"), malloc'd; NULL when name is not a mangled name or
 * cannot be demangled: then name is the name for people too.
 */
char *ptw_demangle(const char *name);

#endif
