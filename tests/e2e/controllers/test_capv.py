"""The CAPV stand-in under `infrasim up`: a cluster of CAPV's default flavor, made from the
variables `infrasim env` writes, turns into VMs cloned, booted and joined in the simulator,
as CAPV would make them; and against an `infrasim vcsim` process, a failing clone and a VM
destroyed behind the stand-in's back are reported as CAPV reports them. VMs are read with
pyvmomi, the workload cluster with kubectl."""

import base64
import datetime
import json
import pathlib
import re
import ssl
import urllib.error
import urllib.request
import subprocess

from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from conftest import BINARY, PASSWORD, USER, Vcsim, condition, envsubst, get, wait_for

DEPLOY = pathlib.Path(__file__).parents[3] / "deploy" / "capv"
TEMPLATE = DEPLOY / "cluster-template.yaml"
GROUP = "infrastructure.cluster.x-k8s.io"


def sourced(path):
    """The variables an `infrasim env` file exports, as a shell that sources it has them."""
    shell = subprocess.run(["bash", "-c", f"set -a; source {path}; env -0"],
                           capture_output=True, text=True, check=True)
    return dict(e.split("=", 1) for e in shell.stdout.split("\0") if "=" in e)


def infrasim_env(plane, ns, simulator, cluster, tmp_path, workers):
    """`infrasim env` as a user runs it; the variables of the file it writes."""
    env_file = tmp_path / f"{cluster}.env"
    run = subprocess.run(
        [BINARY, "env", simulator, cluster, "-n", ns, "--kubeconfig", plane.kubeconfig,
         "--worker-machines", str(workers), "--out", str(env_file)],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return sourced(env_file)


def generate(template, variables):
    """`infrasim generate --from template` with `variables` in the environment, as a user
    who sourced `infrasim env`'s file runs it: the rendered manifests."""
    rendered = subprocess.run([BINARY, "generate", "--from", str(template)], env=variables,
                              capture_output=True, text=True, timeout=30)
    assert rendered.returncode == 0, rendered.stderr
    return rendered.stdout


def wait_available(plane, ns, cluster):
    """The Cluster `cluster`, once its Available condition is True."""
    def available():
        c = get(plane, ns, "clusters.cluster.x-k8s.io", cluster)
        return c if (condition(c, "Available") or {}).get("status") == "True" else None
    return wait_for(available, timeout=120, what=f"Cluster {cluster} Available")


def vms_named(si, prefix):
    """The simulator's VMs whose names start with `prefix`, by name."""
    view = si.content.viewManager.CreateContainerView(si.content.rootFolder,
                                                      [vim.VirtualMachine], True)
    try:
        return {vm.name: vm for vm in view.view if vm.name.startswith(prefix)}
    finally:
        view.Destroy()


def connect(variables):
    """A pyvmomi session on the simulator the variables of `infrasim env` name."""
    host, port = variables["VSPHERE_SERVER"].removeprefix("https://").rsplit(":", 1)
    return SmartConnect(host=host, port=int(port), user=variables["VSPHERE_USERNAME"],
                        pwd=variables["VSPHERE_PASSWORD"], disableSslCertValidation=True)


def first_compute_cluster(si):
    """The first datacenter and its first compute cluster."""
    dc = si.content.rootFolder.childEntity[0]
    return dc, next(c for c in dc.hostFolder.childEntity if isinstance(c, vim.ClusterComputeResource))


def extra_config(vm):
    return {o.key: o.value for o in vm.config.extraConfig}


def items(plane, ns, kind):
    return json.loads(plane.kubectl("-n", ns, "get", kind, "-o", "json").stdout)["items"]


def automation(variables, method, path, body=None):
    """A call of the simulator's vSphere Automation API (`/rest`, which pyvmomi does not
    speak) with a session of its own: the answer's value."""
    base = variables["VSPHERE_SERVER"]
    insecure = ssl._create_unverified_context()
    login = urllib.request.Request(f"{base}/rest/com/vmware/cis/session", method="POST")
    basic = base64.b64encode(f"{variables['VSPHERE_USERNAME']}:{variables['VSPHERE_PASSWORD']}".encode())
    login.add_header("Authorization", f"Basic {basic.decode()}")
    with urllib.request.urlopen(login, context=insecure, timeout=10) as r:
        token = json.load(r)["value"]
    data = json.dumps(body).encode() if body is not None else None
    ask = urllib.request.Request(f"{base}/rest{path}", data=data, method=method)
    ask.add_header("vmware-api-session-id", token)
    ask.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(ask, context=insecure, timeout=10) as r:
        answer = r.read()
        # Some actions (a tag's attach) answer with no body.
        return json.loads(answer).get("value") if answer.strip() else None


def module_members(variables, module):
    """The VMs of a cluster module; None when there is no such module."""
    try:
        return set(automation(variables, "GET", f"/vcenter/cluster/modules/vm/{module}/members")["vms"])
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def vm_tags(variables, moid):
    return automation(variables, "POST",
                      "/com/vmware/cis/tagging/tag-association?~action=list-attached-tags",
                      {"object_id": {"id": moid, "type": "VirtualMachine"}})


def workload_nodes(plane, ns, cluster, tmp_path):
    """The workload cluster's Nodes, through the cluster's kubeconfig Secret; None until it
    answers."""
    secret = get(plane, ns, "secret", f"{cluster}-kubeconfig")
    if not secret:
        return None
    path = tmp_path / f"{cluster}.kubeconfig"
    path.write_bytes(base64.b64decode(secret["data"]["value"]))
    out = subprocess.run(["kubectl", "--kubeconfig", str(path), "get", "nodes", "-o", "json"],
                         capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout)["items"] if out.returncode == 0 else None


def test_capvs_default_flavor_makes_vms_that_join_the_cluster(plane, ns, tmp_path):
    variables = infrasim_env(plane, ns, "vcsim1", "c1", tmp_path, workers=2)
    # With no version asked for: the newest template, and the version it is of.
    version = variables["KUBERNETES_VERSION"]
    assert variables["VSPHERE_TEMPLATE"].endswith(f"-kube-{version}"), variables
    # As a user without clusterctl renders it: `source vcsim.env; infrasim generate --from ...`.
    rendered = generate(TEMPLATE, variables)
    assert rendered == envsubst(TEMPLATE.read_text(), variables)
    # The machines are tagged (a tag made in the simulator as an admin would).
    category = automation(variables, "POST", "/com/vmware/cis/tagging/category", {"create_spec": {
        "name": f"{ns}-role", "description": "", "cardinality": "MULTIPLE", "associable_types": []}})
    tag = automation(variables, "POST", "/com/vmware/cis/tagging/tag", {"create_spec": {
        "name": "capv", "description": "", "category_id": category}})
    tagged = rendered.replace("      os: Linux\n", f"      os: Linux\n      tagIDs:\n      - '{tag}'\n")
    assert tagged.count("tagIDs") == 2
    plane.kubectl("apply", "--server-side", "-f", "-", input=tagged)

    wait_available(plane, ns, "c1")

    # Every Machine runs on a VM, named by CAPV's provider ID.
    machines = items(plane, ns, "machines.cluster.x-k8s.io")
    assert len(machines) == 3
    for m in machines:
        assert m["status"]["phase"] == "Running", m["status"]
        assert m["spec"]["providerID"].startswith("vsphere://"), m["spec"]
        assert m["spec"]["version"] == version
    vsphere_vms = {v["metadata"]["name"]: v for v in items(plane, ns, f"vspherevms.{GROUP}")}
    assert set(vsphere_vms) == {m["metadata"]["name"] for m in machines}

    si = connect(variables)
    try:
        vms = vms_named(si, "c1-")
        assert set(vms) == set(vsphere_vms)
        for name, vm in vms.items():
            v = vsphere_vms[name]
            assert vm.runtime.powerState == "poweredOn"
            assert vm.config.uuid == v["spec"]["biosUUID"]
            assert v["status"]["ready"] is True and v["status"]["vmRef"] == vm._moId
            assert vm.guest.ipAddress in v["status"]["addresses"]
            assert vm.config.hardware.numCPU == 2 and vm.config.hardware.memoryMB == 8192
            assert vm_tags(variables, vm._moId) == [tag]
            # The bootstrap data, as CAPV hands it to cloud-init.
            extra = extra_config(vm)
            secret = get(plane, ns, "secret", v["spec"]["bootstrapRef"]["name"])
            assert extra["guestinfo.userdata.encoding"] == "base64"
            assert base64.b64decode(extra["guestinfo.userdata"]) == \
                base64.b64decode(secret["data"]["value"])
            metadata = base64.b64decode(extra["guestinfo.metadata"]).decode()
            assert f'local-hostname: "{name}"' in metadata
            mac = next(d.macAddress for d in vm.config.hardware.device
                       if isinstance(d, vim.vm.device.VirtualEthernetCard))
            assert f'macaddress: "{mac}"' in metadata
            # CAPV's per-NIC network status, on the VSphereVM and copied to its machine.
            (nic,) = v["status"]["network"]
            assert nic["macAddr"] == mac and nic["connected"] is True
            assert nic["ipAddrs"] == [vm.guest.ipAddress] and nic["networkName"] == vm.network[0].name
            # The VSphereMachine has what Cluster API's core reads.
            machine = get(plane, ns, f"vspheremachines.{GROUP}", name)
            assert machine["spec"]["providerID"] == f"vsphere://{vm.config.uuid}"
            assert {"type": "ExternalIP", "address": vm.guest.ipAddress} in \
                machine["status"]["addresses"]
            assert machine["status"]["initialization"]["provisioned"] is True
            assert machine["status"]["network"] == v["status"]["network"]

        # A cluster module per control plane and MachineDeployment (anti-affinity), each VM
        # in its owner's.
        vsphere_cluster = get(plane, ns, f"vsphereclusters.{GROUP}", "c1")
        assert condition(vsphere_cluster, "ClusterModulesReady")["status"] == "True"
        modules = {(m["controlPlane"], m["targetObjectName"]): m["moduleUUID"]
                   for m in vsphere_cluster["spec"]["clusterModules"]}
        assert set(modules) == {(True, "c1"), (False, "c1-md-0")}, modules
        for owner, module in modules.items():
            members = {vsphere_vms[m["metadata"]["name"]]["status"]["vmRef"] for m in machines
                       if ("cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]) == owner[0]}
            assert module_members(variables, module) == members, owner
            assert all(vsphere_vms[m["metadata"]["name"]]["status"]["moduleUUID"] == module
                       for m in machines if vsphere_vms[m["metadata"]["name"]]["status"]["vmRef"] in members)

        # The workload cluster's Nodes carry those provider IDs.
        nodes = wait_for(lambda: (lambda n: n if n and len(n) == 3 else None)(
            workload_nodes(plane, ns, "c1", tmp_path)), timeout=30, what="three Nodes")
        assert {n["spec"]["providerID"] for n in nodes} == \
            {m["spec"]["providerID"] for m in machines}

        # The ClusterResourceSet's objects are in the workload cluster, and its binding
        # lists each resource as applied, in the set's order.
        crs = get(plane, ns, "clusterresourcesets.addons.cluster.x-k8s.io", "c1-crs-0")
        assert condition(crs, "ResourcesApplied")["status"] == "True", crs["status"]
        binding = wait_for(lambda: (lambda b: b if b and all(
            r["applied"] for r in b["spec"]["bindings"][0]["resources"]) else None)(
            get(plane, ns, "clusterresourcesetbindings.addons.cluster.x-k8s.io", "c1")),
            timeout=30, what="every resource applied")
        assert binding["spec"]["clusterName"] == "c1"
        assert [o["name"] for o in binding["metadata"]["ownerReferences"]] == ["c1-crs-0"]
        applied = binding["spec"]["bindings"][0]["resources"]
        assert [(r["kind"], r["name"]) for r in applied] == [
            ("Secret", "vsphere-config-secret"), ("ConfigMap", "csi-manifests"),
            ("Secret", "cloud-provider-vsphere-credentials"), ("ConfigMap", "cpi-manifests")]
        assert all(r["hash"].startswith("sha256:") for r in applied)
        kubeconfig = tmp_path / "c1.kubeconfig"
        wl = lambda *args: subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args],
                                          capture_output=True, text=True, timeout=30)
        assert wl("get", "namespace", "vmware-system-csi").returncode == 0
        assert wl("-n", "vmware-system-csi", "get", "secret", "vsphere-config-secret").returncode == 0
        assert wl("-n", "kube-system", "get", "daemonset", "vsphere-cpi").returncode == 0
        credentials = json.loads(wl("-n", "kube-system", "get", "secret",
                                    "cloud-provider-vsphere-credentials", "-o", "json").stdout)
        key = f"{variables['VSPHERE_SERVER']}.password"
        assert base64.b64decode(credentials["data"][key]).decode() == variables["VSPHERE_PASSWORD"]

        # Scaling the workers adds a VM.
        plane.kubectl("-n", ns, "scale", "machinedeployments.cluster.x-k8s.io", "c1-md-0",
                      "--replicas=3")
        wait_for(lambda: len([vm for vm in vms_named(si, "c1-").values()
                              if vm.runtime.powerState == "poweredOn"]) == 4,
                 timeout=60, what="a fourth VM powered on")
        wait_for(lambda: len(module_members(variables, modules[(False, "c1-md-0")])) == 3,
                 timeout=30, what="the new VM in the workers' module")

        # Deleting the Cluster removes every VM.
        plane.kubectl("-n", ns, "delete", "clusters.cluster.x-k8s.io", "c1", "--wait=true",
                      timeout=120)
        wait_for(lambda: not vms_named(si, "c1-"), timeout=60, what="the VMs destroyed")
        assert items(plane, ns, f"vspherevms.{GROUP}") == []
        # Their modules went with the cluster.
        assert all(module_members(variables, m) is None for m in modules.values())
        # The Cluster's binding goes with it.
        wait_for(lambda: get(plane, ns, "clusterresourcesetbindings.addons.cluster.x-k8s.io",
                             "c1") is None, timeout=30, what="the binding deleted")
    finally:
        Disconnect(si)


def test_a_reconciling_resource_set_applies_changes_and_leaves_its_objects(plane, ns, tmp_path):
    variables = infrasim_env(plane, ns, "vcsim2", "c2", tmp_path, workers=0)
    plane.kubectl("apply", "--server-side", "-f", "-",
                  input=envsubst(TEMPLATE.read_text(), variables))
    manifest = lambda color: json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": "palette", "namespace": "default"},
                                         "data": {"color": color}})
    plane.kubectl("-n", ns, "create", "configmap", "palette", f"--from-literal=data={manifest('red')}")
    # Written in v1beta1, as templates written for older Cluster API releases have it.
    plane.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps({
        "apiVersion": "addons.cluster.x-k8s.io/v1beta1", "kind": "ClusterResourceSet",
        "metadata": {"name": "palette"},
        "spec": {"clusterSelector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": "c2"}},
                 "strategy": "Reconcile",
                 "resources": [{"kind": "ConfigMap", "name": "palette"}]}}))
    kubeconfig = tmp_path / "c2.kubeconfig"

    def color():
        if not kubeconfig.exists():
            secret = get(plane, ns, "secret", "c2-kubeconfig")
            if not secret:
                return None
            kubeconfig.write_bytes(base64.b64decode(secret["data"]["value"]))
        out = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "-n", "default", "get",
                              "configmap", "palette", "-o", "jsonpath={.data.color}"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout if out.returncode == 0 else None
    assert wait_for(color, timeout=120, what="the ConfigMap in the workload cluster") == "red"
    binding = lambda: get(plane, ns, "clusterresourcesetbindings.addons.cluster.x-k8s.io", "c2")
    first = next(b for b in binding()["spec"]["bindings"] if b["clusterResourceSetName"] == "palette")
    # A change of the resource is applied again (its hash changed).
    plane.kubectl("-n", ns, "patch", "configmap", "palette", "--type=merge", "-p",
                  json.dumps({"data": {"data": manifest("blue")}}))
    wait_for(lambda: color() == "blue", timeout=30, what="the change applied")
    again = next(b for b in binding()["spec"]["bindings"] if b["clusterResourceSetName"] == "palette")
    assert again["resources"][0]["hash"] != first["resources"][0]["hash"]
    # Read in either version: v1beta1 with its conditions at the top and v1beta2's under
    # `status.v1beta2`, as upstream converts them.
    old = get(plane, ns, "clusterresourcesets.v1beta1.addons.cluster.x-k8s.io", "palette")
    assert old["apiVersion"] == "addons.cluster.x-k8s.io/v1beta1"
    applied = condition(old, "ResourcesApplied")
    assert applied["status"] == "True" and "observedGeneration" not in applied, old["status"]
    assert [c["type"] for c in old["status"]["v1beta2"]["conditions"]
            if c["type"] == "ResourcesApplied"] == ["ResourcesApplied"]
    new = get(plane, ns, "clusterresourcesets.v1beta2.addons.cluster.x-k8s.io", "palette")
    assert new["spec"]["strategy"] == "Reconcile" and "v1beta2" not in new["status"]
    assert condition(new, "ResourcesApplied")["status"] == "True"
    # The template's own sets may be applied between two reads: compare a settled binding.
    old_binding = lambda: get(plane, ns, "clusterresourcesetbindings.v1beta1.addons.cluster.x-k8s.io",
                              "c2")
    bound = lambda: {b["clusterResourceSetName"] for b in binding()["spec"]["bindings"]}
    wait_for(lambda: bound() == {"c2-crs-0", "palette"}, timeout=60, what="both sets bound")
    assert old_binding()["spec"] == binding()["spec"]

    # A set that is not Reconcile refuses to become one; an empty selector is refused.
    out = plane.kubectl("-n", ns, "patch", "clusterresourcesets.addons.cluster.x-k8s.io",
                        "c2-crs-0", "--type=merge", "-p", '{"spec": {"strategy": "Reconcile"}}',
                        check=False)
    assert out.returncode != 0 and "immutable" in out.stderr, out.stderr
    out = plane.kubectl("-n", ns, "apply", "-f", "-", check=False, input=json.dumps({
        "apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet",
        "metadata": {"name": "everything"},
        "spec": {"clusterSelector": {}, "resources": [{"kind": "ConfigMap", "name": "palette"}]}}))
    assert out.returncode != 0 and "selector must not be empty" in out.stderr, out.stderr

    # Deleting the set takes it out of the binding and leaves its objects.
    plane.kubectl("-n", ns, "delete", "clusterresourcesets.addons.cluster.x-k8s.io", "palette",
                  "--wait=true")
    names = [b["clusterResourceSetName"] for b in binding()["spec"]["bindings"]]
    assert names == ["c2-crs-0"], names
    assert color() == "blue"
    plane.kubectl("-n", ns, "delete", "clusters.cluster.x-k8s.io", "c2", "--wait=true", timeout=120)


