"""`infrasim fleet`: simulated workload clusters, through kubectl and the Python client."""

import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from conftest import BINARY, fleet_ready, free_port, metric_samples, refused_credentials, wait_for


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    out = tmp_path_factory.mktemp("fleet")
    base = free_port()
    proc = subprocess.Popen(
        [BINARY, "fleet", "--count", "2", "--control-planes", "1", "--workers", "2", "--name-prefix", "wl",
         "--startup", "50ms", "--jitter", "0.5", "--shared-port", str(free_port()),
         "--out", str(out), "--port-min", str(base), "--port-max", str(base + 50),
         "--metrics-bind-address", f"127.0.0.1:{free_port()}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = fleet_ready(proc, timeout=30)
    yield out, lines
    proc.terminate()
    proc.wait(timeout=10)


def kubectl(kubeconfig, *args):
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=30)


def test_table_and_kubeconfigs(fleet):
    out, lines = fleet
    table = [l.split() for l in lines if l.startswith("wl-")]
    assert [(row[0], row[2]) for row in table] == [("wl-0", "3/3"), ("wl-1", "3/3")]
    assert os.path.exists(out / "wl-0.kubeconfig") and os.path.exists(out / "wl-1.kubeconfig")


def test_metrics_to_the_bearer_of_the_token_it_wrote(fleet):
    out, lines = fleet
    url = next(line.split()[1] for line in lines if line.startswith("metrics: https://"))
    token_file = out / "metrics.token"
    assert os.stat(token_file).st_mode & 0o777 == 0o600
    token = token_file.read_text().strip()
    assert kubectl(out / "wl-0.kubeconfig", "get", "nodes").returncode == 0
    # Verified against the CA the fleet wrote beside the token.
    tls = ssl.create_default_context(cafile=str(out / "metrics-ca.crt"))
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, context=tls, timeout=10) as resp:
        text = resp.read().decode()
    assert metric_samples(text, "inmemory_apiserver_request_total", cluster_name="wl-0",
                          verb="LIST", resource="nodes", code="200")
    for headers in [{}, {"Authorization": "Bearer " + token[::-1]}]:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=tls,
                                   timeout=10)
        assert refused.value.code == 401


def test_nodes_and_static_pods(fleet):
    out, _ = fleet
    nodes = kubectl(out / "wl-0.kubeconfig", "get", "nodes").stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    rows = {line.split()[0]: line.split() for line in nodes[1:]}
    assert rows["wl-0-control-plane-0"][1:3] == ["Ready", "control-plane"]
    assert rows["wl-0-worker-1"][1:3] == ["Ready", "<none>"]
    assert all(r[4] == "v1.31.0" for r in rows.values())
    pods = kubectl(out / "wl-0.kubeconfig", "-n", "kube-system", "get", "pods").stdout.splitlines()[1:]
    status = {p.split()[0]: p.split()[1:3] for p in pods}
    for component in ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]:
        assert status[f"{component}-wl-0-control-plane-0"] == ["1/1", "Running"]
    assert sum(1 for name in status if name.startswith("kube-proxy-")) == 3
    assert sum(1 for name in status if name.startswith("coredns-")) == 2


def test_python_client_sees_kubeadm_objects(fleet):
    out, _ = fleet
    api = config.new_client_from_config(config_file=str(out / "wl-1.kubeconfig"))
    core = client.CoreV1Api(api)
    cps = core.list_node(label_selector="node-role.kubernetes.io/control-plane")
    assert [n.metadata.name for n in cps.items] == ["wl-1-control-plane-0"]
    assert cps.items[0].spec.taints[0].effect == "NoSchedule"
    assert cps.items[0].spec.provider_id == "in-memory://wl-1-control-plane-0"
    on_worker = core.list_namespaced_pod("kube-system", field_selector="spec.nodeName=wl-1-worker-0")
    assert sum(p.metadata.name.startswith("kube-proxy-") for p in on_worker.items) == 1
    assert all(p.status.phase == "Running" for p in on_worker.items)
    cm = core.read_namespaced_config_map("kubeadm-config", "kube-system")
    assert "clusterName: wl-1" in cm.data["ClusterConfiguration"]
    assert "kubernetesVersion: v1.31.0" in cm.data["ClusterConfiguration"]
    assert core.read_namespaced_config_map("cluster-info", "kube-public").data["kubeconfig"]
    rbac = client.RbacAuthorizationV1Api(api)
    binding = rbac.read_cluster_role_binding("kubeadm:get-nodes")
    assert binding.role_ref.name == "kubeadm:get-nodes"
    assert binding.subjects[0].name == "system:bootstrappers:kubeadm:default-node-token"
    assert rbac.read_cluster_role("kubeadm:get-nodes").rules[0].resources == ["nodes"]
    apps = client.AppsV1Api(api)
    assert apps.read_namespaced_deployment("coredns", "kube-system").status.ready_replicas == 2
    assert apps.read_namespaced_daemon_set("kube-proxy", "kube-system").status.number_ready == 3


