"""Admission and conversion webhooks with kubectl: webhook servers written here in Python
(HTTPS with a certificate of a CA made with openssl), registered through a selector-less
Service and its EndpointSlice pointing at 127.0.0.1, as a controller manager on the host
registers its own, or by URL."""

import base64
import json
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


def make_certs(tmp):
    """A CA and a serving certificate for webhook.<ns>.svc and 127.0.0.1, with openssl."""
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True, cwd=tmp)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=webhook-ca")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "tls.key", "-out", "tls.csr", "-subj", "/CN=webhook")
    (tmp / "san.ext").write_text("subjectAltName=DNS:webhook.default.svc,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "tls.crt", "-days", "1", "-extfile", "san.ext")
    return tmp / "ca.crt", tmp / "tls.crt", tmp / "tls.key"


def reply(handler, review):
    """Answers a webhook request with `review` as JSON."""
    body = json.dumps(review).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class Webhook(BaseHTTPRequestHandler):
    """/mutate labels every object admitted=by-python; /validate refuses a ConfigMap with a
    `forbidden` key."""

    seen = []
    # Keep-alive, so that a caller that keeps its connections open can reuse them.
    protocol_version = "HTTP/1.1"
    # The client port of each call: fewer ports than calls means connections were reused.
    ports = []

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        Webhook.seen.append((self.path, request))
        Webhook.ports.append(self.client_address[1])
        response = {"uid": request["uid"], "allowed": True}
        if self.path == "/mutate":
            labels = (request["object"].get("metadata") or {}).get("labels")
            patch = ([{"op": "add", "path": "/metadata/labels/admitted", "value": "by-python"}] if labels
                     else [{"op": "add", "path": "/metadata/labels", "value": {"admitted": "by-python"}}])
            response.update(patchType="JSONPatch", patch=base64.b64encode(json.dumps(patch).encode()).decode())
        elif "forbidden" in (request["object"].get("data") or {}):
            response = {"uid": request["uid"], "allowed": False,
                        "status": {"code": 422, "message": "the forbidden key is not allowed here"}}
        reply(self, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})

    def log_message(self, *args):
        pass


def serve(tmp_path, handler):
    """`handler` over HTTPS on a loopback port: the server, its port and the CA bundle."""
    ca, cert, key = make_certs(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1], base64.b64encode(ca.read_bytes()).decode()


@pytest.fixture
def webhook_server(tmp_path):
    server, port, bundle = serve(tmp_path, Webhook)
    yield port, bundle
    server.shutdown()


def test_webhooks_written_in_python_mutate_and_refuse(plane, ns, tmp_path, webhook_server):
    port, bundle = webhook_server
    plane.kubectl("label", "namespace", ns, "admission=python")
    selector = {"matchLabels": {"admission": "python"}}
    rules = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
              "resources": ["configmaps"]}]
    hook = lambda name, client: {"name": name, "clientConfig": {"caBundle": bundle, **client},
                                  "rules": rules, "namespaceSelector": selector, "sideEffects": "None",
                                  "admissionReviewVersions": ["v1"], "failurePolicy": "Fail"}
    manifests = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook", "namespace": "default"},
         "spec": {"ports": [{"name": "https", "port": 443}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "webhook-host", "namespace": "default",
                      "labels": {"kubernetes.io/service-name": "webhook"}},
         "addressType": "IPv4", "ports": [{"name": "https", "port": port}],
         "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "python-labeller"},
         "webhooks": [hook("label.python.example.com",
                           {"service": {"namespace": "default", "name": "webhook", "path": "/mutate"}})]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "python-guard"},
         "webhooks": [hook("guard.python.example.com", {"url": f"https://127.0.0.1:{port}/validate"})]},
    ]
    path = tmp_path / "webhooks.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}))
    plane.kubectl("apply", "-f", str(path))
    try:
        resources = plane.kubectl("api-resources", "--api-group=admissionregistration.k8s.io",
                                  "-o", "name").stdout.split()
        assert set(resources) >= {
            "mutatingwebhookconfigurations.admissionregistration.k8s.io",
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
            "validatingadmissionpolicies.admissionregistration.k8s.io",
            "validatingadmissionpolicybindings.admissionregistration.k8s.io"}, resources
        table = plane.kubectl("get", "validatingwebhookconfigurations", "python-guard").stdout.splitlines()
        assert table[0].split() == ["NAME", "WEBHOOKS", "AGE"] and table[1].split()[:2] == ["python-guard", "1"]

        plane.kubectl("-n", ns, "create", "configmap", "plain", "--from-literal=a=b")
        labels = json.loads(plane.kubectl("-n", ns, "get", "configmap", "plain", "-o", "json").stdout)["metadata"]["labels"]
        assert labels == {"admitted": "by-python"}
        refused = plane.kubectl("-n", ns, "create", "configmap", "bad", "--from-literal=forbidden=1", check=False)
        assert refused.returncode != 0
        assert ('admission webhook "guard.python.example.com" denied the request: '
                'the forbidden key is not allowed here') in refused.stderr, refused.stderr
        patched = plane.kubectl("-n", ns, "patch", "configmap", "plain", "--type=merge",
                                "-p", '{"data":{"forbidden":"1"}}', check=False)
        assert "the forbidden key is not allowed here" in patched.stderr, patched.stderr
        # Other namespaces are not selected: the webhooks never hear of them.
        calls = len(Webhook.seen)
        plane.kubectl("-n", "default", "create", "configmap", f"elsewhere-{ns}", "--from-literal=forbidden=1")
        assert len(Webhook.seen) == calls
        operations = {(p, r["operation"]) for p, r in Webhook.seen}
        assert ("/mutate", "CREATE") in operations and ("/validate", "UPDATE") in operations
        # As kube-apiserver does, the plane keeps its connections to a webhook open between calls.
        assert len(set(Webhook.ports)) < len(Webhook.ports), Webhook.ports
    finally:
        plane.kubectl("delete", "mutatingwebhookconfiguration", "python-labeller", check=False)
        plane.kubectl("delete", "validatingwebhookconfiguration", "python-guard", check=False)
        plane.kubectl("-n", "default", "delete", "configmap", f"elsewhere-{ns}", check=False)


