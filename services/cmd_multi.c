/*
 * cmd_multi.c - transactions (pkvs_resp.h): MULTI, EXEC, DISCARD,
 * WATCH, UNWATCH, with Redis 7's semantics.
 *
 * Queueing. Between MULTI and EXEC a command that passed dispatch's
 * checks (known, arity, no_multi) is copied into the connection's queue
 * and answered +QUEUED: its arguments outlive the read buffer they
 * arrived in. A streamed SET (a value that did not fit one read) is
 * queued with its value still held in the store buffers it landed in,
 * or, over one entry, in the chunks it was written to as it arrived
 * (kv_writer: the key's record names them at EXEC). A command refused
 * while queueing (unknown, arity, no_multi, no memory for the queue)
 * marks the transaction failed: EXEC answers -EXECABORT and runs
 * nothing. What the queues of all connections hold counts against
 * --max-request-total together with the unfinished commands; a command
 * that would pass it is refused with Redis's OOM error, as Redis refuses
 * commands inside MULTI when out of memory. Over maxmemory (CONFIG SET),
 * as Redis: every command inside MULTI is refused, and an EXEC whose
 * queue would add data (denyoom) is answered EXECABORT. With
 * fewer good replicas than min-replicas-to-write, as Redis: a write
 * is refused NOREPLICAS while queueing, and an EXEC whose queue holds
 * one is answered EXECABORT (cmd_conn.c's check).
 *
 * EXEC. The queue runs inside one kv group (kv_begin/kv_commit): after a
 * crash either all of its changes are there or none, and the clock is
 * read once (kv_run does not read it inside a group). The replies of a
 * transaction that writes are gathered in DRAM (resp_ctx.capture) and
 * queued once the group committed, so they leave behind the barrier of
 * the batch that holds the commit, as every reply does. A write that
 * finds no room (-ENOSPC: no checkpoint may run inside a group) aborts
 * the whole group: the store makes room (a checkpoint, the cleaner) and
 * the transaction runs once more, unseen by the client (not one with a
 * value in chunks: its chunks are named once); if it fails again EXEC
 * answers "-EXECABORT Transaction discarded because of: OOM
 * ...", what Redis answers an EXEC it refuses when out of memory, and
 * nothing of it is kept (docs/compat.md, "Transactions and databases").
 *
 * WATCH. A per-process hash table maps (database, key) to the
 * connections watching it; a listener of changes (kv_touch_add, called
 * after every change to a key) marks them dirty, and EXEC then answers a
 * null array. It listens only while someone watches: otherwise a change
 * costs WATCH nothing. As in Redis, a key that did not exist at
 * WATCH and does not exist after a change (an expired key removed, a
 * database flushed or swapped in without it) is no change; a watched key
 * whose deadline passed before EXEC breaks the transaction.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cmd_tracking.h"
#include "kv_notify.h"
#include "kv_repl.h"
#include "kv_acl.h"
#include "pkvs_resp.h"

/* Redis's words when out of memory (kv_reply_errno's for -ENOSPC). */
#define OOM_WORDS "OOM command not allowed when used memory > 'maxmemory'."

/* ----------------------------------------------------------- state */

struct wkey;

/* One connection watching one key. */
struct watch {
	struct wkey *k;
	struct kv_multi *m;
	struct watch *knext, **kprev;   /* the key's watchers */
	struct watch *mnext;            /* the connection's watches */
	bool live;                      /* the key existed at WATCH */
};

/* A key somebody watches. */
struct wkey {
	struct wkey *next;              /* hash chain */
	struct watch *first;
	uint64_t h;
	uint32_t db, nwatch;
	size_t len;
	uint8_t key[];
};

/* A queued command: its arguments are arg[arg0 .. arg0 + argc) of the
 * connection's arena; a streamed SET's value is body (held buffers) or,
 * over one entry, big (its chunks written as it arrived, under a grave
 * until the key's record names them). */
struct qcmd {
	struct kv_cmd_rt *rt;
	uint32_t argc, arg0;
	struct paste_body *body;
	struct kv_writer *big;
};

struct qarg {
	uint32_t off, len;
};

