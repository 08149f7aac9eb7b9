/*
 * kv_repl.c - replication (kv_repl.h).
 *
 * A unit of propagation is one command from a client (an EXEC, a script
 * with all it calls): kv_repl_run nests with kv_run, each command that
 * changed the data set (a change listener counts the changes) adds its
 * propagated form to the unit, and the outermost call sends the unit:
 * alone when it holds one command, wrapped in MULTI/EXEC when more,
 * nothing when none. A blocked client's pop, served after the command
 * that filled its key, is sent as its plain form (kv_repl_served_*). A
 * key a change touched outside any command (an HTTP write) is sent as its
 * whole value (RESTORE ... REPLACE ABSTTL) or DEL, before the next unit;
 * a key that expired, as DEL; an evicted key as its own DEL (UNLINK under
 * lazyfree-lazy-eviction) when it is evicted (kv_repl_evicted).
 *
 * Sections: the stream; propagation (Redis's rewrites of each command:
 * kv_repl_rewrite.c); WAIT; min-replicas; the pass (the replica role's
 * link: kv_replica.c); connections. The commands (SYNC, PSYNC, REPLCONF,
 * ROLE, REPLICAOF) and INFO's lines are cmd_repl.c.
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
#include "kv_repl_rewrite.h"
#include "kv_repl_int.h"

bool kv_repl_active;

struct kv_repl_state kv_rs = { .sel_db = -1 };

void kv_repl_new_replid(void)
{
	uint8_t b[20];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (uint8_t)(rand() >> 3);
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(kv_rs.replid + 2 * i, 3, "%02x", b[i]);
}

const char *kv_repl_replid(void)
{
	if (!kv_rs.replid[0])
		kv_repl_new_replid();
	return kv_rs.replid;
}

bool kv_repl_peer_ctx(const struct peer *c, struct resp_ctx *x)
{
	return resp_ctx_of(x, c->w, c->conn) && x->r->id == c->id && x->r->state != R_DEAD;
}

bool kv_repl_grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return true;
	uint32_t c = *cap ? *cap * 2 : 16;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, (size_t)c * size);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

/* ------------------------------------------------------------ the stream */

static void remove_replica(uint32_t i);

/* The replica class of client-output-buffer-limit (Redis's "slave"). */
static struct kv_outlimit rlim = { .cls = "slave" };

/* Bytes to every replica, behind the batch's barrier. A replica that
 * does not read would keep them all in DRAM: as Redis, one whose unsent
 * stream passes the replica class's limit is dropped (what is queued for
 * it goes) and must resynchronize. Its snapshot, queued before the stream,
 * is not counted: of what waits, at most what the stream added since the
 * snapshot is the stream's. */
static void stream_send(const void *p, size_t len)
{
	kv_outlimit_read(&rlim);
	kv_rs.offset += len;
	for (uint32_t i = 0; i < kv_rs.n; i++) {
		struct replica *rp = &kv_rs.r[i];
		struct resp_ctx x;
		if (!kv_repl_peer_ctx(&rp->c, &x))
			continue;
		paste_port_send(x.w->port, x.conn, p, len, PASTE_SEND_DURABLE);
		uint64_t q = paste_port_conn_queued(x.w->port, x.conn), added = kv_rs.offset - rp->synced;
		if (!kv_outlimit_over(&rlim, q < added ? q : added, x.w->now_ms, &rp->soft_since))
			continue;
		char peer[80], local[80];
		int fd;
		resp_conn_addr(&x, peer, local, sizeof(peer), &fd);
		fprintf(stderr, "pkvs: replica %s dropped: %" PRIu64 " bytes of its stream unsent, "
			"over client-output-buffer-limit's replica class\n", peer, q < added ? q : added);
		resp_drop(&x);
		remove_replica(i--);
	}
}

/* A command of the unit, in database db. */
void kv_repl_add_cmd(uint32_t db, const struct paste_resp_arg *av, uint32_t n)
{
	if (kv_rs.np == kv_rs.capp) {
		uint32_t c = kv_rs.capp ? kv_rs.capp * 2 : 16;
		size_t *o = realloc(kv_rs.poff, c * sizeof(*o));
		if (!o)
			return;
		kv_rs.poff = o;
		uint32_t *d = realloc(kv_rs.pdb, c * sizeof(*d));
		if (!d)
			return;
		kv_rs.pdb = d;
		kv_rs.capp = c;
	}
	kv_rs.poff[kv_rs.np] = kv_rs.pend.len;
	kv_rs.pdb[kv_rs.np++] = db;
	kv_rdb_put_cmd(&kv_rs.pend, av, n);
}