class Converter(BaseHTTPRequestHandler):
    """A ConversionReview answerer: v1 keeps `spec.size`, v2 `spec.dimensions.size`."""

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        desired = request["desiredAPIVersion"]
        converted = []
        for obj in request["objects"]:
            spec = obj.get("spec", {})
            if desired.endswith("/v2") and "size" in spec:
                spec = {"dimensions": {"size": spec["size"]}}
            elif desired.endswith("/v1") and "dimensions" in spec:
                spec = {"size": spec["dimensions"]["size"]}
            converted.append({**obj, "apiVersion": desired, "spec": spec})
        reply(self, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                     "response": {"uid": request["uid"], "convertedObjects": converted,
                                  "result": {"status": "Success"}}})

    def log_message(self, *args):
        pass


def test_a_conversion_webhook_written_in_python_serves_each_version_its_shape(plane, ns, tmp_path):
    server, port, bundle = serve(tmp_path, Converter)
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "boxes.convert.example.com"},
           "spec": {"group": "convert.example.com", "scope": "Namespaced",
                    "names": {"plural": "boxes", "singular": "box", "kind": "Box"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                                 {"name": "v2", "served": True, "storage": False, "schema": schema}],
                    "conversion": {"strategy": "Webhook", "webhook": {
                        "conversionReviewVersions": ["v1"],
                        "clientConfig": {"url": f"https://127.0.0.1:{port}/convert", "caBundle": bundle}}}}}
    path = tmp_path / "crd.json"
    path.write_text(json.dumps(crd))
    try:
        plane.kubectl("apply", "-f", str(path))
        plane.kubectl("wait", "--for=condition=Established", "crd/boxes.convert.example.com", "--timeout=20s")
        box = tmp_path / "box.json"
        box.write_text(json.dumps({"apiVersion": "convert.example.com/v1", "kind": "Box",
                                   "metadata": {"name": "b", "namespace": ns}, "spec": {"size": 4}}))
        plane.kubectl("apply", "-f", str(box))
        # kubectl reads the preferred version (v2), which only the webhook can produce.
        got = json.loads(plane.kubectl("-n", ns, "get", "box", "b", "-o", "json").stdout)
        assert got["apiVersion"] == "convert.example.com/v2"
        assert got["spec"] == {"dimensions": {"size": 4}}
        as_v1 = json.loads(plane.kubectl("get", "--raw",
                                         f"/apis/convert.example.com/v1/namespaces/{ns}/boxes/b").stdout)
        assert as_v1["spec"] == {"size": 4}
        plane.kubectl("-n", ns, "patch", "box", "b", "--type=merge", "-p",
                      '{"spec":{"dimensions":{"size":9}}}')
        as_v1 = json.loads(plane.kubectl("get", "--raw",
                                         f"/apis/convert.example.com/v1/namespaces/{ns}/boxes/b").stdout)
        assert as_v1["spec"] == {"size": 9}
    finally:
        plane.kubectl("delete", "crd", "boxes.convert.example.com", "--wait=false", check=False)
        server.shutdown()


