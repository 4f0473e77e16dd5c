"""tests/pkg: the packages as an operator installs them (make deb-test, make static-test)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: minutes (a fresh root, a package build): not in `make test`")
