"""pkvs's non-string types off the happy path, on every engine.

(1) Injected barrier failures through pkvs-shim (PASTE_FAULT) under a
    load of mixed-type writes, one connection per kind with keys of its
    own: XADD; XREADGROUP ... COUNT n and XACK on a consumer group; HSET;
    ZADD and ZINCRBY; LPUSH and RPOP; MULTI/EXEC of an XADD and an HSET;
    an EVAL that writes a string and a sorted set. A connection sends one
    command (or transaction) at a time, so after a crash its keys must
    hold what a prefix of its commands makes of them, a prefix that
    reaches at least its last acknowledged one and at most its last sent
    before a store-failed error arrived. A small model of these commands
    computes every prefix's keys; the restarted server's must be one of
    them. That says every acknowledged change is there (an acknowledged
    delivery is pending unless an acknowledged XACK took it out), a
    transaction or script is whole or absent, and nothing is there that
    was never sent or was sent after the failure showed. The same model
    checks every reply while the load runs, and each acknowledged XADD
    keeps its ID. As for SETs (test_pkvs_churn.py): exit 1 naming the
    store and the error (EIO; on a disk also ENOSPC), no acknowledgement
    for a command sent after a store-failed error arrived, and both the
    store and the shim's crash image check clean and pass the above after
    a fault-free restart.
    The same with elements in chunks (150-300 KB field values and list
    elements: HSETs of new fields and over big ones, RPUSHes, LPOPs, a
    MULTI/EXEC of a big HSET and a big RPUSH), each value byte-exact and
    named by a header; then, every key deleted, the held bytes come back
    to the empty store's: no chunk the failure cut off is left behind.
(2) Connection churn on a consumer group: 3,000 short connections each
    send XREADGROUP GROUP g c<i> COUNT 1 STREAMS s > and read the reply,
    or close (FIN or RST) without reading, or send half the command; then
    BLOCK readers that close while blocked as entries arrive. A '>'
    delivery happens when the command runs, whether or not its reply is
    read (as Redis): every entry up to the group's last-delivered-id is
    pending exactly once, none goes out twice, half commands create no
    consumer, a reader that closed while blocked is forgotten (a later
    entry stays undelivered), and the connections drain. A short
    scripted version compares its replies with redis-server's.

Every test is bounded: sockets time out after a few seconds and threaded
clients stop at a deadline. Standard library only (and redis-server as
the reference, where installed).
"""
import copy
import random
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from conftest import (ConnectionClosed, RefusedLoad, RespConn, RespError, connect, reset, settled,
                      resp_command, run_threads, run_tool, uring_unavailable_reason, wait_until)
from redis_peer import flushed_peers, redis_peer  # noqa: F401 (redis_peer: a fixture)
from test_pkvs_churn import (EIO, FAULT, connected_clients, engine_args, pipelined, run_to_failure,
                             wait_clients)

# --------------------------------------------------------------------------
# (1) injected barrier failures under mixed-type writes
# --------------------------------------------------------------------------

KINDS = ("xadd", "group", "hash", "zset", "list", "multi", "eval")
KEYS = {"xadd": ("x",), "group": ("g",), "hash": ("h",), "zset": ("z",), "list": ("l",),
        "multi": ("mx", "mh"), "eval": ("ec", "ez")}
# What a key is in the model, empty as an absent key reads: a stream's
# entries' fields; a group's (last delivered, pending) as sequence numbers
# of entries N-1; a hash; a sorted set with integer scores; a list; a counter.
EMPTY = {"x": list, "mx": list, "g": lambda: [0, set()], "h": dict, "mh": dict,
         "z": dict, "ez": dict, "l": list, "ec": int}
PRE = 2000                  # entries in a group's stream before the load
# The table's barriers, more of them: a few dozen commands per kind.
FAULT_SCALE = 3
VALUE_SIZES = (4, 150, 350, 2600)       # hex: 8, 300, 700, 5200 bytes
SCRIPT = ("local c = redis.call('INCR', KEYS[1]) "
          "redis.call('ZADD', KEYS[2], c, ARGV[1]) return c")
ANY_ID = object()           # XADD *'s reply: an ID, recorded
ID_RE = re.compile(rb"\d+-\d+")
STORE_FAILED = "ERR store failed: "


def kind_of(tid):
    return KINDS[tid % len(KINDS)]


def keys_of(tid):
    return [f"{p}:{tid}" for p in KEYS[kind_of(tid)]]


def empty_model(tid):
    return {k: EMPTY[k.split(":")[0]]() for k in keys_of(tid)}


def entry(i):
    return [f"{i}-1".encode(), [b"i", str(i).encode()]]


