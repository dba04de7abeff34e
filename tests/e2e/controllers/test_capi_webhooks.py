"""Cluster API's defaulting and validating webhooks, as part of the embedded core: objects
written the way users write them (no `spec.selector`, versions without their `v`, in v1beta1
or v1beta2) are defaulted as Cluster API's webhooks default them, and what those webhooks
refuse is refused, in their words, through kubectl. With `--capi-core=external` the plane
registers none of them (Cluster API's own webhooks decide)."""

import json

import pytest

from conftest import Plane, unique


@pytest.fixture(scope="module")
def capi(tmp_path_factory):
    p = Plane(tmp_path_factory.mktemp("capi-webhooks"), "--port-min", "22650", "--port-max", "22700")
    yield p
    p.stop()


@pytest.fixture
def ns(capi):
    name = unique("hooks")
    capi.kubectl("create", "namespace", name)
    yield name
    capi.kubectl("delete", "namespace", name, "--wait=false", check=False)


def apply(plane, ns, document, check=True):
    return plane.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(document), check=check)


def get(plane, ns, what, name):
    return json.loads(plane.kubectl("-n", ns, "get", what, name, "-o", "json").stdout)


def machine_deployment(version, name="md-0", **spec):
    """A MachineDeployment as users write it: no selector, no template labels, a bare
    version."""
    if version == "v1beta2":
        template = {"clusterName": "c1", "version": "1.31.0",
                    "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                                "kind": "KubeadmConfigTemplate", "name": "t"}},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                          "kind": "DevMachineTemplate", "name": "t"}}
    else:
        template = {"clusterName": "c1", "version": "1.31.0",
                    "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
                                                "kind": "KubeadmConfigTemplate", "name": "t"}},
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                          "kind": "DevMachineTemplate", "name": "t"}}
    return {"apiVersion": f"cluster.x-k8s.io/{version}", "kind": "MachineDeployment",
            "metadata": {"name": name},
            "spec": {"clusterName": "c1", "template": {"spec": template}, **spec}}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_a_machine_deployment_without_a_selector_is_defaulted_as_cluster_api_does(capi, ns, version):
    apply(capi, ns, machine_deployment(version))
    md = json.loads(capi.kubectl("-n", ns, "get", "machinedeployments.v1beta2.cluster.x-k8s.io", "md-0",
                                 "-o", "json").stdout)
    labels = {"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/deployment-name": "md-0"}
    assert md["spec"]["selector"] == {"matchLabels": labels}
    assert md["spec"]["template"]["metadata"]["labels"] == labels
    assert md["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "c1"
    assert md["spec"]["replicas"] == 1
    assert md["spec"]["template"]["spec"]["version"] == "v1.31.0"
    assert md["spec"]["rollout"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


def test_what_the_webhooks_refuse_is_refused_in_their_words(capi, ns):
    apply(capi, ns, machine_deployment("v1beta2"))
    moved = machine_deployment("v1beta2")
    moved["spec"]["clusterName"] = "c2"
    moved["spec"]["template"]["spec"]["clusterName"] = "c2"
    out = apply(capi, ns, moved, check=False)
    assert out.returncode != 0
    # kubectl words a 422 with causes itself, as it does behind kube-apiserver.
    assert 'The MachineDeployment "md-0" is invalid: spec.clusterName: Forbidden: field is immutable' \
        in out.stderr, out.stderr

    stray = machine_deployment("v1beta2", name="md-1", selector={"matchLabels": {"app": "a"}})
    stray["spec"]["template"]["metadata"] = {"labels": {"app": "b"}}
    out = apply(capi, ns, stray, check=False)
    assert ('spec.template.metadata.labels: Forbidden: must match spec.selector '
            '"app=a,cluster.x-k8s.io/cluster-name=c1"') in out.stderr, out.stderr

    # The Status keeps the webhook's causes, as kube-apiserver passes them on.
    code, status = capi.raw("POST", f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{ns}/machinedeployments",
                            body=stray)
    assert code == 422, status
    assert status["reason"] == "Invalid"
    assert status["message"] == (
        'admission webhook "validation.machinedeployment.cluster.x-k8s.io" denied the request: '
        'MachineDeployment.cluster.x-k8s.io "md-1" is invalid: spec.template.metadata.labels: Forbidden: '
        'must match spec.selector "app=a,cluster.x-k8s.io/cluster-name=c1"'), status
    assert {"type": "FieldValueForbidden", "field": "spec.template.metadata.labels",
            "message": 'Forbidden: must match spec.selector "app=a,cluster.x-k8s.io/cluster-name=c1"'} \
        in status["details"]["causes"], status

    kcp = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
           "metadata": {"name": "cp"},
           "spec": {"replicas": 2, "version": "1.31.0",
                    "machineTemplate": {"spec": {"infrastructureRef": {
                        "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachineTemplate",
                        "name": "t"}}}}}
    out = apply(capi, ns, kcp, check=False)
    assert ('The KubeadmControlPlane "cp" is invalid: spec.replicas: Forbidden: '
            'cannot be an even number when etcd is stacked') in out.stderr, out.stderr
    kcp["spec"]["replicas"] = 1
    apply(capi, ns, kcp)
    stored = get(capi, ns, "kubeadmcontrolplanes.v1beta2.controlplane.cluster.x-k8s.io", "cp")
    assert stored["spec"]["version"] == "v1.31.0"
    assert stored["spec"]["rollout"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}
    scaled = capi.kubectl("-n", ns, "scale", "kubeadmcontrolplane", "cp", "--replicas=2", check=False)
    assert ('admission webhook "validation-scale.kubeadmcontrolplane.controlplane.cluster.x-k8s.io" '
            'denied the request: replicas cannot be an even number when etcd is stacked') in scaled.stderr, \
        scaled.stderr

    mhc = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
           "metadata": {"name": "mhc"}, "spec": {"clusterName": "c1", "selector": {}}}
    out = apply(capi, ns, mhc, check=False)
    assert "spec.selector: Required value: selector must not be empty" in out.stderr, out.stderr


