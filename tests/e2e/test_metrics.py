"""GET /metrics: the Prometheus text exposition format, parsed by the
Prometheus client library's own parser, with counters that agree with
/stats; and the same counters in pkvs's INFO on the Redis port.
"""
import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import HttpConn, RespConn, http_once, post_all


def scrape(port):
    r = http_once(port, "GET", "/metrics")
    assert r.status == 200, r
    assert r.header("Content-Type").startswith("text/plain; version=0.0.4"), r
    families = {f.name: f for f in text_string_to_metric_families(r.body.decode())}
    return families


def value(families, name, **labels):
    """The sample of family `name` (a counter's family name has no _total)
    with these labels."""
    fam = families[name]
    for s in fam.samples:
        if s.name in (name, name + "_total") and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"{name}{labels} not in {fam.samples}")


@pytest.mark.parametrize("durability", ["emulated", "fsync"])
def test_metrics_parse_and_agree_with_stats(phttpd, engine, durability):
    base = "/var/tmp" if durability == "fsync" else "/dev/shm"
    srv = phttpd.start(engine, mode="wal", extra_args=["--durability", durability],
                       store=phttpd.new_store(base))
    post_all(srv.port, [os.urandom(n) for n in (10, 100, 3000)] * 20)
    with HttpConn(srv.port) as c:
        assert c.request("GET", "/log/999999").status == 404
    fams = scrape(srv.port)
    st = srv.stats()
    # /stats came after the scrape: counters may only have grown.
    assert value(fams, "paste_replies", code="201") == 60
    assert value(fams, "paste_replies", code="404") == 1
    assert 61 <= value(fams, "paste_requests") <= st["requests"]
    assert 0 < value(fams, "paste_batches") <= st["batches"]
    assert value(fams, "paste_syscalls") <= st["syscalls"]
    assert value(fams, "paste_fences") == st["fences"]
    assert value(fams, "paste_group_commits") == st["commits"]
    assert value(fams, "paste_buffers", state="total") == st["bufs_total"]
    assert value(fams, "paste_log_records") == 60
    hist = fams["paste_barrier_seconds"]
    assert hist.type == "histogram"
    count = next(s.value for s in hist.samples if s.name == "paste_barrier_seconds_count")
    # uring: a fence per batch (emulated) or a group commit (fsync); epoll
    # fences (fdatasync in fsync mode) before each write.
    assert count == st["fences"] + st["commits"] and count > 0, (count, st)
    buckets = [s.value for s in hist.samples if s.name == "paste_barrier_seconds_bucket"]
    assert buckets == sorted(buckets) and buckets[-1] == count
    assert value(fams, "paste_store_failed") == 0


def test_metrics_of_rpc_and_pkvs(phttpd, pkvs):
    srv = phttpd.start("uring", mode="rpc")
    with HttpConn(srv.port) as c:
        for _ in range(10):
            assert c.request("GET", "/").status == 200
    fams = scrape(srv.port)
    assert value(fams, "paste_replies", code="200") == 10
    kv = pkvs.start()
    with RespConn(kv.resp_port) as c:
        for i in range(25):
            assert c.command("SET", f"k{i}", "v") == "OK"
        assert c.command("GET", "nope") is None
        info = c.command("INFO", "stats").decode()
    fams = scrape(kv.port)
    assert value(fams, "paste_tree_keys") == 25 + 1   # and pkvs's layout entry
    assert value(fams, "paste_kv_sets") == 25
    assert value(fams, "paste_kv_misses") == 1
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    assert int(fields["pkvs_sets"]) == 25
    assert int(fields["keyspace_misses"]) == 1
    assert int(fields["pkvs_fences"]) == value(fams, "paste_fences")
    assert int(fields["pkvs_barriers"]) >= 1
    assert fields["pkvs_barrier_hist"].startswith("le1=")
