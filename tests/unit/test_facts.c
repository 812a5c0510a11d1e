/* SPDX-License-Identifier: MIT */
/* The session's facts from synthetic events (src/session/facts.h): one
 * warning policy for both backends (the same fact merged and counted,
 * a followed process's named by its pid), the latest of each process by
 * id (strings copied), the interrupts in order with whether the command
 * got the signal too. */
#include <signal.h>
#include <string.h>

#include "../../src/session/facts.h"
#include "check.h"
#include "ptw_util.h"

static struct ptw_event warning(uint32_t process, pid_t pid, enum ptw_warning_code code,
				const char *msg)
{
	struct ptw_event ev = ptw_event_init(PTW_EV_WARNING, 1, pid);
	ev.pid = pid;
	ev.process = process;
	ev.warning = code;
	ev.name = msg;
	return ev;
}

static void test_warnings(void)
{
	struct session_facts f = { 0 };
	struct ptw_event ev = warning(0, 100, PTW_W_NO_SYMBOLS, "libc has no symbols");
	CHECK(facts_take(&f, &ev)); /* the session's alone */
	/* the same fact of three followed processes: one warning, the first
	 * one's pid, said three times */
	for (pid_t pid = 200; pid < 203; pid++) {
		ev = warning(pid - 199, pid, PTW_W_NO_DEATH_EVENTS, "no death events");
		CHECK(facts_take(&f, &ev));
	}
	ev = warning(0, 100, PTW_W_NO_SYMBOLS, "libc has no symbols");
	facts_take(&f, &ev);
	struct ptw_report r = { 0 };
	facts_fill(&f, &r);
	CHECK_EQ(r.nwarnings, 2);
	CHECK_STR(r.warnings[0].message, "libc has no symbols");
	CHECK_STR(r.warnings[0].code, "no_symbols");
	CHECK_EQ(r.warnings[0].count, 2);
	CHECK_STR(r.warnings[1].message, "process 200: no death events");
	CHECK_EQ(r.warnings[1].count, 3);
	CHECK(r.processes == NULL && r.nprocesses == 0);
	facts_free(&f);
}

static void test_processes(void)
{
	struct session_facts f = { 0 };
	char a0[] = "sh", a1[] = "-c", a2[] = "x";
	char *argv1[] = { a0, a1, a2, NULL };
	char exe[32];
	strcpy(exe, "/bin/sh");
	struct ptw_process p = { .id = 1,
				 .parent_id = 0,
				 .pid = 301,
				 .ppid = 300,
				 .exe = exe,
				 .argv = argv1,
				 .start_ns = 5,
				 .followed = true };
	struct ptw_event ev = ptw_event_init(PTW_EV_PROCESS, 5, 301);
	ev.proc = &p;
	CHECK(facts_take(&f, &ev));
	strcpy(exe, "changed"); /* copied: the backend's may change */
	struct ptw_report r = { 0 };
	facts_fill(&f, &r);
	CHECK_EQ(r.nprocesses, 2); /* by id: the target's place kept */
	CHECK_STR(r.processes[1].exe, "/bin/sh");
	CHECK_STR(r.processes[1].argv[2], "x");
	CHECK_EQ(r.processes[0].pid, 0);
	/* the target's, then an exec and the end of the first */
	struct ptw_process root = { .id = 0, .pid = 300, .exe = "/bin/make", .followed = true };
	ev.proc = &root;
	facts_take(&f, &ev);
	p.exe = "/bin/true";
	p.end_ns = 9;
	p.exit_kind = PTW_EXIT_CODE;
	p.exit_code = 3;
	ev.proc = &p;
	facts_take(&f, &ev);
	facts_fill(&f, &r);
	CHECK_EQ(r.nprocesses, 2);
	CHECK_EQ(r.processes[0].pid, 300);
	CHECK_STR(r.processes[0].exe, "/bin/make");
	CHECK_STR(r.processes[1].exe, "/bin/true");
	CHECK_EQ(r.processes[1].exit_code, 3);
	CHECK_EQ(r.processes[1].end_ns, 9);
	facts_free(&f);
}

static void test_interrupts(void)
{
	struct session_facts f = { 0 };
	static const struct {
		enum ptw_interrupt_action action;
		enum ptw_interrupt_why why;
		bool reached;
	} cases[] = {
		{ PTW_INTR_TRACED_ON, PTW_INTR_TERMINAL, true },
		{ PTW_INTR_TRACED_ON, PTW_INTR_GROUP, true },
		{ PTW_INTR_DETACHED, PTW_INTR_AGAIN, true },
		{ PTW_INTR_DETACHED, PTW_INTR_PTWATCH_ALONE, false },
		{ PTW_INTR_DETACHED, PTW_INTR_ATTACHED, false },
	};
	for (size_t i = 0; i < PTW_ARRAY_SIZE(cases); i++) {
		struct ptw_event ev = ptw_event_init(PTW_EV_INTERRUPT, 10 + i, 300);
		ev.sig = SIGINT;
		ev.action = cases[i].action;
		ev.why = cases[i].why;
		CHECK(!facts_take(&f, &ev)); /* the outputs' too (the log's line) */
	}
	struct ptw_report r = { 0 };
	facts_fill(&f, &r);
	CHECK_EQ(r.ninterrupts, PTW_ARRAY_SIZE(cases));
	for (size_t i = 0; i < PTW_ARRAY_SIZE(cases); i++) {
		CHECK_EQ(r.interrupts[i].ns, 10 + i);
		CHECK_EQ(r.interrupts[i].sig, SIGINT);
		CHECK_EQ(r.interrupts[i].action, cases[i].action);
		CHECK_EQ(r.interrupts[i].reached_target, cases[i].reached);
	}
	/* thread events are not facts */
	struct ptw_event ev = ptw_event_init(PTW_EV_THREAD_START, 1, 301);
	CHECK(!facts_take(&f, &ev));
	facts_free(&f);
}

int main(void)
{
	test_warnings();
	test_processes();
	test_interrupts();
	CHECK_DONE();
}
