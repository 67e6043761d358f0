# SPDX-License-Identifier: MIT
# test_embed.py - sparse embedding tables of the rkv Python module against
# real rkv-servers (tcp and shm): seeded lazy rows exactly as the
# documented formula gives them, SGD, Adagrad and Adam steps exactly as a
# NumPy reference computes them (duplicate ids summed first), concurrent
# pushers from several processes losing no step, rows spread over two
# servers in few doorbells, delete and a new generation, and every bad
# argument refused with nothing changed.
import os

import pytest

import rkv
from conftest import Server

np = pytest.importorskip("numpy")

G = np.uint64(0x9E3779B97F4A7C15)


def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def initial(ids, dim, scale, seed=0):
    """The documented initial rows (rkv_ps.h), computed independently."""
    ids = np.asarray(ids, dtype=np.uint64)
    j = np.arange(dim, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = ids[:, None] * np.uint64(dim) + np.uint64(1) + j[None, :]
        z = mix64(np.uint64(seed) + G * x)
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    return (np.float32(2) * u - np.float32(1)) * np.float32(scale)


class Ref:
    """A NumPy model of a table: rows, state and per-row step counts."""

    def __init__(self, opt, dim, scale, lr, b1=0.9, b2=0.999, eps=1e-8,
                 acc0=0.0, seed=0):
        self.opt, self.dim, self.scale, self.seed = opt, dim, scale, seed
        self.lr, self.b1, self.b2 = np.float32(lr), np.float32(b1), np.float32(b2)
        self.eps, self.acc0 = np.float32(eps), np.float32(acc0)
        self.rows = {}

    def row(self, i):
        if i not in self.rows:
            w = initial([i], self.dim, self.scale, self.seed)[0]
            z = np.full(self.dim, self.acc0 if self.opt == "adagrad" else 0,
                        np.float32)
            self.rows[i] = [w, z.copy(), z.copy(), 0]
        return self.rows[i]

    def pull(self, ids):
        return np.stack([self.row(int(i))[0] for i in ids]).astype(np.float32)

    def push(self, ids, grads):
        summed = {}
        for i, g in zip(ids, grads):           # in order of appearance
            i = int(i)
            summed[i] = summed[i] + g if i in summed else g.copy()
        for i, g in summed.items():
            r = self.row(i)
            w, a, v, t = r[0], r[1], r[2], r[3] + 1
            if self.opt == "sgd":
                w = w - self.lr * g
            elif self.opt == "adagrad":
                a = a + g * g
                w = w - self.lr * g / (np.sqrt(a) + self.eps)
            else:
                a = self.b1 * a + (np.float32(1) - self.b1) * g
                v = self.b2 * v + (np.float32(1) - self.b2) * (g * g)
                s = np.float32(float(self.lr) / (1.0 - float(self.b1) ** t))
                c = np.float32((1.0 - float(self.b2) ** t) ** 0.5)
                w = w - s * a / (np.sqrt(v) / c + self.eps)
            self.rows[i] = [w.astype(np.float32), a.astype(np.float32),
                            v.astype(np.float32), t]


def test_initial_rows_and_lazy(client):
    e = client.embedding("lazy", num_rows=10_000_000, dim=64, create=True,
                         init_scale=0.05, seed=7)
    assert (e.num_rows, e.dim, e.optimizer) == (10_000_000, 64, "sgd")
    before = len(client.keys())
    ids = np.array([0, 1, 9_999_999, 123_456, 1], dtype=np.int64)
    rows = e.pull(ids)
    assert rows.shape == (5, 64) and rows.dtype == np.float32
    assert np.array_equal(rows, initial(ids, 64, 0.05, 7))
    assert np.abs(rows).max() <= 0.05 and len(np.unique(rows)) > 250
    assert len(client.keys()) == before        # a pull writes nothing
    z = client.embedding("zeros", num_rows=5, dim=3, create=True,
                         init_scale=0.0)
    assert (z.pull([0, 4]) == 0).all()


def test_same_rows_from_two_clients(server):
    with rkv.Client(server.addr) as a, rkv.Client(server.addr) as b:
        ea = a.embedding("two", num_rows=1000, dim=8, create=True, seed=3)
        eb = b.embedding("two")
        assert np.array_equal(ea.pull(range(1000)), eb.pull(range(1000)))
        with pytest.raises(ValueError, match="1000 rows of dim 8"):
            b.embedding("two", num_rows=999)


@pytest.mark.parametrize("opt", ["sgd", "adagrad", "adam"])
def test_optimizer_exact(client, opt):
    kw = dict(lr=0.05, init_scale=0.1, seed=11)
    if opt == "adagrad":
        kw.update(initial_accumulator=0.1, eps=1e-10)
    if opt == "adam":
        kw.update(betas=(0.8, 0.99), eps=1e-6)
    e = client.embedding("o_" + opt, num_rows=100, dim=16, optimizer=opt,
                         create=True, **kw)
    ref = Ref(opt, 16, 0.1, 0.05, b1=kw.get("betas", (0.9, 0.999))[0],
              b2=kw.get("betas", (0.9, 0.999))[1], eps=kw.get("eps", 1e-8),
              acc0=kw.get("initial_accumulator", 0.0), seed=11)
    rng = np.random.default_rng(5)
    for step in range(12):
        ids = rng.integers(0, 30, size=40)     # duplicates on purpose
        ids[:3] = 7                            # one row three times
        g = rng.standard_normal((40, 16)).astype(np.float32)
        e.push(ids, g)
        ref.push(ids, g)
        probe = np.arange(30)
        got = e.pull(probe)
        assert np.array_equal(got, ref.pull(probe)), (opt, step)
    assert e.hyper["lr"] == 0.05 and e.hyper["seed"] == 11
    if opt == "adam":
        assert e.hyper["betas"] == (0.8, 0.99) and e.hyper["eps"] == 1e-6


def test_concurrent_pushers_lose_no_step(server):
    # 4 processes x 10 pushes of one gradient: every row takes exactly 40
    # Adam steps, so the result equals 40 sequential steps bit for bit
    # (the steps are identical, so their order does not matter; a lost
    # one leaves 39).
    ids = np.array([1, 2, 3, 2, 50, 51, 1], dtype=np.int64)
    g = (np.arange(7 * 8, dtype=np.float32).reshape(7, 8) % 5 - 2) / 3
    with rkv.Client(server.addr) as c:
        c.embedding("cc", num_rows=64, dim=8, optimizer="adam", lr=0.01,
                    create=True)
    pids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            try:
                with rkv.Client(server.addr) as c:
                    e = c.embedding("cc")
                    for _ in range(10):
                        e.push(ids, g)
                os._exit(0)
            except BaseException:
                os._exit(1)
        pids.append(pid)
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    ref = Ref("adam", 8, 0.01, 0.01)
    for _ in range(40):
        ref.push(ids, g)
    with rkv.Client(server.addr) as c:
        got = c.embedding("cc").pull([1, 2, 3, 50, 51, 0])
    assert np.array_equal(got, ref.pull([1, 2, 3, 50, 51, 0]))


def test_two_servers_and_doorbells():
    s1, s2 = Server("tcp"), Server("tcp")
    try:
        with rkv.Client([s1.addr, s2.addr], max_inflight=1024,
                        max_value=4096) as c:
            e = c.embedding("spread", num_rows=1 << 20, dim=32, create=True,
                            optimizer="adagrad", lr=0.1)
            ids = np.arange(0, 512 * 997, 997, dtype=np.int64)
            g = np.ones((512, 32), np.float32)
            e.push(ids, g)
            d0 = c.stats()["doorbells"]
            rows = e.pull(ids)
            rings = c.stats()["doorbells"] - d0
            ref = Ref("adagrad", 32, 0.01, 0.1, eps=1e-10)
            ref.push(ids, g)
            assert np.array_equal(rows, ref.pull(ids))
        # the rows are on both servers ...
        n = [len(rkv.Client(s.addr).keys()) for s in (s1, s2)]
        assert min(n) > 100 and sum(n) == 513, n
        # ... and 512 gets with their locations cached went out in one
        # doorbell per server
        assert rings == 2, rings
    finally:
        s1.stop()
        s2.stop()


def test_zero_copy_into(client):
    e = client.embedding("zc", num_rows=100, dim=1024, create=True)
    out = np.zeros((3, 1024), np.float32)
    addr = out.ctypes.data
    assert e.pull([5, 6, 7], into=out) is out and out.ctypes.data == addr
    assert np.array_equal(out, initial([5, 6, 7], 1024, 0.01))
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, 1024)
    assert e.pull(torch.tensor([1, 2]), into=t) is t
    assert np.array_equal(t.numpy(), initial([1, 2], 1024, 0.01))
    e.push(torch.tensor([1, 1]), torch.ones(2, 1024))


