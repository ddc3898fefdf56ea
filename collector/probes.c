// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Which BPF program goes on which tracepoint.
 *
 * Attachment is explicit rather than by section name so that one program can serve several
 * tracepoints of the same shape (all socket-I/O exits share io_exit) and so that a tracepoint a
 * kernel lacks can be skipped with a warning instead of failing the whole capture.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "probes.h"
#include "spinscope.h"
#include "spinscope.skel.h"

struct probe {
	const char *program;
	const char *category;   /* tracefs events/<category>/<tracepoint> */
	const char *tracepoint; /* NULL for tp_btf programs (attached by BTF id) */
	bool required;
};

#define SYSCALL(prog, name, req) { prog, "syscalls", name, req }
#define BTF(prog) { prog, NULL, NULL, true }

static const struct probe PROBES[] = {
	/* socket write family */
	SYSCALL("enter_write", "sys_enter_write", true),
	SYSCALL("io_exit", "sys_exit_write", true),
	SYSCALL("enter_writev", "sys_enter_writev", true),
	SYSCALL("io_exit", "sys_exit_writev", true),
	SYSCALL("enter_write", "sys_enter_sendto", true),
	SYSCALL("io_exit", "sys_exit_sendto", true),
	SYSCALL("enter_sendmsg", "sys_enter_sendmsg", true),
	SYSCALL("io_exit", "sys_exit_sendmsg", true),
	SYSCALL("enter_sendmmsg", "sys_enter_sendmmsg", false),
	SYSCALL("io_exit", "sys_exit_sendmmsg", false),
	SYSCALL("enter_sendfile", "sys_enter_sendfile64", false),
	SYSCALL("io_exit", "sys_exit_sendfile64", false),
	/* socket read family */
	SYSCALL("enter_read", "sys_enter_read", true),
	SYSCALL("io_exit", "sys_exit_read", true),
	SYSCALL("enter_read", "sys_enter_readv", true),
	SYSCALL("io_exit", "sys_exit_readv", true),
	SYSCALL("enter_read", "sys_enter_recvfrom", true),
	SYSCALL("io_exit", "sys_exit_recvfrom", true),
	SYSCALL("enter_read", "sys_enter_recvmsg", true),
	SYSCALL("io_exit", "sys_exit_recvmsg", true),
	SYSCALL("enter_recvmmsg", "sys_enter_recvmmsg", false),
	SYSCALL("io_exit", "sys_exit_recvmmsg", false),
	SYSCALL("enter_close", "sys_enter_close", true),
	/* poll family */
	SYSCALL("poll_enter", "sys_enter_select", false),
	SYSCALL("poll_exit", "sys_exit_select", false),
	SYSCALL("poll_enter", "sys_enter_pselect6", true),
	SYSCALL("poll_exit", "sys_exit_pselect6", true),
	SYSCALL("poll_enter", "sys_enter_poll", false),
	SYSCALL("poll_exit", "sys_exit_poll", false),
	SYSCALL("poll_enter", "sys_enter_ppoll", true),
	SYSCALL("poll_exit", "sys_exit_ppoll", true),
	SYSCALL("poll_enter", "sys_enter_epoll_wait", false),
	SYSCALL("poll_exit", "sys_exit_epoll_wait", false),
	SYSCALL("poll_enter", "sys_enter_epoll_pwait", true),
	SYSCALL("poll_exit", "sys_exit_epoll_pwait", true),
	SYSCALL("poll_enter", "sys_enter_epoll_pwait2", false),
	SYSCALL("poll_exit", "sys_exit_epoll_pwait2", false),
	/* futex */
	SYSCALL("enter_futex", "sys_enter_futex", true),
	SYSCALL("futex_exit", "sys_exit_futex", true),
	SYSCALL("enter_futex_waitv", "sys_enter_futex_waitv", false),
	SYSCALL("futex_exit", "sys_exit_futex_waitv", false),
	/* scheduler */
	BTF("on_sched_switch"),
	BTF("on_sched_waking"),
	BTF("on_sched_process_fork"),
	BTF("on_sched_process_exit"),
};

