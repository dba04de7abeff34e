"""The vcsim controller under `infrasim up`: VCenterSimulator, ControlPlaneEndpoint and EnvVar
applied with kubectl, the simulators they start driven with pyvmomi and urllib, as CAPV's
vcsim.sh and govc users would."""

import base64
import hashlib
import json
import socket
import ssl
import subprocess
import urllib.error
import urllib.request

import pytest
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from conftest import BINARY, wait_for

GROUP = "vcsim.infrastructure.cluster.x-k8s.io"


def apply(plane, ns, text):
    plane.kubectl("-n", ns, "apply", "-f", "-", input=text)


def get(plane, ns, kind, name):
    out = plane.kubectl("-n", ns, "get", f"{kind}.{GROUP}", name, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def status_of(plane, ns, kind, name, field):
    """Waits for `status.<field>` of the object and returns its status."""
    def ready():
        obj = get(plane, ns, kind, name)
        status = (obj or {}).get("status") or {}
        return status if status.get(field) else None
    return wait_for(ready, timeout=30, what=f"{kind} {name} status.{field}")


def simulator(plane, ns, name, model=None):
    spec = {"model": model} if model else {}
    apply(plane, ns, json.dumps({"apiVersion": f"{GROUP}/v1alpha1", "kind": "VCenterSimulator",
                                 "metadata": {"name": name}, "spec": spec}))
    status = status_of(plane, ns, "vcentersimulator", name, "thumbprint")
    host, port = status["host"].rsplit(":", 1)
    return status, host, int(port)


def connect(status):
    host, port = status["host"].rsplit(":", 1)
    return SmartConnect(host=host, port=int(port), user=status["username"], pwd=status["password"],
                        disableSslCertValidation=True)


def refused(host, port):
    try:
        socket.create_connection((host, port), timeout=2).close()
        return False
    except OSError:
        return True


def rest(host, port, method, path, token=None, basic=None):
    headers = {}
    if token:
        headers["vmware-api-session-id"] = token
    if basic:
        headers["Authorization"] = "Basic " + base64.b64encode(basic.encode()).decode()
    req = urllib.request.Request(f"https://{host}:{port}{path}", method=method, headers=headers)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if body else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_a_vcenter_simulator_serves_templates_tags_and_its_own_credentials(plane, ns):
    status, host, port = simulator(plane, ns, "vcsim1", {"kubernetesVersions": ["v1.33.0"]})
    assert status["username"] == "administrator@vsphere.local"
    assert len(status["password"]) >= 16
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"
    # The thumbprint is the SHA-256 of the certificate it serves.
    der = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((host, port)))
    assert hashlib.sha256(der).hexdigest().upper() == status["thumbprint"].replace(":", "")

    si = connect(status)
    try:
        about = si.RetrieveContent().about
        assert about.apiVersion == "7.0.3.0", "the default vsphereVersion is 7.0.0"
        index = si.content.searchIndex
        for release in ("2204", "2404"):
            t = index.FindByInventoryPath(f"DC0/vm/ubuntu-{release}-kube-v1.33.0")
            assert isinstance(t, vim.VirtualMachine)
            assert t.config.template is True
            assert t.runtime.powerState == "poweredOff"
        dc = index.FindByInventoryPath("DC0")
        cluster = index.FindByInventoryPath("DC0/host/DC0_C0")
    finally:
        Disconnect(si)

    # The failure-domain tags CAPV looks up, through the REST API.
    code, token = rest(host, port, "POST", "/api/session",
                       basic=f"{status['username']}:{status['password']}")
    assert code == 201
    code, categories = rest(host, port, "GET", "/api/cis/tagging/category", token)
    names = {}
    for c in categories:
        _, body = rest(host, port, "GET", f"/api/cis/tagging/category/{c}", token)
        names[body["name"]] = body
    assert names["k8s-region"]["associable_types"] == ["Datacenter"]
    assert "k8s-zone" in names
    for obj, tag in ((dc, "DC0"), (cluster, "DC0_C0")):
        ref = {"type": obj._wsdlName, "id": obj._moId}
        req_body = json.dumps({"object_id": ref}).encode()
        req = urllib.request.Request(
            f"https://{host}:{port}/api/cis/tagging/tag-association?action=list-attached-tags",
            data=req_body, method="POST",
            headers={"vmware-api-session-id": token, "Content-Type": "application/json"})
        ctx = ssl._create_unverified_context()
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            attached = json.loads(resp.read())
        tag_names = [rest(host, port, "GET", f"/api/cis/tagging/tag/{t}", token)[1]["name"]
                     for t in attached]
        assert tag_names == [tag]


