//! The protobuf decoder against an encoder nobody here wrote: k8s-pb's prost types.

use infrasim_kube_api::protobuf::{decode, ProtoError};
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;
use std::collections::BTreeMap;

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

#[test]
fn a_deployment_round_trips_with_kubernetes_json_names() {
    let container = core::Container {
        name: s("web"),
        image: s("nginx:1.27"),
        command: vec!["nginx".into()],
        ports: vec![core::ContainerPort {
            container_port: Some(80),
            protocol: s("TCP"),
            ..Default::default()
        }],
        env: vec![core::EnvVar {
            name: s("PASSWORD"),
            value_from: Some(core::EnvVarSource {
                secret_key_ref: Some(core::SecretKeySelector {
                    local_object_reference: Some(core::LocalObjectReference { name: s("creds") }),
                    key: s("pw"),
                    optional: Some(false),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }],
        resources: Some(core::ResourceRequirements {
            limits: BTreeMap::from([("cpu".to_string(), Quantity { string: s("500m") })]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let deployment = apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            namespace: s("demo"),
            labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
            owner_references: vec![meta::OwnerReference {
                api_version: s("v1"),
                kind: s("ConfigMap"),
                name: s("owner"),
                uid: s("1234"),
                controller: Some(true),
                block_owner_deletion: None,
            }],
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
                    creation_timestamp: Some(meta::Time::default()),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    volumes: vec![core::Volume {
                        name: s("config"),
                        volume_source: Some(core::VolumeSource {
                            config_map: Some(core::ConfigMapVolumeSource {
                                local_object_reference: Some(core::LocalObjectReference {
                                    name: s("settings"),
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                    }],
                    node_selector: BTreeMap::from([("disk".to_string(), "ssd".to_string())]),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: None,
                    }),
                    max_surge: Some(IntOrString {
                        r#type: Some(1),
                        int_val: None,
                        str_val: s("30%"),
                    }),
                }),
            }),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus {
            replicas: Some(3),
            ..Default::default()
        }),
    };
    let value = decode(&envelope(
        "apps/v1",
        "Deployment",
        deployment.encode_to_vec(),
    ))
    .unwrap();
    assert_eq!(value["apiVersion"], "apps/v1");
    assert_eq!(value["kind"], "Deployment");
    assert_eq!(value["metadata"]["name"], "web");
    assert_eq!(value["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(value["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(value["metadata"]["ownerReferences"][0]["apiVersion"], "v1");
    // A pointer field keeps its zero value: replicas 0 is not "unset".
    assert_eq!(value["spec"]["replicas"], 0);
    assert_eq!(
        value["spec"]["strategy"]["rollingUpdate"],
        json!({"maxUnavailable": 1, "maxSurge": "30%"})
    );
    // An empty Time is an absent timestamp.
    assert!(value["spec"]["template"]["metadata"]
        .get("creationTimestamp")
        .is_none());
    let pod = &value["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"], json!({"disk": "ssd"}));
    // Inlined Go members land in their parent.
    assert_eq!(
        pod["volumes"][0],
        json!({"name": "config", "configMap": {"name": "settings"}})
    );
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "web");
    assert_eq!(c["command"], json!(["nginx"]));
    assert_eq!(
        c["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert_eq!(
        c["env"][0]["valueFrom"]["secretKeyRef"],
        json!({"name": "creds", "key": "pw", "optional": false})
    );
    assert_eq!(c["resources"]["limits"], json!({"cpu": "500m"}));
    // Status is the server's: ignored on decode.
    assert!(value.get("status").is_none());
}

#[test]
fn secrets_carry_bytes_as_base64_and_configmaps_as_text() {
    let secret = core::Secret {
        metadata: Some(meta::ObjectMeta {
            name: s("s"),
            ..Default::default()
        }),
        data: BTreeMap::from([("pw".to_string(), b"hunter2".to_vec())]),
        r#type: s("Opaque"),
        ..Default::default()
    };
    let v = decode(&envelope("v1", "Secret", secret.encode_to_vec())).unwrap();
    assert_eq!(v["data"]["pw"], "aHVudGVyMg==");
    assert_eq!(v["type"], "Opaque");
}

#[test]
fn unsupported_and_malformed_bodies_are_refused_clearly() {
    let node = core::Node::default();
    assert_eq!(
        decode(&envelope("v1", "Node", node.encode_to_vec())),
        Err(ProtoError::UnsupportedKind("Node".into()))
    );
    // A PodSpec field the schema does not list (affinity, 18) is named, not dropped.
    let pod = core::Pod {
        spec: Some(core::PodSpec {
            affinity: Some(core::Affinity::default()),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        decode(&envelope("v1", "Pod", pod.encode_to_vec())),
        Err(ProtoError::UnknownField {
            message: "PodSpec",
            number: 18
        })
    );
    assert_eq!(decode(b"{\"kind\":\"Pod\"}"), Err(ProtoError::NoMagic));
    let mut truncated = envelope(
        "v1",
        "ConfigMap",
        core::ConfigMap::default().encode_to_vec(),
    );
    truncated.push(0x12);
    truncated.push(0x7f);
    assert_eq!(decode(&truncated), Err(ProtoError::Malformed));
}

#[test]
fn horizontal_pod_autoscalers_decode_in_either_version() {
    use k8s_pb::api::autoscaling::{v1 as hpa_v1, v2 as hpa_v2};
    let target = || hpa_v2::CrossVersionObjectReference {
        kind: s("Deployment"),
        name: s("web"),
        api_version: s("apps/v1"),
    };
    let v2 = hpa_v2::HorizontalPodAutoscaler {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            ..Default::default()
        }),
        spec: Some(hpa_v2::HorizontalPodAutoscalerSpec {
            scale_target_ref: Some(target()),
            min_replicas: Some(1),
            max_replicas: Some(4),
            metrics: vec![hpa_v2::MetricSpec {
                r#type: s("Resource"),
                resource: Some(hpa_v2::ResourceMetricSource {
                    name: s("cpu"),
                    target: Some(hpa_v2::MetricTarget {
                        r#type: s("Utilization"),
                        average_utilization: Some(50),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }],
            behavior: Some(hpa_v2::HorizontalPodAutoscalerBehavior {
                scale_down: Some(hpa_v2::HpaScalingRules {
                    stabilization_window_seconds: Some(0),
                    policies: vec![hpa_v2::HpaScalingPolicy {
                        r#type: s("Percent"),
                        value: Some(100),
                        period_seconds: Some(15),
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            }),
        }),
        status: None,
    };
    let decoded = decode(&envelope(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        v2.encode_to_vec(),
    ))
    .unwrap();
    assert_eq!(
        decoded["spec"],
        json!({
            "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
            "minReplicas": 1, "maxReplicas": 4,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0, "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": 15}]}},
        })
    );
    let v1 = hpa_v1::HorizontalPodAutoscaler {
        metadata: Some(meta::ObjectMeta {
            name: s("web"),
            ..Default::default()
        }),
        spec: Some(hpa_v1::HorizontalPodAutoscalerSpec {
            scale_target_ref: Some(hpa_v1::CrossVersionObjectReference {
                kind: s("Deployment"),
                name: s("web"),
                api_version: s("apps/v1"),
            }),
            max_replicas: Some(3),
            target_cpu_utilization_percentage: Some(60),
            ..Default::default()
        }),
        status: None,
    };
    let decoded = decode(&envelope(
        "autoscaling/v1",
        "HorizontalPodAutoscaler",
        v1.encode_to_vec(),
    ))
    .unwrap();
    assert_eq!(decoded["apiVersion"], "autoscaling/v1");
    assert_eq!(decoded["spec"]["targetCPUUtilizationPercentage"], 60);
    assert_eq!(decoded["spec"]["maxReplicas"], 3);
}

#[test]
fn a_certificate_signing_request_decodes_with_its_approval() {
    use k8s_pb::api::certificates::v1 as certificates;
    let csr = certificates::CertificateSigningRequest {
        metadata: Some(meta::ObjectMeta {
            name: s("extra-node"),
            ..Default::default()
        }),
        spec: Some(certificates::CertificateSigningRequestSpec {
            request: Some(b"-----BEGIN CERTIFICATE REQUEST-----".to_vec()),
            signer_name: s("kubernetes.io/kube-apiserver-client-kubelet"),
            expiration_seconds: Some(86400),
            usages: vec!["digital signature".into(), "client auth".into()],
            username: s("kubernetes-admin"),
            groups: vec!["system:masters".into()],
            ..Default::default()
        }),
        status: Some(certificates::CertificateSigningRequestStatus {
            conditions: vec![certificates::CertificateSigningRequestCondition {
                r#type: s("Approved"),
                status: s("True"),
                reason: s("KubectlApprove"),
                message: s("This CSR was approved by kubectl certificate approve."),
                last_update_time: Some(meta::Time {
                    seconds: Some(1_900_000_000),
                    nanos: Some(0),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
    };
    let v = decode(&envelope(
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        csr.encode_to_vec(),
    ))
    .unwrap();
    assert_eq!(
        v["spec"]["signerName"],
        "kubernetes.io/kube-apiserver-client-kubelet"
    );
    assert_eq!(v["spec"]["expirationSeconds"], 86400);
    assert_eq!(
        v["spec"]["usages"],
        json!(["digital signature", "client auth"])
    );
    assert_eq!(
        v["spec"]["request"],
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0="
    );
    let approved = &v["status"]["conditions"][0];
    assert_eq!(approved["type"], "Approved");
    assert_eq!(approved["status"], "True");
    assert_eq!(approved["reason"], "KubectlApprove");
    assert_eq!(approved["lastUpdateTime"], "2030-03-17T17:46:40Z");
}