def test_the_topology_flavor_patches_its_templates_and_makes_vms(plane, ns, tmp_path):
    """CAPV's topology flavor: a ClusterClass whose inline patches fill the VSphereCluster,
    the users and kube-vip's static pod from the Cluster's variables."""
    variables = infrasim_env(plane, ns, "vcsim3", "t1", tmp_path, workers=1)
    variables["CLUSTER_CLASS_NAME"] = "capv-quick-start"
    for name in ["clusterclass-template.yaml", "cluster-template-topology.yaml"]:
        rendered = generate(DEPLOY / name, variables)
        # kube-vip's manifest gets the endpoint's address from the class's patch (a Go
        # template's regexReplaceAll): the Cluster's copy says another.
        ip = variables["CONTROL_PLANE_ENDPOINT_IP"]
        text = re.sub(r"(name: address\n +value:) .*", r"\1 0.0.0.0", rendered)
        assert (text != rendered) == name.startswith("cluster-template"), name
        plane.kubectl("apply", "--server-side", "-f", "-", input=text)

    cluster = wait_available(plane, ns, "t1")
    assert condition(cluster, "TopologyReconciled")["status"] == "True", cluster["status"]

    # The patched fields, in the objects made from the class's templates.
    vsphere_cluster = get(plane, ns, f"vsphereclusters.{GROUP}",
                          cluster["spec"]["infrastructureRef"]["name"])
    assert vsphere_cluster["spec"]["server"] == variables["VSPHERE_SERVER"]
    assert vsphere_cluster["spec"]["thumbprint"] == variables["VSPHERE_TLS_THUMBPRINT"]
    assert vsphere_cluster["spec"]["identityRef"] == {"kind": "Secret", "name": "t1"}
    assert vsphere_cluster["spec"]["controlPlaneEndpoint"] == {
        "host": variables["CONTROL_PLANE_ENDPOINT_IP"],
        "port": int(variables["CONTROL_PLANE_ENDPOINT_PORT"])}
    kcp = get(plane, ns, "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
              cluster["spec"]["controlPlaneRef"]["name"])
    spec = kcp["spec"]["kubeadmConfigSpec"]
    assert spec["users"] == [{"name": "capv", "sudo": "ALL=(ALL) NOPASSWD:ALL",
                              "sshAuthorizedKeys": [variables["VSPHERE_SSH_AUTHORIZED_KEY"]]}]
    kube_vip = next(f for f in spec["files"] if f["path"] == "/etc/kubernetes/manifests/kube-vip.yaml")
    assert f"- name: address\n      value: {ip}\n" in kube_vip["content"], kube_vip["content"]
    assert "0.0.0.0" not in kube_vip["content"]
    assert kube_vip["content"].startswith("apiVersion: v1\nkind: Pod\n")
    md = items(plane, ns, "machinedeployments.cluster.x-k8s.io")[0]
    bootstrap = get(plane, ns, "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
                    md["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"])
    assert bootstrap["spec"]["template"]["spec"]["users"] == spec["users"]
    assert bootstrap["spec"]["template"]["spec"]["files"] == []

    # Every Machine runs on a powered-on VM that CAPV's provider ID names.
    machines = items(plane, ns, "machines.cluster.x-k8s.io")
    assert len(machines) == 2 and all(m["status"]["phase"] == "Running" for m in machines)
    si = connect(variables)
    try:
        vms = vms_named(si, "t1-")
        assert {m["metadata"]["name"] for m in machines} == set(vms)
        for m in machines:
            vm = vms[m["metadata"]["name"]]
            assert vm.runtime.powerState == "poweredOn"
            assert m["spec"]["providerID"] == f"vsphere://{vm.config.uuid}"

        # A paused Cluster pauses CAPV's objects of it, as CAPV reports it, and back.
        kinds = [f"vsphereclusters.{GROUP}", f"vspheremachines.{GROUP}", f"vspherevms.{GROUP}"]

        def paused_all(status, reason):
            objs = [o for k in kinds for o in items(plane, ns, k)]
            return len(objs) == 5 and all(
                (condition(o, "Paused") or {}).get("status") == status
                and condition(o, "Paused")["reason"] == reason for o in objs)
        plane.kubectl("-n", ns, "patch", "clusters.cluster.x-k8s.io", "t1", "--type=merge",
                      "-p", '{"spec": {"paused": true}}')
        wait_for(lambda: paused_all("True", "Paused"), timeout=30, what="CAPV's objects paused")
        vsphere_vm = items(plane, ns, f"vspherevms.{GROUP}")[0]
        assert condition(vsphere_vm, "Paused")["message"] == "Cluster spec.paused is set to true"
        # A paused object's Ready stands (pausing is not a failure).
        assert condition(vsphere_vm, "Ready")["status"] == "True"
        plane.kubectl("-n", ns, "patch", "clusters.cluster.x-k8s.io", "t1", "--type=merge",
                      "-p", '{"spec": {"paused": false}}')
        wait_for(lambda: paused_all("False", "NotPaused"), timeout=30, what="CAPV's objects unpaused")

        plane.kubectl("-n", ns, "delete", "clusters.cluster.x-k8s.io", "t1", "--wait=true",
                      timeout=120)
        wait_for(lambda: not vms_named(si, "t1-"), timeout=60, what="the VMs destroyed")
    finally:
        Disconnect(si)