struct kv_multi {
	bool active;                    /* between MULTI and EXEC/DISCARD */
	bool aborted;                   /* a command was refused while queueing */
	bool dirty;                     /* a watched key changed */
	bool nospace;                   /* a write of the running EXEC found no room */
	uint32_t flags;                 /* the queued commands' KV_CMD_* together */
	uint32_t ncmd, capcmd, narg, caparg;
	struct qcmd *cmd;
	struct qarg *arg;
	struct reasm arena;             /* the arguments' bytes */
	uint64_t held;                  /* DRAM the queue holds (in queued_total) */
	uint64_t values;                /* bytes of streamed values held in buffers */
	uint32_t bigs;                  /* streamed values in chunks (a second run cannot
					 * redo them) */
	struct watch *watches;
};

/* The watch table, and what all queues hold. One thread runs the
 * protocol (resp.c), so plain statics. */
static struct {
	struct wkey **b;
	uint32_t nb, nkeys;
	uint64_t seed[2];
} wt;
static uint64_t queued_total;

static struct kv_multi *multi_of(struct resp_ctx *x)
{
	return ((struct kv_resp_conn *)x->sc)->multi;
}

static struct kv_multi *multi_get(struct resp_ctx *x)
{
	struct kv_resp_conn *kc = x->sc;
	if (!kc->multi)
		kc->multi = calloc(1, sizeof(*kc->multi));
	return kc->multi;
}

/* ----------------------------------------------------------- WATCH */

static uint64_t key_hash(uint32_t db, const void *p, size_t len)
{
	uint8_t d[16];
	paste_siphash128(wt.seed, p, len, d);
	uint64_t h;
	memcpy(&h, d, sizeof(h));
	return h ^ ((uint64_t)db * 0x9e3779b97f4a7c15ull);
}

static struct wkey *wkey_find(uint32_t db, const void *p, size_t len, uint64_t h)
{
	if (!wt.nb)
		return NULL;
	for (struct wkey *k = wt.b[h & (wt.nb - 1)]; k; k = k->next)
		if (k->h == h && k->db == db && k->len == len && !memcmp(k->key, p, len))
			return k;
	return NULL;
}

/* Is the key there now, its deadline not passed? A look at the tree
 * that changes nothing (the touched hook runs inside a change). */
static bool key_live(struct kv *kv, const struct wkey *wk)
{
	if (wk->len > KV_MAX_KEY)
		return false;
	struct kv_key k;
	kv_key_init(kv, &k, wk->db, wk->key, wk->len);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	struct paste_btree_attr a;
	uint32_t n, len, next;
	if (paste_btree_lookup(kv->tree, k.t, k.tlen, ext, &n, &len, &a))
		return false;
	if ((a.tag & KV_TAG_LONG) && !kv_long_same(kv, ext, n, k.p, k.len, &next))
		return false;
	return !a.has_word || (int64_t)a.word > kv->now_ms;
}

static void touched(void *arg, const struct kv_key *k, enum kv_touch what);

/* The listener is on while the table holds a key. */
static void hook(struct kv *kv)
{
	static bool on;
	if (wt.nkeys && !on)
		on = kv_touch_add(kv, touched, kv) == 0;
	else if (!wt.nkeys && on) {
		kv_touch_remove(kv, touched, kv);
		on = false;
	}
}

static void unwatch_all(struct kv *kv, struct kv_multi *m)
{
	while (m->watches) {
		struct watch *w = m->watches;
		m->watches = w->mnext;
		struct wkey *k = w->k;
		*w->kprev = w->knext;
		if (w->knext)
			w->knext->kprev = w->kprev;
		free(w);
		if (--k->nwatch == 0) {
			struct wkey **pp = &wt.b[k->h & (wt.nb - 1)];
			while (*pp != k)
				pp = &(*pp)->next;
			*pp = k->next;
			free(k);
			wt.nkeys--;
		}
	}
	hook(kv);
}

/* A change to wk: its watchers are dirty, but those for whom the key
 * did not exist at WATCH and does not now (an expired key removed). */
