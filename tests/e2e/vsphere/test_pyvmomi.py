"""pyvmomi (PyPI), unmodified, against `infrasim vcsim`."""

import ssl
import time
import urllib.request

import pytest
from pyVim.connect import Disconnect
from pyVmomi import vim, vmodl

from conftest import PASSWORD, USER, Vcsim, unverified_tls, wait_for


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
    ctx = unverified_tls()
    req = urllib.request.Request(f"https://127.0.0.1:{vcsim.port}/sdk", data=b"<soapenv:Envelope><broken",
                                 headers={"Content-Type": "text/xml"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, context=ctx, timeout=10)
    assert e.value.code == 500
    body = e.value.read().decode()
    assert "<faultcode>ClientFaultCode</faultcode>" in body
    assert 'xsi:type="InvalidRequest"' in body


def test_an_oversized_request_gets_a_413_soap_fault(vcsim):
    """The whole body is sent before the answer is read (as urllib, pyvmomi and govmomi do):
    the endpoint reads past its limit and answers 413 rather than cutting the connection."""
    ctx = unverified_tls()
    body = b"<soapenv:Envelope>" + b"x" * (20 << 20) + b"</soapenv:Envelope>"
    req = urllib.request.Request(f"https://127.0.0.1:{vcsim.port}/sdk", data=body,
                                 headers={"Content-Type": "text/xml"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, context=ctx, timeout=30)
    assert e.value.code == 413
    answer = e.value.read().decode()
    assert 'xsi:type="InvalidRequest"' in answer and "larger than" in answer


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


def test_capv_clone_flow(tmp_path):
    """What CAPV does to a vCenter: template by path, clone with guestinfo, reconfigure,
    power on, wait for an IP, power off, destroy."""
    import base64

    from pyVim.task import WaitForTask

    v = Vcsim(tmp_path)
    try:
        si = v.connect()
        c = si.RetrieveContent()
        template = c.searchIndex.FindByInventoryPath("DC0/vm/DC0_H0_VM0")
        WaitForTask(template.PowerOffVM_Task())
        template.MarkAsTemplate()
        assert template.config.template is True
        with pytest.raises(vim.fault.InvalidState):
            WaitForTask(template.PowerOnVM_Task())

        pool = c.searchIndex.FindByInventoryPath("DC0/host/DC0_C0/Resources")
        datastore = c.searchIndex.FindByInventoryPath("DC0/datastore/LocalDS_0")
        folder = c.searchIndex.FindByInventoryPath("DC0/vm")
        userdata = base64.b64encode(b"#cloud-config\nhostname: capv-1\n").decode()
        spec = vim.vm.CloneSpec(
            location=vim.vm.RelocateSpec(pool=pool, datastore=datastore),
            powerOn=False, template=False,
            config=vim.vm.ConfigSpec(
                numCPUs=2, memoryMB=4096, instanceUuid="2b1a53c0-8c2e-4c8e-9a3b-000000000001",
                extraConfig=[vim.option.OptionValue(key="guestinfo.userdata", value=userdata),
                             vim.option.OptionValue(key="guestinfo.userdata.encoding", value="base64")]))
        task = template.CloneVM_Task(folder=folder, name="capv-1", spec=spec)
        WaitForTask(task)
        assert task.info.state == "success"
        vm = task.info.result
        assert vm.name == "capv-1"
        assert (vm.config.hardware.numCPU, vm.config.hardware.memoryMB) == (2, 4096)
        assert vm.summary.config.numCpu == 2
        assert vm.config.instanceUuid == "2b1a53c0-8c2e-4c8e-9a3b-000000000001"
        assert vm.config.uuid != template.config.uuid
        extra = {o.key: o.value for o in vm.config.extraConfig}
        assert extra["guestinfo.userdata"] == userdata
        assert extra["guestinfo.userdata.encoding"] == "base64"
        assert vm.resourcePool == pool and vm.runtime.host.parent == pool.owner
        assert vm.runtime.powerState == "poweredOff"
        assert c.searchIndex.FindByUuid(None, vm.config.instanceUuid, True, True) == vm

        WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(
            extraConfig=[vim.option.OptionValue(key="guestinfo.metadata", value="bWV0YQ==")])))
        assert {o.key for o in vm.config.extraConfig} >= {"guestinfo.metadata", "guestinfo.userdata"}

        WaitForTask(vm.PowerOnVM_Task())
        nets = wait_for(lambda: [n for n in (vm.guest.net or []) if n.ipAddress])
        mac = [d.macAddress for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualEthernetCard)]
        assert nets[0].macAddress == mac[0]
        assert vm.guest.ipAddress == nets[0].ipAddress[0]
        assert vm.guest.toolsRunningStatus == "guestToolsRunning"

        with pytest.raises(vim.fault.InvalidPowerState):
            WaitForTask(vm.PowerOnVM_Task())
        with pytest.raises(vim.fault.DuplicateName):
            WaitForTask(template.CloneVM_Task(folder=folder, name="capv-1", spec=spec))
        with pytest.raises(vim.fault.InvalidPowerState):
            WaitForTask(vm.Destroy_Task())

        WaitForTask(vm.PowerOffVM_Task())
        assert vm.guest.ipAddress is None
        WaitForTask(vm.Destroy_Task())
        assert c.searchIndex.FindByInventoryPath("DC0/vm/capv-1") is None
        with pytest.raises(vmodl.fault.ManagedObjectNotFound):
            vm.name
    finally:
        v.stop()


