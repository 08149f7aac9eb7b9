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
 * key a change touched outside any command (an HTTP write, an eviction)
 * is sent as its whole value (RESTORE ... REPLACE ABSTTL) or DEL, before
 * the next unit; a key that expired, as DEL.
 *
 * Sections: the stream; propagation (Redis's rewrites); WAIT; the link
 * of the replica role to its primary; min-replicas; the pass;
 * connections; the commands (SYNC, PSYNC, REPLCONF, ROLE, REPLICAOF) and
 * INFO's lines.
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

bool kv_repl_active;

#define MAX_REPLICAS 64u
#define PING_MS 10000u

struct peer {
	struct worker *w;
	uint32_t conn;
	uint64_t id;                    /* its CLIENT ID (a slot is reused) */
};

struct replica {
	struct peer c;
	uint64_t ack;                   /* the offset it acknowledged (REPLCONF ACK) */
	uint64_t ack_ms;
	unsigned port;                  /* REPLCONF listening-port */
};

struct waiter {
	struct peer c;
	uint64_t target, deadline;      /* deadline: w->now_ms's clock, 0 none */
	int64_t num;
};

/* A key changed outside any command, sent before the next unit. */
struct loose {
	uint32_t db;
	size_t len;
	uint8_t *p;
};

static struct {
	char replid[41];
	uint64_t offset;                /* master_repl_offset: bytes of stream sent */
	int64_t sel_db;                 /* the stream's database (-1: none yet) */
	struct replica r[MAX_REPLICAS];
	uint32_t n;
	struct { uint64_t id; unsigned port; } ports[MAX_REPLICAS];   /* REPLCONF before SYNC */
	uint32_t ports_next;
	struct waiter *wt;
	uint32_t nw, capw;
	struct kv *kv;
	bool listening;
	uint32_t depth;
	uint64_t dirty;                 /* changes seen (not expiries) */
	uint8_t *last;                  /* the key last changed (a blocking pop's) */
	size_t lastlen, lastcap;
	struct kv_rdb_buf pend;         /* the unit's commands, RESP */
	size_t *poff;
	uint32_t *pdb;
	uint32_t np, capp;
	struct loose *loose;
	uint32_t nloose, caploose;
	uint64_t last_ping;
	/* The replica role. */
	bool replica;
	char *mhost;
	unsigned mport;
} R = { .sel_db = -1 };

static const char *const READONLY_ERR = "READONLY You can't write against a read only replica.";
static const char *const MASTERDOWN_ERR =
	"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

static void new_replid(void)
{
	uint8_t b[20];
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (uint8_t)(rand() >> 3);
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(R.replid + 2 * i, 3, "%02x", b[i]);
}

static const char *replid(void)
{
	if (!R.replid[0])
		new_replid();
	return R.replid;
}

static bool peer_ctx(const struct peer *c, struct resp_ctx *x)
{
	return resp_ctx_of(x, c->w, c->conn) && x->r->id == c->id && x->r->state != R_DEAD;
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t size)
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

/* Bytes to every replica, behind the batch's barrier. */
static void stream_send(const void *p, size_t len)
{
	for (uint32_t i = 0; i < R.n; i++) {
		struct resp_ctx x;
		if (peer_ctx(&R.r[i].c, &x))
			paste_port_send(x.w->port, x.conn, p, len, PASTE_SEND_DURABLE);
	}
	R.offset += len;
}

/* A command of the unit, in database db. */
static void add_cmd(uint32_t db, const struct paste_resp_arg *av, uint32_t n)
{
	if (R.np == R.capp) {
		uint32_t c = R.capp ? R.capp * 2 : 16;
		size_t *o = realloc(R.poff, c * sizeof(*o));
		if (!o)
			return;
		R.poff = o;
		uint32_t *d = realloc(R.pdb, c * sizeof(*d));
		if (!d)
			return;
		R.pdb = d;
		R.capp = c;
	}
	R.poff[R.np] = R.pend.len;
	R.pdb[R.np++] = db;
	kv_rdb_put_cmd(&R.pend, av, n);
}

uint32_t kv_repl_mark(void)
{
	return R.np;
}

void kv_repl_rewind(uint32_t mark)
{
	if (mark < R.np) {
		R.pend.len = R.poff[mark];
		R.np = mark;
	}
}

static void select_db(struct kv_rdb_buf *out, uint32_t db)
{
	if (R.sel_db == (int64_t)db)
		return;
	char num[16];
	struct paste_resp_arg av[2] = { { "SELECT", 6 }, { num, (size_t)snprintf(num, sizeof(num), "%u", db) } };
	kv_rdb_put_cmd(out, av, 2);
	R.sel_db = db;
}

/* The unit out: alone, or in MULTI/EXEC. */
static void flush_unit(void)
{
	if (!R.np)
		return;
	struct kv_rdb_buf out = { 0 };
	for (uint32_t i = 0; i < R.np; i++) {
		select_db(&out, R.pdb[i]);
		if (i == 0 && R.np > 1)
			kv_rdb_put_cmd(&out, &(struct paste_resp_arg){ "MULTI", 5 }, 1);
		size_t end = i + 1 < R.np ? R.poff[i + 1] : R.pend.len;
		kv_rdb_put(&out, R.pend.p + R.poff[i], end - R.poff[i]);
	}
	if (R.np > 1)
		kv_rdb_put_cmd(&out, &(struct paste_resp_arg){ "EXEC", 4 }, 1);
	R.np = 0;
	R.pend.len = 0;
	if (!out.oom && R.n)
		stream_send(out.p, out.len);
	kv_rdb_free(&out);
}

static void drop_unit(void)
{
	R.np = 0;
	R.pend.len = 0;
}

/* Keys changed outside a command: their whole value, or DEL. */
static void flush_loose(void)
{
	for (uint32_t i = 0; i < R.nloose; i++) {
		struct loose *l = &R.loose[i];
		struct kv_key k;
		struct kv_obj o;
		kv_key_init(R.kv, &k, l->db, l->p, l->len);
		struct paste_resp_arg del[2] = { { "DEL", 3 }, { (const char *)l->p, l->len } };
		if (kv_lookup(R.kv, &k, &o, false)) {
			add_cmd(l->db, del, 2);
		} else {
			struct kv_rdb_buf b = { 0 };
			char ttl[24];
			int tl = snprintf(ttl, sizeof(ttl), "%lld",
					  (long long)(o.expire_ms == KV_NO_TTL ? 0 : o.expire_ms));
			if (kv_rdb_dump(R.kv, &o, &b) == 0) {
				struct paste_resp_arg av[6] = {
					{ "RESTORE", 7 }, { (const char *)l->p, l->len }, { ttl, (size_t)tl },
					{ (const char *)b.p, b.len }, { "REPLACE", 7 }, { "ABSTTL", 6 },
				};
				add_cmd(l->db, av, 6);
			}
			kv_rdb_free(&b);
		}
		free(l->p);
		flush_unit();
	}
	R.nloose = 0;
}

static void add_loose(uint32_t db, const uint8_t *p, size_t len)
{
	for (uint32_t i = 0; i < R.nloose; i++)
		if (R.loose[i].db == db && R.loose[i].len == len && !memcmp(R.loose[i].p, p, len))
			return;
	uint8_t *c = malloc(len ? len : 1);
	if (!c || !grow((void **)&R.loose, &R.caploose, R.nloose + 1, sizeof(*R.loose))) {
		free(c);
		return;
	}
	memcpy(c, p, len);
	R.loose[R.nloose++] = (struct loose){ db, len, c };
}

static void touched(void *arg, const struct kv_key *k, enum kv_touch what)
{
	(void)arg;
	if (!k->p && !k->tlen) {
		R.dirty++;                      /* a whole database (FLUSHDB, SWAPDB) */
		return;
	}
	const uint8_t *p = k->longkey ? k->p : k->t + 1;
	size_t len = k->longkey ? k->len : k->tlen - 1u;
	if (what == KV_TOUCH_EXPIRED) {
		struct paste_resp_arg av[2] = { { "DEL", 3 }, { (const char *)p, len } };
		const char *lazy = kv_config_kept("lazyfree-lazy-expire");
		if (lazy && !strcasecmp(lazy, "yes"))
			av[0] = (struct paste_resp_arg){ "UNLINK", 6 };
		add_cmd(k->db, av, 2);
		if (!R.depth)
			flush_unit();
		return;
	}
	R.dirty++;
	if (!R.depth) {
		add_loose(k->db, p, len);
		return;
	}
	if (len > R.lastcap) {
		uint8_t *q = realloc(R.last, len);
		if (!q)
			return;
		R.last = q;
		R.lastcap = len;
	}
	memcpy(R.last, p, len);
	R.lastlen = len;
}

static void listen_on(struct kv *kv)
{
	R.kv = kv;
	if (!R.listening && kv_touch_add(kv, touched, NULL) == 0)
		R.listening = true;
	kv_repl_active = true;
}

static void listen_update(void)
{
	if (!R.n && R.listening) {
		kv_touch_remove(R.kv, touched, NULL);
		R.listening = false;
		drop_unit();
	}
	kv_repl_active = R.n || R.replica || R.nw;
}

/* ------------------------------------------------------------ propagation */

static bool is(const char *name, const char *w)
{
	return !strcmp(name, w);
}

static bool opt_is(const struct paste_resp_arg *a, const char *w)
{
	return paste_resp_arg_eq(a, w);
}

/* Key a's deadline after the command: false when the key is gone. */
static bool deadline(struct kv *kv, uint32_t db, const struct paste_resp_arg *a, int64_t *ms)
{
	struct kv_key k;
	struct kv_obj o;
	if (a->len > kv_max_key(kv))
		return false;
	kv_key_init(kv, &k, db, a->p, a->len);
	if (kv_lookup(kv, &k, &o, false))
		return false;
	*ms = o.expire_ms;
	return true;
}

/* A string key's value, read into buf (malloc'd). */
static bool read_string(struct kv *kv, uint32_t db, const struct paste_resp_arg *a, char **buf,
			size_t *len)
{
	struct kv_key k;
	struct kv_obj o;
	kv_key_init(kv, &k, db, a->p, a->len);
	if (kv_lookup(kv, &k, &o, false) || o.type != KV_STRING || !(*buf = malloc(o.len + 1)))
		return false;
	*len = kv_value_read(kv, &o, 0, *buf, o.len);
	return true;
}

/* A set's members before SPOP (malloc'd, each [u32 len][bytes]). */
static struct kv_rdb_buf spop_before;

static void spop_snapshot(struct kv *kv, uint32_t db, const struct paste_resp_arg *a)
{
	spop_before.len = 0;
	struct kv_cset s;
	if (a->len > kv_max_key(kv))
		return;
	kv_key_init(kv, &s.key, db, a->p, a->len);
	if (kv_cset_open(kv, &s, KV_SET, false))
		return;
	struct kv_cwalk w;
	kv_cwalk_init(kv, &w, s.o.coll.id, KV_SET_MEMBER, 0, false, NULL, 0);
	while (kv_cwalk_next(kv, &w) == 1) {
		uint32_t l = (uint32_t)w.nlen;
		kv_rdb_put(&spop_before, &l, 4);
		kv_rdb_put(&spop_before, w.name, w.nlen);
	}
}

/* SPOP as Redis 7.0 propagates it: SREM of what it took; with a count
 * that took the whole set, DEL. */
static void spop_propagate(struct kv *kv, uint32_t db, const struct paste_resp_arg *key, bool count)
{
	struct kv_cset s;
	kv_key_init(kv, &s.key, db, key->p, key->len);
	bool live = kv_cset_open(kv, &s, KV_SET, false) == 0;
	struct paste_resp_arg del[2] = { { "DEL", 3 }, *key };
	if (!live && count) {
		add_cmd(db, del, 2);
		return;
	}
	uint32_t cap = 0, n = 2;
	struct paste_resp_arg *av = NULL;
	for (size_t at = 0; at + 4 <= spop_before.len;) {
		uint32_t l;
		memcpy(&l, spop_before.p + at, 4);
		const uint8_t *m = spop_before.p + at + 4;
		at += 4 + l;
		if (live && kv_set_has(kv, &s, m, l))
			continue;
		if (!grow((void **)&av, &cap, n + 1, sizeof(*av))) {
			free(av);
			return;
		}
		av[n++] = (struct paste_resp_arg){ (const char *)m, l };
	}
	if (av && n > 2) {
		av[0] = (struct paste_resp_arg){ "SREM", 4 };
		av[1] = *key;
		add_cmd(db, av, n);
	}
	free(av);
}

/* A collection's members now (0: absent). */
static int64_t coll_count(struct kv *kv, uint32_t db, const struct paste_resp_arg *key)
{
	struct kv_key k;
	struct kv_obj o;
	if (key->len > kv_max_key(kv))
		return 0;
	kv_key_init(kv, &k, db, key->p, key->len);
	return kv_lookup(kv, &k, &o, false) ? 0 : (int64_t)o.coll.count;
}

/* [B]LMPOP's and [B]ZMPOP's keys and their counts before it ran. */
static struct {
	const struct paste_resp_arg *keys;
	uint32_t n;
	int64_t count[64];
} mpop;

static void mpop_snapshot(struct kv *kv, uint32_t db, const char *nm, const struct paste_resp_arg *a,
			  uint32_t n)
{
	uint32_t at = nm[0] == 'b' ? 2 : 1;
	int64_t k;
	mpop.n = 0;
	if (at >= n || paste_resp_arg_i64(&a[at], &k) || k < 1 || k > 64 || at + (uint64_t)k >= n)
		return;
	mpop.keys = &a[at + 1];
	mpop.n = (uint32_t)k;
	for (uint32_t i = 0; i < mpop.n; i++)
		mpop.count[i] = coll_count(kv, db, &mpop.keys[i]);
}

static int64_t mpop_before(const uint8_t *p, size_t len)
{
	for (uint32_t i = 0; i < mpop.n; i++)
		if (mpop.keys[i].len == len && !memcmp(mpop.keys[i].p, p, len))
			return mpop.count[i];
	return -1;
}

/* The command's own form in the stream (rt changed the data set, or is
 * one Redis always propagates). */
static void propagate(struct resp_ctx *x, struct kv *kv, struct kv_cmd_rt *rt,
		      const struct paste_resp_arg *a, uint32_t n, uint32_t db)
{
	(void)x;
	const char *nm = rt->c->name;
	struct paste_resp_arg av[8];
	char num[32], cnt[24];
	int64_t ms = 0;
	struct paste_resp_arg del[2] = { { "DEL", 3 }, a[n > 1 ? 1 : 0] };
	if (is(nm, "set") && n >= 3) {
		/* A deadline of any form: SET key value PXAT ms; else the
		 * command without GET (as Redis 7.0). */
		bool exp = false, get = false;
		for (uint32_t i = 3; i < n; i++) {
			exp |= opt_is(&a[i], "EX") || opt_is(&a[i], "PX") || opt_is(&a[i], "EXAT") ||
			       opt_is(&a[i], "PXAT");
			get |= opt_is(&a[i], "GET");
		}
		if (exp && deadline(kv, db, &a[1], &ms) && ms != KV_NO_TTL) {
			av[0] = (struct paste_resp_arg){ "SET", 3 };
			av[1] = a[1], av[2] = a[2];
			av[3] = (struct paste_resp_arg){ "PXAT", 4 };
			av[4] = (struct paste_resp_arg){ num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)ms) };
			add_cmd(db, av, 5);
			return;
		}
		if (get && n <= 8) {
			uint32_t k = 0;
			for (uint32_t i = 0; i < n; i++)
				if (i < 3 || !opt_is(&a[i], "GET"))
					av[k++] = a[i];
			add_cmd(db, av, k);
			return;
		}
	} else if ((is(nm, "setex") || is(nm, "psetex")) && n == 4) {
		if (!deadline(kv, db, &a[1], &ms)) {
			add_cmd(db, del, 2);
			return;
		}
		av[0] = (struct paste_resp_arg){ "SET", 3 };
		av[1] = a[1], av[2] = a[3];
		av[3] = (struct paste_resp_arg){ "PXAT", 4 };
		av[4] = (struct paste_resp_arg){ num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)ms) };
		add_cmd(db, av, 5);
		return;
	} else if (is(nm, "expire") || is(nm, "pexpire") || is(nm, "expireat") || is(nm, "pexpireat")) {
		if (!deadline(kv, db, &a[1], &ms)) {
			add_cmd(db, del, 2);
			return;
		}
		if (!is(nm, "pexpireat") && n <= 4) {
			av[0] = (struct paste_resp_arg){ "PEXPIREAT", 9 };
			av[1] = a[1];
			av[2] = (struct paste_resp_arg){ num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)ms) };
			if (n == 4)
				av[3] = a[3];
			add_cmd(db, av, n);
			return;
		}
	} else if (is(nm, "getex")) {
		if (!deadline(kv, db, &a[1], &ms)) {
			add_cmd(db, del, 2);
			return;
		}
		if (n >= 3 && opt_is(&a[2], "PERSIST")) {
			av[0] = (struct paste_resp_arg){ "PERSIST", 7 };
			av[1] = a[1];
			add_cmd(db, av, 2);
		} else if (ms != KV_NO_TTL) {
			av[0] = (struct paste_resp_arg){ "PEXPIREAT", 9 };
			av[1] = a[1];
			av[2] = (struct paste_resp_arg){ num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)ms) };
			add_cmd(db, av, 3);
		}
		return;
	} else if (is(nm, "getdel")) {
		add_cmd(db, del, 2);
		return;
	} else if (is(nm, "incrbyfloat")) {
		char *v;
		size_t vl;
		if (read_string(kv, db, &a[1], &v, &vl)) {
			av[0] = (struct paste_resp_arg){ "SET", 3 };
			av[1] = a[1];
			av[2] = (struct paste_resp_arg){ v, vl };
			av[3] = (struct paste_resp_arg){ "KEEPTTL", 7 };
			add_cmd(db, av, 4);
			free(v);
		}
		return;
	} else if (is(nm, "hincrbyfloat") && n == 4) {
		struct kv_hash h;
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t en, len;
		kv_key_init(kv, &h.key, db, a[1].p, a[1].len);
		if (kv_hash_open(kv, &h, false) == 0 && kv_hash_get(kv, &h, a[2].p, a[2].len, ext, &en, &len) == 0 &&
		    len < sizeof(num)) {
			paste_store_read(kv->store, ext, en, 0, num, len);
			av[0] = (struct paste_resp_arg){ "HSET", 4 };
			av[1] = a[1], av[2] = a[2];
			av[3] = (struct paste_resp_arg){ num, len };
			add_cmd(db, av, 4);
		}
		return;
	} else if (is(nm, "spop")) {
		spop_propagate(kv, db, &a[1], n > 2);
		return;
	} else if (is(nm, "blpop") || is(nm, "brpop") || is(nm, "bzpopmin") || is(nm, "bzpopmax")) {
		av[0] = is(nm, "blpop") ? (struct paste_resp_arg){ "LPOP", 4 }
		      : is(nm, "brpop") ? (struct paste_resp_arg){ "RPOP", 4 }
		      : is(nm, "bzpopmin") ? (struct paste_resp_arg){ "ZPOPMIN", 7 }
					   : (struct paste_resp_arg){ "ZPOPMAX", 7 };
		av[1] = (struct paste_resp_arg){ (const char *)R.last, R.lastlen };
		add_cmd(db, av, 2);
		return;
	} else if (is(nm, "brpoplpush") && n == 4) {
		av[0] = (struct paste_resp_arg){ "RPOPLPUSH", 9 };
		av[1] = a[1], av[2] = a[2];
		add_cmd(db, av, 3);
		return;
	} else if (is(nm, "blmove") && n == 6) {
		av[0] = (struct paste_resp_arg){ "LMOVE", 5 };
		for (uint32_t i = 1; i < 5; i++)
			av[i] = a[i];
		add_cmd(db, av, 5);
		return;
	} else if (is(nm, "blmpop") || is(nm, "lmpop") || is(nm, "bzmpop") || is(nm, "zmpop")) {
		bool list = nm[1] == 'l' || nm[0] == 'l';
		int64_t count = 1;
		bool left = true;
		for (uint32_t i = 1; i < n; i++) {
			if (opt_is(&a[i], "LEFT") || opt_is(&a[i], "MIN"))
				left = true;
			else if (opt_is(&a[i], "RIGHT") || opt_is(&a[i], "MAX"))
				left = false;
			else if (opt_is(&a[i], "COUNT") && i + 1 < n)
				paste_resp_arg_i64(&a[i + 1], &count);
		}
		av[0] = list ? (left ? (struct paste_resp_arg){ "LPOP", 4 } : (struct paste_resp_arg){ "RPOP", 4 })
			     : (left ? (struct paste_resp_arg){ "ZPOPMIN", 7 } : (struct paste_resp_arg){ "ZPOPMAX", 7 });
		av[1] = (struct paste_resp_arg){ (const char *)R.last, R.lastlen };
		/* The count it took: the key's members before less after. */
		int64_t had = mpop_before(R.last, R.lastlen), now = coll_count(kv, db, &av[1]);
		if (had >= 0 && had - now < count)
			count = had - now;
		av[2] = (struct paste_resp_arg){ cnt, (size_t)snprintf(cnt, sizeof(cnt), "%lld", (long long)count) };
		add_cmd(db, av, 3);
		return;
	} else if (is(nm, "migrate") && n >= 6) {
		/* The keys it moved away, as DEL. */
		uint32_t first = 3, last = 3;
		for (uint32_t i = 6; i < n; i++)
			if (opt_is(&a[i], "KEYS")) {
				first = i + 1;
				last = n - 1;
				break;
			}
		for (uint32_t i = first; i <= last && i < n; i++) {
			struct paste_resp_arg d[2] = { { "DEL", 3 }, a[i] };
			if (a[i].len && !deadline(kv, db, &a[i], &ms))
				add_cmd(db, d, 2);
		}
		return;
	} else if (is(nm, "restore") && n >= 4) {
		bool abs = false;
		for (uint32_t i = 4; i < n; i++)
			abs |= opt_is(&a[i], "ABSTTL");
		int64_t ttl;
		if (!abs && !paste_resp_arg_i64(&a[2], &ttl) && ttl > 0 && deadline(kv, db, &a[1], &ms) &&
		    n + 1 <= 8) {
			for (uint32_t i = 0; i < n; i++)
				av[i] = a[i];
			av[2] = (struct paste_resp_arg){ num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)ms) };
			av[n] = (struct paste_resp_arg){ "ABSTTL", 6 };
			add_cmd(db, av, n + 1);
			return;
		}
	}
	add_cmd(db, a, n);
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

