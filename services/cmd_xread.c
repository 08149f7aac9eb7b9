/*
 * cmd_xread.c - XREAD and XREADGROUP, synchronous and blocking, as Redis
 * 7.0's xreadCommand and serveClientsBlockedOnStreamKey answer them.
 *
 * A delivery to a consumer group is one kv group: the pending entries it
 * creates (or takes from another consumer), the consumers' pending
 * counts and the group's last delivered ID and read counter, so after a
 * crash a delivered entry is pending or was never delivered. The reply
 * is built after that group commits, from the entries (unchanged by it),
 * and leaves behind its barrier as every reply does. Replicas get what
 * Redis sends them: an XCLAIM per delivered entry (and XGROUP SETID
 * under NOACK), never the XREADGROUP.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_block.h"
#include "cmd_script.h"
#include "cmd_stream.h"
#include "kv_notify.h"
#include "kv_repl.h"

/* XREAD's count when it blocks with none given (Redis's). */
#define XREAD_BLOCK_COUNT 1000u


static const struct kv_sid sid_max = { UINT64_MAX, UINT64_MAX };

/* ------------------------------------------------------------ delivery */

/* A consumer's read of group g: who, and what it may see. */
struct reader {
	struct kv_stream *s;
	const uint8_t *group, *consumer;
	size_t glen, clen;
	struct kv_sgroup g;
	bool noack;
	uint32_t db;
	struct paste_resp_arg key;
};

/* The reader's group and consumer as arguments (replicas'). */
static struct paste_resp_arg group_of(const struct reader *rd)
{
	return (struct paste_resp_arg){ (const char *)rd->group, rd->glen };
}

static struct paste_resp_arg consumer_of(const struct reader *rd)
{
	return (struct paste_resp_arg){ (const char *)rd->consumer, rd->clen };
}

static void propagate_consumer(const struct reader *rd)
{
	struct paste_resp_arg av[5] = { { "XGROUP", 6 }, { "CREATECONSUMER", 14 }, rd->key,
					group_of(rd), consumer_of(rd) };
	kv_repl_also(rd->db, av, 5);
}

/* The consumer, made (created true) or its seen time refreshed, as
 * Redis's lookup does; the caller writes it. */
static void touch_consumer(struct kv *kv, struct reader *rd, struct kv_sconsumer *c, bool *created)
{
	*created = kv_sconsumer_get(kv, rd->s, rd->g.num, rd->consumer, rd->clen, c) != 0;
	if (*created) {
		*c = (struct kv_sconsumer){ 0 };
		kv_notify(KV_NOTIFY_STREAM, "xgroup-createconsumer", &rd->s->key);
	}
	c->seen_ms = (uint64_t)kv_now(kv);
}

/* Take pending entry id from its consumer (another one's): its count drops. */
static int take_from(struct kv *kv, struct reader *rd, const struct kv_spending *p)
{
	struct kv_sconsumer old;
	if (kv_sconsumer_get(kv, rd->s, rd->g.num, p->consumer, p->clen, &old))
		return 0;
	if (old.pending)
		old.pending--;
	return kv_sconsumer_put(kv, rd->s, rd->g.num, p->consumer, p->clen, &old);
}

/* New entries after `after`, at most count (0: all), delivered: the IDs
 * into *ids (malloc'd), their number into *n. One kv group. */
