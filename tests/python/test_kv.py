# SPDX-License-Identifier: MIT
# test_kv.py - the rkv Python module's KV calls against real rkv-servers
# (tcp and shm): every call, buffers without copies, every error as a
# Python exception that names it, nothing changed by a failed call, the
# GIL released while librkv waits.
import errno
import os
import signal
import threading
import time

import pytest

import rkv
from conftest import Server


def test_put_get_delete(client):
    client.put(b"k", b"v")
    assert client.get(b"k") == b"v"
    assert client.get("k") == b"v"          # str keys are UTF-8
    client.put("k", b"")                    # an empty value
    assert client.get("k") == b""
    client.delete("k")
    with pytest.raises(KeyError):
        client.get("k")
    with pytest.raises(KeyError):
        client.delete("k")


def test_buffers(client):
    np = pytest.importorskip("numpy")
    a = np.arange(4096, dtype=np.float32)   # 16 KiB
    client.put("arr", a)
    client.put("ba", bytearray(b"xyz"))
    client.put("mv", memoryview(b"0123456789")[2:5])
    assert client.get("ba") == b"xyz"
    assert client.get("mv") == b"234"
    assert client.get("arr") == a.tobytes()
    # get_into writes where the buffer lies: the same array, filled
    out = np.zeros(4096, dtype=np.float32)
    addr = out.__array_interface__["data"][0]
    assert client.get_into("arr", out) == a.nbytes
    assert out.__array_interface__["data"][0] == addr
    assert (out == a).all()
    # a strided buffer is refused, not copied behind the caller's back
    with pytest.raises(TypeError):
        client.put("x", a[::2])
    with pytest.raises(TypeError):
        client.get_into("arr", out[::2])
    with pytest.raises(TypeError):
        client.get_into("arr", b"read-only bytes")
    small = bytearray(10)
    with pytest.raises(OSError) as e:
        client.get_into("arr", small)
    assert e.value.errno == errno.ENOBUFS
    assert "16384 bytes, the buffer 10" in str(e.value)
    assert small == bytearray(10)


def test_limits(client):
    with pytest.raises(ValueError, match="the key is empty"):
        client.put("", b"v")
    with pytest.raises(ValueError, match="over the limit of 1024"):
        client.put(b"k" * 1025, b"v")
    with pytest.raises(ValueError, match="over the limit of 67108864"):
        client.put("big", b"x" * (rkv.VALUE_MAX + 1))
    client.put(b"k" * rkv.KEY_MAX, b"x" * rkv.VALUE_MAX)
    assert len(client.get(b"k" * rkv.KEY_MAX)) == rkv.VALUE_MAX
    with pytest.raises(KeyError):
        client.get("big")                   # nothing was stored
    with pytest.raises(TypeError):
        client.put("k", 42)


def test_mget_mput(client):
    client.mput({"a": b"1", "b": b"2"})
    client.mput([("c", b"3"), (b"d", bytearray(b"4"))])
    big = b"z" * 100000                     # over mget's room per key
    client.put("big", big)
    assert client.mget(["a", "b", "nope", "c", b"d", "big"]) == \
        [b"1", b"2", None, b"3", b"4", big]
    assert client.mget([]) == []
    with pytest.raises(TypeError):
        client.mput([("a",)])
    with pytest.raises(ValueError):
        client.mput({"": b"x"})


def test_rmw(client):
    def inc(old):
        return str(int(old or b"0") + 1).encode()
    for _ in range(5):
        client.rmw("n", inc)
    assert client.get("n") == b"5"
    client.rmw("n", lambda old: None)       # None: leave it
    assert client.get("n") == b"5"

    class Boom(Exception):
        pass

    def boom(old):
        raise Boom("no")
    with pytest.raises(Boom):
        client.rmw("n", boom)
    assert client.get("n") == b"5"          # nothing changed
    with pytest.raises(ValueError, match="over the limit"):
        client.rmw("n", lambda old: b"x" * (rkv.VALUE_MAX + 1))
    assert client.get("n") == b"5"
    with pytest.raises(TypeError):
        client.rmw("n", lambda old: 42)
    client.rmw("n", lambda old: rkv.DELETE)
    with pytest.raises(KeyError):
        client.get("n")
    client.rmw("m", lambda old: b"first" if old is None else b"again")
    assert client.get("m") == b"first"


