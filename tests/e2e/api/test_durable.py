"""Durable state: `infrasim up` without `--ephemeral` keeps every acknowledged write across
SIGKILL and SIGTERM, driven with the Python `kubernetes` client: writers on eight threads are
cut off by SIGKILL three times in a row and everything they were told was written is back,
with its data; watches resume across a restart with no gap, and a resourceVersion older than
the window gets 410; a second process on the same directory is refused."""

import json
import subprocess
import threading
import time

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
import yaml

from conftest import BINARY, Plane, fleet_ready, free_port, wait_for


def durable(workdir, *extra):
    return Plane(workdir, "--data-dir", str(workdir / "data"), "--controllers", "none", *extra,
                 ephemeral=False)


def cm(name, value):
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, finalizers=["example.com/keep"]),
                              data={"k": value})


def load(plane, cycle, acked, top, lock, stop, t):
    """Creates ConfigMaps and bumps a counter ConfigMap until the server dies, recording what
    was acknowledged."""
    api = client.CoreV1Api(plane.api())
    counter = f"counter-{t}"
    i = 0
    while not stop.is_set():
        name = f"c{cycle}-t{t}-{i}"
        try:
            made = api.create_namespaced_config_map("default", cm(name, f"{cycle}/{i}"),
                                                    _request_timeout=5)
            with lock:
                acked[name] = f"{cycle}/{i}"
                top[0] = max(top[0], int(made.metadata.resource_version))
            value = f"{cycle}/{i}"
            api.patch_namespaced_config_map(counter, "default", {"data": {"k": value}},
                                            _request_timeout=5)
            with lock:
                acked[counter] = value
        except Exception:  # noqa: BLE001 - the server was killed mid-request: not acknowledged
            return
        i += 1


def test_acknowledged_writes_survive_sigkill_three_times_in_a_row(tmp_path):
    acked, top, lock = {}, [0], threading.Lock()
    for cycle in range(3):
        plane = durable(tmp_path)
        core = plane.core()
        listed = core.list_namespaced_config_map("default")
        got = {c.metadata.name: (c.data or {}).get("k") for c in listed.items}
        for name, value in acked.items():
            if name.startswith("counter-"):
                # The last acknowledged value, or the one after it (written, the answer lost).
                cyc, i = value.split("/")
                assert got[name] in (value, f"{cyc}/{int(i) + 1}"), (name, got.get(name), value)
            else:
                assert got.get(name) == value, f"acknowledged {name}={value}, found {got.get(name)}"
        assert int(listed.metadata.resource_version) >= top[0], "resourceVersions never go back"
        for t in range(8):
            try:
                core.create_namespaced_config_map("default", cm(f"counter-{t}", "none"))
            except ApiException as e:
                assert e.status == 409
        stop = threading.Event()
        writers = [threading.Thread(target=load, args=(plane, cycle, acked, top, lock, stop, t))
                   for t in range(8)]
        for w in writers:
            w.start()
        time.sleep(1.5)
        plane.proc.kill()  # SIGKILL, mid-load
        plane.proc.wait(timeout=10)
        stop.set()
        for w in writers:
            w.join(timeout=30)
        with lock:
            made = sum(1 for n in acked if n.startswith(f"c{cycle}-"))
        assert made > 50, f"only {made} writes acknowledged in cycle {cycle}:\n{plane.log_tail()}"
    plane = durable(tmp_path)
    try:
        got = {c.metadata.name: (c.data or {}).get("k") for c in plane.core().list_namespaced_config_map("default").items}
        missing = [n for n, v in acked.items() if not n.startswith("counter-") and got.get(n) != v]
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
        # The next write takes a higher resourceVersion than any before the restarts.
        newest = max(int(c.metadata.resource_version)
                     for c in plane.core().list_namespaced_config_map("default").items)
        made = plane.core().create_namespaced_config_map("default", cm("after", "x"))
        assert int(made.metadata.resource_version) > newest
    finally:
        plane.stop()


def test_sigterm_mid_load_finishes_cleanly_and_keeps_every_acknowledged_write(tmp_path):
    plane = durable(tmp_path)
    acked, top, lock, stop = {}, [0], threading.Lock(), threading.Event()
    core = plane.core()
    for t in range(8):
        core.create_namespaced_config_map("default", cm(f"counter-{t}", "none"))
    writers = [threading.Thread(target=load, args=(plane, 0, acked, top, lock, stop, t))
               for t in range(8)]
    for w in writers:
        w.start()
    time.sleep(1.0)
    assert plane.stop() == 0, f"SIGTERM under load exits cleanly:\n{plane.log_tail()}"
    stop.set()
    for w in writers:
        w.join(timeout=30)
    plane = durable(tmp_path)
    try:
        got = {c.metadata.name: (c.data or {}).get("k")
               for c in plane.core().list_namespaced_config_map("default").items}
        missing = [n for n, v in acked.items() if not n.startswith("counter-") and got.get(n) != v]
        assert len(acked) > 50 and not missing, (len(acked), missing[:5])
    finally:
        plane.stop()


