# SPDX-License-Identifier: Apache-2.0
"""Test certificates made with the `openssl` command (shared by the TLS and peer mTLS tests):
a CA, and leaf certificates with a chosen CN and subjectAltNames signed by one."""
import os
import subprocess


def ossl(d, *args):
    subprocess.run(["openssl"] + list(args), cwd=d, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_ca(d, name, cn):
    """name.key and name.pem: a self-signed P-256 CA valid for 2 days."""
    ossl(d, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=" + cn)


def key_csr(d, name, cn):
    ossl(d, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn)


def sign(d, name, ca, san):
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\n" % san)
    ossl(d, "x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
         "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext")


def make_leaf(d, name, cn, ca, san):
    """name.key and name.pem: CN cn, subjectAltName san ("DNS:a,IP:1.2.3.4"), signed by ca."""
    key_csr(d, name, cn)
    sign(d, name, ca, san)