def test_supervisor_mode_makes_vm_operator_virtual_machines_that_join(plane, ns, tmp_path):
    """CAPV's supervisor flavor: the VSphereMachines (vmware group) become vm-operator
    VirtualMachines of the class, image and storage class the template names; vm-operator's
    stand-in deploys them in the simulator and they join the workload cluster."""
    env_file = tmp_path / "s1.env"
    run = subprocess.run(
        [BINARY, "env", "vcsim4", "s1", "-n", ns, "--kubeconfig", plane.kubeconfig,
         "--supervisor", "--out", str(env_file)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    variables = sourced(env_file)
    assert variables["VSPHERE_MACHINE_CLASS_NAME"] == "vcsim-default-vm-class"
    template = DEPLOY / "cluster-template-supervisor.yaml"
    plane.kubectl("apply", "--server-side", "-f", "-", input=generate(template, variables))
    wait_available(plane, ns, "s1")
    supervisor = "vmware.infrastructure.cluster.x-k8s.io"
    cluster = get(plane, ns, f"vsphereclusters.{supervisor}", "s1")
    assert cluster["status"]["initialization"]["provisioned"] is True
    assert condition(cluster, "ResourcePolicyReady")["status"] == "True"
    policy = get(plane, ns, "virtualmachinesetresourcepolicies.vmoperator.vmware.com", "s1")
    assert policy["spec"]["resourcePool"] == {"name": "s1"}
    # The supervisor kinds in v1beta1, converted as CAPV converts them both ways.
    old_cluster = get(plane, ns, f"vsphereclusters.v1beta1.{supervisor}", "s1")
    assert old_cluster["apiVersion"] == f"{supervisor}/v1beta1"
    assert old_cluster["status"]["ready"] is True and "initialization" not in old_cluster["status"]
    network = {"apiVersion": "crd.nsx.vmware.com/v1alpha1", "kind": "SubnetSet", "name": "s1"}
    plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": f"{supervisor}/v1beta1", "kind": "VSphereMachineTemplate",
        "metadata": {"name": "s1-old", "namespace": ns},
        "spec": {"template": {"spec": {
            "className": "c", "imageName": "i",
            "namingStrategy": {"template": "{{ .machine.name }}-x"},
            "network": {"interfaces": {"primary": {"network": network}}}}}}}))
    stored = get(plane, ns, f"vspheremachinetemplates.v1beta2.{supervisor}", "s1-old")["spec"]["template"]["spec"]
    assert stored["naming"] == {"template": "{{ .machine.name }}-x"} and "namingStrategy" not in stored
    assert stored["network"]["interfaces"]["primary"] == {"networkRef": network}

    machines = items(plane, ns, "machines.cluster.x-k8s.io")
    assert len(machines) == 2 and all(m["status"]["phase"] == "Running" for m in machines)
    si = connect(variables)
    try:
        for m in machines:
            name = m["metadata"]["name"]
            vsphere_machine = get(plane, ns, f"vspheremachines.{supervisor}", name)
            vm = get(plane, ns, "virtualmachines.vmoperator.vmware.com", name)
            # The VirtualMachine CAPV makes: owned by the VSphereMachine, of its class and
            # image, its cloud-init the bootstrap data.
            assert vm["metadata"]["ownerReferences"][0]["name"] == name
            assert vm["spec"]["className"] == variables["VSPHERE_MACHINE_CLASS_NAME"]
            assert vm["spec"]["imageName"] == variables["VSPHERE_IMAGE_NAME"]
            assert vm["spec"]["storageClass"] == variables["VSPHERE_STORAGE_CLASS"]
            assert vm["spec"]["bootstrap"]["cloudInit"]["rawCloudConfig"] == {
                "name": m["spec"]["bootstrap"]["dataSecretName"], "key": "user-data"}
            role = "controlplane" if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"] else "node"
            assert vm["metadata"]["labels"]["capv.vmware.com/cluster.role"] == role
            uuid = vm["status"]["biosUUID"]
            assert m["spec"]["providerID"] == vsphere_machine["spec"]["providerID"] == f"vsphere://{uuid}"
            assert vsphere_machine["status"]["addresses"] == [
                {"type": "InternalIP", "address": vm["status"]["network"]["primaryIP4"]}]
            found = si.content.searchIndex.FindByUuid(None, uuid, True, False)
            assert found is not None and found.runtime.powerState == "poweredOn"
            # In the namespace's folder, as vm-operator places them: one VM name may be
            # taken in every namespace.
            assert found.parent.name == ns
            old = get(plane, ns, f"vspheremachines.v1beta1.{supervisor}", name)
            assert old["status"]["vmID"] == uuid and old["status"]["ready"] is True, old["status"]
            assert "biosUUID" not in old["status"] and "initialization" not in old["status"]
            assert "VirtualMachineProvisioned" in {
                c["type"] for c in old["status"]["v1beta2"]["conditions"]}
        nodes = wait_for(lambda: (lambda n: n if n and len(n) == 2 else None)(
            workload_nodes(plane, ns, "s1", tmp_path)), timeout=60, what="two Nodes")
        assert {n["spec"]["providerID"] for n in nodes} == {m["spec"]["providerID"] for m in machines}

        # A ProviderServiceAccount: an account in the supervisor with its rules, whose token
        # lands in the workload cluster and opens exactly what the rules allow.
        plane.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": f"{supervisor}/v1beta2", "kind": "ProviderServiceAccount",
            "metadata": {"name": "s1-csi", "namespace": ns},
            "spec": {"ref": {"kind": "VSphereCluster", "name": "s1"},
                     "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
                     "targetNamespace": "vmware-system-csi", "targetSecretName": "pvcsi-provider-creds"}}))
        kubeconfig = tmp_path / "s1.kubeconfig"

        def copied():
            out = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "-n", "vmware-system-csi",
                                  "get", "secret", "pvcsi-provider-creds", "-o", "json"],
                                 capture_output=True, text=True, timeout=30)
            return json.loads(out.stdout) if out.returncode == 0 else None
        secret = wait_for(copied, timeout=60, what="the account's token in the workload cluster")
        token = base64.b64decode(secret["data"]["token"]).decode()
        assert base64.b64decode(secret["data"]["namespace"]).decode() == ns
        role = get(plane, ns, "roles.rbac.authorization.k8s.io", "s1-csi")
        assert role["metadata"]["ownerReferences"][0]["kind"] == "ProviderServiceAccount"
        as_account = lambda *args: subprocess.run(
            ["kubectl", "--kubeconfig", "/dev/null", "--server", f"https://127.0.0.1:{plane.port}",
             "--insecure-skip-tls-verify", "--token", token, "-n", ns, *args],
            capture_output=True, text=True, timeout=30)
        assert as_account("get", "configmaps").returncode == 0
        refused = as_account("get", "secrets")
        assert refused.returncode != 0 and "forbidden" in refused.stderr, refused.stderr
        ready = wait_for(lambda: (lambda c: c if c and c["status"] == "True" else None)(
            condition(get(plane, ns, f"vsphereclusters.{supervisor}", "s1"), "ProviderServiceAccountsReady")),
            timeout=30, what="ProviderServiceAccountsReady")
        assert ready["reason"] == "Ready"
        discovers_the_supervisor(plane, ns, kubeconfig)

        plane.kubectl("-n", ns, "delete", "clusters.cluster.x-k8s.io", "s1", "--wait=true",
                      timeout=120)
        assert items(plane, ns, "virtualmachines.vmoperator.vmware.com") == []
        uuids = [m["spec"]["providerID"].removeprefix("vsphere://") for m in machines]
        assert all(si.content.searchIndex.FindByUuid(None, u, True, False) is None for u in uuids)
    finally:
        Disconnect(si)


