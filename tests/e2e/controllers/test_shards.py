"""One fleet over two processes: two `infrasim controller --shards 2` against one bare plane
(`infrasim up --controllers none`), each on its own port range as on separate machines. The
clusters split between them through the shard Leases, both hosts answer kubectl and take
Faults, and when the leader is killed the other takes its shard over (and the lead): its
clusters come back on the survivor's range, and the Cluster's endpoint and its kubeconfig
secret follow, signed by the same CA as before. Cluster API's watch filter is honoured too.
"""

import base64
import json
import signal
import socket
import subprocess
import time

import yaml

from conftest import BINARY, Plane, wait_for

RANGES = {"alpha": 22960, "beta": 22980}


def shard_of(key, count):
    """The shard infrasim puts a cluster in: FNV-1a of `<cluster>.<namespace>`."""
    h = 0xCBF29CE484222325
    for b in key.encode():
        h ^= b
        h = (h * 0x100000001B3) % (1 << 64)
    return h % count


def names_per_shard(count, per_shard):
    picked = {k: [] for k in range(count)}
    i = 0
    while any(len(v) < per_shard for v in picked.values()):
        name = f"s{i}"
        k = shard_of(f"{name}.default", count)
        if len(picked[k]) < per_shard:
            picked[k].append(name)
        i += 1
    return picked


def holders(plane):
    out = plane.kubectl("get", "leases", "-o", "json").stdout
    return {l["metadata"]["name"]: l["spec"].get("holderIdentity") for l in json.loads(out)["items"]}


def endpoint(plane, name):
    c = json.loads(plane.kubectl("get", "cluster", name, "-o", "json").stdout)
    return c["spec"].get("controlPlaneEndpoint", {})


def host_of(port):
    return next((who for who, lo in RANGES.items() if lo <= port <= lo + 15), None)


def kubeconfig(plane, name, path):
    secret = json.loads(plane.kubectl("get", "secret", f"{name}-kubeconfig", "-o", "json").stdout)
    text = base64.b64decode(secret["data"]["value"]).decode()
    path.write_text(text)
    return yaml.safe_load(text)


def nodes(path):
    out = subprocess.run(["kubectl", "--kubeconfig", str(path), "get", "nodes", "-o", "json"],
                         capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout)["items"] if out.returncode == 0 else None


def with_nodes(path, count):
    """The cluster's nodes once it has `count` of them (a taken-over cluster answers as soon as
    its control plane is back, its workers a moment later)."""
    found = nodes(path)
    return found if found is not None and len(found) == count else None


def refused(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def start(bare, who, tmp_path, data_dir=None):
    lo = RANGES[who]
    shared = ["--data-dir", str(data_dir)] if data_dir else []
    return subprocess.Popen(
        [BINARY, "controller", "--kubeconfig", bare.kubeconfig, "--shards", "2", "--identity", who,
         "--port-min", str(lo), "--port-max", str(lo + 15), "--vcsim", "false", "--vmgroup", "false",
         "--sip", "false", *shared],
        stdout=open(tmp_path / f"{who}.log", "a"), stderr=subprocess.STDOUT)


def bare_plane(tmp_path):
    """A plane that runs no controllers of its own."""
    workdir = tmp_path / "bare"
    workdir.mkdir()
    return Plane(workdir, "--controllers", "none")


def stop(procs, bare):
    for p in procs:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=10)
    bare.stop()


