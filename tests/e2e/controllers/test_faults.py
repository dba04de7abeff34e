"""Faults on demand (`sim.infrasim.dev/v1alpha1` Fault), made with kubectl on `infrasim up`
and seen by clients of the workload cluster: kubectl gets kube-apiserver's errors, a raw
client the 429 with its Retry-After, every request the added latency; deleting the Fault,
its duration ending, or its selector no longer matching clears it."""

import base64
import json
import os
import subprocess
import time

import pytest
from kubernetes import config

from conftest import BINARY, ROOT, Plane, condition, envsubst, get, in_memory_cluster, wait_for


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    p = Plane(tmp_path_factory.mktemp("faults"), "--workloads=false",
              "--port-min", "23600", "--port-max", "23650")
    yield p
    p.stop()


@pytest.fixture
def fns(faulty):
    name = f"f-{time.monotonic_ns() % 10**9}"
    faulty.kubectl("create", "namespace", name)
    return name


def fault(plane, ns, name, spec):
    doc = {"apiVersion": "sim.infrasim.dev/v1alpha1", "kind": "Fault",
           "metadata": {"name": name, "namespace": ns}, "spec": spec}
    return plane.kubectl("apply", "-f", "-", input=json.dumps(doc), check=False)


def status(plane, ns, name):
    return (get(plane, ns, "fault", name) or {}).get("status") or {}


def workload_kubectl(kubeconfig, *args):
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "--request-timeout", "20s",
                           *args], capture_output=True, text=True, timeout=60)


def workload_get(plane, kubeconfig, path):
    """One GET to the workload cluster, without client retries: (status, headers, body)."""
    api = config.new_client_from_config(config_file=str(kubeconfig))
    resp = plane._request("GET", path, api=api, timeout=30)
    body = resp.data.decode()
    try:
        body = json.loads(body)
    except ValueError:
        pass
    return resp.status, resp.headers, body


def test_api_errors_are_answered_as_kube_apiserver_and_cleared_by_deleting_the_fault(faulty, fns, tmp_path):
    kubeconfig = in_memory_cluster(faulty, fns, "e1", tmp_path, workers=0)
    assert workload_kubectl(kubeconfig, "get", "ns").returncode == 0
    made = fault(faulty, fns, "throttle", {"clusterName": "e1", "type": "APIErrors",
                                           "params": {"code": 429, "retryAfterSeconds": 2}})
    assert made.returncode == 0, made.stderr
    wait_for(lambda: status(faulty, fns, "throttle").get("phase") == "Active", 30, what="Fault Active")
    st = status(faulty, fns, "throttle")
    assert st["clusters"] == ["e1"] and st["clusterCount"] == 1, st
    code, headers, body = workload_get(faulty, kubeconfig, "/api/v1/namespaces")
    assert code == 429, body
    assert headers.get("Retry-After") == "2"
    assert body["kind"] == "Status" and body["reason"] == "TooManyRequests", body
    assert body["details"]["retryAfterSeconds"] == 2

    # Another code, through kubectl itself.
    patched = faulty.kubectl("-n", fns, "patch", "fault", "throttle", "--type", "merge",
                             "-p", '{"spec":{"params":{"code":500}}}', check=False)
    assert patched.returncode == 0, patched.stderr
    broken = wait_for(lambda: (lambda o: o if o.returncode != 0 and "injected fault" in o.stderr else None)(
        workload_kubectl(kubeconfig, "get", "ns")), 30, what="a 500 seen by kubectl")
    assert "Internal error occurred" in broken.stderr, broken.stderr

    faulty.kubectl("-n", fns, "delete", "fault", "throttle", "--wait=true", "--timeout=30s")
    assert get(faulty, fns, "fault", "throttle") is None
    assert workload_kubectl(kubeconfig, "get", "ns").returncode == 0


