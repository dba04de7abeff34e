use super::*;

mod providers;

/// `v` without the conversion data a down-conversion records.
fn without_data(mut v: Value) -> Value {
    if let Some(a) = v["metadata"]
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(DATA_ANNOTATION);
        if a.is_empty() {
            v["metadata"].as_object_mut().unwrap().remove("annotations");
        }
    }
    v
}

fn versions() -> Versions {
    let mut v = Versions::default();
    for (group, kind, version) in [
        ("infrastructure.cluster.x-k8s.io", "DevCluster", "v1beta2"),
        (
            "controlplane.cluster.x-k8s.io",
            "KubeadmControlPlane",
            "v1beta2",
        ),
    ] {
        v.known
            .insert((group.into(), kind.into()), format!("{group}/{version}"));
    }
    v
}

fn v1beta1_cluster() -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": "team-a", "uid": "u1"},
        "spec": {
            "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}, "serviceDomain": "cluster.local"},
            "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                  "kind": "DevCluster", "name": "c1", "namespace": "team-a"},
            "controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
                                "kind": "KubeadmControlPlane", "name": "c1-cp"},
            "topology": {
                "class": "quick-start", "classNamespace": "classes", "version": "v1.33.0",
                "controlPlane": {"replicas": 3, "nodeDrainTimeout": "10m",
                                 "machineHealthCheck": {"enable": true, "maxUnhealthy": "40%",
                                     "unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "5m"}]}},
                "workers": {"machineDeployments": [{
                    "class": "default-worker", "name": "md-0", "replicas": 2,
                    "strategy": {"type": "RollingUpdate",
                                 "rollingUpdate": {"maxSurge": 1, "deletePolicy": "Oldest"},
                                 "remediation": {"maxInFlight": 2}},
                }]},
                "variables": [{"name": "region", "value": "eu", "definitionFrom": "x"}],
            },
        },
        "status": {
            "phase": "Provisioned", "infrastructureReady": true, "controlPlaneReady": false,
            "failureDomains": {"fd-b": {"controlPlane": true}, "fd-a": {"attributes": {"rack": "1"}}},
            "conditions": [{"type": "Ready", "status": "False", "severity": "Info",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "v1beta2": {"conditions": [{"type": "Available", "status": "True", "reason": "Available",
                                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                        "controlPlane": {"desiredReplicas": 3, "readyReplicas": 1}},
        },
    })
}

#[test]
fn a_v1beta1_cluster_reaches_the_hub_as_upstream_converts_it() {
    let hub = convert(v1beta1_cluster(), "cluster.x-k8s.io/v1beta2", &versions()).unwrap();
    assert_eq!(hub["apiVersion"], "cluster.x-k8s.io/v1beta2");
    let spec = &hub["spec"];
    assert_eq!(
        spec["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevCluster", "name": "c1"})
    );
    assert_eq!(
        spec["controlPlaneRef"]["apiGroup"],
        "controlplane.cluster.x-k8s.io"
    );
    let topology = &spec["topology"];
    assert_eq!(
        topology["classRef"],
        json!({"name": "quick-start", "namespace": "classes"})
    );
    assert!(topology.get("class").is_none());
    let cp = &topology["controlPlane"];
    assert_eq!(cp["deletion"]["nodeDrainTimeoutSeconds"], 600);
    assert_eq!(cp["healthCheck"]["enabled"], true);
    assert_eq!(
        cp["healthCheck"]["remediation"]["triggerIf"]["unhealthyLessThanOrEqualTo"],
        "40%"
    );
    assert_eq!(
        cp["healthCheck"]["checks"]["unhealthyNodeConditions"][0],
        json!({"type": "Ready", "status": "False", "timeoutSeconds": 300})
    );
    let md = &topology["workers"]["machineDeployments"][0];
    assert_eq!(
        md["rollout"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}})
    );
    assert_eq!(md["deletion"]["order"], "Oldest");
    assert_eq!(md["healthCheck"]["remediation"]["maxInFlight"], 2);
    assert!(topology["variables"][0].get("definitionFrom").is_none());

    let status = &hub["status"];
    assert_eq!(
        status["initialization"],
        json!({"infrastructureProvisioned": true})
    );
    assert!(status.get("infrastructureReady").is_none());
    assert_eq!(
        status["failureDomains"],
        json!([{"name": "fd-a", "controlPlane": false, "attributes": {"rack": "1"}},
               {"name": "fd-b", "controlPlane": true}])
    );
    assert_eq!(status["conditions"][0]["type"], "Available");
    assert_eq!(
        status["deprecated"]["v1beta1"]["conditions"][0]["severity"],
        "Info"
    );
    assert_eq!(status["controlPlane"]["desiredReplicas"], 3);
    assert!(status.get("v1beta2").is_none());
}

