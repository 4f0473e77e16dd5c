# SPDX-License-Identifier: Apache-2.0
"""A tiny authoritative DNS server over UDP for the cluster tests: it answers A queries from a
dict the test may change at any time (name -> list of IPv4 addresses), answers other types of a
known name with no records (NOERROR, empty), and unknown names with NXDOMAIN. Only what a
resolver asking for A/AAAA needs (RFC 1035 section 4); no compression in answers beyond a
pointer to the question name."""
import socket
import struct
import threading


class DNSServer:
    def __init__(self, host="127.0.0.1", ttl=1):
        self.records = {}  # "peers.test" -> ["127.0.0.11", ...]
        self.ttl = ttl
        self.queries = 0
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.addr = "%s:%d" % self.sock.getsockname()
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def set(self, name, ips):
        with self.lock:
            self.records[name.rstrip(".").lower()] = list(ips)

    def stop(self):
        self._stop = True
        try:
            # wake the blocking recvfrom
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"", self.sock.getsockname())
        except OSError:
            pass
        self.thread.join(2)
        self.sock.close()

    @staticmethod
    def _read_name(msg, off):
        labels = []
        while True:
            n = msg[off]
            off += 1
            if n == 0:
                return ".".join(labels), off
            if n & 0xC0:
                raise ValueError("compressed question name")
            labels.append(msg[off:off + n].decode("ascii", "replace"))
            off += n

    def _answer(self, msg):
        if len(msg) < 12:
            return None
        qid, flags, qd = struct.unpack(">HHH", msg[:6])
        if qd != 1:
            return None
        name, off = self._read_name(msg, 12)
        qtype, qclass = struct.unpack(">HH", msg[off:off + 4])
        question = msg[12:off + 4]
        with self.lock:
            ips = self.records.get(name.lower())
            self.queries += 1
        rd = flags & 0x0100
        if ips is None:
            hdr = struct.pack(">HHHHHH", qid, 0x8400 | rd | 3, 1, 0, 0, 0)  # NXDOMAIN
            return hdr + question
        answers = b""
        count = 0
        if qtype == 1 and qclass == 1:
            for ip in ips:
                rdata = socket.inet_aton(ip)
                # name: pointer to the question at offset 12
                answers += struct.pack(">HHHIH", 0xC00C, 1, 1, self.ttl, len(rdata)) + rdata
                count += 1
        hdr = struct.pack(">HHHHHH", qid, 0x8400 | rd, 1, count, 0, 0)
        return hdr + question + answers

    def _serve(self):
        while not self._stop:
            try:
                msg, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            if self._stop:
                return
            try:
                out = self._answer(msg)
            except (ValueError, IndexError, struct.error):
                out = None
            if out:
                self.sock.sendto(out, peer)
