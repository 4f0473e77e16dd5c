# SPDX-License-Identifier: Apache-2.0
"""tests/pkg: the packages as an operator installs them (make deb-test, make static-test)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import needs as _needs  # noqa: E402
from needs import pytest_runtest_setup  # noqa: E402,F401  (reads the `needs` mark)


def pytest_configure(config):
    _needs.register(config)
    config.addinivalue_line("markers", "slow: minutes (a fresh root, a package build): not in `make test`")
