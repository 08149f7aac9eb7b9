/*
 * cmd_dump.c - DUMP and RESTORE with Redis's payload: the value in RDB
 * (kv_rdb.h), the RDB version (2 bytes) and the CRC-64 (8 bytes), so a
 * payload moves between pkvs and Redis 7.0 either way.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "kv_evict.h"
#include "kv_notify.h"
#include "kv_rdb.h"
#include "kv_repl.h"

static void cmd_dump(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	if (kv_lookup(kv, &k, &o, true)) {
		resp_null(x);
		return;
	}
	struct kv_rdb_buf b = { 0 };
	int r = kv_rdb_dump(kv, &o, &b);
	if (r == -ENOMEM)
		resp_error(x, "ERR out of memory");
	else if (r)
		resp_error(x, "ERR the value could not be read (%s)", strerror(-r));
	else
		resp_bulk(x, b.p, b.len);
	kv_rdb_free(&b);
}

/* RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f], checked
 * in Redis's order. IDLETIME and FREQ set the key's access word (kv_evict.h)
 * after the write, as OBJECT IDLETIME / OBJECT FREQ then read it. */
static void cmd_restore(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	bool replace = false, absttl = false, idle = false, freq = false;
	int64_t idle_s = 0, freq_n = 0;
	for (uint32_t j = 4; j < n; j++) {
		uint32_t more = n - j - 1;
		int64_t v;
		if (paste_resp_arg_eq(&a[j], "REPLACE")) {
			replace = true;
		} else if (paste_resp_arg_eq(&a[j], "ABSTTL")) {
			absttl = true;
		} else if (paste_resp_arg_eq(&a[j], "IDLETIME") && more >= 1 && !freq) {
			if (!kv_arg_int(x, &a[++j], &v))
				return;
			if (v < 0) {
				resp_error(x, "ERR Invalid IDLETIME value, must be >= 0");
				return;
			}
			idle = true;
			idle_s = v;
		} else if (paste_resp_arg_eq(&a[j], "FREQ") && more >= 1 && !idle) {
			if (!kv_arg_int(x, &a[++j], &v))
				return;
			if (v < 0 || v > 255) {
				resp_error(x, "ERR Invalid FREQ value, must be >= 0 and <= 255");
				return;
			}
			freq = true;
			freq_n = v;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	bool had = kv_lookup(kv, &k, &o, false) == 0;
	if (!replace && had) {
		resp_error(x, "BUSYKEY Target key name already exists.");
		return;
	}
	int64_t ttl;
	if (!kv_arg_int(x, &a[2], &ttl))
		return;
	if (ttl < 0) {
		resp_error(x, "ERR Invalid TTL value, must be >= 0");
		return;
	}
	const uint8_t *p = (const uint8_t *)a[3].p;
	if (!kv_rdb_payload_ok(p, a[3].len)) {
		resp_error(x, "ERR DUMP payload version or checksum are wrong");
		return;
	}
	if (ttl && !absttl)
		ttl += kv->now_ms;
	if (ttl && ttl <= kv->now_ms) {
		/* Already expired: the key is only deleted (REPLACE). */
		if (replace && had && kv_remove(kv, &k) > 0)
			kv_notify(KV_NOTIFY_GENERIC, "del", &k);
		resp_ok(x);
		return;
	}
	int r = kv_rdb_restore(kv, &k, p, a[3].len - 10, ttl ? ttl : KV_NO_TTL);
	if (r == -EBADMSG) {
		resp_error(x, "ERR Bad data format");
		return;
	}
	if (r) {
		kv_reply_errno(x, r);
		return;
	}
	/* As Redis: FREQ counts under an lfu policy, IDLETIME under any other. */
	if (idle && !kv_access_lfu)
		kv_access_set_idle(kv, k.db, k.p, k.len, (uint64_t)idle_s);
	else if (freq && kv_access_lfu)
		kv_access_set_freq(kv, k.db, k.p, k.len, (uint32_t)freq_n);
	kv_notify(KV_NOTIFY_GENERIC, "restore", &k);
	resp_ok(x);
}


/* ------------------------------------------------------------ MIGRATE */

/* A connection to host:port (an address, or localhost) within timeout_ms,
 * its reads and writes bounded by it too: the socket, or -1. */
static int dial(const struct paste_resp_arg *host, const struct paste_resp_arg *port,
		int64_t timeout_ms)
{
	char h[256], p[16];
	if (host->len >= sizeof(h) || port->len >= sizeof(p))
		return -1;
	memcpy(h, host->p, host->len);
	h[host->len] = 0;
	memcpy(p, port->p, port->len);
	p[port->len] = 0;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST }, *ai;
	if (getaddrinfo(!strcasecmp(h, "localhost") ? "127.0.0.1" : h, p, &hints, &ai))
		return -1;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int r = fd < 0 ? -1 : connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (fd < 0 || (r && errno != EINPROGRESS)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct pollfd pf = { .fd = fd, .events = POLLOUT };
	int err = 0, fl = fcntl(fd, F_GETFL);
	socklen_t el = sizeof(err);
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	if (poll(&pf, 1, (int)timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err ||
	    fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The next reply line of the target (a status or an error) into line. */
static bool read_line(int fd, char *buf, size_t *have, char *line, size_t cap)
{
	for (;;) {
		char *nl = memchr(buf, '\n', *have);
		if (nl) {
			size_t l = (size_t)(nl - buf) + 1;
			size_t c = l - 1 < cap - 1 ? l - 1 : cap - 1;
			if (c && buf[c - 1] == '\r')
				c--;
			memcpy(line, buf, c);
			line[c] = 0;
			memmove(buf, buf + l, *have - l);
			*have -= l;
			return true;
		}
		if (*have == 4096)
			return false;
		ssize_t k = recv(fd, buf + *have, 4096 - *have, 0);
		if (k <= 0)
			return false;
		*have += (size_t)k;
	}
}

/* MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
 * [AUTH password] [AUTH2 username password] [KEYS key ...], as Redis's:
 * the keys' payloads sent as RESTORE on a connection of its own (none is
 * kept between calls), the target's replies read, each key restored
 * deleted here unless COPY. The event loop waits for it (Redis's waits
 * too), at most timeout ms per step. */
static void cmd_migrate(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	bool copy = false, replace = false;
	const struct paste_resp_arg *user = NULL, *pass = NULL;
	uint32_t first = 3, nkeys = 1;
	for (uint32_t j = 6; j < n; j++) {
		uint32_t more = n - 1 - j;
		if (paste_resp_arg_eq(&a[j], "COPY")) {
			copy = true;
		} else if (paste_resp_arg_eq(&a[j], "REPLACE")) {
			replace = true;
		} else if (paste_resp_arg_eq(&a[j], "AUTH") && more >= 1) {
			pass = &a[++j];
		} else if (paste_resp_arg_eq(&a[j], "AUTH2") && more >= 2) {
			user = &a[++j];
			pass = &a[++j];
		} else if (paste_resp_arg_eq(&a[j], "KEYS")) {
			if (a[3].len) {
				resp_error(x, "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string");
				return;
			}
			first = j + 1;
			nkeys = n - j - 1;
			break;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	int64_t timeout, db;
	if (!kv_arg_int(x, &a[5], &timeout) || !kv_arg_int(x, &a[4], &db))
		return;
	if (timeout <= 0)
		timeout = 1000;
	/* The keys here (an expired or absent one is left out). */
	struct kv_rdb_buf out = { 0 };
	uint32_t *sent = malloc((nkeys ? nkeys : 1) * sizeof(*sent)), ns = 0;
	if (!sent) {
		resp_error(x, "ERR out of memory");
		return;
	}
	char num[24];
	if (user || pass) {
		struct paste_resp_arg av[3] = { { "AUTH", 4 } };
		uint32_t k = 1;
		if (user)
			av[k++] = *user;
		av[k++] = *pass;
		kv_rdb_put_cmd(&out, av, k);
	}
	struct paste_resp_arg sel[2] = { { "SELECT", 6 },
					 { num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)db) } };
	kv_rdb_put_cmd(&out, sel, 2);
	for (uint32_t i = 0; i < nkeys; i++) {
		struct kv_key k;
		struct kv_obj o;
		const struct paste_resp_arg *key = &a[first + i];
		if (key->len > kv_max_key(kv))
			continue;
		kv_key_init(kv, &k, kv_resp_db(x), key->p, key->len);
		if (kv_lookup(kv, &k, &o, false))
			continue;
		int64_t ttl = 0;
		if (o.expire_ms != KV_NO_TTL) {
			ttl = o.expire_ms - kv->now_ms;
			if (ttl < 1)
				ttl = 1;
		}
		struct kv_rdb_buf pl = { 0 };
		if (kv_rdb_dump(kv, &o, &pl)) {
			kv_rdb_free(&pl);
			continue;
		}
		char t[24];
		struct paste_resp_arg av[5] = { { "RESTORE", 7 }, *key,
						{ t, (size_t)snprintf(t, sizeof(t), "%lld", (long long)ttl) },
						{ (const char *)pl.p, pl.len }, { "REPLACE", 7 } };
		kv_rdb_put_cmd(&out, av, replace ? 5 : 4);
		kv_rdb_free(&pl);
		sent[ns++] = first + i;
	}
	if (!ns) {
		resp_simple(x, "NOKEY");
		goto done;
	}
	if (out.oom) {
		resp_error(x, "ERR out of memory");
		goto done;
	}
	int fd = dial(&a[1], &a[2], timeout);
	if (fd < 0) {
		resp_error(x, "IOERR error or timeout connecting to the client");
		goto done;
	}
	bool ok = true;
	for (size_t at = 0; at < out.len && ok;) {
		ssize_t k = send(fd, out.p + at, out.len - at, MSG_NOSIGNAL);
		if (k <= 0)
			ok = false;
		else
			at += (size_t)k;
	}
	if (!ok) {
		close(fd);
		resp_error(x, "IOERR error or timeout writing to target instance");
		goto done;
	}
	char buf[4096], line[512];
	size_t have = 0;
	const char *fail = NULL;
	char failbuf[512];
	/* AUTH's and SELECT's replies, then one per key. */
	for (uint32_t i = 0; i < (pass ? 2u : 1u) && ok; i++) {
		ok = read_line(fd, buf, &have, line, sizeof(line));
		if (ok && line[0] == '-' && !fail) {
			snprintf(failbuf, sizeof(failbuf), "%s", line + 1);
			fail = failbuf;
		}
	}
	for (uint32_t i = 0; i < ns && ok; i++) {
		ok = read_line(fd, buf, &have, line, sizeof(line));
		if (!ok)
			break;
		if (line[0] == '-') {
			if (!fail) {
				snprintf(failbuf, sizeof(failbuf), "%s", line + 1);
				fail = failbuf;
			}
		} else if (!copy && !fail) {
			struct kv_key k;
			kv_key_init(kv, &k, kv_resp_db(x), a[sent[i]].p, a[sent[i]].len);
			if (kv_remove(kv, &k) > 0)
				kv_notify(KV_NOTIFY_GENERIC, "del", &k);
		}
	}
	close(fd);
	if (!ok)
		resp_error(x, "IOERR error or timeout reading to target instance");
	else if (fail)
		resp_error(x, "ERR Target instance replied with error: %s", fail);
	else
		resp_ok(x);
done:
	free(sent);
	kv_rdb_free(&out);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_dump[] = {
	{ "dump", 2, "readonly", "keyspace", "The key's value in Redis's serialized form (RDB, version, CRC-64).", cmd_dump, 1, 1, 1 },
	{ "restore", -4, "write denyoom", "keyspace", "Creates a key from a DUMP payload (REPLACE, ABSTTL, IDLETIME, FREQ).", cmd_restore, 1, 1, 1 },
	{ "migrate", -6, "write", "keyspace", "Moves (or copies) keys to another Redis-protocol server with DUMP payloads (RESTORE there).", cmd_migrate, 3, 3, 1 },
	{ 0 },
};