def test_latency_and_errors_from_two_faults_add_up(faulty, fns, tmp_path):
    kubeconfig = in_memory_cluster(faulty, fns, "l1", tmp_path, workers=0)
    assert fault(faulty, fns, "slow", {"clusterName": "l1", "type": "APILatency",
                                       "params": {"latency": "1500ms"}}).returncode == 0
    wait_for(lambda: status(faulty, fns, "slow").get("phase") == "Active", 30, what="latency Active")
    started = time.monotonic()
    code, _, _ = workload_get(faulty, kubeconfig, "/api/v1/namespaces/default")
    assert code == 200
    # A lower bound only: the fault adds 1.5 s to every request, whatever the machine's speed.
    assert time.monotonic() - started >= 1.5
    assert fault(faulty, fns, "broken", {"clusterName": "l1", "type": "APIErrors",
                                         "params": {"code": 503}}).returncode == 0
    wait_for(lambda: status(faulty, fns, "broken").get("phase") == "Active", 30, what="errors Active")
    started = time.monotonic()
    code, _, body = workload_get(faulty, kubeconfig, "/api/v1/namespaces/default")
    assert code == 503 and body["reason"] == "ServiceUnavailable", body
    assert time.monotonic() - started >= 1.5
    faulty.kubectl("-n", fns, "delete", "fault", "slow", "broken", "--wait=true", "--timeout=30s")
    assert workload_get(faulty, kubeconfig, "/api/v1/namespaces/default")[0] == 200


def test_a_selector_follows_the_clusters_labels(faulty, fns, tmp_path):
    kubeconfig = in_memory_cluster(faulty, fns, "s1", tmp_path, workers=0)
    assert fault(faulty, fns, "chaos", {"clusterSelector": {"matchLabels": {"chaos": "on"}},
                                        "type": "APIErrors"}).returncode == 0
    wait_for(lambda: status(faulty, fns, "chaos").get("phase") == "Active", 30, what="Fault Active")
    idle = status(faulty, fns, "chaos")
    assert idle.get("clusters", []) == []
    assert [c["reason"] for c in idle["conditions"] if c["type"] == "Active"] == ["NoClusters"]
    assert workload_get(faulty, kubeconfig, "/version")[0] == 200

    faulty.kubectl("-n", fns, "label", "cluster", "s1", "chaos=on")
    wait_for(lambda: status(faulty, fns, "chaos").get("clusters") == ["s1"], 30, what="cluster selected")
    assert workload_get(faulty, kubeconfig, "/version")[0] == 500
    faulty.kubectl("-n", fns, "label", "cluster", "s1", "chaos-")
    wait_for(lambda: not status(faulty, fns, "chaos").get("clusters"), 30, what="cluster released")
    assert workload_get(faulty, kubeconfig, "/version")[0] == 200


def test_a_duration_ends_the_fault_by_itself(faulty, fns, tmp_path):
    kubeconfig = in_memory_cluster(faulty, fns, "d1", tmp_path, workers=0)
    assert fault(faulty, fns, "brief", {"clusterName": "d1", "type": "APIErrors",
                                        "duration": "3s"}).returncode == 0
    wait_for(lambda: status(faulty, fns, "brief").get("phase") in ("Active", "Expired"), 30,
             what="Fault applied")
    wait_for(lambda: status(faulty, fns, "brief").get("phase") == "Expired", 30, what="Fault expired")
    st = status(faulty, fns, "brief")
    assert st.get("clusters", []) == [] and st["endTime"] > st["startTime"], st
    assert workload_get(faulty, kubeconfig, "/version")[0] == 200


def test_the_schema_refuses_what_cannot_apply_and_explains_the_rest(faulty, fns):
    both = fault(faulty, fns, "both", {"clusterName": "x", "clusterSelector": {"matchLabels": {"a": "b"}},
                                       "type": "APIErrors"})
    assert both.returncode != 0 and "exactly one of clusterName and clusterSelector" in both.stderr, both.stderr
    unknown = fault(faulty, fns, "meteor", {"clusterName": "x", "type": "Meteor"})
    assert unknown.returncode != 0 and "Unsupported value" in unknown.stderr, unknown.stderr
    no_latency = fault(faulty, fns, "slow", {"clusterName": "x", "type": "APILatency"})
    assert no_latency.returncode != 0 and "needs params.latency" in no_latency.stderr, no_latency.stderr
    explained = faulty.kubectl("explain", "faults.spec.type")
    assert "APILatency" in explained.stdout and "Retry-After" in explained.stdout, explained.stdout


def test_infrasim_fault_does_the_same_from_the_command_line(faulty, fns, tmp_path):
    kubeconfig = in_memory_cluster(faulty, fns, "c1", tmp_path, workers=0)

    def cli(*args):
        return subprocess.run([BINARY, "fault", *args, "-n", fns, "--kubeconfig", faulty.kubeconfig],
                              capture_output=True, text=True, timeout=60)

    made = cli("create", "outage", "--cluster", "c1", "--type", "APIErrors", "--code", "503")
    assert made.returncode == 0, made.stderr
    assert "fault outage Active on: c1" in made.stdout, made.stdout
    assert workload_get(faulty, kubeconfig, "/version")[0] == 503
    listed = cli("list")
    assert listed.returncode == 0 and "outage" in listed.stdout and "APIErrors" in listed.stdout, listed.stdout
    refused = cli("create", "nothing", "--type", "APIErrors")
    assert refused.returncode != 0 and "--cluster" in refused.stderr, refused.stderr
    assert cli("delete", "outage").returncode == 0
    wait_for(lambda: workload_get(faulty, kubeconfig, "/version")[0] == 200, 30, what="fault cleared")


