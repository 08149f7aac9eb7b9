/*
 * kv_replica.c - the replica role's link to its primary (kv_replica.h);
 * the primary's side, propagation and the commands are kv_repl.c.
 *
 * The link is a non-blocking socket the pass
 * polls (every LINK_POLL_MS while it is open), the handshake (AUTH with
 * masterauth/masteruser when set, PING,
 * REPLCONF, PSYNC ? -1), the primary's RDB loaded whole (kv_rdb_load:
 * every database replaced), then its stream applied command by command
 * as a client whose replies go nowhere; a transaction (MULTI ... EXEC in
 * the stream) is applied once it is all in, in one group.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmd_block.h"
#include "kv_hash.h"
#include "kv_rdb.h"
#include "kv_repl.h"
#include "kv_set.h"
#include "kv_replica.h"

struct kv_link kv_link = { .fd = -1 };

void kv_link_close(uint64_t now)
{
	if (kv_link.fd >= 0)
		close(kv_link.fd);
	kv_link.fd = -1;
	if (kv_link.st == L_UP || !kv_link.down_since)
		kv_link.down_since = now ? now : 1;
	kv_link.st = L_DOWN;
	kv_link.len = 0;
	kv_link.next_try = now + LINK_RETRY_MS;
}

static bool link_write(const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t k = send(kv_link.fd, b, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return false;           /* a full socket for a few bytes: the link is bad */
		b += k;
		n -= (size_t)k;
	}
	return true;
}

static bool link_cmd(const struct paste_resp_arg *av, uint32_t n)
{
	struct kv_rdb_buf b = { 0 };
	kv_rdb_put_cmd(&b, av, n);
	bool ok = !b.oom && link_write(b.p, b.len);
	kv_rdb_free(&b);
	return ok;
}

static void link_ack(uint64_t off)
{
	char num[24];
	struct paste_resp_arg av[3] = { { "REPLCONF", 8 }, { "ACK", 3 },
					 { num, (size_t)snprintf(num, sizeof(num), "%" PRIu64, off) } };
	link_cmd(av, 3);
}

/* The primary's address: an IPv4 address, or localhost. */
static bool link_connect(uint64_t now)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)kv_link.mport) };
	const char *h = !strcasecmp(kv_link.mhost, "localhost") ? "127.0.0.1" : kv_link.mhost;
	if (inet_pton(AF_INET, h, &a.sin_addr) != 1 || !kv_link.mport) {
		kv_link_close(now);
		return false;
	}
	kv_link.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (kv_link.fd < 0) {
		kv_link_close(now);
		return false;
	}
	if (connect(kv_link.fd, (struct sockaddr *)&a, sizeof(a)) && errno != EINPROGRESS) {
		kv_link_close(now);
		return false;
	}
	kv_link.st = L_CONNECTING;
	kv_link.last_io = now;
	return true;
}

static bool link_handshake(void)
{
	char port[16];
	struct paste_resp_arg ping[1] = { { "PING", 4 } };
	struct paste_resp_arg lp[3] = {
		{ "REPLCONF", 8 }, { "listening-port", 14 },
		{ port, (size_t)snprintf(port, sizeof(port), "%u", kv_resp_port(&kv_link.x)) } };
	struct paste_resp_arg capa[3] = { { "REPLCONF", 8 }, { "capa", 4 }, { "psync2", 6 } };
	kv_link.replies = 0;
	kv_link.want = 3;
	/* masterauth (and masteruser): AUTH first, as Redis's replica does
	 * after its PING; a refusal drops the link and the next try reads
	 * the settings again. */
	const char *pass = kv_config_kept("masterauth"), *user = kv_config_kept("masteruser");
	if (pass && *pass) {
		struct paste_resp_arg auth[3] = { { "AUTH", 4 } };
		uint32_t n = 1;
		if (user && *user)
			auth[n++] = (struct paste_resp_arg){ user, strlen(user) };
		auth[n++] = (struct paste_resp_arg){ pass, strlen(pass) };
		if (!link_cmd(auth, n))
			return false;
		kv_link.want = 4;
	}
	return link_cmd(ping, 1) && link_cmd(lp, 3) && link_cmd(capa, 3);
}

