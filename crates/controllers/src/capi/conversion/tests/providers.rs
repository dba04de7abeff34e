//! The kubeadm providers' kinds, ClusterClass, the development provider's kinds, and the
//! conversion data that carries what v1beta1 has no place for.

use super::*;

fn v1beta1_kubeadm_config_spec() -> Value {
    json!({
        "clusterConfiguration": {
            "clusterName": "c1", "kubernetesVersion": "v1.33.0",
            "networking": {"podSubnet": "192.168.0.0/16"},
            "apiServer": {"certSANs": ["localhost"], "timeoutForControlPlane": "4m",
                          "extraArgs": {"v": "2", "audit-log-path": "-"}},
            "controllerManager": {"extraArgs": {"enable-hostpath-provisioner": "true"}},
            "etcd": {"local": {"dataDir": "/var/lib/etcd", "extraArgs": {"quota-backend-bytes": "8589934592"}}},
        },
        "initConfiguration": {
            "nodeRegistration": {"criSocket": "unix:///var/run/containerd/containerd.sock",
                                 "kubeletExtraArgs": {"eviction-hard": "nodefs.available<0%"}},
            "bootstrapTokens": [{"token": "abcdef.0123456789abcdef", "ttl": "24h"}],
        },
        "joinConfiguration": {
            "nodeRegistration": {"kubeletExtraArgs": {"node-labels": "a=b"}},
            "discovery": {"timeout": "5m"},
        },
        "files": [{"path": "/etc/x", "content": "x"}],
        "useExperimentalRetryJoin": true,
    })
}

#[test]
fn a_kubeadm_config_spec_takes_v1beta2_s_shapes() {
    let mut spec = v1beta1_kubeadm_config_spec().as_object().unwrap().clone();
    kubeadm::config_spec_to_hub(&mut spec, None);
    let hub = Value::Object(spec);
    let cluster = &hub["clusterConfiguration"];
    for gone in ["clusterName", "kubernetesVersion", "networking"] {
        assert!(cluster.get(gone).is_none(), "{gone}");
    }
    assert!(hub.get("useExperimentalRetryJoin").is_none());
    // Sorted by name, as upstream lists them.
    assert_eq!(
        cluster["apiServer"],
        json!({"certSANs": ["localhost"], "extraArgs": [
            {"name": "audit-log-path", "value": "-"}, {"name": "v", "value": "2"}]})
    );
    assert_eq!(
        cluster["etcd"]["local"]["extraArgs"],
        json!([{"name": "quota-backend-bytes", "value": "8589934592"}])
    );
    let init = &hub["initConfiguration"];
    assert_eq!(
        init["nodeRegistration"]["kubeletExtraArgs"],
        json!([{"name": "eviction-hard", "value": "nodefs.available<0%"}])
    );
    assert_eq!(init["bootstrapTokens"][0]["ttlSeconds"], 86400);
    assert_eq!(
        init["timeouts"],
        json!({"controlPlaneComponentHealthCheckSeconds": 240})
    );
    let join = &hub["joinConfiguration"];
    assert!(join["discovery"].get("timeout").is_none());
    assert_eq!(
        join["timeouts"],
        json!({"controlPlaneComponentHealthCheckSeconds": 240, "tlsBootstrapSeconds": 300})
    );

    let mut back = hub.as_object().unwrap().clone();
    kubeadm::config_spec_from_hub(&mut back);
    let back = Value::Object(back);
    assert_eq!(
        back["clusterConfiguration"]["apiServer"],
        json!({"certSANs": ["localhost"], "timeoutForControlPlane": "4m0s",
               "extraArgs": {"audit-log-path": "-", "v": "2"}})
    );
    assert_eq!(
        back["initConfiguration"]["bootstrapTokens"][0]["ttl"],
        "24h0m0s"
    );
    assert!(back["initConfiguration"].get("timeouts").is_none());
    assert_eq!(
        back["joinConfiguration"],
        json!({"nodeRegistration": {"kubeletExtraArgs": {"node-labels": "a=b"}},
               "discovery": {"timeout": "5m0s"}})
    );
}

