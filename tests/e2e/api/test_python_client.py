"""The Python `kubernetes` client (PyPI) against `infrasim up`.

Expected values are kube-apiserver's: status codes, Status reasons and messages, defaults,
watch and list semantics. Waits poll with a bounded deadline; nothing asserts on durations.
"""

import base64
import json
import threading

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from conftest import gone, unique, wait_for


def cm(name, data=None, labels=None, **meta):
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels=labels, **meta), data=data or {"k": "v"})


def pod(name, node=None, image="nginx:1.27", **meta):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, **meta),
        spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image=image)]))


def status_of(excinfo):
    """The Status object an ApiException carries, decoded."""
    return json.loads(excinfo.value.body)


# --- CRUD ---------------------------------------------------------------------------------


def test_configmap_crud_round_trip(plane, ns):
    core = plane.core()
    created = core.create_namespaced_config_map(ns, cm("a", {"x": "1"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.metadata.namespace == ns
    assert created.metadata.creation_timestamp is not None
    got = core.read_namespaced_config_map("a", ns)
    assert got.data == {"x": "1"}
    assert got.metadata.uid == created.metadata.uid
    got.data["x"] = "2"
    replaced = core.replace_namespaced_config_map("a", ns, got)
    assert replaced.data == {"x": "2"}
    assert replaced.metadata.uid == created.metadata.uid
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    assert [c.metadata.name for c in core.list_namespaced_config_map(ns).items] == ["a", "kube-root-ca.crt"]
    deleted = core.delete_namespaced_config_map("a", ns)
    # Objects without graceful deletion answer a delete with a Success Status.
    assert deleted.status == "Success"
    assert (deleted.details.name, deleted.details.kind) == ("a", "configmaps")
    assert deleted.details.uid == created.metadata.uid
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("a", ns)
    assert e.value.status == 404


def test_delete_answers_with_the_object_only_where_kube_apiserver_does(plane, ns):
    core = plane.core()
    svc = core.create_namespaced_service(ns, client.V1Service(
        metadata=client.V1ObjectMeta(name="s"),
        spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
    # The client decodes whatever comes back into the declared type, so the kind tells what
    # the server sent: kube-apiserver's service storage returns the deleted Service.
    would = core.delete_namespaced_service("s", ns, dry_run="All")
    assert (would.kind, would.metadata.uid) == ("Service", svc.metadata.uid)
    assert would.metadata.resource_version == svc.metadata.resource_version
    assert core.read_namespaced_service("s", ns).metadata.uid == svc.metadata.uid
    deleted = core.delete_namespaced_service("s", ns)
    assert isinstance(deleted, client.V1Service)
    assert (deleted.kind, deleted.metadata.uid) == ("Service", svc.metadata.uid)
    assert deleted.spec.ports[0].port == 80
    sa = core.create_namespaced_service_account(ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="sa")))
    deleted = core.delete_namespaced_service_account("sa", ns)
    assert (deleted.kind, deleted.metadata.uid) == ("ServiceAccount", sa.metadata.uid)
    # A ConfigMap's storage does not: a Success Status, dry run or not.
    made = core.create_namespaced_config_map(ns, cm("c"))
    for dry_run in ("All", None):
        answer = core.delete_namespaced_config_map("c", ns, dry_run=dry_run)
        assert isinstance(answer, client.V1Status)
        assert (answer.kind, answer.status, answer.details.uid) == ("Status", "Success", made.metadata.uid)
    assert gone(lambda: core.read_namespaced_config_map("c", ns))


def test_dry_run_answers_can_be_sent_back(plane, ns):
    core = plane.core()
    would = core.create_namespaced_config_map(ns, cm("dry", {"x": "1"}), dry_run="All")
    # Nothing was stored, so no resourceVersion; the rest is what a real create fills in.
    assert would.metadata.resource_version is None
    assert would.metadata.uid and would.metadata.creation_timestamp and would.metadata.managed_fields
    assert gone(lambda: core.read_namespaced_config_map("dry", ns))
    created = core.create_namespaced_config_map(ns, would)
    assert created.metadata.resource_version and created.data == {"x": "1"}
    # A dry-run replace answers the change at the stored version, which stays current.
    created.data = {"x": "2"}
    changed = core.replace_namespaced_config_map("dry", ns, created, dry_run="All")
    assert (changed.data, changed.metadata.resource_version) == ({"x": "2"}, created.metadata.resource_version)
    assert core.replace_namespaced_config_map("dry", ns, changed).data == {"x": "2"}


def test_pod_crud_and_registry_defaults(plane, ns):
    core = plane.core()
    p = core.create_namespaced_pod(ns, pod("p", image="nginx:1.27"))
    assert p.status.phase == "Pending"
    assert p.status.qos_class == "BestEffort"
    assert p.spec.restart_policy == "Always"
    assert p.spec.dns_policy == "ClusterFirst"
    assert p.spec.scheduler_name == "default-scheduler"
    assert p.spec.termination_grace_period_seconds == 30
    assert p.spec.security_context is not None
    c = p.spec.containers[0]
    assert c.image_pull_policy == "IfNotPresent"
    assert c.termination_message_path == "/dev/termination-log"
    assert c.termination_message_policy == "File"
    latest = core.create_namespaced_pod(ns, pod("latest", image="busybox"))
    assert latest.spec.containers[0].image_pull_policy == "Always"
    core.delete_namespaced_pod("latest", ns)
    wait_for(lambda: gone(lambda: core.read_namespaced_pod("latest", ns)), what="unscheduled pod deleted")


def test_pod_spec_is_immutable_but_for_images(plane, ns):
    core = plane.core()
    p = core.create_namespaced_pod(ns, pod("p", image="nginx:1.27"))
    # An image change is one of the few pod spec updates allowed ...
    p.spec.containers[0].image = "nginx:1.28"
    p = core.replace_namespaced_pod("p", ns, p)
    assert p.spec.containers[0].image == "nginx:1.28"
    # ... a command change is not.
    p.spec.containers[0].command = ["sleep", "1"]
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_pod("p", ns, p)
    assert e.value.status == 422
    assert "pod updates may not change fields other than" in e.value.body
    assert core.read_namespaced_pod("p", ns).spec.containers[0].command is None


def test_a_scheduler_binds_a_pod_through_the_binding_subresource(plane, ns):
    core = plane.core()
    core.create_namespaced_pod(ns, pod("p"))
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p", annotations={"scheduled-by": "test"}),
        target=client.V1ObjectReference(kind="Node", name="node-1"))
    # The client decodes the answer as a V1Binding; the 201 Status is what kube-apiserver sends.
    core.create_namespaced_pod_binding("p", ns, binding, _preload_content=False)
    p = core.read_namespaced_pod("p", ns)
    assert p.spec.node_name == "node-1"
    assert p.metadata.annotations["scheduled-by"] == "test"
    assert [(c.type, c.status) for c in p.status.conditions or []] == [("PodScheduled", "True")]
    # A pod is bound once.
    binding.target.name = "node-2"
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod_binding("p", ns, binding, _preload_content=False)
    assert e.value.status == 409
    assert 'already assigned to node "node-1"' in status_of(e)["message"]
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod_binding("p", ns, client.V1Binding(
            metadata=client.V1ObjectMeta(name="p"), target=client.V1ObjectReference(name="")),
            _preload_content=False)
    assert e.value.status == 422


def test_pod_admission_defaults(plane, ns):
    # What kube-apiserver's default admission plugins (ServiceAccount, DefaultTolerationSeconds,
    # Priority) add to every pod.
    p = plane.core().create_namespaced_pod(ns, pod("adm"))
    assert p.spec.service_account_name == "default"
    assert p.spec.priority == 0
    tolerations = {(t.key, t.effect, t.toleration_seconds) for t in p.spec.tolerations or []}
    assert ("node.kubernetes.io/not-ready", "NoExecute", 300) in tolerations
    assert ("node.kubernetes.io/unreachable", "NoExecute", 300) in tolerations


def test_service_defaults_and_cluster_ips(plane, ns):
    core = plane.core()
    svc = core.create_namespaced_service(ns, client.V1Service(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(port=80)])))
    assert svc.spec.type == "ClusterIP"
    assert svc.spec.cluster_ip and svc.spec.cluster_ip != "None"
    # The attribute is cluster_i_ps or cluster_ips depending on the client release.
    assert svc.to_dict()["spec"].get("cluster_ips", svc.to_dict()["spec"].get("cluster_i_ps")) == [svc.spec.cluster_ip]
    assert svc.spec.session_affinity == "None"
    assert svc.spec.ip_families == ["IPv4"] and svc.spec.ip_family_policy == "SingleStack"
    assert svc.spec.internal_traffic_policy == "Cluster"
    assert svc.spec.ports[0].protocol == "TCP" and svc.spec.ports[0].target_port == 80
    other = core.create_namespaced_service(ns, client.V1Service(
        metadata=client.V1ObjectMeta(name="db"), spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=5432)])))
    assert other.spec.cluster_ip != svc.spec.cluster_ip
    headless = core.create_namespaced_service(ns, client.V1Service(
        metadata=client.V1ObjectMeta(name="headless"),
        spec=client.V1ServiceSpec(cluster_ip="None", ports=[client.V1ServicePort(port=80)])))
    assert headless.spec.cluster_ip == "None"