void kv_repl_run(struct resp_ctx *x, struct kv *kv, struct kv_cmd_rt *rt,
		 const struct paste_resp_arg *argv, uint32_t argc)
{
	if (!R.n) {
		rt->c->fn(x, kv, argv, argc);
		return;
	}
	if (!R.depth && R.nloose)
		flush_loose();
	uint32_t db = kv_resp_db(x), errors = x->r->errors;
	uint64_t dirty = R.dirty;
	const char *nm = rt->c->name;
	if (argc >= 2 && is(nm, "spop"))
		spop_snapshot(kv, db, &argv[1]);
	else if (is(nm, "lmpop") || is(nm, "blmpop") || is(nm, "zmpop") || is(nm, "bzmpop"))
		mpop_snapshot(kv, db, nm, argv, argc);
	R.depth++;
	rt->c->fn(x, kv, argv, argc);
	R.depth--;
	if (R.n && !container(rt->c->name) &&
	    ((R.dirty != dirty && (rt->fl & KV_CMD_WRITE)) ||
	     (forced(rt->c->name) && x->r->errors == errors)))
		propagate(x, kv, rt, argv, argc, db);
	if (!R.depth)
		flush_unit();
}

uint32_t kv_repl_serve_mark(void)
{
	if (R.n && !R.depth && R.nloose)
		flush_loose();                  /* before the pop: none of it is loose */
	return R.nloose;
}

