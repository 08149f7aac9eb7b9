/*
 * kv_tracking.c - client-side caching's tables and invalidation messages
 * (kv_tracking.h, the hooks of cmd_tracking.h); the commands that turn a
 * connection's tracking on and off are cmd_tracking.c's.
 *
 * State, per process (one thread owns every connection):
 *   - the tracking table: key bytes (of any database, as Redis's table
 *     is) -> the clients (id and connection slot) that read the key while
 *     tracking, filled after each read-only command of a tracking
 *     client (a script's read: the keys its EVAL or FCALL declared), at
 *     most tracking-table-max-keys keys (over it, random keys are
 *     dropped and their clients told, as if they changed);
 *   - the prefixes of BCAST clients, each with its clients and the keys
 *     under it changed since the last pass;
 *   - the invalidations waiting for the end of the command (and of the
 *     blocked clients it served), so that a client's own invalidation
 *     follows its reply.
 * A change to a key (the core's change listener, kv_touch_add: every
 * write, delete, expiry and eviction, where WATCH learns of them) takes
 * the key out of the table and queues a message for each client that
 * had it; FLUSHDB and FLUSHALL send every tracking client a null (all
 * keys) and empty the table. The listener is installed only while a
 * connection tracks.
 *
 * Messages: RESP3, a push [invalidate, [keys]] (null: all); with REDIRECT
 * they go to that connection instead: a RESP3 one gets the push, a RESP2
 * one in subscribed mode a message on __redis__:invalidate. A redirect
 * whose connection closed marks the client broken_redirect and, in RESP3,
 * pushes it [tracking-redir-broken, id]. Sent behind the barrier like a
 * reply, under CLIENT REPLY OFF too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_strmap.h"
#include "kv_tracking.h"
#include "kv_vec.h"

/* A key of the tracking table. */
struct tkey {
	struct kv_strmap_node node;     /* key and len: key[] below */
	struct who *ids;
	uint32_t n, cap;
	uint8_t key[];
};

/* A changed key under a prefix: its bytes in the prefix's arena, and who
 * changed it last (0: nobody's command, as an expiry). */
struct bkey {
	size_t off, len;
	uint64_t by;
	uint32_t seq;
};

/* An invalidation waiting: for client `to`, key bytes tr.arena at off, len
 * (len SIZE_MAX: all keys, a flush). */
struct pend {
	struct who to;
	size_t off, len;
};

static struct {
	struct worker *w;               /* the thread's worker (resp_ctx_of) */
	struct kv *kv;
	struct kv_strmap map;           /* the tracking table: struct tkey */
	uint64_t items, max_keys;
	struct who *cl;                 /* tracking clients, in the order they began */
	uint32_t ncl, capcl;
	struct prefix **pfx;            /* every BCAST prefix, in byte order */
	uint32_t npfx, cappfx;
	bool bcast_due;                 /* some prefix has changed keys */
	bool listening;
	struct pend *pend;
	uint32_t npend, cappend;
	struct reasm arena;             /* the pending keys' bytes */
	uint64_t cur;                   /* the id whose command runs (NOLOOP); 0: none */
	/* The command not run by a script under way (between its hooks),
	 * for a script's reads: they track the keys its EVAL or FCALL
	 * declared. NULL: none known. */
	struct resp_ctx *caller;
	const struct kv_cmd_rt *caller_rt;
	const struct paste_resp_arg *caller_argv;
	uint32_t caller_argc;
	uint32_t *pos;                  /* getkeys' room */
	uint32_t cappos;
} tr = { .max_keys = 1000000 };

/* Append p[0..n) to b: its offset there, or -1. */
static int64_t put(struct reasm *b, const void *p, size_t n)
{
	uint32_t off = b->len;
	return reasm_append(b, p, n) ? -1 : (int64_t)off;
}

/* The open connection w names (its slot still holds it): false if gone. */
static bool live(const struct who *w, struct resp_ctx *o)
{
	return tr.w && resp_ctx_of(o, tr.w, w->conn) && o->r->id == w->id;
}

