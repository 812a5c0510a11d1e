/* SPDX-License-Identifier: MIT */
/*
 * What the guardian's three processes send each other (ptw_guardian.h):
 * the tracer's side (src/record/to_guardian.c), the front and the restorer
 * (src/guardian).
 */
#ifndef PTW_GUARDIAN_WIRE_H
#define PTW_GUARDIAN_WIRE_H

#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

/* ---- the messages from the tracer to the front ---- */

enum { MSG_MEM_FD = 1, MSG_MIRROR = 2, MSG_ANSWERED = 3, MSG_EXIT = 4 };

struct ptw_guardian_msg {
	int type;
	int value;
};

/* One packet, with room for one passed descriptor. */
struct ptw_packet {
	struct iovec iov;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh;
};

static inline void ptw_packet_init(struct ptw_packet *p, void *data, size_t len, int fd)
{
	p->iov = (struct iovec){ data, len };
	p->mh = (struct msghdr){ .msg_iov = &p->iov, .msg_iovlen = 1 };
	if (fd < 0)
		return;
	p->mh.msg_control = p->u.buf;
	p->mh.msg_controllen = sizeof(p->u.buf);
	struct cmsghdr *c = CMSG_FIRSTHDR(&p->mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
}


/* Tracer, just split off (guardian.c): the sockets to the front and to the
 * restorer (-1: none). With a restorer, the tracer's exit (atexit) sends
 * the record's end mark. */
void ptw_guardian_tracer_init(int to_front, int to_restorer);

#endif
