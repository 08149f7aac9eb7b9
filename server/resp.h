/*
 * resp.h - the Redis protocol (RESP2, RESP3 after HELLO 3) over the server
 * layer, and the interface a command set implements (struct resp_service).
 *
 * The protocol frames commands with lib/resp_parse.c (where they landed; a
 * command split across reads is reassembled in a per-connection buffer;
 * pipelining; inline commands), answers what is its own (protocol errors
 * with a close, HELLO, QUIT, the failed store), and hands every other
 * command to the service:
 *
 *   whole command          -> command(x, argv, argc)    reply with resp_*()
 *   last bulk streams      -> stream_begin(x, argv, argc) then
 *                             stream_data(x, ev, off, n)... stream_end(x)
 *   connection end         -> closed(x)
 *   every event-loop pass  -> pass(w, state)     (struct service_base,
 *                                                  server.h, as HTTP's)
 *
 * Replies leave in order per connection and PASTE_SEND_DURABLE: each
 * waits for the batch's barrier, so no reply reveals a change (or the
 * absence of one) that is not durable yet, and an acknowledgement is sent
 * only for data that is.
 */
#ifndef PASTE_SERVER_RESP_H
#define PASTE_SERVER_RESP_H

#include <stddef.h>
#include <stdint.h>
#include "paste.h"
#include "auth.h"
#include "reassembly.h"
#include "server.h"

/* R_SMALL: a command whose last bulk the parser streams but which is
 * short (under stream_min: it was only split across reads): gathered
 * whole in the reassembly buffer and run as one command. */
enum resp_state { R_CMD = 0, R_STREAM, R_CRLF, R_SMALL, R_DEAD };

/* The protocol part of a connection (zeroed at accept). */
struct resp_conn {
	struct paste_resp_parser ps;
	uint8_t state;            /* enum resp_state */
	uint8_t proto;            /* 2, or 3 after HELLO 3 */
	bool refused;             /* the streaming bulk is read and dropped */
	uint64_t stream_left;     /* R_STREAM: bulk bytes still to come */
	struct reasm buf;         /* a command split across reads, put together */
	uint32_t cmd_bytes;       /* the running command's bytes (CLIENT LIST qbuf, as Redis's) */
	char *name;               /* CLIENT SETNAME (malloc'd), or NULL */
	uint64_t id;              /* CLIENT ID: unique for the process's life */
	uint64_t created_ms;      /* accepted (the server's clock) */
	uint32_t errors;          /* error replies sent (a call that adds one failed) */
	bool authed;              /* AUTH done, or no password when it connected */
	void *user;               /* its user (srv_users'; NULL without them) */
	bool peer_checked;        /* protected mode looked at its address */
	/* CLIENT REPLY: OFF sends nothing; SKIP drops the next command's
	 * replies (skip_next is set by SKIP itself, skip while that runs). */
	bool reply_off, skip, skip_next;
	bool no_evict;            /* CLIENT NO-EVICT: never closed by client eviction */
	/* Subscribed to a channel or pattern (the service keeps it): in
	 * RESP2 only the subscribe commands, PING, QUIT and RESET run
	 * (resp_pubsub_refused), as in Redis. */
	bool pubsub;
	/* A blocking command waits (resp_block): none of the connection's
	 * later commands run, what it sends is kept in buf, until
	 * resp_unblock; resume: queued to run them at the end of the pass.
	 * postponed: the running command itself is kept too (resp_postpone). */
	bool blocked, resume, postponed;
};

struct resp_ctx {
	struct worker *w;
	uint32_t conn;
	struct srv_conn *c;
	struct resp_conn *r;
	void *sc;                 /* the service's part of the slot */
	void *ss;                 /* the service's process-wide state */
	/* Where the arguments of a whole command point: into ev's bytes
	 * (ev != NULL: an argument inside ev->data[0..ev->len) may be held
	 * zero copy with paste_body_feed(ev, arg.p - ev->data, arg.len)), or
	 * into the reassembly buffer or the parser's scratch (ev == NULL:
	 * copy what must outlive the call). */
	const struct paste_event *ev;
	/* Non-NULL: replies are appended here instead of queued (EXEC
	 * gathers a transaction's replies and queues them once it
	 * committed, or answers otherwise if it could not). */
	struct resp_out *capture;
	/* When the last command this event ran ended (monotonic ns; 0: none
	 * yet): a service may start the next one's clock there instead of
	 * reading it again. */
	uint64_t clock_ns;
};