static void sync_bit(void)
{
	kv_watch_tracking(tr.ncl || tr.npend || tr.bcast_due);
}

/* ------------------------------------------------- the tracking table */

static struct tkey *key_find(const void *p, size_t len)
{
	struct kv_strmap_node *x = kv_strmap_find(&tr.map, 0, p, len,
						  kv_strmap_hash(&tr.map, 0, p, len));
	return x ? KV_STRMAP_ENTRY(x, struct tkey, node) : NULL;
}

static void key_free(struct tkey *t)
{
	kv_strmap_remove(&tr.map, &t->node);
	tr.items -= t->n;
	free(t->ids);
	free(t);
}

static void table_clear(void)
{
	uint32_t i = 0;
	for (struct kv_strmap_node *x; (x = kv_strmap_next(&tr.map, &i, NULL));)
		key_free(KV_STRMAP_ENTRY(x, struct tkey, node));
}

/* Client w read key p[0..len). */
static void remember(const void *p, size_t len, const struct who *w)
{
	if (kv_strmap_reserve(&tr.map))
		return;
	uint64_t h = kv_strmap_hash(&tr.map, 0, p, len);
	struct kv_strmap_node *x = kv_strmap_find(&tr.map, 0, p, len, h);
	struct tkey *t = x ? KV_STRMAP_ENTRY(x, struct tkey, node) : NULL;
	if (!t) {
		if (!(t = calloc(1, sizeof(*t) + len)))
			return;
		memcpy(t->key, p, len);
		t->node.key = t->key;
		t->node.len = len;
		kv_strmap_insert(&tr.map, &t->node, h);
	}
	for (uint32_t i = 0; i < t->n; i++)
		if (t->ids[i].id == w->id)
			return;
	if (kv_vec_grow((void **)&t->ids, &t->cap, t->n + 1, sizeof(*t->ids)))
		return;
	t->ids[t->n++] = *w;
	tr.items++;
}

/* ------------------------------------------------- invalidation */

static void pend_add(const struct who *to, const void *p, size_t len)
{
	int64_t off = 0;
	if (kv_vec_grow((void **)&tr.pend, &tr.cappend, tr.npend + 1, sizeof(*tr.pend)) ||
	    (p && (off = put(&tr.arena, p, len)) < 0))
		return;
	tr.pend[tr.npend++] = (struct pend){ *to, (size_t)off, p ? len : SIZE_MAX };
	kv_watch_tracking(true);
}

/* Key p[0..len) changed (or leaves the table): its clients are told, and
 * it leaves the table. noloop: a NOLOOP client is not told of its own
 * command's change. */
static void invalidate(const void *p, size_t len, bool noloop)
{
	if (!tr.map.n)
		return;
	struct tkey *t = key_find(p, len);
	if (!t)
		return;
	for (uint32_t i = 0; i < t->n; i++) {
		struct resp_ctx o;
		if (!live(&t->ids[i], &o))
			continue;
		struct kv_tclient *c = tc_of(&o);
		/* A client now in BCAST mode is not told of the keys it read
		 * before. */
		if (!c || !(c->flags & T_ON) || (c->flags & T_BCAST))
			continue;
		if (noloop && (c->flags & T_NOLOOP) && t->ids[i].id == tr.cur)
			continue;
		pend_add(&t->ids[i], t->key, t->node.len);
	}
	key_free(t);
}

/* Key p[0..len) changed, by `by`: the BCAST prefixes it falls under
 * note it for the pass. */
static void bcast_note(const uint8_t *p, size_t len, uint64_t by)
{
	for (uint32_t i = 0; i < tr.npfx; i++) {
		struct prefix *f = tr.pfx[i];
		if (f->len > len || memcmp(f->p, p, f->len))
			continue;
		int64_t off;
		if (kv_vec_grow((void **)&f->keys, &f->capkeys, f->nkeys + 1, sizeof(*f->keys)) ||
		    (off = put(&f->arena, p, len)) < 0)
			continue;
		f->keys[f->nkeys] = (struct bkey){ (size_t)off, len, by, f->nkeys };
		f->nkeys++;
		tr.bcast_due = true;
		kv_watch_tracking(true);
	}
}

