/* SPDX-License-Identifier: MIT */
/*
 * The guardian's side that runs in ptw-tracer: the session record and the
 * memory fds to the restorer (never blocking the tracer for long), the
 * memory fds and a mirrored signal to the front; see ptw_guardian.h.
 */
#define _GNU_SOURCE
#include "ptw_guardian.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ptw_guardian_wire.h"
#include "ptw_record.h"

/* Largest record packet: well under a unix socket's send buffer. */
#define CHUNK (32u * 1024)
/* The record queue for the restorer: past this, the tracer waits for it
 * (at most PENDING_WAIT_MS each time). */
#define PENDING_MAX (1u << 20)
#define PENDING_WAIT_MS 50
/* How long the tracer's exit may wait for the restorer to take the rest. */
#define END_DEADLINE_MS 2000

static int front_sock = -1;	/* to the front (-1 when not split) */
static int restorer_sock = -1;	/* to the restorer (-1: none, or it is gone) */
static struct ptw_buf pending;	/* record bytes not sent yet */
/* Memory fds not sent yet to the restorer, oldest first: our own
 * duplicates (the tracer closes its fd when the process ends, and that
 * number may be reused), closed once sent, or dropped when the process
 * they open is gone. */
static int *pending_fds;
static size_t npending_fds;

/* Whether the process a /proc/TID/mem fd opens still exists. */
static bool mem_fd_alive(int fd)
{
	char link[64], path[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	int tid;
	if (n <= 0)
		return false;
	path[n] = 0;
	return sscanf(path, "/proc/%d/mem", &tid) == 1 && (kill(tid, 0) == 0 || errno == EPERM);
}

static void drop_pending_fd(size_t i)
{
	close(pending_fds[i]);
	memmove(pending_fds + i, pending_fds + i + 1, (--npending_fds - i) * sizeof(*pending_fds));
}

static void restorer_gone(void)
{
	close(restorer_sock);
	restorer_sock = -1;
	ptw_buf_free(&pending);
	while (npending_fds)
		drop_pending_fd(0);
}

/* Sends what the socket takes; waits up to deadline_ms for room (0: not at
 * all). The restorer must never hold the tracer up: a stopped or slow one
 * only makes the queue grow. */
static void send_pending(int deadline_ms)
{
	uint64_t until = ptw_now_ns() + (uint64_t)deadline_ms * 1000000u;
	size_t sent = 0;
	while (restorer_sock >= 0 && (npending_fds || sent < pending.len)) {
		struct ptw_packet p;
		char one = 0;
		if (npending_fds)
			ptw_packet_init(&p, &one, 1, pending_fds[0]);
		else
			ptw_packet_init(&p, pending.p + sent,
				    pending.len - sent < CHUNK ? pending.len - sent : CHUNK, -1);
		ssize_t n = sendmsg(restorer_sock, &p.mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n >= 0) {
			if (npending_fds)
				drop_pending_fd(0);
			else
				sent += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EBADF && npending_fds) {
			drop_pending_fd(0); /* not ours to lose the restorer over */
			continue;
		}
		if (errno != EAGAIN) {
			restorer_gone();
			return;
		}
		uint64_t now = ptw_now_ns();
		if (now >= until)
			break;
		struct pollfd pf = { restorer_sock, POLLOUT, 0 };
		poll(&pf, 1, (int)((until - now) / 1000000u) + 1);
	}
	if (sent) {
		memmove(pending.p, pending.p + sent, pending.len - sent);
		pending.len -= sent;
	}
}

bool ptw_guardian_keeps_record(void)
{
	return restorer_sock >= 0;
}

void ptw_guardian_record(struct ptw_buf *b)
{
	if (restorer_sock >= 0 && b->len)
		ptw_buf_add(&pending, b->p, b->len);
	ptw_buf_reset(b);
	send_pending(0);
	/* A restorer far behind (it shares the CPUs with the tracer and the
	 * target) would make the queue grow with the session: past
	 * PENDING_MAX, wait for it a little (bounded memory beats a tracer
	 * that never waits; a stopped restorer costs PENDING_WAIT_MS per
	 * record flush, no more). */
	if (pending.len > PENDING_MAX)
		send_pending(PENDING_WAIT_MS);
	if (!pending.len && pending.cap > PENDING_MAX) {
		ptw_buf_free(&pending); /* give the memory back after a burst */
	}
}

bool ptw_guardian_record_wait(int deadline_ms)
{
	if (pending.len || npending_fds) /* (a stream line's call: mostly nothing) */
		send_pending(deadline_ms);
	return !pending.len;
}

/* Whatever way the tracer leaves but dying, it finished: say so. */
static void tracer_finished(void)
{
	static bool done; /* (once: at an early exit, then at exit) */
	if (restorer_sock < 0 || done)
		return;
	done = true;
	ptw_record_end(&pending);
	send_pending(END_DEADLINE_MS);
}

void ptw_guardian_share_mem(int fd)
{
	if (fd < 0)
		return;
	if (restorer_sock >= 0) {
		for (size_t i = 0; i < npending_fds;)
			if (!mem_fd_alive(pending_fds[i]))
				drop_pending_fd(i);
			else
				i++;
		int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (d >= 0) {
			pending_fds = xreallocarray(pending_fds, npending_fds + 1, sizeof(*pending_fds));
			pending_fds[npending_fds++] = d;
		}
		send_pending(0);
	}
	if (front_sock < 0)
		return;
	struct ptw_guardian_msg m = { MSG_MEM_FD, 0 };
	struct ptw_packet p;
	ptw_packet_init(&p, &m, sizeof(m), fd);
	while (sendmsg(front_sock, &p.mh, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

void ptw_guardian_mirror_signal(int sig)
{
	tracer_finished();
	if (front_sock < 0)
		return;
	struct ptw_guardian_msg m = { MSG_MIRROR, sig };
	while (send(front_sock, &m, sizeof(m), MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

bool ptw_guardian_exit_early(int status, int sig)
{
	if (front_sock < 0)
		return false;
	tracer_finished(); /* the restorer's end mark first: it writes nothing more */
	/* Everything is written: what this process still does (closing the
	 * kernel's links, 30-100 ms) concerns nobody, and a reader of our
	 * output (ptwatch --json -- CMD | jq) sees its end as the front exits,
	 * not once the links are closed. */
	ptw_stdio_to_null();
	struct ptw_guardian_msg m = { MSG_EXIT, sig ? 256 + sig : status & 255 };
	ssize_t n;
	while ((n = send(front_sock, &m, sizeof(m), MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return n == (ssize_t)sizeof(m);
}

void ptw_guardian_signal_answered(void)
{
	if (front_sock < 0)
		return;
	struct ptw_guardian_msg m = { MSG_ANSWERED, 0 };
	/* never waits: a front that does not read it has gone */
	while (send(front_sock, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR)
		;
}

void ptw_guardian_tracer_init(int to_front, int to_restorer)
{
	front_sock = to_front;
	restorer_sock = to_restorer;
	if (restorer_sock >= 0)
		atexit(tracer_finished);
}
