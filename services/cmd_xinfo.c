/*
 * cmd_xinfo.c - XINFO STREAM (FULL), GROUPS, CONSUMERS and HELP, as Redis
 * 7.0's xinfoCommand answers them, over kv_stream.h. A group's consumer
 * count and a consumer's pending entries (FULL) are walks: neither is
 * kept in a record (docs/compat.md, "Streams").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_stream.h"

static void cmd_xinfo_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CONSUMERS <key> <groupname>",
		"    Show consumers of <groupname>.",
		"GROUPS <key>",
		"    Show the stream consumer groups.",
		"STREAM <key> [FULL [COUNT <count>]",
		"    Show information about the stream.",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

/* XINFO's key: the stream, or false after replying ("no such key"). */
static bool xinfo_key(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		      struct kv_stream *s)
{
	int r = kv_stream_arg(x, kv, a, s, true);
	if (r == -ENOENT)
		resp_error(x, "ERR no such key");
	return r == 0;
}

static void lag_out(struct kv_out *o, struct kv *kv, const struct kv_stream *s,
		    const struct kv_sgroup *g)
{
	int64_t lag = 0, read;
	bool known = true;
	if (!s->o.coll.added)
		lag = 0;
	else if (g->read >= 0 && !kv_stream_tombstone_after(kv, s, g->last))
		lag = (int64_t)s->o.coll.added - g->read;      /* negative too, as Redis's */
	else if ((read = kv_stream_distance(kv, s, g->last)) >= 0)
		lag = (int64_t)s->o.coll.added - read;
	else
		known = false;
	if (known)
		kv_out_int(o, lag);
	else
		kv_out_null(o);
}

static void str_out(struct kv_out *o, const char *s)
{
	kv_out_bulk(o, s, strlen(s));
}

/* How many consumers group g has. */
static uint64_t consumers(struct kv *kv, const struct kv_stream *s, uint64_t gnum)
{
	struct kv_sconsumer_walk w;
	uint64_t n = 0;
	kv_sconsumer_walk_init(kv, &w, s->o.coll.id, gnum);
	while (kv_sconsumer_walk_next(kv, &w) == 1)
		n++;
	return n;
}

static void cmd_xinfo_groups(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	(void)n;
	struct kv_stream s;
	if (!xinfo_key(x, kv, &a[2], &s))
		return;
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_array(&o, kv_stream_groups(kv, &s));
	struct kv_sgroup_walk w;
	kv_sgroup_walk_init(kv, &w, s.o.coll.id);
	while (kv_sgroup_walk_next(kv, &w) == 1) {
		kv_out_map(&o, 6);
		str_out(&o, "name");
		kv_out_bulk(&o, w.name, w.nlen);
		str_out(&o, "consumers");
		kv_out_int(&o, (int64_t)consumers(kv, &s, w.g.num));
		str_out(&o, "pending");
		kv_out_int(&o, (int64_t)w.g.pending);
		str_out(&o, "last-delivered-id");
		kv_sid_out(&o, w.g.last);
		str_out(&o, "entries-read");
		if (w.g.read >= 0)
			kv_out_int(&o, w.g.read);
		else
			kv_out_null(&o);
		str_out(&o, "lag");
		lag_out(&o, kv, &s, &w.g);
	}
	free(w.longbuf);
	kv_out_end(&o);
}

static void cmd_xinfo_consumers(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				uint32_t n)
{
	(void)n;
	struct kv_stream s;
	struct kv_sgroup g;
	if (!xinfo_key(x, kv, &a[2], &s))
		return;
	if (kv_sgroup_get(kv, &s, a[3].p, a[3].len, &g)) {
		resp_error(x, "NOGROUP No such consumer group '%.*s' for key name '%.*s'", (int)a[3].len,
			   a[3].p, (int)a[2].len, a[2].p);
		return;
	}
	uint64_t now = (uint64_t)kv_now(kv);
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_array(&o, consumers(kv, &s, g.num));
	struct kv_sconsumer_walk w;
	kv_sconsumer_walk_init(kv, &w, s.o.coll.id, g.num);
	while (kv_sconsumer_walk_next(kv, &w) == 1) {
		kv_out_map(&o, 3);
		str_out(&o, "name");
		kv_out_bulk(&o, w.name, w.nlen);
		str_out(&o, "pending");
		kv_out_int(&o, (int64_t)w.c.pending);
		str_out(&o, "idle");
		kv_out_int(&o, now > w.c.seen_ms ? (int64_t)(now - w.c.seen_ms) : 0);
	}
	kv_out_end(&o);
}

