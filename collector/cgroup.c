// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cgroup.h"
#include "procfs.h"

#define CGROUP2_SUPER_MAGIC 0x63677270
#define CGROUP_SUPER_MAGIC 0x27e0eb
#define PROC_CGROUP_INIT_INO 0xEFFFFFFBU /* the initial cgroup namespace's inode (include/linux/proc_ns.h) */
#define MAX_DEPTH 256                    /* descendants walked below the target, at most */

/* A cgroup2 mount: where it is mounted, and which directory of the hierarchy is its root. */
struct mount {
	char point[PATH_MAX];
	char root[PATH_MAX];
};

/* mountinfo writes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/* The cgroup2 mounts (/proc/self/mountinfo), at most max. Returns how many. */
static int cgroup2_mounts(struct mount *mounts, int max)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int n = 0;

	if (!f)
		return 0;
	while (n < max && getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS */
		char *fields[6], *save = NULL, *tok, *sep = strstr(line, " - ");
		int i = 0;

		if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
			continue;
		*sep = '\0';
		for (tok = strtok_r(line, " ", &save); tok && i < 6; tok = strtok_r(NULL, " ", &save))
			fields[i++] = tok;
		if (i < 5)
			continue;
		unescape(fields[3]);
		unescape(fields[4]);
		snprintf(mounts[n].root, sizeof(mounts[n].root), "%s", fields[3]);
		snprintf(mounts[n].point, sizeof(mounts[n].point), "%s", fields[4]);
		n++;
	}
	free(line);
	fclose(f);
	return n;
}

/* Whether path is dir or below it. */
static bool path_under(const char *path, const char *dir)
{
	size_t len = strlen(dir);

	if (len == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, len) == 0 && (path[len] == '/' || path[len] == '\0');
}

static __u32 path_depth(const char *path)
{
	__u32 depth = 0;

	for (const char *p = path; *p; p++)
		if (*p != '/' && (p == path || p[-1] == '/'))
			depth++;
	return depth;
}