def apply(m, cmds):
    """Run cmds (one command, or MULTI ... EXEC) on the model keyspace m as
    Redis would; returns the replies it gives."""
    if cmds[0][0] == "MULTI":
        return ["OK"] + ["QUEUED"] * (len(cmds) - 2) + [apply(m, cmds[1:-1])]
    out = []
    for name, key, *a in cmds:
        v = m.get(key)
        if name == "XADD":                      # * field value ...
            v.append(tuple(a[1:]))
            out.append(ANY_ID)
        elif name == "XREADGROUP":              # key is "GROUP": GROUP grp c COUNT n STREAMS key >
            key = a[5]
            last, pel = m[key]
            new = range(last + 1, min(last + int(a[3]), PRE) + 1)
            m[key][0] = last + len(new)
            pel.update(new)
            out.append([[key.encode(), [entry(i) for i in new]]] if new else None)
        elif name == "XACK":                    # grp id ...
            ids = {int(i.split("-")[0]) for i in a[1:]}
            out.append(len(v[1] & ids))
            v[1] -= ids
        elif name == "HSET":
            pairs = dict(zip(a[::2], a[1::2]))
            out.append(sum(f not in v for f in pairs))
            v.update(pairs)
        elif name == "ZADD":                    # score member
            out.append(int(a[1] not in v))
            v[a[1]] = int(a[0])
        elif name == "ZINCRBY":                 # increment member
            v[a[1]] = v.get(a[1], 0) + int(a[0])
            out.append(str(v[a[1]]).encode())
        elif name == "LPUSH":
            v.insert(0, a[0])
            out.append(len(v))
        elif name == "RPOP":
            out.append(v.pop().encode() if v else None)
        else:                                   # EVAL: key is SCRIPT; 2 counter zset member
            m[a[1]] += 1
            m[a[2]][a[3]] = m[a[1]]
            out.append(m[a[1]])
    return out


def plan(m, tid, n, rng):
    """Connection tid's n-th command(s), given its model m after all it sent."""
    kind, k = kind_of(tid), keys_of(tid)
    if kind == "xadd":
        return [("XADD", k[0], "*", "n", str(n), "v", rng.randbytes(rng.choice(VALUE_SIZES)).hex())]
    if kind == "group":
        pel = sorted(m[k[0]][1])
        if pel and rng.random() < 0.5:
            acked = rng.sample(pel, min(len(pel), rng.randint(1, 3)))
            return [("XACK", k[0], "grp") + tuple(f"{i}-1" for i in acked)]
        return [("XREADGROUP", "GROUP", "grp", f"c{tid}", "COUNT", str(rng.randint(1, 4)),
                 "STREAMS", k[0], ">")]
    if kind == "hash":
        return [("HSET", k[0], f"f{n}a", rng.randbytes(rng.choice(VALUE_SIZES)).hex(),
                 f"f{n}b", str(n))]
    if kind == "zset":
        if m[k[0]] and rng.random() < 0.4:
            return [("ZINCRBY", k[0], "1", rng.choice(sorted(m[k[0]])))]
        return [("ZADD", k[0], str(n), f"m{n}")]
    if kind == "list":
        if m[k[0]] and rng.random() < 0.35:
            return [("RPOP", k[0])]
        return [("LPUSH", k[0], f"v{n}")]
    if kind == "multi":
        return [("MULTI",), ("XADD", k[0], "*", "n", str(n)), ("HSET", k[1], f"f{n}", str(n)), ("EXEC",)]
    return [("EVAL", SCRIPT, "2", k[0], k[1], f"m{n}")]


def matches(got, want):
    if want is ANY_ID:
        return isinstance(got, bytes) and ID_RE.fullmatch(got) is not None
    if isinstance(want, list):
        return (isinstance(got, list) and len(got) == len(want)
                and all(matches(g, w) for g, w in zip(got, want)))
    return type(got) is type(want) and got == want