def test_a_cluster_class_in_use_cannot_be_deleted_and_topologies_are_checked_against_it(capi, ns):
    ref = lambda api, kind: {"templateRef": {"apiVersion": api, "kind": kind, "name": "t"}}
    infra = "infrastructure.cluster.x-k8s.io/v1beta2"
    apply(capi, ns, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "metadata": {"name": "quick"},
        "spec": {"infrastructure": ref(infra, "DevClusterTemplate"),
                 "controlPlane": ref("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlaneTemplate"),
                 "workers": {"machineDeployments": [{
                     "class": "default-worker",
                     "bootstrap": ref("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfigTemplate"),
                     "infrastructure": ref(infra, "DevMachineTemplate")}]}}})
    cluster = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c1"},
               "spec": {"topology": {"classRef": {"name": "quick"}, "version": "1.31.0",
                                     "workers": {"machineDeployments": [
                                         {"class": "gpu", "name": "md-0"}]}}}}
    out = apply(capi, ns, cluster, check=False)
    assert ('spec.topology.workers.machineDeployments[0].class: Invalid value: "gpu": '
            'MachineDeploymentClass with name "gpu" does not exist in ClusterClass "quick"') in out.stderr, \
        out.stderr
    cluster["spec"]["topology"]["workers"]["machineDeployments"][0]["class"] = "default-worker"
    cluster["spec"]["paused"] = True
    apply(capi, ns, cluster)
    assert get(capi, ns, "cluster", "c1")["spec"]["topology"]["version"] == "v1.31.0"
    out = capi.kubectl("-n", ns, "delete", "clusterclass", "quick", check=False)
    assert (f'ClusterClass.cluster.x-k8s.io "quick" is forbidden: ClusterClass cannot be deleted because it '
            f'is used by Cluster(s): {ns}/c1') in out.stderr, out.stderr


def test_the_webhook_configurations_are_cluster_apis_own(capi):
    names = capi.kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations",
                         "-o", "name").stdout.split()
    for name in ["capi-mutating-webhook-configuration", "capi-validating-webhook-configuration",
                 "capi-kubeadm-control-plane-mutating-webhook-configuration",
                 "capi-kubeadm-control-plane-validating-webhook-configuration",
                 "capi-kubeadm-bootstrap-validating-webhook-configuration",
                 # The in-cluster IPAM provider's, for its pools.
                 "capi-ipam-in-cluster-validating-webhook-configuration"]:
        assert any(n.endswith("/" + name) for n in names), names


