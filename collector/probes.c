// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Which BPF program goes on which tracepoint, and which syscalls the programs count. Whether each
 * tracepoint exists is checked with the host (checks.c), so that a kernel lacking one gets a sentence
 * naming it rather than a libbpf error code.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "probes.h"
#include "spinscope.h"
#include "spinscope.skel.h"

struct probe {
	const char *program;
	const char *category;   /* tracefs events/<category>/<tracepoint>, to say what is missing */
	const char *tracepoint;
};

static const struct probe PROBES[] = {
	{ "on_sys_enter", "raw_syscalls", "sys_enter" },
	{ "on_sys_exit", "raw_syscalls", "sys_exit" },
	{ "on_sched_switch", "sched", "sched_switch" },
	{ "on_sched_waking", "sched", "sched_waking" },
	{ "on_sched_process_fork", "sched", "sched_process_fork" },
	{ "on_sched_process_exit", "sched", "sched_process_exit" },
	{ "on_sched_process_exec", "sched", "sched_process_exec" },
	{ "on_tcp_probe", "tcp", "tcp_probe" },
};

/*
 * The syscalls spinscope counts, by this architecture's numbers. A syscall the C library headers
 * do not define (an older system) is simply not counted.
 */
static const struct {
	long nr;
	enum syscall_class cls;
} SYSCALLS[] = {
	{ SYS_write, SC_WRITE },
	{ SYS_sendto, SC_WRITE },
	{ SYS_writev, SC_WRITEV },
	{ SYS_sendmsg, SC_SENDMSG },
	{ SYS_sendmmsg, SC_SENDMMSG },
#ifdef SYS_sendfile64
	{ SYS_sendfile64, SC_SENDFILE },
#else
	{ SYS_sendfile, SC_SENDFILE },
#endif
	{ SYS_read, SC_READ },
	{ SYS_readv, SC_READ },
	{ SYS_recvfrom, SC_READ },
	{ SYS_recvmsg, SC_READ },
	{ SYS_recvmmsg, SC_RECVMMSG },
	{ SYS_close, SC_CLOSE },
#ifdef SYS_select
	{ SYS_select, SC_POLL_TV4 },
#endif
	{ SYS_pselect6, SC_POLL_TV4 },
#ifdef SYS_poll
	{ SYS_poll, SC_POLL_MS2 },
#endif
	{ SYS_ppoll, SC_POLL_TS2 },
#ifdef SYS_epoll_wait
	{ SYS_epoll_wait, SC_POLL_MS3 },
#endif
	{ SYS_epoll_pwait, SC_POLL_MS3 },
#ifdef SYS_epoll_pwait2
	{ SYS_epoll_pwait2, SC_POLL_TS3 },
#endif
	{ SYS_futex, SC_FUTEX },
#ifdef SYS_futex_waitv
	{ SYS_futex_waitv, SC_FUTEX_WAITV },
#endif
	{ SYS_restart_syscall, SC_RESTART },
#ifdef SYS_accept
	{ SYS_accept, SC_ACCEPT },
#endif
	{ SYS_accept4, SC_ACCEPT },
	{ SYS_epoll_ctl, SC_EPOLL_CTL },
	{ SYS_clone, SC_CLONE },
#ifdef SYS_clone3
	{ SYS_clone3, SC_CLONE },
#endif
};

/*
 * What a waker was doing, by the syscall it was in: the write family, futexes and thread exit are
 * counted above or here; the memory-map calls whose lock releases wake other threads of the process
 * (munmap next to a page fault, say) are contention, not handoffs. Everything else is WAKE_OTHER.
 */
