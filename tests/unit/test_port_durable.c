/*
 * test_port_durable.c - the port's durability gate and the port over a
 * failed store, every engine, emulated (/dev/shm) and fsync (/var/tmp)
 * durability; the epoll engines' barriers per batch, also in a child
 * where io_uring is refused. A durable reply leaves only once what was flushed before it
 * is durable (the fence, or the group commit in flight). After a failure
 * no durable reply that an earlier successful barrier did not cover ever
 * reaches its client (the
 * connection closes, zero bytes), a reply a barrier did cover still goes
 * out whole, durable sends are refused with -EIO, non-durable replies (an
 * error status) still flow, the loop keeps serving, a group commit that
 * completes after the failure acknowledges nothing, and a store file
 * removed under the port fails the store within about a second.
 * Each case opens a store of its own: the failed state lasts until close.
 * Without io_uring the epoll half runs and the exit status is 77 (skip).
 */
#include <dirent.h>
#include <sys/wait.h>

#include "nouring.h"
#include "port_fixture.h"

struct fix {
	struct pf_store s;            /* its own store, removed at close */
	struct paste_store *st;       /* s.st */
	struct paste_persist *p;
	struct paste_port *pt;
	uint32_t nfree;               /* free buffers before the port opened */
	bool closed[64];              /* CLOSED seen, per slot (epoll: slot = fd) */
	uint32_t data_slot[128];      /* slot of the last DATA starting with byte b */
	int accepts;
};

