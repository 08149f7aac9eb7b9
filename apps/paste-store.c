/*
 * paste-store - look inside a packet store without changing it.
 *
 *   paste-store [--store PATH] info     geometry, buffers held, log range
 *   paste-store [--store PATH] check    verify every live record; exit 1 on damage
 *   paste-store [--store PATH] dump [--data]
 *                                       one JSON object per live record
 *
 * The store is mapped read-only and the log opened without a persist
 * object, so not one byte of the file is written. The tool takes a shared
 * lock when it can; a running server holds the store's exclusive lock, and
 * then info and dump show a snapshot (and say so) while check refuses: a
 * buffer freed and reused by the server between two reads would look like
 * damage, and check never reports damage that is not there. Exit status:
 * 0 ok, 1 check found damage, 2 the store cannot be opened, is in use
 * (check), or bad usage.
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
		"usage: paste-store [--store PATH] info|check|dump [--data]\n"
		"  info    geometry, durability mode, buffers held, log range, recovery note\n"
		"  check   verify every live record's extents and data checksum;\n"
		"          exit 0 when clean, 1 when damaged, 2 when the store cannot be opened\n"
		"  dump    one JSON object per live record, in LSN order\n"
		"  --store PATH  the store file (default $PASTE_STORE or %s)\n"
		"  --data        with dump: add each record's data as \"data_b64\"\n",
		PASTE_DEFAULT_STORE_PATH);
}

static int cmd_info(struct paste_store *st, struct paste_wal *w, const char *note)
{
	const struct paste_store_geom *g = paste_store_geom(st);
	struct paste_wal_info in;
	paste_wal_info(w, &in);
	uint32_t held = paste_store_nheld(st);
	printf("store:       %s\n", paste_store_path(st));
	printf("layout:      version %u\n", g->version);
	printf("file size:   %llu bytes (%.1f MiB)\n", (unsigned long long)g->file_size,
	       (double)g->file_size / (1 << 20));
	printf("buffers:     %u x %u bytes: %u held by live records, %u free\n",
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
	if (paste_store_in_use(st))
		printf("in use:      yes: a running server holds the store; these counts are a snapshot\n");
	return 0;
}

static int cmd_check(struct paste_wal *w, const char *note)
{
	struct paste_error err = { 0 };
	struct paste_wal_info in;
	int damaged = paste_wal_check(w, &err);
	if (damaged < 0) {
		fprintf(stderr, "paste-store: check: %s\n", err.msg);
		return 2;
	}
	paste_wal_info(w, &in);
	if (damaged == 0) {
		printf("ok: %llu records\n", (unsigned long long)in.records);
		if (note[0])
			printf("note: %s\n", note);   /* a torn tail: normal after a crash */
		return 0;
	}
	printf("damaged: %d problem%s, %llu records recovered\n", damaged, damaged == 1 ? "" : "s",
	       (unsigned long long)in.records);
	/* One problem per line; the message joins them with "; ". */
	for (char *s = err.msg, *next; s && *s; s = next) {
		next = strstr(s, "; ");
		if (next) {
			*next = 0;
			next += 2;
		}
		printf("  %s\n", s);
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "data", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = getenv("PASTE_STORE");
	bool data = false;
	int c;
	if (!path || !*path)
		path = PASTE_DEFAULT_STORE_PATH;
	while ((c = getopt_long(argc, argv, "s:dh", opts, NULL)) != -1) {
		switch (c) {
		case 's': path = optarg; break;
		case 'd': data = true; break;
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
	if (strcmp(cmd, "info") && strcmp(cmd, "check") && strcmp(cmd, "dump")) {
		fprintf(stderr, "paste-store: unknown command '%s'\n", cmd);
		usage(stderr);
		return 2;
	}
	if (data && strcmp(cmd, "dump")) {
		fprintf(stderr, "paste-store: --data goes with dump only\n");
		return 2;
	}

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
	int rc;
	if (strcmp(cmd, "info") == 0) {
		rc = cmd_info(st, w, note);
	} else if (strcmp(cmd, "check") == 0) {
		rc = cmd_check(w, note);
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
	paste_wal_close(w);
	paste_store_close(st);
	return rc;
}