static int deliver_new(struct kv *kv, struct reader *rd, struct kv_sid after, uint64_t count,
		       struct kv_sid **ids, uint64_t *n)
{
	*ids = NULL;
	*n = 0;
	uint64_t cap = 0, now = (uint64_t)kv_now(kv);
	struct kv_sconsumer c;
	bool created, setid = false;
	int r = kv_stream_begin(kv, rd->s, 0);
	if (r)
		return r;
	touch_consumer(kv, rd, &c, &created);
	/* Deliveries delete nothing: the tombstone stays where it is. */
	struct kv_sid was = rd->g.last, tomb = kv_stream_tombstone(kv, rd->s);
	struct kv_stream_walk w;
	struct kv_sid start = after;
	if (!kv_sid_incr(&start))
		count = 0, start = sid_max;
	kv_stream_walk_init(kv, &w, rd->s->o.coll.id, start, false);
	while (r == 0 && (!count || *n < count) && kv_sid_cmp(after, sid_max) < 0 &&
	       (r = kv_stream_walk_next(kv, &w)) == 1) {
		r = 0;
		struct kv_sid id = w.id;
		if (kv_sid_cmp(id, rd->g.last) > 0) {
			if (rd->g.read >= 0 && !kv_sid_tombstone_after(tomb, id))
				rd->g.read++;
			else if (rd->s->o.coll.added)
				rd->g.read = kv_stream_distance(kv, rd->s, id);
			rd->g.last = id;
			setid = rd->noack;
		}
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			struct kv_sid *m = realloc(*ids, cap * sizeof(**ids));
			if (!m) {
				r = -ENOMEM;
				break;
			}
			*ids = m;
		}
		(*ids)[(*n)++] = id;
		if (rd->noack)
			continue;
		struct kv_spending p;
		if (kv_spending_get(kv, rd->s, rd->g.num, id, &p) == 0) {
			if (p.clen != rd->clen || memcmp(p.consumer, rd->consumer, p.clen)) {
				r = take_from(kv, rd, &p);
				c.pending++;
			}
		} else {
			rd->g.pending++;
			c.pending++;
		}
		if (r == 0)
			r = kv_spending_put(kv, rd->s, rd->g.num, id, now, 1, rd->consumer, rd->clen);
	}
	if (r == 0)
		r = kv_sconsumer_put(kv, rd->s, rd->g.num, rd->consumer, rd->clen, &c);
	if (r == 0)
		r = kv_sgroup_put(kv, rd->s, rd->group, rd->glen, &rd->g);
	r = kv_stream_end(kv, rd->s, r);
	if (r) {
		free(*ids);
		*ids = NULL;
		*n = 0;
		return r;
	}
	/* Replicas, once the group committed (a blocked client's serve drops
	 * the key's own change for these): each XCLAIM names the group's
	 * last ID as it stood after that entry. */
	if (kv_repl_active) {
		struct paste_resp_arg group = group_of(rd), consumer = consumer_of(rd);
		if (created && rd->noack)
			propagate_consumer(rd);
		for (uint64_t i = 0; !rd->noack && i < *n; i++)
			kv_stream_propagate_claim(rd->db, &rd->key, &group, &consumer, (*ids)[i], now, 1,
						  kv_sid_cmp((*ids)[i], was) > 0 ? (*ids)[i] : was);
		if (setid)
			kv_stream_propagate_setid(rd->db, &rd->key, &group, &rd->g);
	}
	return 0;
}

/* The consumer's own pending entries from `from` (inclusive), at most
 * count (0: all), redelivered (time now, count + 1): into *mine
 * (malloc'd), *n; an entry deleted meanwhile keeps count 0 (answered
 * [id, nil]). One kv group. */
