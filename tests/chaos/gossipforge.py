# SPDX-License-Identifier: Apache-2.0
"""What an attacker on the network sends to a SWIM overlay, written from the wire format in
src/gossip/swimwire.h (header "SW", version 1, type, update count; the type's body; updates) and
the sealed format in src/gossip/keyring.h (format 2: sender and timestamp authenticated, AES-256-GCM
with a random nonce). Used by tests/chaos/test_gossip_trust.py and to write the seed corpora of
the gossip fuzzers (python3 tests/chaos/gossipforge.py --corpus)."""
import os
import socket
import struct
import sys
import time

PING, PING_REQ, ACK, NACK, GOSSIP, PUSH, PULL = 1, 2, 3, 4, 5, 6, 7
ALIVE, SUSPECT, DEAD, LEFT = 0, 1, 2, 3


def _s8(b):
    b = b.encode() if isinstance(b, str) else b
    return bytes([len(b)]) + b


def update(status, inc, name, addr, frm="", meta=b""):
    meta = meta.encode() if isinstance(meta, str) else meta
    return (bytes([status]) + struct.pack(">I", inc) + _s8(name) + _s8(addr) + _s8(frm)
            + struct.pack(">H", len(meta)) + meta)


def packet(ptype, updates=(), seq=0, target="", target_addr="", source="", flags=0):
    body = b""
    if ptype == PING:
        body = struct.pack(">I", seq) + _s8(target) + _s8(source)
    elif ptype == PING_REQ:
        body = struct.pack(">I", seq) + _s8(target) + _s8(target_addr) + _s8(source)
    elif ptype in (ACK, NACK):
        body = struct.pack(">I", seq) + _s8(source)
    elif ptype in (PUSH, PULL):
        body = bytes([flags])
    ups = list(updates)
    return b"SW" + bytes([1, ptype]) + struct.pack(">H", len(ups)) + body + b"".join(ups)


def seal(key_hex, sender, plaintext, ts_ms=None):
    """A format-2 sealed packet, as a member holding key_hex would send it."""
    try:
        from needs import require_module
        require_module("cryptography")  # a missing one names its Debian package
    except ImportError:  # run as a script, without tests/support on the path
        pass
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    ts_ms = int(time.time() * 1000) if ts_ms is None else ts_ms
    aad = b"\x02" + _s8(sender) + struct.pack(">Q", ts_ms)
    nonce = os.urandom(12)
    return aad + nonce + AESGCM(bytes.fromhex(key_hex)).encrypt(nonce, plaintext, aad)


def frame(msg):
    return struct.pack(">I", len(msg)) + msg


def send_udp(addr, data, src_port=0):
    host, port = addr.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        if src_port:
            s.bind(("127.0.0.1", src_port))
        s.sendto(data, (host, int(port)))


def send_tcp(addr, data, timeout=2.0):
    """Send one framed message; return whatever comes back before the peer closes (or b"")."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        except (socket.timeout, ConnectionResetError):
            pass
        return out


# --- seed corpora of the fuzzers ----------------------------------------------------------------

# the first key of the fuzzers' fixed test ring (tests/fuzz/fuzz_gossip_sealed.c)
TEST_KEY = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"


def _write(d, name, data):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def corpus(root):
    meta = "service=127.0.0.1:1051\nrole=limiter\n"
    alive = update(ALIVE, 3, "node-a", "127.0.0.1:7946", "", meta)
    dead = update(DEAD, 0xFFFFFFFF, "node-b", "127.0.0.1:7947")
    pkts = {
        "ping": packet(PING, [alive], seq=7, target="fuzz", source="node-a"),
        "ping_req": packet(PING_REQ, [], seq=8, target="node-b", target_addr="127.0.0.1:7947",
                           source="node-a"),
        "ack": packet(ACK, [dead], seq=9, source="node-a"),
        "gossip": packet(GOSSIP, [alive, dead]),
        "suspect": packet(GOSSIP, [update(SUSPECT, 4, "fuzz", "127.0.0.1:7946", "node-a")]),
    }
    d = os.path.join(root, "fuzz_gossip_sealed")
    for name, p in pkts.items():
        _write(d, name, seal(TEST_KEY, "node-a", p, ts_ms=1700000000000))
    _write(d, "future", seal(TEST_KEY, "node-a", pkts["gossip"], ts_ms=0xFFFFFFFFFFFFFFF0))
    _write(d, "zero_time", seal(TEST_KEY, "n", pkts["ack"], ts_ms=0))
    _write(d, "format1", b"\x01" + os.urandom(12) + pkts["gossip"] + os.urandom(16))

    d = os.path.join(root, "fuzz_gossip_tcp")
    push = packet(PUSH, [alive, dead, update(LEFT, 2, "node-c", "[::1]:7946")])
    # the first byte: bit 0 = sealed, the rest = the read size
    _write(d, "plain_push", b"\x10" + frame(push))
    _write(d, "plain_push_1byte_reads", b"\x00" + frame(push))
    _write(d, "sealed_push", b"\x21" + frame(seal(TEST_KEY, "node-a", push, ts_ms=1700000000000)))
    _write(d, "zero_length", b"\x00" + b"\x00\x00\x00\x00")
    _write(d, "huge_length", b"\x00" + b"\xff\xff\xff\xff" + push)
    _write(d, "pull", b"\x08" + frame(packet(PULL, [alive])))

    d = os.path.join(root, "fuzz_swimmeta")
    for i, m in enumerate([meta, "service=[::1]:1051\nrole=proxy", "role=observer\n",
                           "service=127.0.0.1:19999x\n", "service=evil.example:1\n",
                           "service=10.0.0.1:0\n", "service=1.2.3.4:1\nservice=1.2.3.4:2\n",
                           "zone=eu-west-1\nservice=10.1.2.3:65535\n", "=x\n", "ROLE=limiter",
                           "127.0.0.1:7946", "[fe80::1]:7946", "::1:80"]):
        _write(d, "seed%02d" % i, m.encode())


if __name__ == "__main__":
    if sys.argv[1:] == ["--corpus"]:
        corpus(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus"))
    else:
        sys.exit("usage: gossipforge.py --corpus")
