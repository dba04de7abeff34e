//! The resource usage a simulated cluster reports: what each kubelet's cAdvisor would measure
//! and metrics-server would serve, made up where it is read.
//!
//! Nothing runs per pod. A container's usage is a function of its pod's UID, its requests and
//! limits and the time, so reading it twice at one instant gives the same figures (to the
//! HPA controller and to `kubectl top` alike), and an idle cluster costs nothing. The figures
//! wander around a level set by the container's requests (limits, when there are none) as a
//! seeded random walk would, smoothly and within bounds: a sum of two interpolated value-noise
//! layers whose random points are drawn from the UID, one changing over minutes and one over
//! tens of seconds. A load test sets a pod's usage instead, with
//! [`CPU_USAGE_ANNOTATION`] or [`MEMORY_USAGE_ANNOTATION`] on the pod or on its owner's pod
//! template (a Deployment's, read through its ReplicaSet): that value is reported as it is.

use crate::quantity;
use crate::values::At;
use chrono::{DateTime, Utc};
use infrasim_store::{Group, ObjectKey};
use serde_json::Value;
use std::collections::HashMap;

/// A pod's whole CPU usage, a quantity (`750m`), when a load test sets it.
pub const CPU_USAGE_ANNOTATION: &str = "sim.infrasim.dev/cpu-usage";
/// A pod's whole memory usage, a quantity (`300Mi`), when a load test sets it.
pub const MEMORY_USAGE_ANNOTATION: &str = "sim.infrasim.dev/memory-usage";

/// How often the figures change, and the window each covers: metrics-server's default
/// `--metric-resolution`.
pub const RESOLUTION_SECONDS: i64 = 15;

/// What an idle container uses of what it requests (its limit, without a request).
const CPU_SHARE: f64 = 0.3;
const MEMORY_SHARE: f64 = 0.5;
/// What a container that asks for nothing uses: a couple of millicores and a few MiB.
const IDLE_CPU: f64 = 0.002;
const IDLE_MEMORY: f64 = 16.0 * 1024.0 * 1024.0;
/// How far the figures wander either side of their level.
const CPU_SWING: f64 = 0.25;
const MEMORY_SWING: f64 = 0.1;

/// CPU in cores and memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cpu: f64,
    pub memory: f64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.cpu += other.cpu;
        self.memory += other.memory;
    }
}

/// One container's usage.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerUsage {
    pub name: String,
    pub usage: Usage,
}

/// The instant the figures read at `now` were taken: `now` floored to the resolution, so a
/// reading stays the same until the next "scrape".
pub fn sample_time(now: DateTime<Utc>) -> DateTime<Utc> {
    let seconds = now.timestamp();
    let floored = seconds - seconds.rem_euclid(RESOLUTION_SECONDS);
    DateTime::from_timestamp(floored, 0).unwrap_or(now)
}

/// Reads usage for the pods and nodes of one store group. It keeps the owners it looked up
/// for the life of one request, since the pods of a ReplicaSet share them.
pub struct UsageReader<'a> {
    group: &'a Group,
    owners: HashMap<(String, String, String), Option<Owner>>,
}

/// What a pod's owner contributes: its pod template's annotations, and its own controller.
#[derive(Debug, Clone)]
struct Owner {
    annotations: Value,
    controller: Option<Value>,
}

impl<'a> UsageReader<'a> {
    pub fn new(group: &'a Group) -> Self {
        UsageReader {
            group,
            owners: HashMap::new(),
        }
    }

