/*
 * pload_request.c - pload's request file: read it, and prepare it for the
 * mode asked (--resp batches, --keyspace placeholders and per-connection
 * copies, --reconnect's Connection: close). Runs once, before the load.
 */
#include "pload_run.h"

char *pload_read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path, errno);
	struct stat st;
	if (fstat(fd, &st) < 0)
		die(path, errno);
	if (st.st_size <= 0 || st.st_size > (1 << 20)) {
		fprintf(stderr, "pload: %s: want a request of 1 byte to 1 MiB, got %lld bytes\n",
		        path, (long long)st.st_size);
		exit(1);
	}
	char *buf = malloc((size_t)st.st_size);
	if (!buf)
		die("malloc", ENOMEM);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n <= 0)
			die(path, n < 0 ? errno : EIO);
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return buf;
}

void die(const char *what, int err)
{
	fprintf(stderr, "pload: %s: %s\n", what, strerror(err));
	exit(1);
}

void pload_fail(const char *path, const char *why)
{
	fprintf(stderr, "pload: %s%s%s\n", path ? path : "", path ? ": " : "", why);
	exit(1);
}

/* --resp: the file's commands, DEPTH times back to back. */
void pload_resp_batch(struct load *L, const char *path)
{
	long cmds = pload_resp_commands(L->req, L->req_len);
	if (cmds < 1)
		pload_fail(path, "--resp needs one or more complete RESP commands (arrays of bulk "
		     "strings, e.g. *1\\r\\n$4\\r\\nPING\\r\\n), nothing after the last");
	if (L->req_len * L->pipeline > MAX_BATCH)
		pload_fail(path, "request x --pipeline is over 64 MiB");
	L->batch_cmds = (uint32_t)cmds * L->pipeline;
	if (L->pipeline == 1)
		return;
	char *batch = malloc(L->req_len * L->pipeline);
	if (!batch)
		die("malloc", ENOMEM);
	for (unsigned i = 0; i < L->pipeline; i++)
		memcpy(batch + i * L->req_len, L->req, L->req_len);
	free((void *)L->req);
	L->req = batch;
	L->req_len *= L->pipeline;
}

/* --keyspace: where the placeholders are (before any connection: a bad
 * file is a usage error, not a refused connect). */
void pload_find_placeholders(struct load *L, const char *path, unsigned long conns)
{
	size_t cap = 0;
	for (const char *p = L->req, *end = L->req + L->req_len;
	     (p = memmem(p, (size_t)(end - p), RAND_TAG, RAND_LEN)) != NULL; p += RAND_LEN) {
		if (L->nrand == cap) {
			cap = cap ? 2 * cap : 16;
			L->rand_off = realloc(L->rand_off, cap * sizeof *L->rand_off);
			if (!L->rand_off)
				die("realloc", ENOMEM);
		}
		L->rand_off[L->nrand++] = (size_t)(p - L->req);
	}
	if (!L->nrand)
		pload_fail(path, "--keyspace needs " RAND_TAG " in the request");
	if ((unsigned long long)L->req_len * conns > MAX_COPIES)
		pload_fail(path, "--keyspace: CONNS copies of this request are over 1 GiB");
}

/* --keyspace: a copy of the request per connection to write them in. */
void pload_copy_requests(struct load *L)
{
	for (unsigned i = 0; i < L->nconns; i++) {
		L->conns[i].req = malloc(L->req_len);
		if (!L->conns[i].req)
			die("malloc", ENOMEM);
		memcpy(L->conns[i].req, L->req, L->req_len);
	}
	L->rng = (paste_clock_ns() ^ ((uint64_t)getpid() << 32)) | 1;
}

/* --reconnect: the request must ask the server to close. A request without a
 * Connection header gets "Connection: close" before its blank line. */
void pload_request_close(struct load *L, const char *path)
{
	size_t head;
	int r = pload_request_connection(L->req, L->req_len, &head);
	if (r == -2 || r == -1) {
		fprintf(stderr, "pload: %s: %s\n", path, r == -2
		        ? "--reconnect needs a request file that starts with a complete head"
		        : "--reconnect needs Connection: close, the request asks for something else");
		exit(1);
	}
	if (r == 1)
		return;
	static const char hdr[] = "Connection: close\r\n";
	size_t n = sizeof hdr - 1;
	char *req = malloc(L->req_len + n);
	if (!req)
		die("malloc", ENOMEM);
	memcpy(req, L->req, head - 2);                  /* up to the blank line's CRLF */
	memcpy(req + head - 2, hdr, n);
	memcpy(req + head - 2 + n, L->req + head - 2, L->req_len - (head - 2));
	free((void *)L->req);
	L->req = req;
	L->req_len += n;
}
