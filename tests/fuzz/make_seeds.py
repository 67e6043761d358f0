#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make_seeds.py - write the seed corpora of tests/fuzz/corpus/ (run from
anywhere; overwrites the seed_* files only, so inputs a human added from a
fuzzing run stay).  The wire formats are those of proto/msg.h (control
messages), common/transport/sw.h (frames) and proto/layout.h (blocks)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# ------------------------------------------------------------ proto/msg.h
MAGIC, VERSION = 0x314B5652, 9   # RKV_PROTO_MAGIC, RKV_PROTO_VERSION


def msg(mtype, body, req_id=7, version=VERSION):
    return struct.pack("<IHHII", MAGIC, version, mtype, 16 + len(body),
                       req_id) + body


def msg_seeds():
    name = b"client-1".ljust(32, b"\0")
    hello_reply = struct.pack("<iIIIQQIIQQIIQII", 0, 1, 0xABCD, 0x11,
                              0x7F0000001000, 1024, 0x22, 1 << 20,
                              0x7F0000100000, 1 << 30, 1000, 2000,
                              0x7F0000200000, 0x33, 64) + \
        b"rkv-a".ljust(64, b"\0") + \
        struct.pack("<IIIIIII", 0, 64 << 20, 5000, 3, 32, 3, 1)
    ext = b"".join(struct.pack("<QII", 64 * i, 128, 9) for i in range(3))
    return {
        "hello": msg(1, struct.pack("<I", 1) + name + struct.pack("<I", 2)),
        "hello_reply": msg(2, hello_reply),
        "chunk_alloc": msg(3, struct.pack("<II", 1 << 20, 4096)),
        "chunk_grant": msg(4, struct.pack("<iIQQ", 0, 9, 4096, 1 << 20)),
        "block_return0": msg(5, struct.pack("<I", 0)),
        "block_return3": msg(5, struct.pack("<I", 3) + ext),
        "block_return250": msg(5, struct.pack("<I", 250) +
                               struct.pack("<QII", 64, 64, 9) * 250),
        "chunk_retire": msg(6, struct.pack("<QQ", 4096, 1 << 20)),
        "ack": msg(7, struct.pack("<i", -28)),
        "stats": msg(8, b""),
        "stats_reply": msg(9, struct.pack("<19Q", *range(1, 20))),
        "error": msg(10, struct.pack("<i", -22) +
                     b"bad request".ljust(200, b"\0")),
        "counter_open": msg(11, b"ctr.requests".ljust(64, b"\0")),
        "counter_reply": msg(12, struct.pack("<iI", 0, 5)),
        "auth_challenge": msg(13, struct.pack("<II", 1, 0xABCD) +
                              bytes(range(32))),
        "auth_response": msg(14, bytes(range(32, 64))),
        "rkey_update": msg(15, struct.pack("<IIII", 1, 0x111, 0x222, 0x333),
                           req_id=0),
        "rkey_ack": msg(16, struct.pack("<I", 1), req_id=0),
        "fence": msg(17, struct.pack("<I", 4)),
        "grow": msg(18, struct.pack("<I", 1)),
        "grow_reply": msg(19, struct.pack("<iI", 0, 2)),
        "version_next": msg(7, struct.pack("<i", 0), version=VERSION + 1),
    }


# ---------------------------------------------------------- sw.h frames
SW_MAGIC = 0x54564B52
(F_HELLO, F_HELLO_ACK, F_READ, F_WRITE, F_CAS, F_FADD, F_SEND, F_RESP,
 F_RNR, F_MAP_REQ, F_MAP_RESP) = range(1, 12)
# fuzz_tcp_stream.c replaces these with the target region's rkey and base
FUZZ_RKEY = 0x59454B52
FUZZ_ADDR = 0xA5A5A5A5 << 32


def frame(ftype, payload=b"", key=0, seq=0, addr=0, arg0=0, arg1=0,
          length=None):
    n = len(payload) if length is None else length
    return struct.pack("<IBBBBIIQQQQ", SW_MAGIC, 1, ftype, 0, 0, n, key, seq,
                       addr, arg0, arg1) + payload


def frame_seeds():
    return {
        "hello": frame(F_HELLO),
        "hello_ack": frame(F_HELLO_ACK),
        "ops": (frame(F_READ, key=5, addr=0x1000, arg0=64) +
                frame(F_WRITE, b"x" * 32, key=5, seq=1, addr=0x1000) +
                frame(F_CAS, key=5, seq=2, addr=0x1008, arg0=0, arg1=1) +
                frame(F_FADD, key=5, seq=3, addr=0x1010, arg0=1) +
                frame(F_SEND, b"hello", seq=4) +
                frame(F_RESP, b"y" * 16, seq=0) +
                frame(F_RESP, key=5, seq=1) +
                frame(F_RNR, seq=4) +
                frame(F_MAP_REQ, arg0=1, arg1=1) +
                frame(F_MAP_RESP, key=0)),
        "truncated": frame(F_SEND, b"abc", length=100),
    }