static int deliver_history(struct kv *kv, struct reader *rd, struct kv_sid from, uint64_t count,
			   struct kv_spending **mine, uint64_t *n)
{
	uint64_t now = (uint64_t)kv_now(kv), cap = 0;
	struct kv_sconsumer c;
	bool created;
	*mine = NULL;
	*n = 0;
	int r = kv_stream_begin(kv, rd->s, 0);
	if (r)
		return r;
	touch_consumer(kv, rd, &c, &created);
	r = kv_sconsumer_put(kv, rd->s, rd->g.num, rd->consumer, rd->clen, &c);
	struct kv_spending_walk pw;
	kv_spending_walk_init(kv, &pw, rd->s->o.coll.id, rd->g.num, from);
	while (r == 0 && (!count || *n < count) && (r = kv_spending_walk_next(kv, &pw)) == 1) {
		r = 0;
		if (pw.p.clen != rd->clen || memcmp(pw.p.consumer, rd->consumer, rd->clen))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			struct kv_spending *m = realloc(*mine, cap * sizeof(**mine));
			if (!m) {
				r = -ENOMEM;
				break;
			}
			*mine = m;
		}
		(*mine)[(*n)++] = pw.p;
	}
	for (uint64_t i = 0; r == 0 && i < *n; i++) {
		struct kv_spending *p = &(*mine)[i];
		uint8_t *val;
		size_t vlen;
		if (kv_stream_get(kv, rd->s, p->id, &val, &vlen) == 0) {
			free(val);
			p->delivered_ms = now;
			p->count++;
			r = kv_spending_put(kv, rd->s, rd->g.num, p->id, now, p->count, rd->consumer,
					    rd->clen);
		} else {
			p->count = 0;
		}
	}
	r = kv_stream_end(kv, rd->s, r < 0 ? r : 0);
	if (r) {
		free(*mine);
		*mine = NULL;
		*n = 0;
	} else if (created && rd->noack && kv_repl_active) {
		propagate_consumer(rd);
	}
	return r;
}

static int history_out(struct kv_out *o, struct kv *kv, const struct kv_stream *s,
		       const struct kv_spending *mine, uint64_t n)
{
	kv_out_array(o, n);
	for (uint64_t i = 0; i < n; i++) {
		struct kv_stream_walk w;
		kv_stream_walk_init(kv, &w, s->o.coll.id, mine[i].id, false);
		if (mine[i].count && kv_stream_walk_next(kv, &w) == 1 &&
		    kv_sid_cmp(w.id, mine[i].id) == 0) {
			int r = kv_stream_entry_out(o, kv, w.id, w.ext, w.n, w.len);
			if (r)
				return r;
		} else {
			kv_out_array(o, 2);
			kv_sid_out(o, mine[i].id);
			kv_out_null_array(o);
		}
	}
	return 0;
}

/* Entries ids[0..n) of s, replied. */
static int entries_out(struct kv_out *o, struct kv *kv, const struct kv_stream *s,
		       const struct kv_sid *ids, uint64_t n)
{
	kv_out_array(o, n);
	struct kv_stream_walk w;
	if (n)
		kv_stream_walk_init(kv, &w, s->o.coll.id, ids[0], false);
	for (uint64_t i = 0; i < n; i++) {
		int r = kv_stream_walk_next(kv, &w);
		if (r != 1 || kv_sid_cmp(w.id, ids[i]) != 0)
			return r < 0 ? r : -EBADMSG;
		if ((r = kv_stream_entry_out(o, kv, w.id, w.ext, w.n, w.len)) < 0)
			return r;
	}
	return 0;
}

/* ------------------------------------------------------------ blocking */

/* A blocked XREAD or XREADGROUP: its options, then group and consumer
 * names, then per key its ID (16 bytes), length (4) and bytes. */
struct xblock {
	uint64_t count;
	bool group, noack;
	uint32_t nkeys, glen, clen;
	uint8_t data[];
};

/* The ID x waits after on key k, and the names: false when k is not one
 * of its keys. */
static bool xblock_find(const struct xblock *b, const struct paste_resp_arg *k, struct kv_sid *id)
{
	const uint8_t *p = b->data + b->glen + b->clen;
	for (uint32_t i = 0; i < b->nkeys; i++) {
		uint32_t len;
		memcpy(&len, p + 16, 4);
		if (len == k->len && memcmp(p + 20, k->p, len) == 0) {
			*id = kv_sid_get(p);
			return true;
		}
		p += 20 + len;
	}
	return false;
}

static void key_head(struct kv_out *o, const struct paste_resp_arg *key)
{
	if (kv_out_proto(o) == 2) {
		kv_out_array(o, 1);
		kv_out_array(o, 2);
	} else {
		kv_out_map(o, 1);
	}
	kv_out_bulk(o, key->p, key->len);
}