#define NPROBES (sizeof(PROBES) / sizeof(PROBES[0]))

const char *tracefs_dir(void)
{
	static const char *const candidates[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	static char buf[512];
	const char *override = getenv("SPINSCOPE_TRACEFS"); /* tests: a tree lacking a tracepoint */

	if (override)
		return override;
	for (size_t i = 0; i < 2; i++) {
		snprintf(buf, sizeof(buf), "%s/events/syscalls", candidates[i]);
		if (access(buf, F_OK) == 0)
			return candidates[i];
	}
	/* Not mounted (seen on fresh boots): libbpf needs it to resolve tracepoint ids. */
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0)
		return "/sys/kernel/tracing";
	return NULL;
}

static bool tracepoint_exists(const char *tracefs, const struct probe *p)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/events/%s/%s", tracefs, p->category, p->tracepoint);
	return access(path, F_OK) == 0;
}

int probes_attach(struct spinscope_bpf *skel, struct bpf_link **links, size_t max_links,
		  size_t *nlinks, char *err, size_t errlen)
{
	const char *tracefs = tracefs_dir();

	*nlinks = 0;
	if (!tracefs) {
		snprintf(err, errlen, "tracefs is not mounted and could not be mounted at "
				      "/sys/kernel/tracing (mount -t tracefs nodev /sys/kernel/tracing)");
		return -ENOENT;
	}
	for (size_t i = 0; i < NPROBES && *nlinks < max_links; i++) {
		const struct probe *p = &PROBES[i];
		struct bpf_program *prog = bpf_object__find_program_by_name(skel->obj, p->program);
		struct bpf_link *link;

		if (!prog) {
			snprintf(err, errlen, "internal: BPF program %s not found", p->program);
			return -ENOENT;
		}
		if (p->tracepoint && !tracepoint_exists(tracefs, p)) {
			if (p->required) {
				snprintf(err, errlen, "tracepoint %s/%s is missing from this kernel",
					 p->category, p->tracepoint);
				return -ENOENT;
			}
			fprintf(stderr, "spinscope-collector: warning: tracepoint %s/%s missing; "
					"those calls will not be counted\n", p->category, p->tracepoint);
			continue;
		}
		link = p->tracepoint ? bpf_program__attach_tracepoint(prog, p->category, p->tracepoint)
				     : bpf_program__attach(prog);
		if (!link) {
			int e = errno;

			snprintf(err, errlen, "cannot attach %s to %s: %s", p->program,
				 p->tracepoint ? p->tracepoint : bpf_program__section_name(prog),
				 strerror(e));
			return -e;
		}
		links[(*nlinks)++] = link;
	}
	return 0;
}

size_t probes_count(void)
{
	return NPROBES;
}

struct detach_job {
	struct bpf_link **links;
	size_t n;
};

static void *detach_some(void *arg)
{
	struct detach_job *job = arg;

	for (size_t i = 0; i < job->n; i++)
		bpf_link__destroy(job->links[i]);
	return NULL;
}

/*
 * Each tracepoint detach waits for an RCU grace period (tens of ms): one after the other, 50 links
 * take seconds. Detaching from several threads lets the waits overlap.
 */
void probes_detach(struct bpf_link **links, size_t nlinks)
{
	enum { THREADS = 16 };
	struct detach_job jobs[THREADS];
	pthread_t tids[THREADS];
	bool started[THREADS] = { false };
	size_t per = (nlinks + THREADS - 1) / THREADS;

	for (size_t t = 0; t < THREADS && per; t++) {
		size_t first = t * per;

		jobs[t].links = links + first;
		jobs[t].n = first >= nlinks ? 0 : (nlinks - first < per ? nlinks - first : per);
		if (jobs[t].n == 0)
			break;
		started[t] = pthread_create(&tids[t], NULL, detach_some, &jobs[t]) == 0;
		if (!started[t])
			detach_some(&jobs[t]);
	}
	for (size_t t = 0; t < THREADS; t++)
		if (started[t])
			pthread_join(tids[t], NULL);
}
