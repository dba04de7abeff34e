"""The vcsim controller under `infrasim up`: VCenterSimulator, ControlPlaneEndpoint and EnvVar
applied with kubectl, the simulators they start driven with pyvmomi and urllib, as CAPV's
vcsim.sh and govc users would."""

import base64
import hashlib
import json
import socket
import ssl
import subprocess
import urllib.request

import pytest
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from conftest import (BINARY, VCSIM_GROUP, connect, get, json_exchange, metric_samples, simulator,
                      vcsim_status, wait_for)


def apply(plane, ns, text):
    plane.kubectl("-n", ns, "apply", "-f", "-", input=text)


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
    return json_exchange(urllib.request.Request(f"https://{host}:{port}{path}", method=method,
                                                headers=headers))


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

    # The content library `vcsim`, an OVF item per template.
    code, libraries = rest(host, port, "GET", "/api/content/library", token)
    assert code == 200
    names = {rest(host, port, "GET", f"/api/content/library/{l}", token)[1]["name"]: l
             for l in libraries}
    assert "vcsim" in names
    code, items = rest(host, port, "GET", f"/api/content/library/item?library_id={names['vcsim']}",
                       token)
    assert code == 200
    item_names = {}
    for i in items:
        _, body = rest(host, port, "GET", f"/api/content/library/item/{i}", token)
        item_names[body["name"]] = body
    assert set(item_names) == {"ubuntu-2204-kube-v1.33.0", "ubuntu-2404-kube-v1.33.0"}
    assert all(i["type"] == "ovf" for i in item_names.values())


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

    plane.kubectl("-n", ns, "delete", f"vcentersimulator.{VCSIM_GROUP}", "vcsim-a", "--wait=true")
    wait_for(lambda: refused(a_host, a_port), timeout=15, what="vcsim-a's port closed")
    sb = connect(b)
    try:
        assert sb.content.searchIndex.FindByInventoryPath("DC1")
    finally:
        Disconnect(sb)


def test_a_simulators_calls_sessions_tasks_and_vms_are_in_the_planes_metrics(plane, ns):
    status, host, port = simulator(plane, ns, "vcsim-m")
    mine = {"vcenter": f"{ns}/vcsim-m"}
    scrape = lambda: plane.kubectl("get", "--raw", "/metrics").stdout
    with pytest.raises(vim.fault.InvalidLogin):
        SmartConnect(host=host, port=port, user=status["username"], pwd="not-the-password",
                     disableSslCertValidation=True)
    si = connect(status)
    try:
        view = si.content.viewManager.CreateContainerView(si.content.rootFolder,
                                                          [vim.VirtualMachine], True)
        vms = [vm for vm in view.view if not vm.config.template]
        text = scrape()
        assert metric_samples(text, "infrasim_vsphere_requests_total", **mine, method="Login",
                              fault="InvalidLogin") == [1.0]
        assert sum(metric_samples(text, "infrasim_vsphere_requests_total", **mine,
                                  method="Login", fault="")) >= 1
        assert metric_samples(text, "infrasim_vsphere_sessions", **mine)[0] >= 1
        on = sum(vm.runtime.powerState == "poweredOn" for vm in vms)
        assert metric_samples(text, "infrasim_vsphere_vms", **mine,
                              power_state="poweredOn") == [float(on)]
        succeeded = sum(metric_samples(text, "infrasim_vsphere_tasks", **mine, state="success"))
        off = metric_samples(text, "infrasim_vsphere_vms", **mine, power_state="poweredOff")[0]
        running = next(vm for vm in vms if vm.runtime.powerState == "poweredOn")
        task = running.PowerOffVM_Task()
        wait_for(lambda: task.info.state == "success", timeout=15, what="the power-off task")
        text = scrape()
        assert metric_samples(text, "infrasim_vsphere_vms", **mine,
                              power_state="poweredOff") == [off + 1]
        assert sum(metric_samples(text, "infrasim_vsphere_tasks", **mine,
                                  state="success")) == succeeded + 1
        assert sum(metric_samples(text, "infrasim_vsphere_requests_total", **mine,
                                  method="PowerOffVM_Task", fault="")) == 1
    finally:
        Disconnect(si)


def events_of(plane, ns, name, reason):
    listed = json.loads(plane.kubectl("-n", ns, "get", "events", "-o", "json",
                                      "--field-selector", f"involvedObject.name={name}").stdout)
    return [e for e in listed["items"] if e["reason"] == reason]


