/*
 * test_http_proto.c - server/http.c driven through server/server.c with a
 * recording service, over a real port and loopback sockets, both engines:
 * the order of route / body / finish / closed calls, pipelining, heads
 * split at every offset, bodies split across reads, Expect: 100-continue,
 * what the protocol answers itself (bad input, a service's 413, GET
 * /stats, 408 and the idle close, 503 once the store failed), and the
 * per-connection layout (server, protocol and service parts, zeroed at
 * accept).
 */
#include "server_fixture.h"

/* ---- the recording service ---------------------------------------- */

static char rec[8192];     /* "route GET /a#0;body 5;finish 1;closed;" */
static size_t rec_len;
static int layout_bad, opens, closes;
static struct fixture *cur;

static void note(const char *fmt, const char *a, long b)
{
	int n = snprintf(rec + rec_len, sizeof(rec) - rec_len, fmt, a, b);
	if (n > 0 && (size_t)n < sizeof(rec) - rec_len)
		rec_len += (size_t)n;
}

struct tconn {
	uint32_t magic;            /* 0 at accept (the port zeroes the slot) */
	uint32_t requests;         /* on this connection */
	uint64_t body_bytes;
	char body[64];
};

static void check_layout(struct http_ctx *x)
{
	void *slot = paste_port_conn_data(x->w->port, x->conn);
	if ((void *)x->c != slot || (void *)x->h != (char *)slot + SRV_ALIGN(sizeof(struct srv_conn)) ||
	    x->sc != (char *)x->h + SRV_ALIGN(sizeof(struct http_conn)) || x->ss != (void *)&opens)
		layout_bad++;
}

static int t_open(struct server *s, const void *cfg, void **state, struct paste_error *err)
{
	(void)s; (void)cfg; (void)err;
	opens++;
	*state = &opens;
	return 0;
}

static void t_close(struct server *s, void *state)
{
	(void)s; (void)state;
	closes++;
}

static int t_route(struct http_ctx *x, const struct paste_http_req *req)
{
	struct tconn *t = x->sc;
	check_layout(x);
	char what[64];
	snprintf(what, sizeof(what), "%.*s %.*s", (int)req->method_len, req->method_str,
		 (int)req->target_len, req->target);
	note("route %s#%ld;", what, (long)t->requests);
	if (t->magic && t->magic != 0x7e57)
		layout_bad++;
	t->magic = 0x7e57;
	t->requests++;
	t->body_bytes = 0;
	if (req->path_len == 4 && !memcmp(req->path, "/big", 4))
		return -413;
	if (req->path_len == 5 && !memcmp(req->path, "/long", 5))
		return -414;
	return req->path_len >= 5 && !memcmp(req->path, "/body", 5) ? 1 : 0;
}

static void t_body(struct http_ctx *x, const struct paste_event *ev, uint32_t off, uint32_t len)
{
	struct tconn *t = x->sc;
	check_layout(x);
	note("body %s%ld;", "", (long)len);
	if (x->h->route == 1 && t->body_bytes + len <= sizeof(t->body))
		memcpy(t->body + t->body_bytes, ev->data + off, len);
	t->body_bytes += len;
}

static void t_finish(struct http_ctx *x)
{
	struct tconn *t = x->sc;
	check_layout(x);
	note("finish %s%ld;", "", (long)x->h->route);
	if (x->h->route == 1)
		http_reply(x, 200, "text/plain", t->body, t->body_bytes, NULL, 0);
	else
		http_reply(x, 200, "text/plain", "ok\n", 3, NULL, 0);
}

static void t_closed(struct http_ctx *x)
{
	check_layout(x);
	note("closed%s%.0ld;", "", 0L);
}

static size_t t_stats(struct server *s, void *state, char *out, size_t at, size_t cap)
{
	(void)s; (void)state;
	return http_put_str(out, at, cap, "\"test\":1,");
}

static const struct http_service rec_service = {
	.base = { .name = "test", .conn_size = sizeof(struct tconn), .open = t_open, .close = t_close },
	.route = t_route, .body = t_body, .finish = t_finish, .closed = t_closed, .stats = t_stats,
};

static const struct http_config hc = { .max_body = 1000, .service = &rec_service };

static void rec_reset(void)
{
	rec_len = 0;
	rec[0] = 0;
}

#define OK3 "HTTP/1.1 200 OK\r\nServer: test\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n"

/* ---- tests ---------------------------------------------------------- */

static void test_layout(void)
{
	/* What each part of a slot costs: no service state, no extents. */
	uint32_t base = (uint32_t)(SRV_ALIGN(sizeof(struct srv_conn)) + SRV_ALIGN(sizeof(struct http_conn)));
	CHECK_EQ(server_conn_size(&http_proto, &hc), base + SRV_ALIGN(sizeof(struct tconn)));
	CHECK(sizeof(struct srv_conn) <= 64);   /* the sweep reads one cache line */
	CHECK(base <= 96);
}

