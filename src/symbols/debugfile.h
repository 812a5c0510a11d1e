/* SPDX-License-Identifier: MIT */
/*
 * Inside src/symbols: where a module's debug file comes from (debugfile.c),
 * for symbols.c. The policy towards debuginfod (bounded, once, early) is
 * told there.
 */
#ifndef PTW_SYMBOLS_DEBUGFILE_H
#define PTW_SYMBOLS_DEBUGFILE_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>

/* libdwfl's find_debuginfo: the standard places, then debuginfod if
 * DEBUGINFOD_URLS names servers (libdebuginfod is not loaded otherwise). */
int ptw_debugfile_find(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		       char **debuginfo_file_name);
/* The same, for --no-debug-files: never one. */
int ptw_debugfile_none(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		       const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		       char **debuginfo_file_name);

/* DEBUGINFOD_URLS names servers. */
bool ptw_debugfile_servers(void);
/* Asks the servers for mod's debug file now if it will need one (path: its
 * file, for the log; "[vdso]" and the like are left to a lookup). */
void ptw_debugfile_prefetch(Dwfl_Module *mod, const char *path);
/* A debug file of the module (build-id hex, its file, its debuglink or
 * NULL) could be here: a file where libdwfl looks, without debuginfod. */
bool ptw_debugfile_here(const char *hex, const char *file_name, const char *debuglink);
/* The debug file of build-id hex is under /usr/lib/debug/.build-id. */
bool ptw_debugfile_installed(const char *hex);
/* The debug file of build-id hex in debuginfod's client cache (a file, not
 * its record of a miss): malloc'd path, or NULL. */
char *ptw_debugfile_fetched(const char *hex);

#endif
