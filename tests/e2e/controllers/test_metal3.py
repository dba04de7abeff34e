"""The metal3 stand-in driving BareMetalHosts through their BMCs: the hosts are VMs of an
`infrasim vcsim`, their BMCs its Redfish service. Each state is watched as kubectl shows it;
what the BMC did (power, boot source, the agent's media) is checked on the VM with pyvmomi;
bad credentials are the registration error metal3 reports."""

import json

import pytest
from pyVim.connect import Disconnect
from pyVmomi import vim

from conftest import PASSWORD, USER, Vcsim, get, redfish_systems, unique, wait_for

AGENT_ISO = "http://ironic.infrasim.invalid/images/ironic-python-agent.iso"


@pytest.fixture(scope="module")
def vcsim(tmp_path_factory):
    v = Vcsim(tmp_path_factory.mktemp("metal3"), "--vms", "3")
    yield v
    v.stop()


@pytest.fixture(scope="module")
def si(vcsim):
    si = vcsim.connect()
    yield si
    Disconnect(si)


@pytest.fixture(scope="module")
def machines(vcsim, si):
    """The VMs, by system path, powered off as a new machine is."""
    systems = redfish_systems(vcsim.port)
    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    by_uuid = {vm.config.uuid: vm for vm in view.view}
    view.Destroy()
    out = {}
    for path in systems:
        vm = by_uuid[path.rsplit("/", 1)[1]]
        if vm.runtime.powerState == "poweredOn":
            task = vm.PowerOffVM_Task()
            wait_for(lambda: task.info.state in ("success", "error"), what="power off")
        out[path] = vm
    return out


def bmc_record(vm):
    for option in vm.config.extraConfig:
        if option.key == "infrasim.bmc":
            return json.loads(option.value)
    return {}


def host_yaml(ns, name, address, password=PASSWORD, online=False, extra=""):
    return f"""apiVersion: v1
kind: Secret
metadata: {{name: {name}-bmc, namespace: {ns}}}
stringData: {{username: "{USER}", password: "{password}"}}
---
apiVersion: metal3.io/v1alpha1
kind: BareMetalHost
metadata: {{name: {name}, namespace: {ns}}}
spec:
  online: {str(online).lower()}
  bootMACAddress: "{{mac}}"
  bmc: {{address: "{address}", credentialsName: {name}-bmc, disableCertificateVerification: true}}
{extra}"""


def state(plane, ns, name):
    return ((get(plane, ns, "bmh", name) or {}).get("status") or {}).get("provisioning", {}).get("state")


