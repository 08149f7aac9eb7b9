"""pkvs's stream consumer groups (services/cmd_stream.c, kv_stream.c)
against Debian's redis-server 7.0.15 (tests/e2e/redis_peer.py); the rest
of streams is in test_pkvs_stream.py, whose helpers this file uses.

- XGROUP CREATE (MKSTREAM, ENTRIESREAD, $), SETID, DESTROY,
  CREATECONSUMER, DELCONSUMER, HELP; XREADGROUP (COUNT, NOACK, > and
  explicit IDs, several streams, deleted entries in the history); XACK;
  XPENDING (summary, extended with IDLE, bounds and consumer); XCLAIM
  (IDLE, TIME, RETRYCOUNT, FORCE, JUSTID, LASTID, deleted entries);
  XAUTOCLAIM (COUNT, JUSTID, the cursor, the deleted IDs as the third
  element); XINFO GROUPS, CONSUMERS, STREAM FULL (entries-read and lag
  through XDEL, XTRIM and SETID): every reply byte for byte in RESP2 and
  RESP3, but idle and delivery times, which are compared within a
  tolerance (TIMED). Errors: NOGROUP, BUSYGROUP, WRONGTYPE, syntax,
  arity.
- Delivery counts (XREADGROUP history, XCLAIM with and without JUSTID,
  XAUTOCLAIM, a rewound group re-delivering), consumers' pending counts.
- Idle times grow while an entry waits and restart at a claim; XPENDING
  IDLE and XAUTOCLAIM's min-idle-time pick by them (sleeps far longer
  than the bounds, so nothing depends on the scheduler).
- XREADGROUP BLOCK: served with '>' by a later XADD, several consumers in
  the order they blocked (one entry each), NOACK, timeouts; unblocked
  with Redis's error when the group is destroyed (NOGROUP), the key
  deleted, overwritten or flushed (UNBLOCKED), RENAME with or without
  the group: the blocked clients' bytes as Redis's.
- Keyspace events: xgroup-create, -setid, -destroy, -createconsumer (by
  XGROUP, XREADGROUP, XCLAIM, XAUTOCLAIM and a served blocked read),
  -delconsumer, as Redis sends them.
- MULTI/EXEC and EVAL of group commands.
- Replication: a pkvs primary with a pkvs and a redis-server replica
  (full sync of streams with groups, then XADD *, ~ trimming,
  XREADGROUP, XACK, XCLAIM, XAUTOCLAIM, XGROUP SETID, XTRIM): the same
  entries and XINFO STREAM FULL on all three; the commands pkvs
  propagates the same as Redis's for the same commands.
- What only pkvs shows: a group's pending entries, consumers and last
  delivered ID are the same after kill -9 and a restart, and under
  kill -9 every acknowledged delivery is pending after the restart.
"""
import random
import threading
import time

import pytest
import redis

from conftest import generations_acked_under_kill9, resp_command, wait_until
from redis_peer import SLEEP, Peers, RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)
from test_pkvs_notify import both as watch_both, compare as compare_events
from test_pkvs_repl import Stream as ReplStream, link_up, started_redis
from test_pkvs_stream import (MAX, PROTOS, RADIX, TIMED, compare_timed, masked,  # noqa: F401
                              server, stream_like_redis, wait_blocked)             # (server: a fixture)

T = TIMED
BASE = [("XADD", "s", f"{i}-0", "k", f"v{i}") for i in range(1, 8)]