static void touched(void *arg, const struct kv_key *k, enum kv_touch what)
{
	(void)arg;
	if (!k->p && !k->tlen) {
		if (what != KV_TOUCH_DELETED)
			return;                 /* SWAPDB: Redis tells nobody */
		/* FLUSHDB, FLUSHALL: every tracking client hears "all keys". */
		for (uint32_t i = 0; i < tr.ncl; i++)
			pend_add(&tr.cl[i], NULL, 0);
		table_clear();
		return;
	}
	const uint8_t *p = k->longkey ? k->p : k->t + 1;
	size_t len = k->longkey ? k->len : k->tlen - 1u;
	if (tr.npfx)
		bcast_note(p, len, what == KV_TOUCH_EXPIRED ? 0 : tr.cur);
	invalidate(p, len, true);
}

static void listen_sync(void)
{
	bool want = tr.ncl > 0;
	if (!want && tr.map.n)
		table_clear();                  /* nobody left to tell */
	if (!tr.kv || want == tr.listening)
		return;
	if (want)
		tr.listening = kv_touch_add(tr.kv, touched, NULL) == 0;
	else {
		kv_touch_remove(tr.kv, touched, NULL);
		tr.listening = false;
	}
}

/* Send c (connection o) a message about body[0..blen), Redis's keys
 * array (or null), as Redis's sendTrackingMessage: to its redirect
 * connection if it has one. */
static void send_msg(struct resp_ctx *o, struct kv_tclient *c, const void *body, size_t blen)
{
	struct resp_ctx t, *to = o;
	bool redirected = false;
	char h[80];
	int k;
	if (c->redir) {
		struct who rw = { c->redir, c->rconn };
		if (!live(&rw, &t)) {
			c->flags |= T_BROKEN;
			if (o->r->proto > 2) {
				k = paste_resp_put_push(h, sizeof(h), 3, 2);
				k += paste_resp_put_bulk(h + k, sizeof(h) - (size_t)k, "tracking-redir-broken", 21);
				k += paste_resp_put_int(h + k, sizeof(h) - (size_t)k, (int64_t)c->redir);
				resp_push_send(o, h, (size_t)k, true);
			}
			return;
		}
		to = &t;
		redirected = true;
	}
	if (to->r->proto > 2) {
		k = paste_resp_put_push(h, sizeof(h), 3, 2);
		k += paste_resp_put_bulk(h + k, sizeof(h) - (size_t)k, "invalidate", 10);
	} else if (redirected && to->r->pubsub) {
		k = paste_resp_put_array(h, sizeof(h), 3);
		k += paste_resp_put_bulk(h + k, sizeof(h) - (size_t)k, "message", 7);
		k += paste_resp_put_bulk(h + k, sizeof(h) - (size_t)k, "__redis__:invalidate", 20);
	} else {
		return;                         /* RESP2 without a redirect: nowhere to say it */
	}
	if (!resp_push_send(to, h, (size_t)k, true))
		resp_push_send(to, body, blen, true);
}

/* A pending invalidation: [key] as an array of one, or null in the
 * tracking client's own protocol (as Redis writes its flush message). */
static void send_pend(const struct pend *p)
{
	struct resp_ctx o;
	if (!live(&p->to, &o))
		return;
	struct kv_tclient *c = tc_of(&o);
	if (!c || !(c->flags & T_ON))
		return;
	if (p->len == SIZE_MAX) {
		char n[8];
		send_msg(&o, c, n, (size_t)paste_resp_put_null(n, sizeof(n), o.r->proto));
		return;
	}
	size_t need = 48 + p->len;
	char stack[512], *b = need <= sizeof(stack) ? stack : malloc(need);
	if (!b)
		return;
	int k = paste_resp_put_array(b, 16, 1);
	k += paste_resp_put_bulk_head(b + k, 32, p->len);
	memcpy(b + k, tr.arena.p + p->off, p->len);
	k += (int)p->len;
	b[k++] = '\r';
	b[k++] = '\n';
	send_msg(&o, c, b, (size_t)k);
	if (b != stack)
		free(b);
}