/* The changes the serve made are sent as av, not as loose keys. */
static void served(uint32_t mark, uint32_t db, const struct paste_resp_arg *av, uint32_t n)
{
	if (!R.n)
		return;
	while (R.nloose > mark)
		free(R.loose[--R.nloose].p);
	add_cmd(db, av, n);
	if (!R.depth)
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

void kv_repl_set(struct resp_ctx *x, struct kv *kv, struct kv_key *k)
{
	if (!R.n)
		return;
	if (R.nloose)
		flush_loose();
	(void)x;
	struct paste_resp_arg key = { k->longkey ? (const char *)k->p : (const char *)k->t + 1,
				      k->longkey ? k->len : k->tlen - 1u };
	char *v;
	size_t vl;
	if (read_string(kv, k->db, &key, &v, &vl)) {
		struct paste_resp_arg av[3] = { { "SET", 3 }, key, { v, vl } };
		add_cmd(k->db, av, 3);
		free(v);
	}
	if (!R.depth)
		flush_unit();
}

/* ------------------------------------------------------------ WAIT */

static uint32_t acked(uint64_t off)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < R.n; i++)
		k += R.r[i].ack >= off;
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
static void wait_check(uint64_t now)
{
	for (uint32_t i = 0; i < R.nw;) {
		struct waiter *w = &R.wt[i];
		uint32_t k = acked(w->target);
		struct resp_ctx x;
		bool live = peer_ctx(&w->c, &x);
		if (live && (int64_t)k < w->num && !(now && w->deadline && now >= w->deadline)) {
			i++;
			continue;
		}
		if (live) {
			resp_int(&x, k);
			resp_unblock(&x);
		}
		R.wt[i] = R.wt[--R.nw];
	}
	listen_update();
}

