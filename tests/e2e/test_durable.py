"""Durable state: `infrasim up` without `--ephemeral` keeps every acknowledged write across
SIGKILL and SIGTERM, driven with the Python `kubernetes` client: writers on eight threads are
cut off by SIGKILL three times in a row and everything they were told was written is back,
with its data; watches resume across a restart with no gap, and a resourceVersion older than
the window gets 410; a second process on the same directory is refused."""

import subprocess
import threading
import time

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from conftest import BINARY, Plane, free_port


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
