/*
 * port_epoll.c - the socket-API baseline behind the same port API: the
 * "Linux" bars of the PASTE paper. epoll_wait, then per ready descriptor a
 * read() into a private buffer, the app's work, and a write() of its
 * replies (after a fence, or an fdatasync, when they acknowledge durable
 * data). To stay faithful to that loop each poll returns the events of ONE
 * ready connection, so its replies leave (one write) before the next
 * connection is read: per request that is read + write + a share of
 * epoll_wait, ~2 syscalls, and one barrier per write.
 *
 * PASTE_ENGINE_EPOLL_BATCH (the fallback where io_uring is refused) reads
 * every ready connection in one poll, each into its own stretch of a 1 MiB
 * buffer, and hands them over as one batch. The barrier stays before each
 * write, but the first write's fence covers what the whole batch flushed
 * and the others find nothing pending (paste_persist_fence returns at
 * once), so a batch pays one fence or one fdatasync: a group commit, as
 * Redis's loop does with appendfsync always. Still ~2 syscalls a request,
 * and the sync blocks the loop where the uring engine overlaps it. On a
 * disk, 1 KiB SETs from 50 clients share an fdatasync ~27 at a time: about
 * ten times the baseline's SETs/s, near uring's at the same CPU per SET
 * (docs/results.md, "epoll-batch: one barrier per batch").
 *
 * Data arrives in a private buffer (PASTE_NO_BUF): an app that wants to
 * keep it must copy it into the store, which is what the paper's baseline
 * pays.
 *
 * Slots come from the port's free list (the last freed first), so max_conns counts
 * connections whatever their descriptor numbers are (several ports in one
 * process share the descriptor table). An ended connection's close(2) and
 * its slot's return wait for the next poll (its CLOSED event has been
 * seen then, port_internal.h). It stays in the epoll set until then,
 * harmlessly: the close comes before the next epoll_wait, and a poll that
 * pushed a CLOSED does not wait.
 *
 * Over max_conns a listener with a refusal (paste_port_config.refuse) has
 * the connection accepted, its first bytes read and dropped, the refusal
 * written and the descriptor closed, all at once (three syscalls; a fresh
 * socket's buffer takes a short answer whole); without one the listener
 * leaves the epoll set until a slot frees, and connections wait in its
 * backlog.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port_internal.h"

#define READ_BUF (64u * 1024)
/* Batch mode: the buffer every ready connection of a poll is read into,
 * and the least room worth a read (less: the rest of the ready list waits
 * for the next pass, as it does when the event array is short). */
#define BATCH_BUF (1024u * 1024)
#define BATCH_MIN_READ (16u * 1024)
#define MAX_READY 512
/* Each ready descriptor adds at most this many events: the listener's
 * accepts (do_accept), otherwise one DATA or CLOSED. */
#define EVENTS_PER_READY 64u
#define REFUSE_SINK 4096u          /* a refused client's first bytes, dropped */

struct epl {
	int epfd;
	int reserve_fd;            /* spent on EMFILE to drain the backlog */
	bool listen_off[PASTE_PORT_MAX_LISTEN];   /* out of the epoll set: no slot, no refusal */
	struct epoll_event ready[MAX_READY];
	int nready, next;
	uint8_t *rbuf;
	bool batch;                /* PASTE_ENGINE_EPOLL_BATCH */
	uint32_t rused;            /* batch: bytes of rbuf this pass's events use */
};

/* Step 2: the app is done with the last batch's events, so their stretches
 * of rbuf (batch mode) are free again. */
static void epl_recycle(struct paste_port *pt)
{
	((struct epl *)pt->engine)->rused = 0;
}

/* Listener l's epoll data: LISTENER_TAG - l (slots are below max_conns). */
#define LISTENER_TAG UINT32_MAX

static void listen_watch(struct paste_port *pt, struct epl *e, uint32_t l, bool on)
{
	struct epoll_event ev = { .events = on ? EPOLLIN : 0, .data.u32 = LISTENER_TAG - l };
	epoll_ctl(e->epfd, EPOLL_CTL_MOD, pt->listen_fd[l], &ev);
	pt->st.syscalls++;
	e->listen_off[l] = !on;
}

/* Step 1: close(2) before the next epoll_wait also leaves the epoll set.
 * A listener that waited for a slot is watched again. */
static void epl_release(struct paste_port *pt, uint32_t slot)
{
	struct epl *e = pt->engine;
	struct conn *c = &pt->conns[slot];
	if (c->state != CONN_ENDED)
		return;
	close(c->fd);                 /* also leaves the epoll set */
	pt->st.syscalls++;
	port_slot_free(pt, slot);
	for (uint32_t l = 0; l < pt->nlisten; l++)
		if (e->listen_off[l])
			listen_watch(pt, e, l, true);
}

/* The events conn waits for: input unless its reading is paused
 * (backpressure), output while a write waits for room. */
