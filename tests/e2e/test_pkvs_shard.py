"""Several pkvs instances behind twemproxy (nutcracker, from Debian): the
proxy hashes each key to a shard and splits multi-key commands (MGET, MSET,
DEL, UNLINK, EXISTS) per shard. redis-benchmark and redis-cli run through
the proxy; keys must land on both shards and survive a kill -9 of one.
"""
import subprocess
import time

from conftest import RespConn, RespError, ServerFailed, free_port, tool
from paste_proc import Server   # conftest's Server is phttpd


NUTCRACKER_CONF = """\
pkvs:
  listen: 127.0.0.1:{port}
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  server_retry_timeout: 200
  timeout: 3000
  preconnect: false
  servers:
{servers}
"""


class Nutcracker(Server):
    """nutcracker on a free port in front of `shards` (RESP ports); it prints
    no listening line, so start() waits until the port accepts."""

    def __init__(self, shards, workdir):
        port = free_port()
        servers = "\n".join(f"   - 127.0.0.1:{p}:1 shard{i}" for i, p in enumerate(shards))
        conf = workdir / "nutcracker.yml"
        conf.write_text(NUTCRACKER_CONF.format(port=port, servers=servers))
        check = subprocess.run([tool("nutcracker"), "-t", "-c", str(conf)],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        argv = [tool("nutcracker"), "-c", str(conf), "-s", str(free_port()), "-a", "127.0.0.1",
                "-o", str(workdir / "nutcracker.log"), "-p", str(workdir / "nutcracker.pid"),
                "-v", "4"]
        super().__init__(argv, name="nutcracker", listen_re=None, port=port)
        self.log = workdir / "nutcracker.log"

    def start(self, timeout=10):
        try:
            return super().start(timeout)
        except ServerFailed as e:
            log = self.log.read_text() if self.log.exists() else "(not written)"
            raise AssertionError(f"{e}\nnutcracker.log:\n{log}") from None


def proxied(port, *args, retries=20):
    """A command through the proxy, retried while a restarted shard comes back."""
    for _ in range(retries):
        try:
            with RespConn(port, timeout=5) as c:
                reply = c.command(*args)
            if not isinstance(reply, RespError):
                return reply
        except (OSError, AssertionError):
            reply = None
        time.sleep(0.2)
    raise AssertionError(f"{args[0]} through nutcracker kept failing: {reply!r}")


def test_two_shards_behind_nutcracker(pkvs, tmp_path):
    ports = [free_port(), free_port()]
    stores = [pkvs.new_store(), pkvs.new_store()]
    shards = [pkvs.start(store=s, http=False, resp=p) for p, s in zip(ports, stores)]
    assert [s.resp_port for s in shards] == ports
    proxy = Nutcracker(ports, tmp_path).start()
    try:
        bench = subprocess.run([tool("redis-benchmark"), "-p", str(proxy.port), "-q",
                                "-t", "set,get,mset", "-n", "4000", "-c", "20", "-r", "2000",
                                "-d", "100"], capture_output=True, timeout=120)
        out = bench.stdout.decode() + bench.stderr.decode()
        assert bench.returncode == 0, out
        for test in ("SET", "GET", "MSET (10 keys)"):
            assert f"{test}:" in out, out

        cli = [tool("redis-cli"), "-p", str(proxy.port)]
        expected = {f"user:{i}": f"value-{i}" for i in range(200)}
        for k, v in expected.items():
            r = subprocess.run(cli + ["SET", k, v], capture_output=True, text=True, timeout=10)
            assert r.stdout == "OK\n", (k, r.stdout, r.stderr)
        mset = subprocess.run(cli + ["MSET"] + [x for i in range(200, 260)
                                               for x in (f"user:{i}", f"value-{i}")],
                              capture_output=True, text=True, timeout=10)
        assert mset.stdout == "OK\n", mset
        expected.update({f"user:{i}": f"value-{i}" for i in range(200, 260)})
        got = subprocess.run(cli + ["MGET"] + list(expected), capture_output=True, text=True,
                             timeout=10).stdout.split("\n")[:-1]
        assert got == list(expected.values())
        assert proxied(proxy.port, "EXISTS", "user:1", "user:2", "nope") == 2
        assert proxied(proxy.port, "DEL", "user:258", "user:259", "nope") == 2
        del expected["user:258"], expected["user:259"]

        counts = []
        for s in shards:
            with RespConn(s.resp_port) as c:
                counts.append(len(c.command("KEYS", "user:*")))
        assert all(n > 0 for n in counts), f"keys did not land on both shards: {counts}"
        assert sum(counts) == len(expected), counts

        shards[0].kill9()
        shards[0].start()
        assert shards[0].resp_port == ports[0]
        for k, v in expected.items():
            assert proxied(proxy.port, "GET", k) == v.encode(), k
        with RespConn(shards[0].resp_port) as c:
            assert len(c.command("KEYS", "user:*")) == counts[0]
    finally:
        proxy.stop(check=False)
