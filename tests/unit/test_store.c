/* test_store.c - packet store: create and reopen, open flags, the
 * configuration a new store is refused for, validation of damaged
 * superblocks and of a geometry other than the one asked for. Ownership is
 * in test_store_refs.c, addresses and locking in test_store_map.c, the
 * version-1 upgrade in test_store_upgrade.c; the fixture in
 * store_fixture.h. */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include "store_fixture.h"

/* Entries in directory d (its own . and .. not counted). */
static int count_entries(const char *d)
{
	DIR *dp = opendir(d);
	int n = 0;
	for (struct dirent *e; dp && (e = readdir(dp)) != NULL;)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (dp)
		closedir(dp);
	return n;
}

static void fix_crc(const char *p)
{
	uint8_t sb[SB_CRC];
	int fd = open(p, O_RDONLY);
	if (pread(fd, sb, sizeof(sb), 0) != (ssize_t)sizeof(sb))
		perror("fix_crc");
	close(fd);
	uint32_t crc = paste_crc32c(0, sb, sizeof(sb));
	poke(p, SB_CRC, &crc, 4);
}

static void test_create_roundtrip(void)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	const struct paste_store_geom *g = paste_store_geom(st);
	CHECK_EQ(g->version, PASTE_STORE_VERSION);
	CHECK_EQ(g->file_size, 4 * MIB);
	CHECK_EQ(g->buf_size, 2048);
	CHECK_EQ(g->log_lanes, 2);
	CHECK_EQ(g->ckpt_offset, 4096);
	CHECK_EQ(g->log_offset, 8192);
	/* auto log: 64 B x 2048 buffers is under 1 MiB, so 1 MiB over 2 lanes */
	CHECK_EQ(g->lane_size, 512 * 1024);
	/* auto node area: 1/8 of the file, between the lanes and the buffers */
	CHECK_EQ(g->node_offset, 8192 + MIB);
	CHECK_EQ(g->node_size, 512 * 1024);
	CHECK_EQ(g->meta_offset, g->node_offset);
	CHECK_EQ(g->buf_offset, 8192 + MIB + 512 * 1024);
	CHECK_EQ(g->nbufs, (4 * MIB - 8192 - MIB - 512 * 1024) / 2048);
	uint32_t pages = 0;
	CHECK(paste_store_nodes(st, &pages) == paste_store_base(st) + g->node_offset);
	CHECK_EQ(pages, 128);
	CHECK(g->uuid[0] || g->uuid[1]);
	CHECK(strcmp(paste_store_path(st), path) == 0);
	CHECK(paste_store_fd(st) >= 0);
	CHECK(paste_store_base(st) != NULL);
	struct paste_store_geom saved = *g;
	memcpy(paste_store_buf(st, 7), "hello", 5);
	paste_store_close(st);

	struct paste_error err = {0};
	CHECK_EQ(paste_store_open(&st, path, NULL, 0, &err), 0);
	if (!st)
		return;
	CHECK(memcmp(paste_store_geom(st), &saved, sizeof(saved)) == 0);
	CHECK(memcmp(paste_store_buf(st, 7), "hello", 5) == 0);
	paste_store_close(st);

	/* CREATE on an existing store opens it, never reformats it. */
	CHECK_EQ(paste_store_open(&st, path, &small, PASTE_STORE_CREATE, &err), 0);
	if (st) {
		CHECK_EQ(paste_store_geom(st)->uuid[0], saved.uuid[0]);
		CHECK(memcmp(paste_store_buf(st, 7), "hello", 5) == 0);
		paste_store_close(st);
	}
}

