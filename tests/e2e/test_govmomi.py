"""govmomi, the Go library under govc and CAPV (Debian's package), against `infrasim vcsim`,
driven by our small Go client in tests/govmomi."""

import os
import pathlib
import subprocess

import pytest

from test_pyvmomi import PASSWORD, Vcsim

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOPATH_SRC = ROOT / "tests" / "govmomi"


@pytest.fixture(scope="module")
def govmomi_client(tmp_path_factory):
    out = tmp_path_factory.mktemp("go") / "govmomi-e2e"
    env = dict(os.environ, GO111MODULE="off", GOFLAGS="", GOPATH=f"{GOPATH_SRC}:/usr/share/gocode",
               GOCACHE=str(tmp_path_factory.mktemp("gocache")))
    subprocess.run(["go", "build", "-o", str(out), "govmomi-e2e"], check=True, env=env, timeout=600,
                   cwd=GOPATH_SRC)
    return out


def test_govmomi_capv_flow_and_govc_style_reads(govmomi_client, tmp_path):
    v = Vcsim(tmp_path)
    try:
        url = f"https://administrator%40vsphere.local:{PASSWORD}@127.0.0.1:{v.port}/sdk"
        proc = subprocess.run([str(govmomi_client), "-url", url], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        steps = [line for line in proc.stdout.splitlines() if line.startswith("ok ")]
        assert steps == [
            "ok about", "ok ls vm", "ok ls host", "ok retrieve summaries", "ok clone result",
            "ok clone config", "ok guest ip", "ok machine module and tag", "ok invalid power state", "ok events", "ok snapshots",
            "ok destroyed", "ok rest session user", "ok rest session ended",
            "ok rest session from soap", "ok rest login with a wrong password",
            "ok duplicate category refused", "ok single cardinality", "ok associable types",
            "ok datacenter region", "ok zone objects", "ok tags on objects",
            "ok category deletion takes its tags", "ok members added once", "ok module members",
            "ok member removed", "ok module listed", "ok module deleted",
            "ok pbm default policy", "ok pbm unknown policy", "ok pbm compatible datastores",
            "ok datastore file round trip", "ok missing datastore file", "ok datastore ls",
            "ok datastore ls -R", "ok missing folder",
        ]
        assert proc.stdout.strip().endswith("PASS")
    finally:
        v.stop()


def test_rest_sessions_with_plain_http_clients(tmp_path):
    """The vAPI session service in both spellings, by urllib as a script would call it:
    `/rest` wraps answers in `value`, `/api` does not; errors take each one's shape."""
    import base64
    import json
    import ssl
    import urllib.error
    import urllib.request
    v = Vcsim(tmp_path)
    try:
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        base = f"https://127.0.0.1:{v.port}"

        def call(method, path, headers=None):
            req = urllib.request.Request(base + path, method=method, headers=headers or {})
            try:
                with urllib.request.urlopen(req, context=insecure, timeout=10) as resp:
                    body = resp.read()
                    return resp.status, json.loads(body) if body else None
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read() or b"null")

        basic = "Basic " + base64.b64encode(f"administrator@vsphere.local:{PASSWORD}".encode()).decode()
        status, body = call("POST", "/rest/com/vmware/cis/session", {"Authorization": basic})
        assert status == 200 and len(body["value"]) == 32
        token = body["value"]
        status, body = call("POST", "/rest/com/vmware/cis/session?~action=get", {"vmware-api-session-id": token})
        assert status == 200 and body["value"]["user"] == "administrator@vsphere.local"

        status, body = call("POST", "/api/session", {"Authorization": basic})
        assert status == 201 and isinstance(body, str)
        api_token = body
        status, body = call("GET", "/api/session", {"vmware-api-session-id": api_token})
        assert status == 200 and body["user"] == "administrator@vsphere.local" and "created_time" in body
        assert call("DELETE", "/api/session", {"vmware-api-session-id": api_token})[0] == 204
        status, body = call("GET", "/api/session", {"vmware-api-session-id": api_token})
        assert status == 401 and body["error_type"] == "UNAUTHENTICATED"

        wrong = "Basic " + base64.b64encode(b"administrator@vsphere.local:nope").decode()
        status, body = call("POST", "/rest/com/vmware/cis/session", {"Authorization": wrong})
        assert status == 401 and body["type"] == "com.vmware.vapi.std.errors.unauthenticated"
        # Other services need a session first.
        status, body = call("GET", "/rest/com/vmware/cis/tagging/category")
        assert status == 401

        # Tagging in the /api spelling: bare specs and answers, `action=` operations.
        status, api_token = call("POST", "/api/session", {"Authorization": basic})
        auth = {"vmware-api-session-id": api_token, "Content-Type": "application/json"}

        def send(method, path, body):
            req = urllib.request.Request(base + path, method=method, headers=auth, data=json.dumps(body).encode())
            try:
                with urllib.request.urlopen(req, context=insecure, timeout=10) as resp:
                    raw = resp.read()
                    return resp.status, json.loads(raw) if raw else None
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read() or b"null")

        status, category = send("POST", "/api/cis/tagging/category",
                                {"name": "env", "cardinality": "MULTIPLE", "associable_types": []})
        assert status == 201 and category.startswith("urn:vmomi:InventoryServiceCategory:")
        status, tag = send("POST", "/api/cis/tagging/tag", {"name": "prod", "category_id": category})
        assert status == 201
        status, got = call("GET", f"/api/cis/tagging/tag/{tag}", auth)
        assert status == 200 and got["name"] == "prod" and got["category_id"] == category
        vm = {"type": "Folder", "id": "group-d1"}
        status, _ = send("POST", f"/api/cis/tagging/tag-association/{tag}?action=attach", {"object_id": vm})
        assert status in (200, 204), _
        status, listed = send("POST", "/api/cis/tagging/tag-association?action=list-attached-tags", {"object_id": vm})
        assert status == 200 and listed == [tag]
        status, err = send("POST", f"/api/cis/tagging/tag-association/{tag}?action=attach",
                           {"object_id": {"type": "VirtualMachine", "id": "vm-404"}})
        assert status == 404 and err["error_type"] == "NOT_FOUND"
    finally:
        v.stop()
