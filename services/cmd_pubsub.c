/*
 * cmd_pubsub.c - pub/sub with Redis 7.0.15's behaviour: SUBSCRIBE,
 * UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB, and the shard
 * channels (SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH) as one node answers them.
 *
 * State. One thread owns every connection (resp.c), so the tables are
 * plain statics, and a message goes straight into each subscriber's
 * output queue: no locking, no copy per subscriber beyond the queue's.
 * A topic (a channel, a shard channel or a pattern that somebody
 * subscribes to) lists its subscribers in the order they subscribed; a
 * connection lists its topics in the same order (UNSUBSCRIBE without
 * arguments goes through them). A topic goes with its last subscriber.
 *
 * Delivery. PUBLISH writes the message once ("message", channel, body)
 * and queues those bytes for each subscriber of the channel, first byte
 * '>' for a RESP3 connection (a push) and '*' for RESP2, then does the
 * same for each pattern the channel matches (Redis's glob, kv_glob). A
 * published message is not stored and reveals nothing stored, so it
 * leaves without waiting for the barrier; a keyspace notification
 * (kv_notify.c) reveals a change and waits for it like a reply. Either
 * way it is queued behind the subscriber's earlier replies: one queue per
 * connection keeps them in order. Messages and subscription replies are
 * sent under CLIENT REPLY OFF or SKIP too, as Redis sends its pushes.
 *
 * A subscriber that does not read. Its replies wait in its output queue;
 * the port's --max-output bound stops reading its commands, which does
 * not bound what others publish to it. So, as Redis's
 * client-output-buffer-limit for the pubsub class (CONFIG SET takes it;
 * default 32 MiB hard, 8 MiB for 60 s soft), a subscriber whose unsent
 * output passes the hard limit, or stays over the soft one longer than
 * its seconds, is dropped at once (resp_drop: what is queued for it goes,
 * not sent) and its subscriptions end; the PUBLISH that passed the limit
 * counts it as a receiver, as Redis's does. With the limit off (0 0 0),
 * its queue grows as Redis's does.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd_pubsub.h"
#include "kv_notify.h"
#include "kv_strmap.h"
#include "kv_vec.h"
#include "pkvs_resp.h"

/* ------------------------------------------------------------ state */

enum { T_CHANNEL, T_SHARD, T_PATTERN, T_KINDS };

struct kv_psclient;

struct topic {
	struct kv_strmap_node node;     /* name[] below, len, tag: kind */
	uint32_t nsubs, cap;
	struct kv_psclient **subs;      /* in the order they subscribed */
	uint8_t kind;
	uint8_t name[];
};

/* A connection's subscriptions. */
struct kv_psclient {
	struct resp_ctx x;              /* where its messages go (ev, capture unset) */
	struct topic **list[T_KINDS];   /* its topics of each kind, in subscription order */
	uint32_t n[T_KINDS], cap[T_KINDS];
	uint64_t soft_since;            /* over the soft output limit since (ms; 0: not) */
};

static struct {
	struct kv_strmap topics;        /* struct topic by (kind, name) */
	uint32_t count[T_KINDS];        /* topics of each kind */
	uint64_t subs[T_KINDS];         /* subscriptions of each kind, all connections */
	/* Patterns in the order they were first subscribed: PUBLISH tries each. */
	struct topic **pats;
	uint32_t npats, cappats;
	uint8_t *msg;                   /* the message being published, written once */
	size_t msgcap;
} ps;

bool kv_pubsub_any(struct resp_ctx *x, bool (*fn)(void *arg, const void *name, size_t len,
						 bool pattern), void *arg)
{
	const struct kv_psclient *c = ((struct kv_resp_conn *)x->sc)->pubsub;
	for (int k = 0; c && k < T_KINDS; k++)
		for (uint32_t i = 0; i < c->n[k]; i++)
			if (fn(arg, c->list[k][i]->name, c->list[k][i]->node.len, k == T_PATTERN))
				return true;
	return false;
}

uint64_t kv_pubsub_listeners(void)
{
	return ps.subs[T_CHANNEL] + ps.subs[T_PATTERN];
}

void kv_pubsub_topics(uint64_t *channels, uint64_t *patterns, uint64_t *shard_channels)
{
	*channels = ps.count[T_CHANNEL];
	*patterns = ps.count[T_PATTERN];
	*shard_channels = ps.count[T_SHARD];
}

