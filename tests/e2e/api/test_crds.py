"""CustomResourceDefinitions registered at run time, through kubectl and the Python client."""

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from conftest import wait_for

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.e2e.example.com
spec:
  group: e2e.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1, maximum: 10}
              color: {type: string, default: blue, enum: [blue, red]}
          status:
            type: object
            properties:
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
"""

GROUP, VERSION, PLURAL = "e2e.example.com", "v1", "gadgets"


@pytest.fixture(scope="module")
def crd(plane, tmp_path_factory):
    path = tmp_path_factory.mktemp("crd") / "crd.yaml"
    path.write_text(CRD)
    out = plane.kubectl("apply", "-f", str(path)).stdout
    assert "created" in out
    plane.kubectl("wait", "--for=condition=Established", "crd/gadgets.e2e.example.com", "--timeout=20s")
    return path


def gadget(name, size, **spec):
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gadget", "metadata": {"name": name},
            "spec": {"size": size, **spec}}


def test_crd_is_established_and_discoverable(plane, crd):
    got = json.loads(plane.kubectl("get", "crd", "gadgets.e2e.example.com", "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in got["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert got["status"]["acceptedNames"]["kind"] == "Gadget"
    assert got["status"]["storedVersions"] == ["v1"]
    resources = plane.kubectl("api-resources", "--api-group", GROUP).stdout.splitlines()
    assert resources[1].split() == ["gadgets", "gd", "e2e.example.com/v1", "true", "Gadget"]


def test_custom_objects_crud_defaults_and_validation(plane, ns, crd):
    api = client.CustomObjectsApi(plane.api())
    created = api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, gadget("g1", 3, junk=True))
    assert created["spec"] == {"size": 3, "color": "blue"}, "defaulted and pruned"
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
    got = api.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "g1")
    got["spec"]["size"] = 4
    replaced = api.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "g1", got)
    assert replaced["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as e:
        api.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "g1", got)
    assert e.value.status == 409

    for bad, field in [(gadget("b1", "big"), "spec.size"), (gadget("b2", 11), "spec.size"),
                       (gadget("b3", 1, color="green"), "spec.color"),
                       ({"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gadget", "metadata": {"name": "b4"}, "spec": {}},
                        "spec.size")]:
        with pytest.raises(ApiException) as e:
            api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, bad)
        assert e.value.status == 422, bad
        body = json.loads(e.value.body)
        assert body["reason"] == "Invalid"
        assert field in [c["field"] for c in body["details"]["causes"]]

    items = api.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]
    assert [i["metadata"]["name"] for i in items] == ["g1"]
    api.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "g1")
    assert api.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"] == []


def test_status_subresource_leaves_spec_and_generation_alone(plane, ns, crd):
    api = client.CustomObjectsApi(plane.api())
    api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, gadget("s1", 2))
    obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "s1")
    obj["spec"]["size"] = 9
    obj["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    updated = api.replace_namespaced_custom_object_status(GROUP, VERSION, ns, PLURAL, "s1", obj)
    assert updated["spec"]["size"] == 2
    assert updated["metadata"]["generation"] == 1
    assert updated["status"]["conditions"][0]["status"] == "True"
    # The main resource ignores status.
    obj = api.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "s1")
    obj["status"] = {"conditions": []}
    kept = api.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "s1", obj)
    assert kept["status"]["conditions"][0]["type"] == "Ready"


def test_kubectl_shows_printer_columns_and_categories(plane, ns, crd, tmp_path):
    manifest = tmp_path / "g.yaml"
    manifest.write_text(json.dumps(gadget("shown", 5)))
    plane.kubectl("-n", ns, "apply", "-f", str(manifest))
    out = plane.kubectl("-n", ns, "get", "gadgets").stdout.splitlines()
    # Name, then exactly the CRD's columns (it defines no Age column, so there is none).
    assert out[0].split() == ["NAME", "SIZE", "READY"]
    assert out[1].split()[:2] == ["shown", "5"]
    plane.kubectl("-n", ns, "patch", "gd", "shown", "--subresource=status", "--type=merge",
                  "-p", '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}')
    assert plane.kubectl("-n", ns, "get", "gd", "shown").stdout.splitlines()[1].split()[:3] == ["shown", "5", "True"]
    assert "gadget.e2e.example.com/shown" in plane.kubectl("-n", ns, "get", "all").stdout
    plane.kubectl("-n", ns, "wait", "--for=jsonpath={.status.conditions[0].status}=True", "gd/shown", "--timeout=10s")


def test_deleting_a_crd_deletes_its_objects_then_stops_serving(plane, tmp_path):
    crd = CRD.replace("gadgets", "doodads").replace("Gadget", "Doodad").replace("gadget", "doodad") \
             .replace("[gd]", "[dd]")
    path = tmp_path / "crd.yaml"
    path.write_text(crd)
    plane.kubectl("apply", "-f", str(path))
    plane.kubectl("wait", "--for=condition=Established", "crd/doodads.e2e.example.com", "--timeout=20s")
    api = client.CustomObjectsApi(plane.api())
    api.create_namespaced_custom_object(GROUP, VERSION, "default", "doodads",
                                        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Doodad",
                                         "metadata": {"name": "d1"}, "spec": {"size": 1}})
    plane.kubectl("delete", "crd", "doodads.e2e.example.com", "--wait=true", "--timeout=30s")

    def gone():
        try:
            api.list_namespaced_custom_object(GROUP, VERSION, "default", "doodads")
            return False
        except ApiException as e:
            return e.status == 404
    wait_for(gone)
    # Recreating it starts empty.
    plane.kubectl("apply", "-f", str(path))
    plane.kubectl("wait", "--for=condition=Established", "crd/doodads.e2e.example.com", "--timeout=20s")
    assert api.list_namespaced_custom_object(GROUP, VERSION, "default", "doodads")["items"] == []


def test_explain_a_crd_field(plane, crd):
    out = plane.kubectl("explain", "gadgets.spec").stdout
    assert "KIND:       Gadget" in out
    assert "size\t<integer> -required-" in out or "size	<integer>" in out
    assert "color\t<string>" in out


def test_explain_each_served_version_of_a_crd(plane, tmp_path):
    # kubectl explains the preferred version by default and any served one when asked, each
    # from that version's own schema.
    path = tmp_path / "crd.yaml"
    path.write_text("""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprockets.explain.example.com}