def test_async(client):
    e = client.embedding("as", num_rows=1000, dim=4, create=True)
    ids = np.arange(100, dtype=np.int64)
    g = np.ones((100, 4), np.float32)
    reqs = [e.push_async(ids, g) for _ in range(3)]
    g[:] = 1000                # read at the call: changes nothing
    ids[:] = 0
    for r in reqs:
        assert r.wait() is None
    r = e.pull_async(np.arange(100))
    rows = r.wait()
    ref = initial(np.arange(100), 4, 0.01)
    for _ in range(3):
        ref = ref - np.float32(0.01) * np.float32(1)
    assert np.array_equal(rows, ref) and r.done()
    assert e.pull([]).shape == (0, 4)
    e.push([], np.zeros((0, 4), np.float32))


def test_delete_and_generations(client):
    e = client.embedding("gen", num_rows=50, dim=4, create=True,
                         init_scale=0.0)
    e.push([1, 2, 3], np.ones((3, 4), np.float32))
    assert (e.pull([1]) == -0.01).all()
    client.delete_embedding("gen")
    assert not [k for k in client.keys() if k.startswith(b"emb/gen/")]
    with pytest.raises(FileNotFoundError, match="no such table"):
        client.embedding("gen")
    with pytest.raises(FileNotFoundError):
        client.delete_embedding("gen")
    e2 = client.embedding("gen", num_rows=50, dim=4, create=True,
                          init_scale=0.0)
    assert (e2.pull([1, 2, 3]) == 0).all()     # a new table, fresh rows
    e2.push([1], np.ones((1, 4), np.float32))
    with pytest.raises(OSError, match="Stale"):
        e.pull([1])                            # the old handle: stale
    with pytest.raises(FileExistsError, match="exist_ok"):
        client.embedding("gen", num_rows=50, dim=4, create=True)
    e3 = client.embedding("gen", num_rows=50, dim=4, create=True,
                          exist_ok=True)
    assert (e3.pull([1]) == -0.01).all()


