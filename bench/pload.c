/*
 * pload: a closed-loop HTTP/1.1 (and, with --resp, Redis-protocol) load
 * generator on io_uring, for bench/.
 *
 * Why it exists: on loopback the client's CPU is the other half of every
 * measurement. One wrk thread spends ~14 us of CPU per 1156-byte POST
 * (perf: an epoll_ctl, an epoll_wait share, a read() and a write()
 * per request, plus the server's TCP receive, which loopback runs in the
 * sender's context), so in the WAL benchmark wrk saturates its CPU before
 * the server does. pload does what `wrk -t1 -cN` does without pipelining
 * (N connections, one request outstanding on each, the same bytes every
 * time, TCP_NODELAY) but queues every connection's send and receive in one
 * io_uring_enter per pass, on registered files, and parses only the status
 * line and Content-Length. It is a measuring tool, not a product: one
 * thread, one request shape, HTTP/1.1 responses with Content-Length only
 * (or RESP2 replies).
 *
 * Usage: pload [--reconnect] [--resp [-P DEPTH]] [-k KEYSPACE] -c CONNS
 *              -d SECONDS -f REQUEST_FILE HOST PORT
 *   The request file holds the exact bytes of one request (keep-alive).
 *   --reconnect (-r): one request per TCP connection, the short-connection
 *   workload: the request gets "Connection: close", the server answers and
 *   closes, pload reads the response and the EOF, closes, and opens the
 *   slot's next connection (socket, connect, send as one linked io_uring
 *   chain into the same fixed-file slot, then the multishot receive).
 *   --resp (-R): the Redis protocol instead of HTTP. The file holds one or
 *   more RESP commands (arrays of bulk strings, pipelined as they stand);
 *   -P DEPTH sends the file DEPTH times back to back. Each connection has
 *   that one batch in flight and sends the next when every reply of it has
 *   arrived (as redis-benchmark -P does); replies are framed by
 *   pload_resp.c (RESP2: every type, nested arrays, nulls), and counted one
 *   by one: requests are commands, error replies are counted like non-2xx.
 *   --keyspace N (-k): every "__rand_int__" in the request becomes a fresh
 *   random 12-digit number below N for each send (redis-benchmark -r), in
 *   a copy of the request per connection (either protocol).
 *   Prints one JSON object on stdout: requests, elapsed_s, rps, latency
 *   (mean/p50/p99/max in us, from a 1-us histogram up to 1 s), non2xx
 *   (status >= 400, as wrk counts "Non-2xx or 3xx"), errors by kind, and the
 *   client's own CPU time per request. Exit 0 on a completed run, 1 on bad
 *   usage or set-up failure, 2 if no connection was left alive.
 *
 * Cost per request: one send SQE (its CQE skipped on success) and one CQE
 * of the connection's multishot receive (provided-buffer ring), on a fixed
 * file; one clock read per pass; syscalls per request ~ 1 / requests per
 * pass. With --reconnect: five SQEs (close, socket, connect, send, receive)
 * and two CQEs (the response, the EOF) per connection, still no syscall of
 * its own. With --resp -P DEPTH: one send SQE per DEPTH x commands, one CQE
 * per receive (replies framed in place, bulk payloads skipped by count),
 * plus 12 digits written per __rand_int__ with --keyspace.
 */
#include "pload_run.h"

static uint64_t user_data(unsigned idx, uint32_t gen, unsigned op)
{
	return ((uint64_t)gen << 32) | ((uint64_t)idx << 2) | op;
}

static struct io_uring_sqe *get_sqe(struct load *L)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&L->ring);
	if (!sqe) {               /* SQ full: flush it; completions wait in the CQ */
		int r = io_uring_submit(&L->ring);
		if (r < 0)
			die("io_uring_submit", -r);
		sqe = io_uring_get_sqe(&L->ring);
		if (!sqe)
			die("io_uring_get_sqe", EBUSY);
	}
	return sqe;
}

