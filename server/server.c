/*
 * server.c - worker threads, signals, event dispatch, the timeout sweep,
 * the failed store, /stats snapshots (server.h says what each is for).
 *
 * Per event: one paste_port_conn_data lookup and one indirect call into
 * the protocol. Per poll pass: one coarse clock read, one atomic load (has
 * the store failed?), and a snapshot of the port's counters when the pass
 * had events. Twice a second per thread: the timeout sweep over the open
 * connections. (The port stats the store file once a second:
 * paste_store_watch.)
 *
 * A failed store (paste_store_failed: a failed flush, fence or sync in any
 * thread, or the file removed, replaced or truncated) is seen by every
 * worker after its next poll: the protocol answers what comes in with its
 * error (HTTP: 503), and after a bounded drain the worker wakes main,
 * which names the store and exits 1. The port itself never lets a DURABLE
 * reply out after the failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#define SWEEP_MS 500u      /* timeouts fire at most this late */
#define DRAIN_MS 500u      /* after a store failure: time for the replies to leave */
#define DRAIN_POLL_MS 50   /* poll timeout while draining */

uint32_t server_conn_size(const struct server_proto *proto, const void *proto_cfg)
{
	uint32_t svc = proto->service_conn_size ? proto->service_conn_size(proto_cfg) : 0;
	return (uint32_t)(SRV_ALIGN(sizeof(struct srv_conn)) + SRV_ALIGN(proto->conn_size) +
			  SRV_ALIGN(svc));
}

bool server_store_failed(struct worker *w)
{
	const char *why;
	if (w->failing)
		return true;
	if (!paste_store_failed(w->srv->store, &why))
		return false;
	w->fail_why = why;
	w->fail_ms = w->now_ms;
	w->failing = true;
	return true;
}

/* Copy this worker's port counters where /stats in another thread can
 * read them: once per pass that had events, and once more after it (the
 * next poll recycles that batch's buffers). A mutex nobody contends but
 * a /stats request: ~20 ns per pass, not per request. */
static void publish_stats(struct worker *w, int n)
{
	if (n <= 0 && !w->snap_stale)
		return;
	pthread_mutex_lock(&w->snap_lock);
	paste_port_stats(w->port, &w->snap);
	w->snap_valid = true;
	pthread_mutex_unlock(&w->snap_lock);
	w->snap_stale = n > 0;
}

const uint16_t srv_status_codes[SRV_NSTATUS - 1] = {
	200, 201, 204, 400, 404, 405, 408, 411, 413, 414, 417, 431, 500, 501, 503, 505, 507, 100,
};

/* ---- a protocol's service (struct service_base) ---- */

int service_open(struct service_run *r, const struct service_base *svc, struct server *s,
		 const void *cfg, struct paste_error *err)
{
	r->svc = svc;
	r->ss = NULL;
	return svc->open ? svc->open(s, cfg, &r->ss, err) : 0;
}

void service_close(struct service_run *r, struct server *s)
{
	if (r->svc->close)
		r->svc->close(s, r->ss);
}

void service_banner(struct server *s, void *proto_state)
{
	struct service_run *r = proto_state;   /* the protocol state's first member */
	if (r->svc->banner)
		r->svc->banner(s, r->ss);
}

int service_started(struct server *s, void *proto_state, struct paste_error *err)
{
	struct service_run *r = proto_state;
	return r->svc->started ? r->svc->started(s, r->ss, err) : 0;
}

void service_pass(struct worker *w, void *proto_state)
{
	struct service_run *r = proto_state;
	if (r->svc->pass)
		r->svc->pass(w, r->ss);
}

uint64_t service_wake(struct worker *w, void *proto_state)
{
	struct service_run *r = proto_state;
	return r->svc->wake ? r->svc->wake(w, r->ss) : UINT64_MAX;
}

void srv_count_status(struct worker *w, int status)
{
	uint32_t i = 0;
	while (i < SRV_NSTATUS - 1 && srv_status_codes[i] != status)
		i++;
	srv_bump(&w->status[i]);
}