    /// A pod's usage per container at `at`, or `None` when no kubelet runs it (not bound to
    /// a node, or not Running): metrics-server has no figures for such a pod.
    pub fn pod(&mut self, pod: &Value, at: DateTime<Utc>) -> Option<Vec<ContainerUsage>> {
        let running = pod.at("/status/phase").and_then(Value::as_str) == Some("Running");
        let bound = pod
            .at("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if !running || !bound {
            return None;
        }
        let uid = pod
            .at("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        let containers: Vec<&Value> = pod
            .at("/spec/containers")
            .and_then(Value::as_array)
            .map(|c| c.iter().collect())
            .unwrap_or_default();
        let levels: Vec<Usage> = containers.iter().map(|c| level(c)).collect();
        let set_cpu = self.set_usage(pod, CPU_USAGE_ANNOTATION);
        let set_memory = self.set_usage(pod, MEMORY_USAGE_ANNOTATION);
        let total_level = levels.iter().fold(Usage::default(), |mut sum, l| {
            sum += *l;
            sum
        });
        let t = at.timestamp() as f64;
        let usage = containers
            .iter()
            .zip(&levels)
            .map(|(c, level)| {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                let seed = seed_of(uid, name);
                let cpu = match set_cpu {
                    // A set usage is shared as the containers' levels are.
                    Some(total) => total * share(level.cpu, total_level.cpu, containers.len()),
                    None => limited(
                        level.cpu * (1.0 + CPU_SWING * wander(seed, t)),
                        limit(c, "cpu"),
                    ),
                };
                let memory = match set_memory {
                    Some(total) => {
                        total * share(level.memory, total_level.memory, containers.len())
                    }
                    None => limited(
                        level.memory * (1.0 + MEMORY_SWING * wander(seed ^ MEMORY_SEED, t)),
                        limit(c, "memory"),
                    ),
                };
                ContainerUsage {
                    name: name.to_string(),
                    usage: Usage { cpu, memory },
                }
            })
            .collect();
        Some(usage)
    }

    /// The usage a load test set for `pod`: the pod's annotation, else its owner's pod
    /// template's, else its owner's owner's (a Deployment above a ReplicaSet).
    fn set_usage(&mut self, pod: &Value, annotation: &str) -> Option<f64> {
        let read = |annotations: Option<&Value>| {
            annotations
                .and_then(|a| a.get(annotation))
                .and_then(Value::as_str)
                .and_then(quantity::parse)
                .filter(|q| *q >= 0.0)
        };
        if let Some(set) = read(pod.at("/metadata/annotations")) {
            return Some(set);
        }
        let namespace = pod
            .at("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut reference = controller_of(pod).cloned();
        for _ in 0..2 {
            let owner = self.owner(&namespace, reference.as_ref()?)?;
            if let Some(set) = read(Some(&owner.annotations)) {
                return Some(set);
            }
            reference = owner.controller;
        }
        None
    }

    /// The owner an ownerReference names, looked up once per reader.
    fn owner(&mut self, namespace: &str, reference: &Value) -> Option<Owner> {
        let kind = reference.get("kind").and_then(Value::as_str)?;
        let name = reference.get("name").and_then(Value::as_str)?;
        let key = (kind.to_string(), namespace.to_string(), name.to_string());
        if let Some(known) = self.owners.get(&key) {
            return known.clone();
        }
        let owner = template_annotations_of(kind).and_then(|(resource, pointer)| {
            let stored = self.group.get(resource, &ObjectKey::new(namespace, name))?;
            let object = stored.to_value().ok()?;
            Some(Owner {
                annotations: object.at(pointer).cloned().unwrap_or(Value::Null),
                controller: controller_of(&object).cloned(),
            })
        });
        self.owners.insert(key, owner.clone());
        owner
    }
}

/// A node's usage at `at`: its pods' plus what the node itself runs (kubelet, container
/// runtime, the system), or `None` for a node whose kubelet is not Ready.
pub fn node(node: &Value, pods: Usage, at: DateTime<Utc>) -> Option<Usage> {
    if !crate::values::condition_true(node, "Ready") {
        return None;
    }
    let allocatable = |name: &str| {
        node.at(&format!("/status/allocatable/{name}"))
            .map(quantity::value)
            .unwrap_or(0.0)
    };
    let uid = node
        .at("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let seed = seed_of(uid, "");
    let t = at.timestamp() as f64;
    // A node's own daemons take a few percent of its CPU and up to a GiB of its memory.
    let system = Usage {
        cpu: (allocatable("cpu") * 0.03).max(0.02) * (1.0 + CPU_SWING * wander(seed, t)),
        memory: (allocatable("memory") * 0.1).min(1024.0 * 1024.0 * 1024.0)
            * (1.0 + MEMORY_SWING * wander(seed ^ MEMORY_SEED, t)),
    };
    let mut usage = pods;
    usage += system;
    Some(usage)
}

/// Where an owner kind keeps its pod template's annotations, and the resource it is stored
/// under; `None` for kinds that make no pods from a template.
fn template_annotations_of(kind: &str) -> Option<(&'static str, &'static str)> {
    const TEMPLATE: &str = "/spec/template/metadata/annotations";
    Some(match kind {
        "ReplicaSet" => ("replicasets.apps", TEMPLATE),
        "Deployment" => ("deployments.apps", TEMPLATE),
        "StatefulSet" => ("statefulsets.apps", TEMPLATE),
        "DaemonSet" => ("daemonsets.apps", TEMPLATE),
        "Job" => ("jobs.batch", TEMPLATE),
        "ReplicationController" => ("replicationcontrollers", TEMPLATE),
        "CronJob" => (
            "cronjobs.batch",
            "/spec/jobTemplate/spec/template/metadata/annotations",
        ),
        _ => return None,
    })
}

/// An object's controller (its ownerReference with `controller: true`).
fn controller_of(object: &Value) -> Option<&Value> {
    object
        .at("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// The level a container's usage wanders around.
fn level(container: &Value) -> Usage {
    let level = |name: &str, share: f64, idle: f64| {
        let request = amount(container, "requests", name);
        let limit = amount(container, "limits", name);
        if request > 0.0 {
            request * share
        } else if limit > 0.0 {
            limit * share
        } else {
            idle
        }
    };
    Usage {
        cpu: level("cpu", CPU_SHARE, IDLE_CPU),
        memory: level("memory", MEMORY_SHARE, IDLE_MEMORY),
    }
}

fn amount(container: &Value, kind: &str, name: &str) -> f64 {
    container
        .at(&format!("/resources/{kind}/{name}"))
        .map(quantity::value)
        .unwrap_or(0.0)
}

fn limit(container: &Value, name: &str) -> Option<f64> {
    Some(amount(container, "limits", name)).filter(|l| *l > 0.0)
}

/// `value`, no higher than `limit` (a container is throttled or killed above it).
fn limited(value: f64, limit: Option<f64>) -> f64 {
    limit.map_or(value, |l| value.min(l))
}

/// A container's share of its pod's set usage: its level's part of the pod's.
fn share(level: f64, total: f64, containers: usize) -> f64 {
    if total > 0.0 {
        level / total
    } else {
        1.0 / containers.max(1) as f64
    }
}

/// Separates a container's memory figures from its CPU figures.
const MEMORY_SEED: u64 = 0x6d65_6d6f_7279_0001;

/// FNV-1a of the UID and the container's name: the seed of its figures.
fn seed_of(uid: &str, container: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in uid.bytes().chain([0]).chain(container.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// A number in [-1, 1] that moves smoothly with `t` (seconds), the same for the same seed.
fn wander(seed: u64, t: f64) -> f64 {
    0.7 * noise(seed, t / 300.0) + 0.3 * noise(seed.rotate_left(17), t / 60.0)
}

/// Value noise: a random point per whole `x`, eased between them.
fn noise(seed: u64, x: f64) -> f64 {
    let k = x.floor();
    let f = x - k;
    let ease = f * f * (3.0 - 2.0 * f);
    let a = point(seed, k as i64);
    let b = point(seed, k as i64 + 1);
    a + (b - a) * ease
}

/// splitmix64 of the seed and the step, as a number in [-1, 1].
fn point(seed: u64, step: i64) -> f64 {
    let mut z = seed ^ (step as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn running_pod(uid: &str, annotations: Value, resources: Value) -> Value {
        json!({
            "metadata": {"name": "p", "namespace": "default", "uid": uid,
                         "annotations": annotations},
            "spec": {"nodeName": "n1", "containers": [
                {"name": "app", "resources": resources},
            ]},
            "status": {"phase": "Running"},
        })
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    #[test]
    fn usage_wanders_near_the_requests_and_repeats_at_one_instant() {
        let store = infrasim_store::Store::in_memory(Default::default());
        let group = store.group_or_create("g");
        let mut reader = UsageReader::new(&group);
        let pod = running_pod(
            "u1",
            json!({}),
            json!({"requests": {"cpu": "200m", "memory": "100Mi"}}),
        );
        let mut seen = Vec::new();
        for minute in 0..30 {
            let usage = reader.pod(&pod, at(minute * 60)).unwrap()[0].usage;
            assert!((0.045..=0.075).contains(&usage.cpu), "{usage:?}");
            let mib = usage.memory / 1048576.0;
            assert!((45.0..=55.0).contains(&mib), "{usage:?}");
            assert_eq!(reader.pod(&pod, at(minute * 60)).unwrap()[0].usage, usage);
            seen.push(usage.cpu);
        }
        // It moves: not one value for half an hour.
        seen.dedup();
        assert!(seen.len() > 10, "{seen:?}");
    }

    #[test]
    fn a_set_usage_is_reported_as_set_and_limits_cap_the_wander() {
        let store = infrasim_store::Store::in_memory(Default::default());
        let group = store.group_or_create("g");
        let mut reader = UsageReader::new(&group);
        let pod = running_pod(
            "u2",
            json!({CPU_USAGE_ANNOTATION: "750m", MEMORY_USAGE_ANNOTATION: "1Gi"}),
            json!({"requests": {"cpu": "100m"}}),
        );
        let usage = reader.pod(&pod, at(0)).unwrap()[0].usage;
        assert_eq!(usage.cpu, 0.75);
        assert_eq!(usage.memory, 1024.0 * 1024.0 * 1024.0);
        // A limit below the level's wander caps it.
        let capped = running_pod("u3", json!({}), json!({"limits": {"cpu": "1m"}}));
        for minute in 0..10 {
            assert!(reader.pod(&capped, at(minute * 60)).unwrap()[0].usage.cpu <= 0.001);
        }
    }

    #[test]
    fn pods_not_running_on_a_node_have_no_usage() {
        let store = infrasim_store::Store::in_memory(Default::default());
        let group = store.group_or_create("g");
        let mut reader = UsageReader::new(&group);
        let mut pod = running_pod("u4", json!({}), json!({}));
        pod["status"]["phase"] = json!("Pending");
        assert_eq!(reader.pod(&pod, at(0)), None);
    }

    #[test]
    fn nodes_report_their_pods_and_their_own_daemons_when_ready() {
        let ready = json!({
            "metadata": {"name": "n1", "uid": "n"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        });
        let pods = Usage {
            cpu: 0.5,
            memory: 1e9,
        };
        let usage = node(&ready, pods, at(0)).unwrap();
        assert!(usage.cpu > 0.5 && usage.cpu < 0.6, "{usage:?}");
        assert!(usage.memory > 1e9, "{usage:?}");
        let mut not_ready = ready.clone();
        not_ready["status"]["conditions"][0]["status"] = json!("False");
        assert_eq!(super::node(&not_ready, pods, at(0)), None);
    }

    #[test]
    fn samples_are_taken_at_the_resolution() {
        assert_eq!(sample_time(at(14)), at(0));
        assert_eq!(sample_time(at(15)), at(15));
    }
}
