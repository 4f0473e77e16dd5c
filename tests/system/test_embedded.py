# SPDX-License-Identifier: Apache-2.0
"""The embeddable node: a C program runs a whole sluice node in its own process (examples/embedded.c)
and decides both directly and over gRPC on the node's own listener."""
import os
import subprocess

from conftest import BUILD


def test_embedded_node_example(tmp_path):
    exe = os.path.join(BUILD, "bin", "example_embedded")
    # its admin socket in a runtime directory of its own (the default path is one per machine)
    env = dict(os.environ, RUNTIME_DIRECTORY=str(tmp_path))
    out = subprocess.run([exe], capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "ok"
    assert "direct  hit 1: status=UNDER_LIMIT remaining=9" in lines
    assert any(l.startswith("gRPC    6 hits: status=UNDER_LIMIT remaining=0") for l in lines)
    assert "direct  hit 11: status=OVER_LIMIT remaining=0" in lines


def test_embedded_node_takes_sluiced_options():
    exe = os.path.join(BUILD, "bin", "example_embedded")
    out = subprocess.run([exe, "--no-such-flag"], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "no-such-flag" in out.stderr