void kv_repl_wait(struct resp_ctx *x, struct kv *kv, int64_t num, int64_t timeout_ms)
{
	(void)kv;
	if (R.replica) {
		resp_error(x, "ERR WAIT cannot be used with replica instances. Please also note that since "
			      "Redis 4.0 if a replica is configured to be writable (which is not the default) "
			      "writes to replicas are just local and are not propagated.");
		return;
	}
	uint64_t target = R.offset;
	uint32_t k = acked(target);
	if ((int64_t)k >= num || x->capture || x->r->blocked ||
	    !grow((void **)&R.wt, &R.capw, R.nw + 1, sizeof(*R.wt))) {
		resp_int(x, k);
		return;
	}
	R.wt[R.nw++] = (struct waiter){ { x->w, x->conn, x->r->id }, target,
					timeout_ms ? x->w->now_ms + (uint64_t)timeout_ms : 0, num };
	kv_repl_active = true;                  /* the pass times it out */
	resp_block(x);
	if (R.n)
		getack();
}

/* ------------------------------------------------------------ the link */

/* The replica role's link to its primary: a non-blocking socket the pass
 * polls (every LINK_POLL_MS while it is open), the handshake (PING,
 * REPLCONF, PSYNC ? -1), the primary's RDB loaded whole (kv_rdb_load:
 * every database replaced), then its stream applied command by command
 * as a client whose replies go nowhere; a transaction (MULTI ... EXEC in
 * the stream) is applied once it is all in, in one group. */
