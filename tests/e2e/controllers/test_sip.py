"""The SIPCluster controller in the embedded plane, driven with kubectl: BareMetalHosts over
three racks (with metal3's networkData Secrets), a SIPCluster in SIP's own shape claiming
control-plane hosts one per rack and workers, its haproxy load balancers listing the hosts'
addresses, an impossible request that claims nothing, a failed host replaced, and deletion
releasing everything."""

import base64
import json

import pytest

from conftest import (PASSWORD, USER, Plane, Vcsim, deployed_controller, get, metric_samples, never_forbidden,
                      ready, redfish_systems, scraped_by_monitoring, wait_for)

RACKS = {0: "r1", 1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r2", 6: "r3", 7: "r3", 8: "r3", 9: "r3"}
# Two control-plane hosts in each rack; the other four are workers.
CONTROL_PLANE = {0, 1, 3, 4, 6, 7}


def ssh_key():
    """An ed25519 public key line (its blob names its own type, as OpenSSH's do)."""
    kind = b"ssh-ed25519"
    blob = len(kind).to_bytes(4, "big") + kind + (32).to_bytes(4, "big") + bytes(range(32))
    return f"ssh-ed25519 {base64.b64encode(blob).decode()} operator@example"


AUTHORIZED_KEY = ssh_key()


def ip(i):
    return f"10.20.0.{10 + i}"


@pytest.fixture(scope="module")
def bmcs(tmp_path_factory):
    """Twelve machines with BMCs: the VMs of an `infrasim vcsim`, each a system of its
    Redfish service. Host i's BMC is system i."""
    vcsim = Vcsim(tmp_path_factory.mktemp("bmcs"), "--vms", "6")
    systems = redfish_systems(vcsim.port)
    assert len(systems) == 12
    yield f"127.0.0.1:{vcsim.port}", systems
    vcsim.stop()


def hosts_yaml(ns, bmcs, only=None):
    """Ten hosts over three racks (RACKS), six of the control-plane flavour (or host `only`,
    which may be an eleventh, a worker), each with its machine's BMC."""
    server, systems = bmcs
    docs = []
    for i, rack in RACKS.items() if only is None else [(only, RACKS.get(only, "r3"))]:
        flavor = "control-plane" if i in CONTROL_PLANE else "worker"
        network = json.dumps({"links": [{"id": "bond0", "type": "bond"}], "networks": [
            {"id": "pxe-ipv4", "link": "bond0", "type": "ipv4", "ip_address": f"172.30.0.{i}"},
            {"id": "oam-ipv4", "link": "bond0", "type": "ipv4", "ip_address": ip(i)}]})
        docs.append(f"""apiVersion: v1
kind: Secret
metadata: {{name: node{i}-networkdata, namespace: {ns}}}
data: {{networkData: {base64.b64encode(network.encode()).decode()}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: node{i}-bmc, namespace: {ns}}}
stringData: {{username: "{USER}", password: "{PASSWORD}"}}
---
apiVersion: metal3.io/v1alpha1
kind: BareMetalHost
metadata:
  name: node{i}
  namespace: {ns}
  labels: {{vino.airshipit.org/flavor: {flavor}, sip.airshipit.org/rack: {rack}, sip.airshipit.org/server: node{i}}}
spec:
  online: true
  bootMACAddress: 52:54:00:00:00:{i:02x}
  bmc: {{address: "redfish+https://{server}{systems[i]}", credentialsName: node{i}-bmc,
         disableCertificateVerification: true}}
  networkData: {{name: node{i}-networkdata, namespace: {ns}}}
""")
    return "---\n".join(docs)


def sip_yaml(name, cp_active=3, cp_standby=0, workers=3, worker_standby=1):
    return f"""apiVersion: airship.airshipit.org/v1
kind: SIPCluster
metadata: {{name: {name}}}
spec:
  nodes:
    ControlPlane:
      labelSelector: {{matchLabels: {{vino.airshipit.org/flavor: control-plane}}}}
      topologyKey: sip.airshipit.org/rack
      count: {{active: {cp_active}, standby: {cp_standby}}}
    Worker:
      labelSelector: {{matchLabels: {{vino.airshipit.org/flavor: worker}}}}
      topologyKey: sip.airshipit.org/server
      count: {{active: {workers}, standby: {worker_standby}}}
  services:
    loadBalancerControlPlane:
      - image: haproxy:2.3.2
        nodePort: 30001
        nodeInterfaceId: oam-ipv4
    loadBalancerWorker:
      - image: haproxy:2.3.2
        nodePortRange: {{start: 30002, end: 30003}}
        nodeInterfaceId: oam-ipv4
    jumpHost:
      - image: quay.io/airshipit/jump-host:latest
        nodePort: 30000
        nodeInterfaceId: oam-ipv4
        sshAuthorizedKeys: ["{AUTHORIZED_KEY}"]
        nodeSSHPrivateKeys: ssh-keys
    auth:
      - image: ghcr.io/dexidp/dex:v2.41.1
        nodePort: 30005
        nodeInterfaceId: oam-ipv4
        caSecret: dex-tls
"""


def claims(plane, ns):
    """Host name → (cluster, role) for every claimed host."""
    out = {}
    for h in get(plane, ns, "bmh")["items"]:
        labels = h["metadata"].get("labels", {})
        if "sip.airshipit.org/cluster-name" in labels:
            out[h["metadata"]["name"]] = (labels["sip.airshipit.org/cluster-name"],
                                          labels["sip.airshipit.org/node-type"])
    return out


def haproxy(plane, ns, name):
    secret = get(plane, ns, "secret", name)
    return base64.b64decode(secret["data"]["haproxy.cfg"]).decode() if secret else ""


def test_hosts_are_claimed_spread_served_replaced_and_released(plane, ns, bmcs):
    plane.kubectl("apply", "-f", "-", input=hosts_yaml(ns, bmcs))
    # No metal3 here: the stand-in registers and inspects each host through its BMC, as
    # metal3's operator would, and powers it on as `online` asks.
    wait_for(lambda: "available" in plane.kubectl("-n", ns, "get", "bmh", "node0").stdout
             and get(plane, ns, "bmh", "node0")["status"].get("poweredOn"),
             timeout=30, what="node0 available and on")
    status = get(plane, ns, "bmh", "node0")["status"]
    assert (status["operationalStatus"], status["poweredOn"]) == ("OK", True)
    plane.kubectl("-n", ns, "apply", "-f", "-", input=sip_yaml("tenant-a"))
    # The jump host's private keys are missing: said, and nothing claimed until they come.
    cond = wait_for(lambda: ready(get(plane, ns, "sipcluster", "tenant-a")), timeout=30,
                    what="tenant-a condition")
    assert (cond["status"], cond["reason"]) == ("False", "InfraServiceFailure"), cond
    assert "ssh-keys" in cond["message"] and claims(plane, ns) == {}
    plane.kubectl("-n", ns, "create", "secret", "generic", "ssh-keys", "--from-literal=id_ed25519=KEY")
    plane.kubectl("-n", ns, "create", "secret", "generic", "dex-tls", "--from-literal=ca.crt=CA-PEM",
                  "--from-literal=tls.crt=CERT-PEM", "--from-literal=tls.key=KEY-PEM")
    plane.kubectl("-n", ns, "annotate", "sipcluster", "tenant-a", "keys=given")
    sip = wait_for(lambda: (lambda s: s if (ready(s) or {}).get("status") == "True" else None)(
        get(plane, ns, "sipcluster", "tenant-a")), timeout=30, what="tenant-a Ready")
    assert ready(sip)["reason"] == "ReconciliationSucceeded"
    assert ready(sip)["observedGeneration"] == sip["metadata"]["generation"]
    held = claims(plane, ns)
    cps = sorted(h for h, (_, role) in held.items() if role == "ControlPlane")
    workers = sorted(h for h, (_, role) in held.items() if role == "Worker")
    assert len(cps) == 3 and len(workers) == 4
    assert sorted(RACKS[int(h[4:])] for h in cps) == ["r1", "r2", "r3"], "one per rack"
    h = get(plane, ns, "bmh", cps[0])["metadata"]["labels"]
    assert h["sip.airshipit.org/cluster-namespace"] == ns
    assert h["sip.airshipit.org/scheduled"] == "true" and h["sip.airshipit.org/workload-cluster"] == "tenant-a"
    by_role = {role: [c["name"] for c in chosen] for role, chosen in sip["status"]["hosts"].items()}
    assert sorted(by_role["ControlPlane"]) == cps

    cfg = haproxy(plane, ns, "loadbalancer-controlplane-tenant-a")
    for host in cps:
        assert f"server {host} {ip(int(host[4:]))}:6443" in cfg, cfg
    assert "loadbalancer-worker-tenant-a" in plane.kubectl("-n", ns, "get", "deploy").stdout
    svc = get(plane, ns, "service", "loadbalancer-controlplane-tenant-a")
    assert svc["spec"]["type"] == "NodePort" and svc["spec"]["ports"][0]["nodePort"] == 30001
    # The jump host reaches every held host's BMC with its credentials, with every key.
    jump = get(plane, ns, "secret", "jumphost-tenant-a")["data"]
    reach = {h["name"]: h["bmc"] for h in json.loads(base64.b64decode(jump["hosts"]))}
    assert sorted(reach) == sorted(cps + workers)
    assert reach[cps[0]] == {"ip": bmcs[0], "username": USER, "password": PASSWORD}
    assert "IdentityFile /etc/opt/sip/ssh-private-keys/id_ed25519" in base64.b64decode(jump["ssh_config"]).decode()
    keys = get(plane, ns, "configmap", "jumphost-tenant-a")["data"]["authorized-keys"]
    assert keys == AUTHORIZED_KEY
    assert get(plane, ns, "service", "jumphost-tenant-a")["spec"]["ports"][0]["nodePort"] == 30000
    # The OIDC provider answers on the first control-plane host, and the tenant's API servers
    # are told the same issuer, client and CA.
    first_cp = by_role["ControlPlane"][0]
    oidc = get(plane, ns, "configmap", "auth-tenant-a")["data"]
    assert oidc["oidc-issuer-url"] == f"https://{ip(int(first_cp[4:]))}:30005/dex"
    assert (oidc["oidc-client-id"], oidc["oidc-ca.crt"]) == ("tenant-a", "CA-PEM")
    dex = base64.b64decode(get(plane, ns, "secret", "auth-tenant-a")["data"]["config.yaml"]).decode()
    assert f"issuer: {oidc['oidc-issuer-url']}" in dex

    # Reconciling again (woken by a metadata change) changes nothing: no resourceVersion of
    # the hosts, the services or the SIPCluster's status moves.
    def versions():
        kinds = "bmh,sipcluster,secret,configmap,deployment,service"
        return {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                for o in get(plane, ns, kinds)["items"]}
    before = versions()
    poked = json.loads(plane.kubectl("-n", ns, "annotate", "sipcluster", "tenant-a", "poke=1",
                                     "-o", "json").stdout)
    import time
    time.sleep(2)
    after = versions()
    assert after.pop(("SIPCluster", "tenant-a")) == poked["metadata"]["resourceVersion"]
    before.pop(("SIPCluster", "tenant-a"))
    assert after == before

    # An impossible request (four control-plane hosts, one per rack, over three racks) says
    # why and claims nothing.
    plane.kubectl("-n", ns, "apply", "-f", "-", input=sip_yaml("tenant-b", cp_active=4, workers=0,
                                                                worker_standby=0))
    cond = wait_for(lambda: ready(get(plane, ns, "sipcluster", "tenant-b")), timeout=30, what="tenant-b condition")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
    assert "target of 4 ControlPlane nodes" in cond["message"]
    table = plane.kubectl("-n", ns, "get", "sipclusters").stdout
    assert "Unschedulable" in table and "ReconciliationSucceeded" in table, table
    events = plane.kubectl("-n", ns, "get", "events", "-o", "json").stdout
    reasons = {(e["involvedObject"]["name"], e["reason"]) for e in json.loads(events)["items"]}
    assert {("tenant-a", "HostsClaimed"), ("tenant-b", "Unschedulable")} <= reasons, reasons
    assert all(cluster == "tenant-a" for cluster, _ in claims(plane, ns).values())
    plane.kubectl("-n", ns, "delete", "sipcluster", "tenant-b", "--timeout=30s")

    # A failed control-plane host is replaced by a free host of its rack.
    failed = cps[0]
    plane.kubectl("-n", ns, "patch", "bmh", failed, "--type", "merge", "-p", '{"spec":{"online":false}}')
    wait_for(lambda: get(plane, ns, "bmh", failed)["status"]["poweredOn"] is False, timeout=30,
             what="the host powered off")
    def replaced():
        held = claims(plane, ns)
        now = sorted(h for h, (_, role) in held.items() if role == "ControlPlane")
        return now if failed not in now and len(now) == 3 else None
    now = wait_for(replaced, timeout=30, what="the failed host replaced")
    assert sorted(RACKS[int(h[4:])] for h in now) == ["r1", "r2", "r3"]
    cfg = haproxy(plane, ns, "loadbalancer-controlplane-tenant-a")
    assert f"server {failed} " not in cfg and all(f"server {h} " in cfg for h in now), cfg

    # A failed active worker: the standby takes its place at once; with no spare left the
    # role is short (Ready=False, the load balancer on the three left), until a new host comes.
    def worker_status():
        s = get(plane, ns, "sipcluster", "tenant-a")["status"]["hosts"]["Worker"]
        return [h["name"] for h in s if not h["standby"]], [h["name"] for h in s if h["standby"]]
    active, standby = worker_status()
    assert len(active) == 3 and len(standby) == 1
    plane.kubectl("-n", ns, "patch", "bmh", active[0], "--type", "merge", "-p", '{"spec":{"online":false}}')
    def promoted():
        now_active, now_standby = worker_status()
        return (now_active, now_standby) if standby[0] in now_active and active[0] not in now_active else None
    now_active, now_standby = wait_for(promoted, timeout=30, what="the standby promoted")
    assert now_standby == [] and len(now_active) == 3
    cond = ready(get(plane, ns, "sipcluster", "tenant-a"))
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable") and "Worker" in cond["message"]
    cfg = haproxy(plane, ns, "loadbalancer-worker-tenant-a")
    assert f"server {active[0]} " not in cfg and f"server {standby[0]} " in cfg, cfg
    plane.kubectl("apply", "-f", "-", input=hosts_yaml(ns, bmcs, only=10))
    wait_for(lambda: (ready(get(plane, ns, "sipcluster", "tenant-a")) or {}).get("status") == "True",
             timeout=30, what="the role filled again")
    assert worker_status()[1] == ["node10"], "the new host is the standby"

    # Deleting releases every host and removes the services.
    plane.kubectl("-n", ns, "delete", "sipcluster", "tenant-a", "--timeout=30s")
    assert claims(plane, ns) == {}
    assert get(plane, ns, "secret", "loadbalancer-controlplane-tenant-a") is None
    assert get(plane, ns, "service", "loadbalancer-worker-tenant-a") is None
    assert get(plane, ns, "deployment", "jumphost-tenant-a") is None
    assert get(plane, ns, "configmap", "auth-tenant-a") is None


def test_the_controller_needs_no_more_than_its_deployed_rbac(tmp_path, bmcs):
    """`infrasim manifests sip` (its CRDs, RBAC and the Deployment's arguments), run on its
    ServiceAccount's token alone, serves a SIPCluster from claim to release."""
    (tmp_path / "plane").mkdir()
    plane = Plane(tmp_path / "plane", "--sip", "false")
    controller = None
    try:
        controller, log, metrics_port = deployed_controller(plane, tmp_path, "sip")
        ns = "rbac-proof"
        plane.kubectl("create", "namespace", ns)
        plane.kubectl("apply", "-f", "-", input=hosts_yaml(ns, bmcs))
        plane.kubectl("-n", ns, "create", "secret", "generic", "ssh-keys", "--from-literal=id=KEY")
        plane.kubectl("-n", ns, "create", "secret", "generic", "dex-tls", "--from-literal=ca.crt=CA")
        plane.kubectl("-n", ns, "apply", "-f", "-", input=sip_yaml("tenant-a"))
        wait_for(lambda: (ready(get(plane, ns, "sipcluster", "tenant-a")) or {}).get("status") == "True",
                 timeout=30, what="tenant-a Ready")
        assert len(claims(plane, ns)) == 7
        assert get(plane, ns, "deployment", "jumphost-tenant-a") is not None
        plane.kubectl("-n", ns, "delete", "sipcluster", "tenant-a", "--timeout=30s")
        assert claims(plane, ns) == {}
        assert get(plane, ns, "deployment", "loadbalancer-controlplane-tenant-a") is None
        # Its metrics, as the manifest serves them, to a scraper the plane allows.
        status, text, anonymous = scraped_by_monitoring(plane, metrics_port)
        assert (status, anonymous) == (200, 401), text
        assert sum(metric_samples(text, "controller_runtime_reconcile_total", controller="sipcluster")) > 0
        never_forbidden(log)
    finally:
        if controller:
            controller.terminate()
            controller.wait(timeout=10)
        plane.stop()

