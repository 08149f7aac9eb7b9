/*
 * phttpd.c - the PASTE HTTP server: RPC mode (a fixed reply, the paper's
 * first figure) and WAL mode (phttpd_wal.c, the second). One worker thread
 * per --threads, each with its own paste port (io_uring or the epoll
 * baseline: the app code below is the same for both).
 *
 * Per request on the hot path: one parse of the head where it landed (a
 * head split across reads is reassembled in a small per-connection
 * buffer; bodies are never copied unless --copy or the epoll engine), one
 * reply queued by memcpy of a precomputed response, one atomic load (has
 * the store failed?). Per poll pass: one coarse clock read; twice a
 * second per thread: the timeout sweep over the open connections. (The
 * port stats the store file once a second: paste_store_watch.)
 *
 * A failed store (paste_store_failed: a failed flush, fence or sync in
 * any thread, or the file removed, replaced or truncated) is seen by
 * every worker after its next poll: from then on every request but
 * GET /stats is answered 503 naming the failure, and after a short drain
 * the server exits 1. The port itself never lets a DURABLE reply out
 * after the failure; the 503s are so that clients learn why.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "phttpd.h"

#define MAX_HEAD 8192u
#define MAX_CONNS 16384u   /* connection slots per thread */
#define CONTINUE_100 "HTTP/1.1 100 Continue\r\n\r\n"
#define SWEEP_MS 500u      /* timeouts fire at most this late */
#define DRAIN_MS 500u      /* after a store failure: time for the 503s to leave */
#define DRAIN_POLL_MS 50   /* poll timeout while draining */
#define MAX_TIMEOUT 1000000u   /* seconds (11.5 days): more is a typo */

/* Replies are built by appending, not snprintf: on the WAL path three
 * snprintf calls per 201 were 7 % of the server's CPU. */
size_t put_str(char *out, size_t at, size_t cap, const char *s)
{
	size_t n = strlen(s);
	if (at + n > cap)
		n = at < cap ? cap - at : 0;
	memcpy(out + at, s, n);
	return at + n;
}

size_t put_u64(char *out, size_t at, size_t cap, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && at < cap)
		out[at++] = tmp[--n];
	return at;
}

int reply_head(char *out, size_t cap, struct hconn *h, int status, const char *ctype,
	       uint64_t content_length, const char *extra)
{
	size_t n = put_str(out, 0, cap, "HTTP/1.1 ");
	n = put_u64(out, n, cap, (uint64_t)status);
	n = put_str(out, n, cap, " ");
	n = put_str(out, n, cap, paste_http_reason(status));
	n = put_str(out, n, cap, "\r\nServer: phttpd\r\n");
	if (ctype) {
		n = put_str(out, n, cap, "Content-Type: ");
		n = put_str(out, n, cap, ctype);
		n = put_str(out, n, cap, "\r\n");
	}
	/* 1.1 keeps alive by default; 1.0 must be told it was kept */
	if (!h->keep_alive)
		n = put_str(out, n, cap, "Connection: close\r\n");
	else if (h->http10)
		n = put_str(out, n, cap, "Connection: keep-alive\r\n");
	n = put_str(out, n, cap, "Content-Length: ");
	n = put_u64(out, n, cap, content_length);
	n = put_str(out, n, cap, "\r\n");
	if (extra) {
		n = put_str(out, n, cap, extra);
		n = put_str(out, n, cap, "\r\n");
	}
	n = put_str(out, n, cap, "\r\n");
	return (int)n;
}

int reply_simple(struct worker *w, uint32_t conn, struct hconn *h, int status,
		 const char *ctype, const char *body, size_t len, const char *extra, int flags)
{
	char buf[512];
	int n = reply_head(buf, sizeof(buf), h, status, ctype, len, extra);
	int r = paste_port_send(w->port, conn, buf, (size_t)n, flags);
	if (r == -EIO && (flags & PASTE_SEND_DURABLE))
		return r;
	if (r == 0 && len && !h->head_only)
		r = paste_port_send(w->port, conn, body, len, flags);
	if (!h->keep_alive)
		paste_port_close_conn(w->port, conn);
	return r;
}

