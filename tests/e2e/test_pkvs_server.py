"""pkvs's server and connection commands (services/cmd_server.c,
services/cmd_conn.c, services/cmd_meta.c, server/resp.c), against Debian's
redis-server 7.0.15 byte for byte where Redis and pkvs mean the same
(tests/e2e/redis_peer.py), in RESP2 and RESP3:

- COMMAND: INFO (arity, flags, key positions, ACL categories, tips, key
  specifications, subcommands) and DOCS (the same facts, arguments and
  versions; the summary is pkvs's own) of every command pkvs lists that
  Redis has, COUNT, LIST with FILTERBY MODULE / ACLCAT / PATTERN, GETKEYS
  and GETKEYSANDFLAGS, unknown subcommands and container arity errors.
- CONFIG GET with glob patterns, CONFIG SET of what pkvs applies and of
  Redis's tuning settings it keeps, refusals in Redis's words, RESETSTAT,
  REWRITE without a config file, maxmemory's OOM.
- INFO: sections (default, all, everything, several), tcp_port,
  commandstats (calls, usec, rejected and failed calls), errorstats,
  keyspace, the RESP3 verbatim string.
- CLIENT ID, SETNAME/GETNAME, INFO/LIST (Redis's fields), KILL in every
  form, REPLY ON/OFF/SKIP, NO-EVICT; RESET; PING's
  arity; ECHO, TIME, WAIT, LASTSAVE, SAVE, BGSAVE; SHUTDOWN exits 0.
"""
import os
import re
import signal
import socket
import subprocess
import time

import pytest
import redis

from conftest import PkvsFactory, RespConn, resp_command, tool, wait_until
from redis_peer import Peers, RawConn, redis_peer  # noqa: F401 (redis_peer: a fixture)

PROTOS = [2, 3]


@pytest.fixture(scope="module")
def pkvs_srv():
    factory = PkvsFactory()
    srv = factory.start(http=False)
    yield srv
    factory.cleanup()


def pyr(port, **kw):
    return redis.Redis(port=port, decode_responses=True, **kw)


def dec(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [dec(x) for x in v]
    return v


class Cmd:
    """Commands whose replies redis-py would reshape (COMMAND ...): the
    reply as sent, bulk strings decoded."""

    def __init__(self, port):
        self.c = RespConn(port)

    def execute_command(self, *args):
        return dec(self.c.command(*args))


def text(c, *args):
    """A bulk reply of c as text."""
    return c.command(*args).decode()


def info_map(text):
    out = {}
    for line in text.split("\r\n"):
        if line and not line.startswith("#") and ":" in line:
            k, v = line.split(":", 1)
            out[k] = v
    return out


# ----------------------------------------------------------- COMMAND

def resp_items(raw):
    """Split the RESP reply raw into its top-level elements' bytes (after
    the aggregate header)."""
    c = RawConn.__new__(RawConn)
    c.buf = bytearray(raw)
    head_end = raw.index(b"\r\n") + 2
    items, pos = [], head_end
    while pos < len(raw):
        end = c._skip(pos)
        items.append(bytes(raw[pos:end]))
        pos = end
    return items


def resp_tree(raw):
    """The RESP reply raw as nested tuples (kind, value) that keep its
    shape: aggregates hold a tuple of their elements (a map's keys and
    values in turn), other kinds their bytes after the type character."""
    kind, head = raw[:1], raw[1:raw.index(b"\r\n")]
    if kind in (b"*", b"~", b">", b"%", b"|") and int(head) >= 0:
        return (kind, tuple(resp_tree(item) for item in resp_items(raw)))
    if kind in (b"$", b"=", b"!") and int(head) >= 0:
        return (kind, raw[len(head) + 3:-2])
    return (kind, head)


def tree_pairs(t):
    """A map's (key text, value) pairs: a RESP3 map, or RESP2's flat array."""
    v = t[1]
    return [(v[i][1].decode(), v[i + 1]) for i in range(0, len(v), 2)]


def tree_map(kind, pairs):
    return (kind, tuple(x for k, v in pairs for x in ((b"$", k.encode()), v)))


# What COMMAND INFO and DOCS say in words rather than as interface facts:
# pkvs gives its own summaries and no complexity, history or key-spec notes.
PROSE = {"summary", "complexity", "history", "notes"}


def docs_interface(t):
    """A command's DOCS map without its prose, replaced_by as the names of
    the commands it gives, subcommands compared separately (dropped)."""
    out = []
    for k, v in tree_pairs(t):
        if k in PROSE or k == "subcommands":
            continue
        if k == "replaced_by":
            v = (b"names", tuple(re.findall(rb"`([^`]+)`", v[1].split(b" with ")[0])))
        out.append((k, v))
    return tree_map(t[0], out)


def info_interface(t):
    """A command's INFO array without key-spec notes; subcommands dropped."""
    kind, v = t
    specs = (v[8][0], tuple(tree_map(s[0], [(k, x) for k, x in tree_pairs(s) if k not in PROSE])
                           for s in v[8][1]))
    return (kind, v[:8] + (specs,))


def pkvs_commands(port):
    return sorted(Cmd(port).execute_command("COMMAND", "LIST"))


@pytest.mark.parametrize("proto", PROTOS)
def test_command_info_and_docs_as_redis(pkvs_srv, redis_peer, proto):
    """Every command pkvs has that Redis has: COMMAND INFO and DOCS give
    Redis's interface facts in its shapes (arity, flags, key positions,
    ACL categories, tips, key specifications; DOCS's since, group, doc
    flags, deprecation, replacing commands and argument grammar), and
    DOCS gives pkvs's own summary, not Redis's, and no complexity or
    history. A container's subcommands are compared one by one (Redis
    lists them in its hash table's order, and all of its own)."""
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port, proto)
    redis_names = set(Cmd(redis_peer.resp_port).execute_command("COMMAND", "LIST"))
    pkvs_only = {"client|setinfo"}          # Redis 7.2's, which redis-py 8 sends
    bad = []
    for name in pkvs_commands(pkvs_srv.resp_port):
        if name not in redis_names:
            assert name in pkvs_only, f"{name}: a command Redis 7.0.15 does not have"
            continue
        got, want = p.both("COMMAND", "INFO", name)
        g, w = resp_tree(got)[1][0], resp_tree(want)[1][0]
        subs = {s[1][0] for s in g[1][9][1]} - {(b"$", n.encode()) for n in pkvs_only}
        if (info_interface(g) != info_interface(w) or g[1][9][0] != w[1][9][0]
                or not subs <= {s[1][0] for s in w[1][9][1]}):
            bad.append((name, "info", got[:400], want[:400]))
        got, want = p.both("COMMAND", "DOCS", name)
        [(gk, g)], [(wk, w)] = tree_pairs(resp_tree(got)), tree_pairs(resp_tree(want))
        gd, wd = dict(tree_pairs(g)), dict(tree_pairs(w))
        mine = gd.get("summary", (b"", b""))[1].decode()
        if (gk != wk or docs_interface(g) != docs_interface(w)
                or not mine or mine.lower() == wd["summary"][1].decode().lower()
                or "complexity" in gd or "history" in gd
                or ("subcommands" in gd) != ("subcommands" in wd)):
            bad.append((name, "docs", got[:400], want[:400]))
    p.close()
    assert not bad, "\n".join(f"{n} {what}: pkvs {g!r}\n   redis {w!r}" for n, what, g, w in bad)


