/* SPDX-License-Identifier: MIT */
/*
 * What the kernel backend's driver tests (test_kernel_attach, _frames,
 * _locks, _follow) do alike: the pass/fail count, the skip where BPF
 * cannot run, the truth file, the fixture behind its attach handshake
 * (tests/fixtures/attach.h), the attach, the notes, the truth's JSON.
 * Each test keeps its own checks.
 */
#ifndef PTW_TESTS_KDRIVER_H
#define PTW_TESTS_KDRIVER_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ptw_kernel.h"
#include "ptw_spans.h"

extern int kdrv_passed, kdrv_failed;

#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (cond) {                                                                        \
			kdrv_passed++;                                                             \
		} else {                                                                           \
			kdrv_failed++;                                                             \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                     \
			printf(__VA_ARGS__);                                                       \
			putchar('\n');                                                             \
		}                                                                                  \
	} while (0)

/* "N passed, M failed"; the test's exit status (0 pass, 1 fail). */
int kdrv_result(void);

/* Exits 77 (SKIP, with the reason) where the kernel backend cannot run. */
void kdrv_require_kernel(void);

/* An empty file from the mkstemp template tmpl (exits 99 if it cannot). */
void kdrv_truth_file(char *tmpl);

/* argv[0] started with the ends of the handshake's pipes in PTW_CTL_FD and
 * PTW_REPLY_FD and truth in PTWATCH_TRUTH; *ctl: the end to write to it,
 * *rep: the end to read its replies from. Exits 99 if the pipes fail. */
pid_t kdrv_spawn_fixture(char *const argv[], const char *truth, int *ctl, int *rep);

/* The fixture's "ready PID" (PID: child), read from rep into line; exits
 * 99 if it says anything else. */
void kdrv_wait_ready(int rep, pid_t child, char *line, size_t size);

/* The kernel path's facts besides threads (PTW_EV_WARNING, PTW_EV_PROCESS):
 * kept when a test's sink passes them here (true: ev was one, not for the
 * span engine). */
bool kdrv_fact(const struct ptw_event *ev);
/* The session over (ptw_kernel_finish): its notes (one line each, printed)
 * and -f's processes by id, valid until the next call. */
size_t kdrv_notes(struct ptw_kernel *k, const char *const **notes);
size_t kdrv_processes(const struct ptw_process **procs);

/* ptw_kernel_attach to pid; exits 1 (FAIL, pid killed) if it cannot. */
struct ptw_kernel *kdrv_attach(const struct ptw_kernel_opts *o, pid_t pid);

/* The run over: child reaped, the backend detached, the spans finished;
 * *st: the backend's figures. child's wait status. */
int kdrv_end(struct ptw_kernel *k, struct ptw_spans *spans, pid_t child,
	     struct ptw_kernel_stats *st);
/* The same as ptwatch's front ends a session whose watched processes have
 * all ended (src/session/session.c, the kernel backend's leaves_early):
 * no detach, the links closing in the background, what remains said by
 * ptw_kernel_finish (kdrv_notes); else as kdrv_end. */
int kdrv_end_as_front(struct ptw_kernel *k, struct ptw_spans *spans, pid_t child,
		      struct ptw_kernel_stats *st);

/* The file's text (NULL: cannot read it). */
char *kdrv_slurp(const char *path);

/* The truth's JSON: o's member key (NULL: none), as an integer (-1: not
 * one), a hex string (0: not one), a string ("": not one), true. */
const struct json_object *kdrv_jget(const struct json_object *o, const char *key);
int64_t kdrv_jint(const struct json_object *o, const char *key);
uint64_t kdrv_jhex(const struct json_object *o, const char *key);
const char *kdrv_jstr(const struct json_object *o, const char *key);
bool kdrv_jtrue(const struct json_object *o, const char *key);

#endif
