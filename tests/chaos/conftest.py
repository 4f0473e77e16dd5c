"""Fixtures of the chaos suite: the system tests' own (node_factory, node, pb — see
tests/system/conftest.py, loaded by chaoslib) and the `slow` marker: `make test` runs the chaos
tests not marked slow, `make chaos` runs them all."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from chaoslib import node, node_factory, pb  # noqa: E402,F401  (fixtures, re-exported)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a chaos test too slow for `make test` (make chaos)")