static const char *sort_arena;

/* By key bytes, then in the order they changed. */
static int bkey_cmp(const void *a, const void *b)
{
	const struct bkey *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(sort_arena + x->off, sort_arena + y->off, n);
	if (c)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The array of f's changed keys (sorted, once each), but those `skip`
 * changed last (0: none skipped): its length, 0 when empty. */
static size_t bcast_reply(struct prefix *f, uint64_t skip, char **out, size_t *cap)
{
	uint64_t n = 0;
	size_t need = 32;
	for (uint32_t i = 0; i < f->nkeys; i++)
		if (!skip || f->keys[i].by != skip) {
			n++;
			need += f->keys[i].len + 32;
		}
	if (!n)
		return 0;
	if (need > *cap) {
		char *p = realloc(*out, need);
		if (!p)
			return 0;
		*out = p;
		*cap = need;
	}
	char *o = *out;
	size_t k = (size_t)paste_resp_put_array(o, 32, n);
	for (uint32_t i = 0; i < f->nkeys; i++) {
		const struct bkey *b = &f->keys[i];
		if (skip && b->by == skip)
			continue;
		k += (size_t)paste_resp_put_bulk_head(o + k, 32, b->len);
		memcpy(o + k, f->arena.p + b->off, b->len);
		k += b->len;
		o[k++] = '\r';
		o[k++] = '\n';
	}
	return k;
}

/* Each prefix's changed keys to its BCAST clients (Redis does it before
 * it sleeps: once per pass). */
static void broadcast(void)
{
	static char *all, *own;
	static size_t capall, capown;
	tr.bcast_due = false;
	for (uint32_t i = 0; i < tr.npfx; i++) {
		struct prefix *f = tr.pfx[i];
		if (!f->nkeys)
			continue;
		/* Sorted by key, each once with its last changer (Redis's rax). */
		sort_arena = f->arena.p;
		qsort(f->keys, f->nkeys, sizeof(*f->keys), bkey_cmp);
		uint32_t m = 0;
		for (uint32_t j = 0; j < f->nkeys; j++) {
			if (m && f->keys[m - 1].len == f->keys[j].len &&
			    !memcmp(f->arena.p + f->keys[m - 1].off, f->arena.p + f->keys[j].off, f->keys[j].len))
				f->keys[m - 1] = f->keys[j];
			else
				f->keys[m++] = f->keys[j];
		}
		f->nkeys = m;
		size_t alen = bcast_reply(f, 0, &all, &capall);
		for (uint32_t j = 0; j < f->ncl && alen; j++) {
			struct resp_ctx o;
			if (!live(&f->cl[j], &o))
				continue;
			struct kv_tclient *c = tc_of(&o);
			if (!c || !(c->flags & T_ON))
				continue;
			if (c->flags & T_NOLOOP) {
				size_t olen = bcast_reply(f, f->cl[j].id, &own, &capown);
				if (olen)
					send_msg(&o, c, own, olen);
			} else {
				send_msg(&o, c, all, alen);
			}
		}
		f->nkeys = 0;
		f->arena.len = 0;
	}
}

/* Over tracking-table-max-keys: random keys leave, their clients told. */
static void limit(void)
{
	while (tr.max_keys && tr.map.n > tr.max_keys) {
		/* The first key from a random bucket on, wrapping at the end. */
		uint32_t i = (uint32_t)kv_rand_below(tr.map.nb), zero = 0;
		struct kv_strmap_node *x = kv_strmap_next(&tr.map, &i, NULL);
		if (!x)
			x = kv_strmap_next(&tr.map, &zero, NULL);
		struct tkey *t = KV_STRMAP_ENTRY(x, struct tkey, node);
		size_t len = t->node.len;
		uint8_t stack[256], *k = len <= sizeof(stack) ? stack : malloc(len);
		if (!k)
			return;
		memcpy(k, t->key, len);
		invalidate(k, len, true);
		if (k != stack)
			free(k);
	}
}

void kv_track_flush(struct kv *kv, bool pass)
{
	(void)kv;
	if (pass) {
		limit();
		if (tr.bcast_due)
			broadcast();
	}
	tr.cur = 0;
	/* (Sending may queue no more: a message is no change.) */
	for (uint32_t i = 0; i < tr.npend; i++)
		send_pend(&tr.pend[i]);
	tr.npend = 0;
	tr.arena.len = 0;
	sync_bit();
}

void kv_track_idle(void)
{
	tr.caller = NULL;
}

void kv_tracking_max_keys(uint64_t n)
{
	tr.max_keys = n;
}

/* ------------------------------------------------- the hooks */

void kv_track_before(struct resp_ctx *x, const struct kv_cmd_rt *rt,
		     const struct paste_resp_arg *argv, uint32_t argc, bool outer, bool script)
{
	if (!script) {
		tr.caller = x;
		tr.caller_rt = rt;
		tr.caller_argv = argv;
		tr.caller_argc = argc;
	}
	if (!(kv_watch & KV_WATCH_TRACKING))
		return;
	if (outer && !script) {
		tr.cur = x->r->id;
		limit();
		/* What changed before the command (an eviction) is told
		 * before its reply. */
		if (tr.npend) {
			uint64_t cur = tr.cur;
			kv_track_flush(NULL, false);
			tr.cur = cur;
		}
	}
}

/* The keys of command rt (argv) read by client x (tracking c). */
static void remember_cmd(struct resp_ctx *x, struct kv_tclient *c, const struct kv_cmd_rt *rt,
			 const struct paste_resp_arg *argv, uint32_t argc)
{
	bool caching = c->flags & T_CACHING;
	if (((c->flags & T_OPTIN) && !caching) || ((c->flags & T_OPTOUT) && caching))
		return;
	if (kv_vec_grow((void **)&tr.pos, &tr.cappos, 2 * argc, sizeof(*tr.pos)))
		return;
	int nk = kv_cmd_getkeys(rt, argv, argc, tr.pos, tr.pos + argc, argc);
	struct who w = { x->r->id, x->conn };
	for (int i = 0; i < nk; i++)
		remember(argv[tr.pos[i]].p, argv[tr.pos[i]].len, &w);
}

void kv_track_after(struct resp_ctx *x, const struct kv_cmd_rt *rt,
		    const struct paste_resp_arg *argv, uint32_t argc, bool outer, bool script)
{
	if (!script)
		tr.caller = NULL;               /* (set again by the next one's before) */
	if (!(kv_watch & KV_WATCH_TRACKING))
		return;
	/* A read of a tracking client (not in BCAST mode) remembers its
	 * keys: a script's read, those of the EVAL or FCALL that runs it
	 * (whose own run is not a read: skip_monitor marks them). */
	if ((rt->fl & KV_CMD_READONLY) && !(rt->fl & (KV_CMD_SKIP_MONITOR | KV_CMD_PUBSUB))) {
		struct resp_ctx *cx = x;
		const struct kv_cmd_rt *crt = rt;
		const struct paste_resp_arg *cav = argv;
		uint32_t cac = argc;
		if (script) {
			cx = tr.caller;
			crt = tr.caller_rt;
			cav = tr.caller_argv;
			cac = tr.caller_argc;
			if (!cx || cx->r->id != x->r->id)
				cx = NULL;
		}
		struct kv_tclient *c = cx ? tc_of(cx) : NULL;
		if (c && (c->flags & T_ON) && !(c->flags & T_BCAST))
			remember_cmd(cx, c, crt, cav, cac);
	}
	/* CLIENT CACHING applies to the next command (or transaction). */
	if (outer && !script) {
		struct kv_tclient *c = tc_of(x);
		if (c && (c->flags & T_CACHING) && strncmp(rt->c->name, "client|", 7) &&
		    strcmp(rt->c->name, "multi"))
			c->flags &= ~T_CACHING;
	}
}

/* ------------------------------------------------- on and off */

static void who_remove(struct who *v, uint32_t *n, uint64_t id)
{
	for (uint32_t i = 0; i < *n; i++)
		if (v[i].id == id) {
			memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof(*v));
			(*n)--;
			return;
		}
}

