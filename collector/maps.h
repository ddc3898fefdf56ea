/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What every reader of the BPF maps shares (maps.c): the probes' clock, a hash map read whole, counters summed. */
#ifndef SPINSCOPE_MAPS_H
#define SPINSCOPE_MAPS_H

#include <linux/types.h>
#include <stddef.h>

#include "spinscope.h"

/* CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns. */
__u64 monotonic_ns(void);

/* Every entry of a hash map as parallel arrays of keys and values (malloc'd, *n of them). 0 or -errno. */
int map_dump(int fd, size_t key_size, size_t value_size, __u32 max_entries, void **keys, void **values,
	     size_t *n);
/* sum += c, counter by counter. */
void counters_add(struct thread_counters *sum, const struct thread_counters *c);

#endif
