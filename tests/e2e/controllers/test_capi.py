"""Cluster API on `infrasim up`, driven as a new user would: kubectl applies the ClusterClass and
cluster templates in deploy/infrastructure-in-memory/v0.1.0 (after the usual variable substitution), waits for the
Cluster's `Available` and the Machines' `Ready`, reads the workload cluster through the
kubeconfig secret Cluster API keeps, scales, upgrades and deletes. The embedded provider and
Cluster API core stand-in do the work; nothing here talks to them but kubectl and the API.
"""

import base64
import datetime
import json
import re
import socket
import subprocess

import pytest

from conftest import BINARY, ROOT, Plane, envsubst, unique, wait_for

RELEASE = ROOT / "deploy" / "infrastructure-in-memory" / "v0.1.0"
# Short machine steps: fast tests that still walk every step on the clock.
FAST = {"VM_STARTUP": "300ms", "NODE_STARTUP": "100ms", "ETCD_STARTUP": "100ms",
        "API_SERVER_STARTUP": "100ms"}


def render(name, **variables):
    """A template of the release, with clusterctl's substitution."""
    return envsubst((RELEASE / name).read_text(), variables)


@pytest.fixture(scope="module")
def capi(tmp_path_factory):
    p = Plane(tmp_path_factory.mktemp("capi"), "--port-min", "22500", "--port-max", "22600")
    yield p
    # Stopped with its controllers busy, the plane exits cleanly: no panic on the way out.
    code = p.stop()
    log = p.log_path.read_text(errors="replace")
    assert "panicked" not in log, log[log.find("panicked") - 200:][:2000]
    assert code == 0, p.log_tail()


def apply(plane, ns, text):
    plane.kubectl("-n", ns, "apply", "--server-side", "-f", "-", input=text)


def workload(plane, ns, cluster, tmp_path, *args):
    """kubectl against the workload cluster, with the kubeconfig from `<cluster>-kubeconfig`."""
    path = tmp_path / f"{cluster}.kubeconfig"
    secret = json.loads(plane.kubectl("-n", ns, "get", "secret", f"{cluster}-kubeconfig", "-o", "json").stdout)
    path.write_bytes(base64.b64decode(secret["data"]["value"]))
    return subprocess.run(["kubectl", "--kubeconfig", str(path), *args], capture_output=True, text=True, timeout=30)


def nodes(plane, ns, cluster, tmp_path):
    out = workload(plane, ns, cluster, tmp_path, "get", "nodes", "-o", "json")
    if out.returncode != 0:
        return []
    return json.loads(out.stdout)["items"]


def ready_nodes(plane, ns, cluster, tmp_path, count, version):
    def check():
        items = nodes(plane, ns, cluster, tmp_path)
        ok = [n for n in items
              if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
              and n["status"]["nodeInfo"]["kubeletVersion"] == version]
        return items if len(items) == count and len(ok) == count else None
    return wait_for(check, timeout=120, interval=0.3, what=f"{count} Ready nodes at {version}")


def wait_available(plane, ns, cluster):
    plane.kubectl("-n", ns, "wait", "--for=condition=Available", f"cluster/{cluster}", "--timeout=120s", timeout=130)


def condition(obj, ty):
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == ty), {})


def test_a_cluster_class_cluster_comes_up_scales_upgrades_and_goes(capi, tmp_path):
    ns = unique("capi")
    capi.kubectl("create", "namespace", ns)
    apply(capi, ns, render("clusterclass-in-memory.yaml", **FAST))
    apply(capi, ns, render("cluster-template-in-memory.yaml", CLUSTER_NAME="c1", NAMESPACE=ns,
                           CONTROL_PLANE_MACHINE_COUNT=3, WORKER_MACHINE_COUNT=2,
                           KUBERNETES_VERSION="v1.31.2"))
    wait_available(capi, ns, "c1")
    capi.kubectl("-n", ns, "wait", "--for=condition=Ready", "machines", "-l",
                 "cluster.x-k8s.io/cluster-name=c1", "--timeout=60s", timeout=70)
    items = ready_nodes(capi, ns, "c1", tmp_path, 5, "v1.31.2")
    assert all(n["spec"]["providerID"] == f"in-memory://{n['metadata']['name']}" for n in items)
    control_planes = [n for n in items if "node-role.kubernetes.io/control-plane" in n["metadata"]["labels"]]
    assert len(control_planes) == 3

    # The columns upstream prints, and the topology's objects.
    header = capi.kubectl("-n", ns, "get", "kcp").stdout.splitlines()[0].split()
    assert header == ["NAME", "CLUSTER", "AVAILABLE", "DESIRED", "CURRENT", "READY", "AVAILABLE",
                      "UP-TO-DATE", "INITIALIZED", "AGE", "VERSION"]
    header = capi.kubectl("-n", ns, "get", "devmachines").stdout.splitlines()[0].split()
    assert header == ["NAME", "CLUSTER", "FAILURE", "DOMAIN", "PROVISIONED", "AGE"]
    cluster = json.loads(capi.kubectl("-n", ns, "get", "cluster", "c1", "-o", "json").stdout)
    assert cluster["status"]["phase"] == "Provisioned"
    for ty in ["InfrastructureReady", "ControlPlaneInitialized", "ControlPlaneAvailable",
               "WorkersAvailable", "TopologyReconciled", "RemoteConnectionProbe"]:
        assert condition(cluster, ty).get("status") == "True", (ty, condition(cluster, ty))
    endpoint = cluster["spec"]["controlPlaneEndpoint"]
    assert endpoint["host"] == "127.0.0.1" and 22500 <= endpoint["port"] <= 22600
    secrets = capi.kubectl("-n", ns, "get", "secrets", "-o", "name").stdout.split()
    for purpose in ["ca", "etcd", "proxy", "sa", "kubeconfig"]:
        assert f"secret/c1-{purpose}" in secrets

    # Scale the workers through the topology.
    def topology(workers, version):
        return json.dumps({"spec": {"topology": {"version": version,
            "workers": {"machineDeployments": [{"class": "default-worker", "name": "md-0", "replicas": workers}]}}}})
    capi.kubectl("-n", ns, "patch", "cluster", "c1", "--type=merge", "-p", topology(3, "v1.31.2"))
    ready_nodes(capi, ns, "c1", tmp_path, 6, "v1.31.2")

    # A version bump rolls the control plane, one machine at a time, then the workers.
    capi.kubectl("-n", ns, "patch", "cluster", "c1", "--type=merge", "-p", topology(3, "v1.32.0"))
    ready_nodes(capi, ns, "c1", tmp_path, 6, "v1.32.0")
    wait_available(capi, ns, "c1")

    # Deleting the Cluster removes every object and closes the endpoint.
    capi.kubectl("-n", ns, "delete", "cluster", "c1", "--timeout=120s", timeout=130)
    for kind in ["machines", "kcp", "machinedeployments", "devclusters", "devmachines", "kubeadmconfigs"]:
        assert capi.kubectl("-n", ns, "get", kind, "-o", "name").stdout.strip() == "", kind
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", endpoint["port"]), timeout=2).close()


