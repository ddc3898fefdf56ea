// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* --tag-timeline: the tag_changes ring buffer to a file (timeline.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "options.h"
#include "spinscope.h"
#include "timeline.h"

struct timeline {
	FILE *out;
	__u64 written;
	int error; /* the first write error (errno), after which nothing more is written */
};

static int on_change(void *ctx, void *data, size_t size)
{
	struct timeline *tl = ctx;

	if (!tl->out || tl->error || size < sizeof(struct tag_change))
		return 0;
	if (fwrite(data, sizeof(struct tag_change), 1, tl->out) != 1)
		tl->error = errno ? errno : EIO;
	else
		tl->written++;
	return 0;
}

struct timeline *timeline_start(struct ring_buffer *rb, struct bpf_map *changes, const char *path, int *err,
				char *msg, size_t msglen)
{
	struct timeline *tl = calloc(1, sizeof(*tl));
	int fd;

	*err = 0;
	if (!tl) {
		*err = -ENOMEM;
		snprintf(msg, msglen, "--tag-timeline: out of memory");
		return NULL;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || !(tl->out = fdopen(fd, "w"))) {
		*err = -errno;
		snprintf(msg, msglen, "--tag-timeline: cannot write %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		free(tl);
		return NULL;
	}
	if (fwrite(TIMELINE_MAGIC, 16, 1, tl->out) != 1 ||
	    ring_buffer__add(rb, bpf_map__fd(changes), on_change, tl) != 0) {
		*err = errno ? -errno : -EIO;
		snprintf(msg, msglen, "--tag-timeline: cannot start: %s", strerror(-*err));
		timeline_free(tl);
		return NULL;
	}
	return tl;
}

void timeline_flush(void *arg)
{
	struct timeline *tl = arg;

	if (tl->out && !tl->error && fflush(tl->out) != 0)
		tl->error = errno ? errno : EIO;
}

void timeline_end(struct timeline *tl, __u64 lost)
{
	struct tag_change end = { .time_ns = UINT64_MAX };
	__u64 account[2] = { lost, 0 };

	if (!tl || !tl->out)
		return;
	account[1] = tl->written;
	if (!tl->error && (fwrite(&end, sizeof(end), 1, tl->out) != 1 ||
			   fwrite(account, sizeof(account), 1, tl->out) != 1))
		tl->error = errno ? errno : EIO;
	if (fclose(tl->out) != 0 && !tl->error)
		tl->error = errno;
	tl->out = NULL;
	if (tl->error)
		fprintf(stderr, PROG ": warning: --tag-timeline: %s: the runtime helper's samples "
				"stay untagged\n", strerror(tl->error));
}

void timeline_free(struct timeline *tl)
{
	if (!tl)
		return;
	if (tl->out)
		fclose(tl->out);
	free(tl);
}

__u32 timeline_ring_size(int on)
{
	return on ? TIMELINE_RING_BYTES : (__u32)sysconf(_SC_PAGESIZE);
}