#[test]
fn timeouts_v1beta1_cannot_hold_come_back_from_the_conversion_data() {
    let hub = json!({
        "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
        "metadata": {"name": "k", "namespace": "ns"},
        "spec": {"initConfiguration": {"timeouts": {
            "controlPlaneComponentHealthCheckSeconds": 60, "kubeletHealthCheckSeconds": 30}},
            "joinConfiguration": {"discovery": {"bootstrapToken": {"unsafeSkipCAVerification": false}}}},
        "status": {"initialization": {"dataSecretCreated": false}, "dataSecretName": ""},
    });
    let v1 = convert(
        hub.clone(),
        "bootstrap.cluster.x-k8s.io/v1beta1",
        &versions(),
    )
    .unwrap();
    assert_eq!(
        v1["spec"],
        json!({"clusterConfiguration": {"apiServer": {"timeoutForControlPlane": "1m0s"}},
               "joinConfiguration": {"discovery": {"bootstrapToken": {"unsafeSkipCAVerification": false}}}})
    );
    assert_eq!(v1["status"], json!({"ready": false}));
    let data: Value = serde_json::from_str(
        v1["metadata"]["annotations"][DATA_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(data["spec"], hub["spec"]);
    assert!(data.get("metadata").is_none());

    // A v1beta1 client changes the timeout it can see; the one it cannot see survives, and
    // the falses the hub had said stay said.
    let mut edited = v1;
    edited["spec"]["clusterConfiguration"]["apiServer"]["timeoutForControlPlane"] = json!("2m");
    let back = convert(edited, "bootstrap.cluster.x-k8s.io/v1beta2", &versions()).unwrap();
    assert_eq!(
        back["spec"]["initConfiguration"]["timeouts"],
        json!({"controlPlaneComponentHealthCheckSeconds": 120, "kubeletHealthCheckSeconds": 30})
    );
    assert_eq!(
        back["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"],
        json!({"unsafeSkipCAVerification": false})
    );
    assert_eq!(
        back["status"]["initialization"],
        json!({"dataSecretCreated": false})
    );
    assert!(back["metadata"].get("annotations").is_none());

    // Without the data, a false v1beta1 flag is simply not set.
    let plain = json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig",
                       "metadata": {"name": "k"}, "spec": {}, "status": {"ready": false}});
    let hub = convert(plain, "bootstrap.cluster.x-k8s.io/v1beta2", &versions()).unwrap();
    assert_eq!(hub["status"], json!({}));
}

#[test]
fn conversion_data_that_is_not_json_is_an_error() {
    let v1 = json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig",
                    "metadata": {"name": "k", "annotations": {DATA_ANNOTATION: "{not json"}}});
    let e = convert(v1, "bootstrap.cluster.x-k8s.io/v1beta2", &versions()).unwrap_err();
    assert!(e.contains(DATA_ANNOTATION), "{e}");
}

fn v1beta1_control_plane() -> Value {
    json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane",
        "metadata": {"name": "cp", "namespace": "team-a"},
        "spec": {
            "replicas": 3, "version": "v1.33.0",
            "machineTemplate": {
                "metadata": {"labels": {"role": "cp"}},
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                      "kind": "DevMachineTemplate", "name": "cp", "namespace": "team-a"},
                "nodeDrainTimeout": "30s",
                "readinessGates": [{"conditionType": "Custom"}],
            },
            "kubeadmConfigSpec": {"clusterConfiguration": {"apiServer": {"extraArgs": {"v": "4"}}}},
            "rolloutBefore": {"certificatesExpiryDays": 21},
            "rolloutAfter": "2026-02-01T00:00:00Z",
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "remediationStrategy": {"maxRetry": 5, "retryPeriod": "1m", "minHealthyPeriod": "2h"},
            "machineNamingStrategy": {"template": "{{ .kubeadmControlPlane.name }}-{{ .random }}"},
        },
        "status": {
            "selector": "cluster.x-k8s.io/cluster-name=c1", "replicas": 3, "version": "v1.33.0",
            "updatedReplicas": 3, "readyReplicas": 2, "unavailableReplicas": 1,
            "initialized": true, "ready": true, "observedGeneration": 2,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "lastRemediation": {"machine": "cp-x", "timestamp": "2026-01-02T00:00:00Z", "retryCount": 1},
            "v1beta2": {"readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 3,
                        "conditions": [{"type": "Available", "status": "True"}]},
        },
    })
}