def test_faults_injected_by_annotation_fail_calls_until_taken_back(plane, ns):
    status, host, port = simulator(plane, ns, "vcsim-f")
    mine = {"vcenter": f"{ns}/vcsim-f"}
    scrape = lambda: plane.kubectl("get", "--raw", "/metrics").stdout
    in_force = lambda effect: metric_samples(scrape(), "infrasim_vsphere_injected_faults", **mine,
                                             effect=effect)
    assert in_force("fault") == [0.0]
    rules = [{"method": "PowerOffVM_Task", "type": "VirtualMachine", "fault": "InvalidState"},
             {"method": "RetrieveProperties", "delayMs": 1}]
    plane.kubectl("-n", ns, "annotate", "vcentersimulator", "vcsim-f",
                  "sim.infrasim.dev/vsphere-faults=" + json.dumps(rules))
    wait_for(lambda: in_force("fault") == [1.0] and in_force("delay") == [1.0], timeout=30,
             what="the rules in force")
    assert events_of(plane, ns, "vcsim-f", "FaultsInjected")
    si = connect(status)
    try:
        view = si.content.viewManager.CreateContainerView(si.content.rootFolder,
                                                          [vim.VirtualMachine], True)
        running = next(vm for vm in view.view
                       if not vm.config.template and vm.runtime.powerState == "poweredOn")
        # A failing *_Task call gets its task, which ends in the fault, as vCenter reports it.
        task = running.PowerOffVM_Task()
        wait_for(lambda: task.info.state == "error", timeout=15, what="the failed task")
        assert isinstance(task.info.error, vim.fault.InvalidState)
        assert running.runtime.powerState == "poweredOn"
        # Rules that cannot be read leave those in force, and say why.
        plane.kubectl("-n", ns, "annotate", "--overwrite", "vcentersimulator", "vcsim-f",
                      'sim.infrasim.dev/vsphere-faults=[{"method": "X", "fault": "Nope"}]')
        wait_for(lambda: events_of(plane, ns, "vcsim-f", "InvalidFaults"), timeout=30,
                 what="the InvalidFaults event")
        assert "unknown fault" in events_of(plane, ns, "vcsim-f", "InvalidFaults")[0]["message"]
        assert in_force("fault") == [1.0]
        # Removing the annotation takes every rule back.
        plane.kubectl("-n", ns, "annotate", "vcentersimulator", "vcsim-f",
                      "sim.infrasim.dev/vsphere-faults-")
        wait_for(lambda: in_force("fault") == [0.0] and in_force("delay") == [0.0], timeout=30,
                 what="the rules taken back")
        task = running.PowerOffVM_Task()
        wait_for(lambda: task.info.state == "success", timeout=15, what="the power-off task")
        assert running.runtime.powerState == "poweredOff"
    finally:
        Disconnect(si)


def test_an_invalid_model_is_reported_not_served(plane, ns):
    apply(plane, ns, json.dumps({"apiVersion": f"{VCSIM_GROUP}/v1alpha1", "kind": "VCenterSimulator",
                                 "metadata": {"name": "old"},
                                 "spec": {"model": {"vsphereVersion": "6.5.0"}}}))
    status = vcsim_status(plane, ns, "vcentersimulator", "old", "conditions")
    ready = [c for c in status["conditions"] if c["type"] == "Ready"][0]
    assert ready["status"] == "False" and ready["reason"] == "InvalidModel"
    assert "vsphereVersion" in ready["message"]
    assert not status.get("host")


def test_spec_users_log_in_with_their_secrets_credentials_and_role(plane, ns):
    """`spec.users`: a user whose name and password are a Secret's (CAPV's identity Secret
    shape) logs in with pyvmomi and holds its role: a ReadOnly user reads but cannot clone."""
    plane.kubectl("-n", ns, "create", "secret", "generic", "ro-creds",
                  "--from-literal=username=readonly@vsphere.local", "--from-literal=password=ro-secret")
    apply(plane, ns, json.dumps({
        "apiVersion": f"{VCSIM_GROUP}/v1alpha1", "kind": "VCenterSimulator", "metadata": {"name": "roles"},
        "spec": {"users": [{"secretName": "ro-creds", "role": "ReadOnly"}]}}))
    status = vcsim_status(plane, ns, "vcentersimulator", "roles", "thumbprint")
    host, port = status["host"].rsplit(":", 1)
    ro = SmartConnect(host=host, port=int(port), user="readonly@vsphere.local", pwd="ro-secret",
                      disableSslCertValidation=True)
    try:
        content = ro.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        vm = view.view[0]
        spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=False, template=False)
        with pytest.raises(vim.fault.NoPermission) as e:
            vm.CloneVM_Task(folder=vm.parent, name="nope", spec=spec)
        assert e.value.privilegeId == "VirtualMachine.Provisioning.Clone"
    finally:
        Disconnect(ro)
    # The administrator of the status is still Admin.
    admin = connect(status)
    assert [r.roleId for r in admin.content.authorizationManager.roleList if r.name == "ReadOnly"] == [-2]
    Disconnect(admin)
    # An unknown role is the model's error, not a simulator.
    apply(plane, ns, json.dumps({
        "apiVersion": f"{VCSIM_GROUP}/v1alpha1", "kind": "VCenterSimulator", "metadata": {"name": "badrole"},
        "spec": {"users": [{"secretName": "ro-creds", "role": "Root"}]}}))
    bad = vcsim_status(plane, ns, "vcentersimulator", "badrole", "conditions")
    ready = [c for c in bad["conditions"] if c["type"] == "Ready"][0]
    assert ready["reason"] == "InvalidModel" and "ReadOnly" in ready["message"], ready


