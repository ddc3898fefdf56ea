/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --tag-timeline FILE (with --stacks): every change of a target thread's tags (bpf/stacks.bpf.h,
 * tag_note), from the tag_changes ring buffer to FILE, for `spinscope record` to tag the samples of a
 * runtime helper that samples on its own timer (analyzer tracing/stacks_helper.py). Not part of the
 * capture: FILE is read once and deleted by whoever asked for it, or is a FIFO that `top --stacks` and
 * `exporter --stacks` read as it is written (flushed after each drain: timeline_flush).
 *
 * FILE: TIMELINE_MAGIC (16 bytes), then struct tag_change records (16 bytes, host order: u64 time_ns on
 * CLOCK_MONOTONIC, u32 tid, u32 tags as STACK_TAG_* bits), in the order each CPU wrote them (sorted per
 * thread, not across threads), then an end marker (time_ns UINT64_MAX, tid 0, tags 0) and one record
 * of two u64: the changes the ring had no room for, and the records written. A file without the end
 * marker was cut short (the collector killed).
 */
#ifndef SPINSCOPE_TIMELINE_H
#define SPINSCOPE_TIMELINE_H

#include <linux/types.h>
#include <stddef.h>

#define TIMELINE_MAGIC "spinscope-tags1\n"
#define TIMELINE_RING_BYTES (4u << 20) /* 262,144 changes: ~5 s of a herd's 50,000 a second, drained every 20 ms */

struct ring_buffer;
struct bpf_map;
struct timeline;

/* FILE created (0600, not through a symlink) and the changes ring added to rb, whose drains write it.
 * NULL and *err set (-errno) with a message when it cannot. */
struct timeline *timeline_start(struct ring_buffer *rb, struct bpf_map *changes, const char *path, int *err,
				char *msg, size_t msglen);
/* What the drain wrote, handed on (stacks_after_drain): a reader that follows FILE while the collector runs
 * (a FIFO: `top --stacks`, `exporter --stacks`) has each change within a drain (20 ms), not a stdio buffer
 * later. */
void timeline_flush(void *tl);
/* The end marker and the account written, the file closed (after the ring's last drain). */
void timeline_end(struct timeline *tl, __u64 lost);
void timeline_free(struct timeline *tl);

/* The ring buffer's size for max_entries: TIMELINE_RING_BYTES when on, one page when off. */
__u32 timeline_ring_size(int on);

#endif
