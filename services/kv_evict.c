/*
 * kv_evict.c - maxmemory and its eviction policies, and the access table
 * behind OBJECT IDLETIME and OBJECT FREQ (kv_evict.h says what is
 * bounded and how accesses are kept).
 *
 * Choosing a key is Redis's evict.c done over the tree: an LRU or LFU
 * policy samples maxmemory-samples keys of each database that has keys
 * (a random descent of the database's key range: paste_btree_cursor_sample)
 * or, volatile-*, of the expiry index (one entry per key with a
 * deadline), ranks them by idle time or by 255 less the decayed counter,
 * keeps the 16 best across calls in a pool, and takes the best that still
 * exists. Random policies take one sampled key (allkeys: the databases in
 * turn). volatile-ttl takes the expiry index's first entry: the soonest
 * deadline exactly, where Redis samples for it.
 *
 * An eviction is kv_remove, as DEL: its delete record goes to the log
 * before the write that needed the room, so the barrier that lets that
 * write's reply go makes the eviction durable too; WATCH hears it
 * (kv_touched), subscribers get "evicted" (class e). A dropped
 * collection's members leave the dataset when the sweeper deletes them,
 * so the loop sweeps what waits before it evicts more.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kv_evict.h"
#include "kv_notify.h"
#include "kv_repl.h"

struct kv_evict_config kv_evict_cfg = {
	.policy = KV_EVICT_NOEVICTION, .samples = 5, .lfu_log_factor = 10, .lfu_decay_time = 1,
	.tenacity = 10,
};

static uint64_t evicted;                /* INFO evicted_keys */
static bool pending;                    /* over the bound after a time limit: go on */
static void pool_clear(void);
static void lfu_listen(struct kv *kv);

static const char *const policy_names[] = {
	[KV_EVICT_NOEVICTION] = "noeviction",
	[KV_EVICT_ALLKEYS_LRU] = "allkeys-lru", [KV_EVICT_ALLKEYS_LFU] = "allkeys-lfu",
	[KV_EVICT_ALLKEYS_RANDOM] = "allkeys-random",
	[KV_EVICT_VOLATILE_LRU] = "volatile-lru", [KV_EVICT_VOLATILE_LFU] = "volatile-lfu",
	[KV_EVICT_VOLATILE_RANDOM] = "volatile-random", [KV_EVICT_VOLATILE_TTL] = "volatile-ttl",
};
#define NPOLICIES (sizeof(policy_names) / sizeof(policy_names[0]))

const char *kv_evict_policy_name(enum kv_evict_policy p)
{
	return (size_t)p < NPOLICIES ? policy_names[p] : "noeviction";
}

int kv_evict_policy_parse(const char *s, size_t len)
{
	for (size_t i = 0; i < NPOLICIES; i++)
		if (strlen(policy_names[i]) == len && !strncasecmp(policy_names[i], s, len))
			return (int)i;
	return -1;
}

static bool allkeys(void)
{
	enum kv_evict_policy p = kv_evict_cfg.policy;
	return p == KV_EVICT_ALLKEYS_LRU || p == KV_EVICT_ALLKEYS_LFU || p == KV_EVICT_ALLKEYS_RANDOM;
}

static bool lfu(enum kv_evict_policy p)
{
	return p == KV_EVICT_ALLKEYS_LFU || p == KV_EVICT_VOLATILE_LFU;
}

/* ------------------------------------------------------- the settings */

static const struct {
	const char *name;
	uint32_t *val;
	int64_t min, max;
} ints[] = {
	{ "maxmemory-samples", &kv_evict_cfg.samples, 1, 2147483647 },
	{ "lfu-log-factor", &kv_evict_cfg.lfu_log_factor, 0, 2147483647 },
	{ "lfu-decay-time", &kv_evict_cfg.lfu_decay_time, 0, 2147483647 },
	{ "maxmemory-eviction-tenacity", &kv_evict_cfg.tenacity, 0, 100 },
};
#define NINTS (sizeof(ints) / sizeof(ints[0]))

const char *kv_evict_get(const char *name, char *buf, size_t cap)
{
	if (!strcmp(name, "maxmemory"))
		snprintf(buf, cap, "%llu", (unsigned long long)kv_evict_cfg.maxmemory);
	else if (!strcmp(name, "maxmemory-policy"))
		return kv_evict_policy_name(kv_evict_cfg.policy);
	else {
		size_t i = 0;
		while (i < NINTS && strcmp(ints[i].name, name))
			i++;
		if (i == NINTS)
			return NULL;
		snprintf(buf, cap, "%u", *ints[i].val);
	}
	return buf;
}

