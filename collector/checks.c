// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <json-c/json.h>

#include "checks.h"
#include "probes.h"

#define COLLECTOR "spinscope-collector"

void check_pass(struct check *c, const char *fmt, ...)
{
	va_list ap;

	c->ok = true;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
}

void check_fail(struct check *c, const char *remedy, const char *fmt, ...)
{
	va_list ap;

	c->ok = false;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
	snprintf(c->remedy, sizeof(c->remedy), "%s", remedy);
}

void check_skip(struct check *c, const char *why)
{
	c->ok = false;
	c->skipped = true;
	snprintf(c->detail, sizeof(c->detail), "not tried: %s", why);
}

static unsigned long long effective_capabilities(void)
{
	unsigned long long eff = 0;
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return eff;
}

/* Root, or the capabilities BPF tracing needs: CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN before 5.8. */
static void check_privileges(struct check *c)
{
	enum { CAP_SYS_ADMIN_BIT = 21, CAP_PERFMON_BIT = 38, CAP_BPF_BIT = 39 };
	unsigned long long eff;

	c->name = "privileges";
	if (geteuid() == 0)
		return check_pass(c, "running as root");
	eff = effective_capabilities();
	if ((eff >> CAP_BPF_BIT & 1) && (eff >> CAP_PERFMON_BIT & 1))
		return check_pass(c, "CAP_BPF and CAP_PERFMON");
	if (eff >> CAP_SYS_ADMIN_BIT & 1)
		return check_pass(c, "CAP_SYS_ADMIN");
	check_fail(c, "run it as root, or grant the collector the capabilities: "
		      "setcap cap_bpf,cap_perfmon+ep $(command -v " COLLECTOR ")",
		   "needs root, or CAP_BPF and CAP_PERFMON (this process has neither)");
}

static void check_btf(struct check *c)
{
	const char *btf = getenv("SPINSCOPE_SYSFS_BTF"); /* tests: a kernel without BTF */

	c->name = "kernel BTF";
	if (!btf)
		btf = "/sys/kernel/btf/vmlinux";
	if (access(btf, R_OK) == 0)
		return check_pass(c, "%s", btf);
	check_fail(c, "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian, Ubuntu and Fedora kernels "
		      "have it); the probes are relocated to the running kernel with it",
		   "this kernel has no BTF (%s is missing)", btf);
}

static void check_tracefs(struct check *c)
{
	const char *dir = tracefs_dir();

	c->name = "tracefs";
	if (dir)
		return check_pass(c, "%s", dir);
	check_fail(c, "mount -t tracefs nodev /sys/kernel/tracing",
		   "tracefs is not mounted and could not be mounted at /sys/kernel/tracing");
}

/* Every tracepoint the probes attach to, checked in tracefs so a missing one is named. */
static void check_tracepoints(struct check *c)
{
	const char *tracefs = tracefs_dir();
	char missing[200] = "", path[512];
	size_t n = probes_count(), nmissing = 0;

	c->name = "tracepoints";
	for (size_t i = 0; i < n; i++) {
		const char *category, *event = probes_tracepoint(i, &category);
		size_t used = strlen(missing);

		snprintf(path, sizeof(path), "%s/events/%s/%s", tracefs, category, event);
		if (access(path, F_OK) == 0)
			continue;
		snprintf(missing + used, sizeof(missing) - used, "%s%s/%s", nmissing ? ", " : "", category, event);
		nmissing++;
	}
	if (!nmissing)
		return check_pass(c, "%zu of %zu present", n, n);
	check_fail(c, "a kernel built with CONFIG_FTRACE_SYSCALLS and CONFIG_TRACEPOINTS",
		   "tracepoint%s %s %s missing from this kernel (%zu of %zu present)", nmissing > 1 ? "s" : "",
		   missing, nmissing > 1 ? "are" : "is", n - nmissing, n);
}

/* A feature a test names in $SPINSCOPE_KERNEL_FEATURES_OFF: taken as missing. */
static bool feature_forced_off(const char *name)
{
	const char *off = getenv("SPINSCOPE_KERNEL_FEATURES_OFF");
	size_t len = strlen(name);

	for (const char *p = off; p && *p; p += strcspn(p, ","), p += *p == ',')
		if (!strncmp(p, name, len) && (p[len] == ',' || !p[len]))
			return true;
	return false;
}

/* Does the verifier let a perf-event program look up a hash map that is not preallocated (before Linux
 * 6.1 it refuses: "perf_event programs can only use preallocated hash map")? A minimal program is loaded:
 * no libbpf probe asks this. */
static bool probe_perf_event_maps(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, map_opts, .map_flags = BPF_F_NO_PREALLOC);
	int map = bpf_map_create(BPF_MAP_TYPE_HASH, NULL, sizeof(__u32), sizeof(__u64), 1, &map_opts), prog;

	if (map < 0)
		return false;
	struct bpf_insn insns[] = {
		{ .code = BPF_ST | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .off = -4 },  /* *(u32 *)(fp - 4) = 0 */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -4 }, /* r2 = fp - 4 */
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1, .src_reg = BPF_PSEUDO_MAP_FD, .imm = map },
		{ 0 },                                                                    /* r1 = the map */
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0 },            /* return 0 */
		{ .code = BPF_JMP | BPF_EXIT },
	};
	prog = bpf_prog_load(BPF_PROG_TYPE_PERF_EVENT, NULL, "GPL", insns, sizeof(insns) / sizeof(insns[0]), NULL);
	close(map);
	if (prog < 0)
		return false;
	close(prog);
	return true;
}

