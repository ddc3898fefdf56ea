// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What every reader of the BPF maps shares: the probes' clock, a hash map read whole, counters summed.
 * Used by exited.c (draining the threads gone) and snapshot.c (reading the maps); depends on neither.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <bpf/bpf.h>

#include "maps.h"

__u64 monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * Every entry of a hash map, as parallel arrays of keys and values (malloc'd), read in batches: the
 * kernel walks the map bucket by bucket, so entries the probes delete meanwhile cannot make the walk
 * start over and count an entry twice (as a get_next_key walk whose current key was deleted does).
 */
int map_dump(int fd, size_t key_size, size_t value_size, __u32 max_entries, void **keys, void **values,
	     size_t *n)
{
	__u64 token = 0; /* hash maps' batch position: a bucket index */
	size_t cap = max_entries ? max_entries : 1;
	bool first = true;
	int err = 0;

	*n = 0;
	*keys = malloc(cap * key_size);
	*values = malloc(cap * value_size);
	if (!*keys || !*values)
		return -ENOMEM;
	while (*n < cap) {
		__u32 count = cap - *n;

		err = bpf_map_lookup_batch(fd, first ? NULL : &token, &token, (char *)*keys + *n * key_size,
					   (char *)*values + *n * value_size, &count, NULL);
		err = err ? -errno : 0;
		*n += count;
		first = false;
		if (err == -ENOENT) /* the walk is complete */
			return 0;
		if (err)
			return err;
	}
	return 0;
}

void counters_add(struct thread_counters *sum, const struct thread_counters *c)
{
#define X(name) sum->name += c->name;
	SPINSCOPE_COUNTERS(X)
#undef X
}