static void test_open_flags(void)
{
	struct paste_store *st = create_small();
	struct paste_error err = {0};
	paste_store_close(st);
	size_t len;
	uint8_t *before = read_file(path, &len);

	CHECK_EQ(paste_store_open(&st, path, &small, PASTE_STORE_CREATE | PASTE_STORE_EXCL, &err), -EEXIST);
	CHECK(st == NULL);
	CHECK(strstr(err.msg, "already exists") != NULL);
	CHECK(file_equals(path, before, len));
	CHECK_EQ(paste_store_open(&st, path, NULL, PASTE_STORE_CREATE | PASTE_STORE_RDONLY, &err), -EINVAL);
	CHECK_EQ(paste_store_open(&st, path, NULL, 64, &err), -EINVAL);
	CHECK(strstr(err.msg, "unknown open flags 0x40") != NULL);
	CHECK_EQ(paste_store_open(&st, path, NULL, PASTE_STORE_ONE_THREAD, &err), 0);
	paste_store_close(st);
	CHECK_EQ(paste_store_open(&st, "", NULL, 0, &err), -EINVAL);
	CHECK(file_equals(path, before, len));
	free(before);

	char missing[160];
	snprintf(missing, sizeof(missing), "%s/missing.store", dir);
	CHECK_EQ(paste_store_open(&st, missing, NULL, 0, &err), -ENOENT);
	CHECK(strncmp(err.msg, missing, strlen(missing)) == 0);
	CHECK(access(missing, F_OK) != 0);

	/* A file that is not a store is never touched, even with CREATE. */
	poke(missing, 0, "some user data, not a store", 27);
	before = read_file(missing, &len);
	CHECK_EQ(paste_store_open(&st, missing, &small, PASTE_STORE_CREATE, &err), -EINVAL);
	CHECK(strstr(err.msg, "not a paste store (bad magic)") != NULL);
	CHECK(file_equals(missing, before, len));
	free(before);
	unlink(missing);
}

static void expect_create_error(const struct paste_store_config *cfg, const char *text)
{
	struct paste_store *st = NULL;
	struct paste_error err = {0};
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, cfg, PASTE_STORE_CREATE, &err), -EINVAL);
	CHECK(st == NULL);
	CHECK(strncmp(err.msg, path, strlen(path)) == 0);
	if (!strstr(err.msg, text)) {
		fprintf(stderr, "want \"%s\" in \"%s\"\n", text, err.msg);
		CHECK(0);
	}
	CHECK(access(path, F_OK) != 0);   /* nothing left behind */
}

static void test_create_config_errors(void)
{
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .buf_size = 1000 }, "not a power of two");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .buf_size = 256 }, "not a power of two");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .buf_size = 131072 }, "not a power of two");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .log_lanes = 65 }, "log lanes");
	expect_create_error(&(struct paste_store_config){ .size = MIB }, "too small");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB + 100 }, "multiple of 4096");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .log_size = 8 * MIB }, "exceeds");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .node_size = 5000 }, "node area");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .node_size = 8192 }, "node area");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .node_size = 8 * MIB }, "node area");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .node_size = 3 * MIB }, "too small");
	/* Just big enough: 1 MiB log + 8 KiB + 64 buffers (the auto node
	 * area gives way to the buffers). */
	struct paste_store *st = NULL;
	struct paste_store_config edge = { .size = MIB + 8192 + 64 * 2048, .log_lanes = 2 };
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, &edge, PASTE_STORE_CREATE, NULL), 0);
	if (st) {
		CHECK_EQ(paste_store_geom(st)->nbufs, 64);
		CHECK_EQ(paste_store_geom(st)->node_size, 0);
		CHECK(paste_store_nodes(st, NULL) == NULL);
	}
	paste_store_close(st);
	/* An explicit node area, and none. */
	struct paste_store_config nodes = { .size = 4 * MIB, .node_size = 3 * 4096 };
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, &nodes, PASTE_STORE_CREATE, NULL), 0);
	if (st)
		CHECK_EQ(paste_store_geom(st)->node_size, 3 * 4096);
	paste_store_close(st);
	nodes.node_size = PASTE_STORE_NO_NODES;
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, &nodes, PASTE_STORE_CREATE, NULL), 0);
	if (st) {
		CHECK_EQ(paste_store_geom(st)->node_size, 0);
		CHECK_EQ(paste_store_geom(st)->meta_offset, 0);
		CHECK_EQ(paste_store_geom(st)->buf_offset, paste_store_geom(st)->node_offset);
	}
	paste_store_close(st);
	/* Auto log grows past 1 MiB with the buffer count: 64 B per buffer
	 * per lane, so each lane can name every buffer. */
	struct paste_store_config many = { .size = 16 * MIB, .buf_size = 512, .log_lanes = 4 };
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, &many, PASTE_STORE_CREATE, NULL), 0);
	if (st) {
		const struct paste_store_geom *g = paste_store_geom(st);
		CHECK_EQ(g->lane_size, 16 * MIB / 512 * 64);
		CHECK_EQ(g->log_lanes, 4);
		CHECK_EQ(g->log_offset, 4096 + 4096);
		CHECK_EQ(g->buf_offset % 4096, 0);
	}
	paste_store_close(st);
}