def test_kubectl_wait_available_returns_once_the_workers_are_up(capi, tmp_path):
    """With the class's own step timings (seconds, as upstream's in-memory class has), a Cluster
    is Available only once the MachineDeployment its topology declares exists with its replicas
    ready: `kubectl wait --for=condition=Available` never returns before the workers."""
    ns = unique("avail")
    capi.kubectl("create", "namespace", ns)
    apply(capi, ns, render("clusterclass-in-memory.yaml"))
    apply(capi, ns, render("cluster-template-in-memory.yaml", CLUSTER_NAME="w1", NAMESPACE=ns,
                           CONTROL_PLANE_MACHINE_COUNT=1, WORKER_MACHINE_COUNT=1))

    # The topology makes the MachineDeployment with the control plane, long before that is
    # initialized (its first machine takes seconds), as Cluster API's topology controller does.
    def made():
        return capi.kubectl("-n", ns, "get", "machinedeployments", "-l",
                            "cluster.x-k8s.io/cluster-name=w1", "-o", "name").stdout.split() or None
    wait_for(made, timeout=30, interval=0.2, what="the MachineDeployment of w1")
    cluster = json.loads(capi.kubectl("-n", ns, "get", "cluster", "w1", "-o", "json").stdout)
    assert condition(cluster, "ControlPlaneInitialized").get("status") != "True", cluster["status"]
    assert condition(cluster, "Available").get("status") != "True", cluster["status"]

    wait_available(capi, ns, "w1")
    mds = json.loads(capi.kubectl("-n", ns, "get", "machinedeployments", "-l",
                                  "cluster.x-k8s.io/cluster-name=w1", "-o", "json").stdout)["items"]
    assert len(mds) == 1, mds
    status = mds[0].get("status", {})
    assert (status.get("readyReplicas"), status.get("availableReplicas")) == (1, 1), status
    assert condition(mds[0], "Available").get("status") == "True", status
    cluster = json.loads(capi.kubectl("-n", ns, "get", "cluster", "w1", "-o", "json").stdout)
    assert condition(cluster, "WorkersAvailable").get("reason") == "Available", cluster["status"]
    assert condition(cluster, "TopologyReconciled").get("reason") == "ReconcileSucceeded"
    capi.kubectl("-n", ns, "delete", "cluster", "w1", "--timeout=120s", timeout=130)


# What the test adds to Cluster API's in-memory ClusterClass: three variables and four inline
# patches (a Go template over a variable and builtins, a variable and builtins read by path,
# a patch only a MachineDeployment's override enables, one a cluster variable turns on and
# off, one that cannot apply).
CLASS_PATCH = [
    {"op": "add", "path": "/spec/variables", "value": [
        {"name": "banner", "required": True, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"text": {"type": "string", "maxLength": 12}}}}},
        {"name": "workerFiles", "required": False, "schema": {"openAPIV3Schema": {
            "type": "boolean", "default": False}}},
        {"name": "audit", "required": False, "schema": {"openAPIV3Schema": {
            "type": "boolean", "default": False}}}]},
    {"op": "add", "path": "/spec/patches", "value": [
        {"name": "banner", "definitions": [
            {"selector": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                          "kind": "KubeadmControlPlaneTemplate",
                          "matchResources": {"controlPlane": True}},
             "jsonPatches": [{"op": "add", "path": "/spec/template/spec/kubeadmConfigSpec/files",
                              "valueFrom": {"template": "- path: /etc/banner\n  content: "
                                  "{{ printf \"%s on %s at %s\" .banner.text .builtin.cluster.name "
                                  ".builtin.controlPlane.version | quote }}"}}]},
            {"selector": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                          "kind": "KubeadmConfigTemplate",
                          "matchResources": {"machineDeploymentClass": {"names": ["default-*"]}}},
             "jsonPatches": [{"op": "add", "path": "/spec/template/spec/postKubeadmCommands",
                              "valueFrom": {"template": "- echo {{ .builtin.machineDeployment.topologyName }} "
                                                        "{{ .builtin.machineDeployment.replicas }}"}},
                             {"op": "add", "path": "/spec/template/spec/preKubeadmCommands",
                              "valueFrom": {"template": "[{{ .banner.text | quote }}]"}}]}]},
        {"name": "workerFiles", "enabledIf": "{{ .workerFiles }}", "definitions": [
            {"selector": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                          "kind": "KubeadmConfigTemplate",
                          "matchResources": {"machineDeploymentClass": {"names": ["default-worker"]}}},
             "jsonPatches": [{"op": "add", "path": "/spec/template/spec/files",
                              "value": [{"path": "/etc/worker", "content": "w"}]}]}]},
        {"name": "audit", "enabledIf": "{{ .audit }}", "definitions": [
            {"selector": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                          "kind": "KubeadmControlPlaneTemplate",
                          "matchResources": {"controlPlane": True}},
             "jsonPatches": [{"op": "add", "path": "/spec/template/spec/kubeadmConfigSpec/preKubeadmCommands",
                              "value": ["echo audit"]}]}]},
        {"name": "broken", "enabledIf": "{{ eq .banner.text \"break\" }}", "definitions": [
            {"selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                          "kind": "DevClusterTemplate",
                          "matchResources": {"infrastructureCluster": True}},
             "jsonPatches": [{"op": "replace", "path": "/spec/template/spec/nothing/here",
                              "value": 1}]}]}]},
]


def patched_cluster(name, text, **extra):
    md = [{"class": "default-worker", "name": "md-0", "replicas": 1},
          {"class": "default-worker", "name": "md-1", "replicas": 2,
           "variables": {"overrides": [{"name": "workerFiles", "value": True}]}}]
    return json.dumps({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                       "metadata": {"name": name},
                       "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
                                "topology": {"classRef": {"name": "in-memory"}, "version": "v1.31.2",
                                             "controlPlane": {"replicas": 1},
                                             "workers": {"machineDeployments": md},
                                             "variables": [{"name": "banner", "value": {"text": text}}],
                                             **extra}}})