def test_secret_string_data_becomes_data(plane, ns):
    core = plane.core()
    secret = core.create_namespaced_secret(ns, client.V1Secret(
        metadata=client.V1ObjectMeta(name="s"), string_data={"pw": "hunter2"}))
    assert secret.type == "Opaque"
    assert secret.data == {"pw": base64.b64encode(b"hunter2").decode()}
    assert secret.string_data is None
    assert core.read_namespaced_secret("s", ns).data == secret.data


def test_serviceaccount_and_node_crud(plane, ns):
    core = plane.core()
    sa = core.create_namespaced_service_account(ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="robot")))
    assert sa.metadata.namespace == ns
    assert sorted(s.metadata.name for s in core.list_namespaced_service_account(ns).items) == ["default", "robot"]

    node_name = unique("node")
    node = core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=node_name, labels={"e2e": "yes"})))
    assert node.metadata.namespace is None
    assert [n.metadata.name for n in core.list_node(field_selector=f"metadata.name={node_name}").items] == [node_name]
    core.delete_node(node_name)
    wait_for(lambda: gone(lambda: core.read_node(node_name)), what="node deleted")


def test_deployment_defaults(plane, ns):
    apps = client.AppsV1Api(plane.api())
    d = apps.create_namespaced_deployment(ns, client.V1Deployment(
        metadata=client.V1ObjectMeta(name="d"),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels={"app": "d"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "d"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx:1.27")])))))
    assert d.spec.replicas == 1
    assert d.spec.strategy.type == "RollingUpdate"
    assert (d.spec.strategy.rolling_update.max_surge, d.spec.strategy.rolling_update.max_unavailable) == ("25%", "25%")
    assert d.spec.revision_history_limit == 10
    assert d.spec.progress_deadline_seconds == 600
    assert d.spec.template.spec.restart_policy == "Always"
    assert d.metadata.generation == 1


def test_update_semantics(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("u"))
    # No resourceVersion in the body: an unconditional update, allowed for configmaps.
    body = cm("u", {"k": "unconditional"})
    assert core.replace_namespaced_config_map("u", ns, body).data == {"k": "unconditional"}
    # Configmaps are not created by an update.
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("absent", ns, cm("absent"))
    assert e.value.status == 404
    # The name in the body must be the one in the URL.
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("u", ns, cm("other"))
    assert e.value.status == 400
    assert status_of(e)["reason"] == "BadRequest"
    assert "does not match the name on the URL" in status_of(e)["message"]
    # And the namespace in the body the one in the URL.
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, cm("wrong-ns", namespace="default"))
    assert e.value.status == 400
    assert "the namespace of the provided object does not match the namespace sent on the request" in e.value.body


def test_generate_name(plane, ns):
    made = plane.core().create_namespaced_config_map(ns, cm(None, generate_name="gen-"))
    assert made.metadata.name.startswith("gen-") and len(made.metadata.name) == len("gen-") + 5
    assert made.metadata.generate_name == "gen-"


def test_immutable_configmap(plane, ns):
    core = plane.core()
    frozen = core.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="frozen"), data={"a": "1"}, immutable=True))
    frozen.data = {"a": "2"}
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("frozen", ns, frozen)
    assert e.value.status == 422
    assert "field is immutable when `immutable` is set" in e.value.body