spec:
  group: explain.example.com
  scope: Namespaced
  names: {plural: sprockets, singular: sprocket, kind: Sprocket}
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, description: old spec,
             properties: {size: {type: integer, description: the old size}}}}}}
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, description: new spec,
             properties: {replicas: {type: integer, description: the replicas}}}}}}
""")
    plane.kubectl("apply", "-f", str(path))
    plane.kubectl("wait", "--for=condition=Established", "crd/sprockets.explain.example.com", "--timeout=20s")
    preferred = plane.kubectl("explain", "sprockets.spec").stdout
    assert "VERSION:    v1\n" in preferred and "replicas\t<integer>" in preferred, preferred
    older = plane.kubectl("explain", "sprockets.spec", "--api-version=explain.example.com/v1beta1").stdout
    assert "VERSION:    v1beta1" in older and "size\t<integer>" in older, older
    assert "old spec" in older and "replicas" not in older, older


def test_explain_a_crd_field_from_the_protobuf_openapi_v2(plane, crd):
    # --output=plaintext-openapiv2 reads /openapi/v2 in gnostic's protobuf encoding.
    out = plane.kubectl("explain", "gadgets.spec", "--output=plaintext-openapiv2").stdout
    assert "KIND:     Gadget" in out
    assert "RESOURCE: spec <Object>" in out
    assert "size\t<integer>" in out and "color\t<string>" in out


def test_several_versions_share_one_stored_object(plane, tmp_path):
    crd = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.multi.example.com}
spec:
  group: multi.example.com
  scope: Namespaced
  names: {plural: things, singular: thing, kind: Thing}
  versions:
  - {name: v1beta1, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
"""
    path = tmp_path / "crd.yaml"
    path.write_text(crd)
    plane.kubectl("apply", "-f", str(path))
    plane.kubectl("wait", "--for=condition=Established", "crd/things.multi.example.com", "--timeout=20s")
    api = client.CustomObjectsApi(plane.api())
    made = api.create_namespaced_custom_object("multi.example.com", "v1beta1", "default", "things",
                                               {"apiVersion": "multi.example.com/v1beta1", "kind": "Thing",
                                                "metadata": {"name": "t"}, "spec": {"x": 1}})
    assert made["apiVersion"] == "multi.example.com/v1beta1"
    as_v1 = api.get_namespaced_custom_object("multi.example.com", "v1", "default", "things", "t")
    assert as_v1["apiVersion"] == "multi.example.com/v1" and as_v1["spec"] == {"x": 1}
    listed = api.list_namespaced_custom_object("multi.example.com", "v1beta1", "default", "things")["items"]
    assert [i["apiVersion"] for i in listed] == ["multi.example.com/v1beta1"]
    patched = api.patch_namespaced_custom_object("multi.example.com", "v1beta1", "default", "things", "t",
                                                 {"spec": {"x": 2}})
    assert patched["apiVersion"] == "multi.example.com/v1beta1" and patched["spec"]["x"] == 2
    stored = json.loads(plane.kubectl("get", "crd", "things.multi.example.com", "-o", "json").stdout)
    assert stored["status"]["storedVersions"] == ["v1"]