def test_command_count_list_filters(pkvs_srv, redis_peer):
    r = Cmd(pkvs_srv.resp_port)
    names = r.execute_command("COMMAND", "LIST")
    top = [n for n in names if "|" not in n]
    assert r.execute_command("COMMAND", "COUNT") == len(top) == len(r.execute_command("COMMAND"))
    assert "set" in names and "client|list" in names and "config|get" in names
    assert r.execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "set") == ["set"]
    cfg = r.execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "config*")
    assert "config" in cfg and "config|get" in cfg
    re_ = r.execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "config|*re*")
    assert {"config|resetstat", "config|rewrite"} <= set(re_)
    helps = r.execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "cl*help")
    assert {"client|help", "cluster|help"} <= set(helps)
    assert r.execute_command("COMMAND", "LIST", "FILTERBY", "PATTERN", "non_exists*") == []
    assert r.execute_command("COMMAND", "LIST", "FILTERBY", "MODULE", "x") == []
    assert r.execute_command("COMMAND", "LIST", "FILTERBY", "ACLCAT", "nope") == []
    strings = set(r.execute_command("COMMAND", "LIST", "FILTERBY", "ACLCAT", "string"))
    assert {"get", "set"} <= strings and "del" not in strings
    # the same filter on Redis, limited to pkvs's commands
    rr = Cmd(redis_peer.resp_port)
    for cat in ("keyspace", "read", "write", "fast", "slow", "admin", "dangerous", "connection"):
        mine = set(r.execute_command("COMMAND", "LIST", "FILTERBY", "ACLCAT", cat))
        theirs = set(rr.execute_command("COMMAND", "LIST", "FILTERBY", "ACLCAT", cat))
        assert mine - {"client|setinfo"} == theirs & set(names), cat
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port)
    for args in (("COMMAND", "LIST", "bad_arg"), ("COMMAND", "LIST", "FILTERBY", "bad_arg"),
                 ("COMMAND", "LIST", "FILTERBY", "bad", "x"), ("COMMAND", "NOPE"),
                 ("CONFIG",), ("CONFIG", "GET"), ("CONFIG", "NOPE"), ("CLIENT", "NOPE"),
                 ("COMMAND", "INFO", "get|key"), ("COMMAND", "INFO", "config|get|key"),
                 ("GET|SET", "x"), ("CONFIG|GET", "x"), ("COMMAND", "DOCS", "nope"),
                 ("COMMAND", "INFO", "nope", "get")):
        p.same(*args)
    p.close()