uint32_t kv_repl_mark(void)
{
	return kv_rs.np;
}

void kv_repl_rewind(uint32_t mark)
{
	if (mark < kv_rs.np) {
		kv_rs.pend.len = kv_rs.poff[mark];
		kv_rs.np = mark;
	}
}

static void select_db(struct kv_rdb_buf *out, uint32_t db)
{
	if (kv_rs.sel_db == (int64_t)db)
		return;
	char num[16];
	struct paste_resp_arg av[2] = { { "SELECT", 6 }, { num, (size_t)snprintf(num, sizeof(num), "%u", db) } };
	kv_rdb_put_cmd(out, av, 2);
	kv_rs.sel_db = db;
}

/* The unit out: alone, or in MULTI/EXEC. */
static void flush_unit(void)
{
	if (!kv_rs.np)
		return;
	struct kv_rdb_buf out = { 0 };
	for (uint32_t i = 0; i < kv_rs.np; i++) {
		select_db(&out, kv_rs.pdb[i]);
		if (i == 0 && kv_rs.np > 1)
			kv_rdb_put_cmd(&out, &(struct paste_resp_arg){ "MULTI", 5 }, 1);
		size_t end = i + 1 < kv_rs.np ? kv_rs.poff[i + 1] : kv_rs.pend.len;
		kv_rdb_put(&out, kv_rs.pend.p + kv_rs.poff[i], end - kv_rs.poff[i]);
	}
	if (kv_rs.np > 1)
		kv_rdb_put_cmd(&out, &(struct paste_resp_arg){ "EXEC", 4 }, 1);
	kv_rs.np = 0;
	kv_rs.pend.len = 0;
	if (!out.oom && kv_rs.n)
		stream_send(out.p, out.len);
	kv_rdb_free(&out);
}

static void drop_unit(void)
{
	kv_rs.np = 0;
	kv_rs.pend.len = 0;
}

/* Keys changed outside a command: their whole value, or DEL. */
static void flush_loose(void)
{
	for (uint32_t i = 0; i < kv_rs.nloose; i++) {
		struct loose *l = &kv_rs.loose[i];
		struct kv_key k;
		struct kv_obj o;
		kv_key_init(kv_rs.kv, &k, l->db, l->p, l->len);
		struct paste_resp_arg del[2] = { { "DEL", 3 }, { (const char *)l->p, l->len } };
		if (kv_lookup(kv_rs.kv, &k, &o, false)) {
			kv_repl_add_cmd(l->db, del, 2);
		} else {
			struct kv_rdb_buf b = { 0 };
			char ttl[24];
			int tl = snprintf(ttl, sizeof(ttl), "%lld",
					  (long long)(o.expire_ms == KV_NO_TTL ? 0 : o.expire_ms));
			if (kv_rdb_dump(kv_rs.kv, &o, &b) == 0) {
				struct paste_resp_arg av[6] = {
					{ "RESTORE", 7 }, { (const char *)l->p, l->len }, { ttl, (size_t)tl },
					{ (const char *)b.p, b.len }, { "REPLACE", 7 }, { "ABSTTL", 6 },
				};
				kv_repl_add_cmd(l->db, av, 6);
			}
			kv_rdb_free(&b);
		}
		free(l->p);
		flush_unit();
	}
	kv_rs.nloose = 0;
}

static void add_loose(uint32_t db, const uint8_t *p, size_t len)
{
	for (uint32_t i = 0; i < kv_rs.nloose; i++)
		if (kv_rs.loose[i].db == db && kv_rs.loose[i].len == len && !memcmp(kv_rs.loose[i].p, p, len))
			return;
	uint8_t *c = malloc(len ? len : 1);
	if (!c || !kv_repl_grow((void **)&kv_rs.loose, &kv_rs.caploose, kv_rs.nloose + 1, sizeof(*kv_rs.loose))) {
		free(c);
		return;
	}
	memcpy(c, p, len);
	kv_rs.loose[kv_rs.nloose++] = (struct loose){ db, len, c };
}