def discovers_the_supervisor(plane, ns, kubeconfig):
    """CAPV's service discovery: the workload cluster gets a headless `default/supervisor`
    Service whose Endpoints name the supervisor's address: the plane's own, from the
    `kube-public/cluster-info` it publishes as kubeadm does, until the supervisor's load
    balancer Service has a VIP, which then wins."""
    info = json.loads(plane.kubectl("-n", "kube-public", "get", "configmap", "cluster-info",
                                    "-o", "json").stdout)
    assert f"server: https://127.0.0.1:{plane.port}\n" in info["data"]["kubeconfig"]

    def guest(kind):
        out = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "-n", "default",
                              "get", kind, "supervisor", "-o", "json"],
                             capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def supervisor_at(ip):
        found = guest("endpoints")
        subsets = (found or {}).get("subsets") or [{}]
        return found if [a["ip"] for a in subsets[0].get("addresses", [])] == [ip] else None

    endpoints = wait_for(lambda: supervisor_at("127.0.0.1"), timeout=60,
                         what="the supervisor's Endpoints in the workload cluster")
    assert [p["port"] for p in endpoints["subsets"][0]["ports"]] == [6443]
    service = guest("service")
    assert service["spec"]["clusterIP"] == "None" and "selector" not in service["spec"]
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(6443, 6443)]
    supervisor = "vmware.infrastructure.cluster.x-k8s.io"
    assert condition(get(plane, ns, f"vsphereclusters.{supervisor}", "s1"),
                     "ServiceDiscoveryReady")["status"] == "True"

    plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-apiserver-lb-svc", "namespace": "kube-system"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 6443}]}}))
    try:
        plane.kubectl("-n", "kube-system", "patch", "service", "kube-apiserver-lb-svc",
                      "--subresource=status", "--type=merge", "-p", json.dumps(
                          {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}))
        wait_for(lambda: supervisor_at("192.0.2.10"), timeout=60,
                 what="the load balancer's VIP in the supervisor's Endpoints")
    finally:
        plane.kubectl("-n", "kube-system", "delete", "service", "kube-apiserver-lb-svc")


def vcsim_cluster(plane, ns, v, name):
    """A VSphereCluster on an `infrasim vcsim` process, logged in to with an identity Secret
    (`creds`) and trusted by its SHA-1 thumbprint as a CAPV user with a real vCenter writes
    it, and its Cluster: the objects to apply."""
    sha1 = next(line for line in v.banner if "SHA-1" in line).rsplit(" ", 1)[1]
    plane.kubectl("-n", ns, "create", "secret", "generic", "creds",
                  f"--from-literal=username={USER}", f"--from-literal=password={PASSWORD}")
    return [
        {"apiVersion": f"{GROUP}/v1beta2", "kind": "VSphereCluster", "metadata": {"name": name},
         "spec": {"server": f"https://127.0.0.1:{v.port}", "thumbprint": sha1,
                  "identityRef": {"kind": "Secret", "name": "creds"},
                  "controlPlaneEndpoint": {"host": "127.0.0.1", "port": 6443}}},
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": name},
         "spec": {"infrastructureRef": {"apiGroup": GROUP, "kind": "VSphereCluster", "name": name}}},
    ]


