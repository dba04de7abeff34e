"""The VmGroup controller driven with kubectl as the Code Connect walkthrough does, against a
simulated vCenter (a VCenterSimulator of the same plane), its VMs checked with pyvmomi."""

import json
import subprocess
import time

from pyVim.connect import Disconnect
from pyVim.task import WaitForTask
from pyVmomi import vim

from conftest import (BINARY, PASSWORD, USER, Plane, Vcsim, condition, connect, deployed_controller, get,
                      metric_samples, never_forbidden, scraped_by_monitoring, simulator, wait_for)

SAMPLE = """apiVersion: vm.codeconnect.vmworld.com/v1alpha1
kind: VmGroup
metadata:
  name: vmgroup-sample
spec:
  # Add fields here
  cpu: 4
  memory: 1
  replicas: 3
  template: vm-template
"""


def group(plane, ns, name="vmgroup-sample"):
    return get(plane, ns, "vg", name)


def vms_named(si, prefix):
    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    try:
        return {vm.name: vm for vm in view.view if vm.name.startswith(prefix)}
    finally:
        view.Destroy()


def vcenter_secret(plane, ns, server, username, password, thumbprint=None):
    """The Secret `vcenter` a VmGroup reads its vCenter from (pinned by the thumbprint, if any)."""
    pinned = [f"--from-literal=thumbprint={thumbprint}"] if thumbprint else []
    plane.kubectl("-n", ns, "create", "secret", "generic", "vcenter", f"--from-literal=server={server}",
                  f"--from-literal=username={username}", f"--from-literal=password={password}", *pinned)


def vcsim_secret(plane, ns, vc):
    """The Secret `vcenter` naming an `infrasim vcsim` process, pinned by its thumbprint."""
    vcenter_secret(plane, ns, f"127.0.0.1:{vc.port}", USER, PASSWORD, vc.banner[4].split(": ")[1])


def ready(plane, ns, replicas):
    def check():
        g = group(plane, ns)
        s = (g or {}).get("status") or {}
        return g if s.get("readyReplicas") == replicas and s.get("replicas") == replicas else None
    return wait_for(check, timeout=60, what=f"{replicas} ready VMs")


def test_the_walkthrough_creates_scales_recovers_reshapes_and_deletes(plane, ns):
    status, host, port = simulator(plane, ns, "vc", {"kubernetesVersions": ["v1.33.0"]})
    vcenter_secret(plane, ns, f"{host}:{port}", status["username"], status["password"],
                   status["thumbprint"])
    plane.kubectl("-n", ns, "apply", "-f", "-", input=SAMPLE)

    # The sample's template does not exist: said clearly, nothing made.
    missing = wait_for(lambda: condition(group(plane, ns), "TemplateFound"), timeout=30,
                       what="TemplateFound")
    assert missing["status"] == "False" and "vm-template" in missing["message"]
    events = plane.kubectl("-n", ns, "get", "events", "-o", "json").stdout
    assert "TemplateNotFound" in events
    si = connect(status)
    try:
        prefix = f"{ns}-vmgroup-sample-"
        assert vms_named(si, prefix) == {}

        # The walkthrough's fix: patch the template; the group recovers on its own.
        plane.kubectl("-n", ns, "patch", "vg", "vmgroup-sample", "--type", "merge",
                      "-p", '{"spec":{"template":"ubuntu-2204-kube-v1.33.0"}}')
        g = ready(plane, ns, 3)
        assert condition(g, "Ready")["status"] == "True"
        assert condition(g, "VCenterReachable")["status"] == "True"
        assert g["status"]["observedGeneration"] == g["metadata"]["generation"]
        vms = vms_named(si, prefix)
        assert sorted(vms) == [f"{prefix}{i}" for i in range(3)]
        for vm in vms.values():
            # No placement: the vCenter's first cluster, not the template's standalone host.
            assert vm.resourcePool.owner.name == "DC0_C0"
            assert vm.parent.name == "vm" and [d.name for d in vm.datastore] == ["LocalDS_0"]
            assert vm.config.hardware.numCPU == 4
            assert vm.config.hardware.memoryMB == 1024
            assert vm.runtime.powerState == "poweredOn"
            assert vm.guest.ipAddress
        by_name = {v["name"]: v for v in g["status"]["vms"]}
        assert by_name[f"{prefix}0"]["moRef"] == vms[f"{prefix}0"]._moId

        table = plane.kubectl("-n", ns, "get", "vg").stdout
        assert "DESIRED" in table and "READY" in table and "ubuntu-2204-kube-v1.33.0" in table

        # Through the scale subresource, up and down (newest first).
        plane.kubectl("-n", ns, "scale", "vg/vmgroup-sample", "--replicas=5")
        ready(plane, ns, 5)
        assert len(vms_named(si, prefix)) == 5
        plane.kubectl("-n", ns, "scale", "vg/vmgroup-sample", "--replicas=2")
        ready(plane, ns, 2)
        assert sorted(vms_named(si, prefix)) == [f"{prefix}0", f"{prefix}1"]

        # A new shape reaches the running VMs. They have no CPU hot remove (vCenter's default),
        # so the simulator, as vCenter, refuses fewer CPUs while they run: each is powered off,
        # reconfigured and powered on again (a new boot time), and the group is ready again.
        booted = {name: vm.runtime.bootTime for name, vm in vms_named(si, prefix).items()}
        plane.kubectl("-n", ns, "patch", "vg", "vmgroup-sample", "--type", "merge",
                      "-p", '{"spec":{"cpu":2,"memory":"1536Mi"}}')
        wait_for(lambda: all(vm.config.hardware.numCPU == 2 and vm.config.hardware.memoryMB == 1536
                             for vm in vms_named(si, prefix).values()),
                 timeout=30, what="VMs reconfigured")
        g = ready(plane, ns, 2)
        assert condition(g, "Ready")["status"] == "True"
        for name, vm in vms_named(si, prefix).items():
            assert vm.runtime.powerState == "poweredOn"
            assert vm.runtime.bootTime > booted[name], f"{name} was power-cycled"

        # A VM powered off behind the controller's back is powered on again.
        WaitForTask(vms_named(si, prefix)[f"{prefix}1"].PowerOffVM_Task())
        wait_for(lambda: vms_named(si, prefix)[f"{prefix}1"].runtime.powerState == "poweredOn",
                 timeout=30, what="the VM powered on again")

        # Deleting the group deletes its VMs before the group goes.
        plane.kubectl("-n", ns, "delete", "vg", "vmgroup-sample", "--timeout=60s")
        assert vms_named(si, prefix) == {}
        assert group(plane, ns) is None
    finally:
        Disconnect(si)