# --- errors -------------------------------------------------------------------------------


def test_errors_are_status_objects_with_kube_apiserver_reasons(plane, ns):
    core = plane.core()
    created = core.create_namespaced_config_map(ns, cm("dup"))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, cm("dup"))
    s = status_of(e)
    assert (e.value.status, s["kind"], s["status"], s["reason"], s["code"]) == (409, "Status", "Failure", "AlreadyExists", 409)
    assert s["message"] == 'configmaps "dup" already exists'
    assert (s["details"]["name"], s["details"]["kind"]) == ("dup", "configmaps")
    assert core.read_namespaced_config_map("dup", ns).metadata.uid == created.metadata.uid

    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, cm("Not_A_Name"))
    s = status_of(e)
    assert (e.value.status, s["reason"]) == (422, "Invalid")
    assert s["message"].startswith(
        'ConfigMap "Not_A_Name" is invalid: metadata.name: Invalid value: "Not_A_Name": '
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters")
    assert (s["details"]["name"], s["details"]["kind"]) == ("Not_A_Name", "ConfigMap")
    assert [(c["reason"], c["field"]) for c in s["details"]["causes"]] == [("FieldValueInvalid", "metadata.name")]

    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta()))
    assert e.value.status == 422
    assert "name or generateName is required" in e.value.body

    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, cm("badlabel", labels={"bad key": "v"}))
    assert e.value.status == 422
    assert [c["field"] for c in status_of(e)["details"]["causes"]] == ["metadata.labels"]

    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("nope", ns)
    s = status_of(e)
    assert (e.value.status, s["reason"], s["message"]) == (404, "NotFound", 'pods "nope" not found')
    assert (s["details"]["name"], s["details"]["kind"]) == ("nope", "pods")

    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map("no-such-namespace", cm("x"))
    assert e.value.status == 404
    assert status_of(e)["message"] == 'namespaces "no-such-namespace" not found'


def test_raw_protocol_errors(plane, ns):
    status, body = plane.raw("GET", f"/api/v1/namespaces/{ns}/gizmos")
    assert status == 404
    assert (body["kind"], body["reason"]) == ("Status", "NotFound")
    assert body["message"] == "the server could not find the requested resource"
    status, body = plane.raw("POST", f"/api/v1/namespaces/{ns}/configmaps", body="not an object")
    assert status == 400 and body["reason"] == "BadRequest"
    status, body = plane.raw("POST", f"/api/v1/namespaces/{ns}/configmaps/named",
                             body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "named"}})
    assert status == 405 and body["reason"] == "MethodNotAllowed"


def test_anonymous_requests_get_401(plane):
    cfg = client.Configuration()
    cfg.host = f"https://127.0.0.1:{plane.port}"
    cfg.verify_ssl = False
    with pytest.raises(ApiException) as e:
        client.CoreV1Api(client.ApiClient(cfg)).list_namespace()
    assert e.value.status == 401
    s = status_of(e)
    assert (s["kind"], s["status"], s["reason"], s["message"], s["code"]) == (
        "Status", "Failure", "Unauthorized", "Unauthorized", 401)


# --- optimistic concurrency ---------------------------------------------------------------


def test_stale_update_conflicts(plane, ns):
    core = plane.core()
    first = core.create_namespaced_config_map(ns, cm("c"))
    first.data = {"k": "one"}
    core.replace_namespaced_config_map("c", ns, first)
    first.data = {"k": "two"}
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("c", ns, first)
    s = status_of(e)
    assert (e.value.status, s["reason"]) == (409, "Conflict")
    assert s["message"] == ('Operation cannot be fulfilled on configmaps "c": the object has been modified; '
                            "please apply your changes to the latest version and try again")
    assert (s["details"]["name"], s["details"]["kind"]) == ("c", "configmaps")
    assert core.read_namespaced_config_map("c", ns).data == {"k": "one"}


def test_concurrent_read_modify_write_loses_no_increment(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("counter", {"n": "0"}))
    threads, per_thread = 5, 12
    errors = []

    def worker():
        api = plane.core()  # one ApiClient (connection pool) per thread
        try:
            for _ in range(per_thread):
                for _attempt in range(500):
                    current = api.read_namespaced_config_map("counter", ns)
                    current.data["n"] = str(int(current.data["n"]) + 1)
                    try:
                        api.replace_namespaced_config_map("counter", ns, current)
                        break
                    except ApiException as e:
                        if e.status != 409:
                            raise
                else:
                    raise AssertionError("500 conflicts in a row")
        except Exception as e:  # noqa: BLE001 - reported in the main thread
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not errors, errors
    assert core.read_namespaced_config_map("counter", ns).data["n"] == str(threads * per_thread)


# --- watch --------------------------------------------------------------------------------


def cm_path(ns):
    return f"/api/v1/namespaces/{ns}/configmaps"


def summary(events):
    return [(e["type"], e["object"]["metadata"].get("name"), int(e["object"]["metadata"]["resourceVersion"]))
            for e in events]


