"""RBAC, impersonation and ServiceAccount tokens, through kubectl and the Python client."""

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException


def can_i(plane, *args):
    proc = plane.kubectl("auth", "can-i", *args, check=False)
    return proc.stdout.strip()


def test_admins_can_and_strangers_cannot(plane, ns):
    assert can_i(plane, "create", "deployments", "-n", ns) == "yes"
    assert can_i(plane, "get", "pods", "-n", ns, "--as=alice") == "no"
    plane.kubectl("-n", ns, "create", "rolebinding", "alice-view", "--clusterrole=view", "--user=alice")
    assert can_i(plane, "get", "pods", "-n", ns, "--as=alice") == "yes"
    assert can_i(plane, "list", "deployments.apps", "-n", ns, "--as=alice") == "yes"
    assert can_i(plane, "delete", "pods", "-n", ns, "--as=alice") == "no"
    assert can_i(plane, "get", "secrets", "-n", ns, "--as=alice") == "no"
    assert can_i(plane, "get", "pods", "-n", "kube-system", "--as=alice") == "no"
    # Groups bind too, and edit aggregates view.
    plane.kubectl("-n", ns, "create", "rolebinding", "devs-edit", "--clusterrole=edit", "--group=devs")
    assert can_i(plane, "delete", "pods", "-n", ns, "--as=bob", "--as-group=devs") == "yes"
    assert can_i(plane, "create", "rolebindings", "-n", ns, "--as=bob", "--as-group=devs") == "no"


def test_forbidden_requests_get_kube_apiserver_messages(plane, ns):
    proc = plane.kubectl("-n", ns, "get", "configmaps", "--as=mallory", check=False)
    assert proc.returncode != 0
    assert (f'configmaps is forbidden: User "mallory" cannot list resource "configmaps" in API group "" '
            f'in the namespace "{ns}"') in proc.stderr
    proc = plane.kubectl("get", "nodes", "--as=mallory", check=False)
    assert 'cannot list resource "nodes" in API group "" at the cluster scope' in proc.stderr


def test_service_account_tokens_get_exactly_their_bindings(plane, ns):
    plane.kubectl("-n", ns, "create", "serviceaccount", "robot")
    token = plane.kubectl("-n", ns, "create", "token", "robot").stdout.strip()
    cfg = client.Configuration()
    cfg.host = f"https://127.0.0.1:{plane.port}"
    cfg.verify_ssl = False
    cfg.api_key = {"authorization": f"Bearer {token}"}
    robot = client.CoreV1Api(client.ApiClient(cfg))
    with pytest.raises(ApiException) as e:
        robot.list_namespaced_config_map(ns)
    assert e.value.status == 403
    plane.kubectl("-n", ns, "create", "role", "cm-reader", "--verb=get,list", "--resource=configmaps")
    plane.kubectl("-n", ns, "create", "rolebinding", "robot-cm", "--role=cm-reader", f"--serviceaccount={ns}:robot")
    names = [c.metadata.name for c in robot.list_namespaced_config_map(ns).items]
    assert "kube-root-ca.crt" in names
    with pytest.raises(ApiException) as e:
        robot.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x")))
    assert e.value.status == 403
    with pytest.raises(ApiException) as e:
        robot.list_namespaced_config_map("default")
    assert e.value.status == 403
    who = client.AuthenticationV1Api(client.ApiClient(cfg)).create_self_subject_review(
        client.V1SelfSubjectReview())
    assert who.status.user_info.username == f"system:serviceaccount:{ns}:robot"
    assert f"system:serviceaccounts:{ns}" in who.status.user_info.groups


def test_token_requests_are_jwts_that_token_review_accepts(plane, ns):
    """`kubectl create token` with audiences and a bound pod, then TokenReview through the
    Python client, as an authenticating proxy would use them."""
    import base64
    import json as _json
    plane.kubectl("-n", ns, "create", "serviceaccount", "verifier")
    core = plane.core()
    core.create_namespaced_pod(ns, client.V1Pod(
        metadata=client.V1ObjectMeta(name="holder"),
        spec=client.V1PodSpec(service_account_name="verifier",
                              containers=[client.V1Container(name="c", image="busybox")])))
    token = plane.kubectl("-n", ns, "create", "token", "verifier", "--audience=vault",
                          "--bound-object-kind=Pod", "--bound-object-name=holder",
                          "--duration=20m").stdout.strip()
    payload = token.split(".")[1]
    claims = _json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["aud"] == ["vault"] and claims["exp"] - claims["iat"] == 1200
    assert claims["kubernetes.io"]["pod"]["name"] == "holder"

    auth = client.AuthenticationV1Api(plane.api())
    review = auth.create_token_review(client.V1TokenReview(
        spec=client.V1TokenReviewSpec(token=token, audiences=["vault"])))
    assert review.status.authenticated is True
    assert review.status.user.username == f"system:serviceaccount:{ns}:verifier"
    assert review.status.audiences == ["vault"]
    assert review.status.user.extra["authentication.kubernetes.io/pod-name"] == ["holder"]
    # Not an API token: the API audience refuses it, in review and in use.
    review = auth.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token)))
    assert not review.status.authenticated and "audiences" in review.status.error
    status, _ = plane.raw("GET", f"/api/v1/namespaces/{ns}/pods",
                          api=_token_api(plane, token))
    assert status == 401