@pytest.mark.parametrize("proto", PROTOS)
def test_command_getkeys_as_redis(pkvs_srv, redis_peer, proto):
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port, proto)
    for args in (("get", "key"), ("set", "k1", "v1"), ("set", "k1", "v1", "get"),
                 ("mset", "k1", "v1", "k2", "v2"), ("del", "a", "b", "c"), ("mget", "a", "b"),
                 ("getrange", "k", "0", "1"), ("exists", "a"), ("incr", "a")):
        p.same("COMMAND", "GETKEYS", *args)
        p.same("COMMAND", "GETKEYSANDFLAGS", *args)
    for args in (("nope", "x"), ("ping",), ("get",), ("get", "a", "b"), ("config", "get", "x"),
                 ("mset", "a")):
        p.same("COMMAND", "GETKEYS", *args)
    p.close()


def test_container_arity_and_unknown_subcommand(pkvs_srv, redis_peer):
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port)
    for args in (("CONFIG", "GET"), ("CLIENT", "SETNAME"), ("CONFIG", "xyz"),
                 ("COMMAND", "GETKEYS"), ("CLIENT", "KILL"), ("PING", "a", "b"),
                 ("ECHO",), ("TIME", "x"), ("WAIT", "1")):
        p.same(*args)
    p.close()


# ----------------------------------------------------------- CONFIG

def same_map(p, *args):
    """A map reply (CONFIG GET) the same as Redis's but for its order,
    which is Redis's hash table's."""
    got, want = p.both(*args)
    assert got.split(b"\r\n")[0] == want.split(b"\r\n")[0], args
    g, w = resp_items(got), resp_items(want)
    assert dict(zip(g[::2], g[1::2])) == dict(zip(w[::2], w[1::2])), args


@pytest.mark.parametrize("proto", PROTOS)
def test_config_get_set_as_redis(pkvs_srv, redis_peer, proto):
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port, proto)
    for pat in ("hash-max-*", "databases", "DATABASES", "timeout", "maxmemory",
                "maxmemory-policy", "lua-time-limit", "nope*", "*-max-ziplist-value",
                "zset-max-listpack-entries"):
        same_map(p, "CONFIG", "GET", pat)
    same_map(p, "CONFIG", "GET", "hash-max-ziplist-value", "timeout", "databases")
    # Redis's tuning settings: taken and read back, under either name
    for args in (("hash-max-ziplist-value", "128"), ("hash-max-listpack-entries", "256"),
                 ("lua-time-limit", "100"), ("zset-max-ziplist-entries", "64"),
                 ("notify-keyspace-events", "KEA"), ("activerehashing", "no")):
        p.same("CONFIG", "SET", *args)
        same_map(p, "CONFIG", "GET", args[0])
    same_map(p, "CONFIG", "GET", "hash-max-listpack-value")
    same_map(p, "CONFIG", "GET", "busy-reply-threshold")
    p.same("CONFIG", "SET", "timeout", "0")
    p.same("CONFIG", "SET", "maxmemory", "0")
    # refusals, in Redis's words
    for args in (("nope", "1"), ("databases", "3"), ("maxmemory", "bla"),
                 ("hash-max-ziplist-value", "x"), ("activerehashing", "maybe"),
                 ("timeout",), ("timeout", "1", "maxmemory"), ("maxmemory-policy", "bogus"),
                 ("timeout", "1", "timeout", "2")):
        p.same("CONFIG", "SET", *args)
    p.same("CONFIG", "SET", "hash-max-ziplist-value", "64", "lua-time-limit", "5000")
    p.same("CONFIG", "SET", "hash-max-listpack-entries", "128", "zset-max-ziplist-entries", "128",
           "notify-keyspace-events", "", "activerehashing", "yes")
    p.close()


def test_config_replication_and_client_settings_as_redis(pkvs_srv, redis_peer):
    """Settings deployments set at run time (the backlog, the replication
    timeouts, the query buffer and client memory limits, maxmemory-clients
    in its percent form) taken with Redis's bounds and words and read back
    as Redis's; hidden settings only when asked by name; a bad value among
    several sets none."""
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port, 2)
    try:
        for name, v in (("repl-backlog-size", "10000002"), ("repl-backlog-size", "64mb"),
                        ("repl-backlog-ttl", "0"), ("repl-timeout", "30"),
                        ("repl-diskless-sync", "no"), ("repl-diskless-sync-delay", "0"),
                        ("repl-diskless-sync-max-replicas", "2"), ("repl-diskless-load", "SWAPDB"),
                        ("repl-disable-tcp-nodelay", "yes"), ("repl-ping-slave-period", "5"),
                        ("client-query-buffer-limit", "10m"), ("maxmemory-clients", "10%"),
                        ("maxmemory-clients", "0%"), ("maxmemory-clients", "1mb"),
                        ("key-load-delay", "-5"), ("loading-process-events-interval-bytes", "1024")):
            p.same("CONFIG", "SET", name, v)
            same_map(p, "CONFIG", "GET", name)
        same_map(p, "CONFIG", "GET", "repl-ping-replica-period")
        for name, v in (("repl-backlog-size", "0"), ("repl-timeout", "0"),
                        ("repl-diskless-load", "sometimes"), ("repl-ping-replica-period", "0"),
                        ("client-query-buffer-limit", "100"), ("client-query-buffer-limit", "x"),
                        ("maxmemory-clients", "200%"), ("maxmemory-clients", "abc"),
                        ("maxmemory-clients", "-5%"), ("loading-process-events-interval-bytes", "10")):
            got = p.same("CONFIG", "SET", name, v)
            assert got.startswith(b"-ERR CONFIG SET failed"), got
        got = p.same("CONFIG", "SET", "maxmemory", "10000001", "maxmemory-clients", "200%",
                     "client-query-buffer-limit", "invalid")
        assert b"maxmemory-clients" in got
        same_map(p, "CONFIG", "GET", "maxmemory")
        same_map(p, "CONFIG", "GET", "key-load*")         # hidden: none
        same_map(p, "CONFIG", "GET", "repl-*")
    finally:
        p.same("CONFIG", "SET", "repl-backlog-size", "1mb", "repl-backlog-ttl", "3600",
               "repl-timeout", "60", "repl-diskless-sync", "yes", "repl-diskless-sync-delay", "5",
               "repl-diskless-sync-max-replicas", "0", "repl-diskless-load", "disabled",
               "repl-disable-tcp-nodelay", "no", "repl-ping-replica-period", "10",
               "client-query-buffer-limit", "1gb", "maxmemory-clients", "0", "key-load-delay", "0",
               "loading-process-events-interval-bytes", "2097152")
        p.close()