def test_wait_for_a_condition_on_a_custom_resource(plane, ns, crd):
    api = client.CustomObjectsApi(plane.api())
    api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, gadget("waited", 2))
    api.patch_namespaced_custom_object_status(GROUP, VERSION, ns, PLURAL, "waited",
                                              {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    out = plane.kubectl("-n", ns, "wait", "--for=condition=Ready", "gadget/waited", "--timeout=10s").stdout
    assert "condition met" in out


PRIORITY_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.prio.example.com}
spec:
  group: prio.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - {name: v1alpha1, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v1beta1, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Size, type: integer, format: int32, jsonPath: .spec.size}
    - {name: Name, type: string, priority: 1, jsonPath: .spec.name}
    schema:
      openAPIV3Schema:
        type: object
        required: [apiVersion, kind, metadata, spec]
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata:
            type: object
            properties:
              name: {type: string, maxLength: 20}
          spec:
            type: object
            properties:
              size: {type: integer}
              name: {type: string, pattern: '^[a-z]+$'}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
"""


def test_versions_by_priority_wide_columns_patterns_and_list_map_keys(plane, tmp_path):
    path = tmp_path / "crd.yaml"
    path.write_text(PRIORITY_CRD)
    plane.kubectl("apply", "-f", str(path))
    plane.kubectl("wait", "--for=condition=Established", "crd/widgets.prio.example.com", "--timeout=20s")
    # kube-apiserver lists a group's versions by priority (GA, then beta, then alpha); the
    # first is the preferred one, which kubectl reads and explains in.
    group = json.loads(plane.kubectl("get", "--raw", "/apis/prio.example.com").stdout)
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1", "v1alpha1"]
    assert group["preferredVersion"]["version"] == "v1"
    assert "VERSION:    v1\n" in plane.kubectl("explain", "widgets").stdout

    def apply(name, spec):
        manifest = tmp_path / f"{name}.json"
        manifest.write_text(json.dumps({"apiVersion": "prio.example.com/v1", "kind": "Widget",
                                        "metadata": {"name": name, "namespace": "default"},
                                        "spec": spec}))
        return plane.kubectl("apply", "-f", str(manifest), check=False)

    # A schema that requires metadata (and describes only its name) takes ordinary objects.
    made = apply("good", {"size": 3, "name": "abc", "ports": [{"name": "a"}, {"name": "b"}]})
    assert made.returncode == 0, made.stderr
    table = plane.kubectl("get", "widgets").stdout.splitlines()
    assert table[0].split() == ["NAME", "SIZE"]
    wide = plane.kubectl("get", "widgets", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "SIZE", "NAME"] and wide[1].split() == ["good", "3", "abc"]

    bad = apply("bad-name", {"name": "Not-Lower"})
    assert bad.returncode != 0
    assert "spec.name: Invalid value: \"Not-Lower\": spec.name in body should match '^[a-z]+$'" in bad.stderr
    twice = apply("twice", {"ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]})
    assert twice.returncode != 0
    assert 'spec.ports[1]: Duplicate value: map[string]interface {}{"name":"http"}' in twice.stderr
    long = apply("a-name-longer-than-twenty", {})
    assert long.returncode != 0 and "metadata.name" in long.stderr


CEL_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: pools.cel.example.com}
spec:
  group: cel.example.com
  scope: Namespaced
  names: {plural: pools, singular: pool, kind: Pool}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: self.replicas <= self.maxReplicas
              messageExpression: "'replicas over maxReplicas for class ' + self.class"
            - rule: "!has(self.zones) || self.zones.isSorted()"
              message: zones must be sorted
              fieldPath: .zones
              reason: FieldValueForbidden
            properties:
              replicas: {type: integer}
              maxReplicas: {type: integer}
              zones: {type: array, maxItems: 10, items: {type: string, maxLength: 32}}
              class:
                type: string
                maxLength: 20
                x-kubernetes-validations:
                - {rule: self == oldSelf, message: class is immutable}
"""


def test_cel_rules_refuse_what_kube_apiserver_refuses_on_every_verb(plane, tmp_path):
    path = tmp_path / "crd.yaml"
    path.write_text(CEL_CRD)
    plane.kubectl("apply", "-f", str(path))
    plane.kubectl("wait", "--for=condition=Established", "crd/pools.cel.example.com", "--timeout=20s")

    def apply(spec, *flags):
        manifest = tmp_path / "pool.json"
        manifest.write_text(json.dumps({"apiVersion": "cel.example.com/v1", "kind": "Pool",
                                        "metadata": {"name": "p", "namespace": "default"}, "spec": spec}))
        return plane.kubectl("apply", *flags, "-f", str(manifest), check=False)

    # Both failing rules in one 422, each with its own path and words.
    bad = apply({"replicas": 5, "maxReplicas": 3, "zones": ["b", "a"], "class": "gold"})
    assert bad.returncode != 0
    assert 'spec: Invalid value: "object": replicas over maxReplicas for class gold' in bad.stderr, bad.stderr
    assert "spec.zones: Forbidden: zones must be sorted" in bad.stderr, bad.stderr
    good = apply({"replicas": 1, "maxReplicas": 3, "zones": ["a", "b"], "class": "gold"})
    assert good.returncode == 0, good.stderr

    # A transition rule: class may not change, through apply (client- and server-side),
    # patch and replace alike; other fields still may.
    changed = apply({"replicas": 2, "maxReplicas": 3, "zones": ["a", "b"], "class": "silver"})
    assert 'spec.class: Invalid value: "string": class is immutable' in changed.stderr, changed.stderr
    ssa = apply({"replicas": 2, "maxReplicas": 3, "zones": ["a", "b"], "class": "silver"},
                "--server-side", "--force-conflicts")
    assert "class is immutable" in ssa.stderr, ssa.stderr
    patched = plane.kubectl("patch", "pool", "p", "--type=merge", "-p", '{"spec":{"class":"silver"}}',
                            check=False)
    assert "class is immutable" in patched.stderr, patched.stderr
    scaled = plane.kubectl("patch", "pool", "p", "--type=merge", "-p", '{"spec":{"replicas":3}}')
    assert scaled.returncode == 0

    # A rule calling a function this server lacks (Kubernetes' semver library) is accepted with
    # a warning and not enforced, rather than refusing every object.
    lacking = CEL_CRD.replace("pools", "lakes").replace("Pool", "Lake").replace("pool", "lake") \
                     .replace("self == oldSelf", "isSemver(self)")
    path.write_text(lacking)
    warned = plane.kubectl("apply", "-f", str(path))
    assert "not enforced by infrasim" in warned.stderr and "isSemver" in warned.stderr, warned.stderr
    plane.kubectl("wait", "--for=condition=Established", "crd/lakes.cel.example.com", "--timeout=20s")
    lake = tmp_path / "lake.json"
    lake.write_text(json.dumps({"apiVersion": "cel.example.com/v1", "kind": "Lake",
                                "metadata": {"name": "l", "namespace": "default"},
                                "spec": {"replicas": 1, "maxReplicas": 2, "class": "not a url"}}))
    assert plane.kubectl("apply", "-f", str(lake), check=False).returncode == 0

    # A rule that does not compile makes the CRD itself invalid.
    broken = CEL_CRD.replace("pools", "pits").replace("Pool", "Pit").replace("pool", "pit") \
                    .replace("self == oldSelf", "self ===")
    path.write_text(broken)
    refused = plane.kubectl("apply", "-f", str(path), check=False)
    assert refused.returncode != 0 and "x-kubernetes-validations[0]" in refused.stderr, refused.stderr


QUANTITY_CIDR_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: slices.cel.example.com}
spec:
  group: cel.example.com
  scope: Namespaced
  names: {plural: slices, singular: slice, kind: Slice}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: quantity(self.request).compareTo(quantity(self.limit)) <= 0
              message: request must not exceed limit
            - rule: "!has(self.nodeIP) || cidr(self.podCIDR).containsIP(self.nodeIP)"
              message: the node's address must be in the pod CIDR
              fieldPath: .nodeIP
            properties:
              request: {type: string, x-kubernetes-validations: [{rule: isQuantity(self)}]}
              limit: {type: string}
              podCIDR:
                type: string
                x-kubernetes-validations:
                - rule: isCIDR(self) && cidr(self).prefixLength() <= 24
                  messageExpression: "'a CIDR of /24 or wider, not ' + self"
              nodeIP: {type: string}
