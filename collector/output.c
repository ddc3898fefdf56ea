// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where the capture goes: the output file (written to a temporary file and renamed over it), its
 * checkpoints and interval journal, and the --stream lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session.h"

/* A temporary file beside the output, renamed over it once the capture is complete. */
static int open_temp_output(const char *output, char *tmp, size_t len)
{
	char copy[PATH_MAX];
	int fd;

	snprintf(copy, sizeof(copy), "%s", output);
	snprintf(tmp, len, "%s/.%s.XXXXXX", dirname(copy), basename((char *)output));
	fd = mkstemp(tmp);
	if (fd >= 0)
		fchmod(fd, 0644);
	else
		tmp[0] = '\0'; /* nothing made, nothing to remove */
	return fd;
}

/*
 * Whether the output can be written is known now, not after the capture: a temporary file is made and
 * removed. The real one is made at the end, so a collector killed outright leaves none. 0, or fail().
 */
int try_output(struct session *s, const struct options *o)
{
	s->out_fd = open_temp_output(o->output, s->tmp, sizeof(s->tmp));
	if (s->out_fd < 0)
		return fail(s, -errno, "cannot write %s: %s", o->output, strerror(errno));
	close(s->out_fd);
	unlink(s->tmp);
	s->out_fd = -1;
	s->tmp[0] = '\0';
	return 0;
}

/*
 * The interval journal, OUTPUT.intervals.jsonl: each interval appended as a line when it is taken, emptied
 * at each checkpoint (the checkpoint holds them), removed with the final capture. A collector killed
 * outright leaves its last checkpoint and the intervals after it: `spinscope report` reads both, so at
 * most one interval is lost. (Written, not synced: the page cache outlives a killed process.)
 */
void journal_append(struct session *s, const struct options *o)
{
	if (!o->output || s->intervals.n == 0 || !s->checkpointed) /* before it, a kill leaves no file */
		return;
	if (s->journal_fd < 0 && !s->journal[0]) {
		snprintf(s->journal, sizeof(s->journal), "%s.intervals.jsonl", o->output);
		s->journal_fd = open(s->journal, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
		if (s->journal_fd < 0)
			fprintf(stderr, PROG ": warning: cannot write %s: %s (a killed collector loses up to a "
				"checkpoint period)\n", s->journal, strerror(errno));
	}
	if (s->journal_fd >= 0 && capture_interval_line(s->journal_fd, &s->intervals.items[s->intervals.n - 1]))
		fprintf(stderr, PROG ": warning: interval not journaled: %s\n", strerror(errno));
}

/*
 * target.runtime, read again before each write until it shows a runtime other than native: a JVM maps
 * libjvm.so some time after its exec, and a command (-- COMMAND) execs only after the probes are live. Kept
 * once it does, and kept as it was when the target has gone. Not for a cgroup (no one process).
 */
void know_runtime(struct session *s)
{
	struct target_runtime rt;

	if (!s->meta.pid || s->meta.cgroup || (s->meta.runtime.name[0] && strcmp(s->meta.runtime.name, "native")))
		return;
	if (runtime_detect("/proc", s->meta.pid, &rt) == 0)
		s->meta.runtime = rt;
}

/* The capture of snap, written to a temporary file beside the output and renamed over it: a reader never
 * sees half a file. 0, or fail(). */
int write_atomically(struct session *s, const struct options *o, const struct snapshot *snap)
{
	int ret;

	know_runtime(s);
	s->out_fd = open_temp_output(o->output, s->tmp, sizeof(s->tmp));
	if (s->out_fd < 0)
		return fail(s, -errno, "cannot write %s: %s", o->output, strerror(errno));
	ret = capture_write(s->out_fd, &s->meta, snap, &s->intervals);
	if (ret == 0 && fsync(s->out_fd) != 0)
		ret = -errno;
	close(s->out_fd);
	s->out_fd = -1;
	if (ret == 0 && rename(s->tmp, o->output) != 0)
		ret = -errno;
	if (ret) {
		unlink(s->tmp);
		s->tmp[0] = '\0';
		return fail(s, ret, "cannot write %s: %s", o->output, strerror(-ret));
	}
	s->tmp[0] = '\0'; /* renamed: nothing to remove */
	return 0;
}

/* The capture so far, as a complete file marked end_reason "checkpoint": what a collector killed outright
 * (SIGKILL, OOM) leaves. The final capture replaces it. */
void checkpoint(struct session *s, const struct options *o, __u64 now)
{
	struct snapshot snap;

	s->meta.duration_s = (now - s->meta.start_mono_ns) / 1e9;
	s->meta.end_reason = "checkpoint";
	if (snapshot_read(s->skel, &s->exited, &snap, true) != 0 || write_atomically(s, o, &snap) != 0)
		fprintf(stderr, PROG ": warning: checkpoint at %.1f s not written%s%s\n", s->meta.duration_s,
			s->error[0] ? ": " : "", s->error);
	else if (s->journal_fd >= 0 && ftruncate(s->journal_fd, 0) != 0) /* the checkpoint holds them */
		fprintf(stderr, PROG ": warning: cannot empty %s: %s\n", s->journal, strerror(errno));
	else
		s->checkpointed = true;
	snapshot_free(&snap);
	s->error[0] = '\0';
}

/*
 * --stream: snap as one line with only the latest interval. Without --output the series is not kept
 * (nothing will write it): the collector's memory stays flat however long it streams. A reader that has
 * gone (EPIPE) gives -EPIPE: the capture ends, and nothing more is written to the stream.
 */
int stream_line(struct session *s, const struct options *o, const struct snapshot *snap)
{
	struct intervals latest = s->intervals;
	int ret;

	know_runtime(s);
	if (latest.n > 1) {
		latest.items += latest.n - 1;
		latest.n = 1;
	}
	ret = capture_write_line(o->stream_fd, &s->meta, snap, &latest);
	if (!o->output)
		s->intervals.n = 0;
	return ret;
}