class TypesLoad(RefusedLoad):
    """One connection per kind (KINDS), each sending plan()'s commands one
    at a time until the server is gone. sent[tid]: its commands in order,
    sent_at[tid] when each was sent; last_ack[tid]: the index of its last
    acknowledged one; ids: (key, fields) -> ID of each acknowledged XADD.
    Other kinds come with their own start model, plan, model of the
    replies and problem report (big_load)."""

    def __init__(self, port, seed, kinds=KINDS, start_model=None, plan_fn=None, apply_fn=None,
                 problem=None):
        n = len(kinds)
        super().__init__(port, n, seed, together=True)
        self.kinds = kinds
        self.plan = plan_fn or plan
        self.apply = apply_fn or apply
        self.problem = problem or (lambda tid, i, cmds, reply, want:
                                   (kind_of(tid), i, cmds[-1][:3], reply, want))
        self.start_model = start_model or empty_model
        self.models = {t: self.start_model(t) for t in range(n)}   # after all that was sent
        self.sent = {t: [] for t in range(n)}
        self.sent_at = {t: [] for t in range(n)}
        self.last_ack = {}
        self.ids = {}

    def _connect(self):
        return RespConn(self.port, timeout=5)

    def _write(self, conn, tid, n, rng):
        cmds = self.plan(self.models[tid], tid, n, rng)
        want = self.apply(self.models[tid], cmds)
        with self.lock:
            self.sent[tid].append(cmds)
            self.sent_at[tid].append(time.monotonic())
            i = len(self.sent[tid]) - 1
        conn.send(b"".join(resp_command(*c) for c in cmds))
        got = []
        while len(got) < len(cmds) and not (got and isinstance(got[-1], RespError)):
            got.append(conn.read_reply())
        return got, (tid, i, cmds, want)

    def _record(self, reply, what, sent):
        tid, i, cmds, want = what
        if matches(reply, want):
            self.last_ack[tid] = i
            self.acks.append((sent, (tid, i)))
            ran, replies = (cmds[1:-1], reply[-1]) if cmds[0][0] == "MULTI" else (cmds, reply)
            for c, r in zip(ran, replies):
                if c[0] == "XADD":
                    self.ids[(c[1], tuple(c[3:]))] = r
            return False
        err = reply[-1]
        if isinstance(err, RespError) and str(err).startswith(STORE_FAILED):
            self.refused.append((time.monotonic(), str(err)))
        else:
            self.problems.append(self.problem(tid, i, cmds, reply, want))
        return True                   # the server closes after the error


def prepare(port):
    """Each group connection's stream: PRE entries i-1, and group grp at 0."""
    cmds = []
    for tid in range(len(KINDS)):
        if kind_of(tid) == "group":
            key = keys_of(tid)[0]
            cmds += [("XADD", key, f"{i}-1", "i", i) for i in range(1, PRE + 1)]
            cmds.append(("XGROUP", "CREATE", key, "grp", "0"))
    bad = [r for r in pipelined(port, cmds) if isinstance(r, RespError)]
    assert not bad, bad[:3]


def observe(c, key):
    """key on the server as the model holds it (EMPTY)."""
    p, tid = key.split(":")
    if p in ("x", "mx"):
        return [tuple(f.decode() for f in fields) for _, fields in c.command("XRANGE", key, "-", "+")]
    if p == "g":
        info = c.command("XINFO", "GROUPS", key)[0]
        info = dict(zip(info[::2], info[1::2]))
        pending = c.command("XPENDING", key, "grp", "-", "+", PRE + 1)
        odd = [e for e in pending if e[1] != f"c{tid}".encode() or e[3] != 1]
        if odd or info[b"pending"] != len(pending) or c.command("XLEN", key) != PRE:
            return ["inconsistent", info, odd[:5]]
        return [int(info[b"last-delivered-id"].split(b"-")[0]), {int(e[0].split(b"-")[0]) for e in pending}]
    if p in ("h", "mh"):
        r = c.command("HGETALL", key)
        return {f.decode(): v.decode() for f, v in zip(r[::2], r[1::2])}
    if p in ("z", "ez"):
        r = c.command("ZRANGE", key, 0, -1, "WITHSCORES")
        return {m.decode(): int(float(s)) for m, s in zip(r[::2], r[1::2])}
    if p == "l":
        return [v.decode() for v in c.command("LRANGE", key, 0, -1)]
    return int(c.command("GET", key) or 0)


def differences(seen, want):
    """What differs between two keyspaces of the model, briefly."""
    out = []
    for k, w in want.items():
        g = seen[k]
        if isinstance(w, dict) and isinstance(g, dict):
            out += [f"{k} missing {sorted(w.keys() - g.keys())[:5]}"] if w.keys() - g.keys() else []
            out += [f"{k} extra {sorted(g.keys() - w.keys())[:5]}"] if g.keys() - w.keys() else []
            out += [f"{k}[{f}] {g[f]!r:.40} want {w[f]!r:.40}" for f in sorted(g.keys() & w.keys())
                    if g[f] != w[f]][:5]
        elif isinstance(g, list) and not k.startswith("g:"):
            out.append(f"{k}: {len(g)} items ending {g[-2:]}, want {len(w)} ending {w[-2:]}")
        elif g != w:
            out.append(f"{k} {str(g)[:200]} want {str(w)[:200]}")
    return out


