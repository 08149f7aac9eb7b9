/*
 * cmd_block.c - clients blocked on keys (cmd_block.h).
 *
 * State, per process (one thread runs the protocol and the store):
 *   - a hash table of the keys somebody waits on, (database, bytes) ->
 *     the waits on it in the order they came (Redis's db->blocking_keys);
 *   - per blocked client a record (its connection's kv_resp_conn.block)
 *     with its serve function, parameters, deadline and one wait per key;
 *   - a min-heap of the records with a deadline;
 *   - the ready list: keys changed since the last serve (Redis's
 *     ready_keys), each once.
 * The change listener (kv_touch_add) is installed only while a client is
 * blocked: otherwise a change costs kv_touched's one branch.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_block.h"
#include "kv_strmap.h"
#include "kv_vec.h"

/* A key somebody waits on. */
struct bkey {
	struct kv_strmap_node node;     /* key[] below, len, tag: db */
	struct bkey *rnext;             /* the ready list */
	struct bwait *first, *last;     /* its waits, oldest first */
	uint32_t db;
	bool ready;                     /* on the ready list */
	bool busy;                      /* being served: kept even when no wait is left */
	uint8_t key[];
};

/* One client waiting on one key. */
struct bwait {
	struct bkey *k;
	struct kv_bclient *c;
	struct bwait *next, *prev;
};

/* A blocked client. */
struct kv_bclient {
	struct worker *w;
	uint32_t conn;
	uint64_t id;                    /* its connection's CLIENT ID (a slot is reused) */
	uint32_t db;
	uint64_t deadline;              /* w->now_ms's clock; 0: none */
	uint32_t heap;                  /* its index in the heap; UINT32_MAX: not there */
	enum kv_type type;
	bool every, gone;               /* kv_block_req's */
	kv_block_serve_fn serve;
	struct kv_bclient *lnext, **lprev;   /* every blocked client (CLIENT UNBLOCK) */
	uint32_t nwaits;
	struct bwait *waits;
	/* For the slow log, which logs it once it is served (Redis's rule):
	 * the command, its words, its first run's time, its serve's start. */
	struct kv_cmd_rt *rt;           /* its INFO commandstats: an error served counts as failed */
	struct paste_resp_arg *argv;
	uint32_t argc;
	uint64_t ran_ns, serve_t0;
	size_t arglen;
	max_align_t arg[];              /* the command's parameters */
};

static struct {
	struct kv_strmap keys;          /* struct bkey by (db, bytes) */
	struct bkey *ready, *ready_last;
	struct kv_bclient **heap;
	uint32_t nheap, capheap;
	struct kv_bclient *all;
	uint32_t nblocked;
	struct kv *kv;                  /* listening for changes (kv_touch_add) */
} bt;

/* ------------------------------------------------------------ timeouts */

bool kv_block_timeout(struct resp_ctx *x, const struct paste_resp_arg *a, uint64_t *ms)
{
	long double v;
	if (!kv_ld_parse(a->p, a->len, &v)) {
		resp_error(x, "ERR timeout is not a float or out of range");
		return false;
	}
	/* Redis: (long long)ceill(v * 1000); a value out of that range (an
	 * infinity too) comes out as the most negative one on x86-64. */
	long double t = v * 1000.0L;
	if (!(t > -9.2e18L && t < 9.2e18L) || t <= -1.0L) {
		resp_error(x, "ERR timeout is negative");
		return false;
	}
	uint64_t i = t > 0 ? (uint64_t)t : 0;       /* rounded up, without libm */
	*ms = (long double)i < t ? i + 1 : i;
	return true;
}

bool kv_block_allowed(const struct resp_ctx *x, const struct kv *kv)
{
	return !x->capture && !kv->group_depth;
}

/* ------------------------------------------------------------ the key table */

static struct bkey *key_find(uint32_t db, const void *p, size_t len, uint64_t h)
{
	struct kv_strmap_node *x = kv_strmap_find(&bt.keys, db, p, len, h);
	return x ? KV_STRMAP_ENTRY(x, struct bkey, node) : NULL;
}

