# SPDX-License-Identifier: MIT
# test_ps.py - the parameter-server half of the rkv Python module against
# real rkv-servers (tcp and shm): dense tensors pulled and pushed exactly
# as a NumPy reference computes, concurrent pushers from several
# processes, asynchronous requests, barriers and counters, and every bad
# argument refused with nothing changed.
import os

import pytest

import rkv

np = pytest.importorskip("numpy")


def f32(*a):
    return np.array(a, dtype=np.float32)


def test_rules_exact(client):
    init = np.arange(5000, dtype=np.float32) / 7
    t = client.tensor("w", shape=(50, 100), create=True, init=init,
                      shard=1000)              # five shards
    ref = init.reshape(50, 100).copy()
    assert t.shape == (50, 100) and t.size == 5000
    assert (t.pull() == ref).all()
    g = (np.arange(5000, dtype=np.float32) % 13 - 6).reshape(50, 100)
    t.push(g)                                  # sum
    ref += g
    assert (t.pull() == ref).all()
    t.push(g, rule="sgd", lr=0.25)
    ref -= np.float32(0.25) * g
    assert (t.pull() == ref).all()
    t.push(g, rule="assign")
    assert (t.pull() == g).all()
    assert t.versions == (3, 3)
    out = np.empty(5000, dtype=np.float32)     # pull into, where it lies
    assert t.pull(into=out) is out and (out == g.ravel()).all()
    t.close()
    with pytest.raises(ValueError, match="closed"):
        t.pull()


def test_open_and_delete(client):
    client.tensor("z", shape=10, create=True)
    z = client.tensor("z")                     # any length
    assert z.shape == (10,) and (z.pull() == 0).all()
    with pytest.raises(FileExistsError):
        client.tensor("z", shape=10, create=True)
    with pytest.raises(OSError):
        client.tensor("z", shape=11)           # another length
    z.close()
    client.delete_tensor("z")
    with pytest.raises(FileNotFoundError, match="no such tensor"):
        client.tensor("z")
    with pytest.raises(FileNotFoundError):
        client.delete_tensor("z")


def test_bad_arguments(client):
    t = client.tensor("b", shape=8, create=True, init=np.ones(8, np.float32))
    with pytest.raises(TypeError, match="float32"):
        t.push(np.ones(8))                     # float64
    with pytest.raises(TypeError):
        t.push(np.ones(16, np.float32)[::2])   # strided: refused, not copied
    with pytest.raises(ValueError, match="7 elements, the tensor has 8"):
        t.push(np.ones(7, np.float32))
    with pytest.raises(ValueError, match="rule"):
        t.push(np.ones(8, np.float32), rule="adam")
    with pytest.raises(ValueError, match="into has 4 elements"):
        t.pull(into=np.empty(4, np.float32))
    with pytest.raises(TypeError):
        t.pull(into=b"not writable 32 bytes..........")
    assert (t.pull() == 1).all()               # nothing changed
    assert t.versions == (0, 0)
    with pytest.raises(ValueError, match="dtype"):
        client.tensor("h", shape=4, dtype="float16", create=True)
    with pytest.raises(ValueError, match="init has 3 elements"):
        client.tensor("i", shape=4, create=True, init=f32(1, 2, 3))
    with pytest.raises(ValueError):
        client.tensor("j", shape=(4, 0), create=True)
    with pytest.raises(ValueError, match="needs a shape"):
        client.tensor("k", create=True)
    with pytest.raises(OSError):
        client.tensor("bad/name", shape=4, create=True)


def test_async(client):
    t = client.tensor("a", shape=1000, create=True, shard=100)
    reqs = [t.push_async(np.full(1000, i, np.float32)) for i in range(5)]
    for r in reqs:
        assert r.wait() is None
    r = t.pull_async()
    got = r.wait()
    assert (got == 10).all() and t.versions == (5, 5)
    assert r.done()


def test_concurrent_pushers(server):
    # 4 processes x 25 pushes of ones: every element exactly 100
    with rkv.Client(server.addr) as c:
        c.tensor("cc", shape=3000, create=True, shard=500)
    pids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            try:
                with rkv.Client(server.addr) as c:
                    t = c.tensor("cc", shape=3000)
                    for _ in range(25):
                        t.push(np.ones(3000, np.float32))
                    t.close()
                os._exit(0)
            except BaseException:
                os._exit(1)
        pids.append(pid)
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    with rkv.Client(server.addr) as c:
        t = c.tensor("cc")
        assert (t.pull() == 100).all() and t.versions == (100, 100)


def test_barrier_and_counter(server):
    # 3 processes meet at a barrier twice; a counter counts them exactly
    name = "bar-%d" % os.getpid()
    pids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            try:
                with rkv.Client(server.addr) as c:
                    b = c.barrier(name, 3)
                    ctr = c.counter(name + "-n")
                    ctr.add(1)
                    b.wait(timeout_ms=20000)
                    ok = ctr.read() == 3   # everyone arrived first
                    b.wait(timeout_ms=20000)
                os._exit(0 if ok else 2)
            except BaseException:
                os._exit(1)
        pids.append(pid)
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    with rkv.Client(server.addr) as c:
        ctr = c.counter(name + "-n")
        assert ctr.read() == 3
        assert ctr.add(10) == 3 and ctr.read() == 13


def test_barrier_timeout(client):
    b = client.barrier("lonely-%d" % os.getpid(), 2)
    with pytest.raises(TimeoutError, match="barrier is broken"):
        b.wait(timeout_ms=200)


def test_read_only_ps(server):
    with rkv.Client(server.addr) as w:
        w.tensor("ro", shape=4, create=True, init=f32(1, 2, 3, 4))
    with rkv.Client(server.addr, read_only=True) as r:
        t = r.tensor("ro")
        assert (t.pull() == f32(1, 2, 3, 4)).all()
        with pytest.raises(PermissionError):
            t.push(f32(1, 1, 1, 1))
        with pytest.raises(OSError):
            r.counter("ro-counter")
        assert (t.pull() == f32(1, 2, 3, 4)).all()


def test_close_with_open_objects(server):
    c = rkv.Client(server.addr)
    t = c.tensor("cl", shape=100, create=True)
    r = t.pull_async()
    b = c.barrier("cl-b", 1)
    c.close()                                 # finishes them all first
    with pytest.raises(ValueError):
        t.pull()
    with pytest.raises(ValueError):
        b.wait()
    assert (r.wait() == 0).all()              # it was finished at close