def test_a_group_without_a_usable_secret_says_why(plane, ns):
    plane.kubectl("-n", ns, "apply", "-f", "-", input=SAMPLE)
    reach = wait_for(lambda: condition(group(plane, ns), "VCenterReachable"), timeout=30,
                     what="VCenterReachable")
    assert reach["status"] == "False" and f"Secret {ns}/vcenter not found" in reach["message"]
    vcenter_secret(plane, ns, "127.0.0.1:1", "u", "p")
    wait_for(lambda: "thumbprint" in (condition(group(plane, ns), "VCenterReachable") or {}).get("message", ""),
             timeout=60, what="the untrusted Secret reported")
    plane.kubectl("-n", ns, "delete", "vg", "vmgroup-sample", "--timeout=30s")


class Controller:
    """`infrasim controller` running only the VmGroup controller, on one namespace."""

    def __init__(self, plane, ns, workdir):
        self.args = [BINARY, "controller", "--kubeconfig", plane.kubeconfig, "--namespace", ns,
                     "--capi-core", "external", "--vcsim", "false", "--vmgroup", "true",
                     "--leader-elect", "false"]
        self.log = open(workdir / "controller.log", "a")
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.log.close()


def marks(si, prefix):
    """Each VM of the prefix with its custom field values."""
    return {name: {v.key: v.value for v in vm.customValue} for name, vm in vms_named(si, prefix).items()}


