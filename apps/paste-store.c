/*
 * paste-store - look inside a packet store without changing it (and
 * upgrade a version-1 store in place).
 *
 *   paste-store [--store PATH] info     geometry, buffers held, log range, tree
 *   paste-store [--store PATH] check    verify every live record and the B+tree
 *                                       (pages, order, CRCs, reference counts);
 *                                       exit 1 on damage
 *   paste-store [--store PATH] dump [--data]
 *                                       one JSON object per live record
 *   paste-store [--store PATH] dump --tree [--data]
 *                                       one JSON object per key, in key order
 *   paste-store [--store PATH] upgrade  rewrite a version-1 superblock as version 2
 *
 * The store is mapped read-only and the log and the tree opened without a
 * persist object (the tree replays the log into a private copy of its
 * pages), so not one byte of the file is written, except by upgrade. The
 * tool takes a shared lock when it can; a running server holds the store's
 * exclusive lock, and then info and dump show a snapshot (and say so)
 * while check refuses: a buffer freed and reused by the server between two
 * reads would look like damage, and check never reports damage that is not
 * there. Exit status: 0 ok, 1 check found damage, 2 the store cannot be
 * opened, is in use (check, upgrade), or bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "paste.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: paste-store [--store PATH] info|check|dump [--tree] [--data]|upgrade\n"
		"  info    geometry, durability mode, buffers held, log range, recovery note,\n"
		"          the B+tree (keys, height, pages, checkpoint, recovery time)\n"
		"  check   verify every live record's extents and data checksum, and the\n"
		"          B+tree: pages, order, checksums, and that every buffer's reference\n"
		"          count is what the tree and the log imply;\n"
		"          exit 0 when clean, 1 when damaged, 2 when the store cannot be opened\n"
		"  dump    one JSON object per live record, in LSN order\n"
		"  upgrade rewrite a version-1 store's superblock as version 2 (in place; every\n"
		"          record and buffer is kept; the store gets no node area)\n"
		"  --store PATH  the store file (default $PASTE_STORE or %s)\n"
		"  --tree        with dump: one JSON object per key of the B+tree, in key order\n"
		"  --data        with dump: add each record's (or value's) data as \"data_b64\"\n",
		PASTE_DEFAULT_STORE_PATH);
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* The tree's part of info: t NULL with why when it could not be opened. */
static void info_tree(const struct paste_store *st, struct paste_btree *t, const char *why)
{
	const struct paste_store_geom *g = paste_store_geom(st);
	if (!g->node_size) {
		printf("node area:   none (no B+tree)\n");
		return;
	}
	printf("node area:   %llu bytes at offset %llu (%llu pages of %u; meta slots: pages 0 and 1)\n",
	       (unsigned long long)g->node_size, (unsigned long long)g->node_offset,
	       (unsigned long long)(g->node_size / PASTE_STORE_NODE_PAGE), PASTE_STORE_NODE_PAGE);
	if (!t) {
		printf("tree:        cannot be opened: %s\n", why);
		return;
	}
	struct paste_btree_info in;
	paste_btree_info(t, &in);
	printf("tree:        %llu keys, height %u, %u of %u pages used\n", (unsigned long long)in.keys,
	       in.height, in.pages_used, in.pages_total);
	if (in.ckpt_seq)
		printf("checkpoint:  seq %llu, lsn %llu, generation %llu\n", (unsigned long long)in.ckpt_seq,
		       (unsigned long long)in.ckpt_lsn, (unsigned long long)in.ckpt_gen);
	else
		printf("checkpoint:  none yet\n");
	printf("tree log:    %llu records after the checkpoint (replayed), %llu other records\n",
	       (unsigned long long)in.replayed, (unsigned long long)in.replay_skipped);
	printf("tree open:   %.1f ms (walk of the checkpointed tree %.1f ms, replay %.1f ms)\n",
	       ms(in.recovery_ns), ms(in.walk_ns), ms(in.recovery_ns - in.walk_ns));
}