"""


def test_cel_quantity_ip_and_cidr_libraries(plane, tmp_path):
    path = tmp_path / "crd.yaml"
    path.write_text(QUANTITY_CIDR_CRD)
    applied = plane.kubectl("apply", "-f", str(path))
    assert "not enforced" not in applied.stderr, applied.stderr
    plane.kubectl("wait", "--for=condition=Established", "crd/slices.cel.example.com", "--timeout=20s")

    def apply(spec):
        manifest = tmp_path / "slice.json"
        manifest.write_text(json.dumps({"apiVersion": "cel.example.com/v1", "kind": "Slice",
                                        "metadata": {"name": "s", "namespace": "default"}, "spec": spec}))
        return plane.kubectl("apply", "--server-side", "-f", str(manifest), check=False)

    # Quantities compare by value across suffixes: 1500Mi is under 2Gi, 1.5G is not under 1Gi.
    good = apply({"request": "1500Mi", "limit": "2Gi", "podCIDR": "10.244.0.0/16", "nodeIP": "10.244.3.4"})
    assert good.returncode == 0, good.stderr
    bad = apply({"request": "1.5G", "limit": "1Gi", "podCIDR": "10.244.0.0/28", "nodeIP": "10.245.0.1"})
    assert bad.returncode != 0
    assert 'spec: Invalid value: "object": request must not exceed limit' in bad.stderr, bad.stderr
    assert "spec.nodeIP: Invalid value: \"object\": the node's address must be in the pod CIDR" in bad.stderr, bad.stderr
    assert 'spec.podCIDR: Invalid value: "string": a CIDR of /24 or wider, not 10.244.0.0/28' in bad.stderr, bad.stderr
    # A string that is no quantity fails its own rule, and the rule that parses it reports why.
    garbage = apply({"request": "12K", "limit": "2Gi", "podCIDR": "10.244.0.0/16"})
    assert garbage.returncode != 0
    assert 'spec.request: Invalid value: "string": failed rule: isQuantity(self)' in garbage.stderr, garbage.stderr
    assert "unable to parse quantity's suffix" in garbage.stderr, garbage.stderr


URL_FORMAT_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sites.cel.example.com}
spec:
  group: cel.example.com
  scope: Namespaced
  names: {plural: sites, singular: site, kind: Site}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              endpoint:
                type: string
                maxLength: 2048
                x-kubernetes-validations:
                - rule: isURL(self) && url(self).getScheme() in ['http', 'https']
                  message: must be an http or https URL
              hook:
                type: string
                maxLength: 2048
                x-kubernetes-validations:
                - rule: url(self).getScheme() == 'https'
              name:
                type: string
                maxLength: 63
                x-kubernetes-validations:
                - rule: "!format.dns1123Label().validate(self).hasValue()"
                  messageExpression: format.dns1123Label().validate(self).value()[0]
              id:
                type: string
                maxLength: 36
                x-kubernetes-validations:
                - rule: "!format.named('uuid').value().validate(self).hasValue()"
              ids:
                type: array
                maxItems: 1000
                items: {type: integer}
                x-kubernetes-validations:
                - rule: self.all(x, self.exists_one(y, y == x))
                  message: ids must be unique
"""


