// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --stacks: sampling, unwinding, naming and counting (stacks.h; the BPF side is bpf/stacks.bpf.h).
 *
 * Unwinding is elfutils libdw's (the unwinder perf uses for --call-graph dwarf, tools/perf/util/
 * unwind-libdw.c): a Dwfl per process, its modules reported from /proc/PID/maps, and a thread state
 * whose registers are the record's and whose memory is the record's copy of the user stack. So a frame
 * is unwound from the stack as it was when the sample was taken, not as it is when the collector reads it.
 * Each unique address is named once (libdw's symbol lookup is a linear scan: ~600 us a sample without
 * this cache, ~50 us with it, measured here), as its module's file name and the address relative to the
 * module's load address (no ASLR base reaches the capture), its symbol and, where the module has line
 * information, its source file's name and line. Kernel frames are named from /proc/kallsyms, by symbol
 * and offset only (no kernel address reaches the capture either).
 *
 * The modules' files are opened as the target maps them, whatever its mount namespace, and shared between
 * processes by build id (modules.c): an address of a library is named once for every process that maps
 * it. Records are unwound on a thread of their own, so that naming a new library (tens of ms) delays
 * neither the record loop's exited-thread drain nor its interval ticks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/openat2.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <elfutils/version.h>

#include "modules.h"
#include "snapshot.h"
#include "stacks.h"
#include "text.h"

/* ------------------------------------------------------------------ small tables */

/* Open addressing over indices into an array the caller owns: slot = index + 1, 0 empty. */
struct index_table {
	__u32 *slots;
	size_t size; /* a power of two, kept at least twice the entries */
	size_t n;
};

static __u64 mix64(__u64 h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 33);
}

/* The array `items` (n used of *cap, each `size` bytes) with room for one more: itself while there is room,
 * else grown to twice its capacity (`first` when empty) and *cap updated. NULL when out of memory: items is
 * unchanged and still the caller's. Every growing array here is grown through this. */
static void *grown(void *items, size_t *cap, size_t n, size_t size, size_t first)
{
	size_t want = *cap ? 2 * *cap : first;
	void *more;

	if (n < *cap)
		return items;
	more = realloc(items, want * size);
	if (more)
		*cap = want;
	return more;
}

/* Grow the table to hold one more, rehashing with hash_of(index). false when out of memory. */
static bool index_table_reserve(struct index_table *t, __u64 (*hash_of)(const void *, __u32), const void *ctx)
{
	size_t size = t->size ? t->size : 1024;
	__u32 *slots;

	if (t->slots && 2 * (t->n + 1) <= t->size)
		return true;
	while (2 * (t->n + 1) > size)
		size *= 2;
	slots = calloc(size, sizeof(*slots));
	if (!slots)
		return false;
	for (size_t i = 0; t->slots && i < t->size; i++) {
		if (!t->slots[i])
			continue;
		for (size_t j = hash_of(ctx, t->slots[i] - 1) & (size - 1);; j = (j + 1) & (size - 1)) {
			if (!slots[j]) {
				slots[j] = t->slots[i];
				break;
			}
		}
	}
	free(t->slots);
	t->slots = slots;
	t->size = size;
	return true;
}

/* ------------------------------------------------------------------ what is kept */

struct frame {
	char *module;   /* the file's name (no directory), "[kernel]" or "[unknown]" */
	__u64 address;  /* relative to the module's load address (0 for kernel frames) */
	char *symbol;   /* NULL when the module has no symbol there */
	__u64 symbol_offset;
	char *file;     /* the source file's name (no directory), or NULL */
	int line;
	bool rust;      /* symbol is a Rust name, demangled by Rust's demangler: its kind is "rust" */
	__u32 inlined_into; /* a function inlined at this address: the frame of the one it is inlined into;
			     * UINT32_MAX for the function the address is in (its symbol) */
};

struct stack {
	__u32 tid, source, tags;
	__u32 nframes;
	__u32 *frames; /* innermost first */
	__u64 count;   /* records */
	__u64 weight;  /* events they stand for (records, for CPU samples) */
	__u64 hash;
};

/* A symbol of a perf map (/tmp/perf-PID.map: JIT compilers write them, the JVM on `jcmd PID
 * Compiler.perfmap`, Node with --perf-basic-prof, CPython 3.12+ with -X perf). */
struct jit_symbol {
	__u64 start, size;
	char *name;
};

/* The Dwfl of one process, its modules reported from its maps. A process is its pid, its start and its
 * program: a pid reused, or a process that exec'd, is another address space, unwound and named afresh. */
struct process {
	int pid;
	__u64 start_ns, exec_id; /* as the records say (stack_sample) */
	__u32 id;                /* never reused: the key of its own addresses' names (outside any library) */
	__u64 used;              /* the records' clock at its latest record: the least recent is ended first */
	Dwfl *dwfl;
	bool attached;
	__u64 reported_ns; /* when its modules were last reported */
	struct jit_symbol *jit; /* its perf map, sorted by start */
	size_t njit;
	__u64 jit_checked_ns;   /* when the perf map was last looked for */
	struct stat jit_stat;   /* the perf map as last read (a rewritten one is read again) */
	__u32 jit_generation;   /* perf maps read: JIT code reused for another method is named anew */
};
#define PERF_MAP_MAX_SYMBOLS (1u << 20) /* a perf map is the target's file: bounded */

static void jit_free(struct process *p);
#define MAX_PROCESSES 64

/* An address's name: (library, address from its load address), shared by every process that maps it; or
 * (process, perf map read, pc) for an address in no library (JIT code, an anonymous mapping, the vDSO). */
struct pc_entry {
	__u32 space;      /* a library's id (modules.h), or PROCESS_SPACE | a process's id */
	__u32 generation; /* the process's jit_generation (0 in a library) */
	__u64 pc;
	__u32 frame;
};
#define PROCESS_SPACE 0x80000000u
#define MAX_NAMED_ADDRESSES (1u << 20) /* kept names (24 B each, and their index): then named afresh */

struct kernel_symbol {
	__u64 address;
	char *name;
};

#define STREAM_SET 4096 /* pairs counted a second, at most (the share is then budget / 2048 at least) */
#define STACKS_DRAIN_NS 20000000L /* the ring is drained every 20 ms: its records carry no wakeup */

struct stacks {
	struct bpf_link **links;
	int *fds;
	int ncpus;
	struct ring_buffer *ring;
	__u32 hz;