def test_one_clusters_credentials_never_open_another(fleet):
    out, _ = fleet
    a = yaml.safe_load(open(out / "wl-0.kubeconfig"))
    b = yaml.safe_load(open(out / "wl-1.kubeconfig"))
    mixed = dict(b)
    mixed["users"] = [{"name": b["users"][0]["name"], "user": a["users"][0]["user"]}]
    path = out / "mixed.kubeconfig"
    path.write_text(yaml.safe_dump(mixed))
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(path)))
    refused_credentials(api.list_node)


def test_logs_and_exec_answer_honestly(fleet):
    out, _ = fleet
    kc = out / "wl-0.kubeconfig"
    pod = [l.split()[0] for l in kubectl(kc, "-n", "kube-system", "get", "pods").stdout.splitlines()[1:]
           if l.startswith("coredns-")][0]
    logs = kubectl(kc, "-n", "kube-system", "logs", pod)
    assert logs.returncode == 0
    assert f"container coredns of pod kube-system/{pod} is simulated" in logs.stdout
    exec_ = subprocess.run(["kubectl", "--kubeconfig", str(kc), "-n", "kube-system", "exec", pod, "--", "ls"],
                           capture_output=True, text=True, timeout=30)
    assert exec_.returncode != 0
    assert "simulated by infrasim" in exec_.stderr and "exec is not possible" in exec_.stderr
    bad = kubectl(kc, "-n", "kube-system", "logs", pod, "-c", "nope")
    assert bad.returncode != 0 and "container nope is not valid" in bad.stderr