static int cmd_info(struct paste_store *st, struct paste_wal *w, struct paste_btree *t,
		    const char *note, const char *tree_why)
{
	const struct paste_store_geom *g = paste_store_geom(st);
	struct paste_wal_info in;
	paste_wal_info(w, &in);
	uint32_t held = paste_store_nheld(st);
	printf("store:       %s\n", paste_store_path(st));
	printf("layout:      version %u\n", g->version);
	printf("file size:   %llu bytes (%.1f MiB)\n", (unsigned long long)g->file_size,
	       (double)g->file_size / (1 << 20));
	printf("buffers:     %u x %u bytes: %u held by live records and the tree, %u free\n",
	       g->nbufs, g->buf_size, held, g->nbufs - held);
	printf("log:         %u lanes x %llu bytes at offset %llu\n", g->log_lanes,
	       (unsigned long long)g->lane_size, (unsigned long long)g->log_offset);
	printf("buf_offset:  %llu (buffer i is at buf_offset + i x %u)\n",
	       (unsigned long long)g->buf_offset, g->buf_size);
	printf("durability:  %s (detected from the file system)\n",
	       paste_durability_name(paste_durability_detect(paste_store_path(st))));
	if (in.records)
		printf("records:     %llu, lsn %llu..%llu, %llu data bytes\n",
		       (unsigned long long)in.records, (unsigned long long)in.first_lsn,
		       (unsigned long long)in.last_lsn, (unsigned long long)in.bytes);
	else
		printf("records:     none\n");
	printf("log space:   %llu of %llu bytes used (%.1f%%)\n", (unsigned long long)in.log_used,
	       (unsigned long long)in.log_size,
	       in.log_size ? 100.0 * (double)in.log_used / (double)in.log_size : 0.0);
	printf("epoch:       %u\n", in.epoch);
	printf("recovery:    %s\n", note[0] ? note : "clean");
	info_tree(st, t, tree_why);
	if (paste_store_in_use(st))
		printf("in use:      yes: a running server holds the store; these counts are a snapshot\n");
	return 0;
}

/* ---- check: the log, the tree, and the reference counts -------------- */

struct refs {
	const struct paste_store *st;
	uint32_t *want;       /* per buffer: log extents + tree extents */
	uint8_t *header;      /* per buffer: holds a tree record header */
	uint64_t headers;     /* tree records in the log */
	int overlaps;
	char first[160];
};

static int count_log(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
		     uint32_t n, uint32_t len, uint32_t crc)
{
	struct refs *r = arg;
	struct paste_btree_record rec;
	(void)lane; (void)len; (void)crc; (void)lsn;
	for (uint32_t i = 0; i < n; i++)
		r->want[ext[i].buf]++;
	if (paste_btree_record_parse(r->st, ext, n, &rec) == 0) {
		r->header[ext[0].buf] = 1;
		r->headers++;
	}
	return 0;
}

/* Reference counts after opening the log and the tree (read-only) must be
 * exactly one per log extent plus one per tree value extent, and no value
 * may lie in a buffer holding tree record headers (it would be the tree's
 * own bookkeeping, not data). Returns the number of problems. */