	struct process processes[MAX_PROCESSES];
	size_t nprocesses;
	__u32 next_process_id;
	__u64 clock; /* records unwound: the processes' use */
	struct libraries *libraries;

	struct frame *frames;
	size_t nframes, frames_cap;
	struct index_table frame_index;

	struct pc_entry *pcs;
	size_t npcs, pcs_cap;
	struct index_table pc_index;

	struct stack *stacks;
	size_t nstacks, stacks_cap;
	struct index_table stack_index;

	struct kernel_symbol *ksyms; /* names in ksyms_text */
	char *ksyms_text;
	size_t nksyms;
	bool ksyms_read;

	/* What happened to the records (the capture's stacks.records and stacks.lost). */
	__u64 records[STACK_SOURCES], weights[STACK_SOURCES];
	__u64 lost_unique_cap, lost_no_memory, no_user_frames, truncated;
	__u64 unplaced[STACK_SOURCES]; /* events after a thread's last stack of their source: no stack's */
	bool settled;
	__u64 unwind_ns; /* the collector's CPU time in draining, unwinding and naming */
	void (*after_drain)(void *); /* stacks_after_drain */
	void *after_drain_arg;

	/* The target's budget of event stacks a second, and each (thread, source)'s share of it: written to
	 * the BPF side (stack_share) each second, from the pairs that had event stacks in the second before. */
	__u32 budget, ring_bytes;
	volatile __u32 *share;
	__u64 streams_second;            /* the records' second (time_ns / 1e9) the set below is of */
	__u64 streams[STREAM_SET];       /* (tid << 3 | source) + 1 of this second's event stacks, 0 empty */
	__u32 nstreams;
	__u64 deferred; /* events due a stack when the budget was spent (they went to the thread's next stack) */

	/* The unwinder's thread: it drains the ring every STACKS_DRAIN_NS; lock guards all of the above
	 * against the capture's writers (stacks_json, stacks_settle) on the record loop's thread. */
	pthread_t thread;
	bool threaded, stopping;
	pthread_mutex_t lock;

	const struct stack_sample *current; /* the record being unwound (the thread callbacks' argument) */
};

/* ------------------------------------------------------------------ naming */

static char *basename_dup(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return strdup(slash ? slash + 1 : path ? path : "");
}

