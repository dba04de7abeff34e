"""The Python `kubernetes` client (PyPI) against the embedded management plane."""

import threading

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from conftest import wait_for


def cm(name, data=None, labels=None, **meta):
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels=labels, **meta), data=data or {"k": "v"})


def test_crud_round_trip(plane, ns):
    core = plane.core()
    created = core.create_namespaced_config_map(ns, cm("a", {"x": "1"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.creation_timestamp is not None
    got = core.read_namespaced_config_map("a", ns)
    assert got.data == {"x": "1"}
    got.data["x"] = "2"
    replaced = core.replace_namespaced_config_map("a", ns, got)
    assert replaced.data == {"x": "2"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    core.delete_namespaced_config_map("a", ns)
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("a", ns)
    assert e.value.status == 404


def test_errors_are_status_objects_with_the_right_codes(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("dup"))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, cm("dup"))
    assert e.value.status == 409 and '"reason":"AlreadyExists"' in e.value.body
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, cm("Not_A_Name"))
    assert e.value.status == 422 and '"reason":"Invalid"' in e.value.body
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("nope", ns)
    assert e.value.status == 404 and '"reason":"NotFound"' in e.value.body
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map("no-such-namespace", cm("x"))
    assert e.value.status == 404


def test_anonymous_requests_get_401(plane):
    cfg = client.Configuration()
    cfg.host = f"https://127.0.0.1:{plane.port}"
    cfg.verify_ssl = False
    with pytest.raises(ApiException) as e:
        client.CoreV1Api(client.ApiClient(cfg)).list_namespace()
    assert e.value.status == 401


def test_stale_update_conflicts(plane, ns):
    core = plane.core()
    first = core.create_namespaced_config_map(ns, cm("c"))
    first.data = {"k": "one"}
    core.replace_namespaced_config_map("c", ns, first)
    first.data = {"k": "two"}
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("c", ns, first)
    assert e.value.status == 409
    assert core.read_namespaced_config_map("c", ns).data == {"k": "one"}


def test_concurrent_read_modify_write_loses_no_increment(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("counter", {"n": "0"}))
    threads, per_thread = 4, 15
    conflicts = []

    def worker():
        api = plane.core()
        for _ in range(per_thread):
            while True:
                current = api.read_namespaced_config_map("counter", ns)
                current.data["n"] = str(int(current.data["n"]) + 1)
                try:
                    api.replace_namespaced_config_map("counter", ns, current)
                    break
                except ApiException as e:
                    assert e.status == 409
                    conflicts.append(1)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert core.read_namespaced_config_map("counter", ns).data["n"] == str(threads * per_thread)


def test_watch_resumes_with_no_gap_and_no_duplicate(plane, ns):
    core = plane.core()
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    for i in range(6):
        core.create_namespaced_config_map(ns, cm(f"w{i}"))
    core.delete_namespaced_config_map("w0", ns)

    def events_from(rv, count):
        seen = []
        w = watch.Watch()
        for ev in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=5):
            seen.append((ev["type"], ev["object"].metadata.name, int(ev["object"].metadata.resource_version)))
            if len(seen) == count:
                w.stop()
        return seen

    # The namespace's own default objects were created before `start`; only ours follow.
    full = events_from(start, 7)
    assert [t for t, _, _ in full] == ["ADDED"] * 6 + ["DELETED"]
    versions = [rv for _, _, rv in full]
    assert versions == sorted(set(versions)), "strictly increasing, no duplicate"
    # Resume from the middle: exactly the tail, nothing skipped, nothing repeated.
    tail = events_from(str(versions[2]), 4)
    assert tail == full[3:]


def test_expired_resource_version_is_410(small_plane):
    core = small_plane.core()
    name = "expiry"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    first = core.create_namespaced_config_map(name, cm("e0"))
    for i in range(1, 40):
        core.create_namespaced_config_map(name, cm(f"e{i}"))
    with pytest.raises(ApiException) as e:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, name,
                                      resource_version=first.metadata.resource_version, timeout_seconds=5):
            pass
    assert e.value.status == 410