def test_cel_url_and_format_libraries_and_the_cost_limit_of_one_evaluation(plane, tmp_path):
    path = tmp_path / "crd.yaml"
    path.write_text(URL_FORMAT_CRD)
    applied = plane.kubectl("apply", "--server-side", "-f", str(path))
    assert "not enforced" not in applied.stderr, applied.stderr
    plane.kubectl("wait", "--for=condition=Established", "crd/sites.cel.example.com", "--timeout=20s")

    def apply(name, spec):
        manifest = tmp_path / f"{name}.json"
        manifest.write_text(json.dumps({"apiVersion": "cel.example.com/v1", "kind": "Site",
                                        "metadata": {"name": name, "namespace": "default"}, "spec": spec}))
        return plane.kubectl("apply", "--server-side", "-f", str(manifest), check=False)

    good = {"endpoint": "https://svc.example.com:8443/hook", "hook": "https://example.com",
            "name": "web-1", "id": "123e4567-e89b-12d3-a456-426614174000", "ids": [3, 1, 2]}
    made = apply("good", good)
    assert made.returncode == 0, made.stderr
    stored = json.loads(plane.kubectl("get", "site", "good", "-o", "json").stdout)
    assert stored["spec"] == good

    # Each failing rule at its field, in kube-apiserver 1.33's words: the message, the
    # format's own (apimachinery's) message through messageExpression, the rule itself, and
    # cel-go's error for a URL that does not parse.
    bad = apply("bad", {"endpoint": "ftp://files.example.com", "hook": "../relative",
                        "name": "Web_1", "id": "not-a-uuid", "ids": [1, 1]})
    assert bad.returncode != 0
    for line in [
        'spec.endpoint: Invalid value: "string": must be an http or https URL',
        'spec.hook: Invalid value: "string": URL parse error during conversion from string: '
        'parse "../relative": invalid URI for request evaluating rule: url(self).getScheme() == \'https\'',
        'spec.name: Invalid value: "string": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character "
        "(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        'spec.id: Invalid value: "string": failed rule: !format.named(\'uuid\').value().validate(self).hasValue()',
        'spec.ids: Invalid value: "array": ids must be unique',
    ]:
        assert line in bad.stderr, bad.stderr
    assert "bad" not in plane.kubectl("get", "sites", "-o", "name").stdout

    # 1,000 ids are within the schema's bounds (the rule's estimate passed when the CRD was
    # written), but checking each against all the others costs more than one evaluation may.
    many = dict(good, ids=list(range(1000)))
    costly = apply("many", many)
    assert costly.returncode != 0
    assert ('spec.ids: Invalid value: "array": \'operation cancelled: actual cost limit exceeded\': '
            "no further validation rules will be run due to call cost exceeds limit for rule: "
            "ids must be unique") in costly.stderr, costly.stderr


