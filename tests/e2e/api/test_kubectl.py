"""kubectl (the machine's, unmodified) against the embedded management plane."""

import json
import queue
import re
import subprocess
import threading
import time

from conftest import KUBECTL, unique, wait_for

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  nodeName: node-1
  containers:
  - name: nginx
    image: nginx:1.27
"""


def header(output):
    return output.splitlines()[0].split()


def test_create_from_file_and_get_columns(plane, ns, tmp_path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    out = plane.kubectl("-n", ns, "create", "-f", str(manifest)).stdout
    assert out.strip() == "pod/web created"
    got = plane.kubectl("-n", ns, "get", "pods").stdout
    assert header(got) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert got.splitlines()[1].split()[:4] == ["web", "0/1", "Pending", "0"]
    wide = plane.kubectl("-n", ns, "get", "pods", "-o", "wide").stdout
    assert header(wide)[:9] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE"]
    assert "node-1" in wide.splitlines()[1].split()


def test_server_side_validation_refuses_unknown_fields(plane, ns, tmp_path):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(POD.replace("  nodeName: node-1\n", "  nodeName: node-1\n  bogusField: 1\n"))
    proc = plane.kubectl("-n", ns, "create", "-f", str(manifest), check=False)
    assert proc.returncode != 0
    assert 'unknown field "spec.bogusField"' in proc.stderr


def test_typed_creates_use_protobuf(plane, ns):
    # These kubectl commands send protobuf bodies through client-go's typed clients.
    plane.kubectl("-n", ns, "create", "configmap", "settings", "--from-literal=a=1", "--from-literal=b=2")
    plane.kubectl("-n", ns, "create", "secret", "generic", "creds", "--from-literal=pw=hunter2")
    plane.kubectl("-n", ns, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=3")
    plane.kubectl("-n", ns, "run", "shell", "--image=busybox", "--labels=role=shell", "--", "sleep", "60")
    cms = plane.kubectl("-n", ns, "get", "configmaps").stdout
    assert header(cms) == ["NAME", "DATA", "AGE"]
    assert any(line.split()[:2] == ["settings", "2"] for line in cms.splitlines())
    secret = json.loads(plane.kubectl("-n", ns, "get", "secret", "creds", "-o", "json").stdout)
    assert secret["data"]["pw"] == "aHVudGVyMg=="
    deploy = json.loads(plane.kubectl("-n", ns, "get", "deployment", "web", "-o", "json").stdout)
    assert deploy["spec"]["replicas"] == 3
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    pod = json.loads(plane.kubectl("-n", ns, "get", "pod", "shell", "-o", "json").stdout)
    assert pod["spec"]["containers"][0]["args"] == ["sleep", "60"]
    assert pod["metadata"]["labels"] == {"role": "shell"}
    assert header(plane.kubectl("-n", ns, "get", "deployments").stdout) == [
        "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]


class Streamed:
    """A long-running kubectl (e.g. `get -w`) whose stdout lines are collected as they come."""

    def __init__(self, plane, *args):
        self.proc = subprocess.Popen(
            [KUBECTL, "--kubeconfig", plane.kubeconfig, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for_line(self, predicate, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            for line in self.seen:
                if predicate(line):
                    return line
            left = deadline - time.monotonic()
            assert left > 0, f"no such line in {self.seen}; stderr: {self.stop()}"
            try:
                self.seen.append(self.lines.get(timeout=min(left, 0.5)))
            except queue.Empty:
                assert self.proc.poll() is None or not self.lines.empty(), \
                    f"kubectl exited {self.proc.returncode}: {self.proc.stderr.read()}; output {self.seen}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


def test_get_watch_sees_a_change_made_meanwhile(plane, ns):
    plane.kubectl("-n", ns, "create", "configmap", "before")
    w = Streamed(plane, "-n", ns, "get", "configmaps", "-w", "--request-timeout=30s")
    try:
        assert w.wait_for_line(lambda line: line.startswith("NAME")).split() == ["NAME", "DATA", "AGE"]
        w.wait_for_line(lambda line: line.split()[:2] == ["before", "0"])
        plane.kubectl("-n", ns, "create", "configmap", "during", "--from-literal=a=1")
        w.wait_for_line(lambda line: line.split()[:2] == ["during", "1"])
    finally:
        w.stop()


def test_get_watch_output_watch_events(plane, ns):
    plane.kubectl("-n", ns, "create", "configmap", "first")
    w = Streamed(plane, "-n", ns, "get", "configmaps", "-w", "--output-watch-events", "--request-timeout=30s")
    try:
        assert w.wait_for_line(lambda line: line.startswith("EVENT")).split() == ["EVENT", "NAME", "DATA", "AGE"]
        w.wait_for_line(lambda line: line.split()[:2] == ["ADDED", "first"])
        plane.kubectl("-n", ns, "create", "configmap", "second")
        w.wait_for_line(lambda line: line.split()[:2] == ["ADDED", "second"])
        plane.kubectl("-n", ns, "delete", "configmap", "first")
        w.wait_for_line(lambda line: line.split()[:2] == ["DELETED", "first"])
    finally:
        w.stop()


def test_describe_label_and_delete(plane, ns, tmp_path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    plane.kubectl("-n", ns, "create", "-f", str(manifest))
    described = plane.kubectl("-n", ns, "describe", "pod", "web").stdout
    assert "Name:             web" in described
    assert f"Namespace:        {ns}" in described
    assert "nginx:1.27" in described
    plane.kubectl("-n", ns, "label", "pod", "web", "tier=front")
    selected = plane.kubectl("-n", ns, "get", "pods", "-l", "tier=front", "-o", "name").stdout
    assert selected.strip() == "pod/web"
    plane.kubectl("-n", ns, "delete", "pod", "web")
    assert plane.kubectl("-n", ns, "get", "pods", "-o", "name").stdout.strip() == ""


def test_api_resources(plane):
    out = plane.kubectl("api-resources").stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["pods"][1:] == ["po", "v1", "true", "Pod"]
    assert rows["deployments"][1:] == ["deploy", "apps/v1", "true", "Deployment"]
    assert rows["configmaps"][1:] == ["cm", "v1", "true", "ConfigMap"]
    assert rows["namespaces"][1:] == ["ns", "v1", "false", "Namespace"]
    assert rows["leases"][1:] == ["coordination.k8s.io/v1", "true", "Lease"]


def test_create_and_delete_namespace(plane):
    name = unique("kc")
    assert plane.kubectl("create", "namespace", name).stdout.strip() == f"namespace/{name} created"
    listed = plane.kubectl("get", "namespaces").stdout
    assert header(listed) == ["NAME", "STATUS", "AGE"]
    assert any(line.split()[:2] == [name, "Active"] for line in listed.splitlines())
    plane.kubectl("-n", name, "create", "configmap", "inside")
    out = plane.kubectl("delete", "namespace", name, "--wait=true", "--timeout=30s").stdout
    assert out.strip() == f'namespace "{name}" deleted'
    proc = plane.kubectl("get", "namespace", name, check=False)
    assert proc.returncode == 1
    assert f'Error from server (NotFound): namespaces "{name}" not found' in proc.stderr


def test_scale_subresource(plane, ns):
    plane.kubectl("-n", ns, "create", "deployment", "web", "--image=nginx", "--replicas=2")
    plane.kubectl("-n", ns, "scale", "deployment", "web", "--replicas=5")
    d = json.loads(plane.kubectl("-n", ns, "get", "deployment", "web", "-o", "json").stdout)
    assert d["spec"]["replicas"] == 5
    assert d["metadata"]["generation"] == 2
    scale = json.loads(plane.kubectl("get", "--raw", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale").stdout)
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 5
    assert scale["status"]["selector"] == "app=web"
    proc = plane.kubectl("-n", ns, "scale", "deployment", "web", "--replicas=-1", check=False)
    assert proc.returncode != 0


def test_server_side_dry_run_changes_nothing(plane, ns):
    out = plane.kubectl("-n", ns, "create", "configmap", "dry", "--from-literal=a=b", "--dry-run=server",
                        "-o", "json").stdout
    would = json.loads(out)
    assert would["data"] == {"a": "b"} and would["metadata"]["uid"]
    assert plane.kubectl("-n", ns, "get", "configmap", "dry", check=False).returncode != 0
    plane.kubectl("-n", ns, "create", "configmap", "real")
    assert "server dry run" in plane.kubectl("-n", ns, "delete", "configmap", "real", "--dry-run=server").stdout
    plane.kubectl("-n", ns, "label", "configmap", "real", "x=y", "--dry-run=server")
    real = json.loads(plane.kubectl("-n", ns, "get", "configmap", "real", "-o", "json").stdout)
    assert "labels" not in real["metadata"]
    proc = plane.kubectl("-n", ns, "create", "configmap", "real", "--dry-run=server", check=False)
    assert "AlreadyExists" in proc.stderr or "already exists" in proc.stderr


def test_explain_reads_the_openapi_schemas(plane):
    out = plane.kubectl("explain", "pod.spec.containers.image").stdout
    assert "FIELD: image <string>" in out
    assert "Container image name" in out
    out = plane.kubectl("explain", "deployments.spec.strategy", "--api-version=apps/v1").stdout
    assert "FIELD: strategy <DeploymentStrategy>" in out
    assert "rollingUpdate\t<RollingUpdateDeployment>" in out


def test_explain_reads_the_protobuf_openapi_v2(plane):
    # kubectl's v2 explainer fetches /openapi/v2 as protobuf (gnostic's openapi.v2.Document).
    out = plane.kubectl("explain", "pods.spec.containers", "--output=plaintext-openapiv2").stdout
    assert "RESOURCE: containers <[]Object>" in out
    assert "List of containers belonging to the pod." in out
    assert "image\t<string>" in out
    out = plane.kubectl("explain", "deployment.spec.strategy", "--output=plaintext-openapiv2").stdout
    assert "VERSION:  apps/v1" in out and "RESOURCE: strategy <Object>" in out
    assert "rollingUpdate\t<Object>" in out


def test_openapi_v2_answers_json_or_protobuf_as_asked(plane):
    json_doc = plane._request("GET", "/openapi/v2", headers={"Accept": "application/json"})
    assert json_doc.status == 200 and json_doc.headers["Content-Type"].startswith("application/json")
    proto = plane._request("GET", "/openapi/v2",
                      headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert proto.status == 200 and proto.headers["Content-Type"] == "application/octet-stream"
    assert b"io.k8s.api.core.v1.Pod" in proto.data
    refused = plane._request("GET", "/openapi/v2", headers={"Accept": "application/xml"})
    assert refused.status == 406


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, labels: {app: app}}
spec:
  replicas: 2
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
      - name: web
        image: nginx:1.25
        env: [{name: A, value: "1"}]
      - name: sidecar
        image: busybox
"""