def test_with_cluster_apis_own_core_ours_stay_out_of_the_way(tmp_path):
    """A plane that ran the embedded core, restarted with `--capi-core=external`, keeps none
    of our webhook configurations: Cluster API's own install brings its own."""
    def ours(p):
        names = p.kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations",
                          "-o", "name").stdout.split()
        return [n for n in names if "capi" in n]
    data = ["--data-dir", str(tmp_path / "data"), "--port-min", "22710", "--port-max", "22720"]
    p = Plane(tmp_path, *data, ephemeral=False)
    try:
        assert len(ours(p)) == 6
    finally:
        p.stop()
    p = Plane(tmp_path, *data, "--capi-core=external", ephemeral=False)
    try:
        assert ours(p) == []
    finally:
        p.stop()


def test_infrasim_controller_serves_the_webhooks_to_a_plane_elsewhere(tmp_path):
    """`infrasim controller --webhook-listen` against another plane: Cluster API's webhooks
    served over HTTPS and registered by URL, so that plane defaults and validates the core's
    objects too, and serves them in v1beta1 through the conversion webhook."""
    import subprocess
    from conftest import BINARY, wait_for
    workdir = tmp_path / "bare"
    workdir.mkdir()
    bare = Plane(workdir, "--controllers", "none", "--workloads=false")
    log = open(tmp_path / "controller.log", "w")
    proc = subprocess.Popen([BINARY, "controller", "--kubeconfig", bare.kubeconfig, "--port-min", "22730",
                             "--port-max", "22740", "--leader-elect=false",
                             "--webhook-listen", "127.0.0.1:0"], stdout=log, stderr=subprocess.STDOUT)
    try:
        def registered():
            config = bare.kubectl("get", "mutatingwebhookconfiguration", "capi-mutating-webhook-configuration",
                                  "-o", "json", check=False)
            return config.returncode == 0 and json.loads(config.stdout)
        config = wait_for(registered, timeout=30, what="the webhook configuration")
        url = config["webhooks"][0]["clientConfig"]["url"]
        assert url.startswith("https://127.0.0.1:") and config["webhooks"][0]["clientConfig"]["caBundle"]
        bare.kubectl("create", "namespace", "w")
        apply(bare, "w", machine_deployment("v1beta1"))
        md = json.loads(bare.kubectl("-n", "w", "get", "machinedeployments.v1beta2.cluster.x-k8s.io", "md-0",
                                     "-o", "json").stdout)
        assert md["spec"]["selector"]["matchLabels"]["cluster.x-k8s.io/deployment-name"] == "md-0"
        moved = machine_deployment("v1beta2")
        moved["spec"]["clusterName"] = moved["spec"]["template"]["spec"]["clusterName"] = "c2"
        out = apply(bare, "w", moved, check=False)
        assert "spec.clusterName: Forbidden: field is immutable" in out.stderr, out.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        bare.stop()


def test_a_clusters_variables_are_defaulted_and_checked_against_its_class(capi, ns):
    ref = lambda api, kind: {"templateRef": {"apiVersion": api, "kind": kind, "name": "t"}}
    infra = "infrastructure.cluster.x-k8s.io/v1beta2"
    apply(capi, ns, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "metadata": {"name": "vars"},
        "spec": {"infrastructure": ref(infra, "DevClusterTemplate"),
                 "controlPlane": ref("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlaneTemplate"),
                 "variables": [
                     {"name": "cpu", "required": True,
                      "schema": {"openAPIV3Schema": {"type": "integer", "minimum": 1}}},
                     {"name": "registry", "required": False,
                      "schema": {"openAPIV3Schema": {"type": "string", "default": "registry.k8s.io"}}}]}})
    cluster = lambda variables: {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "v1"},
        "spec": {"paused": True, "topology": {"classRef": {"name": "vars"}, "version": "v1.33.0",
                                              "variables": variables}}}
    out = apply(capi, ns, cluster([{"name": "gpu", "value": 1}]), check=False)
    assert 'spec.topology.variables[gpu]: Invalid value: "gpu": variable is not defined' in out.stderr, out.stderr
    assert 'spec.topology.variables: Required value: required variable "cpu" must be set' in out.stderr, out.stderr
    apply(capi, ns, cluster([{"name": "cpu", "value": 2}]))
    variables = get(capi, ns, "cluster", "v1")["spec"]["topology"]["variables"]
    assert variables == [{"name": "cpu", "value": 2}, {"name": "registry", "value": "registry.k8s.io"}]