def prefix_problems(c, load, keys, observe, differences):
    """Each connection's keys on the restarted server (c) against the
    prefixes of its commands, from its last acknowledged one to its last
    one sent before a store-failed error arrived (the server refuses all
    after), and keys no connection wrote: the problems."""
    bad = []
    refusal = load.first_refusal() or float("inf")
    for tid, sent in load.sent.items():
        m = load.start_model(tid)
        states = [copy.deepcopy(m)]
        for cmds in sent:
            load.apply(m, cmds)
            states.append(copy.deepcopy(m))
        seen = {k: observe(c, k) for k in keys(tid)}
        lo = load.last_ack.get(tid, -1) + 1
        hi = sum(t <= refusal for t in load.sent_at[tid])
        if seen not in states[lo:hi + 1]:
            near = [k for k, s in enumerate(states) if s == seen]
            bad.append(f"{load.kinds[tid % len(load.kinds)]} {tid}: keys are not what its first "
                       f"{lo} to {hi} commands make (but its first {near or 'none of'}); against "
                       f"the first {lo}: " + "; ".join(differences(seen, states[lo])))
    extra = {k.decode() for k in c.command("KEYS", "*")} - {k for t in load.sent for k in keys(t)}
    if extra:
        bad.append(f"keys never written, or written after the failure: {sorted(extra)[:10]}")
    return bad


def check_types(port, load):
    """The restarted server's keys against the load's model: the problems."""
    with RespConn(port, timeout=10) as c:
        bad = prefix_problems(c, load, keys_of, observe, differences)
        for key in {k for k, _ in load.ids}:
            ids = {tuple(f.decode() for f in fields): i for i, fields in c.command("XRANGE", key, "-", "+")}
            lost = [(f, i, ids.get(f)) for (k, f), i in load.ids.items() if k == key and ids.get(f) != i]
            if lost:
                bad.append(f"{key}: acknowledged XADDs without their ID: {lost[:5]}")
    return bad


# The barrier's error: EIO, and on a disk also ENOSPC (a full file system
# under a sparse or thin store), named in the exit message and refusals.
ERRORS = {"EIO": EIO, "ENOSPC": "No space left on device"}


@pytest.mark.parametrize("durability,error", [("emulated", "EIO"), ("fsync", "EIO"),
                                              ("fsync", "ENOSPC")])
@pytest.mark.crash
def test_failed_barrier_mixed_types(pkvs, engine, durability, error):
    store = pkvs.new_store("/var/tmp" if durability == "fsync" else "/dev/shm")
    image = Path(pkvs.tmpdir()) / "image"
    op, count = FAULT[(engine, durability)].split(":")
    fault = f"{op}:{int(count) * FAULT_SCALE}:{error}"
    args = engine_args(engine, "--durability", durability)
    first = pkvs.start(args, store=store)
    prepare(first.resp_port)
    first.stop(keep_store=True)
    srv = pkvs.start(args, store=store, binary_name="pkvs-shim",
                     env={"PASTE_FAULT": fault, "PASTE_SHIM_IMAGE": str(image)})
    load = TypesLoad(srv.resp_port, seed=random.getrandbits(32)).start()
    failed_and_restarted(pkvs, srv, load, store, image, fault, error, args, kind_of, check_types)


def failed_and_restarted(pkvs, srv, load, store, image, fault, error, args, kind, check, after=None):
    """What a barrier-failure test checks once the load ran: the server
    exits as run_to_failure says; every reply before the failure was right
    and each connection had 3 or more acknowledged; nothing sent after a
    store-failed error was acknowledged, the refusals name the error;
    then the store and the shim's crash image (a copy) pass paste-store
    check and, restarted without faults, check(port, load) finds nothing
    wrong; after(port, path) runs on each before it stops."""
    probes = run_to_failure(srv, load, store, fault, ERRORS[error])
    assert not load.problems, f"wrong replies before the failure: {load.problems[:5]}"
    acked = {f"{kind(t)}:{t}": load.last_ack.get(t, -1) + 1 for t in range(len(load.kinds))}
    assert all(n >= 3 for n in acked.values()), f"too few acknowledged before {fault}: {acked}"
    assert load.refused or load.closes, "commands after the failure were neither refused nor closed"
    for _, msg in load.refused:
        assert ERRORS[error] in msg, msg
    first_refusal = load.first_refusal()
    late = sorted((kind(t), i) for sent, (t, i) in load.acks
                  if first_refusal is not None and sent > first_refusal)
    assert not late, f"acknowledged although sent after a store-failed error was received: {late[:10]}"
    for cmd, reply in probes:
        assert isinstance(reply, RespError) and str(reply).startswith(STORE_FAILED), (cmd, reply)
    copy_path = Path(pkvs.tmpdir()) / "image.store"
    shutil.copyfile(image, copy_path)
    for path in (store, str(copy_path)):
        cp = run_tool("--store", path, "check")
        assert cp.returncode == 0, f"paste-store check {path}: exit {cp.returncode}\n{cp.stdout}{cp.stderr}"
        again = pkvs.start(args, store=path)
        bad = check(again.resp_port, load)
        assert not bad, f"{path} after {fault} ({acked} acknowledged):\n" + "\n".join(bad)
        if after:
            after(again.resp_port, path)
        again.stop(keep_store=True)


# --------------------------------------------------------------------------
# (1b) injected barrier failures under big elements (in chunks)
# --------------------------------------------------------------------------