static __u64 frame_hash(const struct frame *f)
{
	__u64 h = f->address * 0x9E3779B97F4A7C15ULL;

	for (const char *p = f->module; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001B3ULL;
	for (const char *p = f->symbol ? f->symbol : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001B3ULL;
	return mix64(h + f->symbol_offset + f->inlined_into);
}

static __u64 frame_hash_at(const void *ctx, __u32 i)
{
	return frame_hash(&((const struct stacks *)ctx)->frames[i]);
}

static bool same_text(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* The index of frame f (its strings taken over, or freed if it is known). UINT32_MAX: out of memory. */
static __u32 frame_intern(struct stacks *st, struct frame *f)
{
	__u64 h = frame_hash(f);
	struct index_table *t = &st->frame_index;
	struct frame *frames;
	size_t j;

	if (!index_table_reserve(t, frame_hash_at, st))
		goto fail;
	for (j = h & (t->size - 1); t->slots[j]; j = (j + 1) & (t->size - 1)) {
		struct frame *g = &st->frames[t->slots[j] - 1];

		if (g->address == f->address && g->symbol_offset == f->symbol_offset && !strcmp(g->module, f->module) &&
		    same_text(g->symbol, f->symbol) && g->inlined_into == f->inlined_into) {
			free(f->module), free(f->symbol), free(f->file);
			return t->slots[j] - 1;
		}
	}
	frames = grown(st->frames, &st->frames_cap, st->nframes, sizeof(*frames), 1024);
	if (!frames)
		goto fail;
	st->frames = frames;
	st->frames[st->nframes] = *f;
	t->slots[j] = ++st->nframes;
	t->n++;
	return st->nframes - 1;
fail:
	free(f->module), free(f->symbol), free(f->file);
	return UINT32_MAX;
}

static int ksym_compare(const void *a, const void *b)
{
	const struct kernel_symbol *x = a, *y = b;

	return x->address < y->address ? -1 : x->address > y->address;
}

/*
 * /proc/kallsyms' text symbols, sorted, read at the first kernel frame: the file whole into one buffer,
 * the names left in it (NUL-terminated in place), parsed by hand. sscanf() per line and a strdup() per name
 * took half of the ~74 ms a capture spent here (the kernel's formatting of ~120,000 lines is the rest).
 */
static void ksyms_read(struct stacks *st)
{
	size_t len = 0, cap = 4 << 20, n = 0, ncap = 0;
	int fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC);
	char *text = NULL, *p, *end;
	bool sorted = true;
	ssize_t got;

	st->ksyms_read = true;
	if (fd < 0)
		return;
	for (;;) {
		if (!text || len + 65536 > cap) {
			char *more = realloc(text, text ? (cap *= 2) : cap);

			if (!more)
				goto out;
			text = more;
		}
		got = read(fd, text + len, cap - len - 1);
		if (got <= 0)
			break;
		len += got;
	}
	text[len] = '\0';
	for (p = text, end = text + len; p < end;) {
		char *line_end = memchr(p, '\n', end - p), *name, *name_end, type;
		unsigned long long address;

		if (!line_end)
			line_end = end;
		address = strtoull(p, &name, 16); /* "ffffffff81000000 T _stext\t[module]" */
		if (name + 3 < line_end && name[0] == ' ' && name[2] == ' ') {
			type = name[1];
			name += 3;
			for (name_end = name; name_end < line_end && *name_end != '\t' && *name_end != ' '; name_end++)
				;
			*name_end = '\0';
			if (type == 't' || type == 'T' || type == 'w' || type == 'W') {
				struct kernel_symbol *ksyms = grown(st->ksyms, &ncap, n, sizeof(*ksyms), 65536);

				if (!ksyms)
					break;
				st->ksyms = ksyms;
				sorted = sorted && (n == 0 || st->ksyms[n - 1].address <= address);
				st->ksyms[n].address = address;
				st->ksyms[n++].name = name;
			}
		}
		p = line_end + 1;
	}
	st->nksyms = n;
	if (!sorted)
		qsort(st->ksyms, st->nksyms, sizeof(*st->ksyms), ksym_compare);
	st->ksyms_text = text; /* the names' storage */
	text = NULL;
out:
	free(text);
	close(fd);
}

static __u32 kernel_frame(struct stacks *st, __u64 ip)
{
	struct frame f = { .module = strdup("[kernel]"), .inlined_into = UINT32_MAX };
	size_t lo = 0, hi;

	if (!st->ksyms_read)
		ksyms_read(st);
	hi = st->nksyms;
	while (lo < hi) { /* the last symbol at or below ip */
		size_t mid = (lo + hi) / 2;

		if (st->ksyms[mid].address <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && st->ksyms[lo - 1].name) {
		f.symbol = strdup(st->ksyms[lo - 1].name);
		f.symbol_offset = ip - st->ksyms[lo - 1].address;
	}
	return frame_intern(st, &f);
}

/* ------------------------------------------------------------------ processes and unwinding */

static const Dwfl_Callbacks proc_callbacks = {
	.find_elf = modules_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

static pid_t thread_next(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct stacks *st = arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = st;
	return st->current->tid;
}

static bool thread_get(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct stacks *st = arg;

	(void)dwfl;
	*thread_argp = st;
	return (__u32)tid == st->current->tid;
}

/* The target's memory, as the record copied it: the stack from sp up; nothing else (memory read now
 * would be another moment's, and a frame unwound from it a guess). */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	const struct stack_sample *s = ((struct stacks *)arg)->current;
	__u64 sp = s->regs[7];

	(void)dwfl;
	if (addr < sp || addr - sp + sizeof(*result) > s->ustack_bytes)
		return false;
	memcpy(result, s->ustack + (addr - sp), sizeof(*result));
	return true;
}

static bool initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	const struct stack_sample *s = ((struct stacks *)thread_arg)->current;
	Dwarf_Word regs[STACK_REGS];

	for (int i = 0; i < STACK_REGS; i++)
		regs[i] = s->regs[i];
	return dwfl_thread_state_registers(thread, 0, STACK_REGS, regs);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = thread_next,
	.get_thread = thread_get,
	.memory_read = memory_read,
	.set_initial_registers = initial_registers,
};

static int module_open_now(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start, void *arg)
{
	Dwarf_Addr bias;

	(void)userdata, (void)name, (void)start, (void)arg;
	dwfl_module_getelf(mod, &bias);
	return DWARF_CB_OK;
}

/* Report pid's modules from its maps (again: a library loaded or unloaded since; a module reported as
 * before keeps its file, one no longer mapped is dropped), and open each new one now, while the process
 * runs: a module first needed by a record drained after the process exited (its exit path in ld.so, a
 * short-lived child's) could be opened no more (/proc/PID/map_files is gone), and its frames would be
 * module+offset. A module opened already is not opened again. */
static bool process_report(struct process *p)
{
	dwfl_report_begin(p->dwfl);
	if (dwfl_linux_proc_report(p->dwfl, p->pid) != 0) {
		dwfl_report_end(p->dwfl, NULL, NULL);
		return false;
	}
	p->reported_ns = monotonic_ns();
	if (dwfl_report_end(p->dwfl, NULL, NULL) != 0)
		return false;
	dwfl_getmodules(p->dwfl, module_open_now, NULL, 0);
	return true;
}

static void process_end(struct process *p)
{
	dwfl_end(p->dwfl);
	jit_free(p);
	*p = (struct process){ 0 };
}

/* The unwinder of the record's process, made at its first record (again after an exec, or for a pid
 * reused), its modules reported again each second it has records (libraries loaded or unloaded since).
 * The least recently used is ended when MAX_PROCESSES are held (a --children or --cgroup target with
 * many short-lived processes). NULL when out of memory. */
static struct process *process_of(struct stacks *st, const struct stack_sample *s)
{
	struct process *p = NULL;

	for (size_t i = 0; i < st->nprocesses && !p; i++)
		if (st->processes[i].pid == (int)s->pid)
			p = &st->processes[i];
	if (p && (p->start_ns != s->process_start_ns || p->exec_id != s->exec_id))
		process_end(p); /* another program in that pid: its slot reused */
	if (!p && st->nprocesses < MAX_PROCESSES) {
		p = &st->processes[st->nprocesses++];
	} else if (!p) {
		p = &st->processes[0];
		for (size_t i = 1; i < st->nprocesses; i++)
			if (st->processes[i].used < p->used)
				p = &st->processes[i];
		process_end(p);
	}
	p->used = ++st->clock;
	modules_opening(st->libraries, s->pid);
	if (p->dwfl) {
		if (monotonic_ns() - p->reported_ns > 1000000000ULL)
			process_report(p);
		return p;
	}
	*p = (struct process){ .pid = s->pid, .start_ns = s->process_start_ns, .exec_id = s->exec_id,
			       .id = ++st->next_process_id & ~PROCESS_SPACE, .used = st->clock,
			       .dwfl = dwfl_begin(&proc_callbacks) };
	if (!p->dwfl)
		return NULL;
	if (process_report(p))
		p->attached = dwfl_attach_state(p->dwfl, NULL, s->pid, &thread_callbacks, st);
	return p;
}

static __u64 pc_hash(__u32 space, __u32 generation, __u64 pc)
{
	return mix64(pc ^ ((__u64)space << 40) ^ ((__u64)generation << 20));
}

static __u64 pc_hash_at(const void *ctx, __u32 i)
{
	const struct pc_entry *e = &((const struct stacks *)ctx)->pcs[i];

	return pc_hash(e->space, e->generation, e->pc);
}

static int jit_compare(const void *a, const void *b)
{
	const struct jit_symbol *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static void jit_free(struct process *p)
{
	for (size_t i = 0; i < p->njit; i++)
		free(p->jit[i].name);
	free(p->jit);
	p->jit = NULL;
	p->njit = 0;
}

/* The process's pid in its own PID namespace (the perf map is named by it), or pid. */
static int pid_in_namespace(int pid)
{
	char path[64], line[256];
	int nspid = pid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "re")))
		return pid;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		for (char *tok = strtok(line + 6, " \t\n"); tok; tok = strtok(NULL, " \t\n"))
			nspid = atoi(tok); /* the last: the innermost namespace's */
		break;
	}
	fclose(f);
	return nspid > 0 ? nspid : pid;
}

/*
 * The process's perf map (path, below its root), opened only if it is the process's own: the file is the
 * target's to write, so it must not lead the collector (root) to another file of this host. openat2 stays
 * in the target's root (RESOLVE_IN_ROOT) and follows no symbolic link at all (a JIT writes its map as a
 * plain file), and the file must be a regular file of the process's owner.
 * The open descriptor with *st, or -1.
 */