def test_node_not_ready_stops_a_kubelet_until_the_fault_is_gone(faulty, fns, tmp_path):
    kubeconfig = in_memory_cluster(faulty, fns, "n1", tmp_path, workers=1)

    def nodes():
        out = workload_kubectl(kubeconfig, "get", "nodes", "-o", "json")
        assert out.returncode == 0, out.stderr
        return {n["metadata"]["name"]: n for n in json.loads(out.stdout)["items"]}

    def ready(node):
        return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")

    def unreachable(node):
        return sorted(t["effect"] for t in node["spec"].get("taints", [])
                      if t["key"] == "node.kubernetes.io/unreachable")

    worker = next(name for name, n in nodes().items()
                  if "node-role.kubernetes.io/control-plane" not in n["metadata"]["labels"])
    assert fault(faulty, fns, "down", {"clusterName": "n1", "type": "NodeNotReady",
                                       "params": {"node": worker}}).returncode == 0
    # kube-controller-manager's grace period is 40 s on the real clock here.
    wait_for(lambda: ready(nodes()[worker])["status"] == "Unknown", 90, interval=1,
             what="the worker Unknown")
    down = nodes()[worker]
    assert ready(down)["reason"] == "NodeStatusUnknown"
    assert ready(down)["message"] == "Kubelet stopped posting node status."
    wait_for(lambda: unreachable(nodes()[worker]) == ["NoExecute", "NoSchedule"], 30,
             what="the worker tainted unreachable")
    assert all(ready(n)["status"] == "True" for name, n in nodes().items() if name != worker)

    faulty.kubectl("-n", fns, "delete", "fault", "down", "--wait=true", "--timeout=30s")
    wait_for(lambda: ready(nodes()[worker])["status"] == "True" and not unreachable(nodes()[worker]),
             30, interval=0.5, what="the worker Ready and untainted")


def etcd_client(plane, ns, cluster, tmp_path):
    """etcdctl arguments for the cluster's etcd on its endpoint: the cluster CA (which signs
    the endpoint) and a client certificate signed by the etcd CA Cluster API keeps in
    `<cluster>-etcd`, made with openssl as an operator would."""
    secret = json.loads(plane.kubectl("-n", ns, "get", "secret", f"{cluster}-etcd", "-o", "json").stdout)
    ca = json.loads(plane.kubectl("-n", ns, "get", "secret", f"{cluster}-ca", "-o", "json").stdout)
    d = tmp_path / f"{cluster}-etcd"
    d.mkdir()
    (d / "etcd-ca.crt").write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
    (d / "etcd-ca.key").write_bytes(base64.b64decode(secret["data"]["tls.key"]))
    (d / "ca.crt").write_bytes(base64.b64decode(ca["data"]["tls.crt"]))
    (d / "ext.cnf").write_text("extendedKeyUsage=clientAuth\n")
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", d / "client.key", "-subj", "/CN=etcd-operator", "-out", d / "client.csr"],
                   check=True, capture_output=True, timeout=30)
    subprocess.run(["openssl", "x509", "-req", "-in", d / "client.csr", "-CA", d / "etcd-ca.crt",
                    "-CAkey", d / "etcd-ca.key", "-CAcreateserial", "-days", "1", "-extfile", d / "ext.cnf",
                    "-out", d / "client.crt"], check=True, capture_output=True, timeout=30)
    server = yaml_server(plane, ns, cluster)
    return ["etcdctl", f"--endpoints={server}", f"--cacert={d / 'ca.crt'}", f"--cert={d / 'client.crt'}",
            f"--key={d / 'client.key'}", "--command-timeout=10s"]


def etcdctl_of(plane, ns, cluster, tmp_path):
    """etcdctl (v3 API) against the cluster's etcd, with `etcd_client`'s credentials: a
    function of etcdctl's arguments answering the finished process."""
    args = etcd_client(plane, ns, cluster, tmp_path)
    env = {**os.environ, "ETCDCTL_API": "3"}
    return lambda *more: subprocess.run([*args, *more], capture_output=True, text=True, timeout=30, env=env)