class ScaleCap(BaseHTTPRequestHandler):
    """Caps replicas at 3: patches `spec.replicas` of whatever it is shown (a Deployment, or
    the autoscaling/v1 Scale of one)."""

    seen = []
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        ScaleCap.seen.append(request)
        response = {"uid": request["uid"], "allowed": True}
        if (request["object"].get("spec") or {}).get("replicas", 0) > 3:
            patch = [{"op": "replace", "path": "/spec/replicas", "value": 3}]
            response.update(patchType="JSONPatch", patch=base64.b64encode(json.dumps(patch).encode()).decode())
        reply(self, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})

    def log_message(self, *args):
        pass


def test_a_mutating_webhook_on_the_scale_subresource_changes_what_kubectl_scale_stores(plane, ns, tmp_path):
    server, port, bundle = serve(tmp_path, ScaleCap)
    name = f"scale-cap-{ns}"
    plane.kubectl("label", "namespace", ns, "scale=capped")
    hook = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": "cap.python.example.com",
                          "clientConfig": {"caBundle": bundle, "url": f"https://127.0.0.1:{port}/"},
                          "rules": [{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"],
                                     "resources": ["deployments/scale"]}],
                          "namespaceSelector": {"matchLabels": {"scale": "capped"}},
                          "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail"}]}
    apply_json(plane, tmp_path, hook)
    try:
        plane.kubectl("-n", ns, "create", "deployment", "web", "--image=nginx", "--replicas=5")
        assert not ScaleCap.seen, "the rule names only the scale subresource"
        plane.kubectl("-n", ns, "scale", "deployment", "web", "--replicas=7")
        request = ScaleCap.seen[-1]
        assert request["kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
        assert request["subResource"] == "scale"
        assert request["object"]["spec"]["replicas"] == 7
        got = json.loads(plane.kubectl("-n", ns, "get", "deployment", "web", "-o", "json").stdout)
        assert got["spec"]["replicas"] == 3, "the webhook's patch of the Scale reached the Deployment"
    finally:
        plane.kubectl("delete", "mutatingwebhookconfiguration", name, check=False)
        server.shutdown()


def test_a_validating_admission_policy_refuses_through_kubectl(plane, ns, tmp_path):
    plane.kubectl("label", "namespace", ns, "policy=replicas")
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": f"replica-limit-{ns}"},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{
                           "apiGroups": ["apps"], "apiVersions": ["v1"],
                           "operations": ["CREATE", "UPDATE"],
                           "resources": ["deployments", "deployments/scale"]}]},
                       "validations": [{"expression": "object.spec.replicas <= 5",
                                        "messageExpression": "'replicas must be at most 5, not ' + string(object.spec.replicas)"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": f"replica-limit-{ns}"},
               "spec": {"policyName": f"replica-limit-{ns}", "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {"matchLabels": {"policy": "replicas"}}}}}
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [policy, binding]}))
    plane.kubectl("apply", "-f", str(path))
    try:
        table = plane.kubectl("get", "validatingadmissionpolicies", f"replica-limit-{ns}").stdout.splitlines()
        assert table[0].split() == ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"]
        plane.kubectl("-n", ns, "create", "deployment", "web", "--image=nginx", "--replicas=3")
        patched = plane.kubectl("-n", ns, "patch", "deployment", "web", "--type=merge",
                                "-p", '{"spec":{"replicas":9}}', check=False)
        assert "replicas must be at most 5, not 9" in patched.stderr, patched.stderr
        # Through the scale subresource the policy sees an autoscaling/v1 Scale, whose
        # spec.replicas its expression reads alike.
        scaled = plane.kubectl("-n", ns, "scale", "deployment", "web", "--replicas=9", check=False)
        assert scaled.returncode != 0
        assert (f"ValidatingAdmissionPolicy 'replica-limit-{ns}' with binding 'replica-limit-{ns}' "
                "denied request: replicas must be at most 5, not 9") in scaled.stderr, scaled.stderr
        too_many = plane.kubectl("-n", ns, "create", "deployment", "big", "--image=nginx", "--replicas=6",
                                 check=False)
        assert "replicas must be at most 5, not 6" in too_many.stderr, too_many.stderr
    finally:
        plane.kubectl("delete", "validatingadmissionpolicybinding", f"replica-limit-{ns}", check=False)
        plane.kubectl("delete", "validatingadmissionpolicy", f"replica-limit-{ns}", check=False)