def test_watch_resumes_with_no_gap_and_no_duplicate(plane, ns):
    core = plane.core()
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    for i in range(6):
        core.create_namespaced_config_map(ns, cm(f"w{i}"))
    w1 = core.read_namespaced_config_map("w1", ns)
    w1.data = {"k": "changed"}
    core.replace_namespaced_config_map("w1", ns, w1)
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
    full = events_from(start, 8)
    assert [(t, n) for t, n, _ in full] == [("ADDED", f"w{i}") for i in range(6)] + [
        ("MODIFIED", "w1"), ("DELETED", "w0")]
    versions = [rv for _, _, rv in full]
    assert versions == sorted(set(versions)), "strictly increasing, no duplicate"
    assert versions[0] > int(start)
    # Resume from each point: exactly the tail, nothing skipped, nothing repeated.
    for i in (0, 2, 5, 6):
        assert events_from(str(versions[i]), len(full) - i - 1) == full[i + 1:]


def test_watch_without_resource_version_starts_with_the_current_state(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("before"))
    events = plane.watch_events(cm_path(ns), {}, count=2, timeout=5)
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in events) == [
        ("ADDED", "before"), ("ADDED", "kube-root-ca.crt")]


def test_watch_with_selectors_sees_objects_enter_and_leave(plane, ns):
    core = plane.core()
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, cm("x", labels={"app": "a"}))
    core.create_namespaced_config_map(ns, cm("y", labels={"app": "a"}))
    x = core.read_namespaced_config_map("x", ns)
    x.metadata.labels = {"app": "b"}
    x = core.replace_namespaced_config_map("x", ns, x)
    x.metadata.labels = {"app": "a"}
    core.replace_namespaced_config_map("x", ns, x)
    by_label = plane.watch_events(cm_path(ns), {"resourceVersion": start, "labelSelector": "app=a"}, count=4, timeout=5)
    # Leaving the selector is a DELETED event for this watcher, entering again an ADDED.
    assert [(t, n) for t, n, _ in summary(by_label)] == [
        ("ADDED", "x"), ("ADDED", "y"), ("DELETED", "x"), ("ADDED", "x")]
    by_name = plane.watch_events(cm_path(ns), {"resourceVersion": start, "fieldSelector": "metadata.name=y"},
                                 timeout=3)
    assert [(t, n) for t, n, _ in summary(by_name)] == [("ADDED", "y")]


def test_send_initial_events_ends_with_a_bookmark(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("one"))
    events = plane.watch_events(cm_path(ns), {
        "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "allowWatchBookmarks": "true"},
        until=lambda e: e["type"] == "BOOKMARK", timeout=10)
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in events[:-1]) == [
        ("ADDED", "kube-root-ca.crt"), ("ADDED", "one")]
    mark = events[-1]
    assert mark["type"] == "BOOKMARK"
    assert (mark["object"]["kind"], mark["object"]["apiVersion"]) == ("ConfigMap", "v1")
    assert mark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(mark["object"]["metadata"]["resourceVersion"]) >= max(
        int(e["object"]["metadata"]["resourceVersion"]) for e in events[:-1])


def test_bookmark_before_the_watch_times_out(plane, ns):
    # kube-apiserver sends a bookmark shortly (2 s) before a watch's timeoutSeconds, so a
    # client can resume from it; client-go's reflectors rely on that.
    core = plane.core()
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=unique("elsewhere"))))
    events = plane.watch_events(cm_path(ns), {"resourceVersion": rv, "allowWatchBookmarks": "true"}, timeout=6)
    marks = [e for e in events if e["type"] == "BOOKMARK"]
    assert marks, f"no BOOKMARK in {summary(events)}"
    assert int(marks[-1]["object"]["metadata"]["resourceVersion"]) >= int(rv)


def test_expired_resource_version_is_410_in_the_watch_stream(small_plane):
    core = small_plane.core()
    name = unique("expiry")
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    first = core.create_namespaced_config_map(name, cm("e0"))
    for i in range(1, 40):
        core.create_namespaced_config_map(name, cm(f"e{i}"))
    old = first.metadata.resource_version
    # Through the client's watch helper: an ApiException with 410.
    with pytest.raises(ApiException) as e:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, name, resource_version=old, timeout_seconds=5):
            pass
    assert e.value.status == 410
    # On the wire, as kube-apiserver does it: 200, then one ERROR event carrying a 410 Status.
    events = small_plane.watch_events(cm_path(name), {"resourceVersion": old}, timeout=5)
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    s = events[0]["object"]
    assert (s["kind"], s["apiVersion"], s["status"], s["code"], s["reason"]) == ("Status", "v1", "Failure", 410, "Expired")
    assert s["message"].startswith("too old resource version: ")
    # A recent resourceVersion still resumes on the same server.
    recent = core.list_namespaced_config_map(name).metadata.resource_version
    core.create_namespaced_config_map(name, cm("fresh"))
    events = small_plane.watch_events(cm_path(name), {"resourceVersion": recent}, count=1, timeout=5)
    assert [(t, n) for t, n, _ in summary(events)] == [("ADDED", "fresh")]


def test_exact_list_at_an_expired_resource_version_is_410(small_plane):
    core = small_plane.core()
    name = unique("exact")
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    old = core.create_namespaced_config_map(name, cm("x0")).metadata.resource_version
    for i in range(1, 40):
        core.create_namespaced_config_map(name, cm(f"x{i}"))
    status, body = small_plane.raw("GET", cm_path(name), {"resourceVersion": old, "resourceVersionMatch": "Exact"})
    assert (status, body["reason"]) == (410, "Expired")


# --- lists --------------------------------------------------------------------------------


def paged(list_fn, **kw):
    names, token, pages, versions = [], None, 0, set()
    while True:
        page = list_fn(_continue=token, **kw)
        pages += 1
        names += [i.metadata.name for i in page.items]
        versions.add(page.metadata.resource_version)
        token = page.metadata._continue
        if not token:
            return names, pages, versions
        assert pages < 100, "continue tokens never end"