/* A linked chain must not be cut by a submit in its middle: make room first. */
static void reserve_sqes(struct load *L, unsigned n)
{
	if (io_uring_sq_space_left(&L->ring) >= n)
		return;
	int r = io_uring_submit(&L->ring);
	if (r < 0)
		die("io_uring_submit", -r);
	if (io_uring_sq_space_left(&L->ring) < n)
		die("io_uring_sq_space_left", EBUSY);
}

/* One multishot receive per connection lives as long as the connection:
 * no poll re-arm per request. Data lands in the shared buffer ring. */
static void arm_recv(struct load *L, unsigned idx)
{
	struct io_uring_sqe *sqe = get_sqe(L);
	io_uring_prep_recv_multishot(sqe, (int)idx, NULL, 0, 0);
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
	sqe->buf_group = 0;
	io_uring_sqe_set_data64(sqe, user_data(idx, L->conns[idx].gen, OP_RECV));
}

static uint64_t next_rand(struct load *L)
{
	uint64_t x = L->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	L->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* --keyspace: a uniform number below N, zero-padded, over each placeholder.
 * The previous send of this copy is over: every reply to it has arrived
 * (or the connection it went to is gone). */
static void randomize(struct load *L, char *req)
{
	for (unsigned i = 0; i < L->nrand; i++) {
		uint64_t v = (uint64_t)(((unsigned __int128)next_rand(L) * L->keyspace) >> 64);
		char *p = req + L->rand_off[i] + RAND_LEN;
		for (unsigned j = 0; j < RAND_LEN; j++) {
			*--p = (char)('0' + v % 10);
			v /= 10;
		}
	}
}

/* MSG_WAITALL makes the kernel finish a short send itself, so a
 * successful send needs no completion at all. The send time is the pass's
 * clock: the request leaves at this pass's io_uring_enter. */
static struct io_uring_sqe *send_request(struct load *L, unsigned idx)
{
	struct conn *c = &L->conns[idx];
	const char *req = L->req;
	if (c->req) {
		randomize(L, c->req);
		req = c->req;
	}
	if (L->resp) {
		c->outstanding = L->batch_cmds;
		pload_resp_init(&c->rp);
	}
	struct io_uring_sqe *sqe = get_sqe(L);
	io_uring_prep_send(sqe, (int)idx, req, L->req_len, MSG_WAITALL | MSG_NOSIGNAL);
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, user_data(idx, c->gen, OP_SEND));
	c->have = 0;
	c->in_body = false;
	c->sent_ns = L->now;
	return sqe;
}

/* --reconnect: the slot's next connection, one linked chain (a submit
 * never splits it). The old socket's multishot receive has ended (EOF or
 * error), so nothing refers to it; closing it is hard-linked so the chain
 * goes on even if there is nothing to close. The socket goes into the same
 * fixed-file slot, then connect, send and the receive run in order. Only
 * failures post completions before the response: a failed socket or
 * connect (OP_CONNECT) retires the slot, and the generation bump then
 * makes the cancelled rest of its chain stale. */
static void next_connection(struct load *L, unsigned idx)
{
	struct conn *c = &L->conns[idx];
	c->gen++;
	c->answered = false;
	reserve_sqes(L, CHAIN_SQES);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&L->ring);
	io_uring_prep_close_direct(sqe, idx);
	sqe->flags |= IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, user_data(idx, c->gen, OP_CLOSE));
	sqe = io_uring_get_sqe(&L->ring);
	io_uring_prep_socket_direct(sqe, L->addr.ss_family, SOCK_STREAM, 0, idx, 0);
	sqe->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, user_data(idx, c->gen, OP_CONNECT));
	sqe = io_uring_get_sqe(&L->ring);
	io_uring_prep_connect(sqe, (int)idx, (struct sockaddr *)&L->addr, L->addr_len);
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, user_data(idx, c->gen, OP_CONNECT));
	send_request(L, idx)->flags |= IOSQE_IO_LINK;
	arm_recv(L, idx);
}