static void mark(struct kv *kv, struct wkey *wk)
{
	int live = -1;                  /* not looked at yet */
	for (struct watch *w = wk->first; w; w = w->knext) {
		if (w->m->dirty)
			continue;
		if (!w->live) {
			if (live < 0)
				live = key_live(kv, wk);
			if (!live)
				continue;
		}
		w->m->dirty = true;
	}
}

static void touched(void *arg, const struct kv_key *k, enum kv_touch what)
{
	struct kv *kv = arg;
	(void)what;
	if (!k->p && !k->tlen) {
		/* A database (or all): FLUSHDB, FLUSHALL, SWAPDB. Only marked:
		 * the watches go at EXEC, DISCARD, UNWATCH or the close. */
		for (uint32_t i = 0; i < wt.nb; i++)
			for (struct wkey *wk = wt.b[i]; wk; wk = wk->next)
				if (k->db == KV_ALL_DBS || wk->db == k->db)
					mark(kv, wk);
		return;
	}
	/* A short key's bytes are its tree key's (a streamed SET's p no
	 * longer points at them). */
	const void *p = k->longkey ? (const void *)k->p : k->t + 1;
	size_t len = k->longkey ? k->len : k->tlen - 1u;
	uint64_t h = key_hash(k->db, p, len);
	struct wkey *wk = wkey_find(k->db, p, len, h);
	if (!wk)
		return;
	mark(kv, wk);
	/* A dirty connection watches nothing more (Redis does the same):
	 * its watches go now. wk goes with its last watcher. */
	for (;;) {
		struct watch *w = wk->first;
		while (w && !w->m->dirty)
			w = w->knext;
		if (!w)
			break;
		bool last = wk->nwatch == 1;
		unwatch_all(kv, w->m);
		if (last)
			break;
	}
}