fn with_dev_machine_template() -> Versions {
    let mut v = versions();
    v.known.insert(
        (
            "infrastructure.cluster.x-k8s.io".into(),
            "DevMachineTemplate".into(),
        ),
        "infrastructure.cluster.x-k8s.io/v1beta1".into(),
    );
    v
}

#[test]
fn a_v1beta1_control_plane_reaches_the_hub_and_comes_back() {
    let v = with_dev_machine_template();
    let desired = "controlplane.cluster.x-k8s.io/v1beta2";
    let hub = convert(v1beta1_control_plane(), desired, &v).unwrap();
    let spec = &hub["spec"];
    assert_eq!(
        spec["machineTemplate"],
        json!({"metadata": {"labels": {"role": "cp"}}, "spec": {
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                  "kind": "DevMachineTemplate", "name": "cp"},
            "readinessGates": [{"conditionType": "Custom"}],
            "deletion": {"nodeDrainTimeoutSeconds": 30}}})
    );
    assert_eq!(
        spec["rollout"],
        json!({"before": {"certificatesExpiryDays": 21}, "after": "2026-02-01T00:00:00Z",
               "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}})
    );
    assert_eq!(
        spec["remediation"],
        json!({"maxRetry": 5, "retryPeriodSeconds": 60, "minHealthyPeriodSeconds": 7200})
    );
    assert_eq!(
        spec["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]["extraArgs"],
        json!([{"name": "v", "value": "4"}])
    );
    let status = &hub["status"];
    assert_eq!(status["readyReplicas"], 2);
    assert_eq!(status["availableReplicas"], 2);
    assert_eq!(
        status["initialization"],
        json!({"controlPlaneInitialized": true})
    );
    assert_eq!(status["lastRemediation"]["time"], "2026-01-02T00:00:00Z");
    assert_eq!(
        status["deprecated"]["v1beta1"]["unavailableReplicas"],
        json!(1)
    );
    assert!(status.get("ready").is_none());

    let back =
        super::without_data(convert(hub, "controlplane.cluster.x-k8s.io/v1beta1", &v).unwrap());
    let mut expected = v1beta1_control_plane();
    expected["spec"]["machineTemplate"]["nodeDrainTimeout"] = json!("30s");
    expected["spec"]["remediationStrategy"] =
        json!({"maxRetry": 5, "retryPeriod": "1m0s", "minHealthyPeriod": "2h0m0s"});
    assert_eq!(back, expected);
}

#[test]
fn a_stand_in_control_plane_reads_as_v1beta1() {
    let hub = json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
        "metadata": {"name": "cp", "namespace": "ns"},
        "spec": {"version": "v1.33.0", "machineTemplate": {"spec": {"infrastructureRef": {
            "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachineTemplate", "name": "cp"}}}},
        "status": {"replicas": 1, "readyReplicas": 1,
                   "deprecated": {"v1beta1": {"readyReplicas": 1, "updatedReplicas": 1}}},
    });
    let v1 = convert(
        hub,
        "controlplane.cluster.x-k8s.io/v1beta1",
        &with_dev_machine_template(),
    )
    .unwrap();
    assert_eq!(
        v1["spec"]["machineTemplate"]["infrastructureRef"],
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
               "kind": "DevMachineTemplate", "name": "cp", "namespace": "ns"})
    );
    assert_eq!(
        v1["status"],
        json!({"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "unavailableReplicas": 0,
               "initialized": false, "ready": true, "v1beta2": {"readyReplicas": 1}})
    );
}

