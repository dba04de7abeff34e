"""Debian's Prometheus scraping `infrasim up` over TLS with the admin's client certificate, while
an in-memory cluster comes up; the queries of Cluster API's Grafana dashboards that read what
infrasim serves so far (the request panels of `cluster-api-mgmt-apiserver-requests` and
`cluster-api-wl-apiserver-requests`, the reconcile and process panels of `controller-runtime`,
and the panels of `cluster-api-state` and `cluster-api-performance` for the kinds served,
from `/metrics/state`), with the dashboards' variables set to `.*`, each return data."""

import base64
import json
import shutil
import subprocess
import urllib.parse
import urllib.request

import pytest
import yaml

from conftest import free_port, in_memory_cluster, wait_for

PROMETHEUS = shutil.which("prometheus")
ALL = '.*'
REQUEST = f'group=~"{ALL}",version=~"{ALL}",resource=~"{ALL}",subresource=~"{ALL}",verb=~"{ALL}"'
POD = f'pod=~"{ALL}",controller=~"{ALL}"'

# The panels' expressions, by dashboard, as the dashboards read them (variables set to `.*`).
QUERIES = {
    "cluster-api-mgmt-apiserver-requests": [
        f"sum(rate(apiserver_request_total{{{REQUEST}}}[5m]))",
        f'sum(rate(apiserver_request_total{{{REQUEST},dry_run!=""}}[5m])) by (dry_run)',
        f"sum(rate(apiserver_request_total{{{REQUEST}}}[5m])) by (resource)",
        f"sum(rate(apiserver_request_total{{{REQUEST}}}[5m])) by (resource,subresource,verb) > 0",
    ],
    "cluster-api-wl-apiserver-requests": [
        f"sum(rate(inmemory_apiserver_request_total{{{REQUEST}}}[5m]))",
        f"sum(rate(inmemory_apiserver_request_total{{{REQUEST}}}[5m])) by (resource)",
        f"sum(rate(inmemory_apiserver_request_total{{{REQUEST}}}[5m])) by (resource,subresource,verb) > 0",
        'sum(rate(inmemory_apiserver_request_duration_seconds_sum{verb!="WATCH",verb!="CONNECT"}[5m])) by (verb)'
        " / sum(rate(inmemory_apiserver_request_duration_seconds_count[5m])) by (verb)",
    ],
    "controller-runtime": [
        f"sum(controller_runtime_active_workers{{{POD}}}) by (pod,controller)"
        f" / sum(controller_runtime_max_concurrent_reconciles{{{POD}}}) by (pod,controller)",
        f"sum(rate(capi_reconcile_total{{{POD}}}[5m])) by (pod,controller,result)",
        f"sum(rate(controller_runtime_reconcile_errors_total{{{POD}}}[5m])) by (pod,controller)",
        f"histogram_quantile(0.99, sum(rate(capi_reconcile_time_seconds_bucket{{{POD}}}[5m])) by (pod, controller, le))",
        f"sum(rate(capi_reconcile_time_seconds_sum{{{POD}}}[5m])) by (pod,controller)"
        f" / sum(rate(capi_reconcile_time_seconds_count{{{POD}}}[5m])) by (pod,controller)",
        f'process_open_fds{{pod=~"{ALL}"}}',
        f'workqueue_depth{{pod=~"{ALL}",name=~"{ALL}",priority!="-100"}}',
        f'rate(workqueue_adds_total{{pod=~"{ALL}",name=~"{ALL}"}}[5m])',
        f'rate(workqueue_retries_total{{pod=~"{ALL}",name=~"{ALL}"}}[5m])',
        f'workqueue_longest_running_processor_seconds{{pod=~"{ALL}",name=~"{ALL}"}}',
        f'workqueue_unfinished_work_seconds{{pod=~"{ALL}",name=~"{ALL}"}}',
        f'histogram_quantile(0.99, sum(rate(workqueue_work_duration_seconds_bucket{{pod=~"{ALL}",name=~"{ALL}"}}[5m])) by (pod, name, le))',
        f'histogram_quantile(0.99, sum(rate(workqueue_queue_duration_seconds_bucket{{pod=~"{ALL}",name=~"{ALL}"}}[5m])) by (pod, name, le))',
        f'sum(rate(rest_client_requests_total{{pod=~"{ALL}"}}[5m])) by (pod, code, method) > 0',
    ],
    # Read from `/metrics/state`, the plane's kube-state-metrics stand-in.
    "cluster-api-state": [
        "sum(capi_cluster_info)",
        "sum (capi_cluster_info) by (topology_version)",
        'sum(capi_cluster_status_condition{status="True"} == 1) by (type)',
        'sum(capi_cluster_status_condition{status="False"} == 1) by (type)',
        "sum(capi_cluster_status_phase == 1) by (phase)",
        "sum(capi_clusterclass_info)",
        "sum (capi_kubeadmcontrolplane_info) by (version)",
        'sum(capi_kubeadmcontrolplane_status_condition{status="True"} == 1) by (type)',
        "sum (capi_kubeadmcontrolplane_status_replicas_ready)",
        "sum (capi_kubeadmcontrolplane_status_replicas_uptodate)",
        "sum (capi_machinedeployment_info) by (version)",
        "sum (capi_machinedeployment_status_replicas_available)",
        "sum(capi_machinedeployment_status_phase == 1) by (phase)",
        "sum (capi_machineset_info) by (version)",
        "sum (capi_machineset_status_replicas_ready)",
        'sum(capi_machine_info{control_plane_name!=""})',
        'sum(avg(capi_machine_info{control_plane_name!=""}) by (name) * on (name) group_right ()'
        " (capi_machine_status_phase == 1)) by (phase)",
        'sum(avg(capi_machine_info{control_plane_name=""}) by (name) * on(name) group_right ()'
        ' (capi_machine_status_condition{status="True"} == 1)) by (type)',
        'sum(capi_kubeadmconfig_status_condition{status="True"} == 1) by (type)',
    ],
    # Its variable `Cluster` set to `.*` (`${Cluster:pipe}`).
    "cluster-api-performance": [
        'avg(min_over_time(capi_cluster_status_condition_last_transition_time{status="True",'
        'type="InfrastructureReady"}[168h]) - on(name) group_left () capi_cluster_created{name=~".*"}) by (name)',
        'quantile(0.9, min_over_time(capi_cluster_status_condition_last_transition_time{status="True"}[168h])'
        ' - on(name) group_left () capi_cluster_created{name=~".*"}) by (type)',
        'count(capi_cluster_info{name=~".*"} * on(name) group_right () label_replace(capi_machine_info'
        '{control_plane_name!=""}, "name", "$0", "cluster_name", ".*")) by(name)',
        'avg(min_over_time(capi_kubeadmcontrolplane_status_condition_last_transition_time{status="True",'
        'type="Available"}[168h]) - on(name) group_left () capi_kubeadmcontrolplane_created'
        '{cluster_name=~".*"}) by (name)',
    ],
}


