"""Starts `infrasim up` on a free loopback port for the end-to-end tests and hands out
clients: the Python `kubernetes` package and kubectl, neither written here."""

import os
import pathlib
import socket
import subprocess
import time
import uuid

import pytest
import urllib3
from kubernetes import client, config

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("INFRASIM_BIN", str(ROOT / "target" / "debug" / "infrasim"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Plane:
    """One `infrasim up --ephemeral` process and its admin kubeconfig."""

    def __init__(self, workdir, *extra, ephemeral=True):
        self.port = free_port()
        self.kubeconfig = str(workdir / "kubeconfig")
        self.log = open(workdir / "infrasim.log", "w")
        mode = ["--ephemeral"] if ephemeral else []
        self.proc = subprocess.Popen(
            [BINARY, "up", *mode, "--listen", f"127.0.0.1:{self.port}",
             "--kubeconfig", self.kubeconfig, *extra],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 30
        while True:
            assert self.proc.poll() is None, "infrasim up exited early; see its log"
            if os.path.exists(self.kubeconfig):
                try:
                    client.VersionApi(self.api()).get_code()
                    break
                except (urllib3.exceptions.HTTPError, OSError, client.ApiException, Exception):
                    # The kubeconfig may be half-written or the listener not yet serving.
                    pass
            assert time.time() < deadline, "infrasim up did not become ready"
            time.sleep(0.1)

    def api(self):
        return config.new_client_from_config(config_file=self.kubeconfig)

    def core(self):
        return client.CoreV1Api(self.api())

    def kubectl(self, *args, check=True, timeout=30, input=None):
        proc = subprocess.run(
            ["kubectl", "--kubeconfig", self.kubeconfig, *args],
            capture_output=True, text=True, timeout=timeout, input=input,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def stop(self):
        """SIGTERM, as a service manager would; returns the exit code."""
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = None
        self.log.close()
        return code


@pytest.fixture(scope="session")
def plane(tmp_path_factory):
    p = Plane(tmp_path_factory.mktemp("plane"))
    yield p
    p.stop()


@pytest.fixture(scope="session")
def small_plane(tmp_path_factory):
    """A plane that keeps only 20 events, so old resourceVersions expire quickly."""
    p = Plane(tmp_path_factory.mktemp("small"), "--watch-window", "20")
    yield p
    p.stop()


@pytest.fixture
def ns(plane):
    """A fresh namespace per test, so tests can share one server."""
    name = "t-" + uuid.uuid4().hex[:10]
    plane.core().create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def wait_for(predicate, timeout=15, interval=0.05):
    """Polls `predicate` until it returns a truthy value, with a bounded deadline."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.time() < deadline, "condition not reached in time"
        time.sleep(interval)