static int perf_map_open(int pid, const char *path, struct stat *st)
{
	char dir[64];
	struct stat owner;
	int fd;

	snprintf(dir, sizeof(dir), "/proc/%d", pid);
	if (stat(dir, &owner))
		return -1;
	fd = target_open(pid, path, RESOLVE_NO_SYMLINKS);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) || !S_ISREG(st->st_mode) || st->st_uid != owner.st_uid) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read the process's perf map, as its own /tmp holds it, if it is there and changed (at most once a second). */
static void jit_read(struct process *p)
{
	char path[96], line[1024];
	struct stat now;
	size_t cap = 0;
	FILE *f;
	int fd;

	if (monotonic_ns() - p->jit_checked_ns < 1000000000ULL)
		return;
	p->jit_checked_ns = monotonic_ns();
	snprintf(path, sizeof(path), "tmp/perf-%d.map", pid_in_namespace(p->pid));
	fd = perf_map_open(p->pid, path, &now);
	if (fd < 0)
		return;
	if ((now.st_mtime == p->jit_stat.st_mtime && now.st_size == p->jit_stat.st_size) || !(f = fdopen(fd, "re"))) {
		close(fd);
		return;
	}
	jit_free(p);
	p->jit_stat = now;
	p->jit_generation++;
	while (fgets(line, sizeof(line), f) && p->njit < PERF_MAP_MAX_SYMBOLS) {
		unsigned long long start, size;
		int used = 0;

		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "%llx %llx %n", &start, &size, &used) < 2 || !used || !line[used])
			continue;
		struct jit_symbol *jit = grown(p->jit, &cap, p->njit, sizeof(*jit), 4096);

		if (!jit)
			break;
		p->jit = jit;
		p->jit[p->njit++] = (struct jit_symbol){ start, size, strdup(line + used) };
	}
	fclose(f);
	qsort(p->jit, p->njit, sizeof(*p->jit), jit_compare);
}

/* The perf map's symbol at pc, or NULL. */
static const struct jit_symbol *jit_symbol_at(struct process *p, __u64 pc)
{
	size_t lo = 0, hi;

	jit_read(p);
	hi = p->njit;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (p->jit[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && pc < p->jit[lo - 1].start + p->jit[lo - 1].size && p->jit[lo - 1].name)
		return &p->jit[lo - 1];
	return NULL;
}

/* The mapping of /proc/PID/maps that holds pc, as a frame's module and address: "[anon]" (or the
 * mapping's own name) and pc's offset into it; "[unknown]" at 0 when no mapping holds it any more. */
static void mapping_of(int pid, __u64 pc, struct frame *f)
{
	char path[64], line[4096];
	FILE *maps;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if ((maps = fopen(path, "re"))) {
		while (fgets(line, sizeof(line), maps)) {
			unsigned long long start, end;
			int used = 0;

			if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &start, &end, &used) < 2 || pc < start ||
			    pc >= end)
				continue;
			line[strcspn(line, "\n")] = '\0';
			f->module = used && line[used] ? basename_dup(line + used) : strdup("[anon]");
			f->address = pc - start;
			break;
		}
		fclose(maps);
	}
	if (!f->module)
		f->module = strdup("[unknown]");
}

/* C++'s demangler (libstdc++'s, as perf and eu-stack use): a C++ symbol as a person reads it,
 * `JavaCalls::call_helper(JavaValue*, ...)`. Rust's (the rustc-demangle crate, collector/rustc-demangle/),
 * first: a Rust symbol, legacy or v0, as Rust writes it, `<F as axum::handler::Handler<(M, T1), S>>::call`,
 * without its hash (C++'s demangler reads a legacy Rust name as C++ and leaves `$LT$` and the hash in it).
 * Anything else as it is. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);
int spinscope_rust_demangle(const char *symbol, char *out, size_t size);

static char *symbol_dup(const char *name, bool *rust)
{
	char rust_name[1024];
	int status = -1;
	char *plain;

	if (name[0] == '_' && (name[1] == 'R' || name[1] == 'Z') &&
	    spinscope_rust_demangle(name, rust_name, sizeof(rust_name))) {
		*rust = true;
		return strdup(rust_name);
	}
	plain = name[0] == '_' && name[1] == 'Z' ? __cxa_demangle(name, NULL, NULL, &status) : NULL;
	return plain && status == 0 ? plain : strdup(name);
}

/* pc as a frame of the process's perf map, if it names it (f filled, true). */
static bool jit_frame(struct process *p, __u64 pc, struct frame *f)
{
	const struct jit_symbol *jit = jit_symbol_at(p, pc);

	if (!jit)
		return false;
	f->module = strdup("[jit]");
	f->symbol = strdup(jit->name);
	f->symbol_offset = pc - jit->start;
	return true;
}

/* Name pc in process p as a frame. */
/*
 * Whether a frame of this module (its file name) is worth its source line. Not the C library's, its
 * loader's or the C++ runtime's: their debug packages' line tables (libc6-dbg) were a third of a capture's
 * naming cost (41 of 123 ms, measured), for lines in glibc's own sources that no call site reads: a call
 * site is the target's own code, and the function's name says what a libc frame is.
 */
static bool lines_wanted(const char *module)
{
	static const char *const skip[] = { "libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "ld-linux",
					    "libstdc++.so", "libgcc_s.so" };

	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (!strncmp(module, skip[i], strlen(skip[i])))
			return false;
	return true;
}

/*
 * An inlined function's name as a person reads it, from its DIE (its abstract origin's, where the name is):
 * its linkage name demangled where it has one; else its name qualified by the namespaces, types and
 * functions that hold it (`axumbytes::bytes::{async_fn#0}`: Rust's DWARF names an inlined function by its
 * last segment, `{async_fn#0}`, and gives no linkage name). rust: the compile unit is Rust's.
 */
