"""`infrasim vcsim --data-dir`: a simulator killed with SIGKILL comes back at its port with
everything a client had been told was done (pyvmomi's clones, power changes, reconfigures,
folders; tags, a content library item, a cluster module through the REST API; a datastore
file; a BMC account), under the same references, UUIDs, instance UUID and certificate
thumbprint, while sessions, as vCenter's, do not survive."""

import base64
import json
import urllib.request

from pyVim.connect import Disconnect
from pyVmomi import vim

from conftest import (PASSWORD, USER, Vcsim, json_exchange, redfish_systems, unverified_tls,
                      wait_for)


def wait_task(task):
    wait_for(lambda: task.info.state in ("success", "error"), timeout=20, what="task")
    assert task.info.state == "success", task.info.error


def inventory(si):
    """Every VM and folder, by reference: what a restart must give back unchanged."""
    view = si.content.viewManager.CreateContainerView(
        si.content.rootFolder, [vim.VirtualMachine, vim.Folder], True)
    try:
        out = {}
        for o in view.view:
            if isinstance(o, vim.VirtualMachine):
                out[o._moId] = (o.name, o.config.uuid, o.config.instanceUuid,
                                str(o.runtime.powerState), o.config.hardware.numCPU,
                                o.parent._moId,
                                {x.key: x.value for x in o.config.extraConfig
                                 if x.key.startswith("test.")})
            else:
                out[o._moId] = (o.name, o.parent._moId if o.parent else None)
        return out
    finally:
        view.Destroy()


