"""pkvs's hash field values and list elements in chunks (over one tree
entry; test_pkvs_bigelems.py has their commands) off the happy path:

- Replies that carry them outlive their removal in the same batch, read
  late while other writes churn the store.
- Space: every way an element goes (HDEL, overwrites, pops, LTRIM, LREM,
  LSET, LMOVE, DEL, expiry, FLUSHDB) gives its chunks' buffers back
  (INFO pkvs_held_bytes), before and after a restart; paste-store check.
- A full store: big HSETs and RPUSHes refused with Redis's OOM error
  (and a transaction with EXECABORT) change nothing and keep no buffer;
  reads and deletes go on; room again after deletes.
- kill -9 under concurrent big RPUSH/HSET, and under concurrent LPOP: what
  was acknowledged is there (or gone) whole, nothing partial, no leak.
"""
import random
import threading
import time

import pytest
import redis

from conftest import RespConn, RespError, resp_command, wait_until
from test_pkvs_bigelems import (BIG_STORE, ENTRY, MiB, SLACK, check_store, client, held, restarted,
                                settled_base, space_back, val)


# ---------------------------------------------------------------------------
# Replies outlive the removal of what they send
# ---------------------------------------------------------------------------

def test_replies_outlive_removal(pkvs):
    """Replies that carry big elements, pipelined with the commands that
    remove them and left unread while the sweeper runs and other clients
    write over the space: every byte as it was when the reply was made."""
    srv = pkvs.start(BIG_STORE + ["--checkpoint-ms", "100"], store_size="128M")
    r = client(srv, 2)
    base = settled_base(r)
    huge = val(20 * MiB, "pin")
    H2 = {b"a": val(MiB, "pa"), b"b": val(200_000, "pb"), b"c": b"small"}
    L = [val(MiB, ("pl", i)) for i in range(3)] + [val(ENTRY + 1, "pl3")]
    assert r.hset("h", "huge", huge) == 1
    assert r.hset("h2", mapping=H2) == 3
    assert r.rpush("l", *L) == 4
    cmds = [("HGET", "h", "huge"), ("HDEL", "h", "huge"), ("HGETALL", "h2"), ("DEL", "h2"),
            ("LRANGE", "l", "0", "-1"), ("LPOP", "l", "2"), ("LINDEX", "l", "0"),
            ("LSET", "l", "0", "small"), ("LINDEX", "l", "1"), ("LTRIM", "l", "1", "0"),
            ("HGET", "h", "huge"), ("EXISTS", "h", "h2", "l")]
    want = [huge, 1, [x for kv in H2.items() for x in kv], 1, L, L[:2], L[2], "OK", L[3],
            "OK", None, 0]
    with RespConn(srv.resp_port, timeout=60) as c:
        c.send(b"".join(resp_command(*cmd) for cmd in cmds))
        # Not read yet: the sweeper runs, checkpoints pass, and new big
        # values take free space (100 MiB, more than the store has free).
        w = client(srv, 2)
        for rnd in range(4):
            assert w.hset("fill", mapping={f"f{i}": val(MiB, (rnd, i)) for i in range(25)}) == 25
            assert w.delete("fill") == 1
            time.sleep(0.2)
        got = [c.read_reply() for _ in cmds]
    for cmd, g, x in zip(cmds, got, want):
        assert g == x, f"{cmd[:3]}: {str(g)[:80]} != {str(x)[:80]}"
    got = space_back(w, base)
    assert got <= base + SLACK, f"pkvs_held_bytes {got}, {base} before anything was written"
    w.close()
    r.close()
    check_store(srv)


# ---------------------------------------------------------------------------
# Space comes back
# ---------------------------------------------------------------------------