static char *die_name(Dwarf_Die *cu, Dwarf_Die *die, bool *rust)
{
	Dwarf_Attribute attr;
	Dwarf_Die origin, *parents = NULL;
	const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	char qualified[1024] = "";
	size_t used = 0;
	int n;

	if (name)
		return symbol_dup(name, rust);
	if (!dwarf_formref_die(dwarf_attr(die, DW_AT_abstract_origin, &attr), &origin))
		origin = *die;
	n = dwarf_getscopes_die(&origin, &parents); /* origin itself first, then what holds it, the unit last */
	for (int i = n - 1; i >= 0; i--) {
		const char *part = dwarf_diename(&parents[i]);

		if (!part || dwarf_tag(&parents[i]) == DW_TAG_compile_unit)
			continue;
		used += snprintf(qualified + used, used < sizeof(qualified) ? sizeof(qualified) - used : 0, "%s%s",
				 used ? "::" : "", part);
	}
	free(parents);
	if (!used)
		return NULL;
	*rust = dwarf_srclang(cu) == DW_LANG_Rust;
	return strndup(qualified, sizeof(qualified) - 1);
}

/* The source line of the call an inlined function's scope stands for (its caller's line): file and line. */
static void call_line(Dwarf_Die *scope, Dwarf_Files *files, struct frame *f)
{
	Dwarf_Attribute attr;
	Dwarf_Word file = 0, line = 0;
	const char *path;

	if (files && dwarf_formudata(dwarf_attr(scope, DW_AT_call_file, &attr), &file) == 0 &&
	    dwarf_formudata(dwarf_attr(scope, DW_AT_call_line, &attr), &line) == 0 &&
	    (path = dwarf_filesrc(files, file, NULL, NULL))) {
		f->file = basename_dup(path);
		f->line = (int)line;
	}
}

/*
 * pc's frame f (its function's symbol and pc's line) with the functions inlined at pc, from libdw's scopes
 * (DW_TAG_inlined_subroutine, innermost first): each a frame at the same address, inlined into the next one
 * out (inlined_into), each but the innermost at the line of the call inlined in it, so that a handler
 * inlined into a library's closure is named with its line. Returns the innermost frame (f's own when nothing
 * is inlined there, or the module has no DWARF), UINT32_MAX when out of memory. f's strings are taken over.
 */
static __u32 frame_with_inlined(struct stacks *st, Dwfl_Module *mod, __u64 pc, struct frame *f)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, pc, &bias), *scopes = NULL;
	int n = cu ? dwarf_getscopes(cu, pc - bias, &scopes) : 0, inlined[STACKS_MAX_DEPTH], k = 0;
	char *pc_file = f->file ? strdup(f->file) : NULL;
	Dwarf_Files *files = NULL;
	__u32 frame;

	for (int i = 0; i < n && k < STACKS_MAX_DEPTH; i++)
		if (dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine)
			inlined[k++] = i;
	if (k && dwarf_getsrcfiles(cu, &files, NULL) == 0) {
		free(f->file);
		f->file = NULL;
		call_line(&scopes[inlined[k - 1]], files, f); /* the function of pc's symbol: its inlined call's line */
	}
	frame = frame_intern(st, f);
	for (int j = k - 1; j >= 0 && frame != UINT32_MAX && files; j--) {
		struct frame g = { .module = strdup(f->module), .address = f->address, .inlined_into = frame };

		if (!g.module)
			break;
		g.symbol = die_name(cu, &scopes[inlined[j]], &g.rust);
		if (j)
			call_line(&scopes[inlined[j - 1]], files, &g);
		else if (pc_file) /* the innermost: pc's own line */
			g.file = strdup(pc_file), g.line = f->line;
		frame = frame_intern(st, &g);
	}
	free(pc_file);
	free(scopes);
	return frame;
}

static __u32 user_frame_named(struct stacks *st, struct process *p, Dwfl_Module *mod, __u64 pc)
{
	struct frame f = { .inlined_into = UINT32_MAX };
	const char *name, *file;
	Dwarf_Addr start = 0;
	GElf_Off offset = 0;
	GElf_Sym sym;
	Dwfl_Line *line;

	if (!mod) { /* JIT code, or a mapping with no file: named by the process's perf map, if it has one */
		if (!jit_frame(p, pc, &f))
			mapping_of(p->pid, pc, &f);
		return frame_intern(st, &f);
	}
	name = dwfl_module_addrinfo(mod, pc, &offset, &sym, NULL, NULL, NULL);
	/* No symbol there: JIT code in a file-backed mapping (a memfd, /dev/zero) may be in the perf map. */
	if (!name && jit_frame(p, pc, &f))
		return frame_intern(st, &f);
	if (name) {
		f.symbol = symbol_dup(name, &f.rust);
		f.symbol_offset = offset;
	}
	f.module = basename_dup(dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL)); /* the maps' path */
	f.address = pc - start;
	line = lines_wanted(f.module) ? dwfl_module_getsrc(mod, pc) : NULL;
	if (line && (file = dwfl_lineinfo(line, NULL, &f.line, NULL, NULL, NULL)))
		f.file = basename_dup(file);
	if (!line) /* no line tables (or none wanted: the C library's): no inline information read either */
		return frame_intern(st, &f);
	return frame_with_inlined(st, mod, pc, &f);
}

/* pc of process p as a frame: named once for every process that maps its library. */
static __u32 user_frame(struct stacks *st, struct process *p, __u64 pc)
{
	struct index_table *t = &st->pc_index;
	Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, pc);
	__u32 space = 0, generation = 0, frame;
	struct pc_entry *pcs;
	Dwarf_Addr start;
	__u64 key = pc, h;
	size_t j;

	/* A library loaded after the modules were reported: report them again (at most once a second). */
	if (!mod && monotonic_ns() - p->reported_ns > 1000000000ULL && process_report(p))
		mod = dwfl_addrmodule(p->dwfl, pc);
	if (mod && (space = module_library(mod))) {
		dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
		key = pc - start;
	} else {
		jit_read(p); /* a perf map rewritten since: JIT code reused, its addresses named again */
		space = PROCESS_SPACE | p->id;
		generation = p->jit_generation;
	}
	if (st->npcs == MAX_NAMED_ADDRESSES) { /* bounded: the names are forgotten, and found again */
		st->npcs = 0;
		t->n = 0;
		memset(t->slots, 0, t->size * sizeof(*t->slots));
	}
	if (!index_table_reserve(t, pc_hash_at, st))
		return UINT32_MAX;
	h = pc_hash(space, generation, key);
	for (j = h & (t->size - 1); t->slots[j]; j = (j + 1) & (t->size - 1)) {
		struct pc_entry *e = &st->pcs[t->slots[j] - 1];

		if (e->pc == key && e->space == space && e->generation == generation)
			return e->frame;
	}
	frame = user_frame_named(st, p, mod, pc);
	if (frame == UINT32_MAX)
		return frame;
	pcs = grown(st->pcs, &st->pcs_cap, st->npcs, sizeof(*pcs), 1024);
	if (!pcs)
		return frame;
	st->pcs = pcs;
	st->pcs[st->npcs] = (struct pc_entry){ .space = space, .generation = generation, .pc = key, .frame = frame };
	t->slots[j] = ++st->npcs;
	t->n++;
	return frame;
}

