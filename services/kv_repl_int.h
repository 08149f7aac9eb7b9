/*
 * kv_repl_int.h - the primary's replication state, shared by kv_repl.c
 * (the stream, propagation, WAIT, the pass) and cmd_repl.c (the
 * commands and INFO); internal to those files.
 */
#ifndef PASTE_SERVICES_KV_REPL_INT_H
#define PASTE_SERVICES_KV_REPL_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "kv_rdb.h"
#include "pkvs_resp.h"

#define MAX_REPLICAS 64u
#define PING_MS 10000u

struct peer {
	struct worker *w;
	uint32_t conn;
	uint64_t id;                    /* its CLIENT ID (a slot is reused) */
};

struct replica {
	struct peer c;
	uint64_t ack;                   /* the offset it acknowledged (REPLCONF ACK) */
	uint64_t ack_ms;
	unsigned port;                  /* REPLCONF listening-port */
	uint64_t synced;                /* the stream's offset at its snapshot */
	uint64_t soft_since;            /* over the soft output limit since (ms; 0: not) */
};

struct waiter {
	struct peer c;
	uint64_t target, deadline;      /* deadline: w->now_ms's clock, 0 none */
	int64_t num;
};

/* A key changed outside any command, sent before the next unit. */
struct loose {
	uint32_t db;
	size_t len;
	uint8_t *p;
};

struct kv_repl_state {
	char replid[41];
	uint64_t offset;                /* master_repl_offset: bytes of stream sent */
	int64_t sel_db;                 /* the stream's database (-1: none yet) */
	struct replica r[MAX_REPLICAS];
	uint32_t n;
	struct { uint64_t id; unsigned port; } ports[MAX_REPLICAS];   /* REPLCONF before SYNC */
	uint32_t ports_next;
	struct waiter *wt;
	uint32_t nw, capw;
	struct kv *kv;
	bool listening;
	uint32_t depth;
	uint64_t dirty;                 /* changes seen (not expiries) */
	bool also;                      /* the running command sent its effects (kv_repl_also) */
	uint8_t *last;                  /* the key last changed (a blocking pop's) */
	size_t lastlen, lastcap;
	struct kv_rdb_buf pend;         /* the unit's commands, RESP */
	size_t *poff;
	uint32_t *pdb;
	uint32_t np, capp;
	struct loose *loose;
	uint32_t nloose, caploose;
	uint64_t last_ping;
	uint64_t clock_ms;              /* the pass's w->now_ms, for the lag */
	/* The replica role. */
	bool replica;
};
extern struct kv_repl_state kv_rs;

/* A new replication id (a new history); the current one. */
void kv_repl_new_replid(void);
const char *kv_repl_replid(void);
/* A peer's connection as a context to reply on: false when it is gone. */
bool kv_repl_peer_ctx(const struct peer *c, struct resp_ctx *x);
/* The replica whose connection has CLIENT ID id, or NULL. */
struct replica *kv_repl_find(uint64_t id);
/* The change listener on (once a replica attaches or pkvs replicates);
 * off again when nothing needs it. */
void kv_repl_listen_on(struct kv *kv);
void kv_repl_listen_update(void);
/* WAIT's waiters done (enough acknowledged, or expired when now is given). */
void kv_repl_wait_check(uint64_t now);
/* Every replica connection closed. */
void kv_repl_drop_replicas(void);

#endif