/* The key's entry, made when absent (NULL: out of memory). */
static struct bkey *key_get(uint32_t db, const void *p, size_t len)
{
	if (kv_strmap_reserve(&bt.keys))
		return NULL;
	uint64_t h = kv_strmap_hash(&bt.keys, db, p, len);
	struct bkey *k = key_find(db, p, len, h);
	if (k)
		return k;
	if (!(k = calloc(1, sizeof(*k) + len)))
		return NULL;
	k->db = db;
	memcpy(k->key, p, len);
	k->node.key = k->key;
	k->node.len = len;
	k->node.tag = db;
	kv_strmap_insert(&bt.keys, &k->node, h);
	return k;
}

/* A key nobody waits on goes, unless the ready list or a serve holds it. */
static void key_put(struct bkey *k)
{
	if (k->first || k->ready || k->busy)
		return;
	kv_strmap_remove(&bt.keys, &k->node);
	free(k);
}

/* ------------------------------------------------------------ the heap */

static bool earlier(uint32_t a, uint32_t b)
{
	return bt.heap[a]->deadline < bt.heap[b]->deadline;
}

static void heap_swap(uint32_t a, uint32_t b)
{
	struct kv_bclient *t = bt.heap[a];
	bt.heap[a] = bt.heap[b];
	bt.heap[b] = t;
	bt.heap[a]->heap = a;
	bt.heap[b]->heap = b;
}

static void heap_fix(uint32_t i)
{
	while (i && earlier(i, (i - 1) / 2)) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		uint32_t l = 2 * i + 1, m = i;
		if (l < bt.nheap && earlier(l, m))
			m = l;
		if (l + 1 < bt.nheap && earlier(l + 1, m))
			m = l + 1;
		if (m == i)
			return;
		heap_swap(i, m);
		i = m;
	}
}

static int heap_add(struct kv_bclient *c)
{
	if (kv_vec_grow((void **)&bt.heap, &bt.capheap, bt.nheap + 1, sizeof(*bt.heap)))
		return -ENOMEM;
	c->heap = bt.nheap;
	bt.heap[bt.nheap++] = c;
	heap_fix(c->heap);
	return 0;
}

static void heap_del(struct kv_bclient *c)
{
	uint32_t i = c->heap;
	if (i == UINT32_MAX)
		return;
	c->heap = UINT32_MAX;
	if (i != --bt.nheap) {
		bt.heap[i] = bt.heap[bt.nheap];
		bt.heap[i]->heap = i;
		heap_fix(i);
	}
}

/* ------------------------------------------------------------ changes */

static void mark_ready(struct bkey *k)
{
	if (k->ready || !k->first)
		return;
	k->ready = true;
	k->rnext = NULL;
	if (bt.ready_last)
		bt.ready_last->rnext = k;
	else
		bt.ready = k;
	bt.ready_last = k;
}

/* A change to a key (inside the change: only marks). A key written or
 * created may now hold what its waiters want; a whole database written
 * (SWAPDB) may hold any. */
static void touched(void *arg, const struct kv_key *k, enum kv_touch what)
{
	(void)arg;
	if (what > KV_TOUCH_EXPIRED || !bt.keys.n)
		return;                 /* a deleted key too: a blocked XREADGROUP hears of it */
	if (!k->p && !k->tlen) {
		uint32_t i = 0;
		for (struct kv_strmap_node *x = kv_strmap_next(&bt.keys, &i, NULL); x;
		     x = kv_strmap_next(&bt.keys, &i, x)) {
			struct bkey *b = KV_STRMAP_ENTRY(x, struct bkey, node);
			if (k->db == KV_ALL_DBS || b->db == k->db)
				mark_ready(b);
		}
		return;
	}
	const void *p = k->longkey ? (const void *)k->p : k->t + 1;
	size_t len = k->longkey ? k->len : k->tlen - 1u;
	struct bkey *b = key_find(k->db, p, len, kv_strmap_hash(&bt.keys, k->db, p, len));
	if (b)
		mark_ready(b);
}

/* The listener is on while a client is blocked. */
static void listen_changes(struct kv *kv)
{
	if (bt.nblocked && !bt.kv) {
		if (kv_touch_add(kv, touched, NULL) == 0)
			bt.kv = kv;
	} else if (!bt.nblocked && bt.kv) {
		kv_touch_remove(bt.kv, touched, NULL);
		bt.kv = NULL;
	}
}

/* ------------------------------------------------------------ block, unblock */