static void test_validation_errors(void)
{
	paste_store_close(create_small());
	poke(path, 0, "PASTEST0", 8);
	expect_open_error(NULL, -EINVAL, "not a paste store (bad magic)");

	paste_store_close(create_small());
	uint32_t v4 = 4;
	poke(path, SB_VERSION, &v4, 4);
	expect_open_error(NULL, -EPROTO, "layout version 4, this build reads 3");

	paste_store_close(create_small());
	uint32_t v2 = 2;
	poke(path, SB_VERSION, &v2, 4);
	expect_open_error(NULL, -EPROTO, "upgrade");

	paste_store_close(create_small());
	flip(path, SB_UUID + 3);
	expect_open_error(NULL, -EBADMSG, "superblock checksum mismatch: corrupted");

	/* A checksum-valid superblock whose geometry cannot be right. */
	paste_store_close(create_small());
	uint32_t nbufs = 100000;
	poke(path, SB_NBUFS, &nbufs, 4);
	fix_crc(path);
	expect_open_error(NULL, -EBADMSG, "inconsistent superblock geometry");

	paste_store_close(create_small());
	CHECK_EQ(truncate(path, 3 * MIB), 0);
	expect_open_error(NULL, -EBADMSG, "truncated: file has 3145728 bytes, superblock says 4194304");

	CHECK_EQ(truncate(path, 0), 0);
	expect_open_error(NULL, -EBADMSG, "empty file (truncated, 0 bytes)");
}

static void test_geometry_mismatch(void)
{
	paste_store_close(create_small());
	expect_open_error(&(struct paste_store_config){ .buf_size = 4096 }, -EINVAL,
			  "geometry mismatch: store has 2048-byte buffers, asked for 4096");
	expect_open_error(&(struct paste_store_config){ .size = 8 * MIB }, -EINVAL,
			  "geometry mismatch: store has 4194304 bytes, asked for 8388608");
	expect_open_error(&(struct paste_store_config){ .log_lanes = 4 }, -EINVAL,
			  "geometry mismatch: store has 2 log lanes, asked for 4");
	expect_open_error(&(struct paste_store_config){ .log_size = 2 * MIB }, -EINVAL,
			  "geometry mismatch: store has a 1048576-byte log, asked for 2097152");
	expect_open_error(&(struct paste_store_config){ .node_size = 8192 * 4 }, -EINVAL,
			  "geometry mismatch: store has a 524288-byte node area, asked for 32768");
	expect_open_error(&(struct paste_store_config){ .node_size = PASTE_STORE_NO_NODES }, -EINVAL,
			  "geometry mismatch: store has a 524288-byte node area, asked for none");
	/* Matching values are fine. */
	struct paste_store *st = NULL;
	struct paste_store_config same = small;
	same.log_size = MIB;
	CHECK_EQ(paste_store_open(&st, path, &same, 0, NULL), 0);
	paste_store_close(st);
}

/* Nothing of a create is left when it fails: the store gets its name
 * only once formatted and synced. A file size limit makes fallocate fail
 * (EFBIG) partway, as a full disk would (ENOSPC). */
static void create_fails_in_child(void)
{
	struct rlimit rl = { 1 * MIB, 1 * MIB };
	signal(SIGXFSZ, SIG_IGN);
	CHECK_EQ(setrlimit(RLIMIT_FSIZE, &rl), 0);
	struct paste_store *st = NULL;
	struct paste_error err = {0};
	int r = paste_store_open(&st, path, &small, PASTE_STORE_CREATE, &err);
	CHECK(r == -EFBIG || r == -ENOSPC);
	CHECK(st == NULL);
	CHECK(strstr(err.msg, path) && strstr(err.msg, "while creating"));
	CHECK_EQ(paste_exit_status(r), PASTE_EXIT_IO);
}

