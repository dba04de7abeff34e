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