#[test]
fn a_control_plane_template_fills_its_strategy_type() {
    let v1 = json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlaneTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"template": {"spec": {
            "machineTemplate": {"nodeDrainTimeout": "1m", "taints": []},
            "rolloutStrategy": {"rollingUpdate": {"maxSurge": 0}},
            "kubeadmConfigSpec": {"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": {"a": "1"}}}}}}},
    });
    let hub = convert(v1, "controlplane.cluster.x-k8s.io/v1beta2", &versions()).unwrap();
    let spec = &hub["spec"]["template"]["spec"];
    assert_eq!(
        spec["machineTemplate"],
        json!({"spec": {"taints": [], "deletion": {"nodeDrainTimeoutSeconds": 60}}})
    );
    assert_eq!(
        spec["rollout"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}})
    );
    assert_eq!(
        spec["kubeadmConfigSpec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
        json!([{"name": "a", "value": "1"}])
    );
}

fn v1beta1_cluster_class() -> Value {
    let reference = |group: &str, kind: &str, name: &str| json!({"apiVersion": format!("{group}/v1beta1"), "kind": kind, "name": name, "namespace": "classes"});
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "ClusterClass",
        "metadata": {"name": "in-memory", "namespace": "classes"},
        "spec": {
            "infrastructure": {"ref": reference("infrastructure.cluster.x-k8s.io", "DevClusterTemplate", "c")},
            "infrastructureNamingStrategy": {"template": "{{ .cluster.name }}-{{ .random }}"},
            "controlPlane": {
                "ref": reference("controlplane.cluster.x-k8s.io", "KubeadmControlPlaneTemplate", "cp"),
                "machineInfrastructure": {"ref": reference("infrastructure.cluster.x-k8s.io", "DevMachineTemplate", "cp")},
                "metadata": {"labels": {"tier": "cp"}},
                "machineHealthCheck": {"nodeStartupTimeout": "10m",
                    "unhealthyConditions": [{"type": "Ready", "status": "False", "timeout": "5m0s"}]},
                "namingStrategy": {"template": "{{ .cluster.name }}-cp-{{ .random }}"},
                "nodeDeletionTimeout": "1m0s",
            },
            "workers": {"machineDeployments": [{
                "class": "default-worker",
                "template": {
                    "metadata": {"labels": {"tier": "worker"}},
                    "bootstrap": {"ref": reference("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate", "w")},
                    "infrastructure": {"ref": reference("infrastructure.cluster.x-k8s.io", "DevMachineTemplate", "w")},
                },
                "machineHealthCheck": {"maxUnhealthy": "100%"},
                "strategy": {"type": "RollingUpdate",
                             "rollingUpdate": {"maxSurge": 1, "deletePolicy": "Oldest"},
                             "remediation": {"maxInFlight": 1}},
                "minReadySeconds": 5,
            }]},
            "variables": [{"name": "maxSurge", "required": false, "metadata": {"labels": {"a": "b"}},
                           "schema": {"openAPIV3Schema": {"type": "string", "default": ""}}}],
            "patches": [
                {"name": "kcp", "enabledIf": "{{ ne .maxSurge \"\" }}", "definitions": [{
                    "selector": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
                                 "kind": "KubeadmControlPlaneTemplate", "matchResources": {"controlPlane": true}},
                    "jsonPatches": [{"op": "add", "path": "/spec/template/spec/rolloutStrategy/rollingUpdate/maxSurge",
                                     "valueFrom": {"template": "{{ .maxSurge }}"}}]}]},
                {"name": "ext", "external": {"generateExtension": "gen.ext", "validateExtension": "val.ext"}},
            ],
        },
        "status": {"observedGeneration": 1,
                   "conditions": [{"type": "VariablesReconciled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                   "variables": [{"name": "maxSurge", "definitionsConflict": false, "definitions": [
                       {"from": "inline", "required": false, "metadata": {}, "schema": {"openAPIV3Schema": {"type": "string"}}}]}],
                   "v1beta2": {"conditions": [{"type": "VariablesReady", "status": "True"}]}},
    })
}