int kv_evict_check(const char *name, uint64_t num, const char **why)
{
	size_t i = 0;
	while (i < NINTS && strcmp(ints[i].name, name))
		i++;
	int64_t x = (int64_t)num;
	if (i == NINTS || (x >= ints[i].min && x <= ints[i].max))
		return 0;
	static char msg[80];
	snprintf(msg, sizeof(msg), "argument must be between %lld and %lld inclusive",
		 (long long)ints[i].min, (long long)ints[i].max);
	*why = msg;
	return -1;
}

int kv_evict_set(struct kv *kv, const char *name, uint64_t num, const char *v, size_t len,
		 const char **why)
{
	if (!strcmp(name, "maxmemory")) {
		kv_evict_cfg.maxmemory = num;
	} else if (!strcmp(name, "maxmemory-policy")) {
		int p = kv_evict_policy_parse(v, len);
		if (p < 0) {
			*why = "argument(s) must be one of the following: volatile-lru, volatile-lfu, "
			       "volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, "
			       "noeviction";
			return -1;
		}
		kv_evict_cfg.policy = (enum kv_evict_policy)p;
		kv_access_lfu = lfu(kv_evict_cfg.policy);
		pool_clear();                   /* its scores were another policy's */
	} else {
		size_t i = 0;
		while (i < NINTS && strcmp(ints[i].name, name))
			i++;
		if (i == NINTS)
			return 1;
		if (kv_evict_check(name, num, why))
			return -1;
		*ints[i].val = (uint32_t)num;
		return 0;
	}
	/* Redis starts evicting when the bound or the policy changes. */
	pending = kv_evict_cfg.maxmemory != 0;
	if (kv)
		kv_evict_pass(kv);
	return 0;
}

uint64_t kv_evict_count(void)
{
	return evicted;
}

void kv_evict_reset_stats(void)
{
	evicted = 0;
}

uint64_t kv_evict_used(const struct kv *kv)
{
	return paste_btree_live_now(kv->tree) + paste_btree_count(kv->tree) * KV_EVICT_ENTRY_COST;
}

/* ------------------------------------------------- the access table */

/* 2^16 words, 256 KiB: a table that stays in the L2 cache. Its size is
 * what the touch costs, in cache lines, not in DRAM: with 2^20 words a
 * pipelined GET/SET run over 100,000 keys took ~175 ns more per command
 * (a fresh line per command, pushing out the tree's and the values'),
 * with 2^16 nothing measurable (docs/results.md, "Access times"). */
#define ACCESS_BITS 16u
/* Until kv_access_init (or if its allocation fails): two words for all. */
static uint32_t one_word[2];
uint32_t *kv_access_tab = one_word;
uint32_t kv_access_bits = 1;
bool kv_access_lfu;
static int64_t start_s;                 /* what a word never written stands for */

static int64_t wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

void kv_access_init(void)
{
	static bool tried;
	if (tried)
		return;
	tried = true;
	start_s = wall_s();
	uint32_t *t = calloc(1u << ACCESS_BITS, sizeof(*t));
	if (t) {
		kv_access_tab = t;
		kv_access_bits = ACCESS_BITS;
	}
}