def test_pagination_covers_every_item_exactly_once(plane, ns):
    core = plane.core()
    for i in range(23):
        core.create_namespaced_config_map(ns, cm(f"p{i:02d}", labels={"page": "yes"}))
    names, pages, versions = paged(lambda **kw: core.list_namespaced_config_map(ns, **kw),
                                   label_selector="page=yes", limit=5)
    assert pages == 5
    assert names == [f"p{i:02d}" for i in range(23)]
    assert len(versions) == 1, "every page is served from the first page's snapshot"
    exact = core.list_namespaced_config_map(ns, label_selector="page=yes", limit=23)
    assert len(exact.items) == 23 and not exact.metadata._continue
    first = core.list_namespaced_config_map(ns, limit=5)
    # Without selectors kube-apiserver counts what remains: 23 + kube-root-ca.crt - 5.
    assert first.metadata.remaining_item_count == 19


def test_continue_lists_a_consistent_snapshot(plane, ns):
    core = plane.core()
    for i in range(10):
        core.create_namespaced_config_map(ns, cm(f"s{i}"))
    page = core.list_namespaced_config_map(ns, limit=4)
    assert [i.metadata.name for i in page.items] == ["kube-root-ca.crt", "s0", "s1", "s2"]
    # Changes after the first page are not seen by its continuation.
    core.delete_namespaced_config_map("s7", ns)
    core.create_namespaced_config_map(ns, cm("s5a"))
    names, token = [], page.metadata._continue
    while token:
        nxt = core.list_namespaced_config_map(ns, limit=4, _continue=token)
        assert nxt.metadata.resource_version == page.metadata.resource_version
        names += [i.metadata.name for i in nxt.items]
        token = nxt.metadata._continue
    assert names == [f"s{i}" for i in range(3, 10)]
    # A fresh list sees them.
    assert "s5a" in [i.metadata.name for i in core.list_namespaced_config_map(ns).items]


def test_pagination_across_namespaces(plane):
    core = plane.core()
    spaces = sorted(unique("pg") for _ in range(3))
    for space in spaces:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=space)))
        for i in range(4):
            core.create_namespaced_config_map(space, cm(f"c{i}", labels={"e2e-pages": "across"}))
    got = []
    token = None
    while True:
        page = core.list_config_map_for_all_namespaces(label_selector="e2e-pages=across", limit=5, _continue=token)
        got += [(i.metadata.namespace, i.metadata.name) for i in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert got == [(space, f"c{i}") for space in spaces for i in range(4)]


def test_deletecollection_honours_selectors(plane, ns):
    core = plane.core()
    for name, tier in [("a", "x"), ("b", "x"), ("c", "y")]:
        core.create_namespaced_config_map(ns, cm(name, labels={"tier": tier}))
    status, body = plane.raw("DELETE", cm_path(ns), {"labelSelector": "tier=x"})
    assert status == 200
    # The answer is the list of what it deleted, as kube-apiserver's DeleteCollection gives.
    assert body["kind"] == "ConfigMapList"
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["a", "b"]
    assert sorted(i.metadata.name for i in core.list_namespaced_config_map(ns).items) == ["c", "kube-root-ca.crt"]


def test_delete_preconditions(plane, ns):
    core = plane.core()
    made = core.create_namespaced_config_map(ns, cm("pre"))
    with pytest.raises(ApiException) as e:
        core.delete_namespaced_config_map("pre", ns, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid="00000000-0000-0000-0000-000000000000")))
    assert e.value.status == 409 and status_of(e)["reason"] == "Conflict"
    assert "Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000" in status_of(e)["message"]
    made.data = {"k": "newer"}
    core.replace_namespaced_config_map("pre", ns, made)
    with pytest.raises(ApiException) as e:
        core.delete_namespaced_config_map("pre", ns, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version=made.metadata.resource_version)))
    assert e.value.status == 409
    core.delete_namespaced_config_map("pre", ns, body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=made.metadata.uid)))
    assert gone(lambda: core.read_namespaced_config_map("pre", ns))


