// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a session holds: saying why it failed, and giving everything back (session_end, the one clean-up
 * path).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "probes.h"
#include "session.h"
#include "stacks.h"
#include "timeline.h"
#include "spinscope.skel.h"

int fail(struct session *s, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
	return err ? err : -1;
}

void session_detach(struct session *s)
{
	stacks_stop(s->stacks); /* its unwinder's thread ended: it drains the timeline's ring too */
	timeline_free(s->timeline); /* drained by the stacks' ring buffer manager: before it */
	s->timeline = NULL;
	stacks_free(s->stacks); /* its perf events' links and ring buffer first: they hold the object's */
	s->stacks = NULL;
	s->meta.stacks = NULL;
	if (s->links)
		probes_detach(s->links, s->nlinks);
	free(s->links);
	s->links = NULL;
	s->nlinks = 0;
	spinscope_bpf__destroy(s->skel);
	s->skel = NULL;
}

/* The one clean-up path: detach and free whatever the session got, remove an unfinished output. */
void session_end(struct session *s)
{
	session_detach(s);
	if (s->out_fd >= 0)
		close(s->out_fd);
	if (s->tmp[0])
		unlink(s->tmp);
	if (s->journal_fd >= 0)
		close(s->journal_fd);
	if (s->signal_fd >= 0)
		close(s->signal_fd);
	if (s->target_fd >= 0)
		close(s->target_fd);
	snapshot_free(&s->final);
	intervals_free(&s->intervals);
	exited_free(&s->exited);
	free(s->meta.cmdline);
}
