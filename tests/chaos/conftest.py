# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the chaos suite: the system tests' own (node_factory, node, pb — see
tests/system/conftest.py, loaded by chaoslib) and the `slow` marker: `make test` runs the chaos
tests not marked slow, `make chaos` runs them all.

Both directories have a conftest.py and their modules `from conftest import ...`; when one
pytest session collects both, whichever conftest was imported last answers. So this one also
re-exports every public name of the system tests' conftest."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import chaoslib  # noqa: E402

globals().update({k: v for k, v in vars(chaoslib.sysconf).items() if not k.startswith("_")})
from chaoslib import node, node_factory, pb  # noqa: E402,F401  (fixtures, re-exported)


def pytest_configure(config):
    chaoslib.sysconf._needs.register(config)
    config.addinivalue_line("markers", "slow: a chaos test too slow for `make test` (make chaos)")