SCRIPTS = {
    "create": [
        ("XGROUP", "CREATE", "s", "g", "$"), ("EXISTS", "s"), ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
        ("TYPE", "s"), ("XLEN", "s"), ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"), ("XGROUP", "CREATE", "s", "g", "0"),
        ("XGROUP", "CREATE", "s", "g2", "0", "ENTRIESREAD", "5"), ("XGROUP", "CREATE", "s", "g3", "0", "ENTRIESREAD", "-2"),
        ("XGROUP", "CREATE", "s", "g3", "0", "ENTRIESREAD", "-1"), ("XGROUP", "CREATE", "s", "g4", "0", "ENTRIESREAD", "x"),
        ("XGROUP", "CREATE", "s", "g4", "0", "FOO"), ("XGROUP", "CREATE", "s", "g4", "0", "MKSTREAM", "ENTRIESREAD", "1", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g4", "0", "ENTRIESREAD"), ("XGROUP", "CREATE", "s", "g5", "x"),
        ("XGROUP", "CREATE", "s", "g5", "-"), ("XGROUP", "CREATE", "s", "g5", "+"), ("XGROUP", "CREATE", "s", "g5", ">"),
        ("XGROUP", "CREATE", "s", "g5", "1-*"), ("XGROUP", "CREATE", "s", "g5", "5"), ("XGROUP", "create", "s", "G5", "5-5"),
        ("XGROUP", "CREATE", "s", "", "0"), ("XGROUP", "CREATE", "s"), ("XGROUP", "CREATE", "s", "g7"),
        ("XGROUP", "CREATE", "nokey", "g", "0", "ENTRIESREAD", "1"), ("XGROUP", "CREATE", "nokey", "g", "x", "MKSTREAM"),
        ("EXISTS", "nokey"), ("XGROUP", "CREATE", "m", "g", "7-7", "MKSTREAM", "ENTRIESREAD", "3"), ("XINFO", "GROUPS", "m"),
        ("XINFO", "STREAM", "m"), ("XINFO", "GROUPS", "s"), ("XINFO", "STREAM", "s"),
        ("XADD", "s", "9-0", "f", "v"), ("XGROUP", "CREATE", "s", "late", "$"), ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "nog", "0"), ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "3"),
        ("XGROUP", "SETID", "s", "g", "-"), ("XGROUP", "SETID", "s", "g", "+"), ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "$"), ("XGROUP", "SETID", "s", "g", "$", "MKSTREAM"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD"), ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "-3"),
        ("XGROUP", "SETID", "s", "g", "x"), ("XGROUP", "SETID", "nokey", "g", "0"), ("XGROUP", "SETID", "s", "g"),
        ("XGROUP", "CREATECONSUMER", "s", "nog", "c"), ("XGROUP", "CREATECONSUMER", "s", "g", "c"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "c"), ("XGROUP", "CREATECONSUMER", "s", "g", ""),
        ("XGROUP", "CREATECONSUMER", "s", "g"), ("XGROUP", "CREATECONSUMER", "s", "g", "c", "x"),
        ("XGROUP", "CREATECONSUMER", "nokey", "g", "c"), ("XINFO", "GROUPS", "s"),
        ("XGROUP", "DELCONSUMER", "s", "g", "c"), ("XGROUP", "DELCONSUMER", "s", "g", "c"),
        ("XGROUP", "DELCONSUMER", "s", "nog", "c"), ("XGROUP", "DELCONSUMER", "nokey", "g", "c"),
        ("XGROUP", "DESTROY", "s", "g"), ("XGROUP", "DESTROY", "s", "g"), ("XGROUP", "DESTROY", "s", "nog", "x"),
        ("XGROUP", "DESTROY", "nokey", "g"), ("XGROUP", "DESTROY", "s"), ("XINFO", "GROUPS", "s"),
        ("XGROUP", "FOO", "s", "g"), ("XGROUP", "FOO"), ("XGROUP",), ("XGROUP", "HELP"), ("XGROUP", "HELP", "x"),
        ("SET", "str", "v"), ("XGROUP", "CREATE", "str", "g", "$", "MKSTREAM"), ("XGROUP", "DESTROY", "str", "g"),
        ("XGROUP", "SETID", "str", "g", "0"), ("XGROUP", "CREATECONSUMER", "str", "g", "c"),
        # the key is checked before the group; groups are listed in byte order
        ("XGROUP", "CREATE", "o", "b", "0", "MKSTREAM"), ("XGROUP", "CREATE", "o", "a", "0"),
        ("XGROUP", "CREATE", "o", "ab", "0"), ("XGROUP", "CREATE", "o", "B", "0"), ("XGROUP", "CREATE", "o", "\xff", "0"),
        ("XGROUP", "CREATE", "o", "a\x00", "0"), ("XINFO", "GROUPS", "o"), ("DEL", "o"), ("XINFO", "GROUPS", "o"),
        ("XGROUP", "CREATE", "o", "a", "0", "MKSTREAM"), ("XINFO", "GROUPS", "o"),
    ],
    "readgroup": [
        *BASE, ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"), ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "1"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "0-0"), ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "(2"), ("XREADGROUP", "GROUP", "g", "nobody", "STREAMS", "s", "0"),
        ("XINFO", "GROUPS", "s"), (T, "XINFO", "CONSUMERS", "s", "g"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "0", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"), ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "-1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "10", "STREAMS", "s", ">"),
        ("XADD", "s", "8-0", "k", "v8"), ("XADD", "s", "9-0", "k", "v9"),
        ("XREADGROUP", "GROUP", "g", "carol", "NOACK", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0"), ("XPENDING", "s", "g"), ("XINFO", "GROUPS", "s"),
        ("XREADGROUP", "GROUP", "g", "dave", "NOACK", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "erin", "NOACK", "STREAMS", "s", ">"), (T, "XINFO", "CONSUMERS", "s", "g"),
        # errors, in the order Redis checks
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "$"), ("XREADGROUP", "GROUP", "nog", "alice", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "nokey", ">"), ("XREADGROUP", "STREAMS", "s", ">"),
        ("XREADGROUP", "COUNT", "1", "STREAMS", "s", ">"), ("XREADGROUP", "GROUP", "g", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s"), ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "x"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "-"), ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "+"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "x", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "-1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "FOO", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "s", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "t", ">"),
        ("SET", "str", "v"), ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "str", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "str", ">", ">"),
        # several streams, one group name each
        ("XADD", "t", "1-0", "t", "1"), ("XGROUP", "CREATE", "t", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "zed", "STREAMS", "s", "t", "0", ">"),
        ("XREADGROUP", "GROUP", "g", "zed", "STREAMS", "t", "s", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "zed", "STREAMS", "t", "s", "0", "0"),
        ("XREADGROUP", "GROUP", "g", "zed", "COUNT", "1", "STREAMS", "s", "t", "0", "0"),
        # deleted entries in a consumer's history: the ID with a null
        ("XDEL", "s", "2-0", "4-0"), ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "0"),
        ("XTRIM", "s", "MAXLEN", "0"), ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"), ("XPENDING", "s", "g"),
        ("XINFO", "GROUPS", "s"),
    ],
    "ack": [
        *BASE, ("XGROUP", "CREATE", "s", "g", "0"), ("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"),
        ("XACK", "s", "g", "1-0", "1-0", "9-9"), ("XACK", "s", "g", "1-0"), ("XACK", "s", "g", "x"),
        ("XACK", "s", "g", "2-0", "x"), ("XPENDING", "s", "g"), ("XACK", "s", "g", "2"), ("XACK", "s", "g", "-"),
        ("XACK", "s", "nog", "3-0"), ("XACK", "nokey", "g", "3-0"), ("XACK", "nokey", "g", "x"), ("XACK", "s", "g"),
        ("XACK", "s", "g", "3-0", "4-0", "5-0"), ("XPENDING", "s", "g"), ("XINFO", "GROUPS", "s"),
        (T, "XINFO", "CONSUMERS", "s", "g"), ("XACK", "s", "g", "6-0", "7-0"), ("XPENDING", "s", "g"),
        (T, "XINFO", "CONSUMERS", "s", "g"), ("SET", "str", "v"), ("XACK", "str", "g", "1-0"), ("XACK", "str", "g", "x"),
    ],
    "pending": [
        *BASE, ("XGROUP", "CREATE", "s", "g", "0"), ("XPENDING", "s", "g"), ("XPENDING", "s", "g", "-", "+", "10"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "3", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"), ("XPENDING", "s", "g"),
        (T, "XPENDING", "s", "g", "-", "+", "10"), (T, "XPENDING", "s", "g", "-", "+", "10", "alice"),
        (T, "XPENDING", "s", "g", "-", "+", "10", "bob"), ("XPENDING", "s", "g", "-", "+", "10", "nobody"),
        (T, "XPENDING", "s", "g", "-", "+", "2"), (T, "XPENDING", "s", "g", "(2", "+", "3"),
        (T, "XPENDING", "s", "g", "(2-0", "(6-0", "10"), (T, "XPENDING", "s", "g", "3", "3", "10"),
        ("XPENDING", "s", "g", "(7-0", "+", "10"), ("XPENDING", "s", "g", "-", "+", "0"), ("XPENDING", "s", "g", "-", "+", "-1"),
        ("XPENDING", "s", "g", "IDLE", "3600000", "-", "+", "10"), ("XPENDING", "s", "g", "IDLE", "3600000", "-", "+", "10", "bob"),
        (SLEEP, 0.1), (T, "XPENDING", "s", "g", "IDLE", "20", "-", "+", "10"),
        (T, "XPENDING", "s", "g", "idle", "20", "-", "+", "2", "bob"), (T, "XPENDING", "s", "g", "IDLE", "-5", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "x", "-", "+", "10"), ("XPENDING", "s", "g", "IDLE", "0", "-", "+"),
        ("XPENDING", "s", "g", "IDLE", "1", "-"), ("XPENDING", "s", "g", "-", "+"), ("XPENDING", "s", "g", "-"),
        ("XPENDING", "s", "g", "-", "+", "x"), ("XPENDING", "s", "g", "x", "+", "10"), ("XPENDING", "s", "g", "-", "x", "10"),
        ("XPENDING", "s", "g", f"({MAX}-{MAX}", "+", "10"), ("XPENDING", "s", "g", "-", "(0-0", "10"),
        (T, "XPENDING", "s", "g", "-", "+", "10", "alice", "extra"), ("XPENDING", "s", "g", "FOO", "1", "-", "+", "10"),
        ("XPENDING", "s", "g", "-", "+", "10", "a", "b", "c"), ("XPENDING", "s", "nog"), ("XPENDING", "nokey", "g"),
        ("XPENDING", "s", "nog", "-", "+", "10"), ("XPENDING", "nokey", "g", "x", "+", "10"),
        ("XPENDING", "s", "g", "-", "+", "10", "alice", "x", "y", "z"), ("XPENDING", "s"),
        ("SET", "str", "v"), ("XPENDING", "str", "g"), ("XPENDING", "str", "g", "-", "+", "1"),
        ("XPENDING", "str", "g", "x", "+", "1"),
    ],
    "claim": [
        *BASE, ("XGROUP", "CREATE", "s", "g", "0"), ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "4", "STREAMS", "s", ">"),
        ("XCLAIM", "s", "g", "bob", "0", "1-0"), (T, "XPENDING", "s", "g", "-", "+", "10"),
        ("XCLAIM", "s", "g", "carol", "0", "1-0", "JUSTID"), (T, "XPENDING", "s", "g", "-", "+", "10"),
        ("XCLAIM", "s", "g", "carol", "0", "1-0", "2-0", "9-0", "5-0"),          # 5-0 not pending, 9-0 absent
        ("XCLAIM", "s", "g", "carol", "3600000", "3-0"), ("XCLAIM", "s", "g", "carol", "-5", "3-0", "JUSTID"),
        ("XCLAIM", "s", "g", "alice", "0", "4-0", "RETRYCOUNT", "7"), (T, "XPENDING", "s", "g", "-", "+", "10"),
        ("XCLAIM", "s", "g", "alice", "0", "4-0", "RETRYCOUNT", "0", "JUSTID"),
        ("XCLAIM", "s", "g", "dave", "0", "5-0", "6-0", "FORCE", "JUSTID"),
        ("XCLAIM", "s", "g", "dave", "0", "8-0", "FORCE"), ("XCLAIM", "s", "g", "dave", "0", "7-0", "FORCE", "RETRYCOUNT", "3"),
        (T, "XPENDING", "s", "g", "-", "+", "10"), ("XINFO", "GROUPS", "s"),
        ("XCLAIM", "s", "g", "dave", "0", "7-0", "LASTID", "7-0"), ("XINFO", "GROUPS", "s"),
        ("XCLAIM", "s", "g", "dave", "0", "7-0", "LASTID", "9-0", "JUSTID"), ("XINFO", "GROUPS", "s"),
        ("XCLAIM", "s", "g", "dave", "0", "7-0", "LASTID", "2-0", "JUSTID"), ("XINFO", "GROUPS", "s"),
        ("XCLAIM", "s", "g", "dave", "0", "9-0", "LASTID", "12-0"), ("XINFO", "GROUPS", "s"),
        # IDLE and TIME set the delivery time; a bad one means now
        ("XCLAIM", "s", "g", "erin", "0", "1-0", "IDLE", "1000000", "JUSTID"), (T, "XPENDING", "s", "g", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "900000", "-", "+", "10", "dave"),
        ("XCLAIM", "s", "g", "erin", "0", "2-0", "TIME", "1000", "JUSTID"), (T, "XPENDING", "s", "g", "1", "2", "10"),
        ("XCLAIM", "s", "g", "erin", "0", "2-0", "TIME", "99999999999999", "JUSTID"),
        ("XCLAIM", "s", "g", "erin", "0", "3-0", "IDLE", "-1", "JUSTID"), (T, "XPENDING", "s", "g", "1", "3", "10"),
        ("XCLAIM", "s", "g", "erin", "900000", "1-0", "2-0", "3-0", "JUSTID"), (T, "XPENDING", "s", "g", "-", "+", "10"),
        # a deleted entry: dropped from the pending list, not returned
        ("XDEL", "s", "2-0", "6-0"), ("XCLAIM", "s", "g", "frank", "0", "1-0", "2-0", "6-0"), ("XPENDING", "s", "g"),
        ("XCLAIM", "s", "g", "frank", "0", "2-0", "FORCE"), ("XPENDING", "s", "g"),
        ("XCLAIM", "s", "g", "frank", "0", "1-0", "1-0", "JUSTID"), (T, "XPENDING", "s", "g", "-", "+", "10"),
        (T, "XINFO", "CONSUMERS", "s", "g"),
        # errors: options end the IDs; the key and group before the rest
        ("XCLAIM", "s", "g", "x", "0", "3-0", "FOO"), ("XCLAIM", "s", "g", "x", "0", "x"),
        ("XCLAIM", "s", "g", "x", "0", "3-0", "x", "4-0"), ("XCLAIM", "s", "g", "x", "y", "3-0"),
        ("XCLAIM", "s", "nog", "x", "0", "3-0"), ("XCLAIM", "nokey", "g", "x", "y", "3-0"),
        ("XCLAIM", "s", "g", "x", "0", "3-0", "IDLE", "x"), ("XCLAIM", "s", "g", "x", "0", "3-0", "TIME", "x"),
        ("XCLAIM", "s", "g", "x", "0", "3-0", "RETRYCOUNT", "x"), ("XCLAIM", "s", "g", "x", "0", "3-0", "LASTID", "x"),
        ("XCLAIM", "s", "g", "x", "0", "3-0", "LASTID", "-"), ("XCLAIM", "s", "g", "x", "0", "3-0", "IDLE"),
        ("XCLAIM", "s", "g", "x", "0"), ("XCLAIM", "s", "g", "x", "0", "-", "JUSTID"), ("XCLAIM", "s", "g", "x", "0", "+"),
        ("XCLAIM", "s", "g", "x", "0", "3-0", "JUSTID", "FORCE", "JUSTID"), ("XINFO", "GROUPS", "s"),
        ("SET", "str", "v"), ("XCLAIM", "str", "g", "x", "0", "1-0"), ("XCLAIM", "str", "g", "x", "y", "1-0"),
    ],
    "autoclaim": [
        *BASE, ("XGROUP", "CREATE", "s", "g", "0"), ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "0", "COUNT", "2"), ("XAUTOCLAIM", "s", "g", "bob", "0", "3-0", "COUNT", "2", "JUSTID"),
        (T, "XPENDING", "s", "g", "-", "+", "10"), ("XAUTOCLAIM", "s", "g", "bob", "0", "(4-0", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "carol", "3600000", "-"), ("XAUTOCLAIM", "s", "g", "carol", "-1", "-", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "carol", "0", "7-0"), ("XAUTOCLAIM", "s", "g", "carol", "0", "8-0"),
        (T, "XPENDING", "s", "g", "-", "+", "10"), (T, "XINFO", "CONSUMERS", "s", "g"),
        # deleted and trimmed entries: out of the pending list, listed third, within COUNT
        ("XDEL", "s", "1-0", "2-0", "5-0"), ("XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "dave", "0", "2-0", "COUNT", "1"), ("XAUTOCLAIM", "s", "g", "dave", "0", "3-0", "COUNT", "2"),
        ("XPENDING", "s", "g"), ("XTRIM", "s", "MAXLEN", "1"), ("XAUTOCLAIM", "s", "g", "erin", "0", "-", "JUSTID"),
        ("XPENDING", "s", "g"), ("XAUTOCLAIM", "s", "g", "erin", "0", "-"), (T, "XINFO", "CONSUMERS", "s", "g"),
        # errors
        ("XAUTOCLAIM", "s", "g", "x", "0", "0", "COUNT", "0"), ("XAUTOCLAIM", "s", "g", "x", "0", "0", "COUNT", "-1"),
        ("XAUTOCLAIM", "s", "g", "x", "0", "0", "COUNT", "x"), ("XAUTOCLAIM", "s", "g", "x", "0", "0", "COUNT", "8070450532247928833"),
        ("XAUTOCLAIM", "s", "g", "x", "0", "0", "COUNT"), ("XAUTOCLAIM", "s", "g", "x", "0", "x"),
        ("XAUTOCLAIM", "s", "g", "x", "x", "0"), ("XAUTOCLAIM", "s", "nog", "x", "0", "0"),
        ("XAUTOCLAIM", "nokey", "g", "x", "0", "0"), ("XAUTOCLAIM", "nokey", "g", "x", "0", "x"),
        ("XAUTOCLAIM", "s", "g", "x", "0", "0", "FOO"), ("XAUTOCLAIM", "s", "g", "x", "0", f"({MAX}-{MAX}"),
        ("XAUTOCLAIM", "s", "g", "x", "0", "+"), ("XAUTOCLAIM", "s", "g", "x", "0"),
        ("XAUTOCLAIM", "s", "g", "x", "0", "0", "JUSTID", "COUNT", "1", "JUSTID"),
        ("SET", "str", "v"), ("XAUTOCLAIM", "str", "g", "x", "0", "0"), ("XAUTOCLAIM", "str", "g", "x", "0", "0", "COUNT", "0"),
        # many pending entries: COUNT and the scan limit of ten times it
        *[("XADD", "m", f"{i}-0", "f", "v") for i in range(1, 41)], ("XGROUP", "CREATE", "m", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "a", "STREAMS", "m", ">"), ("XDEL", "m", *[f"{i}-0" for i in range(2, 41, 2)]),
        ("XAUTOCLAIM", "m", "g", "b", "0", "0", "COUNT", "3", "JUSTID"), ("XAUTOCLAIM", "m", "g", "b", "3600000", "0", "COUNT", "2"),
        ("XAUTOCLAIM", "m", "g", "b", "0", "0", "JUSTID"), ("XPENDING", "m", "g"),
    ],
    "setid-redelivery": [
        *BASE, ("XGROUP", "CREATE", "s", "g", "0"), ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"), ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        (T, "XPENDING", "s", "g", "-", "+", "10"), ("XGROUP", "SETID", "s", "g", "0"), ("XINFO", "GROUPS", "s"),
        ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "2", "STREAMS", "s", ">"), (T, "XPENDING", "s", "g", "-", "+", "10"),
        ("XPENDING", "s", "g"), ("XINFO", "GROUPS", "s"), ("XGROUP", "SETID", "s", "g", "$"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"), ("XGROUP", "SETID", "s", "g", "2-0", "ENTRIESREAD", "2"),
        ("XREADGROUP", "GROUP", "g", "carol", "NOACK", "COUNT", "1", "STREAMS", "s", ">"), (T, "XPENDING", "s", "g", "-", "+", "10"),
        ("XINFO", "GROUPS", "s"), ("XGROUP", "DELCONSUMER", "s", "g", "alice"), ("XGROUP", "DELCONSUMER", "s", "g", "bob"),
        ("XPENDING", "s", "g"), ("XINFO", "GROUPS", "s"), (T, "XINFO", "CONSUMERS", "s", "g"),
        ("XGROUP", "DESTROY", "s", "g"), ("XGROUP", "CREATE", "s", "g", "0"), ("XPENDING", "s", "g"),
        (T, "XINFO", "CONSUMERS", "s", "g"), ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
    ],
    "lag": [
        ("XGROUP", "CREATE", "x", "g1", "0", "MKSTREAM"), (T, "XINFO", "STREAM", "x", "FULL"), ("XINFO", "GROUPS", "x"),
        ("XADD", "x", "1-0", "data", "a"), ("XDEL", "x", "1-0"), (T, "XINFO", "STREAM", "x", "FULL"), ("DEL", "x"),
        *[("XADD", "x", f"{i}-0", "data", c) for i, c in enumerate("abcde", 1)],
        ("XGROUP", "CREATE", "x", "g1", "0"), ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c11", "COUNT", "1", "STREAMS", "x", ">"), ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c12", "COUNT", "10", "STREAMS", "x", ">"), ("XINFO", "GROUPS", "x"),
        ("XADD", "x", "6-0", "data", "f"), ("XINFO", "GROUPS", "x"), ("DEL", "x"),
        *[("XADD", "x", f"{i}-0", "data", c) for i, c in enumerate("abcde", 1)],
        ("XDEL", "x", "3-0"), ("XGROUP", "CREATE", "x", "g1", "0"), ("XGROUP", "CREATE", "x", "g2", "0"),
        ("XGROUP", "CREATE", "x", "g3", "$"), ("XGROUP", "CREATE", "x", "g4", "1-0"), ("XGROUP", "CREATE", "x", "g5", "9-0"),
        ("XINFO", "GROUPS", "x"),
        *[x for _ in range(4) for x in (("XREADGROUP", "GROUP", "g1", "c11", "COUNT", "1", "STREAMS", "x", ">"),
                                        ("XINFO", "GROUPS", "x"))],
        ("XADD", "x", "6-0", "data", "f"), ("XINFO", "GROUPS", "x"), ("XTRIM", "x", "MINID", "=", "3-0"),
        ("XINFO", "GROUPS", "x"), ("XTRIM", "x", "MINID", "=", "5-0"), (T, "XINFO", "STREAM", "x", "FULL"),
        ("XGROUP", "SETID", "x", "g2", "5-0"), ("XGROUP", "SETID", "x", "g4", "0", "ENTRIESREAD", "0"),
        ("XINFO", "GROUPS", "x"), ("XREADGROUP", "GROUP", "g2", "c", "STREAMS", "x", ">"), ("XINFO", "GROUPS", "x"),
        ("XSETID", "x", "7-0", "ENTRIESADDED", "10"), ("XINFO", "GROUPS", "x"), ("XADD", "x", "8-0", "d", "g"),
        ("XREADGROUP", "GROUP", "g4", "c", "COUNT", "1", "STREAMS", "x", ">"), ("XINFO", "GROUPS", "x"),
        ("XGROUP", "SETID", "x", "g5", "$", "ENTRIESREAD", "11"), ("XINFO", "GROUPS", "x"),
        ("XGROUP", "CREATE", "x", "g6", "0", "ENTRIESREAD", "100"), ("XINFO", "GROUPS", "x"),
    ],
    "info-full": [
        *[("XADD", "x", f"{100 + i}", k, "1") for i, k in enumerate("abcef")],
        ("XGROUP", "CREATE", "x", "g1", "0"), ("XGROUP", "CREATE", "x", "g2", "0"),
        ("XREADGROUP", "GROUP", "g1", "Alice", "COUNT", "1", "STREAMS", "x", ">"),
        ("XREADGROUP", "GROUP", "g1", "Bob", "COUNT", "1", "STREAMS", "x", ">"),
        ("XREADGROUP", "GROUP", "g1", "Bob", "NOACK", "COUNT", "1", "STREAMS", "x", ">"),
        ("XREADGROUP", "GROUP", "g2", "Charlie", "COUNT", "4", "STREAMS", "x", ">"), ("XDEL", "x", "103"),
        ("XGROUP", "CREATECONSUMER", "x", "g2", "Dan"),
        (T, "XINFO", "STREAM", "x", "FULL"), (T, "XINFO", "STREAM", "x", "FULL", "COUNT", "1"),
        (T, "XINFO", "STREAM", "x", "FULL", "COUNT", "0"), ("XINFO", "STREAM", "x"), ("XINFO", "GROUPS", "x"),
        (T, "XINFO", "CONSUMERS", "x", "g1"), (T, "XINFO", "CONSUMERS", "x", "g2"), ("XINFO", "CONSUMERS", "x", "nog"),
        ("XINFO", "CONSUMERS", "nokey", "g1"), ("XINFO", "CONSUMERS", "x"), ("XINFO", "CONSUMERS", "x", "g1", "x"),
        ("XINFO", "GROUPS", "nokey"), ("XINFO", "GROUPS", "x", "x"),
    ],
    "transactions": [
        *BASE, ("XGROUP", "CREATE", "s", "g", "0"),
        ("MULTI",), ("XREADGROUP", "GROUP", "g", "a", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "b", "BLOCK", "0", "STREAMS", "s", ">"), ("XACK", "s", "g", "1-0"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"), ("XPENDING", "s", "g"),
        ("XCLAIM", "s", "g", "d", "0", "2-0", "JUSTID"), ("XGROUP", "SETID", "s", "g", "$"),
        ("XREADGROUP", "GROUP", "g", "e", "BLOCK", "0", "STREAMS", "s", ">"), ("EXEC",),
        ("MULTI",), ("XGROUP", "CREATE", "s", "g", "0"), ("XGROUP", "CREATE", "s", "h", "0"), ("EXEC",),
        ("MULTI",), ("XREADGROUP", "GROUP", "g", "a"), ("EXEC",),
        ("EVAL", "return redis.call('XREADGROUP', 'GROUP', 'h', 'lua', 'COUNT', '2', 'STREAMS', KEYS[1], '>')", "1", "s"),
        ("EVAL", "return redis.call('XREADGROUP', 'GROUP', 'h', 'lua', 'BLOCK', '0', 'STREAMS', KEYS[1], '>')", "1", "s"),
        ("EVAL", "return redis.call('XREADGROUP', 'GROUP', 'nog', 'lua', 'STREAMS', KEYS[1], '>')", "1", "s"),
        ("EVAL", "return redis.call('XACK', KEYS[1], 'h', '1-0', '2-0')", "1", "s"),
        ("EVAL", "return redis.call('XPENDING', KEYS[1], 'h')", "1", "s"),
        ("EVAL", "return redis.call('XAUTOCLAIM', KEYS[1], 'h', 'x', '0', '0', 'JUSTID')", "1", "s"),
        ("EVAL", "return redis.call('XINFO', 'GROUPS', KEYS[1])", "1", "s"),
        ("EVAL", "return redis.call('XGROUP', 'CREATE', KEYS[1], 'lua', '$', 'MKSTREAM')", "1", "new"),
        ("EVAL_RO", "return redis.call('XREADGROUP', 'GROUP', 'h', 'ro', 'STREAMS', KEYS[1], '>')", "1", "s"),
        ("EVAL_RO", "return redis.call('XPENDING', KEYS[1], 'h')", "1", "s"), ("XINFO", "GROUPS", "s"),
    ],
    "keys": [
        *BASE, ("XGROUP", "CREATE", "s", "g", "0"), ("XGROUP", "CREATE", "s", "h", "$"),
        ("XREADGROUP", "GROUP", "g", "a", "COUNT", "3", "STREAMS", "s", ">"), ("XGROUP", "CREATECONSUMER", "s", "g", "b"),
        ("COPY", "s", "c"), (T, "XINFO", "STREAM", "c", "FULL"), ("XPENDING", "c", "g"), ("XINFO", "GROUPS", "c"),
        ("XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "STREAMS", "c", ">"), ("XACK", "c", "g", "1-0"),
        ("XPENDING", "s", "g"), ("XPENDING", "c", "g"), ("RENAME", "c", "d"), ("XINFO", "GROUPS", "d"),
        (T, "XINFO", "CONSUMERS", "d", "g"), ("XGROUP", "DESTROY", "d", "g"), ("XINFO", "GROUPS", "s"),
        ("EXPIRE", "s", "100"), ("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"), ("TTL", "s"),
        ("XGROUP", "SETID", "s", "g", "0"), ("TTL", "s"), ("TYPE", "s"), ("OBJECT", "ENCODING", "s"),
        ("COPY", "s", "e", "DB", "1"), ("SELECT", "1"), ("XPENDING", "e", "g"), ("FLUSHDB",), ("SELECT", "0"),
        ("DEL", "s", "d"), ("EXISTS", "s", "d"), ("XINFO", "GROUPS", "s"), ("XPENDING", "s", "g"),
        ("XADD", "s", "1-0", "f", "v"), ("XINFO", "GROUPS", "s"),
    ],
    "arity": [
        ("XGROUP", "CREATE"), ("XGROUP", "CREATE", "s", "g"), ("XGROUP", "SETID", "s", "g"), ("XGROUP", "DESTROY", "s"),
        ("XGROUP", "CREATECONSUMER", "s", "g"), ("XGROUP", "DELCONSUMER", "s", "g"), ("XREADGROUP", "GROUP", "g", "c"),
        ("XACK", "s"), ("XPENDING", "s"), ("XCLAIM", "s", "g", "c", "0"), ("XAUTOCLAIM", "s", "g", "c", "0"),
        ("XINFO", "GROUPS"), ("XINFO", "CONSUMERS", "s"), ("XGROUP", "DESTROY", "s", "g", "x"),
    ],
}


@pytest.mark.parametrize("proto", PROTOS)
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_like_redis(server, redis_peer, script, proto):
    stream_like_redis(server, redis_peer, SCRIPTS[script], proto)


def test_claim_after_trim_like_redis(server, redis_peer):
    """XCLAIM and XAUTOCLAIM of entries a trim removed from nodes of two
    (stream-node-max-entries 2): they leave the pending list."""
    script = [
        ("CONFIG", "SET", "stream-node-max-entries", "2"),
        ("XADD", "x", "1-0", "f", "v"), ("XADD", "x", "2-0", "f", "v"), ("XADD", "x", "3-0", "f", "v"),
        ("XGROUP", "CREATE", "x", "grp", "0"), ("XREADGROUP", "GROUP", "grp", "Alice", "STREAMS", "x", ">"),
        ("XTRIM", "x", "MAXLEN", "1"), ("XCLAIM", "x", "grp", "Bob", "0", "1-0", "2-0", "3-0"),
        ("XPENDING", "x", "grp", "-", "+", "10", "Alice"), ("DEL", "x"),
        ("XADD", "x", "1-0", "f", "v"), ("XADD", "x", "2-0", "f", "v"), ("XADD", "x", "3-0", "f", "v"),
        ("XGROUP", "CREATE", "x", "grp", "0"), ("XREADGROUP", "GROUP", "grp", "Alice", "STREAMS", "x", ">"),
        ("XTRIM", "x", "MAXLEN", "~", "1"), ("XAUTOCLAIM", "x", "grp", "Bob", "0", "0-0"),
        ("XPENDING", "x", "grp", "-", "+", "10", "Alice"), ("XPENDING", "x", "grp"),
    ]
    stream_like_redis(server, redis_peer, script, 2)


# ---------------------------------------------------------------------------
# Idle times and delivery counts
# ---------------------------------------------------------------------------

def idle_story(port):
    """Idle times on one server, checked against the sleeps between the
    steps (lower bounds) and the order of the steps (an entry delivered
    later is idle for less); returns the delivery counts and pending lists
    seen, for comparing servers."""
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
    r.flushall()
    for i in range(1, 7):
        r.xadd("s", {"k": i}, id=f"{i}-0")
    r.xgroup_create("s", "g", "0")
    r.xreadgroup("g", "old", {"s": ">"}, count=3)
    time.sleep(2.0)
    r.xreadgroup("g", "new", {"s": ">"}, count=3)
    pend = r.xpending_range("s", "g", "-", "+", 10)
    idle = {p["message_id"]: p["time_since_delivered"] for p in pend}
    assert all(1900 <= idle[f"{i}-0".encode()] < 600000 for i in (1, 2, 3)), idle
    assert all(idle[f"{i}-0".encode()] < idle[b"1-0"] for i in (4, 5, 6)), idle
    # IDLE picks the old ones; XAUTOCLAIM's min-idle-time likewise
    old = r.xpending_range("s", "g", "-", "+", 10, idle=1500)
    assert [p["message_id"] for p in old] == [b"1-0", b"2-0", b"3-0"], old
    assert r.xpending_range("s", "g", "-", "+", 10, idle=600000) == []
    claimed = r.xautoclaim("s", "g", "thief", 1500, "0-0", justid=True)     # redis-py: the IDs
    assert claimed == [b"1-0", b"2-0", b"3-0"], claimed
    # a claim restarts the idle time; the consumers' idle times follow their reads
    pend = {p["message_id"]: p for p in r.xpending_range("s", "g", "-", "+", 10)}
    assert pend[b"1-0"]["consumer"] == b"thief"
    assert pend[b"1-0"]["time_since_delivered"] <= pend[b"4-0"]["time_since_delivered"], pend
    time.sleep(0.5)
    cons = {c["name"]: c for c in r.xinfo_consumers("s", "g")}
    assert cons[b"old"]["idle"] >= 2400 and 400 <= cons[b"thief"]["idle"] < cons[b"old"]["idle"], cons
    r.xreadgroup("g", "old", {"s": "0"})                  # a read refreshes the consumer
    cons2 = {c["name"]: c for c in r.xinfo_consumers("s", "g")}
    assert cons2[b"old"]["idle"] <= cons2[b"thief"]["idle"], cons2
    # delivery counts: history reads count, JUSTID claims do not, others do
    r.xclaim("s", "g", "new", 0, [b"4-0"])
    r.xclaim("s", "g", "new", 0, [b"5-0"], justid=True)
    r.xreadgroup("g", "new", {"s": "0"})
    r.xautoclaim("s", "g", "new", 0, "6-0")
    counts = [(p["message_id"], p["consumer"], p["times_delivered"])
              for p in r.xpending_range("s", "g", "-", "+", 10)]
    full = r.xinfo_stream("s", full=True)
    group = full["groups"][0]
    shapes = (counts, group["pel-count"], [(c[b"name"], c[b"pel-count"]) for c in group["consumers"]],
              [(c["name"], c["pending"]) for c in r.xinfo_consumers("s", "g")])
    r.close()
    return shapes


def test_idle_times_and_delivery_counts(server, redis_peer):
    a = idle_story(server.resp_port)
    b = idle_story(redis_peer.resp_port)
    assert a == b


# ---------------------------------------------------------------------------
# Blocked XREADGROUP
# ---------------------------------------------------------------------------

def group_blocking_story(port, proto):
    """Clients blocked in XREADGROUP and what wakes them, on one server:
    every reply in order; (TIMED, reply) where times are in it."""
    out = []
    ctl = RawConn(port, proto)
    out.append(ctl.call("FLUSHALL"))
    w = [RawConn(port, proto) for _ in range(3)]

    def xrg(i, consumer, key="s", group="g", extra=()):
        w[i].send(resp_command("XREADGROUP", "GROUP", group, consumer, *extra, "BLOCK", "0", "STREAMS", key, ">"))

    out.append(ctl.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"))
    # served by a later XADD; several consumers served in order, one entry each
    for i, name in enumerate(("alice", "bob", "carol")):
        xrg(i, name)
        wait_blocked(ctl, i + 1)
    out.append(ctl.call("XADD", "s", "1-0", "f", "1"))
    out.append(w[0].read_raw())
    out.append(ctl.call("XADD", "s", "2-0", "f", "2"))
    out.append(w[1].read_raw())
    out += [ctl.call("MULTI"), ctl.call("XADD", "s", "3-0", "f", "3"), ctl.call("XADD", "s", "4-0", "f", "4"),
            ctl.call("EXEC")]
    out.append(w[2].read_raw())                        # both: nobody else was waiting
    out.append(ctl.call("XPENDING", "s", "g"))
    out.append((TIMED, ctl.call("XINFO", "CONSUMERS", "s", "g")))
    # NOACK, and a new consumer made when served
    xrg(0, "dave", extra=("NOACK",))
    wait_blocked(ctl, 1)
    out.append(ctl.call("XADD", "s", "5-0", "f", "5"))
    out.append(w[0].read_raw())
    out += [ctl.call("XPENDING", "s", "g"), ctl.call("XINFO", "GROUPS", "s")]
    # an XADD then XDEL leaves nothing to serve: BLOCK times out with a null
    out += [ctl.call("XADD", "s", "6-0", "f", "6"), ctl.call("XDEL", "s", "6-0")]
    out.append(w[0].call("XREADGROUP", "GROUP", "g", "erin", "BLOCK", "30", "STREAMS", "s", ">"))
    out.append(w[0].call("XREADGROUP", "GROUP", "g", "erin", "BLOCK", "30", "COUNT", "3", "STREAMS", "s", ">"))
    # BLOCK with an ID other than '>' answers at once from the history
    out.append(w[0].call("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", "0"))
    out.append(w[0].call("XREADGROUP", "GROUP", "g", "erin", "BLOCK", "0", "STREAMS", "s", "0"))
    out.append(ctl.call("XADD", "s", "6-5", "f", "6"))
    out.append(w[0].call("XREADGROUP", "GROUP", "g", "erin", "BLOCK", "0", "STREAMS", "s", ">"))
    # a group that is behind is served at once
    out.append(ctl.call("XGROUP", "SETID", "s", "g", "3-0"))
    out.append(w[0].call("XREADGROUP", "GROUP", "g", "frank", "BLOCK", "0", "COUNT", "1", "STREAMS", "s", ">"))
    out.append(ctl.call("XGROUP", "SETID", "s", "g", "$"))
    # the group destroyed: NOGROUP; the key deleted, overwritten, flushed: UNBLOCKED
    xrg(0, "alice")
    wait_blocked(ctl, 1)
    out.append(ctl.call("XGROUP", "DESTROY", "s", "g"))
    out.append(w[0].read_raw())
    for kill in ([("DEL", "s")], [("SET", "s", "v")], [("MULTI",), ("DEL", "s"), ("SADD", "s", "e1"), ("EXEC",)],
                 [("FLUSHALL",)], [("UNLINK", "s")], [("RENAME", "s", "elsewhere")]):
        out += [ctl.call("DEL", "s", "elsewhere"), ctl.call("XADD", "s", "1-0", "f", "v"),
                ctl.call("XGROUP", "CREATE", "s", "g", "$")]
        xrg(0, "alice")
        wait_blocked(ctl, 1)
        out += [ctl.call(*cmd) for cmd in kill]
        out.append(w[0].read_raw())
        wait_blocked(ctl, 0)
    # XREAD waiting on the same key stays blocked when it is deleted
    out += [ctl.call("DEL", "s"), ctl.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")]
    w[1].send(resp_command("XREAD", "BLOCK", "0", "STREAMS", "s", "$"))
    xrg(0, "alice")
    wait_blocked(ctl, 2)
    out.append(ctl.call("DEL", "s"))
    out.append(w[0].read_raw())
    wait_blocked(ctl, 1)
    out.append(ctl.call("XADD", "s", "1-0", "f", "v"))
    out.append(w[1].read_raw())
    # RENAME of a stream with the group onto the key: served; without it: NOGROUP
    out += [ctl.call("DEL", "s"), ctl.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")]
    xrg(0, "alice")
    wait_blocked(ctl, 1)
    out += [ctl.call("XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM"), ctl.call("XADD", "s2", "100-0", "f1", "v1"),
            ctl.call("RENAME", "s2", "s")]
    out.append(w[0].read_raw())
    xrg(0, "alice")
    wait_blocked(ctl, 1)
    out += [ctl.call("XADD", "s3", "200-0", "f1", "v1"), ctl.call("RENAME", "s3", "s")]
    out.append(w[0].read_raw())
    # a timeout, and CLIENT UNBLOCK
    out.append(w[0].call("XREADGROUP", "GROUP", "g", "x", "BLOCK", "40", "STREAMS", "s", ">"))
    out += [ctl.call("DEL", "s"), ctl.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")]
    wid = w[2].call("CLIENT", "ID")[1:-2].decode()
    xrg(2, "alice")
    wait_blocked(ctl, 1)
    out.append(ctl.call("CLIENT", "UNBLOCK", wid))
    out.append(w[2].read_raw())
    xrg(2, "alice")
    wait_blocked(ctl, 1)
    out.append(ctl.call("CLIENT", "UNBLOCK", wid, "ERROR"))
    out.append(w[2].read_raw())
    out.append(ctl.call("XINFO", "GROUPS", "s"))
    for c in w + [ctl]:
        c.close()
    return out


@pytest.mark.parametrize("proto", PROTOS)
def test_blocked_xreadgroup_like_redis(server, redis_peer, proto):
    got = group_blocking_story(server.resp_port, proto)
    want = group_blocking_story(redis_peer.resp_port, proto)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        if isinstance(b, tuple):
            assert isinstance(a, tuple) and compare_timed(a[1], b[1]), f"step {i}: pkvs {a!r}, redis {b!r}"
        else:
            assert a == b, f"step {i}: pkvs {a!r}, redis {b!r}"


def test_many_consumers_blocked(server):
    """30 consumers of one group blocked with '>', then 30 entries added
    one at a time: each consumer gets exactly one, in the order they
    blocked, and each entry is pending for the consumer that got it."""
    ctl = RawConn(server.resp_port)
    ctl.call("FLUSHALL")
    ctl.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    results = {}
    conns = [redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=30) for _ in range(30)]

    def read(i):
        results[i] = conns[i].xreadgroup("g", f"c{i:02d}", {"s": ">"}, block=0)
    threads = []
    for i in range(30):
        threads.append(threading.Thread(target=read, args=(i,)))
        threads[-1].start()
        wait_blocked(ctl, i + 1)
    for i in range(30):
        ctl.call("XADD", "s", f"{i + 1}-0", "n", str(i))
    for t in threads:
        t.join(20)
    for i in range(30):
        assert results[i] == [[b"s", [(f"{i + 1}-0".encode(), {b"n": str(i).encode()})]]], (i, results.get(i))
    r = redis.Redis(host="127.0.0.1", port=server.resp_port, socket_timeout=10)
    pend = r.xpending_range("s", "g", "-", "+", 100)
    assert [(p["message_id"], p["consumer"], p["times_delivered"]) for p in pend] == \
        [(f"{i + 1}-0".encode(), f"c{i:02d}".encode(), 1) for i in range(30)]
    for c in conns + [r]:
        c.close()
    ctl.close()


# ---------------------------------------------------------------------------
# Keyspace notifications
# ---------------------------------------------------------------------------

GROUP_EVENTS = [
    ("XGROUP", "CREATE", "s", "g", "$"), ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    ("XGROUP", "CREATE", "s", "g", "$"), ("XGROUP", "CREATE", "s", "h", "0"), ("XADD", "s", "1-0", "f", "v"),
    ("XADD", "s", "2-0", "f", "v"), ("XGROUP", "SETID", "s", "g", "0"), ("XGROUP", "SETID", "s", "nog", "0"),
    ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "0"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "c1"), ("XGROUP", "CREATECONSUMER", "s", "g", "c1"),
    ("XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c3", "STREAMS", "s", ">"), ("XREADGROUP", "GROUP", "g", "c4", "NOACK", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c5", "STREAMS", "s", "0"), ("XACK", "s", "g", "1-0"), ("XACK", "s", "g", "9-0"),
    ("XCLAIM", "s", "g", "c6", "0", "2-0"), ("XCLAIM", "s", "g", "c7", "0", "9-0"), ("XCLAIM", "s", "g", "c6", "0", "2-0"),
    ("XAUTOCLAIM", "s", "g", "c8", "0", "0"), ("XAUTOCLAIM", "s", "g", "c9", "0", "0"),
    ("XGROUP", "SETID", "s", "h", "$"), ("XDEL", "s", "2-0"), ("XAUTOCLAIM", "s", "g", "c10", "0", "0"),
    ("XGROUP", "DELCONSUMER", "s", "g", "c1"), ("XGROUP", "DELCONSUMER", "s", "g", "c1"),
    ("XGROUP", "DELCONSUMER", "s", "g", "c8"), ("XGROUP", "DESTROY", "s", "g"), ("XGROUP", "DESTROY", "s", "g"),
    ("XPENDING", "s", "h"), ("XINFO", "GROUPS", "s"),
    ("MULTI",), ("XGROUP", "CREATE", "s", "m", "0"), ("XREADGROUP", "GROUP", "m", "mc", "STREAMS", "s", ">"),
    ("XGROUP", "DESTROY", "s", "m"), ("EXEC",),
    ("EVAL", "redis.call('XGROUP', 'CREATE', KEYS[1], 'l', '0', 'MKSTREAM'); "
             "return redis.call('XGROUP', 'CREATECONSUMER', KEYS[1], 'l', 'lc')", "1", "lua"),
    ("DEL", "s"),
]


@pytest.mark.parametrize("proto", PROTOS)
def test_keyspace_events_like_redis(server, redis_peer, proto):
    pw, rw = watch_both(server.resp_port, redis_peer.resp_port, proto=proto)
    try:
        compare_events(pw, rw, GROUP_EVENTS)
    finally:
        pw.close()
        rw.close()


def served_block_events(port):
    """The events a served blocked XREADGROUP causes (the consumer made
    when it is served), as a subscriber sees them."""
    from test_pkvs_notify import Watch
    wch = Watch(port)
    wch.run("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    w = RawConn(port)
    w.send(resp_command("XREADGROUP", "GROUP", "g", "late", "BLOCK", "0", "STREAMS", "s", ">"))
    wait_blocked(wch.c, 1)
    got = [wch.run("XADD", "s", "1-0", "f", "v"), w.read_raw()]
    w.close()
    wch.close()
    return got


def test_served_block_events_like_redis(server, redis_peer):
    assert served_block_events(server.resp_port) == served_block_events(redis_peer.resp_port)


# ---------------------------------------------------------------------------
# Random sequences
# ---------------------------------------------------------------------------

class RandomGroups:
    """Random group commands on two streams with explicit IDs (exact trims
    only, so that only the groups' rules are at stake); which replies hold
    times is known per command (TIMED)."""

    def __init__(self, rng):
        self.rng = rng
        self.top = {"s1": 0, "s2": 0}
        self.ids = {"s1": [], "s2": []}

    def some_id(self, k):
        rng = self.rng
        if self.ids[k] and rng.random() < 0.7:
            return "%d-%d" % rng.choice(self.ids[k][-60:])
        return rng.choice(["0", "0-0", "$", f"{self.top[k] + 1}-0", f"{max(0, self.top[k] - 3)}"])

    def step(self):
        rng = self.rng
        k = rng.choice(["s1", "s2"])
        g = rng.choice(["g1", "g1", "g2"])
        c = rng.choice(["c1", "c2", "c3", "c4"])
        op = rng.choices(["add", "read", "history", "ack", "claim", "autoclaim", "create", "setid", "del", "trim",
                          "consumer", "destroy", "pending", "pending-range", "groups", "full", "consumers", "setid-s"],
                         [20, 14, 4, 8, 6, 5, 3, 3, 5, 2, 2, 1, 4, 3, 4, 2, 2, 1])[0]
        if op == "add":
            ms = self.top[k] + rng.choice([0, 1, 1, 2])
            return None, ("XADD", k, f"{ms}-*" if rng.random() < 0.5 else str(ms), "f", str(rng.randint(0, 99)))
        if op == "read":
            extra = (["COUNT", str(rng.randint(1, 4))] if rng.random() < 0.7 else []) + \
                (["NOACK"] if rng.random() < 0.15 else [])
            return None, ("XREADGROUP", "GROUP", g, c, *extra, "STREAMS", k, ">")
        if op == "history":
            return None, ("XREADGROUP", "GROUP", g, c, "STREAMS", k, rng.choice(["0", self.some_id(k)]).strip("$") or "0")
        if op == "ack":
            return None, ("XACK", k, g, *[self.some_id(k).replace("$", "0") for _ in range(rng.randint(1, 3))])
        if op == "claim":
            opts = [o for o in ("JUSTID", "FORCE") if rng.random() < 0.3]
            if rng.random() < 0.2:
                opts += ["RETRYCOUNT", str(rng.randint(0, 5))]
            return None, ("XCLAIM", k, g, c, "0", *[self.some_id(k).replace("$", "0") for _ in range(rng.randint(1, 3))],
                          *opts)
        if op == "autoclaim":
            return None, ("XAUTOCLAIM", k, g, c, "0", self.some_id(k).replace("$", "0"), "COUNT", str(rng.randint(1, 5)),
                          *(["JUSTID"] if rng.random() < 0.3 else []))
        if op in ("create", "setid"):
            extra = ["ENTRIESREAD", str(rng.randint(0, 12))] if rng.random() < 0.3 else []
            if op == "create" and rng.random() < 0.3:
                extra.append("MKSTREAM")
            return None, ("XGROUP", op.upper(), k, g, self.some_id(k), *extra)
        if op == "del":
            return None, ("XDEL", k, *[self.some_id(k).replace("$", "0") for _ in range(rng.randint(1, 2))])
        if op == "trim":
            if rng.random() < 0.5:
                return None, ("XTRIM", k, "MAXLEN", str(rng.randint(0, 10)))
            return None, ("XTRIM", k, "MINID", self.some_id(k).replace("$", "0"))
        if op == "consumer":
            return None, ("XGROUP", rng.choice(["CREATECONSUMER", "DELCONSUMER"]), k, g, c)
        if op == "destroy":
            return None, ("XGROUP", "DESTROY", k, g)
        if op == "pending":
            return None, ("XPENDING", k, g)
        if op == "pending-range":
            return TIMED, ("XPENDING", k, g, "-", "+", "100", *([c] if rng.random() < 0.3 else []))
        if op == "groups":
            return None, ("XINFO", "GROUPS", k)
        if op == "full":
            return TIMED, ("XINFO", "STREAM", k, "FULL")
        if op == "consumers":
            return TIMED, ("XINFO", "CONSUMERS", k, g)
        return None, ("XSETID", k, f"{self.top[k] + rng.randint(0, 2)}-{rng.randint(0, 3)}",
                      *(["ENTRIESADDED", str(rng.randint(0, 40))] if rng.random() < 0.3 else []))

    def saw(self, cmd, reply):
        if cmd[0] == "XADD" and reply.startswith(b"$") and not reply.startswith(b"$-1"):
            ms, seq = (int(x) for x in reply.split(b"\r\n")[1].split(b"-"))
            self.top[cmd[1]] = ms
            self.ids[cmd[1]].append((ms, seq))
        elif cmd[0] == "XSETID" and reply == b"+OK\r\n":
            self.top[cmd[1]] = int(cmd[2].split("-")[0])


@pytest.mark.parametrize("seed", [1, 2])
def test_random_group_sequences_like_redis(server, redis_peer, seed):
    """2,000 random group commands, every reply compared (times within
    the tolerance)."""
    p = Peers(server.resp_port, redis_peer.resp_port, 2 if seed % 2 else 3)
    p.both("FLUSHALL")
    gen = RandomGroups(random.Random(seed))
    try:
        for i in range(2000):
            kind, cmd = gen.step()
            got, want = p.both(*cmd)
            ok = compare_timed(got, want) if kind is TIMED else got == want
            assert ok, f"step {i} {cmd!r}: pkvs {got[:500]!r}, redis {want[:500]!r}"
            gen.saw(cmd, want)
    finally:
        p.close()


# ---------------------------------------------------------------------------
# Durability
# ---------------------------------------------------------------------------

def group_state(port):
    """Everything about a stream's groups that does not move with the
    clock, read with redis-py."""
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
    out = {"full": r.execute_command("XINFO", "STREAM", "s", "FULL", "COUNT", "0"),
           "groups": r.xinfo_groups("s"), "entries": r.xrange("s")}
    for g in (b"g1", b"g2", b"empty"):
        out[g] = (r.xpending("s", g), [(p["message_id"], p["consumer"], p["times_delivered"])
                                        for p in r.xpending_range("s", g, "-", "+", 1000)],
                  [(c["name"], c["pending"]) for c in r.xinfo_consumers("s", g)])
    r.close()
    return out


@pytest.mark.crash
def test_groups_survive_kill9(pkvs):
    """Groups with consumers, pending entries (read, claimed with
    RETRYCOUNT and TIME, acknowledged in part), a rewound group and one
    with only a consumer: after kill -9 and a restart XINFO STREAM FULL
    (delivery and seen times included), XPENDING and XINFO GROUPS are
    what they were, and reading on continues from the last delivered ID."""
    srv = pkvs.start(http=False)
    r = redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=10)
    for i in range(1, 41):
        r.xadd("s", {"n": i, "pad": "p" * (i * 37 % 700)}, id=f"{i}-0")
    r.xgroup_create("s", "g1", "0")
    r.xgroup_create("s", "g2", "5-0", entries_read=5)
    r.xgroup_create("s", "empty", "$")
    r.xgroup_createconsumer("s", "empty", "idle-consumer")
    for c in ("a", "b", "c"):
        r.xreadgroup("g1", c, {"s": ">"}, count=7)
    r.xreadgroup("g1", "d", {"s": ">"}, count=3, noack=True)
    r.xack("s", "g1", "2-0", "9-0", "15-0")
    r.xclaim("s", "g1", "e", 0, ["3-0", "10-0"], retrycount=9, time=1_600_000_000_000)
    r.xreadgroup("g1", "a", {"s": "0"})
    r.xautoclaim("s", "g1", "f", 0, "16-0", count=2)
    r.xreadgroup("g2", "x", {"s": ">"}, count=10)
    r.xgroup_setid("s", "g2", "2-0")
    r.xreadgroup("g2", "y", {"s": ">"}, count=4)
    r.xdel("s", "20-0", "21-0")
    r.close()
    before = group_state(srv.resp_port)
    srv.kill9()
    srv.start()
    after = group_state(srv.resp_port)
    for k in before:
        assert after[k] == before[k], k
    r = redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=10)
    nxt = r.xreadgroup("g1", "a", {"s": ">"}, count=1)
    assert nxt[0][1][0][0] == b"25-0", nxt
    assert r.xreadgroup("g2", "y", {"s": ">"}, count=1)[0][1][0][0] == b"7-0"
    r.close()
    srv.stop(keep_store=True)


LUA_DELIVER = """
redis.call('XADD', KEYS[1], ARGV[1], 'f', ARGV[1])
local got = redis.call('XREADGROUP', 'GROUP', 'g', ARGV[2], 'COUNT', '1', 'STREAMS', KEYS[1], '>')
if ARGV[3] ~= '' then redis.call('XACK', KEYS[1], 'g', ARGV[3]) end
return got[1][2][1][1]
"""


@pytest.mark.crash
def test_acknowledged_deliveries_pending_after_kill9(pkvs):
    """Writers each add an entry, read it through the group and acknowledge
    every third one before (one script per step), until kill -9: after the
    restart every step acknowledged is there — its entry, its pending entry
    (or its XACK), the group's last delivered ID at least its entry."""
    srv = pkvs.start(http=False)
    with RawConn(srv.resp_port) as c:
        for t in range(4):
            assert c.call("XGROUP", "CREATE", f"s{t}", "g", "0", "MKSTREAM") == b"+OK\r\n"

    def step(t, g):
        ack = f"{g - 1}-0" if g % 3 == 0 else ""
        return ("EVAL", LUA_DELIVER, "1", f"s{t}", f"{g}-0", f"c{t}", ack)
    acked = generations_acked_under_kill9(srv, 4, step, lambda reply: isinstance(reply, bytes))
    assert all(acked.get(t, 0) > 10 for t in range(4)), acked
    srv.start()
    r = redis.Redis(host="127.0.0.1", port=srv.resp_port, socket_timeout=20)
    for t in range(4):
        n = acked[t]
        ids = [int(e[0].split(b"-")[0]) for e in r.xrange(f"s{t}")]
        assert ids[:n] == list(range(1, n + 1)) and len(ids) <= n + 1, (t, n, ids[-3:])
        done = len(ids)
        acks = {g - 1 for g in range(3, done + 1, 3)}
        pend = [int(p["message_id"].split(b"-")[0]) for p in r.xpending_range(f"s{t}", "g", "-", "+", 100000)]
        assert pend == [g for g in range(1, done + 1) if g not in acks], (t, n, done)
        group = r.xinfo_groups(f"s{t}")[0]
        assert group["last-delivered-id"] == f"{done}-0".encode() and group["pending"] == len(pend)
        assert group["entries-read"] == done and group["lag"] == 0
    r.close()
    srv.stop(keep_store=True)


# ---------------------------------------------------------------------------
# Replication
# ---------------------------------------------------------------------------

def replica_view(port):
    c = RawConn(port)
    out = {}
    for key in ("s", "t", "x"):
        out[key] = (c.call("XRANGE", key, "-", "+"), c.call("XINFO", "STREAM", key, "FULL"),
                    c.call("XINFO", "GROUPS", key) if c.call("EXISTS", key) == b":1\r\n" else None)
    c.close()
    return out


def test_replicas_agree(pkvs):
    """A pkvs primary, a pkvs replica and a redis-server replica: a full
    synchronization carrying streams with groups, then every stream write
    on the primary; the replicas end with the same XRANGE, XINFO STREAM
    FULL (seen times aside) and XINFO GROUPS as each other, and the same
    entries and pending lists as the primary (a group's entries-read and
    lag are what the propagated XCLAIMs make of them, as on Redis)."""
    primary = pkvs.start(http=False)
    p = redis.Redis(host="127.0.0.1", port=primary.resp_port, socket_timeout=10)
    for i in range(1, 31):
        p.xadd("s", {"n": i}, id=f"{i}-1")
    p.xgroup_create("s", "g", "0")
    p.xreadgroup("g", "early", {"s": ">"}, count=5)
    p.xgroup_create("x", "lonely", "$", mkstream=True)
    p.xadd("t", {"d": 1}, id="1-0")
    p.xdel("t", "1-0")
    replica = pkvs.start(http=False)
    rs = started_redis(tag="replica")
    try:
        rp = redis.Redis(host="127.0.0.1", port=replica.resp_port, socket_timeout=10)
        rr = redis.Redis(host="127.0.0.1", port=rs.resp_port, socket_timeout=10)
        rp.replicaof("127.0.0.1", primary.resp_port)
        rr.replicaof("127.0.0.1", primary.resp_port)
        assert wait_until(lambda: link_up(rp) and link_up(rr), 20)
        p.xadd("s", {"auto": 1})
        p.xadd("s", {"auto": 2}, maxlen=20, approximate=True)
        p.config_set("stream-node-max-entries", 5)
        for i in range(10):
            p.xadd("t", {"i": i}, maxlen=4, approximate=True)
        p.xtrim("t", minid="0-1", approximate=True)
        p.xreadgroup("g", "c1", {"s": ">"}, count=3)
        p.xreadgroup("g", "c2", {"s": ">"}, count=4, noack=True)
        p.xreadgroup("g", "c3", {"s": ">"}, count=2)
        p.xreadgroup("g", "c1", {"s": "0"})
        p.xack("s", "g", "7-1", "8-1")
        p.xclaim("s", "g", "c4", 0, ["9-1", "1-1"])
        p.xclaim("s", "g", "c4", 0, ["2-1"], justid=True, retrycount=5, idle=5000)
        p.xautoclaim("s", "g", "c5", 0, "3-1", count=2)
        p.xdel("s", "4-1")
        p.xautoclaim("s", "g", "c6", 0, "0-0", count=100)
        p.xgroup_create("s", "h", "10-1")
        p.xgroup_setid("s", "h", "12-1", entries_read=12)
        p.xreadgroup("h", "hc", {"s": ">"}, count=1)
        p.xgroup_createconsumer("s", "h", "made")
        p.xgroup_delconsumer("s", "g", "c3")
        p.xtrim("s", maxlen=18)
        p.execute_command("XSETID", "x", "5-5", "ENTRIESADDED", "9", "MAXDELETEDID", "5-0")
        p.config_set("stream-node-max-entries", 100)
        assert p.wait(2, 10000) == 2
        views = {name: replica_view(port) for name, port in
                 (("primary", primary.resp_port), ("pkvs", replica.resp_port), ("redis", rs.resp_port))}
        for key in ("s", "t", "x"):
            want = views["redis"][key]
            got = views["pkvs"][key]
            assert got[0] == want[0], key
            keys = {b"seen-time"} | RADIX
            assert masked(got[1], keys) == masked(want[1], keys), (key, got[1], want[1])
            assert got[2] == want[2], key
            prim = views["primary"][key]
            assert prim[0] == want[0], key
            keys |= {b"entries-read", b"lag"}
            assert masked(prim[1], keys) == masked(want[1], keys), (key, prim[1], want[1])
    finally:
        rs.stop()


def propagated(conn, st, steps):
    """Run steps on conn; the commands the primary sent to st for each,
    XCLAIM's TIME masked."""
    out = []
    in_multi = False
    for n, cmd in enumerate(steps):
        reply = conn.call(*cmd)
        in_multi = cmd[0] == "MULTI" or (in_multi and cmd[0] != "EXEC")
        if in_multi:
            out.append((cmd, reply))
            continue
        conn.call("SET", "__mark__", str(n))
        cmds = []
        while True:
            c = st.cmd()
            if c[0] in ("ping", "select", "replconf"):
                continue
            if c[:2] == ["set", "__mark__"]:
                break
            if c[0] == "xclaim" and "TIME" in c:
                c[c.index("TIME") + 1] = "T"
            cmds.append(c)
        out.append((cmd, reply, cmds))
    return out


PROPAGATED = [
    ("CONFIG", "SET", "stream-node-max-entries", "2"), ("XADD", "s", "1-0", "f", "v"), ("XADD", "s", "2-*", "f", "v"), ("XADD", "s", "3", "f", "v"),
    ("XADD", "s", "99999999999999-0", "f", "v"), ("XADD", "s", "*", "f", "v"), ("XADD", "s", "1-0", "f", "v"),
    ("XADD", "nokey", "NOMKSTREAM", "*", "f", "v"), ("XADD", "s", "MAXLEN", "~", "2", "99999999999999-9", "f", "v"),
    ("XADD", "s", "MAXLEN", "=", "4", "99999999999999-10", "f", "v"),
    ("XADD", "s", "MINID", "~", "3", "LIMIT", "10", "99999999999999-11", "f", "v"),
    ("XTRIM", "s", "MAXLEN", "~", "1"), ("XTRIM", "s", "MAXLEN", "10"), ("XTRIM", "s", "MINID", "3-0"),
    *[("XADD", "s", f"99999999999999-{i}", "f", "v") for i in range(20, 27)], ("XTRIM", "s", "MAXLEN", "~", "5"),
    ("XTRIM", "s", "MINID", "~", "99999999999999-22", "LIMIT", "2"), ("XTRIM", "s", "MAXLEN", "6"),
    ("XDEL", "s", "9-9"), ("XDEL", "s", "3-0"),
    ("XGROUP", "CREATE", "s", "g", "0"), ("XGROUP", "CREATE", "s", "g", "0"), ("XGROUP", "CREATE", "n", "g", "$", "MKSTREAM"),
    ("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c2", "NOACK", "COUNT", "1", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c3", "STREAMS", "s", ">"), ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"),
    ("XREADGROUP", "GROUP", "g", "c9", "NOACK", "STREAMS", "s", ">"),
    ("XACK", "s", "g", "99999999999999-0", "1-1"), ("XCLAIM", "s", "g", "c4", "0", "99999999999999-9", "JUSTID"),
    ("XCLAIM", "s", "g", "c4", "0", "99999999999999-10", "RETRYCOUNT", "6"), ("XDEL", "s", "99999999999999-10"),
    ("XCLAIM", "s", "g", "c5", "0", "99999999999999-10"), ("XCLAIM", "s", "g", "c5", "0", "1-0", "LASTID", "99999999999999-99"),
    ("XCLAIM", "s", "g", "c5", "3600000", "99999999999999-9"),
    ("XAUTOCLAIM", "s", "g", "c6", "0", "0", "COUNT", "1"), ("XAUTOCLAIM", "s", "g", "c6", "0", "0", "JUSTID"),
    ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "0"), ("XGROUP", "SETID", "s", "g", "$"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "c7"), ("XGROUP", "CREATECONSUMER", "s", "g", "c7"),
    ("XGROUP", "DELCONSUMER", "s", "g", "c7"), ("XGROUP", "DELCONSUMER", "s", "g", "nobody"),
    ("XSETID", "s", "99999999999999-99"), ("XSETID", "s", "1-0"),
    ("MULTI",), ("XADD", "m", "1-0", "a", "b"), ("XGROUP", "CREATE", "m", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "mc", "STREAMS", "m", ">"), ("EXEC",),
    ("EVAL", "return redis.call('XREADGROUP', 'GROUP', 'g', 'lua', 'STREAMS', KEYS[1], '0')", "1", "m"),
    ("XGROUP", "DESTROY", "s", "g"), ("XGROUP", "DESTROY", "s", "g"),
]


def test_propagation_like_redis(pkvs):
    """The commands a pkvs primary sends its replicas for each stream
    command are the ones Redis sends (XADD's ID and ~ trimming made
    exact, XREADGROUP and XAUTOCLAIM as XCLAIM ... TIME, XGROUP SETID,
    CREATECONSUMER, wrapped in MULTI/EXEC when several), XCLAIM's TIME
    aside."""
    primary = pkvs.start(http=False)
    rs = started_redis(tag="primary")
    try:
        outs = []
        for port in (primary.resp_port, rs.resp_port):
            conn = RawConn(port)
            conn.call("FLUSHALL")
            st = ReplStream(port)
            try:
                outs.append(propagated(conn, st, PROPAGATED))
            finally:
                st.close()
                conn.close()
        for got, want in zip(*outs):
            assert got == want, f"pkvs  {got!r}\nredis {want!r}"
    finally:
        rs.stop()