static int check_refs(struct paste_store *st, struct paste_wal *w, struct paste_btree *t,
		      struct paste_error *err)
{
	const struct paste_store_geom *g = paste_store_geom(st);
	struct refs r = { st, calloc(g->nbufs, sizeof(uint32_t)), calloc(g->nbufs, 1), 0, 0, "" };
	if (!r.want || !r.header) {
		free(r.want);
		free(r.header);
		return paste_error_set(err, -ENOMEM, "out of memory for reference counts");
	}
	paste_wal_foreach(w, count_log, &r);
	int problems = 0;
	if (t) {
		struct paste_btree_cursor c;
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		const uint8_t *key;
		uint32_t klen, n;
		paste_btree_cursor_init(&c, t, NULL, 0);
		while (paste_btree_cursor_next(&c, &key, &klen, ext, &n, NULL) == 1) {
			for (uint32_t i = 0; i < n; i++) {
				r.want[ext[i].buf]++;
				if (r.header[ext[i].buf] && !r.overlaps++)
					snprintf(r.first, sizeof(r.first), "buffer %u", ext[i].buf);
			}
		}
	}
	if (r.overlaps) {
		problems++;
		size_t used = strlen(err->msg);
		snprintf(err->msg + used, sizeof(err->msg) - used, "%s%d tree values lie in buffers of "
			 "tree record headers (first: %s)", used ? "; " : "", r.overlaps, r.first);
	}
	uint32_t bad = 0, first = 0;
	for (uint32_t b = 0; b < g->nbufs; b++)
		if (paste_store_refcount(st, b) != r.want[b] && !bad++)
			first = b;
	if (bad) {
		problems++;
		size_t used = strlen(err->msg);
		snprintf(err->msg + used, sizeof(err->msg) - used, "%s%u buffers whose reference count "
			 "is not what the tree and the log imply (first: buffer %u, %u references, "
			 "%u implied)", used ? "; " : "", bad, first, paste_store_refcount(st, first),
			 r.want[first]);
	}
	free(r.want);
	free(r.header);
	return problems;
}