static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);
	return c ? c : (alen > blen) - (alen < blen);
}

/* Insert f into v (sorted by bytes): its index. */
static int pfx_insert(struct prefix ***v, uint32_t *n, uint32_t *cap, struct prefix *f)
{
	if (kv_vec_grow((void **)v, cap, *n + 1, sizeof(**v)))
		return -ENOMEM;
	uint32_t i = 0;
	while (i < *n && bytes_cmp((*v)[i]->p, (*v)[i]->len, f->p, f->len) < 0)
		i++;
	memmove(&(*v)[i + 1], &(*v)[i], (*n - i) * sizeof(**v));
	(*v)[i] = f;
	(*n)++;
	return 0;
}

static void pfx_remove(struct prefix **v, uint32_t *n, const struct prefix *f)
{
	for (uint32_t i = 0; i < *n; i++)
		if (v[i] == f) {
			memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof(*v));
			(*n)--;
			return;
		}
}

void kv_track_disable(struct resp_ctx *x, struct kv_tclient *c)
{
	for (uint32_t i = 0; i < c->npfx; i++) {
		struct prefix *f = c->pfx[i];
		who_remove(f->cl, &f->ncl, x->r->id);
		if (!f->ncl) {
			pfx_remove(tr.pfx, &tr.npfx, f);
			free(f->cl);
			free(f->keys);
			reasm_free(&f->arena);
			free(f);
		}
	}
	c->npfx = 0;
	if (c->flags & T_ON) {
		who_remove(tr.cl, &tr.ncl, x->r->id);
		c->flags = 0;
	}
	listen_sync();
	sync_bit();
}

