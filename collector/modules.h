/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --stacks: the files of the target's modules (its executable, its libraries), opened as the target maps
 * them, whatever its mount namespace, and shared between processes by build id (modules.c).
 */
#ifndef SPINSCOPE_MODULES_H
#define SPINSCOPE_MODULES_H

#include <linux/types.h>

#include <elfutils/libdwfl.h>
#include <json-c/json.h>

#define MAX_LIBRARIES 256      /* files kept open for the processes to come; the least recently used goes */
#define MAX_UNOPENED_NAMES 16  /* names of modules that could not be opened, kept for the capture */

struct libraries;

struct libraries *libraries_new(void);
void libraries_free(struct libraries *l);

/* The process whose Dwfl the next libdwfl calls of this thread may open modules of (its find_elf has no
 * argument of its own): set before them, for process pid. */
void modules_opening(struct libraries *l, int pid);

/* Dwfl_Callbacks.find_elf: the module's file as process pid (modules_opening) maps it, its Elf shared with
 * every process that maps the same file; the module's *userdata is then its library's id. */
int modules_find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base, char **file_name,
		     Elf **elfp);

/* The id of the library (the file) mod is, once opened: never reused, so a key for what is known of its
 * addresses in every process; 0 for a module not opened by modules_find_elf (the vDSO, a file that could
 * not be opened). */
__u32 module_library(Dwfl_Module *mod);

/* path, a file of process pid's, opened read-only below its root (/proc/PID/root), never leaving it
 * (RESOLVE_IN_ROOT, no magic link: the target owns every link on the way), with the further openat2
 * RESOLVE_* flags resolve. An open descriptor, or -1. */
int target_open(int pid, const char *path, __u64 resolve);

/* The capture's stacks.modules: files opened, shared, evicted; the modules that could not be opened. */
json_object *libraries_json(const struct libraries *l);

#endif