def test_a_killed_controller_and_a_killed_session_leave_no_duplicate_or_orphan(tmp_path):
    # Clones take 100 ms each, so the controller can be killed in the middle of a scale.
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps([{"method": "CloneVM_Task", "delayMs": 100}]))
    vc = Vcsim(tmp_path, "--faults", str(faults))
    (tmp_path / "plane").mkdir()
    plane = Plane(tmp_path / "plane", "--vmgroup", "false")
    ns = "restart"
    plane.kubectl("create", "namespace", ns)
    controller = Controller(plane, ns, tmp_path)
    si = vc.connect()
    try:
        vcsim_secret(plane, ns, vc)
        plane.kubectl("-n", ns, "apply", "-f", "-",
                      input=SAMPLE.replace("vm-template", "DC0_H0_VM0").replace("replicas: 3", "replicas: 10"))
        prefix = f"{ns}-vmgroup-sample-"
        wait_for(lambda: len(vms_named(si, prefix)) >= 3, timeout=30, what="the scale under way")
        controller.kill()
        assert len(vms_named(si, prefix)) < 10, "killed in the middle of the scale"
        controller.start()
        ready(plane, ns, 10)
        marked = marks(si, prefix)
        assert sorted(marked) == sorted(f"{prefix}{i}" for i in range(10)), "no duplicate, none missing"
        assert all(f"{ns}/vmgroup-sample" in values.values() for values in marked.values()), "no orphan"

        # An administrator ends the controller's session: the next change still goes through.
        sm = si.content.sessionManager
        others = [s.key for s in sm.sessionList if s.key != sm.currentSession.key]
        assert others
        sm.TerminateSession(others)
        plane.kubectl("-n", ns, "scale", "vg/vmgroup-sample", "--replicas=12")
        ready(plane, ns, 12)
        assert len(vms_named(si, prefix)) == 12
        plane.kubectl("-n", ns, "delete", "vg", "vmgroup-sample", "--timeout=60s")
        assert vms_named(si, prefix) == {}
    finally:
        Disconnect(si)
        controller.stop()
        plane.stop()
        vc.stop()


def test_a_group_naming_a_vcenter_simulator_waits_for_it_then_fills_it(plane, ns):
    # The group comes first: it waits for the simulator to serve, woken by its status.
    plane.kubectl("-n", ns, "apply", "-f", "-", input=SAMPLE.replace(
        "template: vm-template",
        "template: DC0_H0_VM0\n  vcenterRef:\n    simulator: vc2").replace("replicas: 3", "replicas: 2"))
    waiting = wait_for(lambda: condition(group(plane, ns), "VCenterReachable"), timeout=30,
                       what="VCenterReachable")
    assert waiting["status"] == "False" and "vc2" in waiting["message"]
    status, _, _ = simulator(plane, ns, "vc2")
    g = ready(plane, ns, 2)
    assert condition(g, "VCenterReachable")["status"] == "True"
    si = connect(status)
    try:
        assert sorted(vms_named(si, f"{ns}-vmgroup-sample-")) == [
            f"{ns}-vmgroup-sample-0", f"{ns}-vmgroup-sample-1"]
    finally:
        Disconnect(si)
    plane.kubectl("-n", ns, "delete", "vg", "vmgroup-sample", "--timeout=30s")


def test_placement_by_name_puts_the_clones_and_their_nic_there_and_a_wrong_one_is_reported(plane, ns):
    status, _, _ = simulator(plane, ns, "vc3")
    spec = ("template: DC0_H0_VM0\n  vcenterRef:\n    simulator: vc3\n"
            "  placement:\n    cluster: DC0_C0\n    datastore: LocalDS_0\n    network: DC0_DVPG0\n"
            "    folder: nowhere")
    plane.kubectl("-n", ns, "apply", "-f", "-", input=SAMPLE.replace(
        "template: vm-template", spec).replace("replicas: 3", "replicas: 1"))
    found = wait_for(lambda: condition(group(plane, ns), "PlacementFound"), timeout=30,
                     what="PlacementFound")
    assert found["status"] == "False" and "nowhere" in found["message"]
    plane.kubectl("-n", ns, "patch", "vg", "vmgroup-sample", "--type", "json",
                  "-p", '[{"op": "remove", "path": "/spec/placement/folder"}]')
    ready(plane, ns, 1)
    si = connect(status)
    try:
        vm = vms_named(si, f"{ns}-vmgroup-sample-")[f"{ns}-vmgroup-sample-0"]
        assert vm.resourcePool.owner.name == "DC0_C0", "the cluster's pool, not the template's host"
        assert [d.name for d in vm.datastore] == ["LocalDS_0"]
        assert [n.name for n in vm.network] == ["DC0_DVPG0"], "the NIC moved to the portgroup"
        nics = [d for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualEthernetCard)]
        assert len(nics) == 1, "the template's NIC replaced, not added to"
        # Connected as vCenter connects a NIC to a distributed port group: through a port.
        pg = vm.network[0]
        port = nics[0].backing.port
        assert isinstance(nics[0].backing,
                          vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo)
        assert (port.portgroupKey, port.switchUuid) == (pg.key, pg.config.distributedVirtualSwitch.uuid)
        assert [n.network for n in vm.guest.net] == ["DC0_DVPG0"] and vm.guest.ipAddress
    finally:
        Disconnect(si)
    plane.kubectl("-n", ns, "delete", "vg", "vmgroup-sample", "--timeout=30s")


