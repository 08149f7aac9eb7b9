"""RQ (python-rq 3 from PyPI) on pkvs: its queues are lists (RPUSH, LMOVE,
LREM, BLMOVE), its registries sets and sorted sets, its worker commands a
pub/sub channel, its job records hashes, changed in MULTI/EXEC pipelines,
its jobs' results streams (XADD with MAXLEN, XREVRANGE).

- 10,000 jobs enqueued, then `rq worker --burst` runs them all: each job
  pushes its number onto a list, which ends holding every number once;
  the queue and its intermediate list end empty; each job's result (its
  number, kept in a stream) reads back through RQ's API.
- Jobs whose arguments are larger than one tree entry (300 KB of random
  bytes: RQ's job hash keeps them, pickled and compressed, in one field,
  so pkvs keeps it in chunks): each worker's job sees its bytes whole.
- kill -9 of pkvs while a producer enqueues jobs one by one: after the
  restart every job whose enqueue was acknowledged is queued (its hash
  and its id in the queue), and a worker then runs each of them.
"""
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

redis = pytest.importorskip("redis")
rq = pytest.importorskip("rq")

from conftest import RespConn  # noqa: E402

JOBS = textwrap.dedent("""
    from rq import get_current_job

    def mark(i):
        get_current_job().connection.rpush("done", i)
        return i

    def digest(i, data):
        import hashlib
        get_current_job().connection.hset("digests", i, hashlib.sha256(data).hexdigest())
        return len(data)
""")


@pytest.fixture
def jobs_dir(tmp_path):
    (tmp_path / "rqjobs.py").write_text(JOBS)
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.modules.pop("rqjobs", None)


def needs_rq_commands(port):
    with RespConn(port) as c:
        c.command("FLUSHALL")


def run_worker(port, jobs_dir, timeout):
    """`rq worker --burst` (jobs run in the worker's process) until the
    queue is empty; its output on failure."""
    env = dict(os.environ, PYTHONPATH=str(jobs_dir) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "rq.cli", "worker", "--burst", "--quiet",
                        "--worker-class", "rq.worker.SimpleWorker",
                        "--url", f"redis://127.0.0.1:{port}"],
                       cwd=jobs_dir, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]


@pytest.mark.slow
def test_rq_10000_jobs(pkvs, jobs_dir):
    import rqjobs
    srv = pkvs.start(http=False, store_size="256M")
    needs_rq_commands(srv.resp_port)
    conn = redis.Redis(port=srv.resp_port)
    q = rq.Queue(connection=conn)
    n = 10000
    jobs = []
    for start in range(0, n, 100):       # one MULTI/EXEC of 100 jobs each
        jobs += q.enqueue_many([rq.Queue.prepare_data(rqjobs.mark, (i,))
                                for i in range(start, start + 100)])
    assert q.count == n
    assert conn.llen("rq:queue:default") == n
    run_worker(srv.resp_port, jobs_dir, timeout=600)
    done = sorted(int(x) for x in conn.lrange("done", 0, -1))
    assert done == list(range(n))
    assert conn.llen("rq:queue:default") == 0
    assert conn.llen("rq:queue:default:intermediate") == 0
    assert q.count == 0
    results = {}
    for job in jobs:
        job.refresh()
        results[job.id] = job.return_value()
    assert sorted(results.values()) == list(range(n))
    assert conn.type(f"rq:results:{jobs[0].id}") == b"stream"
    conn.close()


def test_rq_big_job_arguments(pkvs, jobs_dir):
    import hashlib
    import random

    import rqjobs
    srv = pkvs.start(http=False, store_size="256M")
    needs_rq_commands(srv.resp_port)
    conn = redis.Redis(port=srv.resp_port)
    q = rq.Queue(connection=conn)
    rng = random.Random(7)
    args = {i: rng.randbytes(300_000 + i) for i in range(20)}
    jobs = [q.enqueue(rqjobs.digest, i, data) for i, data in args.items()]
    assert all(conn.hstrlen(f"rq:job:{j.id}", "data") > 63 * 2048 for j in jobs)
    run_worker(srv.resp_port, jobs_dir, timeout=120)
    got = {int(k): v.decode() for k, v in conn.hgetall("digests").items()}
    assert got == {i: hashlib.sha256(d).hexdigest() for i, d in args.items()}
    for j in jobs:
        j.refresh()
        assert j.return_value() == len(args[j.args[0]])
    conn.close()


@pytest.mark.slow
@pytest.mark.crash
def test_rq_kill9_while_enqueueing(pkvs, jobs_dir):
    import rqjobs
    store = pkvs.new_store()
    srv = pkvs.start(store=store, http=False)
    needs_rq_commands(srv.resp_port)
    acked, stop = [], threading.Event()
    problems = []

    def produce():
        conn = redis.Redis(port=srv.resp_port, socket_timeout=10)
        q = rq.Queue(connection=conn)
        i = 0
        while not stop.is_set():
            try:
                job = q.enqueue(rqjobs.mark, i, result_ttl=0)
            except redis.exceptions.ConnectionError:
                return                      # the kill: that enqueue unacknowledged
            except Exception as e:          # noqa: BLE001 (reported below)
                problems.append(repr(e))
                return
            acked.append((job.id, i))
            i += 1

    t = threading.Thread(target=produce)
    t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 300 and time.monotonic() < deadline:
        time.sleep(0.05)
    srv.kill9()
    stop.set()
    t.join(20)
    assert not problems, problems
    assert len(acked) >= 300, f"only {len(acked)} enqueues acknowledged"
    srv = pkvs.start(store=store, http=False)
    conn = redis.Redis(port=srv.resp_port)
    queued = {x.decode() for x in conn.lrange("rq:queue:default", 0, -1)}
    lost = [jid for jid, _ in acked if jid not in queued or not conn.exists(f"rq:job:{jid}")]
    assert not lost, f"{len(lost)} acknowledged jobs lost: {lost[:5]}"
    run_worker(srv.resp_port, jobs_dir, timeout=300)
    done = {int(x) for x in conn.lrange("done", 0, -1)}
    assert {i for _, i in acked} <= done
    conn.close()
