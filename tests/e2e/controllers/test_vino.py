"""ViNO in the embedded plane, driven with kubectl and pyvmomi: upstream's sample Vino (one
master and four workers per Node) over two Nodes gives, in vino-system, BareMetalHosts named
and labelled as upstream names them, their BMC and network-data Secrets and IPPool records;
each host is a VM in the hosts' vCenter with the MAC ViNO gave it, powered as the host's
`spec.online` says; SIP claims those hosts and balances over their addresses; deletion
takes the VMs and the Nodes' annotations away."""

import base64
import json
import time

import pytest
import sushy
import yaml
from pyVmomi import vim

from conftest import connect, get, ready, unique, wait_for

RUNTIME = "vino-system"


def vino_yaml(name, ns, selector):
    """Upstream's vino_cr_4_workers_1_cp.yaml, with its name, its template's namespace and
    its node selector made this test's own."""
    return f"""apiVersion: airship.airshipit.org/v1
kind: Vino
metadata: {{name: {name}, namespace: {ns}, labels: {{}}}}
spec:
  nodeLabelKeysToCopy: ["airshipit.org/server", "airshipit.org/rack"]
  nodeSelector:
    matchLabels: {{vino-test: {selector}}}
  configuration: {{cpuExclude: 0-1}}
  networks:
  - name: management
    libvirtTemplate: management
    subnet: 192.168.2.0/20
    dhcpAllocationStart: 192.168.4.0
    dhcpAllocationStop: 192.168.7.255
    instanceSubnetBitStep: 6
    type: bridge
    staticAllocationStart: 192.168.2.10
    staticAllocationStop: 192.168.2.24
    routes:
    - {{network: 10.0.0.0, netmask: 255.255.255.0, gateway: $vinobridge}}
    dns_servers: ["135.188.34.124"]
    macPrefix: "52:54:00:06:00:00"
    physicalInterface: enp3s7
    bridgeName: vm-infra
  nodes:
  - name: master
    count: 1
    bmhLabels: {{airshipit.org/k8s-role: master}}
    networkDataTemplate: {{name: test-template, namespace: {ns}}}
    bootInterfaceName: management
    networkInterfaces:
    - {{name: management, type: network, network: management, mtu: 1500}}
    enableVNC: true
  - name: worker
    count: 4
    bmhLabels: {{airshipit.org/k8s-role: worker}}
    networkDataTemplate: {{name: test-template, namespace: {ns}}}
    bootInterfaceName: management
    networkInterfaces:
    - {{name: management, type: network, network: management, mtu: 1500}}
  bmcCredentials: {{username: admin, password: passw0rd}}
"""


def make_nodes(plane, selector, names):
    for i, node in enumerate(names):
        plane.kubectl("apply", "-f", "-", input=f"""apiVersion: v1
kind: Node
metadata:
  name: {node}
  labels: {{vino-test: {selector}, airshipit.org/server: s{i + 1}, airshipit.org/rack: r1}}
""")
        status = {"status": {"addresses": [{"type": "InternalIP", "address": f"10.23.0.{i + 5}"}]}}
        plane.kubectl("patch", "node", node, "--subresource=status", "--type=merge",
                      "-p", json.dumps(status))


def vcenter(plane):
    secret = get(plane, RUNTIME, "secret", "vino-vcenter")["data"]
    field = {k: base64.b64decode(v).decode() for k, v in secret.items()}
    return connect({"host": field["server"], "username": field["username"],
                    "password": field["password"]})


def vm_named(si, name):
    view = si.content.viewManager.CreateContainerView(si.content.rootFolder, [vim.VirtualMachine], True)
    return next((vm for vm in view.view if vm.name == name), None)


def secret_text(plane, name, key):
    return base64.b64decode(get(plane, RUNTIME, "secret", name)["data"][key]).decode()


