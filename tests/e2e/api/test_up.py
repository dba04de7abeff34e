"""`infrasim up` as a process: its data directory, its kubeconfig, its shutdown."""

import re

import yaml
from kubernetes import client, config

from conftest import Plane, refused_credentials


def test_sigterm_stops_cleanly(tmp_path):
    plane = Plane(tmp_path)
    assert plane.core().list_namespace().items
    assert plane.stop() == 0


def test_the_ca_in_the_data_dir_keeps_old_kubeconfigs_valid(tmp_path):
    data = tmp_path / "data"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = Plane(tmp_path / "one", "--data-dir", str(data), ephemeral=False)
    old = open(first.kubeconfig).read()
    assert first.stop() == 0
    assert (data / "pki" / "ca.crt").exists() and (data / "pki" / "ca.key").exists()

    second = Plane(tmp_path / "two", "--data-dir", str(data), ephemeral=False)
    try:
        # The first run's admin credentials, pointed at the second run's port.
        moved = re.sub(r"https://127\.0\.0\.1:\d+", f"https://127.0.0.1:{second.port}", old)
        path = tmp_path / "old-kubeconfig"
        path.write_text(moved)
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(path)))
        names = sorted(n.metadata.name for n in api.list_namespace().items)
        assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    finally:
        second.stop()


def test_one_planes_credentials_never_open_another(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = Plane(tmp_path / "a")
    b = Plane(tmp_path / "b")
    try:
        # Trust b's CA (so the server side decides), but present a's admin certificate.
        kc_a = yaml.safe_load(open(a.kubeconfig))
        kc_b = yaml.safe_load(open(b.kubeconfig))
        kc_b["users"] = kc_a["users"]
        kc_b["users"][0]["name"] = kc_b["contexts"][0]["context"]["user"]
        path = tmp_path / "mixed"
        path.write_text(yaml.safe_dump(kc_b))
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(path)))
        refused_credentials(api.list_namespace)
        # b's own credentials work, so the refusal was about a's certificate.
        assert b.core().list_namespace().items
    finally:
        a.stop()
        b.stop()


def test_the_readmes_quick_start_gets_pods_that_run(tmp_path):
    """The README's first example, on a plane as `infrasim up` starts it: on the plane's own
    Node (as kind gives one), a Deployment becomes Pods that are scheduled and run, and
    `kubectl rollout status` returns."""
    plane = Plane(tmp_path)
    try:
        quick_start(plane)
    finally:
        plane.stop()


def quick_start(plane):
    ns = "demo"
    plane.kubectl("create", "namespace", ns)
    node = plane.kubectl("get", "node", "infrasim-control-plane", "-o",
                         "jsonpath={.status.conditions[?(@.type=='Ready')].status}").stdout
    assert node == "True"
    plane.kubectl("-n", ns, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=3")
    plane.kubectl("-n", ns, "rollout", "status", "deployment/web", "--timeout=60s", timeout=70)
    pods = plane.kubectl("-n", ns, "get", "pods", "-l", "app=web", "-o",
                         "jsonpath={range .items[*]}{.status.phase} {.spec.nodeName}{'\\n'}{end}").stdout.split("\n")
    assert sorted(p for p in pods if p) == ["Running infrasim-control-plane"] * 3
    ready = plane.kubectl("-n", ns, "get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}").stdout
    assert ready == "3"


def test_without_workloads_the_plane_only_stores_them(tmp_path):
    p = Plane(tmp_path, "--workloads=false", "--controllers=none")
    try:
        assert p.kubectl("get", "nodes", "-o", "name").stdout == ""
    finally:
        p.stop()