static bool xblock_serve(struct resp_ctx *x, struct kv *kv, struct kv_key *k, const void *arg)
{
	const struct xblock *b = arg;
	struct paste_resp_arg key = kv_key_arg(k);
	struct kv_sid after;
	if (!xblock_find(b, &key, &after))
		return false;
	struct kv_stream s = { .key = *k };
	if (kv_stream_open(kv, &s, false)) {
		if (!b->group)
			return false;
		resp_error(x, "%s", KV_XREAD_UNBLOCKED);
		return true;
	}
	struct kv_sid last = { s.o.coll.last_ms, s.o.coll.last_seq };
	struct kv_out o;
	if (!b->group) {
		if (kv_sid_cmp(last, after) <= 0)
			return false;
		kv_sid_incr(&after);
		kv_out_init(&o, x);
		key_head(&o, &key);
		int64_t got = kv_stream_range_out(&o, kv, &s, after, sid_max, b->count, false);
		if (kv_out_end(&o) == 0 && got < 0)
			resp_close(x);
		return true;
	}
	struct reader rd = { .s = &s, .group = b->data, .glen = b->glen, .consumer = b->data + b->glen,
			     .clen = b->clen, .noack = b->noack, .db = k->db, .key = key };
	if (kv_sgroup_get(kv, &s, rd.group, rd.glen, &rd.g)) {
		resp_error(x, "NOGROUP the consumer group this client was blocked on no longer exists");
		return true;
	}
	if (kv_sid_cmp(last, rd.g.last) <= 0)
		return false;
	uint32_t mark = kv_repl_active ? kv_repl_serve_mark() : 0;
	(void)mark;
	struct kv_sid *ids;
	uint64_t n;
	int r = deliver_new(kv, &rd, rd.g.last, b->count, &ids, &n);
	if (r) {
		kv_reply_errno(x, r);
		return true;
	}
	kv_out_init(&o, x);
	key_head(&o, &key);
	r = entries_out(&o, kv, &s, ids, n);
	free(ids);
	if (kv_out_end(&o) == 0 && r)
		resp_close(x);
	return true;
}

/* ------------------------------------------------------------ XREAD, XREADGROUP */

/* What a key of XREAD or XREADGROUP gets now. */
struct xres {
	bool now, history;
	uint64_t n;
	struct kv_sid *ids;             /* a group's new entries delivered */
	struct kv_spending *hist;       /* the consumer's history redelivered */
};