static int table_grow(void)
{
	uint32_t nb = wt.nb ? wt.nb * 2 : 64;
	struct wkey **b = calloc(nb, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (uint32_t i = 0; i < wt.nb; i++)
		for (struct wkey *k = wt.b[i], *next; k; k = next) {
			next = k->next;
			k->next = b[k->h & (nb - 1)];
			b[k->h & (nb - 1)] = k;
		}
	if (!wt.nb && getrandom(wt.seed, sizeof(wt.seed), 0) != sizeof(wt.seed)) {
		wt.seed[0] = (uint64_t)(uintptr_t)b;   /* no entropy: still a hash */
		wt.seed[1] = (uint64_t)(uintptr_t)&wt;
	}
	free(wt.b);
	wt.b = b;
	wt.nb = nb;
	return 0;
}

static int watch_key(struct resp_ctx *x, struct kv *kv, struct kv_multi *m,
		     const struct paste_resp_arg *a)
{
	uint32_t db = kv_resp_db(x);
	/* A key whose deadline passed is removed here, as a read would: it
	 * did not exist at WATCH. Its removal is a change for those who
	 * watched it live (this connection too: then it is dirty, and
	 * watches nothing more). */
	bool live = false;
	if (a->len <= KV_MAX_KEY) {
		struct kv_key k;
		struct kv_obj o;
		kv_key_init(kv, &k, db, a->p, a->len);
		live = kv_lookup(kv, &k, &o, false) == 0;
	}
	if (m->dirty)
		return 0;
	if (!wt.nb && table_grow())
		return -ENOMEM;
	uint64_t h = key_hash(db, a->p, a->len);
	struct wkey *wk = wkey_find(db, a->p, a->len, h);
	if (wk)
		for (struct watch *w = wk->first; w; w = w->knext)
			if (w->m == m)
				return 0;       /* watched already */
	struct watch *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	if (!wk) {
		if (wt.nkeys >= wt.nb && table_grow()) {
			free(w);
			return -ENOMEM;
		}
		if (!(wk = malloc(sizeof(*wk) + a->len))) {
			free(w);
			return -ENOMEM;
		}
		*wk = (struct wkey){ .h = h, .db = db, .len = a->len };
		memcpy(wk->key, a->p, a->len);
		wk->next = wt.b[h & (wt.nb - 1)];
		wt.b[h & (wt.nb - 1)] = wk;
		wt.nkeys++;
	}
	*w = (struct watch){ .k = wk, .m = m, .live = live, .mnext = m->watches };
	m->watches = w;
	w->knext = wk->first;
	if (w->knext)
		w->knext->kprev = &w->knext;
	w->kprev = &wk->first;
	wk->first = w;
	wk->nwatch++;
	hook(kv);
	return 0;
}

/* EXEC: a watched key that existed at WATCH and whose deadline passed
 * since breaks the transaction, removed or not. */
static bool watched_expired(struct kv *kv, const struct kv_multi *m)
{
	for (const struct watch *w = m->watches; w; w = w->mnext)
		if (w->live && !key_live(kv, w->k))
			return true;
	return false;
}

static void cmd_watch(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct kv_multi *m = multi_get(x);
	if (!m) {
		resp_error(x, "ERR out of memory");
		return;
	}
	if (m->active) {
		resp_error(x, "ERR WATCH inside MULTI is not allowed");
		return;
	}
	for (uint32_t i = 1; i < n && !m->dirty; i++) {   /* dirty: EXEC fails anyway */
		if (watch_key(x, kv, m, &a[i])) {
			resp_error(x, "ERR out of memory");
			return;
		}
	}
	resp_ok(x);
}

static void cmd_unwatch(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	struct kv_multi *m = multi_of(x);
	if (m) {
		unwatch_all(kv, m);
		m->dirty = false;
	}
	resp_ok(x);
}

/* ----------------------------------------------------------- the queue */

static void queue_free(struct kv *kv, struct kv_multi *m)
{
	for (uint32_t i = 0; i < m->ncmd; i++) {
		if (m->cmd[i].body) {
			paste_body_release(m->cmd[i].body, kv->store);
			free(m->cmd[i].body);
		}
		if (m->cmd[i].big) {
			kv_writer_drop(kv, m->cmd[i].big);   /* idle once written: nothing */
			free(m->cmd[i].big);
		}
	}
	free(m->cmd);
	free(m->arg);
	reasm_free(&m->arena);
	queued_total -= m->held;
	m->cmd = NULL;
	m->arg = NULL;
	m->ncmd = m->capcmd = m->narg = m->caparg = 0;
	m->held = m->values = 0;
	m->bigs = m->flags = 0;
}

/* Out of MULTI, nothing queued or watched (EXEC, DISCARD, RESET). */
static void discard(struct kv *kv, struct kv_multi *m)
{
	queue_free(kv, m);
	unwatch_all(kv, m);
	m->active = m->aborted = m->dirty = false;
}

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return true;
	uint32_t c = *cap ? *cap : 8;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * size);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

/* A command refused while queueing: EXEC will answer EXECABORT. */
static void refuse(struct kv_multi *m, struct kv_cmd_rt *rt)
{
	m->aborted = true;
	if (rt)
		rt->rejected++;
}

static void refuse_oom(struct resp_ctx *x, struct kv_multi *m, struct kv_cmd_rt *rt)
{
	refuse(m, rt);
	resp_error(x, "%s", OOM_WORDS);
}

/* Room for `add` more bytes of queues: they share --max-request-total
 * with the unfinished commands (resp.c counts those). */
static bool queue_room(struct resp_ctx *x, uint64_t add)
{
	struct resp_pending rp;
	resp_pending_info(x, &rp);
	return !rp.limit || rp.bytes + queued_total + add <= rp.limit;
}

/* Append a command (its arguments argv[0..argc), the streamed last one
 * with p NULL left empty) to the queue: false when out of memory. */
static bool queue_add(struct kv_multi *m, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		      uint32_t argc, struct paste_body *body)
{
	if (!grow((void **)&m->cmd, &m->capcmd, m->ncmd + 1, sizeof(*m->cmd)) ||
	    !grow((void **)&m->arg, &m->caparg, m->narg + argc, sizeof(*m->arg)))
		return false;
	uint32_t len0 = m->arena.len;
	for (uint32_t i = 0; i < argc; i++) {
		m->arg[m->narg + i] = (struct qarg){ m->arena.len, (uint32_t)argv[i].len };
		if (argv[i].p && argv[i].len && reasm_append(&m->arena, argv[i].p, argv[i].len)) {
			m->arena.len = len0;
			return false;
		}
	}
	m->cmd[m->ncmd++] = (struct qcmd){ rt, argc, m->narg, body, NULL };
	m->narg += argc;
	m->flags |= rt->fl;
	uint64_t held = (uint64_t)m->arena.cap + (uint64_t)m->capcmd * sizeof(*m->cmd) +
			(uint64_t)m->caparg * sizeof(*m->arg);
	queued_total += held - m->held;
	m->held = held;
	return true;
}

