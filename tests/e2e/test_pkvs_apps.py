"""Applications on pkvs's transactions, through redis-py 8 (the same tests
run against Debian's redis-server, to show they expect what Redis does).

- Transactional pipelines (pipeline() wraps its commands in MULTI/EXEC by
  default), in RESP2 and RESP3: results in order; an error while running
  fails only its command (raised, or returned with raise_on_error=False);
  an error while queueing aborts the whole transaction, nothing written.
- Optimistic locking: 4 processes each add to one counter N times with
  WATCH / GET / MULTI / SET / EXEC, retrying when EXEC answers null: the
  counter ends at exactly 4 N (a WATCH that missed a change would lose
  increments). redis-py's transaction() helper does the same.
- kill -9 under a load of mixed transactions and scripts (SETs, INCR,
  HSET, SETs with a deadline, RPUSH, SADD, ZADD), the even steps in
  MULTI/EXEC, the odd ones as one EVAL, three rounds on one store: after
  each restart every acknowledged step is wholly there and none is there
  in part (each step writes several keys with one tag and a per-writer
  counter, so a partial one shows).
"""
import multiprocessing
import random
import threading
import time

import pytest

redis = pytest.importorskip("redis")
from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

from conftest import RespConn  # noqa: E402
from pkvs_module import pkvs_srv  # noqa: E402,F401 (pkvs_srv: a fixture)
from redis_peer import redis_peer  # noqa: E402,F401 (a fixture)



@pytest.fixture(params=["pkvs", "redis"])
def port(request, pkvs_srv):
    p = pkvs_srv.resp_port if request.param == "pkvs" else \
        request.getfixturevalue("redis_peer").port
    with RespConn(p) as c:
        c.command("FLUSHALL")
    return p


@pytest.mark.parametrize("protocol", [2, 3])
def test_transactional_pipeline(port, protocol):
    r = redis.Redis(port=port, protocol=protocol)
    pipe = r.pipeline()
    pipe.set("a", 1).incr("a").incrby("a", 10).get("a").mset({"b": "x", "c": "y"})
    pipe.mget("a", "b", "c", "nope").exists("a", "b", "nope").delete("c")
    assert pipe.execute() == [True, 2, 12, b"12", True, [b"12", b"x", b"y", None], 2, 1]
    with r.pipeline() as pipe:
        pipe.set("big", b"z" * 100_000).strlen("big").getrange("big", -3, -1)
        assert pipe.execute() == [True, 100_000, b"zzz"]
    with r.pipeline() as pipe:               # empty
        assert pipe.execute() == []
    r.close()


def test_pipeline_errors(port):
    r = redis.Redis(port=port)
    r.set("s", "text")
    # Run-time errors: that command fails, the others are written.
    pipe = r.pipeline()
    pipe.set("t1", 1).incr("s").set("t2", 2)
    with pytest.raises(redis.ResponseError, match="not an integer"):
        pipe.execute()
    assert r.mget("t1", "t2") == [b"1", b"2"]
    pipe = r.pipeline()
    pipe.set("t3", 3).incr("s").get("t3")
    res = pipe.execute(raise_on_error=False)
    assert res[0] is True and isinstance(res[1], redis.ResponseError) and res[2] == b"3"
    # A queueing error: EXECABORT, nothing written.
    pipe = r.pipeline()
    pipe.set("u1", 1).execute_command("SET", "onlykey").set("u2", 2)
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        pipe.execute()
    pipe = r.pipeline()
    pipe.set("u3", 1).execute_command("NOSUCHCOMMAND", "x")
    with pytest.raises(redis.ResponseError, match="unknown command"):
        pipe.execute()
    assert r.exists("u1", "u2", "u3") == 0
    # The connection is usable after each.
    assert r.ping() is True
    r.close()