bool kv_access_notouch(const char *name)
{
	static const char *const names[] = {
		"type", "exists", "ttl", "pttl", "expiretime", "pexpiretime",
		"object|encoding", "object|freq", "object|idletime", "object|refcount",
		"memory|usage",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

/* A word's second of access (24 bits) and counter; 0: never written. */
static void word_get(uint32_t w, int64_t now_s, int64_t *at_s, uint32_t *counter)
{
	if (!w) {
		*at_s = start_s;
		*counter = KV_LFU_INIT;
		return;
	}
	uint32_t ago = ((uint32_t)now_s - (w >> 8)) & 0xFFFFFFu;
	*at_s = now_s - ago;
	*counter = w & 0xFFu;
}

static uint32_t word_make(int64_t at_s, uint32_t counter)
{
	uint32_t w = ((uint32_t)at_s & 0xFFFFFFu) << 8 | counter;
	return w ? w : 1u << 8;                 /* 0 means "never" */
}

/* Redis's LFUDecrAndReturn: a period of lfu-decay-time minutes since the
 * last access takes one off. */
static uint32_t decayed(int64_t at_s, uint32_t counter, int64_t now_s)
{
	uint32_t period = kv_evict_cfg.lfu_decay_time;
	if (!period || now_s <= at_s)
		return counter;
	uint64_t n = (uint64_t)(now_s - at_s) / 60 / period;
	return n > counter ? 0 : counter - (uint32_t)n;
}

static uint64_t rnd_state;

static uint64_t rnd(void)
{
	if (!rnd_state)
		rnd_state = (uint64_t)wall_s() * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock() ^ 1;
	uint64_t x = rnd_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rnd_state = x;
}

/* Redis's LFULogIncr: the higher the counter, the less likely a step. */
static uint32_t log_incr(uint32_t counter)
{
	if (counter >= 255)
		return 255;
	double r = (double)(rnd() >> 11) / (double)(1ull << 53);
	double base = counter > KV_LFU_INIT ? (double)(counter - KV_LFU_INIT) : 0.0;
	return r < 1.0 / (base * kv_evict_cfg.lfu_log_factor + 1) ? counter + 1 : counter;
}

void kv_access_lfu_touch(uint32_t slot, int64_t now_ms)
{
	int64_t now_s = now_ms / 1000, at;
	uint32_t c;
	word_get(kv_access_tab[slot], now_s, &at, &c);
	kv_access_tab[slot] = word_make(now_s, log_incr(decayed(at, c, now_s)));
}

static uint32_t slot_of(const struct kv *kv, uint32_t db, const void *p, size_t len)
{
	return kv_access_slot(kv->dbmap[db], p, len);
}

uint64_t kv_access_idle(const struct kv *kv, uint32_t db, const void *p, size_t len)
{
	int64_t now_s = kv->now_ms / 1000, at;
	uint32_t c;
	word_get(kv_access_tab[slot_of(kv, db, p, len)], now_s, &at, &c);
	return now_s > at ? (uint64_t)(now_s - at) : 0;
}

uint32_t kv_access_freq(const struct kv *kv, uint32_t db, const void *p, size_t len)
{
	int64_t now_s = kv->now_ms / 1000, at;
	uint32_t c;
	word_get(kv_access_tab[slot_of(kv, db, p, len)], now_s, &at, &c);
	return decayed(at, c, now_s);
}

void kv_access_set_idle(const struct kv *kv, uint32_t db, const void *p, size_t len,
			uint64_t idle_s)
{
	int64_t now_s = kv->now_ms / 1000;
	uint32_t *w = &kv_access_tab[slot_of(kv, db, p, len)];
	if (idle_s > 0xFFFFFFu)
		idle_s = 0xFFFFFFu;
	*w = word_make(now_s - (int64_t)idle_s, *w ? *w & 0xFFu : KV_LFU_INIT);
}

void kv_access_set_freq(const struct kv *kv, uint32_t db, const void *p, size_t len,
			uint32_t freq)
{
	int64_t now_s = kv->now_ms / 1000;
	kv_access_tab[slot_of(kv, db, p, len)] = word_make(now_s, freq > 255 ? 255 : freq);
}

/* A user key's tree key t names the key's word: a short key's name is
 * t[1..tlen), a long key's first KV_LONG_PREFIX bytes are t[1..]. */
static uint32_t slot_of_tree(const uint8_t *t, uint32_t tlen, bool longkey)
{
	return kv_access_slot(t[0], t + 1, longkey ? KV_INLINE + 1u : tlen - 1u);
}

/* Under an lfu policy a key created starts at KV_LFU_INIT, as Redis's new
 * objects do (dispatch stamped it as an access before the command ran):
 * the core's change listener says which keys were created. Registered
 * only while an lfu policy is on: otherwise a write costs nothing here. */
static void created(void *arg, const struct kv_key *k, enum kv_touch what)
{
	const struct kv *kv = arg;
	if (what == KV_TOUCH_CREATED && k->tlen)
		kv_access_tab[slot_of_tree(k->t, k->tlen, k->longkey)] =
			word_make(kv->now_ms / 1000, KV_LFU_INIT);
}

static void lfu_listen(struct kv *kv)
{
	static bool listening;
	if (kv_access_lfu == listening)
		return;
	if (kv_access_lfu)
		listening = kv_touch_add(kv, created, kv) == 0;
	else {
		kv_touch_remove(kv, created, kv);
		listening = false;
	}
}

/* --------------------------------------------------------- the choice */

/* Higher: a better key to evict. */
static uint64_t score(const struct kv *kv, const uint8_t *t, uint32_t tlen, bool longkey)
{
	int64_t now_s = kv->now_ms / 1000, at;
	uint32_t c;
	word_get(kv_access_tab[slot_of_tree(t, tlen, longkey)], now_s, &at, &c);
	if (kv_access_lfu)
		return 255u - decayed(at, c, now_s);
	return now_s > at ? (uint64_t)(now_s - at) : 0;
}

int kv_evict_sample(struct kv *kv, const uint8_t *lo, uint32_t lolen, const uint8_t *hi,
		    uint32_t hilen, uint8_t *t, uint32_t *tlen, struct paste_btree_attr *a)
{
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, lo, lolen);
	bool placed = false;
	for (int i = 0; i < 4 && !placed; i++)
		placed = paste_btree_cursor_sample(&c, lo, lolen, hi, hilen, rnd()) == 0;
	if (!placed)
		paste_btree_cursor_init(&c, kv->tree, lo, lolen);   /* the range's first key */
	const uint8_t *k;
	uint32_t klen;
	if (paste_btree_cursor_next(&c, &k, &klen, NULL, NULL, NULL) != 1 ||
	    paste_btree_keycmp(k, klen, hi, hilen) >= 0)
		return 0;
	memcpy(t, k, klen);
	*tlen = klen;
	*a = *paste_btree_cursor_attr(&c);
	return 1;
}

/* Redis's pool: the best keys seen, worst first (score ascending), the
 * empty ones on the right. */
#define POOL 16
struct pool_entry {
	uint64_t score;
	uint32_t tlen;                  /* 0: empty */
	bool longkey;
	uint8_t t[PASTE_BTREE_MAX_KEY];
};
static struct pool_entry pool[POOL];

static void pool_clear(void)
{
	for (int i = 0; i < POOL; i++)
		pool[i].tlen = 0;
}

static void pool_add(uint64_t s, const uint8_t *t, uint32_t tlen, bool longkey)
{
	for (int i = 0; i < POOL; i++)
		if (pool[i].tlen == tlen && !memcmp(pool[i].t, t, tlen))
			return;                         /* there already (scored again at the pick) */
	int k = 0;
	while (k < POOL && pool[k].tlen && pool[k].score < s)
		k++;
	if (k == 0 && pool[POOL - 1].tlen)
		return;                                 /* worse than all of a full pool */
	if (k < POOL && !pool[k].tlen) {
		/* an empty slot: take it */
	} else if (!pool[POOL - 1].tlen) {
		memmove(&pool[k + 1], &pool[k], sizeof(pool[0]) * (size_t)(POOL - k - 1));
	} else {
		k--;                                    /* drop the worst, on the left */
		memmove(&pool[0], &pool[1], sizeof(pool[0]) * (size_t)k);
	}
	pool[k].score = s;
	pool[k].tlen = tlen;
	pool[k].longkey = longkey;
	memcpy(pool[k].t, t, tlen);
}

/* Where Redis picks by the scores of sampling time, the pool's keys are
 * scored again (a key read since it was sampled is no longer idle) and
 * put back in order: 16 hashes, against evicting a key just read. */
static void pool_rescore(const struct kv *kv)
{
	for (int i = 0; i < POOL && pool[i].tlen; i++) {
		struct pool_entry e = pool[i];
		e.score = score(kv, e.t, e.tlen, e.longkey);
		int j = i;
		for (; j > 0 && pool[j - 1].score > e.score; j--)
			pool[j] = pool[j - 1];
		pool[j] = e;
	}
}

/* Does the key of tree key t exist (with a deadline, for volatile-*)?
 * Its attributes in *a. */
static bool exists(struct kv *kv, const uint8_t *t, uint32_t tlen, struct paste_btree_attr *a)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	uint32_t db;
	return kv_key_user(t, tlen, kv, &db) &&
	       paste_btree_lookup(kv->tree, t, tlen, ext, &n, &len, a) == 0 &&
	       (allkeys() || a->has_word);
}