def test_apply_twice_set_image_restart_and_diff(plane, ns, tmp_path):
    manifest = tmp_path / "d.yaml"
    manifest.write_text(DEPLOYMENT)
    assert "created" in plane.kubectl("-n", ns, "apply", "-f", str(manifest)).stdout
    # Re-applying a changed manifest is a strategic merge patch.
    manifest.write_text(DEPLOYMENT.replace("nginx:1.25", "nginx:1.27").replace("replicas: 2", "replicas: 3"))
    assert "configured" in plane.kubectl("-n", ns, "apply", "-f", str(manifest)).stdout
    d = json.loads(plane.kubectl("-n", ns, "get", "deploy", "app", "-o", "json").stdout)
    containers = d["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in containers] == ["nginx:1.27", "busybox"]
    assert d["spec"]["replicas"] == 3 and d["metadata"]["generation"] == 2
    assert "unchanged" in plane.kubectl("-n", ns, "apply", "-f", str(manifest)).stdout
    plane.kubectl("-n", ns, "set", "image", "deploy/app", "web=nginx:1.28")
    plane.kubectl("-n", ns, "rollout", "restart", "deploy/app")
    d = json.loads(plane.kubectl("-n", ns, "get", "deploy", "app", "-o", "json").stdout)
    web = d["spec"]["template"]["spec"]["containers"][0]
    assert web["image"] == "nginx:1.28" and web["env"] == [{"name": "A", "value": "1"}]
    assert "kubectl.kubernetes.io/restartedAt" in d["spec"]["template"]["metadata"]["annotations"]
    diff = plane.kubectl("-n", ns, "diff", "-f", str(manifest), check=False)
    assert diff.returncode == 1, diff.stderr
    assert "-        image: nginx:1.28" in diff.stdout and "+        image: nginx:1.27" in diff.stdout


def test_server_side_apply_conflicts_and_force(plane, ns, tmp_path):
    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {a: '1', b: '2'}\n")
    assert "serverside-applied" in plane.kubectl("-n", ns, "apply", "--server-side", "-f", str(manifest)).stdout
    other = tmp_path / "cm2.yaml"
    other.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {a: '9'}\n")
    proc = plane.kubectl("-n", ns, "apply", "--server-side", "--field-manager=other", "-f", str(other), check=False)
    assert proc.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.a' in proc.stderr
    plane.kubectl("-n", ns, "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", str(other))
    cm = json.loads(plane.kubectl("-n", ns, "get", "cm", "ssa", "-o", "json", "--show-managed-fields").stdout)
    assert cm["data"] == {"a": "9", "b": "2"}
    owners = {m["manager"]: m["fieldsV1"] for m in cm["metadata"]["managedFields"]}
    assert owners["other"] == {"f:data": {"f:a": {}}}
    assert owners["kubectl"] == {"f:data": {"f:b": {}}}
    # Dropping a field from the applied configuration removes it.
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ssa}\ndata: {}\n")
    plane.kubectl("-n", ns, "apply", "--server-side", "-f", str(manifest))
    cm = json.loads(plane.kubectl("-n", ns, "get", "cm", "ssa", "-o", "json").stdout)
    assert cm["data"] == {"a": "9"}