static struct topic *topic_find(uint8_t kind, const void *p, size_t len)
{
	struct kv_strmap_node *x = kv_strmap_find(&ps.topics, kind, p, len,
						  kv_strmap_hash(&ps.topics, kind, p, len));
	return x ? KV_STRMAP_ENTRY(x, struct topic, node) : NULL;
}

static struct topic *topic_get(uint8_t kind, const void *p, size_t len)
{
	uint64_t h = kv_strmap_hash(&ps.topics, kind, p, len);
	struct kv_strmap_node *x = kv_strmap_find(&ps.topics, kind, p, len, h);
	if (x)
		return KV_STRMAP_ENTRY(x, struct topic, node);
	struct topic *t;
	if (kv_strmap_reserve(&ps.topics) ||
	    (kind == T_PATTERN &&
	     kv_vec_grow((void **)&ps.pats, &ps.cappats, ps.npats + 1, sizeof(*ps.pats))))
		return NULL;
	if (!(t = calloc(1, sizeof(*t) + len)))
		return NULL;
	t->kind = kind;
	memcpy(t->name, p, len);
	t->node.key = t->name;
	t->node.len = len;
	t->node.tag = kind;
	kv_strmap_insert(&ps.topics, &t->node, h);
	ps.count[kind]++;
	if (kind == T_PATTERN)
		ps.pats[ps.npats++] = t;
	return t;
}

static void topic_free(struct topic *t)
{
	kv_strmap_remove(&ps.topics, &t->node);
	if (t->kind == T_PATTERN) {
		uint32_t i = 0;
		while (ps.pats[i] != t)
			i++;
		memmove(&ps.pats[i], &ps.pats[i + 1], (ps.npats - i - 1) * sizeof(*ps.pats));
		ps.npats--;
	}
	ps.count[t->kind]--;
	free(t->subs);
	free(t);
}

static struct kv_psclient *client_of(const struct resp_ctx *x)
{
	return ((struct kv_resp_conn *)x->sc)->pubsub;
}

static uint32_t client_total(const struct kv_psclient *c)
{
	return c ? c->n[T_CHANNEL] + c->n[T_PATTERN] + c->n[T_SHARD] : 0;
}

void kv_pubsub_counts(const struct resp_ctx *x, uint32_t *sub, uint32_t *psub, uint32_t *ssub)
{
	const struct kv_psclient *c = client_of(x);
	*sub = c ? c->n[T_CHANNEL] : 0;
	*psub = c ? c->n[T_PATTERN] : 0;
	*ssub = c ? c->n[T_SHARD] : 0;
}

/* Redis's subscription counts in replies: channels and patterns
 * together; shard channels apart. */
static int64_t client_count(const struct kv_psclient *c, uint8_t kind)
{
	if (!c)
		return 0;
	return kind == T_SHARD ? c->n[T_SHARD] : (int64_t)c->n[T_CHANNEL] + c->n[T_PATTERN];
}

/* Is c subscribed to t? Its index in c's list, or -1. */
static int64_t client_index(const struct kv_psclient *c, const struct topic *t)
{
	for (uint32_t i = 0; c && i < c->n[t->kind]; i++)
		if (c->list[t->kind][i] == t)
			return i;
	return -1;
}

/* x's subscriptions changed: its subscribed mode, and whether
 * notifications have anybody to go to. */
static void changed(struct resp_ctx *x, struct kv *kv)
{
	struct kv_psclient *c = client_of(x);
	x->r->pubsub = client_total(c) > 0;
	kv_notify_sync(kv);
}

/* 1 subscribed, 0 already, -ENOMEM. */
static int subscribe(struct resp_ctx *x, uint8_t kind, const void *p, size_t len)
{
	struct kv_resp_conn *kc = x->sc;
	struct kv_psclient *c = kc->pubsub;
	if (!c) {
		if (!(c = kc->pubsub = calloc(1, sizeof(*c))))
			return -ENOMEM;
		c->x = *x;
		c->x.ev = NULL;
		c->x.capture = NULL;
	}
	struct topic *t = topic_get(kind, p, len);
	if (!t)
		return -ENOMEM;
	if (client_index(c, t) >= 0)
		return 0;
	if (kv_vec_grow((void **)&t->subs, &t->cap, t->nsubs + 1, sizeof(*t->subs)) ||
	    kv_vec_grow((void **)&c->list[kind], &c->cap[kind], c->n[kind] + 1,
			sizeof(*c->list[kind]))) {
		if (!t->nsubs)
			topic_free(t);
		return -ENOMEM;
	}
	t->subs[t->nsubs++] = c;
	c->list[kind][c->n[kind]++] = t;
	ps.subs[kind]++;
	return 1;
}