static bool runs_now(const struct kv_cmd_rt *rt);
static void cmd_exec(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);

bool kv_multi_queue(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		    uint32_t argc)
{
	struct kv_multi *m = multi_of(x);
	if (!m || !m->active || runs_now(rt))
		return false;
	if (rt->fl & KV_CMD_NO_MULTI) {
		refuse(m, rt);
		resp_error(x, "ERR Command not allowed inside a transaction");
		return true;
	}
	if (kv_over_maxmemory(x)) {
		/* Redis refuses every command inside MULTI then, not only
		 * those that add data (dispatch refused those already). */
		refuse_oom(x, m, rt);
		return true;
	}
	/* A transaction that cannot run keeps nothing (Redis's too). */
	if (!m->aborted && !m->dirty) {
		uint64_t add = sizeof(struct qcmd) + (uint64_t)argc * sizeof(struct qarg);
		for (uint32_t i = 0; i < argc; i++)
			add += argv[i].len;
		if (add > UINT32_MAX - m->arena.len || !queue_room(x, add) ||
		    !queue_add(m, rt, argv, argc, NULL)) {
			refuse_oom(x, m, rt);
			return true;
		}
	}
	resp_simple(x, "QUEUED");
	return true;
}

bool kv_multi_exec_abort(struct resp_ctx *x, const struct kv_cmd_rt *rt, const char *why)
{
	struct kv_multi *m = multi_of(x);
	if (!m || !m->active || rt->c->fn != cmd_exec)
		return false;
	discard(pkvs_kv(x->ss), m);
	resp_error(x, "EXECABORT Transaction discarded because of: %s", why);
	return true;
}

bool kv_multi_active(struct resp_ctx *x)
{
	struct kv_multi *m = multi_of(x);
	return m && m->active;
}

bool kv_multi_exec_writes(struct resp_ctx *x, const struct kv_cmd_rt *rt)
{
	struct kv_multi *m = multi_of(x);
	return m && m->active && rt->c->fn == cmd_exec && (m->flags & KV_CMD_WRITE);
}

bool kv_multi_queued_writes(struct resp_ctx *x)
{
	struct kv_multi *m = multi_of(x);
	if (!m || !m->active)
		return false;
	/* Asked only under CLIENT PAUSE WRITE: a script's flags are read
	 * here, from its first two arguments, not as each command queues. */
	for (uint32_t i = 0; i < m->ncmd; i++) {
		const struct qcmd *q = &m->cmd[i];
		struct paste_resp_arg av[2];
		uint32_t n = q->argc < 2 ? q->argc : 2;
		for (uint32_t j = 0; j < n; j++)
			av[j] = (struct paste_resp_arg){ m->arena.p + m->arg[q->arg0 + j].off,
							 m->arg[q->arg0 + j].len };
		if (kv_cmd_may_write(q->rt, av, n))
			return true;
	}
	return false;
}

bool kv_multi_exec_lacks(struct resp_ctx *x, const struct kv_cmd_rt *rt, uint32_t flag)
{
	struct kv_multi *m = multi_of(x);
	if (!m || !m->active || rt->c->fn != cmd_exec)
		return false;
	for (uint32_t i = 0; i < m->ncmd; i++)
		if (!(m->cmd[i].rt->fl & flag))
			return true;
	return false;
}

void kv_multi_reject(struct resp_ctx *x)
{
	struct kv_multi *m = multi_of(x);
	if (m && m->active)
		refuse(m, NULL);
}

