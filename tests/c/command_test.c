// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The collector's `-- COMMAND` lookup (command.c, command_find) against execvp's rules, in a directory tree
 * built here: a name with a '/' is taken as it is; a bare name is looked for on $PATH in order, an empty
 * entry meaning the working directory; a file found but not executable (or a directory) is skipped for a
 * later entry that is, and said (EACCES) when none is. Prints one line per failed check; exits 1 if any failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "command.h"

static int failures;

/* command_find(name) with $PATH set to path: its result and, when 0, the path found. */
static void check_find(int line, const char *path, const char *name, int want, const char *want_path)
{
	char *argv[] = { (char *)name, NULL };
	struct command c = { .argv = argv };
	int got;

	if (path)
		setenv("PATH", path, 1);
	else
		unsetenv("PATH");
	got = command_find(&c);
	if (got != want)
		printf("FAIL %s:%d find %s on %s: %d (%s), want %d\n", __FILE__, line, name, path ? path : "(unset)",
		       got, strerror(-got), want);
	else if (want == 0 && strcmp(c.path, want_path) != 0)
		printf("FAIL %s:%d find %s on %s: %s, want %s\n", __FILE__, line, name, path ? path : "(unset)", c.path,
		       want_path);
	else
		return;
	failures++;
}

static void make_file(const char *path, mode_t mode)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);

	if (fd < 0 || close(fd) != 0 || chmod(path, mode) != 0) {
		printf("FAIL cannot make %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

int main(void)
{
	char root[] = "/tmp/spinscope-command-test-XXXXXX", a[64], b[64], path[160], want[160], cwd_path[200];

	if (!mkdtemp(root) || chdir(root) != 0) {
		printf("FAIL mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	snprintf(a, sizeof(a), "%s/a", root);
	snprintf(b, sizeof(b), "%s/b", root);
	mkdir(a, 0755);
	mkdir(b, 0755);
	mkdir("a/dir-cmd", 0755);
	make_file("a/tool", 0644); /* found first, not executable */
	make_file("b/tool", 0755);
	make_file("a/only-plain", 0644);
	make_file("b/run", 0755);
	make_file("here", 0755);

	snprintf(path, sizeof(path), "%s:%s", a, b);
	snprintf(want, sizeof(want), "%s/tool", b);
	check_find(__LINE__, path, "tool", 0, want); /* a/tool skipped: not executable */
	snprintf(want, sizeof(want), "%s/run", b);
	check_find(__LINE__, path, "run", 0, want);
	check_find(__LINE__, path, "only-plain", -EACCES, NULL);
	check_find(__LINE__, path, "dir-cmd", -EACCES, NULL); /* a directory on $PATH is not a command */
	check_find(__LINE__, path, "missing", -ENOENT, NULL);
	check_find(__LINE__, path, "here", -ENOENT, NULL); /* the working directory is not on this $PATH */
	snprintf(cwd_path, sizeof(cwd_path), "%s::%s", a, b);
	check_find(__LINE__, cwd_path, "here", 0, "here"); /* an empty entry is the working directory */
	check_find(__LINE__, path, "", -ENOENT, NULL);
	/* With a '/', as given: not looked for on $PATH. */
	check_find(__LINE__, path, "./here", 0, "./here");
	check_find(__LINE__, path, "b/tool", 0, "b/tool");
	check_find(__LINE__, path, "a/tool", -EACCES, NULL);
	check_find(__LINE__, path, "./a", -EISDIR, NULL);
	check_find(__LINE__, path, "a/tool/x", -ENOENT, NULL); /* ENOTDIR: not there either */
	check_find(__LINE__, path, "./nothing", -ENOENT, NULL);
	check_find(__LINE__, NULL, "sh", 0, "/bin/sh"); /* no $PATH: execvp's default, /bin:/usr/bin */

	if (!failures)
		printf("ok: command_find\n");
	snprintf(cwd_path, sizeof(cwd_path), "rm -rf '%s'", root);
	if (system(cwd_path) != 0)
		printf("warning: %s not removed\n", root);
	return failures ? 1 : 0;
}