def bootstrapped_machine(plane, ns, cluster, name):
    """A Machine of `cluster` with its bootstrap data Secret made, on the VSphereMachine of
    its name."""
    plane.kubectl("-n", ns, "create", "secret", "generic", f"{name}-bootstrap",
                  "--from-literal=value=#cloud-config")
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "spec": {"clusterName": cluster, "version": "v1.33.0",
                     "bootstrap": {"dataSecretName": f"{name}-bootstrap"},
                     "infrastructureRef": {"apiGroup": GROUP, "kind": "VSphereMachine", "name": name}}}


def vsphere_machine(cluster, name, spec):
    return {"apiVersion": f"{GROUP}/v1beta2", "kind": "VSphereMachine",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "spec": {"template": "DC0_H0_VM0", "datacenter": "DC0",
                     "network": {"devices": [{"networkName": "VM Network", "dhcp4": True}]}, **spec}}


def apply_all(plane, ns, objects):
    plane.kubectl("-n", ns, "apply", "--server-side", "-f", "-",
                  input="\n---\n".join(json.dumps(o) for o in objects))


def provisioned_condition(plane, ns, name):
    vm = get(plane, ns, f"vspherevms.{GROUP}", name) or {}
    return condition(vm, "VirtualMachineProvisioned") or {}


def test_against_a_vcsim_process_failures_are_reported_and_recovered(plane, ns, tmp_path):
    """Any vCenter the objects name: here an `infrasim vcsim` process, logged in to with the
    VSphereCluster's identity Secret and trusted by its SHA-1 thumbprint, as a CAPV user with a
    real vCenter would write them."""
    rules = tmp_path / "faults.json"
    rules.write_text(json.dumps([{"method": "CloneVM_Task", "type": "VirtualMachine",
                                  "fault": "InsufficientResourcesFault", "times": 1}]))
    v = Vcsim(tmp_path, "--faults", str(rules))
    try:
        apply_all(plane, ns, vcsim_cluster(plane, ns, v, "v1") + [
            bootstrapped_machine(plane, ns, "v1", "m1"),
            vsphere_machine("v1", "m1", {"numCPUs": 2, "memoryMiB": 1024}),
        ])
        cluster = wait_for(lambda: (lambda c: c if (condition(c, "VCenterAvailable") or {}).get(
            "status") == "True" else None)(get(plane, ns, f"vsphereclusters.{GROUP}", "v1")),
            timeout=30, what="VCenterAvailable")
        assert cluster["status"]["initialization"]["provisioned"] is True

        # The first clone fails: reported on the VSphereVM, and retried with backoff.
        failed = wait_for(lambda: (lambda c: c if c.get("reason") == "TaskFailed" else None)(
            provisioned_condition(plane, ns, "m1")), timeout=60, what="TaskFailed")
        assert "InsufficientResourcesFault" in failed["message"], failed
        wait_for(lambda: (get(plane, ns, f"vspherevms.{GROUP}", "m1") or {}).get(
            "status", {}).get("ready") is True, timeout=90, what="the VSphereVM ready after a retry")
        machine = wait_for(lambda: (lambda m: m if m.get("spec", {}).get("providerID") else None)(
            get(plane, ns, f"vspheremachines.{GROUP}", "m1")), timeout=30, what="providerID")

        si = v.connect()
        try:
            vm = vms_named(si, "m1")["m1"]
            assert machine["spec"]["providerID"] == f"vsphere://{vm.config.uuid}"
            assert vm.config.hardware.memoryMB == 1024
            # A VM destroyed behind CAPV's back is reported, not cloned again. (The stand-in
            # powers a VM it finds off on again, as CAPV does: the admin may have to try
            # again.)
            def destroyed():
                for method in (vm.PowerOffVM_Task, vm.Destroy_Task):
                    if method == vm.PowerOffVM_Task and vm.runtime.powerState != "poweredOn":
                        continue
                    task = method()
                    wait_for(lambda: task.info.state in ("success", "error"), what="a task")
                return task.info.state == "success"
            wait_for(destroyed, timeout=30, what="the VM destroyed")
            gone = wait_for(lambda: (lambda c: c if c.get("reason") == "NotFoundByBIOSUUID" else None)(
                provisioned_condition(plane, ns, "m1")), timeout=30, what="NotFoundByBIOSUUID")
            assert "m1" not in vms_named(si, "m1"), "not cloned again"
            assert gone["status"] == "False"

            # The vCenter ends the stand-in's session (an administrator kills it): it logs in
            # again, and the next machine gets its VM.
            manager = si.content.sessionManager
            mine = manager.currentSession.key
            killed = [s.key for s in manager.sessionList if s.key != mine]
            assert killed, "the stand-in holds a session"
            manager.TerminateSession(killed)
            apply_all(plane, ns, [bootstrapped_machine(plane, ns, "v1", "m2"),
                                  vsphere_machine("v1", "m2", {"powerOffMode": "soft"})])
            wait_for(lambda: (get(plane, ns, f"vspherevms.{GROUP}", "m2") or {}).get(
                "status", {}).get("ready") is True, timeout=60, what="m2 ready after the kill")
            assert vms_named(si, "m2")["m2"].runtime.powerState == "poweredOn"
            assert not set(killed) & {s.key for s in manager.sessionList}
        finally:
            Disconnect(si)
        # Deleting the machines lets their VSphereVMs go (m1 has no VM left to destroy; m2's
        # is destroyed, its guest shut down first: its powerOffMode is soft).
        plane.kubectl("-n", ns, "delete", "machines.cluster.x-k8s.io", "m1", "m2", "--wait=true",
                      timeout=60)
        assert items(plane, ns, f"vspherevms.{GROUP}") == []
        si = v.connect()
        try:
            assert not vms_named(si, "m2"), "m2's VM destroyed"
            shutdowns = si.content.eventManager.QueryEvents(
                vim.event.EventFilterSpec(type=[vim.event.VmGuestShutdownEvent]))
            assert [e.vm.name for e in shutdowns] == ["m2"], shutdowns
        finally:
            Disconnect(si)
    finally:
        v.stop()


def test_a_cluster_identity_lends_its_secret_to_the_namespaces_it_allows(plane, ns, tmp_path):
    """A VSphereClusterIdentity: its Secret in CAPV's namespace (capv-system), used by the
    VSphereClusters of the namespaces its selector admits, refused to the others."""
    v = Vcsim(tmp_path)
    try:
        sha1 = next(line for line in v.banner if "SHA-1" in line).rsplit(" ", 1)[1]
        plane.kubectl("create", "namespace", "capv-system", check=False)
        secret = f"{ns}-vcenter"
        plane.kubectl("-n", "capv-system", "create", "secret", "generic", secret,
                      f"--from-literal=username={USER}", f"--from-literal=password={PASSWORD}")
        plane.kubectl("label", "namespace", ns, "vcenter-access=yes")
        plane.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": f"{GROUP}/v1beta2", "kind": "VSphereClusterIdentity",
            "metadata": {"name": ns},
            "spec": {"secretName": secret,
                     "allowedNamespaces": {"selector": {"matchLabels": {"vcenter-access": "yes"}}}}}))
        other = f"{ns}-other"
        plane.kubectl("create", "namespace", other)
        for where in (ns, other):
            plane.kubectl("-n", where, "apply", "-f", "-", input=json.dumps({
                "apiVersion": f"{GROUP}/v1beta2", "kind": "VSphereCluster", "metadata": {"name": "id"},
                "spec": {"server": f"https://127.0.0.1:{v.port}", "thumbprint": sha1,
                         "identityRef": {"kind": "VSphereClusterIdentity", "name": ns},
                         "controlPlaneEndpoint": {"host": "127.0.0.1", "port": 6443}}}))

        def available(where):
            c = get(plane, where, f"vsphereclusters.{GROUP}", "id") or {}
            return condition(c, "VCenterAvailable") or None
        wait_for(lambda: (available(ns) or {}).get("status") == "True", timeout=30,
                 what="VCenterAvailable through the identity")
        refused = wait_for(lambda: available(other), timeout=30, what="the other's condition")
        assert refused["status"] == "False" and refused["reason"] == "VCenterUnreachable"
        assert f"does not allow namespace {other}" in refused["message"], refused
        plane.kubectl("delete", "namespace", other, "--wait=false")
        # The identity is available: it owns its Secret, which carries CAPV's finalizer.
        identity = wait_for(lambda: (lambda i: i if (i or {}).get("status", {}).get("ready") else None)(
            get(plane, ns, f"vsphereclusteridentities.{GROUP}", ns)), timeout=30,
            what="the identity ready")
        assert condition(identity, "Available")["status"] == "True"
        owned = get(plane, "capv-system", "secret", f"{ns}-vcenter")
        assert [(o["kind"], o["name"]) for o in owned["metadata"]["ownerReferences"]] == \
            [("VSphereClusterIdentity", ns)]
        assert "vspherecluster/infrastructure.cluster.x-k8s.io" in owned["metadata"]["finalizers"]
        # A second identity naming the same Secret is refused it.
        plane.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": f"{GROUP}/v1beta2", "kind": "VSphereClusterIdentity",
            "metadata": {"name": f"{ns}-second"}, "spec": {"secretName": f"{ns}-vcenter"}}))
        refused = wait_for(lambda: condition(get(plane, ns, f"vsphereclusteridentities.{GROUP}",
                                                 f"{ns}-second"), "Available"),
                           timeout=30, what="the second identity's condition")
        assert (refused["status"], refused["reason"]) == ("False", "SecretAlreadyInUse"), refused
        # Deleting the identity deletes its Secret, as CAPV does.
        plane.kubectl("delete", f"vsphereclusteridentities.{GROUP}", ns, "--wait=true", timeout=60)
        wait_for(lambda: get(plane, "capv-system", "secret", f"{ns}-vcenter") is None, timeout=30,
                 what="the identity's Secret deleted")
        plane.kubectl("delete", f"vsphereclusteridentities.{GROUP}", f"{ns}-second", "--wait=true",
                      timeout=60)
    finally:
        v.stop()


