// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The session's record loop and its end: count until the duration ends, a signal comes or the target
 * exits, draining exited threads, taking --interval snapshots and --checkpoint files on the way; then
 * the final read and the capture.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cgroup.h"
#include "session.h"
#include "stacks.h"
#include "timeline.h"
#include "spinscope.skel.h"

/* How often the exited threads are drained into the capture: at 1,000 exits a second, ~100 a time. (--stacks'
 * ring is drained by the unwinder's own thread: stacks.h.) */
#define DRAIN_EVERY_NS 100000000ULL

/* When the record loop does what next (CLOCK_MONOTONIC ns; 0: never). */
struct record_clock {
	__u64 start, deadline;
	__u64 tick, next_tick;             /* --interval */
	__u64 every, next_checkpoint;      /* --checkpoint */
	__u64 next_drain;                  /* DRAIN_EVERY_NS */
};

static struct record_clock record_clock(const struct session *s, const struct options *o)
{
	__u64 start = s->meta.start_mono_ns;
	struct record_clock c = { .start = start, .tick = o->interval_s * 1e9, .every = o->checkpoint_s * 1e9,
				  .next_drain = start + DRAIN_EVERY_NS };

	if (o->duration_s > 0)
		c.deadline = start + (__u64)(o->duration_s * 1e9);
	if (c.tick)
		c.next_tick = start + c.tick;
	if (c.every)
		c.next_checkpoint = start + c.every;
	return c;
}

/* The threads gone since, and their edges, moved out of the maps: so no map fills. */
static void drain_exited(struct session *s)
{
	struct bpf_map *wakeups = s->skel->maps.wakeups;
	struct thread_key *gone = NULL;
	size_t ngone = 0;

	if (exited_drain(&s->exited, bpf_map__fd(s->skel->maps.exited), &gone, &ngone) ||
	    exited_edges(&s->exited, bpf_map__fd(wakeups), bpf_map__max_entries(wakeups), gone, ngone))
		fprintf(stderr, PROG ": warning: out of memory folding exited threads\n");
	free(gone);
}

/* One --interval snapshot: kept, journaled, streamed. false when the stream's reader has gone (the end). */
static bool take_interval(struct session *s, const struct options *o, const struct record_clock *c, __u64 now)
{
	struct snapshot snap;
	int ret = snapshot_read(s->skel, &s->exited, &snap, false);

	if (ret == 0 && intervals_add(&s->intervals, &snap, now))
		fprintf(stderr, PROG ": warning: out of memory: interval at %.1f s not kept\n", (now - c->start) / 1e9);
	else if (ret == 0 && c->every)
		journal_append(s, o);
	if (ret == 0 && o->stream_fd >= 0) {
		s->meta.duration_s = (now - c->start) / 1e9;
		s->meta.end_reason = "live";
		ret = stream_line(s, o, &snap);
		s->meta.end_reason = "duration";
	}
	snapshot_free(&snap);
	if (ret == -EPIPE) {
		s->meta.end_reason = "stream-closed";
		return false;
	}
	if (ret && o->stream_fd >= 0)
		fprintf(stderr, PROG ": warning: --stream: line at %.1f s not written: %s\n", (now - c->start) / 1e9,
			strerror(-ret));
	return true;
}

/* Until the next thing to do: -1 (none), or ms rounded up. */
static int timeout_ms(const struct record_clock *c, __u64 now)
{
	__u64 wake = c->deadline;

	if (c->next_tick && (!wake || c->next_tick < wake))
		wake = c->next_tick;
	if (c->next_checkpoint && (!wake || c->next_checkpoint < wake))
		wake = c->next_checkpoint;
	if (!wake || c->next_drain < wake)
		wake = c->next_drain;
	return wake ? (int)((wake - now + 999999) / 1000000) : -1;
}