def test_config_set_under_either_name(pkvs_srv, redis_peer):
    """A setting with two names (Redis's replica/slave pairs among them) is
    set under one and read back under both, and the server stays up."""
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port, 2)
    for a, b, v in (("min-replicas-to-write", "min-slaves-to-write", "2"),
                    ("min-slaves-max-lag", "min-replicas-max-lag", "20"),
                    ("replica-read-only", "slave-read-only", "no"),
                    ("slave-serve-stale-data", "replica-serve-stale-data", "no")):
        p.same("CONFIG", "SET", a, v)
        same_map(p, "CONFIG", "GET", a)
        same_map(p, "CONFIG", "GET", b)
    p.same("CONFIG", "SET", "min-replicas-to-write", "0", "min-slaves-max-lag", "10",
           "replica-read-only", "yes", "slave-serve-stale-data", "yes")
    p.same("PING")
    p.close()


def test_config_applied(pkvs_srv):
    r = pyr(pkvs_srv.resp_port)
    c = RespConn(pkvs_srv.resp_port)
    assert c.command("PING") == "PONG"
    assert r.config_get("databases") == {"databases": "16"}
    assert r.config_get("port") == {"port": str(pkvs_srv.resp_port)}
    assert r.config_get("appendonly")["appendonly"] == "yes"
    # timeout closes idle connections
    r.config_set("timeout", "1")
    try:
        time.sleep(2.6)                  # idle: closed within a second and the sweep's half
        assert not _alive(c)
    finally:
        r.config_set("timeout", "0")
    # maxmemory: denyoom commands refused while the store holds more
    assert r.set("mm", "1")
    r.config_set("maxmemory", "1")
    try:
        with pytest.raises(redis.ResponseError, match="^command not allowed when used memory"):
            r.set("mm", "2")
        assert r.get("mm") == "1" and r.delete("mm") == 1
    finally:
        r.config_set("maxmemory", "0")
    with pytest.raises(redis.ResponseError, match="running without a config file"):
        r.execute_command("CONFIG", "REWRITE")


def _alive(c):
    try:
        return c.command("PING") == "PONG"
    except Exception:
        return False


def test_config_resetstat_and_commandstats(pkvs_srv):
    r = pyr(pkvs_srv.resp_port)
    assert r.execute_command("CONFIG", "RESETSTAT") == "OK"
    r.set("cs", "1")
    r.get("cs")
    r.get("cs")
    with pytest.raises(redis.ResponseError):
        r.execute_command("GET", "a", "b")                # rejected: arity
    r.set("cs", "x")
    with pytest.raises(redis.ResponseError):
        r.execute_command("INCR", "cs")                    # failed: not an integer
    with pytest.raises(redis.ResponseError):
        r.execute_command("NOPE")
    info = r.info("commandstats")
    assert info["cmdstat_get"]["calls"] == 2 and info["cmdstat_get"]["rejected_calls"] == 1
    assert info["cmdstat_incr"]["failed_calls"] == 1 and info["cmdstat_set"]["calls"] == 2
    assert info["cmdstat_get"]["usec"] >= 0 and "usec_per_call" in info["cmdstat_get"]
    assert "cmdstat_config|resetstat" in info or "cmdstat_config|resetstat" in str(info)
    errs = r.info("errorstats")
    assert errs["errorstat_ERR"]["count"] == 3
    assert r.info("stats")["total_error_replies"] == 3
    before = r.info("stats")
    r.execute_command("CONFIG", "RESETSTAT")
    assert "cmdstat_get" not in r.info("commandstats")
    assert r.info("errorstats") == {}
    # The totals Redis resets start again from the reset: a few commands
    # (INFOs) and bytes since, no connection yet.
    after = r.info("stats")
    for name in ("total_commands_processed", "total_net_input_bytes", "total_net_output_bytes",
                 "total_reads_processed"):
        assert 0 < after[name] < min(before[name], 100_000), (name, before[name], after[name])
    assert after["total_connections_received"] == 0
    pyr(pkvs_srv.resp_port).ping()
    assert r.info("stats")["total_connections_received"] == 1