static void touched(void *arg, const struct kv_key *k, enum kv_touch what)
{
	(void)arg;
	if (!k->p && !k->tlen) {
		kv_rs.dirty++;                      /* a whole database (FLUSHDB, SWAPDB) */
		return;
	}
	const uint8_t *p = k->longkey ? k->p : k->t + 1;
	size_t len = k->longkey ? k->len : k->tlen - 1u;
	if (what == KV_TOUCH_EXPIRED) {
		struct paste_resp_arg av[2] = { { "DEL", 3 }, { (const char *)p, len } };
		const char *lazy = kv_config_kept("lazyfree-lazy-expire");
		if (lazy && !strcasecmp(lazy, "yes"))
			av[0] = (struct paste_resp_arg){ "UNLINK", 6 };
		kv_repl_add_cmd(k->db, av, 2);
		if (!kv_rs.depth)
			flush_unit();
		return;
	}
	kv_rs.dirty++;
	if (!kv_rs.depth) {
		add_loose(k->db, p, len);
		return;
	}
	if (len > kv_rs.lastcap) {
		uint8_t *q = realloc(kv_rs.last, len);
		if (!q)
			return;
		kv_rs.last = q;
		kv_rs.lastcap = len;
	}
	memcpy(kv_rs.last, p, len);
	kv_rs.lastlen = len;
}

void kv_repl_listen_on(struct kv *kv)
{
	kv_rs.kv = kv;
	if (!kv_rs.listening && kv_touch_add(kv, touched, NULL) == 0)
		kv_rs.listening = true;
	kv_repl_active = true;
}

void kv_repl_listen_update(void)
{
	if (!kv_rs.n && kv_rs.listening) {
		kv_touch_remove(kv_rs.kv, touched, NULL);
		kv_rs.listening = false;
		drop_unit();
	}
	kv_repl_active = kv_rs.n || kv_rs.replica || kv_rs.nw;
}

/* ------------------------------------------------------------ propagation */

const uint8_t *kv_repl_last(size_t *len)
{
	*len = kv_rs.lastlen;
	return kv_rs.last;
}

/* Commands whose effects propagate, never themselves. */
static bool container(const char *nm)
{
	return is(nm, "exec") || !strncmp(nm, "eval", 4) || !strncmp(nm, "fcall", 5);
}

/* Propagated whatever they changed (Redis forces them). */
static bool forced(const char *nm)
{
	return is(nm, "publish") || is(nm, "flushall") || is(nm, "flushdb") ||
	       is(nm, "function|load") || is(nm, "function|delete") || is(nm, "function|flush") ||
	       is(nm, "function|restore");
}

bool kv_repl_quiet;

void kv_repl_run(struct resp_ctx *x, struct kv *kv, struct kv_cmd_rt *rt,
		 const struct paste_resp_arg *argv, uint32_t argc)
{
	if (!kv_rs.n) {
		rt->c->fn(x, kv, argv, argc);
		return;
	}
	if (!kv_rs.depth && kv_rs.nloose)
		flush_loose();
	uint32_t db = kv_resp_db(x), errors = x->r->errors;
	uint64_t dirty = kv_rs.dirty;
	const char *nm = rt->c->name;
	if (argc >= 2 && is(nm, "spop"))
		kv_repl_spop_snapshot(kv, db, &argv[1]);
	else if (is(nm, "lmpop") || is(nm, "blmpop") || is(nm, "zmpop") || is(nm, "bzmpop"))
		kv_repl_mpop_snapshot(kv, db, nm, argv, argc);
	bool also = kv_rs.also;
	kv_rs.also = false;
	kv_rs.depth++;
	rt->c->fn(x, kv, argv, argc);
	kv_rs.depth--;
	bool sent = kv_rs.also;
	kv_rs.also = also;
	/* PFCOUNT is a read that may store the count it computed in the
	 * value: sent on then, as Redis sends it. */
	if (kv_rs.n && !kv_repl_quiet && !sent && !container(rt->c->name) &&
	    ((kv_rs.dirty != dirty && ((rt->fl & KV_CMD_WRITE) || is(nm, "pfcount"))) ||
	     (forced(rt->c->name) && x->r->errors == errors)))
		kv_repl_propagate(x, kv, rt, argv, argc, db);
	if (!kv_rs.depth)
		flush_unit();
}