def credentials(kubeconfig, into):
    """The kubeconfig's CA, client certificate and key, as files Prometheus reads."""
    config = yaml.safe_load(open(kubeconfig))
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    files = {}
    for name, data in [("ca.crt", cluster["certificate-authority-data"]),
                       ("client.crt", user["client-certificate-data"]),
                       ("client.key", user["client-key-data"])]:
        path = into / name
        path.write_bytes(base64.b64decode(data))
        files[name] = str(path)
    return files


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        answer = json.load(resp)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def test_the_dashboards_queries_return_data_while_a_cluster_comes_up(plane, ns, tmp_path):
    if PROMETHEUS is None:
        pytest.fail("prometheus (Debian's prometheus package) is not installed")
    files = credentials(plane.kubeconfig, tmp_path)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{
            "job_name": job, "scheme": "https", "metrics_path": path,
            "tls_config": {"ca_file": files["ca.crt"], "cert_file": files["client.crt"],
                           "key_file": files["client.key"]},
            "static_configs": [{"targets": [f"127.0.0.1:{plane.port}"]}],
        } for job, path in [("infrasim", "/metrics"), ("infrasim-state", "/metrics/state")]],
    }
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    port = free_port()
    log = open(tmp_path / "prometheus.log", "w")
    prometheus = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config_file}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        def scraped():
            try:
                return len([r for r in query(port, "up") if r["value"][1] == "1"]) == 2
            except OSError:
                return None
        wait_for(scraped, timeout=60, interval=0.5, what="Prometheus scraping the plane")

        kubeconfig = in_memory_cluster(plane, ns, "p1", tmp_path, workers=1)

        def traffic():
            # What a user watching the dashboards would be doing: reading the workload
            # cluster and trying a write on the plane, so rates over the last scrapes move.
            subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes"],
                           capture_output=True, timeout=30, check=True)
            plane.kubectl("-n", ns, "create", "configmap", "dry", "--dry-run=server")

        for dashboard, exprs in QUERIES.items():
            for expr in exprs:
                wait_for(lambda: traffic() or query(port, expr), timeout=60, interval=1,
                         what=f"data for {dashboard}: {expr}")
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=30)
        log.close()