def test_two_simulators_are_isolated_and_deleting_one_frees_its_port(plane, ns):
    a, a_host, a_port = simulator(plane, ns, "vcsim-a")
    b, b_host, b_port = simulator(plane, ns, "vcsim-b", {"datacenter": 2, "vsphereVersion": "8.0.2",
                                                         "kubernetesVersions": ["v1.34.0"]})
    assert a_port != b_port and a["password"] != b["password"]
    # One's credentials do not open the other.
    with pytest.raises(vim.fault.InvalidLogin):
        SmartConnect(host=b_host, port=b_port, user=a["username"], pwd=a["password"],
                     disableSslCertValidation=True)
    sb = connect(b)
    try:
        assert sb.RetrieveContent().about.apiVersion == "8.0.3.0"
        assert sb.content.searchIndex.FindByInventoryPath("DC1/vm/ubuntu-2404-kube-v1.34.0")
    finally:
        Disconnect(sb)
    sa = connect(a)
    try:
        assert sa.content.searchIndex.FindByInventoryPath("DC1") is None
    finally:
        Disconnect(sa)

    plane.kubectl("-n", ns, "delete", f"vcentersimulator.{GROUP}", "vcsim-a", "--wait=true")
    wait_for(lambda: refused(a_host, a_port), timeout=15, what="vcsim-a's port closed")
    sb = connect(b)
    try:
        assert sb.content.searchIndex.FindByInventoryPath("DC1")
    finally:
        Disconnect(sb)


def test_an_invalid_model_is_reported_not_served(plane, ns):
    apply(plane, ns, json.dumps({"apiVersion": f"{GROUP}/v1alpha1", "kind": "VCenterSimulator",
                                 "metadata": {"name": "old"},
                                 "spec": {"model": {"vsphereVersion": "6.5.0"}}}))
    status = status_of(plane, ns, "vcentersimulator", "old", "conditions")
    ready = [c for c in status["conditions"] if c["type"] == "Ready"][0]
    assert ready["status"] == "False" and ready["reason"] == "InvalidModel"
    assert "vsphereVersion" in ready["message"]
    assert not status.get("host")