def test_commandstats_pipelined_and_after_idle(pkvs_srv):
    """Pipelined commands are each counted and timed; a command's time
    never takes in the idle time before it (a command that follows another
    in the same read starts where that one ended, any other reads the
    clock afresh)."""
    r = pyr(pkvs_srv.resp_port)
    r.set("cs-idle", "v")
    assert r.execute_command("CONFIG", "RESETSTAT") == "OK"
    with socket.create_connection(("127.0.0.1", pkvs_srv.resp_port)) as s:
        f = s.makefile("rb")
        s.sendall(b"*2\r\n$3\r\nGET\r\n$7\r\ncs-idle\r\n" * 500)
        for _ in range(500):
            assert f.readline() == b"$1\r\n" and f.readline() == b"v\r\n"
        for _ in range(3):
            time.sleep(0.4)                      # idle, then one command in its own read
            s.sendall(b"*2\r\n$3\r\nGET\r\n$7\r\ncs-idle\r\n")
            assert f.readline() == b"$1\r\n" and f.readline() == b"v\r\n"
    st = r.info("commandstats")["cmdstat_get"]
    assert st["calls"] == 503
    assert 0 < st["usec"] < 100_000, st          # 1.2 s idle in between is no command's


# ------------------------------------------------------------- INFO

def test_info_sections(pkvs_srv):
    r = pyr(pkvs_srv.resp_port)
    c = RespConn(pkvs_srv.resp_port)
    default = text(c, "INFO")
    for name in ("# Server", "# Clients", "# Memory", "# Persistence", "# Stats",
                 "# Replication", "# CPU", "# Modules", "# Errorstats", "# Cluster",
                 "# Keyspace"):
        assert name in default
    assert "# Commandstats" not in default and "rejected_calls" not in default
    for arg in ("all", "everything"):
        t = text(c, "INFO", arg)
        assert "# Commandstats" in t and "rejected_calls" in t
    m = info_map(default)
    assert m["tcp_port"] == str(pkvs_srv.resp_port)
    assert m["role"] == "master" and m["connected_slaves"] == "0"
    assert m["arch_bits"] == "64" and len(m["run_id"]) == 40 and m["hz"] == "10"
    assert os.path.basename(m["executable"]) == "pkvs"
    assert float(m["used_cpu_user"]) >= 0 and int(m["used_memory"]) > 0
    for k in ("expired_keys", "evicted_keys", "keyspace_hits", "keyspace_misses",
              "total_error_replies", "maxmemory", "connected_clients", "rdb_last_save_time"):
        assert k in m, k
    cpu = text(c, "INFO", "cpu")
    assert cpu.startswith("# CPU\r\n") and "used_memory" not in cpu
    both = text(c, "INFO", "cpu", "server")
    assert "# CPU" in both and "# Server" in both and "# Memory" not in both
    assert both.count("used_cpu_user_children") == 1
    assert "rejected_calls" in text(c, "INFO", "commandSTATS")
    r.set("ks", "1")
    assert "db0:keys=" in text(c, "INFO", "keyspace")
    assert text(c, "INFO", "nope") == ""


def test_info_lazyfree(pkvs_srv):
    """A dropped hash waits in lazyfree_pending_objects until its members
    are swept, then counts in lazyfreed_objects; CONFIG RESETSTAT zeroes
    that."""
    r = pyr(pkvs_srv.resp_port)
    c = RespConn(pkvs_srv.resp_port)
    r.config_resetstat()
    p = r.pipeline(transaction=False)
    for i in range(0, 30000, 1000):
        p.hset("big", mapping={f"f{j}": "v" for j in range(i, i + 1000)})
    p.execute()
    m = info_map(text(c, "INFO", "memory"))
    assert m["lazyfree_pending_objects"] == "0" and m["lazyfreed_objects"] == "0"
    assert m["active_defrag_running"] == "0"
    assert r.delete("big") == 1
    assert wait_until(lambda: info_map(text(c, "INFO", "memory"))["lazyfree_pending_objects"] == "0", 5)
    assert info_map(text(c, "INFO", "memory"))["lazyfreed_objects"] == "1"
    r.config_resetstat()
    assert info_map(text(c, "INFO", "memory"))["lazyfreed_objects"] == "0"
    c.close()


def stats_fields(port):
    return [l.split(":")[0] for l in text(RespConn(port), "INFO", "stats").split("\r\n")
            if l and not l.startswith("#")]