void server_totals(struct worker *w, struct server_totals *out)
{
	struct server *s = w->srv;
	struct paste_port_stats *t = &out->port;
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < s->cfg.threads; i++) {
		struct worker *o = &s->workers[i];
		struct paste_port_stats x;
		bool ok = true;
		if (o == w) {
			paste_port_stats(w->port, &x);
		} else {
			pthread_mutex_lock(&o->snap_lock);
			ok = o->snap_valid;
			x = o->snap;
			pthread_mutex_unlock(&o->snap_lock);
		}
		out->requests += atomic_load_explicit(&o->requests, memory_order_relaxed);
		out->timeouts += atomic_load_explicit(&o->timeouts, memory_order_relaxed);
		out->idle_closes += atomic_load_explicit(&o->idle_closes, memory_order_relaxed);
		for (uint32_t k = 0; k < SRV_NSTATUS; k++)
			out->status[k] += atomic_load_explicit(&o->status[k], memory_order_relaxed);
		if (!ok)
			continue;
		t->polls += x.polls; t->events += x.events; t->syscalls += x.syscalls;
		t->accepts += x.accepts; t->enobufs += x.enobufs; t->fences += x.fences;
		t->commits += x.commits; t->conns += x.conns; t->held += x.held;
		t->ring_free += x.ring_free;
		t->cached += x.cached;
		t->paused += x.paused; t->pauses += x.pauses; t->refused += x.refused;
		t->queued += x.queued;
		t->closes += x.closes; t->bytes_in += x.bytes_in; t->bytes_out += x.bytes_out;
		for (uint32_t k = 0; k < PASTE_PORT_LAT_BUCKETS; k++)
			t->barrier_hist[k] += x.barrier_hist[k];
		t->barrier_ns += x.barrier_ns;
	}
	uint32_t held = paste_store_nheld(s->store), port_free = t->ring_free + t->cached;
	out->bufs_held = held > port_free ? held - port_free : 0;
}

static void list_add(struct worker *w, uint32_t conn)
{
	if (conn >= w->srv->cfg.max_conns || w->pos[conn] != UINT32_MAX)
		return;
	w->pos[conn] = w->nopen;
	w->open[w->nopen++] = conn;
}

static void list_del(struct worker *w, uint32_t conn)
{
	if (conn >= w->srv->cfg.max_conns || w->pos[conn] == UINT32_MAX)
		return;
	uint32_t i = w->pos[conn], last = w->open[--w->nopen];
	w->open[i] = last;
	w->pos[last] = i;
	w->pos[conn] = UINT32_MAX;
}

/* Twice a second per thread: hand what timed out to the protocol. Reads
 * one cache line per open connection (16k connections: ~1 ms a second at
 * worst) and no clock: the pass's timestamp is enough at this granularity.
 * A timeout may close the connection, but its CLOSED event comes from a
 * later poll, so the list does not change under the loop. */
static void sweep(struct worker *w)
{
	const struct server_config *cfg = &w->srv->cfg;
	uint64_t now = w->now_ms;
	w->next_sweep_ms = now + SWEEP_MS;
	for (uint32_t i = 0; i < w->nopen; i++) {
		uint32_t conn = w->open[i];
		struct srv_conn *c = paste_port_conn_data(w->port, conn);
		uint64_t limit, since;
		/* Replies still leaving (a slow reader of a big result) are
		 * activity, as in Redis: the idle clock restarts meanwhile. */
		if (c->timer == SRV_T_IDLE && paste_port_conn_sending(w->port, conn))
			c->last_ms = now;
		switch (c->timer) {
		case SRV_T_IDLE: limit = cfg->idle_to_ms; since = c->last_ms; break;
		case SRV_T_HEAD: limit = cfg->header_to_ms; since = c->since_ms; break;
		case SRV_T_BODY: limit = cfg->body_to_ms; since = c->last_ms; break;
		default: continue;
		}
		if (!limit || now - since < limit)
			continue;
		bool idle = c->timer == SRV_T_IDLE;
		w->srv->lis[c->lis].proto->timeout(w, conn, c);
		srv_bump(idle ? &w->idle_closes : &w->timeouts);
	}
}

/* Until the next sweep, or sooner when a protocol's wake hook says a
 * pass is due (a blocked client's timeout): a timeout fires within the
 * clock's granularity, not up to SWEEP_MS late. */
static int poll_timeout(struct worker *w)
{
	struct server *s = w->srv;
	if (s->cfg.busy_poll)
		return 0;
	if (w->failing)
		return DRAIN_POLL_MS;
	uint64_t left = w->next_sweep_ms > w->now_ms ? w->next_sweep_ms - w->now_ms : 0;
	for (uint32_t i = 0; i < s->nlis && left; i++) {
		if (!s->lis[i].proto->wake)
			continue;
		uint64_t at = s->lis[i].proto->wake(w, s->proto_state[i]);
		if (at <= w->now_ms)
			left = 0;
		else if (at - w->now_ms < left)
			left = at - w->now_ms;
	}
	return (int)(left < SWEEP_MS ? left : SWEEP_MS);
}