def test_rmw_concurrent_processes(server):
    # 4 processes x 200 increments of one counter: exactly 800
    def inc(old):
        return str(int(old or b"0") + 1).encode()
    pids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            try:
                with rkv.Client(server.addr) as c:
                    for _ in range(200):
                        c.rmw("ctr", inc)
                os._exit(0)
            except BaseException:
                os._exit(1)
        pids.append(pid)
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    with rkv.Client(server.addr) as c:
        assert c.get("ctr") == b"800"


def test_keys_stats_servers(client, server):
    client.mput({"k%d" % i: b"v" for i in range(50)})
    assert sorted(client.keys()) == sorted(b"k%d" % i for i in range(50))
    st = client.stats()
    assert st["put"]["ops"] >= 50 and st["get"]["ops"] == 0
    assert st["doorbells"] > 0
    assert client.servers == [(client.servers[0][0], server.addr)]


def test_closed(server):
    c = rkv.Client(server.addr)
    c.put("k", b"v")
    c.close()
    assert c.closed
    with pytest.raises(ValueError, match="closed"):
        c.get("k")
    c.close()                               # twice is fine
    with rkv.Client(server.addr) as d:
        assert d.get("k") == b"v"           # the put was not lost
    assert d.closed


def test_errors():
    with pytest.raises(ConnectionRefusedError) as e:
        rkv.Client("tcp://127.0.0.1:1")
    assert "is rkv-server running there" in str(e.value)
    with pytest.raises(OSError) as e:
        rkv.Client("nonsense://x")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(ValueError):
        rkv.Client(servers="tcp://127.0.0.1:1", cluster="f")
    with pytest.raises(TypeError):
        rkv.Client(servers=42)


def test_read_only(server):
    with rkv.Client(server.addr) as w:
        w.put("k", b"v")
    with rkv.Client(server.addr, read_only=True) as r:
        assert r.get("k") == b"v"
        with pytest.raises(PermissionError, match="read-only client"):
            r.put("k", b"x")
        with pytest.raises(PermissionError):
            r.delete("k")
        with pytest.raises(PermissionError):
            r.rmw("k", lambda old: b"x")
        assert r.get("k") == b"v"


def test_secret(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"python test secret 0123456789abcdef")
    secret.chmod(0o600)
    s = Server("tcp", "--secret-file", str(secret))
    try:
        with pytest.raises(PermissionError):
            rkv.Client(s.addr, secret_file="")
        with rkv.Client(s.addr, secret_file=str(secret)) as c:
            c.put("k", b"v")
            assert c.get("k") == b"v"
    finally:
        s.stop()


def test_gil_released():
    # a delete against a stopped tcp server waits for timeout_ms without
    # the GIL: another thread runs meanwhile (on shm the client's own
    # atomics do not wait for the server)
    server = Server("tcp")
    c = rkv.Client(server.addr, timeout_ms=1500)
    c.put("k", b"v")
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        ticks = []
        stop = threading.Event()

        def tick():
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.01)
        t = threading.Thread(target=tick)
        n0 = len(ticks)
        t.start()
        got = None
        try:
            c.delete("k")                   # waits on the stopped server
        except OSError as e:
            got = e
        stop.set()
        t.join()
        assert got is None or got.errno in (errno.ETIMEDOUT,
                                            errno.ECONNRESET)
        assert len(ticks) - n0 > 5          # the other thread ran
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        c.close()
        server.stop()


def test_threads_share_a_client(client):
    # one client, four threads: calls are serialized, none is lost
    def work(t):
        for i in range(200):
            client.put("t%d-%d" % (t, i), b"%d" % i)
    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    vals = client.mget(["t%d-%d" % (t, i) for t in range(4)
                        for i in range(200)])
    assert vals == [b"%d" % i for _ in range(4) for i in range(200)]


def test_librkv_so_dlopens():
    # librkv.so links no allocator: a host process (Python's ctypes, a
    # plugin host) can dlopen it (libjemalloc's static TLS could not be)
    import ctypes
    lib = os.path.join(os.environ.get("RKV_BIN_DIR", "build/bin"), "..",
                       "lib", "librkv.so")
    if not os.path.exists(lib):
        pytest.skip("no " + lib)
    so = ctypes.CDLL(lib)
    assert so.rkv_client_opts_init is not None