int kv_track_bcast_add(struct resp_ctx *x, struct kv_tclient *c, const void *p, size_t len)
{
	struct prefix *f = NULL;
	for (uint32_t i = 0; i < tr.npfx && !f; i++)
		if (tr.pfx[i]->len == len && !memcmp(tr.pfx[i]->p, p, len))
			f = tr.pfx[i];
	if (!f) {
		if (!(f = calloc(1, sizeof(*f) + len)))
			return -ENOMEM;
		f->len = len;
		memcpy(f->p, p, len);
		if (pfx_insert(&tr.pfx, &tr.npfx, &tr.cappfx, f)) {
			free(f);
			return -ENOMEM;
		}
	}
	for (uint32_t i = 0; i < f->ncl; i++)
		if (f->cl[i].id == x->r->id)
			return 0;
	if (kv_vec_grow((void **)&f->cl, &f->capcl, f->ncl + 1, sizeof(*f->cl)) ||
	    pfx_insert(&c->pfx, &c->npfx, &c->cappfx, f))
		return -ENOMEM;
	f->cl[f->ncl++] = (struct who){ x->r->id, x->conn };
	return 0;
}

/* Client x (tracking c) tracks: among the tracking clients, once. */
int kv_track_join(struct resp_ctx *x, struct kv *kv, struct kv_tclient *c)
{
	if (!(c->flags & T_ON)) {
		if (kv_vec_grow((void **)&tr.cl, &tr.capcl, tr.ncl + 1, sizeof(*tr.cl)))
			return -ENOMEM;
		tr.cl[tr.ncl++] = (struct who){ x->r->id, x->conn };
	}
	tr.w = x->w;
	tr.kv = kv;
	return 0;
}

void kv_track_sync(void)
{
	listen_sync();
	sync_bit();
}

void kv_tracking_info(struct kv_tracking_info *out)
{
	out->clients = tr.ncl;
	out->keys = tr.map.n;
	out->items = tr.items;
	out->prefixes = tr.npfx;
}