/* PSYNC once the handshake's replies are in: Redis refuses it
 * while its replies to the connection wait to be sent. */
static bool link_psync(void)
{
	struct paste_resp_arg psync[3] = { { "PSYNC", 5 }, { "?", 1 }, { "-1", 2 } };
	return link_cmd(psync, 3);
}

static void consume(size_t n)
{
	memmove(kv_link.in, kv_link.in + n, kv_link.len - n);
	kv_link.len -= n;
}

/* One command of the stream at in[at..): its arguments (pointing into
 * in), and its end; 0 when it is not all in yet, -1 when malformed. */
static int parse_cmd(size_t at, struct paste_resp_arg **av, uint32_t *cap, uint32_t *n, size_t *end)
{
	const uint8_t *p = kv_link.in, *e = kv_link.in + kv_link.len;
	const uint8_t *q = p + at;
	if (q >= e)
		return 0;
	if (*q != '*')
		return -1;
	const uint8_t *nl = memchr(q, '\n', (size_t)(e - q));
	if (!nl)
		return 0;
	long cnt = strtol((const char *)q + 1, NULL, 10);
	if (cnt < 1 || cnt > 1000000)
		return -1;
	if ((uint32_t)cnt > *cap) {
		struct paste_resp_arg *v = realloc(*av, (size_t)cnt * sizeof(*v));
		if (!v)
			return -1;
		*av = v;
		*cap = (uint32_t)cnt;
	}
	q = nl + 1;
	for (long i = 0; i < cnt; i++) {
		if (q >= e)
			return 0;
		if (*q != '$')
			return -1;
		nl = memchr(q, '\n', (size_t)(e - q));
		if (!nl)
			return 0;
		long long len = strtoll((const char *)q + 1, NULL, 10);
		if (len < 0)
			return -1;
		q = nl + 1;
		if ((size_t)(e - q) < (size_t)len + 2)
			return 0;
		(*av)[i] = (struct paste_resp_arg){ (const char *)q, (size_t)len };
		q += len + 2;
	}
	*n = (uint32_t)cnt;
	*end = (size_t)(q - p);
	return 1;
}

/* One command of the primary's, its replies dropped. */
static void apply(struct kv *kv, const struct paste_resp_arg *av, uint32_t n)
{
	struct kv_cmd_rt *rt = kv_cmd_find(&av[0]);
	if (rt && rt->nsubs && n >= 2)
		rt = kv_cmd_sub(rt, &av[1]);
	if (!rt || !rt->c->fn)
		return;
	int arity = rt->c->arity;
	if ((arity > 0 && n != (uint32_t)arity) || (arity < 0 && n < (uint32_t)-arity))
		return;
	kv_run(&kv_link.x, kv, rt, av, n);
}