/* An expiry index entry e (one sampled, or the first): the key it names
 * when that key still has this deadline. */
static bool index_key(struct kv *kv, const uint8_t *e, uint32_t elen, const uint8_t **t,
		      uint32_t *tlen, struct paste_btree_attr *a)
{
	if (elen < 10 || e[0] != KV_PFX_EXPIRE)
		return false;
	*t = e + 9;
	*tlen = elen - 9;
	return exists(kv, *t, *tlen, a) && a->has_word && a->word == kv_be64(e + 1);
}

static void populate(struct kv *kv)
{
	uint8_t t[PASTE_BTREE_MAX_KEY];
	uint32_t tlen;
	struct paste_btree_attr a;
	if (allkeys()) {
		for (uint32_t db = 0; db < kv->ndbs; db++) {
			if (!kv_dbsize(kv, db))
				continue;
			uint8_t lo = kv->dbmap[db], hi = (uint8_t)(lo + 1);
			for (uint32_t i = 0; i < kv_evict_cfg.samples; i++)
				if (kv_evict_sample(kv, &lo, 1, &hi, 1, t, &tlen, &a) == 1)
					pool_add(score(kv, t, tlen, a.tag & KV_TAG_LONG), t, tlen,
						 a.tag & KV_TAG_LONG);
		}
		return;
	}
	uint8_t lo = KV_PFX_EXPIRE, hi = KV_PFX_EXPIRE + 1;
	for (uint32_t i = 0; i < kv_evict_cfg.samples; i++) {
		const uint8_t *kt;
		uint32_t ktlen;
		if (kv_evict_sample(kv, &lo, 1, &hi, 1, t, &tlen, &a) == 1 &&
		    index_key(kv, t, tlen, &kt, &ktlen, &a))
			pool_add(score(kv, kt, ktlen, a.tag & KV_TAG_LONG), kt, ktlen,
				 a.tag & KV_TAG_LONG);
	}
}

