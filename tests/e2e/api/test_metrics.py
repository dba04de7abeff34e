"""The management plane's `/metrics`, as Prometheus and Cluster API's dashboards read it:
kube-apiserver's request families for the plane, the in-memory provider's for every workload
cluster in the same scrape, controller-runtime's and Cluster API's for the controllers, the
process's own, in the text format `promtool` checks and in
OpenMetrics when asked; readable by admins and `system:monitoring`, by nobody else."""

import re
import shutil
import subprocess

import pytest

from conftest import (BINARY, Plane, free_port, in_memory_cluster, metric_samples as samples,
                      metrics_get, wait_for)

PROMTOOL = shutil.which("promtool")


def scrape(plane, *args):
    return plane.kubectl("get", "--raw", "/metrics", *args).stdout


def test_a_request_moves_the_plane_series_and_promtool_accepts_the_scrape(plane, ns):
    listed = dict(verb="LIST", resource="configmaps", scope="namespace", code="200",
                  group="", version="v1", component="apiserver", dry_run="")
    before = sum(samples(scrape(plane), "apiserver_request_total", **listed))
    plane.kubectl("-n", ns, "get", "configmaps")
    plane.kubectl("-n", ns, "create", "configmap", "dry", "--dry-run=server")
    text = scrape(plane)
    assert sum(samples(text, "apiserver_request_total", **listed)) >= before + 1
    assert samples(text, "apiserver_request_total", verb="POST", resource="configmaps",
                   dry_run="All", code="201")
    buckets = samples(text, "apiserver_request_duration_seconds_bucket", verb="LIST",
                      resource="configmaps", scope="namespace")
    assert len(buckets) >= 24, "kube-apiserver's 23 buckets and +Inf"
    for family in ["process_cpu_seconds_total", "process_resident_memory_bytes",
                   "process_open_fds", "process_start_time_seconds"]:
        assert re.search(rf"^{family} [0-9.e+]+$", text, re.M), family
    assert samples(text, "apiserver_current_inflight_requests", request_kind="mutating")
    # Every namespace holds its root CA ConfigMap; CRDs count under their group.
    assert samples(text, "apiserver_storage_objects", resource="configmaps")[0] >= 1
    assert samples(text, "apiserver_storage_objects",
                   resource="customresourcedefinitions.apiextensions.k8s.io")[0] >= 1
    check_with_promtool(text)


def test_openmetrics_when_asked(plane):
    resp = plane._request("GET", "/metrics",
                          headers={"Accept": "application/openmetrics-text;version=1.0.0"})
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
    text = resp.data.decode()
    assert text.endswith("# EOF\n")
    # A counter's family is named without the `_total` its samples carry.
    assert "# TYPE apiserver_request counter\n" in text
    assert "apiserver_request_total{" in text