def make_tag(variables, category, tag):
    """Makes `tag` in the existing category named `category`, attached to nothing."""
    categories = {automation(variables, "GET", f"/com/vmware/cis/tagging/category/id:{c}")["name"]: c
                  for c in automation(variables, "GET", "/com/vmware/cis/tagging/category")}
    return automation(variables, "POST", "/com/vmware/cis/tagging/tag", {"create_spec": {
        "name": tag, "description": "", "category_id": categories[category]}})


def test_failure_domains_are_checked_and_place_the_control_plane(plane, ns, tmp_path):
    """CAPV's failure domains: zones checked against the vCenter (tags, placement, topology),
    the VSphereCluster's `failureDomainSelector` listing the ready ones, and the control
    plane's machine placed as its zone says (network, datastore, pool, folder)."""
    variables = infrasim_env(plane, ns, "vcsim5", "fd1", tmp_path, workers=0)
    si = connect(variables)
    try:
        dc, compute = first_compute_cluster(si)
        # The VCenterSimulator tags its datacenters (`k8s-region`) and clusters (`k8s-zone`)
        # by their names, as upstream's does for CAPV; a zone tag attached to nothing fails.
        make_tag(variables, "k8s-zone", f"{ns}-nowhere")
        network = next(n.name for n in dc.network if isinstance(n, vim.dvs.DistributedVirtualPortgroup))
        datastore = compute.datastore[0].name

        def domain(name, zone_tag, datastore):
            return {"apiVersion": f"{GROUP}/v1beta2", "kind": "VSphereFailureDomain",
                    "metadata": {"name": name},
                    "spec": {"region": {"name": dc.name, "type": "Datacenter",
                                        "tagCategory": "k8s-region"},
                             "zone": {"name": zone_tag, "type": "ComputeCluster",
                                      "tagCategory": "k8s-zone"},
                             "topology": {"datacenter": dc.name, "computeCluster": compute.name,
                                          "datastore": datastore, "networks": [network]}}}

        def zone(name, domain, label=ns):
            return {"apiVersion": f"{GROUP}/v1beta2", "kind": "VSphereDeploymentZone",
                    "metadata": {"name": name, "labels": {"test": label}},
                    "spec": {"server": variables["VSPHERE_SERVER"], "failureDomain": domain,
                             "controlPlane": True,
                             "placementConstraint": {
                                 "resourcePool": f"/{dc.name}/host/{compute.name}/Resources",
                                 "folder": f"/{dc.name}/vm"}}}
        good, untagged, no_store = f"{ns}-a", f"{ns}-b", f"{ns}-c"
        for obj in (domain(good, compute.name, datastore), zone(good, good),
                    domain(untagged, f"{ns}-nowhere", datastore),
                    zone(untagged, untagged, f"{ns}-bad"),
                    domain(no_store, compute.name, "NoSuchDS"),
                    zone(no_store, no_store, f"{ns}-bad")):
            plane.kubectl("apply", "-f", "-", input=json.dumps(obj))

        def zone_status(name):
            z = get(plane, ns, f"vspheredeploymentzones.{GROUP}", name) or {}
            return z if "ready" in z.get("status", {}) else None
        ready = wait_for(lambda: zone_status(good), timeout=60, what="the good zone's report")
        assert ready["status"]["ready"] is True, ready["status"]
        for c in ("VCenterAvailable", "PlacementConstraintReady", "FailureDomainValidated", "Ready"):
            assert condition(ready, c)["status"] == "True", (c, ready["status"])
        fd = get(plane, ns, f"vspherefailuredomains.{GROUP}", good)
        assert [(o["kind"], o["name"]) for o in fd["metadata"]["ownerReferences"]] == \
            [("VSphereDeploymentZone", good)]
        for name, reason in ((untagged, "ZoneMisconfigured"), (no_store, "DatastoreNotFound")):
            bad = wait_for(lambda: zone_status(name), timeout=60, what=f"zone {name}'s report")
            assert bad["status"]["ready"] is False
            validated = condition(bad, "FailureDomainValidated")
            assert (validated["status"], validated["reason"]) == ("False", reason), validated

        # The cluster selects the good zone (a zone it selected that is not ready would keep
        # its infrastructure from being Ready, as in CAPV): it is its failure domain, and the
        # control plane's machine goes there.
        rendered = generate(TEMPLATE, variables)
        selector = f"  failureDomainSelector:\n    matchLabels:\n      test: {ns}\n"
        manifest = rendered.replace("  identityRef:\n    kind: Secret\n",
                                           selector + "  identityRef:\n    kind: Secret\n", 1)
        assert selector in manifest
        plane.kubectl("apply", "--server-side", "-f", "-", input=manifest)

        cluster = wait_available(plane, ns, "fd1")
        assert [d["name"] for d in cluster["status"]["failureDomains"]] == [good]
        vsphere_cluster = get(plane, ns, f"vsphereclusters.{GROUP}", "fd1")
        assert vsphere_cluster["status"]["failureDomains"] == [{"name": good, "controlPlane": True}]
        assert condition(vsphere_cluster, "FailureDomainsReady")["status"] == "True"
        # A v1beta1 reader gets CAPV's v1beta1 shape: a map of domains, `ready`, v1beta1
        # conditions at the top and v1beta2's under `status.v1beta2`.
        old = get(plane, ns, f"vsphereclusters.v1beta1.{GROUP}", "fd1")
        assert old["apiVersion"] == f"{GROUP}/v1beta1"
        assert old["status"]["failureDomains"] == {good: {"controlPlane": True}}
        assert old["status"]["ready"] is True and "initialization" not in old["status"]
        assert {c["type"] for c in old["status"]["conditions"]} >= {"Ready", "FailureDomainsAvailable"}
        assert condition({"status": old["status"]["v1beta2"]}, "FailureDomainsReady")["status"] == "True"
        # Written in v1beta1, as CAPV's older templates are: stored in v1beta2's shape.
        plane.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": f"{GROUP}/v1beta1", "kind": "VSphereMachineTemplate",
            "metadata": {"name": "fd1-old", "namespace": ns},
            "spec": {"template": {"spec": {"template": "t", "network": {"devices": []},
                                           "guestSoftPowerOffTimeout": "5m0s",
                                           "namingStrategy": {"template": "{{ .machine.name }}-x"}}}}}))
        stored = get(plane, ns, f"vspheremachinetemplates.v1beta2.{GROUP}", "fd1-old")["spec"]["template"]["spec"]
        assert stored["guestSoftPowerOffTimeoutSeconds"] == 300 and "guestSoftPowerOffTimeout" not in stored
        assert stored["naming"] == {"template": "{{ .machine.name }}-x"}
        (machine,) = items(plane, ns, "machines.cluster.x-k8s.io")
        assert machine["spec"]["failureDomain"] == good
        vm = get(plane, ns, f"vspherevms.{GROUP}", machine["metadata"]["name"])
        assert vm["spec"]["resourcePool"] == f"/{dc.name}/host/{compute.name}/Resources"
        assert vm["spec"]["datastore"] == datastore
        assert [d["networkName"] for d in vm["spec"]["network"]["devices"]] == [network]
        (made,) = vms_named(si, "fd1-").values()
        assert [n.name for n in made.network] == [network]
        assert made.datastore[0].name == datastore

        # A zone in use is not deleted until its machines are gone; then its domain goes too.
        plane.kubectl("delete", f"vspheredeploymentzones.{GROUP}", good, "--wait=false")
        assert get(plane, ns, f"vspheredeploymentzones.{GROUP}", good) is not None
        plane.kubectl("-n", ns, "delete", "clusters.cluster.x-k8s.io", "fd1", "--wait=true",
                      timeout=120)
        wait_for(lambda: get(plane, ns, f"vspheredeploymentzones.{GROUP}", good) is None,
                 timeout=60, what="the zone deleted")
        wait_for(lambda: get(plane, ns, f"vspherefailuredomains.{GROUP}", good) is None,
                 timeout=30, what="its failure domain deleted")
        for name in (untagged, no_store):
            plane.kubectl("delete", f"vspheredeploymentzones.{GROUP}", name, "--wait=false")
    finally:
        Disconnect(si)