# --- more of kubectl's everyday commands --------------------------------------------------

MANY_KINDS = """
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {user: admin}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 2
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: c, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: ss}
spec:
  serviceName: web
  replicas: 1
  selector: {matchLabels: {app: ss}}
  template:
    metadata: {labels: {app: ss}}
    spec: {containers: [{name: c, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec:
  selector: {matchLabels: {app: ds}}
  template:
    metadata: {labels: {app: ds}}
    spec: {containers: [{name: c, image: nginx:1.27}]}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: lock}
spec: {holderIdentity: leader-1, leaseDurationSeconds: 15}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: ep}
subsets: [{addresses: [{ip: 10.1.2.3}], ports: [{port: 80}]}]
"""

HEADERS = {
    "services": "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE",
    "serviceaccounts": "NAME SECRETS AGE",
    "secrets": "NAME TYPE DATA AGE",
    "deployments": "NAME READY UP-TO-DATE AVAILABLE AGE",
    "replicasets": "NAME DESIRED CURRENT READY AGE",
    "statefulsets": "NAME READY AGE",
    "daemonsets": "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE",
    "leases": "NAME HOLDER AGE",
    "poddisruptionbudgets": "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE",
    "roles": "NAME CREATED AT",
    "endpoints": "NAME ENDPOINTS AGE",
}

