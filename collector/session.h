/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One run of the collector (main.c): what it holds (session.c), attaching the probes (attach.c), the
 * record loop and the final capture (record.c), where the capture goes (output.c).
 */
#ifndef SPINSCOPE_SESSION_H
#define SPINSCOPE_SESSION_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "capture.h"
#include "options.h"

struct bpf_link;

/*
 * One run of the collector: everything it holds that must be given back, whichever way it ends.
 * session_end() is the only clean-up path.
 */
struct session {
	struct spinscope_bpf *skel;
	struct bpf_link **links;
	size_t nlinks;
	int signal_fd, target_fd; /* the signals that end a capture; the target's pidfd */
	int out_fd;               /* the temporary output, until it is renamed over the output */
	char tmp[PATH_MAX + 32];
	int journal_fd;           /* the intervals since the last checkpoint, a line each (-1: none) */
	bool checkpointed;        /* a checkpoint is on disk: the journal continues it */
	char journal[PATH_MAX + 32];
	struct capture_meta meta;
	struct intervals intervals;
	struct exited_threads exited; /* the threads gone, drained from the exited map */
	struct snapshot final;
	struct stacks *stacks;    /* --stacks: the sampler, the unwinder and the stacks so far (NULL: off) */
	struct timeline *timeline; /* --tag-timeline: the tag changes' file (NULL: off) */
	char error[512]; /* why the session failed, one line */
};

/* A session that holds nothing yet. */
#define SESSION_INIT { .signal_fd = -1, .target_fd = -1, .out_fd = -1, .journal_fd = -1 }

/* Say why the session failed (s->error) and give err back (-1 if 0): `return fail(s, err, ...)`. */
int fail(struct session *s, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The probes detached and unloaded, the rest kept (a capture written, its command still to wait for). */
void session_detach(struct session *s);

/* The one clean-up path: detach and free whatever the session got, remove an unfinished output. */
void session_end(struct session *s);

/*
 * Open, load and attach the probes to o->pid (or o->cgroup), with its live threads (and children) seeded.
 * 0, or fail(). Detaching is left to session_end().
 */
int session_attach(struct session *s, const struct options *o);

/* The record loop (record.c): count until the duration ends, a signal comes or the target exits (which,
 * s->meta.end_reason says), with interval snapshots, checkpoints and drained exited threads. */
void session_record(struct session *s, const struct options *o);
/* The final read and the capture written (and streamed). 0, or fail(). */
int session_write(struct session *s, const struct options *o);

/* Where the capture goes (output.c). Each 0, or fail(), unless it says otherwise. */
/* Whether o->output can be written, known before the capture: a temporary file made and removed. */
int try_output(struct session *s, const struct options *o);
/* The capture of snap, written to a temporary file beside the output and renamed over it. */
int write_atomically(struct session *s, const struct options *o, const struct snapshot *snap);
/* Read the target's runtime into s->meta.runtime unless it is known already (target.runtime). */
void know_runtime(struct session *s);
/* The capture so far as a file marked end_reason "checkpoint" (a warning if it cannot be written). */
void checkpoint(struct session *s, const struct options *o, __u64 now);
/* The latest interval appended to the interval journal, once a checkpoint is on disk. */
void journal_append(struct session *s, const struct options *o);
/* --stream: snap as one line with the latest interval. 0 or -errno (-EPIPE: the reader has gone). */
int stream_line(struct session *s, const struct options *o, const struct snapshot *snap);

#endif