def reconfigure_drs(si, compute, groups=(), rules=()):
    """Adds DRS groups and rules to a cluster with ReconfigureComputeResource_Task."""
    spec = vim.cluster.ConfigSpecEx(
        groupSpec=[vim.cluster.GroupSpec(operation="add", info=g) for g in groups],
        rulesSpec=[vim.cluster.RuleSpec(operation="add", info=r) for r in rules])
    task = compute.ReconfigureComputeResource_Task(spec=spec, modify=True)
    wait_for(lambda: task.info.state in ("success", "error"), timeout=30, what="the reconfiguration")
    assert task.info.state == "success", task.info.error


def test_a_host_group_failure_domain_puts_its_machines_in_its_vm_group(plane, ns, tmp_path):
    """A failure domain of type HostGroup, as CAPV checks it: the hosts of its host group
    carry the zone's tag and a VM-host rule ties its VM group to that host group (a zone
    whose rule is missing is reported); its machine's VM joins the VM group, and the
    simulator's DRS keeps it on the group's hosts."""
    variables = infrasim_env(plane, ns, "vcsim9", "hg1", tmp_path, workers=0)
    si = connect(variables)
    try:
        dc, compute = first_compute_cluster(si)
        # A host other than the template's: a clone starts next to its source, so being on
        # the chosen one is DRS's doing.
        template = variables["VSPHERE_TEMPLATE"].rsplit("/", 1)[-1]
        source = vms_named(si, template)[template]
        chosen = [next(h for h in compute.host if h != source.runtime.host)]
        tag = make_tag(variables, "k8s-zone", f"{ns}-rack")
        for h in chosen:
            automation(variables, "POST",
                       f"/com/vmware/cis/tagging/tag-association/id:{tag}?~action=attach",
                       {"object_id": {"id": h._moId, "type": "HostSystem"}})
        reconfigure_drs(si, compute, groups=[
            vim.cluster.HostGroup(name="rack-hosts", host=chosen),
            vim.cluster.VmGroup(name="rack-vms"),
            vim.cluster.VmGroup(name="loose-vms")],
            rules=[vim.cluster.VmHostRuleInfo(name="rack", enabled=True, mandatory=True,
                                              vmGroupName="rack-vms",
                                              affineHostGroupName="rack-hosts")])

        def domain(name, vm_group):
            return {"apiVersion": f"{GROUP}/v1beta2", "kind": "VSphereFailureDomain",
                    "metadata": {"name": name},
                    "spec": {"region": {"name": compute.name, "type": "ComputeCluster",
                                        "tagCategory": "k8s-zone"},
                             "zone": {"name": f"{ns}-rack", "type": "HostGroup",
                                      "tagCategory": "k8s-zone"},
                             "topology": {"datacenter": dc.name, "computeCluster": compute.name,
                                          "hosts": {"vmGroupName": vm_group,
                                                    "hostGroupName": "rack-hosts"}}}}

        def zone(name, label):
            return {"apiVersion": f"{GROUP}/v1beta2", "kind": "VSphereDeploymentZone",
                    "metadata": {"name": name, "labels": {"test": label}},
                    "spec": {"server": variables["VSPHERE_SERVER"], "failureDomain": name,
                             "controlPlane": True}}
        good, unruled = f"{ns}-rack", f"{ns}-loose"
        for obj in (domain(good, "rack-vms"), zone(good, ns),
                    domain(unruled, "loose-vms"), zone(unruled, f"{ns}-bad")):
            plane.kubectl("apply", "-f", "-", input=json.dumps(obj))

        def zone_status(name):
            z = get(plane, ns, f"vspheredeploymentzones.{GROUP}", name) or {}
            return z if "ready" in z.get("status", {}) else None
        ready = wait_for(lambda: zone_status(good), timeout=60, what="the zone's report")
        assert ready["status"]["ready"] is True, ready["status"]
        assert condition(ready, "FailureDomainValidated")["status"] == "True"
        bad = wait_for(lambda: zone_status(unruled), timeout=60, what="the unruled zone's report")
        validated = condition(bad, "FailureDomainValidated")
        assert (validated["status"], validated["reason"]) == ("False", "HostsMisconfigured"), validated

        rendered = generate(TEMPLATE, variables)
        selector = f"  failureDomainSelector:\n    matchLabels:\n      test: {ns}\n"
        manifest = rendered.replace("  identityRef:\n    kind: Secret\n",
                                    selector + "  identityRef:\n    kind: Secret\n", 1)
        assert selector in manifest
        plane.kubectl("apply", "--server-side", "-f", "-", input=manifest)
        wait_available(plane, ns, "hg1")
        (machine,) = items(plane, ns, "machines.cluster.x-k8s.io")
        assert machine["spec"]["failureDomain"] == good
        (made,) = vms_named(si, "hg1-").values()

        def group(name):
            return next(g for g in compute.configurationEx.group if g.name == name)
        assert [v._moId for v in group("rack-vms").vm] == [made._moId]
        assert made.runtime.host._moId == chosen[0]._moId
        rule = next(r for r in compute.configurationEx.rule if r.name == "rack")
        assert rule.inCompliance is True

        # The Cluster's deletion destroys the VM, which leaves its group.
        plane.kubectl("-n", ns, "delete", "clusters.cluster.x-k8s.io", "hg1", "--wait=true",
                      timeout=120)
        assert list(group("rack-vms").vm) == []
        for name in (good, unruled):
            plane.kubectl("delete", f"vspheredeploymentzones.{GROUP}", name, "--wait=false")
    finally:
        Disconnect(si)


def test_a_storage_policy_chooses_the_datastore_and_an_unknown_one_is_reported(plane, ns, tmp_path):
    """`storagePolicyName`, as CAPV's clone reads it through the vCenter's PBM service: an
    unknown policy is reported on the VSphereVM; named right, the VM is cloned onto a
    datastore that satisfies it."""
    v = Vcsim(tmp_path)
    try:
        machine = lambda policy: vsphere_machine("p", "p1", {"storagePolicyName": policy})
        apply_all(plane, ns, vcsim_cluster(plane, ns, v, "p") + [
            bootstrapped_machine(plane, ns, "p", "p1"), machine("Gold")])
        refused = wait_for(lambda: (lambda c: c if c.get("reason") == "NotProvisioned" else None)(
            provisioned_condition(plane, ns, "p1")), timeout=60, what="the unknown policy reported")
        assert 'no pbm profile found with name: "Gold"' in refused["message"], refused
        # Named as the vCenter names it: cloned onto a datastore of the pool's cluster.
        apply_all(plane, ns, [machine("vSAN Default Storage Policy")])
        wait_for(lambda: (get(plane, ns, f"vspherevms.{GROUP}", "p1") or {}).get(
            "status", {}).get("ready") is True, timeout=90, what="the VM ready under the policy")
        si = v.connect()
        try:
            made = vms_named(si, "p1")["p1"]
            pool_datastores = {d.name for d in made.resourcePool.owner.datastore}
            assert made.datastore[0].name in pool_datastores
        finally:
            Disconnect(si)
        plane.kubectl("-n", ns, "delete", "machines.cluster.x-k8s.io", "p1", "--wait=true",
                      timeout=60)
    finally:
        v.stop()


