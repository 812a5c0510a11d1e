/* SPDX-License-Identifier: MIT */
/* A minimal check harness for the unit tests: exit 0 pass, 1 fail. */
#ifndef PTW_CHECK_H
#define PTW_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                   \
		if (a_ != b_) {                                                                    \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%#" PRIx64              \
					" != %#" PRIx64 ")\n",                                     \
				__FILE__, __LINE__, #a, #b, a_, b_);                               \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *a_ = (a), *b_ = (b);                                                   \
		if (!a_ || !b_ || strcmp(a_, b_)) {                                                \
			fprintf(stderr, "%s:%d: CHECK_STR failed: %s == %s (\"%s\" != \"%s\")\n",  \
				__FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
			check_failures++;                                                          \
		}                                                                                  \
	} while (0)

#define CHECK_DONE()                                                                               \
	do {                                                                                       \
		if (check_failures)                                                                \
			fprintf(stderr, "%d check(s) failed\n", check_failures);                   \
		return check_failures ? 1 : 0;                                                     \
	} while (0)

#endif