bool kv_multi_stream_end(struct resp_ctx *x)
{
	struct kv_multi *m = multi_of(x);
	if (!m || !m->active)
		return false;
	struct kv *kv = pkvs_kv(x->ss);
	struct kv_resp_conn *kc = x->sc;
	struct kv_cmd_rt *rt = kv_cmd_find(&(struct paste_resp_arg){ "set", 3 });
	bool big = kc->big.id != 0, queued = true;
	if (m->aborted || m->dirty || !rt) {
		/* A transaction that cannot run keeps nothing. */
	} else if (big ? kc->big.err != 0 : kc->body.error != 0) {
		queued = false;                 /* its bytes were dropped: no room */
	} else {
		const struct kv_key *k = &kc->key;
		struct paste_resp_arg argv[3] = {
			{ "SET", 3 },
			{ k->longkey ? (const char *)k->p : (const char *)k->t + 1,
			  k->longkey ? k->len : k->tlen - 1u },
			{ NULL, 0 },
		};
		uint64_t add = sizeof(struct qcmd) + 3 * sizeof(struct qarg) + argv[1].len + 3;
		struct paste_body *b = big ? NULL : malloc(sizeof(*b));
		struct kv_writer *w = big ? malloc(sizeof(*w)) : NULL;
		if ((!b && !w) || add > UINT32_MAX - m->arena.len || !queue_room(x, add) ||
		    !queue_add(m, rt, argv, 3, b)) {
			free(b);
			free(w);
			queued = false;
		} else if (big) {
			*w = kc->big;          /* the queue holds its chunks now */
			kv_writer_idle(&kc->big);
			m->cmd[m->ncmd - 1].big = w;
			m->bigs++;
		} else {
			*b = kc->body;         /* ... or its buffers */
			kv_body_idle(&kc->body);
			m->values += b->len;
		}
	}
	kv_writer_drop(kv, &kc->big);           /* what was not queued (idle: nothing) */
	paste_body_release(&kc->body, kv->store);
	if (queued)
		resp_simple(x, "QUEUED");
	else
		refuse_oom(x, m, rt);
	return true;
}

void kv_multi_nospace(struct resp_ctx *x)
{
	struct kv_multi *m = multi_of(x);
	if (m)
		m->nospace = true;
}

void kv_multi_closed(struct resp_ctx *x)
{
	struct kv_resp_conn *kc = x->sc;
	if (!kc->multi)
		return;
	discard(pkvs_kv(x->ss), kc->multi);
	free(kc->multi);
	kc->multi = NULL;
}

void kv_multi_reset(struct resp_ctx *x)
{
	struct kv_multi *m = multi_of(x);
	if (m)
		discard(pkvs_kv(x->ss), m);
}

/* ----------------------------------------------------------- EXEC */

/* What an aborted group does not put back: the databases' map and
 * counts in DRAM (FLUSHDB, SWAPDB and every write change them). */
struct dbsnap {
	uint8_t map[KV_MAX_DBS];
	uint64_t keys[KV_MAX_DBS], expires[KV_MAX_DBS];
};

static void snap_take(const struct kv *kv, struct dbsnap *s)
{
	memcpy(s->map, kv->dbmap, sizeof(s->map));
	memcpy(s->keys, kv->dbkeys, sizeof(s->keys));
	memcpy(s->expires, kv->dbexpires, sizeof(s->expires));
}

static void snap_put(struct kv *kv, const struct dbsnap *s)
{
	memcpy(kv->dbmap, s->map, sizeof(s->map));
	memcpy(kv->dbkeys, s->keys, sizeof(s->keys));
	memcpy(kv->dbexpires, s->expires, sizeof(s->expires));
}