def test_a_member_that_joins_later_is_given_its_share(tmp_path):
    bare = bare_plane(tmp_path)
    procs = {"alpha": start(bare, "alpha", tmp_path)}
    try:
        wait_for(lambda: {holders(bare).get(f"infrasim-shard-{k}") for k in (0, 1)} == {"alpha"},
                 timeout=60, interval=0.5, what="alpha alone holding both shards")
        picked = names_per_shard(2, 1)
        for names in picked.values():
            out = subprocess.run([BINARY, "cluster", "--kubeconfig", bare.kubeconfig, "create", names[0],
                                  "--step-startup", "0s", "--workers", "1"],
                                 capture_output=True, text=True, timeout=150)
            assert out.returncode == 0, out.stdout + out.stderr
            assert host_of(endpoint(bare, names[0])["port"]) == "alpha"
        before = {names[0]: endpoint(bare, names[0])["port"] for names in picked.values()}
        procs["beta"] = start(bare, "beta", tmp_path)
        # alpha gives one shard back (its clusters leave alpha), beta takes it.
        given = wait_for(lambda: (lambda h: h if {h.get("infrasim-shard-0"), h.get("infrasim-shard-1")}
                                  == {"alpha", "beta"} else None)(holders(bare)),
                         timeout=60, interval=0.5, what="one shard each")
        moved = picked[next(k for k in (0, 1) if given[f"infrasim-shard-{k}"] == "beta")][0]
        wait_for(lambda: host_of(endpoint(bare, moved).get("port", 0)) == "beta", timeout=60,
                 interval=0.5, what=f"{moved}'s endpoint on beta")
        path = tmp_path / f"{moved}.kubeconfig"
        server = "https://{host}:{port}".format(**endpoint(bare, moved))
        wait_for(lambda: kubeconfig(bare, moved, path)["clusters"][0]["cluster"]["server"] == server,
                 timeout=60, interval=0.5, what=f"{moved}'s kubeconfig naming {server}")
        wait_for(lambda: with_nodes(path, 2), timeout=90, interval=0.5, what=f"{moved}'s two nodes")
        # alpha no longer serves it: its old port is closed.
        wait_for(lambda: refused(before[moved]), timeout=10, what=f"alpha's port {before[moved]} closed")
        bare.kubectl("wait", "--for=condition=Available", "cluster", "--all", "--timeout=120s", timeout=130)
        for p in procs.values():
            assert p.poll() is None
    finally:
        stop(procs.values(), bare)


def test_a_fleet_sharded_over_two_processes_survives_losing_one(tmp_path):
    bare = bare_plane(tmp_path)
    procs = {}
    logs = {who: tmp_path / f"{who}.log" for who in RANGES}
    try:
        for who in RANGES:
            procs[who] = start(bare, who, tmp_path)

        def log_text():
            return "\n".join(f"--- {w}\n{p.read_text(errors='replace')[-3000:]}" for w, p in logs.items())

        # Each process takes one shard: the member Leases let them see each other first.
        shards = wait_for(lambda: (lambda h: h if {h.get("infrasim-shard-0"), h.get("infrasim-shard-1")}
                                   == set(RANGES) else None)(holders(bare)),
                          timeout=60, interval=0.5, what="one shard each")
        assert shards.get("infrasim-member-alpha") == "alpha" and shards.get("infrasim-member-beta") == "beta"

        picked = names_per_shard(2, 2)
        for names in picked.values():
            for name in names:
                out = subprocess.run([BINARY, "cluster", "--kubeconfig", bare.kubeconfig, "create", name,
                                      "--step-startup", "0s", "--workers", "1", "--no-wait"],
                                     capture_output=True, text=True, timeout=60)
                assert out.returncode == 0, out.stdout + out.stderr
        bare.kubectl("wait", "--for=condition=Available", "cluster", "--all", "--timeout=150s", timeout=160)

        # Each cluster is served by the holder of its shard, on that process's range.
        first = {}
        for k, names in picked.items():
            for name in names:
                port = endpoint(bare, name)["port"]
                assert host_of(port) == shards[f"infrasim-shard-{k}"], (name, k, port, shards)
                path = tmp_path / f"{name}-before.kubeconfig"
                first[name] = kubeconfig(bare, name, path)
                wait_for(lambda: with_nodes(path, 2), timeout=30, what=f"{name}'s two nodes")

        # The leader runs the Fault controller; the other host puts a Fault in force on its own
        # clusters all the same.
        leader = holders(bare)["infrasim-controller"]
        survivor = next(w for w in RANGES if w != leader)
        faulted = picked[next(k for k in picked if shards[f"infrasim-shard-{k}"] == survivor)][0]
        fault = {"apiVersion": "sim.infrasim.dev/v1alpha1", "kind": "Fault",
                 "metadata": {"name": "down", "namespace": "default"},
                 "spec": {"clusterName": faulted, "type": "APIDown"}}
        bare.kubectl("apply", "-f", "-", input=json.dumps(fault))
        wait_for(lambda: nodes(tmp_path / f"{faulted}-before.kubeconfig") is None, timeout=30,
                 what=f"{faulted}'s endpoint down on {survivor}")
        bare.kubectl("delete", "fault", "down", "--timeout=30s", timeout=40)
        wait_for(lambda: nodes(tmp_path / f"{faulted}-before.kubeconfig"), timeout=30,
                 what=f"{faulted}'s endpoint back")

        # Kill the leader outright: its Leases run out, the survivor takes its shard over and
        # leads.
        victim_shard = next(k for k in picked if shards[f"infrasim-shard-{k}"] == leader)
        procs[leader].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        procs[leader].wait(timeout=10)
        wait_for(lambda: holders(bare).get(f"infrasim-shard-{victim_shard}") == survivor,
                 timeout=60, interval=0.5, what=f"{survivor} holding {leader}'s shard")
        # Figures for the notes (never asserted): seconds from the SIGKILL.
        print(f"takeover: shard held after {time.monotonic() - killed:.1f} s")

        for name in picked[victim_shard]:
            moved = wait_for(lambda: (lambda e: e if host_of(e.get("port", 0)) == survivor else None)(
                endpoint(bare, name)), timeout=90, interval=0.5, what=f"{name}'s endpoint on {survivor}")
            ref = json.loads(bare.kubectl("get", "cluster", name, "-o", "json").stdout)["spec"]["infrastructureRef"]
            # The Cluster moves first, its infrastructure cluster right after, with an Event.
            wait_for(lambda: json.loads(bare.kubectl("get", ref["kind"].lower(), ref["name"], "-o", "json").stdout)
                     ["spec"]["controlPlaneEndpoint"] == moved, timeout=10, what="the infrastructure endpoint")

            def moved_event():
                events = bare.kubectl("get", "events", "--field-selector", f"involvedObject.name={ref['name']}",
                                      "-o", "json").stdout
                return [e for e in json.loads(events)["items"] if e["reason"] == "EndpointMoved"]
            note = wait_for(moved_event, timeout=10, what="an EndpointMoved event")[0]["message"]
            assert f"to {moved['host']}:{moved['port']}" in note, note
            server = f"https://{moved['host']}:{moved['port']}"
            path = tmp_path / f"{name}-after.kubeconfig"
            wait_for(lambda: kubeconfig(bare, name, path)["clusters"][0]["cluster"]["server"] == server,
                     timeout=60, interval=0.5, what=f"{name}'s kubeconfig naming {server}")
            wait_for(lambda: with_nodes(path, 2), timeout=90, interval=0.5,
                     what=f"{name}'s two nodes on {survivor}")
            print(f"takeover: {name} answers on its new endpoint after {time.monotonic() - killed:.1f} s")
            # The cluster kept its CA: the credentials from before the move open it too.
            old = first[name]
            old["clusters"][0]["cluster"]["server"] = server
            old_path = tmp_path / f"{name}-old-credentials.kubeconfig"
            old_path.write_text(yaml.safe_dump(old))
            assert nodes(old_path) is not None, log_text()
        bare.kubectl("wait", "--for=condition=Available", "cluster", "--all", "--timeout=120s", timeout=130)
        # The survivor's own clusters never moved, and it leads now.
        for name in picked[1 - victim_shard]:
            assert host_of(endpoint(bare, name)["port"]) == survivor
        assert procs[survivor].poll() is None, log_text()
        wait_for(lambda: holders(bare).get("infrasim-controller") == survivor, timeout=30,
                 what=f"{survivor} leading")
    finally:
        stop(procs.values(), bare)


