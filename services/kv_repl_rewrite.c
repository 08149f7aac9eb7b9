/*
 * kv_repl_rewrite.c - a command's form in the replication stream, as
 * Redis 7.0 rewrites it (kv_repl_rewrite.h): relative deadlines made
 * absolute, INCRBYFLOAT as SET KEEPTTL, SPOP as SREM, blocking pops as
 * their plain forms, MIGRATE's keys as DEL, RESTORE with ABSTTL. kv_repl.c
 * decides when a command propagates and sends the unit.
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
#include "kv_repl_rewrite.h"

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
bool kv_repl_read_string(struct kv *kv, uint32_t db, const struct paste_resp_arg *a, char **buf,
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

void kv_repl_spop_snapshot(struct kv *kv, uint32_t db, const struct paste_resp_arg *a)
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
		kv_repl_add_cmd(db, del, 2);
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
		if (!kv_repl_grow((void **)&av, &cap, n + 1, sizeof(*av))) {
			free(av);
			return;
		}
		av[n++] = (struct paste_resp_arg){ (const char *)m, l };
	}
	if (av && n > 2) {
		av[0] = (struct paste_resp_arg){ "SREM", 4 };
		av[1] = *key;
		kv_repl_add_cmd(db, av, n);
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

void kv_repl_mpop_snapshot(struct kv *kv, uint32_t db, const char *nm, const struct paste_resp_arg *a,
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
void kv_repl_propagate(struct resp_ctx *x, struct kv *kv, struct kv_cmd_rt *rt,
		      const struct paste_resp_arg *a, uint32_t n, uint32_t db)
{
	size_t lastlen;
	const uint8_t *last = kv_repl_last(&lastlen);      /* a blocking pop's key */
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
			kv_repl_add_cmd(db, av, 5);
			return;
		}
		if (get && n <= 8) {
			uint32_t k = 0;
			for (uint32_t i = 0; i < n; i++)
				if (i < 3 || !opt_is(&a[i], "GET"))
					av[k++] = a[i];
			kv_repl_add_cmd(db, av, k);
			return;
		}
	} else if ((is(nm, "setex") || is(nm, "psetex")) && n == 4) {
		if (!deadline(kv, db, &a[1], &ms)) {
			kv_repl_add_cmd(db, del, 2);
			return;
		}
		av[0] = (struct paste_resp_arg){ "SET", 3 };
		av[1] = a[1], av[2] = a[3];
		av[3] = (struct paste_resp_arg){ "PXAT", 4 };
		av[4] = (struct paste_resp_arg){ num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)ms) };
		kv_repl_add_cmd(db, av, 5);
		return;
	} else if (is(nm, "expire") || is(nm, "pexpire") || is(nm, "expireat") || is(nm, "pexpireat")) {
		if (!deadline(kv, db, &a[1], &ms)) {
			kv_repl_add_cmd(db, del, 2);
			return;
		}
		if (!is(nm, "pexpireat") && n <= 4) {
			av[0] = (struct paste_resp_arg){ "PEXPIREAT", 9 };
			av[1] = a[1];
			av[2] = (struct paste_resp_arg){ num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)ms) };
			if (n == 4)
				av[3] = a[3];
			kv_repl_add_cmd(db, av, n);
			return;
		}
	} else if (is(nm, "getex")) {
		if (!deadline(kv, db, &a[1], &ms)) {
			kv_repl_add_cmd(db, del, 2);
			return;
		}
		if (n >= 3 && opt_is(&a[2], "PERSIST")) {
			av[0] = (struct paste_resp_arg){ "PERSIST", 7 };
			av[1] = a[1];
			kv_repl_add_cmd(db, av, 2);
		} else if (ms != KV_NO_TTL) {
			av[0] = (struct paste_resp_arg){ "PEXPIREAT", 9 };
			av[1] = a[1];
			av[2] = (struct paste_resp_arg){ num, (size_t)snprintf(num, sizeof(num), "%lld", (long long)ms) };
			kv_repl_add_cmd(db, av, 3);
		}
		return;
	} else if (is(nm, "getdel")) {
		kv_repl_add_cmd(db, del, 2);
		return;
	} else if (is(nm, "incrbyfloat")) {
		char *v;
		size_t vl;
		if (kv_repl_read_string(kv, db, &a[1], &v, &vl)) {
			av[0] = (struct paste_resp_arg){ "SET", 3 };
			av[1] = a[1];
			av[2] = (struct paste_resp_arg){ v, vl };
			av[3] = (struct paste_resp_arg){ "KEEPTTL", 7 };
			kv_repl_add_cmd(db, av, 4);
			free(v);
		}
		return;
	} else if (is(nm, "hincrbyfloat") && n == 4) {
		struct kv_hash h;
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t en, len;
		kv_key_init(kv, &h.key, db, a[1].p, a[1].len);
		if (kv_hash_open(kv, &h, false) == 0 &&
		    kv_hash_get(kv, &h, a[2].p, a[2].len, ext, &en, &len, NULL) == 0 &&
		    len < sizeof(num)) {
			paste_store_read(kv->store, ext, en, 0, num, len);
			av[0] = (struct paste_resp_arg){ "HSET", 4 };
			av[1] = a[1], av[2] = a[2];
			av[3] = (struct paste_resp_arg){ num, len };
			kv_repl_add_cmd(db, av, 4);
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
		av[1] = (struct paste_resp_arg){ (const char *)last, lastlen };
		kv_repl_add_cmd(db, av, 2);
		return;
	} else if (is(nm, "brpoplpush") && n == 4) {
		av[0] = (struct paste_resp_arg){ "RPOPLPUSH", 9 };
		av[1] = a[1], av[2] = a[2];
		kv_repl_add_cmd(db, av, 3);
		return;
	} else if (is(nm, "blmove") && n == 6) {
		av[0] = (struct paste_resp_arg){ "LMOVE", 5 };
		for (uint32_t i = 1; i < 5; i++)
			av[i] = a[i];
		kv_repl_add_cmd(db, av, 5);
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
		av[1] = (struct paste_resp_arg){ (const char *)last, lastlen };
		/* The count it took: the key's members before less after. */
		int64_t had = mpop_before(last, lastlen), now = coll_count(kv, db, &av[1]);
		if (had >= 0 && had - now < count)
			count = had - now;
		av[2] = (struct paste_resp_arg){ cnt, (size_t)snprintf(cnt, sizeof(cnt), "%lld", (long long)count) };
		kv_repl_add_cmd(db, av, 3);
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
				kv_repl_add_cmd(db, d, 2);
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
			kv_repl_add_cmd(db, av, n + 1);
			return;
		}
	}
	kv_repl_add_cmd(db, a, n);
}