/* Run queued command i (argv built from the arena). */
static void run_one(struct resp_ctx *x, struct kv *kv, struct kv_multi *m, uint32_t i,
		    struct paste_resp_arg *av)
{
	struct qcmd *q = &m->cmd[i];
	for (uint32_t j = 0; j < q->argc; j++) {
		const struct qarg *g = &m->arg[q->arg0 + j];
		av[j] = (struct paste_resp_arg){ m->arena.p + g->off, g->len };
	}
	const char *why;                 /* ACL: the user's rules may have changed since */
	if (x->r->user && !((const struct kv_acl_user *)x->r->user)->all &&
	    (why = kv_acl_exec_why(x, q->rt, av, q->argc)) != NULL) {
		resp_error(x, "NOPERM ACLs rules changed between the moment the transaction was "
			   "accumulated and the EXEC call. This command is no longer allowed for the "
			   "following reason: %s", why);
		return;
	}
	if (!q->body && !q->big) {
		kv_run(x, kv, q->rt, av, q->argc);
		return;
	}
	/* A streamed SET: its value is in the buffers it landed in (a second
	 * run, after making room, needs them again: the tree takes its own
	 * references, the queue keeps its own until discard), or in chunks
	 * that the key's record now names (once: the writer is idle after). */
	q->rt->calls++;
	struct kv_key k;
	if (!kv_arg_key(x, kv, &av[1], &k))
		return;
	int r;
	if (q->big) {
		r = kv_writer_put(kv, q->big, &k, KV_NO_TTL, NULL);
	} else {
		struct paste_body b = *q->body;
		for (uint32_t e = 0; e < b.n; e++)
			paste_store_ref(kv->store, b.ext[e].buf);
		r = kv_put_body(kv, &k, &b, KV_NO_TTL, NULL);
	}
	if (r == 0)
		kv_notify(KV_NOTIFY_STRING, "set", &k);
	if (r == 0 && kv_repl_active)
		kv_repl_set(x, kv, &k);
	if (r == 0 && kv_watch)
		kv_monitor_set(x, kv, &k);              /* MONITOR (cmd_tracking.h) */
	if (r)
		kv_reply_errno(x, r);
	else
		resp_ok(x);
}

/* The error a command of an aborted transaction got (its reply from
 * `at` in what was gathered), without '-' and CRLF; Redis's OOM words
 * when it replied none (a change under it found no room). */
static void abort_reply(struct resp_ctx *x, const struct resp_out *o, size_t at)
{
	const char *why = OOM_WORDS;
	int len = (int)strlen(why);
	if (!o->oom && at < o->b.len && o->b.p[at] == '-') {
		const char *s = o->b.p + at + 1, *e = memchr(s, '\r', o->b.len - at - 1);
		if (e) {
			why = s;
			len = (int)(e - s);
		}
	}
	resp_error(x, "EXECABORT Transaction discarded because of: %.*s", len, why);
}

static void exec_queue(struct resp_ctx *x, struct kv *kv, struct kv_multi *m)
{
	struct kv_resp_conn *kc = x->sc;
	uint32_t maxargc = 1;
	for (uint32_t i = 0; i < m->ncmd; i++)
		if (m->cmd[i].argc > maxargc)
			maxargc = m->cmd[i].argc;
	struct paste_resp_arg *av = malloc(maxargc * sizeof(*av));
	if (!av) {
		resp_error(x, "EXECABORT Transaction discarded because of: ERR out of memory");
		return;
	}
	const struct paste_event *ev = x->ev;
	x->ev = NULL;                   /* the arguments are the queue's, not the event's */
	bool writes = (m->flags & KV_CMD_WRITE) != 0;
	uint32_t db = kc->db;
	struct dbsnap snap;
	if (writes) {
		snap_take(kv, &snap);
		kv_admit(kv, m->values + m->arena.len);   /* room first: none is made inside */
	}
	uint32_t mark = kv_repl_active ? kv_repl_mark() : 0;
	for (int attempt = 0;; attempt++) {
		struct resp_out o = { 0 };
		size_t at = 0;
		int r = kv_begin(kv);
		if (r) {
			kv_reply_errno(x, r);
			break;
		}
		uint32_t depth = kv->group_depth;
		bool failed = false;
		m->nospace = false;
		if (writes)
			x->capture = &o;        /* replies wait for the commit */
		else
			resp_array(x, m->ncmd);
		for (uint32_t i = 0; i < m->ncmd && x->r->state != R_DEAD; i++) {
			at = o.b.len;
			run_one(x, kv, m, i, av);
			/* A write found no room, or a change under a command
			 * ended the group (a nested abort): all or nothing. */
			if (writes && (m->nospace || kv->group_depth != depth)) {
				failed = true;
				break;
			}
		}
		x->capture = NULL;
		if (!failed) {
			r = kv_commit(kv);
			if (r == 0) {
				if (writes) {
					char head[32];
					resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), m->ncmd), &o);
				}
				break;
			}
			failed = true;
			at = o.b.len;
		}
		kv_abort(kv);
		snap_put(kv, &snap);
		if (kv_repl_active)
			kv_repl_rewind(mark);   /* none of it reaches a replica */
		kc->db = db;
		kv->sweep_due = true;           /* a value in chunks it named is buried again */
		if (attempt == 0 && !m->bigs && (m->nospace || r == -ENOSPC) &&
		    x->r->state != R_DEAD) {
			reasm_free(&o.b);
			kv_make_room(kv, m->values + m->arena.len);
			continue;
		}
		if (r && r != -ENOSPC)
			kv_reply_errno(x, r);
		else
			abort_reply(x, &o, at);
		reasm_free(&o.b);
		break;
	}
	x->ev = ev;
	free(av);
}