static int cmd_check(struct paste_store *st, struct paste_wal *w, struct paste_btree *t,
		     const char *note, const char *tree_why)
{
	struct paste_error err = { 0 };
	struct paste_wal_info in;
	int damaged = paste_wal_check(w, &err);
	if (damaged < 0) {
		fprintf(stderr, "paste-store: check: %s\n", err.msg);
		return 2;
	}
	char log_problems[sizeof(err.msg)];
	memcpy(log_problems, err.msg, sizeof(log_problems));
	struct paste_error terr = { 0 };
	int tree_bad = 0;
	if (t) {
		tree_bad = paste_btree_check(t, &terr);
		if (tree_bad < 0) {
			fprintf(stderr, "paste-store: check: %s\n", terr.msg);
			return 2;
		}
	} else if (tree_why) {
		tree_bad = 1;   /* the tree could not be opened: damaged */
		snprintf(terr.msg, sizeof(terr.msg), "%s", tree_why);
	}
	struct paste_error rerr = { 0 };
	int ref_bad = tree_why ? 0 : check_refs(st, w, t, &rerr);
	paste_wal_info(w, &in);
	uint64_t keys = t ? paste_btree_count(t) : 0;
	if (damaged == 0 && tree_bad == 0 && ref_bad == 0) {
		printf("ok: %llu records", (unsigned long long)in.records);
		if (t)
			printf(", tree: %llu keys, reference counts consistent", (unsigned long long)keys);
		printf("\n");
		if (note[0])
			printf("note: %s\n", note);   /* a torn tail: normal after a crash */
		return 0;
	}
	int total = damaged + tree_bad + ref_bad;
	printf("damaged: %d problem%s, %llu records recovered%s\n", total, total == 1 ? "" : "s",
	       (unsigned long long)in.records, t ? "" : tree_why ? ", the tree could not be opened" : "");
	/* One problem per line; the messages join them with "; ". */
	char *msgs[3] = { log_problems, terr.msg, rerr.msg };
	for (int m = 0; m < 3; m++) {
		for (char *s = msgs[m], *next; s && *s; s = next) {
			next = strstr(s, "; ");
			if (next) {
				*next = 0;
				next += 2;
			}
			printf("  %s%s\n", m == 1 ? "tree: " : m == 2 ? "references: " : "", s);
		}
	}
	return 1;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 across extents: up to two bytes carry over from one to the next. */
static void put_b64(const uint8_t *p, size_t n, unsigned *carry, uint32_t *acc)
{
	for (size_t i = 0; i < n; i++) {
		*acc = *acc << 8 | p[i];
		if (++*carry == 3) {
			printf("%c%c%c%c", b64[*acc >> 18 & 63], b64[*acc >> 12 & 63],
			       b64[*acc >> 6 & 63], b64[*acc & 63]);
			*carry = 0;
			*acc = 0;
		}
	}
}

static void end_b64(unsigned carry, uint32_t acc)
{
	if (carry == 1)
		printf("%c%c==", b64[acc >> 2 & 63], b64[(acc & 3) << 4]);
	else if (carry == 2)
		printf("%c%c%c=", b64[acc >> 10 & 63], b64[acc >> 4 & 63], b64[(acc & 15) << 2]);
}

struct dump_ctx {
	struct paste_store *st;
	bool data;
};

static int dump_record(void *arg, uint64_t lsn, uint32_t lane, const struct paste_extent *ext,
		       uint32_t n, uint32_t len, uint32_t data_crc)
{
	struct dump_ctx *d = arg;
	uint32_t buf_size = paste_store_geom(d->st)->buf_size;
	printf("{\"lsn\":%llu,\"lane\":%u,\"len\":%u,\"data_crc\":\"%08x\",\"extents\":[",
	       (unsigned long long)lsn, lane, len, data_crc);
	for (uint32_t i = 0; i < n; i++)
		printf("%s[%u,%u,%u]", i ? "," : "", ext[i].buf, ext[i].off, ext[i].len);
	printf("]");
	if (d->data) {
		unsigned carry = 0;
		uint32_t acc = 0;
		printf(",\"data_b64\":\"");
		for (uint32_t i = 0; i < n; i++) {
			struct paste_extent e = ext[i];   /* one read: a live server may be writing */
			const uint8_t *b = paste_store_buf(d->st, e.buf);
			if (b && e.off <= buf_size && e.len <= buf_size - e.off)
				put_b64(b + e.off, e.len, &carry, &acc);
		}
		end_b64(carry, acc);
		printf("\"");
	}
	printf("}\n");
	return ferror(stdout) ? -EIO : 0;
}

static void put_value(const struct paste_store *st, const struct paste_extent *ext, uint32_t n)
{
	uint32_t buf_size = paste_store_geom(st)->buf_size;
	unsigned carry = 0;
	uint32_t acc = 0;
	printf(",\"data_b64\":\"");
	for (uint32_t i = 0; i < n; i++) {
		struct paste_extent e = ext[i];
		const uint8_t *b = paste_store_buf(st, e.buf);
		if (b && e.off <= buf_size && e.len <= buf_size - e.off)
			put_b64(b + e.off, e.len, &carry, &acc);
	}
	end_b64(carry, acc);
	printf("\"");
}

/* One JSON object per key: {"key_b64":..., "len":..., "extents":[...]}. */
static int dump_tree(struct paste_store *st, struct paste_btree *t, bool data)
{
	struct paste_btree_cursor c;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	const uint8_t *key;
	uint32_t klen, n, len;
	paste_btree_cursor_init(&c, t, NULL, 0);
	while (paste_btree_cursor_next(&c, &key, &klen, ext, &n, &len) == 1) {
		unsigned carry = 0;
		uint32_t acc = 0;
		printf("{\"key_b64\":\"");
		put_b64(key, klen, &carry, &acc);
		end_b64(carry, acc);
		printf("\",\"len\":%u,\"extents\":[", len);
		for (uint32_t i = 0; i < n; i++)
			printf("%s[%u,%u,%u]", i ? "," : "", ext[i].buf, ext[i].off, ext[i].len);
		printf("]");
		if (data)
			put_value(st, ext, n);
		printf("}\n");
		if (ferror(stdout))
			return -EIO;
	}
	return 0;
}

static int cmd_upgrade(const char *path)
{
	struct paste_error err = { 0 };
	int r = paste_store_upgrade(path, &err);
	if (r == 0) {
		printf("upgraded: %s is layout version %u (no node area: it serves the log, not a "
		       "tree)\n", path, PASTE_STORE_VERSION);
		return 0;
	}
	fprintf(stderr, "paste-store: %s\n", err.msg);
	return r == -EALREADY ? 0 : 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "data", no_argument, NULL, 'd' },
		{ "tree", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = getenv("PASTE_STORE");
	bool data = false, tree = false;
	int c;
	if (!path || !*path)
		path = PASTE_DEFAULT_STORE_PATH;
	while ((c = getopt_long(argc, argv, "s:dth", opts, NULL)) != -1) {
		switch (c) {
		case 's': path = optarg; break;
		case 'd': data = true; break;
		case 't': tree = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "paste-store: %s\n", optind >= argc ? "no command given" : "one command only");
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[optind];
	if (strcmp(cmd, "info") && strcmp(cmd, "check") && strcmp(cmd, "dump") && strcmp(cmd, "upgrade")) {
		fprintf(stderr, "paste-store: unknown command '%s'\n", cmd);
		usage(stderr);
		return 2;
	}
	if ((data || tree) && strcmp(cmd, "dump")) {
		fprintf(stderr, "paste-store: --data and --tree go with dump only\n");
		return 2;
	}
	if (strcmp(cmd, "upgrade") == 0)
		return cmd_upgrade(path);

	struct paste_error err = { 0 };
	struct paste_store *st = NULL;
	struct paste_wal *w = NULL;
	if (paste_store_open(&st, path, NULL, PASTE_STORE_RDONLY, &err) < 0 ||
	    paste_wal_open(&w, st, NULL, &err) < 0) {
		fprintf(stderr, "paste-store: %s\n", err.msg);
		paste_store_close(st);
		return 2;
	}
	if (strcmp(cmd, "check") == 0 && paste_store_in_use(st)) {
		fprintf(stderr, "paste-store: %s is in use by a running server (it holds the store's lock): "
			"stop it to check the store; info and dump work on a live store\n", path);
		paste_wal_close(w);
		paste_store_close(st);
		return 2;
	}
	char note[sizeof(err.msg)];
	memcpy(note, err.msg, sizeof(note));
	/* The tree, read-only: its replay goes to a private copy of the pages. */
	struct paste_btree *t = NULL;
	char tree_why[sizeof(err.msg)] = "";
	if (paste_store_geom(st)->node_size) {
		struct paste_error terr = { 0 };
		if (paste_btree_open(&t, st, w, NULL, NULL, &terr) < 0)
			snprintf(tree_why, sizeof(tree_why), "%s", terr.msg);
		else if (terr.msg[0])
			snprintf(note + strlen(note), sizeof(note) - strlen(note), "%s%.120s",
				 note[0] ? "; " : "", terr.msg);   /* a torn meta slot */
	}
	int rc;
	if (strcmp(cmd, "info") == 0) {
		rc = cmd_info(st, w, t, note, tree_why);
	} else if (strcmp(cmd, "check") == 0) {
		rc = cmd_check(st, w, t, note, tree_why[0] ? tree_why : NULL);
	} else if (tree) {
		if (!t) {
			fprintf(stderr, "paste-store: %s\n", tree_why[0] ? tree_why : "the store has no node area");
			rc = 2;
		} else {
			rc = dump_tree(st, t, data) < 0 ? 2 : 0;
		}
	} else {
		struct dump_ctx d = { st, data };
		rc = paste_wal_foreach(w, dump_record, &d) < 0 ? 2 : 0;
		if (note[0])
			fprintf(stderr, "paste-store: %s\n", note);
	}
	if (fflush(stdout) != 0 && rc == 0) {
		fprintf(stderr, "paste-store: write error: %s\n", strerror(errno));
		rc = 2;
	}
	paste_btree_close(t);
	paste_wal_close(w);
	paste_store_close(st);
	return rc;
}