struct unwound {
	struct stacks *st;
	struct process *process;
	__u32 *frames;
	__u32 n;
	bool truncated;
};

static int frame_visit(Dwfl_Frame *state, void *arg)
{
	struct unwound *u = arg;
	Dwarf_Addr pc;
	bool activation;
	__u32 frame;

	if (u->n == STACKS_MAX_DEPTH) {
		u->truncated = true;
		return DWARF_CB_ABORT;
	}
	if (!dwfl_frame_pc(state, &pc, &activation))
		return DWARF_CB_ABORT;
	if (!activation && pc) /* a return address: the call is the instruction before it */
		pc--;
	if (!pc)
		return DWARF_CB_ABORT;
	/* pc's frame and, out from the innermost function inlined there, the functions it is inlined into */
	for (frame = user_frame(u->st, u->process, pc); frame != UINT32_MAX; frame = u->st->frames[frame].inlined_into) {
		if (u->n == STACKS_MAX_DEPTH) {
			u->truncated = true;
			return DWARF_CB_ABORT;
		}
		u->frames[u->n++] = frame;
	}
	return DWARF_CB_OK;
}

/* ------------------------------------------------------------------ counting */

static __u64 stack_hash(__u32 tid, __u32 source, __u32 tags, const __u32 *frames, __u32 n)
{
	__u64 h = mix64(((__u64)tid << 32) ^ ((__u64)source << 16) ^ tags ^ ((__u64)n << 56));

	for (__u32 i = 0; i < n; i++)
		h = mix64(h ^ frames[i]);
	return h;
}

static __u64 stack_hash_at(const void *ctx, __u32 i)
{
	return ((const struct stacks *)ctx)->stacks[i].hash;
}

static void stack_count(struct stacks *st, const struct stack_sample *s, const __u32 *frames, __u32 n)
{
	__u64 h = stack_hash(s->tid, s->source, s->tags, frames, n);
	struct index_table *t = &st->stack_index;
	struct stack *k;
	size_t j;

	if (!index_table_reserve(t, stack_hash_at, st)) {
		st->lost_no_memory++;
		return;
	}
	for (j = h & (t->size - 1); t->slots[j]; j = (j + 1) & (t->size - 1)) {
		k = &st->stacks[t->slots[j] - 1];
		if (k->hash == h && k->tid == s->tid && k->source == s->source && k->tags == s->tags &&
		    k->nframes == n && !memcmp(k->frames, frames, n * sizeof(*frames))) {
			k->count++;
			k->weight += s->weight;
			return;
		}
	}
	if (st->nstacks == STACKS_MAX_UNIQUE) {
		st->lost_unique_cap++;
		return;
	}
	k = grown(st->stacks, &st->stacks_cap, st->nstacks, sizeof(*k), 1024);
	if (!k) {
		st->lost_no_memory++;
		return;
	}
	st->stacks = k;
	k = &st->stacks[st->nstacks];
	*k = (struct stack){ .tid = s->tid, .source = s->source, .tags = s->tags, .nframes = n,
			     .frames = malloc(n ? n * sizeof(*frames) : 1), .count = 1, .weight = s->weight, .hash = h };
	if (!k->frames) {
		st->lost_no_memory++;
		return;
	}
	memcpy(k->frames, frames, n * sizeof(*frames));
	t->slots[j] = ++st->nstacks;
	t->n++;
}

/* One thread's events after its last event stack of each source: no stack stands for them. And the stacks
 * events at which a stack was due when the target's budget was spent. */
static void settle_thread(struct stacks *st, const struct thread_stats *t)
{
	for (__u32 i = 0; i < STACK_EVENT_SOURCES; i++) {
		st->unplaced[i + 1] += t->stack_events[i].skipped;
		st->deferred += t->stack_events[i].deferred;
	}
}

void stacks_settle(struct stacks *st, const struct snapshot *snap)
{
	const struct exited_threads *gone = snap->exited;

	if (!st || st->settled)
		return;
	pthread_mutex_lock(&st->lock);
	st->settled = true;
	for (size_t i = 0; i < snap->nthreads; i++)
		settle_thread(st, &snap->threads[i]);
	for (size_t i = 0; gone && i < gone->n; i++)
		settle_thread(st, &gone->threads[i]);
	pthread_mutex_unlock(&st->lock);
}

/*
 * An event stack of thread tid's source: counted in this second's (thread, source) pairs; at a new second,
 * each pair's share of the budget for the next is the budget over the pairs of the last (at most hz: a
 * thread alone keeps the stride it always had), written to the BPF side's stack_share.
 */
static void stream_count(struct stacks *st, const struct stack_sample *s)
{
	__u64 second = s->time_ns / 1000000000ULL, key = ((__u64)s->tid << 3 | s->source) + 1;
	size_t j;

	if (second != st->streams_second) {
		__u32 share = st->budget / (st->nstreams ? st->nstreams : 1);

		if (st->share && st->nstreams)
			*st->share = share < 1 ? 1 : share > st->hz ? st->hz : share;
		memset(st->streams, 0, sizeof(st->streams));
		st->nstreams = 0;
		st->streams_second = second;
	}
	if (2 * st->nstreams >= STREAM_SET)
		return;
	for (j = mix64(key) & (STREAM_SET - 1); st->streams[j] && st->streams[j] != key; j = (j + 1) & (STREAM_SET - 1))
		;
	if (!st->streams[j]) {
		st->streams[j] = key;
		st->nstreams++;
	}
}