/* One group of XINFO STREAM FULL: its pending entries and consumers, at
 * most count of each list (0: all). */
static int full_group(struct kv_out *o, struct kv *kv, const struct kv_stream *s,
		      const struct kv_sgroup_walk *gw, uint64_t count)
{
	kv_out_map(o, 7);
	str_out(o, "name");
	kv_out_bulk(o, gw->name, gw->nlen);
	str_out(o, "last-delivered-id");
	kv_sid_out(o, gw->g.last);
	str_out(o, "entries-read");
	if (gw->g.read >= 0)
		kv_out_int(o, gw->g.read);
	else
		kv_out_null(o);
	str_out(o, "lag");
	lag_out(o, kv, s, &gw->g);
	str_out(o, "pel-count");
	kv_out_int(o, (int64_t)gw->g.pending);
	str_out(o, "pending");
	uint64_t np = count && count < gw->g.pending ? count : gw->g.pending;
	kv_out_array(o, np);
	struct kv_spending_walk pw;
	kv_spending_walk_init(kv, &pw, s->o.coll.id, gw->g.num, (struct kv_sid){ 0, 0 });
	for (uint64_t i = 0; i < np; i++) {
		if (kv_spending_walk_next(kv, &pw) != 1)
			return -EBADMSG;
		kv_out_array(o, 4);
		kv_sid_out(o, pw.p.id);
		kv_out_bulk(o, pw.p.consumer, pw.p.clen);
		kv_out_int(o, (int64_t)pw.p.delivered_ms);
		kv_out_int(o, (int64_t)pw.p.count);
	}
	str_out(o, "consumers");
	kv_out_array(o, consumers(kv, s, gw->g.num));
	struct kv_sconsumer_walk cw;
	kv_sconsumer_walk_init(kv, &cw, s->o.coll.id, gw->g.num);
	uint8_t *name = malloc(KV_MAX_KEY + 1);
	if (!name)
		return -ENOMEM;
	while (kv_sconsumer_walk_next(kv, &cw) == 1) {
		size_t nlen = cw.nlen;
		memcpy(name, cw.name, nlen);
		kv_out_map(o, 4);
		str_out(o, "name");
		kv_out_bulk(o, name, nlen);
		str_out(o, "seen-time");
		kv_out_int(o, (int64_t)cw.c.seen_ms);
		str_out(o, "pel-count");
		kv_out_int(o, (int64_t)cw.c.pending);
		str_out(o, "pending");
		/* The consumer's own list: the group's, its entries picked out. */
		uint64_t mine = count && count < cw.c.pending ? count : cw.c.pending;
		kv_out_array(o, mine);
		kv_spending_walk_init(kv, &pw, s->o.coll.id, gw->g.num, (struct kv_sid){ 0, 0 });
		for (uint64_t i = 0; i < mine;) {
			if (kv_spending_walk_next(kv, &pw) != 1) {
				free(name);
				return -EBADMSG;
			}
			if (pw.p.clen != nlen || memcmp(pw.p.consumer, name, nlen))
				continue;
			kv_out_array(o, 3);
			kv_sid_out(o, pw.p.id);
			kv_out_int(o, (int64_t)pw.p.delivered_ms);
			kv_out_int(o, (int64_t)pw.p.count);
			i++;
		}
	}
	free(name);
	return 0;
}

