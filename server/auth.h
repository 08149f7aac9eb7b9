/*
 * auth.h - who may talk to a server: the password (Redis's requirepass)
 * and protected mode, one per process, shared by its front ends (pkvs:
 * the Redis port's AUTH and HELLO AUTH, the HTTP port's Basic and Bearer
 * credentials). It changes at run time (CONFIG SET requirepass) in the one
 * thread that serves both ports, so it needs no lock.
 */
#ifndef PASTE_SERVER_AUTH_H
#define PASTE_SERVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Named users, when a service keeps them (pkvs: ACL users,
 * services/kv_acl.c); without them the one user is "default", whose
 * password is requirepass. A user is the service's (opaque here). */
struct srv_users {
	void *ctx;
	/* The user a new connection starts as; true when it needs no AUTH
	 * (the default user is on and takes any password). */
	bool (*start)(void *ctx, void **user);
	/* The enabled user u[0..ul) whose password is p[0..pl): true and
	 * *user; false otherwise. conn: the RESP connection asking (struct
	 * resp_ctx *, for the service's log of refused logins), NULL for
	 * the HTTP port (which serves only users allowed everything). */
	bool (*login)(void *ctx, void *conn, const void *u, size_t ul, const void *p, size_t pl,
		      void **user);
	/* requirepass became p[0..n) (n == 0: none): the default user's
	 * passwords follow it, as Redis's do. */
	void (*requirepass)(void *ctx, const void *p, size_t n);
	/* The default user takes any password (nopass), on or off: what
	 * protected mode looks at, as Redis's does. */
	bool (*nopass)(void *ctx);	/* The default user is on, takes any password and may do anything:
	 * the HTTP port asks for no credentials (a flag the service keeps,
	 * read per request). */
	const bool *open;
};

struct srv_auth {
	uint8_t *pass;          /* requirepass (any bytes, malloc'd); NULL: none */
	size_t len;
	bool protected_mode;    /* no password: only loopback peers are served */
	const struct srv_users *users;   /* NULL: "default" and requirepass only */
};

/* Set the password to p[0..n) (n == 0: none). 0 or -ENOMEM (unchanged). */
int srv_auth_set(struct srv_auth *a, const void *p, size_t n);
/* Is p[0..n) the password? The time taken does not depend on where the
 * bytes differ (nor, beyond the length check, on the password). */
bool srv_auth_check(const struct srv_auth *a, const void *p, size_t n);
/* A new connection's user (NULL without srv_users) and whether it is
 * logged in already (no password needed). a NULL: true. */
bool srv_auth_start(const struct srv_auth *a, void **user);
/* Does the default user take any password (protected mode applies)? */
bool srv_auth_open(const struct srv_auth *a);
/* Log in as user u with password p (see srv_users.login); without
 * srv_users, u must be "default" (HTTP: any name) and p requirepass
 * (any, when none). */
bool srv_auth_login(const struct srv_auth *a, void *conn, const void *u, size_t ul,
		    const void *p, size_t pl, void **user);
/* A peer address that is a loopback one (127.0.0.0/8, ::1, v4-mapped
 * 127/8) or of a Unix socket: what protected mode lets in. len 0 (the
 * address is unknown): false. */
bool srv_addr_local(const struct sockaddr_storage *sa, uint32_t len);
/* "ip:port" as Redis writes a client's addr ("[::1]:port" is written
 * "::1:port", as Redis does). */
void srv_addr_format(const struct sockaddr_storage *sa, uint32_t len, char *out, size_t cap);

/* Redis's words for a refused non-loopback client in protected mode. */
extern const char srv_denied_text[];

#endif
