"""kubectl (the machine's, unmodified) against the embedded management plane."""

import json
import subprocess
import time

from conftest import wait_for

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


def test_get_watch_sees_a_change_made_meanwhile(plane, ns):
    plane.kubectl("-n", ns, "create", "configmap", "before")
    proc = subprocess.Popen(
        ["kubectl", "--kubeconfig", plane.kubeconfig, "-n", ns, "get", "configmaps", "-w",
         "--request-timeout=8s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        plane.kubectl("-n", ns, "create", "configmap", "during")
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill()
    names = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    assert "before" in names and "during" in names


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
    plane.kubectl("create", "namespace", "kc-ns")
    listed = plane.kubectl("get", "namespaces").stdout
    assert header(listed) == ["NAME", "STATUS", "AGE"]
    assert any(line.split()[:2] == ["kc-ns", "Active"] for line in listed.splitlines())
    plane.kubectl("-n", "kc-ns", "create", "configmap", "inside")
    plane.kubectl("delete", "namespace", "kc-ns", "--wait=true", "--timeout=30s")
    wait_for(lambda: plane.kubectl("get", "namespace", "kc-ns", check=False).returncode != 0)


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
