/*
 * auth.c - the password and protected mode (auth.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "auth.h"

int srv_auth_set(struct srv_auth *a, const void *p, size_t n)
{
	uint8_t *copy = NULL;
	if (n) {
		if (!(copy = malloc(n)))
			return -ENOMEM;
		memcpy(copy, p, n);
	}
	free(a->pass);
	a->pass = copy;
	a->len = n;
	if (a->users && a->users->requirepass)
		a->users->requirepass(a->users->ctx, p, n);
	return 0;
}

bool srv_auth_check(const struct srv_auth *a, const void *p, size_t n)
{
	if (!a->pass || n != a->len)
		return false;
	const volatile uint8_t *x = a->pass;
	const uint8_t *y = p;
	uint8_t diff = 0;
	for (size_t i = 0; i < n; i++)
		diff |= (uint8_t)(x[i] ^ y[i]);
	return diff == 0;
}

bool srv_auth_start(const struct srv_auth *a, void **user)
{
	*user = NULL;
	if (!a)
		return true;
	if (a->users)
		return a->users->start(a->users->ctx, user);
	return !a->pass;
}

bool srv_auth_open(const struct srv_auth *a)
{
	if (a && a->users)
		return a->users->nopass(a->users->ctx);
	return !a || !a->pass;
}

bool srv_auth_login(const struct srv_auth *a, void *conn, const void *u, size_t ul,
		    const void *p, size_t pl, void **user)
{
	*user = NULL;
	if (a && a->users)
		return a->users->login(a->users->ctx, conn, u, ul, p, pl, user);
	if (conn && (ul != 7 || memcmp(u, "default", 7)))
		return false;                /* HTTP (conn NULL): any name */
	return !a || !a->pass || srv_auth_check(a, p, pl);
}

bool srv_addr_local(const struct sockaddr_storage *sa, uint32_t len)
{
	if (!len)
		return false;
	if (sa->ss_family == AF_UNIX)
		return true;
	if (sa->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

void srv_addr_format(const struct sockaddr_storage *sa, uint32_t len, char *out, size_t cap)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (len && sa->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		port = ntohs(s->sin_port);
	} else if (len && sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		port = ntohs(s->sin6_port);
	} else if (len && sa->ss_family == AF_UNIX) {
		snprintf(out, cap, "%s:0", ((const struct sockaddr_un *)sa)->sun_path);
		return;
	}
	snprintf(out, cap, "%s:%u", ip, port);
}

const char srv_denied_text[] =
	"-DENIED Redis is running in protected mode because protected mode is enabled and no "
	"password is set for the default user. In this mode connections are only accepted from "
	"the loopback interface. If you want to connect from external computers to Redis you may "
	"adopt one of the following solutions: 1) Just disable protected mode sending the command "
	"'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from "
	"the same host the server is running, however MAKE SURE Redis is not publicly accessible "
	"from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) "
	"Alternatively you can just disable the protected mode by editing the Redis configuration "
	"file, and setting the protected mode option to 'no', and then restarting the server. 3) "
	"If you started the server manually just for testing, restart it with the "
	"'--protected-mode no' option. 4) Setup a an authentication password for the default user. "
	"NOTE: You only need to do one of the above things in order for the server to start "
	"accepting connections from the outside.\r\n";