static int connect_one(struct load *L)
{
	int fd = socket(L->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&L->addr, L->addr_len) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* A failed connection is replaced (like wrk does), in the same file slot.
 * shutdown() ends the old socket's multishot receive (its last CQE carries
 * the old generation and is ignored) before the slot is reused. */
static void reconnect(struct load *L, unsigned idx, uint64_t *counter)
{
	struct conn *c = &L->conns[idx];
	(*counter)++;
	if (L->reconnect) {
		/* After an error the old receive may still be armed, holding the
		 * socket open past the slot's close: cancel it (a failed cancel
		 * and the cancelled receive carry the old generation: stale). */
		struct io_uring_sqe *sqe = get_sqe(L);
		io_uring_prep_cancel64(sqe, user_data(idx, c->gen, OP_RECV), 0);
		sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
		io_uring_sqe_set_data64(sqe, user_data(idx, c->gen, OP_CLOSE));
		next_connection(L, idx);
		return;
	}
	shutdown(c->fd, SHUT_RDWR);
	close(c->fd);
	c->gen++;
	int fd = connect_one(L);
	int r = io_uring_register_files_update(&L->ring, idx, fd < 0 ? &(int){ -1 } : &fd, 1);
	if (r < 0)
		die("io_uring_register_files_update", -r);
	if (fd < 0) {
		L->err_connect++;
		c->alive = false;
		c->fd = -1;
		L->alive--;
		return;
	}
	c->fd = fd;
	arm_recv(L, idx);
	send_request(L, idx);
}

/* One response (--resp: one reply) is complete: its latency. */
static void count_done(struct load *L, const struct conn *c)
{
	uint64_t us = (L->now - c->sent_ns) / 1000;
	L->done++;
	L->lat_sum_us += us;
	if (us > L->lat_max_us)
		L->lat_max_us = us;
	L->hist[us < HIST_US ? us : HIST_US - 1]++;
}

static void complete_response(struct load *L, unsigned idx, int status)
{
	struct conn *c = &L->conns[idx];
	count_done(L, c);
	if (status >= 400)
		L->non2xx++;
	if (L->reconnect)
		c->answered = true;       /* the server's close comes next */
	else
		send_request(L, idx);
}

/* --resp: n bytes of connection idx's reply stream, framed where they
 * landed (the framer keeps its state across receives, nothing is copied).
 * Each reply's latency runs from the batch's send; the next batch goes out
 * when the last reply of this one is in. Bytes past the batch's replies,
 * and anything that is not RESP2, are protocol (parse) errors. */
static void on_resp_data(struct load *L, unsigned idx, const char *data, size_t n)
{
	struct conn *c = &L->conns[idx];
	while (n) {
		size_t used;
		int r = c->outstanding ? pload_resp_feed(&c->rp, data, n, &used) : -1;
		if (r == 0)
			return;
		if (r < 0) {
			reconnect(L, idx, &L->err_parse);
			return;
		}
		data += used;
		n -= used;
		count_done(L, c);
		if (c->rp.type == '-')
			L->non2xx++;
		if (c->rp.null)
			L->nulls++;
		if (--c->outstanding == 0 && n == 0) {
			send_request(L, idx);
			return;
		}
	}
}

/* n bytes of connection idx's response stream. One request is in flight,
 * so anything past the end of its response is a protocol error. The head
 * is parsed where it landed; only a head split across receives is copied. */