#[test]
fn a_v1beta1_cluster_class_reaches_the_hub_and_comes_back() {
    let hub = convert(
        v1beta1_cluster_class(),
        "cluster.x-k8s.io/v1beta2",
        &versions(),
    )
    .unwrap();
    let spec = &hub["spec"];
    assert_eq!(
        spec["infrastructure"],
        json!({"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                               "kind": "DevClusterTemplate", "name": "c"},
               "naming": {"template": "{{ .cluster.name }}-{{ .random }}"}})
    );
    let cp = &spec["controlPlane"];
    assert_eq!(cp["templateRef"]["kind"], "KubeadmControlPlaneTemplate");
    assert!(cp.get("ref").is_none());
    assert_eq!(
        cp["machineInfrastructure"]["templateRef"]["name"],
        json!("cp")
    );
    assert_eq!(
        cp["healthCheck"]["checks"]["nodeStartupTimeoutSeconds"],
        600
    );
    assert_eq!(
        cp["naming"]["template"],
        "{{ .cluster.name }}-cp-{{ .random }}"
    );
    assert_eq!(cp["deletion"], json!({"nodeDeletionTimeoutSeconds": 60}));
    let md = &spec["workers"]["machineDeployments"][0];
    assert!(md.get("template").is_none());
    assert_eq!(md["metadata"]["labels"]["tier"], "worker");
    assert_eq!(
        md["bootstrap"]["templateRef"]["kind"],
        "KubeadmConfigTemplate"
    );
    assert_eq!(md["infrastructure"]["templateRef"]["name"], "w");
    assert_eq!(
        md["healthCheck"],
        json!({"remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": "100%"}, "maxInFlight": 1}})
    );
    assert_eq!(md["deletion"], json!({"order": "Oldest"}));
    assert_eq!(
        md["rollout"],
        json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}})
    );
    let variable = &spec["variables"][0];
    assert_eq!(variable["deprecatedV1Beta1Metadata"]["labels"]["a"], "b");
    assert!(variable.get("metadata").is_none());
    assert_eq!(
        spec["patches"][1]["external"],
        json!({"generatePatchesExtension": "gen.ext", "validateTopologyExtension": "val.ext"})
    );
    let status = &hub["status"];
    assert_eq!(status["conditions"][0]["type"], "VariablesReady");
    assert_eq!(
        status["deprecated"]["v1beta1"]["conditions"][0]["type"],
        "VariablesReconciled"
    );
    assert!(status["variables"][0]["definitions"][0]
        .get("deprecatedV1Beta1Metadata")
        .is_some());

    let back = super::without_data(convert(hub, "cluster.x-k8s.io/v1beta1", &versions()).unwrap());
    let mut expected = v1beta1_cluster_class();
    expected["spec"]["controlPlane"]["machineHealthCheck"]["nodeStartupTimeout"] = json!("10m0s");
    assert_eq!(back, expected);
}

