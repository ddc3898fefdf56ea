/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which runtime the target runs on, from what the kernel shows (runtime.c): the libraries mapped in
 * /proc/PID/maps (libjvm, libpython3.X, libcoreclr, libnode), the executable's name, and a Go binary's
 * ELF (its .go.buildinfo section, with Go's version, or its runtime symbols). Written as target.runtime
 * (docs/capture-format.md); the analyzer words its advice for it.
 */
#ifndef SPINSCOPE_RUNTIME_H
#define SPINSCOPE_RUNTIME_H

#include <stddef.h>

struct target_runtime {
	char name[16];    /* "go", "jvm", "cpython", "node", "dotnet", "native"; "" before any reading */
	char version[32]; /* "1.22.3", "17", "3.11"; "" when nothing shows it */
	char from[4096];  /* what showed it: a mapped library's path, the executable's path, ".go.buildinfo" */
};

/* The runtime of process pid, reading PROC_ROOT/PID/maps and PROC_ROOT/PID/exe (proc_root "/proc"; a test
 * points it at a directory laid out like /proc). 0, or -errno when the maps cannot be read (rt untouched). */
int runtime_detect(const char *proc_root, int pid, struct target_runtime *rt);

/* The same from a maps text and the path of an executable (either may be NULL): the parts runtime_detect
 * reads, for tests. Always fills rt ("native" when nothing else shows). */
void runtime_from(const char *maps, const char *exe_path, struct target_runtime *rt);

/* Whether the ELF file at path is a Go program: 1 with its version in version (from .go.buildinfo, "" if
 * its build info has none inline), 0 if not, -errno if it cannot be read. */
int runtime_go_elf(const char *path, char *version, size_t len);

#endif