/* The first worker to give up wakes main (sigwait), which stops the rest. */
static void request_exit(struct server *s)
{
	int zero = 0;
	if (atomic_compare_exchange_strong(&s->exit_code, &zero, 1))
		kill(getpid(), SIGTERM);
}

int server_worker_start(struct worker *w)
{
	struct server *s = w->srv;
	const struct server_config *cfg = &s->cfg;
	struct paste_port_config pc = {
		.engine = cfg->engine, .host = cfg->host, .port = s->listen_port[0],
		.ring_bufs = cfg->ring_bufs, .max_conns = cfg->max_conns,
		.conn_data_size = s->conn_size, .busy_poll = cfg->busy_poll, .store = s->store,
		.persist = w->persist, .defer_accept_s = cfg->defer_accept_s,
		.min_wait_us = cfg->min_wait_us, .want_div = cfg->want_div,
		.no_min_wait = cfg->no_min_wait,
		.commit_hold_us = cfg->no_commit_hold ? -1 : (int32_t)cfg->commit_hold_us,
		.max_output = cfg->max_output ? cfg->max_output : PASTE_PORT_UNLIMITED,
		.peer_addrs = cfg->peer_addrs,
	};
	if (cfg->nlisten) {
		pc.nports = s->nlis;
		for (uint32_t i = 0; i < s->nlis; i++)
			pc.ports[i] = s->listen_port[i];
	}
	for (uint32_t i = 0; i < s->nlis; i++)     /* listener i's protocol answers over the limit */
		pc.refuse[i] = s->lis[i].proto->refuse;
	int r = paste_port_open(&w->port, &pc, &s->open_err);
	if (r)
		return r;
	for (uint32_t i = 0; i < s->nlis; i++)    /* port 0: the next worker joins these */
		s->listen_port[i] = paste_port_listener_port(w->port, i);
	w->now_ms = paste_clock_coarse_ms();
	w->next_sweep_ms = w->now_ms + SWEEP_MS;
	w->cur_held = PASTE_NO_BUF;
	return 0;
}

static void dispatch_one(struct worker *w, const struct paste_event *ev)
{
	struct srv_conn *c = paste_port_conn_data(w->port, ev->conn);
	const struct server_proto *proto = w->srv->lis[ev->listener].proto;
	switch (ev->type) {
	case PASTE_EV_ACCEPT:
		c->last_ms = w->now_ms;
		c->lis = (uint8_t)ev->listener;
		list_add(w, ev->conn);
		proto->accept(w, ev->conn, c);
		break;
	case PASTE_EV_DATA:
		c->last_ms = w->now_ms;
		proto->data(w, ev, c);
		break;
	case PASTE_EV_CLOSED:
		proto->closed(w, ev->conn, c);
		list_del(w, ev->conn);
		break;
	}
}

/* Hand a batch to the protocols, in order (copied: the events' bytes
 * are ours, held back by a nested pass). A nested pass inside one of
 * them dispatches the rest itself and shortens cur_n. */
static void dispatch(struct worker *w, const struct paste_event *evs, uint32_t n, bool copied)
{
	const struct server *s = w->srv;
	const struct paste_event *pevs = w->cur_evs, *pev = w->cur_ev;
	uint32_t pn = w->cur_n, pi = w->cur_i;
	bool pcopied = w->cur_copied;
	w->cur_evs = evs;
	w->cur_n = n;
	w->cur_copied = copied;
	for (w->cur_i = 0; w->cur_i < w->cur_n; w->cur_i++) {
		const struct paste_event *ev = &evs[w->cur_i];
		uint32_t i = w->cur_i;
		/* (Not the same connection's: its state is the one before ev.) */
		if (!copied && i + 1 < w->cur_n && evs[i + 1].type == PASTE_EV_DATA &&
		    evs[i + 1].conn != ev->conn) {
			const struct paste_event *next = &evs[i + 1];
			const struct server_proto *np = s->lis[next->listener].proto;
			if (np->peek)
				np->peek(w, next, paste_port_conn_data(w->port, next->conn));
		}
		/* A copy: a nested pass polls, and the port's array is then
		 * the next batch's (the bytes stay: it holds their buffer). */
		struct paste_event e = *ev;
		w->cur_ev = &e;
		dispatch_one(w, &e);
		w->cur_ev = NULL;
		if (w->cur_held != PASTE_NO_BUF) {
			paste_store_unref(s->store, w->cur_held, false);
			w->cur_held = PASTE_NO_BUF;
		}
	}
	w->cur_evs = pevs;
	w->cur_ev = pev;
	w->cur_n = pn;
	w->cur_i = pi;
	w->cur_copied = pcopied;
}