def test_watches_resume_across_a_restart_and_older_versions_get_410(tmp_path):
    plane = durable(tmp_path, "--watch-window", "40")
    core = plane.core()
    first = core.create_namespaced_config_map("default", cm("w0", "0"))
    uid, rv0 = first.metadata.uid, first.metadata.resource_version
    for i in range(1, 5):
        core.create_namespaced_config_map("default", cm(f"w{i}", str(i)))
    assert plane.stop() == 0, "SIGTERM closes cleanly"

    plane = durable(tmp_path, "--watch-window", "40")
    try:
        core = plane.core()
        back = core.read_namespaced_config_map("w0", "default")
        assert (back.metadata.uid, back.metadata.resource_version) == (uid, rv0)
        assert back.metadata.finalizers == ["example.com/keep"]
        core.create_namespaced_config_map("default", cm("w5", "5"))
        # A watch from before the restart gets every later event, in order, no gap.
        events = plane.watch_events("/api/v1/namespaces/default/configmaps",
                                    {"resourceVersion": rv0}, count=5, timeout=5)
        assert [e["object"]["metadata"]["name"] for e in events] == ["w1", "w2", "w3", "w4", "w5"]
        assert all(e["type"] == "ADDED" for e in events)
        # So does the client's own watch helper (list-then-watch, as an informer does).
        seen = []
        for e in watch.Watch().stream(core.list_namespaced_config_map, "default",
                                       resource_version=rv0, timeout_seconds=3):
            seen.append(e["object"].metadata.name)
            if len(seen) == 5:
                break
        assert seen == ["w1", "w2", "w3", "w4", "w5"]
        # Past the window (40 events), the old version is gone: 410, never a silent gap.
        for i in range(50):
            core.patch_namespaced_config_map("w1", "default", {"data": {"k": str(i)}})
    finally:
        plane.stop()
    plane = durable(tmp_path, "--watch-window", "40")
    try:
        with pytest.raises(ApiException) as e:
            for _ in watch.Watch().stream(plane.core().list_namespaced_config_map, "default",
                                           resource_version=rv0, timeout_seconds=3):
                pass
        assert e.value.status == 410
        # A second process on the same directory is refused, and the first goes on serving.
        other = subprocess.run([BINARY, "up", "--data-dir", str(tmp_path / "data"),
                                "--listen", f"127.0.0.1:{free_port()}",
                                "--kubeconfig", str(tmp_path / "other-kubeconfig")],
                               capture_output=True, text=True, timeout=30)
        assert other.returncode != 0
        assert "in use by another infrasim process" in other.stderr, other.stderr
        assert plane.core().read_namespaced_config_map("w0", "default").data == {"k": "0"}
    finally:
        plane.stop()


def run(*args, timeout=120):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def workload_objects(kubeconfig):
    """Every Node, Pod, ConfigMap, Service and Lease of a workload cluster: uid and
    resourceVersion by kind, namespace and name (None while the endpoint does not answer)."""
    out = run("kubectl", "--kubeconfig", str(kubeconfig), "get",
              "nodes,pods,configmaps,services,leases,deployments,daemonsets", "-A", "-o", "json",
              timeout=30)
    if out.returncode != 0:
        return None
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]):
            (o["metadata"]["uid"], o["metadata"]["resourceVersion"])
            for o in json.loads(out.stdout)["items"]}


def settled(kubeconfig):
    """The workload cluster's objects once its own controllers have stopped changing them."""
    def same_twice():
        first = workload_objects(kubeconfig)
        time.sleep(1)
        return first if first is not None and first == workload_objects(kubeconfig) else None
    return wait_for(same_twice, timeout=60, what="a settled workload cluster")


def machines(plane):
    """Each Machine and DevMachine (the in-memory backend `infrasim cluster` uses): its uid and when each of its conditions last moved."""
    items = json.loads(plane.kubectl("get", "machines,devmachines", "-o", "json").stdout)["items"]
    return {(m["kind"], m["metadata"]["name"]): (
        m["metadata"]["uid"],
        sorted((c["type"], c.get("lastTransitionTime")) for c in m["status"].get("conditions", [])))
        for m in items}