def test_a_cluster_class_patch_shapes_the_objects_its_variables_say(capi, tmp_path):
    ns = unique("patch")
    capi.kubectl("create", "namespace", ns)
    apply(capi, ns, render("clusterclass-in-memory.yaml", **FAST))
    capi.kubectl("-n", ns, "patch", "clusterclass", "in-memory", "--type=json",
                 "-p", json.dumps(CLASS_PATCH))

    # The class's controller lists the variables it defines, as Cluster API's does.
    def variables_ready():
        cc = json.loads(capi.kubectl("-n", ns, "get", "clusterclass", "in-memory", "-o", "json").stdout)
        ok = condition(cc, "VariablesReady").get("status") == "True" and \
            cc["status"].get("observedGeneration") == cc["metadata"]["generation"]
        return cc if ok else None
    cc = wait_for(variables_ready, timeout=30, what="VariablesReady")
    assert [v["name"] for v in cc["status"]["variables"]] == ["audit", "banner", "workerFiles"]
    assert cc["status"]["variables"][0]["definitions"][0]["from"] == "inline"
    # A v1beta1 reader sees the condition under its v1beta1 name.
    old = json.loads(capi.kubectl("-n", ns, "get", "clusterclasses.v1beta1.cluster.x-k8s.io",
                                  "in-memory", "-o", "json").stdout)
    assert condition(old, "VariablesReconciled").get("status") == "True", old["status"]

    # A value its schema refuses is refused with the reason.
    refused = capi.kubectl("-n", ns, "apply", "-f", "-", input=patched_cluster("toolong", "x" * 13),
                           check=False)
    assert refused.returncode != 0
    assert "spec.topology.variables[banner].value.text" in refused.stderr, refused.stderr
    assert "12" in refused.stderr, refused.stderr

    capi.kubectl("-n", ns, "apply", "-f", "-", input=patched_cluster("p1", "hello"))
    wait_available(capi, ns, "p1")
    kcp = json.loads(capi.kubectl("-n", ns, "get", "kcp", "-l", "cluster.x-k8s.io/cluster-name=p1",
                                  "-o", "json").stdout)["items"][0]
    assert kcp["spec"]["kubeadmConfigSpec"]["files"] == [
        {"path": "/etc/banner", "content": "hello on p1 at v1.31.2"}]
    # Each MachineDeployment's bootstrap template got its own builtins; only md-1's
    # override enabled the files.
    mds = json.loads(capi.kubectl("-n", ns, "get", "machinedeployments", "-l",
                                  "cluster.x-k8s.io/cluster-name=p1", "-o", "json").stdout)["items"]
    assert len(mds) == 2
    for md in mds:
        topology_name = md["metadata"]["labels"]["topology.cluster.x-k8s.io/deployment-name"]
        ref = md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"]
        template = json.loads(capi.kubectl("-n", ns, "get", "kubeadmconfigtemplate", ref,
                                           "-o", "json").stdout)["spec"]["template"]["spec"]
        replicas = md["spec"]["replicas"]
        assert template["postKubeadmCommands"] == [f"echo {topology_name} {replicas}"], template
        assert template["preKubeadmCommands"] == ["hello"]
        assert ("files" in template) == (topology_name == "md-1"), template
        # And the Machines' KubeadmConfigs carry it into their bootstrap data.
        configs = json.loads(capi.kubectl("-n", ns, "get", "kubeadmconfigs", "-l",
                                          f"cluster.x-k8s.io/deployment-name={md['metadata']['name']}",
                                          "-o", "json").stdout)["items"]
        assert len(configs) == replicas
        assert all(c["spec"]["postKubeadmCommands"] == template["postKubeadmCommands"] for c in configs)

    # A variable changed later reaches what was made: the control plane's spec in place (its
    # machine rolls, its KubeadmConfig outdated), and the workers through new bootstrap
    # templates, to which their machines roll.
    old_refs = {md["metadata"]["name"]: md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"]
                for md in mds}
    capi.kubectl("-n", ns, "patch", "cluster", "p1", "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/topology/variables/0/value/text", "value": "bonjour"}]))

    def rolled():
        kcp = json.loads(capi.kubectl("-n", ns, "get", "kcp", "-l", "cluster.x-k8s.io/cluster-name=p1",
                                      "-o", "json").stdout)["items"][0]
        files = kcp["spec"]["kubeadmConfigSpec"]["files"]
        configs = json.loads(capi.kubectl("-n", ns, "get", "kubeadmconfigs", "-l",
                                          "cluster.x-k8s.io/cluster-name=p1", "-o", "json").stdout)["items"]
        workers = [c for c in configs if "cluster.x-k8s.io/control-plane" not in c["metadata"]["labels"]]
        control_plane = [c for c in configs if "cluster.x-k8s.io/control-plane" in c["metadata"]["labels"]]
        banner = [{"path": "/etc/banner", "content": "bonjour on p1 at v1.31.2"}]
        done = files == banner and len(workers) == 3 and all(
            c["spec"].get("preKubeadmCommands") == ["bonjour"] for c in workers) and \
            len(control_plane) == 1 and control_plane[0]["spec"].get("files") == banner
        return done or None
    wait_for(rolled, timeout=120, what="the new banner rolled out")
    mds = json.loads(capi.kubectl("-n", ns, "get", "machinedeployments", "-l",
                                  "cluster.x-k8s.io/cluster-name=p1", "-o", "json").stdout)["items"]
    for md in mds:
        new_ref = md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"]
        assert new_ref != old_refs[md["metadata"]["name"]], md["spec"]["template"]["spec"]
    wait_available(capi, ns, "p1")

    # A patch turned on sets its field in the control plane; turned off, the field goes
    # (the topology owns what it set, as with Cluster API's server-side apply), and what
    # others set in the spec stays.
    def kcp_spec():
        return json.loads(capi.kubectl("-n", ns, "get", "kcp", "-l", "cluster.x-k8s.io/cluster-name=p1",
                                       "-o", "json").stdout)["items"][0]["spec"]
    def audit(on):
        # The defaulting webhook gave the Cluster the variable with its default (false).
        cluster = json.loads(capi.kubectl("-n", ns, "get", "cluster", "p1", "-o", "json").stdout)
        names = [v["name"] for v in cluster["spec"]["topology"]["variables"]]
        capi.kubectl("-n", ns, "patch", "cluster", "p1", "--type=json", "-p", json.dumps(
            [{"op": "replace", "path": f"/spec/topology/variables/{names.index('audit')}/value",
              "value": on}]))
    audit(True)
    wait_for(lambda: kcp_spec()["kubeadmConfigSpec"].get("preKubeadmCommands") == ["echo audit"],
             timeout=60, what="the audit command set")
    audit(False)
    wait_for(lambda: "preKubeadmCommands" not in kcp_spec()["kubeadmConfigSpec"],
             timeout=60, what="the audit command gone")
    spec = kcp_spec()
    assert spec["kubeadmConfigSpec"]["files"] == [{"path": "/etc/banner", "content": "bonjour on p1 at v1.31.2"}]
    assert spec["version"] == "v1.31.2" and spec["replicas"] == 1
    # The same for a template: md-1's override taken away, its bootstrap template is replaced
    # by a copy without the files the patch no longer sets.
    cluster = json.loads(capi.kubectl("-n", ns, "get", "cluster", "p1", "-o", "json").stdout)
    names = [m["name"] for m in cluster["spec"]["topology"]["workers"]["machineDeployments"]]
    capi.kubectl("-n", ns, "patch", "cluster", "p1", "--type=json", "-p", json.dumps(
        [{"op": "remove", "path": f"/spec/topology/workers/machineDeployments/{names.index('md-1')}/variables"}]))

    def md1_template():
        md = next(m for m in json.loads(capi.kubectl(
            "-n", ns, "get", "machinedeployments", "-l", "topology.cluster.x-k8s.io/deployment-name=md-1",
            "-o", "json").stdout)["items"])
        ref = md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"]
        return json.loads(capi.kubectl("-n", ns, "get", "kubeadmconfigtemplate", ref,
                                       "-o", "json").stdout)["spec"]["template"]["spec"]
    template = wait_for(lambda: (lambda t: t if "files" not in t else None)(md1_template()),
                        timeout=60, what="md-1's template without the files")
    assert template["preKubeadmCommands"] == ["bonjour"]
    wait_available(capi, ns, "p1")

    # A patch that cannot apply stops the topology with upstream's words; nothing is made.
    capi.kubectl("-n", ns, "apply", "-f", "-", input=patched_cluster("p2", "break"))
    def failed():
        c = json.loads(capi.kubectl("-n", ns, "get", "cluster", "p2", "-o", "json").stdout)
        t = condition(c, "TopologyReconciled")
        return t if t.get("status") == "False" else None
    reason = wait_for(failed, timeout=30, what="TopologyReconciled False")
    assert reason["reason"] == "ReconcileFailed"
    assert 'failed to apply patches for patch "broken"' in reason["message"], reason
    for kind in ["kcp", "devclusters", "machinedeployments"]:
        assert capi.kubectl("-n", ns, "get", kind, "-l", "cluster.x-k8s.io/cluster-name=p2",
                            "-o", "name").stdout.strip() == "", kind

    for name in ["p1", "p2"]:
        capi.kubectl("-n", ns, "delete", "cluster", name, "--timeout=120s", timeout=130)