def test_bad_arguments(client):
    e = client.embedding("bad", num_rows=10, dim=4, optimizer="adagrad",
                         create=True)
    e.push([1], np.ones((1, 4), np.float32))
    before = e.pull(range(10))
    g = np.ones((2, 4), np.float32)
    for ids in ([1, 10], [-1, 2], np.array([3, 2**40])):
        with pytest.raises(IndexError, match="out of range"):
            e.push(ids, g)
        with pytest.raises(IndexError):
            e.pull(ids)
    with pytest.raises(IndexError):
        e.push(np.array([1, 2**63 + 5], dtype=np.uint64), g)
    with pytest.raises(ValueError, match="need 8"):
        e.push([1, 2], np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="float32"):
        e.push([1, 2], np.ones((2, 4), np.float64))
    with pytest.raises(TypeError, match="C-contiguous"):
        e.push([1, 2], np.ones((4, 2), np.float32).T)
    with pytest.raises(TypeError):
        e.push(np.array([1.0, 2.0]), g)
    with pytest.raises(TypeError):
        e.pull("ab")
    with pytest.raises(ValueError, match="need 8"):
        e.pull([1, 2], into=np.zeros(7, np.float32))
    with pytest.raises(TypeError, match="writable"):
        e.pull([1, 2], into=bytes(32))
    assert np.array_equal(e.pull(range(10)), before)   # nothing changed
    for kw, msg in ((dict(optimizer="rmsprop"), "one of sgd"),
                    (dict(lr=0.0), "lr"), (dict(lr=float("nan")), "lr"),
                    (dict(optimizer="adam", betas=(1.0, 0.9)), "betas"),
                    (dict(eps=-1.0), "eps"), (dict(dim=0), "dim"),
                    (dict(init_scale=-1.0), "init_scale")):
        args = dict(num_rows=10, dim=4, create=True)
        args.update(kw)
        with pytest.raises(ValueError, match=msg):
            client.embedding("bad2", **args)
    with pytest.raises(FileNotFoundError, match="create=True"):
        client.embedding("bad2")
    with pytest.raises(OSError, match="max_value"):
        client.embedding("huge", num_rows=1, dim=1 << 20, create=True,
                         optimizer="adam")
    with pytest.raises(OSError, match="Invalid"):
        client.embedding("a/b", num_rows=1, dim=1, create=True)
    e.close()
    with pytest.raises(ValueError, match="closed"):
        e.pull([1])


def test_read_only_and_closed_client(server):
    with rkv.Client(server.addr) as c:
        c.embedding("ro", num_rows=10, dim=2, create=True)
    with rkv.Client(server.addr, read_only=True) as c:
        e = c.embedding("ro")
        assert e.pull([1]).shape == (1, 2)
        with pytest.raises(OSError, match="read-only"):
            e.push([1], np.ones((1, 2), np.float32))
        with pytest.raises(OSError):
            c.embedding("ro2", num_rows=10, dim=2, create=True)
    c = rkv.Client(server.addr)
    e = c.embedding("ro")
    r = e.pull_async([1, 2])
    c.close()                  # finishes the request, closes the table
    assert r.wait().shape == (2, 2)
    with pytest.raises(ValueError, match="closed"):
        e.pull([1])