ROWS = {  # the leading cells of each kind's row, AGE and later left out
    "services": lambda ip: ["web", "ClusterIP", ip, "<none>", "80/TCP"],
    "serviceaccounts": lambda _: ["robot", "0"],
    "secrets": lambda _: ["creds", "Opaque", "1"],
    "deployments": lambda _: ["web", "0/2", "0", "0"],
    "replicasets": lambda _: ["rs", "2", "0", "0"],
    "statefulsets": lambda _: ["ss", "0/1"],
    "daemonsets": lambda _: ["ds", "0", "0", "0", "0", "0", "<none>"],
    "leases": lambda _: ["lock", "leader-1"],
    "poddisruptionbudgets": lambda _: ["pdb", "1", "N/A", "0"],
    "roles": lambda _: ["reader"],
    "endpoints": lambda _: ["ep", "10.1.2.3:80"],
}


def test_multi_document_create_and_columns_of_many_kinds(plane, ns, tmp_path):
    manifest = tmp_path / "many.yaml"
    manifest.write_text(MANY_KINDS)
    out = plane.kubectl("-n", ns, "create", "-f", str(manifest)).stdout.splitlines()
    assert out == ["service/web created", "serviceaccount/robot created", "secret/creds created",
                   "deployment.apps/web created", "replicaset.apps/rs created", "statefulset.apps/ss created",
                   "daemonset.apps/ds created", "lease.coordination.k8s.io/lock created",
                   "poddisruptionbudget.policy/pdb created", "role.rbac.authorization.k8s.io/reader created",
                   "endpoints/ep created"]
    ip = json.loads(plane.kubectl("-n", ns, "get", "svc", "web", "-o", "json").stdout)["spec"]["clusterIP"]
    problems = []
    for kind, expected in HEADERS.items():
        got = plane.kubectl("-n", ns, "get", kind).stdout.splitlines()
        name = ROWS[kind](ip)[0]
        row = next((line.split() for line in got[1:] if line.split()[:1] == [name]), None)
        if header(got[0]) != expected.split():
            problems.append(f"{kind}: header {got[0]!r}, expected {expected!r}")
        elif row is None or row[:len(ROWS[kind](ip))] != ROWS[kind](ip):
            problems.append(f"{kind}: row {row}, expected to start with {ROWS[kind](ip)}")
    assert not problems, "\n".join(problems)


def test_get_wide_for_deployments_and_services(plane, ns):
    plane.kubectl("-n", ns, "create", "deployment", "web", "--image=nginx:1.27")
    wide = plane.kubectl("-n", ns, "get", "deployments", "-o", "wide").stdout.splitlines()
    assert header(wide[0]) == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert wide[1].split()[-3:] == ["nginx", "nginx:1.27", "app=web"]


def pods_yaml(*specs):
    docs = []
    for name, node, labels in specs:
        docs.append(f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {json.dumps(labels)}}}
spec:
  nodeName: {node}
  containers: [{{name: c, image: busybox:1.36}}]