def yaml_server(plane, ns, cluster):
    secret = json.loads(plane.kubectl("-n", ns, "get", "secret", f"{cluster}-kubeconfig", "-o", "json").stdout)
    text = base64.b64decode(secret["data"]["value"]).decode()
    return next(line.split("server:", 1)[1].strip() for line in text.splitlines() if "server:" in line)


def etcd_health(plane, ns, cluster):
    """The cluster's KubeadmControlPlane's EtcdClusterHealthy condition."""
    return kcp_condition(plane, ns, cluster, "EtcdClusterHealthy")


def kcp_condition(plane, ns, cluster, type_):
    """A condition of the cluster's KubeadmControlPlane."""
    kcps = json.loads(plane.kubectl("-n", ns, "get", "kcp", "-l", f"cluster.x-k8s.io/cluster-name={cluster}",
                                    "-o", "json").stdout)["items"]
    return condition(kcps[0], type_) if kcps else None


def machine_condition(plane, ns, name, type_):
    """A condition of Machine `name` (None when it or the condition is not there)."""
    m = get(plane, ns, "machine", name)
    return m and condition(m, type_)


COMPONENTS = ["APIServerPodHealthy", "ControllerManagerPodHealthy", "SchedulerPodHealthy", "EtcdPodHealthy"]


def test_an_etcd_alarm_is_listed_by_etcdctl_and_refuses_writes_until_the_fault_is_gone(faulty, fns, tmp_path):
    kubeconfig = in_memory_cluster(faulty, fns, "a1", tmp_path, workers=0)
    run = etcdctl_of(faulty, fns, "a1", tmp_path)
    # The control plane reads each Machine's static pods and etcd member, as upstream's does.
    (cp,) = machines(faulty, fns, "a1", control_plane=True)
    name = cp["metadata"]["name"]
    for t in COMPONENTS + ["EtcdMemberHealthy"]:
        c = wait_for(lambda: (lambda c: c if c and c["status"] == "True" else None)(
            machine_condition(faulty, fns, name, t)), 30, what=f"{t} on the control-plane Machine")
        assert c["reason"] == ("Healthy" if t == "EtcdMemberHealthy" else "Running"), c
    assert kcp_condition(faulty, fns, "a1", "ControlPlaneComponentsHealthy")["status"] == "True"

    assert run("put", "k", "v").returncode == 0
    assert fault(faulty, fns, "full", {"clusterName": "a1", "type": "EtcdAlarm",
                                       "params": {"alarm": "NOSPACE"}}).returncode == 0
    listed = wait_for(lambda: (lambda o: o if "alarm:NOSPACE" in o.stdout else None)(run("alarm", "list")),
                      30, what="the alarm listed")
    assert listed.returncode == 0
    refused = run("put", "k", "v2")
    assert refused.returncode != 0 and "database space exceeded" in refused.stderr, refused.stderr
    assert run("get", "k").returncode == 0
    # The cluster's API server stores in that etcd: kube-apiserver passes etcd's refusal on.
    made = workload_kubectl(kubeconfig, "-n", "default", "create", "configmap", "full")
    assert made.returncode != 0, made.stdout
    assert "etcdserver: mvcc: database space exceeded" in made.stderr, made.stderr
    assert workload_kubectl(kubeconfig, "-n", "default", "get", "configmaps").returncode == 0
    # The control plane's etcd health check reads the alarm, per member, as upstream's does.
    unhealthy = wait_for(lambda: (lambda c: c if c and c["status"] == "False" else None)(etcd_health(faulty, fns, "a1")),
                         30, what="the control plane's etcd not healthy")
    assert unhealthy["reason"] == "NotHealthy"
    assert unhealthy["message"] == f"* Machine {name}:\n  * EtcdMemberHealthy: Etcd reports alarms: NOSPACE", unhealthy
    member = machine_condition(faulty, fns, name, "EtcdMemberHealthy")
    assert (member["status"], member["reason"], member["message"]) == \
        ("False", "NotHealthy", "Etcd reports alarms: NOSPACE"), member
    # The control plane gates its Machines' Ready on that condition, as upstream's does.
    gates = json.loads(faulty.kubectl("-n", fns, "get", "machine", name, "-o", "json").stdout)["spec"]["readinessGates"]
    assert {"conditionType": "EtcdMemberHealthy"} in gates, gates
    ready = wait_for(lambda: (lambda c: c if c and c.get("status") == "False" else None)(
        machine_condition(faulty, fns, name, "Ready")),
                     30, what="the Machine not Ready")
    assert ready["message"] == "* EtcdMemberHealthy: Etcd reports alarms: NOSPACE", ready
    faulty.kubectl("-n", fns, "delete", "fault", "full", "--wait=true", "--timeout=30s")
    wait_for(lambda: etcd_health(faulty, fns, "a1")["status"] == "True", 30, what="etcd healthy again")
    wait_for(lambda: (machine_condition(faulty, fns, name, "Ready") or {}).get("status") == "True", 30,
             what="the Machine Ready again")
    assert "alarm:" not in run("alarm", "list").stdout
    assert run("put", "k", "v3").returncode == 0
    made = workload_kubectl(kubeconfig, "-n", "default", "create", "configmap", "full")
    assert made.returncode == 0, made.stderr


