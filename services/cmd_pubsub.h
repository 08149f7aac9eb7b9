/*
 * cmd_pubsub.h - pub/sub (cmd_pubsub.c) as keyspace notifications
 * (kv_notify.c) use it: publish a message, and how many subscriptions
 * there are. The connection's side (its subscriptions end with it, RESET,
 * PING in subscribed mode) is declared in pkvs_resp.h.
 */
#ifndef PASTE_SERVICES_CMD_PUBSUB_H
#define PASTE_SERVICES_CMD_PUBSUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Send message msg[0..mlen) on channel chan[0..clen): to its subscribers
 * in the order they subscribed, then to those of every pattern it
 * matches; durable: behind the barrier, as a reply (a keyspace
 * notification reveals a change). Returns how many received it. */
uint64_t kv_pubsub_publish(const void *chan, size_t clen, const void *msg, size_t mlen,
			   bool durable);
/* Channel and pattern subscriptions of every connection (shard channels
 * apart): 0 when nobody would hear a notification. */
uint64_t kv_pubsub_listeners(void);
/* Channels, patterns and shard channels with a subscriber (INFO's
 * pubsub_channels, pubsub_patterns, pubsubshard_channels). */
void kv_pubsub_topics(uint64_t *channels, uint64_t *patterns, uint64_t *shard_channels);
/* Is fn true for any of x's subscriptions (channels, shard channels,
 * patterns: pattern set)? ACL closes a connection whose subscriptions its
 * user's new rules refuse. */
struct resp_ctx;
/* x's subscriptions of each kind, as CLIENT LIST's sub, psub and ssub. */
void kv_pubsub_counts(const struct resp_ctx *x, uint32_t *sub, uint32_t *psub, uint32_t *ssub);
bool kv_pubsub_any(struct resp_ctx *x, bool (*fn)(void *arg, const void *name, size_t len,
						 bool pattern), void *arg);

#endif
