/*
 * pload_run.h - the state of one pload run (connections, counters, the
 * request), which pload.c's load loop drives and pload_request.c
 * prepares from the request file before any connection is made. Not a
 * library: bench/pload is one program; pload_request.c calls nothing in
 * pload.c.
 */
#ifndef PLOAD_RUN_H
#define PLOAD_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <paste.h>

#include "pload_http.h"
#include "pload_resp.h"

#define RESP_BUF 16384            /* per connection: a split response's head */
#define RING_BUF 4096             /* provided receive buffers */
#define HIST_US 1000000           /* latency histogram: 1 us buckets up to 1 s */
#define OP_SEND 0u
#define OP_RECV 1u
#define OP_CONNECT 2u             /* --reconnect: socket or connect failed */
#define OP_CLOSE 3u               /* --reconnect: closing the old socket failed */
#define CHAIN_SQES 5u             /* close, socket, connect, send, receive */
#define RAND_TAG "__rand_int__"   /* --keyspace: replaced per send, as redis-benchmark -r */
#define RAND_LEN 12u
#define MAX_BATCH (64u << 20)     /* --resp: request file x -P */
#define MAX_COPIES (1ull << 30)   /* --keyspace: per-connection copies in all */

struct conn {
	int fd;
	uint32_t gen;             /* bumped on reconnect: stale CQEs are ignored */
	bool alive;
	bool in_body;             /* head parsed, `remaining` body bytes to skip */
	bool answered;            /* --reconnect: response complete, waiting for EOF */
	int status;               /* of the response being received */
	uint32_t have;            /* head bytes buffered in buf (split heads only) */
	uint64_t remaining;
	uint64_t sent_ns;
	char *req;                /* --keyspace: this connection's copy of the request */
	uint32_t outstanding;     /* --resp: replies still due for the batch sent */
	struct pload_resp rp;     /* --resp: the reply being framed */
	char buf[RESP_BUF];
};

struct load {
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	char *bufs;
	unsigned nbufs, returned;
	struct conn *conns;
	unsigned nconns, alive;
	const char *req;
	size_t req_len;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	uint64_t now;             /* one clock read per pass serves every CQE in it */
	bool reconnect;           /* a new connection per request */
	bool resp;                /* Redis protocol: replies framed by pload_resp */
	unsigned pipeline;        /* --resp: copies of the file per send (-P) */
	uint32_t batch_cmds;      /* --resp: commands (replies due) per send */
	uint64_t keyspace;        /* --keyspace N: __rand_int__ below N; 0 off */
	size_t *rand_off;         /* offsets of __rand_int__ in the request */
	unsigned nrand;
	uint64_t rng;             /* xorshift64* state */
	uint64_t nulls;           /* --resp: $-1 and *-1 replies */
	uint64_t done, non2xx, err_connect, err_read, err_write, err_parse;
	uint64_t closed;          /* --reconnect: connections completed (response, then EOF) */
	uint64_t lat_sum_us, lat_max_us;
	uint32_t *hist;
};

/* pload_request.c: the request file, checked and prepared before any
 * connection is made (a bad file is a usage error, exit 1), and the
 * way out on a system error (exit 1). */
void die(const char *what, int err) __attribute__((noreturn));
char *pload_read_file(const char *path, size_t *len);
void pload_fail(const char *path, const char *why) __attribute__((noreturn));
void pload_resp_batch(struct load *L, const char *path);
void pload_find_placeholders(struct load *L, const char *path, unsigned long conns);
void pload_copy_requests(struct load *L);
void pload_request_close(struct load *L, const char *path);

#endif