def test_vino_makes_vm_backed_hosts_that_sip_can_claim(plane, ns):
    selector, name = unique("sel"), "vino-test-cr"
    nodes = [f"{selector}-node1", f"{selector}-node2"]
    make_nodes(plane, selector, nodes)
    plane.kubectl("-n", ns, "create", "secret", "generic", "test-template",
                  "--from-literal=template={{ .BMHName }}")
    plane.kubectl("apply", "-f", "-", input=vino_yaml(name, ns, selector))
    try:
        vino = wait_for(lambda: (lambda v: v if (ready(v) or {}).get("status") == "True" else None)(
            get(plane, ns, "vino", name)), timeout=60, what="Vino Ready")
    except AssertionError:
        print("Vino:", get(plane, ns, "vino", name), "\nlog:", plane.log_tail(60))
        raise
    assert ready(vino)["reason"] == "ReconciliationSucceeded"

    # Upstream's DaemonSet, as an object (this plane runs no workload controllers to make
    # its pods): its pods would select the Vino's Nodes, with the BMC credentials.
    ds = get(plane, RUNTIME, "daemonset", f"{ns}-{name}")
    assert ds["spec"]["template"]["metadata"]["labels"]["vino.airshipit.org/cr-name"] == name
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"vino-test": selector}
    env = {e["name"]: e["value"] for e in ds["spec"]["template"]["spec"]["containers"][1]["env"]}
    assert env["BASIC_AUTH_USERNAME"] == "admin"
    assert "vino.airshipit.org" in vino["metadata"]["finalizers"]

    # Upstream's names, labels, BMC addresses and Secrets.
    prefix = f"{ns}-{name}-"
    hosts = {h["metadata"]["name"]: h for h in get(plane, RUNTIME, "bmh")["items"]
             if h["metadata"]["name"].startswith(prefix)}
    expected = {f"{prefix}{n}-{kind}" for n in nodes
                for kind in ["master-0", "worker-0", "worker-1", "worker-2", "worker-3"]}
    assert set(hosts) == expected
    master = hosts[f"{prefix}{nodes[0]}-master-0"]
    assert master["metadata"]["labels"] == {"airshipit.org/server": "s1", "airshipit.org/rack": "r1",
                                            "airshipit.org/k8s-role": "master",
                                            "vino.airshipit.org/flavor": "master"}
    spec = master["spec"]
    server = base64.b64decode(get(plane, RUNTIME, "secret", "vino-vcenter")["data"]["server"]).decode()
    assert spec["bmc"]["address"] == (
        f"redfish+https://{server}/redfish/v1/Systems/{master['metadata']['name']}"), \
        "the system of the host's VM on its vCenter's Redfish service"
    assert spec["bmc"]["disableCertificateVerification"] is True
    assert spec["rootDeviceHints"] == {"deviceName": "/dev/vda"}
    assert spec["bootMACAddress"] == "52:54:00:06:00:01"
    assert secret_text(plane, spec["bmc"]["credentialsName"], "username") == "admin"
    assert secret_text(plane, spec["bmc"]["credentialsName"], "password") == "passw0rd"
    network = yaml.safe_load(secret_text(plane, spec["networkData"]["name"], "networkData"))
    assert network["networks"][0]["id"] == "management"
    assert network["networks"][0]["ip_address"] == "192.168.2.11"
    assert network["networks"][0]["routes"][0]["gateway"] == "192.168.2.10", "$vinobridge"
    assert network["links"][0]["ethernet_mac_address"] == "52:54:00:06:00:01"
    pool = get(plane, RUNTIME, "ippool", "ippool-192-168-2-0-20")["spec"]
    assert {"ip": "192.168.2.10", "mac": "52:54:00:06:00:00", "allocatedTo": nodes[0]} in pool["allocatedIPs"]
    assert len(pool["allocatedIPs"]) == 12
    assert pool["allocatedRanges"][1] == {"allocatedTo": nodes[1], "start": "192.168.4.64",
                                          "stop": "192.168.4.127"}
    node = json.loads(plane.kubectl("get", "node", nodes[1], "-o", "json").stdout)
    values = yaml.safe_load(node["metadata"]["annotations"]["airshipit.org/vino.network-values"])
    assert values["nodeCount"] == 2 and len(values["domains"]) == 5
    assert values["networks"][0]["bridgeIP"] == "192.168.2.16"

    # Each host is a VM with its MAC, registered and inspected through its BMC by the metal3
    # stand-in, and off until its host is put online.
    si = vcenter(plane)
    vm = vm_named(si, master["metadata"]["name"])
    wait_for(lambda: (get(plane, RUNTIME, "bmh", master["metadata"]["name"]).get("status") or {})
             .get("provisioning", {}).get("state") == "available", timeout=30, what="master available")
    inspected = get(plane, RUNTIME, "bmh", master["metadata"]["name"])["status"]["hardware"]
    assert inspected["ramMebibytes"] == 4096 and inspected["nics"][0]["mac"] == "52:54:00:06:00:01"
    assert vm is not None and vm.runtime.powerState == "poweredOff"
    macs = [d.macAddress for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualEthernetCard)]
    assert macs == ["52:54:00:06:00:01"]
    assert vm.config.hardware.memoryMB == 4096

    # The host's BMC answers sushy (what Ironic uses) with the host's own credentials.
    base, system_path = spec["bmc"]["address"].removeprefix("redfish+").split("/redfish/v1", 1)
    bmc = sushy.Sushy(base, verify=False,
                      username=secret_text(plane, spec["bmc"]["credentialsName"], "username"),
                      password=secret_text(plane, spec["bmc"]["credentialsName"], "password"))
    system = bmc.get_system("/redfish/v1" + system_path)
    assert system.name == master["metadata"]["name"] and system.uuid == vm.config.uuid
    assert system.power_state == sushy.POWER_STATE_OFF
    assert {m.lower() for m in system.ethernet_interfaces.summary} == {"52:54:00:06:00:01"}

    # Reconciling again changes nothing.
    def versions():
        objs = get(plane, RUNTIME, "bmh,secret,ippool")["items"]
        return {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in objs
                if o["metadata"]["name"].startswith((prefix, "ippool-192-168-2-0-20"))}
    before = versions()
    plane.kubectl("-n", ns, "annotate", "vino", name, "poke=1")
    time.sleep(2)
    assert versions() == before

    # SIP claims two masters (one per server) and balances over their ViNO addresses.
    masters = sorted(h for h in hosts if h.endswith("master-0"))
    for h in masters:
        plane.kubectl("-n", RUNTIME, "patch", "bmh", h, "--type=merge", "-p", '{"spec":{"online":true}}')
    wait_for(lambda: vm.runtime.powerState == "poweredOn", timeout=30, what="VM powered on")
    system.refresh()
    assert system.power_state == sushy.POWER_STATE_ON
    wait_for(lambda: (get(plane, RUNTIME, "bmh", masters[0]).get("status") or {}).get("poweredOn"),
             timeout=30, what="host reports poweredOn")
    tenant = unique("tenant")
    plane.kubectl("-n", RUNTIME, "apply", "-f", "-", input=f"""apiVersion: airship.airshipit.org/v1
kind: SIPCluster
metadata: {{name: {tenant}}}
spec:
  nodes:
    ControlPlane:
      labelSelector: {{matchLabels: {{vino.airshipit.org/flavor: master, airshipit.org/rack: r1}}}}
      topologyKey: airshipit.org/server
      count: {{active: 2, standby: 0}}
  services:
    loadBalancerControlPlane:
      - image: haproxy:2.3.2
        nodePort: 30011
        nodeInterfaceId: management
""")
    wait_for(lambda: (ready(get(plane, RUNTIME, "sipcluster", tenant)) or {}).get("status") == "True",
             timeout=30, what="SIPCluster Ready")
    cfg = base64.b64decode(get(plane, RUNTIME, "secret", f"loadbalancer-controlplane-{tenant}")
                           ["data"]["haproxy.cfg"]).decode()
    assert "192.168.2.11:6443" in cfg and "192.168.2.17:6443" in cfg, cfg
    plane.kubectl("-n", RUNTIME, "delete", "sipcluster", tenant, "--timeout=30s")

    # Deleting the Vino takes its VMs (their BMCs' systems), hosts, their Secrets, their
    # addresses and the Nodes' annotations (upstream leaves hosts and addresses behind).
    plane.kubectl("-n", ns, "delete", "vino", name, "--timeout=60s")
    assert vm_named(si, master["metadata"]["name"]) is None
    for n in nodes:
        node = json.loads(plane.kubectl("get", "node", n, "-o", "json").stdout)
        assert "airshipit.org/vino.network-values" not in node["metadata"].get("annotations", {})
    assert get(plane, RUNTIME, "bmh", master["metadata"]["name"]) is None
    assert get(plane, RUNTIME, "daemonset", f"{ns}-{name}") is None
    assert get(plane, RUNTIME, "secret", spec["bmc"]["credentialsName"]) is None
    assert get(plane, RUNTIME, "secret", spec["networkData"]["name"]) is None
    with pytest.raises(sushy.exceptions.ResourceNotFoundError):
        bmc.get_system("/redfish/v1" + system_path)
    pool = get(plane, RUNTIME, "ippool", "ippool-192-168-2-0-20")["spec"]
    assert not any(a["allocatedTo"].startswith(prefix) for a in pool["allocatedIPs"]), pool
    assert {"ip": "192.168.2.10", "mac": "52:54:00:06:00:00", "allocatedTo": nodes[0]} in pool["allocatedIPs"], \
        "the Node's bridge address is the Node's"


def test_a_vino_that_cannot_be_built_says_why(plane, ns):
    selector = unique("none")
    plane.kubectl("apply", "-f", "-", input=vino_yaml("lonely", ns, selector))
    cond = wait_for(lambda: ready(get(plane, ns, "vino", "lonely")) if (ready(get(plane, ns, "vino", "lonely"))
                    or {}).get("reason") == "ReconciliationFailed" else None, timeout=30, what="failure")
    assert cond["status"] == "False" and "no Node matches" in cond["message"], cond
    # A Node arrives, but the network template the hosts need is missing: said, nothing made.
    make_nodes(plane, selector, [f"{selector}-n"])
    wait_for(lambda: "test-template" in (ready(get(plane, ns, "vino", "lonely")) or {}).get("message", ""),
             timeout=30, what="missing template reported")
    assert not [h for h in get(plane, RUNTIME, "bmh")["items"]
                if h["metadata"]["name"].startswith(f"{ns}-lonely-")]
    plane.kubectl("-n", ns, "delete", "vino", "lonely", "--timeout=30s")