def workload_kubectl(path, *args):
    return subprocess.run(["kubectl", "--kubeconfig", str(path), *args], capture_output=True, text=True,
                          timeout=30)


def uids(path):
    """The uids of a workload cluster's kube-system namespace and of its ConfigMap `kept`: a
    cluster made again has new ones."""
    ns = workload_kubectl(path, "get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}")
    cm = workload_kubectl(path, "get", "configmap", "kept", "-o", "jsonpath={.metadata.uid}")
    return (ns.stdout, cm.stdout) if ns.returncode == 0 and cm.returncode == 0 else None


def moved_to(bare, name, who, tmp_path):
    """The kubeconfig of cluster `name` once its endpoint, and the kubeconfig Secret, are on
    process `who`'s range."""
    wait_for(lambda: host_of(endpoint(bare, name).get("port", 0)) == who, timeout=90, interval=0.5,
             what=f"{name}'s endpoint on {who}")
    server = "https://{host}:{port}".format(**endpoint(bare, name))
    path = tmp_path / f"{name}-{who}.kubeconfig"
    wait_for(lambda: kubeconfig(bare, name, path)["clusters"][0]["cluster"]["server"] == server,
             timeout=60, interval=0.5, what=f"{name}'s kubeconfig naming {server}")
    return path


def test_a_shared_data_dir_brings_a_shard_back_with_every_object(tmp_path):
    """With one data directory for both processes (shared storage), a shard given up and a
    shard taken from a killed process come back from the shard's home: what users made in
    its clusters is still there, with the same uids."""
    bare = bare_plane(tmp_path)
    shared = tmp_path / "shared"
    procs = {"alpha": start(bare, "alpha", tmp_path, shared)}
    try:
        wait_for(lambda: {holders(bare).get(f"infrasim-shard-{k}") for k in (0, 1)} == {"alpha"},
                 timeout=60, interval=0.5, what="alpha alone holding both shards")
        picked = {k: names[0] for k, names in names_per_shard(2, 1).items()}
        before = {}
        for k, name in picked.items():
            out = subprocess.run([BINARY, "cluster", "--kubeconfig", bare.kubeconfig, "create", name,
                                  "--step-startup", "0s", "--workers", "1"],
                                 capture_output=True, text=True, timeout=150)
            assert out.returncode == 0, out.stdout + out.stderr
            path = tmp_path / f"{name}.kubeconfig"
            kubeconfig(bare, name, path)
            made = workload_kubectl(path, "create", "configmap", "kept", "--from-literal=made=before")
            assert made.returncode == 0, made.stderr
            before[name] = uids(path)
            assert before[name], name
            # Each shard's clusters in the shard's own store.
            assert (shared / "shards" / f"shard-{k}" / "store.redb").exists()

        # beta joins: alpha sets one shard's home down, beta takes it up.
        procs["beta"] = start(bare, "beta", tmp_path, shared)
        given = wait_for(lambda: (lambda h: h if {h.get("infrasim-shard-0"), h.get("infrasim-shard-1")}
                                  == {"alpha", "beta"} else None)(holders(bare)),
                         timeout=60, interval=0.5, what="one shard each")
        moved = picked[next(k for k in (0, 1) if given[f"infrasim-shard-{k}"] == "beta")]
        path = moved_to(bare, moved, "beta", tmp_path)
        assert wait_for(lambda: uids(path), timeout=60, interval=0.5, what=f"{moved} on beta") == before[moved]

        # alpha killed outright: beta takes its shard, and its home, once the Lease runs out.
        kept = next(n for n in picked.values() if n != moved)
        procs["alpha"].send_signal(signal.SIGKILL)
        procs["alpha"].wait(timeout=10)
        path = moved_to(bare, kept, "beta", tmp_path)
        assert wait_for(lambda: uids(path), timeout=60, interval=0.5, what=f"{kept} on beta") == before[kept]
        wait_for(lambda: with_nodes(path, 2), timeout=60, interval=0.5, what=f"{kept}'s two nodes")
        bare.kubectl("wait", "--for=condition=Available", "cluster", "--all", "--timeout=120s", timeout=130)
        assert procs["beta"].poll() is None
        # Once beta is gone too, the homes are free and sound.
        procs["beta"].terminate()
        procs["beta"].wait(timeout=10)
        check = subprocess.run([BINARY, "store", "check", "--data-dir", str(shared)], capture_output=True,
                               text=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
        for k in (0, 1):
            assert f"shard {k}'s clusters: {shared}/shards/shard-{k}/store.redb is sound" in check.stdout, check.stdout
    finally:
        stop(procs.values(), bare)


def test_the_watch_filter_leaves_other_managers_objects_alone(tmp_path):
    bare = bare_plane(tmp_path)
    log = tmp_path / "controller.log"
    proc = subprocess.Popen(
        [BINARY, "controller", "--kubeconfig", bare.kubeconfig, "--watch-filter", "team-a",
         "--port-min", "22940", "--port-max", "22945", "--vcsim", "false", "--vmgroup", "false",
         "--sip", "false"], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        for name, team in (("theirs", "team-b"), ("unlabelled", None), ("mine", "team-a")):
            labels = {"cluster.x-k8s.io/watch-filter": team} if team else {}
            cluster = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                       "metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {}}
            wait_for(lambda: bare.kubectl("apply", "-f", "-", input=json.dumps(cluster), check=False)
                     .returncode == 0, timeout=60, interval=0.5, what="the Cluster CRD")

        def read(name):
            return json.loads(bare.kubectl("get", "cluster", name, "-o", "json").stdout)
        mine = wait_for(lambda: (lambda c: c if c.get("status", {}).get("phase") else None)(read("mine")),
                        timeout=60, interval=0.5, what="the labelled Cluster reconciled")
        assert "cluster.cluster.x-k8s.io" in mine["metadata"]["finalizers"]
        # Created before it, and never touched: no finalizer, no status.
        for name in ("theirs", "unlabelled"):
            other = read(name)
            assert not other["metadata"].get("finalizers"), other
            assert not other.get("status"), other
        bare.kubectl("delete", "cluster", "mine", "--timeout=60s", timeout=70)
        # Another manager's Cluster is deleted at once: nothing here holds it.
        bare.kubectl("delete", "cluster", "theirs", "unlabelled", "--timeout=10s", timeout=20)
    finally:
        stop([proc], bare)