def test_deployment_pods_run_on_workers_scale_and_go(fleet):
    out, _ = fleet
    kc = out / "wl-1.kubeconfig"
    assert kubectl(kc, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=3").returncode == 0
    rollout = kubectl(kc, "rollout", "status", "deployment/web", "--timeout=25s")
    assert rollout.returncode == 0 and 'deployment "web" successfully rolled out' in rollout.stdout
    rows = [l.split() for l in kubectl(kc, "get", "pods", "-l", "app=web", "-o", "wide").stdout.splitlines()[1:]]
    assert len(rows) == 3
    for name, ready, status, _restarts, _age, ip, node, *_ in rows:
        assert name.startswith("web-") and (ready, status) == ("1/1", "Running")
        assert node.startswith("wl-1-worker-") and ip.startswith("10.244.")
    described = kubectl(kc, "describe", "pod", rows[0][0]).stdout
    assert f"Successfully assigned default/{rows[0][0]} to {rows[0][6]}" in described
    assert "Started container nginx" in described
    events = kubectl(kc, "get", "events", "--field-selector", "involvedObject.kind=Deployment,involvedObject.name=web")
    assert "ScalingReplicaSet" in events.stdout and "to 3" in events.stdout
    deploy = kubectl(kc, "get", "deployment", "web").stdout.splitlines()
    assert deploy[1].split()[:4] == ["web", "3/3", "3", "3"]
    # A new image rolls out to a second ReplicaSet; the old one is scaled to zero.
    assert kubectl(kc, "set", "image", "deployment/web", "nginx=nginx:1.28").returncode == 0
    assert kubectl(kc, "rollout", "status", "deployment/web", "--timeout=25s").returncode == 0
    rs = {l.split()[0]: l.split()[1:4] for l in kubectl(kc, "get", "rs", "-l", "app=web").stdout.splitlines()[1:]}
    assert sorted(rs.values()) == [["0", "0", "0"], ["3", "3", "3"]]
    images = kubectl(kc, "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].spec.containers[0].image}").stdout
    assert images.split() == ["nginx:1.28"] * 3
    assert kubectl(kc, "scale", "deployment/web", "--replicas=1").returncode == 0
    wait_for(lambda: len(kubectl(kc, "get", "pods", "-l", "app=web", "-o", "name").stdout.split()) == 1,
             timeout=30, interval=0.2, what="scaled to one pod")
    assert kubectl(kc, "delete", "deployment", "web").returncode == 0
    wait_for(lambda: kubectl(kc, "get", "pods,rs", "-l", "app=web", "-o", "name").stdout.strip() == "",
             timeout=30, interval=0.2, what="pods and replicasets collected")


def test_unschedulable_pod_says_why(fleet):
    out, _ = fleet
    kc = out / "wl-1.kubeconfig"
    overrides = '{"spec":{"containers":[{"name":"big","image":"busybox","resources":{"requests":{"cpu":"64"}}}]}}'
    assert kubectl(kc, "run", "big", "--image=busybox", f"--overrides={overrides}").returncode == 0
    jsonpath = '{.status.conditions[?(@.type=="PodScheduled")].message}'
    wait_for(lambda: "Insufficient cpu" in kubectl(kc, "get", "pod", "big", "-o", f"jsonpath={jsonpath}").stdout,
             timeout=30, interval=0.2, what="the scheduler gives up on it")
    message = kubectl(kc, "get", "pod", "big", "-o", f"jsonpath={jsonpath}").stdout
    assert message.startswith("0/3 nodes are available: 2 Insufficient cpu, "
                              "1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }.")
    assert kubectl(kc, "get", "pod", "big").stdout.splitlines()[1].split()[1:3] == ["0/1", "Pending"]
    # A pod that tolerates the taint and selects the control-plane node runs there.
    overrides = ('{"spec":{"nodeSelector":{"node-role.kubernetes.io/control-plane":""},'
                 '"tolerations":[{"key":"node-role.kubernetes.io/control-plane","effect":"NoSchedule"}]}}')
    assert kubectl(kc, "run", "cp", "--image=busybox", f"--overrides={overrides}").returncode == 0
    assert kubectl(kc, "wait", "--for=condition=Ready", "pod/cp", "--timeout=25s").returncode == 0
    assert kubectl(kc, "get", "pod", "cp", "-o", "jsonpath={.spec.nodeName}").stdout == "wl-1-control-plane-0"
    kubectl(kc, "delete", "pod", "big", "cp")


def test_python_client_watches_nodes(fleet):
    from kubernetes import watch
    out, _ = fleet
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(out / "wl-0.kubeconfig")))
    rv = core.list_node().metadata.resource_version
    core.patch_node("wl-0-worker-0", {"metadata": {"labels": {"e2e-watch": "seen"}}})
    w = watch.Watch()
    seen = None
    for event in w.stream(core.list_node, resource_version=rv, timeout_seconds=10):
        if event["object"].metadata.labels.get("e2e-watch") == "seen":
            seen = event
            w.stop()
    assert seen is not None and seen["type"] == "MODIFIED"
    assert seen["object"].metadata.name == "wl-0-worker-0"


def test_drain_honours_disruption_budgets(fleet):
    out, _ = fleet
    kc = out / "wl-0.kubeconfig"
    assert kubectl(kc, "create", "deployment", "guarded", "--image=nginx", "--replicas=2").returncode == 0
    assert kubectl(kc, "create", "pdb", "guarded", "--selector=app=guarded", "--min-available=2").returncode == 0
    assert kubectl(kc, "rollout", "status", "deployment/guarded", "--timeout=25s").returncode == 0
    wait_for(lambda: kubectl(kc, "get", "pdb", "guarded", "-o", "jsonpath={.status.currentHealthy}").stdout == "2",
             timeout=30, interval=0.2, what="the budget's status")
    assert kubectl(kc, "get", "pdb", "guarded").stdout.splitlines()[1].split()[1:4] == ["2", "N/A", "0"]
    # The Python client's eviction of a guarded pod gets 429 with the budget's cause.
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(kc)))
    pod = core.list_namespaced_pod("default", label_selector="app=guarded").items[0]
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace="default"))
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction(pod.metadata.name, "default", body)
    assert refused.value.status == 429
    assert "violate the pod's disruption budget" in refused.value.body
    assert "The disruption budget guarded needs 2 healthy pods and has 2 currently" in refused.value.body
    # kubectl drain cordons the node and keeps retrying the guarded pod until it gives up.
    node = pod.spec.node_name
    blocked = kubectl(kc, "drain", node, "--ignore-daemonsets", "--timeout=4s")
    assert blocked.returncode != 0
    assert "SchedulingDisabled" in kubectl(kc, "get", "node", node).stdout
    # Without the budget the drain evicts; the Deployment replaces the pod on another node.
    assert kubectl(kc, "delete", "pdb", "guarded").returncode == 0
    drained = kubectl(kc, "drain", node, "--ignore-daemonsets", "--timeout=20s")
    assert drained.returncode == 0 and f"node/{node} drained" in drained.stdout
    assert kubectl(kc, "rollout", "status", "deployment/guarded", "--timeout=25s").returncode == 0
    nodes = kubectl(kc, "get", "pods", "-l", "app=guarded", "-o", "jsonpath={.items[*].spec.nodeName}").stdout.split()
    assert len(nodes) == 2 and node not in nodes
    on_node = kubectl(kc, "get", "pods", "-A", "--field-selector", f"spec.nodeName={node}", "-o", "name").stdout.split()
    assert all("kube-proxy-" in p for p in on_node), on_node
    assert kubectl(kc, "uncordon", node).returncode == 0
    kubectl(kc, "delete", "deployment", "guarded")