void kv_repl_also(uint32_t db, const struct paste_resp_arg *av, uint32_t n)
{
	if (!kv_rs.n || kv_repl_quiet)
		return;
	if (!n) {
		kv_rs.also = true;              /* nothing at all */
		return;
	}
	if (!kv_rs.depth) {
		/* A blocked client's serve (after kv_repl_serve_mark): its
		 * changes go as av, not as loose keys. */
		while (kv_rs.nloose)
			free(kv_rs.loose[--kv_rs.nloose].p);
	}
	kv_repl_add_cmd(db, av, n);
	kv_rs.also = true;
	if (!kv_rs.depth)
		flush_unit();
}

bool kv_repl_from_primary(const struct resp_ctx *x)
{
	return x->r == &kv_link.r;
}

uint32_t kv_repl_serve_mark(void)
{
	if (kv_rs.n && !kv_rs.depth && kv_rs.nloose)
		flush_loose();                  /* before the pop: none of it is loose */
	return kv_rs.nloose;
}

/* The changes the serve made are sent as av, not as loose keys. */
static void served(uint32_t mark, uint32_t db, const struct paste_resp_arg *av, uint32_t n)
{
	if (!kv_rs.n)
		return;
	while (kv_rs.nloose > mark)
		free(kv_rs.loose[--kv_rs.nloose].p);
	kv_repl_add_cmd(db, av, n);
	if (!kv_rs.depth)
		flush_unit();
}

static struct paste_resp_arg key_arg(const struct kv_key *k)
{
	return (struct paste_resp_arg){ k->longkey ? (const char *)k->p : (const char *)k->t + 1,
					k->longkey ? k->len : k->tlen - 1u };
}

void kv_repl_served_pop(uint32_t mark, const struct kv_key *k, const char *op, int64_t count)
{
	char num[24];
	struct paste_resp_arg av[3] = { { op, strlen(op) }, key_arg(k),
					{ num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)count) } };
	served(mark, k->db, av, count < 0 ? 2 : 3);
}

void kv_repl_served_move(uint32_t mark, const struct kv_key *k, const void *dst, size_t dlen,
			 const char *from, const char *to)
{
	struct paste_resp_arg av[5] = { { "LMOVE", 5 }, key_arg(k), { dst, dlen } };
	if (!from) {
		av[0] = (struct paste_resp_arg){ "RPOPLPUSH", 9 };
		served(mark, k->db, av, 3);
		return;
	}
	av[3] = (struct paste_resp_arg){ from, strlen(from) };
	av[4] = (struct paste_resp_arg){ to, strlen(to) };
	served(mark, k->db, av, 5);
}

/* An eviction goes out on its own as Redis propagates it, DEL (UNLINK
 * under lazyfree-lazy-eviction), whatever runs: never as part of the
 * command that caused it (CONFIG SET is not propagated). The removal's
 * own record (a loose key, a change counted for the command) is dropped. */
void kv_repl_evicted(const struct kv_key *k)
{
	if (!kv_rs.n)
		return;
	struct paste_resp_arg key = key_arg(k);
	if (kv_rs.depth) {
		kv_rs.dirty--;
	} else {
		for (uint32_t i = kv_rs.nloose; i-- > 0;) {
			struct loose *l = &kv_rs.loose[i];
			if (l->db == k->db && l->len == key.len && !memcmp(l->p, key.p, key.len)) {
				free(l->p);
				memmove(l, l + 1, (kv_rs.nloose - i - 1) * sizeof(*l));
				kv_rs.nloose--;
				break;
			}
		}
		if (kv_rs.nloose)
			flush_loose();
	}
	const char *lazy = kv_config_kept("lazyfree-lazy-eviction");
	struct paste_resp_arg av[2] = { { "DEL", 3 }, key };
	if (lazy && !strcasecmp(lazy, "yes"))
		av[0] = (struct paste_resp_arg){ "UNLINK", 6 };
	struct kv_rdb_buf out = { 0 };
	select_db(&out, k->db);
	kv_rdb_put_cmd(&out, av, 2);
	if (!out.oom)
		stream_send(out.p, out.len);
	kv_rdb_free(&out);
}