def test_client_list_cmd_of_refused_commands(pkvs_srv, redis_peer):
    """CLIENT LIST's cmd= is the command last named, as Redis records it at
    the lookup: one refused (arity, NOAUTH's kin, subscribed mode) counts,
    an unknown command or subcommand is NULL, a container alone is its
    name."""
    steps = [("SET", "a", "1"), ("GET",), ("NOSUCH",), ("CLIENT", "NOSUCH"), ("CONFIG",),
             ("CLIENT", "ID"), ("SUBSCRIBE", "ch"), ("SET", "a", "2")]
    seen = []
    for port in (pkvs_srv.resp_port, redis_peer.resp_port):
        c, adm = RawConn(port), RawConn(port)
        cid = int(c.call("CLIENT", "ID")[1:-2])
        cmds = []
        for cmd in steps:
            c.call(*cmd)
            line = adm.call("CLIENT", "LIST", "ID", str(cid))
            cmds.append(re.search(rb"\bcmd=(\S+)", line).group(1))
        seen.append(cmds)
        c.close()
        adm.close()
    assert seen[0] == seen[1], seen
    assert seen[0][2] == b"NULL" and seen[0][4] == b"config" and seen[0][7] == b"set", seen


def test_info_stats_rates_and_pubsub(pkvs, redis_peer):
    """INFO stats: instantaneous_ops_per_sec and the input and output
    rates follow a load, within a factor of what the client measured, and
    fall back once it stops; pubsub_channels, pubsub_patterns and
    pubsubshard_channels count what is subscribed, as redis-server counts
    the same subscriptions; every field pkvs shows is one of Redis's, in
    Redis's order."""
    srv = pkvs.start(http=False)
    c = RespConn(srv.resp_port)
    ping = resp_command("PING") * 100
    with socket.create_connection(("127.0.0.1", srv.resp_port)) as s:
        start, sent = time.monotonic(), 0
        while time.monotonic() - start < 2.0:       # bounded: 2 s of pipelined PINGs
            s.sendall(ping)
            got = b""
            while got.count(b"\r\n") < 100:
                got += s.recv(65536)
            sent += 100
        rate = sent / (time.monotonic() - start)
        m = info_map(text(c, "INFO", "stats"))
    assert rate / 3 < float(m["instantaneous_ops_per_sec"]) < rate * 3, (rate, m)
    assert float(m["instantaneous_input_kbps"]) > rate * 14 / 1024 / 3, m   # 14 bytes a PING
    assert float(m["instantaneous_output_kbps"]) > rate * 7 / 1024 / 3, m   # "+PONG\r\n"
    time.sleep(2.0)
    m = info_map(text(c, "INFO", "stats"))
    assert float(m["instantaneous_ops_per_sec"]) < 10, m
    counts = []
    for port in (srv.resp_port, redis_peer.resp_port):
        subs = [RawConn(port) for _ in range(3)]
        subs[0].call("SUBSCRIBE", "a", "b")
        subs[1].call("SUBSCRIBE", "b", "c")
        subs[1].call("PSUBSCRIBE", "n*", "m?")
        subs[2].call("PSUBSCRIBE", "n*")
        subs[2].call("SSUBSCRIBE", "s1")
        m = info_map(text(RespConn(port), "INFO", "stats"))
        counts.append([m[k] for k in ("pubsub_channels", "pubsub_patterns", "pubsubshard_channels")])
        for x in subs:
            x.close()
    assert counts[0] == counts[1] == ["3", "2", "1"], counts
    mine, redis_order = stats_fields(srv.resp_port), stats_fields(redis_peer.resp_port)
    own = [f for f in mine if f.startswith("pkvs_") or f in (
        "pkvs_barrier_hist", "max_value", "store_failed")]
    shared = [f for f in mine if f not in own]
    assert shared == [f for f in redis_order if f in shared], shared


def test_info_resp3_verbatim(pkvs_srv, redis_peer):
    c = RawConn(pkvs_srv.resp_port, 3)
    raw = c.call("INFO", "server")
    assert raw.startswith(b"=") and raw[raw.index(b"\r\n") + 2:].startswith(b"txt:# Server")
    n = int(raw[1:raw.index(b"\r\n")])
    assert len(raw) == raw.index(b"\r\n") + 2 + n + 2
    want = RawConn(redis_peer.resp_port, 3).call("INFO", "cluster")
    assert c.call("INFO", "cluster") == want          # "=...txt:# Cluster ..." the same


# ----------------------------------------------------------- CLIENT

REDIS_CLIENT_FIELDS = ["id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "sub",
                       "psub", "ssub", "multi", "qbuf", "qbuf-free", "argv-mem", "multi-mem", "rbs",
                       "rbp", "obl", "oll", "omem", "tot-mem", "events", "cmd", "user", "redir",
                       "resp"]


def client_fields(line):
    return dict(kv.split("=", 1) for kv in line.strip().split(" "))