def stream_seeds():
    # byte 0: setup (bits 0-1 RECVs, 2 READ, 3 SEND, 4 CAS, 5 WRITE,
    # 6 big READ, 7 CAS signaled); byte 1: chunking (odd: tiny chunks).
    # Posted WRs take seqs 0.. in the order READ, SEND, CAS, WRITE.
    a = FUZZ_ADDR
    target = (frame(F_READ, key=FUZZ_RKEY, addr=a + 0x100, arg0=64) +
              frame(F_WRITE, b"w" * 64, key=FUZZ_RKEY, seq=1, addr=a + 0x200) +
              frame(F_CAS, key=FUZZ_RKEY, seq=2, addr=a + 0x300, arg0=0x5a5a5a5a5a5a5a5a, arg1=9) +
              frame(F_FADD, key=FUZZ_RKEY, seq=3, addr=a + 0x308, arg0=3) +
              frame(F_READ, key=FUZZ_RKEY, seq=4, addr=a + 0xFFC0, arg0=128) +
              frame(F_SEND, b"s" * 10, seq=5))
    answers = (frame(F_RESP, b"r" * 64, seq=0) +
               frame(F_RNR, seq=1) +
               frame(F_RESP, seq=1) +
               frame(F_RESP, seq=2, arg0=42) +
               frame(F_RESP, seq=3))
    return {
        "target": bytes([0x01, 0x00]) + target,
        "target_tiny_chunks": bytes([0x01, 0x01]) + target,
        "answers": bytes([0xBC, 0x02]) + answers,
        "answers_error": bytes([0x3C, 0x00]) + frame(F_RESP, key=5, seq=0),
        "sends": bytes([0x03, 0x04]) + frame(F_SEND, b"a" * 64) +
        frame(F_SEND, b"b" * 5000, seq=1) + frame(F_SEND, b"", seq=2) +
        frame(F_SEND, b"c" * 100, seq=3),
        "unexpected": bytes([0x00, 0x00]) + frame(F_SEND, b"u" * 300) +
        frame(F_SEND, b"v" * 30, seq=1),
        "big_read_resp": bytes([0x44, 0x00]) + frame(F_RESP, b"R" * 3000,
                                                     seq=0, length=40000),
        "big_recv": bytes([0x03, 0x00]) + frame(F_SEND, b"a" * 64) +
        frame(F_SEND, b"b" * 4000, seq=1) +
        frame(F_SEND, b"B" * 3000, seq=2, length=40000),
        "big_recv_whole": bytes([0x03, 0x00]) + frame(F_SEND, b"a" * 64) +
        frame(F_SEND, b"b" * 4000, seq=1) +
        frame(F_SEND, b"B" * 10000, seq=2),
        "garbage": bytes([0x07, 0x01]) + b"GET / HTTP/1.0\r\n\r\n",
    }


# ------------------------------------------------------ layout.h blocks
def block(key, val, writer=1, version=1, checksum=0):
    h = struct.pack("<QHHIIIQ", checksum, len(key), 0, len(val), writer, 0,
                    version)
    b = h + key + val
    return b + b"\0" * (-len(b) % 64)


def block_seeds():
    # byte 0: mode (bit 0: harness fixes the checksum, bit 1: expect the
    # block's own key, bit 2: a key from the input's end)
    return {
        "kv": bytes([0x03]) + block(b"user:1", b"value-1"),
        "kv_nokey": bytes([0x01]) + block(b"k", b"v" * 200),
        "kv_otherkey": bytes([0x0D]) + block(b"abc", b"def") + b"zzz",
        "bad_checksum": bytes([0x02]) + block(b"key", b"val"),
        "empty_value": bytes([0x03]) + block(b"k" * 100, b""),
        "short": bytes([0x01]) + block(b"key", b"v" * 100)[:60],
    }


def write(name, seeds):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    for k, v in seeds.items():
        with open(os.path.join(d, "seed_" + k), "wb") as f:
            f.write(v)


def main():
    write("fuzz_msg", msg_seeds())
    write("fuzz_frame", frame_seeds())
    write("fuzz_tcp_stream", stream_seeds())
    write("fuzz_block", block_seeds())


if __name__ == "__main__":
    main()