def test_envvar_gives_capv_its_variables_from_the_simulator_and_endpoint(plane, ns):
    status, host, port = simulator(plane, ns, "vcsim1", {"kubernetesVersions": ["v1.33.0"]})
    # As vcsim.sh creates it: no spec at all.
    apply(plane, ns, f"apiVersion: {VCSIM_GROUP}/v1alpha1\nkind: ControlPlaneEndpoint\nmetadata: {{name: cluster1}}\n")
    endpoint = vcsim_status(plane, ns, "controlplaneendpoint", "cluster1", "port")
    assert endpoint["host"] == "127.0.0.1" and 20000 <= endpoint["port"] <= 24000
    for name, moid, version in (("cluster1", False, "v1.34.1"), ("cluster1-moid", True, None)):
        apply(plane, ns, json.dumps({
            "apiVersion": f"{VCSIM_GROUP}/v1alpha1", "kind": "EnvVar", "metadata": {"name": name},
            "spec": {"vCenterSimulator": {"name": "vcsim1"},
                     "controlPlaneEndpoint": {"name": "cluster1"},
                     "useMOID": moid,
                     "cluster": {"name": "cluster1", "namespace": ns,
                                 **({"kubernetesVersion": version} if version else {})}}}))
    by_name = vcsim_status(plane, ns, "envvar", "cluster1", "variables")["variables"]
    by_id = vcsim_status(plane, ns, "envvar", "cluster1-moid", "variables")["variables"]
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

    plane.kubectl("-n", ns, "delete", f"controlplaneendpoint.{VCSIM_GROUP}", "cluster1", "--wait=true")
    wait_for(lambda: refused("127.0.0.1", endpoint["port"]), timeout=15, what="endpoint port freed")
    wait_for(lambda: get(plane, ns, f"controlplaneendpoint.{VCSIM_GROUP}", "cluster1") is None,
             what="endpoint gone")


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
    variables = get(plane, ns, f"envvar.{VCSIM_GROUP}", "cluster-env")["status"]["variables"]
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


def clone_vm(si, template_path, name, userdata):
    """What CAPV's govmomi mode does for one machine: clone the template into the folder and
    pool with guestinfo.userdata, powered off; returns the VM."""
    index = si.content.searchIndex
    template = index.FindByInventoryPath(template_path)
    folder = index.FindByInventoryPath("DC0/vm")
    pool = index.FindByInventoryPath("DC0/host/DC0_C0/Resources")
    extra = [vim.option.OptionValue(key="guestinfo.userdata",
                                    value=base64.b64encode(userdata.encode()).decode()),
             vim.option.OptionValue(key="guestinfo.userdata.encoding", value="base64")]
    spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(pool=pool), powerOn=False,
                            config=vim.vm.ConfigSpec(numCPUs=2, memoryMB=4096, extraConfig=extra))
    task = template.CloneVM_Task(folder=folder, name=name, spec=spec)
    wait_for(lambda: task.info.state in ("success", "error"), timeout=30, what="clone")
    assert task.info.state == "success", task.info.error
    return task.info.result