def test_pagination_covers_every_item_exactly_once(plane, ns):
    core = plane.core()
    for i in range(23):
        core.create_namespaced_config_map(ns, cm(f"p{i:02d}", labels={"page": "yes"}))
    names, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map(ns, label_selector="page=yes", limit=5, _continue=token)
        pages += 1
        names += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert pages == 5
    assert names == [f"p{i:02d}" for i in range(23)]


def test_label_and_field_selectors(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("a", labels={"app": "web", "tier": "front"}))
    core.create_namespaced_config_map(ns, cm("b", labels={"app": "db"}))
    core.create_namespaced_config_map(ns, cm("c", labels={"app": "cache", "legacy": "true"}))

    def names(**kw):
        return sorted(i.metadata.name for i in core.list_namespaced_config_map(ns, **kw).items)

    assert names(label_selector="app=web") == ["a"]
    assert names(label_selector="app!=web,app") == ["b", "c"]
    assert names(label_selector="app in (web,db)") == ["a", "b"]
    assert names(label_selector="app notin (web,db),app") == ["c"]
    assert names(label_selector="tier") == ["a"]
    assert names(label_selector="!legacy,app") == ["a", "b"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector="metadata.name!=b", label_selector="app") == ["a", "c"]
    with pytest.raises(ApiException) as e:
        core.list_namespaced_config_map(ns, field_selector="spec.nodeName=x")
    assert e.value.status == 400

    for name, node, phase in [("p1", "n1", None), ("p2", "n2", None)]:
        core.create_namespaced_pod(ns, client.V1Pod(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image="busybox")])))
    pods = core.list_namespaced_pod(ns, field_selector="spec.nodeName=n2").items
    assert [p.metadata.name for p in pods] == ["p2"]
    assert len(core.list_namespaced_pod(ns, field_selector="status.phase=Pending").items) == 2
    assert core.list_namespaced_pod(ns, field_selector="status.phase=Running").items == []


def test_finalizers_block_deletion(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("held", finalizers=["example.com/hold"]))
    core.delete_namespaced_config_map("held", ns)
    held = core.read_namespaced_config_map("held", ns)
    assert held.metadata.deletion_timestamp is not None
    held.metadata.finalizers = []
    core.replace_namespaced_config_map("held", ns, held)
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("held", ns)
    assert e.value.status == 404


def owner_ref(owner, block=False):
    return [client.V1OwnerReference(api_version="v1", kind="ConfigMap", name=owner.metadata.name,
                                    uid=owner.metadata.uid, block_owner_deletion=block)]


def gone(read):
    try:
        read()
        return False
    except ApiException as e:
        return e.status == 404


def test_owner_gc_background(plane, ns):
    core = plane.core()
    owner = core.create_namespaced_config_map(ns, cm("owner"))
    core.create_namespaced_config_map(ns, cm("dep", owner_references=owner_ref(owner)))
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Background")
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("dep", ns)))


def test_owner_gc_foreground_waits_for_blocking_dependents(plane, ns):
    core = plane.core()
    owner = core.create_namespaced_config_map(ns, cm("owner"))
    core.create_namespaced_config_map(
        ns, cm("dep", owner_references=owner_ref(owner, block=True), finalizers=["example.com/hold"]))
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Foreground")
    waiting = core.read_namespaced_config_map("owner", ns)
    assert "foregroundDeletion" in waiting.metadata.finalizers
    assert waiting.metadata.deletion_timestamp is not None
    dep = core.read_namespaced_config_map("dep", ns)
    assert dep.metadata.deletion_timestamp is not None
    dep.metadata.finalizers = []
    core.replace_namespaced_config_map("dep", ns, dep)
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("owner", ns)))


def test_owner_gc_orphan_keeps_dependents(plane, ns):
    core = plane.core()
    owner = core.create_namespaced_config_map(ns, cm("owner"))
    core.create_namespaced_config_map(ns, cm("dep", owner_references=owner_ref(owner)))
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Orphan")
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("owner", ns)))
    dep = core.read_namespaced_config_map("dep", ns)
    assert not dep.metadata.owner_references