def test_two_clones_get_distinct_ips_and_macs(tmp_path):
    from pyVim.task import WaitForTask

    v = Vcsim(tmp_path)
    try:
        si = v.connect()
        c = si.RetrieveContent()
        source = c.searchIndex.FindByInventoryPath("DC0/vm/DC0_C0_RP0_VM0")
        folder = c.searchIndex.FindByInventoryPath("DC0/vm")
        vms = []
        for name in ("a", "b"):
            task = source.CloneVM_Task(folder=folder, name=name, spec=vim.vm.CloneSpec(
                location=vim.vm.RelocateSpec(), powerOn=True, template=False))
            WaitForTask(task)
            vms.append(task.info.result)
        ips = [wait_for(lambda vm=vm: vm.guest.ipAddress) for vm in vms]
        assert len(set(ips)) == 2
        macs = [vm.guest.net[0].macAddress for vm in vms]
        assert len(set(macs)) == 2
    finally:
        v.stop()


def test_task_states_are_observable_with_a_delay(tmp_path):
    v = Vcsim(tmp_path, "--task-delay-ms", "1500")
    try:
        si = v.connect()
        vm = si.RetrieveContent().searchIndex.FindByInventoryPath("DC0/vm/DC0_H0_VM1")
        task = vm.PowerOffVM_Task()
        assert task.info.state in ("queued", "running")
        wait_for(lambda: task.info.state == "running", timeout=10)
        assert vm.runtime.powerState == "poweredOn", "the operation runs when the task completes"
        wait_for(lambda: task.info.state == "success", timeout=10)
        assert vm.runtime.powerState == "poweredOff"
        tm = si.RetrieveContent().taskManager
        assert task in tm.recentTask
    finally:
        v.stop()


def test_snapshots_create_revert_remove(tmp_path):
    from pyVim.task import WaitForTask

    v = Vcsim(tmp_path)
    try:
        si = v.connect()
        c = si.RetrieveContent()
        vm = c.searchIndex.FindByInventoryPath("DC0/vm/DC0_H0_VM0")
        assert vm.snapshot is None
        # Off, so its CPUs may change (a running VM without CPU hot add refuses).
        WaitForTask(vm.PowerOffVM_Task())
        t = vm.CreateSnapshot_Task(name="base", description="before", memory=False, quiesce=False)
        WaitForTask(t)
        base = t.info.result
        assert isinstance(base, vim.vm.Snapshot)
        WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(numCPUs=4)))
        t = vm.CreateSnapshot_Task(name="four-cpus", description="", memory=False, quiesce=False)
        WaitForTask(t)
        child = t.info.result
        tree = vm.snapshot.rootSnapshotList
        assert [s.name for s in tree] == ["base"]
        assert [s.name for s in tree[0].childSnapshotList] == ["four-cpus"]
        assert vm.snapshot.currentSnapshot == child
        assert vm.rootSnapshot == [base]

        WaitForTask(base.RevertToSnapshot_Task())
        assert vm.config.hardware.numCPU == 1
        assert vm.snapshot.currentSnapshot == base
        WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(numCPUs=8)))
        WaitForTask(vm.RevertToCurrentSnapshot_Task())
        assert vm.config.hardware.numCPU == 1

        WaitForTask(base.RemoveSnapshot_Task(removeChildren=False))
        assert [s.name for s in vm.snapshot.rootSnapshotList] == ["four-cpus"]
        WaitForTask(vm.RemoveAllSnapshots_Task())
        assert vm.snapshot is None
        with pytest.raises(vmodl.fault.ManagedObjectNotFound):
            child.config
    finally:
        v.stop()


def test_events_record_what_methods_did(tmp_path):
    from pyVim.task import WaitForTask

    v = Vcsim(tmp_path)
    try:
        si = v.connect()
        c = si.RetrieveContent()
        vm = c.searchIndex.FindByInventoryPath("DC0/vm/DC0_H0_VM1")
        WaitForTask(vm.PowerOffVM_Task())
        WaitForTask(vm.PowerOnVM_Task())
        em = c.eventManager
        filt = vim.event.EventFilterSpec(entity=vim.event.EventFilterSpec.ByEntity(entity=vm, recursion="self"))
        events = em.QueryEvents(filt)
        kinds = [type(e).__name__ for e in events]
        assert kinds[:2] == ["vim.event.VmPoweredOnEvent", "vim.event.VmPoweredOffEvent"]
        assert events[0].vm.vm == vm and events[0].vm.name == "DC0_H0_VM1"
        assert events[0].datacenter.name == "DC0"
        logins = em.QueryEvents(vim.event.EventFilterSpec(type=[vim.event.UserLoginSessionEvent]))
        assert logins and all(isinstance(e, vim.event.UserLoginSessionEvent) for e in logins)
        # Recursive queries from the datacenter see VM events too.
        dc = c.searchIndex.FindByInventoryPath("DC0")
        assert any(isinstance(e, vim.event.VmPoweredOnEvent)
                   for e in em.QueryEvents(vim.event.EventFilterSpec(
                       entity=vim.event.EventFilterSpec.ByEntity(entity=dc, recursion="all"))))
    finally:
        v.stop()