void kernel_features_probe(struct kernel_features *f)
{
	f->bpf_loop = !feature_forced_off("bpf_loop") &&
		      libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_loop, NULL) == 1;
	f->perf_event_maps = !feature_forced_off("perf_event_maps") && probe_perf_event_maps();
}

/* The kernel's release against the floor: below it, the probes most likely do not load (a vendor kernel
 * with BPF backported may: "probes load" says), so this check is optional. */
static void check_kernel(struct check *c)
{
	struct utsname u;
	int major = 0, minor = 0;

	c->name = "kernel";
	c->optional = true;
	if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return check_fail(c, "", "cannot read the kernel's release");
	if (major > KERNEL_FLOOR_MAJOR || (major == KERNEL_FLOOR_MAJOR && minor >= KERNEL_FLOOR_MINOR))
		return check_pass(c, "Linux %s (spinscope needs %d.%d or later)", u.release, KERNEL_FLOOR_MAJOR,
				  KERNEL_FLOOR_MINOR);
	check_fail(c, "boot Linux 6.2 or later; a vendor kernel with BPF backported may still load the probes "
		      "(see 'probes load')",
		   "Linux %s is older than %d.%d, the oldest the probes load on (the bpf_rdonly_cast kfunc)",
		   u.release, KERNEL_FLOOR_MAJOR, KERNEL_FLOOR_MINOR);
}

/* The features a part of the capture needs: missing, that part is left out, and the capture says so. */
static void check_features(struct check *loop, struct check *maps)
{
	struct kernel_features f;

	kernel_features_probe(&f);
	loop->name = "bpf_loop";
	loop->optional = maps->optional = true;
	if (f.bpf_loop)
		check_pass(loop, "present: HTTP/2 connections' requests are counted by stream");
	else
		check_fail(loop, "Linux 5.17 or later has it",
			   "missing: HTTP/2 connections' requests are counted by exchange, not by stream");
	maps->name = "perf-event map access";
	if (f.perf_event_maps)
		check_pass(maps, "present: --stacks samples the target's stacks");
	else
		check_fail(maps, "Linux 6.1 or later has it",
			   "missing (a perf-event program may not read a hash map that is not preallocated): "
			   "--stacks is left out of the capture");
}

const struct check *host_checks(struct check checks[HOST_CHECKS])
{
	memset(checks, 0, HOST_CHECKS * sizeof(*checks));
	check_privileges(&checks[CHECK_PRIVILEGES]);
	check_btf(&checks[CHECK_BTF]);
	if (!checks[CHECK_PRIVILEGES].ok) {
		/* tracefs is root's: unprivileged, it looks unmounted. Say so rather than mislead. */
		checks[CHECK_TRACEFS].name = "tracefs";
		checks[CHECK_TRACEPOINTS].name = "tracepoints";
		check_skip(&checks[CHECK_TRACEFS], "needs privileges");
		check_skip(&checks[CHECK_TRACEPOINTS], "needs privileges");
		checks[CHECK_BPF_LOOP].name = "bpf_loop";
		checks[CHECK_PERF_EVENT_MAPS].name = "perf-event map access";
		checks[CHECK_BPF_LOOP].optional = checks[CHECK_PERF_EVENT_MAPS].optional = true;
		check_skip(&checks[CHECK_BPF_LOOP], "needs privileges");
		check_skip(&checks[CHECK_PERF_EVENT_MAPS], "needs privileges");
	} else {
		check_features(&checks[CHECK_BPF_LOOP], &checks[CHECK_PERF_EVENT_MAPS]);
		check_tracefs(&checks[CHECK_TRACEFS]);
		if (checks[CHECK_TRACEFS].ok)
			check_tracepoints(&checks[CHECK_TRACEPOINTS]);
		else {
			checks[CHECK_TRACEPOINTS].name = "tracepoints";
			check_skip(&checks[CHECK_TRACEPOINTS], "needs tracefs");
		}
	}
	check_kernel(&checks[CHECK_KERNEL]);
	for (size_t i = 0; i < HOST_CHECKS; i++)
		if (!checks[i].ok && !checks[i].optional)
			return &checks[i];
	return NULL;
}

void checks_print_json(FILE *out, const struct check *checks, size_t n)
{
	json_object *doc = json_object_new_object(), *list = json_object_new_array();
	bool ok = true;

	for (size_t i = 0; i < n; i++) {
		json_object *c = json_object_new_object();

		json_object_object_add(c, "name", json_object_new_string(checks[i].name));
		json_object_object_add(c, "ok", json_object_new_boolean(checks[i].ok));
		json_object_object_add(c, "skipped", json_object_new_boolean(checks[i].skipped));
		json_object_object_add(c, "optional", json_object_new_boolean(checks[i].optional));
		json_object_object_add(c, "detail", json_object_new_string(checks[i].detail));
		json_object_object_add(c, "remedy", json_object_new_string(checks[i].remedy));
		json_object_array_add(list, c);
		ok = ok && (checks[i].ok || checks[i].optional);
	}
	json_object_object_add(doc, "ok", json_object_new_boolean(ok));
	json_object_object_add(doc, "checks", list);
	fprintf(out, "%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN |
								     JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(doc);
}