void kv_repl_set(struct resp_ctx *x, struct kv *kv, struct kv_key *k)
{
	if (!kv_rs.n)
		return;
	(void)x;
	struct paste_resp_arg key = { k->longkey ? (const char *)k->p : (const char *)k->t + 1,
				      k->longkey ? k->len : k->tlen - 1u };
	/* The value was written outside a command (as it arrived), so the key
	 * is loose: the SET below is its whole state, not a RESTORE too. */
	for (uint32_t i = 0; i < kv_rs.nloose; i++) {
		struct loose *l = &kv_rs.loose[i];
		if (l->db == k->db && l->len == key.len && !memcmp(l->p, key.p, key.len)) {
			free(l->p);
			kv_rs.loose[i] = kv_rs.loose[--kv_rs.nloose];
			break;
		}
	}
	if (kv_rs.nloose)
		flush_loose();
	char *v;
	size_t vl;
	if (kv_repl_read_string(kv, k->db, &key, &v, &vl)) {
		struct paste_resp_arg av[3] = { { "SET", 3 }, key, { v, vl } };
		kv_repl_add_cmd(k->db, av, 3);
		free(v);
	}
	if (!kv_rs.depth)
		flush_unit();
}

/* ------------------------------------------------------------ WAIT */

static uint32_t acked(uint64_t off)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < kv_rs.n; i++)
		k += kv_rs.r[i].ack >= off;
	return k;
}

static void getack(void)
{
	struct kv_rdb_buf b = { 0 };
	struct paste_resp_arg av[3] = { { "REPLCONF", 8 }, { "GETACK", 6 }, { "*", 1 } };
	kv_rdb_put_cmd(&b, av, 3);
	if (!b.oom)
		stream_send(b.p, b.len);
	kv_rdb_free(&b);
}

/* Waiters done (enough acknowledged, or expired when now is given). */
void kv_repl_wait_check(uint64_t now)
{
	for (uint32_t i = 0; i < kv_rs.nw;) {
		struct waiter *w = &kv_rs.wt[i];
		uint32_t k = acked(w->target);
		struct resp_ctx x;
		bool live = kv_repl_peer_ctx(&w->c, &x);
		if (live && (int64_t)k < w->num && !(now && w->deadline && now >= w->deadline)) {
			i++;
			continue;
		}
		if (live) {
			resp_int(&x, k);
			resp_unblock(&x);
		}
		kv_rs.wt[i] = kv_rs.wt[--kv_rs.nw];
	}
	kv_repl_listen_update();
}

void kv_repl_wait(struct resp_ctx *x, struct kv *kv, int64_t num, int64_t timeout_ms)
{
	(void)kv;
	if (kv_rs.replica) {
		resp_error(x, "ERR WAIT cannot be used with replica instances. Please also note that since "
			      "Redis 4.0 if a replica is configured to be writable (which is not the default) "
			      "writes to replicas are just local and are not propagated.");
		return;
	}
	uint64_t target = kv_rs.offset;
	uint32_t k = acked(target);
	if ((int64_t)k >= num || x->capture || x->r->blocked ||
	    !kv_repl_grow((void **)&kv_rs.wt, &kv_rs.capw, kv_rs.nw + 1, sizeof(*kv_rs.wt))) {
		resp_int(x, k);
		return;
	}
	kv_rs.wt[kv_rs.nw++] = (struct waiter){ { x->w, x->conn, x->r->id }, target,
					timeout_ms ? x->w->now_ms + (uint64_t)timeout_ms : 0, num };
	kv_repl_active = true;                  /* the pass times it out */
	resp_block(x);
	if (kv_rs.n)
		getack();
}

/* ------------------------------------------------------------ min-replicas */