def test_vms_capv_clones_boot_into_the_cluster_behind_the_endpoint(plane, ns, tmp_path):
    status, host, port = simulator(plane, ns, "vcsim1", {"kubernetesVersions": ["v1.33.0"]})
    apply(plane, ns, f"apiVersion: {VCSIM_GROUP}/v1alpha1\nkind: ControlPlaneEndpoint\nmetadata: {{name: wl1}}\n")
    endpoint = vcsim_status(plane, ns, "controlplaneendpoint", "wl1", "port")
    apply(plane, ns, json.dumps({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "wl1"},
        # Cluster API refuses a Cluster with neither references nor a topology; CAPV's name
        # its VSphereCluster.
        "spec": {"controlPlaneEndpoint": {"host": endpoint["host"], "port": endpoint["port"]},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "VSphereCluster",
                                       "name": "wl1"}}}))
    si = connect(status)
    vms = {}
    try:
        # The worker first: the workload cluster must still serve with the CA the cluster's
        # kubeconfig is written from, whichever machine boots first.
        for name, control_plane in (("wl1-md-0", False), ("wl1-cp-0", True)):
            labels = {"cluster.x-k8s.io/cluster-name": "wl1"}
            if control_plane:
                labels["cluster.x-k8s.io/control-plane"] = ""
            plane.kubectl("-n", ns, "create", "secret", "generic", f"{name}-bootstrap",
                          "--from-literal=value=#cloud-config")
            apply(plane, ns, json.dumps({
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                "metadata": {"name": name, "labels": labels},
                "spec": {"clusterName": "wl1", "version": "v1.33.0",
                         "bootstrap": {"dataSecretName": f"{name}-bootstrap"},
                         "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                               "kind": "VSphereMachine", "name": name}}}))
            machine = json.loads(plane.kubectl("-n", ns, "get", "machines.cluster.x-k8s.io", name,
                                               "-o", "json").stdout)
            owner = lambda kind, obj: {"apiVersion": obj["apiVersion"], "kind": kind,
                                       "name": obj["metadata"]["name"],
                                       "uid": obj["metadata"]["uid"]}
            apply(plane, ns, json.dumps({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereMachine",
                "metadata": {"name": name, "labels": labels,
                             "ownerReferences": [owner("Machine", machine)]},
                "spec": {"template": "ubuntu-2204-kube-v1.33.0", "numCPUs": 2}}))
            vsphere_machine = json.loads(plane.kubectl(
                "-n", ns, "get", "vspheremachines.infrastructure.cluster.x-k8s.io", name,
                "-o", "json").stdout)
            vm = clone_vm(si, "DC0/vm/ubuntu-2204-kube-v1.33.0", name, "#cloud-config")
            uuid = vm.config.uuid
            apply(plane, ns, json.dumps({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereVM",
                "metadata": {"name": name, "labels": labels,
                             "ownerReferences": [owner("VSphereMachine", vsphere_machine)]},
                "spec": {"biosUUID": uuid, "server": f"https://{host}:{port}",
                         "template": "ubuntu-2204-kube-v1.33.0", "datacenter": "DC0",
                         "network": {"devices": [{"networkName": "VM Network", "dhcp4": True}]}}}))
            task = vm.PowerOnVM_Task()
            wait_for(lambda: task.info.state == "success", timeout=30, what="power on")
            vms[name] = (vm, uuid)
        # Each VM gets its own address, as CAPV waits for it in guest.net.
        ips = {name: wait_for(lambda: vm.guest.net and vm.guest.net[0].ipAddress and
                              vm.guest.net[0].ipAddress[0], timeout=30, what="guest IP")
               for name, (vm, _) in vms.items()}
        assert len(set(ips.values())) == 2, ips
    finally:
        Disconnect(si)

    # The workload cluster behind the endpoint has both machines as Ready Nodes.
    secret = wait_for(lambda: get(plane, ns, "secret", "wl1-kubeconfig"), timeout=30,
                      what="wl1-kubeconfig")
    kubeconfig = tmp_path / "wl1.kubeconfig"
    kubeconfig.write_bytes(base64.b64decode(secret["data"]["value"]))

    def nodes():
        out = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o",
                              "json"], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            return None
        items = json.loads(out.stdout)["items"]
        ready = {n["metadata"]["name"]: n for n in items
                 if any(c["type"] == "Ready" and c["status"] == "True"
                        for c in n["status"]["conditions"])}
        return ready if len(ready) == 2 else None
    ready = wait_for(nodes, timeout=60, what="two Ready nodes")
    server = json.loads(subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "config", "view", "-o", "json"],
        capture_output=True, text=True, check=True).stdout)["clusters"][0]["cluster"]["server"]
    assert server == f"https://{endpoint['host']}:{endpoint['port']}"
    for name, (_, uuid) in vms.items():
        assert ready[name]["spec"]["providerID"] == f"vsphere://{uuid}"
    assert "node-role.kubernetes.io/control-plane" in ready["wl1-cp-0"]["metadata"]["labels"]

    # Deleting a VSphereVM takes its machine out of the cluster.
    plane.kubectl("-n", ns, "delete", "vspherevms.infrastructure.cluster.x-k8s.io", "wl1-md-0",
                  "--wait=true")

    def worker_gone():
        out = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o",
                              "name"], capture_output=True, text=True, timeout=30)
        return out.returncode == 0 and "node/wl1-md-0" not in out.stdout.split()
    wait_for(worker_gone, timeout=30, what="worker node removed")


def vm_operator_status_with_ip(plane, ns, name):
    """Waits for the vm-operator VirtualMachine's status to carry its IP; that status."""
    def with_ip():
        out = plane.kubectl("-n", ns, "get", "virtualmachines.vmoperator.vmware.com", name,
                            "-o", "json", check=False)
        status = json.loads(out.stdout).get("status", {}) if out.returncode == 0 else {}
        return status if status.get("network", {}).get("primaryIP4") else None
    return wait_for(with_ip, timeout=30, what=f"VirtualMachine {name}'s IP")