def test_watch_across_namespaces_in_order(plane):
    core = plane.core()
    a, b = unique("wa"), unique("wb")
    before = core.list_namespace().metadata.resource_version
    for space in (a, b):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=space)))
    start = core.list_config_map_for_all_namespaces(limit=1).metadata.resource_version
    core.create_namespaced_config_map(b, cm("one", labels={"e2e-watch": "across"}))
    core.create_namespaced_config_map(a, cm("two", labels={"e2e-watch": "across"}))
    core.delete_namespaced_config_map("one", b)
    events = plane.watch_events("/api/v1/configmaps", {"resourceVersion": start, "labelSelector": "e2e-watch=across"},
                                count=3, timeout=5)
    assert [(e["type"], e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", b, "one"), ("ADDED", a, "two"), ("DELETED", b, "one")]
    ns_events = plane.watch_events("/api/v1/namespaces", {"resourceVersion": before}, count=2, timeout=5)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in ns_events] == [("ADDED", a), ("ADDED", b)]


def test_label_and_field_selectors(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("a", labels={"app": "web", "tier": "front"}))
    core.create_namespaced_config_map(ns, cm("b", labels={"app": "db"}))
    core.create_namespaced_config_map(ns, cm("c", labels={"app": "cache", "legacy": "true"}))

    def names(**kw):
        return sorted(i.metadata.name for i in core.list_namespaced_config_map(ns, **kw).items)

    assert names(label_selector="app=web") == ["a"]
    assert names(label_selector="app==web") == ["a"]
    assert names(label_selector="app!=web") == ["b", "c", "kube-root-ca.crt"]
    assert names(label_selector="app!=web,app") == ["b", "c"]
    assert names(label_selector="app in (web,db)") == ["a", "b"]
    assert names(label_selector="app notin (web,db)") == ["c", "kube-root-ca.crt"]
    assert names(label_selector="app notin (web,db),app") == ["c"]
    assert names(label_selector="tier") == ["a"]
    assert names(label_selector="!legacy") == ["a", "b", "kube-root-ca.crt"]
    assert names(label_selector="!legacy,app") == ["a", "b"]
    assert names(label_selector="app in (web,cache),tier notin (back)") == ["a", "c"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector="metadata.name==b") == ["b"]
    assert names(field_selector="metadata.name!=b", label_selector="app") == ["a", "c"]
    assert names(field_selector=f"metadata.namespace={ns},metadata.name=c") == ["c"]
    everywhere = core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items
    assert sorted(i.metadata.name for i in everywhere) == ["a", "b", "c", "kube-root-ca.crt"]
    assert {i.metadata.namespace for i in everywhere} == {ns}

    with pytest.raises(ApiException) as e:
        core.list_namespaced_config_map(ns, label_selector="app in (web")
    assert e.value.status == 400
    with pytest.raises(ApiException) as e:
        core.list_namespaced_config_map(ns, field_selector="spec.nodeName=x")
    assert e.value.status == 400 and status_of(e)["reason"] == "BadRequest"
    with pytest.raises(ApiException) as e:
        core.list_namespaced_pod(ns, field_selector="spec.bogus=x")
    assert e.value.status == 400
    assert status_of(e)["message"] == "field label not supported: spec.bogus"


def test_pod_field_selectors(plane, ns):
    core = plane.core()
    n1, n2 = unique("n1"), unique("n2")  # node names no other test uses: the server is shared
    core.create_namespaced_pod(ns, pod("p1", node=n1))
    core.create_namespaced_pod(ns, pod("p2", node=n2))
    core.create_namespaced_pod(ns, pod("p3"))
    p3 = core.read_namespaced_pod_status("p3", ns)
    p3.status.phase = "Running"
    core.replace_namespaced_pod_status("p3", ns, p3)

    def names(selector):
        return sorted(p.metadata.name for p in core.list_namespaced_pod(ns, field_selector=selector).items)

    assert names(f"spec.nodeName={n2}") == ["p2"]
    assert names("spec.nodeName=") == ["p3"]  # unscheduled, as the scheduler lists them
    assert names("spec.nodeName!=") == ["p1", "p2"]
    assert names("status.phase=Pending") == ["p1", "p2"]
    assert names("status.phase=Running") == ["p3"]
    assert names(f"status.phase!=Running,spec.nodeName={n1}") == ["p1"]
    everywhere = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={n1}").items
    assert [(p.metadata.namespace, p.metadata.name) for p in everywhere] == [(ns, "p1")]


# --- deletion: finalizers, owners, namespaces --------------------------------------------


def test_finalizers_block_deletion(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("held", finalizers=["example.com/hold"]))
    # The answer to a delete that has to wait is the object itself, marked for deletion.
    status, body = plane.raw("DELETE", f"{cm_path(ns)}/held")
    assert status == 200 and body["kind"] == "ConfigMap"
    assert body["metadata"]["deletionTimestamp"]
    held = core.read_namespaced_config_map("held", ns)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    assert held.metadata.finalizers == ["example.com/hold"]
    # Deleting it again changes nothing and is not an error.
    status, body = plane.raw("DELETE", f"{cm_path(ns)}/held")
    assert status == 200 and body["metadata"]["name"] == "held"
    # No new finalizer may be added once deletion started.
    held.metadata.finalizers = ["example.com/hold", "example.com/another"]
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("held", ns, held)
    assert e.value.status == 422
    assert "no new finalizers can be added if the object is being deleted" in e.value.body
    held = core.read_namespaced_config_map("held", ns)
    held.data = {"k": "still writable"}
    held = core.replace_namespaced_config_map("held", ns, held)
    assert held.data == {"k": "still writable"}
    held.metadata.finalizers = []
    core.replace_namespaced_config_map("held", ns, held)
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("held", ns)
    assert e.value.status == 404


def owner_ref(owner, block=None, kind="ConfigMap", api_version="v1"):
    return [client.V1OwnerReference(api_version=api_version, kind=kind, name=owner.metadata.name,
                                    uid=owner.metadata.uid, block_owner_deletion=block)]


def test_owner_gc_background(plane, ns):
    core = plane.core()
    owner = core.create_namespaced_config_map(ns, cm("owner"))
    core.create_namespaced_config_map(ns, cm("dep", owner_references=owner_ref(owner)))
    core.create_namespaced_pod(ns, pod("dep-pod", owner_references=owner_ref(owner)))
    core.create_namespaced_config_map(ns, cm("bystander"))
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Background")
    # The owner goes at once; its dependents (of any kind) after it.
    assert gone(lambda: core.read_namespaced_config_map("owner", ns))
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("dep", ns)), what="configmap dependent collected")
    wait_for(lambda: gone(lambda: core.read_namespaced_pod("dep-pod", ns)), what="pod dependent collected")
    assert core.read_namespaced_config_map("bystander", ns).metadata.name == "bystander"


def test_owner_gc_keeps_dependents_with_another_live_owner(plane, ns):
    core = plane.core()
    a = core.create_namespaced_config_map(ns, cm("owner-a"))
    b = core.create_namespaced_config_map(ns, cm("owner-b"))
    core.create_namespaced_config_map(ns, cm("shared", owner_references=owner_ref(a) + owner_ref(b)))
    core.delete_namespaced_config_map("owner-a", ns)

    def only_b_left():
        refs = core.read_namespaced_config_map("shared", ns).metadata.owner_references or []
        return [r.name for r in refs] == ["owner-b"]

    wait_for(only_b_left, what="dangling reference to owner-a removed from the dependent")
    core.delete_namespaced_config_map("owner-b", ns)
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("shared", ns)), what="dependent collected")