#define LINK_POLL_MS 10u
#define LINK_RETRY_MS 1000u
enum { L_DOWN = 0, L_CONNECTING, L_HANDSHAKE, L_RDB, L_UP };

static struct {
	int fd;
	int st;
	uint8_t *in;
	size_t len, cap;
	uint64_t rdb_len;
	bool rdb_len_known;
	uint64_t off;                   /* the stream's offset applied */
	char mreplid[41];               /* the primary's replication id */
	uint64_t acked_off;             /* applied and durable: what ACK says */
	uint64_t pend_off, pend_epoch;  /* applied, durable once that epoch is */
	bool pend_set;
	bool getack;                    /* the primary asked (REPLCONF GETACK) */
	uint32_t replies;               /* the handshake's replies so far */
	uint64_t next_try, last_ack, last_io, down_since;
	struct worker *w;
	void *ss;
	struct srv_conn c;              /* a RESP connection's, for the error counts */
	struct resp_conn r;
	struct kv_resp_conn kc;
	struct resp_ctx x;
} L = { .fd = -1 };

static void link_close(uint64_t now)
{
	if (L.fd >= 0)
		close(L.fd);
	L.fd = -1;
	if (L.st == L_UP || !L.down_since)
		L.down_since = now ? now : 1;
	L.st = L_DOWN;
	L.len = 0;
	L.next_try = now + LINK_RETRY_MS;
}

static bool link_write(const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t k = send(L.fd, b, n, MSG_NOSIGNAL);
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
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)R.mport) };
	const char *h = !strcasecmp(R.mhost, "localhost") ? "127.0.0.1" : R.mhost;
	if (inet_pton(AF_INET, h, &a.sin_addr) != 1 || !R.mport) {
		link_close(now);
		return false;
	}
	L.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (L.fd < 0) {
		link_close(now);
		return false;
	}
	if (connect(L.fd, (struct sockaddr *)&a, sizeof(a)) && errno != EINPROGRESS) {
		link_close(now);
		return false;
	}
	L.st = L_CONNECTING;
	L.last_io = now;
	return true;
}

static bool link_handshake(void)
{
	char port[16];
	struct paste_resp_arg ping[1] = { { "PING", 4 } };
	struct paste_resp_arg lp[3] = {
		{ "REPLCONF", 8 }, { "listening-port", 14 },
		{ port, (size_t)snprintf(port, sizeof(port), "%u", kv_resp_port(&L.x)) } };
	struct paste_resp_arg capa[3] = { { "REPLCONF", 8 }, { "capa", 4 }, { "psync2", 6 } };
	L.replies = 0;
	return link_cmd(ping, 1) && link_cmd(lp, 3) && link_cmd(capa, 3);
}

/* PSYNC once the handshake's three replies are in: Redis refuses it
 * while its replies to the connection wait to be sent. */
static bool link_psync(void)
{
	struct paste_resp_arg psync[3] = { { "PSYNC", 5 }, { "?", 1 }, { "-1", 2 } };
	return link_cmd(psync, 3);
}

static void consume(size_t n)
{
	memmove(L.in, L.in + n, L.len - n);
	L.len -= n;
}

/* One command of the stream at in[at..): its arguments (pointing into
 * in), and its end; 0 when it is not all in yet, -1 when malformed. */
static int parse_cmd(size_t at, struct paste_resp_arg **av, uint32_t *cap, uint32_t *n, size_t *end)
{
	const uint8_t *p = L.in, *e = L.in + L.len;
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
	kv_run(&L.x, kv, rt, av, n);
}