def test_capvs_kinds_take_its_objects_in_both_versions(plane, ns):
    """Without CAPV, its kinds are served so its objects apply as written: namespaced ones in
    v1beta1 and v1beta2, failure domains and identities cluster-wide."""
    apply(plane, ns, json.dumps({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "VSphereCluster",
        "metadata": {"name": "c1"},
        "spec": {"server": "https://127.0.0.1:8989", "thumbprint": "AB:CD",
                 "controlPlaneEndpoint": {"host": "127.0.0.1", "port": 20000},
                 "identityRef": {"kind": "Secret", "name": "c1"}}}))
    got = json.loads(plane.kubectl(
        "-n", ns, "get", "vsphereclusters.v1beta2.infrastructure.cluster.x-k8s.io", "c1",
        "-o", "json").stdout)
    assert got["apiVersion"] == "infrastructure.cluster.x-k8s.io/v1beta2"
    assert got["spec"]["identityRef"] == {"kind": "Secret", "name": "c1"}
    name = f"{ns}-zone"
    plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereFailureDomain",
        "metadata": {"name": name},
        "spec": {"region": {"name": "DC0", "type": "Datacenter", "tagCategory": "k8s-region"},
                 "zone": {"name": "DC0_C0", "type": "ComputeCluster", "tagCategory": "k8s-zone"}}}))
    fd = json.loads(plane.kubectl("get", "vspherefailuredomains", name, "-o", "json").stdout)
    assert "namespace" not in fd["metadata"]
    assert fd["spec"]["zone"]["tagCategory"] == "k8s-zone"
    plane.kubectl("delete", "vspherefailuredomains", name)


def test_a_restarted_controller_serves_its_simulators_where_their_status_says(tmp_path):
    """`infrasim controller` against a plane that outlives it: after a restart, each
    VCenterSimulator is served again on the port and with the credentials its status gave
    clients (a controller without --data-dir keeps no simulator: its inventory is new)."""
    from conftest import Plane
    workdir = tmp_path / "bare"
    workdir.mkdir()
    bare = Plane(workdir, "--controllers", "none")

    def controller():
        log = open(tmp_path / "controller.log", "a")
        return subprocess.Popen([BINARY, "controller", "--kubeconfig", bare.kubeconfig,
                                 "--leader-elect", "false"], stdout=log, stderr=subprocess.STDOUT)
    proc = controller()
    try:
        # The controller installs its CRDs as it starts.
        wait_for(lambda: bare.kubectl("get", f"crd/vcentersimulators.{VCSIM_GROUP}",
                                      check=False).returncode == 0, timeout=30, what="the CRD")
        status, host, port = simulator(bare, "default", "kept")
        proc.terminate()
        proc.wait(timeout=10)
        wait_for(lambda: refused(host, port), timeout=15, what="the port closed with the controller")
        proc = controller()
        # Served again where the status says, with the same password and certificate's
        # thumbprint changed only as the status reports it.
        wait_for(lambda: not refused(host, port), timeout=30, what="the simulator back")
        again = vcsim_status(bare, "default", "vcentersimulator", "kept", "thumbprint")
        assert again["host"] == status["host"] and again["password"] == status["password"]
        def thumbprint_served():
            der = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((host, port)))
            now = vcsim_status(bare, "default", "vcentersimulator", "kept", "thumbprint")
            return hashlib.sha256(der).hexdigest().upper() == now["thumbprint"].replace(":", "")
        wait_for(thumbprint_served, timeout=30, what="the status giving the served thumbprint")
        si = connect(again)
        try:
            assert si.content.searchIndex.FindByInventoryPath("DC0/vm/ubuntu-2204-kube-v1.28.0")
        finally:
            Disconnect(si)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        bare.stop()