def test_client_info_list_fields(pkvs_srv, redis_peer):
    r = pyr(pkvs_srv.resp_port)
    me = r.client_id()
    info = r.execute_command("CLIENT", "INFO")
    assert [kv.split("=")[0] for kv in info.strip().split(" ")] == REDIS_CLIENT_FIELDS
    rinfo = pyr(redis_peer.resp_port).execute_command("CLIENT", "INFO")
    assert [kv.split("=")[0] for kv in rinfo.strip().split(" ")] == REDIS_CLIENT_FIELDS
    f = client_fields(info)
    assert f["id"] == str(me) and f["cmd"] == "client|info" and f["flags"] == "N"
    # qbuf: the asking client's running command, as Redis counts it
    assert f["qbuf"] == str(len(b"*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n"))
    assert f["qbuf"] == client_fields(rinfo)["qbuf"]
    s = socket.create_connection(("127.0.0.1", pkvs_srv.resp_port))
    s.sendall(b"PING\r\n")
    s.recv(100)
    peer = "%s:%d" % s.getsockname()
    assert f["laddr"] == "127.0.0.1:%d" % pkvs_srv.resp_port
    lines = r.execute_command("CLIENT", "LIST").strip().split("\n")
    byaddr = {client_fields(l)["addr"]: client_fields(l) for l in lines}
    assert peer in byaddr and byaddr[peer]["cmd"] == "ping"
    other = byaddr[peer]["id"]
    only = r.execute_command("CLIENT", "LIST", "ID", other).strip().split("\n")
    assert len(only) == 1 and client_fields(only[0])["addr"] == peer
    assert r.execute_command("CLIENT", "LIST", "TYPE", "pubsub") == ""
    r.client_setname("myname")
    assert r.client_getname() == "myname"
    assert client_fields(r.execute_command("CLIENT", "INFO"))["name"] == "myname"
    assert r.execute_command("CLIENT", "NO-EVICT", "on") == "OK"
    assert client_fields(r.execute_command("CLIENT", "INFO"))["flags"] == "e"
    r.execute_command("CLIENT", "NO-EVICT", "off")
    s.close()


def test_client_errors_as_redis(pkvs_srv, redis_peer):
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port)
    for args in (("CLIENT", "SETNAME", "a b"), ("CLIENT", "SETNAME", "a\nb"), ("CLIENT", "GETNAME"),
                 ("CLIENT", "SETNAME", "x"), ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", ""),
                 ("CLIENT", "GETNAME"), ("CLIENT", "LIST", "TYPE", "bogus"),
                 ("CLIENT", "LIST", "ID", "x"), ("CLIENT", "LIST", "x"),
                 ("CLIENT", "KILL", "1.2.3.4:5"), ("CLIENT", "KILL", "ID", "0"),
                 ("CLIENT", "KILL", "ID", "999999"), ("CLIENT", "KILL", "USER", "nobody"),
                 ("CLIENT", "KILL", "SKIPME", "maybe"), ("CLIENT", "KILL", "ID"),
                 ("CLIENT", "KILL", "TYPE", "bogus"), ("CLIENT", "REPLY", "bogus"),
                 ("CLIENT", "NO-EVICT", "x"), ("CLIENT", "UNPAUSE"),
                 ("CLIENT", "UNBLOCK", "99999"), ("CLIENT", "UNBLOCK", "1", "x"),
                 ("CLIENT", "GETREDIR")):
        p.same(*args)
    p.close()


def test_client_kill_forms(pkvs_srv):
    r = pyr(pkvs_srv.resp_port)
    victims = [RespConn(pkvs_srv.resp_port) for _ in range(4)]
    ids = [v.command("CLIENT", "ID") for v in victims]
    addrs = []
    for v in victims:
        addrs.append(client_fields(text(v, "CLIENT", "INFO"))["addr"])
    assert r.execute_command("CLIENT", "KILL", "ID", ids[0]) == 1
    assert r.execute_command("CLIENT", "KILL", "ADDR", addrs[1]) == 1
    assert r.execute_command("CLIENT", "KILL", addrs[2]) == "OK"        # the old form
    for v in victims[:3]:
        assert wait_until(lambda: not _alive(v), 5)
    assert _alive(victims[3])
    # LADDR and USER match everyone but the caller (SKIPME yes)
    extra = RespConn(pkvs_srv.resp_port)
    assert extra.command("PING") == "PONG"
    n = r.execute_command("CLIENT", "KILL", "LADDR", "127.0.0.1:%d" % pkvs_srv.resp_port,
                          "USER", "default")
    assert n >= 2 and not _alive(extra) and not _alive(victims[3])
    assert r.ping()
    # SKIPME no: the caller too, after its reply
    c = RespConn(pkvs_srv.resp_port)
    assert c.command("CLIENT", "KILL", "ID", c.command("CLIENT", "ID"), "SKIPME", "no") == 1
    assert not _alive(c)


def test_client_reply_modes(pkvs_srv):
    s = socket.create_connection(("127.0.0.1", pkvs_srv.resp_port))
    s.sendall(b"CLIENT REPLY OFF\r\nSET r1 1\r\nGET r1\r\nCLIENT REPLY ON\r\nGET r1\r\n"
              b"CLIENT REPLY SKIP\r\nGET r1\r\nECHO after\r\n")
    want = b"+OK\r\n$1\r\n1\r\n$5\r\nafter\r\n"
    got = b""
    s.settimeout(5)
    while len(got) < len(want):
        got += s.recv(100)
    assert got == want
    s.close()