UNBOUNDED_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tags.cel.example.com}
spec:
  group: cel.example.com
  scope: Namespaced
  names: {plural: tags, singular: tag, kind: Tag}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              names:
                type: array
                items: {type: string}
                x-kubernetes-validations:
                - rule: self.all(a, self.exists_one(b, b == a))
                  message: names must be unique
"""

BUDGET_HINT = ("(try simplifying the rule, or adding maxItems, maxProperties, and maxLength "
               "where arrays, maps, and strings are declared)")


def test_a_crd_whose_rules_could_cost_too_much_is_refused(plane, tmp_path):
    path = tmp_path / "crd.yaml"
    path.write_text(UNBOUNDED_CRD)
    refused = plane.kubectl("apply", "--server-side", "-f", str(path), check=False)
    assert refused.returncode != 0
    rule = "spec.validation.openAPIV3Schema.properties[spec].properties[names].x-kubernetes-validations[0].rule"
    for line in [
        'The CustomResourceDefinition "tags.cel.example.com" is invalid: ',
        f"* {rule}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {BUDGET_HINT}",
        f"* {rule}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
        "* spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total "
        f"for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {BUDGET_HINT}",
    ]:
        assert line in refused.stderr, refused.stderr
    assert plane.kubectl("get", "crd", "tags.cel.example.com", check=False).returncode != 0

    # Bounding the list and its strings, as the message suggests, makes the same rule cheap.
    bounded = UNBOUNDED_CRD.replace("items: {type: string}", "maxItems: 100\n                items: {type: string, maxLength: 64}")
    path.write_text(bounded)
    plane.kubectl("apply", "--server-side", "-f", str(path))
    plane.kubectl("wait", "--for=condition=Established", "crd/tags.cel.example.com", "--timeout=20s")



def test_custom_objects_keep_sorted_keys_as_unstructured_objects_do(plane, ns, crd):
    """kube-apiserver encodes a custom resource as an unstructured map, whose keys Go's
    encoder sorts: apiVersion before kind, metadata's keys sorted too, unlike built-in kinds."""
    created = plane._request("POST", f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}",
                             body=gadget("sorted", 2)).data
    assert created.startswith(b'{"apiVersion":"e2e.example.com/v1","kind":"Gadget","metadata":{"creationTimestamp":')
    pairs = json.loads(created, object_pairs_hook=lambda p: p)
    assert [k for k, _ in pairs] == sorted(k for k, _ in pairs)