def test_space_comes_back(pkvs):
    srv = pkvs.start(BIG_STORE + ["--checkpoint-ms", "200"], store_size="256M")
    r = client(srv, 3)
    r1 = client(srv, 3, db=1)
    base = settled_base(r)
    H = {f"f{i:02d}".encode(): val(MiB, ("sh", i)) for i in range(20)}
    L = [val(MiB, ("sl", i)) for i in range(20)]
    assert r.hset("h", mapping=H) == 20
    assert r.rpush("l", *L) == 20
    assert r.rpush("lx", *[val(MiB, ("lx", i)) for i in range(3)]) == 3
    assert r.hset("hx", mapping={f"x{i}": val(MiB, ("hx", i)) for i in range(3)}) == 3
    assert r1.hset("fh", mapping={f"y{i}": val(MiB, ("fh", i)) for i in range(3)}) == 3
    assert r1.rpush("fl", *[val(MiB, ("fl", i)) for i in range(3)]) == 3
    full = held(r)
    assert full >= base + 52 * MiB, (base, full)
    # The hash: HDEL, overwrites with small and with big, DEL of the rest.
    assert r.hdel("h", *[f"f{i:02d}" for i in range(5)]) == 5
    for i in range(5, 10):
        assert r.hset("h", f"f{i:02d}", b"small") == 0
    assert r.hset("h", "f10", val(MiB, "again")) == 0
    assert r.hget("h", "f11") == H[b"f11"]
    assert r.delete("h", "hx") == 2
    # The list: every kind of pop, LTRIM, LREM, LSET, LMOVE, RPOPLPUSH.
    m = list(L)
    assert r.lpop("l", 2) == m[:2]
    del m[:2]
    assert r.rpop("l") == m.pop()
    assert r.blpop(["l"], timeout=1) == [b"l", m.pop(0)]
    assert r.lmpop(1, "l", direction="RIGHT", count=1) == [b"l", [m.pop()]]
    assert r.ltrim("l", 1, -2) is True
    m = m[1:-1]
    assert r.lrem("l", 1, m[3]) == 1
    del m[3]
    assert r.lrem("l", -1, m[5]) == 1
    del m[5]
    assert r.lset("l", 0, b"small") is True and r.lset("l", 1, b"small") is True
    m[0:2] = [b"small", b"small"]
    assert r.lmove("l", "dst", "LEFT", "LEFT") == m.pop(0)
    assert r.rpoplpush("l", "dst") == m.pop()
    assert r.lrange("l", 0, -1) == m
    assert len(r.lpop("l", 100)) == len(m)
    assert r.exists("l") == 0
    assert r.delete("dst") == 1
    # Expiry of a list, FLUSHDB of a database holding big elements.
    assert r.pexpire("lx", 100) is True
    assert r1.flushdb() is True
    assert wait_until(lambda: r.exists("lx") == 0, 5)
    assert r.dbsize() == 0 and r1.dbsize() == 0
    got = space_back(r, base)
    assert got <= base + SLACK, f"pkvs_held_bytes {got}, {base} at the start, {full} full"
    # After a restart too; and big elements written before a restart are
    # given back when they go after it.
    r.close()
    r1.close()
    srv.restart()
    r = client(srv, 3)
    got = held(r)
    assert got <= base + SLACK, f"pkvs_held_bytes {got} after the restart, {base} at the start"
    assert r.hset("h", mapping={f"g{i}": val(MiB, ("g", i)) for i in range(5)}) == 5
    assert r.rpush("l", *[val(MiB, ("r", i)) for i in range(5)]) == 5
    r = restarted(srv, r)
    assert r.hdel("h", "g0", "g1") == 2
    assert r.hset("h", "g2", b"small") == 0
    assert len(r.lpop("l", 2)) == 2
    assert r.ltrim("l", 1, 1) is True
    assert r.delete("h", "l") == 2
    got = space_back(r, base)
    assert got <= base + SLACK, f"pkvs_held_bytes {got}, {base} at the start"
    r.close()
    check_store(srv)


# ---------------------------------------------------------------------------
# A full store
# ---------------------------------------------------------------------------

OOM = "OOM command not allowed when used memory > 'maxmemory'."