def _token_api(plane, token):
    cfg = client.Configuration()
    cfg.host = f"https://127.0.0.1:{plane.port}"
    cfg.verify_ssl = False
    cfg.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(cfg)


def test_subject_access_review(plane, ns):
    plane.kubectl("-n", ns, "create", "rolebinding", "carol-view", "--clusterrole=view", "--user=carol")
    authz = client.AuthorizationV1Api(plane.api())
    review = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user="carol", resource_attributes=client.V1ResourceAttributes(namespace=ns, verb="list", resource="pods")))
    result = authz.create_subject_access_review(review)
    assert result.status.allowed is True
    assert "carol-view" in result.status.reason
    review.spec.resource_attributes.verb = "delete"
    assert authz.create_subject_access_review(review).status.allowed is False


def test_impersonation_needs_permission(plane, ns):
    plane.kubectl("-n", ns, "create", "rolebinding", "dave-admin", "--clusterrole=admin", "--user=dave")
    # dave may administer the namespace but may not impersonate others.
    proc = plane.kubectl("-n", ns, "get", "pods", "--as=dave", "--as-group=system:masters", check=False)
    assert proc.returncode == 0, "an admin may impersonate dave with any group"
    plane.kubectl("create", "clusterrolebinding", "dave-nothing", "--clusterrole=view", "--user=nobody")
    assert can_i(plane, "impersonate", "users", "--as=dave") == "no"


def test_a_token_secret_gets_a_long_lived_token_that_lives_with_it(plane, ns, tmp_path):
    """The legacy way to a long-lived token, as the Kubernetes docs show it: a Secret of type
    `kubernetes.io/service-account-token` naming the account is filled by the tokens
    controller (token, ca.crt, namespace, the account's UID); the token authenticates as the
    account until its Secret goes. A token Secret naming no account is refused, and one whose
    account does not exist is deleted."""
    import base64
    import json as _json
    import subprocess
    from conftest import KUBECTL, wait_for
    plane.kubectl("-n", ns, "create", "serviceaccount", "legacy")
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
              "metadata": {"name": "legacy-token",
                           "annotations": {"kubernetes.io/service-account.name": "legacy"}}}
    plane.kubectl("-n", ns, "apply", "-f", "-", input=_json.dumps(secret))
    core = plane.core()
    filled = wait_for(lambda: (lambda s: s if s.data and "token" in s.data else None)(
        core.read_namespaced_secret("legacy-token", ns)), timeout=30, what="the token")
    uid = core.read_namespaced_service_account("legacy", ns).metadata.uid
    assert filled.metadata.annotations["kubernetes.io/service-account.uid"] == uid
    assert base64.b64decode(filled.data["namespace"]).decode() == ns
    assert base64.b64decode(filled.data["ca.crt"]).decode().startswith("-----BEGIN CERTIFICATE-----")
    token = base64.b64decode(filled.data["token"]).decode()
    payload = token.split(".")[1]
    claims = _json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["iss"] == "kubernetes/serviceaccount" and "exp" not in claims
    assert claims["kubernetes.io/serviceaccount/secret.name"] == "legacy-token"

    who = client.AuthenticationV1Api(_token_api(plane, token)).create_self_subject_review(
        client.V1SelfSubjectReview())
    assert who.status.user_info.username == f"system:serviceaccount:{ns}:legacy"
    # kubectl with the token and the CA from the Secret, as a kubeconfig made from it would.
    ca = tmp_path / "ca.crt"
    ca.write_bytes(base64.b64decode(filled.data["ca.crt"]))
    out = subprocess.run([KUBECTL, "--kubeconfig", "/dev/null", "--token", token,
                          "--server", f"https://127.0.0.1:{plane.port}",
                          "--certificate-authority", str(ca), "auth", "whoami",
                          "-o", "jsonpath={.status.userInfo.username}"],
                         capture_output=True, text=True, timeout=30)
    assert out.stdout == f"system:serviceaccount:{ns}:legacy", out.stderr

    # Its Secret gone, the token opens nothing (after kube-apiserver's ten-second cache).
    plane.kubectl("-n", ns, "delete", "secret", "legacy-token")
    wait_for(lambda: plane.raw("GET", f"/api/v1/namespaces/{ns}/configmaps",
                               api=_token_api(plane, token))[0] == 401,
             timeout=30, what="the token refused")

    bad = dict(secret, metadata={"name": "unnamed"})
    out = plane.kubectl("-n", ns, "apply", "-f", "-", input=_json.dumps(bad), check=False)
    assert out.returncode != 0
    assert "metadata.annotations[kubernetes.io/service-account.name]: Required value" in out.stderr
    orphan = dict(secret, metadata={"name": "orphan",
                                    "annotations": {"kubernetes.io/service-account.name": "nobody"}})
    plane.kubectl("-n", ns, "apply", "-f", "-", input=_json.dumps(orphan))
    wait_for(lambda: plane.kubectl("-n", ns, "get", "secret", "orphan", check=False).returncode != 0,
             timeout=30, what="the orphaned token secret deleted")