def test_client_ids_unique(pkvs_srv):
    seen = set()
    for _ in range(5):
        c = RespConn(pkvs_srv.resp_port)
        cid = c.command("CLIENT", "ID")
        assert cid not in seen
        seen.add(cid)
        c.close()
    assert len(seen) == 5


# ------------------------------------------- connection and server's own

@pytest.mark.parametrize("proto", PROTOS)
def test_connection_commands_as_redis(pkvs_srv, redis_peer, proto):
    p = Peers(pkvs_srv.resp_port, redis_peer.resp_port, proto)
    for args in (("PING",), ("PING", "hi"), ("PING", "a", "b"), ("ECHO", "x y"),
                 ("WAIT", "0", "0"), ("WAIT", "1", "10"), ("WAIT", "x", "0"), ("WAIT", "0", "-1"),
                 ("BGSAVE", "x"), ("SHUTDOWN", "SAVE", "NOSAVE"), ("SHUTDOWN", "bogus"),
                 ("SHUTDOWN", "ABORT"), ("ACL", "WHOAMI"), ("ACL", "CAT", "bogus"),
                 ("ACL", "CAT", "string"), ("ACL", "CAT"), ("LOLWUT",), ("LOLWUT", "1", "2"),
                 ("LOLWUT", "VERSION", "x"), ("LOLWUT", "VERSION"), ("MODULE", "LIST"),
                 ("MODULE", "LIST", "x"), ("MODULE",), ("MODULE", "LOAD"), ("MODULE", "NOPE"),
                 ("MODULE", "UNLOAD", "a", "b")):
        got, want = p.both(*args)
        if args[:2] in (("ACL", "CAT"),) and len(args) == 3 and args[2] == "string":
            g, w = set(resp_items(got)), set(resp_items(want))
            assert g <= w and b"$3\r\nget\r\n" in g
        else:
            assert got == want, f"{args!r}: pkvs {got!r}, redis {want!r}"
    p.close()


def test_module_loads_nothing(pkvs_srv):
    """MODULE LOAD and LOADEX fail in Redis's words (the reason in the
    server's log), UNLOAD names no module, LIST stays empty."""
    r = pyr(pkvs_srv.resp_port)
    for sub in ("LOAD", "LOADEX"):
        with pytest.raises(redis.ResponseError, match="^Error loading the extension"):
            r.execute_command("MODULE", sub, "/usr/lib/redis/modules/x.so", "arg")
    with pytest.raises(redis.ResponseError, match="no such module with that name"):
        r.execute_command("MODULE", "UNLOAD", "x")
    assert r.execute_command("MODULE", "LIST") == []
    assert wait_until(lambda: any("does not load Redis modules" in l for l in pkvs_srv.lines), 5)


def test_time_lastsave_save(pkvs_srv):
    r = pyr(pkvs_srv.resp_port)
    sec, usec = r.execute_command("TIME")
    assert abs(int(sec) - time.time()) < 5 and 0 <= int(usec) < 1000000
    before = r.lastsave()
    assert r.execute_command("SAVE") is True
    c = RespConn(pkvs_srv.resp_port)
    assert c.command("BGSAVE") == "Background saving started"
    assert c.command("BGSAVE", "SCHEDULE") == "Background saving started"
    assert r.lastsave() >= before
    assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"


def test_reset(pkvs_srv, redis_peer):
    for port in (pkvs_srv.resp_port, redis_peer.resp_port):
        c = RawConn(port, 3)
        c.call("CLIENT", "SETNAME", "n1")
        c.call("CLIENT", "NO-EVICT", "on")
        c.call("SELECT", "3")
        assert c.call("RESET") == b"+RESET\r\n"
        info = c.call("CLIENT", "INFO")
        assert info.startswith(b"$")                          # back to RESP2
        f = client_fields(info.split(b"\r\n")[1].decode())
        assert (f["name"], f["flags"], f["db"], f["resp"]) == ("", "e", "0", "2")
        c.call("MULTI")
        c.call("SET", "k", "v")
        assert c.call("RESET") == b"+RESET\r\n"
        assert c.call("EXEC") == b"-ERR EXEC without MULTI\r\n"
        c.close()


def test_redis_cli(pkvs_srv):
    cli = tool("redis-cli")
    out = subprocess.run([cli, "-p", str(pkvs_srv.resp_port), "INFO", "server"],
                         capture_output=True, text=True, timeout=30).stdout
    assert "tcp_port:%d" % pkvs_srv.resp_port in out
    out = subprocess.run([cli, "-p", str(pkvs_srv.resp_port), "CONFIG", "GET", "databases"],
                         capture_output=True, text=True, timeout=30).stdout
    assert out.split() == ["databases", "16"]


def test_shutdown_exits_0():
    factory = PkvsFactory()
    try:
        for args in (("SHUTDOWN",), ("SHUTDOWN", "NOSAVE"), ("SHUTDOWN", "SAVE", "NOW")):
            srv = factory.start(http=False)
            c = RespConn(srv.resp_port)
            c.send(resp_command(*args))
            assert wait_until(lambda: srv.proc.poll() is not None, 10)
            assert srv.proc.returncode == 0
    finally:
        factory.cleanup()
