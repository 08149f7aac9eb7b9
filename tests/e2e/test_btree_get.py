"""bench/btree-get, the yardstick for the tree's lookup cost: it builds a
tree of redis-benchmark-shaped keys in a store of its own and times
lookups. Its numbers only count if every lookup found its key with the
right value (it checks, and exits 1 otherwise), if the tree it measured is
the size asked for, and if it never touches a file it did not create."""

import json
import subprocess

from conftest import binary


def run(*args):
    return subprocess.run([binary("bench/btree-get"), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_measures_correct_lookups_and_removes_its_store(tmp_path):
    store = tmp_path / "bg.store"
    r = run(store, 30000, 20000)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["keys"] == 30000 and d["lookups"] == 20000
    assert d["wrong"] == 0
    # 30 000 keys of ~38 bytes a leaf entry do not fit one 4 KiB page
    assert d["height"] >= 2 and d["pages"] > 30000 * 38 // 4096
    assert d["ns_per_get"] > 0
    assert not store.exists()


def test_one_key(tmp_path):
    r = run(tmp_path / "one.store", 1, 1000)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["height"], d["pages"], d["wrong"]) == (1, 1, 0)


def test_refuses_an_existing_file_and_leaves_it(tmp_path):
    mine = tmp_path / "precious"
    mine.write_bytes(b"keep me")
    r = run(mine)
    assert r.returncode == 1
    assert "btree-get:" in r.stderr
    assert mine.read_bytes() == b"keep me"


def test_bad_arguments(tmp_path):
    for args in [(), (tmp_path / "a", "ten"), (tmp_path / "a", 0), (tmp_path / "a", 5, "-1"),
                 (tmp_path / "a", 1, 2, 3)]:
        r = run(*args)
        assert r.returncode == 2, args
        assert "btree-get" in r.stderr or "usage" in r.stderr
    assert not (tmp_path / "a").exists()