#[test]
fn the_hub_goes_back_to_the_v1beta1_it_came_from() {
    let original = v1beta1_cluster();
    let hub = convert(original.clone(), "cluster.x-k8s.io/v1beta2", &versions()).unwrap();
    let back = without_data(convert(hub, "cluster.x-k8s.io/v1beta1", &versions()).unwrap());
    // What v1beta2 cannot hold is gone, as upstream drops it; references gain the contract's
    // version and the object's namespace.
    let mut expected = original;
    expected["spec"]["infrastructureRef"]["apiVersion"] =
        json!("infrastructure.cluster.x-k8s.io/v1beta2");
    expected["spec"]["controlPlaneRef"] = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
        "kind": "KubeadmControlPlane", "name": "c1-cp", "namespace": "team-a"});
    expected["spec"]["topology"]["variables"][0]
        .as_object_mut()
        .unwrap()
        .remove("definitionFrom");
    expected["spec"]["topology"]["controlPlane"]["nodeDrainTimeout"] = json!("10m0s");
    expected["spec"]["topology"]["controlPlane"]["machineHealthCheck"]["unhealthyConditions"][0]
        ["timeout"] = json!("5m0s");
    assert_eq!(back, expected);
}

#[test]
fn a_stand_in_status_reads_as_v1beta1_with_both_flags() {
    let hub = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": "ns"},
        "spec": {"infrastructureRef": {"apiGroup": "", "kind": "", "name": ""},
                 "clusterNetwork": {"apiServerPort": 0, "services": {"cidrBlocks": []}}},
    });
    let v1 = convert(hub, "cluster.x-k8s.io/v1beta1", &versions()).unwrap();
    assert_eq!(v1["spec"], json!({}));
    assert_eq!(
        v1["status"],
        json!({"infrastructureReady": false, "controlPlaneReady": false})
    );
}

#[test]
fn an_unknown_referenced_kind_is_noted_for_resolution() {
    let hub = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": "ns"},
        "spec": {"infrastructureRef": {"apiGroup": "example.com", "kind": "Thing", "name": "t"}},
    });
    let v = versions();
    convert(hub, "cluster.x-k8s.io/v1beta1", &v).unwrap();
    let missing = v.missing.lock().unwrap().clone();
    assert_eq!(
        missing.into_iter().collect::<Vec<_>>(),
        [("example.com".to_string(), "Thing".to_string())]
    );
}

#[test]
fn other_groups_and_versions_are_refused() {
    let mut cluster = v1beta1_cluster();
    assert!(convert(cluster.clone(), "example.com/v1", &versions()).is_err());
    cluster["apiVersion"] = json!("cluster.x-k8s.io/v1alpha4");
    let e = convert(cluster, "cluster.x-k8s.io/v1beta2", &versions()).unwrap_err();
    assert!(e.contains("v1alpha4"), "{e}");
}

fn v1beta1_machine_deployment() -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
        "metadata": {"name": "md", "namespace": "team-a"},
        "spec": {
            "clusterName": "c1", "replicas": 3, "minReadySeconds": 10, "paused": true,
            "rolloutAfter": "2026-01-01T00:00:00Z",
            "selector": {"matchLabels": {"pool": "a"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1, "deletePolicy": "Newest"},
                         "remediation": {"maxInFlight": "50%"}},
            "machineNamingStrategy": {"template": "{{ .machineSet.name }}-{{ .random }}"},
            "template": {"metadata": {"labels": {"pool": "a"}}, "spec": {
                "clusterName": "c1", "version": "v1.33.0", "nodeDrainTimeout": "1m",
                "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
                                            "kind": "KubeadmConfigTemplate", "name": "t"}},
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                      "kind": "DevMachineTemplate", "name": "t"}}},
        },
        "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2,
                   "unavailableReplicas": 1, "phase": "Running",
                   "v1beta2": {"readyReplicas": 2, "upToDateReplicas": 3}},
    })
}

