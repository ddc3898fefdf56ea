// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#include "procfs.h"

static int read_comm(const char *path, char *buf, size_t len)
{
	char tmp[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, tmp, sizeof(tmp) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENODATA;
	if (tmp[n - 1] == '\n') /* the one the kernel adds: a name may hold others */
		n--;
	tmp[n] = '\0';
	snprintf(buf, len, "%s", tmp);
	return 0;
}

int proc_comm(int pid, char *buf, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	return read_comm(path, buf, len);
}

int proc_thread_comm(int pid, int tid, char *buf, size_t len)
{
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	return read_comm(path, buf, len);
}

char *proc_cmdline(int pid, size_t *len)
{
	char path[64];
	size_t cap = 4096, used = 0;
	char *buf = malloc(cap);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((n = read(fd, buf + used, cap - used)) > 0) {
		used += n;
		if (used == cap) {
			char *grown = realloc(buf, cap * 2);

			if (!grown)
				break;
			buf = grown;
			cap *= 2;
		}
	}
	close(fd);
	*len = used;
	return buf;
}

long long proc_status_value(int tid, const char *key)
{
	char path[64], line[256];
	long long value = -ENOENT;
	size_t len = strlen(key);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, len) && line[len] == ':' && sscanf(line + len + 1, "%lld", &value) == 1)
			break;
	fclose(f);
	return value;
}

int proc_tgid(int tid)
{
	return (int)proc_status_value(tid, "Tgid");
}

int proc_exe(int pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

int proc_kind(int pid, enum proc_kind *kind)
{
	enum { PF_KTHREAD = 0x00200000 };
	char path[64], stat[1024], *p;
	unsigned long flags;
	char state;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENODATA;
	stat[n] = '\0';
	/* "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may hold anything, even ")" */
	p = strrchr(stat, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
		return -EINVAL;
	*kind = flags & PF_KTHREAD ? PROC_KERNEL_THREAD : state == 'Z' || state == 'X' ? PROC_EXITED : PROC_USER;
	return 0;
}

int proc_for_each_thread(int pid, void (*fn)(int tid, void *arg), void *arg)
{
	char path[64];
	struct dirent *e;
	int count = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((e = readdir(dir))) {
		int tid = atoi(e->d_name);

		if (tid > 0) {
			fn(tid, arg);
			count++;
		}
	}
	closedir(dir);
	return count;
}

int kernel_config_enabled(const char *option)
{
	char path[128], line[256], want[128];
	struct utsname u;
	gzFile f = gzopen("/proc/config.gz", "r"); /* zlib also reads the plain /boot file */
	int found = 0;

	if (!f && uname(&u) == 0) {
		snprintf(path, sizeof(path), "/boot/config-%s", u.release);
		f = gzopen(path, "r");
	}
	if (!f)
		return -1;
	snprintf(want, sizeof(want), "%s=y\n", option);
	while (!found && gzgets(f, line, sizeof(line)))
		found = strcmp(line, want) == 0;
	gzclose(f);
	return found;
}

/* Parent of a process from /proc/PID/stat (the field after the parenthesised comm), or -1. */
static int proc_ppid(int pid)
{
	char path[64], buf[512], *close_paren;
	int ppid = -1, fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	close_paren = strrchr(buf, ')'); /* comm may itself contain spaces and parentheses */
	if (!close_paren || sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
		return -1;
	return ppid;
}

/* Every process's (pid, ppid), from one pass over /proc. */
struct proc_pairs {
	int *pids, *parents;
	int n, cap;
};

static void proc_pairs_free(struct proc_pairs *pairs)
{
	free(pairs->pids);
	free(pairs->parents);
}

/* Append (p, ppid), growing the arrays. 0 or -ENOMEM (the pairs freed). */
static int proc_pairs_add(struct proc_pairs *pairs, int p, int ppid)
{
	if (pairs->n == pairs->cap) {
		int cap = pairs->cap ? pairs->cap * 2 : 1024;
		int *np = realloc(pairs->pids, cap * sizeof(*np));
		int *pp = realloc(pairs->parents, cap * sizeof(*pp));

		if (!np || !pp) {
			free(np ? np : pairs->pids);
			free(pp ? pp : pairs->parents);
			return -ENOMEM;
		}
		pairs->pids = np;
		pairs->parents = pp;
		pairs->cap = cap;
	}
	pairs->pids[pairs->n] = p;
	pairs->parents[pairs->n++] = ppid;
	return 0;
}

/* (pid, ppid) of every process in /proc. 0 or -errno (nothing to free). */
static int proc_pairs_read(struct proc_pairs *pairs)
{
	struct dirent *e;
	DIR *dir = opendir("/proc");

	*pairs = (struct proc_pairs){ 0 };
	if (!dir)
		return -errno;
	while ((e = readdir(dir))) {
		int p = atoi(e->d_name), ppid;

		if (p <= 0 || (ppid = proc_ppid(p)) < 0)
			continue;
		if (proc_pairs_add(pairs, p, ppid)) {
			closedir(dir);
			return -ENOMEM;
		}
	}
	closedir(dir);
	return 0;
}

int proc_for_each_descendant(int pid, void (*fn)(int pid, void *arg), void *arg)
{
	struct proc_pairs pairs;
	int *frontier, head = 0, tail = 0, found = 0, err = proc_pairs_read(&pairs);

	if (err)
		return err;
	/* Breadth-first from pid: `frontier` holds the descendants found so far, in the order found. */
	frontier = malloc((pairs.n + 1) * sizeof(*frontier));
	if (!frontier) {
		proc_pairs_free(&pairs);
		return -ENOMEM;
	}
	frontier[tail++] = pid;
	while (head < tail) {
		int parent = frontier[head++];

		for (int i = 0; i < pairs.n; i++) {
			if (pairs.parents[i] == parent && tail <= pairs.n) {
				frontier[tail++] = pairs.pids[i];
				fn(pairs.pids[i], arg);
				found++;
			}
		}
	}
	free(frontier);
	proc_pairs_free(&pairs);
	return found;
}

int proc_pidfd(int pid)
{
	return syscall(SYS_pidfd_open, pid, 0);
}