static void on_data(struct load *L, unsigned idx, const char *data, size_t n)
{
	struct conn *c = &L->conns[idx];
	if (L->resp) {
		on_resp_data(L, idx, data, n);
		return;
	}
	if (c->answered) {                      /* --reconnect: bytes after the response */
		reconnect(L, idx, &L->err_parse);
		return;
	}
	if (c->in_body) {
		if (n > c->remaining) {
			reconnect(L, idx, &L->err_parse);
			return;
		}
		c->remaining -= n;
		if (c->remaining == 0)
			complete_response(L, idx, c->status);
		return;
	}
	const char *head = data;
	size_t len = n;
	if (c->have) {
		if (c->have + n > RESP_BUF) {
			reconnect(L, idx, &L->err_parse);   /* head larger than we keep */
			return;
		}
		memcpy(c->buf + c->have, data, n);
		c->have += (uint32_t)n;
		head = c->buf;
		len = c->have;
	}
	struct pload_response resp;
	int r = pload_parse_response(head, len, &resp);
	if (r == 0) {
		if (head == data) {
			if (n > RESP_BUF) {
				reconnect(L, idx, &L->err_parse);
				return;
			}
			memcpy(c->buf, data, n);
			c->have = (uint32_t)n;
		}
		return;
	}
	if (r < 0 || len > resp.total) {        /* malformed, or bytes nobody asked for */
		reconnect(L, idx, &L->err_parse);
		return;
	}
	if (len == resp.total) {
		complete_response(L, idx, resp.status);
		return;
	}
	c->in_body = true;
	c->have = 0;
	c->remaining = resp.total - len;
	c->status = resp.status;
}

static void on_recv(struct load *L, unsigned idx, struct io_uring_cqe *cqe)
{
	struct conn *c = &L->conns[idx];
	bool more = cqe->flags & IORING_CQE_F_MORE;
	if (cqe->res > 0) {
		unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		uint32_t gen = c->gen;
		on_data(L, idx, L->bufs + (size_t)bid * RING_BUF, (size_t)cqe->res);
		if (gen != c->gen)
			return;           /* replaced: the new connection has its receive */
		if (!more)
			arm_recv(L, idx);
	} else if (cqe->res == -ENOBUFS) {
		arm_recv(L, idx);         /* the ring ran dry for a moment */
	} else if (cqe->res == 0 && c->answered) {
		L->closed++;              /* --reconnect: the server closed after answering */
		next_connection(L, idx);
	} else {                      /* 0: the server closed the connection */
		reconnect(L, idx, &L->err_read);
	}
}

/* --reconnect: the socket or the connect of a chain failed (the server is
 * gone, or out of ports): the slot retires, as a failed reconnect does in
 * keep-alive mode. */
static void on_connect_failed(struct load *L, unsigned idx)
{
	struct conn *c = &L->conns[idx];
	L->err_connect++;
	c->gen++;                     /* the cancelled send and receive are stale */
	c->alive = false;
	L->alive--;
}

static void give_back(struct load *L, struct io_uring_cqe *cqe)
{
	if (!(cqe->flags & IORING_CQE_F_BUFFER))
		return;
	unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
	io_uring_buf_ring_add(L->br, L->bufs + (size_t)bid * RING_BUF, RING_BUF, (unsigned short)bid,
	                      io_uring_buf_ring_mask(L->nbufs), (int)L->returned++);
}