/* One record: its kernel frames named, its user frames unwound and named, the stack counted. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct stacks *st = ctx;
	const struct stack_sample *s = data;
	__u32 frames[STACKS_MAX_DEPTH];
	struct unwound u = { .st = st, .frames = frames };
	__u32 kernel = 0;

	if (size < sizeof(*s) || s->source >= STACK_SOURCES)
		return 0;
	pthread_mutex_lock(&st->lock);
	if (s->source != STACK_CPU)
		stream_count(st, s);
	st->records[s->source]++;
	st->weights[s->source] += s->weight;
	for (__u32 i = 0; i < s->kstack_bytes / sizeof(__u64) && i < STACK_KERNEL_DEPTH && u.n < STACKS_MAX_DEPTH;
	     i++) {
		__u32 f = kernel_frame(st, s->kstack[i]);

		if (f != UINT32_MAX)
			frames[u.n++] = f;
	}
	kernel = u.n;
	u.process = process_of(st, s);
	if (u.process && u.process->attached) {
		st->current = s;
		dwfl_getthread_frames(u.process->dwfl, s->tid, frame_visit, &u);
		st->current = NULL;
	}
	if (u.n == kernel)
		st->no_user_frames++;
	if (u.truncated)
		st->truncated++;
	stack_count(st, s, frames, u.n);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

static __u64 thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

struct ring_buffer *stacks_ring(struct stacks *st)
{
	return st ? st->ring : NULL;
}

void stacks_drain(struct stacks *st)
{
	__u64 start;

	if (!st || !st->ring)
		return;
	start = thread_cpu_ns();
	ring_buffer__consume(st->ring);
	if (st->after_drain)
		st->after_drain(st->after_drain_arg);
	pthread_mutex_lock(&st->lock);
	st->unwind_ns += thread_cpu_ns() - start;
	pthread_mutex_unlock(&st->lock);
}

void stacks_after_drain(struct stacks *st, void (*fn)(void *), void *arg)
{
	st->after_drain = fn;
	st->after_drain_arg = arg;
}

/* The unwinder's thread: the ring drained every STACKS_DRAIN_NS until stacks_stop. */
static void *unwinder(void *arg)
{
	struct stacks *st = arg;
	const struct timespec tick = { 0, STACKS_DRAIN_NS };

	while (!__atomic_load_n(&st->stopping, __ATOMIC_ACQUIRE)) {
		nanosleep(&tick, NULL);
		stacks_drain(st);
	}
	return NULL;
}

int stacks_run(struct stacks *st)
{
	int err = pthread_create(&st->thread, NULL, unwinder, st);

	st->threaded = !err;
	return -err;
}

/* ------------------------------------------------------------------ sampling */

__u32 stacks_ring_size(__u32 hz, __u32 budget, int ncpus)
{
	/* What half a second brings at most (the unwinder may be that long naming a new library's addresses),
	 * as a power of two (the ring's rule). */
	__u64 want = ((__u64)hz * (ncpus > 0 ? ncpus : 1) + budget) * sizeof(struct stack_sample) / 2;
	__u32 bytes = STACKS_RING_MIN;

	if (!hz)
		return (__u32)sysconf(_SC_PAGESIZE);
	while (bytes < want && bytes < STACKS_RING_MAX)
		bytes *= 2;
	return bytes;
}

struct stacks *stacks_start(struct bpf_program *prog, struct bpf_map *ring, __u32 hz, __u32 budget,
			    volatile __u32 *share, int *err, char *msg, size_t msglen)
{
	struct perf_event_attr attr = { .size = sizeof(attr), .type = PERF_TYPE_SOFTWARE,
					.config = PERF_COUNT_SW_CPU_CLOCK, .freq = 1, .sample_freq = hz };
	int ncpus = libbpf_num_possible_cpus();
	struct stacks *st = calloc(1, sizeof(*st));

	*err = 0;
	/* libdwfl fetches debug info over the network when DEBUGINFOD_URLS is set (dlopen'ing libdebuginfod):
	 * a capture never makes the collector reach out, nor waits on a server. */
	unsetenv("DEBUGINFOD_URLS");
	if (!st || ncpus <= 0) {
		*err = -ENOMEM;
		snprintf(msg, msglen, "--stacks: out of memory");
		free(st);
		return NULL;
	}
	st->hz = hz;
	st->ncpus = ncpus;
	st->budget = budget;
	st->share = share;
	st->ring_bytes = bpf_map__max_entries(ring);
	pthread_mutex_init(&st->lock, NULL);
	if (!(st->libraries = libraries_new())) {
		*err = -ENOMEM;
		snprintf(msg, msglen, "--stacks: out of memory");
		free(st);
		return NULL;
	}
	st->links = calloc(ncpus, sizeof(*st->links));
	st->fds = malloc(ncpus * sizeof(*st->fds));
	for (int cpu = 0; st->fds && cpu < ncpus; cpu++)
		st->fds[cpu] = -1; /* none open yet: stacks_stop closes only those that are */
	st->ring = ring_buffer__new(bpf_map__fd(ring), on_record, st, NULL);
	if (!st->links || !st->fds || !st->ring) {
		*err = errno ? -errno : -ENOMEM;
		snprintf(msg, msglen, "--stacks: cannot read the samples' ring buffer: %s", strerror(-*err));
		goto fail;
	}
	for (int cpu = 0; cpu < ncpus; cpu++) {
		st->fds[cpu] = syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (st->fds[cpu] < 0) {
			if (errno == ENODEV) /* a possible CPU that is offline */
				continue;
			*err = -errno;
			snprintf(msg, msglen, "--stacks: cannot open a cpu-clock perf event on CPU %d: %s", cpu,
				 strerror(errno));
			goto fail;
		}
		st->links[cpu] = bpf_program__attach_perf_event(prog, st->fds[cpu]);
		if (!st->links[cpu]) {
			*err = -errno;
			snprintf(msg, msglen, "--stacks: cannot attach the sampler on CPU %d: %s", cpu, strerror(errno));
			goto fail;
		}
	}
	return st;
fail:
	stacks_free(st);
	return NULL;
}

void stacks_stop(struct stacks *st)
{
	if (st && st->threaded) { /* the unwinder's last drain done: the rest is the caller's */
		__atomic_store_n(&st->stopping, true, __ATOMIC_RELEASE);
		pthread_join(st->thread, NULL);
		st->threaded = false;
	}
	if (!st || !st->links || !st->fds)
		return;
	for (int cpu = 0; cpu < st->ncpus; cpu++) {
		bpf_link__destroy(st->links[cpu]);
		st->links[cpu] = NULL;
		if (st->fds[cpu] >= 0)
			close(st->fds[cpu]);
		st->fds[cpu] = -1;
	}
}