void kv_repl_good_update(void)
{
	const char *tw = kv_config_kept("min-replicas-to-write"), *ml = kv_config_kept("min-replicas-max-lag");
	int64_t min = tw ? atoll(tw) : 0, lag = ml ? atoll(ml) : 0;
	uint32_t good = 0;
	for (uint32_t i = 0; i < kv_rs.n; i++)
		good += (int64_t)((kv_rs.clock_ms - kv_rs.r[i].ack_ms) / 1000) <= lag;
	kv_noreplicas = min > 0 && lag != 0 && good < min;
}

/* ------------------------------------------------------------ the pass */

void kv_repl_pass(struct worker *w, struct kv *kv)
{
	kv_rs.clock_ms = w->now_ms;
	if (kv_rs.n)
		kv_repl_good_update();
	if (kv_rs.replica)
		kv_link_step(kv, w->now_ms);
	if (kv_rs.nloose && !kv_rs.depth)
		flush_loose();
	if (kv_rs.nw)
		kv_repl_wait_check(w->now_ms ? w->now_ms : 1);
	if (kv_rs.n && w->now_ms >= kv_rs.last_ping + PING_MS) {
		const char *per = kv_config_kept("repl-ping-replica-period");
		uint64_t period = per ? (uint64_t)atoll(per) * 1000 : PING_MS;
		if (period && w->now_ms >= kv_rs.last_ping + period) {
			kv_rs.last_ping = w->now_ms;
			struct kv_rdb_buf b = { 0 };
			kv_rdb_put_cmd(&b, &(struct paste_resp_arg){ "PING", 4 }, 1);
			if (!b.oom)
				stream_send(b.p, b.len);
			kv_rdb_free(&b);
		}
	}
}

uint64_t kv_repl_wake(struct worker *w)
{
	uint64_t t = UINT64_MAX;
	for (uint32_t i = 0; i < kv_rs.nw; i++)
		if (kv_rs.wt[i].deadline && kv_rs.wt[i].deadline < t)
			t = kv_rs.wt[i].deadline;
	if (kv_rs.n && kv_rs.last_ping + PING_MS < t)
		t = kv_rs.last_ping + PING_MS > w->now_ms ? kv_rs.last_ping + PING_MS : w->now_ms + PING_MS;
	if (kv_rs.replica) {
		uint64_t l = kv_link.fd >= 0 ? w->now_ms + LINK_POLL_MS : kv_link.next_try;
		t = l < t ? l : t;
	}
	return t;
}

/* ------------------------------------------------------------ connections */

static void remove_replica(uint32_t i)
{
	kv_rs.r[i] = kv_rs.r[--kv_rs.n];
	kv_repl_listen_update();
	kv_repl_good_update();
}

struct replica *kv_repl_find(uint64_t id)
{
	for (uint32_t i = 0; i < kv_rs.n; i++)
		if (kv_rs.r[i].c.id == id)
			return &kv_rs.r[i];
	return NULL;
}

uint64_t kv_repl_queued(void)
{
	uint64_t q = 0;
	for (uint32_t i = 0; i < kv_rs.n; i++) {
		struct resp_ctx x;
		if (kv_repl_peer_ctx(&kv_rs.r[i].c, &x))
			q += paste_port_conn_queued(x.w->port, x.conn);
	}
	return q;
}

bool kv_repl_is_replica(const struct resp_ctx *x)
{
	return kv_repl_find(x->r->id) != NULL;
}

void kv_repl_closed(struct resp_ctx *x)
{
	uint64_t id = x->r->id;
	struct replica *rp = kv_repl_find(id);
	if (rp)
		remove_replica((uint32_t)(rp - kv_rs.r));
	for (uint32_t i = 0; i < kv_rs.nw; i++)
		if (kv_rs.wt[i].c.id == id) {
			kv_rs.wt[i] = kv_rs.wt[--kv_rs.nw];
			kv_repl_listen_update();
			break;
		}
	for (uint32_t i = 0; i < MAX_REPLICAS; i++)
		if (kv_rs.ports[i].id == id)
			kv_rs.ports[i].id = 0;
}

/* Every replica goes (pkvs becomes a replica itself). */
void kv_repl_drop_replicas(void)
{
	while (kv_rs.n) {
		struct resp_ctx x;
		if (kv_repl_peer_ctx(&kv_rs.r[kv_rs.n - 1].c, &x))
			resp_close(&x);
		remove_replica(kv_rs.n - 1);
	}
}
