"""OpenStack's `sushy` (PyPI, what Ironic drives BMCs with), unmodified, against the Redfish
service `infrasim vcsim` serves beside `/sdk`: every VM a system; power, one-time boot and
virtual media through sushy, checked on the VM with pyvmomi; and the errors a BMC gives."""

import json
import pathlib
import ssl
import sys
import urllib.request

import pytest
import sushy
from pyVim.connect import Disconnect
from pyVmomi import vim

from conftest import PASSWORD, USER, Vcsim, json_exchange, unverified_tls, wait_for


@pytest.fixture(scope="module")
def vcsim(tmp_path_factory):
    v = Vcsim(tmp_path_factory.mktemp("redfish"))
    yield v
    v.stop()


@pytest.fixture(scope="module")
def si(vcsim):
    si = vcsim.connect()
    yield si
    Disconnect(si)


@pytest.fixture(scope="module")
def bmc(vcsim):
    """A sushy root logged in with a Redfish session (sushy's default: session, else Basic)."""
    root = sushy.Sushy(f"https://127.0.0.1:{vcsim.port}", username=USER, password=PASSWORD,
                       verify=False)
    yield root


def vms(si):
    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    try:
        return {vm.config.uuid: vm for vm in view.view if not vm.config.template}
    finally:
        view.Destroy()


def bmc_record(vm):
    """What the BMC keeps for the machine, read from the VM's extraConfig with pyvmomi."""
    for option in vm.config.extraConfig:
        if option.key == "infrasim.bmc":
            return json.loads(option.value)
    return {}


def wait_task(task):
    wait_for(lambda: task.info.state in ("success", "error"), timeout=20, what="task")
    assert task.info.state == "success", task.info.error


def raw(vcsim, method, path, body=None, headers=None, auth=(USER, PASSWORD)):
    """One request as a script with curl would send it: its status, headers (lower-cased
    names) and JSON body."""
    import base64
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(f"https://127.0.0.1:{vcsim.port}{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, context=unverified_tls(), timeout=10) as resp:
            text = resp.read()
            return resp.status, lowered(resp.headers), json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, lowered(e.headers), json.loads(text) if text else None


def lowered(headers):
    return {k.lower(): v for k, v in headers.items()}


def message_id(body):
    return body["error"]["@Message.ExtendedInfo"][0]["MessageId"]


def test_sushy_logs_in_with_a_session_and_finds_every_vm(bmc, si):
    assert bmc.redfish_version.startswith("1.")
    systems = bmc.get_system_collection()
    ids = {path.rsplit("/", 1)[1] for path in systems.members_identities}
    assert ids == set(vms(si)), "every VM is a system, named by its BIOS UUID"
    # sushy logged in with a Redfish session: the session service lists it.
    sessions = bmc.get_session_service().sessions
    assert any(s.username == USER for s in sessions.get_members())
    assert len(bmc.get_manager_collection().members_identities) == len(ids)
    assert len(bmc.get_chassis_collection().members_identities) == len(ids)


def test_power_follows_resets_and_the_vm_follows_the_system(bmc, si):
    uuid, vm = sorted(vms(si).items())[0]
    system = bmc.get_system(f"/redfish/v1/Systems/{uuid}")
    assert sushy.RESET_FORCE_OFF in system.get_allowed_reset_system_values()
    system.reset_system(sushy.RESET_FORCE_OFF)
    wait_for(lambda: vm.runtime.powerState == "poweredOff", what="VM off")
    system.refresh()
    assert system.power_state == sushy.POWER_STATE_OFF
    system.reset_system(sushy.RESET_ON)
    wait_for(lambda: vm.runtime.powerState == "poweredOn", what="VM on")
    system.refresh()
    assert system.power_state == sushy.POWER_STATE_ON
    # A VM powered with vSphere is seen by the BMC.
    wait_task(vm.PowerOffVM_Task())
    system.refresh()
    assert system.power_state == sushy.POWER_STATE_OFF


def test_hardware_is_the_vms(bmc, si):
    uuid, vm = sorted(vms(si).items())[1]
    if vm.runtime.powerState == "poweredOn":
        wait_task(vm.PowerOffVM_Task())
    spec = vim.vm.ConfigSpec(numCPUs=4, numCoresPerSocket=2, memoryMB=4096)
    wait_task(vm.ReconfigVM_Task(spec))
    system = bmc.get_system(f"/redfish/v1/Systems/{uuid}")
    count, _arch = system.processors.summary
    assert count == 4, "sushy adds the processors' TotalThreads up"
    assert len(system.processors.get_members()) == 2
    assert system.memory_summary.size_gib == 4
    macs = {d.macAddress.lower() for d in vm.config.hardware.device
            if isinstance(d, vim.vm.device.VirtualEthernetCard)}
    assert {m.lower() for m in system.ethernet_interfaces.summary} == macs
    assert system.name == vm.name and system.uuid == uuid


def test_a_one_time_pxe_boot_is_taken_once(bmc, si):
    uuid, vm = sorted(vms(si).items())[2]
    system = bmc.get_system(f"/redfish/v1/Systems/{uuid}")
    system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_PXE,
                                   enabled=sushy.BOOT_SOURCE_ENABLED_ONCE)
    system.refresh()
    assert system.boot.target == sushy.BOOT_SOURCE_TARGET_PXE
    assert system.boot.enabled == sushy.BOOT_SOURCE_ENABLED_ONCE
    assert bmc_record(vm)["boot"]["target"] == "Pxe", "kept with the VM"
    reset = sushy.RESET_FORCE_RESTART if vm.runtime.powerState == "poweredOn" else sushy.RESET_ON
    system.reset_system(reset)
    wait_for(lambda: vm.runtime.powerState == "poweredOn", what="VM on")
    system.refresh()
    assert system.boot.enabled == sushy.BOOT_SOURCE_ENABLED_DISABLED
    assert bmc_record(vm)["lastBoot"]["source"] == "Pxe"
    system.reset_system(sushy.RESET_FORCE_RESTART)
    assert bmc_record(vm)["lastBoot"]["source"] == "Hdd", "once means once"


