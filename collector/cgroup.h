/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* A cgroup v2 as a target (--cgroup): where it is, its identity, its threads, and its removal. */
#ifndef SPINSCOPE_CGROUP_H
#define SPINSCOPE_CGROUP_H

#include <limits.h>
#include <linux/types.h>
#include <stddef.h>

struct cgroup_target {
	char dir[PATH_MAX];  /* the directory on this host: the cgroup2 mount point and the path below it */
	char path[PATH_MAX]; /* the cgroup in its hierarchy, as /proc/PID/cgroup shows it: "/" or "/a/b" */
	char name[256];      /* its last path component ("/" for the root) */
	__u64 id;            /* its kernfs id: the directory's inode number (what the probes compare) */
	__u32 level;         /* its depth in the hierarchy: 0 for the root */
};

/*
 * Resolve the argument of --cgroup: a directory of a cgroup v2 (unified) hierarchy, given as a path on
 * this host (/sys/fs/cgroup/a/b), as a path below the cgroup2 mount (a/b), or as the cgroup's path in
 * its hierarchy (/a/b, as /proc/PID/cgroup shows it, when that is not a path on this host). 0, or -1
 * with a one-line reason in err.
 */
int cgroup_resolve(const char *arg, struct cgroup_target *t, char *err, size_t errlen);

/* Call fn(pid, tid, arg) for every thread in the cgroup at dir and in its descendants. Returns the
 * number of threads found. */
int cgroup_for_each_thread(const char *dir, void (*fn)(int pid, int tid, void *arg), void *arg);

/* A descriptor that polls (POLLPRI) when the cgroup at dir changes (its cgroup.events), or -errno. */
int cgroup_watch(const char *dir);

/* After the descriptor polled: whether the cgroup has been removed. */
int cgroup_removed(int watch_fd);

#endif