def test_a_host_is_registered_inspected_provisioned_and_deprovisioned_through_its_bmc(plane, ns, vcsim, machines):
    path, vm = sorted(machines.items())[0]
    mac = next(d.macAddress for d in vm.config.hardware.device
               if isinstance(d, vim.vm.device.VirtualEthernetCard))
    rv = get(plane, ns, "bmh")["metadata"]["resourceVersion"]
    name = unique("host")
    plane.kubectl("apply", "-f", "-", input=host_yaml(
        ns, name, f"redfish+https://127.0.0.1:{vcsim.port}{path}").replace("{mac}", mac))
    events = plane.watch_events(f"/apis/metal3.io/v1alpha1/namespaces/{ns}/baremetalhosts",
                                {"resourceVersion": rv}, timeout=30,
                                until=lambda e: (e["object"].get("status") or {}).get(
                                    "provisioning", {}).get("state") == "available")
    seen = []
    for e in events:
        s = (e["object"].get("status") or {}).get("provisioning", {}).get("state")
        if s and (not seen or seen[-1] != s):
            seen.append(s)
    assert seen == ["registering", "inspecting", "preparing", "available"], seen
    assert "available" in plane.kubectl("-n", ns, "get", "bmh", name).stdout
    status = get(plane, ns, "bmh", name)["status"]
    assert status["operationalStatus"] == "OK" and status["errorCount"] == 0
    assert status["goodCredentials"]["credentials"] == {"name": f"{name}-bmc", "namespace": ns}
    hardware = status["hardware"]
    assert hardware["cpu"]["count"] == vm.config.hardware.numCPU
    assert hardware["ramMebibytes"] == vm.config.hardware.memoryMB
    assert [n["mac"] for n in hardware["nics"]] == [mac.lower()]
    assert hardware["nics"][0]["pxe"] is True, "the boot MAC"
    assert hardware["storage"][0]["sizeBytes"] > 0
    # Inspection booted the agent by PXE and powered the machine off again.
    assert bmc_record(vm)["lastBoot"]["source"] == "Pxe"
    assert vm.runtime.powerState == "poweredOff" and status["poweredOn"] is False

    # online: the BMC powers the VM on.
    plane.kubectl("-n", ns, "patch", "bmh", name, "--type=merge", "-p", '{"spec":{"online":true}}')
    wait_for(lambda: vm.runtime.powerState == "poweredOn", timeout=30, what="VM on")
    wait_for(lambda: get(plane, ns, "bmh", name)["status"]["poweredOn"] is True, what="poweredOn")

    # An image: provisioned, booting from its disk.
    image = {"url": "http://images.example/ubuntu.qcow2", "checksum": "abc", "checksumType": "sha256",
             "format": "qcow2"}
    plane.kubectl("-n", ns, "patch", "bmh", name, "--type=merge", "-p", json.dumps({"spec": {"image": image}}))
    wait_for(lambda: state(plane, ns, name) == "provisioned", timeout=30, what="provisioned")
    status = get(plane, ns, "bmh", name)["status"]
    assert status["provisioning"]["image"]["url"] == image["url"]
    assert status["operationHistory"]["provision"]["end"]
    record = bmc_record(vm)
    assert record["boot"]["target"] == "Hdd" and record["boot"]["enabled"] == "Continuous"
    assert record["lastBoot"]["source"] == "Hdd" and vm.runtime.powerState == "poweredOn"

    # The image gone: deprovisioned (cleaned by the agent) and available, powered off.
    plane.kubectl("-n", ns, "patch", "bmh", name, "--type=json", "-p", '[{"op":"remove","path":"/spec/image"}]')
    wait_for(lambda: state(plane, ns, name) == "available", timeout=30, what="available again")
    assert vm.runtime.powerState == "poweredOff" or get(plane, ns, "bmh", name)["spec"]["online"]
    reasons = {e["reason"] for e in json.loads(plane.kubectl(
        "-n", ns, "get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json").stdout)["items"]}
    assert {"Registered", "InspectionComplete", "ProvisioningComplete", "DeprovisioningComplete"} <= reasons, reasons


def test_virtual_media_hosts_boot_the_agent_and_a_live_iso_from_the_cd(plane, ns, vcsim, machines):
    path, vm = sorted(machines.items())[1]
    name = unique("vmedia")
    live = "http://images.example/live.iso"
    plane.kubectl("apply", "-f", "-", input=host_yaml(
        ns, name, f"redfish-virtualmedia+https://127.0.0.1:{vcsim.port}{path}", online=True,
        extra=f"  image: {{url: \"{live}\", format: live-iso}}\n").replace('bootMACAddress: "{mac}"\n  ', ""))
    wait_for(lambda: state(plane, ns, name) == "provisioned", timeout=30, what="provisioned")
    record = bmc_record(vm)
    assert record["lastBoot"] == {"source": "Cd", "image": live, "at": record["lastBoot"]["at"]}
    assert record["media"]["Cd"]["image"] == live
    assert vm.runtime.powerState == "poweredOn"


def test_refused_credentials_are_a_registration_error_until_they_are_fixed(plane, ns, vcsim, machines):
    path, vm = sorted(machines.items())[2]
    name = unique("badcreds")
    plane.kubectl("apply", "-f", "-", input=host_yaml(
        ns, name, f"redfish://127.0.0.1:{vcsim.port}{path}", password="wrong").replace(
            'bootMACAddress: "{mac}"\n  ', ""))
    status = wait_for(lambda: (get(plane, ns, "bmh", name).get("status") or {}).get("errorType") and
                      get(plane, ns, "bmh", name)["status"], timeout=30, what="an error")
    assert status["operationalStatus"] == "error"
    assert status["errorType"] == "registration error"
    assert status["provisioning"]["state"] == "registering"
    assert "401" in status["errorMessage"], status["errorMessage"]
    assert "registration error" in plane.kubectl("-n", ns, "get", "bmh", name).stdout
    # The right password: the next try (after the backoff) registers it.
    plane.kubectl("-n", ns, "create", "secret", "generic", f"{name}-bmc", "--dry-run=client", "-o", "yaml",
                  f"--from-literal=username={USER}", f"--from-literal=password={PASSWORD}")
    plane.kubectl("-n", ns, "patch", "secret", f"{name}-bmc", "--type=merge", "-p",
                  json.dumps({"stringData": {"password": PASSWORD}}))
    wait_for(lambda: state(plane, ns, name) == "available", timeout=45, what="registered after the fix")
    assert get(plane, ns, "bmh", name)["status"]["operationalStatus"] == "OK"
