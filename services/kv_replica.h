/*
 * kv_replica.h - the replica role's link to its primary (kv_replica.c),
 * shared with kv_repl.c (REPLICAOF, ROLE, INFO, the pass). Internal to
 * those two files.
 */
#ifndef PASTE_KV_REPLICA_H
#define PASTE_KV_REPLICA_H

#include <stdbool.h>
#include <stdint.h>

#include "pkvs_resp.h"

#define LINK_POLL_MS 10u
#define LINK_RETRY_MS 1000u
enum { L_DOWN = 0, L_CONNECTING, L_HANDSHAKE, L_RDB, L_UP };

struct kv_link {
	char *mhost;                    /* the primary (REPLICAOF host port) */
	unsigned mport;
	int fd;
	int st;
	uint8_t *in;
	size_t len, cap;
	uint64_t rdb_len;
	bool rdb_len_known;
	uint64_t off;                   /* the stream's offset applied */
	char mreplid[41];               /* the primary's replication id */
	uint64_t acked_off;             /* applied and durable: what ACK says */
	uint64_t pend_off, pend_epoch;  /* applied, durable once that epoch is */
	bool pend_set;
	bool getack;                    /* the primary asked (REPLCONF GETACK) */
	uint32_t replies;               /* the handshake's replies so far */
	uint32_t want;                  /* ... and how many it has (AUTH first: one more) */
	uint64_t next_try, last_ack, last_io, down_since;
	struct worker *w;
	void *ss;
	struct srv_conn c;              /* a RESP connection's, for the error counts */
	struct resp_conn r;
	struct kv_resp_conn kc;
	struct resp_ctx x;
};
extern struct kv_link kv_link;

/* The link closed (now 0: at once); a retry after LINK_RETRY_MS. */
void kv_link_close(uint64_t now);
/* The pass's turn: connect, read, load, apply, acknowledge. */
void kv_link_step(struct kv *kv, uint64_t now);
/* REPLICAOF host port: the link (re)started as x's server. */
void kv_link_start(struct resp_ctx *x);

#endif