/* The stream in kv_link.in: every whole command (a transaction once whole). */
static bool link_stream(struct kv *kv)
{
	struct paste_resp_arg *av = NULL;
	uint32_t cap = 0, n;
	size_t at = 0, end;
	bool ok = true;
	kv_link.x.clock_ns = 0;          /* the link's context lasts: time each read afresh */
	for (;;) {
		int r = parse_cmd(at, &av, &cap, &n, &end);
		if (r <= 0) {
			ok = r == 0;
			break;
		}
		if (paste_resp_arg_eq(&av[0], "REPLCONF") && n >= 2 && paste_resp_arg_eq(&av[1], "GETACK")) {
			kv_link.off += end - at;
			kv_link.getack = true;        /* answered once what came before is durable */
			at = end;
			continue;
		}
		if (paste_resp_arg_eq(&av[0], "MULTI")) {
			/* Whole first: find its EXEC. */
			size_t t = end, tend = 0;
			struct paste_resp_arg *bv = NULL;
			uint32_t bcap = 0, bn;
			int rr;
			while ((rr = parse_cmd(t, &bv, &bcap, &bn, &tend)) == 1 &&
			       !paste_resp_arg_eq(&bv[0], "EXEC"))
				t = tend;
			free(bv);
			if (rr <= 0) {
				ok = rr == 0;
				break;
			}
			kv_admit(kv, tend - at);
			kv_clock(kv);
			bool group = kv_begin(kv) == 0;
			for (size_t u = end; u < t;) {
				size_t uend;
				if (parse_cmd(u, &av, &cap, &n, &uend) != 1)
					break;
				apply(kv, av, n);
				u = uend;
			}
			if (group && kv_commit(kv))
				kv_abort(kv);
			kv_link.off += tend - at;
			at = tend;
			continue;
		}
		apply(kv, av, n);
		kv_link.off += end - at;
		at = end;
	}
	free(av);
	consume(at);
	kv_block_serve(kv);
	return ok;
}

/* Lines of the handshake's replies, then the RDB's length and bytes. */
static bool link_input(struct kv *kv, uint64_t now)
{
	while (kv_link.st == L_HANDSHAKE) {
		uint8_t *nl = memchr(kv_link.in, '\n', kv_link.len);
		if (!nl)
			return true;
		size_t ll = (size_t)(nl - kv_link.in) + 1;
		if (kv_link.in[0] == '-') {     /* -NOAUTH, -WRONGPASS ...: try again later */
			fprintf(stderr, "pkvs: replication: the primary refused the handshake: %.*s\n",
				(int)(ll > 2 ? ll - 2 : 0), (const char *)kv_link.in);
			return false;
		}
		if (ll > 12 && !memcmp(kv_link.in, "+FULLRESYNC ", 12)) {
			unsigned long long off = 0;
			char id[41] = "";
			if (sscanf((const char *)kv_link.in + 12, "%40s %llu", id, &off) == 2) {
				kv_link.off = kv_link.acked_off = off;
				kv_link.pend_set = false;
				memcpy(kv_link.mreplid, id, sizeof(id));
			}
			kv_link.st = L_RDB;
			kv_link.rdb_len_known = false;
		} else if (ll > 9 && !memcmp(kv_link.in, "+CONTINUE", 9)) {
			return false;           /* never asked for */
		} else if (++kv_link.replies == kv_link.want && !link_psync()) {
			return false;
		}
		consume(ll);
	}
	if (kv_link.st == L_RDB) {
		if (!kv_link.rdb_len_known) {
			while (kv_link.len && kv_link.in[0] == '\n')
				consume(1);     /* the primary's keepalives */
			uint8_t *nl = memchr(kv_link.in, '\n', kv_link.len);
			if (!nl)
				return true;
			if (kv_link.in[0] != '$' || (kv_link.len > 5 && !memcmp(kv_link.in, "$EOF:", 5)))
				return false;
			kv_link.rdb_len = strtoull((const char *)kv_link.in + 1, NULL, 10);
			kv_link.rdb_len_known = true;
			consume((size_t)(nl - kv_link.in) + 1);
		}
		if (kv_link.len < kv_link.rdb_len)
			return true;
		kv_clock(kv);
		int r = kv_rdb_load(kv, kv_link.in, (size_t)kv_link.rdb_len);
		consume((size_t)kv_link.rdb_len);
		if (r) {
			/* The link drops and the next sync retries the load. */
			fprintf(stderr, r == -EBADMSG
				? "pkvs: replication: the primary's RDB is damaged (%s); data set left unchanged\n"
				: "pkvs: replication: loading the primary's RDB failed (%s); data set flushed and partly loaded\n",
				strerror(-r));
			return false;
		}
		kv_link.st = L_UP;
		kv_link.down_since = 0;
		kv_link.kc.db = 0;
		kv_link.last_ack = now;
	}
	if (kv_link.st == L_UP)
		return link_stream(kv);
	return true;
}