/* c leaves its i-th topic of kind. */
static void leave(struct kv_psclient *c, uint8_t kind, uint32_t i)
{
	struct topic *t = c->list[kind][i];
	memmove(&c->list[kind][i], &c->list[kind][i + 1], (c->n[kind] - i - 1) * sizeof(*c->list[kind]));
	c->n[kind]--;
	uint32_t j = 0;
	while (t->subs[j] != c)
		j++;
	memmove(&t->subs[j], &t->subs[j + 1], (t->nsubs - j - 1) * sizeof(*t->subs));
	ps.subs[kind]--;
	if (--t->nsubs == 0)
		topic_free(t);
}

/* Every subscription of c goes, silently (a close, RESET, a drop). */
static void leave_all(struct kv_psclient *c)
{
	for (uint8_t k = 0; k < T_KINDS; k++) {
		while (c->n[k])
			leave(c, k, c->n[k] - 1);
		free(c->list[k]);
		c->list[k] = NULL;
		c->cap[k] = 0;
	}
}

/* ------------------------------------------------------- replies */

static const char *const sub_word[T_KINDS] = { "subscribe", "ssubscribe", "psubscribe" };
static const char *const unsub_word[T_KINDS] = { "unsubscribe", "sunsubscribe", "punsubscribe" };

/* [word, name (NULL: a null), count] as a push. */
static void push_reply(struct resp_ctx *x, const char *word, const void *name, size_t len,
		       int64_t count)
{
	char h[96];
	int k = paste_resp_put_push(h, sizeof(h), x->r->proto, 3);
	k += paste_resp_put_bulk(h + k, sizeof(h) - (size_t)k, word, strlen(word));
	if (!name)
		k += paste_resp_put_null(h + k, sizeof(h) - (size_t)k, x->r->proto);
	else if (len > sizeof(h) - 64 - (size_t)k) {
		/* A long name: the head, the name, then the rest. */
		k += paste_resp_put_bulk_head(h + k, sizeof(h) - (size_t)k, len);
		if (resp_push_send(x, h, (size_t)k, true) || resp_push_send(x, name, len, true))
			return;
		k = 0;
		h[k++] = '\r';
		h[k++] = '\n';
	} else {
		k += paste_resp_put_bulk(h + k, sizeof(h) - (size_t)k, name, len);
	}
	k += paste_resp_put_int(h + k, sizeof(h) - (size_t)k, count);
	resp_push_send(x, h, (size_t)k, true);
}

/* ------------------------------------------------------- commands */

static void subscribe_cmd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n, uint8_t kind)
{
	for (uint32_t i = 1; i < n; i++) {
		if (subscribe(x, kind, a[i].p, a[i].len) < 0) {
			resp_error(x, "ERR out of memory");
			break;
		}
		push_reply(x, sub_word[kind], a[i].p, a[i].len, client_count(client_of(x), kind));
	}
	changed(x, kv);
}

static void unsubscribe_cmd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n, uint8_t kind)
{
	struct kv_psclient *c = client_of(x);
	if (n == 1) {
		/* All of them, the oldest first; a reply even for none. */
		bool any = c && c->n[kind];
		while (c && c->n[kind]) {
			/* The reply first: the name may go with the topic. */
			struct topic *t = c->list[kind][0];
			push_reply(x, unsub_word[kind], t->name, t->node.len, client_count(c, kind) - 1);
			leave(c, kind, 0);
		}
		if (!any)
			push_reply(x, unsub_word[kind], NULL, 0, client_count(c, kind));
	} else {
		for (uint32_t i = 1; i < n; i++) {
			int64_t at = -1;
			if (c && ps.topics.n) {
				struct topic *t = topic_find(kind, a[i].p, a[i].len);
				at = t ? client_index(c, t) : -1;
			}
			if (at >= 0)
				leave(c, kind, (uint32_t)at);
			push_reply(x, unsub_word[kind], a[i].p, a[i].len, client_count(c, kind));
		}
	}
	changed(x, kv);
}

