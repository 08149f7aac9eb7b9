"""One pkvs for a whole test module, and what a test asks of it first.

    from pkvs_module import pkvs_srv, pkvs_has  # noqa: F401 (pkvs_srv: a fixture)

- pkvs_srv: a pytest fixture (module scope): a pkvs with its own store,
  RESP on a free port, HTTP off (conftest's PkvsFactory), stopped after
  the module's last test. Tests that share it start from FLUSHALL.
- pkvs_has(port, *cmd): whether pkvs runs cmd without an error (a test of
  one family that needs another's command, EXPIRE or HSET, is skipped
  while that family lacks it).
"""
import pytest

from conftest import PkvsFactory, RespConn, RespError


@pytest.fixture(scope="module")
def pkvs_srv():
    factory = PkvsFactory()
    srv = factory.start(http=False)
    yield srv
    factory.cleanup()


def pkvs_has(port, *cmd):
    with RespConn(port) as c:
        return not isinstance(c.command(*cmd), RespError)
