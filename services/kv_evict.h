/*
 * kv_evict.h - pkvs's maxmemory (kv_evict.c): the bound on the dataset,
 * Redis's eviction policies, and the access times and frequencies OBJECT
 * IDLETIME and OBJECT FREQ answer and the LRU and LFU policies rank by.
 *
 * What maxmemory bounds. The store is log-structured: a deleted value's
 * buffers come back only once the delete is durable, a checkpoint has
 * let the log's records go and the cleaner has moved the neighbours, so
 * the buffers a store holds (INFO pkvs_held_bytes) fall long after a
 * delete, and a bound on them would evict every key before the first
 * came back. The bound is on the dataset instead, as the tree names it
 * now (kv_evict_used): the bytes of the values it holds (a replaced or
 * deleted one counts no more at once) and KV_EVICT_ENTRY_COST for each
 * of its entries (keys, members, expiry index entries). A delete lowers
 * it at once by what the key took, so an eviction loop sees its
 * progress. maxmemory adds the clients' buffers (kv_evict_clients), as
 * Redis's used_memory does; INFO's used_memory reports the sum.
 *
 * Access tracking. A table of 2^16 32-bit words in DRAM (256 KiB, small
 * enough to stay in the cache), indexed by a hash of the key's database
 * and name: the second of the last access in the top 24 bits, and
 * Redis's logarithmic access counter in the low 8 (only kept under an
 * lfu policy). Lossy: keys that share a word share its time and count,
 * so a key looks at most as idle (and at least as often read) as it is:
 * a collision can shield a cold key from eviction, never expose a hot
 * one, and OBJECT IDLETIME is a lower bound. Dispatch stamps the keys
 * of every command that reads or writes them (kv_access_cmd: a hash and
 * a store, one more branch on the command's flags), but TYPE, EXISTS,
 * the TTL family, OBJECT and MEMORY USAGE, which do not touch a key in
 * Redis either (LOOKUP_NOTOUCH). A word never written since start stands
 * for an access at start: after a restart every key is as idle as the
 * server is old. Cost on GET and SET: docs/results.md, "Access times".
 */
#ifndef PASTE_SERVICES_KV_EVICT_H
#define PASTE_SERVICES_KV_EVICT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kv.h"

/* Redis's maxmemory-policy values. */
enum kv_evict_policy {
	KV_EVICT_NOEVICTION = 0,
	KV_EVICT_ALLKEYS_LRU, KV_EVICT_ALLKEYS_LFU, KV_EVICT_ALLKEYS_RANDOM,
	KV_EVICT_VOLATILE_LRU, KV_EVICT_VOLATILE_LFU, KV_EVICT_VOLATILE_RANDOM,
	KV_EVICT_VOLATILE_TTL,
};

/* The settings (CONFIG SET and pkvs's flags: kv_evict_set). */
struct kv_evict_config {
	uint64_t maxmemory;             /* bytes; 0: no bound */
	enum kv_evict_policy policy;
	uint32_t samples;               /* maxmemory-samples (5) */
	uint32_t lfu_log_factor;        /* lfu-log-factor (10) */
	uint32_t lfu_decay_time;        /* lfu-decay-time, minutes (1) */
	uint32_t tenacity;              /* maxmemory-eviction-tenacity (10) */
};
extern struct kv_evict_config kv_evict_cfg;

/* A tree entry's cost beyond its value bytes: its leaf entry's fixed
 * part and one extent, its slot, a short key (MEMORY USAGE's 32 bytes
 * and a 16-byte key). */
#define KV_EVICT_ENTRY_COST 48u

/* The clients' memory maxmemory counts beside the dataset (Redis counts
 * clients' buffers in used_memory): their unsent replies and unfinished
 * requests, replicas' left out; set before each check (kv_over_maxmemory). */
extern uint64_t kv_evict_clients;

/* Redis's names of the policies; parse: -1 for none of them. */
const char *kv_evict_policy_name(enum kv_evict_policy p);
int kv_evict_policy_parse(const char *s, size_t len);

/* A setting of this file by name (maxmemory, maxmemory-policy,
 * maxmemory-samples, lfu-log-factor, lfu-decay-time,
 * maxmemory-eviction-tenacity): get writes its value into buf (NULL:
 * not one of them); set takes num (a number, as CONFIG's parser read it)
 * or the policy's word in v[0..len): 0, -1 with *why (a range's words),
 * 1 for another name. With kv non-NULL (CONFIG SET), a lower bound or a
 * new policy evicts at once, up to the time tenacity allows (the rest in
 * the next passes). */
const char *kv_evict_get(const char *name, char *buf, size_t cap);
/* The range check alone (CONFIG SET checks every value before it sets
 * any): 0 (in range, or not a number of this file), or -1 with *why. */
int kv_evict_check(const char *name, uint64_t num, const char **why);
int kv_evict_set(struct kv *kv, const char *name, uint64_t num, const char *v, size_t len,
		 const char **why);

/* The dataset as maxmemory bounds it (INFO used_memory). O(1). */
uint64_t kv_evict_used(const struct kv *kv);