/* The stream in L.in: every whole command (a transaction once whole). */
static bool link_stream(struct kv *kv)
{
	struct paste_resp_arg *av = NULL;
	uint32_t cap = 0, n;
	size_t at = 0, end;
	bool ok = true;
	for (;;) {
		int r = parse_cmd(at, &av, &cap, &n, &end);
		if (r <= 0) {
			ok = r == 0;
			break;
		}
		if (paste_resp_arg_eq(&av[0], "REPLCONF") && n >= 2 && paste_resp_arg_eq(&av[1], "GETACK")) {
			L.off += end - at;
			L.getack = true;        /* answered once what came before is durable */
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
			L.off += tend - at;
			at = tend;
			continue;
		}
		apply(kv, av, n);
		L.off += end - at;
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
	while (L.st == L_HANDSHAKE) {
		uint8_t *nl = memchr(L.in, '\n', L.len);
		if (!nl)
			return true;
		size_t ll = (size_t)(nl - L.in) + 1;
		if (L.in[0] == '-')
			return false;           /* -NOAUTH, -ERR ...: try again later */
		if (ll > 12 && !memcmp(L.in, "+FULLRESYNC ", 12)) {
			unsigned long long off = 0;
			char id[41] = "";
			if (sscanf((const char *)L.in + 12, "%40s %llu", id, &off) == 2) {
				L.off = L.acked_off = off;
				L.pend_set = false;
				memcpy(L.mreplid, id, sizeof(id));
			}
			L.st = L_RDB;
			L.rdb_len_known = false;
		} else if (ll > 9 && !memcmp(L.in, "+CONTINUE", 9)) {
			return false;           /* never asked for */
		} else if (++L.replies == 3 && !link_psync()) {
			return false;
		}
		consume(ll);
	}
	if (L.st == L_RDB) {
		if (!L.rdb_len_known) {
			while (L.len && L.in[0] == '\n')
				consume(1);     /* the primary's keepalives */
			uint8_t *nl = memchr(L.in, '\n', L.len);
			if (!nl)
				return true;
			if (L.in[0] != '$' || (L.len > 5 && !memcmp(L.in, "$EOF:", 5)))
				return false;
			L.rdb_len = strtoull((const char *)L.in + 1, NULL, 10);
			L.rdb_len_known = true;
			consume((size_t)(nl - L.in) + 1);
		}
		if (L.len < L.rdb_len)
			return true;
		kv_clock(kv);
		int r = kv_rdb_load(kv, L.in, (size_t)L.rdb_len);
		consume((size_t)L.rdb_len);
		if (r)
			return false;
		L.st = L_UP;
		L.down_since = 0;
		L.kc.db = 0;
		L.last_ack = now;
	}
	if (L.st == L_UP)
		return link_stream(kv);
	return true;
}

/* What ACK may report: an offset whose changes are durable here (the
 * persist object's epoch they were flushed in is published), so the
 * primary's WAIT counts a write only once a crash here keeps it. */
static void ack_progress(void)
{
	struct paste_persist *pp = L.w->persist;
	uint64_t dur = paste_persist_durable(pp), ep = paste_persist_epoch(pp);
	if (L.pend_set && L.pend_epoch <= dur) {
		L.acked_off = L.pend_off;
		L.pend_set = false;
	}
	if (L.pend_set || L.off == L.acked_off)
		return;
	if (!paste_persist_pending(pp) && ep <= dur + 1) {
		L.acked_off = L.off;            /* nothing flushed waits for a barrier */
		return;
	}
	L.pend_off = L.off;
	L.pend_epoch = ep;
	L.pend_set = true;
}

static void link_step(struct kv *kv, uint64_t now)
{
	if (L.fd < 0) {
		if (now >= L.next_try)
			link_connect(now);
		return;
	}
	struct pollfd pf = { .fd = L.fd, .events = POLLIN | (L.st == L_CONNECTING ? POLLOUT : 0) };
	if (poll(&pf, 1, 0) < 0)
		return;
	if (L.st == L_CONNECTING) {
		int err = 0;
		socklen_t el = sizeof(err);
		if (pf.revents & (POLLERR | POLLHUP) ||
		    (pf.revents & POLLOUT && (getsockopt(L.fd, SOL_SOCKET, SO_ERROR, &err, &el) || err))) {
			link_close(now);
			return;
		}
		if (!(pf.revents & POLLOUT)) {
			if (now - L.last_io > 5000)
				link_close(now);
			return;
		}
		if (!link_handshake()) {
			link_close(now);
			return;
		}
		L.st = L_HANDSHAKE;
		L.last_io = now;
	}
	if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
		for (;;) {
			if (L.cap - L.len < 65536) {
				size_t c = L.cap ? L.cap * 2 : 131072;
				uint8_t *q = realloc(L.in, c);
				if (!q) {
					link_close(now);
					return;
				}
				L.in = q;
				L.cap = c;
			}
			ssize_t k = recv(L.fd, L.in + L.len, L.cap - L.len, 0);
			if (k > 0) {
				L.len += (size_t)k;
				L.last_io = now;
				continue;
			}
			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			link_close(now);        /* the primary closed */
			return;
		}
		if (!link_input(kv, now)) {
			link_close(now);
			return;
		}
	}
	ack_progress();
	if (L.st == L_UP && (now - L.last_ack >= 1000 || (L.getack && L.acked_off == L.off))) {
		link_ack(L.acked_off);
		L.last_ack = now;
		L.getack = false;
	}
}

static void link_start(struct resp_ctx *x)
{
	link_close(0);
	L.next_try = 0;
	L.down_since = x->w->now_ms ? x->w->now_ms : 1;
	L.w = x->w;
	L.ss = x->ss;
	L.c = *x->c;
	L.r = (struct resp_conn){ .proto = 2, .authed = true, .reply_off = true };
	L.kc = (struct kv_resp_conn){ 0 };
	L.x = (struct resp_ctx){ .w = x->w, .conn = x->conn, .c = &L.c, .r = &L.r, .sc = &L.kc,
				 .ss = x->ss };
}

/* ------------------------------------------------------------ min-replicas */

static uint64_t clock_ms;               /* the pass's w->now_ms, for the lag */

void kv_repl_good_update(void)
{
	const char *tw = kv_config_kept("min-replicas-to-write"), *ml = kv_config_kept("min-replicas-max-lag");
	int64_t min = tw ? atoll(tw) : 0, lag = ml ? atoll(ml) : 0;
	uint32_t good = 0;
	for (uint32_t i = 0; i < R.n; i++)
		good += (int64_t)((clock_ms - R.r[i].ack_ms) / 1000) <= lag;
	kv_noreplicas = min > 0 && lag != 0 && good < min;
}

/* ------------------------------------------------------------ the pass */

