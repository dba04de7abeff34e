"""Starts `infrasim up` on a free loopback port for the end-to-end tests and hands out
clients: the Python `kubernetes` package and kubectl, neither written here. This is the one
conftest of tests/e2e: pytest loads it for every subfolder (api/, vsphere/, controllers/) and
puts this folder on sys.path, so test files import its helpers with `from conftest import ...`.
Test files never import each other: what two of them share lives here.

Fixtures:
- `plane`: one server for the whole session (tests isolate themselves with unique namespaces);
- `small_plane`: a second server with `--watch-window 20`, so old resourceVersions expire fast;
- `ns`: a fresh namespace on `plane` for one test.

A `Plane` exposes `port`, `kubeconfig` (path), `client` (a configured
`kubernetes.client.ApiClient`), `api()` (a new ApiClient, e.g. one per thread), `core()`,
`kubectl(...)` (runs the machine's kubectl with `--kubeconfig` and a timeout) and `raw(...)`
(one HTTP request through the Python client's transport, for what its typed API hides).

Helpers: `unique`, `wait_for`, `gone`, `refused_credentials`, `get`, `condition` and `ready`
(objects through kubectl), `envsubst` (clusterctl's substitution), `fleet_ready`,
`deployed_controller`, `metrics_get`, `scraped_by_monitoring` and `never_forbidden`; for vSphere, `Vcsim` (an `infrasim vcsim`
process, with `USER` and `PASSWORD`), `unverified_tls`, `json_exchange`, and `simulator`,
`vcsim_status` and `connect` (a VCenterSimulator of a plane's vcsim controller).
"""

import json
import os
import re
import pathlib
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
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
    nothing else touches (api/test_up.py runs a plane with them on)."""
    # CAPV's NodeAntiAffinity gate on (off by default, as in CAPV): the CAPV tests see the
    # VMs in their cluster modules. The objects' state metrics are on by default: the
    # metrics tests read them.
    p = Plane(tmp_path_factory.mktemp("plane"), "--workloads=false",
              "--capv-node-anti-affinity=true")
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


def in_memory_cluster(plane, ns, name, tmp_path, workers, control_planes=1):
    """An in-memory cluster made with `infrasim cluster create` (machine steps instant), and
    the path of its admin kubeconfig."""
    made = subprocess.run([BINARY, "cluster", "create", name, "-n", ns, "--kubeconfig",
                           plane.kubeconfig, "--step-startup", "0s", "--workers", str(workers),
                           "--control-planes", str(control_planes)],
                          capture_output=True, text=True, timeout=180)
    assert made.returncode == 0, made.stdout + made.stderr
    kubeconfig = tmp_path / f"{name}.kubeconfig"
    kubeconfig.write_text(subprocess.run(
        [BINARY, "cluster", "kubeconfig", name, "-n", ns, "--kubeconfig", plane.kubeconfig],
        capture_output=True, text=True, timeout=30, check=True).stdout)
    return kubeconfig


def metric_samples(text, family, **labels):
    """The values of the samples of `family` (in Prometheus' text format) whose labels
    include `labels`."""
    found = []
    for line in text.splitlines():
        if not line.startswith(family + "{"):
            continue
        names = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line[: line.rindex("}") + 1]))
        if all(names.get(k) == v for k, v in labels.items()):
            found.append(float(line.rsplit(" ", 1)[1]))
    return found


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


def refused_credentials(call):
    """Asserts that `call(_request_timeout=5)`, a Python client method, is refused: a 401, or
    the connection refused outright (a client certificate the server does not trust ends the
    TLS handshake)."""
    with pytest.raises((ApiException, urllib3.exceptions.HTTPError, OSError)) as refused:
        call(_request_timeout=5)
    if isinstance(refused.value, ApiException):
        assert refused.value.status == 401


def get(plane, ns, *what):
    """`kubectl -n <ns> get <what> -o json`, decoded; None when kubectl fails (no such object)."""
    out = plane.kubectl("-n", ns, "get", *what, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def condition(obj, type_):
    """The condition of that type in an object's status; None without one (or without the object)."""
    for c in ((obj or {}).get("status") or {}).get("conditions", []):
        if c["type"] == type_:
            return c
    return None


def ready(obj):
    """An object's Ready condition, or None."""
    return condition(obj, "Ready")


def envsubst(text, variables):
    """clusterctl's substitution (drone/envsubst): ${VAR}; ${VAR:=d}, ${VAR=d} and ${VAR:-d}
    take d when VAR is unset or empty. A variable with neither is an error."""
    missing = []

    def sub(m):
        name, default = m.group(1), m.group(3)
        if variables.get(name):
            return str(variables[name])
        if default is not None:
            return default
        missing.append(name)
        return ""
    out = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[=-](.*?))?\}", sub, text)
    assert not missing, f"variables without a value: {missing}"
    return out