static void test_simple(struct fixture *f)
{
	char buf[4096];
	rec_reset();
	int fd = fx_client(f);
	fx_send(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", 28);
	fx_read(f, fd, buf, sizeof(buf), strlen(OK3), 2000, NULL);
	CHECK(!strcmp(buf, OK3));
	CHECK(!strcmp(rec, "route GET /a#0;finish 0;"));
	close(fd);
	fx_pump(f, 5);
	CHECK(!strcmp(rec, "route GET /a#0;finish 0;closed;"));
	CHECK_EQ(f->w->nopen, 0);
}

/* Three requests in one write, the first with a body: every call in order. */
static void test_pipelined(struct fixture *f)
{
	char buf[4096];
	const char *req = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
			  "GET /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.0\r\n\r\n";
	rec_reset();
	int fd = fx_client(f);
	fx_send(fd, req, strlen(req));
	bool closed;
	fx_read(f, fd, buf, sizeof(buf), 1 << 20, 1000, &closed);
	fx_pump(f, 3);
	CHECK(!strcmp(rec, "route POST /body#0;body 5;finish 1;route GET /b#1;finish 0;"
			   "route GET /c#2;finish 0;closed;"));
	CHECK_EQ(fx_count(buf, "HTTP/1.1 200 OK\r\n"), 3);
	CHECK(strstr(buf, "Content-Length: 5\r\n\r\nhello") != NULL);
	CHECK(strstr(buf, "Connection: close\r\n") != NULL);    /* the 1.0 request */
	CHECK(closed);
	close(fd);
}

/* A request with a body, split into two writes at every offset: the head
 * reassembled wherever it was cut, the body in one or two pieces. */
static void test_split_everywhere(struct fixture *f)
{
	const char *req = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd";
	size_t len = strlen(req);
	int bad = 0;
	for (size_t k = 1; k < len; k++) {
		char buf[1024];
		rec_reset();
		int fd = fx_client(f);
		struct paste_port_stats ps;
		paste_port_stats(f->w->port, &ps);
		uint64_t in0 = ps.bytes_in, end = fx_ms() + 1000;
		fx_send(fd, req, k);
		do {     /* the first piece must be read alone */
			fx_pump(f, 1);
			paste_port_stats(f->w->port, &ps);
		} while (ps.bytes_in < in0 + k && fx_ms() < end);
		fx_send(fd, req + k, len - k);
		fx_replies(f, fd, buf, sizeof(buf), 1, false, 2000);
		size_t head = len - 4;
		const char *want = k <= head ? "route POST /body#0;body 4;finish 1;"
					     : "route POST /body#0;body %ld;body %ld;finish 1;";
		char exp[128];
		snprintf(exp, sizeof(exp), want, (long)(k - head), (long)(len - k));
		if (strcmp(rec, exp) || !strstr(buf, "\r\n\r\nabcd")) {
			bad++;
			fprintf(stderr, "split at %zu: %s | %s\n", k, rec, buf);
		}
		close(fd);
		fx_pump(f, 2);
	}
	CHECK_EQ(bad, 0);
}

static void test_expect_continue(struct fixture *f)
{
	char buf[1024];
	const char *c100 = "HTTP/1.1 100 Continue\r\n\r\n";
	rec_reset();
	int fd = fx_client(f);
	const char *head = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n";
	fx_send(fd, head, strlen(head));
	fx_read(f, fd, buf, sizeof(buf), strlen(c100), 2000, NULL);
	CHECK(!strcmp(buf, c100));
	CHECK(!strcmp(rec, "route POST /body#0;"));
	fx_send(fd, "xyz", 3);
	fx_replies(f, fd, buf, sizeof(buf), 1, false, 2000);
	CHECK(strstr(buf, "200 OK") && strstr(buf, "\r\n\r\nxyz"));
	/* body sent with the head: no 100 Continue */
	const char *both = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nhi";
	fx_send(fd, both, strlen(both));
	fx_replies(f, fd, buf, sizeof(buf), 1, false, 2000);
	CHECK(!strstr(buf, "100 Continue") && strstr(buf, "\r\n\r\nhi"));
	close(fd);
	fx_pump(f, 3);
}

/* What the protocol answers itself: route is not called for bad input or
 * /stats; a service's -413 closes before the body; a head over the
 * parser's body limit is 413 without a route. */
static void test_protocol_answers(struct fixture *f)
{
	static const struct { const char *req, *status; const char *calls; } cases[] = {
		{ "GARBAGE\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", "closed;" },
		{ "GET / HTTP/2.0\r\n\r\n", "HTTP/1.1 505 ", "closed;" },
		{ "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n", "HTTP/1.1 413 ", "closed;" },
		{ "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n", "HTTP/1.1 413 ", "route POST /big#0;closed;" },
		{ "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 200 OK\r\n", "closed;" },
		/* RFC 9112 section 3.2: one valid Host on HTTP/1.1 */
		{ "GET /a HTTP/1.1\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", "closed;" },
		{ "GET http://h/a HTTP/1.1\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", "closed;" },
		{ "GET /a HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", "closed;" },
		{ "GET /a HTTP/1.1\r\nHost: a b\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", "closed;" },
		{ "GET a HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", "closed;" },
		{ "GET ftp://h/a HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", "closed;" },
		/* /stats and /metrics take no parameters */
		{ "GET /stats?x=1 HTTP/1.1\r\nHost: x\r\n\r\n",
		  "HTTP/1.1 400 Bad Request\r\n", "closed;" },
		{ "HEAD http://h/metrics?x HTTP/1.1\r\nHost: x\r\n\r\n",
		  "HTTP/1.1 400 Bad Request\r\n", "closed;" },
		{ "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
		  "HTTP/1.1 501 Not Implemented\r\n", "closed;" },
		{ "GET /long HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 414 URI Too Long\r\n",
		  "route GET /long#0;closed;" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[4096];
		bool closed;
		rec_reset();
		int fd = fx_client(f);
		fx_send(fd, cases[i].req, strlen(cases[i].req));
		fx_read(f, fd, buf, sizeof(buf), 1 << 20, 2000, &closed);
		fx_pump(f, 3);
		CHECK(closed);
		CHECK(!strncmp(buf, cases[i].status, strlen(cases[i].status)));
		CHECK(!strcmp(rec, cases[i].calls));
		if (i == 4)
			CHECK(strstr(buf, "\"mode\":\"test\"") && strstr(buf, "\"commits\":") &&
			      strstr(buf, "\"test\":1,\"timeouts\":0,\"idle_closes\":0,\"store_failed\":false}"));
		if (strstr(cases[i].req, "/stats?") || strstr(cases[i].req, "/metrics?"))
			CHECK(strstr(buf, "\r\n\r\n400 Bad Request: unknown query parameter\n") != NULL);
		close(fd);
	}
}

/* What a target means on a connection that stays open: the path routes
 * (absolute-form included: its authority takes the place of Host), the
 * query and a fragment are not part of it; HTTP/1.0 needs no Host. */
static void test_targets(struct fixture *f)
{
	char buf[8192];
	rec_reset();
	int fd = fx_client(f);
	const char *reqs =
		"GET http://h:1/a?x#f HTTP/1.1\r\nHost: x\r\n\r\n"
		"POST HTTP://h/body?q=1#f HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
		"GET http://h/stats HTTP/1.1\r\nHost: x\r\n\r\n"
		"GET /stats?#f HTTP/1.1\r\nHost: x\r\n\r\n"
		"GET /stats#frag HTTP/1.1\r\nHost: x\r\n\r\n"
		"GET /metrics?& HTTP/1.1\r\nHost: x\r\n\r\n"
		"GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
		"GET http://h HTTP/1.0\r\n\r\n";
	fx_send(fd, reqs, strlen(reqs));
	bool closed;
	fx_read(f, fd, buf, sizeof(buf), 1 << 20, 2000, &closed);
	fx_pump(f, 3);
	CHECK(closed);
	CHECK_EQ(fx_count(buf, "HTTP/1.1 200 OK\r\n"), 8);
	CHECK(strstr(buf, "Content-Length: 3\r\n\r\nabc") != NULL);
	CHECK_EQ(fx_count(buf, "\"mode\":\"test\""), 3);
	CHECK(strstr(buf, "# TYPE paste_replies_total counter") != NULL);
	CHECK(!strcmp(rec, "route GET http://h:1/a?x#f#0;finish 0;"
			   "route POST HTTP://h/body?q=1#f#1;body 3;finish 1;"
			   "route GET /b#2;finish 0;route GET http://h#3;finish 0;closed;"));
	close(fd);
}

/* Every status the server counts (and so may send) has its reason phrase. */
static void test_status_reasons(void)
{
	for (uint32_t i = 0; i < SRV_NSTATUS - 1; i++) {
		const char *r = paste_http_reason(srv_status_codes[i]);
		if (!strcmp(r, "Unknown"))
			fprintf(stderr, "status %u has no reason phrase\n", srv_status_codes[i]);
		CHECK(strcmp(r, "Unknown") != 0);
	}
}

/* A connection closed in the middle of a body: closed releases it. */
static void test_close_mid_body(struct fixture *f)
{
	rec_reset();
	int fd = fx_client(f);
	const char *req = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab";
	fx_send(fd, req, strlen(req));
	fx_pump(f, 3);
	close(fd);
	fx_pump(f, 5);
	CHECK(!strcmp(rec, "route POST /body#0;body 2;closed;"));
	CHECK_EQ(f->w->nopen, 0);
}

/* The sweep and the protocol's reading of it: 408 for a head or a body
 * that stalls (the service's closed runs first), a silent close when idle. */
static void test_timeouts(struct fixture *f)
{
	struct server_config *cfg = &f->s->cfg;
	cfg->header_to_ms = cfg->body_to_ms = cfg->idle_to_ms = 100;
	const char *reqs[] = { "GET / HT", "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab", "" };
	const char *calls[] = { "closed;closed;", "route POST /body#0;body 2;closed;closed;", "closed;" };
	uint64_t t0 = atomic_load(&f->w->timeouts), i0 = atomic_load(&f->w->idle_closes);
	for (int i = 0; i < 3; i++) {
		char buf[1024];
		bool closed;
		rec_reset();
		int fd = fx_client(f);
		fx_send(fd, reqs[i], strlen(reqs[i]));
		fx_read(f, fd, buf, sizeof(buf), 1 << 20, 2000, &closed);
		fx_pump(f, 3);
		CHECK(closed);
		if (i < 2)
			CHECK(!strncmp(buf, "HTTP/1.1 408 Request Timeout\r\n", 30));
		else
			CHECK_EQ(strlen(buf), 0);
		CHECK(!strcmp(rec, calls[i]));
		close(fd);
	}
	CHECK_EQ(atomic_load(&f->w->timeouts) - t0, 2);
	CHECK_EQ(atomic_load(&f->w->idle_closes) - i0, 1);
	cfg->header_to_ms = cfg->body_to_ms = cfg->idle_to_ms = 60000;
}

/* Last: the store fails. Requests get 503 naming it (route is not
 * called; a body in progress is released), /stats still answers, and the
 * worker stops after its drain. */
static void test_failed_store(struct fixture *f)
{
	char buf[4096];
	bool closed;
	int mid = fx_client(f);
	const char *part = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab";
	fx_send(mid, part, strlen(part));
	fx_pump(f, 3);
	rec_reset();
	paste_store_fail(f->s->store, -EIO, "store %s: injected by the test", f->store);
	int fd = fx_client(f);
	fx_send(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", 28);
	fx_read(f, fd, buf, sizeof(buf), 1 << 20, 2000, &closed);
	CHECK(closed);
	CHECK(!strncmp(buf, "HTTP/1.1 503 Service Unavailable\r\n", 34));
	CHECK(strstr(buf, "Retry-After: 5\r\n") && strstr(buf, "store failed: store "));
	fx_send(mid, "cd", 2);
	fx_read(f, mid, buf, sizeof(buf), 1 << 20, 2000, &closed);
	CHECK(closed && strstr(buf, " 503 "));
	fx_pump(f, 3);
	/* fd's CLOSED; mid: the rest of its body, released before its 503, its CLOSED */
	CHECK(!strcmp(rec, "closed;body 2;closed;closed;"));
	int s = fx_client(f);
	fx_send(s, "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n", 32);
	fx_replies(f, s, buf, sizeof(buf), 1, false, 2000);
	CHECK(strstr(buf, "200 OK") && strstr(buf, "\"store_failed\":true}"));
	int r = 0;
	uint64_t end = fx_ms() + 3000;
	while (r >= 0 && fx_ms() < end)
		r = server_worker_pass(f->w, 50);
	CHECK(r < 0);      /* the drain ended */
	close(s);
	close(fd);
	close(mid);
}

static void run(enum paste_engine e)
{
	struct fixture f;
	int o = opens, c = closes;
	if (fx_open(&f, e, &hc, "http-proto", NULL)) {
		CHECK(!"server open");
		return;
	}
	cur = &f;
	CHECK_EQ(opens, o + 1);
	test_simple(&f);
	test_pipelined(&f);
	test_split_everywhere(&f);
	test_expect_continue(&f);
	test_protocol_answers(&f);
	test_targets(&f);
	test_close_mid_body(&f);
	test_timeouts(&f);
	test_failed_store(&f);
	CHECK_EQ(layout_bad, 0);
	fx_close(&f);
	CHECK_EQ(closes, c + 1);
}

int main(void)
{
	struct paste_error err;
	test_layout();
	test_status_reasons();
	run(PASTE_ENGINE_EPOLL);
	run(PASTE_ENGINE_EPOLL_BATCH);
	if (paste_uring_probe(&err) == 0)
		run(PASTE_ENGINE_URING);
	else
		printf("skipping the uring half: %s\n", err.msg);
	return check_done();
}
