"""Starts `infrasim up` on a free loopback port for the end-to-end tests and hands out
clients: the Python `kubernetes` package and kubectl, neither written here.

Fixtures:
- `plane`: one server for the whole session (tests isolate themselves with unique namespaces);
- `small_plane`: a second server with `--watch-window 20`, so old resourceVersions expire fast;
- `ns`: a fresh namespace on `plane` for one test.

A `Plane` exposes `port`, `kubeconfig` (path), `client` (a configured
`kubernetes.client.ApiClient`), `api()` (a new ApiClient, e.g. one per thread), `core()`,
`kubectl(...)` (runs the machine's kubectl with `--kubeconfig` and a timeout) and `raw(...)`
(one HTTP request through the Python client's transport, for what its typed API hides).
"""

import json
import os
import re
import pathlib
import socket
import subprocess
import time
import urllib.parse
import uuid

import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = os.environ.get("INFRASIM_BIN", str(ROOT / "target" / "debug" / "infrasim"))
KUBECTL = os.environ.get("KUBECTL", "kubectl")
READY_TIMEOUT = 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Plane:
    """One `infrasim up` process and its admin kubeconfig."""

    def __init__(self, workdir, *extra, ephemeral=True):
        self.port = free_port()
        self.kubeconfig = str(workdir / "kubeconfig")
        self.log_path = workdir / "infrasim.log"
        self.log = open(self.log_path, "w")
        mode = ["--ephemeral"] if ephemeral else []
        self.proc = subprocess.Popen(
            [BINARY, "up", *mode, "--listen", f"127.0.0.1:{self.port}",
             "--kubeconfig", self.kubeconfig, *extra],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        try:
            self._wait_ready()
        except BaseException:
            # Never leave a half-started server behind a failed fixture.
            self.stop()
            raise
        self.client = self.api()

    def _wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT
        last = None
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"infrasim up exited early with {self.proc.returncode}:\n{self.log_tail()}")
            if os.path.exists(self.kubeconfig):
                try:
                    # The kubeconfig may be half-written or the listener not yet serving:
                    # both show up as exceptions here, and we try again.
                    status, body = self.raw("GET", "/readyz", api=self.api(), timeout=5)
                    if status == 200 and body.strip() == "ok":
                        return
                    last = f"/readyz answered {status} {body!r}"
                except Exception as e:  # noqa: BLE001 - any failure means "not yet"
                    last = repr(e)
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"infrasim up not ready after {READY_TIMEOUT}s (last: {last}):\n{self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, lines=40):
        try:
            self.log.flush()
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def api(self):
        return config.new_client_from_config(config_file=self.kubeconfig)

    def core(self):
        return client.CoreV1Api(self.api())

    def kubectl(self, *args, check=True, timeout=30, input=None):
        proc = subprocess.run(
            [KUBECTL, "--kubeconfig", self.kubeconfig, *args],
            capture_output=True, text=True, timeout=timeout, input=input,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}\n{proc.stdout}")
        return proc

    def _request(self, method, path, query=None, body=None, api=None, timeout=15, stream=False, headers=None):
        """An HTTP request with the credentials of a kubernetes ApiClient's configuration, but
        through urllib3 itself: the client's own request plumbing differs between releases."""
        cfg = (api or self.client).configuration
        pool = urllib3.PoolManager(
            cert_reqs="CERT_REQUIRED" if cfg.verify_ssl else "CERT_NONE",
            ca_certs=cfg.ssl_ca_cert, cert_file=cfg.cert_file, key_file=cfg.key_file)
        headers = {"Accept": "application/json", **(headers or {})}
        token = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
        if token:
            headers["Authorization"] = token if token.startswith("Bearer ") else f"Bearer {token}"
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        url = cfg.host.rstrip("/") + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        return pool.request(method, url, body=data, headers=headers, preload_content=not stream,
                            timeout=urllib3.Timeout(connect=5, read=timeout), retries=False)

    def raw(self, method, path, query=None, body=None, api=None, timeout=15):
        """One request; returns (HTTP status, decoded JSON body or text). Never raises on a
        non-2xx status, so tests can assert on the Status object kube-apiserver would send."""
        resp = self._request(method, path, query, body, api, timeout)
        text = resp.data.decode()
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text

    def watch_events(self, path, query, count=None, timeout=10, until=None):
        """Opens a watch (`?watch=1` plus `query`) and returns its decoded events (dicts with
        `type` and `object`), stopping after `count` events, when `until(event)` is true, or
        when the server closes the stream (`timeoutSeconds`)."""
        q = {"watch": "1", "timeoutSeconds": str(timeout), **query}
        resp = self._request("GET", path, q, timeout=timeout + 10, stream=True)
        events = []
        try:
            assert resp.status == 200, f"watch answered {resp.status}: {resp.data[:500]!r}"
            buffer = b""
            for chunk in resp.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    events.append(event)
                    if (count is not None and len(events) >= count) or (until and until(event)):
                        return events
        finally:
            resp.release_conn()
        return events

    def stop(self):
        """SIGTERM, as a service manager would; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            code = None
        self.log.close()
        return code


@pytest.fixture(scope="session")
def plane(tmp_path_factory):
    """The plane most tests share. Its workloads are off, as envtest runs kube-apiserver
    without a controller manager: these tests prove the API's own semantics on objects
    nothing else touches (test_up.py runs a plane with them on)."""
    p = Plane(tmp_path_factory.mktemp("plane"), "--workloads=false")
    yield p
    p.stop()


@pytest.fixture(scope="session")
def small_plane(tmp_path_factory):
    """A plane that keeps only 20 events, so old resourceVersions expire quickly."""
    p = Plane(tmp_path_factory.mktemp("small"), "--watch-window", "20", "--workloads=false")
    yield p
    p.stop()


def unique(prefix="t"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ns(plane):
    """A fresh namespace per test, so tests can share one server."""
    name = unique()
    plane.core().create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def wait_for(predicate, timeout=15, interval=0.05, what="condition"):
    """Polls `predicate` until it returns a truthy value, with a bounded deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached within {timeout}s"
        time.sleep(interval)


def gone(read):
    """True when `read()` answers 404."""
    try:
        read()
        return False
    except ApiException as e:
        if e.status == 404:
            return True
        raise


def deployed_controller(plane, workdir, which):
    """Runs the controller of `infrasim manifests <which>` as that manifest deploys it: its
    objects but the Deployment applied to `plane`, then the Deployment's own arguments, with
    the token of its ServiceAccount as the only credential. The process and its log's path."""
    import yaml
    manifest = subprocess.run([BINARY, "manifests", which], check=True, capture_output=True,
                              text=True).stdout
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
        [d for d in docs if d["kind"] != "Deployment"]))
    ns, account = deployment["metadata"]["namespace"], deployment["spec"]["template"]["spec"]["serviceAccountName"]
    token = plane.kubectl("-n", ns, "create", "token", account).stdout.strip()
    config = yaml.safe_load(open(plane.kubeconfig))
    for user in config["users"]:
        user["user"] = {"token": token}
    kubeconfig = workdir / f"{which}.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # The kubelet expands $(VAR) in args from the container's env (the downward API here).
    fields = {"metadata.namespace": ns, "metadata.name": f"{deployment['metadata']['name']}-0"}
    env = {e["name"]: e.get("value") or fields.get(e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath"), "")
           for e in container.get("env", [])}
    args = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in container["args"]]
    log_path = workdir / f"{which}-controller.log"
    proc = subprocess.Popen([BINARY, *args, "--kubeconfig", str(kubeconfig)],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    return proc, log_path