""")
    return "---\n".join(docs)


def test_client_side_columns_need_objects_in_table_rows(plane, ns, tmp_path):
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(pods_yaml(("a", "n3", {"app": "x", "tier": "db"}), ("b", "n1", {"app": "y"}),
                                  ("c", "n2", {"app": "x"})))
    plane.kubectl("-n", ns, "create", "-f", str(manifest))
    labelled = plane.kubectl("-n", ns, "get", "pods", "-L", "app,tier").stdout.splitlines()
    assert header(labelled[0]) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "APP", "TIER"]
    assert labelled[1].split()[0] == "a" and labelled[1].split()[-2:] == ["x", "db"]
    shown = plane.kubectl("-n", ns, "get", "pods", "--show-labels").stdout.splitlines()
    assert header(shown[0])[-1] == "LABELS"
    assert shown[1].split()[-1] == "app=x,tier=db"
    by_node = plane.kubectl("-n", ns, "get", "pods", "--sort-by=.spec.nodeName", "-o", "name").stdout.split()
    assert by_node == ["pod/b", "pod/c", "pod/a"]
    sorted_table = plane.kubectl("-n", ns, "get", "pods", "--sort-by=.spec.nodeName").stdout.splitlines()
    assert [line.split()[0] for line in sorted_table[1:]] == ["b", "c", "a"]
    custom = plane.kubectl("-n", ns, "get", "pods", "-o", "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName")
    assert custom.stdout.splitlines() == ["NAME   NODE", "a      n3", "b      n1", "c      n2"]
    names = plane.kubectl("-n", ns, "get", "pods", "-l", "app=x", "-o", "jsonpath={.items[*].metadata.name}").stdout
    assert names == "a c"
    everywhere = plane.kubectl("get", "pods", "-A").stdout.splitlines()
    assert header(everywhere[0]) == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [ns, "a", "0/1", "Pending", "0"] in [line.split()[:5] for line in everywhere[1:]]


def test_kubectl_errors_say_what_kube_apiserver_says(plane, ns):
    proc = plane.kubectl("-n", ns, "get", "configmap", "absent", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == 'Error from server (NotFound): configmaps "absent" not found'
    plane.kubectl("-n", ns, "create", "configmap", "twice")
    proc = plane.kubectl("-n", ns, "create", "configmap", "twice", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == 'error: failed to create configmap: configmaps "twice" already exists'
    proc = plane.kubectl("-n", ns, "get", "pods", check=False)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr.strip() == f"No resources found in {ns} namespace."
    proc = plane.kubectl("-n", ns, "get", "gizmos", check=False)
    assert proc.returncode == 1
    assert 'the server doesn\'t have a resource type "gizmos"' in proc.stderr


def test_describe_shows_events_for_the_object(plane, ns, tmp_path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    plane.kubectl("-n", ns, "create", "-f", str(manifest))
    uid = plane.kubectl("-n", ns, "get", "pod", "web", "-o", "jsonpath={.metadata.uid}").stdout
    event = tmp_path / "event.yaml"
    event.write_text(f"""apiVersion: v1