def test_a_cluster_api_workload_cluster_comes_back_after_sigkill(tmp_path):
    """A Cluster API cluster made by the in-memory provider survives SIGKILL of `up`: the
    kubeconfig written before reaches it at the same endpoint, every object is back with its
    uid and resourceVersion, no Machine is replaced or started again, and it still scales.
    Deleted, it stays deleted."""
    args = ("--data-dir", str(tmp_path / "data"), "--port-min", "22700", "--port-max", "22720")
    plane = Plane(tmp_path, *args, ephemeral=False)
    cli = [BINARY, "cluster", "--kubeconfig", plane.kubeconfig, "-n", "default"]
    try:
        made = run(*cli, "create", "k1", "--control-planes", "1", "--workers", "1",
                   "--step-startup", "100ms")
        assert made.returncode == 0 and "is Available" in made.stdout, made.stderr
        path = tmp_path / "k1.kubeconfig"
        path.write_text(run(*cli, "kubeconfig", "k1").stdout)
        endpoint = yaml.safe_load(path.read_text())["clusters"][0]["cluster"]["server"]
        before = settled(path)
        started = machines(plane)
        assert len(started) == 4, started.keys()
    finally:
        plane.proc.kill()
        plane.proc.wait(timeout=10)

    plane = Plane(tmp_path, *args, ephemeral=False)
    try:
        assert "workload clusters: durable" in plane.log_tail(200) and "(1 restored" in plane.log_tail(200), \
            plane.log_tail()
        after = wait_for(lambda: workload_objects(path), timeout=30, what="the old kubeconfig reaches k1")
        assert yaml.safe_load(path.read_text())["clusters"][0]["cluster"]["server"] == endpoint
        assert set(after) == set(before), set(after) ^ set(before)
        moved = [k for k in before if after[k] != before[k]]
        assert not moved, f"{len(moved)} objects changed across the restart, e.g. {moved[:3]}"
        # The controllers agree with the restored cluster: nothing replaced, nothing redone.
        time.sleep(2)
        assert machines(plane) == started
        plane.kubectl("wait", "--for=condition=Available", "cluster/k1", "--timeout=60s", timeout=70)
        assert workload_objects(path) == after, "the restored cluster stays as it was"
        # And it still scales, through its topology: a second worker joins the restored cluster.
        cluster = json.loads(plane.kubectl("get", "cluster", "k1", "-o", "json").stdout)
        workers = cluster["spec"]["topology"]["workers"]["machineDeployments"]
        workers[0]["replicas"] = 2
        plane.kubectl("patch", "cluster", "k1", "--type=merge", "-p",
                      json.dumps({"spec": {"topology": {"workers": {"machineDeployments": workers}}}}))
        wait_for(lambda: sum(1 for k in (workload_objects(path) or {}) if k[0] == "Node") == 3,
                 timeout=60, what="a third node")
        deleted = run(*cli, "delete", "k1")
        assert deleted.returncode == 0, deleted.stderr
    finally:
        plane.proc.kill()
        plane.proc.wait(timeout=10)

    plane = Plane(tmp_path, *args, ephemeral=False)
    try:
        assert "(0 restored" in plane.log_tail(200), plane.log_tail()
        assert workload_objects(path) is None, "a deleted cluster stays deleted"
    finally:
        plane.stop()