#[test]
fn a_v1beta1_machine_deployment_reaches_the_hub_and_comes_back() {
    let mut v = versions();
    for (g, k) in [
        ("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate"),
        ("infrastructure.cluster.x-k8s.io", "DevMachineTemplate"),
    ] {
        v.known.insert((g.into(), k.into()), format!("{g}/v1beta2"));
    }
    let hub = convert(v1beta1_machine_deployment(), "cluster.x-k8s.io/v1beta2", &v).unwrap();
    let spec = &hub["spec"];
    assert_eq!(
        spec["rollout"],
        json!({"after": "2026-01-01T00:00:00Z", "strategy": {"type": "RollingUpdate",
               "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}})
    );
    assert_eq!(spec["deletion"], json!({"order": "Newest"}));
    assert_eq!(spec["remediation"], json!({"maxInFlight": "50%"}));
    assert_eq!(
        spec["machineNaming"]["template"],
        "{{ .machineSet.name }}-{{ .random }}"
    );
    let machine = &spec["template"]["spec"];
    assert_eq!(machine["minReadySeconds"], 10);
    assert_eq!(machine["deletion"], json!({"nodeDrainTimeoutSeconds": 60}));
    assert_eq!(
        machine["bootstrap"]["configRef"],
        json!({"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "t"})
    );
    let status = &hub["status"];
    assert_eq!(status["readyReplicas"], 2);
    assert_eq!(status["upToDateReplicas"], 3);
    assert!(status.get("updatedReplicas").is_none());
    assert_eq!(
        status["deprecated"]["v1beta1"],
        json!({"readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 3, "unavailableReplicas": 1})
    );

    let back = without_data(convert(hub, "cluster.x-k8s.io/v1beta1", &v).unwrap());
    let mut expected = v1beta1_machine_deployment();
    let template = &mut expected["spec"]["template"]["spec"];
    template["nodeDrainTimeout"] = json!("1m0s");
    for r in ["infrastructureRef", "bootstrap"] {
        let reference = if r == "bootstrap" {
            &mut template[r]["configRef"]
        } else {
            &mut template[r]
        };
        let api_version = reference["apiVersion"]
            .as_str()
            .unwrap()
            .replace("v1beta1", "v1beta2");
        reference["apiVersion"] = json!(api_version);
        reference["namespace"] = json!("team-a");
    }
    assert_eq!(back, expected);
}

#[test]
fn a_stand_in_machine_reads_as_v1beta1() {
    let hub = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"clusterName": "c1", "providerID": "", "minReadySeconds": 0,
                 "bootstrap": {"dataSecretName": "m-bootstrap"},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                       "kind": "DevMachine", "name": "m"}},
        "status": {"phase": "Updating", "nodeRef": {"name": "node-1"},
                   "initialization": {"bootstrapDataSecretCreated": true},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    });
    let mut v = versions();
    v.known.insert(
        (
            "infrastructure.cluster.x-k8s.io".into(),
            "DevMachine".into(),
        ),
        "infrastructure.cluster.x-k8s.io/v1beta2".into(),
    );
    let old = convert(hub, "cluster.x-k8s.io/v1beta1", &v).unwrap();
    assert_eq!(
        old["spec"],
        json!({"clusterName": "c1", "bootstrap": {"dataSecretName": "m-bootstrap"},
               "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                     "kind": "DevMachine", "namespace": "ns", "name": "m"}})
    );
    assert_eq!(
        old["status"],
        json!({"phase": "Running", "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
               "bootstrapReady": true, "infrastructureReady": false,
               "v1beta2": {"conditions": [{"type": "Ready", "status": "True"}]}})
    );
}

#[test]
fn a_machine_health_check_groups_its_checks_and_back() {
    let v1 = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineHealthCheck",
        "metadata": {"name": "mhc", "namespace": "ns"},
        "spec": {"clusterName": "c1", "selector": {"matchLabels": {"a": "b"}},
                 "maxUnhealthy": "40%", "nodeStartupTimeout": "10m",
                 "unhealthyConditions": [{"type": "Ready", "status": "Unknown", "timeout": "5m0s"}],
                 "remediationTemplate": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                         "kind": "DevRemediationTemplate", "name": "r", "namespace": "ns"}},
        "status": {"expectedMachines": 3, "currentHealthy": 3,
                   "v1beta2": {"conditions": [{"type": "RemediationAllowed", "status": "True"}]}},
    });
    let hub = convert(v1.clone(), "cluster.x-k8s.io/v1beta2", &versions()).unwrap();
    assert_eq!(
        hub["spec"],
        json!({"clusterName": "c1", "selector": {"matchLabels": {"a": "b"}},
               "checks": {"nodeStartupTimeoutSeconds": 600,
                          "unhealthyNodeConditions": [{"type": "Ready", "status": "Unknown", "timeoutSeconds": 300}]},
               "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": "40%"},
                               "templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                               "kind": "DevRemediationTemplate", "name": "r"}}})
    );
    assert_eq!(hub["status"]["conditions"][0]["type"], "RemediationAllowed");
    let mut back = without_data(convert(hub, "cluster.x-k8s.io/v1beta1", &versions()).unwrap());
    assert_eq!(back["spec"]["nodeStartupTimeout"], "10m0s");
    back["spec"]["nodeStartupTimeout"] = json!("10m");
    assert_eq!(back, v1);
}