static bool any_candidate(struct kv *kv)
{
	if (!allkeys())
		return kv_prefix_used(kv, KV_PFX_EXPIRE);
	for (uint32_t db = 0; db < kv->ndbs; db++)
		if (kv_dbsize(kv, db))
			return true;
	return false;
}

/* volatile-ttl: the first index entry whose key has that deadline (a
 * stale one, left by a crash between two writes, is passed over). */
static int soonest(struct kv *kv, uint8_t *out, uint32_t *outlen)
{
	uint8_t first = KV_PFX_EXPIRE;
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, &first, 1);
	const uint8_t *e;
	uint32_t elen;
	for (int i = 0; i < 256 && paste_btree_cursor_next(&c, &e, &elen, NULL, NULL, NULL) == 1 &&
			e[0] == KV_PFX_EXPIRE; i++) {
		const uint8_t *t;
		uint32_t tlen;
		struct paste_btree_attr a;
		if (index_key(kv, e, elen, &t, &tlen, &a)) {
			memcpy(out, t, tlen);
			*outlen = tlen;
			return 1;
		}
	}
	return 0;
}

int kv_evict_choose(struct kv *kv, uint8_t *t, uint32_t *tlen)
{
	enum kv_evict_policy p = kv_evict_cfg.policy;
	struct paste_btree_attr a;
	if (p == KV_EVICT_NOEVICTION)
		return 0;
	if (p == KV_EVICT_VOLATILE_TTL)
		return soonest(kv, t, tlen);
	if (p == KV_EVICT_ALLKEYS_RANDOM) {
		static uint32_t next_db;
		for (uint32_t i = 0; i < kv->ndbs; i++) {
			uint32_t db = ++next_db % kv->ndbs;
			if (!kv_dbsize(kv, db))
				continue;
			uint8_t lo = kv->dbmap[db], hi = (uint8_t)(lo + 1);
			if (kv_evict_sample(kv, &lo, 1, &hi, 1, t, tlen, &a) == 1)
				return 1;
		}
		return 0;
	}
	if (p == KV_EVICT_VOLATILE_RANDOM) {
		uint8_t lo = KV_PFX_EXPIRE, hi = KV_PFX_EXPIRE + 1, e[PASTE_BTREE_MAX_KEY];
		uint32_t elen;
		for (int i = 0; i < 16; i++) {
			const uint8_t *kt;
			uint32_t ktlen;
			if (kv_evict_sample(kv, &lo, 1, &hi, 1, e, &elen, &a) != 1)
				return 0;
			if (index_key(kv, e, elen, &kt, &ktlen, &a)) {
				memcpy(t, kt, ktlen);
				*tlen = ktlen;
				return 1;
			}
		}
		return soonest(kv, t, tlen);     /* stale entries sampled: any that is not */
	}
	/* LRU, LFU: the pool, filled again until a key in it still exists. */
	for (int round = 0; round < 64; round++) {
		if (!any_candidate(kv))
			return 0;
		populate(kv);
		pool_rescore(kv);
		for (int k = POOL - 1; k >= 0; k--) {
			if (!pool[k].tlen)
				continue;
			uint32_t l = pool[k].tlen;
			pool[k].tlen = 0;
			if (exists(kv, pool[k].t, l, &a)) {
				memcpy(t, pool[k].t, l);
				*tlen = l;
				return 1;
			}
		}
	}
	return 0;
}

