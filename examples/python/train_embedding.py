#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Train a small model with a sparse embedding table and dense layers on
scikit-learn's bundled handwritten digits (8x8 images, 1797 of them),
with W worker processes pulling and pushing through rkv against two
rkv-servers, then the same model in one process without rkv; print both
test accuracies and whether they agree within the tolerance.

Each image is 64 categorical features: pixel p with intensity v (0..16)
is embedding row p * 17 + v (1088 rows).  The model sums its 64 rows
(an EmbeddingBag), then Linear(dim, 64), ReLU, Linear(64, 10).

With rkv the embedding table lives in the store (Adagrad applied there,
under each row's lock, with its state beside the row), and the dense
layers are one dense tensor that workers pull and push with the sgd rule.
Workers run asynchronously (each on its own share of the training data,
meeting at a barrier after every epoch), so their run is not the local
run step for step: the tolerance is on test accuracy.

    python3 examples/python/train_embedding.py             # from a build
    python3 examples/python/train_embedding.py --workers 4 --epochs 8

It starts its two rkv-servers itself (from --bin, on loopback ports they
choose) and stops them by PID.  Exit status: 0 when the accuracies agree
and both are above --floor, 1 when not, 2 when it could not run.
"""
import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FEATURES, LEVELS = 64, 17
ROWS = FEATURES * LEVELS


def data(seed):
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = d.data.astype(np.int64)                   # 0..16
    ids = np.arange(FEATURES, dtype=np.int64)[None, :] * LEVELS + x
    return train_test_split(ids, d.target.astype(np.int64), test_size=0.25,
                            random_state=seed, stratify=d.target)


def initial_rows(dim, scale, seed):
    """rkv's lazy initial rows (rkv_ps.h), so that both runs start alike."""
    import numpy as np
    g = np.uint64(0x9E3779B97F4A7C15)
    ids = np.arange(ROWS, dtype=np.uint64)
    x = ids[:, None] * np.uint64(dim) + np.uint64(1) + \
        np.arange(dim, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + g * x
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    return (np.float32(2) * u - np.float32(1)) * np.float32(scale)


class Dense:
    """The dense layers as one flat float32 vector (what rkv stores)."""

    def __init__(self, dim, seed):
        import torch
        torch.manual_seed(seed)
        self.l1 = torch.nn.Linear(dim, 64)
        self.l2 = torch.nn.Linear(64, 10)
        self.params = [self.l1.weight, self.l1.bias, self.l2.weight,
                       self.l2.bias]

    def flat(self):
        import torch
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def load(self, flat):
        import torch
        with torch.no_grad():
            k = 0
            for p in self.params:
                p.copy_(flat[k:k + p.numel()].view_as(p))
                k += p.numel()

    def grad(self):
        import torch
        return torch.cat([p.grad.reshape(-1) for p in self.params])

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def forward(self, bag):
        import torch
        return self.l2(torch.relu(self.l1(bag)))


def accuracy(table, dense, xte, yte):
    import torch
    with torch.no_grad():
        bag = torch.from_numpy(table)[torch.from_numpy(xte)].sum(1)
        pred = dense.forward(bag).argmax(1).numpy()
    return float((pred == yte).mean())


def worker(rank, args, addrs, out):
    """One training process: its share of the data, every epoch."""
    import numpy as np
    import torch
    import rkv
    torch.set_num_threads(1)
    xtr, _, ytr, _ = data(args.seed)
    mine = np.arange(len(xtr))[rank::args.workers]
    rng = np.random.default_rng(args.seed + 1 + rank)
    dense = Dense(args.dim, args.seed)
    with rkv.Client(addrs, max_inflight=256, max_value=65536) as c:
        emb = c.embedding(args.name, num_rows=ROWS, dim=args.dim)
        t = c.tensor(args.name + "-dense")
        bar = c.barrier(args.name + "-epoch", args.workers)
        flat = np.empty(t.size, np.float32)
        pulled = pushed = 0
        for _ in range(args.epochs):
            rng.shuffle(mine)
            for b in range(0, len(mine), args.batch):
                idx = mine[b:b + args.batch]
                uids, inv = np.unique(xtr[idx], return_inverse=True)
                rows = torch.from_numpy(emb.pull(uids)).requires_grad_()
                t.pull(into=flat)
                dense.load(torch.from_numpy(flat))
                dense.zero_grad()
                bag = rows[torch.from_numpy(inv.reshape(len(idx), -1))].sum(1)
                loss = torch.nn.functional.cross_entropy(
                    dense.forward(bag), torch.from_numpy(ytr[idx]))
                loss.backward()
                emb.push(uids, rows.grad.numpy())
                t.push(dense.grad().numpy(), rule="sgd", lr=args.lr)
                pulled += len(uids)
                pushed += len(uids)
            bar.wait(timeout_ms=120000)
        out.put((rank, pulled, pushed))


def local(args):
    """The same model and optimizers in one process, without rkv."""
    import numpy as np
    import torch
    torch.set_num_threads(1)
    xtr, xte, ytr, yte = data(args.seed)
    rng = np.random.default_rng(args.seed + 1)
    table = torch.nn.Parameter(torch.from_numpy(
        initial_rows(args.dim, args.init_scale, args.seed)))
    dense = Dense(args.dim, args.seed)
    opt_e = torch.optim.Adagrad([table], lr=args.emb_lr, eps=1e-10)
    opt_d = torch.optim.SGD(dense.params, lr=args.lr)
    order = np.arange(len(xtr))
    for _ in range(args.epochs):
        rng.shuffle(order)
        for b in range(0, len(order), args.batch):
            idx = order[b:b + args.batch]
            opt_e.zero_grad()
            opt_d.zero_grad()
            bag = table[torch.from_numpy(xtr[idx])].sum(1)
            loss = torch.nn.functional.cross_entropy(
                dense.forward(bag), torch.from_numpy(ytr[idx]))
            loss.backward()
            opt_e.step()
            opt_d.step()
    return accuracy(table.detach().numpy(), dense, xte, yte)


class Servers:
    """Two rkv-servers on loopback ports they choose, stopped by PID."""

    def __init__(self, bindir, provider):
        self.procs, self.addrs = [], []
        self.shm_dir = tempfile.mkdtemp(prefix="rkv-example-")
        os.environ.setdefault("RKV_SHM_DIR", self.shm_dir)
        for i in range(2):
            listen = ("tcp://127.0.0.1:0" if provider == "tcp" else
                      "shm:///rkv-example-%d-%d" % (os.getpid(), i))
            p = subprocess.Popen(
                [os.path.join(bindir, "rkv-server"), "--listen", listen,
                 "--memory", "64M", "--capacity", "20000", "--log-level",
                 "error"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            self.procs.append(p)
            line = p.stdout.readline().decode()
            prefix = "rkv-server: listening on "
            if not line.startswith(prefix):
                self.stop()
                raise RuntimeError("rkv-server did not start: %r" % line)
            self.addrs.append(line[len(prefix):].strip())

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.05,
                    help="the dense layers' SGD step (default 0.05)")
    ap.add_argument("--emb-lr", type=float, default=0.1,
                    help="the embedding table's Adagrad step (default 0.1)")
    ap.add_argument("--init-scale", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--provider", choices=("tcp", "shm"), default="tcp")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                    help="where rkv-server is (default build/bin)")
    ap.add_argument("--tolerance", type=float, default=0.03,
                    help="largest accepted accuracy difference (0.03)")
    ap.add_argument("--floor", type=float, default=0.9,
                    help="lowest accepted test accuracy (0.9)")
    args = ap.parse_args()
    if not 1 <= args.workers <= 16 or args.epochs < 1 or args.batch < 1:
        ap.error("--workers 1..16, --epochs and --batch >= 1")
    try:
        import numpy as np
        import torch  # noqa: F401
        import sklearn  # noqa: F401
        import rkv
    except ImportError as e:
        print("train_embedding: %s (needs python3-torch, python3-sklearn "
              "and the rkv module: PYTHONPATH=build/python)" % e,
              file=sys.stderr)
        return 2
    args.name = "digits-%d" % os.getpid()
    try:
        srv = Servers(args.bin, args.provider)
    except (OSError, RuntimeError) as e:
        print("train_embedding: cannot start rkv-server: %s" % e,
              file=sys.stderr)
        return 2
    try:
        _, xte, _, yte = data(args.seed)
        dense = Dense(args.dim, args.seed)
        with rkv.Client(srv.addrs, max_value=65536) as c:
            c.embedding(args.name, num_rows=ROWS, dim=args.dim,
                        optimizer="adagrad", lr=args.emb_lr, eps=1e-10,
                        init_scale=args.init_scale, seed=args.seed,
                        create=True)
            c.tensor(args.name + "-dense", shape=dense.flat().numel(),
                     create=True, init=dense.flat().numpy(), shard=4096)
        t0 = time.time()
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        ps = [ctx.Process(target=worker, args=(r, args, srv.addrs, q))
              for r in range(args.workers)]
        for p in ps:
            p.start()
        for p in ps:
            p.join()
        if any(p.exitcode for p in ps):
            print("train_embedding: a worker failed", file=sys.stderr)
            return 2
        rows = sum(q.get()[1] for _ in ps)
        took = time.time() - t0
        with rkv.Client(srv.addrs, max_value=65536,
                        max_inflight=256) as c:
            table = c.embedding(args.name).pull(np.arange(ROWS))
            dense.load(torch.from_numpy(c.tensor(args.name + "-dense").pull()))
        acc_rkv = accuracy(table, dense, xte, yte)
    finally:
        srv.stop()
    t1 = time.time()
    acc_local = local(args)
    took_local = time.time() - t1
    ok = abs(acc_rkv - acc_local) <= args.tolerance and \
        min(acc_rkv, acc_local) >= args.floor
    print("rkv, %d workers x %d epochs over 2 servers (%s): test accuracy "
          "%.4f (%.1f s, %d rows pulled and pushed)" %
          (args.workers, args.epochs, args.provider, acc_rkv, took, rows))
    print("one process without rkv:                         test accuracy "
          "%.4f (%.1f s)" % (acc_local, took_local))
    print("%s: the difference %.4f is %s the tolerance %.2f; floor %.2f" %
          ("AGREE" if ok else "DISAGREE", abs(acc_rkv - acc_local),
           "within" if abs(acc_rkv - acc_local) <= args.tolerance else
           "outside", args.tolerance, args.floor))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