/* The events a nested pass held back, in order (dispatching them may
 * hold back more: a loop). */
static void dispatch_later(struct worker *w)
{
	while (w->nlater) {
		struct paste_event *evs = w->later;
		uint32_t n = w->nlater;
		w->later = NULL;
		w->nlater = w->caplater = 0;
		w->nest_off = false;
		dispatch(w, evs, n, true);
		for (uint32_t i = 0; i < n; i++)
			free((void *)evs[i].data);
		free(evs);
	}
	w->nest_off = false;
}

/* An event of the held connection: copied for later (the port's bytes
 * go at the next poll). */
static void hold_back(struct worker *w, const struct paste_event *ev)
{
	if (w->nlater == w->caplater) {
		uint32_t cap = w->caplater ? w->caplater * 2 : 16;
		struct paste_event *n = realloc(w->later, cap * sizeof(*n));
		if (!n)
			abort();                /* an event cannot be dropped; nowhere to put it */
		w->later = n;
		w->caplater = cap;
	}
	struct paste_event *e = &w->later[w->nlater++];
	*e = *ev;
	e->buf = PASTE_NO_BUF;
	e->off = 0;
	e->data = NULL;
	if (ev->type == PASTE_EV_DATA && ev->len) {
		uint8_t *d = malloc(ev->len);
		if (!d)
			abort();
		memcpy(d, ev->data, ev->len);
		e->data = d;
	}
	if (ev->type == PASTE_EV_CLOSED)
		w->nest_off = true;             /* the next poll would free its slot */
}

int server_worker_nested_pass(struct worker *w, uint32_t held)
{
	if (w->nest_off || !w->cur_ev)
		return 0;
	const struct paste_event *cur = w->cur_ev;
	if (!w->cur_copied && cur->type == PASTE_EV_DATA && w->cur_held == PASTE_NO_BUF) {
		if (cur->buf == PASTE_NO_BUF || paste_port_hold(w->port, cur))
			return 0;
		w->cur_held = cur->buf;
	}
	if (w->cur_i + 1 < w->cur_n) {          /* the rest of the batch, now */
		const struct paste_event *evs = w->cur_evs;
		uint32_t from = w->cur_i + 1, to = w->cur_n;
		w->cur_n = w->cur_i + 1;
		for (uint32_t i = from; i < to; i++) {
			if (evs[i].conn == held)
				hold_back(w, &evs[i]);
			else
				dispatch_one(w, &evs[i]);
		}
	}
	if (w->nest_off)
		return 0;
	struct paste_event *evs;
	int n = paste_port_poll(w->port, &evs, 0);
	w->now_ms = paste_clock_coarse_ms();
	for (int i = 0; i < n; i++) {
		if (evs[i].conn == held)
			hold_back(w, &evs[i]);
		else
			dispatch_one(w, &evs[i]);
	}
	return n < 0 ? n : 0;
}

int server_worker_pass(struct worker *w, int timeout_ms)
{
	struct server *s = w->srv;
	struct paste_event *evs;
	int own = poll_timeout(w);
	int n = paste_port_poll(w->port, &evs, timeout_ms >= 0 && timeout_ms < own ? timeout_ms : own);
	w->now_ms = paste_clock_coarse_ms();
	publish_stats(w, n);
	if (n < 0 && n != -EINTR) {
		if (!server_store_failed(w))
			fprintf(stderr, "%s: thread %u: %s; stopping\n", s->cfg.name, w->id, strerror(-n));
		return n;
	}
	/* Failed: the protocol answers what comes with its error for a
	 * bounded drain (what one pass queues leaves with the next poll),
	 * then the worker goes. */
	if (server_store_failed(w) && ++w->fail_passes > 2 && w->now_ms - w->fail_ms >= DRAIN_MS)
		return -EIO;
	dispatch(w, evs, n > 0 ? (uint32_t)n : 0, false);
	dispatch_later(w);
	for (uint32_t i = 0; i < s->nlis; i++)
		if (s->lis[i].proto->pass)
			s->lis[i].proto->pass(w, s->proto_state[i]);
	if (w->now_ms >= w->next_sweep_ms)
		sweep(w);
	return n < 0 ? 0 : n;
}