static int failed(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The one-line reason in err; -1. */
static int failed(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/*
 * The directory arg names on this host, in resolved (PATH_MAX). A relative path is below the cgroup2
 * mount; an absolute one that is not a path on this host may be the cgroup's path in its hierarchy, as
 * /proc/PID/cgroup shows it.
 */
static int cgroup_locate(const char *arg, const struct mount *mount, char *resolved, char *err, size_t errlen)
{
	char candidate[2 * PATH_MAX];
	struct stat st;

	if (arg[0] != '/' || (stat(arg, &st) != 0 && errno == ENOENT))
		snprintf(candidate, sizeof(candidate), "%s%s%s", mount->point, arg[0] == '/' ? "" : "/", arg);
	else
		snprintf(candidate, sizeof(candidate), "%s", arg);
	if (!realpath(candidate, resolved))
		return failed(err, errlen, "--cgroup %s: no such cgroup (%s)", arg, strerror(errno));
	return 0;
}

/* That the resolved path is a directory of a cgroup v2 hierarchy (mount: the first one, to name). */
static int cgroup2_directory(const char *arg, const char *resolved, const struct mount *mount, char *err,
			     size_t errlen)
{
	struct statfs fs;
	struct stat st;

	if (stat(resolved, &st) != 0 || statfs(resolved, &fs) != 0)
		return failed(err, errlen, "--cgroup %s: cannot read it: %s", arg, strerror(errno));
	if (fs.f_type == CGROUP_SUPER_MAGIC)
		return failed(err, errlen, "--cgroup %s is in a cgroup v1 hierarchy: spinscope follows cgroup v2 "
			      "(the unified hierarchy, mounted at %s)", arg, mount->point);
	if (fs.f_type != CGROUP2_SUPER_MAGIC)
		return failed(err, errlen, "--cgroup %s is not in a cgroup v2 hierarchy (mounted at %s)", arg,
			      mount->point);
	if (!S_ISDIR(st.st_mode))
		return failed(err, errlen, "--cgroup %s is a file, not a cgroup directory", arg);
	return 0;
}

/* The mount the resolved path is under (the deepest, if several), or NULL. */
static const struct mount *mount_of(const char *resolved, const struct mount *mounts, int n)
{
	const struct mount *m = NULL;

	for (int i = 0; i < n; i++)
		if (path_under(resolved, mounts[i].point) && (!m || strlen(mounts[i].point) > strlen(m->point)))
			m = &mounts[i];
	return m;
}

/*
 * That the cgroup's level can be counted from the hierarchy's root: the mount's root is given relative to
 * this process's cgroup namespace, so the count holds only in the initial one.
 */
static int initial_namespace(const char *arg, const struct mount *m, char *err, size_t errlen)
{
	struct stat st;

	if (stat("/proc/self/ns/cgroup", &st) == 0 && st.st_ino != PROC_CGROUP_INIT_INO)
		return failed(err, errlen, "--cgroup %s: the collector runs in a cgroup namespace; run it in the "
			      "host's (cgroups are told apart by their depth from the root)", arg);
	if (strncmp(m->root, "/..", 3) == 0)
		return failed(err, errlen, "--cgroup %s: its mount's root (%s) is outside this cgroup namespace", arg,
			      m->root);
	return 0;
}

/* The target's names and identity from the resolved directory under mount m. */
static int cgroup_identify(const char *arg, const char *resolved, const struct mount *m,
			   struct cgroup_target *t, char *err, size_t errlen)
{
	struct stat st;

	snprintf(t->dir, sizeof(t->dir), "%s", resolved);
	if (snprintf(t->path, sizeof(t->path), "%s%s", strcmp(m->root, "/") ? m->root : "",
		     resolved + (strcmp(m->point, "/") ? strlen(m->point) : 0)) >= (int)sizeof(t->path))
		return failed(err, errlen, "--cgroup %s: its path is too long", arg);
	if (!t->path[0])
		snprintf(t->path, sizeof(t->path), "/");
	snprintf(t->name, sizeof(t->name), "%s", strrchr(t->path, '/')[1] ? strrchr(t->path, '/') + 1 : "/");
	t->level = path_depth(t->path);
	if (stat(resolved, &st) != 0)
		return failed(err, errlen, "--cgroup %s: cannot read it: %s", arg, strerror(errno));
	t->id = st.st_ino;
	return 0;
}

int cgroup_resolve(const char *arg, struct cgroup_target *t, char *err, size_t errlen)
{
	struct mount mounts[16];
	const struct mount *m;
	char resolved[PATH_MAX];
	int n = cgroup2_mounts(mounts, 16);

	memset(t, 0, sizeof(*t));
	if (!*arg)
		return failed(err, errlen, "--cgroup must name a cgroup v2 directory, not ''");
	if (n == 0)
		return failed(err, errlen, "--cgroup %s: no cgroup v2 hierarchy is mounted on this host", arg);
	if (cgroup_locate(arg, &mounts[0], resolved, err, errlen) ||
	    cgroup2_directory(arg, resolved, &mounts[0], err, errlen))
		return -1;
	m = mount_of(resolved, mounts, n);
	if (!m)
		return failed(err, errlen, "--cgroup %s: not under a cgroup2 mount point of this namespace", arg);
	if (initial_namespace(arg, m, err, errlen))
		return -1;
	return cgroup_identify(arg, resolved, m, t, err, errlen);
}

/* The threads of one cgroup (its cgroup.threads: thread ids, of any process), each with its process. */
static int threads_of(const char *dir, void (*fn)(int pid, int tid, void *arg), void *arg)
{
	char path[PATH_MAX + 32];
	FILE *f;
	int tid, count = 0;

	snprintf(path, sizeof(path), "%s/cgroup.threads", dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fscanf(f, "%d", &tid) == 1) {
		int pid = proc_tgid(tid);

		if (pid > 0) {
			fn(pid, tid, arg);
			count++;
		}
	}
	fclose(f);
	return count;
}

static int walk(const char *dir, int depth, void (*fn)(int pid, int tid, void *arg), void *arg)
{
	int count = threads_of(dir, fn, arg);
	struct dirent *e;
	DIR *d;

	if (depth >= MAX_DEPTH || !(d = opendir(dir)))
		return count;
	while ((e = readdir(d))) {
		char child[PATH_MAX];

		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (snprintf(child, sizeof(child), "%s/%s", dir, e->d_name) >= (int)sizeof(child))
			continue;
		count += walk(child, depth + 1, fn, arg);
	}
	closedir(d);
	return count;
}

int cgroup_for_each_thread(const char *dir, void (*fn)(int pid, int tid, void *arg), void *arg)
{
	return walk(dir, 0, fn, arg);
}

/*
 * cgroup.events ("populated 0|1", "frozen 0|1") polls with POLLPRI when it changes, and with
 * POLLPRI|POLLERR once the cgroup is removed, after which reading it fails with ENODEV. Reading it also
 * acknowledges the change (the next poll waits for the next one).
 */
int cgroup_watch(const char *dir)
{
	char path[PATH_MAX + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/cgroup.events", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	cgroup_removed(fd);
	return fd;
}

int cgroup_removed(int fd)
{
	char buf[256];

	if (lseek(fd, 0, SEEK_SET) < 0 || read(fd, buf, sizeof(buf)) < 0)
		return errno == ENODEV || errno == ENOENT;
	return 0;
}
