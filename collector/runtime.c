// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The target's runtime (runtime.h): libraries first (a JVM, CPython, .NET or Node is a native executable
 * that maps its runtime's library: `java` maps libjvm.so), then the executable's name (CPython and Node
 * are often linked statically: /usr/bin/python3.11, node), then a Go binary's ELF, else native.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

static void set(struct target_runtime *rt, const char *name, const char *version, const char *from)
{
	snprintf(rt->name, sizeof(rt->name), "%s", name);
	snprintf(rt->version, sizeof(rt->version), "%s", version ? version : "");
	snprintf(rt->from, sizeof(rt->from), "%s", from ? from : "");
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* "3.11" from "python3.11", "libpython3.11.so.1.0" after the prefix: digits, a dot, digits. */
static void python_version(const char *p, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	if (p[0] != '3' || p[1] != '.' || p[2] < '0' || p[2] > '9')
		return;
	n = 3;
	while (p[n] >= '0' && p[n] <= '9')
		n++;
	snprintf(out, len, "%.*s", (int)n, p);
}

/* A JDK's major version from its directory: "17" of /usr/lib/jvm/java-17-openjdk-amd64/... or
 * /opt/jdk-21.0.2/..., "" when the path does not say. */
static void jvm_version(const char *path, char *out, size_t len)
{
	static const char *const marks[] = { "java-", "jdk-", "jdk", "jre-" };

	out[0] = '\0';
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
		const char *p = strstr(path, marks[i]);

		if (p && p[strlen(marks[i])] >= '1' && p[strlen(marks[i])] <= '9') {
			p += strlen(marks[i]);
			snprintf(out, len, "%.*s", (int)strspn(p, "0123456789"), p);
			return;
		}
	}
}

/* .NET's version: the directory libcoreclr.so is in (shared/Microsoft.NETCore.App/8.0.1/libcoreclr.so). */
static void dotnet_version(const char *path, char *out, size_t len)
{
	const char *end = strrchr(path, '/'), *start = end;

	out[0] = '\0';
	while (start && start > path && start[-1] != '/')
		start--;
	if (start && end > start && start[0] >= '0' && start[0] <= '9')
		snprintf(out, len, "%.*s", (int)(end - start), start);
}

/* The runtime a mapped library shows, or 0. */
static int from_library(const char *path, struct target_runtime *rt)
{
	const char *base = base_name(path);
	char version[32];

	if (!strncmp(base, "libjvm.so", 9)) {
		jvm_version(path, version, sizeof(version));
		set(rt, "jvm", version, path);
	} else if (!strncmp(base, "libpython3.", 11)) {
		python_version(base + 9, version, sizeof(version));
		set(rt, "cpython", version, path);
	} else if (!strncmp(base, "libcoreclr.so", 13)) {
		dotnet_version(path, version, sizeof(version));
		set(rt, "dotnet", version, path);
	} else if (!strncmp(base, "libnode.so", 10)) {
		set(rt, "node", "", path);
	} else {
		return 0;
	}
	return 1;
}

/* The runtime the executable's name shows, or 0. */
static int from_executable(const char *path, struct target_runtime *rt)
{
	const char *base = base_name(path);
	char version[32];

	if (!strcmp(base, "node") || !strcmp(base, "nodejs")) {
		set(rt, "node", "", path);
	} else if (!strncmp(base, "python3", 7) && (base[7] == '\0' || base[7] == '.')) {
		python_version(base + 6, version, sizeof(version));
		set(rt, "cpython", version, path);
	} else if (!strcmp(base, "java")) {
		jvm_version(path, version, sizeof(version));
		set(rt, "jvm", version, path);
	} else if (!strcmp(base, "dotnet")) {
		set(rt, "dotnet", "", path);
	} else {
		return 0;
	}
	return 1;
}

/* An unsigned LEB128 varint (Go's encoding/binary uvarint) at p, *used bytes of it; 0 with *used 0 if
 * malformed. */
static unsigned long long uvarint(const unsigned char *p, size_t left, size_t *used)
{
	unsigned long long v = 0;

	for (size_t i = 0; i < left && i < 10; i++) {
		v |= (unsigned long long)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*used = i + 1;
			return v;
		}
	}
	*used = 0;
	return 0;
}

/* Go's version from the .go.buildinfo section's bytes: "\xff Go buildinf:", pointer size, flags; with
 * flag 2 (Go 1.18 and later) the version string follows the 32-byte header, its length a uvarint
 * (debug/buildinfo). Older layouts point into the data instead: left "". */
static void go_version(const unsigned char *d, size_t n, char *out, size_t len)
{
	static const char magic[] = "\xff Go buildinf:";
	size_t used, vlen;

	out[0] = '\0';
	if (n < 33 || memcmp(d, magic, 14) || !(d[15] & 2))
		return;
	vlen = uvarint(d + 32, n - 32, &used);
	if (!used || vlen == 0 || 32 + used + vlen > n)
		return;
	d += 32 + used;
	if (vlen > 2 && !memcmp(d, "go", 2)) /* "go1.22.3" -> "1.22.3" */
		d += 2, vlen -= 2;
	snprintf(out, len, "%.*s", (int)vlen, (const char *)d);
}