static void test_failed_create_leaves_nothing(void)
{
	unlink(path);
	check_in_child("create over RLIMIT_FSIZE", NULL, NULL, create_fails_in_child);
	CHECK_EQ(access(path, F_OK), -1);
	CHECK_EQ(count_entries(dir), 0);   /* no temporary either */

	/* A start that created its store and then failed removes it
	 * (paste_store_unlink_created); one that opened an existing store
	 * cannot. */
	struct paste_store *st = NULL;
	CHECK_EQ(paste_store_open(&st, path, &small, PASTE_STORE_CREATE, NULL), 0);
	if (!st)
		return;
	CHECK(paste_store_created(st));
	CHECK_EQ(paste_store_unlink_created(st), 0);
	CHECK_EQ(access(path, F_OK), -1);
	paste_store_close(st);
	st = create_small();
	paste_store_close(st);
	CHECK_EQ(paste_store_open(&st, path, &small, PASTE_STORE_CREATE, NULL), 0);
	if (st) {
		CHECK(!paste_store_created(st));
		CHECK_EQ(paste_store_unlink_created(st), -EPERM);
		paste_store_close(st);
	}
	CHECK_EQ(access(path, F_OK), 0);
	unlink(path);
}

/* A store this open created maps under its name (/proc/self/maps), not as
 * the unnamed file it was formatted in: tools and tests find it there. */
static void test_created_store_mapped_by_name(void)
{
	unlink(path);
	struct paste_store *st = create_small();
	if (!st)
		return;
	CHECK(paste_store_created(st));
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool named = false, deleted = false;
	while (f && fgets(line, sizeof(line), f)) {
		named |= strstr(line, path) != NULL;
		deleted |= strstr(line, dir) && strstr(line, "(deleted)");
	}
	if (f)
		fclose(f);
	CHECK(named);
	CHECK(!deleted);
	paste_store_close(st);
	unlink(path);
}

/* Two opens creating one new store at once: exactly one creates it, the
 * other finds it complete and locked ("in use", -EBUSY) or, once the
 * winner is gone, opens it; never a half-formatted file ("bad magic",
 * "truncated"). Many rounds of two processes racing. */
static void test_create_race(void)
{
	int rounds = 40, wins = 0, busy = 0, other = 0;
	for (int round = 0; round < rounds; round++) {
		unlink(path);
		int fds[2][2];
		pid_t pid[2];
		for (int i = 0; i < 2; i++) {
			if (pipe(fds[i]) < 0)
				return;
			fflush(NULL);
			pid[i] = fork();
			if (pid[i] == 0) {
				struct paste_store *st = NULL;
				struct paste_error err = {0};
				int r = paste_store_open(&st, path, &small, PASTE_STORE_CREATE, &err);
				char what = r == 0 && paste_store_created(st) ? 'c' : r == 0 ? 'o'
					  : r == -EBUSY && strstr(err.msg, "in use") ? 'b' : 'x';
				if (what == 'x')
					fprintf(stderr, "create race: %d %s\n", r, err.msg);
				if (write(fds[i][1], &what, 1) != 1)
					_exit(2);
				usleep(20000);   /* hold the store a while */
				paste_store_close(st);
				_exit(0);
			}
		}
		char got[2] = { 0, 0 };
		for (int i = 0; i < 2; i++) {
			if (read(fds[i][0], &got[i], 1) != 1)
				got[i] = 'x';
			close(fds[i][0]);
			close(fds[i][1]);
			waitpid(pid[i], NULL, 0);
		}
		wins += (got[0] == 'c') + (got[1] == 'c');
		busy += (got[0] == 'b') + (got[1] == 'b');
		other += (got[0] == 'x') + (got[1] == 'x');
		CHECK((got[0] == 'c') + (got[1] == 'c') == 1);
	}
	CHECK_EQ(wins, rounds);
	CHECK_EQ(other, 0);
	CHECK(busy > 0);
	printf("create race: %d rounds, the loser said \"in use\" %d times\n", rounds, busy);
	unlink(path);
}

int main(void)
{
	if (sf_begin())
		return 1;
	test_create_roundtrip();
	test_open_flags();
	test_create_config_errors();
	test_validation_errors();
	test_geometry_mismatch();
	test_failed_create_leaves_nothing();
	test_created_store_mapped_by_name();
	test_create_race();
	return sf_end();
}