def fleet_ready(proc, timeout):
    """Reads an `infrasim fleet` process's stdout up to its ready line, for at most `timeout`
    seconds; the lines read (its table of clusters among them)."""
    deadline = time.time() + timeout
    lines = []
    while not lines or lines[-1] != "fleet ready; Ctrl-C stops it":
        assert time.time() < deadline and proc.poll() is None, f"fleet did not start: {lines}"
        lines.append(proc.stdout.readline().strip())
    return lines


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
    # The Pod's `:8443` is its own network namespace's; here, a free loopback port.
    metrics_port = free_port()
    args = [f"--metrics-bind-address=127.0.0.1:{metrics_port}" if a.startswith("--metrics-bind-address=")
            else a for a in args]
    log_path = workdir / f"{which}-controller.log"
    proc = subprocess.Popen([BINARY, *args, "--kubeconfig", str(kubeconfig)],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    return proc, log_path, metrics_port


def metrics_get(port, path="/metrics", token=None):
    """A GET of a metrics server on loopback `port` (its certificate unverified, as a
    scraper of controller-runtime's self-signed one does), with `token` as bearer when given:
    (status, text), or (None, "") while nothing listens."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(req, context=unverified_tls(), timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


def scraped_by_monitoring(plane, port):
    """What a scraper bound to `system:monitoring` (as a Prometheus in the cluster is) gets
    from the metrics server on `port`, and what one with no token gets: (status, text, status)."""
    if get(plane, "default", "serviceaccount", "prometheus") is None:
        plane.kubectl("create", "serviceaccount", "prometheus")
        plane.kubectl("create", "clusterrolebinding", "prometheus", "--clusterrole=system:monitoring",
                      "--serviceaccount=default:prometheus")
    token = plane.kubectl("create", "token", "prometheus").stdout.strip()
    status, text = metrics_get(port, token=token)
    return status, text, metrics_get(port)[0]


def never_forbidden(log_path):
    """Asserts that the log of a `deployed_controller` holds no refusal: its RBAC was enough."""
    text = log_path.read_text()
    assert "forbidden" not in text.lower() and " 403" not in text, text[-2000:]


# vSphere: `infrasim vcsim` processes, and the simulators of a plane's vcsim controller.

USER = "administrator@vsphere.local"
PASSWORD = "s3cret-pass"


class Vcsim:
    """An `infrasim vcsim` process on a free port, with `PASSWORD`; `banner` holds the first
    six lines it prints (the govc settings and the thumbprints)."""

    def __init__(self, workdir, *flags, port=None):
        self.port = port or free_port()
        self.log = open(workdir / "vcsim.log", "a")
        self.proc = subprocess.Popen(
            [BINARY, "vcsim", "--listen", f"127.0.0.1:{self.port}", "--password", PASSWORD, *flags],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.banner = []
        deadline = time.time() + 30
        while len(self.banner) < 6:
            assert time.time() < deadline and self.proc.poll() is None, "vcsim did not start"
            self.banner.append(self.proc.stdout.readline().strip())

    def connect(self, pwd=PASSWORD):
        from pyVim.connect import SmartConnect
        return SmartConnect(host="127.0.0.1", port=self.port, user=USER, pwd=pwd,
                            disableSslCertValidation=True)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()

    def kill(self):
        """Ends the process with SIGKILL: nothing it had not made durable survives."""
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.log.close()


def unverified_tls():
    """A TLS context for the simulator's self-signed certificate, as a script with
    GOVC_INSECURE=1 would use."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def redfish_systems(port, user=USER, password=PASSWORD):
    """The paths of the systems a vcsim's Redfish service lists, read with HTTP Basic."""
    import base64
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    req = urllib.request.Request(f"https://127.0.0.1:{port}/redfish/v1/Systems",
                                 headers={"Authorization": f"Basic {token}"})
    with urllib.request.urlopen(req, context=unverified_tls(), timeout=10) as resp:
        return [m["@odata.id"] for m in json.load(resp)["Members"]]


def json_exchange(req):
    """Sends a request to the simulator; its status and JSON body (None when empty), for
    errors as well as successes."""
    try:
        with urllib.request.urlopen(req, context=unverified_tls(), timeout=10) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if body else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


VCSIM_GROUP = "vcsim.infrastructure.cluster.x-k8s.io"


def vcsim_status(plane, ns, kind, name, field):
    """Waits for `status.<field>` of the vcsim controller's object and returns its status."""
    def with_field():
        obj = get(plane, ns, f"{kind}.{VCSIM_GROUP}", name)
        status = (obj or {}).get("status") or {}
        return status if status.get(field) else None
    return wait_for(with_field, timeout=30, what=f"{kind} {name} status.{field}")


def simulator(plane, ns, name, model=None):
    """A VCenterSimulator applied with kubectl, waited for until it serves: its status, host
    and port."""
    spec = {"model": model} if model else {}
    plane.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps({
        "apiVersion": f"{VCSIM_GROUP}/v1alpha1", "kind": "VCenterSimulator",
        "metadata": {"name": name}, "spec": spec}))
    status = vcsim_status(plane, ns, "vcentersimulator", name, "thumbprint")
    host, port = status["host"].rsplit(":", 1)
    return status, host, int(port)


def connect(status):
    """A pyvmomi session with the simulator a VCenterSimulator's status describes."""
    from pyVim.connect import SmartConnect
    host, port = status["host"].rsplit(":", 1)
    return SmartConnect(host=host, port=int(port), user=status["username"], pwd=status["password"],
                        disableSslCertValidation=True)