kind: Event
metadata: {{name: web.1}}
involvedObject: {{apiVersion: v1, kind: Pod, name: web, namespace: {ns}, uid: {uid}}}
reason: Pulled
message: Successfully pulled image nginx:1.27
type: Normal
source: {{component: kubelet}}
firstTimestamp: "2026-11-22T10:00:00Z"
lastTimestamp: "2026-11-22T10:00:00Z"
count: 1
""")
    plane.kubectl("-n", ns, "create", "-f", str(event))
    described = plane.kubectl("-n", ns, "describe", "pod", "web").stdout
    events = described[described.index("Events:"):].splitlines()
    assert header(events[1]) == ["Type", "Reason", "Age", "From", "Message"]
    row = events[3].split()
    assert row[:2] == ["Normal", "Pulled"] and "kubelet" in row
    assert events[3].endswith("Successfully pulled image nginx:1.27")
    listed = plane.kubectl("-n", ns, "get", "events").stdout.splitlines()
    assert header(listed[0]) == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert listed[1].split()[1:4] == ["Normal", "Pulled", "pod/web"]


def test_events_written_through_events_k8s_io_are_the_core_events_kubectl_shows(plane, ns):
    """kube-apiserver serves core/v1 and events.k8s.io/v1 Events from one storage: an Event
    a newer recorder (kube-rs, client-go's events/v1 broadcaster; here the Python client's
    EventsV1Api) writes is listed by `kubectl get events` and shown by `kubectl describe`,
    and a core/v1 one reads back through events.k8s.io/v1 with its fields renamed."""
    from kubernetes import client
    plane.kubectl("-n", ns, "create", "configmap", "settings", "--from-literal=colour=blue")
    uid = plane.kubectl("-n", ns, "get", "configmap", "settings", "-o", "jsonpath={.metadata.uid}").stdout
    events = client.EventsV1Api(plane.api())
    events.create_namespaced_event(ns, client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="settings.recorded"),
        event_time="2026-11-28T08:00:00.000000Z", action="Reconciling", reason="Rotated",
        type="Warning", note="colour rotated by the recorder",
        regarding=client.V1ObjectReference(api_version="v1", kind="ConfigMap", name="settings",
                                           namespace=ns, uid=uid),
        reporting_controller="example.com/rotator", reporting_instance="rotator-0"))
    listed = plane.kubectl("-n", ns, "get", "events").stdout.splitlines()
    row = next(line for line in listed[1:] if "Rotated" in line)
    assert row.split()[1:4] == ["Warning", "Rotated", "configmap/settings"], row
    assert row.endswith("colour rotated by the recorder")
    core = json.loads(plane.kubectl("get", "--raw", f"/api/v1/namespaces/{ns}/events/settings.recorded").stdout)
    assert core["apiVersion"] == "v1"
    assert core["involvedObject"]["uid"] == uid and core["message"] == "colour rotated by the recorder"
    assert core["reportingComponent"] == "example.com/rotator"
    described = plane.kubectl("-n", ns, "describe", "configmap", "settings").stdout
    assert "colour rotated by the recorder" in described[described.index("Events:"):], described
    selected = plane.kubectl("-n", ns, "get", "events", "--field-selector",
                             f"involvedObject.uid={uid}", "-o", "name").stdout.split()
    assert selected == ["event/settings.recorded"]

    # A core/v1 Event, read through events.k8s.io/v1 (list, get, and a field selector of that
    # version's names).
    plane.kubectl("-n", ns, "create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "settings.core"},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings", "namespace": ns},
        "reason": "Checked", "message": "checked by hand", "type": "Normal", "count": 2,
        "source": {"component": "kubectl-user"}}))
    base = f"/apis/events.k8s.io/v1/namespaces/{ns}/events"
    got = json.loads(plane.kubectl("get", "--raw", f"{base}/settings.core").stdout)
    assert got["apiVersion"] == "events.k8s.io/v1"
    assert got["note"] == "checked by hand" and got["regarding"]["name"] == "settings"
    assert got["deprecatedCount"] == 2 and got["deprecatedSource"] == {"component": "kubectl-user"}
    assert got["eventTime"] is None and "message" not in got and "involvedObject" not in got
    listed = json.loads(plane.kubectl("get", "--raw", f"{base}?fieldSelector=regarding.name%3Dsettings").stdout)
    assert sorted(e["metadata"]["name"] for e in listed["items"]) == ["settings.core", "settings.recorded"]
    refused = plane.kubectl("get", "--raw", f"{base}?fieldSelector=involvedObject.name%3Dsettings", check=False)
    assert "field label not supported: involvedObject.name" in refused.stderr, refused.stderr
    plane.kubectl("-n", ns, "delete", "events.v1.events.k8s.io", "settings.core")
    assert "settings.core" not in plane.kubectl("-n", ns, "get", "events", "-o", "name").stdout


def test_describe_other_kinds(plane, ns):
    plane.kubectl("-n", ns, "create", "configmap", "settings", "--from-literal=colour=blue")
    described = plane.kubectl("-n", ns, "describe", "configmap", "settings").stdout
    assert re.search(r"^Name:\s+settings$", described, re.M)
    assert re.search(r"^colour:\n----\nblue$", described, re.M)
    described = plane.kubectl("describe", "namespace", ns).stdout
    assert re.search(rf"^Name:\s+{ns}$", described, re.M)
    assert re.search(r"^Status:\s+Active$", described, re.M)
    plane.kubectl("-n", ns, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=2")
    described = plane.kubectl("-n", ns, "describe", "deployment", "web").stdout
    assert re.search(r"^Replicas:\s+2 desired", described, re.M)
    assert re.search(r"^StrategyType:\s+RollingUpdate$", described, re.M)
    assert re.search(r"^Selector:\s+app=web$", described, re.M)


def test_label_annotate_overwrite_and_remove(plane, ns):
    plane.kubectl("-n", ns, "create", "configmap", "c")
    assert plane.kubectl("-n", ns, "label", "configmap", "c", "tier=front").stdout.strip() == "configmap/c labeled"
    proc = plane.kubectl("-n", ns, "label", "configmap", "c", "tier=back", check=False)
    assert proc.returncode != 0 and "--overwrite is false" in proc.stderr
    plane.kubectl("-n", ns, "label", "configmap", "c", "tier=back", "--overwrite")
    plane.kubectl("-n", ns, "annotate", "configmap", "c", "note=hello")
    got = json.loads(plane.kubectl("-n", ns, "get", "configmap", "c", "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"tier": "back"}
    assert got["metadata"]["annotations"] == {"note": "hello"}
    plane.kubectl("-n", ns, "label", "configmap", "c", "tier-")
    plane.kubectl("-n", ns, "annotate", "configmap", "c", "note-")
    got = json.loads(plane.kubectl("-n", ns, "get", "configmap", "c", "-o", "json").stdout)
    assert not got["metadata"].get("labels") and not got["metadata"].get("annotations")


def test_replace_from_get_output(plane, ns, tmp_path):
    plane.kubectl("-n", ns, "create", "configmap", "r", "--from-literal=a=1")
    current = plane.kubectl("-n", ns, "get", "configmap", "r", "-o", "yaml").stdout
    manifest = tmp_path / "r.yaml"
    manifest.write_text(current.replace("a: \"1\"", "a: \"2\""))
    assert plane.kubectl("-n", ns, "replace", "-f", str(manifest)).stdout.strip() == "configmap/r replaced"
    assert plane.kubectl("-n", ns, "get", "configmap", "r", "-o", "jsonpath={.data.a}").stdout == "2"
    # The same file again carries a stale resourceVersion: a conflict.
    proc = plane.kubectl("-n", ns, "replace", "-f", str(manifest), check=False)
    assert proc.returncode != 0
    assert "the object has been modified; please apply your changes to the latest version" in proc.stderr


def test_delete_by_selector_all_and_wait(plane, ns):
    for name, tier in [("a", "x"), ("b", "x"), ("c", "y")]:
        plane.kubectl("-n", ns, "create", "configmap", name)
        plane.kubectl("-n", ns, "label", "configmap", name, f"tier={tier}")
    out = plane.kubectl("-n", ns, "delete", "configmap", "-l", "tier=x").stdout.splitlines()
    assert out == ['configmap "a" deleted', 'configmap "b" deleted']
    left = plane.kubectl("-n", ns, "get", "configmaps", "-o", "name").stdout.split()
    assert left == ["configmap/c", "configmap/kube-root-ca.crt"]
    plane.kubectl("-n", ns, "create", "configmap", "held")
    held = {"metadata": {"finalizers": ["example.com/hold"]}}
    plane.kubectl("-n", ns, "patch", "configmap", "held", "--type=merge", "-p", json.dumps(held))
    plane.kubectl("-n", ns, "delete", "configmap", "held", "--wait=false")
    proc = plane.kubectl("-n", ns, "wait", "--for=delete", "configmap/held", "--timeout=2s", check=False)
    assert proc.returncode != 0, "held by its finalizer"
    plane.kubectl("-n", ns, "patch", "configmap", "held", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    plane.kubectl("-n", ns, "wait", "--for=delete", "configmap/held", "--timeout=20s")
    plane.kubectl("-n", ns, "delete", "configmaps", "--all")
    # kube-root-ca.crt is deleted too (the namespace's publisher puts it back in a real cluster).
    left = plane.kubectl("-n", ns, "get", "configmaps", "-o", "name").stdout.split()
    assert "configmap/c" not in left


def test_get_all_uses_the_all_category(plane, ns):
    plane.kubectl("-n", ns, "create", "deployment", "web", "--image=nginx:1.27")
    plane.kubectl("-n", ns, "create", "service", "clusterip", "web", "--tcp=80:8080")
    plane.kubectl("-n", ns, "run", "solo", "--image=busybox", "--", "sleep", "1")
    plane.kubectl("-n", ns, "create", "configmap", "not-in-all")
    names = plane.kubectl("-n", ns, "get", "all", "-o", "name").stdout.split()
    assert "pod/solo" in names and "service/web" in names and "deployment.apps/web" in names
    assert not any(n.startswith("configmap/") for n in names)


def test_discovery_commands(plane):
    versions = plane.kubectl("api-versions").stdout.split()
    for gv in ["v1", "apps/v1", "rbac.authorization.k8s.io/v1", "coordination.k8s.io/v1", "policy/v1",
               "storage.k8s.io/v1", "discovery.k8s.io/v1", "events.k8s.io/v1", "apiextensions.k8s.io/v1"]:
        assert gv in versions, gv
    cluster = plane.kubectl("api-resources", "--namespaced=false", "-o", "name").stdout.split()
    assert "namespaces" in cluster and "nodes" in cluster and "pods" not in cluster
    assert "clusterroles.rbac.authorization.k8s.io" in cluster
    wide = plane.kubectl("api-resources", "-o", "wide").stdout.splitlines()
    assert header(wide[0]) == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"]
    pods = next(line for line in wide if line.split()[0] == "pods")
    assert pods.split()[-2] == "create,delete,deletecollection,get,list,patch,update,watch"
    assert pods.split()[-1] == "all"
    version = plane.kubectl("version").stdout
    assert re.search(r"^Server Version: v1\.\d+\.\d+", version, re.M), version
    assert plane.kubectl("get", "--raw", "/readyz").stdout == "ok"
    assert plane.kubectl("get", "--raw", "/livez").stdout == "ok"
    info = plane.kubectl("cluster-info").stdout
    assert f"Kubernetes control plane is running at https://127.0.0.1:{plane.port}" in info


def test_get_componentstatuses_prints_kubectls_columns_and_the_deprecation(plane):
    proc = plane.kubectl("get", "componentstatuses")
    assert "Warning: v1 ComponentStatus is deprecated in v1.19+" in proc.stderr
    rows = [l.split(None, 3) for l in proc.stdout.splitlines()]
    assert rows[0] == ["NAME", "STATUS", "MESSAGE", "ERROR"]
    assert [(r[0], r[1]) for r in rows[1:]] == [
        ("controller-manager", "Healthy"), ("etcd-0", "Healthy"), ("scheduler", "Healthy")]
    short = plane.kubectl("get", "cs", "scheduler", "-o", "jsonpath={.conditions[0].message}")
    assert short.stdout == "ok"


def test_a_node_port_or_cluster_ip_another_service_holds_is_refused(plane, ns):
    """kube-apiserver's allocators refuse a nodePort another Service holds, or one outside the
    range, and a clusterIP another Service holds, each with a 422 naming the field; ports the
    server chooses come from above the band kept for Services that name theirs."""
    plane.kubectl("-n", ns, "create", "service", "nodeport", "first", "--tcp=80:8080", "--node-port=30990")
    taken = plane.kubectl("-n", ns, "create", "service", "nodeport", "second", "--tcp=80:8080",
                          "--node-port=30990", check=False)
    assert taken.returncode != 0
    assert ('Service "second" is invalid: spec.ports[0].nodePort: Invalid value: 30990: '
            "provided port is already allocated") in taken.stderr, taken.stderr
    outside = plane.kubectl("-n", ns, "create", "service", "nodeport", "third", "--tcp=80:8080",
                            "--node-port=40000", check=False)
    assert ("spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. "
            "The range of valid ports is 30000-32767") in outside.stderr, outside.stderr
    plane.kubectl("-n", ns, "create", "service", "nodeport", "chosen", "--tcp=80:8080")
    chosen = json.loads(plane.kubectl("-n", ns, "get", "service", "chosen", "-o", "json").stdout)
    assert chosen["spec"]["ports"][0]["nodePort"] >= 30086, "not from the static band"
    ip = json.loads(plane.kubectl("-n", ns, "get", "service", "first", "-o", "json").stdout)["spec"]["clusterIP"]
    assert not ip.startswith("10.96.0."), f"{ip}: dynamic addresses come from above the static band"
    clash = plane.kubectl("-n", ns, "create", "service", "clusterip", "clash", "--tcp=80:8080",
                          f"--clusterip={ip}", check=False)
    assert (f'spec.clusterIPs: Invalid value: []string{{"{ip}"}}: failed to allocate IP {ip}: '
            "provided IP is already allocated") in clash.stderr, clash.stderr
    # The port is free again once its Service is gone.
    plane.kubectl("-n", ns, "delete", "service", "first")
    plane.kubectl("-n", ns, "create", "service", "nodeport", "second", "--tcp=80:8080", "--node-port=30990")


def test_node_port_services_get_free_node_ports_and_keep_them(plane, ns):
    """`kubectl create service nodeport` leaves nodePort to the server, which allocates one free
    in 30000-32767 per port, never one another Service holds; a replace that leaves it out
    keeps the one allocated."""
    def node_ports(name):
        svc = json.loads(plane.kubectl("-n", ns, "get", "service", name, "-o", "json").stdout)
        return [p["nodePort"] for p in svc["spec"]["ports"]]
    plane.kubectl("-n", ns, "create", "service", "nodeport", "web", "--tcp=80:8080", "--tcp=443:8443")
    plane.kubectl("-n", ns, "create", "service", "nodeport", "api", "--tcp=6443")
    web, api = node_ports("web"), node_ports("api")
    assert all(30000 <= p <= 32767 for p in web + api), (web, api)
    assert len(set(web + api)) == 3, "no port given twice"
    svc = json.loads(plane.kubectl("-n", ns, "get", "service", "web", "-o", "json").stdout)
    for p in svc["spec"]["ports"]:
        del p["nodePort"]
    plane.kubectl("-n", ns, "replace", "-f", "-", input=json.dumps(svc))
    assert node_ports("web") == web