def test_envvar_gives_capv_its_variables_from_the_simulator_and_endpoint(plane, ns):
    status, host, port = simulator(plane, ns, "vcsim1", {"kubernetesVersions": ["v1.33.0"]})
    # As vcsim.sh creates it: no spec at all.
    apply(plane, ns, f"apiVersion: {GROUP}/v1alpha1\nkind: ControlPlaneEndpoint\nmetadata: {{name: cluster1}}\n")
    endpoint = status_of(plane, ns, "controlplaneendpoint", "cluster1", "port")
    assert endpoint["host"] == "127.0.0.1" and 20000 <= endpoint["port"] <= 24000
    for name, moid, version in (("cluster1", False, "v1.34.1"), ("cluster1-moid", True, None)):
        apply(plane, ns, json.dumps({
            "apiVersion": f"{GROUP}/v1alpha1", "kind": "EnvVar", "metadata": {"name": name},
            "spec": {"vCenterSimulator": {"name": "vcsim1"},
                     "controlPlaneEndpoint": {"name": "cluster1"},
                     "useMOID": moid,
                     "cluster": {"name": "cluster1", "namespace": ns,
                                 **({"kubernetesVersion": version} if version else {})}}}))
    by_name = status_of(plane, ns, "envvar", "cluster1", "variables")["variables"]
    by_id = status_of(plane, ns, "envvar", "cluster1-moid", "variables")["variables"]
    assert by_name["VSPHERE_SERVER"] == f"https://{host}:{port}"
    assert by_name["VSPHERE_PASSWORD"] == status["password"]
    assert by_name["VSPHERE_TLS_THUMBPRINT"] == status["thumbprint"]
    assert by_name["CONTROL_PLANE_ENDPOINT_PORT"] == str(endpoint["port"])
    assert by_name["VSPHERE_DATACENTER"] == "DC0" and by_name["VSPHERE_FOLDER"] == "DC0/vm"
    assert by_name["VSPHERE_STORAGE_POLICY"] == "vSAN Default Storage Policy"
    assert by_name["VSPHERE_SSH_AUTHORIZED_KEY"].startswith("ssh-ed25519 ")
    assert by_name["GOVC_URL"].endswith(f"@{host}:{port}/sdk")

    si = connect(status)
    try:
        index = si.content.searchIndex
        # A version the model did not list still has its template: the EnvVar made it.
        template = by_name["VSPHERE_TEMPLATE"]
        assert template == "/DC0/vm/ubuntu-2204-kube-v1.34.1"
        assert index.FindByInventoryPath(template.lstrip("/")).config.template
        for var, path in (("VSPHERE_DATACENTER", "DC0"), ("VSPHERE_FOLDER", "DC0/vm"),
                          ("VSPHERE_RESOURCE_POOL", "DC0/host/DC0_C0/Resources"),
                          ("VSPHERE_NETWORK", "DC0/network/VM Network"),
                          ("VSPHERE_DATASTORE", "DC0/datastore/LocalDS_0"),
                          ("VSPHERE_TEMPLATE", "DC0/vm/ubuntu-2404-kube-v1.33.0")):
            obj = index.FindByInventoryPath(path)
            assert by_id[var] == f"{obj._wsdlName}:{obj._moId}", var
    finally:
        Disconnect(si)

    plane.kubectl("-n", ns, "delete", f"controlplaneendpoint.{GROUP}", "cluster1", "--wait=true")
    wait_for(lambda: refused("127.0.0.1", endpoint["port"]), timeout=15, what="endpoint port freed")
    wait_for(lambda: get(plane, ns, "controlplaneendpoint", "cluster1") is None, what="endpoint gone")


def test_infrasim_env_writes_what_vcsim_sh_writes(plane, ns, tmp_path):
    out = tmp_path / "vcsim.env"
    run = subprocess.run(
        [BINARY, "env", "vcsim-env", "cluster-env", "-n", ns, "--kubeconfig", plane.kubeconfig,
         "--kubernetes-version", "v1.33.0", "--worker-machines", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "created VCenterSimulator vcsim-env" in lines
    assert "created ControlPlaneEndpoint cluster-env" in lines
    assert lines[-1] == f"source {out}"
    # What a shell sources is what the EnvVar says.
    shell = subprocess.run(["bash", "-c", f"source {out}; env"], capture_output=True, text=True,
                           check=True)
    sourced = dict(line.split("=", 1) for line in shell.stdout.splitlines() if "=" in line)
    variables = get(plane, ns, "envvar", "cluster-env")["status"]["variables"]
    for name, value in variables.items():
        assert sourced[name] == value, name
    assert variables["WORKER_MACHINE_COUNT"] == "2"
    assert variables["VSPHERE_TEMPLATE"] == "/DC0/vm/ubuntu-2204-kube-v1.33.0"
    # The simulator it made answers with the sourced credentials.
    host, port = variables["VSPHERE_SERVER"].removeprefix("https://").rsplit(":", 1)
    si = SmartConnect(host=host, port=int(port), user=sourced["VSPHERE_USERNAME"],
                      pwd=sourced["VSPHERE_PASSWORD"], disableSslCertValidation=True)
    try:
        assert si.content.searchIndex.FindByInventoryPath(variables["VSPHERE_TEMPLATE"].lstrip("/"))
    finally:
        Disconnect(si)
    # Again: everything exists, nothing is created twice.
    again = subprocess.run(
        [BINARY, "env", "vcsim-env", "cluster-env", "-n", ns, "--kubeconfig", plane.kubeconfig,
         "--kubernetes-version", "v1.33.0", "--worker-machines", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "VCenterSimulator vcsim-env already exists" in again.stdout.splitlines()