def test_the_node_ipam_flavor_takes_machine_addresses_from_a_pool(plane, ns, tmp_path):
    """CAPV's node-ipam flavor: each VSphereVM claims an address from an InClusterIPPool
    (Cluster API's IPAM contract, fulfilled by the embedded in-cluster IPAM provider); the
    address, its prefix and the pool's gateway go into the VM's cloud-init metadata, the
    guest comes up with it, and deleting the Cluster gives the addresses back."""
    variables = infrasim_env(plane, ns, "vcsim1", "ip1", tmp_path, workers=1)
    ipam = "ipam.cluster.x-k8s.io"
    plane.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": f"{ipam}/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": "ip1-nodes", "namespace": ns},
        "spec": {"addresses": ["10.20.0.10-10.20.0.19"], "prefix": 24, "gateway": "10.20.0.1"}}))
    pool = wait_for(lambda: (lambda p: p if p.get("status", {}).get("ipAddresses") else None)(
        get(plane, ns, f"inclusterippools.{ipam}", "ip1-nodes")), timeout=30, what="pool counted")
    assert pool["status"]["ipAddresses"] == {"total": 10, "used": 0, "free": 10, "outOfRange": 0}
    # The variables CAPV's node-ipam flavor reads, as a user exports them.
    variables.update(NODE_IPAM_POOL_API_GROUP=ipam, NODE_IPAM_POOL_KIND="InClusterIPPool",
                     NODE_IPAM_POOL_NAME="ip1-nodes", NAMESERVER="10.20.0.2")
    template = DEPLOY / "cluster-template-node-ipam.yaml"
    plane.kubectl("apply", "--server-side", "-f", "-", input=generate(template, variables))
    wait_available(plane, ns, "ip1")

    vsphere_vms = {v["metadata"]["name"]: v for v in items(plane, ns, f"vspherevms.{GROUP}")}
    assert len(vsphere_vms) == 2
    given = {}
    for name, v in vsphere_vms.items():
        # One claim per device and pool, named as CAPV names it, owned by the VSphereVM.
        claim = get(plane, ns, f"ipaddressclaims.{ipam}", f"{name}-0-0")
        assert claim["metadata"]["ownerReferences"][0]["name"] == name
        assert "vspherevm.infrastructure.cluster.x-k8s.io/ip-claim-protection" in \
            claim["metadata"]["finalizers"]
        assert claim["spec"]["poolRef"] == {"apiGroup": ipam, "kind": "InClusterIPPool",
                                            "name": "ip1-nodes"}
        address = get(plane, ns, f"ipaddresses.{ipam}", claim["status"]["addressRef"]["name"])
        assert address["spec"]["prefix"] == 24 and address["spec"]["gateway"] == "10.20.0.1"
        assert address["spec"]["claimRef"] == {"name": f"{name}-0-0"}
        given[name] = address["spec"]["address"]
        assert v["status"]["addresses"] == [given[name]]
        assert condition(v, "IPAddressClaimsFulfilled")["status"] == "True"
    # Cluster API's webhook: an address must come from its claim's pool.
    forged = plane.kubectl("apply", "-f", "-", check=False, input=json.dumps({
        "apiVersion": f"{ipam}/v1beta2", "kind": "IPAddress",
        "metadata": {"name": "forged", "namespace": ns},
        "spec": {"claimRef": {"name": f"{next(iter(given))}-0-0"}, "address": "10.20.0.99",
                 "prefix": 24, "poolRef": {"apiGroup": ipam, "kind": "InClusterIPPool",
                                           "name": "elsewhere"}}}))
    assert forged.returncode != 0 and "the referenced pool is different" in forged.stderr, \
        forged.stderr
    # The pool's lowest free addresses (its gateway and the subnet's ends never).
    assert sorted(given.values()) == ["10.20.0.10", "10.20.0.11"]
    pool = wait_for(lambda: (lambda p: p if p["status"]["ipAddresses"]["used"] == 2 else None)(
        get(plane, ns, f"inclusterippools.{ipam}", "ip1-nodes")), timeout=30, what="2 used")
    assert pool["status"]["ipAddresses"]["free"] == 8
    # v1beta1 readers see the same claim, its conditions where v1beta1 keeps them.
    old = get(plane, ns, f"ipaddressclaims.v1beta1.{ipam}", next(iter(given)) + "-0-0")
    assert old["apiVersion"] == f"{ipam}/v1beta1" and old["status"]["addressRef"]["name"]

    si = connect(variables)
    try:
        vms = vms_named(si, "ip1-")
        assert set(vms) == set(vsphere_vms)
        for name, vm in vms.items():
            # The guest configured the metadata's static address, as cloud-init does.
            assert vm.guest.ipAddress == given[name]
            metadata = base64.b64decode(extra_config(vm)["guestinfo.metadata"]).decode()
            assert f'- "{given[name]}/24"' in metadata and 'gateway4: "10.20.0.1"' in metadata
            assert "dhcp4: false" in metadata and '- "10.20.0.2"' in metadata, metadata
        # The provider's webhook: a pool with addresses out is not deleted, nor narrowed
        # past them; a spec it cannot use is refused with the field at fault.
        pools = f"inclusterippools.{ipam}"
        refused = plane.kubectl("-n", ns, "delete", pools, "ip1-nodes", check=False)
        assert refused.returncode != 0 and "Pool has IPAddresses allocated" in refused.stderr
        narrowed = plane.kubectl("-n", ns, "patch", pools, "ip1-nodes", "--type=merge", "-p",
                                 '{"spec":{"addresses":["10.20.0.15-10.20.0.19"]}}', check=False)
        assert narrowed.returncode != 0, narrowed.stdout
        assert "pool addresses do not contain allocated addresses: [10.20.0.10-10.20.0.11]" \
            in narrowed.stderr
        bad = plane.kubectl("apply", "-f", "-", check=False, input=json.dumps({
            "apiVersion": f"{ipam}/v1alpha2", "kind": "InClusterIPPool",
            "metadata": {"name": "mixed", "namespace": ns},
            "spec": {"addresses": ["10.20.1.0/28", "10.20.2.1"], "prefix": 24}}))
        assert bad.returncode != 0 and "spec.addresses" in bad.stderr and \
            "belongs to a different subnet than others" in bad.stderr, bad.stderr
        plane.kubectl("-n", ns, "delete", "clusters.cluster.x-k8s.io", "ip1", "--wait=true",
                      timeout=120)
        assert vms_named(si, "ip1-") == {}
        wait_for(lambda: items(plane, ns, f"ipaddresses.{ipam}") == [] and
                 items(plane, ns, f"ipaddressclaims.{ipam}") == [], timeout=30,
                 what="addresses and claims gone")
        # With its addresses back, the pool goes.
        plane.kubectl("-n", ns, "delete", pools, "ip1-nodes", "--wait=true", timeout=30)
    finally:
        Disconnect(si)


def utc_now():
    """The time as Kubernetes writes it (seconds, UTC), which compares as text."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_vm_under_a_boot_fault_joins_its_cluster_only_after_the_delay(plane, ns, tmp_path):
    """A `MachineBootsLate` Fault on a CAPV cluster: the VM a scale-up clones powers on and
    gets its address, but joins the workload cluster (its Machine's nodeRef) only after the
    time the fault wrote on its VSphereVM."""
    variables = infrasim_env(plane, ns, "vcsim-late", "late", tmp_path, workers=1)
    plane.kubectl("apply", "--server-side", "-f", "-", input=generate(TEMPLATE, variables))
    wait_available(plane, ns, "late")
    fault = {"apiVersion": "sim.infrasim.dev/v1alpha1", "kind": "Fault",
             "metadata": {"name": "late-boot", "namespace": ns},
             "spec": {"clusterName": "late", "type": "MachineBootsLate", "params": {"delay": "15s"}}}
    plane.kubectl("apply", "-f", "-", input=json.dumps(fault))
    wait_for(lambda: (get(plane, ns, "fault", "late-boot").get("status") or {}).get("clusters") == ["late"],
             timeout=30, what="the fault in force")
    before = {v["metadata"]["name"] for v in items(plane, ns, f"vspherevms.{GROUP}")}
    (md,) = items(plane, ns, "machinedeployments.cluster.x-k8s.io")
    plane.kubectl("-n", ns, "scale", "machinedeployment", md["metadata"]["name"], "--replicas=2")

    def held():
        fresh = [v for v in items(plane, ns, f"vspherevms.{GROUP}") if v["metadata"]["name"] not in before]
        boot = fresh and fresh[0]["metadata"].get("annotations", {}).get("sim.infrasim.dev/boot")
        return (fresh[0], boot) if boot and (fresh[0].get("status") or {}).get("ready") else None
    vm, boots_at = wait_for(held, timeout=60, interval=0.3, what="the new VM up, its boot put off")
    machine = get(plane, ns, "machines.cluster.x-k8s.io", vm["metadata"]["name"])
    now = utc_now()
    if now < boots_at:
        assert not (machine.get("status") or {}).get("nodeRef"), "joined before its boot time"
    joined = wait_for(lambda: (get(plane, ns, "machines.cluster.x-k8s.io", vm["metadata"]["name"]).get("status")
                               or {}).get("nodeRef"), timeout=60, interval=0.3, what="the late VM joined")
    assert joined["name"] == vm["metadata"]["name"]
    now = utc_now()
    assert now >= boots_at, (now, boots_at)
    plane.kubectl("-n", ns, "delete", "fault", "late-boot", "--wait=true", "--timeout=30s")
