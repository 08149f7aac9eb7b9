/*
 * cmd_xgroup.c - consumer groups: XGROUP, XACK, XPENDING, XCLAIM and
 * XAUTOCLAIM, as Redis 7.0's t_stream.c answers them, over kv_stream.h.
 *
 * Each command's changes (a group and its pending entries, consumers and
 * their counts) are one kv group. A consumer's own pending list is the
 * group's, its entries picked out by name: XPENDING with a consumer and
 * a history read cost a walk of the group's list (Redis keeps a second
 * index per consumer; its cost is a second entry per delivery here).
 * XCLAIM and XAUTOCLAIM go to replicas as the XCLAIMs Redis sends.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_block.h"
#include "cmd_stream.h"
#include "kv_notify.h"
#include "kv_repl.h"


static bool name_ok(struct resp_ctx *x, const struct paste_resp_arg *a, const char *what)
{
	if (a->len <= KV_INLINE)
		return true;
	resp_error(x, "ERR %s name too long (pkvs's limit: %u bytes)", what, KV_INLINE);
	return false;
}

/* The stream a[1] and its group a[2]: false after replying (WRONGTYPE,
 * NOGROUP). */
static bool group_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		      struct kv_stream *s, struct kv_sgroup *g)
{
	int r = kv_stream_arg(x, kv, &a[1], s, true);
	if (r == -EINVAL)
		return false;
	if (r || kv_sgroup_get(kv, s, a[2].p, a[2].len, g)) {
		resp_error(x, "NOGROUP No such key '%.*s' or consumer group '%.*s'", (int)a[1].len,
			   a[1].p, (int)a[2].len, a[2].p);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------ XGROUP */

/* A change's end: OK and its keyspace event, or its error. */
static void ok_or(struct resp_ctx *x, int r, const char *event, const struct kv_key *k)
{
	if (r) {
		kv_reply_errno(x, r);
		return;
	}
	resp_ok(x);
	kv_notify(KV_NOTIFY_STREAM, event, k);
}

static void cmd_xgroup_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CREATE <key> <groupname> <id|$> [option]",
		"    Create a new consumer group. Options are:",
		"    * MKSTREAM",
		"      Create the empty stream if it does not exist.",
		"    * ENTRIESREAD entries_read",
		"      Set the group's entries_read counter (internal use).",
		"CREATECONSUMER <key> <groupname> <consumer>",
		"    Create a new consumer in the specified group.",
		"DELCONSUMER <key> <groupname> <consumer>",
		"    Remove the specified consumer.",
		"DESTROY <key> <groupname>",
		"    Remove the specified group.",
		"SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
		"    Set the current group ID and entries_read counter.",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

/* What every XGROUP subcommand but HELP reads first, as Redis does: the
 * options (CREATE, SETID), the stream, the group. false after replying. */
struct xg {
	struct kv_stream s;
	bool have, found, mkstream;
	int64_t read;
	struct kv_sgroup g;
};

static bool xgroup_open(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n, struct xg *q, bool needs_group)
{
	bool create = paste_resp_arg_eq(&a[1], "create"), setid = paste_resp_arg_eq(&a[1], "setid");
	q->mkstream = false;
	q->read = -1;
	for (uint32_t i = 5; i < n;) {
		if (create && paste_resp_arg_eq(&a[i], "mkstream")) {
			q->mkstream = true;
			i++;
		} else if ((create || setid) && paste_resp_arg_eq(&a[i], "entriesread") && i + 1 < n) {
			if (!kv_arg_int(x, &a[i + 1], &q->read))
				return false;
			if (q->read < 0 && q->read != -1) {
				resp_error(x, "ERR value for ENTRIESREAD must be positive or -1");
				return false;
			}
			i += 2;
		} else {
			kv_sub_syntax_error(x, "XGROUP", &a[1]);
			return false;
		}
	}
	int r = kv_stream_arg(x, kv, &a[2], &q->s, false);
	if (r == -EINVAL)
		return false;
	q->have = r == 0;
	q->found = q->have && kv_sgroup_get(kv, &q->s, a[3].p, a[3].len, &q->g) == 0;
	if (!q->mkstream) {
		if (!q->have) {
			resp_error(x, "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.");
			return false;
		}
		if (!q->found && needs_group) {
			resp_error(x, "NOGROUP No such consumer group '%.*s' for key name '%.*s'",
				   (int)a[3].len, a[3].p, (int)a[2].len, a[2].p);
			return false;
		}
	}
	return name_ok(x, &a[3], "group");
}

static void cmd_xgroup_create(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	struct xg q;
	if (n > 8) {
		kv_sub_syntax_error(x, "XGROUP", &a[1]);
		return;
	}
	if (!xgroup_open(x, kv, a, n, &q, false))
		return;
	struct kv_sid id = { 0, 0 };
	if (a[4].len == 1 && a[4].p[0] == '$') {
		if (q.have)
			id = (struct kv_sid){ q.s.o.coll.last_ms, q.s.o.coll.last_seq };
	} else if (!kv_sid_arg(x, &a[4], &id, 0, true, NULL)) {
		return;
	}
	if (q.found) {
		resp_error(x, "BUSYGROUP Consumer Group name already exists");
		return;
	}
	if (!q.have)
		kv_stream_new(kv, &q.s);
	struct kv_sgroup g = { .last = id, .read = q.read, .num = kv_new_id(kv) };
	int r = kv_stream_begin(kv, &q.s, 0);
	if (r == 0) {
		r = kv_sgroup_put(kv, &q.s, a[3].p, a[3].len, &g);
		q.s.dirty |= !q.have;           /* a new stream's record */
		r = kv_stream_end(kv, &q.s, r);
	}
	ok_or(x, r, "xgroup-create", &q.s.key);
}

static void cmd_xgroup_setid(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	struct xg q;
	if (n != 5 && n != 7) {
		kv_sub_syntax_error(x, "XGROUP", &a[1]);
		return;
	}
	if (!xgroup_open(x, kv, a, n, &q, true))
		return;
	struct kv_sid id;
	if (a[4].len == 1 && a[4].p[0] == '$')
		id = (struct kv_sid){ q.s.o.coll.last_ms, q.s.o.coll.last_seq };
	else if (!kv_sid_arg(x, &a[4], &id, 0, false, NULL))
		return;
	q.g.last = id;
	q.g.read = q.read;
	ok_or(x, kv_sgroup_put(kv, &q.s, a[3].p, a[3].len, &q.g), "xgroup-setid", &q.s.key);
}

static void cmd_xgroup_destroy(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			       uint32_t n)
{
	struct xg q;
	if (!xgroup_open(x, kv, a, n, &q, false))
		return;
	if (!q.found) {
		resp_int(x, 0);
		return;
	}
	kv_cset_prepare(kv, 2 * q.g.pending, 0);
	int r = kv_sgroup_delete(kv, &q.s, a[3].p, a[3].len, &q.g);
	if (r) {
		kv_reply_errno(x, r);
		return;
	}
	resp_int(x, 1);
	kv_notify(KV_NOTIFY_STREAM, "xgroup-destroy", &q.s.key);
}

static void cmd_xgroup_createconsumer(struct resp_ctx *x, struct kv *kv,
				      const struct paste_resp_arg *a, uint32_t n)
{
	struct xg q;
	struct kv_sconsumer c;
	if (!xgroup_open(x, kv, a, n, &q, true) || !name_ok(x, &a[4], "consumer"))
		return;
	if (kv_sconsumer_get(kv, &q.s, q.g.num, a[4].p, a[4].len, &c) == 0) {
		resp_int(x, 0);
		return;
	}
	c = (struct kv_sconsumer){ .seen_ms = (uint64_t)kv_now(kv) };
	int r = kv_sconsumer_put(kv, &q.s, q.g.num, a[4].p, a[4].len, &c);
	if (r) {
		kv_reply_errno(x, r);
		return;
	}
	resp_int(x, 1);
	kv_notify(KV_NOTIFY_STREAM, "xgroup-createconsumer", &q.s.key);
}

static void cmd_xgroup_delconsumer(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				   uint32_t n)
{
	struct xg q;
	struct kv_sconsumer c;
	if (!xgroup_open(x, kv, a, n, &q, true))
		return;
	if (a[4].len > KV_INLINE || kv_sconsumer_get(kv, &q.s, q.g.num, a[4].p, a[4].len, &c)) {
		resp_int(x, 0);
		return;
	}
	/* Its pending entries go with it. */
	int r = kv_stream_begin(kv, &q.s, 0);
	uint64_t gone = 0;
	struct kv_spending_walk pw;
	kv_spending_walk_init(kv, &pw, q.s.o.coll.id, q.g.num, (struct kv_sid){ 0, 0 });
	while (r == 0 && gone < c.pending && kv_spending_walk_next(kv, &pw) == 1) {
		if (pw.p.clen != a[4].len || memcmp(pw.p.consumer, a[4].p, a[4].len))
			continue;
		int d = kv_spending_delete(kv, &q.s, q.g.num, pw.p.id);
		r = d < 0 ? d : 0;
		gone++;
	}
	if (r == 0) {
		int d = kv_sconsumer_delete(kv, &q.s, q.g.num, a[4].p, a[4].len);
		r = d < 0 ? d : 0;
	}
	if (r == 0) {
		q.g.pending -= gone < q.g.pending ? gone : q.g.pending;
		r = kv_sgroup_put(kv, &q.s, a[3].p, a[3].len, &q.g);
	}
	r = kv_stream_end(kv, &q.s, r);
	if (r) {
		kv_reply_errno(x, r);
		return;
	}
	resp_int(x, (int64_t)c.pending);
	kv_notify(KV_NOTIFY_STREAM, "xgroup-delconsumer", &q.s.key);
}

/* ------------------------------------------------------------ XACK */

static void cmd_xack(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct kv_stream s;
	struct kv_sgroup g;
	int r = kv_stream_arg(x, kv, &a[1], &s, true);
	if (r == -EINVAL)
		return;
	if (r || kv_sgroup_get(kv, &s, a[2].p, a[2].len, &g)) {
		resp_int(x, 0);
		return;
	}
	struct kv_sid *ids = malloc((n - 3) * sizeof(*ids));
	if (!ids) {
		resp_error(x, "ERR out of memory");
		return;
	}
	for (uint32_t i = 3; i < n; i++) {
		if (!kv_sid_arg(x, &a[i], &ids[i - 3], 0, true, NULL)) {
			free(ids);
			return;
		}
	}
	int64_t acked = 0;
	r = kv_stream_begin(kv, &s, 0);
	for (uint32_t i = 0; r == 0 && i < n - 3; i++) {
		struct kv_spending p;
		struct kv_sconsumer c;
		if (kv_spending_get(kv, &s, g.num, ids[i], &p))
			continue;
		int d = kv_spending_delete(kv, &s, g.num, ids[i]);
		if (d < 0) {
			r = d;
			break;
		}
		if (kv_sconsumer_get(kv, &s, g.num, p.consumer, p.clen, &c) == 0 && c.pending) {
			c.pending--;
			r = kv_sconsumer_put(kv, &s, g.num, p.consumer, p.clen, &c);
		}
		g.pending--;
		acked++;
	}
	if (r == 0 && acked)
		r = kv_sgroup_put(kv, &s, a[2].p, a[2].len, &g);
	r = kv_stream_end(kv, &s, r);
	free(ids);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_int(x, acked);
}

/* ------------------------------------------------------------ XPENDING */

static void cmd_xpending(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	bool info = n == 3;
	int64_t count = 0, minidle = 0;
	struct kv_sid from = { 0, 0 }, to = { UINT64_MAX, UINT64_MAX };
	const struct paste_resp_arg *consumer = NULL;
	if (n != 3 && (n < 6 || n > 9)) {
		resp_error(x, "ERR syntax error");
		return;
	}
	if (n >= 6) {
		uint32_t at = 3;
		if (paste_resp_arg_eq(&a[3], "idle")) {
			if (!kv_arg_int(x, &a[4], &minidle))
				return;
			if (n < 8) {
				resp_error(x, "ERR syntax error");
				return;
			}
			at += 2;
		}
		if (!kv_arg_int(x, &a[at + 2], &count))
			return;
		if (count < 0)
			count = 0;
		bool ex;
		struct paste_resp_arg t;
		ex = a[at].len > 1 && a[at].p[0] == '(';
		t = ex ? (struct paste_resp_arg){ a[at].p + 1, a[at].len - 1 } : a[at];
		if (!kv_sid_arg(x, &t, &from, 0, ex, NULL))
			return;
		if (ex && !kv_sid_incr(&from)) {
			resp_error(x, "ERR invalid start ID for the interval");
			return;
		}
		ex = a[at + 1].len > 1 && a[at + 1].p[0] == '(';
		t = ex ? (struct paste_resp_arg){ a[at + 1].p + 1, a[at + 1].len - 1 } : a[at + 1];
		if (!kv_sid_arg(x, &t, &to, UINT64_MAX, ex, NULL))
			return;
		if (ex && !kv_sid_decr(&to)) {
			resp_error(x, "ERR invalid end ID for the interval");
			return;
		}
		if (at + 3 < n)
			consumer = &a[at + 3];
	}
	struct kv_stream s;
	struct kv_sgroup g;
	if (!group_arg(x, kv, a, &s, &g))
		return;
	struct kv_out o;
	struct kv_spending_walk pw;
	kv_out_init(&o, x);
	if (info) {
		kv_out_array(&o, 4);
		kv_out_int(&o, (int64_t)g.pending);
		if (!g.pending) {
			kv_out_null(&o);
			kv_out_null(&o);
			kv_out_null_array(&o);
			kv_out_end(&o);
			return;
		}
		struct kv_sid first = { 0, 0 }, last = { 0, 0 };
		kv_spending_walk_init(kv, &pw, s.o.coll.id, g.num, first);
		if (kv_spending_walk_next(kv, &pw) == 1)
			first = pw.p.id;
		kv_spending_last(kv, s.o.coll.id, g.num, &last);
		kv_sid_out(&o, first);
		kv_sid_out(&o, last);
		struct kv_sconsumer_walk cw;
		uint64_t with = 0;
		kv_sconsumer_walk_init(kv, &cw, s.o.coll.id, g.num);
		while (kv_sconsumer_walk_next(kv, &cw) == 1)
			with += cw.c.pending != 0;
		kv_out_array(&o, with);
		kv_sconsumer_walk_init(kv, &cw, s.o.coll.id, g.num);
		while (kv_sconsumer_walk_next(kv, &cw) == 1) {
			if (!cw.c.pending)
				continue;
			char num[24];
			kv_out_array(&o, 2);
			kv_out_bulk(&o, cw.name, cw.nlen);
			kv_out_bulk(&o, num, (size_t)snprintf(num, sizeof(num), "%" PRIu64, cw.c.pending));
		}
		kv_out_end(&o);
		return;
	}
	struct kv_sconsumer c;
	if (consumer && (consumer->len > KV_INLINE ||
			 kv_sconsumer_get(kv, &s, g.num, consumer->p, consumer->len, &c))) {
		kv_out_array(&o, 0);
		kv_out_end(&o);
		return;
	}
	/* Two walks: the count first, then the entries. */
	uint64_t now = (uint64_t)kv_now(kv), got = 0;
	for (int pass = 0; pass < 2; pass++) {
		uint64_t want = pass ? got : (uint64_t)count, seen = 0;
		if (pass)
			kv_out_array(&o, got);
		kv_spending_walk_init(kv, &pw, s.o.coll.id, g.num, from);
		while (seen < want && kv_spending_walk_next(kv, &pw) == 1 && kv_sid_cmp(pw.p.id, to) <= 0) {
			if (consumer && (pw.p.clen != consumer->len ||
					 memcmp(pw.p.consumer, consumer->p, consumer->len)))
				continue;
			uint64_t idle = now > pw.p.delivered_ms ? now - pw.p.delivered_ms : 0;
			if (minidle && (int64_t)idle < minidle)
				continue;
			seen++;
			if (!pass)
				continue;
			kv_out_array(&o, 4);
			kv_sid_out(&o, pw.p.id);
			kv_out_bulk(&o, pw.p.consumer, pw.p.clen);
			kv_out_int(&o, (int64_t)idle);
			kv_out_int(&o, (int64_t)pw.p.count);
		}
		got = seen;
	}
	kv_out_end(&o);
}

/* ------------------------------------------------------------ XCLAIM, XAUTOCLAIM */

/* A claim: the consumer taking entries and what it writes. */
struct claim {
	struct kv_stream *s;
	const struct paste_resp_arg *key, *group, *name;
	struct kv_sgroup g;
	struct kv_sconsumer c;
	bool have_c;                    /* looked up or made */
	uint32_t db;
};

/* The claiming consumer, looked up (its seen time refreshed) or made. */
static int claimer(struct kv *kv, struct claim *cl)
{
	if (cl->have_c)
		return 0;
	bool made = kv_sconsumer_get(kv, cl->s, cl->g.num, cl->name->p, cl->name->len, &cl->c) != 0;
	if (made)
		cl->c = (struct kv_sconsumer){ 0 };
	cl->c.seen_ms = (uint64_t)kv_now(kv);
	cl->have_c = true;
	if (made)
		kv_notify(KV_NOTIFY_STREAM, "xgroup-createconsumer", &cl->s->key);
	return 0;
}

/* Pending entry p (owner: its consumer; none for a new one) goes to the
 * claimer, delivered at ms with count deliveries. */
static int take(struct kv *kv, struct claim *cl, const struct kv_spending *p, bool owned,
		uint64_t ms, uint64_t count)
{
	int r = claimer(kv, cl);
	bool mine = owned && p->clen == cl->name->len && !memcmp(p->consumer, cl->name->p, p->clen);
	if (r == 0 && owned && !mine) {
		struct kv_sconsumer old;
		if (kv_sconsumer_get(kv, cl->s, cl->g.num, p->consumer, p->clen, &old) == 0 && old.pending) {
			old.pending--;
			r = kv_sconsumer_put(kv, cl->s, cl->g.num, p->consumer, p->clen, &old);
		}
	}
	if (!mine)
		cl->c.pending++;
	if (r == 0)
		r = kv_spending_put(kv, cl->s, cl->g.num, p->id, ms, count, cl->name->p, cl->name->len);
	if (r == 0 && kv_repl_active)
		kv_stream_propagate_claim(cl->db, cl->key, cl->group, cl->name, p->id, ms, count,
					  cl->g.last);
	return r;
}

/* A pending entry whose stream entry was deleted: it goes (propagated as
 * Redis does, an XCLAIM the replica finds nothing for). */
static int drop_deleted(struct kv *kv, struct claim *cl, const struct kv_spending *p)
{
	if (kv_repl_active) {
		struct paste_resp_arg owner = { (const char *)p->consumer, p->clen };
		kv_stream_propagate_claim(cl->db, cl->key, cl->group, &owner, p->id, p->delivered_ms,
					  p->count, cl->g.last);
	}
	struct kv_sconsumer old;
	int r = 0;
	if (kv_sconsumer_get(kv, cl->s, cl->g.num, p->consumer, p->clen, &old) == 0 && old.pending) {
		old.pending--;
		if (cl->have_c && p->clen == cl->name->len && !memcmp(p->consumer, cl->name->p, p->clen))
			cl->c.pending--;
		else
			r = kv_sconsumer_put(kv, cl->s, cl->g.num, p->consumer, p->clen, &old);
	}
	int d = r ? r : kv_spending_delete(kv, cl->s, cl->g.num, p->id);
	if (d > 0)
		cl->g.pending--;
	return d < 0 ? d : 0;
}

static bool entry_exists(struct kv *kv, const struct kv_stream *s, struct kv_sid id)
{
	struct kv_stream_walk w;
	kv_stream_walk_init(kv, &w, s->o.coll.id, id, false);
	return kv_stream_walk_next(kv, &w) == 1 && kv_sid_cmp(w.id, id) == 0;
}

/* The claimed IDs' reply: the IDs (justid) or the entries. */
static int claimed_out(struct kv_out *o, struct kv *kv, const struct kv_stream *s,
		       const struct kv_sid *ids, uint64_t n, bool justid)
{
	kv_out_array(o, n);
	for (uint64_t i = 0; i < n; i++) {
		if (justid) {
			kv_sid_out(o, ids[i]);
			continue;
		}
		struct kv_stream_walk w;
		kv_stream_walk_init(kv, &w, s->o.coll.id, ids[i], false);
		int r = kv_stream_walk_next(kv, &w);
		if (r != 1)
			return r < 0 ? r : -EBADMSG;
		if ((r = kv_stream_entry_out(o, kv, w.id, w.ext, w.n, w.len)) < 0)
			return r;
	}
	return 0;
}

/* Finish a claim: the claimer and group written, the group committed. */
static int claim_end(struct kv *kv, struct claim *cl, int r)
{
	if (r == 0 && cl->have_c)
		r = kv_sconsumer_put(kv, cl->s, cl->g.num, cl->name->p, cl->name->len, &cl->c);
	if (r == 0)
		r = kv_sgroup_put(kv, cl->s, cl->group->p, cl->group->len, &cl->g);
	return kv_stream_end(kv, cl->s, r);
}

static void cmd_xclaim(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct kv_stream s;
	struct claim cl = { .s = &s, .key = &a[1], .group = &a[2], .name = &a[3], .db = kv_resp_db(x) };
	if (!group_arg(x, kv, a, &s, &cl.g))
		return;
	int64_t minidle, retry = -1, when = -1;
	if (!kv_arg_range(x, &a[4], INT64_MIN, INT64_MAX, "Invalid min-idle-time argument for XCLAIM",
			  &minidle))
		return;
	if (minidle < 0)
		minidle = 0;
	uint32_t j = 5;
	struct kv_sid *ids = malloc((n - 5 + 1) * sizeof(*ids)), lastid = { 0, 0 };
	if (!ids) {
		resp_error(x, "ERR out of memory");
		return;
	}
	for (; j < n && kv_sid_parse(&a[j], &ids[j - 5], 0, true, NULL); j++)
		;
	uint32_t nids = j - 5;
	uint64_t now = (uint64_t)kv_now(kv);
	bool force = false, justid = false;
	for (; j < n; j++) {
		bool more = j + 1 < n;
		if (paste_resp_arg_eq(&a[j], "force")) {
			force = true;
		} else if (paste_resp_arg_eq(&a[j], "justid")) {
			justid = true;
		} else if (paste_resp_arg_eq(&a[j], "idle") && more) {
			if (!kv_arg_range(x, &a[++j], INT64_MIN, INT64_MAX,
					  "Invalid IDLE option argument for XCLAIM", &when))
				goto out;
			when = (int64_t)now - when;
		} else if (paste_resp_arg_eq(&a[j], "time") && more) {
			if (!kv_arg_range(x, &a[++j], INT64_MIN, INT64_MAX,
					  "Invalid TIME option argument for XCLAIM", &when))
				goto out;
		} else if (paste_resp_arg_eq(&a[j], "retrycount") && more) {
			if (!kv_arg_range(x, &a[++j], INT64_MIN, INT64_MAX,
					  "Invalid RETRYCOUNT option argument for XCLAIM", &retry))
				goto out;
		} else if (paste_resp_arg_eq(&a[j], "lastid") && more) {
			if (!kv_sid_arg(x, &a[++j], &lastid, 0, true, NULL))
				goto out;
		} else {
			resp_error(x, "ERR Unrecognized XCLAIM option '%.*s'", (int)a[j].len, a[j].p);
			goto out;
		}
	}
	if (!name_ok(x, &a[3], "consumer"))
		goto out;
	bool setid = false;
	if (kv_sid_cmp(lastid, cl.g.last) > 0) {
		cl.g.last = lastid;
		setid = true;
	}
	if (when < 0 || (uint64_t)when > now)
		when = (int64_t)now;
	uint64_t got = 0;
	uint32_t mark = kv_repl_active ? kv_repl_mark() : 0;
	int r = kv_stream_begin(kv, &s, 0);
	for (uint32_t i = 0; r == 0 && i < nids; i++) {
		struct kv_spending p;
		bool owned = kv_spending_get(kv, &s, cl.g.num, ids[i], &p) == 0;
		if (!entry_exists(kv, &s, ids[i])) {
			if (owned) {
				r = drop_deleted(kv, &cl, &p);
				setid = false;
			}
			continue;
		}
		if (!owned && !force)
			continue;
		if (!owned) {
			p = (struct kv_spending){ .id = ids[i], .count = 1 };   /* Redis's new NACK */
			cl.g.pending++;
		} else if (minidle && (int64_t)now - (int64_t)p.delivered_ms < minidle) {
			continue;
		}
		uint64_t count = retry >= 0 ? (uint64_t)retry : justid ? p.count : p.count + 1;
		r = take(kv, &cl, &p, owned, (uint64_t)when, count);
		setid = false;
		ids[got++] = ids[i];
	}
	r = claim_end(kv, &cl, r);
	if (r) {
		if (kv_repl_active)
			kv_repl_rewind(mark);
		kv_reply_errno(x, r);
		goto out;
	}
	if (setid && kv_repl_active)
		kv_stream_propagate_setid(cl.db, &a[1], &a[2], &cl.g);
	kv_repl_also(cl.db, NULL, 0);
	struct kv_out o;
	kv_out_init(&o, x);
	r = claimed_out(&o, kv, &s, ids, got, justid);
	if (kv_out_end(&o) == 0 && r)
		resp_close(x);
out:
	free(ids);
}

static void cmd_xautoclaim(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	int64_t minidle, count = 100;
	struct kv_sid from;
	bool justid = false;
	if (!kv_arg_range(x, &a[4], INT64_MIN, INT64_MAX, "Invalid min-idle-time argument for XAUTOCLAIM",
			  &minidle))
		return;
	if (minidle < 0)
		minidle = 0;
	bool ex = a[5].len > 1 && a[5].p[0] == '(';
	struct paste_resp_arg t = ex ? (struct paste_resp_arg){ a[5].p + 1, a[5].len - 1 } : a[5];
	if (!kv_sid_arg(x, &t, &from, 0, ex, NULL))
		return;
	if (ex && !kv_sid_incr(&from)) {
		resp_error(x, "ERR invalid start ID for the interval");
		return;
	}
	for (uint32_t j = 6; j < n; j++) {
		if (paste_resp_arg_eq(&a[j], "count") && j + 1 < n) {
			if (!kv_arg_range(x, &a[++j], 1, LONG_MAX / 16, "COUNT must be > 0", &count))
				return;
		} else if (paste_resp_arg_eq(&a[j], "justid")) {
			justid = true;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	struct kv_stream s;
	struct claim cl = { .s = &s, .key = &a[1], .group = &a[2], .name = &a[3], .db = kv_resp_db(x) };
	if (!group_arg(x, kv, a, &s, &cl.g))
		return;
	if (!name_ok(x, &a[3], "consumer"))
		return;
	uint64_t now = (uint64_t)kv_now(kv), attempts = (uint64_t)count * 10, left = (uint64_t)count;
	uint64_t ngot = 0, ndel = 0;
	struct kv_sid *got = calloc((size_t)count, sizeof(*got));
	struct kv_sid *del = calloc((size_t)count, sizeof(*del));
	struct kv_sid end = { 0, 0 };
	if (!got || !del) {
		resp_error(x, "ERR Insufficient memory, failed allocating transient memory, COUNT too high.");
		goto out;
	}
	uint32_t mark = kv_repl_active ? kv_repl_mark() : 0;
	struct kv_spending_walk pw;
	kv_spending_walk_init(kv, &pw, s.o.coll.id, cl.g.num, from);
	int r = kv_stream_begin(kv, &s, 0);
	int more = 0;
	while (r == 0 && attempts-- && left && (more = kv_spending_walk_next(kv, &pw)) == 1) {
		struct kv_spending p = pw.p;
		if (!entry_exists(kv, &s, p.id)) {
			r = drop_deleted(kv, &cl, &p);
			del[ndel++] = p.id;
			left--;
			continue;
		}
		if (minidle && (int64_t)now - (int64_t)p.delivered_ms < minidle)
			continue;
		r = take(kv, &cl, &p, true, now, justid ? p.count : p.count + 1);
		got[ngot++] = p.id;
		left--;
	}
	/* Where the next call goes on: the entry after the last looked at. */
	if (r == 0 && more == 1 && kv_spending_walk_next(kv, &pw) == 1)
		end = pw.p.id;
	r = claim_end(kv, &cl, r);
	if (r) {
		if (kv_repl_active)
			kv_repl_rewind(mark);
		kv_reply_errno(x, r);
		goto out;
	}
	kv_repl_also(cl.db, NULL, 0);
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_array(&o, 3);
	kv_sid_out(&o, end);
	r = claimed_out(&o, kv, &s, got, ngot, justid);
	kv_out_array(&o, ndel);
	for (uint64_t i = 0; i < ndel; i++)
		kv_sid_out(&o, del[i]);
	if (kv_out_end(&o) == 0 && r)
		resp_close(x);
out:
	free(got);
	free(del);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_xgroup[] = {
	{ "xgroup", -2, "", "stream", "XGROUP subcommands: consumer groups made, moved, dropped; consumers made and dropped.", NULL, 0, 0, 0 },
	{ "xgroup|create", -5, "write denyoom", "stream", "Makes a consumer group reading after an ID ($: the last), with MKSTREAM the stream too.", cmd_xgroup_create, 2, 2, 1 },
	{ "xgroup|createconsumer", 5, "write denyoom", "stream", "Makes a consumer in a group; 1 when new.", cmd_xgroup_createconsumer, 2, 2, 1 },
	{ "xgroup|delconsumer", 5, "write", "stream", "Drops a consumer with its pending entries; answers how many it had.", cmd_xgroup_delconsumer, 2, 2, 1 },
	{ "xgroup|destroy", 4, "write", "stream", "Drops a consumer group with its pending entries and consumers.", cmd_xgroup_destroy, 2, 2, 1 },
	{ "xgroup|help", 2, "loading stale", "stream", "Lists XGROUP's subcommands.", cmd_xgroup_help, 0, 0, 0 },
	{ "xgroup|setid", -5, "write", "stream", "Sets a group's last delivered ID (and its entries-read counter).", cmd_xgroup_setid, 2, 2, 1 },
	{ "xack", -4, "write fast", "stream", "Acknowledges pending entries of a group; answers how many were pending.", cmd_xack, 1, 1, 1 },
	{ "xpending", -3, "readonly", "stream", "A group's pending entries: a summary, or those in an ID range (IDLE, a consumer's).", cmd_xpending, 1, 1, 1 },
	{ "xclaim", -6, "write fast", "stream", "Gives pending entries idle long enough to another consumer (IDLE, TIME, RETRYCOUNT, FORCE, JUSTID, LASTID).", cmd_xclaim, 1, 1, 1 },
	{ "xautoclaim", -6, "write fast", "stream", "Claims pending entries idle long enough from a start ID on (COUNT, JUSTID); answers where to go on, the entries, and those deleted.", cmd_xautoclaim, 1, 1, 1 },
	{ 0 }
};
