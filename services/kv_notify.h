/*
 * kv_notify.h - keyspace notifications (Redis's notify-keyspace-events),
 * kv_notify.c. A command that changed a key says so where it changed it,
 * as Redis's commands do:
 *
 *     if (r == 0)
 *             kv_notify(KV_NOTIFY_STRING, "set", &k);
 *
 * and the subscribers of __keyspace@<db>__:<key> get the event's name,
 * those of __keyevent@<db>__:<event> the key's. Events are named and
 * emitted as Redis 7.0.15 emits them per command (which event, after
 * which outcome, in which order; tests/e2e/test_pkvs_notify.py compares
 * them with redis-server's).
 * The events the core knows (a key expired, a key created: "expired",
 * "new") come from its change listener (kv_touch_add), not from commands.
 *
 * Cost: one branch per call while nobody subscribes to anything or no
 * class is on (the default); otherwise the channel names are written and
 * published (cmd_pubsub.h), durable like a reply.
 */
#ifndef PASTE_SERVICES_KV_NOTIFY_H
#define PASTE_SERVICES_KV_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* Redis's classes (server.h's NOTIFY_*), by their letters. */
enum {
	KV_NOTIFY_KEYSPACE = 1u << 0,   /* K */
	KV_NOTIFY_KEYEVENT = 1u << 1,   /* E */
	KV_NOTIFY_GENERIC = 1u << 2,    /* g: DEL, EXPIRE, RENAME, ... */
	KV_NOTIFY_STRING = 1u << 3,     /* $ */
	KV_NOTIFY_LIST = 1u << 4,       /* l */
	KV_NOTIFY_SET = 1u << 5,        /* s */
	KV_NOTIFY_HASH = 1u << 6,       /* h */
	KV_NOTIFY_ZSET = 1u << 7,       /* z */
	KV_NOTIFY_EXPIRED = 1u << 8,    /* x: the core's */
	KV_NOTIFY_EVICTED = 1u << 9,    /* e: maxmemory evicted a key */
	KV_NOTIFY_STREAM = 1u << 10,    /* t */
	KV_NOTIFY_KEY_MISS = 1u << 11,  /* m */
	KV_NOTIFY_MODULE = 1u << 13,    /* d: pkvs has no modules */
	KV_NOTIFY_NEW = 1u << 14,       /* n: the core's */
};

/* The classes whose events are published now: notify-keyspace-events's,
 * or 0 while it names neither K nor E or no connection subscribes to a
 * channel or pattern. */
extern uint32_t kv_notify_on;

void kv_notify_emit(uint32_t cls, const char *event, const struct kv_key *k);
/* Key k (a key of the database the command runs in: kv_arg_key's) had
 * event `event` of class cls. */
static inline void kv_notify(uint32_t cls, const char *event, const struct kv_key *k)
{
	if (kv_notify_on & cls)
		kv_notify_emit(cls, event, k);
}

/* notify-keyspace-events: classes as Redis reads them ("KEA", "Kgx$"),
 * their flags, or -1 for a letter Redis does not know; the flags in
 * Redis's canonical form ("AKE": at least 16 bytes). */
int kv_notify_parse(const char *p, size_t len);
void kv_notify_format(uint32_t flags, char *out);
/* The setting (CONFIG SET, --notify-keyspace-events): kv NULL before the
 * store is open (applied at the first subscription). */
void kv_notify_set(struct kv *kv, uint32_t flags);
uint32_t kv_notify_get(void);
/* The subscriptions changed (cmd_pubsub.c): publish, or stop. */
void kv_notify_sync(struct kv *kv);

#endif