# Field values and list elements over one tree entry (129,024 bytes with
# 2 KiB buffers) go in chunks under an id of their own (services/kv_big.c).
BIG_KINDS = ("hset", "rpush", "lpop", "multi", "hset", "lpop")
BIG_KEYS = {"hset": ("bh",), "rpush": ("bl",), "lpop": ("bq",), "multi": ("bmh", "bml")}
BIG_HASHES = ("bh", "bmh")  # the others are lists
BIG_MIN, BIG_MAX = 150_000, 300_000
BIG_PRE = 8                 # big elements in each LPOP connection's list before the load
BIG_FAULT_SCALE = 3
BIG_STORE_SIZE = "192M"
HELD_SLACK = 64 * 1024      # less than one element in chunks: one left behind shows


def big_kind(tid):
    return BIG_KINDS[tid % len(BIG_KINDS)]


def big_keys(tid):
    return [f"{p}:{tid}" for p in BIG_KEYS[big_kind(tid)]]


def big_value(rng, head):
    """150-300 KB: head (which names the element) and random bytes."""
    head = head.encode() + b"|"
    return head + rng.randbytes(rng.randint(BIG_MIN, BIG_MAX) - len(head))


def big_name(v):
    """The header that names a value (or its first bytes and length)."""
    if v is None:
        return None
    end = v.find(b"|", 0, 40)
    return v[:end].decode() if end > 0 else f"{v[:16]!r}..({len(v)} bytes)"


def pre_elems(tid):
    """What connection tid's list holds before the load (LPOP connections)."""
    rng = random.Random(f"pre {tid}")
    return [big_value(rng, f"t{tid} pre{i}") for i in range(BIG_PRE)] if big_kind(tid) == "lpop" else []


def big_start_model(tid):
    """Connection tid's keys before the load: hashes empty, lists as prepared."""
    return {k: {} if k.split(":")[0] in BIG_HASHES else list(pre_elems(tid)) for k in big_keys(tid)}


def big_apply(m, cmds):
    """Run cmds (one command, or MULTI ... EXEC) on the model m; the replies."""
    if cmds[0][0] == "MULTI":
        return ["OK"] + ["QUEUED"] * (len(cmds) - 2) + [big_apply(m, cmds[1:-1])]
    out = []
    for name, key, *a in cmds:
        v = m[key]
        if name == "HSET":                      # field value
            out.append(int(a[0] not in v))
            v[a[0]] = a[1]
        elif name == "RPUSH":
            v.extend(a)
            out.append(len(v))
        else:                                   # LPOP
            out.append(v.pop(0) if v else None)
    return out


def big_plan(m, tid, n, rng):
    """Connection tid's n-th command(s), given its model m after all it sent."""
    kind, k = big_kind(tid), big_keys(tid)
    name = f"t{tid} c{n}"
    if kind == "hset":
        # An overwrite of one of its big fields, or a new field.
        f = rng.choice(sorted(m[k[0]])) if m[k[0]] and rng.random() < 0.4 else f"f{n}"
        return [("HSET", k[0], f, big_value(rng, name))]
    if kind == "rpush":
        return [("RPUSH", k[0]) + tuple(big_value(rng, f"{name} e{j}")
                                        for j in range(1 + (rng.random() < 0.3)))]
    if kind == "lpop":
        if len(m[k[0]]) > 2 and rng.random() < 0.55:      # never empty: each state its own
            return [("LPOP", k[0])]
        return [("RPUSH", k[0], big_value(rng, name))]
    f = rng.choice(sorted(m[k[0]])) if m[k[0]] and rng.random() < 0.3 else f"f{n}"
    return [("MULTI",), ("HSET", k[0], f, big_value(rng, f"{name} h")),
            ("RPUSH", k[1], big_value(rng, f"{name} l")), ("EXEC",)]


def big_sent(cmds):
    """A command list, briefly (element headers for values)."""
    return " ".join(big_name(a) if isinstance(a, bytes) else str(a) for c in cmds for a in c)


def big_load(port, seed):
    """One connection per entry of BIG_KINDS, each sending big_plan()'s
    commands one at a time until the server is gone (TypesLoad's way; an
    LPOP's element is matched byte for byte)."""
    return TypesLoad(port, seed, BIG_KINDS, big_start_model, big_plan, big_apply,
                     lambda tid, i, cmds, reply, want: (big_kind(tid), i, big_sent(cmds),
                                                        [big_name(r) if isinstance(r, bytes) else r
                                                         for r in reply]))


def info_held(port):
    """INFO memory's pkvs_held_bytes."""
    with RespConn(port) as c:
        m = re.search(rb"pkvs_held_bytes:(\d+)", c.command("INFO", "memory"))
    assert m, "no pkvs_held_bytes in INFO memory"
    return int(m.group(1))