def test_virtual_media_is_inserted_booted_and_ejected(bmc, si):
    uuid, vm = sorted(vms(si).items())[3]
    system = bmc.get_system(f"/redfish/v1/Systems/{uuid}")
    manager = system.managers[0]
    cd = manager.virtual_media.get_member(f"{manager.path}/VirtualMedia/Cd")
    image = "http://images.example/ironic-python-agent.iso"
    cd.insert_media(image)
    cd.refresh()
    assert cd.inserted and cd.image == image
    assert bmc_record(vm)["media"]["Cd"]["image"] == image
    system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_CD, enabled=sushy.BOOT_SOURCE_ENABLED_ONCE)
    if vm.runtime.powerState == "poweredOn":
        system.reset_system(sushy.RESET_FORCE_OFF)
    system.reset_system(sushy.RESET_ON)
    system.refresh()
    booted = system.json["Oem"]["Infrasim"]["LastBoot"]
    assert (booted["Source"], booted["Image"]) == ("Cd", image)
    cd.eject_media()
    cd.refresh()
    assert not cd.inserted and cd.image is None
    assert "Cd" not in bmc_record(vm).get("media", {})


def test_bad_credentials_and_unknown_systems_are_refused(vcsim, bmc):
    wrong = sushy.Sushy(f"https://127.0.0.1:{vcsim.port}", username=USER, password="wrong",
                        verify=False)
    with pytest.raises(sushy.exceptions.AccessError):
        wrong.get_system_collection()
    with pytest.raises(sushy.exceptions.ResourceNotFoundError):
        bmc.get_system("/redfish/v1/Systems/no-such-system")
    status, headers, body = raw(vcsim, "GET", "/redfish/v1/Systems", auth=None)
    assert status == 401 and "www-authenticate" in headers
    status, _, body = raw(vcsim, "GET", "/redfish/v1/NoSuchThing")
    assert status == 404 and message_id(body) == "Base.1.16.ResourceMissingAtURI"


