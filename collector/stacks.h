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
#define STACKS_RING_MIN (8u << 20)   /* the ring buffer: at least ~950 records */
#define STACKS_RING_MAX (256u << 20) /* at most ~30,000 records: what more would bring is lost, and said */

struct stacks;

/* Sampling at hz on every online CPU through prog, records drained from ring; event stacks at most budget
 * a second for the whole target, each thread's share of it written to *share (the BPF side's
 * stack_share). NULL and *err set (-errno) with a message in msg when it cannot start. */
struct stacks *stacks_start(struct bpf_program *prog, struct bpf_map *ring, __u32 hz, __u32 budget,
			    volatile __u32 *share, int *err, char *msg, size_t msglen);
/* The unwinder on a thread of its own, which drains the ring until stacks_stop (after every ring is added
 * to stacks_ring's manager). 0 or -errno. */
int stacks_run(struct stacks *st);
/* The ring buffer manager its drains read (another ring added to it is drained with it: timeline.h). */
struct ring_buffer *stacks_ring(struct stacks *st);
/* Unwind and count what the ring holds now (the unwinder's thread does, until stacks_stop). */
void stacks_drain(struct stacks *st);
/* fn(arg) after each drain, on the drain's thread (another ring's reader that buffers: timeline.h). */
void stacks_after_drain(struct stacks *st, void (*fn)(void *), void *arg);
struct snapshot;
/* At the end: each thread's events after its last event stack of a source (the BPF side's
 * stack_event_budget.skipped), which no stack stands for: counted as events_without_stack. */
void stacks_settle(struct stacks *st, const struct snapshot *snap);
/* The unwinder's thread ended and the perf events closed (no more CPU samples); what is in the ring
 * stays to be drained. */
void stacks_stop(struct stacks *st);
/* The capture's `stacks` block; lost is the BPF side's count of records the ring had no room for. */
json_object *stacks_json(const struct stacks *st, __u64 lost);
void stacks_free(struct stacks *st);

/* The ring buffer's size for max_entries: half a second of records at hz on ncpus and the budget's event
 * stacks, between STACKS_RING_MIN and STACKS_RING_MAX; one page without --stacks (hz 0). */
__u32 stacks_ring_size(__u32 hz, __u32 budget, int ncpus);

#endif
