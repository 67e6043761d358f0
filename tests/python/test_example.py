# SPDX-License-Identifier: MIT
# test_example.py - the training example (examples/python/train_embedding.py)
# end to end: 2 workers through rkv against 2 servers on scikit-learn's
# digits, its accuracy above a floor and within the tolerance of the same
# model trained in one process without rkv (the example's own verdict).
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.mark.parametrize("provider", ["tcp", "shm"])
def test_train_embedding(provider):
    bindir = os.path.abspath(os.environ.get("RKV_BIN_DIR", "build/bin"))
    p = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples/python/train_embedding.py"),
         "--workers", "2", "--provider", provider, "--bin", bindir],
        capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    acc = [float(a) for a in re.findall(r"test accuracy (\d\.\d+)", out)]
    assert len(acc) == 2 and min(acc) >= 0.9, out
    assert abs(acc[0] - acc[1]) <= 0.03 and "AGREE:" in out, out


def test_train_embedding_bad_arguments():
    p = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples/python/train_embedding.py"),
         "--workers", "0"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--workers 1..16" in p.stderr
    p = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples/python/train_embedding.py"),
         "--bin", "/nonexistent"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "cannot start rkv-server" in p.stderr