void server_worker_stop(struct worker *w)
{
	if (!w->port)
		return;
	if (w->failing) {          /* submit the replies the last pass queued */
		struct paste_event *evs;
		paste_port_poll(w->port, &evs, 0);
	}
	/* Connections still open at shutdown get no CLOSED event. */
	while (w->nopen) {
		uint32_t conn = w->open[w->nopen - 1];
		struct srv_conn *c = paste_port_conn_data(w->port, conn);
		w->srv->lis[c->lis].proto->closed(w, conn, c);
		list_del(w, conn);
	}
	paste_port_close(w->port);
	w->port = NULL;
	for (uint32_t i = 0; i < w->nlater; i++)   /* held back by a pass that never ended */
		free((void *)w->later[i].data);
	free(w->later);
	w->later = NULL;
	w->nlater = w->caplater = 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct server *s = w->srv;
	if (s->cfg.cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET((unsigned)s->cfg.cpu + w->id, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	int r = server_worker_start(w);
	sem_post(&s->opened);
	if (r)
		return NULL;
	sigset_t usr;
	sigemptyset(&usr);
	sigaddset(&usr, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr, NULL);
	while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
		if (server_worker_pass(w, -1) < 0) {
			request_exit(s);
			break;
		}
	}
	server_worker_stop(w);
	return NULL;
}

static void on_signal(int sig) { (void)sig; }

/* SIGBUS: a store page the mapping still names is gone (the file was
 * truncated, or its storage failed): the epoll engine's memcpy into a
 * store buffer, a flush, a log write fault there. Say so (write(2) is
 * async-signal safe; the sentence is built at start) and exit 1. A
 * SIGBUS elsewhere is a bug: back to the default action (a core). */
static char sigbus_msg[600];
static size_t sigbus_len;
static uintptr_t store_lo, store_hi;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	uintptr_t a = (uintptr_t)si->si_addr;
	if (a >= store_lo && a < store_hi) {
		ssize_t r = write(STDERR_FILENO, sigbus_msg, sigbus_len);
		(void)r;
		_exit(1);
	}
	signal(sig, SIG_DFL);    /* returning re-runs the access: default action */
}

static void catch_sigbus(const char *name, struct paste_store *st)
{
	int n = snprintf(sigbus_msg, sizeof(sigbus_msg),
		"%s: store %s failed: bus error touching its mapping (the store file was "
		"truncated, or its storage failed, while in use); exiting\n", name, paste_store_path(st));
	sigbus_len = n < (int)sizeof(sigbus_msg) ? (size_t)n : sizeof(sigbus_msg) - 1;
	store_lo = (uintptr_t)paste_store_base(st);
	store_hi = store_lo + paste_store_geom(st)->file_size;
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };
	sigaction(SIGBUS, &sa, NULL);
}

int server_close(struct server *s, int code)
{
	if (!s)
		return code;
	for (uint32_t i = s->nlis; i-- > 0;)
		if (s->proto_open[i])
			s->lis[i].proto->close(s, s->proto_state[i]);
	for (uint32_t i = 0; s->workers && i < s->cfg.threads; i++) {
		paste_persist_close(s->workers[i].persist);
		free(s->workers[i].open);
		if (s->workers[i].srv)
			pthread_mutex_destroy(&s->workers[i].snap_lock);
	}
	store_lo = store_hi = 0;   /* unmapped next: a SIGBUS there is no longer ours */
	/* A start that fails leaves no file it created: the next start would
	 * meet a store of the failed one's geometry. */
	if (code && !s->served && s->store && paste_store_created(s->store))
		paste_store_unlink_created(s->store);
	paste_store_close(s->store);
	free(s->workers);
	free(s);
	return code;
}

