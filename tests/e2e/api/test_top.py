"""`kubectl top` and a HorizontalPodAutoscaler in a simulated workload cluster: its API
server serves `metrics.k8s.io` as metrics-server would, and its controller manager runs the
HPA controller over those figures."""

import json
import subprocess

from conftest import KUBECTL, in_memory_cluster, wait_for

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: "1"}}
"""

HPA = """
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: default}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
"""


class Workload:
    def __init__(self, kubeconfig):
        self.kubeconfig = str(kubeconfig)

    def kubectl(self, *args, stdin=None, check=True):
        done = subprocess.run([KUBECTL, "--kubeconfig", self.kubeconfig, *args], input=stdin,
                              capture_output=True, text=True, timeout=60)
        if check:
            assert done.returncode == 0, done.stdout + done.stderr
        return done

    def json(self, *args):
        return json.loads(self.kubectl(*args, "-o", "json").stdout)


def rows(output):
    return [line.split() for line in output.strip().splitlines()]


def set_usage(workload, cpu):
    """Sets the pods' CPU usage through the Deployment's pod template (which rolls them)."""
    patch = {"spec": {"template": {"metadata": {"annotations": {
        "sim.infrasim.dev/cpu-usage": cpu}}}}}
    workload.kubectl("patch", "deployment", "web", "--type=merge", "-p", json.dumps(patch))


def test_kubectl_top_reads_the_simulated_metrics_server(plane, ns, tmp_path):
    workload = Workload(in_memory_cluster(plane, ns, "top1", tmp_path, workers=1))
    service = workload.json("get", "apiservice", "v1beta1.metrics.k8s.io")
    assert [c["status"] for c in service["status"]["conditions"] if c["type"] == "Available"] == ["True"]

    nodes = rows(wait_for(lambda: workload.kubectl("top", "nodes", check=False).stdout,
                          timeout=30, what="node metrics"))
    # kubectl 1.33 writes the percentages' headers `CPU(%)` and `MEMORY(%)`, 1.32 `CPU%`.
    header = [column.replace("(%)", "%") for column in nodes[0]]
    assert header == ["NAME", "CPU(cores)", "CPU%", "MEMORY(bytes)", "MEMORY%"]
    names = {n["metadata"]["name"] for n in workload.json("get", "nodes")["items"]}
    assert {row[0] for row in nodes[1:]} == names
    for row in nodes[1:]:
        assert row[1].endswith("m") and row[2].endswith("%") and row[3].endswith("Mi"), row

    workload.kubectl("apply", "-f", "-", stdin=DEPLOYMENT)
    set_usage(workload, "250m")

    def web_pods():
        out = workload.kubectl("top", "pods", "-A", "-l", "app=web", check=False)
        listed = rows(out.stdout)[1:] if out.returncode == 0 else []
        return listed if listed and all(r[2] == "250m" for r in listed) else None
    listed = wait_for(web_pods, timeout=60, interval=1, what="the set usage in kubectl top pods")
    assert [r[0] for r in listed] == ["default"]
    # Without a set usage a pod reports a figure near a share of its requests.
    system = rows(workload.kubectl("top", "pods", "-n", "kube-system").stdout)
    assert system[0] == ["NAME", "CPU(cores)", "MEMORY(bytes)"] and len(system) > 1

    # The objects themselves, as metrics-server writes them.
    pod = listed[0][1]
    metrics = json.loads(workload.kubectl(
        "get", "--raw", f"/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/{pod}").stdout)
    assert metrics["kind"] == "PodMetrics" and metrics["window"] == "15s"
    assert metrics["metadata"]["labels"]["app"] == "web"
    assert metrics["containers"] == [{"name": "nginx", "usage": {
        "cpu": "250000000n", "memory": metrics["containers"][0]["usage"]["memory"]}}]
    assert metrics["containers"][0]["usage"]["memory"].endswith("Ki")
    missing = workload.kubectl("get", "--raw",
                               "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope",
                               check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr
    # `kubectl autoscale` writes autoscaling/v1, stored as v2 and read back in both.
    workload.kubectl("autoscale", "deployment", "web", "--cpu-percent=60", "--max=3")
    v2 = workload.json("get", "horizontalpodautoscalers.v2.autoscaling", "web")
    assert v2["spec"]["metrics"] == [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]
    v1 = workload.json("get", "horizontalpodautoscalers.v1.autoscaling", "web")
    assert (v1["spec"]["targetCPUUtilizationPercentage"], v1["spec"]["maxReplicas"]) == (60, 3)
    table = rows(workload.kubectl("get", "podmetrics", "-n", "default", pod).stdout)
    assert table[0] == ["NAME", "CPU", "MEMORY", "WINDOW"]
    assert table[1][:2] == [pod, "250000000n"] and table[1][3] == "15s"


def test_an_hpa_scales_a_deployment_up_and_back_with_its_pods_usage(plane, ns, tmp_path):
    workload = Workload(in_memory_cluster(plane, ns, "hpa1", tmp_path, workers=1))
    workload.kubectl("apply", "-f", "-", stdin=DEPLOYMENT)
    workload.kubectl("apply", "-f", "-", stdin=HPA)
    hpa = workload.json("get", "hpa", "web")
    # Defaults as kube-apiserver fills them.
    assert hpa["spec"]["behavior"]["scaleUp"]["policies"] == [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15}]

    def measured():
        status = workload.json("get", "hpa", "web").get("status", {})
        current = status.get("currentMetrics") or [{}]
        return current[0].get("resource", {}).get("current", {}).get("averageUtilization") is not None and status
    status = wait_for(measured, timeout=90, interval=1, what="the HPA's first measurement")
    # Idle pods use about a third of their requests: below the target, one replica stays.
    assert status["currentMetrics"][0]["resource"]["current"]["averageUtilization"] < 50
    assert status["desiredReplicas"] == 1
    active = {c["type"]: c for c in status["conditions"]}["ScalingActive"]
    assert (active["status"], active["reason"]) == ("True", "ValidMetricFound")
    line = rows(workload.kubectl("get", "hpa", "web").stdout)
    assert line[0] == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert line[1][:3] == ["web", "Deployment/web", "cpu:"] and line[1][3].endswith("/50%")

    set_usage(workload, "200m")
    wait_for(lambda: workload.json("get", "deployment", "web")["spec"]["replicas"] == 4,
             timeout=180, interval=1, what="the HPA scaling the Deployment up to its maximum")
    events = workload.json("get", "events", "--field-selector", "involvedObject.name=web")
    rescales = [e["message"] for e in events["items"] if e["reason"] == "SuccessfulRescale"]
    assert any(m.endswith("reason: cpu resource utilization (percentage of request) above target")
               for m in rescales), rescales

    set_usage(workload, "5m")
    wait_for(lambda: workload.json("get", "deployment", "web")["spec"]["replicas"] == 1,
             timeout=180, interval=1, what="the HPA scaling the Deployment back down")
    events = workload.json("get", "events", "--field-selector", "involvedObject.name=web")
    assert any(e["message"].endswith("reason: All metrics below target")
               for e in events["items"] if e["reason"] == "SuccessfulRescale")
