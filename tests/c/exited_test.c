// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The threads gone as the capture lists them (exited.c, snapshot.c), on threads put by hand in a BPF hash
 * map shaped like the exited map: the first --exited-rows threads drained keep a row, the rest fold by
 * process and name; a kept row whose tid a live thread has taken since is folded at the write
 * (exited_rows_of); the processes are listed once each, the target first (snapshot_pids); threads exited
 * count the exited and the live ones marked exited, and those of a process gone unseen
 * (snapshot_process_gone). Needs root (bpf). Prints one line per failed check;
 * exits 1 if any failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "snapshot.h"

#include "check.h"

/* A thread gone, put in the exited map as the probes would. */
static void exited(int fd, __u32 tid, __u32 pid, const char *comm, __u64 start_ns)
{
	struct thread_key key = { .tid = tid, .start_ns = start_ns };
	struct thread_stats t = { .pid = pid, .start_ns = start_ns, .flags = THREAD_EXITED };

	t.c.write_calls = tid; /* a count each thread's own, to see where it went */
	snprintf(t.comm, sizeof(t.comm), "%s", comm);
	if (bpf_map_update_elem(fd, &key, &t, BPF_ANY))
		printf("FAIL exited map update: %s\n", strerror(errno)), failures++;
}

/* The row of r that holds tid, or r->n. */
static size_t row_of(const struct exited_threads *r, __u32 tid)
{
	size_t i = 0;

	while (i < r->n && r->keys[i].tid != tid)
		i++;
	return i;
}

int main(void)
{
	int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "exited_test", sizeof(struct thread_key),
				sizeof(struct thread_stats), 64, NULL);
	__u32 live_tids[] = { 102, 301 };
	struct thread_stats live[2] = { { .pid = 300 }, { .pid = 300, .flags = THREAD_EXITED } };
	struct snapshot snap = { .tids = live_tids, .threads = live, .nthreads = 2 };
	struct exited_rows rows;
	struct exited_threads r;
	__u32 *pids;
	size_t npids;

	if (fd < 0) {
		printf("FAIL bpf_map_create: %s (run as root)\n", strerror(errno));
		return 1;
	}
	CHECK_EQ("exited_init", exited_init(&r, 2), 0);
	/* Two drains, so which threads come first is known: 101 and 102 keep their rows (keep = 2). */
	exited(fd, 101, 100, "a", 1);
	exited(fd, 102, 100, "a", 2);
	CHECK_EQ("exited_drain", exited_drain(&r, fd, NULL, NULL), 0);
	exited(fd, 201, 200, "b", 3);
	exited(fd, 202, 200, "b", 4);
	CHECK_EQ("exited_drain", exited_drain(&r, fd, NULL, NULL), 0);
	CHECK_EQ("threads exited", r.count, 4);
	CHECK_EQ("rows kept", r.n, 2);
	CHECK_EQ("groups folded", r.ngroups, 1);
	CHECK_EQ("the group's threads", r.groups[0].threads, 2);
	CHECK_EQ("the group's writes", r.groups[0].sum.c.write_calls, 201 + 202);
	CHECK_EQ("writes of every thread exited", r.sum.write_calls, 101 + 102 + 201 + 202);

	/* A live thread has taken tid 102 (in process 300): its old row is folded when written. */
	snap.exited = &r;
	CHECK_EQ("exited_rows_of", exited_rows_of(&r, live_tids, 2, &rows), 0);
	CHECK_EQ("row 101 written", rows.folded[row_of(&r, 101)], 0);
	CHECK_EQ("row 102 folded", rows.folded[row_of(&r, 102)], 1);
	CHECK_EQ("groups written", rows.ngroups, 2);
	CHECK_EQ("the new group's pid", rows.groups[1].pid, 100);
	CHECK_EQ("the new group's writes", rows.groups[1].sum.c.write_calls, 102);
	CHECK_EQ("the exited's own groups untouched", r.ngroups, 1);
	exited_rows_free(&rows);

	/* The target (100) first, then the live threads' process, then the folded group's: each once. */
	pids = snapshot_pids(&snap, 100, &npids);
	CHECK_EQ("processes", npids, 3);
	CHECK_EQ("process 1", pids && npids > 0 ? pids[0] : 0, 100);
	CHECK_EQ("process 2", pids && npids > 1 ? pids[1] : 0, 300);
	CHECK_EQ("process 3", pids && npids > 2 ? pids[2] : 0, 200);
	free(pids);
	pids = snapshot_pids(&snap, 0, &npids); /* cgroup mode: no target process */
	CHECK_EQ("processes without a target", npids, 3);
	CHECK_EQ("first process without a target", pids && npids > 0 ? pids[0] : 0, 300);
	free(pids);
	CHECK_EQ("threads exited", snapshot_threads_exited(&snap), 4 + 1);
	/* Process 300 gone with its exit unseen (it came while the probes attached): its live thread is
	 * marked exited at that time, the one already exited keeps its own; no other process's is touched. */
	live[1].exit_ns = 5;
	snapshot_process_gone(&snap, 999, 7);
	CHECK_EQ("another process gone: threads exited", snapshot_threads_exited(&snap), 4 + 1);
	snapshot_process_gone(&snap, 300, 7);
	CHECK_EQ("threads exited after the process is gone", snapshot_threads_exited(&snap), 4 + 2);
	CHECK_EQ("its exit time", live[0].exit_ns, 7);
	CHECK_EQ("the exited one's own exit time", live[1].exit_ns, 5);

	exited_free(&r);
	if (!failures)
		printf("ok: exited\n");
	return failures ? 1 : 0;
}