static int elf_has_go_symbol(Elf *elf, Elf_Scn *symtab, GElf_Shdr *sh)
{
	Elf_Data *data = elf_getdata(symtab, NULL);
	size_t count = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	GElf_Sym sym;

	for (size_t i = 0; data && i < count; i++) {
		const char *name;

		if (!gelf_getsym(data, (int)i, &sym))
			break;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (name && (!strcmp(name, "runtime.main") || !strcmp(name, "runtime.goexit")))
			return 1;
	}
	return 0;
}

int runtime_go_elf(const char *path, char *version, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), found = 0;
	size_t shstrndx;
	Elf_Scn *scn = NULL, *symtab = NULL;
	GElf_Shdr sh, symtab_sh = { 0 };
	Elf *elf;

	version[0] = '\0';
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) != 0) {
		if (elf)
			elf_end(elf);
		close(fd);
		return 0;
	}
	while ((scn = elf_nextscn(elf, scn)) && found != 2) {
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (!strcmp(name, ".go.buildinfo")) {
			Elf_Data *data = elf_getdata(scn, NULL);

			if (data && data->d_buf)
				go_version(data->d_buf, data->d_size, version, len);
			found = 2;
		} else if (!strcmp(name, ".gopclntab") || !strcmp(name, ".note.go.buildid")) {
			found = 1;
		} else if (sh.sh_type == SHT_SYMTAB) {
			symtab = scn;
			symtab_sh = sh;
		}
	}
	if (!found && symtab && elf_has_go_symbol(elf, symtab, &symtab_sh))
		found = 1;
	elf_end(elf);
	close(fd);
	return found ? 1 : 0;
}

void runtime_from(const char *maps, const char *exe_path, struct target_runtime *rt)
{
	char version[32];
	const char *line = maps;

	/* Each line: address perms offset dev inode [path]; the path starts at the first '/'. */
	while (line && *line) {
		const char *end = strchr(line, '\n'), *path = memchr(line, '/', end ? (size_t)(end - line) : strlen(line));
		size_t n = end ? (size_t)(end - line) : strlen(line);

		if (path) {
			char buf[PATH_MAX];

			snprintf(buf, sizeof(buf), "%.*s", (int)(n - (size_t)(path - line)), path);
			if (from_library(buf, rt))
				return;
		}
		line = end ? end + 1 : NULL;
	}
	if (exe_path && *exe_path) {
		if (from_executable(exe_path, rt))
			return;
		if (runtime_go_elf(exe_path, version, sizeof(version)) == 1) {
			set(rt, "go", version, exe_path);
			return;
		}
	}
	set(rt, "native", "", exe_path);
}

/* The whole of a /proc text file (malloc'd), or NULL. */
static char *read_all(const char *path)
{
	size_t cap = 1 << 16, used = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0 || !buf) {
		int err = fd < 0 ? errno : ENOMEM;

		if (fd >= 0)
			close(fd);
		free(buf);
		errno = err;
		return NULL;
	}
	while ((got = read(fd, buf + used, cap - used - 1)) > 0) {
		used += (size_t)got;
		if (used + 1 == cap) {
			char *more = realloc(buf, cap * 2);

			if (!more)
				break;
			buf = more;
			cap *= 2;
		}
	}
	close(fd);
	buf[used] = '\0';
	return buf;
}

int runtime_detect(const char *proc_root, int pid, struct target_runtime *rt)
{
	char path[PATH_MAX], exe[PATH_MAX], link[PATH_MAX];
	char *maps;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/maps", proc_root, pid);
	maps = read_all(path);
	if (!maps)
		return -errno;
	if (!maps[0]) { /* a zombie or a kernel thread: no memory left to show a runtime */
		free(maps);
		return -ESRCH;
	}
	/* The executable: its path as the process sees it, for the name; read through /proc/PID/exe, which
	 * opens it even from another mount namespace or after it was replaced on disk. */
	snprintf(exe, sizeof(exe), "%s/%d/exe", proc_root, pid);
	n = readlink(exe, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';
	if (n > 0) {
		char *deleted = strstr(link, " (deleted)");

		if (deleted)
			*deleted = '\0';
	}
	runtime_from(maps, NULL, rt);
	if (!strcmp(rt->name, "native")) {
		char version[32];

		if (n > 0 && from_executable(link, rt))
			;
		else if (runtime_go_elf(exe, version, sizeof(version)) == 1)
			set(rt, "go", version, n > 0 ? link : exe);
		else
			set(rt, "native", "", n > 0 ? link : "");
	}
	free(maps);
	return 0;
}