def big_observe(c, key):
    if key.split(":")[0] in BIG_HASHES:
        r = c.command("HGETALL", key)
        return dict(zip((f.decode() for f in r[::2]), r[1::2]))
    return c.command("LRANGE", key, 0, -1)


def big_differences(seen, want):
    out = []
    for k, w in want.items():
        g = seen[k]
        if isinstance(w, dict):
            out += [f"{k} missing {sorted(w.keys() - g.keys())[:5]}"] if w.keys() - g.keys() else []
            out += [f"{k} extra {sorted(g.keys() - w.keys())[:5]}"] if g.keys() - w.keys() else []
            out += [f"{k}[{f}] {big_name(g[f])} ({len(g[f])} bytes), want {big_name(w[f])} "
                    f"({len(w[f])} bytes)" for f in sorted(g.keys() & w.keys()) if g[f] != w[f]][:5]
        elif g != w:
            names = [big_name(x) for x in g]
            odd = [big_name(x) for x, y in zip(g, w) if x != y and big_name(x) == big_name(y)]
            out.append(f"{k}: {names[:3]}..{names[-3:]} ({len(g)}), want "
                       f"{[big_name(x) for x in w][:3]}..{[big_name(x) for x in w][-3:]} ({len(w)})"
                       + (f"; same header, other bytes: {odd[:5]}" if odd else ""))
    return out


def check_big(port, load):
    """The restarted server's keys against big_load's model: the problems."""
    with RespConn(port, timeout=20) as c:
        return prefix_problems(c, load, big_keys, big_observe, big_differences)


def prepare_big(port):
    cmds = [("RPUSH", k) + tuple(pre_elems(t)) for t in range(len(BIG_KINDS))
            for k in big_keys(t) if pre_elems(t)]
    bad = [r for r in pipelined(port, cmds) if r != BIG_PRE]
    assert not bad, bad[:3]


@pytest.mark.parametrize("engine,durability,error", [("uring", "emulated", "EIO"),
                                                     ("uring", "fsync", "ENOSPC"),
                                                     ("epoll", "fsync", "EIO")])
@pytest.mark.crash
def test_failed_barrier_big_elements(pkvs, engine, durability, error):
    """HSETs of 150-300 KB field values (new fields and over big ones),
    RPUSHes of such elements, LPOPs of them and a MULTI/EXEC of a big HSET
    and a big RPUSH, until a barrier fails: as above, each connection's
    keys are what a prefix of its commands makes them, byte for byte, and
    once every key is deleted the held bytes are the empty store's: no
    chunk the failure cut off from its element is left behind."""
    if engine == "uring" and uring_unavailable_reason():
        pytest.skip(uring_unavailable_reason())
    store = pkvs.new_store("/var/tmp" if durability == "fsync" else "/dev/shm")
    image = Path(pkvs.tmpdir()) / "image"
    op, count = FAULT[(engine, durability)].split(":")
    fault = f"{op}:{int(count) * BIG_FAULT_SCALE}:{error}"
    args = engine_args(engine, "--durability", durability)
    first = pkvs.start(args, store=store, store_size=BIG_STORE_SIZE)
    base = settled(lambda: info_held(first.resp_port))   # the empty store's
    prepare_big(first.resp_port)
    first.stop(keep_store=True)
    srv = pkvs.start(args, store=store, binary_name="pkvs-shim",
                     env={"PASTE_FAULT": fault, "PASTE_SHIM_IMAGE": str(image)})
    load = big_load(srv.resp_port, random.getrandbits(32)).start()

    def emptied(port, path):
        with RespConn(port, timeout=20) as c:
            keys = c.command("KEYS", "*")
            assert keys and c.command("DEL", *keys) == len(keys), keys
            assert c.command("DBSIZE") == 0
        wait_until(lambda: info_held(port) <= base + HELD_SLACK, 30, interval=0.1)
        now = info_held(port)
        assert now <= base + HELD_SLACK, \
            f"{path}: pkvs_held_bytes {now} with every key deleted, {base} on the empty store " \
            f"({(now - base) // 1024} KiB over): chunks left behind by {fault}"

    failed_and_restarted(pkvs, srv, load, store, image, fault, error, args, big_kind, check_big,
                         after=emptied)


# --------------------------------------------------------------------------
# (2) short connections on a consumer group
# --------------------------------------------------------------------------

GROUP_CONNS = 3000
GROUP_THREADS = 4
GROUP_DEADLINE = 20.0
GROUP_KINDS = ("read", "fin", "rst", "read", "half", "fin", "read", "half-rst")
ENTRIES = GROUP_CONNS + 100         # the stream never runs dry during the churn
BLOCK_ROUNDS = 12


def seq(entry_id):
    return int(entry_id.split(b"-")[0])


def close(sock, rst):
    if rst:
        reset(sock)
    else:
        sock.close()


