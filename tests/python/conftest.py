# SPDX-License-Identifier: MIT
# conftest.py - pytest fixtures for the rkv Python module: rkv-servers
# (tcp and shm) started by the tests on addresses they choose, stopped by
# PID.  RKV_BIN_DIR names the build's bin/ (tests/python/run.sh sets it).
import os
import subprocess
import tempfile
import time

import pytest

BIN = os.environ.get("RKV_BIN_DIR", "build/bin")
SHM_DIR = tempfile.mkdtemp(prefix="rkv-pytest-shm-")
os.environ["RKV_SHM_DIR"] = SHM_DIR


class Server:
    """An rkv-server process and its address."""

    _n = 0

    def __init__(self, provider, *extra):
        Server._n += 1
        listen = ("tcp://127.0.0.1:0" if provider == "tcp"
                  else "shm:///rkv-pytest-%d-%d" % (os.getpid(), Server._n))
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "rkv-server"), "--listen", listen,
             # room and time for a 64 MiB value (test_limits): its
             # READ must finish within the grace period
             "--memory", "192M", "--grace", "5000", "--capacity", "20000",
             "--log-level", "error"] + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        prefix = "rkv-server: listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError("rkv-server did not start: %r" % line)
        self.addr = line[len(prefix):].strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(params=["tcp", "shm"])
def server(request):
    s = Server(request.param)
    yield s
    s.stop()


@pytest.fixture
def client(server):
    import rkv
    with rkv.Client(server.addr, timeout_ms=5000) as c:
        yield c