static void set_events(struct paste_port *pt, struct conn *c)
{
	struct epl *e = pt->engine;
	struct epoll_event ev = { .events = (c->read_paused ? 0 : EPOLLIN) |
					    (c->send_inflight ? EPOLLOUT : 0),
				  .data.u32 = (uint32_t)(c - pt->conns) };
	epoll_ctl(e->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	pt->st.syscalls++;
}

static void want_out(struct paste_port *pt, struct conn *c, bool on)
{
	c->send_inflight = on;
	set_events(pt, c);
}

/* Backpressure (port_out.c decides): input leaves the mask while the
 * connection's output is over max_output, and comes back once it has
 * drained to half. An epoll_ctl each way, only when the limit is crossed. */
static void epl_read_pause(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = &pt->conns[slot];
	if (c->state == CONN_OPEN)
		set_events(pt, c);
}

/* Write what is queued; fence first when it acknowledges durable data
 * queued in the batch just handled (the socket API cannot overlap that).
 * A failed fence (or a store failed meanwhile) means that output can never
 * be acknowledged: it is dropped and the connection ends. need_epoch = 0
 * marks output covered by a fence that succeeded: it still leaves after a
 * later failure. */
static void epl_kick(struct paste_port *pt, uint32_t slot)
{
	struct conn *c = &pt->conns[slot];
	if (c->send_inflight)
		return;               /* waiting for EPOLLOUT */
	if (c->need_epoch) {
		int r;
		if (pt->persist && pt->dur != PASTE_DUR_NONE) {
			/* In a batch only the first write's fence has work:
			 * count the barriers paid, not the calls. */
			bool paid = paste_persist_pending(pt->persist);
			uint64_t t0 = paste_clock_ns();
			r = paste_persist_fence(pt->persist);
			if (paid) {
				if (r >= 0)
					port_barrier_done(pt, t0);
				pt->st.fences++;
				if (pt->dur == PASTE_DUR_FSYNC)
					pt->st.syscalls++;
			}
		} else {
			r = paste_store_failed(pt->store, NULL);
		}
		if (r < 0) {
			port_conn_end(pt, slot);
			return;
		}
		c->need_epoch = 0;
	}
	for (;;) {
		uint32_t n = port_output_start(pt, c);
		if (!n)
			break;
		ssize_t w = n == 1 ? write(c->fd, c->iov[0].iov_base, c->iov[0].iov_len)
				   : writev(c->fd, c->iov, (int)n);
		pt->st.syscalls++;
		if (w < 0) {
			if (errno == EAGAIN)
				want_out(pt, c, true);
			else
				port_conn_end(pt, slot);
			return;
		}
		if (!port_output_advance(pt, c, (size_t)w)) {
			want_out(pt, c, true);     /* socket buffer full: wait */
			return;
		}
	}
	if (c->close_wanted)
		port_conn_end(pt, slot);
}

/* Over max_conns: what the client sent is read and dropped (closing a
 * socket with unread bytes sends a reset, which may destroy the answer
 * before the client reads it), the refusal written, the socket closed. */
static void refuse_fd(struct paste_port *pt, int fd, uint32_t l)
{
	static char sink[REFUSE_SINK];     /* never read: one per process will do */
	const char *msg = pt->cfg.refuse[l];
	ssize_t r = read(fd, sink, sizeof(sink));
	r = write(fd, msg, strlen(msg));
	(void)r;
	close(fd);
	pt->st.syscalls += 3;
	pt->st.refused++;
}

static void do_accept(struct paste_port *pt, struct epl *e, uint32_t l)
{
	for (unsigned i = 0; i < EVENTS_PER_READY; i++) {
		if (!pt->nfree && !pt->cfg.refuse[l]) {
			listen_watch(pt, e, l, false);   /* until a slot frees */
			return;
		}
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		int fd = accept4(pt->listen_fd[l], pt->peers ? (struct sockaddr *)&peer : NULL,
				 pt->peers ? &plen : NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		pt->st.syscalls++;
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* Level-triggered: the listener would stay ready and
				 * spin. Spend the reserve fd to take one connection
				 * off the backlog and close it, then re-reserve. */
				close(e->reserve_fd);
				fd = accept(pt->listen_fd[l], NULL, NULL);
				if (fd >= 0)
					close(fd);
				e->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			}
			return;
		}
		uint32_t slot = port_slot_take(pt);
		if (slot == UINT32_MAX) {
			refuse_fd(pt, fd, l);
			continue;
		}
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = slot };
		epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev);
		pt->st.syscalls += 2;
		port_conn_reset(pt, slot, fd);
		if (pt->peers) {
			pt->peers[slot].a = peer;
			pt->peers[slot].len = plen;
		}
		pt->conns[slot].listener = (uint8_t)l;
		pt->st.accepts++;
		pt->st.conns++;
		port_push_event(pt, PASTE_EV_ACCEPT, slot);
	}
}

/* Step 6. The barrier (lib/port.c) only opened the gate: this engine
 * fences per write, in kick (fence_per_write). Wait only when the ready
 * list is used up and the batch is empty; returns > 0 when there are
 * ready descriptors to gather. */