static int fix_open(struct fix *f, enum paste_engine e, enum paste_durability mode, int busy_poll)
{
	memset(f, 0, sizeof(*f));
	if (pf_store_open(&f->s, mode == PASTE_DUR_FSYNC ? "/var/tmp" : "/dev/shm", "pfail", 8 << 20))
		return -1;
	f->st = f->s.st;
	struct paste_persist_config pc = { .mode = mode };
	struct paste_error err = { 0 };
	if (paste_persist_open(&f->p, f->st, &pc, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	paste_store_start(f->st);
	f->nfree = paste_store_nfree(f->st);
	struct paste_port_config c = { .engine = e, .ring_bufs = 16, .max_conns = 64, .store = f->st,
				       .persist = f->p, .busy_poll = busy_poll };
	if (!(f->pt = pf_port_open(&c)))
		return -1;
	memset(f->data_slot, 0xff, sizeof(f->data_slot));
	return 0;
}

static void fix_close(struct fix *f)
{
	paste_port_close(f->pt);
	CHECK_EQ(paste_store_nfree(f->st), f->nfree);   /* nothing leaked */
	paste_persist_close(f->p);
	pf_store_close(&f->s);
}

static int fix_poll(struct fix *f, int ms)
{
	struct paste_event *evs;
	int n = paste_port_poll(f->pt, &evs, ms);
	for (int i = 0; i < n; i++) {
		if (evs[i].type == PASTE_EV_ACCEPT)
			f->accepts++;
		else if (evs[i].type == PASTE_EV_CLOSED && evs[i].conn < 64)
			f->closed[evs[i].conn] = true;
		else if (evs[i].type == PASTE_EV_DATA && evs[i].len)
			f->data_slot[evs[i].data[0] & 127] = evs[i].conn;
	}
	return n;
}

/* Connect and send one byte b; returns the fd, the slot in *slot. */
static int connect_send(struct fix *f, char b, uint32_t *slot)
{
	int fd = pf_client(paste_port_local_port(f->pt));
	if (fd < 0 || write(fd, &b, 1) != 1)
		return -1;
	for (int i = 0; i < 200 && f->data_slot[(int)b] == UINT32_MAX; i++)
		fix_poll(f, 10);
	*slot = f->data_slot[(int)b];
	return *slot == UINT32_MAX ? -1 : fd;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, ms) == 1;
}

/* read(2) that never blocks the test: -2 when nothing came within ms. */
static ssize_t read_within(int fd, char *buf, size_t n, int ms)
{
	return readable(fd, ms) ? read(fd, buf, n) : -2;
}

/* Something flushed and not yet durable, as a real app's request data. */
static void flush_some(struct fix *f, size_t bytes)
{
	uint32_t idx[512];
	uint32_t size = paste_store_geom(f->st)->buf_size, n = (uint32_t)((bytes + size - 1) / size);
	if (n > 512)
		n = 512;
	uint32_t got = paste_store_alloc(f->st, idx, n);
	for (uint32_t i = 0; i < got; i++) {
		memset(paste_store_buf(f->st, idx[i]), (int)i, size);
		paste_persist_flush(f->p, paste_store_buf(f->st, idx[i]), size);
		paste_store_unref(f->st, idx[i], false);
	}
}

#define BIG (16u << 20)

static void test_fail_gate(enum paste_engine e, enum paste_durability mode)
{
	struct fix f;
	if (fix_open(&f, e, mode, 0)) {
		CHECK(0);
		return;
	}
	uint32_t sa, sb, sc, sd;
	int ca = connect_send(&f, 'a', &sa), cb = connect_send(&f, 'b', &sb), cc = connect_send(&f, 'c', &sc);
	CHECK(ca >= 0 && cb >= 0 && cc >= 0);
	/* C: a large durable reply; once its first bytes arrive a barrier
	 * covered it, and the rest is still to be sent when the store fails */
	char *big = malloc(BIG), *in = malloc(BIG);
	for (size_t i = 0; i < BIG; i++)
		big[i] = (char)(i * 13);
	flush_some(&f, 4096);
	CHECK_EQ(paste_port_send(f.pt, sc, big, BIG, PASTE_SEND_DURABLE), 0);
	size_t got = 0;
	for (int i = 0; i < 200 && !readable(cc, 0); i++)
		fix_poll(&f, 10);
	ssize_t r = read(cc, in, 65536);
	got = r > 0 ? (size_t)r : 0;
	CHECK(got > 0 && got < BIG);
	/* A: a durable reply no barrier covered yet; nothing is flushed
	 * after C's, so the barrier has nothing to fence: only the failed
	 * state keeps the gate shut (test_sync_fails has a fence failing) */
	CHECK_EQ(paste_port_send(f.pt, sa, "201 Created", 11, PASTE_SEND_DURABLE), 0);
	uint64_t durable = paste_persist_durable(f.p);
	paste_store_fail(f.st, -EIO, "test: injected failure");
	/* B: durable sends refused, an error reply still flows */
	uint32_t idx;
	CHECK_EQ(paste_store_alloc(f.st, &idx, 1), 1);
	CHECK_EQ(paste_port_send(f.pt, sb, "200 OK", 6, PASTE_SEND_DURABLE), -EIO);
	CHECK_EQ(paste_port_send_store(f.pt, sb, idx, 0, 16, PASTE_SEND_DURABLE), -EIO);
	paste_store_unref(f.st, idx, false);
	CHECK_EQ(paste_port_send(f.pt, sb, "503", 3, 0), 0);
	for (int i = 0; i < 20000 && got < BIG; i++) {
		fix_poll(&f, 1);
		while (got < BIG && readable(cc, 0)) {
			r = read(cc, in + got, BIG - got);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
	}
	CHECK_EQ(got, BIG);                 /* covered before the failure: sent whole */
	CHECK(!memcmp(in, big, BIG));
	for (int i = 0; i < 20 && !f.closed[sa]; i++)
		fix_poll(&f, 10);
	CHECK(f.closed[sa]);
	CHECK(!f.closed[sb] && !f.closed[sc]);
	fix_poll(&f, 10);                   /* releases A's socket */
	char buf[16];
	CHECK_EQ(read_within(ca, buf, sizeof(buf), 1000), 0);   /* closed, not one byte of the 201 */
	CHECK_EQ(read_within(cb, buf, sizeof(buf), 1000), 3);
	CHECK(!memcmp(buf, "503", 3));
	/* the loop keeps serving; durability never moves again */
	int cd = connect_send(&f, 'd', &sd);
	CHECK(cd >= 0);
	CHECK_EQ(paste_port_send(f.pt, sd, "503", 3, 0), 0);
	fix_poll(&f, 10);
	fix_poll(&f, 10);
	CHECK_EQ(read_within(cd, buf, 3, 1000), 3);
	CHECK_EQ(paste_persist_durable(f.p), durable);
	const char *why = NULL;
	CHECK_EQ(paste_store_failed(f.st, &why), -EIO);
	close(ca);
	close(cb);
	close(cc);
	close(cd);
	for (int i = 0; i < 5; i++)
		fix_poll(&f, 10);
	struct paste_port_stats ps;
	paste_port_stats(f.pt, &ps);
	CHECK_EQ(ps.conns, 0);
	CHECK_EQ(ps.accepts, ps.closes);
	free(big);
	free(in);
	fix_close(&f);
}

/* uring, fsync: the store fails while the group commit covering A's
 * reply is in flight; its completion must acknowledge nothing, A closes
 * with zero bytes, and the loop goes on. busy_poll: the pass that submits
 * the fdatasync does not wait for it. */
static void test_fail_commit_inflight(void)
{
	struct fix f;
	if (fix_open(&f, PASTE_ENGINE_URING, PASTE_DUR_FSYNC, 1)) {
		CHECK(0);
		return;
	}
	uint32_t sa;
	int ca = connect_send(&f, 'a', &sa);
	CHECK(ca >= 0);
	struct paste_port_stats ps;
	bool inflight = false;
	char buf[16];
	for (int attempt = 0; attempt < 5 && !inflight; attempt++) {
		flush_some(&f, 1 << 20);    /* a sync with some work to do */
		CHECK_EQ(paste_port_send(f.pt, sa, "201", 3, PASTE_SEND_DURABLE), 0);
		fix_poll(&f, 0);              /* barrier: submits the fdatasync */
		paste_port_stats(f.pt, &ps);
		inflight = ps.commits == (uint64_t)attempt;
		if (!inflight) {              /* the sync won the race: take the reply, retry */
			for (int i = 0; i < 100 && !readable(ca, 0); i++)
				fix_poll(&f, 0);
			CHECK_EQ(read_within(ca, buf, 3, 1000), 3);
		}
	}
	CHECK(inflight);
	uint64_t commits = ps.commits;
	paste_store_fail(f.st, -EIO, "test: failed while a commit was in flight");
	int errors = 0;
	for (int i = 0; i < 2000 && !f.closed[sa]; i++) {
		errors += fix_poll(&f, 0) < 0;   /* keeps returning, no error */
		usleep(100);
	}
	CHECK_EQ(errors, 0);
	CHECK(f.closed[sa]);
	paste_port_stats(f.pt, &ps);
	CHECK_EQ(ps.commits, commits);
	fix_poll(&f, 0);
	CHECK_EQ(read_within(ca, buf, sizeof(buf), 1000), 0);
	close(ca);
	fix_close(&f);
}

/* A durable reply leaves only once what was flushed before it is durable:
 * when the client can read it, the persist object has published the
 * epoch of that flush. uring, fsync: the group commit runs
 * asynchronously, so the reply must not be readable when the pass that
 * reaped the commit returns (the next pass sends it), nor before. */
static void test_durable_gate(enum paste_engine e, enum paste_durability mode)
{
	struct fix f;
	if (fix_open(&f, e, mode, 0)) {
		CHECK(0);
		return;
	}
	uint32_t sa;
	int ca = connect_send(&f, 'a', &sa);
	CHECK(ca >= 0);
	uint64_t epoch = paste_persist_epoch(f.p);
	flush_some(&f, 4096);
	CHECK_EQ(paste_port_send(f.pt, sa, "ok", 2, PASTE_SEND_DURABLE), 0);
	uint64_t commits = 0;
	bool got = false;
	for (int i = 0; i < 200 && !got; i++) {
		fix_poll(&f, 10);
		struct paste_port_stats ps;
		paste_port_stats(f.pt, &ps);
		got = readable(ca, 0);
		if (got)
			CHECK(paste_persist_durable(f.p) >= epoch);
		if (e == PASTE_ENGINE_URING && mode == PASTE_DUR_FSYNC) {
			if (got)
				CHECK(commits >= 1);   /* reaped in an earlier pass */
			commits = ps.commits;
		}
	}
	CHECK(got);
	char buf[4];
	CHECK_EQ(read_within(ca, buf, 2, 1000), 2);
	CHECK(!memcmp(buf, "ok", 2));
	struct paste_port_stats ps;
	paste_port_stats(f.pt, &ps);
	CHECK(ps.fences + ps.commits >= 1);
	CHECK(!paste_persist_pending(f.p));
	close(ca);
	fix_poll(&f, 10);
	fix_close(&f);
}

/* uring, fsync: a commit begun outside the port took everything flushed
 * (the port's begin_commit then finds nothing pending): the reply waits
 * until that commit ends, it is not "nothing to commit". */
static void test_foreign_commit(void)
{
	struct fix f;
	if (fix_open(&f, PASTE_ENGINE_URING, PASTE_DUR_FSYNC, 0)) {
		CHECK(0);
		return;
	}
	uint32_t sa;
	int ca = connect_send(&f, 'a', &sa);
	CHECK(ca >= 0);
	flush_some(&f, 4096);
	CHECK_EQ(paste_port_send(f.pt, sa, "ok", 2, PASTE_SEND_DURABLE), 0);
	uint64_t ticket;
	int fd = paste_persist_begin_commit(f.p, &ticket);
	CHECK(fd >= 0);
	bool early = false;
	for (int i = 0; i < 10; i++) {
		fix_poll(&f, 5);
		early |= readable(ca, 0);
	}
	CHECK(!early);
	CHECK_EQ(paste_persist_end_commit(f.p, ticket, commit_wait(fd)), 0);
	for (int i = 0; i < 100 && !readable(ca, 0); i++)
		fix_poll(&f, 5);
	char buf[4];
	CHECK_EQ(read_within(ca, buf, 2, 1000), 2);
	close(ca);
	fix_poll(&f, 10);
	fix_close(&f);
}

/* The persist object's own descriptor for fdatasync (fsync mode): the
 * one open on the store's path that is not the store's mapping fd. */
static int sync_fd(struct fix *f)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int found = -1;
	while (d && (de = readdir(d))) {
		char link[64], target[256];
		int fd = atoi(de->d_name);
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0 || fd == paste_store_fd(f->st))
			continue;
		target[n] = 0;
		if (!strcmp(target, f->s.path))
			found = fd;
	}
	if (d)
		closedir(d);
	return found;
}