static void xread(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n,
		  bool xgroup)
{
	int64_t timeout = -1, count = 0;
	uint32_t streams = 0, nk = 0;
	const struct paste_resp_arg *group = NULL, *consumer = NULL;
	bool noack = false;
	for (uint32_t i = 1; i < n; i++) {
		uint32_t more = n - i - 1;
		if (paste_resp_arg_eq(&a[i], "block") && more) {
			if (kv_script_client(x)) {
				resp_error(x, "ERR %.*s command is not allowed with BLOCK option from scripts",
					   (int)a[0].len, a[0].p);
				return;
			}
			if (!kv_arg_range(x, &a[++i], INT64_MIN, INT64_MAX, "timeout is not an integer or out of range", &timeout))
				return;
			if (timeout < 0) {
				resp_error(x, "ERR timeout is negative");
				return;
			}
		} else if (paste_resp_arg_eq(&a[i], "count") && more) {
			if (!kv_arg_int(x, &a[++i], &count))
				return;
			if (count < 0)
				count = 0;
		} else if (paste_resp_arg_eq(&a[i], "streams") && more) {
			streams = i + 1;
			if ((n - streams) % 2) {
				resp_error(x, "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.");
				return;
			}
			nk = (n - streams) / 2;
			break;
		} else if (paste_resp_arg_eq(&a[i], "group") && more >= 2) {
			if (!xgroup) {
				resp_error(x, "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.");
				return;
			}
			group = &a[i + 1];
			consumer = &a[i + 2];
			i += 2;
		} else if (paste_resp_arg_eq(&a[i], "noack")) {
			if (!xgroup) {
				resp_error(x, "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.");
				return;
			}
			noack = true;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	if (!streams) {
		resp_error(x, "ERR syntax error");
		return;
	}
	if (xgroup && !group) {
		resp_error(x, "ERR Missing GROUP option for XREADGROUP");
		return;
	}
	if (consumer && consumer->len > KV_INLINE) {
		resp_error(x, "ERR consumer name too long (pkvs's limit: %u bytes)", KV_INLINE);
		return;
	}
	struct kv_sid *ids = calloc(nk, sizeof(*ids));
	struct kv_stream *ss = calloc(nk, sizeof(*ss));
	struct kv_sgroup *gs = calloc(nk, sizeof(*gs));
	bool *have = calloc(nk, sizeof(*have));
	struct xres *res = calloc(nk, sizeof(*res));
	uint64_t served = 0;
	if (!ids || !ss || !gs || !have || !res) {
		resp_error(x, "ERR out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < nk; i++) {
		const struct paste_resp_arg *key = &a[streams + i], *id = &a[streams + nk + i];
		int r = kv_stream_arg(x, kv, key, &ss[i], true);
		if (r == -EINVAL)
			goto out;
		have[i] = r == 0;
		if (group && (!have[i] || kv_sgroup_get(kv, &ss[i], group->p, group->len, &gs[i]))) {
			resp_error(x, "NOGROUP No such key '%.*s' or consumer group '%.*s' in XREADGROUP with GROUP option",
				   (int)key->len, key->p, (int)group->len, group->p);
			goto out;
		}
		if (id->len == 1 && id->p[0] == '$') {
			if (xgroup) {
				resp_error(x, "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
				goto out;
			}
			ids[i] = have[i] ? (struct kv_sid){ ss[i].o.coll.last_ms, ss[i].o.coll.last_seq }
					 : (struct kv_sid){ 0, 0 };
		} else if (id->len == 1 && id->p[0] == '>') {
			if (!xgroup) {
				resp_error(x, "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
				goto out;
			}
			ids[i] = sid_max;
		} else if (!kv_sid_arg(x, id, &ids[i], 0, true, NULL)) {
			goto out;
		}
	}
	/* Serve what can be served now: group reads deliver first (each its
	 * kv group), then the reply is written. */
	for (uint32_t i = 0; i < nk; i++) {
		if (!have[i])
			continue;
		struct kv_stream *s = &ss[i];
		struct kv_sid top;
		if (group) {
			struct reader rd = { .s = s, .group = (const uint8_t *)group->p, .glen = group->len,
					     .consumer = (const uint8_t *)consumer->p, .clen = consumer->len,
					     .g = gs[i], .noack = noack, .db = kv_resp_db(x),
					     .key = a[streams + i] };
			int r;
			if (kv_sid_cmp(ids[i], sid_max) != 0) {
				struct kv_sid from = ids[i];
				if (!kv_sid_incr(&from))
					from = sid_max;
				r = deliver_history(kv, &rd, from, (uint64_t)count, &res[i].hist, &res[i].n);
				res[i].history = true;
			} else if (s->o.coll.count && kv_stream_edge(kv, s, true, &top) == 1 &&
				   kv_sid_cmp(top, gs[i].last) > 0) {
				r = deliver_new(kv, &rd, gs[i].last, (uint64_t)count, &res[i].ids, &res[i].n);
			} else {
				continue;
			}
			if (r) {
				kv_reply_errno(x, r);
				goto out;
			}
			res[i].now = true;
		} else if (s->o.coll.count && kv_stream_edge(kv, s, true, &top) == 1) {
			res[i].now = kv_sid_cmp(top, ids[i]) > 0;
		}
		served += res[i].now;
	}
	if (group)
		kv_repl_also(kv_resp_db(x), NULL, 0);   /* never the XREADGROUP itself */
	if (served) {
		struct kv_out o;
		int r = 0;
		kv_out_init(&o, x);
		if (kv_out_proto(&o) == 2)
			kv_out_array(&o, served);
		else
			kv_out_map(&o, served);
		for (uint32_t i = 0; i < nk && r == 0; i++) {
			if (!res[i].now)
				continue;
			if (kv_out_proto(&o) == 2)
				kv_out_array(&o, 2);
			kv_out_bulk(&o, a[streams + i].p, a[streams + i].len);
			if (res[i].history) {
				r = history_out(&o, kv, &ss[i], res[i].hist, res[i].n);
			} else if (group) {
				r = entries_out(&o, kv, &ss[i], res[i].ids, res[i].n);
			} else {
				struct kv_sid from = ids[i];
				kv_sid_incr(&from);
				int64_t got = kv_stream_range_out(&o, kv, &ss[i], from, sid_max,
								  (uint64_t)count, false);
				r = got < 0 ? (int)got : 0;
			}
		}
		if (kv_out_end(&o) == 0 && r)
			resp_close(x);
		goto out;
	}
	if (timeout < 0 || !kv_block_allowed(x, kv)) {
		resp_send(x, kv_proto(x) == 3 ? "_\r\n" : "*-1\r\n", kv_proto(x) == 3 ? 3 : 5);
		goto out;
	}
	/* Block: the IDs resolved now ("$": the last ID; ">": the group's,
	 * looked up again at each serve). */
	size_t len = sizeof(struct xblock) + (group ? group->len + consumer->len : 0);
	for (uint32_t i = 0; i < nk; i++)
		len += 20 + a[streams + i].len;
	struct xblock *b = malloc(len);
	if (!b) {
		resp_error(x, "ERR out of memory");
		goto out;
	}
	*b = (struct xblock){ .count = count ? (uint64_t)count : XREAD_BLOCK_COUNT, .group = group != NULL,
			      .noack = noack, .nkeys = nk, .glen = group ? (uint32_t)group->len : 0,
			      .clen = group ? (uint32_t)consumer->len : 0 };
	uint8_t *p = b->data;
	if (group) {
		memcpy(p, group->p, group->len);
		memcpy(p + group->len, consumer->p, consumer->len);
		p += group->len + consumer->len;
	}
	for (uint32_t i = 0; i < nk; i++) {
		uint32_t kl = (uint32_t)a[streams + i].len;
		kv_sid_put(p, ids[i]);
		memcpy(p + 16, &kl, 4);
		memcpy(p + 20, a[streams + i].p, kl);
		p += 20 + kl;
	}
	struct kv_block_req req = { KV_STREAM, xblock_serve, b, len, .every = true, .gone = group != NULL };
	kv_block(x, kv, &a[streams], nk, (uint64_t)timeout, &req);
	free(b);
out:
	for (uint32_t i = 0; res && i < nk; i++) {
		free(res[i].ids);
		free(res[i].hist);
	}
	free(res);
	free(ids);
	free(ss);
	free(gs);
	free(have);
}

static void cmd_xread(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	xread(x, kv, a, n, false);
}

static void cmd_xreadgroup(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	xread(x, kv, a, n, true);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_xread[] = {
	{ "xread", -4, "readonly blocking", "stream", "Entries after the given IDs of one or more streams (COUNT), or waits for some (BLOCK milliseconds; $: after the last).", cmd_xread, 0, 0, 0 },
	{ "xreadgroup", -7, "write blocking", "stream", "Delivers entries to a consumer of a group (> : new ones, which become pending; an ID: its own pending history), or waits for some (BLOCK, NOACK).", cmd_xreadgroup, 0, 0, 0 },
	{ 0 }
};