struct resp_service {
	struct service_base base;  /* name, per-connection state, open ... pass */
	/* argc >= 1; argv[0] is the command name. */
	void (*command)(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc);
	/* The command's last argument (argv[argc - 1], p == NULL) is a bulk of
	 * argv[argc - 1].len bytes that will arrive through stream_data.
	 * Return 0 to take them, or a negative errno to refuse: the bytes are
	 * then read and dropped, and once they are in, the reply is
	 * "-ERR <message>" with the message the service put in *why (or
	 * *why itself when it starts with '-': an error of its own code),
	 * or none when *why is NULL: the service answered already. */
	int (*stream_begin)(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc,
			    const char **why);
	void (*stream_data)(struct resp_ctx *x, const struct paste_event *ev, uint32_t off,
			    uint32_t len);
	/* The parser met a last bulk that does not end in this read (it is
	 * stream_min bytes or more, or split across reads): true streams it
	 * (stream_begin...), false gathers the whole command in the
	 * connection's buffer (up to max_command) and runs it through
	 * command(), a copy. A service that holds values where they land says
	 * true for the commands it streams. Without the hook, bulks of
	 * stream_min bytes or more stream and shorter ones are gathered. */
	bool (*stream_split)(const struct paste_resp_arg *argv, uint32_t argc);
	/* The bulk and its CRLF are in: reply. */
	void (*stream_end)(struct resp_ctx *x);
	/* Release what the connection holds (a half-streamed value).
	 * Idempotent: may be called more than once. */
	void (*closed)(struct resp_ctx *x);
	/* Optional look ahead: a command with this key (argv[1]) is coming
	 * next on this thread (paste_resp_peek_key's guess); start loading
	 * what running it will read. Changes nothing. ss, sc: as resp_ctx's
	 * (sc the connection's whose command it is). */
	void (*prefetch)(void *ss, void *sc, const char *key, size_t klen);
	/* Optional: the protocol ran one of its own commands (HELLO, QUIT),
	 * as command() would have been told of it (MONITOR shows it). */
	void (*own)(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc);
};

struct resp_config {
	/* limits (0: defaults); max_command also bounds what one connection's
	 * unfinished command holds in DRAM (a last bulk that streams into
	 * store buffers is the store's, not counted) */
	struct paste_resp_config parser;
	/* ... and max_pending what all of them hold together, in bytes of
	 * their reassembly buffers (0: no bound). A command whose growth
	 * passes it is refused and its connection closed. */
	uint64_t max_pending;
	const struct resp_service *service;
	const void *service_cfg;
	const char *server_name;           /* HELLO's "server" */
	const char *version;               /* HELLO's "version" */
	/* The process's password and protected mode (NULL: neither). A
	 * client that connects while a password is set must AUTH (or HELLO
	 * AUTH) before any command but the service's no_auth ones; until
	 * then a command is limited to 10 arguments of 16 KiB, as Redis
	 * limits it. */
	struct srv_auth *auth;
};

extern const struct server_proto resp_proto;

/* Replies (durable-gated, in order). Each returns 0, or -EIO when the
 * store failed (then the connection is answered the failure and closed;
 * stop replying). */
