"""deploy/ as the tools that read it expect it: a clusterctl local repository (the release
folder clusterctl resolves from deploy/clusterctl.yaml's provider URL, its metadata, its
flavours and the ClusterClass files clusterctl adds beside a topology template), and the
VmGroup and SIPCluster controllers as kustomize bases whose image and namespace an overlay
sets, applied with `kubectl apply -k`.

clusterctl itself is a Go program no package here provides; its documented resolution
rules are followed step by step instead, and what they resolve is applied to a plane."""

import json
import os
import re

import pytest
import yaml

from conftest import ROOT, Plane, envsubst, unique

DEPLOY = ROOT / "deploy"
SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)([-+].*)?$")


def provider_folder():
    """The version folder of the in-memory provider, as clusterctl resolves the URL of
    deploy/clusterctl.yaml: <basepath>/<provider label>/<version>/<components file>."""
    config = yaml.safe_load((DEPLOY / "clusterctl.yaml").read_text())
    entry = next(p for p in config["providers"] if p["name"] == "in-memory")
    assert entry["type"] == "InfrastructureProvider"
    url = envsubst(entry["url"], {"INFRASIM_REPOSITORY": str(DEPLOY)})
    assert url.startswith("file://")
    path = url[len("file://"):]
    assert os.path.isabs(path), "clusterctl needs an absolute path"
    *base, label, version, components = path.split("/")
    assert label == "infrastructure-in-memory", "the label clusterctl derives from name and type"
    assert SEMVER.match(version), version
    folder = DEPLOY / label / version
    assert (folder / components).is_file()
    return folder, version


def test_the_provider_folder_is_a_clusterctl_release():
    folder, version = provider_folder()
    metadata = yaml.safe_load((folder / "metadata.yaml").read_text())
    assert (metadata["apiVersion"], metadata["kind"]) == ("clusterctl.cluster.x-k8s.io/v1alpha3", "Metadata")
    major, minor = (int(x) for x in SEMVER.match(version).groups()[:2])
    series = [s for s in metadata["releaseSeries"] if (s["major"], s["minor"]) == (major, minor)]
    assert series and series[0]["contract"] in ("v1beta2", "v1beta1"), metadata
    # `latest`: the newest semver folder that has a metadata.yaml.
    versions = sorted((d.name for d in folder.parent.iterdir() if SEMVER.match(d.name)),
                      key=lambda v: tuple(int(x) for x in SEMVER.match(v).groups()[:3]), reverse=True)
    assert next(v for v in versions if (folder.parent / v / "metadata.yaml").exists()) == version
    # Every object of the components file is labelled with the provider, in one namespace.
    docs = [d for d in yaml.safe_load_all((folder / "infrastructure-components.yaml").read_text()) if d]
    assert all(d["metadata"]["labels"]["cluster.x-k8s.io/provider"] == "infrastructure-in-memory"
               for d in docs)
    namespaces = {d["metadata"].get("namespace") for d in docs} - {None}
    assert namespaces == {"infrasim-system"}
    assert not list(folder.glob("*/")), "clusterctl reads a release's files flat, never in folders"


def generate(folder, flavor, name, namespace):
    """`clusterctl generate cluster NAME --flavor FLAVOR`: the flavour's template and, for each
    topology Cluster, the class file beside it, rendered with the variables clusterctl sets."""
    template = "cluster-template.yaml" if flavor is None else f"cluster-template-{flavor}.yaml"
    variables = {"CLUSTER_NAME": name, "NAMESPACE": namespace, "CONTROL_PLANE_MACHINE_COUNT": "1",
                 "WORKER_MACHINE_COUNT": "1", "KUBERNETES_VERSION": "v1.33.0",
                 "VM_STARTUP": "100ms", "NODE_STARTUP": "100ms", "ETCD_STARTUP": "100ms",
                 "API_SERVER_STARTUP": "100ms"}
    docs = [d for d in yaml.safe_load_all(envsubst((folder / template).read_text(), variables)) if d]
    classes = []
    for cluster in (d for d in docs if d["kind"] == "Cluster" and d["spec"].get("topology")):
        topology = cluster["spec"]["topology"]
        v1beta2 = cluster["apiVersion"].endswith("/v1beta2")
        class_name = topology["classRef"]["name"] if v1beta2 else topology["class"]
        class_file = folder / f"clusterclass-{class_name}.yaml"
        assert class_file.is_file(), f"{template} names class {class_name}, and clusterctl reads {class_file.name}"
        class_docs = [d for d in yaml.safe_load_all(envsubst(class_file.read_text(), variables)) if d]
        assert [d["metadata"]["name"] for d in class_docs if d["kind"] == "ClusterClass"] == [class_name]
        classes.extend(class_docs)
    for d in classes + docs:
        if d["kind"] not in ("Namespace",):
            d["metadata"]["namespace"] = namespace
    return classes + docs


@pytest.mark.parametrize("flavor", [None, "in-memory", "in-memory-v1beta1", "in-memory-development"])
def test_every_flavour_resolves_and_applies(plane, flavor):
    folder, _ = provider_folder()
    ns = unique("flavor")
    plane.kubectl("create", "namespace", ns)
    try:
        objects = generate(folder, flavor, "c1", ns)
        # Through every admission step, without starting a cluster.
        out = plane.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-",
                            input=yaml.safe_dump_all(objects))
        assert "cluster.cluster.x-k8s.io/c1 serverside-applied (server dry run)" in out.stdout, out.stdout
    finally:
        plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.mark.parametrize("controller,namespace", [("vmgroup", "vmgroup-system"), ("sip", "sip-system")])
def test_the_controllers_apply_with_kustomize_in_their_namespace_and_an_overlays(plane, tmp_path, controller,
                                                                                  namespace):
    base = DEPLOY / controller
    # The plane's controllers installed these CRDs already: the base takes them over.
    out = plane.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(base))
    assert f"deployment.apps/infrasim-{controller} serverside-applied" in out.stdout, out.stdout
    deployment = json.loads(plane.kubectl("-n", namespace, "get", "deployment", f"infrasim-{controller}",
                                          "-o", "json").stdout)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "infrasim:dev"
    assert "--leader-election-namespace=$(POD_NAMESPACE)" in container["args"]

    # An overlay of its own: another namespace, another registry and tag.
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "namespace": f"ops-{controller}", "resources": [os.path.relpath(base, overlay)],
        "images": [{"name": "infrasim", "newName": "registry.example.com/infrasim", "newTag": "v9"}]}))
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(overlay))
    moved = json.loads(plane.kubectl("-n", f"ops-{controller}", "get", "deployment", f"infrasim-{controller}",
                                     "-o", "json").stdout)
    assert moved["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/infrasim:v9"
    binding = json.loads(plane.kubectl("get", "clusterrolebinding", f"infrasim-{controller}", "-o", "json").stdout)
    assert binding["subjects"][0]["namespace"] == f"ops-{controller}", "the account it binds moved too"