static void cmd_xinfo_stream(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	bool full = n > 3;
	int64_t count = 10;
	if (full && ((n != 4 && n != 6) || !paste_resp_arg_eq(&a[3], "full") || (n == 6 && !paste_resp_arg_eq(&a[4], "count")))) {
		kv_sub_syntax_error(x, "XINFO", &a[1]);
		return;
	}
	if (n == 6) {
		if (!kv_arg_int(x, &a[5], &count))
			return;
		if (count < 0)
			count = 10;
	}
	struct kv_stream s;
	if (!xinfo_key(x, kv, &a[2], &s))
		return;
	const struct kv_coll *c = &s.o.coll;
	uint64_t nodes = kv_stream_nodes(kv, &s);
	struct kv_sid first = { 0, 0 }, last;
	kv_stream_edge(kv, &s, false, &first);
	struct kv_out o;
	kv_out_init(&o, x);
	kv_out_map(&o, full ? 9 : 10);
	str_out(&o, "length");
	kv_out_int(&o, (int64_t)c->count);
	str_out(&o, "radix-tree-keys");
	kv_out_int(&o, (int64_t)nodes);
	str_out(&o, "radix-tree-nodes");
	kv_out_int(&o, (int64_t)(nodes + 1));
	str_out(&o, "last-generated-id");
	kv_sid_out(&o, kv_stream_last(&s));
	str_out(&o, "max-deleted-entry-id");
	kv_sid_out(&o, kv_stream_maxdel(&s));
	str_out(&o, "entries-added");
	kv_out_int(&o, (int64_t)c->added);
	str_out(&o, "recorded-first-entry-id");
	kv_sid_out(&o, first);
	int r = 0;
	if (!full) {
		str_out(&o, "groups");
		kv_out_int(&o, (int64_t)kv_stream_groups(kv, &s));
		struct kv_stream_walk w;
		for (int back = 0; back < 2 && r == 0; back++) {
			str_out(&o, back ? "last-entry" : "first-entry");
			last = back ? (struct kv_sid){ UINT64_MAX, UINT64_MAX } : (struct kv_sid){ 0, 0 };
			kv_stream_walk_init(kv, &w, c->id, last, back);
			if (kv_stream_walk_next(kv, &w) == 1)
				r = kv_stream_entry_out(&o, kv, w.id, w.ext, w.n, w.len);
			else
				kv_out_null(&o);
		}
	} else {
		str_out(&o, "entries");
		int64_t got = kv_stream_range_out(&o, kv, &s, (struct kv_sid){ 0, 0 },
						  (struct kv_sid){ UINT64_MAX, UINT64_MAX },
						  (uint64_t)count, false);
		r = got < 0 ? (int)got : 0;
		str_out(&o, "groups");
		kv_out_array(&o, kv_stream_groups(kv, &s));
		struct kv_sgroup_walk gw;
		kv_sgroup_walk_init(kv, &gw, c->id);
		while (r == 0 && kv_sgroup_walk_next(kv, &gw) == 1)
			r = full_group(&o, kv, &s, &gw, (uint64_t)count);
		free(gw.longbuf);
	}
	if (kv_out_end(&o) == 0 && r)
		resp_close(x);                  /* part of the reply went out */
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_xinfo[] = {
	{ "xinfo", -2, "", "stream", "XINFO subcommands: a stream's, its groups' and consumers' state.", NULL, 0, 0, 0 },
	{ "xinfo|consumers", 4, "readonly", "stream", "The consumers of a group: pending entries and idle time.", cmd_xinfo_consumers, 2, 2, 1 },
	{ "xinfo|groups", 3, "readonly", "stream", "A stream's consumer groups: consumers, pending entries, last delivered ID, entries read, lag.", cmd_xinfo_groups, 2, 2, 1 },
	{ "xinfo|help", 2, "loading stale", "stream", "Lists XINFO's subcommands.", cmd_xinfo_help, 0, 0, 0 },
	{ "xinfo|stream", -3, "readonly", "stream", "A stream's length, IDs and first and last entries (FULL: its entries, groups, pending lists and consumers).", cmd_xinfo_stream, 2, 2, 1 },
	{ 0 }
};
