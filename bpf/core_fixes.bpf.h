// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * CO-RE shims: the older layouts of kernel types that changed, as `___suffix` flavours that libbpf
 * relocates against the running kernel's BTF. Each says the version (and the change) that changed the type;
 * the code that reads it tests bpf_core_field_exists() on the current layout first. (The libbpf-tools
 * idiom: core_fixes.bpf.h.) Included by kernel.bpf.h.
 */
#ifndef SPINSCOPE_CORE_FIXES_BPF_H
#define SPINSCOPE_CORE_FIXES_BPF_H

/* Before 6.13 ("fs: port files to file_ref") a file's references were an atomic_long_t f_count (1: one
 * reference). Read by file_last_reference() (sockets.bpf.h). */
struct file___pre613 {
	atomic_long_t f_count;
} __attribute__((preserve_access_index));

#endif /* SPINSCOPE_CORE_FIXES_BPF_H */