/* The key named by tree key t, as kv_remove takes it (a long key's name
 * read back into kv->namebuf). */
static int key_of(struct kv *kv, const uint8_t *t, uint32_t tlen, struct kv_key *k)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len, db;
	struct paste_btree_attr a;
	if (!kv_key_user(t, tlen, kv, &db) ||
	    paste_btree_lookup(kv->tree, t, tlen, ext, &n, &len, &a) != 0)
		return -ENOENT;
	*k = (struct kv_key){ .db = db, .longkey = (a.tag & KV_TAG_LONG) != 0, .tlen = tlen };
	memcpy(k->t, t, tlen);
	if (!k->longkey) {
		k->p = k->t + 1;
		k->len = tlen - 1;
		return 0;
	}
	uint32_t next, l;
	if (kv_long_span(kv, ext, n, &next, &l))
		return -EBADMSG;
	if (!kv->namebuf && !(kv->namebuf = malloc(KV_MAX_KEY)))
		return -ENOMEM;
	k->len = kv_long_read(kv, ext, next, l, kv->namebuf);
	k->p = kv->namebuf;
	return 0;
}

int kv_evict_key(struct kv *kv, const uint8_t *t, uint32_t tlen)
{
	struct kv_key k;
	int r = key_of(kv, t, tlen, &k);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	r = kv_remove(kv, &k);
	if (r == 1) {
		evicted++;
		kv_notify(KV_NOTIFY_EVICTED, "evicted", &k);
		kv_repl_evicted(&k);
	}
	return r;
}

/* ------------------------------------------------------- the bound */

enum { EVICT_OK, EVICT_RUNNING, EVICT_FAIL };

/* Redis's evictionTimeLimitUs: tenacity 0..10 is 0..500 us, then 15 %
 * more a step, 100 without limit. */
static uint64_t limit_ns(void)
{
	uint32_t t = kv_evict_cfg.tenacity;
	if (t <= 10)
		return 50000ull * t;
	if (t >= 100)
		return UINT64_MAX;
	double us = 500.0;
	for (uint32_t i = 10; i < t; i++)
		us *= 1.15;
	return (uint64_t)(us * 1000.0);
}

uint64_t kv_evict_clients;

static int perform(struct kv *kv)
{
	uint64_t max = kv_evict_cfg.maxmemory, used = kv_evict_used(kv) + kv_evict_clients;
	if (!max || used <= max) {
		pending = false;
		return EVICT_OK;
	}
	if (kv_evict_cfg.policy == KV_EVICT_NOEVICTION || kv->group_depth)
		return EVICT_FAIL;
	uint64_t t0 = paste_clock_ns(), lim = limit_ns();
	uint8_t t[PASTE_BTREE_MAX_KEY];
	uint32_t tlen;
	for (uint32_t n = 1; used > max; n++) {
		/* What the sweeper has yet to delete leaves first. */
		if (kv->sweep_due) {
			kv_sweep_step(kv, 4);
			uint64_t now = kv_evict_used(kv) + kv_evict_clients;
			if (now < used) {
				used = now;
				continue;
			}
		}
		if (kv_evict_choose(kv, t, &tlen) != 1 || kv_evict_key(kv, t, tlen) < 0) {
			pending = false;
			return EVICT_FAIL;
		}
		used = kv_evict_used(kv) + kv_evict_clients;
		if (n % 16 == 0 && used > max && paste_clock_ns() - t0 > lim) {
			pending = true;
			return EVICT_RUNNING;
		}
	}
	pending = false;
	return EVICT_OK;
}

bool kv_evict_over(struct kv *kv)
{
	return kv_evict_cfg.maxmemory && perform(kv) == EVICT_FAIL;
}

void kv_evict_pass(struct kv *kv)
{
	kv_access_init();                       /* (once; a streamed SET may come first) */
	lfu_listen(kv);
	if (!pending || kv->group_depth)
		return;
	kv_clock(kv);
	if (perform(kv) == EVICT_RUNNING)
		kv->next_due_ms = kv->now_ms;           /* the next pass at once */
}