def wait_blocked(port, n):
    """Wait until INFO clients' blocked_clients is n."""
    def blocked():
        with RespConn(port) as c:
            return int(re.search(rb"blocked_clients:(\d+)", c.command("INFO", "clients")).group(1))
    assert wait_until(lambda: blocked() == n, 10), f"{blocked()} clients blocked, want {n}"


def read_cmd(consumer, *opts):
    return resp_command("XREADGROUP", "GROUP", "g", consumer, *opts, "STREAMS", "s", ">")


def entries_of(reply):
    """The sequence numbers of the entries a read of s got ([] for nil)."""
    if reply is None:
        return []
    (key, entries), = reply
    assert key == b"s" and all(f == [b"i", str(seq(i)).encode()] for i, f in entries), reply
    return [seq(i) for i, _ in entries]


def group_problems(c, reads, consumers):
    """Group g of s against '>' delivery: every entry up to last-delivered-id
    pending once, delivered once; each (consumer, entry) of reads pending
    for that consumer; no consumer but those named. Returns (problems,
    the last delivered entry)."""
    info = c.command("XINFO", "GROUPS", "s")[0]
    info = dict(zip(info[::2], info[1::2]))
    last = seq(info[b"last-delivered-id"])
    pel = {seq(e[0]): (e[1].decode(), e[3]) for e in c.command("XPENDING", "s", "g", "-", "+", 2 * ENTRIES)}
    summary = c.command("XPENDING", "s", "g")[0]
    bad = []
    if not summary == info[b"pending"] == len(pel) == last == info[b"entries-read"]:
        bad.append(f"XPENDING's count {summary}, XINFO's pending {info[b'pending']} and entries-read "
                   f"{info[b'entries-read']}, {len(pel)} pending entries, last delivered {last}")
    delivered = set(range(1, last + 1))
    if set(pel) != delivered:
        bad.append(f"pending, not delivered: {sorted(set(pel) - delivered)[:10]}; "
                   f"delivered, not pending: {sorted(delivered - set(pel))[:10]}")
    twice = [(i, d) for i, (_, d) in pel.items() if d != 1]
    dup = len(reads) - len({i for _, i in reads})
    if twice or dup:
        bad.append(f"delivered twice: {twice[:10]}; {dup} replies repeat an entry")
    wrong = [(name, i, pel.get(i)) for name, i in reads if pel.get(i, ("",))[0] != name]
    if wrong:
        bad.append(f"entries read, not pending for their reader: {wrong[:10]}")
    names = {dict(zip(x[::2], x[1::2]))[b"name"].decode() for x in c.command("XINFO", "CONSUMERS", "s", "g")}
    if names - consumers:
        bad.append(f"consumers that never sent a whole command: {sorted(names - consumers)[:10]}")
    return bad, last


