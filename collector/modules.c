// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --stacks: the files of the target's modules (modules.h).
 *
 * libdwfl's own find_elf opens a module by its path in the collector's filesystem. A target in a
 * container (a mount namespace of its own) maps files that are not there, or that are other files there
 * (the host's libc, of another version: named silently wrong). A module is opened instead through
 * /proc/PID/map_files, the very file the process maps (in its own mount namespace, deleted or replaced
 * since); where map_files cannot be opened (no CAP_SYS_ADMIN), by its path below /proc/PID/root, never
 * leaving that root (openat2 RESOLVE_IN_ROOT: the target owns every link on the way) and only if it is the
 * mapped file (its inode, from /proc/PID/maps).
 *
 * Each file is then known by its build id (a file without one by its device, inode, size and mtime), and
 * opened and parsed once for every process that maps it: pre-forked workers, the processes of a cgroup.
 * The module's Elf is a reference to the library's (libelf counts them: a Dwfl holds its own, so evicting a
 * library never pulls a file from under a process), and the library's id keys the names of its addresses
 * in every process (stacks.c). perf's build-id cache and the OpenTelemetry profiler's file IDs work the
 * same way. At most MAX_LIBRARIES files are kept, the least recently used evicted first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <elfutils/libdwelf.h>

#include "modules.h"
#include "text.h"

#define LIBRARY_KEY_MAX 64 /* a build id's bytes (20 for GNU ld's sha1), or a file's identity */

struct library {
	__u8 key[LIBRARY_KEY_MAX];
	__u32 key_len;
	__u32 id;   /* never reused; 0: the slot is free */
	__u64 used; /* the libraries' clock at its latest use: the least recent goes first */
	Elf *elf;   /* the library's own reference (its file read or mapped whole: no descriptor kept) */
};

struct libraries {
	struct library slots[MAX_LIBRARIES];
	__u32 next_id;
	__u64 clock;
	__u64 opened, shared, evicted, unopened;
	char *unopened_names[MAX_UNOPENED_NAMES];
	size_t nunopened_names;
	int pid; /* the process whose modules are being opened (modules_opening) */
};

/* find_elf has no argument of its own: the unwinder's thread says whose modules its libdwfl calls open. */
static __thread struct libraries *opening;

struct libraries *libraries_new(void)
{
	return calloc(1, sizeof(struct libraries));
}

static void library_close(struct library *lib)
{
	elf_end(lib->elf);
	*lib = (struct library){ 0 };
}

void libraries_free(struct libraries *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < MAX_LIBRARIES; i++)
		if (l->slots[i].id)
			library_close(&l->slots[i]);
	for (size_t i = 0; i < l->nunopened_names; i++)
		free(l->unopened_names[i]);
	free(l);
}

void modules_opening(struct libraries *l, int pid)
{
	opening = l;
	if (l)
		l->pid = pid;
}

/* The mapping of process pid that starts at start: its end and inode. false if there is none. */
static bool mapping_at(int pid, Dwarf_Addr start, unsigned long long *end, unsigned long long *inode)
{
	char path[64], line[512];
	bool found = false;
	FILE *maps;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (!(maps = fopen(path, "re")))
		return false;
	while (!found && fgets(line, sizeof(line), maps)) {
		unsigned long long from;

		found = sscanf(line, "%llx-%llx %*s %*s %*s %llu", &from, end, inode) == 3 && from == start;
		while (!strchr(line, '\n') && fgets(line, sizeof(line), maps)) /* the rest of a long line */
			;
	}
	fclose(maps);
	return found;
}