def start_fleet(out, data, base, count):
    proc = subprocess.Popen(
        [BINARY, "fleet", "--count", str(count), "--control-planes", "3", "--workers", "1",
         "--name-prefix", "wl", "--lease-renewal", "0", "--pod-startup", "0", "--data-dir", str(data),
         "--out", str(out), "--port-min", str(base), "--port-max", str(base + 20)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, fleet_ready(proc, timeout=60)


def etcd(files, endpoint, *args):
    out = run("etcdctl", f"--endpoints={endpoint}", f"--cacert={files / 'ca.crt'}",
              f"--cert={files / 'client.crt'}", f"--key={files / 'client.key'}", "--command-timeout=10s",
              "-w", "json", *args, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_fleet_in_a_data_dir_comes_back_after_sigkill_with_its_etcd_members(tmp_path):
    """`fleet --data-dir` brings its clusters back after SIGKILL: the kubeconfig and etcdctl
    files written before still work, every object has its resourceVersion, etcd has the same
    cluster and member IDs, the leader etcdctl moved it to, and the keys and lease etcdctl
    put; a larger --count adds only the clusters missing."""
    out, data, base = tmp_path / "out", tmp_path / "data", min(free_port(), 65000)
    proc, lines = start_fleet(out, data, base, 1)
    old = tmp_path / "before"
    try:
        old.mkdir()
        (old / "wl-0.kubeconfig").write_text((out / "wl-0.kubeconfig").read_text())
        subprocess.run(["cp", "-r", str(out / "wl-0-etcd"), str(old / "etcd")], check=True)
        endpoint = next(l.split()[1] for l in lines if l.startswith("wl-0 "))
        members = etcd(old / "etcd", endpoint, "member", "list")
        ids = sorted(m["ID"] for m in members["members"])
        cluster_id = members["header"]["cluster_id"]
        assert len(ids) == 3
        leader = etcd(old / "etcd", endpoint, "endpoint", "status")[0]["Status"]["leader"]
        # etcdctl moves the leadership: a change made through etcd's own API is kept too.
        target = next(i for i in ids if i != leader)
        moved = run("etcdctl", f"--endpoints={endpoint}", f"--cacert={old / 'etcd' / 'ca.crt'}",
                    f"--cert={old / 'etcd' / 'client.crt'}", f"--key={old / 'etcd' / 'client.key'}",
                    "move-leader", f"{target:x}", timeout=30)
        assert moved.returncode == 0, moved.stderr
        # Keys put with etcdctl, one of them on a lease, are kept too.
        files = old / "etcd"
        etcd(files, endpoint, "put", "/infrasim/a", "1")
        etcd(files, endpoint, "put", "/infrasim/a", "2")
        lease = etcd(files, endpoint, "lease", "grant", "600")["ID"]
        etcd(files, endpoint, "put", f"--lease={lease:x}", "/infrasim/leased", "x")
        keys = etcd(files, endpoint, "get", "/infrasim/", "--prefix")["kvs"]
        assert len(keys) == 2
        before = settled(old / "wl-0.kubeconfig")
    finally:
        proc.kill()
        proc.wait(timeout=10)

    proc, lines = start_fleet(out, data, base, 2)
    try:
        assert [l.split()[0] for l in lines if l.startswith("wl-")] == ["wl-0", "wl-1"]
        assert next(l.split()[1] for l in lines if l.startswith("wl-0 ")) == endpoint
        after = workload_objects(old / "wl-0.kubeconfig")
        assert after is not None, "the kubeconfig from before reaches the cluster"
        moved = [k for k in before if after.get(k) != before[k]]
        assert not moved and set(after) == set(before), f"{len(moved)} objects changed, e.g. {moved[:3]}"
        members = etcd(old / "etcd", endpoint, "member", "list")
        assert sorted(m["ID"] for m in members["members"]) == ids, "the same member IDs"
        status = etcd(old / "etcd", endpoint, "endpoint", "status")[0]["Status"]
        assert status["leader"] == target, "the leader etcdctl chose"
        assert status["header"]["cluster_id"] == members["header"]["cluster_id"] == cluster_id
        got = etcd(old / "etcd", endpoint, "get", "/infrasim/", "--prefix")
        assert got["kvs"] == keys, "keys with their values, revisions, versions and lease"
        alive = etcd(old / "etcd", endpoint, "lease", "timetolive", f"{lease:x}", "--keys")
        assert 0 < alive["ttl"] <= 600 and len(alive["keys"]) == 1, alive
        assert workload_objects(out / "wl-1.kubeconfig"), "the cluster missing was made"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_a_controller_with_a_data_dir_brings_its_clusters_back_after_sigkill(tmp_path):
    """`infrasim controller --data-dir` against a plane elsewhere: killed and started again,
    it serves the workload cluster it made as it was: the kubeconfig from before works and
    every object keeps its uid and resourceVersion."""
    bare = Plane(tmp_path, "--controllers", "none")
    data = tmp_path / "controller-data"
    log = open(tmp_path / "controller.log", "a")

    def controller():
        return subprocess.Popen(
            [BINARY, "controller", "--kubeconfig", bare.kubeconfig, "--leader-elect", "false",
             "--port-min", "22760", "--port-max", "22780", "--data-dir", str(data)],
            stdout=log, stderr=subprocess.STDOUT)
    def running():
        return wait_for(lambda: "controllers: " in (tmp_path / "controller.log").read_text(),
                        timeout=30, what="the controllers running")
    proc = controller()
    cli = [BINARY, "cluster", "--kubeconfig", bare.kubeconfig]
    try:
        running()
        made = run(*cli, "create", "x1", "--step-startup", "0s")
        assert made.returncode == 0, made.stderr + (tmp_path / "controller.log").read_text()
        path = tmp_path / "x1.kubeconfig"
        path.write_text(run(*cli, "kubeconfig", "x1").stdout)
        before = settled(path)
        proc.kill()
        proc.wait(timeout=10)
        proc = controller()
        after = wait_for(lambda: workload_objects(path), timeout=30, what="the old kubeconfig reaches x1")
        assert after == before, f"{sum(1 for k in before if after.get(k) != before[k])} objects changed"
        assert "workload clusters: durable" in (tmp_path / "controller.log").read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        bare.stop()