/* The connection's transaction, or NULL after Redis's error for cmd
 * outside one. */
static struct kv_multi *in_multi(struct resp_ctx *x, const char *cmd)
{
	struct kv_multi *m = multi_of(x);
	if (m && m->active)
		return m;
	resp_error(x, "ERR %s without MULTI", cmd);
	return NULL;
}

static void cmd_exec(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	struct kv_multi *m = in_multi(x, "EXEC");
	if (!m)
		return;
	if ((m->flags & KV_CMD_DENYOOM) && kv_over_maxmemory(x)) {
		/* As Redis: over maxmemory, a transaction that would add data
		 * is refused whole (one of reads only runs). */
		resp_error(x, "EXECABORT Transaction discarded because of: %s", OOM_WORDS);
		discard(kv, m);
		return;
	}
	if (!m->dirty && m->watches && watched_expired(kv, m))
		m->dirty = true;
	if (m->aborted) {
		resp_error(x, "EXECABORT Transaction discarded because of previous errors.");
	} else if (m->dirty) {
		char b[8];
		resp_send(x, b, (size_t)paste_resp_put_null_array(b, sizeof(b), x->r->proto));
	} else {
		unwatch_all(kv, m);     /* its own writes must not touch it */
		if (m->ncmd)
			exec_queue(x, kv, m);
		else
			resp_array(x, 0);
	}
	discard(kv, m);
}

static void cmd_multi(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	struct kv_multi *m = multi_get(x);
	if (!m) {
		resp_error(x, "ERR out of memory");
	} else if (m->active) {
		resp_error(x, "ERR MULTI calls can not be nested");
	} else {
		m->active = true;
		resp_ok(x);
	}
}

static void cmd_discard(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	struct kv_multi *m = in_multi(x, "DISCARD");
	if (!m)
		return;
	discard(kv, m);
	resp_ok(x);
}

/* Run at once inside MULTI, as Redis's: EXEC, DISCARD, MULTI, WATCH
 * (QUIT is the protocol's own), RESET. */
static bool runs_now(const struct kv_cmd_rt *rt)
{
	kv_cmd_fn f = rt->c->fn;
	return f == cmd_exec || f == cmd_discard || f == cmd_multi || f == cmd_watch ||
	       !strcmp(rt->c->name, "reset");
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_multi[] = {
	{ "multi", 1, "noscript loading stale fast allow_busy", "transactions", "Opens a transaction: the commands that follow are queued until EXEC.", cmd_multi, 0, 0, 0 },
	{ "exec", 1, "noscript loading stale skip_slowlog", "transactions", "Runs the queued commands together, or none of them if a watched key changed.", cmd_exec, 0, 0, 0 },
	{ "discard", 1, "noscript loading stale fast allow_busy", "transactions", "Drops the queued commands and closes the transaction.", cmd_discard, 0, 0, 0 },
	{ "watch", -2, "noscript loading stale fast allow_busy", "transactions", "Makes the next EXEC run nothing if one of these keys changes before it.", cmd_watch, 1, -1, 1 },
	{ "unwatch", 1, "noscript loading stale fast allow_busy", "transactions", "Stops watching every key.", cmd_unwatch, 0, 0, 0 },
	{ 0 }
};
