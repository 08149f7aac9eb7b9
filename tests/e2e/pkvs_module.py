"""One pkvs for a whole test module.

    from pkvs_module import pkvs_srv  # noqa: F401 (pkvs_srv: a fixture)

- pkvs_srv: a pytest fixture (module scope): a pkvs with its own store,
  RESP on a free port, HTTP off (conftest's PkvsFactory), stopped after
  the module's last test. Tests that share it start from FLUSHALL.
"""
import pytest

from conftest import PkvsFactory


@pytest.fixture(scope="module")
def pkvs_srv():
    factory = PkvsFactory()
    srv = factory.start(http=False)
    yield srv
    factory.cleanup()