def test_vm_operator_dependencies_for_supervisor_mode(plane, ns):
    status, host, port = simulator(plane, ns, "vcsim1", {"kubernetesVersions": ["v1.33.0"]})
    apply(plane, ns, json.dumps({
        "apiVersion": f"{VCSIM_GROUP}/v1alpha1", "kind": "VMOperatorDependencies",
        "metadata": {"name": "deps"},
        "spec": {"vCenterSimulatorRef": {"name": "vcsim1"},
                 "operatorRef": {"namespace": f"{ns}-vmop"}}}))
    wait_for(lambda: (get(plane, ns, f"vmoperatordependencies.{VCSIM_GROUP}", "deps") or {})
             .get("status", {}).get("ready"), timeout=30, what="dependencies ready")
    # The StorageClass names the vSAN default policy by its ID, as PBM gives it.
    sc = json.loads(plane.kubectl("get", "storageclass", "vcsim-default-storage-class",
                                  "-o", "json").stdout)
    assert sc["parameters"]["storagePolicyID"] == "aa6d5a82-1c88-45da-85d3-3d74b91a5bad"
    quota = json.loads(plane.kubectl("-n", ns, "get", "resourcequota",
                                     "vcsim-default-storage-class", "-o", "json").stdout)
    assert "vcsim-default-storage-class.storageclass.storage.k8s.io/requests.storage" in \
        quota["spec"]["hard"]
    # vm-operator's provider config and credentials, in its namespace.
    config = json.loads(plane.kubectl("-n", f"{ns}-vmop", "get", "configmap",
                                      "vsphere.provider.config.vmoperator.vmware.com",
                                      "-o", "json").stdout)["data"]
    assert (config["VcPNID"], config["VcPort"]) == (host, str(port))
    assert config["VcCredsSecretName"] == "wcp-vmop-sa-vc-auth"
    secret = json.loads(plane.kubectl("-n", f"{ns}-vmop", "get", "secret", "wcp-vmop-sa-vc-auth",
                                      "-o", "json").stdout)["data"]
    assert base64.b64decode(secret["password"]).decode() == status["password"]
    si = connect(status)
    try:
        for key, path in (("Datacenter", "DC0"), ("Folder", "DC0/vm"),
                          ("ResourcePool", "DC0/host/DC0_C0/Resources")):
            assert config[key] == si.content.searchIndex.FindByInventoryPath(path)._moId, key
    finally:
        Disconnect(si)
    vm_class = json.loads(plane.kubectl("-n", ns, "get", "virtualmachineclasses.vmoperator.vmware.com",
                                        "vcsim-default-vm-class", "-o", "json").stdout)
    assert vm_class["spec"]["hardware"] == {"cpus": 2, "memory": "4G"}
    # One Ready image per template, naming its item in the simulator's library.
    images = json.loads(plane.kubectl("-n", ns, "get", "virtualmachineimages.vmoperator.vmware.com",
                                      "-o", "json", "--show-managed-fields").stdout)["items"]
    by_name = {i["metadata"]["name"]: i for i in images}
    assert set(by_name) == {"ubuntu-2204-kube-v1.33.0", "ubuntu-2404-kube-v1.33.0"}
    code, token = rest(host, port, "POST", "/api/session",
                       basic=f"{status['username']}:{status['password']}")
    for name, image in by_name.items():
        assert image["status"]["conditions"][0]["status"] == "True"
        # The status is the VMOperatorDependencies controller's, under its own field manager.
        owners = [(f["manager"], f["operation"], f.get("subresource"))
                  for f in image["metadata"]["managedFields"]]
        assert ("infrasim-vcsim-controller/vmoperator", "Apply", "status") in owners, owners
        code, item = rest(host, port, "GET",
                          f"/api/content/library/item/{image['status']['providerItemID']}", token)
        assert code == 200 and item["name"] == name

    # An EnvVar naming the dependencies gives supervisor mode's variables.
    apply(plane, ns, f"apiVersion: {VCSIM_GROUP}/v1alpha1\nkind: ControlPlaneEndpoint\nmetadata: {{name: sup1}}\n")
    apply(plane, ns, json.dumps({
        "apiVersion": f"{VCSIM_GROUP}/v1alpha1", "kind": "EnvVar", "metadata": {"name": "sup1"},
        "spec": {"vCenterSimulator": {"name": "vcsim1"}, "vmOperatorDependencies": {"name": "deps"},
                 "cluster": {"name": "sup1", "namespace": ns}}}))
    variables = vcsim_status(plane, ns, "envvar", "sup1", "variables")["variables"]
    assert variables["VSPHERE_STORAGE_CLASS"] == "vcsim-default-storage-class"
    assert variables["VSPHERE_STORAGE_POLICY"] == "vSAN Default Storage Policy"
    assert variables["VSPHERE_MACHINE_CLASS_NAME"] == "vcsim-default-vm-class"
    assert variables["VSPHERE_IMAGE_NAME"] == "ubuntu-2204-kube-v1.33.0"
    assert "VSPHERE_TEMPLATE" not in variables and "VSPHERE_DATACENTER" not in variables

    # vm-operator's part: a VirtualMachine gets a VM deployed from its image, and an IP.
    apply(plane, ns, json.dumps({
        "apiVersion": "vmoperator.vmware.com/v1alpha6", "kind": "VirtualMachine",
        "metadata": {"name": "sup1-cp-0"},
        "spec": {"imageName": "ubuntu-2204-kube-v1.33.0", "className": "vcsim-default-vm-class",
                 "storageClass": "vcsim-default-storage-class", "powerState": "PoweredOn"}}))

    vm_st = vm_operator_status_with_ip(plane, ns, "sup1-cp-0")
    assert vm_st["powerState"] == "PoweredOn"
    si = connect(status)
    try:
        vm = si.content.searchIndex.FindByUuid(None, vm_st["biosUUID"], True, False)
        assert vm._moId == vm_st["uniqueID"] and vm.name == "sup1-cp-0"
        assert vm.guest.ipAddress == vm_st["network"]["primaryIP4"]
        assert (vm.config.hardware.numCPU, vm.config.hardware.memoryMB) == (2, 4096)
    finally:
        Disconnect(si)
    plane.kubectl("-n", ns, "delete", "virtualmachines.vmoperator.vmware.com", "sup1-cp-0",
                  "--wait=true")
    si = connect(status)
    try:
        assert si.content.searchIndex.FindByUuid(None, vm_st["biosUUID"], True, False) is None
    finally:
        Disconnect(si)