static struct kv_bclient *client_of(const struct resp_ctx *x)
{
	return ((const struct kv_resp_conn *)x->sc)->block;
}

/* c waits no more: out of its keys' lists, the heap and the list of all. */
static void forget(struct kv_bclient *c)
{
	for (uint32_t i = 0; i < c->nwaits; i++) {
		struct bwait *w = &c->waits[i];
		struct bkey *k = w->k;
		if (w->prev)
			w->prev->next = w->next;
		else
			k->first = w->next;
		if (w->next)
			w->next->prev = w->prev;
		else
			k->last = w->prev;
		key_put(k);
	}
	heap_del(c);
	*c->lprev = c->lnext;
	if (c->lnext)
		c->lnext->lprev = c->lprev;
	bt.nblocked--;
	free(c->argv);
	free(c->waits);
	free(c);
}

/* c (whose connection's context is x, or NULL when it is gone) waits no
 * more: its connection runs its next commands (at the end of the pass). */
static void unblock(struct kv_bclient *c, struct resp_ctx *x)
{
	/* Served: the slow log takes it now (Redis logs neither a timeout
	 * nor CLIENT UNBLOCK's end). */
	uint64_t ns = c->serve_t0 ? c->ran_ns + paste_clock_ns() - c->serve_t0 : 0;
	if (x && c->argv && c->serve_t0 && ns >= kv_slowlog_ns)
		kv_slowlog_push(x, c->rt, c->argv, c->argc, ns);
	if (x) {
		((struct kv_resp_conn *)x->sc)->block = NULL;
		resp_unblock(x);
	}
	struct kv *kv = bt.kv;
	forget(c);
	if (kv)
		listen_changes(kv);
}

/* The context of c's connection: false when it closed (or is closing). */
static bool client_ctx(const struct kv_bclient *c, struct resp_ctx *x)
{
	return resp_ctx_of(x, c->w, c->conn) && x->r->id == c->id && client_of(x) == c;
}

int kv_block(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *keys, uint32_t nkeys,
	     uint64_t timeout_ms, const struct kv_block_req *req)
{
	struct kv_bclient *c = calloc(1, sizeof(*c) + req->arglen);
	struct bwait *waits = calloc(nkeys ? nkeys : 1, sizeof(*waits));
	if (!c || !waits) {
		free(c);
		free(waits);
		resp_error(x, "ERR out of memory");
		return -ENOMEM;
	}
	*c = (struct kv_bclient){ .w = x->w, .conn = x->conn, .id = x->r->id, .db = kv_resp_db(x),
				  .heap = UINT32_MAX, .type = req->type, .serve = req->serve,
				  .every = req->every, .gone = req->gone,
				  .waits = waits, .arglen = req->arglen };
	memcpy(c->arg, req->arg, req->arglen);
	if (timeout_ms) {
		/* From the fine clock, rounded up: the pass's coarse now_ms lags
		 * by up to a tick, and a timeout never fires before its time. */
		uint64_t now = (paste_clock_ns() + 999999) / 1000000;
		c->deadline = timeout_ms < UINT64_MAX - now ? now + timeout_ms : UINT64_MAX - 1;
	}
	c->lnext = bt.all;
	if (bt.all)
		bt.all->lprev = &c->lnext;
	c->lprev = &bt.all;
	bt.all = c;
	bt.nblocked++;
	int r = c->deadline ? heap_add(c) : 0;
	for (uint32_t i = 0; r == 0 && i < nkeys; i++) {
		struct bkey *k = key_get(c->db, keys[i].p, keys[i].len);
		if (!k) {
			r = -ENOMEM;
			break;
		}
		bool dup = false;                /* BLPOP k k: one wait */
		for (struct bwait *w = k->first; w && !dup; w = w->next)
			dup = w->c == c;
		if (dup)
			continue;
		struct bwait *w = &c->waits[c->nwaits++];
		*w = (struct bwait){ .k = k, .c = c, .prev = k->last };
		if (k->last)
			k->last->next = w;
		else
			k->first = w;
		k->last = w;
	}
	if (r) {
		forget(c);
		resp_error(x, "ERR out of memory");
		return r;
	}
	((struct kv_resp_conn *)x->sc)->block = c;
	resp_block(x);
	listen_changes(kv);
	return 0;
}

/* ------------------------------------------------------------ serving */