V1BETA1_CLUSTER = """
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata:
  name: old
spec:
  clusterNetwork:
    pods:
      cidrBlocks: ["192.168.0.0/16"]
    serviceDomain: cluster.local
  topology:
    class: in-memory
    version: v1.31.2
    controlPlane:
      replicas: 1
      nodeDrainTimeout: 5m
    workers:
      machineDeployments:
      - class: default-worker
        name: md-0
        replicas: 1
        strategy:
          type: RollingUpdate
          rollingUpdate:
            maxSurge: 1
            deletePolicy: Oldest
"""


def test_a_v1beta1_cluster_works_beside_v1beta2(capi, tmp_path):
    """Cluster API YAML of v1beta1 applies unchanged; the controllers (v1beta2) bring it up;
    kubectl and the Python client read it, list it and watch it in either version, each in
    its own shape, converted through the conversion webhook path in the plane's process."""
    from kubernetes import client as k8s
    ns = unique("v1b1")
    capi.kubectl("create", "namespace", ns)
    apply(capi, ns, render("clusterclass-in-memory.yaml", **FAST))
    applied = capi.kubectl("-n", ns, "apply", "--server-side", "-f", "-", input=V1BETA1_CLUSTER)
    assert "cluster.x-k8s.io/v1beta1 Cluster is deprecated; use cluster.x-k8s.io/v1beta2 Cluster" in applied.stderr
    wait_available(capi, ns, "old")
    ready_nodes(capi, ns, "old", tmp_path, 2, "v1.31.2")

    # Stored and served in v1beta2 by default: the class is a reference, readiness the
    # initialization flags, the topology's v1beta1 fields in their v1beta2 places.
    hub = json.loads(capi.kubectl("-n", ns, "get", "clusters.v1beta2.cluster.x-k8s.io", "old", "-o", "json").stdout)
    topology = hub["spec"]["topology"]
    assert topology["classRef"] == {"name": "in-memory"} and "class" not in topology
    assert topology["controlPlane"]["deletion"] == {"nodeDrainTimeoutSeconds": 300}
    md = topology["workers"]["machineDeployments"][0]
    assert md["rollout"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}
    assert md["deletion"] == {"order": "Oldest"}
    assert hub["status"]["initialization"] == {"infrastructureProvisioned": True, "controlPlaneInitialized": True}

    # Read in v1beta1 by kubectl: v1beta1's shape, columns and references.
    got = capi.kubectl("-n", ns, "get", "clusters.v1beta1.cluster.x-k8s.io", "old", "-o", "json")
    assert "is deprecated" in got.stderr
    old = json.loads(got.stdout)
    assert old["apiVersion"] == "cluster.x-k8s.io/v1beta1"
    assert old["metadata"]["uid"] == hub["metadata"]["uid"]
    assert old["metadata"]["resourceVersion"] == hub["metadata"]["resourceVersion"]
    topology = old["spec"]["topology"]
    assert topology["class"] == "in-memory" and "classRef" not in topology
    assert topology["controlPlane"]["nodeDrainTimeout"] == "5m0s"
    assert topology["workers"]["machineDeployments"][0]["strategy"]["rollingUpdate"] == \
        {"maxSurge": 1, "deletePolicy": "Oldest"}
    for ref, group in [("infrastructureRef", "infrastructure.cluster.x-k8s.io"),
                       ("controlPlaneRef", "controlplane.cluster.x-k8s.io")]:
        assert old["spec"][ref]["apiVersion"] == group + "/v1beta2", old["spec"][ref]
        assert old["spec"][ref]["namespace"] == ns
        assert old["spec"][ref]["name"] == hub["spec"][ref]["name"]
    status = old["status"]
    assert status["infrastructureReady"] is True and status["controlPlaneReady"] is True
    assert status["phase"] == "Provisioned"
    assert condition({"status": status["v1beta2"]}, "Available")["status"] == "True"
    assert status["v1beta2"]["controlPlane"]["readyReplicas"] == 1
    assert "initialization" not in status and "deprecated" not in status
    header = capi.kubectl("-n", ns, "get", "clusters.v1beta1.cluster.x-k8s.io").stdout.splitlines()[0].split()
    assert header == ["NAME", "CLUSTERCLASS", "PHASE", "AGE", "VERSION"]

    # Its Machines and MachineDeployment in v1beta1: v1beta1's references, flags and counters.
    mds = json.loads(capi.kubectl("-n", ns, "get", "machinedeployments.v1beta1.cluster.x-k8s.io", "-o", "json").stdout)
    md = mds["items"][0]
    assert md["apiVersion"] == "cluster.x-k8s.io/v1beta1"
    template = md["spec"]["template"]["spec"]
    assert template["infrastructureRef"]["apiVersion"] == "infrastructure.cluster.x-k8s.io/v1beta2"
    assert template["bootstrap"]["configRef"]["apiVersion"] == "bootstrap.cluster.x-k8s.io/v1beta2"
    assert md["spec"]["strategy"]["rollingUpdate"]["deletePolicy"] == "Oldest"
    assert {k: md["status"][k] for k in ["replicas", "readyReplicas", "availableReplicas",
                                          "updatedReplicas", "unavailableReplicas"]} == \
        {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1, "unavailableReplicas": 0}
    assert md["status"]["v1beta2"]["upToDateReplicas"] == 1
    table = capi.kubectl("-n", ns, "get", "machinedeployments.v1beta1.cluster.x-k8s.io").stdout.splitlines()
    assert table[0].split() == ["NAME", "CLUSTER", "REPLICAS", "READY", "UPDATED", "UNAVAILABLE", "PHASE", "AGE",
                                "VERSION"]
    assert table[1].split()[1:6] == ["old", "1", "1", "1", "0"]
    machines = json.loads(capi.kubectl("-n", ns, "get", "machines.v1beta1.cluster.x-k8s.io", "-o", "json").stdout)
    assert len(machines["items"]) == 2
    for m in machines["items"]:
        assert m["status"]["nodeRef"]["kind"] == "Node" and m["status"]["nodeRef"]["apiVersion"] == "v1"
        assert m["status"]["bootstrapReady"] is True and m["status"]["infrastructureReady"] is True
        assert m["spec"]["infrastructureRef"]["namespace"] == ns
    sets = json.loads(capi.kubectl("-n", ns, "get", "machinesets.v1beta1.cluster.x-k8s.io", "-o", "json").stdout)
    assert sets["items"][0]["status"]["fullyLabeledReplicas"] == 1

    # The Python client lists and watches in v1beta1; a v1beta1 patch is stored for v1beta2.
    custom = k8s.CustomObjectsApi(capi.api())
    listed = custom.list_namespaced_custom_object("cluster.x-k8s.io", "v1beta1", ns, "clusters")
    assert [c["spec"]["topology"]["class"] for c in listed["items"]] == ["in-memory"]
    rv = listed["metadata"]["resourceVersion"]
    custom.patch_namespaced_custom_object(
        "cluster.x-k8s.io", "v1beta1", ns, "clusters", "old",
        {"spec": {"topology": {"workers": {"machineDeployments": [
            {"class": "default-worker", "name": "md-0", "replicas": 2}]}}}})
    events = capi.watch_events(f"/apis/cluster.x-k8s.io/v1beta1/namespaces/{ns}/clusters",
                               {"resourceVersion": rv}, count=1)
    assert events[0]["type"] == "MODIFIED"
    assert events[0]["object"]["apiVersion"] == "cluster.x-k8s.io/v1beta1"
    assert events[0]["object"]["spec"]["topology"]["class"] == "in-memory"
    ready_nodes(capi, ns, "old", tmp_path, 3, "v1.31.2")
    hub = json.loads(capi.kubectl("-n", ns, "get", "cluster", "old", "-o", "json").stdout)
    assert hub["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"] == 2
    assert hub["spec"]["topology"]["classRef"] == {"name": "in-memory"}

    # A v1beta1 MachineHealthCheck is checked by the stand-in, which reads v1beta2.
    capi.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineHealthCheck",
        "metadata": {"name": "old-nodes"},
        "spec": {"clusterName": "old", "selector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": "old"}},
                 "maxUnhealthy": "100%", "nodeStartupTimeout": "10m",
                 "unhealthyConditions": [{"type": "Ready", "status": "Unknown", "timeout": "5m"}]}}))
    mhc = json.loads(capi.kubectl("-n", ns, "get", "machinehealthchecks.v1beta2.cluster.x-k8s.io", "old-nodes",
                                  "-o", "json").stdout)
    assert mhc["spec"]["checks"]["nodeStartupTimeoutSeconds"] == 600
    assert mhc["spec"]["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"] == "100%"

    def checked():
        out = capi.kubectl("-n", ns, "get", "machinehealthchecks.v1beta1.cluster.x-k8s.io", "old-nodes",
                           "-o", "json").stdout
        status = json.loads(out).get("status", {})
        return status if status.get("expectedMachines") == 3 and status.get("currentHealthy") == 3 else None
    status = wait_for(checked, timeout=30, interval=0.3, what="the v1beta1 health check's counts")
    assert condition({"status": status["v1beta2"]}, "RemediationAllowed").get("status") == "True"
    # ...and the v1beta1 condition upstream still writes, in v1beta1's own place.
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("RemediationAllowed", "True")]
    capi.kubectl("-n", ns, "delete", "clusters.v1beta1.cluster.x-k8s.io", "old", "--timeout=120s", timeout=130)


