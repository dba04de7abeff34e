"""govmomi, the Go library under govc and CAPV (Debian's package), against `infrasim vcsim`,
driven by our small Go client in tests/govmomi."""

import base64
import json
import os
import subprocess
import urllib.request

import pytest

from conftest import PASSWORD, ROOT, Vcsim, json_exchange

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
            "ok clone config", "ok clone storage policy", "ok guest ip", "ok machine module and tag", "ok invalid power state", "ok events", "ok snapshots",
            "ok destroyed", "ok rest session user", "ok rest session ended",
            "ok rest session from soap", "ok rest login with a wrong password",
            "ok duplicate category refused", "ok single cardinality", "ok associable types",
            "ok datacenter region", "ok zone objects", "ok tags on objects",
            "ok category deletion takes its tags", "ok members added once", "ok module members",
            "ok member removed", "ok module listed", "ok module deleted",
            "ok pbm default policy", "ok pbm unknown policy", "ok pbm compatible datastores",
            "ok datastore file round trip", "ok missing datastore file", "ok datastore ls",
            "ok datastore ls -R", "ok missing folder",
            "ok library created", "ok library file uploaded", "ok library session completed",
            "ok library listed", "ok library item", "ok ovf deployed", "ok deployed vm",
            "ok library item deleted", "ok library deleted",
        ]
        assert proc.stdout.strip().endswith("PASS")
    finally:
        v.stop()


def test_rest_sessions_with_plain_http_clients(tmp_path):
    """The vAPI session service in both spellings, by urllib as a script would call it:
    `/rest` wraps answers in `value`, `/api` does not; errors take each one's shape."""
    v = Vcsim(tmp_path)
    try:
        base = f"https://127.0.0.1:{v.port}"

        def call(method, path, headers=None):
            return json_exchange(urllib.request.Request(base + path, method=method, headers=headers or {}))

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
            return json_exchange(urllib.request.Request(base + path, method=method, headers=auth,
                                                        data=json.dumps(body).encode()))

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


def test_content_library_in_the_api_spelling(tmp_path):
    """A content library over `/api` with urllib, as a script would: an OVF item uploaded with
    a plain PUT to the URL its update session hands out, then deployed as a VM."""
    v = Vcsim(tmp_path)
    try:
        base = f"https://127.0.0.1:{v.port}"
        headers = {"Content-Type": "application/json"}

        def send(method, url, body=None, raw=None):
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            return json_exchange(urllib.request.Request(url if url.startswith("https:") else base + url,
                                                        method=method, headers=headers, data=data))

        basic = base64.b64encode(f"administrator@vsphere.local:{PASSWORD}".encode()).decode()
        headers["Authorization"] = "Basic " + basic
        _, token = send("POST", "/api/session")
        del headers["Authorization"]
        headers["vmware-api-session-id"] = token
        status, library = send("POST", "/api/content/local-library", {
            "name": "scripts", "type": "LOCAL",
            "storage_backings": [{"type": "DATASTORE", "datastore_id": "datastore-404"}]})
        assert status == 400 and library["error_type"] == "INVALID_ARGUMENT"
        # The datastore and pool, by their references, read over SOAP.
        content = v.connect().RetrieveContent()
        datacenter = content.rootFolder.childEntity[0]
        datastore = datacenter.datastore[0]._moId
        pool = next(c for c in datacenter.hostFolder.childEntity if hasattr(c, "resourcePool")).resourcePool._moId
        ovf = (b'<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1">'
               b'<VirtualSystem ovf:id="from-script"/></Envelope>')
        status, library = send("POST", "/api/content/local-library", {
            "name": "scripts", "storage_backings": [{"type": "DATASTORE", "datastore_id": datastore}]})
        assert status == 201, library
        status, item = send("POST", "/api/content/library/item", {"name": "vm", "library_id": library})
        assert status == 201, item
        _, session = send("POST", "/api/content/library/item/update-session", {"library_item_id": item})
        status, file = send("POST", f"/api/content/library/item/update-session/{session}/file?action=add",
                            {"name": "vm.ovf", "source_type": "PUSH", "size": len(ovf)})
        assert status == 200 and file["upload_endpoint"]["uri"].startswith(base + "/cls/data/"), file
        headers["Content-Type"] = "application/octet-stream"
        assert send("PUT", file["upload_endpoint"]["uri"], raw=ovf)[0] == 200
        headers["Content-Type"] = "application/json"
        assert send("POST", f"/api/content/library/item/update-session/{session}?action=complete")[0] == 204
        status, got = send("GET", f"/api/content/library/item/{item}")
        assert status == 200 and got["size"] == len(ovf) and got["type"] == "ovf", got
        status, result = send("POST", f"/api/vcenter/ovf/library-item/{item}?action=deploy",
                              {"deployment_spec": {}, "target": {"resource_pool_id": pool}})
        assert status == 200 and result["succeeded"] and result["resource_id"]["type"] == "VirtualMachine", result
        # Named as the OVF's VirtualSystem, in the datacenter's VM folder (no folder was given).
        vm = content.searchIndex.FindByInventoryPath(f"{datacenter.name}/vm/from-script")
        assert vm is not None and vm._moId == result["resource_id"]["id"]
        assert send("DELETE", f"/api/content/local-library/{library}")[0] == 204
        assert send("GET", f"/api/content/library/item/{item}")[0] == 404
    finally:
        v.stop()