def test_supervisor_mode_machines_boot_into_the_cluster_behind_the_endpoint(plane, ns, tmp_path):
    """CAPV's supervisor mode played by a test client: Machine → VSphereMachine (vmware group)
    → vm-operator VirtualMachine; the VM vm-operator's part deploys joins the workload cluster."""
    simulator(plane, ns, "vcsim1", {"kubernetesVersions": ["v1.33.0"]})
    apply(plane, ns, json.dumps({
        "apiVersion": f"{VCSIM_GROUP}/v1alpha1", "kind": "VMOperatorDependencies",
        "metadata": {"name": "deps"},
        "spec": {"vCenterSimulatorRef": {"name": "vcsim1"},
                 "operatorRef": {"namespace": f"{ns}-vmop"}}}))
    apply(plane, ns, f"apiVersion: {VCSIM_GROUP}/v1alpha1\nkind: ControlPlaneEndpoint\nmetadata: {{name: sv1}}\n")
    endpoint = vcsim_status(plane, ns, "controlplaneendpoint", "sv1", "port")
    apply(plane, ns, json.dumps({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "sv1"},
        # Cluster API refuses a Cluster with neither references nor a topology; CAPV's name
        # its VSphereCluster.
        "spec": {"controlPlaneEndpoint": {"host": endpoint["host"], "port": endpoint["port"]},
                 "infrastructureRef": {"apiGroup": "vmware.infrastructure.cluster.x-k8s.io", "kind": "VSphereCluster",
                                       "name": "sv1"}}}))
    labels = {"cluster.x-k8s.io/cluster-name": "sv1", "cluster.x-k8s.io/control-plane": ""}
    plane.kubectl("-n", ns, "create", "secret", "generic", "sv1-cp-0-bootstrap",
                  "--from-literal=value=#cloud-config")
    apply(plane, ns, json.dumps({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "sv1-cp-0", "labels": labels},
        "spec": {"clusterName": "sv1", "version": "v1.33.0",
                 "bootstrap": {"dataSecretName": "sv1-cp-0-bootstrap"},
                 "infrastructureRef": {"apiGroup": "vmware.infrastructure.cluster.x-k8s.io",
                                       "kind": "VSphereMachine", "name": "sv1-cp-0"}}}))

    def owner(kind, api_version, plural):
        obj = json.loads(plane.kubectl("-n", ns, "get", plural, "sv1-cp-0", "-o", "json").stdout)
        return {"apiVersion": api_version, "kind": kind, "name": "sv1-cp-0",
                "uid": obj["metadata"]["uid"]}
    apply(plane, ns, json.dumps({
        "apiVersion": "vmware.infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereMachine",
        "metadata": {"name": "sv1-cp-0", "labels": labels, "ownerReferences": [
            owner("Machine", "cluster.x-k8s.io/v1beta2", "machines.cluster.x-k8s.io")]},
        "spec": {"className": "vcsim-default-vm-class", "imageName": "ubuntu-2204-kube-v1.33.0"}}))
    apply(plane, ns, json.dumps({
        "apiVersion": "vmoperator.vmware.com/v1alpha6", "kind": "VirtualMachine",
        "metadata": {"name": "sv1-cp-0", "labels": labels, "ownerReferences": [
            owner("VSphereMachine", "vmware.infrastructure.cluster.x-k8s.io/v1beta2",
                  "vspheremachines.vmware.infrastructure.cluster.x-k8s.io")]},
        "spec": {"imageName": "ubuntu-2204-kube-v1.33.0", "className": "vcsim-default-vm-class",
                 "powerState": "PoweredOn"}}))

    vm_st = vm_operator_status_with_ip(plane, ns, "sv1-cp-0")
    secret = wait_for(lambda: get(plane, ns, "secret", "sv1-kubeconfig"), timeout=30,
                      what="sv1-kubeconfig")
    kubeconfig = tmp_path / "sv1.kubeconfig"
    kubeconfig.write_bytes(base64.b64decode(secret["data"]["value"]))

    def node():
        out = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "get", "node",
                              "sv1-cp-0", "-o", "json"], capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout) if out.returncode == 0 else None
    def ready_node():
        n = node()
        ready = n and any(c["type"] == "Ready" and c["status"] == "True"
                          for c in n["status"].get("conditions", []))
        return n if ready else None
    n = wait_for(ready_node, timeout=60, what="the machine's Ready Node")
    assert n["spec"]["providerID"] == f"vsphere://{vm_st['biosUUID']}"
    assert "node-role.kubernetes.io/control-plane" in n["metadata"]["labels"]