int target_open(int pid, const char *path, __u64 resolve)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | resolve };
	char root_path[64];
	int root, fd;

	snprintf(root_path, sizeof(root_path), "/proc/%d/root", pid);
	if ((root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	fd = syscall(SYS_openat2, root, path, &how, sizeof(how));
	close(root);
	return fd;
}

/* The file process pid maps at start (the module's first mapping) as path: an open descriptor; -1 if it cannot
 * be opened; NOT_A_FILE for a mapping of something else than a regular file (a device's): never code to read. */
#define NOT_A_FILE -2
static int module_open(int pid, Dwarf_Addr start, const char *path)
{
	unsigned long long end, inode;
	char where[96];
	struct stat st;
	int fd;

	if (!mapping_at(pid, start, &end, &inode))
		return -1;
	snprintf(where, sizeof(where), "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)start, end);
	fd = open(where, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) { /* below the process's root, if it is still the mapped file */
		fd = target_open(pid, path, 0);
		if (fd >= 0 && (fstat(fd, &st) || st.st_ino != inode)) {
			close(fd);
			return -1;
		}
	}
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) { /* a device's mapping: never read */
		close(fd);
		return NOT_A_FILE;
	}
	return fd;
}

/* The library fd is (fd closed), opened once for all; NULL if it is no ELF file (*not_elf then says whether it
 * is some other file: data a process maps, a JVM's modules image, no code). */
static struct library *library_of(struct libraries *l, int fd, bool *not_elf)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	struct library *lib = NULL, *victim = &l->slots[0];
	__u8 key[LIBRARY_KEY_MAX];
	const void *build_id;
	struct stat st;
	ssize_t len;

	/* Mapped whole (or read, if it cannot be): the Elf needs its descriptor no more, whoever holds it. */
	*not_elf = elf && elf_kind(elf) != ELF_K_ELF;
	if (!elf || elf_kind(elf) != ELF_K_ELF || fstat(fd, &st) || elf_cntl(elf, ELF_C_FDREAD))
		goto fail;
	close(fd);
	fd = -1;
	len = dwelf_elf_gnu_build_id(elf, &build_id);
	if (len > 0 && len < LIBRARY_KEY_MAX) {
		key[0] = 'b';
		memcpy(key + 1, build_id, len);
		len++;
	} else { /* no build id: the file itself */
		__u64 identity[4] = { st.st_dev, st.st_ino, st.st_size,
				      st.st_mtim.tv_sec * 1000000000ULL + st.st_mtim.tv_nsec };

		key[0] = 'f';
		memcpy(key + 1, identity, sizeof(identity));
		len = 1 + sizeof(identity);
	}
	l->clock++;
	for (size_t i = 0; i < MAX_LIBRARIES; i++) {
		struct library *s = &l->slots[i];

		if (s->id && s->key_len == len && !memcmp(s->key, key, len)) {
			elf_end(elf);
			s->used = l->clock;
			l->shared++;
			return s;
		}
		if (!s->id || (victim->id && s->used < victim->used))
			victim = s;
	}
	if (victim->id) {
		library_close(victim);
		l->evicted++;
	}
	lib = victim;
	*lib = (struct library){ .key_len = len, .id = ++l->next_id, .used = l->clock, .elf = elf };
	memcpy(lib->key, key, len);
	l->opened++;
	return lib;
fail:
	elf_end(elf);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* A module that could not be opened: counted, and its file's name kept (the first MAX_UNOPENED_NAMES). */
static void unopened(struct libraries *l, const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;

	for (size_t i = 0; i < l->nunopened_names; i++)
		if (!strcmp(l->unopened_names[i], name))
			return;
	l->unopened++;
	if (l->nunopened_names < MAX_UNOPENED_NAMES && (l->unopened_names[l->nunopened_names] = strdup(name)))
		l->nunopened_names++;
}

int modules_find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base, char **file_name,
		     Elf **elfp)
{
	struct libraries *l = opening;
	struct library *lib = NULL;
	bool not_elf = false;
	Dwarf_Addr start;
	int fd;

	if (!l || name[0] != '/') /* the vDSO: libdwfl reads it from the process's memory */
		return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
	dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
	fd = module_open(l->pid, start, name);
	if (fd < 0 || !(lib = library_of(l, fd, &not_elf))) {
		if (fd != NOT_A_FILE && !not_elf) /* code that could not be read: said; a data file is no module */
			unopened(l, name);
		return -1; /* and no file name: libdwfl opens nothing of the collector's own filesystem */
	}
	*elfp = elf_begin(-1, ELF_C_READ_MMAP, lib->elf); /* the module's own reference to the library's Elf */
	if (!*elfp)
		return -1;
	*file_name = strdup(name); /* its separate debug file is looked for by build id, or by this path */
	*userdata = (void *)(uintptr_t)lib->id;
	return -1;
}

__u32 module_library(Dwfl_Module *mod)
{
	Dwarf_Addr bias;
	void **userdata;

	dwfl_module_getelf(mod, &bias); /* opened now if it was not yet */
	dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	return (__u32)(uintptr_t)*userdata;
}

json_object *libraries_json(const struct libraries *l)
{
	json_object *o = json_object_new_object(), *names = json_object_new_array();

	for (size_t i = 0; i < l->nunopened_names; i++)
		json_object_array_add(names, text_json(l->unopened_names[i]));
	json_object_object_add(o, "opened", json_object_new_uint64(l->opened));
	json_object_object_add(o, "shared", json_object_new_uint64(l->shared));
	json_object_object_add(o, "evicted", json_object_new_uint64(l->evicted));
	json_object_object_add(o, "unopened", json_object_new_uint64(l->unopened));
	json_object_object_add(o, "unopened_names", names);
	return o;
}
