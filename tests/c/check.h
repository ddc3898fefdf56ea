/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the collector's C unit tests (tests/c/..._test.c) share: a failure count, and CHECK_EQ, which says
 * where a value differs from the one wanted and counts it (main returns non-zero if any did).
 */
#ifndef SPINSCOPE_TESTS_CHECK_H
#define SPINSCOPE_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK_EQ(what, got, want)                                                                  \
	do {                                                                                       \
		unsigned long long g_ = (got), w_ = (want);                                         \
		if (g_ != w_) {                                                                    \
			printf("FAIL %s:%d %s: %llu, want %llu\n", __FILE__, __LINE__, what, g_, w_); \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

#endif /* SPINSCOPE_TESTS_CHECK_H */