def test_owner_gc_collects_dependents_of_an_owner_that_never_existed(plane, ns):
    core = plane.core()
    ghost = cm("ghost")
    ghost.metadata.uid = "00000000-0000-0000-0000-00000000abcd"
    core.create_namespaced_config_map(ns, cm("orphaned", owner_references=owner_ref(ghost)))
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("orphaned", ns)), what="dangling dependent collected")


def test_owner_gc_foreground_waits_for_blocking_dependents(plane, ns):
    core = plane.core()
    owner = core.create_namespaced_config_map(ns, cm("owner"))
    core.create_namespaced_config_map(
        ns, cm("dep", owner_references=owner_ref(owner, block=True), finalizers=["example.com/hold"]))
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Foreground")
    waiting = core.read_namespaced_config_map("owner", ns)
    assert waiting.metadata.finalizers == ["foregroundDeletion"]
    assert waiting.metadata.deletion_timestamp is not None
    wait_for(lambda: core.read_namespaced_config_map("dep", ns).metadata.deletion_timestamp,
             what="dependent marked for deletion")
    # The owner waits while its blocking dependent exists.
    assert core.read_namespaced_config_map("owner", ns).metadata.finalizers == ["foregroundDeletion"]
    dep = core.read_namespaced_config_map("dep", ns)
    dep.metadata.finalizers = []
    core.replace_namespaced_config_map("dep", ns, dep)
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("dep", ns)), what="dependent deleted")
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("owner", ns)), what="owner deleted after dependent")


def test_owner_gc_foreground_without_blockers_deletes_everything(plane, ns):
    core = plane.core()
    owner = core.create_namespaced_config_map(ns, cm("owner"))
    for i in range(3):
        core.create_namespaced_config_map(ns, cm(f"dep{i}", owner_references=owner_ref(owner, block=True)))
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Foreground")
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("owner", ns)), what="owner deleted")
    assert all(gone(lambda i=i: core.read_namespaced_config_map(f"dep{i}", ns)) for i in range(3)), \
        "foreground: the owner goes only after its blocking dependents"


def test_owner_gc_orphan_keeps_dependents(plane, ns):
    core = plane.core()
    owner = core.create_namespaced_config_map(ns, cm("owner"))
    core.create_namespaced_config_map(ns, cm("dep", owner_references=owner_ref(owner)))
    core.create_namespaced_config_map(ns, cm("dep2", owner_references=owner_ref(owner)))
    core.delete_namespaced_config_map("owner", ns, propagation_policy="Orphan")
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("owner", ns)), what="owner deleted")
    for name in ("dep", "dep2"):
        dep = core.read_namespaced_config_map(name, ns)
        assert not dep.metadata.owner_references
        assert dep.metadata.deletion_timestamp is None


def test_new_namespace_is_active_with_default_service_account_and_root_ca(plane, ns):
    core = plane.core()
    namespace = core.read_namespace(ns)
    assert namespace.status.phase == "Active"
    assert namespace.spec.finalizers == ["kubernetes"]
    assert namespace.metadata.labels["kubernetes.io/metadata.name"] == ns
    assert core.read_namespaced_service_account("default", ns).metadata.name == "default"
    ca = core.read_namespaced_config_map("kube-root-ca.crt", ns)
    kubeconfig = yaml.safe_load(open(plane.kubeconfig))
    cluster_ca = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    assert ca.data["ca.crt"].strip() == cluster_ca.strip(), "kube-root-ca.crt holds the cluster CA"


def test_system_namespaces_and_their_defaults(plane):
    core = plane.core()
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert core.read_namespaced_service_account("default", name).metadata.name == "default"
        assert "ca.crt" in core.read_namespaced_config_map("kube-root-ca.crt", name).data


def test_default_namespace_has_the_kubernetes_service(plane):
    svc = plane.core().read_namespaced_service("kubernetes", "default")
    assert svc.spec.type == "ClusterIP"
    assert [(p.name, p.port, p.protocol) for p in svc.spec.ports] == [("https", 443, "TCP")]
    assert svc.metadata.labels == {"component": "apiserver", "provider": "kubernetes"}


def test_namespace_deletion_removes_content_then_namespace(plane, ns):
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("plain"))
    core.create_namespaced_pod(ns, pod("p"))
    core.create_namespaced_config_map(ns, cm("held", finalizers=["example.com/hold"]))
    status, body = plane.raw("DELETE", f"/api/v1/namespaces/{ns}")
    assert status == 200 and body["kind"] == "Namespace"
    assert body["status"]["phase"] == "Terminating" and body["metadata"]["deletionTimestamp"]
    terminating = core.read_namespace(ns)
    assert terminating.status.phase == "Terminating"
    assert terminating.metadata.deletion_timestamp is not None
    wait_for(lambda: gone(lambda: core.read_namespaced_config_map("plain", ns)), what="content deleted")
    wait_for(lambda: gone(lambda: core.read_namespaced_pod("p", ns)), what="pod deleted")
    wait_for(lambda: gone(lambda: core.read_namespaced_service_account("default", ns)), what="default SA deleted")
    with pytest.raises(ApiException) as e:
        core.create_namespaced_config_map(ns, cm("late"))
    s = status_of(e)
    assert (e.value.status, s["reason"]) == (403, "Forbidden")
    assert s["message"] == (f'configmaps "late" is forbidden: unable to create new content in namespace {ns} '
                            "because it is being terminated")
    # The held object keeps the namespace Terminating until its finalizer goes.
    held = core.read_namespaced_config_map("held", ns)
    assert held.metadata.deletion_timestamp is not None
    assert core.read_namespace(ns).status.phase == "Terminating"
    held.metadata.finalizers = []
    core.replace_namespaced_config_map("held", ns, held)
    wait_for(lambda: gone(lambda: core.read_namespace(ns)), what="namespace deleted")
    assert core.list_namespaced_config_map(ns).items == []