/* Before a command that may add data (and where Redis checks): false
 * under maxmemory (or none set); else, outside a group, keys are evicted
 * by the policy until under it (up to the time tenacity allows: then
 * false too, and the next passes go on), and true when over it with
 * nothing (more) to evict: Redis's OOM refusal. Inside a group (EXEC, a
 * script) nothing is evicted: true while over. */
bool kv_evict_over(struct kv *kv);
/* Once per event-loop pass: evictions left over by a time limit or a
 * lowered bound go on (and make the next pass due at once). */
void kv_evict_pass(struct kv *kv);
/* INFO evicted_keys; CONFIG RESETSTAT. */
uint64_t kv_evict_count(void);
void kv_evict_reset_stats(void);

/* ---- the choice (kv_evict.c; unit-tested) ---- */

/* A user key of [lo, hi) picked at random by the tree's random descent
 * (a few seeds, then the range's first key): 1 with the key's tree key
 * in t[0..*tlen) (PASTE_BTREE_MAX_KEY bytes) and its attributes, 0 when
 * the range is empty. */
int kv_evict_sample(struct kv *kv, const uint8_t *lo, uint32_t lolen, const uint8_t *hi,
		    uint32_t hilen, uint8_t *t, uint32_t *tlen, struct paste_btree_attr *a);
/* The key the policy evicts next, as Redis's evict.c chooses it
 * (maxmemory-samples keys of each database, or of the keys with a
 * deadline, into a pool of the 16 best; random: one key; volatile-ttl:
 * the soonest deadline, which the expiry index gives exactly): 1 with
 * its tree key, 0 when there is none to evict. */
int kv_evict_choose(struct kv *kv, uint8_t *t, uint32_t *tlen);
/* Evict the key named by tree key t: a durable delete like DEL's (WATCH
 * touched), an "evicted" keyspace event, counted in evicted_keys. 1, 0
 * (gone, or expired: removed as expired), or a negative errno. */
int kv_evict_key(struct kv *kv, const uint8_t *t, uint32_t tlen);

/* ---- access times and frequencies ---- */

#define KV_LFU_INIT 5u                  /* Redis's LFU_INIT_VAL: a new key's counter */
extern uint32_t *kv_access_tab;         /* 1 << kv_access_bits words */
extern uint32_t kv_access_bits;
extern bool kv_access_lfu;              /* an lfu policy: keep the counters */

/* Allocate the table (once; without it every key shares one word). */
void kv_access_init(void);
/* Commands that do not touch their keys (Redis's LOOKUP_NOTOUCH). */
bool kv_access_notouch(const char *name);

/* The word of key p[0..len) of the database with physical prefix phys:
 * a multiply-xorshift hash of the name (a long key's: of the bytes its
 * tree key keeps, KV_LONG_PREFIX). */
static inline uint32_t kv_access_slot(uint8_t phys, const uint8_t *p, size_t len)
{
	if (len > KV_INLINE)
		len = KV_LONG_PREFIX;
	uint64_t h = ((uint64_t)phys << 32 | len) * 0x9E3779B97F4A7C15ull;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
		h ^= h >> 31;
	}
	uint64_t w = 0;
	for (size_t j = 0; i + j < len; j++)
		w |= (uint64_t)p[i + j] << (8 * j);
	h = (h ^ w) * 0x94D049BB133111EBull;
	h ^= h >> 29;
	return (uint32_t)(h >> (64 - kv_access_bits));
}

void kv_access_lfu_touch(uint32_t slot, int64_t now_ms);

/* An access to key p[0..len) of logical database db now. */
static inline void kv_access_touch(const struct kv *kv, uint32_t db, const void *p, size_t len)
{
	uint32_t s = kv_access_slot(kv->dbmap[db], p, len);
	if (kv_access_lfu)
		kv_access_lfu_touch(s, kv->now_ms);
	else
		kv_access_tab[s] = (uint32_t)(kv->now_ms / 1000) << 8 | KV_LFU_INIT;
}

/* The keys of a command at a[first], a[first + step], ... a[last] (last
 * negative: from the end), as its table row names them (dispatch). */
static inline void kv_access_cmd(const struct kv *kv, uint32_t db, const struct paste_resp_arg *a,
				 uint32_t n, int first, int last, int step)
{
	if (first == last) {                     /* one key: most commands */
		if (first > 0 && (uint32_t)first < n)
			kv_access_touch(kv, db, a[first].p, a[first].len);
		return;
	}
	int end = last < 0 ? (int)n + last : last;
	if (end >= (int)n)
		end = (int)n - 1;
	if (step < 1)
		step = 1;
	for (int i = first; i <= end; i += step)
		kv_access_touch(kv, db, a[i].p, a[i].len);
}

/* Seconds since key p's last access; its counter decayed to now (Redis's
 * LFUDecrAndReturn). Neither changes the word. */
uint64_t kv_access_idle(const struct kv *kv, uint32_t db, const void *p, size_t len);
uint32_t kv_access_freq(const struct kv *kv, uint32_t db, const void *p, size_t len);
/* RESTORE ... IDLETIME s / FREQ f: the key's word says so. */
void kv_access_set_idle(const struct kv *kv, uint32_t db, const void *p, size_t len,
			uint64_t idle_s);
void kv_access_set_freq(const struct kv *kv, uint32_t db, const void *p, size_t len,
			uint32_t freq);

#endif
