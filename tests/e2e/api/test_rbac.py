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