def test_folders_pools_moves_and_customized_ip(tmp_path):
    from pyVim.task import WaitForTask

    v = Vcsim(tmp_path)
    try:
        si = v.connect()
        c = si.RetrieveContent()
        vm_folder = c.searchIndex.FindByInventoryPath("DC0/vm")
        capi = vm_folder.CreateFolder("capi")
        assert c.searchIndex.FindByInventoryPath("DC0/vm/capi") == capi
        with pytest.raises(vim.fault.DuplicateName):
            vm_folder.CreateFolder("capi")
        root_pool = c.searchIndex.FindByInventoryPath("DC0/host/DC0_C0/Resources")
        def allocation():
            return vim.ResourceAllocationInfo(reservation=0, limit=-1, expandableReservation=True,
                                              shares=vim.SharesInfo(level="normal", shares=0))
        tenant = root_pool.CreateResourcePool(
            "tenant", vim.ResourceConfigSpec(cpuAllocation=allocation(), memoryAllocation=allocation()))
        assert tenant.parent == root_pool and tenant.owner.name == "DC0_C0"

        vm = c.searchIndex.FindByInventoryPath("DC0/vm/DC0_C0_RP0_VM1")
        WaitForTask(capi.MoveIntoFolder_Task([vm]))
        assert vm.parent == capi
        assert c.searchIndex.FindByInventoryPath("DC0/vm/capi/DC0_C0_RP0_VM1") == vm

        WaitForTask(vm.PowerOffVM_Task())
        fixed = vim.vm.customization.Specification(
            nicSettingMap=[vim.vm.customization.AdapterMapping(
                adapter=vim.vm.customization.IPSettings(ip=vim.vm.customization.FixedIp(ipAddress="192.168.77.10")))],
            identity=vim.vm.customization.LinuxPrep(hostName=vim.vm.customization.FixedName(name="vm1"), domain="local"),
            globalIPSettings=vim.vm.customization.GlobalIPSettings())
        WaitForTask(vm.CustomizeVM_Task(fixed))
        WaitForTask(vm.PowerOnVM_Task())
        assert wait_for(lambda: vm.guest.ipAddress) == "192.168.77.10"
        assert c.searchIndex.FindByIp(None, "192.168.77.10", True) == vm
        assert c.searchIndex.FindByDnsName(None, "DC0_C0_RP0_VM1", True) == vm
        with pytest.raises(vim.fault.InvalidPowerState):
            WaitForTask(vm.CustomizeVM_Task(fixed))
    finally:
        v.stop()


def test_vcenter7_negotiates_api_7(tmp_path):
    v = Vcsim(tmp_path, "--vcenter7")
    try:
        si = v.connect()
        about = si.RetrieveContent().about
        assert about.apiVersion == "7.0.3.0" and about.version == "7.0.3"
        # pyvmomi settled on the newest version the server lists.
        assert si._stub.version == "vim.version.v7_0_3_0"
    finally:
        v.stop()


def test_esx_model_is_a_single_host(tmp_path):
    v = Vcsim(tmp_path, "--esx")
    try:
        si = v.connect()
        c = si.RetrieveContent()
        assert c.about.apiType == "HostAgent"
        view = c.viewManager.CreateContainerView(c.rootFolder, [vim.HostSystem], True)
        assert [h.name for h in view.view] == ["localhost.localdomain"]
        assert c.rootFolder.childEntity[0].name == "ha-datacenter"
    finally:
        v.stop()


def test_create_vm_custom_fields_and_linked_clone(tmp_path):
    from pyVim.task import WaitForTask

    v = Vcsim(tmp_path)
    try:
        si = v.connect()
        c = si.RetrieveContent()
        folder = c.searchIndex.FindByInventoryPath("DC0/vm")
        pool = c.searchIndex.FindByInventoryPath("DC0/host/DC0_C0/Resources")
        config = vim.vm.ConfigSpec(name="fresh", numCPUs=2, memoryMB=1024, guestId="ubuntu64Guest",
                                   files=vim.vm.FileInfo(vmPathName="[LocalDS_0]"))
        task = folder.CreateVM_Task(config=config, pool=pool)
        WaitForTask(task)
        fresh = task.info.result
        assert fresh.name == "fresh" and fresh.config.hardware.numCPU == 2
        assert fresh.runtime.powerState == "poweredOff" and fresh.config.guestId == "ubuntu64Guest"
        with pytest.raises(vim.fault.DuplicateName):
            WaitForTask(folder.CreateVM_Task(config=config, pool=pool))

        fields = c.customFieldsManager
        owner = fields.AddCustomFieldDef(name="owner", moType=vim.VirtualMachine)
        fields.SetField(entity=fresh, key=owner.key, value="team-a")
        assert [(f.key, f.value) for f in fresh.customValue] == [(owner.key, "team-a")]
        assert [f.name for f in fields.field] == ["owner"]

        source = c.searchIndex.FindByInventoryPath("DC0/vm/DC0_H0_VM0")
        t = source.CreateSnapshot_Task(name="golden", description="", memory=False, quiesce=False)
        WaitForTask(t)
        snap = t.info.result
        WaitForTask(source.PowerOffVM_Task())
        WaitForTask(source.ReconfigVM_Task(vim.vm.ConfigSpec(numCPUs=6)))
        t = source.CloneVM_Task(folder=folder, name="linked", spec=vim.vm.CloneSpec(
            location=vim.vm.RelocateSpec(diskMoveType="createNewChildDiskBacking"),
            snapshot=snap, powerOn=False, template=False))
        WaitForTask(t)
        linked = t.info.result
        assert linked.config.hardware.numCPU == 1, "a linked clone starts from the snapshot"
    finally:
        v.stop()


def test_folder_model_places_datacenters_and_content_in_folders(tmp_path):
    v = Vcsim(tmp_path, "--datacenters", "2", "--folders", "1", "--standalone-hosts", "0", "--vms", "1")
    try:
        si = v.connect()
        s = si.RetrieveContent().searchIndex
        assert s.FindByInventoryPath("DC0/vm/DC0_C0_RP0_VM0") is not None, "DC0 stays at the root"
        assert s.FindByInventoryPath("F0/DC1/vm/F0/DC1_C0_RP0_VM0") is not None
        assert s.FindByInventoryPath("F0/DC1/host/F0/DC1_C0") is not None
        assert s.FindByInventoryPath("F0/DC1/datastore/F0/LocalDS_0") is not None
    finally:
        v.stop()


