// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What spinscope.bpf.c takes from the kernel beyond vmlinux.h: uapi and internal constants that BTF does
 * not carry (macros), where a syscall's arguments are in the saved registers, and (core_fixes.bpf.h) the
 * CO-RE shims. Included by spinscope.bpf.c only.
 */
#ifndef SPINSCOPE_KERNEL_BPF_H
#define SPINSCOPE_KERNEL_BPF_H

#define EAGAIN 11
/* Kernel-internal returns of a syscall interrupted by a signal (or a ptrace attach): the kernel
 * re-executes it, or continues it through restart_syscall; user space never sees these. */
#define ERESTARTSYS 512
#define ERESTART_RESTARTBLOCK 516
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define TASK_RUNNING 0
#define TASK_DEAD 0x80
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define MSG_PEEK 0x2  /* recv flags */
#define MSG_TRUNC 0x20

/* futex(2) commands (uapi/linux/futex.h); the private/clock flags are masked off. */
#define FUTEX_CMD_MASK 0x7f
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_REQUEUE 3
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_WAKE_OP 5
#define FUTEX_LOCK_PI 6
#define FUTEX_UNLOCK_PI 7
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAKE_BITSET 10
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13

#define MAX_IOV 16 /* iovecs / mmsghdrs summed per call; more are rare and left out of `asked` */

/* Syscall arguments and number in a task's saved user registers. */
#if defined(__TARGET_ARCH_x86)
#define SC_ARG(regs, n)                                                                            \
	((n) == 0 ? (regs)->di : (n) == 1 ? (regs)->si : (n) == 2 ? (regs)->dx : (n) == 3 ? (regs)->r10 \
										 : (regs)->r8)
#define SC_NR(regs) ((regs)->orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define SC_ARG(regs, n) ((n) == 0 ? (regs)->orig_x0 : (regs)->regs[n])
#define SC_NR(regs) ((regs)->syscallno)
#else
#error "spinscope: syscall argument registers not defined for this architecture"
#endif

/* A kfunc: a pointer typed as a kernel type, or with btf_id 0 as untrusted memory (Linux 6.17+; see
 * untrusted_loads). Inlined to a move; loads through it are fault-safe. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

#include "core_fixes.bpf.h"

#endif /* SPINSCOPE_KERNEL_BPF_H */