/* Bad input: a clear status, then close this connection only. */
void reply_error(struct worker *w, uint32_t conn, struct hconn *h, int status)
{
	char body[64];
	int n = snprintf(body, sizeof(body), "%d %s\n", status, paste_http_reason(status));
	h->keep_alive = false;
	h->head_only = false;
	reply_simple(w, conn, h, status, "text/plain", body, (size_t)n, NULL, 0);
	h->state = H_DEAD;
}

bool store_failed(struct worker *w)
{
	const char *why;
	if (w->failing)
		return true;
	if (!paste_store_failed(w->srv->store, &why))
		return false;
	int n = snprintf(w->fail_body, sizeof(w->fail_body), "store failed: %s\n", why);
	w->fail_body_len = n < (int)sizeof(w->fail_body) ? (uint32_t)n : sizeof(w->fail_body) - 1;
	w->fail_ms = w->now_ms;
	w->failing = true;
	return true;
}

/* The server is going away: say why and close, so the client does not
 * send more on this connection. */
void reply_failed(struct worker *w, uint32_t conn, struct hconn *h)
{
	store_failed(w);
	h->keep_alive = false;
	reply_simple(w, conn, h, 503, "text/plain", w->fail_body, w->fail_body_len,
		     "Retry-After: 5", 0);
	h->state = H_DEAD;
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

/* Other threads' port counters come from their snapshots (at most one
 * pass, or SWEEP_MS when idle, old); this thread's are read live. */
static void reply_stats(struct worker *w, uint32_t conn, struct hconn *h)
{
	struct server *s = w->srv;
	struct paste_port_stats t = { 0 };
	uint64_t requests = 0, timeouts = 0, idle = 0, body_bufs = 0;
	for (uint32_t i = 0; i < s->threads; i++) {
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
		requests += atomic_load_explicit(&o->requests, memory_order_relaxed);
		timeouts += atomic_load_explicit(&o->timeouts, memory_order_relaxed);
		idle += atomic_load_explicit(&o->idle_closes, memory_order_relaxed);
		body_bufs += atomic_load_explicit(&o->body_bufs, memory_order_relaxed);
		if (!ok)
			continue;
		t.polls += x.polls; t.events += x.events; t.syscalls += x.syscalls;
		t.accepts += x.accepts; t.enobufs += x.enobufs; t.fences += x.fences;
		t.commits += x.commits; t.conns += x.conns; t.held += x.held;
		t.ring_free += x.ring_free;
	}
	struct paste_wal_info wi = { 0 };
	if (s->wal)
		paste_wal_info(s->wal, &wi);
	char body[1536];
	const struct paste_store_geom *g = paste_store_geom(s->store);
	uint32_t held = paste_store_nheld(s->store);   /* snapshots may lag it */
	int n = snprintf(body, sizeof(body),
		"{\"engine\":\"%s\",\"mode\":\"%s\",\"durability\":\"%s\",\"threads\":%u,"
		"\"requests\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"events\":%" PRIu64 ",\"mean_batch\":%.2f,"
		"\"syscalls\":%" PRIu64 ",\"syscalls_per_request\":%.4f,"
		"\"bufs_total\":%u,\"bufs_free\":%u,\"bufs_held\":%u,\"enobufs\":%" PRIu64 ","
		"\"conns\":%u,\"accepts\":%" PRIu64 ",\"fences\":%" PRIu64 ",\"commits\":%" PRIu64 ","
		"\"log_records\":%" PRIu64 ",\"log_first_lsn\":%" PRIu64 ",\"log_last_lsn\":%" PRIu64 ","
		"\"body_bufs\":%" PRIu64 ",\"timeouts\":%" PRIu64 ",\"idle_closes\":%" PRIu64 ","
		"\"store_failed\":%s}\n",
		s->engine == PASTE_ENGINE_URING ? "uring" : "epoll", s->wal_mode ? "wal" : "rpc",
		paste_durability_name(w->persist ? paste_persist_mode(w->persist) : PASTE_DUR_NONE),
		s->threads, requests, t.polls, t.events, t.polls ? (double)t.events / (double)t.polls : 0.0,
		t.syscalls, requests ? (double)t.syscalls / (double)requests : 0.0,
		g->nbufs, paste_store_nfree(s->store),
		held > t.ring_free ? held - t.ring_free : 0,
		t.enobufs, t.conns, t.accepts, t.fences, t.commits,
		wi.records, wi.first_lsn, wi.last_lsn, body_bufs, timeouts, idle,
		paste_store_failed(s->store, NULL) ? "true" : "false");
	reply_simple(w, conn, h, 200, "application/json", body, (size_t)n, NULL, 0);
}

static void route_request(struct server *s, struct hconn *h, const struct paste_http_req *req)
{
	h->head_only = req->method == PASTE_HTTP_HEAD;
	if (req->target_len == 6 && !memcmp(req->target, "/stats", 6) &&
	    (req->method == PASTE_HTTP_GET || req->method == PASTE_HTTP_HEAD))
		h->route = ROUTE_STATS;
	else if (s->wal_mode)
		wal_route(s, h, req);
	else
		h->route = ROUTE_RPC;
}

/* A whole request (head and body) is in: answer it. */
static void finish_request(struct worker *w, uint32_t conn, struct hconn *h)
{
	struct server *s = w->srv;
	bump(&w->requests);
	if (h->route != ROUTE_STATS && store_failed(w)) {
		wal_release(w, h);
		reply_failed(w, conn, h);
		return;
	}
	switch (h->route) {
	case ROUTE_RPC:
		if (h->keep_alive && !h->http10 && !h->head_only) {
			paste_port_send(w->port, conn, s->rpc_reply, s->rpc_reply_len, 0);
		} else {
			reply_simple(w, conn, h, 200, "text/plain", s->rpc_reply + s->rpc_head_len,
				     s->body_len, NULL, 0);
		}
		break;
	case ROUTE_STATS:
		reply_stats(w, conn, h);
		break;
	case ROUTE_NOT_FOUND:
		reply_simple(w, conn, h, 404, "text/plain", "not found\n", 10, NULL, 0);
		break;
	case ROUTE_BAD_METHOD:
		reply_simple(w, conn, h, 405, "text/plain", "method not allowed\n", 19, "Allow: GET, POST, DELETE", 0);
		break;
	case ROUTE_BAD_REQUEST:
		reply_error(w, conn, h, 400);
		return;
	default:
		wal_finish(w, conn, h);
		break;
	}
	if (h->state != H_DEAD)
		h->state = H_HEAD;
	paste_http_parser_init(&h->ps, MAX_HEAD, s->max_body);
}

/* body_started: bytes after the head already arrived with it (the client
 * did not wait, so no 100 Continue is needed). */
static void head_done(struct worker *w, uint32_t conn, struct hconn *h, const struct paste_http_req *req,
		      bool body_started)
{
	h->keep_alive = req->keep_alive;
	h->http10 = req->version_minor == 0;
	h->body_len = h->body_left = req->content_length;
	h->failed = false;
	h->next = 0;
	h->copying = false;
	route_request(w->srv, h, req);
	if (h->route != ROUTE_STATS && store_failed(w)) {
		reply_failed(w, conn, h);   /* the body, if any, is not read */
		return;
	}
	if (h->route == ROUTE_LOG_APPEND && h->body_len > wal_max_body(w->srv)) {
		reply_error(w, conn, h, 413);
		return;
	}
	if (h->body_left) {
		h->state = H_BODY;
		/* The body will be read: say so to a client that waits for it
		 * (RFC 9110 section 10.1.1). Queued in order behind any earlier
		 * reply on this connection, so it never overtakes a 201 that is
		 * still waiting for its barrier. */
		if (req->expect_continue && !body_started)
			paste_port_send(w->port, conn, CONTINUE_100, sizeof(CONTINUE_100) - 1, 0);
	} else {
		finish_request(w, conn, h);
	}
}

static int head_append(struct hconn *h, const uint8_t *p, uint32_t n)
{
	if (h->head_len + n > h->head_cap) {
		uint32_t cap = h->head_cap ? h->head_cap : 512;
		while (cap < h->head_len + n)
			cap *= 2;
		char *q = realloc(h->head, cap);
		if (!q)
			return -ENOMEM;
		h->head = q;
		h->head_cap = cap;
	}
	memcpy(h->head + h->head_len, p, n);
	h->head_len += n;
	return 0;
}

/* Frame the bytes of one DATA event into requests (pipelining: as many as
 * it holds; splitting: state carries over to the next event). */
static void on_data(struct worker *w, const struct paste_event *ev)
{
	struct hconn *h = paste_port_conn_data(w->port, ev->conn);
	uint32_t pos = 0;
	h->last_ms = w->now_ms;
	while (pos < ev->len && h->state != H_DEAD) {
		if (h->state == H_BODY) {
			uint32_t take = ev->len - pos;
			if (take > h->body_left)
				take = (uint32_t)h->body_left;
			if (h->route == ROUTE_LOG_APPEND)
				wal_body(w, h, ev, pos, take);
			h->body_left -= take;
			pos += take;
			if (!h->body_left)
				finish_request(w, ev->conn, h);
			continue;
		}
		struct paste_http_req req;
		int r;
		uint32_t used;
		if (!h->head_len) {           /* zero copy: parse where it landed */
			r = paste_http_parse(&h->ps, (const char *)ev->data + pos, ev->len - pos, &req);
			if (r == 0) {
				h->head_ms = w->now_ms;   /* the header timeout starts */
				if (head_append(h, ev->data + pos, ev->len - pos)) {
					reply_error(w, ev->conn, h, 503);
					return;
				}
				return;
			}
			used = r > 0 ? (uint32_t)r : 0;
		} else {                      /* a head split across reads */
			uint32_t old = h->head_len, n = ev->len - pos;
			if (n > MAX_HEAD + 1 - old)
				n = MAX_HEAD + 1 - old;
			if (head_append(h, ev->data + pos, n)) {
				reply_error(w, ev->conn, h, 503);
				return;
			}
			r = paste_http_parse(&h->ps, h->head, h->head_len, &req);
			if (r == 0) {
				pos += n;
				continue;
			}
			used = r > 0 ? (uint32_t)r - old : 0;
		}
		if (r < 0) {
			reply_error(w, ev->conn, h, -r);
			return;
		}
		pos += used;
		head_done(w, ev->conn, h, &req, pos < ev->len);   /* req may point into h->head */
		h->head_len = 0;
	}
}

static void list_add(struct worker *w, uint32_t conn)
{
	if (conn >= MAX_CONNS || w->pos[conn] != UINT32_MAX)
		return;
	w->pos[conn] = w->nopen;
	w->open[w->nopen++] = conn;
}

static void list_del(struct worker *w, uint32_t conn)
{
	if (conn >= MAX_CONNS || w->pos[conn] == UINT32_MAX)
		return;
	uint32_t i = w->pos[conn], last = w->open[--w->nopen];
	w->open[i] = last;
	w->pos[last] = i;
	w->pos[conn] = UINT32_MAX;
}

static void on_closed(struct worker *w, uint32_t conn)
{
	struct hconn *h = paste_port_conn_data(w->port, conn);
	wal_release(w, h);      /* a half-received body held buffers */
	free(h->head);
	h->head = NULL;
	h->head_len = h->head_cap = 0;
	h->state = H_DEAD;
	list_del(w, conn);
}

/* A slow or stalled client: 408, close, and give back what its body held. */
static void timed_out(struct worker *w, uint32_t conn, struct hconn *h)
{
	wal_release(w, h);
	reply_error(w, conn, h, 408);
	bump(&w->timeouts);
}

/* Twice a second per thread: close what timed out. Reads one cache line
 * per open connection (16k connections: ~1 ms a second at worst) and no
 * clock: the pass's timestamp is enough at this granularity. */
static void sweep(struct worker *w)
{
	struct server *s = w->srv;
	uint64_t now = w->now_ms;
	w->next_sweep_ms = now + SWEEP_MS;
	for (uint32_t i = 0; i < w->nopen; i++) {
		uint32_t conn = w->open[i];
		struct hconn *h = paste_port_conn_data(w->port, conn);
		if (h->state == H_BODY) {
			if (s->body_to_ms && now - h->last_ms >= s->body_to_ms)
				timed_out(w, conn, h);
		} else if (h->state == H_HEAD && h->head_len) {
			if (s->header_to_ms && now - h->head_ms >= s->header_to_ms)
				timed_out(w, conn, h);
		} else if (h->state == H_HEAD) {
			if (s->idle_to_ms && now - h->last_ms >= s->idle_to_ms) {
				h->state = H_DEAD;      /* silently: no request to answer */
				paste_port_close_conn(w->port, conn);
				bump(&w->idle_closes);
			}
		}
	}
}

/* The coarse clock (~5 ns, vDSO, a few ms resolution) once per pass. */
static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static int poll_timeout(const struct worker *w)
{
	if (w->srv->busy_poll)
		return 0;
	if (w->failing)
		return DRAIN_POLL_MS;
	uint64_t left = w->next_sweep_ms > w->now_ms ? w->next_sweep_ms - w->now_ms : 0;
	return (int)(left < SWEEP_MS ? left : SWEEP_MS);
}

/* The first worker to give up wakes main (sigwait), which stops the rest. */
static void request_exit(struct server *s)
{
	int zero = 0;
	if (atomic_compare_exchange_strong(&s->exit_code, &zero, 1))
		kill(getpid(), SIGTERM);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct server *s = w->srv;
	if (s->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET((unsigned)s->cpu + w->id, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	struct paste_port_config pc = {
		.engine = s->engine, .host = s->host, .port = s->listen_port, .ring_bufs = s->ring_bufs,
		.max_conns = MAX_CONNS, .conn_data_size = sizeof(struct hconn),
		.busy_poll = s->busy_poll, .store = s->store, .persist = w->persist,
	};
	int r = paste_port_open(&w->port, &pc, &s->open_err);
	if (r == 0)
		s->listen_port = paste_port_local_port(w->port);
	sem_post(&s->opened);
	if (r)
		return NULL;
	sigset_t usr;
	sigemptyset(&usr);
	sigaddset(&usr, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr, NULL);
	w->now_ms = now_ms();
	w->next_sweep_ms = w->now_ms + SWEEP_MS;
	while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
		struct paste_event *evs;
		int n = paste_port_poll(w->port, &evs, poll_timeout(w));
		w->now_ms = now_ms();
		publish_stats(w, n);
		if (n < 0 && n != -EINTR) {
			if (!store_failed(w))
				fprintf(stderr, "phttpd: thread %u: %s; stopping\n", w->id, strerror(-n));
			request_exit(s);
			break;
		}
		/* Failed: answer what comes with 503 for a bounded drain (the
		 * 503s queued in one pass leave with the next poll), then go. */
		if (store_failed(w) && ++w->fail_passes > 2 && w->now_ms - w->fail_ms >= DRAIN_MS) {
			request_exit(s);
			break;
		}
		for (int i = 0; i < n; i++) {
			const struct paste_event *ev = &evs[i];
			struct hconn *h = paste_port_conn_data(w->port, ev->conn);
			switch (ev->type) {
			case PASTE_EV_ACCEPT:
				paste_http_parser_init(&h->ps, MAX_HEAD, s->max_body);
				h->last_ms = w->now_ms;
				list_add(w, ev->conn);
				break;
			case PASTE_EV_DATA:
				on_data(w, ev);
				break;
			case PASTE_EV_CLOSED:
				on_closed(w, ev->conn);
				break;
			}
		}
		if (w->now_ms >= w->next_sweep_ms)
			sweep(w);
	}
	if (w->failing) {          /* submit the 503s the last pass queued */
		struct paste_event *evs;
		paste_port_poll(w->port, &evs, 0);
	}
	/* Connections still open at shutdown get no CLOSED event. */
	for (uint32_t c = 0; c < MAX_CONNS; c++) {
		struct hconn *h = paste_port_conn_data(w->port, c);
		if (h && (h->head || h->next))
			on_closed(w, c);
	}
	paste_port_close(w->port);
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: phttpd [options]\n"
"  --host ADDR          listen address (default 127.0.0.1; ::1 works)\n"
"  --port N             listen port (default 60000; 0 picks a free one)\n"
"  --threads N          worker threads, one ring + SO_REUSEPORT listener each (default 1)\n"
"  --engine uring|epoll paste port or the socket-API baseline (default uring)\n"
"  --mode rpc|wal       fixed replies, or the durable log (default rpc)\n"
"  --body-len N         RPC reply body bytes (default 64)\n"
"  --store PATH         packet store (default " PASTE_DEFAULT_STORE_PATH ")\n"
"  --store-size SIZE    size when creating, K/M/G suffixes (default 256M)\n"
"  --buf-size N         buffer bytes when creating (default 2048)\n"
"  --durability MODE    auto|pmem|emulated|fsync|none (default auto)\n"
"  --pm-latency NS      emulated PM latency per fence (default 0)\n"
"  --copy               WAL: copy bodies into fresh buffers instead of logging in place\n"
"  --max-body N         largest Content-Length accepted (default 1048576)\n"
"  --max-held SIZE      store bytes one unfinished body may pin, K/M/G (default 1M; 0 no limit)\n"
"  --header-timeout S   seconds to send a request head, else 408 (default 60; 0 off)\n"
"  --body-timeout S     seconds between body reads, else 408 (default 60; 0 off)\n"
"  --idle-timeout S     seconds a keep-alive connection may wait (default 75; 0 off)\n"
"  --ring-bufs N        provided buffers per thread, power of two (default 4096)\n"
"  --busy-poll          never sleep in the kernel\n"
"  --cpu N              pin thread i to CPU N+i\n"
"  --help               this text\n"
"exit status: 0 clean stop, 1 run-time failure (a failed store included), 2 bad usage\n");
}

static int parse_u64(const char *name, const char *v, uint64_t max, uint64_t *out, bool suffix)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (suffix && end != v) {
		uint64_t mul = 1;
		switch (*end) {
		case 'k': case 'K': mul = 1ull << 10; end++; break;
		case 'm': case 'M': mul = 1ull << 20; end++; break;
		case 'g': case 'G': mul = 1ull << 30; end++; break;
		}
		if (x > UINT64_MAX / mul)
			errno = ERANGE;
		x *= mul;
	}
	if (errno || end == v || *end || *v == '-' || x > max) {
		fprintf(stderr, "phttpd: --%s: '%s' is not a number in 0..%" PRIu64 "\n", name, v, max);
		return -1;
	}
	*out = x;
	return 0;
}

