#!/usr/bin/env python3
"""Independent DTA encoder/decoder for the oracle tests, written from the public DTA
prototype's field definitions (its Scapy/TRex generator classes and its translator's P4
headers), not from our Rust code.

  dta_scapy.py build [SLOTS]   print JSON: reports Scapy builds (hex frame + fields), and,
                               when SLOTS is given, the Key-Write slots and checksum of each
                               key by the formula slot_n = CRC32(key LE || n) mod SLOTS,
                               checksum = CRC32(key LE) (zlib's CRC-32)
  dta_scapy.py dissect [plain] read hex frames (one per line) on stdin, print JSON fields
"""
import json
import logging
import random
import sys
import zlib

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

from scapy.fields import BitField, ByteField, IntField, LongField, XByteField  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Packet, bind_layers  # noqa: E402

DTA_PORT = 40040


class DtaBase(Packet):
    """The NACK-tracking base header (3 bytes)."""
    name = "dtaBase"
    fields_desc = [
        XByteField("opcode", 0x01),
        XByteField("seqnum", 0),
        BitField("immediate", 0, 1),
        BitField("retransmitable", 0, 1),
        BitField("reserved", 0, 6),
    ]

    def guess_payload_class(self, payload):
        if self.opcode == 0x01:
            return _key_write(payload)
        return SUB.get(self.opcode, Packet.guess_payload_class(self, payload))


class DtaBasePlain(Packet):
    """The base header without NACK tracking (2 bytes)."""
    name = "dtaBasePlain"
    fields_desc = [
        XByteField("opcode", 0x01),
        BitField("immediate", 0, 1),
        BitField("reserved", 0, 7),
    ]

    def guess_payload_class(self, payload):
        if self.opcode == 0x01:
            return _key_write(payload)
        return SUB.get(self.opcode, Packet.guess_payload_class(self, payload))


class DtaKeyWrite(Packet):
    name = "dtaKeyWrite"
    fields_desc = [ByteField("redundancy", 0), IntField("key", 0), IntField("data", 0)]


class DtaKeyWrite3(Packet):
    name = "dtaKeyWrite3"
    fields_desc = [ByteField("redundancy", 0), IntField("key", 0)] + [
        IntField("data%d" % i, 0) for i in range(1, 4)
    ]


class DtaKeyWrite7(Packet):
    name = "dtaKeyWrite7"
    fields_desc = [ByteField("redundancy", 0), IntField("key", 0)] + [
        IntField("data%d" % i, 0) for i in range(1, 8)
    ]


class DtaKeyIncrement(Packet):
    name = "dtaKeyIncrement"
    fields_desc = [ByteField("redundancy", 0), IntField("key", 0), LongField("counter", 0)]


class DtaAppend(Packet):
    name = "dtaAppend"
    fields_desc = [IntField("listID", 0), IntField("data", 0)]


class DtaPostcarder(Packet):
    name = "dtaPostcarder"
    fields_desc = [IntField("key", 0), ByteField("hopNum", 0), IntField("data", 0)]


def _key_write(payload):
    return {17: DtaKeyWrite3, 33: DtaKeyWrite7}.get(len(payload), DtaKeyWrite)


SUB = {0x01: DtaKeyWrite, 0x02: DtaAppend, 0x03: DtaKeyIncrement, 0x04: DtaPostcarder}


def outer(sport=40041):
    return (
        Ether(src="02:00:5e:10:00:0a", dst="02:00:5e:10:00:0b")
        / IP(src="10.0.0.200", dst="10.0.0.51")
        / UDP(sport=sport, dport=DTA_PORT)
    )


def fields(base, sub):
    f = {"opcode": base.opcode, "immediate": base.immediate}
    if isinstance(base, DtaBase):
        f["seqnum"] = base.seqnum
        f["retransmittable"] = base.retransmitable
    for fd in sub.fields_desc:
        f[fd.name] = sub.getfieldval(fd.name)
    return f


def build(slots):
    rnd = random.Random(40040)
    out = []
    for i in range(24):
        op = (i % 4) + 1
        plain = i % 6 == 5
        base = (
            DtaBasePlain(opcode=op, immediate=rnd.getrandbits(1))
            if plain
            else DtaBase(
                opcode=op,
                seqnum=rnd.getrandbits(8),
                immediate=rnd.getrandbits(1),
                retransmitable=rnd.getrandbits(1),
            )
        )
        key = rnd.getrandbits(32)
        if op == 1 and i % 8 == 4:
            sub = DtaKeyWrite3(redundancy=rnd.randint(1, 4), key=key, data1=rnd.getrandbits(32),
                               data2=rnd.getrandbits(32), data3=rnd.getrandbits(32))
        elif op == 1:
            sub = DtaKeyWrite(redundancy=rnd.randint(1, 4), key=key, data=rnd.getrandbits(32))
        elif op == 2:
            sub = DtaAppend(listID=rnd.randint(0, 7), data=rnd.getrandbits(32))
        elif op == 3:
            sub = DtaKeyIncrement(redundancy=rnd.randint(1, 4), key=key, counter=rnd.getrandbits(64))
        else:
            sub = DtaPostcarder(key=key, hopNum=rnd.randint(0, 4), data=rnd.getrandbits(18))
        frame = outer() / base / sub
        rec = {"hex": bytes(frame).hex(), "plain": plain, "fields": fields(base, sub)}
        if slots and op == 1:
            kb = key.to_bytes(4, "little")
            rec["checksum"] = zlib.crc32(kb)
            rec["slots"] = [zlib.crc32(kb + bytes([n])) % slots for n in range(sub.redundancy)]
        out.append(rec)
    print(json.dumps(out))


def dissect(plain):
    out = []
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        p = Ether(bytes.fromhex(line))
        base_cls = DtaBasePlain if plain else DtaBase
        udp = p[UDP]
        base = base_cls(bytes(udp.payload))
        sub = base.payload
        rec = {
            "udp_dport": udp.dport,
            "fields": fields(base, sub),
            "sub_len": len(bytes(sub)),
        }
        # Recompute the checksums Scapy's way and compare with what we sent.
        ip = p[IP].copy()
        ip.chksum = None
        ip[UDP].chksum = None
        rebuilt = IP(bytes(ip))
        rec["ip_chksum_ok"] = rebuilt.chksum == p[IP].chksum
        rec["udp_chksum_ok"] = rebuilt[UDP].chksum == p[UDP].chksum
        out.append(rec)
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "build":
        build(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    elif len(sys.argv) >= 2 and sys.argv[1] == "dissect":
        dissect(len(sys.argv) > 2 and sys.argv[2] == "plain")
    else:
        sys.exit(__doc__)