def test_malformed_requests_get_redfish_errors_and_change_nothing(vcsim, si):
    uuid, vm = sorted(vms(si).items())[0]
    path = f"/redfish/v1/Systems/{uuid}"
    before = bmc_record(vm)
    status, _, body = raw(vcsim, "PATCH", path, body=b'{"Boot": {')
    assert status == 400 and message_id(body) == "Base.1.16.MalformedJSON"
    status, _, body = raw(vcsim, "POST", f"{path}/Actions/ComputerSystem.Reset",
                          body={"ResetType": "SelfDestruct"})
    assert status == 400 and message_id(body) == "Base.1.16.ActionParameterValueNotInList"
    status, headers, _ = raw(vcsim, "GET", path)
    etag = headers["etag"]
    status, _, _ = raw(vcsim, "PATCH", path, body={"Boot": {"BootSourceOverrideTarget": "Hdd"}},
                       headers={"If-Match": etag})
    assert status == 200
    status, _, body = raw(vcsim, "PATCH", path, body={"Boot": {"BootSourceOverrideTarget": "Pxe"}},
                          headers={"If-Match": etag})
    assert status == 412 and message_id(body) == "Base.1.16.PreconditionFailed"
    assert bmc_record(vm)["boot"]["target"] == "Hdd"
    assert before.get("boot", {}).get("target") != "Pxe"


def test_accounts_made_through_the_account_service_log_in(vcsim):
    status, headers, body = raw(vcsim, "POST", "/redfish/v1/AccountService/Accounts",
                                body={"UserName": "ironic", "Password": "ipa-secret", "RoleId": "Operator"})
    assert status == 201, body
    assert body["Password"] is None
    operator = sushy.Sushy(f"https://127.0.0.1:{vcsim.port}", username="ironic",
                           password="ipa-secret", verify=False)
    assert operator.get_system_collection().members_identities
    # An operator may not make accounts.
    status, _, body = raw(vcsim, "POST", "/redfish/v1/AccountService/Accounts",
                          body={"UserName": "x", "Password": "y", "RoleId": "ReadOnly"},
                          auth=("ironic", "ipa-secret"))
    assert status == 403 and message_id(body) == "Base.1.16.InsufficientPrivilege"


def test_dmtfs_protocol_validator_finds_no_failure(tmp_path):
    """DMTF's Redfish Protocol Validator (PyPI), the whole run against a vcsim serving a
    certificate of a CA the validator is given: no assertion fails."""
    import csv
    import os
    import shutil
    import subprocess
    openssl = shutil.which("openssl")
    assert openssl, "openssl (Debian's) makes the test CA"
    ca, ca_key, key, csr, crt = (tmp_path / n for n in ("ca.crt", "ca.key", "srv.key", "srv.csr", "srv.crt"))
    run = lambda *a: subprocess.run([openssl, *a], check=True, capture_output=True)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", str(ca_key), "-out", str(ca), "-days", "2", "-subj", "/CN=validator-ca")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                   "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(crt), "-days", "2", "-extfile", str(ext))
    vcsim = Vcsim(tmp_path, "--tls-cert", str(crt), "--tls-key", str(key))
    try:
        validator = pathlib.Path(sys.executable).parent / "rf_protocol_validator"
        # requests lets REQUESTS_CA_BUNDLE override a session's own CA: point it at ours.
        env = {**os.environ, "REQUESTS_CA_BUNDLE": str(ca), "CURL_CA_BUNDLE": ""}
        out = subprocess.run(
            [str(validator), "-r", f"https://127.0.0.1:{vcsim.port}", "-u", USER, "-p", PASSWORD,
             "--ca-bundle", str(ca), "--report-dir", str(tmp_path / "report")],
            capture_output=True, text=True, timeout=600, env=env)
        summary = next((l for l in out.stdout.splitlines() if l.startswith("Summary")), out.stdout[-2000:])
        reports = list((tmp_path / "report").glob("*.tsv"))
        assert reports, out.stdout[-2000:] + out.stderr[-2000:]
        with open(reports[0], newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        failed = [(r["Assertion"], r["URI"], r["Message"]) for r in rows if r["Result"] == "FAIL"]
        passed = [r for r in rows if r["Result"] == "PASS"]
        assert failed == [], summary
        assert len(passed) > 300, summary
    finally:
        vcsim.stop()
