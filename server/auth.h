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

struct srv_auth {
	uint8_t *pass;          /* requirepass (any bytes, malloc'd); NULL: none */
	size_t len;
	bool protected_mode;    /* no password: only loopback peers are served */
};

/* Set the password to p[0..n) (n == 0: none). 0 or -ENOMEM (unchanged). */
int srv_auth_set(struct srv_auth *a, const void *p, size_t n);
/* Is p[0..n) the password? The time taken does not depend on where the
 * bytes differ (nor, beyond the length check, on the password). */
bool srv_auth_check(const struct srv_auth *a, const void *p, size_t n);
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
