/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the collector reads from /proc about its target, and the pidfd that watches it. */
#ifndef SPINSCOPE_PROCFS_H
#define SPINSCOPE_PROCFS_H

#include <stddef.h>

/* comm of a process or thread, newline stripped. 0, or -errno (buf left untouched). */
int proc_comm(int pid, char *buf, size_t len);
int proc_thread_comm(int pid, int tid, char *buf, size_t len);

/* The first number of the line "key:" of /proc/TID/status (Tgid, VmHWM in kB...); or -errno. */
long long proc_status_value(int tid, const char *key);
/* The process (thread group) of thread tid, from /proc/TID/status; or -errno. */
int proc_tgid(int tid);

/* The path of the process's executable (readlink /proc/PID/exe). 0, or -errno. */
int proc_exe(int pid, char *buf, size_t len);

enum proc_kind {
	PROC_USER,          /* a user process that can be traced */
	PROC_KERNEL_THREAD, /* kthreadd and its children: no user code, no sockets */
	PROC_EXITED,        /* a zombie: exited, not yet reaped */
};

/* What pid is, from /proc/PID/stat. 0, or -errno. */
int proc_kind(int pid, enum proc_kind *kind);

/* The NUL-separated command line (malloc'd; *len bytes), or NULL. */
char *proc_cmdline(int pid, size_t *len);

/* Call fn(tid, arg) for each thread of pid. Returns the number of threads, or -errno. */
int proc_for_each_thread(int pid, void (*fn)(int tid, void *arg), void *arg);

/* Call fn(pid, arg) for every descendant process of pid (children, their children, ...).
 * Returns the number found, or -errno. */
int proc_for_each_descendant(int pid, void (*fn)(int pid, void *arg), void *arg);

/* A pidfd for process pid (pidfd_open(2), which glibc wraps only from 2.36), or -1 with errno set. */
int proc_pidfd(int pid);

/* Whether the running kernel was built with option=y (/proc/config.gz or /boot/config-RELEASE).
 * Returns 1 or 0, or -1 when no kernel config can be read. */
int kernel_config_enabled(const char *option);

#endif