static void cmd_subscribe(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n)
{
	subscribe_cmd(x, kv, a, n, T_CHANNEL);
}

static void cmd_psubscribe(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	subscribe_cmd(x, kv, a, n, T_PATTERN);
}

static void cmd_ssubscribe(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	/* Redis refuses it to a client that must get one reply per command:
	 * inside EXEC (SUBSCRIBE and PSUBSCRIBE are let through there). */
	if (kv->group_depth) {
		resp_error(x, "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client");
		return;
	}
	subscribe_cmd(x, kv, a, n, T_SHARD);
}

static void cmd_unsubscribe(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	unsubscribe_cmd(x, kv, a, n, T_CHANNEL);
}

static void cmd_punsubscribe(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	unsubscribe_cmd(x, kv, a, n, T_PATTERN);
}

static void cmd_sunsubscribe(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	unsubscribe_cmd(x, kv, a, n, T_SHARD);
}

/* ------------------------------------------------------- delivery */

/* Redis's glob, as its matcher meets an empty channel: only an empty
 * pattern matches it ("*" does not). */
static bool matches(const void *pat, size_t plen, const uint8_t *s, size_t slen)
{
	return slen ? kv_glob(pat, plen, s, slen) : plen == 0;
}

/* The output limit of the pubsub class (client-output-buffer-limit). */
static struct kv_outlimit lim = { .cls = "pubsub" };

/* Subscribers dropped while a message was being delivered: their
 * subscriptions end once it is out (the lists are being walked). */
static struct kv_psclient **dropped;
static uint32_t ndropped, capdropped;

static void over_limit(struct kv_psclient *c, uint64_t queued)
{
	bool drop = kv_outlimit_over(&lim, queued, c->x.w->now_ms, &c->soft_since);
	if (!drop || kv_vec_grow((void **)&dropped, &capdropped, ndropped + 1, sizeof(*dropped)))
		return;
	resp_drop(&c->x);
	dropped[ndropped++] = c;
}

/* The message in ps.msg[0..len) to t's subscribers. */
static uint64_t deliver(const struct topic *t, size_t len, bool durable)
{
	for (uint32_t i = 0; i < t->nsubs; i++) {
		struct kv_psclient *c = t->subs[i];
		struct resp_ctx *x = &c->x;
		if (x->r->state == R_DEAD)
			continue;               /* closing (QUIT, dropped): counted, not sent */
		ps.msg[0] = x->r->proto == 3 ? '>' : '*';
		paste_port_send(x->w->port, x->conn, ps.msg, len, durable ? PASTE_SEND_DURABLE : 0);
		uint64_t q = paste_port_conn_queued(x->w->port, x->conn);
		if (q > lim.soft || c->soft_since)
			over_limit(c, q);
	}
	return t->nsubs;
}

/* ps.msg = [word, (pattern,) channel, message] ('*' first; deliver sets it). */
static size_t write_msg(const char *word, const void *pat, size_t plen, const void *chan,
			size_t clen, const void *msg, size_t mlen)
{
	size_t need = 3 * 32 + strlen(word) + plen + clen + mlen;
	if (need > ps.msgcap) {
		uint8_t *p = realloc(ps.msg, need);
		if (!p)
			return 0;
		ps.msg = p;
		ps.msgcap = need;
	}
	char *o = (char *)ps.msg;
	size_t k = (size_t)paste_resp_put_array(o, 32, pat ? 4 : 3);
	k += (size_t)paste_resp_put_bulk(o + k, 32, word, strlen(word));
	if (pat) {
		k += (size_t)paste_resp_put_bulk_head(o + k, 32, plen);
		memcpy(o + k, pat, plen);
		k += plen;
		o[k++] = '\r';
		o[k++] = '\n';
	}
	k += (size_t)paste_resp_put_bulk_head(o + k, 32, clen);
	memcpy(o + k, chan, clen);
	k += clen;
	o[k++] = '\r';
	o[k++] = '\n';
	k += (size_t)paste_resp_put_bulk_head(o + k, 32, mlen);
	memcpy(o + k, msg, mlen);
	k += mlen;
	o[k++] = '\r';
	o[k++] = '\n';
	return k;
}

