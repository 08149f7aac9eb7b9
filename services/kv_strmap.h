/*
 * kv_strmap.h - a chained hash table from a byte string (plus a small
 * tag: a database, a kind) to the caller's entry. The caller embeds a
 * struct kv_strmap_node in its entry and keeps the key's bytes; the map
 * holds the buckets only. Keyed SipHash (a random seed per map), doubling
 * at a load of 1. Pub/sub's channels, blocked keys and tracked keys use it.
 */
#ifndef PASTE_SERVICES_KV_STRMAP_H
#define PASTE_SERVICES_KV_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct kv_strmap_node {
	struct kv_strmap_node *next;    /* the bucket's chain */
	uint64_t h;
	const uint8_t *key;             /* the caller's bytes, while in the map */
	size_t len;
	uint32_t tag;
};

/* The caller's entry holding node x as its member m. */
#define KV_STRMAP_ENTRY(x, type, m) ((type *)(void *)((char *)(x) - offsetof(type, m)))

struct kv_strmap {
	struct kv_strmap_node **b;
	uint32_t nb, n;                 /* buckets (0 or a power of 2), nodes */
	uint64_t seed[2];
	int seeded;
};

/* The hash of (tag, p[0..len)) in m: find's and insert's. */
uint64_t kv_strmap_hash(struct kv_strmap *m, uint32_t tag, const void *p, size_t len);
/* The node of (tag, p[0..len)) with hash h, or NULL. */
struct kv_strmap_node *kv_strmap_find(const struct kv_strmap *m, uint32_t tag, const void *p,
				      size_t len, uint64_t h);
/* Room for one more node (doubling the buckets at a load of 1): 0 or
 * -ENOMEM. An insert follows it. */
int kv_strmap_reserve(struct kv_strmap *m);
/* Node x, absent so far, with its key, len, tag set; h its hash. After a
 * successful kv_strmap_reserve. */
void kv_strmap_insert(struct kv_strmap *m, struct kv_strmap_node *x, uint64_t h);
/* Node x (in m) leaves it: a walk of its bucket's chain. */
void kv_strmap_remove(struct kv_strmap *m, struct kv_strmap_node *x);
/* Iteration: the node after x (x NULL: the first from bucket *bucket
 * on), *bucket the caller's cursor (0 at the start); NULL at the end. x
 * must still be in m; to empty m, remove each node found with x NULL. */
struct kv_strmap_node *kv_strmap_next(const struct kv_strmap *m, uint32_t *bucket,
				      struct kv_strmap_node *x);
/* The buckets freed (the nodes are the caller's); m empty again. */
void kv_strmap_free(struct kv_strmap *m);

#endif