def test_fault_injection_from_a_rules_file_changed_at_run_time(tmp_path):
    """`vcsim --faults FILE`: a task method made to fail returns a Task that ends in the
    chosen fault, any other method raises it, and rewriting the file changes the rules of
    the running simulator."""
    import json
    rules = tmp_path / "faults.json"
    rules.write_text(json.dumps([
        {"method": "PowerOffVM_Task", "type": "VirtualMachine", "fault": "InvalidState", "times": 1},
        {"method": "CreateFolder", "type": "Folder", "fault": "NoPermission", "message": "injected: no folders today"},
        {"method": "CurrentTime", "delayMs": 50},
    ]))
    v = Vcsim(tmp_path, "--faults", str(rules))
    try:
        si = v.connect()
        content = si.RetrieveContent()
        si.CurrentTime()  # delayed, not failed
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        vm = sorted(view.view, key=lambda m: m.name)[0]

        def finish(task):
            deadline = time.time() + 10
            while task.info.state in ("queued", "running"):
                assert time.time() < deadline
                time.sleep(0.05)
            return task.info

        info = finish(vm.PowerOffVM_Task())
        assert info.state == "error" and isinstance(info.error, vim.fault.InvalidState), info
        # Described as vCenter describes the real call.
        assert info.descriptionId == "VirtualMachine.powerOff" and info.entity == vm, info
        # `times: 1`: the next call goes through.
        assert finish(vm.PowerOffVM_Task()).state == "success"
        with pytest.raises(vim.fault.NoPermission) as e:
            content.rootFolder.CreateFolder("nope")
        assert e.value.msg == "injected: no folders today"

        rules.write_text("[]")
        deadline = time.time() + 10
        while True:
            try:
                content.rootFolder.CreateFolder("now-allowed")
                break
            except vim.fault.NoPermission:
                assert time.time() < deadline, "the rules file was not re-read"
                time.sleep(0.1)
        Disconnect(si)
    finally:
        v.stop()


def test_session_list_and_terminate_session(vcsim):
    """What a controller's test does to prove it survives a killed session: an administrator
    lists the sessions and terminates another; the victim's next call is NotAuthenticated."""
    admin, victim = vcsim.connect(), vcsim.connect()
    try:
        manager = admin.content.sessionManager
        mine = manager.currentSession.key
        theirs = victim.content.sessionManager.currentSession.key
        keys = [s.key for s in manager.sessionList]
        assert mine in keys and theirs in keys
        with pytest.raises(vmodl.fault.InvalidArgument):
            manager.TerminateSession([mine])
        with pytest.raises(vim.fault.NotFound):
            manager.TerminateSession(["no-such-session"])
        manager.TerminateSession([theirs])
        assert theirs not in [s.key for s in manager.sessionList]
        with pytest.raises(vim.fault.NotAuthenticated):
            victim.content.rootFolder.childEntity
    finally:
        Disconnect(admin)


def test_pyvmomi_reads_storage_policies_from_pbm(vcsim):
    """pyvmomi's PBM stub at /pbm/sdk, with the vim25 session in the SOAP header as
    pyvmomi's samples pass it: the default vSAN policy is found by its well-known ID."""
    import ssl as _ssl
    from pyVmomi import SoapStubAdapter, VmomiSupport, pbm
    si = vcsim.connect()
    try:
        session = si._stub.cookie.split('"')[1]
        VmomiSupport.GetRequestContext()["vcSessionCookie"] = session
        stub = SoapStubAdapter(host="127.0.0.1", port=vcsim.port, path="/pbm/sdk",
                               version="pbm.version.v8_0_3_0", sslContext=_ssl._create_unverified_context())
        content = pbm.ServiceInstance("ServiceInstance", stub).RetrieveContent()
        manager = content.profileManager
        ids = manager.QueryProfile(resourceType=pbm.profile.ResourceType(resourceType="STORAGE"),
                                   profileCategory="REQUIREMENT")
        profiles = manager.RetrieveContent(profileIds=ids)
        by_name = {p.name: p.profileId.uniqueId for p in profiles}
        assert by_name["vSAN Default Storage Policy"] == "aa6d5a82-1c88-45da-85d3-3d74b91a5bad"
        assert isinstance(profiles[0], pbm.profile.CapabilityBasedProfile)
        with pytest.raises(vmodl.fault.InvalidArgument):
            manager.RetrieveContent(profileIds=[pbm.profile.ProfileId(uniqueId="nope")])
        # Without the session, PBM refuses as vCenter does.
        del VmomiSupport.GetRequestContext()["vcSessionCookie"]
        with pytest.raises(vim.fault.NotAuthenticated):
            manager.QueryProfile(resourceType=pbm.profile.ResourceType(resourceType="STORAGE"))
    finally:
        VmomiSupport.GetRequestContext().pop("vcSessionCookie", None)
        Disconnect(si)


def test_a_reconfiguration_with_one_bad_value_changes_nothing(vcsim, si):
    """ReconfigVM_Task validates the whole spec first: a bad memoryMB refuses the task and
    leaves numCPUs as it was. A NIC added by reconfiguration gets vSphere's next unit number."""
    from pyVim.task import WaitForTask
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    vm = sorted(view.view, key=lambda m: m.name)[0]
    cpus = vm.config.hardware.numCPU
    with pytest.raises(vmodl.fault.InvalidArgument):
        WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(numCPUs=cpus + 3, memoryMB=0)))
    assert vm.config.hardware.numCPU == cpus
    nic = vim.vm.device.VirtualDeviceSpec(
        operation="add",
        device=vim.vm.device.VirtualE1000(backing=vim.vm.device.VirtualEthernetCard.NetworkBackingInfo(deviceName="VM Network")))
    WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(deviceChange=[nic])))
    nics = [d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualEthernetCard)]
    assert [(d.key, d.unitNumber) for d in nics][-2:] == [(4000, 7), (4001, 8)]
    assert nics[-1].deviceInfo.label == "Network adapter 2" and nics[-1].macAddress.startswith("00:50:56:")
    nowhere = vim.vm.device.VirtualDeviceSpec(operation="add", device=vim.vm.device.VirtualVmxnet3(
        backing=vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo(
            port=vim.dvs.PortConnection(switchUuid="x", portgroupKey="dvportgroup-nowhere"))))
    with pytest.raises(vmodl.fault.InvalidArgument):
        WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(deviceChange=[nowhere])))
    assert len([d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualEthernetCard)]) == len(nics)