def test_a_v1beta1_cluster_class_and_its_templates_apply_unchanged(capi, tmp_path):
    """A whole v1beta1 ClusterClass (with v1beta1 kubeadm and Dev templates, as Cluster API
    v1.10 and earlier publish them) and a v1beta1 Cluster of it apply unchanged and come up;
    the kubeadm kinds read in either version in their own shapes, and a v1beta1 client's
    round trip keeps what only v1beta2 can hold (the conversion-data annotation)."""
    from kubernetes import client as k8s
    ns = unique("v1b1cc")
    capi.kubectl("create", "namespace", ns)
    applied = capi.kubectl("-n", ns, "apply", "--server-side", "-f", "-",
                           input=render("clusterclass-in-memory-v1beta1.yaml", **FAST))
    for kind in ["controlplane.cluster.x-k8s.io/v1beta1 KubeadmControlPlaneTemplate",
                 "bootstrap.cluster.x-k8s.io/v1beta1 KubeadmConfigTemplate",
                 "infrastructure.cluster.x-k8s.io/v1beta1 DevMachineTemplate",
                 "cluster.x-k8s.io/v1beta1 ClusterClass"]:
        assert f"{kind} is deprecated" in applied.stderr, applied.stderr
    apply(capi, ns, render("cluster-template-in-memory-v1beta1.yaml", CLUSTER_NAME="v1b1", NAMESPACE=ns,
                           WORKER_MACHINE_COUNT=2))
    wait_available(capi, ns, "v1b1")
    ready_nodes(capi, ns, "v1b1", tmp_path, 3, "v1.31.2")
    # What a v1beta1-era script waits on: the v1beta1 Ready conditions upstream still writes.
    for resource in ["clusters.v1beta1.cluster.x-k8s.io/v1b1",
                     "kubeadmcontrolplanes.v1beta1.controlplane.cluster.x-k8s.io",
                     "machinedeployments.v1beta1.cluster.x-k8s.io", "machines.v1beta1.cluster.x-k8s.io",
                     "kubeadmconfigs.v1beta1.bootstrap.cluster.x-k8s.io"]:
        target = [resource] if "/" in resource else [resource, "--all"]
        capi.kubectl("-n", ns, "wait", "--for=condition=Ready", *target, "--timeout=60s", timeout=70)
    old_cluster = json.loads(capi.kubectl("-n", ns, "get", "clusters.v1beta1.cluster.x-k8s.io", "v1b1",
                                          "-o", "json").stdout)
    assert {c["type"]: c["status"] for c in old_cluster["status"]["conditions"]} == {
        "Ready": "True", "InfrastructureReady": "True", "ControlPlaneInitialized": "True",
        "ControlPlaneReady": "True", "TopologyReconciled": "True"}
    assert old_cluster["status"]["conditions"][0]["type"] == "Ready"

    # The class is stored in v1beta2's shape, its references as written (v1beta1).
    cc = json.loads(capi.kubectl("-n", ns, "get", "clusterclasses.v1beta2.cluster.x-k8s.io",
                                 "in-memory-v1beta1", "-o", "json").stdout)["spec"]
    assert cc["controlPlane"]["templateRef"] == {
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlaneTemplate",
        "name": "in-memory-v1beta1-control-plane"}
    assert cc["controlPlane"]["healthCheck"]["checks"]["unhealthyNodeConditions"][0]["timeoutSeconds"] == 300
    worker = cc["workers"]["machineDeployments"][0]
    assert worker["bootstrap"]["templateRef"]["kind"] == "KubeadmConfigTemplate"
    assert worker["deletion"] == {"order": "Oldest"} and "template" not in worker
    # ...and read back in v1beta1 as it was applied (durations as Go prints them).
    old_cc = json.loads(capi.kubectl("-n", ns, "get", "clusterclasses.v1beta1.cluster.x-k8s.io",
                                     "in-memory-v1beta1", "-o", "json").stdout)
    assert old_cc["spec"]["controlPlane"]["ref"]["namespace"] == ns
    assert old_cc["spec"]["workers"]["machineDeployments"][0]["template"]["infrastructure"]["ref"]["name"] == \
        "in-memory-v1beta1-worker"
    assert old_cc["spec"]["controlPlane"]["machineHealthCheck"]["unhealthyConditions"][0]["timeout"] == "5m0s"

    # The control plane the topology made, in v1beta2: the template's v1beta1 kubeadm spec in
    # v1beta2's shapes.
    cp_name = json.loads(capi.kubectl("-n", ns, "get", "cluster", "v1b1", "-o", "json").stdout)[
        "spec"]["controlPlaneRef"]["name"]
    kcp = json.loads(capi.kubectl("-n", ns, "get", "kubeadmcontrolplanes.v1beta2.controlplane.cluster.x-k8s.io",
                                  cp_name, "-o", "json").stdout)
    spec = kcp["spec"]["kubeadmConfigSpec"]
    assert spec["clusterConfiguration"]["apiServer"]["extraArgs"] == [{"name": "audit-log-maxage", "value": "30"}]
    assert spec["initConfiguration"]["timeouts"] == {"controlPlaneComponentHealthCheckSeconds": 240}
    assert "timeoutForControlPlane" not in spec["clusterConfiguration"]["apiServer"]
    assert kcp["spec"]["rollout"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}

    # In v1beta1: v1beta1's shapes, flags, counters and columns.
    got = capi.kubectl("-n", ns, "get", "kubeadmcontrolplanes.v1beta1.controlplane.cluster.x-k8s.io",
                       cp_name, "-o", "json")
    assert "controlplane.cluster.x-k8s.io/v1beta1 KubeadmControlPlane is deprecated" in got.stderr
    old = json.loads(got.stdout)
    template = old["spec"]["machineTemplate"]
    assert template["infrastructureRef"]["apiVersion"] == "infrastructure.cluster.x-k8s.io/v1beta2"
    assert template["infrastructureRef"]["namespace"] == ns and "spec" not in template
    cluster_configuration = old["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]
    assert cluster_configuration["apiServer"]["extraArgs"] == {"audit-log-maxage": "30"}
    assert cluster_configuration["apiServer"]["timeoutForControlPlane"] == "4m0s"
    assert old["spec"]["rolloutStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}
    status = old["status"]
    assert status["initialized"] is True and status["ready"] is True
    assert status["replicas"] == 1 and status["v1beta2"]["upToDateReplicas"] == 1
    header = capi.kubectl("-n", ns, "get", "kubeadmcontrolplanes.v1beta1.controlplane.cluster.x-k8s.io") \
        .stdout.splitlines()[0]
    assert re.split(r"\s{2,}", header.strip()) == ["NAME", "CLUSTER", "INITIALIZED", "API SERVER AVAILABLE",
                                                    "REPLICAS", "READY", "UPDATED", "UNAVAILABLE", "AGE", "VERSION"]

    # The workers' KubeadmConfigs and DevMachines in v1beta1.
    configs = json.loads(capi.kubectl("-n", ns, "get", "kubeadmconfigs.v1beta1.bootstrap.cluster.x-k8s.io",
                                      "-o", "json").stdout)["items"]
    assert len(configs) == 3 and all(c["status"]["ready"] is True for c in configs)
    joins = [c for c in configs if "initConfiguration" not in c["spec"]]
    assert joins and all(c["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"] ==
                         {"eviction-hard": "nodefs.available<0%,imagefs.available<0%"} for c in joins)
    dev = json.loads(capi.kubectl("-n", ns, "get", "devmachines.v1beta1.infrastructure.cluster.x-k8s.io",
                                  "-o", "json").stdout)["items"]
    assert len(dev) == 3 and all(d["status"]["ready"] is True for d in dev)
    assert all("initialization" not in d["status"] for d in dev)

    # A field only v1beta2 has survives a v1beta1 client's read-modify-write.
    capi.kubectl("-n", ns, "patch", "kubeadmcontrolplanes.v1beta2.controlplane.cluster.x-k8s.io", cp_name,
                 "--type=merge", "-p", json.dumps({"spec": {"kubeadmConfigSpec": {"initConfiguration": {
                     "timeouts": {"kubeletHealthCheckSeconds": 30}}}}}))
    custom = k8s.CustomObjectsApi(capi.api())
    group, version, plural = "controlplane.cluster.x-k8s.io", "v1beta1", "kubeadmcontrolplanes"

    def read_modify_write():
        # As client-go's RetryOnConflict: the controllers write the status meanwhile.
        obj = custom.get_namespaced_custom_object(group, version, ns, plural, cp_name)
        assert "cluster.x-k8s.io/conversion-data" in obj["metadata"]["annotations"]
        assert "timeouts" not in obj["spec"]["kubeadmConfigSpec"].get("initConfiguration", {})
        obj["metadata"].setdefault("labels", {})["touched-by"] = "v1beta1-client"
        try:
            return custom.replace_namespaced_custom_object(group, version, ns, plural, cp_name, obj)
        except k8s.ApiException as e:
            if e.status != 409:
                raise
            return None
    wait_for(read_modify_write, timeout=30, interval=0.2, what="a v1beta1 write without a conflict")
    kcp = json.loads(capi.kubectl("-n", ns, "get", "kubeadmcontrolplanes.v1beta2.controlplane.cluster.x-k8s.io",
                                  cp_name, "-o", "json").stdout)
    assert kcp["metadata"]["labels"]["touched-by"] == "v1beta1-client"
    assert kcp["spec"]["kubeadmConfigSpec"]["initConfiguration"]["timeouts"] == \
        {"controlPlaneComponentHealthCheckSeconds": 240, "kubeletHealthCheckSeconds": 30}
    assert "cluster.x-k8s.io/conversion-data" not in kcp["metadata"].get("annotations", {})
    capi.kubectl("-n", ns, "delete", "clusters.v1beta1.cluster.x-k8s.io", "v1b1", "--timeout=120s", timeout=130)


def machines_of(plane, ns, cluster):
    out = plane.kubectl("-n", ns, "get", "machines", "-l", f"cluster.x-k8s.io/cluster-name={cluster}", "-o", "json")
    return json.loads(out.stdout)["items"]


def test_unhealthy_machines_are_remediated_by_their_owners(capi, tmp_path):
    """A worker whose Node stays NotReady past the class's health-check timeout, and a
    control-plane Machine marked by hand, are replaced: the topology's MachineHealthChecks
    mark them, their MachineSet and KubeadmControlPlane delete them and make new ones."""
    ns = unique("mhc")
    capi.kubectl("create", "namespace", ns)
    # The class's checks, with 20 s instead of 5 minutes for a Node to stay NotReady.
    apply(capi, ns, render("clusterclass-in-memory.yaml", **FAST).replace("timeoutSeconds: 300", "timeoutSeconds: 20"))
    apply(capi, ns, render("cluster-template-in-memory.yaml", CLUSTER_NAME="c2", NAMESPACE=ns,
                           CONTROL_PLANE_MACHINE_COUNT=3, WORKER_MACHINE_COUNT=2,
                           KUBERNETES_VERSION="v1.31.2"))
    wait_available(capi, ns, "c2")
    ready_nodes(capi, ns, "c2", tmp_path, 5, "v1.31.2")

    def checks_count(expected):
        items = json.loads(capi.kubectl("-n", ns, "get", "mhc", "-o", "json").stdout)["items"]
        got = sorted((i.get("status", {}).get("expectedMachines"), i.get("status", {}).get("currentHealthy")) for i in items)
        return got == expected
    wait_for(lambda: checks_count([(2, 2), (3, 3)]), timeout=60, interval=0.3,
             what="the health checks to count every Machine healthy")

    # A worker's Node turns NotReady: 20 s later it fails the check.
    workers = [m for m in machines_of(capi, ns, "c2") if "cluster.x-k8s.io/control-plane" not in m["metadata"]["labels"]]
    sick = workers[0]
    node = sick["status"]["nodeRef"]["name"]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch = json.dumps({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                                   "message": "made sick by the test", "lastTransitionTime": now}]}})
    out = workload(capi, ns, "c2", tmp_path, "patch", "node", node, "--subresource=status", "-p", patch)
    assert out.returncode == 0, out.stderr

    def marked():
        m = next((m for m in machines_of(capi, ns, "c2") if m["metadata"]["name"] == sick["metadata"]["name"]), None)
        return m is None or condition(m, "HealthCheckSucceeded").get("reason") == "UnhealthyNode"
    wait_for(marked, timeout=60, interval=0.3, what="the sick worker to fail its health check")

    def replaced(name):
        names = [m["metadata"]["name"] for m in machines_of(capi, ns, "c2")]
        return name not in names and len(names) == 5
    wait_for(lambda: replaced(sick["metadata"]["name"]), timeout=60, interval=0.3,
             what="the sick worker Machine to be replaced")
    items = ready_nodes(capi, ns, "c2", tmp_path, 5, "v1.31.2")
    assert node not in [n["metadata"]["name"] for n in items]
    events = capi.kubectl("-n", ns, "get", "events", "-o", "json").stdout
    assert "MachineMarkedUnhealthy" in events
    assert f"Deleted Machine {sick['metadata']['name']} (remediating unhealthy Machine)" in events

    # A control-plane Machine marked by hand: the class's control-plane check marks it, the
    # control plane replaces it (keeping etcd's quorum), annotating the replacement.
    cp = next(m for m in machines_of(capi, ns, "c2") if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"])
    capi.kubectl("-n", ns, "annotate", "machine", cp["metadata"]["name"], "cluster.x-k8s.io/remediate-machine=")

    def cp_replaced():
        ms = machines_of(capi, ns, "c2")
        cps = [m for m in ms if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]]
        if cp["metadata"]["name"] in [m["metadata"]["name"] for m in ms] or len(cps) != 3:
            return None
        return [m for m in cps if "controlplane.cluster.x-k8s.io/remediation-for" in m["metadata"].get("annotations", {})]
    fresh = wait_for(cp_replaced, timeout=90, interval=0.3, what="the marked control-plane Machine to be replaced")
    assert json.loads(fresh[0]["metadata"]["annotations"]["controlplane.cluster.x-k8s.io/remediation-for"])["machine"] \
        == cp["metadata"]["name"]
    items = ready_nodes(capi, ns, "c2", tmp_path, 5, "v1.31.2")
    assert cp["status"]["nodeRef"]["name"] not in [n["metadata"]["name"] for n in items]
    wait_for(lambda: "controlplane.cluster.x-k8s.io/remediation-in-progress" not in json.loads(
        capi.kubectl("-n", ns, "get", "kcp", "-o", "json").stdout)["items"][0]["metadata"].get("annotations", {}),
        timeout=30, interval=0.3, what="the control plane to end its remediation")
    wait_available(capi, ns, "c2")
    wait_for(lambda: all(condition(m, "HealthCheckSucceeded").get("status") == "True"
                         and condition(m, "OwnerRemediated") == {} for m in machines_of(capi, ns, "c2")),
             timeout=60, interval=0.3, what="every Machine to pass its health check, unmarked")
    assert checks_count([(2, 2), (3, 3)])
    capi.kubectl("-n", ns, "delete", "cluster", "c2", "--timeout=120s", timeout=130)