def vm_inventory(si):
    """Every VM by reference: name, UUIDs, power state, folder (what a restart keeps)."""
    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    try:
        return {vm._moId: (vm.name, vm.config.uuid, vm.config.instanceUuid,
                           str(vm.runtime.powerState), vm.parent._moId) for vm in view.view}
    finally:
        view.Destroy()


VMGROUP = """apiVersion: vm.codeconnect.vmworld.com/v1alpha1
kind: VmGroup
metadata:
  name: kept-group
  namespace: default
spec:
  cpu: 2
  memory: 1
  replicas: 2
  template: DC0_H0_VM0
  vcenterRef:
    simulator: kept
"""


def test_simulators_of_a_killed_plane_come_back_as_they_were(tmp_path):
    """`infrasim up` with a data directory, killed with SIGKILL: its VCenterSimulator comes back
    at its port with the same certificate, its VMs (a clone made and a VM powered off before
    the kill included) under the same references and UUIDs, its tags, and its templates made
    once, not again; a VmGroup on it finds its VMs again and makes none."""
    from conftest import Plane
    data = tmp_path / "data"
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = Plane(tmp_path / "one", "--data-dir", str(data), ephemeral=False)
    try:
        status, host, port = simulator(first, "default", "kept")
        si = connect(status)
        vms = sorted((vm for vm in si.content.viewManager.CreateContainerView(
            si.content.rootFolder, [vim.VirtualMachine], True).view if not vm.config.template),
            key=lambda vm: vm._moId)
        task = vms[0].CloneVM_Task(folder=vms[0].parent, name="made-before-the-kill",
                                   spec=vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=True))
        wait_for(lambda: task.info.state == "success", timeout=20, what="the clone")
        task = vms[1].PowerOffVM_Task()
        wait_for(lambda: task.info.state == "success", timeout=20, what="the power-off")
        # A VmGroup's two VMs on it: after the restart the group finds them, makes none.
        first.kubectl("apply", "-f", "-", input=VMGROUP)
        wait_for(lambda: (get(first, "default", "vg", "kept-group") or {}).get("status", {})
                 .get("readyReplicas") == 2, timeout=60, what="the group's VMs")
        before = vm_inventory(si)
        code, token = rest(host, port, "POST", "/api/session",
                           basic=f"{status['username']}:{status['password']}")
        code, categories = rest(host, port, "GET", "/api/cis/tagging/category", token=token)
        assert code == 200 and len(categories) == 2, categories
    finally:
        first.proc.kill()
        first.proc.wait(timeout=10)
        first.log.close()
    wait_for(lambda: refused(host, port), timeout=15, what="the port closed with the plane")

    second = Plane(tmp_path / "two", "--data-dir", str(data), ephemeral=False)
    try:
        wait_for(lambda: not refused(host, port), timeout=60, what="the simulator back")
        again = vcsim_status(second, "default", "vcentersimulator", "kept", "thumbprint")
        assert (again["host"], again["password"], again["thumbprint"]) == \
            (status["host"], status["password"], status["thumbprint"])
        der = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((host, port)))
        assert hashlib.sha256(der).hexdigest().upper() == status["thumbprint"].replace(":", "")
        si = connect(again)
        try:
            after = vm_inventory(si)
            assert after == before
            clone = next(ref for ref, vm in after.items() if vm[0] == "made-before-the-kill")
            assert after[clone][3] == "poweredOn" and after[vms[1]._moId][3] == "poweredOff"
        finally:
            Disconnect(si)
        code, token = rest(host, port, "POST", "/api/session",
                           basic=f"{again['username']}:{again['password']}")
        code, kept = rest(host, port, "GET", "/api/cis/tagging/category", token=token)
        assert code == 200 and sorted(kept) == sorted(categories)
        # The group is ready again on the VMs it had: nothing made, nothing lost.
        wait_for(lambda: (get(second, "default", "vg", "kept-group") or {}).get("status", {})
                 .get("readyReplicas") == 2, timeout=60, what="the group ready again")
        si = connect(again)
        try:
            assert vm_inventory(si) == before
        finally:
            Disconnect(si)
    finally:
        second.stop()