def policy_document(name, spec):
    """A ValidatingAdmissionPolicy named `name` over the given spec, with Fail as its failure policy."""
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": {"failurePolicy": "Fail", **spec}}


def apply_json(plane, tmp_path, document, check=True):
    path = tmp_path / f"{document['metadata']['name']}.json"
    path.write_text(json.dumps(document))
    return plane.kubectl("apply", "-f", str(path), check=check)


def test_a_policy_whose_expression_does_not_compile_is_refused_at_create(plane, ns, tmp_path):
    name = f"broken-{ns}"
    policy = policy_document(name, {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                "operations": ["CREATE"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicas >"}]})
    refused = apply_json(plane, tmp_path, policy, check=False)
    assert refused.returncode != 0
    assert (f'The ValidatingAdmissionPolicy "{name}" is invalid: spec.validations[0].expression: '
            'Invalid value: "object.spec.replicas >": compilation failed: ERROR: <input>:1:23: '
            "Syntax error: mismatched input '<EOF>'") in refused.stderr, refused.stderr
    # A result of the wrong type is refused too, as kube-apiserver refuses it.
    policy["spec"]["validations"] = [{"expression": "object.spec.paused"}]
    refused = apply_json(plane, tmp_path, policy, check=False)
    assert ('spec.validations[0].expression: Invalid value: "object.spec.paused": '
            "must evaluate to bool but got dyn") in refused.stderr, refused.stderr
    missing = plane.kubectl("get", "validatingadmissionpolicy", name, check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr, missing.stderr


def test_a_policy_with_a_typo_gets_a_type_checking_warning_in_its_status(plane, ns, tmp_path):
    name = f"typo-{ns}"
    policy = policy_document(name, {
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "validations": [{"expression": "object.spec.replicass <= 5"},
                        {"expression": "object.spec.replicas <= 5"}]})
    apply_json(plane, tmp_path, policy)
    try:
        read = json.loads(plane.kubectl("get", "validatingadmissionpolicy", name, "-o", "json").stdout)
        assert read["metadata"]["generation"] == 1
        assert read["status"]["observedGeneration"] == 1
        assert read["status"]["typeChecking"]["expressionWarnings"] == [{
            "fieldRef": "spec.validations[0].expression",
            "warning": ("apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'\n"
                        " | object.spec.replicass <= 5\n | ...........^\n")}]
        # Fixed, the warning goes and the new generation is observed.
        policy["spec"]["validations"] = policy["spec"]["validations"][1:]
        apply_json(plane, tmp_path, policy)
        status = json.loads(plane.kubectl("get", "validatingadmissionpolicy", name, "-o",
                                          "jsonpath={.status}").stdout)
        assert status == {"observedGeneration": 2, "typeChecking": {}}, status
    finally:
        plane.kubectl("delete", "validatingadmissionpolicy", name, check=False)


def test_an_audit_annotation_that_errs_refuses_requests_under_failure_policy_fail(plane, ns, tmp_path):
    name = f"audit-{ns}"
    plane.kubectl("label", "namespace", ns, f"audited={ns}")
    policy = policy_document(name, {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE"], "resources": ["configmaps"]}]},
        "auditAnnotations": [{"key": "tier", "valueExpression": "'tier ' + object.data.tier"}]})
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Audit"],
                        "matchResources": {"namespaceSelector": {"matchLabels": {"audited": ns}}}}}
    apply_json(plane, tmp_path, policy)
    apply_json(plane, tmp_path, binding)
    try:
        # With the key the annotation reads, the request is admitted (and annotated).
        plane.kubectl("-n", ns, "create", "configmap", "tiered", "--from-literal=tier=gold")
        # Without it the valueExpression errs, and under Fail the request is refused.
        refused = plane.kubectl("-n", ns, "create", "configmap", "plain", "--from-literal=a=b", check=False)
        assert refused.returncode != 0
        assert (f"ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request: "
                "expression ''tier ' + object.data.tier' resulted in error: No such key: tier") in refused.stderr, \
            refused.stderr
        # Under Ignore the same error is left out and the request admitted.
        policy["spec"]["failurePolicy"] = "Ignore"
        apply_json(plane, tmp_path, policy)
        plane.kubectl("-n", ns, "create", "configmap", "plain", "--from-literal=a=b")
    finally:
        plane.kubectl("delete", "validatingadmissionpolicybinding", name, check=False)
        plane.kubectl("delete", "validatingadmissionpolicy", name, check=False)