int resp_send(struct resp_ctx *x, const void *p, size_t n);
int resp_ok(struct resp_ctx *x);
int resp_simple(struct resp_ctx *x, const char *s);
/* "-<msg>\r\n": msg starts with the error code ("ERR ...", "WRONGTYPE ..."). */
int resp_error(struct resp_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int resp_int(struct resp_ctx *x, int64_t v);
int resp_bulk(struct resp_ctx *x, const void *p, size_t n);
int resp_null(struct resp_ctx *x);
int resp_array(struct resp_ctx *x, uint64_t n);
int resp_map(struct resp_ctx *x, uint64_t n);
int resp_set(struct resp_ctx *x, uint64_t n);
int resp_bool(struct resp_ctx *x, bool b);
/* A bulk whose data is queued by the caller (zero copy): "$n\r\n" now,
 * resp_bulk_end after the data. */
int resp_bulk_head(struct resp_ctx *x, uint64_t n);
int resp_bulk_end(struct resp_ctx *x);
/* A long reply built before it is queued (SCAN, KEYS, COMMAND): puts
 * append to o (an allocation failure is remembered, not reported);
 * resp_out_send queues head[0..hlen) and then the body, or answers
 * "-ERR out of memory" instead, and frees the body. */
struct resp_out {
	struct reasm b;
	bool oom;
};
void resp_out_put(struct resp_out *o, const void *p, size_t n);
void resp_out_bulk(struct resp_out *o, const void *p, size_t n);
int resp_out_send(struct resp_ctx *x, const char *head, int hlen, struct resp_out *o);
/* o's text as one string: a bulk, in RESP3 a verbatim one ("=" len
 * "txt:"), as INFO, CLIENT LIST and LATENCY DOCTOR answer. */
int resp_out_send_text(struct resp_ctx *x, struct resp_out *o);
/* "-ERR wrong number of arguments for '<cmd>' command" */
int resp_arity_error(struct resp_ctx *x, const struct paste_resp_arg *cmd);
/* The store failed: "-ERR store failed: <why>", then close (what a
 * resp_* call does itself when it meets the failure). */
void resp_reply_failed(struct resp_ctx *x);
/* Close after the replies queued so far (QUIT, a stream that cannot go on). */
void resp_close(struct resp_ctx *x);
/* Close now, what is still queued for it dropped (a pub/sub client past
 * its output limit). */
void resp_drop(struct resp_ctx *x);

/* Pub/sub: a message or a subscription's reply (Redis's "push", written
 * with paste_resp_put_push: '>' in RESP3, an array in RESP2), sent even
 * under CLIENT REPLY OFF or SKIP, as Redis sends them, and gathered by
 * EXEC like any reply. durable: behind the barrier, as replies are (a
 * published message, which reveals nothing stored, may leave at once).
 * 0, or -EIO (the connection is dead or the store failed). */
int resp_push_send(struct resp_ctx *x, const void *p, size_t n, bool durable);
/* A connection subscribed in RESP2 may run only the subscribe commands,
 * PING, QUIT and RESET: true after answering Redis's error for command
 * `name` (its full name, "client|id"), false when it may run. */
bool resp_pubsub_refused(struct resp_ctx *x, const char *name);

/* Blocking commands (BLPOP...): block says the command x runs sends no
 * reply now; the connection runs none of its later commands (what it
 * sends meanwhile is kept) and has no idle timeout until unblock, called
 * once its reply is queued; its kept commands then run at the end of the
 * pass (the protocol's pass hook). */
void resp_block(struct resp_ctx *x);
void resp_unblock(struct resp_ctx *x);
/* The command x runs does not run now (CLIENT PAUSE): no reply, and it
 * is kept, whole, ahead of what the connection sends next; the
 * connection is blocked, and resp_unblock runs the command again. */
void resp_postpone(struct resp_ctx *x);
/* The context of connection conn of worker w (a blocked client's, to
 * answer it later): false when the slot holds no open connection of this
 * protocol (the caller checks r->id is the one it knew). */
bool resp_ctx_of(struct resp_ctx *x, struct worker *w, uint32_t conn);

/* The unfinished commands of x's protocol (INFO): the bytes their
 * reassembly buffers hold together, the bound on that (max_pending, 0:
 * none), one command's bound (parser.max_command), and how many commands
 * were refused as too big for either. */
struct resp_pending {
	uint64_t bytes, limit, refused;
	uint32_t max_request;
};
void resp_pending_info(const struct resp_ctx *x, struct resp_pending *out);

/* The protocol's password and protected mode (resp_config.auth; NULL:
 * none configured). */
struct srv_auth *resp_auth(const struct resp_ctx *x);
/* x authenticated: the unauthenticated limits on its commands go. */
void resp_set_authed(struct resp_ctx *x, bool authed);

/* Error replies by their code (the first word: "ERR", "WRONGTYPE"), as
 * INFO errorstats lists them (in byte order), and their total. At most
 * RESP_ERRSTATS codes are told apart; later new ones count in the total
 * only. */
#define RESP_ERRSTATS 128u
struct resp_errstat {
	char code[32];
	uint64_t count;
};
const struct resp_errstat *resp_errstats(const struct resp_ctx *x, uint32_t *n, uint64_t *total);
void resp_errstats_reset(const struct resp_ctx *x);

/* AUTH user pass and HELLO AUTH: log x in as user with pass
 * (srv_auth_login): true and x is authenticated as that user; false
 * (nothing changed). */
bool resp_login(struct resp_ctx *x, const struct paste_resp_arg *user,
		const struct paste_resp_arg *pass);
/* CLIENT SETNAME's check and set (false: replied Redis's error). */
bool resp_set_name(struct resp_ctx *x, const struct paste_resp_arg *a);

/* Every connection of x's protocol that is not closing, x's own
 * included (CLIENT LIST, KILL): fn(o, arg) with o its context; false
 * stops the walk. */
void resp_each(const struct resp_ctx *x, bool (*fn)(struct resp_ctx *o, void *arg), void *arg);
/* o's peer and local addresses as "ip:port" ("?:0" when unknown) and
 * its descriptor. */
void resp_conn_addr(const struct resp_ctx *o, char *peer, char *local, size_t cap, int *fd);

#endif