def test_a_running_vm_changes_shape_only_as_hot_plug_allows(vcsim, si):
    """vCenter's rules for a powered-on VM: more CPUs or memory only with hot add enabled, fewer
    CPUs only with hot remove, less memory never, and the hot-plug switches only while it is
    off; a refused change is InvalidPowerState and changes nothing."""
    from pyVim.task import WaitForTask
    c = si.RetrieveContent()
    source = c.searchIndex.FindByInventoryPath("DC0/vm/DC0_H0_VM0")
    t = source.CloneVM_Task(folder=source.parent, name="hotplug",
                            spec=vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=True))
    WaitForTask(t)
    vm = t.info.result
    try:
        assert vm.runtime.powerState == "poweredOn"
        flags = lambda: (vm.config.cpuHotAddEnabled, vm.config.cpuHotRemoveEnabled,
                         vm.config.memoryHotAddEnabled)
        assert flags() == (False, False, False), "off unless asked for, as vCenter's default"
        cpus, memory = vm.config.hardware.numCPU, vm.config.hardware.memoryMB
        for spec in (vim.vm.ConfigSpec(numCPUs=cpus + 1), vim.vm.ConfigSpec(memoryMB=memory * 2),
                     vim.vm.ConfigSpec(memoryMB=memory // 2),
                     vim.vm.ConfigSpec(cpuHotAddEnabled=True)):
            with pytest.raises(vim.fault.InvalidPowerState) as refused:
                WaitForTask(vm.ReconfigVM_Task(spec))
            assert refused.value.existingState == "poweredOn"
        assert (vm.config.hardware.numCPU, vm.config.hardware.memoryMB) == (cpus, memory)
        WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(numCPUs=cpus, annotation="same shape")))

        WaitForTask(vm.PowerOffVM_Task())
        WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(cpuHotAddEnabled=True,
                                                         memoryHotAddEnabled=True)))
        assert flags() == (True, False, True)
        WaitForTask(vm.PowerOnVM_Task())
        WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(numCPUs=cpus + 1, memoryMB=memory * 2)))
        assert (vm.config.hardware.numCPU, vm.config.hardware.memoryMB) == (cpus + 1, memory * 2)
        with pytest.raises(vim.fault.InvalidPowerState):
            WaitForTask(vm.ReconfigVM_Task(vim.vm.ConfigSpec(numCPUs=cpus)))
    finally:
        if vm.runtime.powerState == "poweredOn":
            WaitForTask(vm.PowerOffVM_Task())
        WaitForTask(vm.Destroy_Task())


def test_datastore_files_over_http_need_the_session(vcsim, si):
    """`/folder/<path>?dcPath=…&dsName=…` with the SOAP session cookie, as ESXi serves it."""
    ctx = ssl._create_unverified_context()
    base = f"https://127.0.0.1:{vcsim.port}/folder/iso/tools.iso?dcPath=DC0&dsName=LocalDS_0"

    def call(method, url, cookie=None, data=None):
        headers = {"Cookie": cookie} if cookie else {}
        req = urllib.request.Request(url, method=method, headers=headers, data=data)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    import urllib.error
    cookie = si._stub.cookie
    assert call("PUT", base, data=b"iso")[0] == 401
    assert call("PUT", base, cookie, b"iso-bytes")[0] == 201
    assert call("GET", base, cookie) == (200, b"iso-bytes")
    assert call("GET", base.replace("LocalDS_0", "NoSuchDS"), cookie)[0] == 404
    assert call("DELETE", base, cookie)[0] == 204
    assert call("GET", base, cookie)[0] == 404


def test_search_datastore_task_names_the_datastore_searched(si):
    """The datastore browser's tasks report the datastore (a ManagedEntity) in
    TaskInfo.entity, as vCenter does: pyvmomi refuses a TaskInfo whose entity is the
    browser ("expected type vim.ManagedEntity, but got vim.host.DatastoreBrowser")."""
    from pyVim.task import WaitForTask
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    vm = sorted(view.view, key=lambda m: m.name)[0]
    view.DestroyView()
    ds = vm.datastore[0]
    vmx = vm.config.files.vmPathName  # "[LocalDS_0] DC0_C0_RP0_VM0/DC0_C0_RP0_VM0.vmx"
    folder, vmx_name = vmx.split("] ", 1)[1].rsplit("/", 1)

    spec = vim.host.DatastoreBrowser.SearchSpec(matchPattern=["*.vmx"])
    task = ds.browser.SearchDatastore_Task(f"[{ds.name}] {folder}", spec)
    WaitForTask(task)
    info = task.info
    assert isinstance(info.entity, vim.Datastore) and info.entity == ds
    assert info.entityName == ds.name
    assert info.descriptionId == "host.DatastoreBrowser.search"
    assert info.name.info.wsdlName == "SearchDatastore_Task"
    result = info.result
    assert isinstance(result, vim.host.DatastoreBrowser.SearchResults)
    assert result.datastore == ds and result.folderPath == f"[{ds.name}] {folder}"
    assert [(type(f), f.path) for f in result.file] == [(vim.host.DatastoreBrowser.VmConfigInfo, vmx_name)]

    task = ds.browser.SearchDatastoreSubFolders_Task(f"[{ds.name}]", spec)
    WaitForTask(task)
    info = task.info
    assert info.entity == ds and info.entityName == ds.name
    assert info.descriptionId == "host.DatastoreBrowser.searchSubFolders"
    found = {r.folderPath: [f.path for f in r.file] for r in info.result}
    assert found[f"[{ds.name}] {folder}"] == [vmx_name]


def _get(port, path, cookie=None):
    """GET https://127.0.0.1:<port><path>: (status, body as text, content type)."""
    import urllib.error
    ctx = ssl._create_unverified_context()
    headers = {"Cookie": cookie} if cookie else {}
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, resp.read().decode(), resp.headers.get("Content-Type")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers.get("Content-Type")