static uint64_t publish(uint8_t kind, const void *chan, size_t clen, const void *msg, size_t mlen,
			bool durable)
{
	if (!ps.topics.n)
		return 0;
	kv_outlimit_read(&lim);
	uint64_t n = 0;
	struct topic *t = topic_find(kind, chan, clen);
	size_t len;
	if (t && (len = write_msg(kind == T_SHARD ? "smessage" : "message", NULL, 0, chan, clen,
				  msg, mlen)))
		n += deliver(t, len, durable);
	for (uint32_t i = 0; kind == T_CHANNEL && i < ps.npats; i++) {
		struct topic *p = ps.pats[i];
		if (!matches(p->name, p->node.len, chan, clen))
			continue;
		if ((len = write_msg("pmessage", p->name, p->node.len, chan, clen, msg, mlen)))
			n += deliver(p, len, durable);
	}
	/* Dropped subscribers leave now (their topics may go with them). */
	for (uint32_t i = 0; i < ndropped; i++)
		leave_all(dropped[i]);
	if (ndropped) {
		ndropped = 0;
		kv_notify_sync(NULL);
	}
	return n;
}

uint64_t kv_pubsub_publish(const void *chan, size_t clen, const void *msg, size_t mlen, bool durable)
{
	return publish(T_CHANNEL, chan, clen, msg, mlen, durable);
}

static void cmd_publish(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			uint32_t n)
{
	(void)kv, (void)n;
	resp_int(x, (int64_t)publish(T_CHANNEL, a[1].p, a[1].len, a[2].p, a[2].len, false));
}

static void cmd_spublish(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			 uint32_t n)
{
	(void)kv, (void)n;
	resp_int(x, (int64_t)publish(T_SHARD, a[1].p, a[1].len, a[2].p, a[2].len, false));
}

/* ----------------------------------------------------------- PUBSUB */

static void syntax_error(struct resp_ctx *x, const struct paste_resp_arg *a)
{
	kv_sub_syntax_error(x, "PUBSUB", &a[1]);
}

/* CHANNELS / SHARDCHANNELS [pattern]: the topics of a kind (matching). */
static void channels(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, uint8_t kind)
{
	if (n > 3) {
		syntax_error(x, a);
		return;
	}
	struct resp_out o = { 0 };
	uint64_t k = 0;
	uint32_t b = 0;
	for (struct kv_strmap_node *x = kv_strmap_next(&ps.topics, &b, NULL); x;
	     x = kv_strmap_next(&ps.topics, &b, x)) {
		const struct topic *t = KV_STRMAP_ENTRY(x, struct topic, node);
		if (t->kind == kind && (n == 2 || matches(a[2].p, a[2].len, t->name, t->node.len))) {
			resp_out_bulk(&o, t->name, t->node.len);
			k++;
		}
	}
	char h[32];
	resp_out_send(x, h, paste_resp_put_array(h, sizeof(h), k), &o);
}

/* NUMSUB / SHARDNUMSUB [channel ...]: pairs of name and subscribers. */
static void numsub(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n, uint8_t kind)
{
	resp_array(x, (uint64_t)(n - 2) * 2);
	for (uint32_t i = 2; i < n; i++) {
		const struct topic *t = ps.topics.n ? topic_find(kind, a[i].p, a[i].len) : NULL;
		resp_bulk(x, a[i].p, a[i].len);
		resp_int(x, t ? t->nsubs : 0);
	}
}

static void cmd_pubsub_channels(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				uint32_t n)
{
	(void)kv;
	channels(x, a, n, T_CHANNEL);
}

static void cmd_pubsub_shardchannels(struct resp_ctx *x, struct kv *kv,
				     const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	channels(x, a, n, T_SHARD);
}

static void cmd_pubsub_numsub(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)kv;
	numsub(x, a, n, T_CHANNEL);
}

static void cmd_pubsub_shardnumsub(struct resp_ctx *x, struct kv *kv,
				   const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	numsub(x, a, n, T_SHARD);
}

static void cmd_pubsub_numpat(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)kv, (void)a, (void)n;
	resp_int(x, ps.count[T_PATTERN]);
}

static void cmd_pubsub_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CHANNELS [<pattern>]",
		"    Return the currently active channels matching a <pattern> (default: '*').",
		"NUMPAT",
		"    Return number of subscriptions to patterns.",
		"NUMSUB [<channel> ...]",
		"    Return the number of subscribers for the specified channels, excluding",
		"    pattern subscriptions(default: no channels).",
		"SHARDCHANNELS [<pattern>]",
		"    Return the currently active shard level channels matching a <pattern> (default: '*').",
		"SHARDNUMSUB [<shardchannel> ...]",
		"    Return the number of subscribers for the specified shard level channel(s)",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