static int parse_args(struct server *s, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", 1, 0, 'h' }, { "port", 1, 0, 'p' }, { "threads", 1, 0, 't' },
		{ "engine", 1, 0, 'e' }, { "mode", 1, 0, 'm' }, { "body-len", 1, 0, 'b' },
		{ "store", 1, 0, 's' }, { "store-size", 1, 0, 'S' }, { "buf-size", 1, 0, 'B' },
		{ "durability", 1, 0, 'd' }, { "pm-latency", 1, 0, 'l' }, { "copy", 0, 0, 'c' },
		{ "max-body", 1, 0, 'M' }, { "ring-bufs", 1, 0, 'r' }, { "busy-poll", 0, 0, 'P' },
		{ "cpu", 1, 0, 'C' }, { "help", 0, 0, '?' + 256 },
		{ "header-timeout", 1, 0, 'H' }, { "body-timeout", 1, 0, 'T' },
		{ "idle-timeout", 1, 0, 'I' }, { "max-held", 1, 0, 'X' }, { 0, 0, 0, 0 },
	};
	int c;
	uint64_t v;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'h': s->host = optarg; break;
		case 'p': if (parse_u64("port", optarg, 65535, &v, false)) return -1; s->port = (uint16_t)v; break;
		case 't': if (parse_u64("threads", optarg, PASTE_MAX_LANES, &v, false) || !v) return -1; s->threads = (uint32_t)v; break;
		case 'e':
			if (!strcmp(optarg, "uring")) s->engine = PASTE_ENGINE_URING;
			else if (!strcmp(optarg, "epoll")) s->engine = PASTE_ENGINE_EPOLL;
			else { fprintf(stderr, "phttpd: --engine: '%s' is not uring or epoll\n", optarg); return -1; }
			break;
		case 'm':
			if (!strcmp(optarg, "rpc")) s->wal_mode = false;
			else if (!strcmp(optarg, "wal")) s->wal_mode = true;
			else { fprintf(stderr, "phttpd: --mode: '%s' is not rpc or wal\n", optarg); return -1; }
			break;
		case 'b': if (parse_u64("body-len", optarg, 1 << 20, &v, false)) return -1; s->body_len = (uint32_t)v; break;
		case 's': s->store_path = optarg; break;
		case 'S': if (parse_u64("store-size", optarg, 1ull << 40, &v, true)) return -1; s->store_size = v; break;
		case 'B': if (parse_u64("buf-size", optarg, 65536, &v, false)) return -1; s->buf_size = (uint32_t)v; break;
		case 'd':
			if (paste_durability_parse(optarg, &s->durability)) {
				fprintf(stderr, "phttpd: --durability: '%s' is not auto, pmem, emulated, fsync or none\n", optarg);
				return -1;
			}
			break;
		case 'l': if (parse_u64("pm-latency", optarg, 1000000000, &v, false)) return -1; s->pm_latency_ns = v; break;
		case 'c': s->copy = true; break;
		case 'M': if (parse_u64("max-body", optarg, 1ull << 40, &v, false)) return -1; s->max_body = v; break;
		case 'r': if (parse_u64("ring-bufs", optarg, 32768, &v, false)) return -1; s->ring_bufs = (uint32_t)v; break;
		case 'P': s->busy_poll = true; break;
		case 'H': if (parse_u64("header-timeout", optarg, MAX_TIMEOUT, &v, false)) return -1; s->header_to_ms = v * 1000; break;
		case 'T': if (parse_u64("body-timeout", optarg, MAX_TIMEOUT, &v, false)) return -1; s->body_to_ms = v * 1000; break;
		case 'I': if (parse_u64("idle-timeout", optarg, MAX_TIMEOUT, &v, false)) return -1; s->idle_to_ms = v * 1000; break;
		case 'X': if (parse_u64("max-held", optarg, 1ull << 40, &v, true)) return -1; s->max_held = v; break;
		case 'C': if (parse_u64("cpu", optarg, 4095, &v, false)) return -1; s->cpu = (int)v; break;
		case '?' + 256: usage(stdout); exit(0);
		default:
			fprintf(stderr, "phttpd: unknown or incomplete option '%s' (see --help)\n", argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "phttpd: unexpected argument '%s' (see --help)\n", argv[optind]);
		return -1;
	}
	return 0;
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