def _links(html):
    import html as h
    import re
    return {h.unescape(label): h.unescape(href)
            for href, label in re.findall(r'<a href="([^"]+)">([^<]*)</a>', html)}


def test_folder_lists_datacenters_datastores_and_folders(vcsim, si):
    """`GET /folder` with the session cookie and no path answers 200 with the datacenters
    (govmomi's TestNewClient checks the status), and each listing links to the next level
    down: a datacenter's datastores, a datastore's folders, a folder's files."""
    cookie = si._stub.cookie
    assert _get(vcsim.port, "/folder")[0] == 401
    status, body, ctype = _get(vcsim.port, "/folder", cookie)
    assert status == 200 and ctype.startswith("text/html")
    assert _get(vcsim.port, "/folder/", cookie)[0] == 200
    dcs = _links(body)
    assert dcs == {"DC0": "/folder?dcPath=DC0"}

    status, body, _ = _get(vcsim.port, dcs["DC0"], cookie)
    assert status == 200
    datastores = _links(body)
    assert datastores == {"LocalDS_0": "/folder?dcPath=DC0&dsName=LocalDS_0"}

    status, body, _ = _get(vcsim.port, datastores["LocalDS_0"], cookie)
    assert status == 200
    folders = _links(body)
    assert folders["DC0_H0_VM0/"] == "/folder/DC0_H0_VM0/?dcPath=DC0&dsName=LocalDS_0"

    status, body, _ = _get(vcsim.port, folders["DC0_H0_VM0/"], cookie)
    assert status == 200
    assert set(_links(body)) == {"DC0_H0_VM0.vmx", "DC0_H0_VM0.vmdk"}
    assert _get(vcsim.port, "/folder/no-such-dir?dcPath=DC0&dsName=LocalDS_0", cookie)[0] == 404
    # Without a dcPath a vCenter cannot tell which datacenter's datastore is meant.
    assert _get(vcsim.port, "/folder?dsName=LocalDS_0", cookie)[0] == 404


def test_folder_on_esx_needs_no_dc_path(tmp_path):
    v = Vcsim(tmp_path, "--esx")
    try:
        si = v.connect()
        cookie = si._stub.cookie
        ds = si.RetrieveContent().rootFolder.childEntity[0].datastore[0]
        status, body, _ = _get(v.port, "/folder", cookie)
        assert status == 200 and _links(body) == {"ha-datacenter": "/folder?dcPath=ha-datacenter"}
        status, body, _ = _get(v.port, f"/folder?dsName={ds.name}", cookie)
        assert status == 200
        assert "localhost.localdomain_VM0/" in _links(body)
        Disconnect(si)
    finally:
        v.stop()


def test_esx_mode_has_a_real_hosts_references_and_names(tmp_path):
    """`vcsim --esx` answers with hostd's managed object references and names, so a script
    written against a standalone ESXi host runs unchanged."""
    import re
    from pyVim.task import WaitForTask
    v = Vcsim(tmp_path, "--esx")
    try:
        si = v.connect()
        c = si.RetrieveContent()
        ids = {name: getattr(c, name)._moId for name in (
            "rootFolder", "propertyCollector", "viewManager", "sessionManager",
            "searchIndex", "taskManager", "eventManager")}
        assert ids == {
            "rootFolder": "ha-folder-root", "propertyCollector": "ha-property-collector",
            "viewManager": "ViewManager", "sessionManager": "ha-sessionmgr",
            "searchIndex": "ha-searchindex", "taskManager": "ha-taskmgr",
            "eventManager": "ha-eventmgr"}
        assert c.customFieldsManager is None
        assert c.about.osType == "vmnix-x86" and c.about.instanceUuid is None
        assert c.about.apiType == "HostAgent" and c.about.productLineId == "embeddedEsx"

        root = c.rootFolder
        assert root.name == "ha-folder-root" and root.childType == ["Datacenter"]
        dc = root.childEntity[0]
        assert (dc._moId, dc.name) == ("ha-datacenter", "ha-datacenter")
        folders = [dc.vmFolder, dc.hostFolder, dc.datastoreFolder, dc.networkFolder]
        assert [(f._moId, f.name, f.childType) for f in folders] == [
            ("ha-folder-vm", "vm", ["VirtualMachine"]),
            ("ha-folder-host", "host", ["ComputeResource"]),
            ("ha-folder-datastore", "datastore", ["Datastore"]),
            ("ha-folder-network", "network", ["Network"])]
        cr = dc.hostFolder.childEntity[0]
        host = cr.host[0]
        assert (cr._moId, host._moId, cr.resourcePool._moId) == (
            "ha-compute-res", "ha-host", "ha-root-pool")
        assert host.name == cr.name == "localhost.localdomain"
        ds = dc.datastore[0]
        assert ds.name == "datastore1"
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{12}", ds._moId)
        assert ds.summary.url == f"ds:///vmfs/volumes/{ds._moId}/"
        net = dc.network[0]
        assert (net._moId, net.name) == ("HaNetwork-VM Network", "VM Network")

        # What a host's storage and browsing scripts call.
        storage = host.configManager.storageSystem
        assert storage._moId == "storageSystem"
        assert storage.QueryUnresolvedVmfsVolume() == []
        assert host.datastoreBrowser._moId == "ha-host-datastorebrowser"
        task = host.datastoreBrowser.SearchDatastore_Task("[datastore1]")
        WaitForTask(task)
        assert task.info.entity == ds and task.info.entityName == "datastore1"
        assert "localhost.localdomain_VM0" in {f.path for f in task.info.result.file}

        # Tasks and their TaskManager work under the host's references.
        vm = dc.vmFolder.childEntity[0]
        WaitForTask(vm.PowerOffVM_Task())
        assert vm.runtime.powerState == "poweredOff"
        assert any(t.info.descriptionId == "VirtualMachine.powerOff"
                   for t in c.taskManager.recentTask)
        Disconnect(si)
    finally:
        v.stop()