def test_the_seed_kinds_scale_with_kubectl_scale(capi, tmp_path):
    ns = unique("seed")
    capi.kubectl("create", "namespace", ns)
    apply(capi, ns, render("cluster-template-in-memory-development.yaml", CLUSTER_NAME="c2",
                           NAMESPACE=ns, WORKER_MACHINE_COUNT=1, **FAST))
    wait_available(capi, ns, "c2")
    ready_nodes(capi, ns, "c2", tmp_path, 2, "v1.31.2")
    # The seed's kinds report Paused in status.conditions, as the v1beta2 contract they claim asks.
    capi.kubectl("-n", ns, "wait", "--for=condition=Paused=false", "inmemorycluster/c2",
                 "--timeout=30s", timeout=40)
    capi.kubectl("-n", ns, "wait", "--for=condition=Paused=false", "inmemorymachines", "--all",
                 "--timeout=30s", timeout=40)
    header = capi.kubectl("-n", ns, "get", "inmemorymachines").stdout.splitlines()[0].split()
    assert header == ["NAME", "CLUSTER", "MACHINE", "PROVIDERID", "READY", "AGE"]
    capi.kubectl("-n", ns, "scale", "machinedeployment", "c2-md-0", "--replicas=3")
    ready_nodes(capi, ns, "c2", tmp_path, 4, "v1.31.2")
    capi.kubectl("-n", ns, "scale", "machinedeployment", "c2-md-0", "--replicas=1")
    ready_nodes(capi, ns, "c2", tmp_path, 2, "v1.31.2")
    machines = json.loads(capi.kubectl("-n", ns, "get", "machines", "-o", "json").stdout)["items"]
    assert len(machines) == 2
    capi.kubectl("-n", ns, "delete", "cluster", "c2", "--timeout=120s", timeout=130)
    assert capi.kubectl("-n", ns, "get", "inmemorymachines", "-o", "name").stdout.strip() == ""