int server_open(struct server **out, const struct server_config *cfg)
{
	*out = NULL;
	setvbuf(stderr, NULL, _IOLBF, 0);
	/* A client's burst (its unsent replies, a big command) is freed once
	 * it drained or the client went; glibc gives such a block back to the
	 * system only if it mapped it, and it stops mapping blocks below the
	 * largest one freed so far (its threshold rises with every mapped
	 * block freed, up to 32 MiB). A fixed threshold keeps every block of
	 * 128 KiB and up in a mapping of its own, returned at free. Cost: an
	 * mmap, munmap and page faults per such block, rare (docs/results.md,
	 * "Memory per client"). */
#ifdef M_MMAP_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
#endif
	struct rlimit rl;   /* the epoll engine needs a descriptor per connection */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	struct server *s = calloc(1, sizeof(*s));
	if (!s) {
		fprintf(stderr, "%s: out of memory\n", cfg->name);
		return 1;
	}
	s->cfg = *cfg;
	if (cfg->nlisten) {
		s->nlis = cfg->nlisten < PASTE_PORT_MAX_LISTEN ? cfg->nlisten : PASTE_PORT_MAX_LISTEN;
		memcpy(s->lis, cfg->listen, sizeof(s->lis));
	} else {
		s->nlis = 1;
		s->lis[0] = (struct server_listener){ NULL, cfg->port, cfg->proto, cfg->proto_cfg };
	}
	for (uint32_t i = 0; i < s->nlis; i++) {   /* a slot fits any listener's connection */
		uint32_t size = server_conn_size(s->lis[i].proto, s->lis[i].proto_cfg);
		if (size > s->conn_size)
			s->conn_size = size;
	}
	struct paste_error err = { 0 };
	struct paste_store_config sc = { .size = cfg->store_size, .buf_size = cfg->buf_size };
	if (access(cfg->store_path, F_OK) != 0)
		sc.node_size = cfg->node_size;    /* creating: whatever an existing store has is kept */
	if (cfg->threads > 2 && access(cfg->store_path, F_OK) != 0)
		sc.log_lanes = cfg->threads;      /* a new store gets a lane per thread */
	/* One worker owns every reference and log append (the main thread
	 * only before it starts and after it is joined). */
	int of = PASTE_STORE_CREATE | (cfg->threads == 1 ? PASTE_STORE_ONE_THREAD : 0);
	if (paste_store_open(&s->store, cfg->store_path, &sc, of, &err)) {
		fprintf(stderr, "%s: %s\n", cfg->name, err.msg);
		return server_close(s, paste_exit_status(err.code));
	}
	catch_sigbus(cfg->name, s->store);
	const struct paste_store_geom *g = paste_store_geom(s->store);
	if (cfg->threads > g->log_lanes) {
		fprintf(stderr, "%s: --threads %u exceeds the store's %u log lanes\n", cfg->name,
			cfg->threads, g->log_lanes);
		return server_close(s, 2);
	}
	s->workers = calloc(cfg->threads, sizeof(*s->workers));
	if (!s->workers) {
		fprintf(stderr, "%s: out of memory\n", cfg->name);
		return server_close(s, 1);
	}
	s->durability = cfg->durability == PASTE_DUR_AUTO ? paste_durability_detect(cfg->store_path)
							   : cfg->durability;
	for (uint32_t i = 0; i < cfg->threads; i++) {
		struct paste_persist_config pc = { .mode = s->durability, .pm_latency_ns = cfg->pm_latency_ns,
						   .writers = cfg->threads };
		struct worker *w = &s->workers[i];
		w->srv = s;
		w->id = i;
		pthread_mutex_init(&w->snap_lock, NULL);
		w->open = malloc(2 * (size_t)cfg->max_conns * sizeof(*w->open));   /* 128 KiB */
		if (!w->open) {
			fprintf(stderr, "%s: out of memory\n", cfg->name);
			return server_close(s, 1);
		}
		w->pos = w->open + cfg->max_conns;
		memset(w->pos, 0xff, cfg->max_conns * sizeof(*w->pos));
		if (paste_persist_open(&w->persist, s->store, &pc, &err)) {
			fprintf(stderr, "%s: %s\n", cfg->name, err.msg);
			return server_close(s, paste_exit_status(err.code));
		}
	}
	*out = s;
	return 0;
}