def test_group_connection_churn(pkvs, engine):
    srv = pkvs.start(engine_args(engine))
    port = srv.resp_port
    pipelined(port, [("XADD", "s", f"{i}-1", "i", i) for i in range(1, ENTRIES + 1)]
              + [("XGROUP", "CREATE", "s", "g", "0")])
    base = connected_clients(port)
    lock = threading.Lock()
    reads = []                # (consumer, entry) of every reply read
    whole = set()             # consumers that sent a whole command
    problems = []
    deadline = time.monotonic() + GROUP_DEADLINE

    def one(i):
        kind, name = GROUP_KINDS[i % len(GROUP_KINDS)], f"c{i}"
        cmd = read_cmd(name, "COUNT", 1)
        s = connect(port)
        try:
            if kind.startswith("half"):
                s.sendall(cmd[:random.Random(i).randrange(1, len(cmd))])
                if kind == "half-rst":
                    reset(s)
                return
            with lock:
                whole.add(name)
            s.sendall(cmd)
            if kind == "rst":
                reset(s)
            elif kind == "read":
                got = entries_of(RespConn.over(s).read_reply())
                assert len(got) == 1, f"{got}: a COUNT 1 read of a stream that never runs dry"
                with lock:
                    reads.append((name, got[0]))
        finally:
            s.close()

    def worker(t):
        for i in range(t, GROUP_CONNS, GROUP_THREADS):
            if time.monotonic() > deadline:
                with lock:
                    problems.append(f"deadline reached at connection {i}")
                return
            try:
                one(i)
            except (OSError, AssertionError, ConnectionClosed, ValueError) as e:
                with lock:
                    problems.append(f"connection {i} ({GROUP_KINDS[i % len(GROUP_KINDS)]}): {e!r}")

    t0 = time.monotonic()
    stuck = run_threads(GROUP_THREADS, worker, GROUP_DEADLINE + 10)
    assert stuck == 0, f"{stuck} client threads did not finish"
    assert not problems, f"{len(problems)} problems in {time.monotonic() - t0:.1f}s, e.g. {problems[:8]}"
    wait_clients(port, base)
    with RespConn(port, timeout=10) as c:
        bad, last = group_problems(c, reads, whole)
        assert not bad, "after the churn:\n" + "\n".join(bad)
        assert len(reads) <= last <= len(whole), (len(reads), last, len(whole))
        got = entries_of(c.command("XREADGROUP", "GROUP", "g", "drain", "COUNT", ENTRIES,
                                   "STREAMS", "s", ">"))
        assert got == list(range(last + 1, ENTRIES + 1)), f"the rest after {last}: {got[:3]}..{got[-3:]}"
        reads += [("drain", i) for i in got]
        whole.add("drain")
        # Each round six BLOCK 100 readers, four of them closing (FIN, RST)
        # while blocked, and an entry, added after the closes or just
        # before them: it goes to one reader, closed (its reply unread) or
        # open; an open one may time out instead.
        for r in range(BLOCK_ROUNDS):
            names = [f"b{r}.{j}" for j in range(6)]
            whole.update(names)
            socks = [connect(port) for _ in names]
            for s, name in zip(socks, names):
                s.sendall(read_cmd(name, "BLOCK", 100))
            time.sleep(0.03)
            xadd = ("XADD", "s", f"{ENTRIES + r + 1}-1", "i", ENTRIES + r + 1)
            if r % 2:
                c.send(resp_command(*xadd))
            for j, s in enumerate(socks[:4]):
                close(s, rst=j % 2)
            assert isinstance(c.read_reply() if r % 2 else c.command(*xadd), bytes)
            for s, name in zip(socks[4:], names[4:]):
                try:
                    reads += [(name, i) for i in entries_of(RespConn.over(s).read_reply())]
                finally:
                    s.close()
        wait_clients(port, base + 1)
        bad, last = group_problems(c, reads, whole)
        assert not bad, "after the BLOCK 100 readers:\n" + "\n".join(bad)
        # Readers blocked for good, then closed: gone from the blocked
        # list once the server has seen them close, so a new entry stays
        # undelivered and the next '>' read gets it.
        socks = [connect(port) for _ in range(4)]
        for j, s in enumerate(socks):
            whole.add(f"z{j}")
            s.sendall(read_cmd(f"z{j}", "BLOCK", 0))
        wait_blocked(port, 4)
        for j, s in enumerate(socks):
            close(s, rst=j % 2)
        wait_clients(port, base + 1)
        wait_blocked(port, 0)
        top = ENTRIES + BLOCK_ROUNDS + 1
        assert isinstance(c.command("XADD", "s", f"{top}-1", "i", top), bytes)
        time.sleep(0.1)
        bad, now = group_problems(c, reads, whole)
        assert not bad and now == last, f"after an XADD with no reader blocked: last delivered " \
                                        f"{last} -> {now}; " + "\n".join(bad)
        got = entries_of(c.command("XREADGROUP", "GROUP", "g", "late", "STREAMS", "s", ">"))
        assert got == list(range(last + 1, top + 1)), f"after {last}: {got}"
        assert c.command("PING") == "PONG"
    wait_clients(port, base)
    assert srv.running()


def test_unread_deliveries_like_redis(pkvs, redis_peer):  # noqa: F811
    """The same short connections on pkvs and on redis-server (a delivery
    whose reply is not read, half a command, a blocked reader closed),
    then the group's state as both report it, byte for byte."""
    srv = pkvs.start()
    p = flushed_peers(srv.resp_port, redis_peer.resp_port)
    try:
        for i in range(1, 6):
            p.same("XADD", "s", f"{i}-1", "i", i)
        p.same("XGROUP", "CREATE", "s", "g", "0")
        for port in (srv.resp_port, redis_peer.resp_port):
            base = connected_clients(port)
            s = connect(port)
            s.sendall(read_cmd("c1", "COUNT", 2))
            s.close()                       # FIN, the reply not read
            s = connect(port)
            s.sendall(read_cmd("c2", "COUNT", 2)[:20])
            reset(s)                        # half a command
            wait_clients(port, base)
        p.same("XPENDING", "s", "g")
        p.same("XREADGROUP", "GROUP", "g", "c3", "STREAMS", "s", ">")
        for port in (srv.resp_port, redis_peer.resp_port):
            base = connected_clients(port)
            s = connect(port)
            s.sendall(read_cmd("c4", "BLOCK", 0))
            wait_blocked(port, 1)
            s.close()
            wait_blocked(port, 0)
            wait_clients(port, base)
        p.same("XADD", "s", "6-1", "i", "6")
        for cmd in (("XPENDING", "s", "g"), ("XINFO", "GROUPS", "s"),
                    ("XREADGROUP", "GROUP", "g", "c5", "STREAMS", "s", ">"), ("XPENDING", "s", "g"),
                    ("XACK", "s", "g", "1-1", "2-1", "6-1", "7-1"), ("XINFO", "GROUPS", "s")):
            p.same(*cmd)
    finally:
        p.close()