def test_template_changes_reach_machines_in_place(capi, tmp_path):
    """Cluster API's in-place propagation: labels, annotations and deletion timeouts changed
    on a MachineDeployment's or a KubeadmControlPlane's template reach the existing Machines
    (and their infrastructure machines and bootstrap configs) without a rollout; a label
    dropped from the template is dropped from them."""
    ns = unique("inplace")
    capi.kubectl("create", "namespace", ns)
    apply(capi, ns, render("cluster-template-in-memory-development.yaml", CLUSTER_NAME="c3",
                           NAMESPACE=ns, WORKER_MACHINE_COUNT=1, **FAST))
    wait_available(capi, ns, "c3")

    def get(kind, selector):
        out = capi.kubectl("-n", ns, "get", kind, "-l", selector, "-o", "json").stdout
        return json.loads(out)["items"]

    workers = "cluster.x-k8s.io/deployment-name=c3-md-0"
    before = get("machines", workers)
    assert len(before) == 1
    patch = {"spec": {"template": {"metadata": {"labels": {"team": "blue"}, "annotations": {"note": "hello"}},
                                   "spec": {"deletion": {"nodeDrainTimeoutSeconds": 300}}}}}
    capi.kubectl("-n", ns, "patch", "machinedeployment", "c3-md-0", "--type=merge", "-p", json.dumps(patch))

    def propagated():
        machines = get("machines", workers)
        if len(machines) != 1:
            return None
        m = machines[0]
        ok = (m["metadata"].get("labels", {}).get("team") == "blue"
              and m["metadata"].get("annotations", {}).get("note") == "hello"
              and m["spec"].get("deletion", {}).get("nodeDrainTimeoutSeconds") == 300)
        return m if ok else None
    machine = wait_for(propagated, timeout=30, interval=0.3, what="the template's changes on the Machine")
    assert machine["metadata"]["uid"] == before[0]["metadata"]["uid"], "changed in place, not rolled out"
    assert len(get("machinesets", workers)) == 1
    for kind, name in (("inmemorymachine", machine["spec"]["infrastructureRef"]["name"]),
                       ("kubeadmconfig", machine["spec"]["bootstrap"]["configRef"]["name"])):
        wait_for(lambda: json.loads(capi.kubectl("-n", ns, "get", kind, name, "-o", "json").stdout)
                 ["metadata"].get("labels", {}).get("team") == "blue", timeout=30, interval=0.3,
                 what=f"the label on the {kind}")

    # Dropped from the template, dropped from the Machine and what was made for it.
    capi.kubectl("-n", ns, "patch", "machinedeployment", "c3-md-0", "--type=merge", "-p",
                 json.dumps({"spec": {"template": {"metadata": {"labels": {"team": None}}}}}))
    wait_for(lambda: all("team" not in m["metadata"].get("labels", {}) for m in get("machines", workers)),
             timeout=30, interval=0.3, what="the label gone from the Machine")
    name = machine["spec"]["infrastructureRef"]["name"]
    wait_for(lambda: "team" not in json.loads(capi.kubectl("-n", ns, "get", "inmemorymachine", name, "-o", "json")
                                              .stdout)["metadata"].get("labels", {}),
             timeout=30, interval=0.3, what="the label gone from the InMemoryMachine")

    # The control plane's template the same way; its Machines' readiness gates in upstream's order.
    control_plane = "cluster.x-k8s.io/control-plane-name=c3-control-plane"
    cp_before = get("machines", control_plane)
    capi.kubectl("-n", ns, "patch", "kubeadmcontrolplane", "c3-control-plane", "--type=merge", "-p",
                 json.dumps({"spec": {"machineTemplate": {"metadata": {"labels": {"tier": "cp"}}}}}))
    wait_for(lambda: all(m["metadata"].get("labels", {}).get("tier") == "cp" for m in get("machines", control_plane)),
             timeout=30, interval=0.3, what="the control plane's label on its Machines")
    cp_after = get("machines", control_plane)
    assert [m["metadata"]["uid"] for m in cp_after] == [m["metadata"]["uid"] for m in cp_before]
    gates = [g["conditionType"] for g in cp_after[0]["spec"]["readinessGates"]]
    assert gates[:3] == ["APIServerPodHealthy", "ControllerManagerPodHealthy", "SchedulerPodHealthy"], gates
    capi.kubectl("-n", ns, "delete", "cluster", "c3", "--timeout=120s", timeout=130)


