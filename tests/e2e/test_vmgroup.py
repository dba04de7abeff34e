"""The VmGroup controller driven with kubectl as the Code Connect walkthrough does, against a
simulated vCenter (a VCenterSimulator of the same plane), its VMs checked with pyvmomi."""

import json

from pyVim.connect import Disconnect
from pyVmomi import vim

from conftest import wait_for
from test_vcsim_controller import connect, simulator

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
    out = plane.kubectl("-n", ns, "get", "vg", name, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def condition(obj, type_):
    for c in ((obj or {}).get("status") or {}).get("conditions", []):
        if c["type"] == type_:
            return c
    return None


def vms_named(si, prefix):
    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    try:
        return {vm.name: vm for vm in view.view if vm.name.startswith(prefix)}
    finally:
        view.Destroy()


def ready(plane, ns, replicas):
    def check():
        g = group(plane, ns)
        s = (g or {}).get("status") or {}
        return g if s.get("readyReplicas") == replicas and s.get("replicas") == replicas else None
    return wait_for(check, timeout=60, what=f"{replicas} ready VMs")


def test_the_walkthrough_creates_scales_recovers_reshapes_and_deletes(plane, ns):
    status, host, port = simulator(plane, ns, "vc", {"kubernetesVersions": ["v1.33.0"]})
    plane.kubectl("-n", ns, "create", "secret", "generic", "vcenter",
                  f"--from-literal=server={host}:{port}",
                  f"--from-literal=username={status['username']}",
                  f"--from-literal=password={status['password']}",
                  f"--from-literal=thumbprint={status['thumbprint']}")
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

        # A new shape reaches the running VMs.
        plane.kubectl("-n", ns, "patch", "vg", "vmgroup-sample", "--type", "merge",
                      "-p", '{"spec":{"cpu":2,"memory":"1536Mi"}}')
        wait_for(lambda: all(vm.config.hardware.numCPU == 2 and vm.config.hardware.memoryMB == 1536
                             for vm in vms_named(si, prefix).values()),
                 timeout=30, what="VMs reconfigured")

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
    plane.kubectl("-n", ns, "create", "secret", "generic", "vcenter",
                  "--from-literal=server=127.0.0.1:1", "--from-literal=username=u",
                  "--from-literal=password=p")
    wait_for(lambda: "thumbprint" in (condition(group(plane, ns), "VCenterReachable") or {}).get("message", ""),
             timeout=60, what="the untrusted Secret reported")
    plane.kubectl("-n", ns, "delete", "vg", "vmgroup-sample", "--timeout=30s")
