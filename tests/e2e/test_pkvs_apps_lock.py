"""redis-py 8's Lock against pkvs: it acquires with SET NX PX and extends,
reacquires and releases with Lua scripts (EVALSHA, falling back to
EVAL), so it works only where scripting does. The same tests run
against Debian's redis-server, to show they expect what Redis does.

- acquire, a second client's non-blocking acquire failing while it is
  held, extend (additive and replacing), reacquire, release; the key
  gone after the release and a release by a client that no longer owns
  the lock refused (LockNotOwnedError), in RESP2 and RESP3.
- expiry: a lock whose timeout passed is taken by another client, and
  the first one's release then fails (LockNotOwnedError).
- mutual exclusion: 4 threads each add to one counter N times under the
  lock with GET/SET (no atomic increment): the counter ends at 4 N.
"""
import threading
import time

import pytest

redis = pytest.importorskip("redis")
from redis.exceptions import LockError, LockNotOwnedError  # noqa: E402

from pkvs_module import pkvs_srv  # noqa: E402,F401 (a fixture)
from redis_peer import redis_peer  # noqa: E402,F401 (a fixture)


@pytest.fixture(params=["pkvs", "redis"])
def port(request, pkvs_srv):
    p = pkvs_srv.resp_port if request.param == "pkvs" else \
        request.getfixturevalue("redis_peer").port
    r = redis.Redis(port=p)
    r.flushall()
    r.script_flush()
    r.close()
    return p


@pytest.mark.parametrize("proto", [2, 3])
def test_lock_acquire_extend_release(port, proto):
    a = redis.Redis(port=port, protocol=proto)
    b = redis.Redis(port=port, protocol=proto)
    lock = a.lock("res", timeout=10)
    assert lock.acquire(blocking=False)
    assert a.get("res") == lock.local.token
    other = b.lock("res", timeout=10)
    assert not other.acquire(blocking=False)
    assert lock.owned() and not other.owned()
    ttl = a.pttl("res")
    assert 0 < ttl <= 10000
    assert lock.extend(20)                       # additive: ~30 s
    assert 20000 < a.pttl("res") <= 30000
    assert lock.extend(5, replace_ttl=True)      # replaced: ~5 s
    assert a.pttl("res") <= 5000
    assert lock.reacquire()                      # back to its timeout
    assert 5000 < a.pttl("res") <= 10000
    lock.release()
    assert a.get("res") is None
    with pytest.raises(LockError):
        lock.release()                           # not held any more
    assert other.acquire(blocking=False)
    with pytest.raises(LockNotOwnedError):
        lock.do_release(lock.local.token or b"not-the-token")
    other.release()
    a.close()
    b.close()


def test_lock_expires_to_another_client(port):
    a = redis.Redis(port=port)
    b = redis.Redis(port=port)
    first = a.lock("res", timeout=0.2)
    assert first.acquire(blocking=False)
    second = b.lock("res", timeout=10)
    assert second.acquire(blocking=True, blocking_timeout=5)
    with pytest.raises(LockNotOwnedError):
        first.release()
    with pytest.raises(LockError):              # its token is gone with the failed release
        first.extend(1)
    assert second.owned()
    second.release()
    a.close()
    b.close()


def test_lock_mutual_exclusion(port):
    per_thread, threads = 50, 4
    errors = []

    def work():
        r = redis.Redis(port=port)
        try:
            for _ in range(per_thread):
                with r.lock("counter-lock", timeout=10, blocking_timeout=30, sleep=0.001):
                    v = int(r.get("counter") or 0)
                    time.sleep(0.0005)              # widen the window a lost update needs
                    r.set("counter", v + 1)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            r.close()

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors
    r = redis.Redis(port=port)
    assert int(r.get("counter")) == per_thread * threads
    r.close()