/* A real failing sync in fsync mode, no fault injection: the persist
 * object's descriptor is swapped for a pipe's read end, to which a direct
 * write fails with EBADF (and an fdatasync, in the page-cache way, with
 * EINVAL). epoll: the fence before the write fails; uring: the group
 * commit completes with the error. Either way the store fails there, the
 * durable reply is never sent and its connection closes. */
static void test_sync_fails(enum paste_engine e)
{
	struct fix f;
	if (fix_open(&f, e, PASTE_DUR_FSYNC, 0)) {
		CHECK(0);
		return;
	}
	uint32_t sa;
	int ca = connect_send(&f, 'a', &sa);
	CHECK(ca >= 0);
	flush_some(&f, 4096);
	CHECK_EQ(paste_port_send(f.pt, sa, "201", 3, PASTE_SEND_DURABLE), 0);
	int pfd = sync_fd(&f), pp[2];
	CHECK(pfd >= 0 && pipe(pp) == 0);
	if (pfd < 0)
		return;
	dup2(pp[0], pfd);
	int errors = 0;
	for (int i = 0; i < 200 && !f.closed[sa]; i++)
		errors += fix_poll(&f, 10) < 0;
	CHECK_EQ(errors, 0);
	CHECK(f.closed[sa]);
	int failed = paste_store_failed(f.st, NULL);
	CHECK(failed == (paste_persist_flush_insn(f.p)[0] == 'd' ? -EBADF : -EINVAL));
	fix_poll(&f, 10);
	char buf[8];
	CHECK_EQ(read_within(ca, buf, sizeof(buf), 1000), 0);
	close(ca);
	close(pp[0]);
	close(pp[1]);
	fix_poll(&f, 10);
	fix_close(&f);
}

