"""Secrets' stringData and immutable ConfigMaps/Secrets, as kube-apiserver treats them."""

import base64

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException


def test_secret_string_data_is_folded_into_data(plane, ns):
    core = plane.core()
    s = core.create_namespaced_secret(ns, client.V1Secret(
        metadata=client.V1ObjectMeta(name="s"), string_data={"user": "admin"}, data={"pw": "aHVudGVyMg=="}))
    assert s.string_data is None
    assert base64.b64decode(s.data["user"]) == b"admin" and s.data["pw"] == "aHVudGVyMg=="
    s.string_data = {"pw": "changed"}
    s = core.replace_namespaced_secret("s", ns, s)
    assert base64.b64decode(s.data["pw"]) == b"changed"


def test_immutable_configmaps_refuse_data_changes(plane, ns):
    core = plane.core()
    cm = core.create_namespaced_config_map(ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="frozen"), data={"k": "v"}, immutable=True))
    cm.data = {"k": "other"}
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("frozen", ns, cm)
    assert e.value.status == 422 and "field is immutable when `immutable` is set" in e.value.body
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_config_map("frozen", ns, {"immutable": False})
    assert e.value.status == 422
    # Metadata may still change.
    labelled = core.patch_namespaced_config_map("frozen", ns, {"metadata": {"labels": {"a": "b"}}})
    assert labelled.metadata.labels == {"a": "b"} and labelled.data == {"k": "v"}


def test_applying_the_same_string_data_again_writes_nothing(plane, ns):
    """A Secret applied server-side with `stringData` (write-only: folded into `data`) and
    applied again unchanged keeps its resourceVersion, as kube-apiserver stores nothing for
    a no-op apply; a changed value is written."""
    manifest = f"""apiVersion: v1
kind: Secret
metadata: {{name: applied, namespace: {ns}}}
stringData: {{password: s3cret}}
"""
    def version():
        return plane.kubectl("-n", ns, "get", "secret", "applied", "-o",
                             "jsonpath={.metadata.resourceVersion}").stdout
    plane.kubectl("apply", "--server-side", "-f", "-", input=manifest)
    first = version()
    plane.kubectl("apply", "--server-side", "-f", "-", input=manifest)
    assert version() == first
    plane.kubectl("apply", "--server-side", "-f", "-", input=manifest.replace("s3cret", "other"))
    assert version() != first
    data = plane.core().read_namespaced_secret("applied", ns).data
    assert base64.b64decode(data["password"]).decode() == "other"