def test_api_down_refuses_connections_until_the_fault_is_gone(faulty, fns, tmp_path):
    kubeconfig = in_memory_cluster(faulty, fns, "x1", tmp_path, workers=0)
    assert fault(faulty, fns, "off", {"clusterName": "x1", "type": "APIDown"}).returncode == 0
    # kubectl says "connect: connection refused" while it discovers the API, and "The
    # connection to the server ... was refused" alone once its discovery cache is warm.
    down = wait_for(lambda: (lambda o: o if o.returncode != 0 and "refused" in o.stderr else None)(
        workload_kubectl(kubeconfig, "get", "ns")), 30, what="kubectl refused")
    assert "connection refused" in down.stderr or "was refused" in down.stderr, down.stderr
    faulty.kubectl("-n", fns, "delete", "fault", "off", "--wait=true", "--timeout=30s")
    wait_for(lambda: workload_kubectl(kubeconfig, "get", "ns").returncode == 0, 30, what="the endpoint open")


def fast_checks_class(plane, ns):
    """The release's ClusterClass `in-memory` (machine steps instant) with health checks a test
    can wait for: a worker without a Node 30 s after it could have one (the least Cluster API
    accepts) fails its check, and so does a control-plane machine whose Node has been Ready
    `Unknown` for 5 s. `infrasim cluster create` uses the class it finds."""
    text = (ROOT / "deploy" / "infrastructure-in-memory" / "v0.1.0" / "clusterclass-in-memory.yaml").read_text()
    text = envsubst(text, {s: "0s" for s in ("VM_STARTUP", "NODE_STARTUP", "ETCD_STARTUP", "API_SERVER_STARTUP")})
    worker = "          checks:\n            unhealthyNodeConditions:"
    control_plane = "\n          - {type: Ready, status: Unknown, timeoutSeconds: 300}"
    assert text.count(worker) == 1 and text.count(control_plane) == 1
    text = text.replace(worker, "          checks:\n            nodeStartupTimeoutSeconds: 30\n"
                                "            unhealthyNodeConditions:")
    text = text.replace(control_plane, "\n          - {type: Ready, status: Unknown, timeoutSeconds: 5}")
    plane.kubectl("-n", ns, "apply", "--server-side", "-f", "-", input=text)