/* What ACK may report: an offset whose changes are durable here (the
 * persist object's epoch they were flushed in is published), so the
 * primary's WAIT counts a write only once a crash here keeps it. */
static void ack_progress(void)
{
	struct paste_persist *pp = kv_link.w->persist;
	uint64_t dur = paste_persist_durable(pp), ep = paste_persist_epoch(pp);
	if (kv_link.pend_set && kv_link.pend_epoch <= dur) {
		kv_link.acked_off = kv_link.pend_off;
		kv_link.pend_set = false;
	}
	if (kv_link.pend_set || kv_link.off == kv_link.acked_off)
		return;
	if (!paste_persist_pending(pp) && ep <= dur + 1) {
		kv_link.acked_off = kv_link.off;            /* nothing flushed waits for a barrier */
		return;
	}
	kv_link.pend_off = kv_link.off;
	kv_link.pend_epoch = ep;
	kv_link.pend_set = true;
}

void kv_link_step(struct kv *kv, uint64_t now)
{
	if (kv_link.fd < 0) {
		if (now >= kv_link.next_try)
			link_connect(now);
		return;
	}
	struct pollfd pf = { .fd = kv_link.fd, .events = POLLIN | (kv_link.st == L_CONNECTING ? POLLOUT : 0) };
	if (poll(&pf, 1, 0) < 0)
		return;
	if (kv_link.st == L_CONNECTING) {
		int err = 0;
		socklen_t el = sizeof(err);
		if (pf.revents & (POLLERR | POLLHUP) ||
		    (pf.revents & POLLOUT && (getsockopt(kv_link.fd, SOL_SOCKET, SO_ERROR, &err, &el) || err))) {
			kv_link_close(now);
			return;
		}
		if (!(pf.revents & POLLOUT)) {
			if (now - kv_link.last_io > 5000)
				kv_link_close(now);
			return;
		}
		if (!link_handshake()) {
			kv_link_close(now);
			return;
		}
		kv_link.st = L_HANDSHAKE;
		kv_link.last_io = now;
	}
	if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
		for (;;) {
			if (kv_link.cap - kv_link.len < 65536) {
				size_t c = kv_link.cap ? kv_link.cap * 2 : 131072;
				uint8_t *q = realloc(kv_link.in, c);
				if (!q) {
					kv_link_close(now);
					return;
				}
				kv_link.in = q;
				kv_link.cap = c;
			}
			ssize_t k = recv(kv_link.fd, kv_link.in + kv_link.len, kv_link.cap - kv_link.len, 0);
			if (k > 0) {
				kv_link.len += (size_t)k;
				kv_link.last_io = now;
				continue;
			}
			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			kv_link_close(now);        /* the primary closed */
			return;
		}
		if (!link_input(kv, now)) {
			kv_link_close(now);
			return;
		}
	}
	ack_progress();
	if (kv_link.st == L_UP && (now - kv_link.last_ack >= 1000 || (kv_link.getack && kv_link.acked_off == kv_link.off))) {
		link_ack(kv_link.acked_off);
		kv_link.last_ack = now;
		kv_link.getack = false;
	}
}

void kv_link_start(struct resp_ctx *x)
{
	kv_link_close(0);
	kv_link.next_try = 0;
	kv_link.down_since = x->w->now_ms ? x->w->now_ms : 1;
	kv_link.w = x->w;
	kv_link.ss = x->ss;
	kv_link.c = *x->c;
	kv_link.r = (struct resp_conn){ .proto = 2, .authed = true, .reply_off = true };
	kv_link.kc = (struct kv_resp_conn){ 0 };
	kv_link.x = (struct resp_ctx){ .w = x->w, .conn = x->conn, .c = &kv_link.c, .r = &kv_link.r, .sc = &kv_link.kc,
				 .ss = x->ss };
}