/* The clients waiting on k, oldest first, while k serves them. */
static void serve_key(struct kv *kv, struct bkey *k)
{
	struct kv_key key;
	struct kv_obj o;
	kv_key_init(kv, &key, k->db, k->key, k->node.len);
	/* Gone again (LPUSH then DEL in MULTI): only a client that hears of
	 * that is served. */
	bool found = k->node.len <= KV_MAX_KEY && kv_lookup(kv, &key, &o, false) == 0;
	k->busy = true;
	for (struct bwait *w = k->first, *next; w; w = next) {
		next = w->next;
		struct kv_bclient *c = w->c;
		struct resp_ctx x;
		if (found ? c->type != o.type && !c->gone : !c->gone)
			continue;
		if (!client_ctx(c, &x)) {
			unblock(c, NULL);       /* closing: its close drops nothing more */
			continue;
		}
		kv_key_init(kv, &key, k->db, k->key, k->node.len);
		c->serve_t0 = paste_clock_ns();
		uint32_t errors = x.r->errors;
		if (!c->serve(&x, kv, &key, c->arg)) {
			c->serve_t0 = 0;
			if (c->every)
				continue;
			break;
		}
		if (x.r->errors != errors && c->rt)
			c->rt->failed++;
		unblock(c, &x);
	}
	k->busy = false;
	key_put(k);
}

void kv_block_serve(struct kv *kv)
{
	while (bt.ready && !kv->group_depth) {
		struct bkey *k = bt.ready;
		bt.ready = k->rnext;
		if (!bt.ready)
			bt.ready_last = NULL;
		k->ready = false;
		if (k->first)
			serve_key(kv, k);       /* a BLMOVE may mark more keys ready */
		else
			key_put(k);
	}
}

/* ------------------------------------------------------------ the pass */

void kv_block_pass(struct worker *w, struct kv *kv)
{
	(void)kv;
	while (bt.nheap && bt.heap[0]->deadline <= w->now_ms) {
		struct kv_bclient *c = bt.heap[0];
		struct resp_ctx x;
		bool live = client_ctx(c, &x);
		if (live) {
			char b[8];
			resp_send(&x, b, (size_t)paste_resp_put_null_array(b, sizeof(b), x.r->proto));
		}
		unblock(c, live ? &x : NULL);
	}
}

uint64_t kv_block_wake(struct worker *w, void *service_state)
{
	(void)w, (void)service_state;
	return bt.nheap ? bt.heap[0]->deadline : UINT64_MAX;
}

void kv_block_closed(struct resp_ctx *x)
{
	struct kv_bclient *c = client_of(x);
	if (!c)
		return;
	((struct kv_resp_conn *)x->sc)->block = NULL;
	struct kv *kv = bt.kv;
	forget(c);
	if (kv)
		listen_changes(kv);
}

int kv_block_unblock(struct resp_ctx *x, struct kv *kv, uint64_t id, bool error)
{
	(void)kv;
	struct kv_bclient *c = bt.all;
	while (c && c->id != id)
		c = c->lnext;
	struct resp_ctx o;
	if (!c || c->w != x->w || !client_ctx(c, &o))
		return 0;
	if (error) {
		resp_error(&o, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
	} else {
		char b[8];
		resp_send(&o, b, (size_t)paste_resp_put_null_array(b, sizeof(b), o.r->proto));
	}
	unblock(c, &o);
	return 1;
}

void kv_block_ran(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		  uint32_t argc, uint64_t ns)
{
	struct kv_bclient *c = client_of(x);
	size_t bytes = 0;
	for (uint32_t i = 0; i < argc; i++)
		bytes += argv[i].len;
	/* One allocation: the words, then their bytes. Without it the
	 * command goes unlogged, nothing else changes. */
	struct paste_resp_arg *v = malloc(argc * sizeof(*v) + bytes + 1);
	if (!v)
		return;
	char *at = (char *)(v + argc);
	for (uint32_t i = 0; i < argc; i++) {
		memcpy(at, argv[i].p, argv[i].len);
		v[i] = (struct paste_resp_arg){ at, argv[i].len };
		at += argv[i].len;
	}
	c->rt = rt;
	c->argv = v;
	c->argc = argc;
	c->ran_ns = ns;
}

uint32_t kv_block_count(void)
{
	return bt.nblocked;
}