def test_new_namespace_has_default_service_account_and_root_ca(plane, ns):
    core = plane.core()
    assert core.read_namespaced_service_account("default", ns).metadata.name == "default"
    ca = core.read_namespaced_config_map("kube-root-ca.crt", ns)
    assert ca.data["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    assert core.read_namespace(ns).metadata.labels["kubernetes.io/metadata.name"] == ns


def test_namespace_deletion_removes_content_then_namespace(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("plain"))
    core.create_namespaced_config_map(ns, cm("held", finalizers=["example.com/hold"]))
    core.delete_namespace(ns)
    terminating = core.read_namespace(ns)
    assert terminating.status.phase == "Terminating"
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("plain", ns)))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, cm("late"))
    assert e.value.status == 403
    held = core.read_namespaced_config_map("held", ns)
    held.metadata.finalizers = []
    core.replace_namespaced_config_map("held", ns, held)
    wait_for(lambda: gone(lambda: core.read_namespace(ns)))


def test_system_namespaces_cannot_be_deleted(plane):
    with pytest.raises(ApiException) as e:
        plane.core().delete_namespace("kube-system")
    assert e.value.status == 403


def test_deployments_keep_spec_generation_and_status(plane, ns):
    apps = client.AppsV1Api(plane.api())
    body = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]))))
    d = apps.create_namespaced_deployment(ns, body)
    assert d.metadata.generation == 1
    assert d.spec.strategy.type == "RollingUpdate"
    d.metadata.labels = {"touched": "yes"}
    d = apps.replace_namespaced_deployment("web", ns, d)
    assert d.metadata.generation == 1, "a metadata change is not a spec change"
    d.spec.replicas = 3
    d = apps.replace_namespaced_deployment("web", ns, d)
    assert d.metadata.generation == 2
    # A list body makes the client send a JSON patch (RFC 6902); strategic merge, the
    # client's choice for a dict body, arrives with the engine's patch work.
    patched = apps.patch_namespaced_deployment(
        "web", ns, [{"op": "add", "path": "/metadata/labels/p", "value": "1"}])
    assert patched.metadata.labels == {"touched": "yes", "p": "1"}


def deployment(name, containers):
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels={"app": name}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": name}),
                spec=client.V1PodSpec(containers=containers))))


def test_strategic_merge_patch_merges_containers_by_name(plane, ns):
    apps = client.AppsV1Api(plane.api())
    apps.create_namespaced_deployment(ns, deployment("smp", [
        client.V1Container(name="web", image="nginx:1", env=[client.V1EnvVar(name="A", value="1")]),
        client.V1Container(name="side", image="busybox")]))
    # A dict body is sent as a strategic merge patch by the Python client.
    patched = apps.patch_namespaced_deployment("smp", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "image": "nginx:2", "env": [{"name": "B", "value": "2"}]}]}}}})
    containers = patched.spec.template.spec.containers
    assert [(c.name, c.image) for c in containers] == [("web", "nginx:2"), ("side", "busybox")]
    assert [(e.name, e.value) for e in containers[0].env] == [("A", "1"), ("B", "2")]
    assert patched.metadata.generation == 2


def test_builtin_status_and_scale_subresources(plane, ns):
    apps = client.AppsV1Api(plane.api())
    apps.create_namespaced_deployment(ns, deployment("sub", [client.V1Container(name="c", image="nginx")]))
    current = apps.read_namespaced_deployment("sub", ns)
    current.spec.replicas = 7
    current.status = client.V1DeploymentStatus(replicas=1, ready_replicas=1, observed_generation=1)
    after = apps.replace_namespaced_deployment_status("sub", ns, current)
    assert after.spec.replicas == 1, "status updates ignore spec"
    assert after.status.ready_replicas == 1
    assert after.metadata.generation == 1
    scale = apps.read_namespaced_deployment_scale("sub", ns)
    assert scale.spec.replicas == 1 and scale.status.selector == "app=sub"
    scaled = apps.patch_namespaced_deployment_scale("sub", ns, {"spec": {"replicas": 4}})
    assert scaled.spec.replicas == 4
    assert apps.read_namespaced_deployment("sub", ns).spec.replicas == 4