static int epl_wait(struct paste_port *pt, int timeout_ms, uint32_t want)
{
	(void)want;                    /* epoll_wait takes no batch size */
	struct epl *e = pt->engine;
	if (port_events_room(pt) < EVENTS_PER_READY)
		return 0;                  /* the rest of the ready list waits a pass */
	if (e->next < e->nready)
		return 1;                  /* left from an earlier wait */
	if (pt->nevs)
		return 0;
	int n = epoll_wait(e->epfd, e->ready, MAX_READY, timeout_ms);
	pt->st.syscalls++;
	if (n < 0)
		return -errno;             /* -EINTR: a signal */
	if (n == 0)
		return 0;
	e->nready = n;
	e->next = 0;
	return n;
}

/* Step 7: handle ready descriptors until one connection gave an event
 * (one connection per batch, like the classic loop; batch mode: until the
 * ready list or the read buffer is used up), or the array is short of
 * room. Every descriptor stale and the batch still empty: wait again
 * (true). */
static bool epl_gather(struct paste_port *pt, int r)
{
	struct epl *e = pt->engine;
	if (r <= 0)
		return false;
	for (;;) {
		if (port_events_room(pt) < EVENTS_PER_READY)
			return false;
		if (e->batch && BATCH_BUF - e->rused < BATCH_MIN_READ)
			return false;
		if (e->next >= e->nready)
			return pt->nevs == 0;
		struct epoll_event *rv = &e->ready[e->next++];
		uint32_t slot = rv->data.u32;
		if (slot > LISTENER_TAG - PASTE_PORT_MAX_LISTEN) {
			do_accept(pt, e, LISTENER_TAG - slot);
			continue;
		}
		struct conn *c = &pt->conns[slot];
		if (c->state != CONN_OPEN)
			continue;
		if ((rv->events & EPOLLOUT) && c->send_inflight) {
			want_out(pt, c, false);
			epl_kick(pt, slot);
		}
		if (!(rv->events & (EPOLLIN | EPOLLHUP | EPOLLERR)) || c->state != CONN_OPEN)
			continue;
		/* Paused (its output is over max_output): not read, though an
		 * event from before the pause may still name it; a hang-up or
		 * an error is read, so that it ends. */
		if (c->read_paused && !(rv->events & (EPOLLHUP | EPOLLERR)))
			continue;
		uint8_t *at = e->rbuf + e->rused;
		uint32_t room = e->batch ? BATCH_BUF - e->rused : READ_BUF;
		ssize_t n = read(c->fd, at, room < READ_BUF ? room : READ_BUF);
		pt->st.syscalls++;
		if (n < 0 && errno == EAGAIN)
			continue;
		if (n <= 0) {
			port_conn_end(pt, slot);
			if (e->batch)
				continue;
			return false;
		}
		if (c->close_wanted)
			continue;          /* draining output before close: drop input */
		struct paste_event *ev = port_push_event(pt, PASTE_EV_DATA, slot);
		ev->data = at;
		ev->len = (uint32_t)n;
		pt->st.bytes_in += (uint64_t)n;
		if (!e->batch)
			return false;      /* one connection per batch, like the classic loop */
		e->rused += (uint32_t)n;
	}
}

static int epl_hold(struct paste_port *pt, const struct paste_event *ev)
{
	(void)pt; (void)ev;
	return -EINVAL;
}

static int epl_open(struct paste_port *pt, struct paste_error *err)
{
	struct epl *e = calloc(1, sizeof(*e));
	if (!e)
		return paste_error_set(err, -ENOMEM, "out of memory");
	pt->engine = e;
	e->batch = pt->cfg.engine == PASTE_ENGINE_EPOLL_BATCH;
	e->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	e->rbuf = malloc(e->batch ? BATCH_BUF : READ_BUF);
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (e->epfd < 0 || !e->rbuf)
		return paste_error_set(err, -errno, "epoll_create1: %s", strerror(errno));
	for (uint32_t l = 0; l < pt->nlisten; l++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = LISTENER_TAG - l };
		if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, pt->listen_fd[l], &ev) < 0)
			return paste_error_set(err, -errno, "epoll_ctl: %s", strerror(errno));
	}
	return 0;
}

static void epl_close(struct paste_port *pt)
{
	struct epl *e = pt->engine;
	for (uint32_t i = 0; i < pt->cfg.max_conns; i++)
		if (pt->conns[i].state != CONN_FREE)
			close(pt->conns[i].fd);    /* paste_port_close frees the slots */
	if (e->epfd >= 0)
		close(e->epfd);
	if (e->reserve_fd >= 0)
		close(e->reserve_fd);
	free(e->rbuf);
	free(e);
	pt->engine = NULL;
}

/* Recycle only frees rbuf (no store buffers: data lands there); no arm
 * (the listener and every socket stay in the epoll set), no commit (kick
 * fences). */
const struct port_ops paste_port_epoll_ops = {
	.name = "epoll",
	.open = epl_open,
	.close = epl_close,
	.release = epl_release,
	.recycle = epl_recycle,
	.fence_per_write = true,
	.kick = epl_kick,
	.wait = epl_wait,
	.gather = epl_gather,
	.hold = epl_hold,
	.read_pause = epl_read_pause,
};