def test_statefulset_pods_come_in_order_with_stable_names(fleet):
    out, _ = fleet
    kc = out / "wl-0.kubeconfig"
    manifest = out / "sts.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "replicas": 3, "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [{"name": "pg", "image": "postgres:16"}]}}}}))
    assert kubectl(kc, "apply", "-f", str(manifest)).returncode == 0
    rollout = kubectl(kc, "rollout", "status", "statefulset/db", "--timeout=25s")
    assert rollout.returncode == 0, rollout.stderr
    rows = [l.split() for l in kubectl(kc, "get", "pods", "-l", "app=db").stdout.splitlines()[1:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [(f"db-{i}", "1/1", "Running") for i in range(3)]
    # OrderedReady: each pod started only after the one before it was Ready.
    started = [kubectl(kc, "get", "pod", f"db-{i}", "-o", "jsonpath={.metadata.creationTimestamp}").stdout
               for i in range(3)]
    assert started == sorted(started)
    assert kubectl(kc, "get", "pod", "db-1", "-o", "jsonpath={.spec.hostname}.{.spec.subdomain}").stdout == "db-1.db"
    assert kubectl(kc, "scale", "statefulset/db", "--replicas=1").returncode == 0
    wait_for(lambda: kubectl(kc, "get", "pods", "-l", "app=db", "-o", "name").stdout.split() == ["pod/db-0"],
             timeout=30, interval=0.2, what="scaled down from the top")
    kubectl(kc, "delete", "statefulset", "db")


def test_anonymous_requests_are_refused(fleet, tmp_path):
    import base64
    import ssl
    import urllib.request
    out, _ = fleet
    kc = yaml.safe_load(open(out / "wl-0.kubeconfig"))
    cluster = kc["clusters"][0]["cluster"]
    ca = tmp_path / "ca.crt"
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    context = ssl.create_default_context(cafile=str(ca))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(cluster["server"] + "/api/v1/nodes", context=context, timeout=10)
    assert refused.value.code == 401
    body = refused.value.read().decode()
    assert '"reason":"Unauthorized"' in body.replace(" ", "")


def test_services_list_their_pods_as_endpoints(fleet):
    out, _ = fleet
    kc = out / "wl-1.kubeconfig"
    dns = kubectl(kc, "-n", "kube-system", "describe", "service", "kube-dns")
    assert dns.returncode == 0, dns.stderr
    endpoints = [l.split()[1] for l in dns.stdout.splitlines() if l.startswith("Endpoints:")]
    # One line per port (dns/UDP, dns-tcp/TCP), each with both CoreDNS pods.
    assert len(endpoints) == 2 and all(len(e.split(",")) == 2 and e.endswith(":53") for e in endpoints)
    assert kubectl(kc, "create", "deployment", "api", "--image=nginx", "--replicas=2", "--port=80").returncode == 0
    assert kubectl(kc, "expose", "deployment", "api", "--port=8080", "--target-port=80").returncode == 0
    assert kubectl(kc, "rollout", "status", "deployment/api", "--timeout=25s").returncode == 0
    ips = sorted(kubectl(kc, "get", "pods", "-l", "app=api", "-o", "jsonpath={.items[*].status.podIP}").stdout.split())
    want = ",".join(f"{ip}:80" for ip in ips)
    wait_for(lambda: kubectl(kc, "get", "endpoints", "api",
                             "-o", "jsonpath={.subsets[0].addresses[*].ip}").stdout.split() == ips,
             timeout=30, interval=0.2, what="the service's endpoints")
    described = kubectl(kc, "describe", "service", "api")
    assert described.returncode == 0, described.stderr
    assert f"Endpoints:                {want}" in described.stdout
    slices = kubectl(kc, "get", "endpointslices", "-l", "kubernetes.io/service-name=api").stdout.splitlines()
    assert len(slices) == 2 and slices[1].split()[1:3] == ["IPv4", "80"]
    # Scaling to zero empties them; deleting the Service removes them.
    assert kubectl(kc, "scale", "deployment/api", "--replicas=0").returncode == 0
    wait_for(lambda: kubectl(kc, "get", "endpoints", "api", "-o", "jsonpath={.subsets}").stdout == "",
             timeout=30, interval=0.2, what="no endpoints")
    assert kubectl(kc, "delete", "service", "api").returncode == 0
    wait_for(lambda: kubectl(kc, "get", "endpoints", "api").returncode != 0,
             timeout=30, interval=0.2, what="endpoints gone")
    wait_for(lambda: kubectl(kc, "get", "endpointslices", "-l", "kubernetes.io/service-name=api",
                             "-o", "name").stdout.strip() == "",
             timeout=30, interval=0.2, what="slices gone")
    kubectl(kc, "delete", "deployment", "api")


def test_jobs_run_to_completion(fleet):
    out, _ = fleet
    kc = out / "wl-0.kubeconfig"
    assert kubectl(kc, "create", "job", "once", "--image=busybox", "--", "true").returncode == 0
    assert kubectl(kc, "wait", "--for=condition=complete", "job/once", "--timeout=25s").returncode == 0
    row = kubectl(kc, "get", "job", "once").stdout.splitlines()[1].split()
    assert row[:3] == ["once", "Complete", "1/1"]
    pod = kubectl(kc, "get", "pods", "-l", "job-name=once").stdout.splitlines()[1].split()
    assert pod[1:3] == ["0/1", "Completed"]
    # Five completions, two at a time.
    manifest = out / "job.yaml"
    manifest.write_text(yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "five"},
        "spec": {"completions": 5, "parallelism": 2,
                 "template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}}))
    assert kubectl(kc, "apply", "-f", str(manifest)).returncode == 0
    active = kubectl(kc, "get", "job", "five", "-o", "jsonpath={.status.active}").stdout
    assert active in ("", "1", "2")
    assert kubectl(kc, "wait", "--for=condition=complete", "job/five", "--timeout=30s").returncode == 0
    assert kubectl(kc, "get", "job", "five", "-o", "jsonpath={.status.succeeded}").stdout == "5"
    created = kubectl(kc, "get", "events", "--field-selector",
                      "involvedObject.name=five,reason=SuccessfulCreate", "-o", "name").stdout.split()
    assert len(created) == 5
    kubectl(kc, "delete", "job", "once", "five")


def test_one_shared_port_serves_every_cluster_by_server_name(fleet):
    out, lines = fleet
    assert any(l.startswith("shared endpoint https://127.0.0.1:") for l in lines)
    servers = set()
    for name in ["wl-0", "wl-1"]:
        kc = out / f"{name}.sni.kubeconfig"
        config_doc = yaml.safe_load(open(kc))
        cluster = config_doc["clusters"][0]["cluster"]
        assert cluster["tls-server-name"] == f"{name}.clusters.infrasim"
        servers.add(cluster["server"])
        nodes = kubectl(kc, "get", "nodes", "-o", "name")
        assert nodes.returncode == 0, nodes.stderr
        assert sorted(nodes.stdout.split()) == [f"node/{name}-control-plane-0", f"node/{name}-worker-0",
                                                f"node/{name}-worker-1"]
    assert len(servers) == 1  # one port for both
    # A name no cluster answers to gets no connection.
    stray = yaml.safe_load(open(out / "wl-0.sni.kubeconfig"))
    stray["clusters"][0]["cluster"]["tls-server-name"] = "nowhere.clusters.infrasim"
    path = out / "stray.kubeconfig"
    path.write_text(yaml.safe_dump(stray))
    refused = kubectl(path, "get", "nodes", "--request-timeout=5s")
    assert refused.returncode != 0


def test_daemonset_history_and_undo(fleet):
    out, _ = fleet
    kc = out / "wl-1.kubeconfig"
    ks = ["-n", "kube-system"]
    history = kubectl(kc, *ks, "rollout", "history", "daemonset/kube-proxy").stdout.split()
    assert "REVISION" in history and "1" in history
    assert kubectl(kc, *ks, "set", "image", "daemonset/kube-proxy",
                   "kube-proxy=registry.k8s.io/kube-proxy:v1.31.1").returncode == 0
    assert kubectl(kc, *ks, "rollout", "status", "daemonset/kube-proxy", "--timeout=30s").returncode == 0
    images = kubectl(kc, *ks, "get", "pods", "-l", "k8s-app=kube-proxy",
                     "-o", "jsonpath={.items[*].spec.containers[0].image}").stdout.split()
    assert images == ["registry.k8s.io/kube-proxy:v1.31.1"] * 3
    revisions = kubectl(kc, *ks, "get", "controllerrevisions", "-o", "jsonpath={.items[*].revision}").stdout.split()
    assert sorted(revisions) == ["1", "2"]
    assert kubectl(kc, *ks, "rollout", "undo", "daemonset/kube-proxy").returncode == 0
    assert kubectl(kc, *ks, "rollout", "status", "daemonset/kube-proxy", "--timeout=30s").returncode == 0
    image = kubectl(kc, *ks, "get", "daemonset", "kube-proxy", "-o",
                    "jsonpath={.spec.template.spec.containers[0].image}").stdout
    assert image == "registry.k8s.io/kube-proxy:v1.31.0"
    # The first template is current again: its revision is renumbered, not duplicated.
    revisions = kubectl(kc, *ks, "get", "controllerrevisions", "-o", "jsonpath={.items[*].revision}").stdout.split()
    assert sorted(revisions) == ["2", "3"]


def test_etcdctl_reaches_each_clusters_etcd_with_the_files_fleet_writes(fleet):
    out, lines = fleet
    table = {l.split()[0]: l.split()[1] for l in lines if l.startswith("wl-")}
    endpoint = table["wl-0"]
    files = out / "wl-0-etcd"
    etcdctl = ["etcdctl", f"--endpoints={endpoint}", f"--cacert={files / 'ca.crt'}",
               f"--cert={files / 'client.crt'}", f"--key={files / 'client.key'}", "--command-timeout=10s"]
    env = {**os.environ, "ETCDCTL_API": "3"}
    members = subprocess.run([*etcdctl, "member", "list"], capture_output=True, text=True, timeout=30, env=env)
    assert members.returncode == 0, members.stderr
    assert ", started, wl-0-control-plane-0, https://" in members.stdout
    status = subprocess.run([*etcdctl, "endpoint", "status", "-w", "json"], capture_output=True, text=True,
                            timeout=30, env=env)
    assert status.returncode == 0, status.stderr
    assert '"version":"3.5.16"' in status.stdout
    # wl-1's etcd files do not open wl-0's etcd: each cluster has its own etcd CA.
    other = out / "wl-1-etcd"
    crossed = subprocess.run(["etcdctl", f"--endpoints={endpoint}", f"--cacert={files / 'ca.crt'}",
                              f"--cert={other / 'client.crt'}", f"--key={other / 'client.key'}",
                              "--command-timeout=5s", "member", "list"],
                             capture_output=True, text=True, timeout=30, env=env)
    assert crossed.returncode != 0


def test_python_client_port_forwards_to_an_etcd_member(fleet):
    """The Python client's portforward (WebSocket, v4.channel.k8s.io) to etcd-<node>:2379
    reaches that member's etcd: a TLS handshake with the member's own certificate (signed by
    the etcd CA, naming the node), HTTP/2 negotiated, and etcd's first SETTINGS frame back."""
    import socket
    import ssl

    from kubernetes.stream import portforward

    out, _ = fleet
    api = client.CoreV1Api(config.new_client_from_config(str(out / "wl-0.kubeconfig")))
    node = "wl-0-control-plane-0"
    pf = portforward(api.connect_get_namespaced_pod_portforward, f"etcd-{node}", "kube-system",
                     ports="2379")
    sock = pf.socket(2379)
    sock.setblocking(True)
    sock.settimeout(10)
    files = out / "wl-0-etcd"
    ctx = ssl.create_default_context(cafile=str(files / "ca.crt"))
    ctx.load_cert_chain(str(files / "client.crt"), str(files / "client.key"))
    ctx.set_alpn_protocols(["h2"])
    tls = ctx.wrap_socket(sock, server_hostname="localhost")
    subject = dict(x[0] for x in tls.getpeercert()["subject"])
    assert subject["commonName"] == node
    assert tls.selected_alpn_protocol() == "h2"
    tls.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    frame = tls.recv(9)
    assert len(frame) == 9 and frame[3] == 0x04, frame  # a SETTINGS frame
    tls.close()
    pf.close()

    # A pod where nothing listens gets its error on the error channel, not a hang.
    pf = portforward(api.connect_get_namespaced_pod_portforward, f"kube-apiserver-{node}", "kube-system",
                     ports="2379")
    deadline = time.time() + 10
    while pf.error(2379) is None and time.time() < deadline:
        time.sleep(0.1)
    assert "nothing listens" in (pf.error(2379) or ""), pf.error(2379)
    pf.close()


def test_kubectl_certificate_approve_gets_a_node_certificate_signed(fleet, tmp_path):
    """A kubelet's client CSR made with openssl, approved with `kubectl certificate approve`:
    the cluster's certificate controller signs it with the cluster CA, and the certificate
    is a credential the cluster accepts as that node."""
    import base64
    out, _ = fleet
    kc = out / "wl-0.kubeconfig"
    key, req = tmp_path / "node.key", tmp_path / "node.csr"
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(req),
                    "-subj", "/O=system:nodes/CN=system:node:wl-0-extra"], check=True, capture_output=True)
    manifest = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                "metadata": {"name": "extra-node"},
                "spec": {"request": base64.b64encode(req.read_bytes()).decode(),
                         "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                         "usages": ["digital signature", "client auth"], "expirationSeconds": 86400}}
    path = tmp_path / "csr.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert kubectl(kc, "create", "-f", str(path)).returncode == 0
    pending = kubectl(kc, "get", "csr", "extra-node", "--no-headers").stdout.split()
    assert pending[-1] == "Pending" and pending[3] == "kubernetes-admin" and pending[4] == "24h", pending
    approve = kubectl(kc, "certificate", "approve", "extra-node")
    assert approve.returncode == 0, approve.stderr
    wait_for(lambda: kubectl(kc, "get", "csr", "extra-node", "--no-headers").stdout.split()[-1] == "Approved,Issued",
             timeout=30, interval=0.2, what="the certificate is issued")
    cert = kubectl(kc, "get", "csr", "extra-node", "-o", "jsonpath={.status.certificate}").stdout
    crt = tmp_path / "node.crt"
    crt.write_bytes(base64.b64decode(cert))
    ca = tmp_path / "ca.crt"
    cluster = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(ca), str(crt)], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    who = subprocess.run(["kubectl", "--server", cluster["server"], "--certificate-authority", str(ca),
                          "--client-certificate", str(crt), "--client-key", str(key),
                          "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"],
                         capture_output=True, text=True, timeout=30)
    assert who.stdout == "system:node:wl-0-extra", who.stderr


def test_kubectl_debug_adds_an_ephemeral_container_that_runs(fleet):
    """`kubectl debug` goes through pods/ephemeralcontainers; the node's kubelet starts the
    container and reports it running (never ready, as kubelets report ephemeral ones)."""
    out, _ = fleet
    kc = out / "wl-0.kubeconfig"
    pod = [l.split()[0] for l in kubectl(kc, "-n", "kube-system", "get", "pods").stdout.splitlines()[1:]
           if l.startswith("coredns-")][0]
    debug = kubectl(kc, "-n", "kube-system", "debug", pod, "--image=busybox:1.36", "--container=dbg")
    assert debug.returncode == 0, debug.stderr
    wait_for(lambda: kubectl(
        kc, "-n", "kube-system", "get", "pod", pod,
        "-o", "jsonpath={.status.ephemeralContainerStatuses[0].state.running.startedAt}").stdout != "",
        timeout=30, interval=0.2, what="the debug container runs")
    spec = kubectl(kc, "-n", "kube-system", "get", "pod", pod,
                   "-o", "jsonpath={.spec.ephemeralContainers[0].name} {.spec.ephemeralContainers[0].image}").stdout
    assert spec == "dbg busybox:1.36"