void kv_repl_pass(struct worker *w, struct kv *kv)
{
	clock_ms = w->now_ms;
	if (R.n)
		kv_repl_good_update();
	if (R.replica)
		link_step(kv, w->now_ms);
	if (R.nloose && !R.depth)
		flush_loose();
	if (R.nw)
		wait_check(w->now_ms ? w->now_ms : 1);
	if (R.n && w->now_ms >= R.last_ping + PING_MS) {
		const char *per = kv_config_kept("repl-ping-replica-period");
		uint64_t period = per ? (uint64_t)atoll(per) * 1000 : PING_MS;
		if (period && w->now_ms >= R.last_ping + period) {
			R.last_ping = w->now_ms;
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
	for (uint32_t i = 0; i < R.nw; i++)
		if (R.wt[i].deadline && R.wt[i].deadline < t)
			t = R.wt[i].deadline;
	if (R.n && R.last_ping + PING_MS < t)
		t = R.last_ping + PING_MS > w->now_ms ? R.last_ping + PING_MS : w->now_ms + PING_MS;
	if (R.replica) {
		uint64_t l = L.fd >= 0 ? w->now_ms + LINK_POLL_MS : L.next_try;
		t = l < t ? l : t;
	}
	return t;
}

/* ------------------------------------------------------------ connections */

static void remove_replica(uint32_t i)
{
	R.r[i] = R.r[--R.n];
	listen_update();
	kv_repl_good_update();
}

void kv_repl_closed(struct resp_ctx *x)
{
	uint64_t id = x->r->id;
	for (uint32_t i = 0; i < R.n; i++)
		if (R.r[i].c.id == id) {
			remove_replica(i);
			break;
		}
	for (uint32_t i = 0; i < R.nw; i++)
		if (R.wt[i].c.id == id) {
			R.wt[i] = R.wt[--R.nw];
			listen_update();
			break;
		}
	for (uint32_t i = 0; i < MAX_REPLICAS; i++)
		if (R.ports[i].id == id)
			R.ports[i].id = 0;
}

/* Every replica goes (pkvs becomes a replica itself). */
static void drop_replicas(void)
{
	while (R.n) {
		struct resp_ctx x;
		if (peer_ctx(&R.r[R.n - 1].c, &x))
			resp_close(&x);
		remove_replica(R.n - 1);
	}
}

/* ------------------------------------------------------------ commands */

static void full_sync(struct resp_ctx *x, struct kv *kv, bool psync)
{
	if (R.replica) {
		resp_error(x, "NOMASTERLINK Can't SYNC while not connected with my master");
		return;
	}
	for (uint32_t i = 0; i < R.n; i++)
		if (R.r[i].c.id == x->r->id)
			return;                 /* a replica already: ignored, as Redis */
	if (R.n == MAX_REPLICAS) {
		resp_error(x, "ERR max number of replicas reached");
		return;
	}
	struct kv_rdb_buf b = { 0 };
	int r = kv_rdb_snapshot(kv, &b, replid(), R.offset);
	if (r) {
		kv_rdb_free(&b);
		kv_reply_errno(x, r);
		return;
	}
	char h[96];
	int hl = 0;
	if (psync)
		hl = snprintf(h, sizeof(h), "+FULLRESYNC %s %" PRIu64 "\r\n", replid(), R.offset);
	hl += snprintf(h + hl, sizeof(h) - (size_t)hl, "$%zu\r\n", b.len);
	struct paste_port *pt = x->w->port;
	if (paste_port_send(pt, x->conn, h, (size_t)hl, PASTE_SEND_DURABLE) ||
	    paste_port_send(pt, x->conn, b.p, b.len, PASTE_SEND_DURABLE)) {
		kv_rdb_free(&b);
		return;
	}
	kv_rdb_free(&b);
	struct replica *rp = &R.r[R.n++];
	*rp = (struct replica){ { x->w, x->conn, x->r->id }, 0, x->w->now_ms, 0 };
	for (uint32_t i = 0; i < MAX_REPLICAS; i++)
		if (R.ports[i].id == x->r->id) {
			rp->port = R.ports[i].port;
			R.ports[i].id = 0;
		}
	x->r->reply_off = true;                 /* a replica gets the stream, no replies */
	R.sel_db = -1;                          /* the next unit starts with SELECT */
	if (!R.last_ping)
		R.last_ping = x->w->now_ms;
	listen_on(kv);
	clock_ms = x->w->now_ms;
	kv_repl_good_update();
}

static void cmd_sync(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	full_sync(x, kv, false);
}

static void cmd_psync(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	full_sync(x, kv, true);             /* no backlog: always a full resynchronization */
}

static void cmd_replconf(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	if (n % 2 == 0) {
		resp_error(x, "ERR syntax error");
		return;
	}
	for (uint32_t i = 1; i < n; i += 2) {
		if (opt_is(&a[i], "ACK") || opt_is(&a[i], "FACK")) {
			int64_t off;
			if (paste_resp_arg_i64(&a[i + 1], &off))
				return;
			for (uint32_t j = 0; j < R.n; j++)
				if (R.r[j].c.id == x->r->id) {
					if ((uint64_t)off > R.r[j].ack)
						R.r[j].ack = (uint64_t)off;
					R.r[j].ack_ms = x->w->now_ms;
				}
			clock_ms = x->w->now_ms;
			kv_repl_good_update();
			if (R.nw)
				wait_check(0);
			return;                 /* no reply, as Redis */
		} else if (opt_is(&a[i], "GETACK")) {
			return;
		} else if (opt_is(&a[i], "listening-port")) {
			int64_t port;
			if (!kv_arg_int(x, &a[i + 1], &port))
				return;
			/* Its slot, a free one, or the oldest (a connection that
			 * closed without SYNC leaves its slot to be taken). */
			uint32_t j = 0;
			while (j < MAX_REPLICAS && R.ports[j].id && R.ports[j].id != x->r->id)
				j++;
			if (j == MAX_REPLICAS)
				j = R.ports_next++ % MAX_REPLICAS;
			R.ports[j].id = x->r->id;
			R.ports[j].port = (unsigned)port;
		} else if (!opt_is(&a[i], "capa") && !opt_is(&a[i], "ip-address") &&
			   !opt_is(&a[i], "rdb-only") && !opt_is(&a[i], "rdb-filter-only")) {
			resp_error(x, "ERR Unrecognized REPLCONF option: %.*s", (int)a[i].len, a[i].p);
			return;
		}
	}
	resp_ok(x);
}

static void replica_addr(const struct replica *rp, char *ip, size_t cap)
{
	struct resp_ctx x;
	char peer[80], local[80];
	int fd;
	snprintf(ip, cap, "?");
	if (!peer_ctx(&rp->c, &x))
		return;
	resp_conn_addr(&x, peer, local, sizeof(peer), &fd);
	char *colon = strrchr(peer, ':');
	if (colon)
		*colon = 0;
	snprintf(ip, cap, "%s", peer);
}

static void cmd_role(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	if (R.replica) {
		resp_array(x, 5);
		resp_bulk(x, "slave", 5);
		resp_bulk(x, R.mhost, strlen(R.mhost));
		resp_int(x, R.mport);
		const char *st = L.st == L_UP ? "connected" : L.st == L_RDB ? "sync"
			       : L.st == L_DOWN ? "connect" : "connecting";
		resp_bulk(x, st, strlen(st));
		resp_int(x, L.st == L_UP ? (int64_t)L.off : -1);
		return;
	}
	resp_array(x, 3);
	resp_bulk(x, "master", 6);
	resp_int(x, (int64_t)R.offset);
	resp_array(x, R.n);
	for (uint32_t i = 0; i < R.n; i++) {
		char ip[80], port[16], off[24];
		replica_addr(&R.r[i], ip, sizeof(ip));
		resp_array(x, 3);
		resp_bulk(x, ip, strlen(ip));
		resp_bulk(x, port, (size_t)snprintf(port, sizeof(port), "%u", R.r[i].port));
		resp_bulk(x, off, (size_t)snprintf(off, sizeof(off), "%" PRIu64, R.r[i].ack));
	}
}

static void cmd_replicaof(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	if (opt_is(&a[1], "NO") && opt_is(&a[2], "ONE")) {
		if (R.replica) {
			free(R.mhost);
			R.mhost = NULL;
			R.replica = false;
			link_close(0);
			new_replid();           /* a new history starts here */
			listen_update();
		}
		resp_ok(x);
		return;
	}
	int64_t port;
	if (!kv_arg_range(x, &a[2], 0, 65535, "Invalid master port", &port))
		return;
	if (R.replica && R.mport == (unsigned)port && strlen(R.mhost) == a[1].len &&
	    !strncasecmp(R.mhost, a[1].p, a[1].len)) {
		resp_simple(x, "OK Already connected to specified master");
		return;
	}
	char *h = malloc(a[1].len + 1);
	if (!h) {
		resp_error(x, "ERR out of memory");
		return;
	}
	memcpy(h, a[1].p, a[1].len);
	h[a[1].len] = 0;
	free(R.mhost);
	R.mhost = h;
	R.mport = (unsigned)port;
	R.replica = true;
	R.kv = kv;
	link_start(x);
	drop_replicas();                        /* they follow a primary no more */
	for (uint32_t i = 0; i < R.nw; i++) {
		struct resp_ctx wx;
		if (peer_ctx(&R.wt[i].c, &wx)) {
			resp_error(&wx, "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)");
			resp_unblock(&wx);
		}
	}
	R.nw = 0;
	listen_update();
	resp_ok(x);
}

bool kv_repl_refused(struct resp_ctx *x, struct kv_cmd_rt *rt)
{
	if (!R.replica)
		return false;
	const char *ro = kv_config_kept("replica-read-only");
	if ((!ro || !strcasecmp(ro, "yes")) &&
	    ((rt->fl & KV_CMD_WRITE) || kv_multi_exec_writes(x, rt))) {
		if (kv_multi_exec_abort(x, rt, READONLY_ERR))
			return true;
		kv_multi_reject(x);
		resp_error(x, "%s", READONLY_ERR);
		return true;
	}
	const char *stale = kv_config_kept("replica-serve-stale-data");
	if (L.st != L_UP && stale && !strcasecmp(stale, "no") &&
	    (!(rt->fl & KV_CMD_STALE) || kv_multi_exec_lacks(x, rt, KV_CMD_STALE))) {
		if (kv_multi_exec_abort(x, rt, MASTERDOWN_ERR))
			return true;
		kv_multi_reject(x);
		resp_error(x, "%s", MASTERDOWN_ERR);
		return true;
	}
	return false;
}

void kv_repl_info(char *out, size_t cap)
{
	size_t k = 0;
#define PUT(...) (k += (size_t)snprintf(out + k, k < cap ? cap - k : 0, __VA_ARGS__))
	if (R.replica) {
		uint64_t now = L.w ? L.w->now_ms : 0;
		bool up = L.st == L_UP;
		PUT("role:slave\r\nmaster_host:%s\r\nmaster_port:%u\r\nmaster_link_status:%s\r\n"
		    "master_last_io_seconds_ago:%lld\r\nmaster_sync_in_progress:%d\r\n"
		    "slave_read_repl_offset:%" PRIu64 "\r\nslave_repl_offset:%" PRIu64 "\r\n",
		    R.mhost, R.mport, up ? "up" : "down",
		    up ? (long long)((now - L.last_io) / 1000) : -1LL, L.st == L_RDB, L.off, L.off);
		if (!up)
			PUT("master_link_down_since_seconds:%lld\r\n",
			    L.down_since ? (long long)((now - L.down_since) / 1000) : -1LL);
		PUT("slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\n");
	} else {
		PUT("role:master\r\n");
	}
	PUT("connected_slaves:%u\r\n", R.n);
	for (uint32_t i = 0; i < R.n; i++) {
		char ip[80];
		replica_addr(&R.r[i], ip, sizeof(ip));
		struct resp_ctx x;
		uint64_t now = peer_ctx(&R.r[i].c, &x) ? x.w->now_ms : R.r[i].ack_ms;
		PUT("slave%u:ip=%s,port=%u,state=online,offset=%" PRIu64 ",lag=%" PRIu64 "\r\n", i, ip,
		    R.r[i].port, R.r[i].ack, (now - R.r[i].ack_ms) / 1000);
	}
	PUT("master_failover_state:no-failover\r\nmaster_replid:%s\r\n"
	    "master_replid2:0000000000000000000000000000000000000000\r\n"
	    "master_repl_offset:%" PRIu64 "\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
	    "repl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n",
	    R.replica && L.mreplid[0] ? L.mreplid : replid(), R.replica ? L.off : R.offset);
#undef PUT
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_repl[] = {
	{ "sync", 1, "admin noscript no_async_loading no_multi", "server", "Starts a replica's full synchronization: the data set as RDB, then the command stream.", cmd_sync, 0, 0, 0 },
	{ "psync", -3, "admin noscript no_async_loading no_multi", "server", "Starts a replica's synchronization: always a full one (+FULLRESYNC), then the command stream.", cmd_psync, 0, 0, 0 },
	{ "replconf", -1, "admin noscript loading stale allow_busy", "server", "A replica's settings and acknowledgements (listening-port, capa, ACK).", cmd_replconf, 0, 0, 0 },
	{ "role", 1, "noscript loading stale fast", "server", "The replication role: master with its replicas' offsets, or slave and its primary.", cmd_role, 0, 0, 0 },
	{ "replicaof", 3, "admin noscript stale no_async_loading", "server", "Makes pkvs a replica of host port (writes refused), or a primary again (NO ONE).", cmd_replicaof, 0, 0, 0 },
	{ "slaveof", 3, "admin noscript stale no_async_loading", "server", "Makes pkvs a replica of host port, or a primary again (NO ONE): REPLICAOF's old name.", cmd_replicaof, 0, 0, 0 },
	{ 0 },
};