def test_watch_and_transaction_helper(port):
    r = redis.Redis(port=port)
    r.set("balance", 100)
    with r.pipeline() as pipe:
        pipe.watch("balance")
        bal = int(pipe.get("balance"))
        r.set("balance", 50)                  # someone else changes it
        pipe.multi()
        pipe.set("balance", bal - 10)
        with pytest.raises(redis.WatchError):
            pipe.execute()
    assert r.get("balance") == b"50"

    def spend(pipe):
        bal = int(pipe.get("balance"))
        pipe.multi()
        pipe.set("balance", bal - 10)

    assert r.transaction(spend, "balance") == [True]
    assert r.get("balance") == b"40"
    r.close()


def _increment(port, key, times, out):
    r = redis.Redis(port=port)
    retries = 0
    for _ in range(times):
        while True:
            with r.pipeline() as pipe:
                try:
                    pipe.watch(key)
                    v = int(pipe.get(key) or 0)
                    pipe.multi()
                    pipe.set(key, v + 1)
                    pipe.execute()
                    break
                except redis.WatchError:
                    retries += 1
    out.put(retries)
    r.close()


def test_optimistic_locking_counter(port):
    """4 processes, each adding 1 to one counter 200 times through
    WATCH/MULTI/EXEC with retries: exactly 800 at the end."""
    procs, times = 4, 200
    q = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=_increment, args=(port, "counter", times, q))
          for _ in range(procs)]
    for p in ps:
        p.start()
    retries = [q.get(timeout=120) for _ in ps]
    for p in ps:
        p.join(30)
        assert p.exitcode == 0
    r = redis.Redis(port=port)
    assert int(r.get("counter")) == procs * times, retries
    r.close()


# ---------------------------------------------------------------------------
# kill -9 under transactions
# ---------------------------------------------------------------------------


SLOTS = 20


class TxLoad:
    """Writers, each running transactions i = 0, 1, ... of its own: SET
    a:w:i and b:w:i to the tag "w:i", INCR n:w, SET s:w:0..19 (the same
    keys every time) to the tag, HSET h:w f<i> tag, SET e:w:i tag with a
    deadline far ahead and x:w:i tag with one 1 ms ahead, SET last:w i.
    acked[w]: the last i whose EXEC was answered. A transaction of ~27
    commands keeps the server inside EXEC much of the time, where a kill
    lands in the middle of one."""

    # One step as a script: KEYS a, b, e, x, n, h, l, m, z, last, s:0..;
    # ARGV tag, i. The same writes as the MULTI form below.
    SCRIPT = """
        local tag, i = ARGV[1], ARGV[2]
        redis.call('SET', KEYS[1], tag)
        local n = redis.call('INCR', KEYS[5])
        redis.call('SET', KEYS[2], tag)
        for j = 11, #KEYS do redis.call('SET', KEYS[j], tag) end
        redis.call('HSET', KEYS[6], 'f' .. i, tag)
        redis.call('SET', KEYS[3], tag, 'PX', 3600000)
        redis.call('SET', KEYS[4], tag, 'PX', 1)
        redis.call('RPUSH', KEYS[7], tag)
        redis.call('SADD', KEYS[8], tag)
        redis.call('ZADD', KEYS[9], i, tag)
        redis.call('SET', KEYS[10], i)
        return n"""

    def __init__(self, port, writers, first):
        self.port = port
        self.acked = dict(first)
        self.stop = threading.Event()
        self.errors = []
        self.threads = [threading.Thread(target=self._run, args=(w,)) for w in range(writers)]

    def _run(self, w):
        rng = random.Random(w)
        try:
            r = redis.Redis(port=self.port, socket_timeout=10,
                            retry=Retry(NoBackoff(), 0))    # a crash ends the writer
            i = self.acked.get(w, -1) + 1
            while not self.stop.is_set():
                tag = f"{w}:{i}" + "x" * rng.choice((0, 10, 600, 3000))
                if i % 2:
                    keys = [f"a:{w}:{i}", f"b:{w}:{i}", f"e:{w}:{i}", f"x:{w}:{i}", f"n:{w}",
                            f"h:{w}", f"l:{w}", f"m:{w}", f"z:{w}", f"last:{w}"]
                    keys += [f"s:{w}:{j}" for j in range(SLOTS)]
                    n = r.eval(self.SCRIPT, len(keys), *keys, tag, i)
                else:
                    pipe = r.pipeline()
                    pipe.set(f"a:{w}:{i}", tag).incr(f"n:{w}").set(f"b:{w}:{i}", tag)
                    for j in range(SLOTS):        # the same keys in every transaction
                        pipe.set(f"s:{w}:{j}", tag)
                    pipe.hset(f"h:{w}", f"f{i}", tag)
                    pipe.set(f"e:{w}:{i}", tag, px=3_600_000).set(f"x:{w}:{i}", tag, px=1)
                    pipe.rpush(f"l:{w}", tag).sadd(f"m:{w}", tag).zadd(f"z:{w}", {tag: i})
                    pipe.set(f"last:{w}", i)
                    n = pipe.execute()[1]
                if n != i + 1:
                    self.errors.append(f"writer {w}: INCR answered {n} at {i}")
                self.acked[w] = i
                i += 1
        except (redis.ConnectionError, redis.TimeoutError):
            pass                                  # the server went away
        except Exception as e:                    # noqa: BLE001 (reported below)
            self.errors.append(f"writer {w}: {type(e).__name__}: {e}")

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)