#[test]
fn a_hub_cluster_class_says_false_again_after_a_v1beta1_round_trip() {
    let hub = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "infrastructure": {"templateRef": {"apiVersion": "a/v1", "kind": "K", "name": "n"}},
            "controlPlane": {"templateRef": {"apiVersion": "a/v1", "kind": "K", "name": "n"}},
            "variables": [{"name": "v", "required": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": false,
                "properties": {"n": {"type": "integer", "exclusiveMinimum": false, "minimum": 1}}}}}],
            "patches": [{"name": "p", "definitions": [{"selector": {"apiVersion": "a/v1", "kind": "K",
                "matchResources": {"controlPlane": false, "infrastructureCluster": true}}, "jsonPatches": []}]}],
        },
    });
    let v1 = convert(hub.clone(), "cluster.x-k8s.io/v1beta1", &versions()).unwrap();
    assert_eq!(
        v1["spec"]["infrastructure"]["ref"]["namespace"],
        json!("ns")
    );
    // A false says nothing in v1beta1 (its booleans are left out when false)...
    let mut plain = v1.clone();
    plain["metadata"]["annotations"] = json!({});
    let stripped = |mut v: Value| {
        let schema = &mut v["spec"]["variables"][0]["schema"]["openAPIV3Schema"];
        schema
            .as_object_mut()
            .unwrap()
            .remove("x-kubernetes-preserve-unknown-fields");
        schema["properties"]["n"]
            .as_object_mut()
            .unwrap()
            .remove("exclusiveMinimum");
        v["spec"]["patches"][0]["definitions"][0]["selector"]["matchResources"]
            .as_object_mut()
            .unwrap()
            .remove("controlPlane");
        v
    };
    let without = convert(stripped(plain), "cluster.x-k8s.io/v1beta2", &versions()).unwrap();
    assert_eq!(
        without["spec"]["patches"][0]["definitions"][0]["selector"]["matchResources"],
        json!({"infrastructureCluster": true})
    );
    // ...but the conversion data says the hub had said false.
    let back = convert(stripped(v1), "cluster.x-k8s.io/v1beta2", &versions()).unwrap();
    assert_eq!(back["spec"], hub["spec"]);
}

#[test]
fn dev_kinds_convert_their_readiness_and_failure_domains() {
    let hub = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevCluster",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"backend": {"docker": {"failureDomains": [{"name": "fd1", "controlPlane": true}]}}},
        "status": {"initialization": {"provisioned": true}, "ready": true,
                   "failureDomains": [{"name": "fd1", "controlPlane": true, "attributes": {"r": "1"}}],
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "True", "severity": ""}]}}},
    });
    let v1 = convert(hub, "infrastructure.cluster.x-k8s.io/v1beta1", &versions()).unwrap();
    assert_eq!(
        v1["spec"]["backend"]["docker"]["failureDomains"],
        json!({"fd1": {"controlPlane": true}})
    );
    assert_eq!(
        v1["status"],
        json!({"ready": true, "failureDomains": {"fd1": {"controlPlane": true, "attributes": {"r": "1"}}},
               "conditions": [{"type": "Ready", "status": "True", "severity": ""}],
               "v1beta2": {"conditions": [{"type": "Ready", "status": "True"}]}})
    );

    let machine = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachine",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"providerID": "", "backend": {"inMemory": {}}},
        "status": {"failureDomain": "fd1", "initialization": {"provisioned": false}},
    });
    let v1 = convert(
        machine.clone(),
        "infrastructure.cluster.x-k8s.io/v1beta1",
        &versions(),
    )
    .unwrap();
    assert_eq!(v1["spec"], json!({"backend": {"inMemory": {}}}));
    assert_eq!(v1["status"], json!({"ready": false}));
    let back = convert(v1, "infrastructure.cluster.x-k8s.io/v1beta2", &versions()).unwrap();
    assert_eq!(back["status"], machine["status"]);
}

#[test]
fn a_machine_keeps_what_only_v1beta2_has_through_a_v1beta1_client() {
    let hub = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"clusterName": "c1", "minReadySeconds": 7,
                 "bootstrap": {"dataSecretName": "s"},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                       "kind": "DevMachineTemplate", "name": "m"}},
        "status": {"phase": "Updating", "failureDomain": "fd1",
                   "initialization": {"bootstrapDataSecretCreated": true, "infrastructureProvisioned": false}},
    });
    let v = with_dev_machine_template();
    let v1 = convert(hub.clone(), "cluster.x-k8s.io/v1beta1", &v).unwrap();
    assert_eq!(v1["status"]["phase"], "Running");
    assert!(v1["spec"].get("minReadySeconds").is_none());
    let back = convert(v1, "cluster.x-k8s.io/v1beta2", &v).unwrap();
    assert_eq!(back["spec"], hub["spec"]);
    assert_eq!(back["status"], hub["status"]);
}
