"""pyvmomi (PyPI), unmodified, against `infrasim vcsim`."""

import ssl
import subprocess
import time
import urllib.request

import pytest
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim, vmodl

from conftest import BINARY, free_port

USER = "administrator@vsphere.local"
PASSWORD = "s3cret-pass"


class Vcsim:
    def __init__(self, workdir, *flags):
        self.port = free_port()
        self.log = open(workdir / "vcsim.log", "w")
        self.proc = subprocess.Popen(
            [BINARY, "vcsim", "--listen", f"127.0.0.1:{self.port}", "--password", PASSWORD, *flags],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.banner = []
        deadline = time.time() + 30
        while len(self.banner) < 6:
            assert time.time() < deadline and self.proc.poll() is None, "vcsim did not start"
            self.banner.append(self.proc.stdout.readline().strip())

    def connect(self, pwd=PASSWORD):
        return SmartConnect(host="127.0.0.1", port=self.port, user=USER, pwd=pwd,
                            disableSslCertValidation=True)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="module")
def vcsim(tmp_path_factory):
    v = Vcsim(tmp_path_factory.mktemp("vcsim"))
    yield v
    v.stop()


@pytest.fixture
def si(vcsim):
    si = vcsim.connect()
    yield si
    try:
        Disconnect(si)
    except Exception:
        pass


def test_banner_gives_govc_settings_and_thumbprints(vcsim):
    assert vcsim.banner[0] == (
        f"export GOVC_URL=https://administrator%40vsphere.local:{PASSWORD}@127.0.0.1:{vcsim.port}/sdk")
    assert vcsim.banner[1] == "export GOVC_INSECURE=1"
    sha256 = vcsim.banner[4].split(": ")[1]
    sha1 = vcsim.banner[5].split(": ")[1]
    assert len(sha256.split(":")) == 32 and sha256 == sha256.upper()
    assert len(sha1.split(":")) == 20
    # The printed SHA-256 is the served certificate's.
    import hashlib
    pem = ssl.get_server_certificate(("127.0.0.1", vcsim.port))
    der = ssl.PEM_cert_to_DER_cert(pem)
    assert hashlib.sha256(der).hexdigest().upper() == sha256.replace(":", "")


def test_smart_connect_negotiates_vcenter_8(si):
    about = si.RetrieveContent().about
    assert about.apiType == "VirtualCenter"
    assert about.apiVersion == "8.0.3.0"
    assert about.fullName.startswith("VMware vCenter Server 8.0.3")
    assert si.content.sessionManager.currentSession.userName == USER


def test_container_view_walk_with_paged_retrieve_properties_ex(si):
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine, vim.HostSystem], True)
    spec = vmodl.query.PropertyCollector.FilterSpec(
        objectSet=[vmodl.query.PropertyCollector.ObjectSpec(
            obj=view, skip=True,
            selectSet=[vmodl.query.PropertyCollector.TraversalSpec(
                name="view", path="view", skip=False, type=vim.view.ContainerView)])],
        propSet=[
            vmodl.query.PropertyCollector.PropertySpec(type=vim.VirtualMachine,
                                                       pathSet=["name", "summary.runtime.powerState"]),
            vmodl.query.PropertyCollector.PropertySpec(type=vim.HostSystem, pathSet=["name"]),
        ])
    pc = content.propertyCollector
    pages = []
    result = pc.RetrievePropertiesEx([spec], vmodl.query.PropertyCollector.RetrieveOptions(maxObjects=3))
    while True:
        pages.append(len(result.objects))
        if not result.token:
            break
        result = pc.ContinueRetrievePropertiesEx(result.token)
    assert pages == [3, 3, 2]
    # Collect again in one go to check the values.
    everything = pc.RetrievePropertiesEx([spec], vmodl.query.PropertyCollector.RetrieveOptions())
    found = {}
    for oc in everything.objects:
        props = {p.name: p.val for p in oc.propSet}
        found[props["name"]] = (type(oc.obj).__name__, props.get("summary.runtime.powerState"))
    assert found == {
        "DC0_C0_RP0_VM0": ("vim.VirtualMachine", "poweredOn"),
        "DC0_C0_RP0_VM1": ("vim.VirtualMachine", "poweredOn"),
        "DC0_H0_VM0": ("vim.VirtualMachine", "poweredOn"),
        "DC0_H0_VM1": ("vim.VirtualMachine", "poweredOn"),
        "DC0_C0_H0": ("vim.HostSystem", None),
        "DC0_C0_H1": ("vim.HostSystem", None),
        "DC0_C0_H2": ("vim.HostSystem", None),
        "DC0_H0": ("vim.HostSystem", None),
    }
    view.DestroyView()