def test_the_cluster_cli(capi, tmp_path):
    ns = unique("cli")
    capi.kubectl("create", "namespace", ns)
    cli = [BINARY, "cluster", "--kubeconfig", capi.kubeconfig, "-n", ns]
    out = subprocess.run([*cli, "create", "k1", "--control-planes", "1", "--workers", "2",
                          "--step-startup", "100ms"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "is Available" in out.stdout
    listed = subprocess.run([*cli, "list"], capture_output=True, text=True, timeout=30).stdout.splitlines()
    assert listed[0].split()[:4] == ["NAME", "CLASS", "PHASE", "AVAILABLE"]
    assert listed[1].split()[:6] == ["k1", "in-memory", "Provisioned", "True", "1/1", "2/2"]
    kubeconfig = subprocess.run([*cli, "kubeconfig", "k1"], capture_output=True, text=True, timeout=30).stdout
    path = tmp_path / "k1.kubeconfig"
    path.write_text(kubeconfig)
    got = subprocess.run(["kubectl", "--kubeconfig", str(path), "get", "nodes", "-o", "name"],
                         capture_output=True, text=True, timeout=30)
    assert len(got.stdout.split()) == 3, got.stderr
    out = subprocess.run([*cli, "delete", "k1"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "deleted" in out.stdout, out.stderr
    assert subprocess.run([*cli, "delete", "k1"], capture_output=True, text=True, timeout=30).returncode != 0


def test_the_provider_components_apply_as_clusterctl_would(capi):
    capi.kubectl("create", "namespace", "infrasim-system", check=False)
    # The plane's own copies of the provider's CRDs also serve the Dev kinds in v1beta1 (its
    # conversion webhook lives in its process, which a provider deployed elsewhere cannot
    # reach): the components' v1beta2-only CRDs take those fields over, hence the force.
    out = capi.kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f",
                       str(RELEASE / "infrastructure-components.yaml")).stdout
    assert "deployment.apps/infrasim-controller-manager serverside-applied (server dry run)" in out
    docs = (RELEASE / "infrastructure-components.yaml").read_text()
    assert "name: manager" in docs
    metadata = (RELEASE / "metadata.yaml").read_text()
    assert "contract: v1beta2" in metadata


def test_infrasim_controller_against_another_plane_with_leader_election(tmp_path):
    workdir = tmp_path / "bare"
    workdir.mkdir()
    bare = Plane(workdir, "--controllers", "none")
    procs = []
    try:
        for lo in (22700, 22800):
            log = open(tmp_path / f"controller-{lo}.log", "w")
            procs.append(subprocess.Popen(
                [BINARY, "controller", "--kubeconfig", bare.kubeconfig, "--port-min", str(lo),
                 "--port-max", str(lo + 50)], stdout=log, stderr=subprocess.STDOUT))
        holder = wait_for(lambda: json.loads(bare.kubectl("get", "lease", "infrasim-controller", "-o", "json",
                                                          check=False).stdout or "{}").get("spec", {}).get("holderIdentity"),
                          timeout=30, what="a leader")
        assert holder
        out = subprocess.run([BINARY, "cluster", "--kubeconfig", bare.kubeconfig, "create", "x1",
                              "--step-startup", "0s"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr + "\n".join(
            (tmp_path / f"controller-{lo}.log").read_text() for lo in (22700, 22800))
        # One replica serves the endpoint: the other waits for the lease.
        port = json.loads(bare.kubectl("get", "cluster", "x1", "-o", "json").stdout)["spec"]["controlPlaneEndpoint"]["port"]
        assert 22700 <= port <= 22750 or 22800 <= port <= 22850
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
        bare.stop()