def test_only_admins_and_monitoring_read_metrics(plane):
    assert "apiserver_request_total" in scrape(plane, "--as=prometheus", "--as-group=system:monitoring")
    refused = plane.kubectl("get", "--raw", "/metrics", "--as=mallory", check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr, refused.stderr


def test_a_watch_counts_as_long_running_until_it_ends(plane, ns):
    watch = subprocess.Popen(["kubectl", "--kubeconfig", plane.kubeconfig, "-n", ns, "get",
                              "secrets", "--watch"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    open_watches = lambda: sum(samples(scrape(plane), "apiserver_longrunning_requests",
                                       verb="WATCH", resource="secrets", scope="namespace"))
    try:
        wait_for(lambda: open_watches() >= 1, timeout=15, what="the watch counted")
        # An event the watch sends is counted as sent.
        sent_before = sum(samples(scrape(plane), "apiserver_watch_events_total", group="",
                                  version="v1", kind="Secret"))
        plane.kubectl("-n", ns, "create", "secret", "generic", "watched")
        wait_for(lambda: sum(samples(scrape(plane), "apiserver_watch_events_total", group="",
                                     version="v1", kind="Secret")) > sent_before,
                 timeout=15, what="the event counted")
    finally:
        watch.kill()
        watch.wait()
    wait_for(lambda: open_watches() == 0, timeout=15, what="the ended watch no longer counted")
    assert sum(samples(scrape(plane), "apiserver_watch_events_total", group="", version="v1",
                       kind="Secret")) > sent_before


def test_a_workload_cluster_request_is_counted_under_its_cluster(plane, ns, tmp_path):
    kubeconfig = in_memory_cluster(plane, ns, "m1", tmp_path, workers=0)
    subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes"],
                   capture_output=True, text=True, timeout=30, check=True)
    text = scrape(plane)
    listed = [line for line in text.splitlines()
              if line.startswith("inmemory_apiserver_request_total{")
              and 'verb="LIST"' in line and 'resource="nodes"' in line
              and 'path="/api/v1/{resource}"' in line and 'user_agent="kubectl/' in line]
    assert listed, "no LIST of nodes by kubectl counted for a workload cluster"
    cluster_names = set(re.findall(r'cluster_name="([^"]*)"', "\n".join(listed)))
    # The cloud's name of a Cluster API cluster: `<name>.<namespace>` (other tests' clusters
    # on the shared plane may be there too).
    assert f"m1.{ns}" in cluster_names, cluster_names
    assert 'inmemory_apiserver_request_duration_seconds_bucket{' in text

    # The controllers that brought it up, as controller-runtime and Cluster API count them.
    for controller in ["cluster", "machine", "kubeadmcontrolplane"]:
        assert sum(samples(text, "capi_reconcile_total", controller=controller,
                           result="success")) > 0, controller
        assert sum(samples(text, "controller_runtime_reconcile_total", controller=controller)) > 0
        assert samples(text, "controller_runtime_max_concurrent_reconciles",
                       controller=controller) == [64.0]
        assert samples(text, "controller_runtime_active_workers", controller=controller)
        assert samples(text, "controller_runtime_reconcile_time_seconds_count",
                       controller=controller)[0] > 0
        # Their work queues, as client-go measures them (named as controller-runtime names
        # them): every reconcile was asked for, waited, and was worked.
        queue = {"name": controller, "controller": controller}
        assert samples(text, "workqueue_adds_total", **queue)[0] > 0, controller
        assert samples(text, "workqueue_queue_duration_seconds_count", **queue)[0] > 0
        assert samples(text, "workqueue_work_duration_seconds_count", **queue)[0] > 0
        assert len(samples(text, "workqueue_depth", **queue)) == 1
        assert len(samples(text, "workqueue_longest_running_processor_seconds", **queue)) == 1
        assert len(samples(text, "workqueue_retries_total", **queue)) == 1
    # Their requests to the plane, as client-go counts them (status writes are PATCHes).
    assert sum(samples(text, "rest_client_requests_total", method="PATCH", code="200")) > 0
    assert sum(samples(text, "rest_client_requests_total", method="GET", code="200")) > 0
    check_with_promtool(text)


def test_cluster_api_object_state_reads_as_kube_state_metrics_makes_it(plane, ns, tmp_path):
    in_memory_cluster(plane, ns, "s1", tmp_path, workers=1)
    mine = dict(namespace=ns, cluster_name="s1")

    def available():
        text = plane.kubectl("get", "--raw", "/metrics/state").stdout
        ready = samples(text, "capi_machinedeployment_status_replicas_ready", **mine)
        return (samples(text, "capi_cluster_status_condition", name="s1", namespace=ns,
                        type="Available", status="True") == [1.0]
                and ready == [1.0] and text)
    text = wait_for(available, timeout=60, interval=0.5,
                    what="the Cluster Available and its worker ready in the state metrics")
    # Labels and values as Cluster API's kube-state-metrics configuration makes them.
    assert samples(text, "capi_cluster_status_phase", name="s1", phase="Provisioned") == [1.0]
    assert samples(text, "capi_cluster_status_phase", name="s1", phase="Pending") == [0.0]
    assert samples(text, "capi_cluster_info", name="s1", topology_classref_name="in-memory",
                   customresource_group="cluster.x-k8s.io", customresource_version="v1beta2",
                   customresource_kind="Cluster") == [1.0]
    assert samples(text, "capi_cluster_spec_paused", name="s1") == [0.0]
    # The control plane's machine carries its control plane's name, the worker's none.
    machines = [line for line in text.splitlines()
                if line.startswith("capi_machine_info{") and 'cluster_name="s1"' in line
                and f'namespace="{ns}"' in line]
    assert len(machines) == 2, machines
    assert sum('control_plane_name="' in line for line in machines) == 1, machines
    assert samples(text, "capi_machine_status_phase", **mine, phase="Running") == [1.0, 1.0]
    assert samples(text, "capi_kubeadmcontrolplane_status_replicas_ready", **mine) == [1.0]
    assert samples(text, "capi_kubeadmcontrolplane_spec_replicas", **mine) == [1.0]
    assert samples(text, "capi_machineset_spec_replicas", **mine) == [1.0]
    assert samples(text, "capi_kubeadmconfig_info", **mine)
    created = samples(text, "capi_cluster_created", name="s1", namespace=ns)
    assert len(created) == 1 and created[0] > 1.7e9
    check_with_promtool(text)

    # Scraped in shards (kube-state-metrics' --shard and --total-shards as the query's
    # shard and total_shards): each object's samples are in exactly one of them.
    def objects(path):
        text = plane.kubectl("get", "--raw", path).stdout
        return sorted(re.search(r'[{,]uid="([^"]*)"', line).group(1)
                      for line in text.splitlines()
                      if line.startswith(("capi_cluster_info{", "capi_machine_info{")))
    whole = objects("/metrics/state")
    parts = [objects(f"/metrics/state?shard={i}&total_shards=3") for i in range(3)]
    assert whole and sorted(sum(parts, [])) == whole, parts
    refused = plane.kubectl("get", "--raw", "/metrics/state?shard=3&total_shards=3", check=False)
    assert refused.returncode != 0 and "is not one of 3" in refused.stderr, refused.stderr

    # The simulation's own: clusters and machines by phase, and how long this one took to
    # turn Available (seen while the process watched).
    main = plane.kubectl("get", "--raw", "/metrics").stdout
    assert samples(main, "infrasim_clusters", phase="Provisioned")[0] >= 1
    assert samples(main, "infrasim_machines", phase="Running")[0] >= 2
    assert samples(main, "infrasim_clusters", phase="Failed") == [0.0]
    assert re.search(r"^infrasim_cluster_available_seconds_count [1-9]", main, re.M), main[-2000:]

    # A change is seen at the next scrape; a deleted cluster leaves no series behind.
    plane.kubectl("-n", ns, "annotate", "cluster", "s1", "cluster.x-k8s.io/paused=true")
    wait_for(lambda: samples(plane.kubectl("get", "--raw", "/metrics/state").stdout,
                             "capi_cluster_annotation_paused", name="s1", namespace=ns,
                             paused_value="true") == [1.0],
             timeout=15, interval=0.2, what="the pause annotation in the state metrics")
    plane.kubectl("-n", ns, "annotate", "cluster", "s1", "cluster.x-k8s.io/paused-")
    plane.kubectl("-n", ns, "delete", "cluster", "s1", "--wait=true", "--timeout=120s")
    wait_for(lambda: not samples(plane.kubectl("get", "--raw", "/metrics/state").stdout,
                                 "capi_machine_info", **mine),
             timeout=30, interval=0.5, what="the deleted cluster's series gone")


def test_state_metrics_in_openmetrics_and_only_for_monitoring(plane):
    resp = plane._request("GET", "/metrics/state",
                          headers={"Accept": "application/openmetrics-text;version=1.0.0"})
    assert resp.status == 200
    assert resp.data.decode().endswith("# EOF\n")
    assert "# TYPE capi_cluster_info gauge" in plane.kubectl(
        "get", "--raw", "/metrics/state", "--as=prometheus", "--as-group=system:monitoring").stdout
    refused = plane.kubectl("get", "--raw", "/metrics/state", "--as=mallory", check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr, refused.stderr


def test_a_controller_elsewhere_serves_its_metrics_to_the_tokens_its_plane_allows(tmp_path):
    workdir = tmp_path / "bare"
    workdir.mkdir()
    bare = Plane(workdir, "--controllers", "none")
    port = free_port()
    log = open(tmp_path / "controller.log", "w")
    proc = subprocess.Popen(
        [BINARY, "controller", "--kubeconfig", bare.kubeconfig, "--leader-elect", "false",
         "--port-min", "22900", "--port-max", "22950", "--vcsim", "false", "--vmgroup", "false",
         "--sip", "false", "--metrics-bind-address", f"127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT)

    def scrape(path, token=None):
        return metrics_get(port, path, token)

    try:
        # A scraper's identity, as a Prometheus in the cluster would have: a ServiceAccount
        # bound to system:monitoring; and one bound to nothing.
        bare.kubectl("create", "serviceaccount", "prometheus")
        bare.kubectl("create", "serviceaccount", "nobody")
        bare.kubectl("create", "clusterrolebinding", "prometheus", "--clusterrole=system:monitoring",
                     "--serviceaccount=default:prometheus")
        token = bare.kubectl("create", "token", "prometheus").stdout.strip()
        nobody = bare.kubectl("create", "token", "nobody").stdout.strip()
        wait_for(lambda: scrape("/metrics", token)[0] == 200, timeout=60, interval=0.5,
                 what="the controller's metrics served")
        made = subprocess.run([BINARY, "cluster", "--kubeconfig", bare.kubeconfig, "create", "cm1",
                               "--step-startup", "0s", "--workers", "0"],
                              capture_output=True, text=True, timeout=180)
        assert made.returncode == 0, made.stdout + made.stderr
        status, text = scrape("/metrics", token)
        assert status == 200
        assert sum(samples(text, "controller_runtime_reconcile_total", controller="cluster")) > 0
        # Its requests to the plane, under the plane's address.
        assert sum(samples(text, "rest_client_requests_total", method="PATCH", code="200",
                           host=f"127.0.0.1:{bare.port}")) > 0
        check_with_promtool(text)
        status, state = scrape("/metrics/state", token)
        assert status == 200
        assert samples(state, "capi_cluster_info", name="cm1", namespace="default") == [1.0]
        # No token, a token the plane does not know, a token of someone not allowed.
        assert scrape("/metrics")[0] == 401
        assert scrape("/metrics", "not-a-token")[0] == 401
        assert scrape("/metrics", nobody)[0] == 403
        assert scrape("/nothing", token)[0] == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        bare.stop()


def check_with_promtool(text):
    if PROMTOOL is None:
        pytest.fail("promtool (Debian's prometheus package) is not installed")
    check = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