def named(name, n):
    """n bytes that start with name and a '|': what a value is, at a glance."""
    head = name.encode() + b"|"
    return head + val(n - len(head), head)


def oom(reply):
    """Redis's words for a write the store has no room for (kv_reply_errno)."""
    return isinstance(reply, RespError) and str(reply) == OOM


def test_full_store_refuses_big_elements(pkvs):
    """A 64 MiB store filled with 150-300 KB field values and list elements
    until a write is refused with Redis's OOM error: the refused writes
    (new fields, pushes, an overwrite, a transaction) change nothing and
    leave nothing behind; reads and deletes go on, every acknowledged value
    byte-exact; once some data is deleted big writes are taken again; once
    all of it is, the held bytes are the empty store's; the store checks
    clean."""
    srv = pkvs.start(BIG_STORE + ["--checkpoint-ms", "200"], store_size="64M")
    r = client(srv, 2)
    base = settled_base(r)
    rng = random.Random(7)
    H, L = {}, []
    D = [named(f"d{i}", 200_000) for i in range(3)]
    assert r.rpush("d", *D) == 3
    refused = None
    with RespConn(srv.resp_port, timeout=60) as c:
        for i in range(1000):                 # 64 MiB: about 300 of them
            v = named(f"fill {i}", rng.randint(150_000, 300_000))
            if i % 2:
                got, want = c.command("HSET", "h", f"f{i}", v), 1
            else:
                got, want = c.command("RPUSH", "l", v), len(L) + 1
            if isinstance(got, RespError):
                refused = (i, got)
                break
            assert got == want, (i, got, want)
            if i % 2:
                H[f"f{i}".encode()] = v
            else:
                L.append(v)
        assert refused, f"{len(H) + len(L)} big writes taken by a 64 MiB store"
        i, got = refused
        assert oom(got), f"write {i} refused with {got!r}, want -{OOM}"
        assert len(H) + len(L) >= 100, f"refused after {len(H) + len(L)} big writes"
        # The refused write changed nothing.
        assert c.command("HEXISTS", "h", f"f{i}") == 0 and c.command("HLEN", "h") == len(H)
        assert c.command("LLEN", "l") == len(L)
        # More refusals of every kind, none of them changing anything.
        big = named("refused", MiB)
        old = next(iter(H))
        for cmd in [("HSET", "h", "new", big), ("RPUSH", "l", big), ("LPUSH", "l", big),
                    ("HSET", "h", old, big), ("LSET", "l", 0, big), ("RPUSH", "d", big, b"s"),
                    ("HSET", "h", "new2", b"small", "new3", big)] * 3:
            got = c.command(*cmd)
            assert oom(got), f"{cmd[:3]} on the full store: {got!r}, want -{OOM}"
        c.send(b"".join(resp_command(*cmd) for cmd in
                        [("MULTI",), ("HSET", "h", "m", b"small"), ("HSET", "h", "mb", big),
                         ("RPUSH", "l", big), ("EXEC",)]))
        got = [c.read_reply() for _ in range(5)]
        assert got[:4] == ["OK", "QUEUED", "QUEUED", "QUEUED"], got[:4]
        assert isinstance(got[4], RespError) and str(got[4]) == \
            f"EXECABORT Transaction discarded because of: {OOM}", got[4]
        assert c.command("HMGET", "h", "new", "new2", "new3", "m", "mb") == [None] * 5
        assert c.command("HLEN", "h") == len(H) and c.command("LLEN", "l") == len(L)
        assert c.command("LLEN", "d") == 3
    # Reads: every acknowledged value byte for byte.
    assert r.hgetall("h") == H
    assert r.lrange("l", 0, -1) == L
    assert r.lrange("d", 0, -1) == D
    assert r.hget("h", old) == H[old] and r.lindex("l", 0) == L[0] and r.lindex("l", -1) == L[-1]
    # Deletes: HDEL, LPOP, DEL.
    gone = sorted(H)[:2]
    assert r.hdel("h", *gone) == 2
    for f in gone:
        del H[f]
    assert r.lpop("l", 2) == L[:2]
    del L[:2]
    assert r.lpop("l") == L.pop(0)
    assert r.delete("d") == 1
    # Room again: a new big field and element are taken (once the deletes'
    # buffers are back: after a checkpoint).
    nv, ne = named("again h", 250_000), named("again l", 250_000)
    with RespConn(srv.resp_port, timeout=60) as c:
        tries = []

        def put(cmd, want):
            got = c.command(*cmd)
            tries.append(got)
            assert got == want or oom(got), f"{cmd[:3]}: {got!r}"
            return got == want
        assert wait_until(lambda: put(("HSET", "h", "again", nv), 1), 10, interval=0.1), \
            f"a big HSET still refused 10 s after the deletes: {tries[-1]!r}"
        assert wait_until(lambda: put(("RPUSH", "l", ne), len(L) + 1), 10, interval=0.1), \
            f"a big RPUSH still refused 10 s after the deletes: {tries[-1]!r}"
    H[b"again"] = nv
    L.append(ne)
    assert r.hget("h", "again") == nv and r.lindex("l", -1) == ne
    assert r.hgetall("h") == H and r.lrange("l", 0, -1) == L
    # Everything gone: no buffer kept by any refused write.
    assert r.delete("h", "l") == 2 and r.dbsize() == 0
    got = space_back(r, base)
    assert got <= base + SLACK, f"pkvs_held_bytes {got} with every key deleted, {base} on the " \
                                f"empty store: the refused writes left {(got - base) // 1024} KiB"
    r.close()
    check_store(srv)