def test_a_class_with_broken_variables_or_patches_is_refused_in_cluster_apis_words(capi, ns):
    ref = lambda api, kind: {"templateRef": {"apiVersion": api, "kind": kind, "name": "t"}}
    kcpt = "controlplane.cluster.x-k8s.io/v1beta2"
    klass = {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "ClusterClass", "metadata": {"name": "patched"},
        "spec": {"infrastructure": {"ref": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                            "kind": "DevClusterTemplate", "name": "t"}},
                 "controlPlane": {"ref": {"apiVersion": kcpt, "kind": "KubeadmControlPlaneTemplate", "name": "t"}},
                 "variables": [
                     {"name": "builtin", "required": False, "schema": {"openAPIV3Schema": {"type": "string"}}},
                     {"name": "replicas", "required": False,
                      "schema": {"openAPIV3Schema": {"type": "integer", "minimum": 1, "default": 0}}}],
                 "patches": [{"name": "registry", "definitions": [{
                     "selector": {"apiVersion": kcpt, "kind": "KubeadmControlPlaneTemplate",
                                  "matchResources": {"controlPlane": True}},
                     "jsonPatches": [{"op": "add", "path": "/spec/template/spec/x/3",
                                      "valueFrom": {"variable": "registry"}}]}]}]}}
    out = apply(capi, ns, klass, check=False)
    # kubectl words a 422 with several causes itself, one cause a line.
    assert 'The ClusterClass "patched" is invalid' in out.stderr, out.stderr
    for text in [
        'spec.variables[builtin].name: Invalid value: "builtin": "builtin" is a reserved variable name',
        'spec.variables[replicas].schema.openAPIV3Schema.default: Invalid value: 0: '
        'spec.variables[replicas].schema.openAPIV3Schema.default in body should be greater than or equal to 1',
        'spec.patches[0].definitions[0].jsonPatches[0].path: Invalid value: "/spec/template/spec/x/3": '
        'arrays can only be accessed using "0" (prepend) or "-" (append)',
        'spec.patches[0].definitions[0].jsonPatches[0].valueFrom.variable: Invalid value: "registry": '
        'variable with name registry cannot be found',
    ]:
        assert text in out.stderr, out.stderr
    klass["spec"]["variables"] = [{"name": "registry", "required": False,
                                   "schema": {"openAPIV3Schema": {"type": "string", "default": "registry.k8s.io"}}}]
    klass["spec"]["patches"][0]["definitions"][0]["jsonPatches"][0]["path"] = \
        "/spec/template/spec/kubeadmConfigSpec/clusterConfiguration/imageRepository"
    apply(capi, ns, klass)
    stored = get(capi, ns, "clusterclasses.v1beta2.cluster.x-k8s.io", "patched")
    assert stored["spec"]["patches"][0]["name"] == "registry"


def test_a_control_plane_template_is_checked_and_then_immutable(capi, ns):
    template = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlaneTemplate",
                "metadata": {"name": "cp"},
                "spec": {"template": {"spec": {"kubeadmConfigSpec": {
                    "clusterConfiguration": {"dns": {"imageTag": "v1.11:1"}}}}}}}
    out = apply(capi, ns, template, check=False)
    assert ('spec.template.spec.kubeadmConfigSpec.clusterConfiguration.dns.imageTag: Forbidden: '
            'tag v1.11:1 is invalid') in out.stderr, out.stderr
    template["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["dns"]["imageTag"] = "v1.11.1"
    apply(capi, ns, template)
    capi.kubectl("-n", ns, "label", "kubeadmcontrolplanetemplate", "cp", "team=a")
    template["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["dns"]["imageTag"] = "v1.12.0"
    out = apply(capi, ns, template, check=False)
    assert ("KubeadmControlPlaneTemplate spec.template.spec field is immutable. Please create new resource "
            "instead. Diff: spec.template.spec.kubeadmConfigSpec.clusterConfiguration.dns.imageTag: "
            '"v1.11.1" -> "v1.12.0"') in out.stderr, out.stderr
