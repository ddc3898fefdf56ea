// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The target's runtime (runtime.c) from a directory laid out like /proc: PID/maps written by hand and
 * PID/exe a symbolic link, as the kernel shows them. Libraries decide first (a `java` launcher maps
 * libjvm.so), then the executable's name, then a Go binary's ELF, else native; a zombie's empty maps and a
 * process that is not there give an error and leave what was known. Prints one line per failed check;
 * exits 1 if any failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

#include "check.h"

#define CHECK_STR(what, got, want)                                                                 \
	do {                                                                                       \
		if (strcmp((got), (want))) {                                                       \
			printf("FAIL %s:%d %s: \"%s\", want \"%s\"\n", __FILE__, __LINE__, what, (got), \
			       (want));                                                             \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static char root[] = "/tmp/spinscope-runtime-XXXXXX";

static const char LIBC[] = "7f0000000000-7f0000022000 r--p 00000000 08:01 1234  /usr/lib/x86_64-linux-gnu/libc.so.6\n";

/* ROOT/PID/maps holding MAPS and ROOT/PID/exe pointing at EXE. */
static void process(int pid, const char *maps, const char *exe)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d", root, pid);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%d/maps", root, pid);
	f = fopen(path, "w");
	fputs(maps, f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%d/exe", root, pid);
	unlink(path);
	if (symlink(exe, path))
		perror("symlink");
}

static void expect(int pid, const char *name, const char *version, const char *from)
{
	struct target_runtime rt = { 0 };
	int ret = runtime_detect(root, pid, &rt);

	CHECK_EQ("runtime_detect", (unsigned)ret, 0);
	CHECK_STR("name", rt.name, name);
	CHECK_STR("version", rt.version, version);
	CHECK_STR("from", rt.from, from);
}

int main(void)
{
	struct target_runtime rt = { .name = "jvm" };
	char version[32];

	if (!mkdtemp(root))
		return perror("mkdtemp"), 1;

	process(10, "55d000000000-55d000001000 r--p 00000000 08:01 99 /usr/lib/jvm/java-17-openjdk-amd64/bin/java\n"
		    "7f1000000000-7f1000400000 r-xp 00000000 08:01 100 /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so\n",
		"/usr/lib/jvm/java-17-openjdk-amd64/bin/java");
	expect(10, "jvm", "17", "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so");

	/* CPython linked against its library (pyenv's, a distribution's libpython3.12.so.1.0) */
	process(11, "7f2000000000-7f2000300000 r-xp 00000000 08:01 7 /opt/py/lib/libpython3.12.so.1.0\n", "/opt/py/bin/python3.12");
	expect(11, "cpython", "3.12", "/opt/py/lib/libpython3.12.so.1.0");

	/* Debian's python3.11 is linked statically: only its name tells */
	process(12, LIBC, "/usr/bin/python3.11");
	expect(12, "cpython", "3.11", "/usr/bin/python3.11");

	process(13, LIBC, "/usr/bin/node");
	expect(13, "node", "", "/usr/bin/node");

	process(14, "7f3000000000-7f3000500000 r-xp 00000000 08:01 8 /usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.1/libcoreclr.so\n",
		"/usr/share/dotnet/dotnet");
	expect(14, "dotnet", "8.0.1", "/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.1/libcoreclr.so");

	/* A C program (this test, an ELF without Go's sections or symbols): native */
	process(15, LIBC, "/proc/self/exe");
	expect(15, "native", "", "/proc/self/exe");

	/* An executable that is gone (deleted or unreadable): still native by its name, not an error */
	process(16, LIBC, "/nonexistent/server");
	expect(16, "native", "", "/nonexistent/server");

	/* A zombie's maps are empty, a process gone has none: an error, and what was known is kept */
	process(17, "", "/usr/bin/python3.11");
	CHECK_EQ("zombie", (unsigned)-runtime_detect(root, 17, &rt), ESRCH);
	CHECK_EQ("missing", (unsigned)-runtime_detect(root, 99, &rt), ENOENT);
	CHECK_STR("kept", rt.name, "jvm");

	/* Not an ELF file, not there */
	CHECK_EQ("maps is no ELF", (unsigned)runtime_go_elf("/proc/self/maps", version, sizeof(version)), 0);
	CHECK_EQ("no file", (unsigned)-runtime_go_elf("/nonexistent", version, sizeof(version)), ENOENT);

	for (int pid = 10; pid <= 17; pid++) {
		char path[512];

		snprintf(path, sizeof(path), "%s/%d/maps", root, pid);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%d/exe", root, pid);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%d", root, pid);
		rmdir(path);
	}
	rmdir(root);
	if (!failures)
		printf("ok: runtime\n");
	return failures ? 1 : 0;
}
