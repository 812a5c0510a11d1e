/* SPDX-License-Identifier: MIT */
/*
 * The text output (PTW_OUTPUT_TEXT) fed synthetic events as a session
 * would: under -f, once a second process is traced, every event line
 * names the process of its own event, wait lines (--locks) included; and
 * that state is the output's, not shared between two sessions.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptw_locks.h"
#include "ptw_output.h"
#include "ptw_util.h"

struct fixture {
	struct ptw_spans *spans;
	struct ptw_buf log;
	struct ptw_output_host host;
	struct ptw_output *text;
};

static void no_flush(void *ctx)
{
	(void)ctx;
}

static void fixture_init(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->spans = ptw_spans_new();
	f->host = (struct ptw_output_host){ .spans = f->spans, .start_ns = 0, .log = &f->log,
					    .flush = no_flush, .before_line = no_flush };
	struct ptw_output_conf c = { .format = PTW_OUTPUT_TEXT, .fd = -1 };
	f->text = ptw_output_text_new(&c, &f->host);
}

static void fixture_free(struct fixture *f)
{
	f->text->ops->free(f->text);
	ptw_spans_free(f->spans);
	ptw_buf_free(&f->log);
}

/* One event through the engine and the output, as the session's sink. */
static void feed(struct fixture *f, const struct ptw_event *ev)
{
	const struct ptw_span *sp = ptw_spans_consume(f->spans, ev);
	f->text->ops->event(f->text, ev, sp);
	ptw_spans_collect(f->spans);
}

static void feed_wait(struct fixture *f, const struct ptw_event *ev, const struct ptw_wait *w)
{
	f->text->ops->wait(f->text, ev, NULL, w);
}

/* The line of the log that has word as its event word, or NULL. */
static char *line_with(const struct ptw_buf *log, const char *word)
{
	char *text = strndup(log->p ? log->p : "", log->len), *save = NULL, *found = NULL;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char w[32];
		unsigned pid, tid;
		double t;
		if (sscanf(l, "%lf %u %u %31s", &t, &pid, &tid, w) == 4 && !strcmp(w, word)) {
			found = strdup(l);
			break;
		}
	}
	free(text);
	return found;
}

/* -f --locks: process 100 runs, then 200 appears (lines carry pids from
 * then on); a wait in 100 must say 100, not the previous event's 200. */
static void test_wait_line_pid(void)
{
	struct fixture f;
	fixture_init(&f);
	struct ptw_event e = ptw_event_init(PTW_EV_IMAGE, 1000, 100);
	e.pid = 100;
	e.name = "/bin/a";
	feed(&f, &e);
	e = ptw_event_init(PTW_EV_IMAGE, 2000, 200);
	e.pid = 200;
	e.process = 1;
	e.name = "/bin/b";
	feed(&f, &e);

	struct ptw_wait w = { .id = 1, .tid = 100, .kind = PTW_WAIT_MUTEX, .object = 0x4040a0,
			      .start_ns = 3000, .has_end = true, .end_ns = 4000 };
	e = ptw_event_init(PTW_EV_WAIT_BEGIN, 3000, 100);
	e.pid = 100;
	feed_wait(&f, &e, &w);
	e = ptw_event_init(PTW_EV_WAIT_END, 4000, 100);
	e.pid = 100;
	feed_wait(&f, &e, &w);

	char *exec_b = line_with(&f.log, "exec");
	char *wait = line_with(&f.log, "wait"), *waited = line_with(&f.log, "waited");
	CHECK(exec_b != NULL); /* the second exec line: pids shown from then on */
	CHECK_STR(wait, "   0.000003     100     100 wait     <1> mutex 0x4040a0");
	CHECK_STR(waited, "   0.000004     100     100 waited   <1> mutex 0x4040a0 for 1.0 us");
	free(exec_b);
	free(wait);
	free(waited);
	fixture_free(&f);
}

/* Two sessions' text outputs: the second has seen one process only, so
 * its lines carry no pid, whatever the first one saw. */
static void test_state_per_output(void)
{
	struct fixture a, b;
	fixture_init(&a);
	fixture_init(&b);
	struct ptw_event e = ptw_event_init(PTW_EV_IMAGE, 1000, 100);
	e.pid = 100;
	e.name = "/bin/a";
	feed(&a, &e);
	e = ptw_event_init(PTW_EV_IMAGE, 2000, 200);
	e.pid = 200;
	e.process = 1;
	e.name = "/bin/b";
	feed(&a, &e);

	e = ptw_event_init(PTW_EV_IMAGE, 1000, 300);
	e.pid = 300;
	e.name = "/bin/c";
	feed(&b, &e);
	CHECK_STR(b.log.p, "   0.000001     300 exec     /bin/c [1]\n");
	fixture_free(&a);
	fixture_free(&b);
}

int main(void)
{
	test_wait_line_pid();
	test_state_per_output();
	return check_failures ? 1 : 0;
}