static const struct {
	long nr;
	enum wake_mechanism mechanism;
} WAKERS[] = {
	{ SYS_futex, WAKE_FUTEX },
#ifdef SYS_futex_waitv
	{ SYS_futex_waitv, WAKE_FUTEX },
#endif
	{ SYS_write, WAKE_IO },
	{ SYS_writev, WAKE_IO },
	{ SYS_pwrite64, WAKE_IO },
	{ SYS_sendto, WAKE_IO },
	{ SYS_sendmsg, WAKE_IO },
	{ SYS_sendmmsg, WAKE_IO },
	{ SYS_close, WAKE_IO },
#ifdef SYS_sendfile64
	{ SYS_sendfile64, WAKE_IO },
#else
	{ SYS_sendfile, WAKE_IO },
#endif
	{ SYS_splice, WAKE_IO },
	{ SYS_mmap, WAKE_MM },
	{ SYS_munmap, WAKE_MM },
	{ SYS_mprotect, WAKE_MM },
	{ SYS_madvise, WAKE_MM },
	{ SYS_mremap, WAKE_MM },
	{ SYS_brk, WAKE_MM },
	{ SYS_exit, WAKE_EXIT },
	{ SYS_exit_group, WAKE_EXIT },
};

/* Where each read-family call puts its data (enum read_buffer): looked at on a connection's first read,
 * for the HTTP/2 preface. */
static const struct {
	long nr;
	enum read_buffer buffer;
} READ_BUFFERS[] = {
	{ SYS_read, RB_BUF },
	{ SYS_recvfrom, RB_RECV },
	{ SYS_readv, RB_IOV },
	{ SYS_recvmsg, RB_MSG },
};

#define TABLE_FILL(table, rows, field)                                                             \
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)                                \
		if (rows[i].nr >= 0 && rows[i].nr < SYSCALL_TABLE_SIZE)                            \
			table[rows[i].nr] = rows[i].field;

void probes_configure(struct spinscope_bpf *skel)
{
	TABLE_FILL(skel->rodata->syscall_class, SYSCALLS, cls)
	TABLE_FILL(skel->rodata->wake_mechanism, WAKERS, mechanism)
	TABLE_FILL(skel->rodata->read_buffer, READ_BUFFERS, buffer)
}

#define NPROBES (sizeof(PROBES) / sizeof(PROBES[0]))

const char *tracefs_dir(void)
{
	static const char *const candidates[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	static char buf[512];
	const char *override = getenv("SPINSCOPE_TRACEFS"); /* tests: a tree lacking a tracepoint */

	if (override)
		return override;
	for (size_t i = 0; i < 2; i++) {
		snprintf(buf, sizeof(buf), "%s/events/raw_syscalls", candidates[i]);
		if (access(buf, F_OK) == 0)
			return candidates[i];
	}
	/* Not mounted (seen on fresh boots): libbpf needs it to resolve tracepoint ids. */
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0)
		return "/sys/kernel/tracing";
	return NULL;
}

int probes_attach(struct spinscope_bpf *skel, struct bpf_link **links, size_t max_links,
		  size_t *nlinks, char *err, size_t errlen)
{
	*nlinks = 0;
	for (size_t i = 0; i < NPROBES && *nlinks < max_links; i++) {
		const struct probe *p = &PROBES[i];
		struct bpf_program *prog = bpf_object__find_program_by_name(skel->obj, p->program);
		struct bpf_link *link;

		if (!prog) {
			snprintf(err, errlen, "internal: BPF program %s not found", p->program);
			return -ENOENT;
		}
		link = bpf_program__attach(prog);
		if (!link) {
			int e = errno;

			snprintf(err, errlen, "cannot attach %s to %s/%s: %s", p->program, p->category,
				 p->tracepoint, strerror(e));
			return -e;
		}
		links[(*nlinks)++] = link;
	}
	return 0;
}

const char *probes_tracepoint(size_t i, const char **category)
{
	*category = PROBES[i].category;
	return PROBES[i].tracepoint;
}

size_t probes_count(void)
{
	return NPROBES;
}

/*
 * One link after the other. Detaching from one thread per link made no difference on 6.18 (a 0.2 s
 * capture took 0.37 s end to end either way, medians of 6 runs), and the capture is written before.
 */
void probes_detach(struct bpf_link **links, size_t nlinks)
{
	for (size_t i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
}