def check_writer(r, w, acked):
    """Transactions 0..n-1 of writer w wholly there, n on none."""
    n = int(r.get(f"n:{w}") or 0)
    problems = []
    if acked > n - 1:
        problems.append(f"writer {w}: EXEC {acked} acknowledged, counter says {n}")
    last = r.get(f"last:{w}")
    if (int(last) if last is not None else -1) != n - 1:
        problems.append(f"writer {w}: last {last!r} with counter {n}")
    for i in list(range(max(0, n - 400), n)) + [n, n + 1]:
        vals = r.mget([f"a:{w}:{i}", f"b:{w}:{i}", f"e:{w}:{i}"])
        vals.append(r.hget(f"h:{w}", f"f{i}"))
        vals.append(r.lindex(f"l:{w}", i) if i < n else r.lindex(f"l:{w}", n))
        z = r.zrangebyscore(f"z:{w}", i, i)
        vals.append(z[0] if z else None)
        if vals[0] is not None and not r.sismember(f"m:{w}", vals[0]):
            problems.append(f"writer {w} transaction {i}: its set member is missing")
        tags = {v.split(b"x")[0] if v else v for v in vals}
        want = {f"{w}:{i}".encode()} if i < n else {None}
        if tags != want:
            problems.append(f"writer {w} transaction {i} (counter {n}): {sorted(map(repr, tags))}")
        if r.exists(f"x:{w}:{i}"):
            problems.append(f"writer {w}: x:{w}:{i} outlived its deadline")
    slots = {v.split(b"x")[0] if v else v for v in r.mget([f"s:{w}:{j}" for j in range(SLOTS)])}
    if slots != ({f"{w}:{n - 1}".encode()} if n else {None}):
        problems.append(f"writer {w}: slots {sorted(map(repr, slots))} with counter {n}")
    sizes = (r.hlen(f"h:{w}"), r.llen(f"l:{w}"), r.scard(f"m:{w}"), r.zcard(f"z:{w}"))
    if sizes != (n,) * 4:
        problems.append(f"writer {w}: HLEN, LLEN, SCARD, ZCARD {sizes} with counter {n}")
    return problems


@pytest.mark.crash
def test_kill9_under_transactions_and_scripts(pkvs):
    srv = pkvs.start(["--checkpoint-records", "2000"], http=False, store_size="256M")
    writers, acked = 4, {}
    for rnd in range(3):
        load = TxLoad(srv.resp_port, writers, acked)
        load.start()
        time.sleep(1.0 + 0.3 * rnd)
        srv.kill9()
        load.join()
        assert not load.errors, load.errors
        acked = load.acked
        assert all(acked.get(w, -1) >= 10 for w in range(writers)), acked
        srv.start()
        r = redis.Redis(port=srv.resp_port)
        problems = []
        for w in range(writers):
            problems += check_writer(r, w, acked.get(w, -1))
            # The next round goes on after what is there.
            acked[w] = int(r.get(f"n:{w}") or 0) - 1
        r.close()
        assert not problems, problems[:20]