def test_drs_groups_and_rules_are_kept_and_a_mandatory_rule_moves_vms(tmp_path):
    """ReconfigureComputeResource_Task as pyvmomi sends it: VM and host groups and rules are
    added, edited and removed; a spec with one bad part changes nothing; a mandatory VM-host
    rule moves its VMs onto the hosts it allows (DRS), and a destroyed VM leaves its group."""
    from pyVim.task import WaitForTask

    v = Vcsim(tmp_path)
    try:
        si = v.connect()
        c = si.RetrieveContent()
        cluster = c.searchIndex.FindByInventoryPath("DC0/host/DC0_C0")
        hosts = list(cluster.host)
        config = cluster.configurationEx
        assert isinstance(config, vim.cluster.ConfigInfoEx)
        assert config.drsConfig.enabled is True and config.drsConfig.defaultVmBehavior == "fullyAutomated"
        assert list(config.group) == [] and list(config.rule) == []
        # Two VMs off the last host; the rule wants them on it.
        vms = [vm for vm in cluster.resourcePool.vm if vm.runtime.host != hosts[-1]][:2]
        assert len(vms) == 2
        were_on = [vm.runtime.host for vm in vms]

        def reconfigure(groups=(), rules=(), modify=True):
            spec = vim.cluster.ConfigSpecEx(groupSpec=list(groups), rulesSpec=list(rules))
            WaitForTask(cluster.ReconfigureComputeResource_Task(spec=spec, modify=modify))
        add = lambda info: vim.cluster.GroupSpec(operation="add", info=info)
        reconfigure(groups=[add(vim.cluster.VmGroup(name="web", vm=vms)),
                            add(vim.cluster.HostGroup(name="rack", host=[hosts[-1]]))],
                    rules=[vim.cluster.RuleSpec(operation="add", info=vim.cluster.VmHostRuleInfo(
                        name="web-on-rack", enabled=True, mandatory=True, vmGroupName="web",
                        affineHostGroupName="rack"))])
        config = cluster.configurationEx
        groups = {g.name: g for g in config.group}
        assert isinstance(groups["web"], vim.cluster.VmGroup) and list(groups["web"].vm) == vms
        assert isinstance(groups["rack"], vim.cluster.HostGroup) and list(groups["rack"].host) == [hosts[-1]]
        (rule,) = config.rule
        assert isinstance(rule, vim.cluster.VmHostRuleInfo) and rule.key > 0 and rule.ruleUuid
        assert rule.inCompliance is True and rule.affineHostGroupName == "rack"
        assert [r.name for r in cluster.configuration.rule] == ["web-on-rack"]
        # DRS moved both VMs to the rack's host, and said so.
        assert [vm.runtime.host for vm in vms] == [hosts[-1], hosts[-1]]
        assert all(vm in hosts[-1].vm and vm not in h.vm for vm, h in zip(vms, were_on))
        moved = c.eventManager.QueryEvents(vim.event.EventFilterSpec(
            entity=vim.event.EventFilterSpec.ByEntity(entity=vms[0], recursion="self")))
        assert "DRS migrated" in moved[0].fullFormattedMessage, moved[0]

        # A duplicate group, a rule naming no such group, a host of another cluster: refused
        # whole (the good group beside the bad one is not added).
        other = c.searchIndex.FindByInventoryPath("DC0/host/DC0_H0").host[0]
        for bad in ([add(vim.cluster.VmGroup(name="fine")), add(vim.cluster.VmGroup(name="web"))],
                    [add(vim.cluster.HostGroup(name="away", host=[other]))]):
            with pytest.raises(vmodl.fault.InvalidArgument):
                reconfigure(groups=bad)
        with pytest.raises(vmodl.fault.InvalidArgument):
            reconfigure(rules=[vim.cluster.RuleSpec(operation="add", info=vim.cluster.VmHostRuleInfo(
                name="x", enabled=True, vmGroupName="nope", affineHostGroupName="rack"))])
        assert sorted(g.name for g in cluster.configurationEx.group) == ["rack", "web"]

        # Edit a group, remove the rule by key; DRS settings change; a destroyed VM leaves.
        reconfigure(groups=[vim.cluster.GroupSpec(operation="edit", info=vim.cluster.VmGroup(name="web", vm=[vms[0]]))])
        reconfigure(rules=[vim.cluster.RuleSpec(operation="remove", removeKey=rule.key)])
        assert list(cluster.configurationEx.rule) == []
        WaitForTask(cluster.ReconfigureComputeResource_Task(spec=vim.cluster.ConfigSpecEx(
            drsConfig=vim.cluster.DrsConfigInfo(defaultVmBehavior="manual")), modify=True))
        assert cluster.configurationEx.drsConfig.defaultVmBehavior == "manual"
        if vms[0].runtime.powerState == "poweredOn":
            WaitForTask(vms[0].PowerOffVM_Task())
        WaitForTask(vms[0].Destroy_Task())
        assert [list(g.vm) for g in cluster.configurationEx.group if g.name == "web"] == [[]]
        # Without `modify`, the spec is the whole configuration.
        reconfigure(groups=[add(vim.cluster.VmGroup(name="only"))], modify=False)
        assert [g.name for g in cluster.configurationEx.group] == ["only"]
    finally:
        v.stop()