/* The store file removed while the port runs: the port's per-pass watch
 * fails the store within about a second. */
static void test_store_removed(enum paste_engine e)
{
	struct fix f;
	if (fix_open(&f, e, PASTE_DUR_EMULATED, 0)) {
		CHECK(0);
		return;
	}
	uint32_t sa;
	int ca = connect_send(&f, 'a', &sa);
	CHECK(ca >= 0);
	fix_poll(&f, 0);
	unlink(f.s.path);
	for (int i = 0; i < 300 && !paste_store_failed(f.st, NULL); i++)
		fix_poll(&f, 10);
	CHECK_EQ(paste_store_failed(f.st, NULL), -ENOENT);
	CHECK_EQ(paste_port_send(f.pt, sa, "201", 3, PASTE_SEND_DURABLE), -EIO);
	close(ca);
	fix_poll(&f, 10);
	fix_close(&f);
}

/* The epoll engines' barriers. epoll, the baseline, hands over one
 * connection per poll and fences before each write: NB replies, NB
 * barriers. epoll-batch reads every ready connection in one poll, and the
 * first write's fence covers what the whole batch flushed: NB replies, one
 * barrier. Either way a reply leaves only once its flush is durable. */
#define NB 8
static void test_batch_barrier(enum paste_engine e, enum paste_durability mode)
{
	struct fix f;
	if (fix_open(&f, e, mode, 0)) {
		CHECK(0);
		return;
	}
	int fd[NB];
	for (int i = 0; i < NB; i++)
		fd[i] = pf_client(paste_port_local_port(f.pt));
	for (int i = 0; i < 200 && f.accepts < NB; i++)
		fix_poll(&f, 10);
	CHECK_EQ(f.accepts, NB);
	for (int i = 0; i < NB; i++)
		CHECK_EQ(write(fd[i], "q", 1), 1);
	usleep(20000);                       /* every request waits in its socket */
	struct paste_port_stats before, after;
	paste_port_stats(f.pt, &before);
	uint64_t epoch = paste_persist_epoch(f.p);
	int datas = 0;
	for (int polls = 0; datas < NB && polls < 100; polls++) {
		struct paste_event *evs;
		int n = paste_port_poll(f.pt, &evs, 100), here = 0;
		for (int i = 0; i < n; i++) {
			if (evs[i].type != PASTE_EV_DATA)
				continue;
			here++;
			flush_some(&f, 100);
			CHECK_EQ(paste_port_send(f.pt, evs[i].conn, "ok", 2, PASTE_SEND_DURABLE), 0);
		}
		if (here)
			CHECK_EQ(here, e == PASTE_ENGINE_EPOLL_BATCH ? NB : 1);
		datas += here;
	}
	CHECK_EQ(datas, NB);
	for (int i = 0; i < NB; i++) {
		for (int k = 0; k < 100 && !readable(fd[i], 0); k++)
			fix_poll(&f, 10);
		CHECK(paste_persist_durable(f.p) >= epoch);
		char buf[2];
		CHECK_EQ(read_within(fd[i], buf, 2, 1000), 2);
		close(fd[i]);
	}
	paste_port_stats(f.pt, &after);
	CHECK_EQ(after.fences - before.fences, e == PASTE_ENGINE_EPOLL_BATCH ? 1u : NB);
	for (int i = 0; i < 100 && after.conns; i++) {   /* the closes seen */
		fix_poll(&f, 10);
		paste_port_stats(f.pt, &after);
	}
	fix_close(&f);
}