def test_classic_traversal_specs_walk_the_tree(si):
    content = si.RetrieveContent()
    TS = vmodl.query.PropertyCollector.TraversalSpec
    SS = vmodl.query.PropertyCollector.SelectionSpec
    folder_to_child = TS(name="folder", type=vim.Folder, path="childEntity", skip=False,
                         selectSet=[SS(name="folder"), SS(name="dc_to_vm"), SS(name="dc_to_host"),
                                    SS(name="cr_to_host")])
    dc_to_vm = TS(name="dc_to_vm", type=vim.Datacenter, path="vmFolder", skip=False, selectSet=[SS(name="folder")])
    dc_to_host = TS(name="dc_to_host", type=vim.Datacenter, path="hostFolder", skip=False,
                    selectSet=[SS(name="folder")])
    cr_to_host = TS(name="cr_to_host", type=vim.ComputeResource, path="host", skip=False)
    spec = vmodl.query.PropertyCollector.FilterSpec(
        objectSet=[vmodl.query.PropertyCollector.ObjectSpec(
            obj=content.rootFolder, skip=False, selectSet=[folder_to_child, dc_to_vm, dc_to_host, cr_to_host])],
        propSet=[vmodl.query.PropertyCollector.PropertySpec(type=vim.ManagedEntity, pathSet=["name"])])
    result = content.propertyCollector.RetrieveContents([spec])
    names = {(type(oc.obj).__name__, oc.propSet[0].val) for oc in result}
    assert ("vim.Folder", "Datacenters") in names
    assert ("vim.Datacenter", "DC0") in names
    assert ("vim.ClusterComputeResource", "DC0_C0") in names
    assert ("vim.HostSystem", "DC0_C0_H2") in names
    assert ("vim.VirtualMachine", "DC0_H0_VM1") in names


def test_search_index(si):
    content = si.RetrieveContent()
    vm = content.searchIndex.FindByInventoryPath("DC0/vm/DC0_H0_VM0")
    assert vm.name == "DC0_H0_VM0"
    assert content.searchIndex.FindByUuid(None, vm.config.uuid, True, False) == vm
    assert content.searchIndex.FindByUuid(None, vm.config.instanceUuid, True, True) == vm
    assert content.searchIndex.FindByInventoryPath("DC0/vm/nope") is None
    cluster = content.searchIndex.FindByInventoryPath("DC0/host/DC0_C0")
    assert isinstance(cluster, vim.ClusterComputeResource)
    host = content.searchIndex.FindChild(cluster, "DC0_C0_H1")
    assert isinstance(host, vim.HostSystem) and host.name == "DC0_C0_H1"


def test_wrong_password_is_invalid_login(vcsim):
    with pytest.raises(vim.fault.InvalidLogin):
        vcsim.connect(pwd="wrong")


def test_missing_object_is_managed_object_not_found(si):
    ghost = vim.VirtualMachine("vm-99999", si._stub)
    with pytest.raises(vmodl.fault.ManagedObjectNotFound) as e:
        ghost.name
    assert e.value.obj._moId == "vm-99999"


def test_logged_out_session_is_refused(vcsim):
    si = vcsim.connect()
    content = si.RetrieveContent()
    root = content.rootFolder
    content.sessionManager.Logout()
    with pytest.raises(vim.fault.NotAuthenticated):
        root.childEntity


def test_malformed_xml_gets_a_soap_fault(vcsim):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(f"https://127.0.0.1:{vcsim.port}/sdk", data=b"<soapenv:Envelope><broken",
                                 headers={"Content-Type": "text/xml"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, context=ctx, timeout=10)
    assert e.value.code == 500
    body = e.value.read().decode()
    assert "<faultcode>ClientFaultCode</faultcode>" in body
    assert 'xsi:type="InvalidRequest"' in body


def test_model_flags_follow_govmomi_semantics(tmp_path):
    v = Vcsim(tmp_path, "--datacenters", "2", "--clusters", "2", "--hosts", "1", "--standalone-hosts", "0",
              "--vms", "1", "--pools", "1", "--datastores", "2")
    try:
        si = v.connect()
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        names = sorted(vm.name for vm in view.view)
        assert names == [f"DC{d}_C{c}_RP{p}_VM0" for d in range(2) for c in range(2) for p in range(2)]
        ds = content.viewManager.CreateContainerView(content.rootFolder, [vim.Datastore], True)
        assert sorted({d.name for d in ds.view}) == ["LocalDS_0", "LocalDS_1"]
    finally:
        v.stop()