static void run(struct load *L, double seconds)
{
	uint64_t start = paste_clock_ns(), end = start + (uint64_t)(seconds * 1e9);
	L->now = start;
	for (unsigned i = 0; i < L->nconns; i++) {
		arm_recv(L, i);
		send_request(L, i);
	}
	for (;;) {
		uint64_t left = end > L->now ? end - L->now : 0;
		struct __kernel_timespec ts = { .tv_sec = (long long)(left / 1000000000u),
		                                .tv_nsec = (long long)(left % 1000000000u) };
		struct io_uring_cqe *cqe;
		int r = io_uring_submit_and_wait_timeout(&L->ring, &cqe, 1, &ts, NULL);
		if (r < 0 && r != -ETIME && r != -EINTR)
			die("io_uring_submit_and_wait_timeout", -r);
		L->now = paste_clock_ns();
		/* Completions reaped after the deadline are neither counted nor
		 * acted on: the run ends with this pass. */
		bool measuring = L->now < end;
		unsigned head, seen = 0;
		L->returned = 0;
		io_uring_for_each_cqe(&L->ring, head, cqe) {
			seen++;
			uint64_t ud = cqe->user_data;
			unsigned idx = (unsigned)(ud & 0xffffffffu) >> 2, op = ud & 3;
			if (idx < L->nconns && (uint32_t)(ud >> 32) == L->conns[idx].gen &&
			    L->conns[idx].alive && measuring) {
				if (op == OP_RECV)
					on_recv(L, idx, cqe);
				else if (op == OP_CONNECT)
					on_connect_failed(L, idx);
				else if (op == OP_SEND &&
					 (cqe->res < 0 || (size_t)cqe->res != L->req_len))
					reconnect(L, idx, &L->err_write);
			}
			give_back(L, cqe);    /* the data was consumed above */
		}
		io_uring_cq_advance(&L->ring, seen);
		io_uring_buf_ring_advance(L->br, (int)L->returned);
		if (!measuring || L->alive == 0)
			break;
	}
	double elapsed = (double)(L->now - start) / 1e9;
	if (elapsed > seconds)
		elapsed = seconds;        /* completions were counted up to the deadline */

	uint64_t p50 = 0, p99 = 0, acc = 0;
	bool got50 = false;
	for (unsigned us = 0; us < HIST_US && L->done; us++) {
		acc += L->hist[us];
		if (!got50 && acc * 2 >= L->done) {
			p50 = us;
			got50 = true;
		}
		if (acc * 100 >= L->done * 99) {
			p99 = us;
			break;
		}
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	printf("{\"requests\": %llu, \"elapsed_s\": %.3f, \"rps\": %.1f, "
	       "\"lat_mean_us\": %.1f, \"lat_p50_us\": %llu, \"lat_p99_us\": %llu, "
	       "\"lat_max_us\": %llu, \"non2xx\": %llu, \"socket_errors\": %llu, "
	       "\"errors\": {\"connect\": %llu, \"read\": %llu, \"write\": %llu, "
	       "\"parse\": %llu}, \"conns\": %u, \"conns_alive\": %u, "
	       "\"client_cpu_us_per_req\": %.2f",
	       (unsigned long long)L->done, elapsed, (double)L->done / elapsed,
	       L->done ? (double)L->lat_sum_us / (double)L->done : 0.0,
	       (unsigned long long)p50, (unsigned long long)p99,
	       (unsigned long long)L->lat_max_us, (unsigned long long)L->non2xx,
	       (unsigned long long)(L->err_connect + L->err_read + L->err_write + L->err_parse),
	       (unsigned long long)L->err_connect, (unsigned long long)L->err_read,
	       (unsigned long long)L->err_write, (unsigned long long)L->err_parse,
	       L->nconns, L->alive, L->done ? cpu_s * 1e6 / (double)L->done : 0.0);
	if (L->reconnect)
		printf(", \"reconnect\": true, \"connections\": %llu, \"cps\": %.1f",
		       (unsigned long long)L->closed, (double)L->closed / elapsed);
	if (L->resp)
		printf(", \"resp\": true, \"pipeline\": %u, \"commands_per_send\": %u, "
		       "\"error_replies\": %llu, \"null_replies\": %llu",
		       L->pipeline, L->batch_cmds, (unsigned long long)L->non2xx,
		       (unsigned long long)L->nulls);
	printf("}\n");
}

/* Two receive buffers per connection (one response in flight on each, the
 * buffers go back every pass), plus one per pipelined reply with --resp (up
 * to 64), a power of two as the ring wants. */
static void setup_buffers(struct load *L)
{
	unsigned per_conn = 2 + (L->resp ? (L->batch_cmds < 64 ? L->batch_cmds : 64) : 0);
	L->nbufs = 64;
	while (L->nbufs < per_conn * L->nconns && L->nbufs < 32768)
		L->nbufs *= 2;
	size_t ring_bytes = L->nbufs * sizeof(struct io_uring_buf);
	if (posix_memalign((void **)&L->br, 4096, ring_bytes) ||
	    posix_memalign((void **)&L->bufs, 4096, (size_t)L->nbufs * RING_BUF))
		die("posix_memalign", ENOMEM);
	memset(L->br, 0, ring_bytes);
	struct io_uring_buf_reg reg = { .ring_addr = (uint64_t)(uintptr_t)L->br,
	                                .ring_entries = L->nbufs, .bgid = 0 };
	int r = io_uring_register_buf_ring(&L->ring, &reg, 0);
	if (r < 0)
		die("io_uring_register_buf_ring (Linux 5.19+)", -r);
	io_uring_buf_ring_init(L->br);
	for (unsigned i = 0; i < L->nbufs; i++)
		io_uring_buf_ring_add(L->br, L->bufs + (size_t)i * RING_BUF, RING_BUF,
		                      (unsigned short)i, io_uring_buf_ring_mask(L->nbufs), (int)i);
	io_uring_buf_ring_advance(L->br, (int)L->nbufs);
}

static void usage(void)
{
	fprintf(stderr, "usage: pload [-r|--reconnect] [-R|--resp [-P DEPTH]] [-k KEYSPACE]\n"
	        "             -c CONNS -d SECONDS -f REQUEST_FILE HOST PORT\n"
	        "  closed-loop HTTP/1.1 load: CONNS connections, one request in flight on\n"
	        "  each, the bytes of REQUEST_FILE every time; prints one JSON line\n"
	        "  -r, --reconnect     a new TCP connection per request (Connection: close)\n"
	        "  -R, --resp          Redis protocol: REQUEST_FILE holds RESP commands\n"
	        "  -P, --pipeline N    --resp: send the file N times per batch (default 1)\n"
	        "  -k, --keyspace N    each __rand_int__ in the request: random, below N\n");
	exit(1);
}

int main(int argc, char **argv)
{
	struct load L = { 0 };
	long conns = 0;
	double seconds = 0;
	const char *file = NULL;
	int opt;
	static const struct option longopts[] = {
		{ "reconnect", no_argument, NULL, 'r' }, { "help", no_argument, NULL, 'h' },
		{ "resp", no_argument, NULL, 'R' }, { "pipeline", required_argument, NULL, 'P' },
		{ "keyspace", required_argument, NULL, 'k' }, { NULL, 0, NULL, 0 },
	};
	L.pipeline = 1;
	while ((opt = getopt_long(argc, argv, "c:d:f:rhRP:k:", longopts, NULL)) != -1) {
		char *end;
		switch (opt) {
		case 'r':
			L.reconnect = true;
			break;
		case 'R':
			L.resp = true;
			break;
		case 'P': {
			long depth = strtol(optarg, &end, 10);
			if (*end || depth < 1 || depth > 1024)
				usage();
			L.pipeline = (unsigned)depth;
			break;
		}
		case 'k':
			errno = 0;
			L.keyspace = strtoull(optarg, &end, 10);
			if (*end || errno || optarg[0] == '-' || L.keyspace < 1 ||
			    L.keyspace > 1000000000000ull)
				usage();
			break;
		case 'c':
			conns = strtol(optarg, &end, 10);
			if (*end || conns < 1 || conns > 60000)
				usage();
			break;
		case 'd':
			seconds = strtod(optarg, &end);
			if (*end || !(seconds > 0 && seconds <= 3600))
				usage();
			break;
		case 'f':
			file = optarg;
			break;
		default:
			usage();
		}
	}
	if (!conns || !seconds || !file || argc - optind != 2)
		usage();
	if (L.pipeline > 1 && !L.resp)
		pload_fail(NULL, "--pipeline needs --resp (HTTP: one request in flight per connection)");
	if (L.reconnect && L.resp)
		pload_fail(NULL, "--reconnect is for HTTP only");
	L.req = pload_read_file(file, &L.req_len);
	if (L.reconnect)
		pload_request_close(&L, file);
	if (L.resp)
		pload_resp_batch(&L, file);
	if (L.keyspace)
		pload_find_placeholders(&L, file, (unsigned long)conns);

	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai;
	int g = getaddrinfo(argv[optind], argv[optind + 1], &hints, &ai);
	if (g) {
		fprintf(stderr, "pload: %s port %s: %s\n", argv[optind], argv[optind + 1],
		        gai_strerror(g));
		return 1;
	}
	memcpy(&L.addr, ai->ai_addr, ai->ai_addrlen);
	L.addr_len = ai->ai_addrlen;
	freeaddrinfo(ai);

	L.nconns = (unsigned)conns;
	L.conns = calloc(L.nconns, sizeof *L.conns);
	L.hist = calloc(HIST_US, sizeof *L.hist);
	int *fds = calloc(L.nconns, sizeof *fds);
	if (!L.conns || !L.hist || !fds)
		die("calloc", ENOMEM);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < L.nconns + 64) {
		rl.rlim_cur = rl.rlim_max < L.nconns + 64 ? rl.rlim_max : L.nconns + 64;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	for (unsigned i = 0; i < L.nconns; i++) {
		int fd = connect_one(&L);
		if (fd < 0) {
			fprintf(stderr, "pload: connect to %s port %s: %s\n", argv[optind],
			        argv[optind + 1], strerror(-fd));
			return 1;
		}
		L.conns[i].fd = fds[i] = fd;
		L.conns[i].alive = true;
	}
	L.alive = L.nconns;
	if (L.keyspace)
		pload_copy_requests(&L);

	/* Up to two SQEs per connection per pass (--reconnect: a chain of five);
	 * DEFER_TASKRUN keeps completion work in this thread's io_uring_enter
	 * instead of interrupting it. */
	unsigned per_conn = L.reconnect ? CHAIN_SQES : 2;
	unsigned entries = per_conn * L.nconns < 4096 ? per_conn * L.nconns : 4096;
	if (entries < 8)
		entries = 8;
	struct io_uring_params p = { .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
	                                      IORING_SETUP_CQSIZE,
	                             .cq_entries = 4 * L.nconns > 2 * entries ? 4 * L.nconns : 2 * entries };
	int r = io_uring_queue_init_params(entries, &L.ring, &p);
	if (r == -EINVAL) {                 /* kernels before 6.1: no DEFER_TASKRUN */
		p.flags = IORING_SETUP_CQSIZE;
		r = io_uring_queue_init_params(entries, &L.ring, &p);
	}
	if (r < 0)
		die("io_uring_queue_init", -r);
	r = io_uring_register_files(&L.ring, fds, L.nconns);
	if (r < 0)
		die("io_uring_register_files", -r);
	if (L.reconnect) {
		/* The table holds the sockets: closing a slot must close its socket. */
		for (unsigned i = 0; i < L.nconns; i++) {
			close(fds[i]);
			L.conns[i].fd = -1;
		}
	}
	free(fds);
	setup_buffers(&L);

	run(&L, seconds);
	for (unsigned i = 0; i < L.nconns; i++) {
		if (L.conns[i].fd >= 0)
			close(L.conns[i].fd);
		free(L.conns[i].req);
	}
	free(L.rand_off);
	io_uring_queue_exit(&L.ring);
	int code = L.alive ? 0 : 2;
	free(L.conns);
	free(L.hist);
	free(L.bufs);
	free(L.br);
	free((void *)L.req);
	return code;
}