int server_ready(struct server *s)
{
	if (s->started)
		return 0;
	for (uint32_t i = 0; i < s->nlis; i++) {
		struct paste_error err = { 0 };
		int r = s->lis[i].proto->open(s, s->lis[i].proto_cfg, &s->proto_state[i], &err);
		if (r) {
			if (err.msg[0])
				fprintf(stderr, "%s: %s\n", s->cfg.name, err.msg);
			return paste_exit_status(r < 0 ? r : -EINVAL);
		}
		s->proto_open[i] = true;
	}
	paste_store_start(s->store);
	s->started = true;
	for (uint32_t i = 0; i < s->nlis; i++) {
		struct paste_error err = { 0 };
		int r = s->lis[i].proto->started ? s->lis[i].proto->started(s, s->proto_state[i], &err) : 0;
		if (r) {
			if (err.msg[0])
				fprintf(stderr, "%s: %s\n", s->cfg.name, err.msg);
			return paste_exit_status(r < 0 ? r : -EINVAL);
		}
	}
	return 0;
}

static void stop_workers(struct server *s, uint32_t n)
{
	atomic_store(&s->stop, 1);
	for (uint32_t i = 0; i < n; i++)
		pthread_kill(s->workers[i].thread, SIGUSR1);
	for (uint32_t i = 0; i < n; i++)
		pthread_join(s->workers[i].thread, NULL);
}

int server_run(struct server *s)
{
	const struct server_config *cfg = &s->cfg;
	int ready = server_ready(s);
	if (ready)
		return ready;
	/* Signals: blocked everywhere but in sigwait below; SIGUSR1 wakes
	 * workers out of io_uring_enter/epoll_wait at shutdown. */
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGUSR1, &sa, NULL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* A port belongs to the thread that opens it (SINGLE_ISSUER rings), so
	 * each worker opens its own, one after the other: with --port 0 the
	 * first one picks the port and the rest join it with SO_REUSEPORT. */
	for (uint32_t i = 0; i < s->nlis; i++)
		s->listen_port[i] = s->lis[i].port;
	sem_init(&s->opened, 0, 0);
	for (uint32_t i = 0; i < cfg->threads; i++) {
		pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]);
		sem_wait(&s->opened);
		if (!s->workers[i].port) {
			fprintf(stderr, "%s: %s\n", cfg->name, s->open_err.msg);
			stop_workers(s, i + 1);
			/* -ENOSPC here is the ring asking more buffers than the
			 * store has free: a setting, not the disk. */
			return s->open_err.code == -ENOSPC ? PASTE_EXIT_USAGE
							   : paste_exit_status(s->open_err.code);
		}
	}
	s->served = true;   /* listening: from now on the store is not a failed start's */
	const struct paste_store_geom *g = paste_store_geom(s->store);
	fprintf(stderr, "%s: store %s: %u x %u-byte buffers, %u free\n", cfg->name, cfg->store_path,
		g->nbufs, g->buf_size, paste_store_nfree(s->store));
	fprintf(stderr, "%s: engine %s, mode %s, %u thread(s), durability %s (%s)%s\n", cfg->name,
		paste_engine_name(cfg->engine), cfg->mode, cfg->threads,
		paste_durability_name(s->durability), paste_persist_flush_insn(s->workers[0].persist),
		cfg->mode_note);
	for (uint32_t i = 0; i < s->nlis; i++)
		if (s->lis[i].proto->banner)
			s->lis[i].proto->banner(s, s->proto_state[i]);
	if (!cfg->nlisten) {
		fprintf(stderr, "%s: listening on %s:%u\n", cfg->name, cfg->host, s->listen_port[0]);
	} else {
		/* One line per listener, then "ready": a supervisor (or a test)
		 * waits for the last line and knows every port. */
		for (uint32_t i = 0; i < s->nlis; i++)
			fprintf(stderr, "%s: %s listening on %s:%u\n", cfg->name,
				s->lis[i].label ? s->lis[i].label : s->lis[i].proto->name, cfg->host,
				s->listen_port[i]);
		fprintf(stderr, "%s: ready\n", cfg->name);
	}

	sigdelset(&set, SIGUSR1);
	int sig;
	sigwait(&set, &sig);
	stop_workers(s, cfg->threads);
	int code = atomic_load(&s->exit_code) ? 1 : 0;
	const char *why;
	if (paste_store_failed(s->store, &why)) {
		/* Even when stopped by a signal: what the store holds is in doubt. */
		fprintf(stderr, "%s: store %s failed: %s; exiting\n", cfg->name, cfg->store_path, why);
		code = 1;
	}
	fprintf(stderr, code ? "%s: stopped after a failure\n" : "%s: stopped\n", cfg->name);
	return code;
}