static void catch_sigbus(struct paste_store *st)
{
	int n = snprintf(sigbus_msg, sizeof(sigbus_msg),
		"phttpd: store %s failed: bus error touching its mapping (the store file was "
		"truncated, or its storage failed, while in use); exiting\n", paste_store_path(st));
	sigbus_len = n < (int)sizeof(sigbus_msg) ? (size_t)n : sizeof(sigbus_msg) - 1;
	store_lo = (uintptr_t)paste_store_base(st);
	store_hi = store_lo + paste_store_geom(st)->file_size;
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };
	sigaction(SIGBUS, &sa, NULL);
}

static int build_rpc_reply(struct server *s)
{
	struct hconn h = { .keep_alive = true };
	char head[256];
	int n = reply_head(head, sizeof(head), &h, 200, "text/plain", s->body_len, NULL);
	s->rpc_head_len = (uint32_t)n;
	s->rpc_reply_len = (uint32_t)n + s->body_len;
	s->rpc_reply = malloc(s->rpc_reply_len);
	if (!s->rpc_reply)
		return -1;
	memcpy(s->rpc_reply, head, (size_t)n);
	memset(s->rpc_reply + n, 'x', s->body_len);
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

/* Everything main set up, in reverse (NULLs are fine); returns code. */
static int teardown(struct server *s, int code)
{
	paste_wal_close(s->wal);
	for (uint32_t i = 0; s->workers && i < s->threads; i++) {
		paste_persist_close(s->workers[i].persist);
		free(s->workers[i].open);
		if (s->workers[i].srv)
			pthread_mutex_destroy(&s->workers[i].snap_lock);
	}
	store_lo = store_hi = 0;   /* unmapped next: a SIGBUS there is no longer ours */
	paste_store_close(s->store);
	free(s->workers);
	free(s->rpc_reply);
	return code;
}

int main(int argc, char **argv)
{
	struct server s = {
		.host = "127.0.0.1", .port = 60000, .threads = 1, .body_len = 64,
		.store_path = PASTE_DEFAULT_STORE_PATH, .max_body = 1 << 20,
		.ring_bufs = 4096, .cpu = -1, .max_held = 1 << 20,
		.header_to_ms = 60000, .body_to_ms = 60000, .idle_to_ms = 75000,
	};
	if (parse_args(&s, argc, argv))
		return 2;
	setvbuf(stderr, NULL, _IOLBF, 0);
	struct rlimit rl;   /* the epoll engine needs a descriptor per connection */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	struct paste_error err = { 0 };
	struct paste_store_config sc = { .size = s.store_size, .buf_size = s.buf_size };
	if (s.threads > 2 && access(s.store_path, F_OK) != 0)
		sc.log_lanes = s.threads;      /* a new store gets a lane per thread */
	if (paste_store_open(&s.store, s.store_path, &sc, PASTE_STORE_CREATE, &err)) {
		fprintf(stderr, "phttpd: %s\n", err.msg);
		return 1;
	}
	int code = 2;       /* usage errors first, then run-time ones */
	catch_sigbus(s.store);
	const struct paste_store_geom *g = paste_store_geom(s.store);
	if (s.threads > g->log_lanes) {
		fprintf(stderr, "phttpd: --threads %u exceeds the store's %u log lanes\n", s.threads, g->log_lanes);
		return teardown(&s, code);
	}
	if (s.max_held && s.max_held < g->buf_size) {
		fprintf(stderr, "phttpd: --max-held %" PRIu64 " is less than one %u-byte store buffer\n",
			s.max_held, g->buf_size);
		return teardown(&s, code);
	}
	code = 1;
	s.workers = calloc(s.threads, sizeof(*s.workers));
	if (!s.workers) {
		fprintf(stderr, "phttpd: out of memory\n");
		return teardown(&s, code);
	}
	enum paste_durability dur = s.durability == PASTE_DUR_AUTO ? paste_durability_detect(s.store_path)
								   : s.durability;
	for (uint32_t i = 0; i < s.threads; i++) {
		struct paste_persist_config pc = { .mode = dur, .pm_latency_ns = s.pm_latency_ns };
		struct worker *w = &s.workers[i];
		w->srv = &s;
		w->id = i;
		pthread_mutex_init(&w->snap_lock, NULL);
		w->open = malloc(2 * MAX_CONNS * sizeof(*w->open));   /* 128 KiB */
		if (!w->open) {
			fprintf(stderr, "phttpd: out of memory\n");
			return teardown(&s, code);
		}
		w->pos = w->open + MAX_CONNS;
		memset(w->pos, 0xff, MAX_CONNS * sizeof(*w->pos));
		if (paste_persist_open(&w->persist, s.store, &pc, &err)) {
			fprintf(stderr, "phttpd: %s\n", err.msg);
			return teardown(&s, code);
		}
	}
	if (s.wal_mode) {
		err.msg[0] = 0;
		if (paste_wal_open(&s.wal, s.store, s.workers[0].persist, &err)) {
			fprintf(stderr, "phttpd: %s\n", err.msg);
			return teardown(&s, code);
		}
		if (err.msg[0])
			fprintf(stderr, "phttpd: recovery: %s\n", err.msg);
	}
	paste_store_start(s.store);
	if (build_rpc_reply(&s))
		return teardown(&s, code);

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
	s.listen_port = s.port;
	sem_init(&s.opened, 0, 0);
	for (uint32_t i = 0; i < s.threads; i++) {
		pthread_create(&s.workers[i].thread, NULL, worker_main, &s.workers[i]);
		sem_wait(&s.opened);
		if (!s.workers[i].port) {
			fprintf(stderr, "phttpd: %s\n", s.open_err.msg);
			stop_workers(&s, i + 1);
			return teardown(&s, code);
		}
	}
	uint16_t port = s.listen_port;
	struct paste_wal_info wi = { 0 };
	if (s.wal)
		paste_wal_info(s.wal, &wi);
	fprintf(stderr, "phttpd: store %s: %u x %u-byte buffers, %u free\n", s.store_path,
		g->nbufs, g->buf_size, paste_store_nfree(s.store));
	fprintf(stderr, "phttpd: engine %s, mode %s, %u thread(s), durability %s (%s)%s\n",
		s.engine == PASTE_ENGINE_URING ? "uring" : "epoll", s.wal_mode ? "wal" : "rpc",
		s.threads, paste_durability_name(dur), paste_persist_flush_insn(s.workers[0].persist),
		s.copy ? ", copy mode" : "");
	if (s.wal)
		fprintf(stderr, "phttpd: log: %" PRIu64 " records, LSN %" PRIu64 "..%" PRIu64 "\n",
			wi.records, wi.first_lsn, wi.last_lsn);
	fprintf(stderr, "phttpd: listening on %s:%u\n", s.host, port);

	sigdelset(&set, SIGUSR1);
	int sig;
	sigwait(&set, &sig);
	stop_workers(&s, s.threads);
	code = atomic_load(&s.exit_code) ? 1 : 0;
	const char *why;
	if (paste_store_failed(s.store, &why)) {
		/* Even when stopped by a signal: what the store holds is in doubt. */
		fprintf(stderr, "phttpd: store %s failed: %s; exiting\n", s.store_path, why);
		code = 1;
	}
	fprintf(stderr, code ? "phttpd: stopped after a failure\n" : "phttpd: stopped\n");
	return teardown(&s, code);
}