def machines(plane, ns, cluster, control_plane):
    out = plane.kubectl("-n", ns, "get", "machines", "-l", f"cluster.x-k8s.io/cluster-name={cluster}", "-o", "json")
    return [m for m in json.loads(out.stdout)["items"]
            if ("cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]) == control_plane]


def infra_machine(plane, ns, machine):
    ref = machine["spec"]["infrastructureRef"]
    return get(plane, ns, ref["kind"].lower(), ref["name"])


def a_worker_under(plane, ns, cluster, name, spec):
    """Puts Fault `name` (`spec`, on `cluster`) in force, then asks the cluster's topology for
    a worker: the worker is made while the fault holds."""
    assert fault(plane, ns, name, {"clusterName": cluster, **spec}).returncode == 0
    wait_for(lambda: status(plane, ns, name).get("clusters") == [cluster], 30, what="the fault in force")
    scale = [{"op": "replace", "path": "/spec/topology/workers/machineDeployments/0/replicas", "value": 1}]
    plane.kubectl("-n", ns, "patch", "cluster", cluster, "--type", "json", "-p", json.dumps(scale))


def worker_boot(plane, ns, cluster):
    """The cluster's first worker Machine, its infrastructure machine and the boot a fault
    wrote on it (`sim.infrasim.dev/boot`); Nones while there is no worker."""
    ms = machines(plane, ns, cluster, control_plane=False)
    infra = ms and infra_machine(plane, ns, ms[0])
    if not infra:
        return None, None, None
    return ms[0], infra, infra["metadata"].get("annotations", {}).get("sim.infrasim.dev/boot")


def test_a_machine_that_never_boots_stays_provisioned_until_its_health_check_replaces_it(faulty, fns, tmp_path):
    fast_checks_class(faulty, fns)
    in_memory_cluster(faulty, fns, "b1", tmp_path, workers=0)
    a_worker_under(faulty, fns, "b1", "stuck", {"type": "MachineNeverBoots"})

    def held():
        stuck, infra, boot = worker_boot(faulty, fns, "b1")
        return (stuck, infra) if boot == "never" and stuck["spec"].get("providerID") else None
    stuck, infra = wait_for(held, 60, interval=0.5, what="the worker's VM made, its boot held")
    # Deleting the fault does not boot a machine it held: that one never boots.
    faulty.kubectl("-n", fns, "delete", "fault", "stuck", "--wait=true", "--timeout=30s")
    stuck = get(faulty, fns, "machine", stuck["metadata"]["name"])
    assert stuck["status"].get("phase") == "Provisioned" and not stuck["status"].get("nodeRef"), stuck["status"]
    assert condition(infra, "NodeProvisioned")["status"] == "False"

    # Cluster API's MachineHealthCheck sees it (no Node within nodeStartupTimeout) and its
    # MachineSet replaces it; the replacement, made after the fault, boots.
    def replaced():
        ms = machines(faulty, fns, "b1", control_plane=False)
        names = [m["metadata"]["name"] for m in ms]
        return ms if stuck["metadata"]["name"] not in names and len(ms) == 1 \
            and ms[0]["status"].get("nodeRef") else None
    fresh = wait_for(replaced, 120, interval=1, what="the stuck worker replaced by one that boots")
    assert "sim.infrasim.dev/boot" not in infra_machine(faulty, fns, fresh[0])["metadata"].get("annotations", {})
    events = faulty.kubectl("-n", fns, "get", "events", "-o", "json").stdout
    assert f"Machine {fns}/{stuck['metadata']['name']} has been marked as unhealthy" in events


def test_a_machine_that_boots_late_gets_its_node_after_the_delay(faulty, fns, tmp_path):
    in_memory_cluster(faulty, fns, "l1", tmp_path, workers=0)
    a_worker_under(faulty, fns, "l1", "slow", {"type": "MachineBootsLate", "params": {"delay": "8s"}})
    boots_at = wait_for(lambda: worker_boot(faulty, fns, "l1")[2], 60, interval=0.2,
                        what="the worker's boot put off")
    held = machines(faulty, fns, "l1", control_plane=False)[0]
    assert not held["status"].get("nodeRef"), "no Node before the time it boots at"
    booted = wait_for(lambda: (lambda ms: ms[0] if ms and ms[0]["status"].get("nodeRef") else None)(
        machines(faulty, fns, "l1", control_plane=False)), 60, interval=0.5, what="the late worker's Node")
    node_at = condition(infra_machine(faulty, fns, booted), "NodeProvisioned")["lastTransitionTime"]
    assert node_at >= boots_at, (node_at, boots_at)


def test_a_control_plane_node_not_ready_is_remediated_by_its_control_plane(faulty, fns, tmp_path):
    fast_checks_class(faulty, fns)
    in_memory_cluster(faulty, fns, "r1", tmp_path, workers=0, control_planes=3)
    victim = machines(faulty, fns, "r1", control_plane=True)[0]
    node = victim["status"]["nodeRef"]["name"]
    assert fault(faulty, fns, "sick", {"clusterName": "r1", "type": "NodeNotReady",
                                       "params": {"node": node}}).returncode == 0
    # Once the node is unreachable, the control plane no longer trusts what its pods say
    # (the health check waits 5 s more before it fails the Machine).
    unknown = wait_for(lambda: (lambda c: c if c and c["status"] == "Unknown" else None)(
        machine_condition(faulty, fns, victim["metadata"]["name"], "APIServerPodHealthy")),
        60, interval=0.2, what="the unreachable node's pods unknown")
    assert unknown["message"] == f"Node {node} is unreachable", unknown

    # 40 s to Unknown (kube-controller-manager), 5 s to fail the check; the control plane
    # then replaces the machine, keeping etcd's quorum, and notes why on the replacement.
    def replaced():
        cps = machines(faulty, fns, "r1", control_plane=True)
        if victim["metadata"]["name"] in [m["metadata"]["name"] for m in cps] or len(cps) != 3:
            return None
        return [m for m in cps if "controlplane.cluster.x-k8s.io/remediation-for" in m["metadata"].get("annotations", {})]
    fresh = wait_for(replaced, 180, interval=1, what="the NotReady control-plane machine replaced")
    assert json.loads(fresh[0]["metadata"]["annotations"]["controlplane.cluster.x-k8s.io/remediation-for"])["machine"] \
        == victim["metadata"]["name"]
    events = faulty.kubectl("-n", fns, "get", "events", "-o", "json").stdout
    assert "MachineMarkedUnhealthy" in events
    faulty.kubectl("-n", fns, "delete", "fault", "sick", "--wait=true", "--timeout=30s")
    faulty.kubectl("-n", fns, "wait", "--for=condition=Available", "cluster/r1", "--timeout=120s", timeout=130)


def test_a_deleted_node_is_seen_by_its_health_check_and_its_machine_replaced(faulty, fns, tmp_path):
    kubeconfig = in_memory_cluster(faulty, fns, "d1", tmp_path, workers=1)
    (worker,) = machines(faulty, fns, "d1", control_plane=False)
    node = worker["status"]["nodeRef"]["name"]
    assert fault(faulty, fns, "gone", {"clusterName": "d1", "type": "NodeDeleted",
                                       "params": {"node": node}}).returncode == 0
    wait_for(lambda: workload_kubectl(kubeconfig, "get", "node", node).returncode != 0, 30,
             what="the Node deleted")
    missing = workload_kubectl(kubeconfig, "get", "node", node)
    assert f'nodes "{node}" not found' in missing.stderr, missing.stderr

    # Cluster API's MachineHealthCheck fails the Machine at once (its Node is gone), and its
    # MachineSet replaces it with one that registers a Node of its own.
    def replaced():
        ms = machines(faulty, fns, "d1", control_plane=False)
        return ms if len(ms) == 1 and ms[0]["metadata"]["name"] != worker["metadata"]["name"] \
            and ms[0]["status"].get("nodeRef") else None
    (fresh,) = wait_for(replaced, 90, interval=0.5, what="the Machine of the deleted Node replaced")
    events = faulty.kubectl("-n", fns, "get", "events", "-o", "json").stdout
    assert f"Machine {fns}/{worker['metadata']['name']} has been marked as unhealthy" in events
    listed = workload_kubectl(kubeconfig, "get", "nodes", "-o", "name")
    assert f"node/{fresh['status']['nodeRef']['name']}" in listed.stdout.split()
    assert f"node/{node}" not in listed.stdout.split()
    faulty.kubectl("-n", fns, "delete", "fault", "gone", "--wait=true", "--timeout=30s")


def test_etcd_members_down_are_seen_by_etcdctl_and_the_control_plane_until_the_faults_go(faulty, fns, tmp_path):
    in_memory_cluster(faulty, fns, "e1", tmp_path, workers=0, control_planes=3)
    run = etcdctl_of(faulty, fns, "e1", tmp_path)

    first, second, _ = [m["status"]["nodeRef"]["name"] for m in machines(faulty, fns, "e1", control_plane=True)]
    assert fault(faulty, fns, "one", {"clusterName": "e1", "type": "EtcdMemberDown",
                                      "params": {"member": first}}).returncode == 0
    # One of three down: a majority leads on; the control plane names the member it cannot reach.
    unhealthy = wait_for(lambda: (lambda c: c if c and c["status"] == "False" else None)(etcd_health(faulty, fns, "e1")),
                         30, what="the control plane's etcd not healthy")
    assert f"Failed to connect to the etcd Pod on the {first} Node: connection refused" in unhealthy["message"], unhealthy
    assert run("put", "k", "v").returncode == 0
    listed = json.loads(run("member", "list", "-w", "json").stdout)
    assert sorted(m["name"] for m in listed["members"]) == sorted([first, second, _])

    # Two of three down: no quorum, no leader.
    assert fault(faulty, fns, "two", {"clusterName": "e1", "type": "EtcdMemberDown",
                                      "params": {"member": second}}).returncode == 0
    refused = wait_for(lambda: (lambda o: o if o.returncode != 0 else None)(run("put", "k", "v2")), 30,
                       what="etcd without a leader")
    assert "etcdserver: no leader" in refused.stderr, refused.stderr

    for name in ("two", "one"):
        faulty.kubectl("-n", fns, "delete", "fault", name, "--wait=true", "--timeout=30s")
    assert run("put", "k", "v3").returncode == 0
    wait_for(lambda: etcd_health(faulty, fns, "e1")["status"] == "True", 30, what="etcd healthy again")


def served_certificate_expiry(kubeconfig, node, tmp_path):
    """When the certificate that node's API server (`kube-apiserver-<node>:6443`, through the
    Python client's port-forward) presents expires, in seconds since the epoch; verified
    against the cluster's CA."""
    import ssl

    import yaml
    from kubernetes import client
    from kubernetes.stream import portforward

    ca = tmp_path / f"{node}-ca.crt"
    cluster = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
    pf = portforward(api.connect_get_namespaced_pod_portforward, f"kube-apiserver-{node}", "kube-system",
                     ports="6443")
    try:
        sock = pf.socket(6443)
        sock.setblocking(True)
        sock.settimeout(10)
        tls = ssl.create_default_context(cafile=str(ca)).wrap_socket(sock, server_hostname="localhost")
        not_after = tls.getpeercert()["notAfter"]
        tls.close()
        return ssl.cert_time_to_seconds(not_after)
    finally:
        pf.close()


def certificates_expiry(plane, ns, machine):
    """A Machine's `status.certificatesExpiryDate`, in seconds since the epoch (None unset)."""
    stamp = ((get(plane, ns, "machine", machine) or {}).get("status") or {}).get("certificatesExpiryDate")
    return stamp and time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone


def test_an_expiring_certificate_is_read_by_the_control_plane_which_rolls_its_machine_out(faulty, fns, tmp_path):
    day = 86400
    kubeconfig = in_memory_cluster(faulty, fns, "x1", tmp_path, workers=0)
    (old,) = machines(faulty, fns, "x1", control_plane=True)
    name, node = old["metadata"]["name"], old["status"]["nodeRef"]["name"]
    # KubeadmControlPlane reads the year kubeadm's certificate lasts into the Machine.
    year = wait_for(lambda: certificates_expiry(faulty, fns, name), 30, what="the machine's certificate expiry")
    assert 364 * day < year - time.time() <= 366 * day
    assert abs(served_certificate_expiry(kubeconfig, node, tmp_path) - year) < 2
    # Machines whose certificates expire within a week are to be replaced.
    kcp = old["metadata"]["labels"]["cluster.x-k8s.io/control-plane-name"]
    before = {"spec": {"rollout": {"before": {"certificatesExpiryDays": 7}}}}
    faulty.kubectl("-n", fns, "patch", "kcp", kcp, "--type", "merge", "-p", json.dumps(before))

    # Re-issued to expire in 20 days: a client sees it, and so does the Machine, which is
    # not due yet.
    renewed = {"clusterName": "x1", "type": "CertificateExpiring", "params": {"node": node, "expiresIn": "480h"}}
    assert fault(faulty, fns, "renewed", renewed).returncode == 0
    soon = wait_for(lambda: (lambda e: e if e and e < year else None)(certificates_expiry(faulty, fns, name)),
                    30, what="the re-issued certificate's expiry on the Machine")
    assert 19 * day < soon - time.time() <= 20 * day
    assert abs(served_certificate_expiry(kubeconfig, node, tmp_path) - soon) < 2
    config = get(faulty, fns, "kubeadmconfig", old["spec"]["bootstrap"]["configRef"]["name"])
    assert config["metadata"]["annotations"]["machine.cluster.x-k8s.io/certificates-expiry"] \
        == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(soon))
    assert [m["metadata"]["name"] for m in machines(faulty, fns, "x1", control_plane=True)] == [name]

    # Re-issued again, to expire in 5 days: within the week, so the control plane replaces
    # the machine by one whose node has a certificate of its own, for a year.
    renewed["params"]["expiresIn"] = "120h"
    assert fault(faulty, fns, "renewed", renewed).returncode == 0

    def replaced():
        cps = machines(faulty, fns, "x1", control_plane=True)
        fresh = [m for m in cps if m["metadata"]["name"] != name]
        return fresh[0] if len(cps) == 1 and fresh and fresh[0]["status"].get("certificatesExpiryDate") else None
    fresh = wait_for(replaced, 120, interval=0.5, what="the machine with an expiring certificate rolled out")
    assert certificates_expiry(faulty, fns, fresh["metadata"]["name"]) - time.time() > 364 * day
    faulty.kubectl("-n", fns, "wait", "--for=condition=Available", "cluster/x1", "--timeout=120s", timeout=130)
    faulty.kubectl("-n", fns, "delete", "fault", "renewed", "--wait=true", "--timeout=30s")