def test_a_shape_the_vcenter_refuses_is_reported_and_not_retried(plane, ns, tmp_path):
    """A reconfiguration vCenter refuses (an injected InsufficientResourcesFault on the task):
    each VM is powered on again after its power cycle, the status says why, and the same
    shape is not tried again (no more power cycles); a new shape is."""
    faults = tmp_path / "faults.json"
    faults.write_text("[]")
    vc = Vcsim(tmp_path, "--faults", str(faults))
    si = vc.connect()
    try:
        vcsim_secret(plane, ns, vc)
        plane.kubectl("-n", ns, "apply", "-f", "-", input=SAMPLE.replace(
            "vm-template", "DC0_H0_VM0").replace("replicas: 3", "replicas: 2"))
        ready(plane, ns, 2)
        prefix = f"{ns}-vmgroup-sample-"
        faults.write_text('[{"method": "ReconfigVM_Task", "fault": "InsufficientResourcesFault"}]')
        time.sleep(1.5)  # the rules file is re-read when it changes
        plane.kubectl("-n", ns, "patch", "vg", "vmgroup-sample", "--type", "merge", "-p", '{"spec":{"cpu":2}}')

        def both_refused():
            c = condition(group(plane, ns), "Ready") or {}
            return c if c.get("message", "").count("refused the new shape") == 2 else None
        c = wait_for(both_refused, timeout=60, what="both VMs refused")
        assert c["status"] == "False" and "insufficient resources" in c["message"].lower(), c
        vms = vms_named(si, prefix)
        wait_for(lambda: all(vm.runtime.powerState == "poweredOn" for vm in vms.values()),
                 timeout=30, what="the VMs on again")
        booted = {name: vm.runtime.bootTime for name, vm in vms.items()}
        assert all(vm.config.hardware.numCPU == 4 for vm in vms.values())
        time.sleep(7)  # longer than a task's follow-up: no further power cycle comes
        assert {name: vm.runtime.bootTime for name, vm in vms.items()} == booted

        faults.write_text("[]")
        time.sleep(1.5)
        plane.kubectl("-n", ns, "patch", "vg", "vmgroup-sample", "--type", "merge", "-p", '{"spec":{"cpu":3}}')
        wait_for(lambda: all(vm.config.hardware.numCPU == 3 for vm in vms_named(si, prefix).values()),
                 timeout=60, what="a new shape tried and taken")
        ready(plane, ns, 2)
        plane.kubectl("-n", ns, "delete", "vg", "vmgroup-sample", "--timeout=60s")
    finally:
        Disconnect(si)
        vc.stop()


def test_the_controller_needs_no_more_than_its_deployed_rbac(tmp_path):
    """The RBAC of `infrasim manifests vmgroup`, bound to a ServiceAccount whose token is the
    controller's only credential, is enough for the whole life of a group."""
    (tmp_path / "plane").mkdir()
    plane = Plane(tmp_path / "plane", "--vmgroup", "false")
    vc = Vcsim(tmp_path)
    controller = None
    try:
        controller, log, metrics_port = deployed_controller(plane, tmp_path, "vmgroup")
        ns = "rbac-proof"
        plane.kubectl("create", "namespace", ns)
        vcsim_secret(plane, ns, vc)
        plane.kubectl("-n", ns, "apply", "-f", "-", input=SAMPLE.replace(
            "vm-template", "DC0_H0_VM0").replace("replicas: 3", "replicas: 2"))
        ready(plane, ns, 2)
        plane.kubectl("-n", ns, "delete", "vg", "vmgroup-sample", "--timeout=60s")
        si = vc.connect()
        try:
            assert vms_named(si, f"{ns}-vmgroup-sample-") == {}
        finally:
            Disconnect(si)
        # Its metrics, as the manifest serves them, to a scraper the plane allows.
        status, text, anonymous = scraped_by_monitoring(plane, metrics_port)
        assert (status, anonymous) == (200, 401), text
        assert sum(metric_samples(text, "controller_runtime_reconcile_total", controller="vmgroup")) > 0
        never_forbidden(log)
    finally:
        if controller:
            controller.terminate()
            controller.wait(timeout=10)
        plane.stop()
        vc.stop()
