/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --stacks: the CPU samples and event stacks of bpf/stacks.bpf.h, drained from their ring buffer,
 * unwound with elfutils libdw (DWARF CFI, the target's own .eh_frame: no frame pointers needed, nothing
 * to restart), named once per unique address, and counted per (thread, source, tags, frames): the
 * capture's `stacks` block (docs/stacks.md).
 */
#ifndef SPINSCOPE_STACKS_H
#define SPINSCOPE_STACKS_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "spinscope.h"

struct bpf_program;
struct bpf_map;
struct bpf_link;

#define STACKS_MAX_DEPTH 128   /* frames kept per stack, innermost first (user and kernel together) */
#define STACKS_MAX_UNIQUE 65536 /* unique stacks kept; samples of further ones are counted as lost */
#define STACKS_RING_BYTES (8u << 20) /* the ring buffer: ~900 records, 0.45 s of 2 CPUs at 999 Hz */

struct stacks;

/* Sampling at hz on every online CPU through prog, records drained from ring. NULL and *err set (-errno)
 * with a message in msg when it cannot start. */
struct stacks *stacks_start(struct bpf_program *prog, struct bpf_map *ring, __u32 hz, int *err, char *msg,
			    size_t msglen);
/* The ring buffer manager its drains read (another ring added to it is drained with it: timeline.h). */
struct ring_buffer *stacks_ring(struct stacks *st);
/* Unwind and count what the ring holds now. */
void stacks_drain(struct stacks *st);
struct snapshot;
/* At the end: each thread's events after its last event stack of a source (the BPF side's
 * stack_event_budget.skipped), which no stack stands for: counted as events_without_stack. */
void stacks_settle(struct stacks *st, const struct snapshot *snap);
/* The perf events closed (no more CPU samples); what is in the ring stays to be drained. */
void stacks_stop(struct stacks *st);
/* The capture's `stacks` block; lost is the BPF side's count of records the ring had no room for. */
json_object *stacks_json(const struct stacks *st, __u64 lost);
void stacks_free(struct stacks *st);

/* The ring buffer's size for max_entries: STACKS_RING_BYTES with --stacks, one page without. */
__u32 stacks_ring_size(bool on);

#endif