def rest(port, method, path, token=None, body=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["vmware-api-session-id"] = token
    else:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    data = json.dumps(body).encode() if body is not None else None
    return json_exchange(urllib.request.Request(f"https://127.0.0.1:{port}{path}", method=method,
                                                headers=headers, data=data))


def raw(port, method, path, data, headers):
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", method=method, data=data,
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, context=unverified_tls(), timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def make_library_item(port, token, datastore, body):
    """A local library on `datastore` with an item whose one file is `body` (pushed through an
    update session, as govc library.import does); the library's and the item's IDs."""
    status, library = rest(port, "POST", "/api/content/local-library", token, {
        "name": "kept-library", "storage_backings": [{"type": "DATASTORE", "datastore_id": datastore}]})
    assert status == 201, library
    status, item = rest(port, "POST", "/api/content/library/item", token,
                        {"name": "kept-item", "library_id": library})
    assert status == 201, item
    _, session = rest(port, "POST", "/api/content/library/item/update-session", token,
                      {"library_item_id": item})
    status, file = rest(port, "POST", f"/api/content/library/item/update-session/{session}/file?action=add",
                        token, {"name": "kept.ovf", "source_type": "PUSH", "size": len(body)})
    assert status == 200, file
    uri = file["upload_endpoint"]["uri"].split(f":{port}", 1)[1]
    assert raw(port, "PUT", uri, body, {"vmware-api-session-id": token})[0] == 200
    assert rest(port, "POST", f"/api/content/library/item/update-session/{session}?action=complete",
                token)[0] == 204
    return library, item


def thumbprint(banner):
    return next(line for line in banner if "SHA-256" in line).split(": ", 1)[1]


def test_a_killed_simulator_comes_back_with_what_it_acknowledged(tmp_path):
    data = tmp_path / "vcsim-data"
    v = Vcsim(tmp_path, "--data-dir", str(data), "--vms", "3")
    si = v.connect()
    content = si.content
    vms = [vm for vm in content.viewManager.CreateContainerView(
        content.rootFolder, [vim.VirtualMachine], True).view if not vm.config.template]
    first, second = sorted(vms, key=lambda vm: vm._moId)[:2]
    folder = first.parent.CreateFolder("kept-folder")
    wait_task(first.CloneVM_Task(folder=folder, name="kept-clone",
                                 spec=vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=True)))
    wait_task(second.PowerOffVM_Task())
    wait_task(second.ReconfigVM_Task(spec=vim.vm.ConfigSpec(
        numCPUs=4, extraConfig=[vim.option.OptionValue(key="test.kept", value="yes")])))
    status, token = rest(v.port, "POST", "/api/session")
    assert status == 201
    status, category = rest(v.port, "POST", "/api/cis/tagging/category", token,
                            {"name": "k8s-zone", "cardinality": "SINGLE", "associable_types": []})
    assert status == 201, category
    status, tag = rest(v.port, "POST", "/api/cis/tagging/tag", token,
                       {"name": "zone-a", "category_id": category})
    assert status == 201, tag
    status, _ = rest(v.port, "POST", f"/api/cis/tagging/tag-association/{tag}?action=attach", token,
                     {"object_id": {"type": "VirtualMachine", "id": first._moId}})
    assert status in (200, 204), _
    datacenter = content.rootFolder.childEntity[0]
    datastore = datacenter.datastore[0]
    cluster = next(c for c in datacenter.hostFolder.childEntity
                   if isinstance(c, vim.ClusterComputeResource))
    ovf = b'<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1"><VirtualSystem/></Envelope>'
    library, item = make_library_item(v.port, token, datastore._moId, ovf)
    status, module = rest(v.port, "POST", "/api/vcenter/cluster/modules", token,
                          {"cluster": cluster._moId})
    assert status in (200, 201), module
    file_path = (f"/folder/kept/notes.txt?dcPath={datacenter.name}&dsName={datastore.name}")
    cookie = {"Cookie": si._stub.cookie}
    assert raw(v.port, "PUT", file_path, b"kept across restarts", cookie)[0] in (200, 201)
    # A BMC account, as ViNO makes one through the Redfish AccountService.
    status, account = json_exchange(urllib.request.Request(
        f"https://127.0.0.1:{v.port}/redfish/v1/AccountService/Accounts", method="POST",
        headers={"Content-Type": "application/json",
                 "Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()},
        data=json.dumps({"UserName": "bmc-operator", "Password": "bmc-pass-1",
                         "RoleId": "Operator"}).encode()))
    assert status == 201, account
    before = inventory(si)
    instance_uuid = content.about.instanceUuid
    old_cookie = si._stub.cookie
    print_before = thumbprint(v.banner)
    v.kill()

    # Another model on the command line: the kept simulator wins over it.
    v = Vcsim(tmp_path, "--data-dir", str(data), "--vms", "9", port=v.port)
    try:
        assert thumbprint(v.banner) == print_before
        si = v.connect()
        assert si.content.about.instanceUuid == instance_uuid
        after = inventory(si)
        assert after == before
        clone = next(ref for ref, o in after.items() if o[0] == "kept-clone")
        assert after[clone][3] == "poweredOn" and after[clone][5] == folder._moId
        assert after[second._moId][3] == "poweredOff"
        assert after[second._moId][4] == 4 and after[second._moId][6] == {"test.kept": "yes"}
        # The tag is still attached; the REST token, like every session, is gone.
        assert rest(v.port, "GET", "/api/session", token)[0] == 401
        status, token = rest(v.port, "POST", "/api/session")
        status, listed = rest(v.port, "POST", "/api/cis/tagging/tag-association?action=list-attached-tags",
                              token, {"object_id": {"type": "VirtualMachine", "id": first._moId}})
        assert status == 200 and listed == [tag]
        # The SOAP session from before the restart is not one any more.
        stale = vim.ServiceInstance("ServiceInstance", si._stub)
        si._stub.cookie = old_cookie
        try:
            stale.content.sessionManager.currentSession
            raise AssertionError("a session outlived the restart")
        except vim.fault.NotAuthenticated:
            pass
        # The library item with its file, the cluster module and the datastore file.
        status, got = rest(v.port, "GET", f"/api/content/library/item/{item}", token)
        assert status == 200 and got["library_id"] == library and got["size"] == len(ovf), got
        status, modules = rest(v.port, "GET", "/api/vcenter/cluster/modules", token)
        assert status == 200 and [m["module"] for m in modules["summaries"]] == [module], modules
        # The BMC account opens the VMs' BMCs.
        assert len(redfish_systems(v.port, "bmc-operator", "bmc-pass-1")) == len(
            [o for o in after.values() if len(o) > 2])
        si = v.connect()
        cookie = {"Cookie": si._stub.cookie}
        assert raw(v.port, "GET", file_path, None, cookie) == (200, b"kept across restarts")
        # Work goes on, with references the old ones never had.
        vm = si.content.searchIndex.FindByUuid(None, after[clone][1], True)
        assert vm is not None and vm._moId == clone
        wait_task(vm.CloneVM_Task(folder=folder, name="after-restart",
                                  spec=vim.vm.CloneSpec(location=vim.vm.RelocateSpec())))
        new = {ref for ref, o in inventory(si).items() if o[0] == "after-restart"}
        assert len(new) == 1 and not new & set(before)
        Disconnect(si)
    finally:
        v.stop()