/* Wait up to timeout_ms for what ends the capture: true if it came (s->meta.end_reason says which). */
static bool wait_for_end(struct session *s, const struct options *o, int timeout_ms)
{
	/* The stream's write end reports POLLERR once its reader has closed it. */
	struct pollfd fds[3] = { { s->signal_fd, POLLIN, 0 },
				 { s->target_fd, o->cgroup_arg ? POLLPRI : POLLIN, 0 },
				 { o->stream_fd, 0, 0 } };

	if (poll(fds, o->stream_fd >= 0 ? 3 : 2, timeout_ms) < 0 && errno != EINTR)
		return true;
	if (fds[0].revents & POLLIN) {
		s->meta.end_reason = "signal";
		return true;
	}
	/* The process exited; or the cgroup changed (populated or emptied: go on) or was removed. */
	if (fds[1].revents && (!o->cgroup_arg || cgroup_removed(s->target_fd))) {
		s->meta.end_reason = "target-exited";
		return true;
	}
	if (fds[2].revents & (POLLERR | POLLHUP | POLLNVAL)) {
		s->meta.end_reason = "stream-closed";
		return true;
	}
	return false;
}

/* Count until the duration ends, a signal comes or the target exits, with interval snapshots. */
void session_record(struct session *s, const struct options *o)
{
	struct record_clock c = record_clock(s, o);

	for (;;) {
		__u64 now = monotonic_ns();

		s->meta.end_reason = "duration";
		if (c.deadline && now >= c.deadline)
			return;
		if (now >= c.next_drain) {
			drain_exited(s);
			c.next_drain = now + DRAIN_EVERY_NS;
		}
		if (c.next_checkpoint && now >= c.next_checkpoint && (!c.next_tick || now < c.next_tick)) {
			checkpoint(s, o, now);
			c.next_checkpoint += c.every;
		} else if (c.next_tick && now >= c.next_tick) {
			if (!take_interval(s, o, &c, now))
				return;
			c.next_tick += c.tick;
		} else if (wait_for_end(s, o, timeout_ms(&c, now))) {
			return;
		}
	}
}

/*
 * The final read and the capture: the maps are read while the probes are still attached, and the file
 * is complete (written, synced, renamed) before anything is detached, which takes a grace period per
 * tracepoint. The probes are told first that the capture is over (capture_over: no thread is counted from
 * then on but for its last switch out), so that the maps, read one after another, hold one moment: a
 * server serving on while the threads were read, then the requests, had 70,129 requests in a capture
 * whose threads read 70,126 (beside a CPU hog; the final read takes milliseconds then).
 */
int session_write(struct session *s, const struct options *o)
{
	__u64 now = monotonic_ns();
	int ret;

	s->meta.duration_s = (now - s->meta.start_mono_ns) / 1e9;
	stacks_stop(s->stacks); /* no sample after the end; those taken until now are in the ring */
	__atomic_store_n(&s->skel->bss->capture_over, true, __ATOMIC_SEQ_CST);
	stacks_drain(s->stacks);
	ret = snapshot_read(s->skel, &s->exited, &s->final, true);
	if (ret)
		return fail(s, ret, "cannot read the BPF maps: %s", strerror(-ret));
	stacks_settle(s->stacks, &s->final);
	timeline_end(s->timeline, s->final.globals.tag_changes_lost);
	if (!strcmp(s->meta.end_reason, "target-exited") && !o->cgroup_arg)
		snapshot_process_gone(&s->final, s->meta.pid, now);
	/* The last, shorter interval (at least one interval whenever --interval was given). */
	if (o->interval_s > 0 && (s->intervals.n == 0 || now > s->intervals.prev_ns + 1000000))
		intervals_add(&s->intervals, &s->final, now);
	/* The stream's last line is the final capture, unless its reader has gone. */
	if (o->stream_fd >= 0 && strcmp(s->meta.end_reason, "stream-closed") != 0 &&
	    stream_line(s, o, &s->final) != 0)
		fprintf(stderr, PROG ": warning: --stream: final line not written\n");
	if (!o->output)
		return 0;
	ret = write_atomically(s, o, &s->final);
	if (ret == 0 && s->journal[0]) /* the capture holds every interval: the journal has served */
		unlink(s->journal);
	return ret;
}
