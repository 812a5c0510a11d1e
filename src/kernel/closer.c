/* SPDX-License-Identifier: MIT */
/* Closing uprobe links together; see closer.h. */
#define _GNU_SOURCE
#include "closer.h"

#include <bpf/libbpf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "ptw_util.h"

struct closing {
	int *fds;
	size_t nfds;
	struct bpf_link **links;
	size_t nlinks;
	size_t next; /* the next one to close: fds first, then links */
};

/* Takes the next one to close until none is left. */
static void *closer_work(void *arg)
{
	struct closing *c = arg;
	for (;;) {
		size_t i = __atomic_fetch_add(&c->next, 1, __ATOMIC_RELAXED);
		if (i < c->nfds) {
			if (c->fds[i] >= 0)
				close(c->fds[i]);
			c->fds[i] = -1;
		} else if (i - c->nfds < c->nlinks) {
			bpf_link__destroy(c->links[i - c->nfds]);
			c->links[i - c->nfds] = NULL;
		} else {
			return NULL;
		}
	}
}

void ptwk_close_together(int *fds, size_t nfds, struct bpf_link **links, size_t nlinks)
{
	struct closing c = { fds, fds ? nfds : 0, links, links ? nlinks : 0, 0 };
	size_t n = 0;
	for (size_t i = 0; i < c.nfds; i++)
		n += fds[i] >= 0;
	for (size_t i = 0; i < c.nlinks; i++)
		n += links[i] != NULL;
	pthread_t th[PTWK_CLOSER_THREADS];
	size_t nth = 0;
	/* This thread is one of the closers: one more thread per link left,
	 * as many as PTWK_CLOSER_THREADS in all (a close needs little stack). */
	while (nth + 1 < n && nth + 1 < PTWK_CLOSER_THREADS &&
	       ptw_thread_start(&th[nth], 64 * 1024, closer_work, &c) == 0)
		nth++;
	closer_work(&c);
	for (size_t i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
}

struct ptwk_closing {
	pthread_t th;
	int *fds;
	size_t nfds;
	struct bpf_link **links;
	size_t nlinks;
};

static void *close_later(void *arg)
{
	struct ptwk_closing *c = arg;
	ptwk_close_together(c->fds, c->nfds, c->links, c->nlinks);
	return NULL;
}

struct ptwk_closing *ptwk_close_start(int *fds, size_t nfds, struct bpf_link **links, size_t nlinks)
{
	size_t n = 0;
	for (size_t i = 0; fds && i < nfds; i++)
		n += fds[i] >= 0;
	for (size_t i = 0; links && i < nlinks; i++)
		n += links[i] != NULL;
	struct ptwk_closing *c = n ? malloc(sizeof(*c)) : NULL;
	if (c) {
		*c = (struct ptwk_closing){ 0, fds, nfds, links, nlinks };
		if (ptw_thread_start(&c->th, 0, close_later, c) == 0)
			return c;
		free(c);
	}
	ptwk_close_together(fds, nfds, links, nlinks);
	free(fds);
	free(links);
	return NULL;
}

void ptwk_close_wait(struct ptwk_closing *c)
{
	if (!c)
		return;
	pthread_join(c->th, NULL);
	free(c->fds);
	free(c->links);
	free(c);
}