/* Where io_uring is refused (a seccomp filter here, as a container's
 * policy): the uring engine's open fails saying what to use instead, and
 * epoll-batch serves with fsync mode through the page cache, still one
 * fdatasync per batch. In a child: the filter cannot be lifted. */
static void test_no_uring_batch(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (refuse_io_uring())
			_exit(3);
		struct paste_error err = { 0 };
		CHECK_EQ(paste_uring_probe(&err), -ENOSYS);
		CHECK(strstr(err.msg, "--engine epoll-batch") != NULL);
		struct fix f;
		if (fix_open(&f, PASTE_ENGINE_EPOLL_BATCH, PASTE_DUR_FSYNC, 0) == 0) {
			CHECK(!strcmp(paste_persist_flush_insn(f.p), "page cache"));
			fix_close(&f);
		} else {
			CHECK(!"epoll-batch with fsync, no io_uring");
		}
		test_batch_barrier(PASTE_ENGINE_EPOLL_BATCH, PASTE_DUR_FSYNC);
		_exit(check_fail ? 1 : 0);
	}
	int status = -1;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	bool uring = pf_uring_usable();
	enum paste_engine engines[3] = { PASTE_ENGINE_EPOLL, PASTE_ENGINE_EPOLL_BATCH, PASTE_ENGINE_URING };
	for (int i = 0; i < (uring ? 3 : 2); i++) {
		for (int m = 0; m < 2; m++) {
			int before = check_fail;
			enum paste_durability mode = m ? PASTE_DUR_FSYNC : PASTE_DUR_EMULATED;
			test_durable_gate(engines[i], mode);
			test_fail_gate(engines[i], mode);
			if (engines[i] != PASTE_ENGINE_URING)
				test_batch_barrier(engines[i], mode);
			if (check_fail != before)
				fprintf(stderr, "  (in the %s %s cases)\n", paste_engine_name(engines[i]),
					paste_durability_name(mode));
		}
		test_store_removed(engines[i]);
		test_sync_fails(engines[i]);
	}
	test_no_uring_batch();
	if (uring) {
		test_foreign_commit();
		test_fail_commit_inflight();
	}
	return pf_done(uring);
}