def test_terminating_namespace_reports_remaining_finalizers(plane, ns):
    # The namespace controller's conditions while content with finalizers remains.
    core = plane.core()
    core.create_namespaced_config_map(ns, cm("held", finalizers=["example.com/hold"]))
    core.delete_namespace(ns)

    def condition():
        conds = {c.type: c for c in core.read_namespace(ns).status.conditions or []}
        c = conds.get("NamespaceFinalizersRemaining")
        return c if c and c.status == "True" else None

    c = wait_for(condition, what="NamespaceFinalizersRemaining=True")
    assert c.reason == "SomeFinalizersRemain"
    assert c.message == "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    held = core.read_namespaced_config_map("held", ns)
    held.metadata.finalizers = []
    core.replace_namespaced_config_map("held", ns, held)
    wait_for(lambda: gone(lambda: core.read_namespace(ns)), what="namespace deleted")


def test_system_namespaces_cannot_be_deleted(plane):
    with pytest.raises(ApiException) as e:
        plane.core().delete_namespace("kube-system")
    assert e.value.status == 403
    assert plane.core().read_namespace("kube-system").status.phase == "Active"


# --- writes beyond create/update (PATCH and subresources) ---------------------------------


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


def test_an_oversized_body_gets_a_413_status_not_a_cut_connection(plane, ns):
    """The Python client sends the whole body before it reads the answer: the server must
    read past its limit (discarding) so the client sees kube-apiserver's 413 Status."""
    api = plane.core()
    big = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="big"), data={"k": "x" * (8 << 20)})
    with pytest.raises(ApiException) as refused:
        api.create_namespaced_config_map(ns, big)
    assert refused.value.status == 413, refused.value
    status = json.loads(refused.value.body)
    assert (status["kind"], status["reason"]) == ("Status", "RequestEntityTooLarge")
    # The connection pool still works afterwards.
    assert api.read_namespace(ns).metadata.name == ns


def test_apiservices_as_the_aggregation_layer_keeps_them(plane):
    """Every served group version has its local APIService (kubectl's columns, as in any
    cluster); one naming a Service is stored with its port defaulted and said to be
    unavailable in the availability controller's words; a second create is kube-apiserver's
    409, byte for byte (the Python client's own suite compares it)."""
    reg = client.ApiregistrationV1Api(plane.api())
    apps = reg.read_api_service("v1.apps")
    assert apps.spec.group == "apps" and apps.spec.service is None
    assert [(c.type, c.status, c.reason) for c in apps.status.conditions] == [("Available", "True", "Local")]
    table = plane.kubectl("get", "apiservices").stdout.splitlines()
    assert table[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    assert any(line.split()[:3] == ["v1.", "Local", "True"] for line in table[1:]), table
    assert any(line.startswith("v1beta2.cluster.x-k8s.io ") for line in table[1:]), table
    name = f"v1alpha1.{unique('wardle')}.example.com"
    body = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name},
            "spec": {"group": name.split(".", 1)[1], "version": "v1alpha1", "insecureSkipTLSVerify": True,
                     "groupPriorityMinimum": 1000, "versionPriority": 15,
                     "service": {"namespace": "wardle", "name": "api"}}}
    created = reg.create_api_service(body)
    try:
        assert created.spec.service.port == 443
        condition = created.status.conditions[0]
        assert (condition.status, condition.reason, condition.message) == \
            ("False", "ServiceNotFound", 'service/api in "wardle" is not present')
        with pytest.raises(ApiException) as again:
            reg.create_api_service(body)
        assert again.value.status == 409
        assert again.value.body == (
            '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            f'"message":"apiservices.apiregistration.k8s.io \\"{name}\\" already exists",'
            f'"reason":"AlreadyExists","details":{{"name":"{name}","group":"apiregistration.k8s.io",'
            '"kind":"apiservices"},"code":409}\n')
    finally:
        reg.delete_api_service(name)


def test_objects_are_written_in_kube_apiserver_field_order(plane, ns):
    """Built-in kinds come out as their Go types encode them (kind, apiVersion, metadata in
    ObjectMeta's order, the body, status last), on create, get, list and watch alike; bytes,
    not decoded JSON, since clients compare bytes and error offsets."""
    def keys(raw):
        return list(json.loads(raw, object_pairs_hook=lambda pairs: pairs))

    body = {"data": {"k": "v"}, "metadata": {"labels": {"a": "b"}, "name": "ordered"},
            "immutable": False, "apiVersion": "v1", "kind": "ConfigMap"}
    created = plane._request("POST", f"/api/v1/namespaces/{ns}/configmaps", body=body).data
    assert created.startswith(b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"ordered","namespace":')
    assert [k for k, _ in keys(created)] == ["kind", "apiVersion", "metadata", "immutable", "data"]
    meta = dict(keys(created))["metadata"]
    assert [k for k, _ in meta] == ["name", "namespace", "uid", "resourceVersion",
                                    "creationTimestamp", "labels", "managedFields"]
    got = plane._request("GET", f"/api/v1/namespaces/{ns}/configmaps/ordered").data
    assert got == created and got.endswith(b"}\n"), "Go's encoder ends a document with a newline"

    listed = plane._request("GET", f"/api/v1/namespaces/{ns}/configmaps",
                            query={"limit": "1"}).data
    assert listed.startswith(b'{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":')
    assert listed.endswith(b"]}\n")
    assert [k for k, _ in dict(keys(listed))["metadata"]] == ["resourceVersion", "continue", "remainingItemCount"]

    plane.core().create_namespaced_pod(ns, pod("ordered-pod"))
    raw = plane._request("GET", f"/api/v1/namespaces/{ns}/pods/ordered-pod").data
    assert [k for k, _ in keys(raw)] == ["kind", "apiVersion", "metadata", "spec", "status"]
    resp = plane._request("GET", f"/api/v1/namespaces/{ns}/pods",
                          query={"watch": "1", "timeoutSeconds": "2"}, stream=True)
    line = resp.data.split(b"\n")[0]
    assert line.startswith(b'{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"ordered-pod"')