/* ------------------------------------------- the connection's side */

bool kv_pubsub_ping(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n)
{
	if (!x->r->pubsub || x->r->proto == 3)
		return false;
	/* Subscribed, RESP2: ["pong", the argument or ""]. */
	resp_array(x, 2);
	resp_bulk(x, "pong", 4);
	resp_bulk(x, n == 2 ? a[1].p : "", n == 2 ? a[1].len : 0);
	return true;
}

void kv_pubsub_reset(struct resp_ctx *x)
{
	struct kv_resp_conn *kc = x->sc;
	if (!kc->pubsub)
		return;
	leave_all(kc->pubsub);
	changed(x, pkvs_kv(x->ss));
}

void kv_pubsub_closed(struct resp_ctx *x)
{
	struct kv_resp_conn *kc = x->sc;
	if (!kc->pubsub)
		return;
	leave_all(kc->pubsub);
	free(kc->pubsub);
	kc->pubsub = NULL;
	x->r->pubsub = false;
	kv_notify_sync(pkvs_kv(x->ss));
}

/* name, arity, flags, group, summary, handler, first key, last key, step.
 * A container's subcommands follow it. */
const struct kv_cmd kv_cmds_pubsub[] = {
	{ "subscribe", -2, "pubsub noscript loading stale", "pubsub", "Subscribes the connection to channels: it receives what is published on them.", cmd_subscribe, 0, 0, 0 },
	{ "unsubscribe", -1, "pubsub noscript loading stale", "pubsub", "Ends the connection's subscriptions to the channels named, or to all of them.", cmd_unsubscribe, 0, 0, 0 },
	{ "psubscribe", -2, "pubsub noscript loading stale", "pubsub", "Subscribes the connection to every channel a glob pattern matches.", cmd_psubscribe, 0, 0, 0 },
	{ "punsubscribe", -1, "pubsub noscript loading stale", "pubsub", "Ends the connection's pattern subscriptions named, or all of them.", cmd_punsubscribe, 0, 0, 0 },
	{ "publish", 3, "pubsub loading stale fast may_replicate", "pubsub", "Sends a message to the channel's subscribers and the matching patterns' (not stored); answers how many got it.", cmd_publish, 0, 0, 0 },
	{ "pubsub", -2, "", "pubsub", "PUBSUB subcommands: the channels and patterns subscribed to.", NULL, 0, 0, 0 },
	{ "pubsub|channels", -2, "pubsub loading stale", "pubsub", "The channels with subscribers, those matching a pattern if one is given.", cmd_pubsub_channels, 0, 0, 0 },
	{ "pubsub|help", 2, "loading stale", "pubsub", "Lists PUBSUB's subcommands.", cmd_pubsub_help, 0, 0, 0 },
	{ "pubsub|numpat", 2, "pubsub loading stale", "pubsub", "How many distinct patterns connections subscribe to.", cmd_pubsub_numpat, 0, 0, 0 },
	{ "pubsub|numsub", -2, "pubsub loading stale", "pubsub", "Each channel named with its number of subscribers (patterns not counted).", cmd_pubsub_numsub, 0, 0, 0 },
	{ "pubsub|shardchannels", -2, "pubsub loading stale", "pubsub", "The shard channels with subscribers (one node holds them all).", cmd_pubsub_shardchannels, 0, 0, 0 },
	{ "pubsub|shardnumsub", -2, "pubsub loading stale", "pubsub", "Each shard channel named with its number of subscribers.", cmd_pubsub_shardnumsub, 0, 0, 0 },
	{ "ssubscribe", -2, "pubsub noscript loading stale", "pubsub", "Subscribes the connection to shard channels (one node: every shard).", cmd_ssubscribe, 1, -1, 1 },
	{ "sunsubscribe", -1, "pubsub noscript loading stale", "pubsub", "Ends the connection's shard channel subscriptions named, or all of them.", cmd_sunsubscribe, 1, -1, 1 },
	{ "spublish", 3, "pubsub loading stale fast may_replicate", "pubsub", "Sends a message to a shard channel's subscribers; answers how many got it.", cmd_spublish, 1, 1, 1 },
	{ 0 }
};