# ---------------------------------------------------------------------------
# kill -9
# ---------------------------------------------------------------------------

def elem(c, seq, n):
    """Element seq of client c: a header naming both, then filler of its own."""
    head = b"client %d seq %d|" % (c, seq)
    return head + val(n - len(head), head)


def crash_server(pkvs, store_size):
    """A server for a kill -9 test, a RESP2 client, and the empty store's
    held bytes."""
    srv = pkvs.start(BIG_STORE + ["--checkpoint-ms", "200"], store_size=store_size)
    r = client(srv, 2)
    return srv, r, settled_base(r)


@pytest.mark.crash
def test_kill9_under_big_pushes_and_hsets(pkvs):
    size, clients, cap = 300_000, 3, 200
    srv, r, base = crash_server(pkvs, "512M")
    r.close()
    sent = {c: 0 for c in range(clients)}
    acked_l = {c: 0 for c in range(clients)}
    acked_h = {c: 0 for c in range(clients)}
    problems = []
    stop = threading.Event()

    def load(c):
        rc = client(srv, 2, retries=False)
        seq = 0
        try:
            while not stop.is_set() and seq < cap:
                seq += 1
                e = elem(c, seq, size)
                sent[c] = seq
                n = rc.rpush(f"l{c}", e)
                if n != seq:
                    problems.append((c, seq, "RPUSH", n))
                    return
                acked_l[c] = seq
                n = rc.hset(f"h{c}", f"f{seq}", e)
                if n != 1:
                    problems.append((c, seq, "HSET", n))
                    return
                acked_h[c] = seq
        except (redis.ConnectionError, redis.TimeoutError):
            pass                          # the kill
        except Exception as e:            # noqa: BLE001 (reported below)
            problems.append((c, seq, repr(e)))
        finally:
            rc.close()
    threads = [threading.Thread(target=load, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    # The kill lands while all of them write: after a second, or once
    # 40% of what they may write is acknowledged (well before any stops).
    wait_until(lambda: sum(acked_h.values()) >= clients * cap * 2 // 5, 1.0, interval=0.002)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join(30)
    assert not problems, problems
    assert sum(acked_h.values()) >= 3, (acked_l, acked_h)
    srv.start()
    r = client(srv, 2)
    for c in range(clients):
        got = r.lrange(f"l{c}", 0, -1)
        assert acked_l[c] <= len(got) <= sent[c], (c, len(got), acked_l[c], sent[c])
        bad = [i + 1 for i, e in enumerate(got) if e != elem(c, i + 1, size)]
        assert not bad, f"client {c}: elements {bad[:10]} not as pushed"
        h = r.hgetall(f"h{c}")
        seqs = sorted(int(f[1:]) for f in h)
        assert seqs == list(range(1, len(seqs) + 1)), (c, seqs)
        assert acked_h[c] <= len(seqs) <= sent[c], (c, len(seqs), acked_h[c], sent[c])
        bad = [f for f, v in h.items() if v != elem(c, int(f[1:]), size)]
        assert not bad, f"client {c}: fields {bad[:10]} not as set"
        assert r.hlen(f"h{c}") == len(h)
    r.close()
    check_store(srv)
    srv.start()
    r = client(srv, 2)
    keys = [f"{k}{c}" for c in range(clients) for k in "lh"]
    there = r.exists(*keys)
    assert there >= 1 and r.delete(*keys) == there
    got = space_back(r, base)
    assert got <= base + SLACK, f"pkvs_held_bytes {got} after DEL, {base} on the empty store"
    r.close()
    check_store(srv)


@pytest.mark.crash
def test_kill9_under_big_pops(pkvs):
    size, n, clients = 150_000, 400, 3
    srv, r, base = crash_server(pkvs, "256M")
    elems = [elem(0, i, size) for i in range(1, n + 1)]
    pipe = r.pipeline(transaction=False)
    for i in range(0, n, 20):
        pipe.rpush("q", *elems[i:i + 20])
    assert pipe.execute()[-1] == n
    r.close()
    popped = {c: [] for c in range(clients)}
    in_flight = {c: 0 for c in range(clients)}
    problems = []
    stop = threading.Event()

    def pop(c):
        rc = client(srv, 2, retries=False)
        count = 2 if c == 0 else 1
        try:
            while not stop.is_set():
                in_flight[c] = count
                got = rc.lpop("q", count) if count > 1 else rc.lpop("q")
                if got is None:
                    in_flight[c] = 0
                    return
                popped[c] += got if count > 1 else [got]
                in_flight[c] = 0
        except (redis.ConnectionError, redis.TimeoutError):
            pass
        except Exception as e:            # noqa: BLE001 (reported below)
            problems.append((c, repr(e)))
        finally:
            rc.close()
    threads = [threading.Thread(target=pop, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    # The kill lands while all of them pop, a quarter of the list gone.
    wait_until(lambda: sum(len(v) for v in popped.values()) >= n // 4, 20, interval=0.002)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join(30)
    assert not problems, problems
    acked = [e for c in range(clients) for e in popped[c]]
    index = {e: i for i, e in enumerate(elems)}
    assert all(e in index for e in acked), "a popped element not as pushed"
    assert len(set(acked)) == len(acked), "an element popped twice"
    assert acked, "no pop acknowledged before the kill"
    srv.start()
    r = client(srv, 2)
    got = r.lrange("q", 0, -1)
    k = n - len(got)
    assert got == elems[k:], f"after the restart: not the pushed elements in order past {k}"
    assert got, f"every element popped before the kill ({len(acked)} acknowledged)"
    assert max(index[e] for e in acked) < k, "an acknowledged pop's element is back"
    assert len(acked) <= k <= len(acked) + sum(in_flight.values()), (len(acked), k, in_flight)
    assert r.llen("q") == len(got)
    r.close()
    check_store(srv)
    srv.start()
    r = client(srv, 2)
    assert r.delete("q") == 1
    got = space_back(r, base)
    assert got <= base + SLACK, f"pkvs_held_bytes {got} after DEL, {base} on the empty store"
    r.close()
    check_store(srv)