void stacks_free(struct stacks *st)
{
	if (!st)
		return;
	stacks_stop(st);
	free(st->links);
	free(st->fds);
	ring_buffer__free(st->ring);
	for (size_t i = 0; i < st->nprocesses; i++)
		process_end(&st->processes[i]);
	libraries_free(st->libraries); /* after the Dwfls: each held its own reference to the files */
	for (size_t i = 0; i < st->nframes; i++)
		free(st->frames[i].module), free(st->frames[i].symbol), free(st->frames[i].file);
	for (size_t i = 0; i < st->nstacks; i++)
		free(st->stacks[i].frames);
	free(st->ksyms_text);
	free(st->ksyms);
	free(st->frames);
	free(st->frame_index.slots);
	free(st->pcs);
	free(st->pc_index.slots);
	free(st->stacks);
	free(st->stack_index.slots);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

/* ------------------------------------------------------------------ the capture's block */

static const char *const SOURCE_NAMES[STACK_SOURCES] = {
	[STACK_CPU] = "cpu",
	[STACK_SPIN_WRITE] = "spin-write",
	[STACK_EMPTY_POLL] = "empty-poll",
	[STACK_FUTILE_WAKEUP] = "futile-wakeup",
	[STACK_HANDOFF] = "handoff",
	[STACK_NAGLE_WRITE] = "nagle-write",
};

static const struct {
	__u32 bit;
	const char *name;
} TAG_NAMES[] = {
	{ STACK_TAG_WRITE_STALL, "write-stall" }, { STACK_TAG_EMPTY_CYCLE, "empty-cycle" },
	{ STACK_TAG_READY_CYCLE, "ready-cycle" }, { STACK_TAG_HANDOFF, "handoff" },
	{ STACK_TAG_REQUEST, "request" },         { STACK_TAG_KERNEL, "kernel" },
	{ STACK_TAG_NO_THREAD, "no-thread" },
};

static json_object *jframe(const struct frame *f)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "kind", json_object_new_string(!strcmp(f->module, "[kernel]") ? "kernel"
								 : !strcmp(f->module, "[jit]")  ? "jit"
								 : f->rust			? "rust"
												: "native"));
	json_object_object_add(o, "module", text_json(f->module));
	json_object_object_add(o, "address", json_object_new_uint64(f->address));
	json_object_object_add(o, "symbol", f->symbol ? text_json(f->symbol) : NULL);
	json_object_object_add(o, "symbol_offset", json_object_new_uint64(f->symbol_offset));
	json_object_object_add(o, "file", f->file ? text_json(f->file) : NULL);
	json_object_object_add(o, "line", json_object_new_int(f->file ? f->line : 0));
	return o;
}

static json_object *jstack(const struct stack *k)
{
	json_object *o = json_object_new_object(), *tags = json_object_new_array(), *frames = json_object_new_array();

	for (size_t i = 0; i < sizeof(TAG_NAMES) / sizeof(TAG_NAMES[0]); i++)
		if (k->tags & TAG_NAMES[i].bit)
			json_object_array_add(tags, json_object_new_string(TAG_NAMES[i].name));
	for (__u32 i = 0; i < k->nframes; i++)
		json_object_array_add(frames, json_object_new_uint64(k->frames[i]));
	json_object_object_add(o, "tid", json_object_new_uint64(k->tid));
	json_object_object_add(o, "source", json_object_new_string(SOURCE_NAMES[k->source]));
	json_object_object_add(o, "tags", tags);
	json_object_object_add(o, "count", json_object_new_uint64(k->count));
	json_object_object_add(o, "weight", json_object_new_uint64(k->weight));
	json_object_object_add(o, "frames", frames);
	return o;
}

json_object *stacks_json(const struct stacks *st, __u64 lost)
{
	json_object *o = json_object_new_object(), *records = json_object_new_object();
	json_object *events = json_object_new_object(), *drops = json_object_new_object();
	json_object *unplaced = json_object_new_object();
	json_object *frames = json_object_new_array(), *stacks = json_object_new_array();
	char unwinder[64];

	snprintf(unwinder, sizeof(unwinder), "elfutils libdw %d.%d", _ELFUTILS_VERSION / 1000,
		 _ELFUTILS_VERSION % 1000);
	pthread_mutex_lock((pthread_mutex_t *)&st->lock); /* the unwinder's thread goes on meanwhile */
	json_object_object_add(o, "hz", json_object_new_uint64(st->hz));
	json_object_object_add(o, "event_budget_per_s", json_object_new_uint64(st->budget));
	json_object_object_add(o, "ring_bytes", json_object_new_uint64(st->ring_bytes));
	json_object_object_add(o, "unwinder", json_object_new_string(unwinder));
	for (int i = 0; i < STACK_SOURCES; i++) {
		json_object_object_add(records, SOURCE_NAMES[i], json_object_new_uint64(st->records[i]));
		if (i != STACK_CPU)
			json_object_object_add(events, SOURCE_NAMES[i], json_object_new_uint64(st->weights[i]));
	}
	json_object_object_add(o, "records", records);
	json_object_object_add(o, "events", events);
	json_object_object_add(drops, "ring_full", json_object_new_uint64(lost));
	json_object_object_add(drops, "unique_stacks_cap", json_object_new_uint64(st->lost_unique_cap));
	json_object_object_add(drops, "out_of_memory", json_object_new_uint64(st->lost_no_memory));
	json_object_object_add(o, "lost", drops);
	json_object_object_add(o, "deferred", json_object_new_uint64(st->deferred));
	json_object_object_add(o, "modules", libraries_json(st->libraries));
	json_object_object_add(o, "settled", json_object_new_boolean(st->settled));
	for (int i = 1; i < STACK_SOURCES; i++)
		json_object_object_add(unplaced, SOURCE_NAMES[i], json_object_new_uint64(st->unplaced[i]));
	json_object_object_add(o, "events_without_stack", unplaced);
	json_object_object_add(o, "no_user_frames", json_object_new_uint64(st->no_user_frames));
	json_object_object_add(o, "truncated", json_object_new_uint64(st->truncated));
	json_object_object_add(o, "collector_cpu_s", json_object_new_double(st->unwind_ns / 1e9));
	json_object_object_add(o, "helper", NULL); /* a runtime helper's account, added by `spinscope record` */
	for (size_t i = 0; i < st->nframes; i++)
		json_object_array_add(frames, jframe(&st->frames[i]));
	for (size_t i = 0; i < st->nstacks; i++)
		json_object_array_add(stacks, jstack(&st->stacks[i]));
	pthread_mutex_unlock((pthread_mutex_t *)&st->lock);
	json_object_object_add(o, "frames", frames);
	json_object_object_add(o, "stacks", stacks);
	return o;
}