def test_users_from_a_file_hold_their_role(tmp_path):
    """`vcsim --users FILE`: a ReadOnly user reads the inventory but cannot clone or power a
    VM (NoPermission naming the privilege), the AuthorizationManager says so, and a clone
    ticket of that session opens one more session of the same user, once."""
    import json
    users = tmp_path / "users.json"
    users.write_text(json.dumps([{"name": "readonly@vsphere.local", "password": "ro-secret", "role": "ReadOnly"}]))
    v = Vcsim(tmp_path, "--users", str(users))
    try:
        from pyVim.connect import SmartConnect
        ro = SmartConnect(host="127.0.0.1", port=v.port, user="readonly@vsphere.local", pwd="ro-secret",
                          disableSslCertValidation=True)
        content = ro.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        vm = sorted(view.view, key=lambda m: m.name)[0]
        assert vm.runtime.powerState == "poweredOn"
        spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=False, template=False)
        with pytest.raises(vim.fault.NoPermission) as e:
            vm.CloneVM_Task(folder=vm.parent, name="ro-clone", spec=spec)
        assert e.value.privilegeId == "VirtualMachine.Provisioning.Clone"
        assert e.value.object == vm
        with pytest.raises(vim.fault.NoPermission):
            vm.PowerOffVM_Task()
        auth = content.authorizationManager
        roles = {r.name: r.roleId for r in auth.roleList}
        assert roles["ReadOnly"] == -2 and roles["Admin"] == -1
        key = content.sessionManager.currentSession.key
        granted = auth.HasPrivilegeOnEntity(content.rootFolder, key, ["System.Read", "VirtualMachine.Provisioning.Clone"])
        assert list(granted) == [True, False]
        principals = {p.principal: p.roleId for p in auth.RetrieveAllPermissions()}
        assert principals == {USER: -1, "readonly@vsphere.local": -2}
        with pytest.raises(vim.fault.InvalidLogin):
            SmartConnect(host="127.0.0.1", port=v.port, user="readonly@vsphere.local", pwd="wrong",
                         disableSslCertValidation=True)

        # A clone ticket: a second stub with no session redeems it once.
        ticket = content.sessionManager.AcquireCloneTicket()
        from pyVmomi import SoapStubAdapter
        stub = SoapStubAdapter(host="127.0.0.1", port=v.port, version="vim.version.v8_0_3_0",
                               sslContext=unverified_tls())
        clone = vim.ServiceInstance("ServiceInstance", stub)
        session = clone.content.sessionManager.CloneSession(ticket)
        assert session.userName == "readonly@vsphere.local"
        assert clone.content.sessionManager.currentSession.key != key
        other = vim.ServiceInstance("ServiceInstance", SoapStubAdapter(
            host="127.0.0.1", port=v.port, version="vim.version.v8_0_3_0", sslContext=unverified_tls()))
        with pytest.raises(vim.fault.InvalidLogin):
            other.content.sessionManager.CloneSession(ticket)
        Disconnect(ro)
    finally:
        v.stop()


def test_wait_for_updates_ex_with_max_object_updates(si):
    """A filter over every VM, read with WaitForUpdatesEx as pyvmomi offers it: the first
    answers are cut to `maxObjectUpdates` and say `truncated` until every VM has entered; a
    power change then comes alone, with only the property that changed."""
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    vms = list(view.view)
    pc = content.propertyCollector.CreatePropertyCollector()
    spec = vmodl.query.PropertyCollector.FilterSpec(
        objectSet=[vmodl.query.PropertyCollector.ObjectSpec(
            obj=view, skip=True,
            selectSet=[vmodl.query.PropertyCollector.TraversalSpec(type=vim.view.ContainerView, path="view")])],
        propSet=[vmodl.query.PropertyCollector.PropertySpec(type=vim.VirtualMachine, pathSet=["name", "runtime.powerState"])])
    pc.CreateFilter(spec, partialUpdates=False)
    options = vmodl.query.PropertyCollector.WaitOptions(maxWaitSeconds=0, maxObjectUpdates=2)
    version, entered, truncated = "", [], 0
    while True:
        update = pc.WaitForUpdatesEx(version, options)
        version = update.version
        objects = [o for fs in update.filterSet for o in fs.objectSet]
        assert len(objects) <= 2
        entered += [o.obj for o in objects if o.kind == "enter"]
        if not update.truncated:
            break
        truncated += 1
    assert truncated >= len(vms) // 2 - 1
    assert sorted(m._moId for m in entered) == sorted(m._moId for m in vms)
    vm = vms[0]
    wait = vmodl.query.PropertyCollector.WaitOptions(maxWaitSeconds=10)
    state = vm.runtime.powerState
    task = vm.PowerOffVM_Task() if state == "poweredOn" else vm.PowerOnVM_Task()
    update = pc.WaitForUpdatesEx(version, wait)
    objects = [o for fs in update.filterSet for o in fs.objectSet]
    assert [(o.kind, o.obj, [c.name for c in o.changeSet]) for o in objects] == [
        ("modify", vm, ["runtime.powerState"])]
    with pytest.raises(vmodl.query.InvalidCollectorVersion):
        pc.WaitForUpdatesEx("12345", options)
    wait_for(lambda: task.info.state == "success", what="the power task")
    pc.DestroyPropertyCollector()


def test_rest_session_token_works_as_header_and_as_cookie(vcsim):
    """The vAPI session: a login answers with the token and sets it as the
    `vmware-api-session-id` cookie; a later request may send either."""
    import base64
    import json as jsonlib
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    url = f"https://127.0.0.1:{vcsim.port}"
    req = urllib.request.Request(f"{url}/api/session", method="POST",
                                 headers={"Authorization": f"Basic {basic}"})
    with urllib.request.urlopen(req, context=unverified_tls(), timeout=10) as resp:
        token = jsonlib.load(resp)
        cookie = resp.headers["Set-Cookie"]
    assert cookie.startswith(f"vmware-api-session-id={token};") and "Secure" in cookie
    for headers in ({"vmware-api-session-id": token}, {"Cookie": f"vmware-api-session-id={token}"}):
        req = urllib.request.Request(f"{url}/api/session", headers=headers)
        with urllib.request.urlopen(req, context=unverified_tls(), timeout=10) as resp:
            assert jsonlib.load(resp)["user"] == USER
    req = urllib.request.Request(f"{url}/api/session", headers={"Cookie": "vmware-api-session-id=nope"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, context=unverified_tls(), timeout=10)
    assert e.value.code == 401
