//! kube-controller-manager's HorizontalPodAutoscaler controller (autoscaling/v2): every sync
//! period it reads the target's scale, its pods' usage from the resource metrics the cluster
//! serves (`metrics.k8s.io`, through the same [`UsageReader`] as `kubectl top`), proposes a
//! replica count per metric, keeps the largest, steadies it over the stabilization windows,
//! limits its rate by the scaling policies, clamps it to the bounds and writes the target's
//! replicas, recording why in the status' conditions and in events, in the controller's words.
//!
//! What it remembers between syncs (recent recommendations, recent scale events) lives in
//! memory, as in kube-controller-manager, and is lost with it. Only Resource and
//! ContainerResource metrics have a source here: no custom or external metrics API is served.

use super::events::Source;
use super::{condition, pod_ready, Cluster, Obj};
use chrono::{DateTime, Duration, Utc};
use infrasim_kube_api::quantity;
use infrasim_kube_api::resource_metrics::usage::{self, UsageReader};
use infrasim_kube_api::selectors::LabelSelector;
use infrasim_kube_api::values::At;
use serde_json::{json, Value};
use std::collections::HashMap;

pub(super) const RESOURCE: &str = "horizontalpodautoscalers.autoscaling";

/// `--horizontal-pod-autoscaler-sync-period`.
const SYNC_PERIOD: Duration = Duration::seconds(15);
/// `--horizontal-pod-autoscaler-downscale-stabilization`, the scale-down window of an HPA
/// that sets none.
const DOWNSCALE_STABILIZATION: Duration = Duration::seconds(300);
/// `--horizontal-pod-autoscaler-tolerance`: a usage within 10% of the target changes nothing.
const TOLERANCE: f64 = 0.1;
/// `--horizontal-pod-autoscaler-cpu-initialization-period`.
const CPU_INITIALIZATION: Duration = Duration::seconds(300);
/// `--horizontal-pod-autoscaler-initial-readiness-delay`.
const INITIAL_READINESS_DELAY: Duration = Duration::seconds(30);

const SOURCE: Source<'static> = Source {
    component: "horizontal-pod-autoscaler",
    host: None,
};
const SERVICE_ACCOUNT: &str = "horizontal-pod-autoscaler";

/// The controller, with what it remembers of each HPA (by UID).
#[derive(Default)]
pub(super) struct Autoscaler {
    memory: HashMap<String, Memory>,
}

#[derive(Default)]
struct Memory {
    next_sync: Option<DateTime<Utc>>,
    generation: Option<i64>,
    /// Proposals of recent syncs, for the stabilization windows.
    recommendations: Vec<(DateTime<Utc>, i64)>,
    /// Replicas added and removed by recent rescales, for the policies' periods.
    scale_ups: Vec<(DateTime<Utc>, i64)>,
    scale_downs: Vec<(DateTime<Utc>, i64)>,
}

impl Autoscaler {
    /// Syncs every HPA whose period is up or whose spec changed, and asks for a pass at the
    /// next one due.
    pub(super) fn reconcile(&mut self, c: &Cluster) {
        let hpas = c.list(RESOURCE);
        self.memory
            .retain(|uid, _| hpas.iter().any(|h| h.uid() == uid && !h.deleting()));
        let now = c.now();
        for hpa in hpas.iter().filter(|h| !h.deleting()) {
            let memory = self.memory.entry(hpa.uid().to_string()).or_default();
            let generation = hpa.int("/metadata/generation");
            let due = memory.next_sync.is_none_or(|at| at <= now);
            if due || memory.generation != generation {
                memory.generation = generation;
                memory.next_sync = Some(now + SYNC_PERIOD);
                sync(c, hpa, memory, now);
            }
            if let Some(at) = memory.next_sync {
                c.wake_at(at);
            }
        }
    }
}

/// The store key of a kind with a `scale` subresource (the built-in ones).
fn scalable(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Deployment" => "deployments.apps",
        "ReplicaSet" => "replicasets.apps",
        "StatefulSet" => "statefulsets.apps",
        "ReplicationController" => "replicationcontrollers",
        _ => return None,
    })
}

/// What one sync decided, for the status.
struct Outcome {
    current: i64,
    desired: i64,
    metrics: Vec<Value>,
    /// The metric whose proposal won, as the messages name it.
    metric: Option<String>,
    /// (type, status, reason, message), in the order the status lists them.
    conditions: Vec<(&'static str, &'static str, String, String)>,
    rescaled: bool,
}

fn sync(c: &Cluster, hpa: &Obj, memory: &mut Memory, now: DateTime<Utc>) {
    let kind = hpa.str("/spec/scaleTargetRef/kind");
    let name = hpa.str("/spec/scaleTargetRef/name");
    let target = scalable(kind).and_then(|r| Some((r, c.get(r, hpa.namespace(), name)?)));
    let Some((resource, target)) = target else {
        let why = match scalable(kind) {
            Some(r) => format!("{r} \"{name}\" not found"),
            None => format!("no matches for kind \"{kind}\" with a scale subresource"),
        };
        let message =
            format!("the HPA controller was unable to get the target's current scale: {why}");
        c.event(hpa, SOURCE, true, "FailedGetScale", &why);
        let outcome = Outcome {
            current: 0,
            desired: 0,
            metrics: Vec::new(),
            metric: None,
            conditions: vec![("AbleToScale", "False", "FailedGetScale".into(), message)],
            rescaled: false,
        };
        return write_status(c, hpa, outcome, now);
    };
    let mut outcome = decide(c, hpa, &target, memory, now);
    if outcome.desired != outcome.current {
        let mut next = Value::clone(&target.value);
        next["spec"]["replicas"] = json!(outcome.desired);
        if c.update(resource, next, &target) {
            let reason = rescale_reason(&outcome);
            c.event(
                hpa,
                SOURCE,
                false,
                "SuccessfulRescale",
                &format!("New size: {}; reason: {reason}", outcome.desired),
            );
            remember_rescale(hpa, memory, outcome.current, outcome.desired, now);
            outcome.rescaled = true;
            let message = format!(
                "the HPA controller was able to update the target scale to {}",
                outcome.desired
            );
            set(
                &mut outcome,
                "AbleToScale",
                "True",
                "SucceededRescale",
                message,
            );
        }
    }
    write_status(c, hpa, outcome, now);
}

/// Sets (or replaces) one condition of an outcome.
fn set(
    outcome: &mut Outcome,
    ty: &'static str,
    status: &'static str,
    reason: &str,
    message: String,
) {
    let entry = (ty, status, reason.to_string(), message);
    match outcome.conditions.iter_mut().find(|(t, ..)| *t == ty) {
        Some(existing) => *existing = entry,
        None => outcome.conditions.push(entry),
    }
}

/// The replica count the HPA wants now, and why.
fn decide(
    c: &Cluster,
    hpa: &Obj,
    target: &Obj,
    memory: &mut Memory,
    now: DateTime<Utc>,
) -> Outcome {
    let current = target.int("/spec/replicas").unwrap_or(1);
    let min = hpa.int("/spec/minReplicas").unwrap_or(1);
    let max = hpa.int("/spec/maxReplicas").unwrap_or(1);
    let mut outcome = Outcome {
        current,
        desired: current,
        metrics: Vec::new(),
        metric: None,
        conditions: vec![(
            "AbleToScale",
            "True",
            "SucceededGetScale".into(),
            "the HPA controller was able to get the target's current scale".into(),
        )],
        rescaled: false,
    };
    if current == 0 && min != 0 {
        set(
            &mut outcome,
            "ScalingActive",
            "False",
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero".into(),
        );
        return outcome;
    }
    if current > max || current < min {
        outcome.desired = current.clamp(min, max);
        return outcome;
    }
    let pods = selected_pods(c, hpa, target);
    let (proposed, metric_name) = match propose(c, hpa, &pods, current, now, &mut outcome.metrics) {
        Ok(proposal) => proposal,
        Err((reason, message)) => {
            c.event(hpa, SOURCE, true, reason, &message);
            set(
                &mut outcome,
                "ScalingActive",
                "False",
                reason,
                format!("the HPA was unable to compute the replica count: {message}"),
            );
            return outcome;
        }
    };
    set(
        &mut outcome,
        "ScalingActive",
        "True",
        "ValidMetricFound",
        format!("the HPA was able to successfully calculate a replica count from {metric_name}"),
    );
    outcome.metric = Some(metric_name);
    let n = normalize(hpa, memory, current, proposed, (min, max), now);
    set(
        &mut outcome,
        "AbleToScale",
        "True",
        n.stable.0,
        n.stable.1.into(),
    );
    let limited = if n.desired == n.stabilized {
        "False"
    } else {
        "True"
    };
    set(
        &mut outcome,
        "ScalingLimited",
        limited,
        n.limit.0,
        n.limit.1.into(),
    );
    outcome.desired = n.desired;
    outcome
}

/// The pods of the HPA's namespace that the target's selector selects.
fn selected_pods(c: &Cluster, hpa: &Obj, target: &Obj) -> Vec<Obj> {
    let selector =
        LabelSelector::from_api(target.value.at("/spec/selector").unwrap_or(&Value::Null))
            .unwrap_or(LabelSelector(Vec::new()));
    c.list("pods")
        .iter()
        .filter(|p| p.namespace() == hpa.namespace() && selector.matches(&p.labels()))
        .cloned()
        .collect()
}

/// The largest replica count the HPA's metrics propose, with the name of the metric that
/// proposes it, each metric's status pushed to `statuses`; when none proposes one, the first
/// metric's failure (or that no metrics are configured).
fn propose(
    c: &Cluster,
    hpa: &Obj,
    pods: &[Obj],
    current: i64,
    now: DateTime<Utc>,
    statuses: &mut Vec<Value>,
) -> Result<(i64, String), MetricError> {
    let specs = hpa
        .value
        .at("/spec/metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut proposal: Option<(i64, String)> = None;
    let mut failure = None;
    for spec in &specs {
        match metric_replicas(c, spec, pods, current, now) {
            Ok((replicas, status, name)) => {
                statuses.push(status);
                if proposal.as_ref().is_none_or(|(best, _)| replicas > *best) {
                    proposal = Some((replicas, name));
                }
            }
            Err(e) => {
                statuses.push(json!({"type": spec.get("type").cloned().unwrap_or(Value::Null)}));
                failure.get_or_insert(e);
            }
        }
    }
    proposal.ok_or_else(|| {
        failure.unwrap_or((
            "InvalidMetricSourceType",
            "no metrics are configured".into(),
        ))
    })
}

/// Why a rescale happened, as its event says.
fn rescale_reason(outcome: &Outcome) -> String {
    if outcome.current > outcome.desired && outcome.metrics.is_empty() {
        return "Current number of replicas above Spec.MaxReplicas".into();
    }
    if outcome.current < outcome.desired && outcome.metrics.is_empty() {
        return "Current number of replicas below Spec.MinReplicas".into();
    }
    match &outcome.metric {
        Some(metric) if outcome.desired > outcome.current => format!("{metric} above target"),
        _ => "All metrics below target".into(),
    }
}

/// A reason a metric gave no proposal: the event's and condition's reason, and the message.
type MetricError = (&'static str, String);

/// One metric's proposal: replicas, the status entry, and the metric's name in messages.
fn metric_replicas(
    c: &Cluster,
    spec: &Value,
    pods: &[Obj],
    current: i64,
    now: DateTime<Utc>,
) -> Result<(i64, Value, String), MetricError> {
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("");
    let (member, container, failed) = match ty {
        "Resource" => ("resource", None, "FailedGetResourceMetric"),
        "ContainerResource" => (
            "containerResource",
            spec.at("/containerResource/container")
                .and_then(Value::as_str),
            "FailedGetContainerResourceMetric",
        ),
        "Pods" | "Object" | "External" => {
            let (member, api) = match ty {
                "Pods" => ("pods", "custom.metrics.k8s.io"),
                "Object" => ("object", "custom.metrics.k8s.io"),
                _ => ("external", "external.metrics.k8s.io"),
            };
            let metric = spec
                .at(&format!("/{member}/metric/name"))
                .and_then(Value::as_str);
            let reason = match ty {
                "Pods" => "FailedGetPodsMetric",
                "Object" => "FailedGetObjectMetric",
                _ => "FailedGetExternalMetric",
            };
            return Err((
                reason,
                format!(
                    "unable to get metric {}: the server does not serve {api}",
                    metric.unwrap_or("")
                ),
            ));
        }
        other => {
            return Err((
                "InvalidMetricSourceType",
                format!("invalid metric source type \"{other}\""),
            ))
        }
    };
    let source = &spec[member];
    let resource = source.get("name").and_then(Value::as_str).unwrap_or("");
    let target = &source["target"];
    let utilization = target.get("type").and_then(Value::as_str) == Some("Utilization");
    let what = if utilization { "utilization" } else { "usage" };
    let samples = sample(c, pods, resource, container, utilization, now)
        .map_err(|e| (failed, format!("failed to get {resource} {what}: {e}")))?;
    let scope = if container.is_some() {
        "container resource"
    } else {
        "resource"
    };
    let mut status = json!({"name": resource});
    if let Some(container) = container {
        status["container"] = json!(container);
    }
    let (replicas, name) = if utilization {
        let goal = target
            .get("averageUtilization")
            .and_then(Value::as_i64)
            .unwrap_or(80);
        let (replicas, used, raw) = utilization_replicas(&samples, goal, current);
        status["current"] =
            json!({"averageUtilization": used, "averageValue": amount(resource, raw)});
        (
            replicas,
            format!("{resource} {scope} utilization (percentage of request)"),
        )
    } else {
        let goal = target
            .get("averageValue")
            .map(quantity::value)
            .unwrap_or(0.0);
        let (replicas, raw) = average_replicas(&samples, goal, current);
        status["current"] = json!({"averageValue": amount(resource, raw)});
        (replicas, format!("{resource} {scope}"))
    };
    Ok((replicas, json!({"type": ty, member: status}), name))
}

/// An amount of `resource` as the controller writes it in the status: CPU in millicores,
/// anything else as a whole number in decimal SI form.
fn amount(resource: &str, value: f64) -> String {
    if resource == "cpu" {
        quantity::millicores(value)
    } else {
        quantity::decimal(value)
    }
}

/// The pods of a target sorted as the controller sorts them: ready with a usage (usage,
/// request), not ready yet (request), and running without figures (request).
#[derive(Debug, Default)]
struct Samples {
    ready: Vec<(f64, f64)>,
    unready: Vec<f64>,
    missing: Vec<f64>,
}

/// Reads the usage of `resource` (in one container, or summed over the pod's) of each pod,
/// and with `requests` their requests, which a utilization needs of every container; in the
/// replica calculator's order, so its errors come first as they do there.
fn sample(
    c: &Cluster,
    pods: &[Obj],
    resource: &str,
    container: Option<&str>,
    requests: bool,
    now: DateTime<Utc>,
) -> Result<Samples, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let at = usage::sample_time(now);
    let group = c.group.clone();
    let mut reader = UsageReader::new(&group);
    // (pod, its usage if it counts as ready, whether it has figures at all)
    let mut sorted: Vec<(&Obj, Option<f64>, bool)> = Vec::new();
    for pod in pods {
        if pod.deleting() || pod.str("/status/phase") == "Failed" {
            continue;
        }
        let figures = if pod.str("/status/phase") == "Pending" {
            None
        } else {
            reader.pod(&pod.value, at)
        };
        let used = figures.as_ref().map(|containers| {
            containers
                .iter()
                .filter(|u| container.is_none_or(|c| c == u.name))
                .map(|u| {
                    if resource == "cpu" {
                        u.usage.cpu
                    } else {
                        u.usage.memory
                    }
                })
                .sum::<f64>()
        });
        let pending = pod.str("/status/phase") == "Pending";
        let unready = pending || (used.is_some() && resource == "cpu" && cpu_unready(pod, at, now));
        sorted.push((pod, used.filter(|_| !unready), used.is_some() && !pending));
    }
    if sorted.iter().all(|(_, _, figures)| !figures) {
        return Err(format!(
            "unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
        ));
    }
    if sorted.iter().all(|(_, ready, _)| ready.is_none()) {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let mut samples = Samples::default();
    for (pod, ready, figures) in sorted {
        let request = if requests {
            request_of(pod, resource, container)?
        } else {
            0.0
        };
        match (ready, figures) {
            (Some(used), _) => samples.ready.push((used, request)),
            (None, true) => samples.unready.push(request),
            (None, false) if pod.str("/status/phase") == "Pending" => samples.unready.push(request),
            (None, false) => samples.missing.push(request),
        }
    }
    Ok(samples)
}

/// A pod's request of `resource`, summed over its containers (or one), each of which must
/// have one.
fn request_of(pod: &Obj, resource: &str, only: Option<&str>) -> Result<f64, String> {
    let containers = pod.value.at("/spec/containers").and_then(Value::as_array);
    let mut total = 0.0;
    for container in containers.into_iter().flatten() {
        let name = container.get("name").and_then(Value::as_str).unwrap_or("");
        if only.is_some_and(|o| o != name) {
            continue;
        }
        match container.at(&format!("/resources/requests/{resource}")) {
            Some(q) => total += quantity::value(q),
            None => {
                return Err(format!(
                    "missing request for {resource} in container {name} of Pod {}",
                    pod.name()
                ))
            }
        }
    }
    Ok(total)
}

/// Whether a pod's CPU figures are left out as the controller leaves them out: no start or
/// Ready condition yet; early in its life (the CPU initialization period), not Ready or
/// figures older than its readiness; later, not Ready and never Ready since it started.
fn cpu_unready(pod: &Obj, sampled: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    let time = |p: &str| {
        pod.value
            .at(p)
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let ready = pod
        .value
        .at("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    let (Some(started), Some(ready)) = (time("/status/startTime"), ready) else {
        return true;
    };
    let since = ready
        .get("lastTransitionTime")
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(started);
    let window = Duration::seconds(usage::RESOLUTION_SECONDS);
    if started + CPU_INITIALIZATION > now {
        !pod_ready(pod) || sampled < since + window
    } else {
        !pod_ready(pod) && started + INITIAL_READINESS_DELAY > since
    }
}

/// The replicas a utilization target asks for, the current utilization (percent of the
/// requests) and the raw average usage, as the replica calculator works them out: within
/// the tolerance nothing changes; pods without figures count as using their request when
/// scaling down and nothing when scaling up, and pods not ready yet as using nothing when
/// scaling up, and if that reverses the direction nothing changes.
fn utilization_replicas(samples: &Samples, goal: i64, current: i64) -> (i64, i64, f64) {
    let measure = |pods: &[(f64, f64)]| {
        let used: f64 = pods.iter().map(|(u, _)| u).sum();
        let requested: f64 = pods.iter().map(|(_, r)| r).sum();
        let utilization = if requested > 0.0 {
            (used * 100.0 / requested).floor() as i64
        } else {
            0
        };
        let raw = used / pods.len().max(1) as f64;
        (utilization as f64 / goal.max(1) as f64, utilization, raw)
    };
    if samples.ready.is_empty() {
        return (current, 0, 0.0);
    }
    let (ratio, utilization, raw) = measure(&samples.ready);
    let fallback = (goal.max(100) as f64) / 100.0;
    let filled = fill(
        samples,
        ratio,
        |request| (request * fallback, request),
        |r| (0.0, r),
    );
    let replicas = match filled {
        None => plain(ratio, samples.ready.len(), current),
        Some(all) => adjusted(ratio, measure(&all).0, all.len(), current),
    };
    (replicas, utilization, raw)
}

/// The replicas an average-value target asks for, and the average usage.
fn average_replicas(samples: &Samples, goal: f64, current: i64) -> (i64, f64) {
    let measure = |pods: &[(f64, f64)]| {
        let average = pods.iter().map(|(u, _)| u).sum::<f64>() / pods.len().max(1) as f64;
        (if goal > 0.0 { average / goal } else { 0.0 }, average)
    };
    if samples.ready.is_empty() {
        return (current, 0.0);
    }
    let (ratio, average) = measure(&samples.ready);
    let filled = fill(samples, ratio, |_| (goal, 0.0), |_| (0.0, 0.0));
    let replicas = match filled {
        None => plain(ratio, samples.ready.len(), current),
        Some(all) => adjusted(ratio, measure(&all).0, all.len(), current),
    };
    (replicas, average)
}

/// The ready pods with the others filled in as the calculator fills them (`below` for a pod
/// without figures when usage is under target, `zero` when it is over, and for unready pods
/// when scaling up), or `None` when none needs filling in.
fn fill(
    samples: &Samples,
    ratio: f64,
    below: impl Fn(f64) -> (f64, f64),
    zero: impl Fn(f64) -> (f64, f64),
) -> Option<Vec<(f64, f64)>> {
    let up_with_unready = !samples.unready.is_empty() && ratio > 1.0;
    if !up_with_unready && samples.missing.is_empty() {
        return None;
    }
    let mut all = samples.ready.clone();
    for request in &samples.missing {
        all.push(if ratio < 1.0 {
            below(*request)
        } else {
            zero(*request)
        });
    }
    if up_with_unready {
        all.extend(samples.unready.iter().map(|r| zero(*r)));
    }
    Some(all)
}

fn plain(ratio: f64, ready: usize, current: i64) -> i64 {
    if (1.0 - ratio).abs() <= TOLERANCE {
        current
    } else {
        (ratio * ready as f64).ceil() as i64
    }
}

fn adjusted(ratio: f64, new_ratio: f64, pods: usize, current: i64) -> i64 {
    let reversed = (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0);
    if (1.0 - new_ratio).abs() <= TOLERANCE || reversed {
        return current;
    }
    let replicas = (new_ratio * pods as f64).ceil() as i64;
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        current
    } else {
        replicas
    }
}

/// A proposal steadied and limited: the replicas to set, the stabilized recommendation they
/// came from, and the reasons for the AbleToScale and ScalingLimited conditions.
struct Normalized {
    desired: i64,
    stabilized: i64,
    stable: (&'static str, &'static str),
    limit: (&'static str, &'static str),
}

const READY_FOR_NEW_SCALE: (&str, &str) =
    ("ReadyForNewScale", "recommended size matches current size");
const SCALE_DOWN_STABILIZED: (&str, &str) = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const SCALE_UP_STABILIZED: (&str, &str) = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const WITHIN_RANGE: (&str, &str) = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const TOO_FEW: (&str, &str) = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);
const TOO_MANY: (&str, &str) = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const SCALE_UP_LIMIT: (&str, &str) = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const SCALE_DOWN_LIMIT: (&str, &str) = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);

/// Steadies `proposed` over the recent recommendations and limits it: by the HPA's behavior
/// when it has one, else by the controller's defaults (a five-minute scale-down window, and
/// at most double or four pods, whichever is more, per scale up).
fn normalize(
    hpa: &Obj,
    memory: &mut Memory,
    current: i64,
    proposed: i64,
    (min, max): (i64, i64),
    now: DateTime<Utc>,
) -> Normalized {
    if memory.recommendations.is_empty() {
        memory.recommendations.push((now, current));
    }
    let behavior = hpa.value.at("/spec/behavior");
    let window = |direction: &str, default: Duration| {
        behavior
            .and_then(|b| b.at(&format!("/{direction}/stabilizationWindowSeconds")))
            .and_then(Value::as_i64)
            .map_or(default, Duration::seconds)
    };
    let up_window = window("scaleUp", Duration::zero());
    let down_window = window("scaleDown", DOWNSCALE_STABILIZATION);
    let (mut lowest, mut highest) = (proposed, proposed);
    for (at, recommendation) in &memory.recommendations {
        if *at > now - up_window && behavior.is_some() {
            lowest = lowest.min(*recommendation);
        }
        if *at > now - down_window {
            highest = highest.max(*recommendation);
        }
    }
    memory.recommendations.push((now, proposed));
    let keep = up_window.max(down_window);
    memory.recommendations.retain(|(at, _)| *at > now - keep);
    let Some(behavior) = behavior else {
        // Without a behavior only scale-downs are steadied.
        let stabilized = highest;
        let stable = if stabilized != proposed {
            SCALE_DOWN_STABILIZED
        } else {
            READY_FOR_NEW_SCALE
        };
        let up_limit = (2 * current).max(4);
        let (ceiling, over) = if max > up_limit {
            (up_limit, SCALE_UP_LIMIT)
        } else {
            (max, TOO_MANY)
        };
        let (desired, limit) = if stabilized < min {
            (min, TOO_FEW)
        } else if stabilized > ceiling {
            (ceiling, over)
        } else {
            (stabilized, WITHIN_RANGE)
        };
        return Normalized {
            desired,
            stabilized,
            stable,
            limit,
        };
    };
    let stabilized = current.max(lowest).min(highest);
    let stable = match (stabilized != proposed, proposed >= current) {
        (false, _) => READY_FOR_NEW_SCALE,
        (true, true) => SCALE_UP_STABILIZED,
        (true, false) => SCALE_DOWN_STABILIZED,
    };
    let (desired, limit) = if stabilized > current {
        let rate = rate_limit(&behavior["scaleUp"], memory, current, true, now).max(current);
        let (ceiling, over) = if max > rate {
            (rate, SCALE_UP_LIMIT)
        } else {
            (max, TOO_MANY)
        };
        if stabilized > ceiling {
            (ceiling, over)
        } else {
            (stabilized, WITHIN_RANGE)
        }
    } else if stabilized < current {
        let rate = rate_limit(&behavior["scaleDown"], memory, current, false, now).min(current);
        let (floor, under) = if min < rate {
            (rate, SCALE_DOWN_LIMIT)
        } else {
            (min, TOO_FEW)
        };
        if stabilized < floor {
            (floor, under)
        } else {
            (stabilized, WITHIN_RANGE)
        }
    } else {
        (stabilized, WITHIN_RANGE)
    };
    Normalized {
        desired,
        stabilized,
        stable,
        limit,
    }
}

/// The furthest one rule's policies let the replicas go from `current` (up or down) given
/// the rescales within each policy's period; `Max` takes the policy allowing the most
/// change, `Min` the least, `Disabled` none.
fn rate_limit(rule: &Value, memory: &Memory, current: i64, up: bool, now: DateTime<Utc>) -> i64 {
    let select = rule
        .get("selectPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Max");
    if select == "Disabled" {
        return current;
    }
    let within = |events: &[(DateTime<Utc>, i64)], period: i64| -> i64 {
        events
            .iter()
            .filter(|(at, _)| *at > now - Duration::seconds(period))
            .map(|(_, n)| n)
            .sum()
    };
    let most_change = select != "Min";
    let policies = rule
        .get("policies")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut limit: Option<i64> = None;
    for policy in &policies {
        let period = policy
            .get("periodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(15);
        let value = policy.get("value").and_then(Value::as_i64).unwrap_or(0);
        let start =
            current - within(&memory.scale_ups, period) + within(&memory.scale_downs, period);
        let percent = policy.get("type").and_then(Value::as_str) == Some("Percent");
        let proposed = match (up, percent) {
            (true, false) => start + value,
            (true, true) => (start as f64 * (1.0 + value as f64 / 100.0)).ceil() as i64,
            (false, false) => start - value,
            (false, true) => (start as f64 * (1.0 - value as f64 / 100.0)) as i64,
        };
        // Up, the most change is the highest limit; down, the lowest.
        let better = |a: i64, b: i64| {
            if up == most_change {
                a.max(b)
            } else {
                a.min(b)
            }
        };
        limit = Some(limit.map_or(proposed, |l| better(l, proposed)));
    }
    limit.unwrap_or(current)
}

/// Records a rescale for the policies' periods (only an HPA with a behavior has them).
fn remember_rescale(hpa: &Obj, memory: &mut Memory, from: i64, to: i64, now: DateTime<Utc>) {
    let Some(behavior) = hpa.value.at("/spec/behavior") else {
        return;
    };
    let longest = ["scaleUp", "scaleDown"]
        .iter()
        .filter_map(|d| {
            behavior
                .at(&format!("/{d}/policies"))
                .and_then(Value::as_array)
        })
        .flatten()
        .filter_map(|p| p.get("periodSeconds").and_then(Value::as_i64))
        .max()
        .unwrap_or(15);
    let events = if to > from {
        &mut memory.scale_ups
    } else {
        &mut memory.scale_downs
    };
    events.push((now, (to - from).abs()));
    for events in [&mut memory.scale_ups, &mut memory.scale_downs] {
        events.retain(|(at, _)| *at > now - Duration::seconds(longest));
    }
}

/// Writes the status a sync ends with, as the controller's service account.
fn write_status(c: &Cluster, hpa: &Obj, outcome: Outcome, now: DateTime<Utc>) {
    let stamp = infrasim_store::format_time(now);
    let previous = hpa.value.at("/status/conditions");
    let conditions: Vec<Value> = outcome
        .conditions
        .iter()
        .map(|(ty, status, reason, message)| {
            condition(previous, ty, status, reason, message, &stamp, false)
        })
        .collect();
    let mut status = json!({
        "observedGeneration": hpa.int("/metadata/generation").unwrap_or(1),
        "currentReplicas": outcome.current,
        "desiredReplicas": outcome.desired,
        "conditions": conditions,
    });
    let last_scale = if outcome.rescaled {
        Some(json!(stamp))
    } else {
        hpa.value.at("/status/lastScaleTime").cloned()
    };
    if let Some(at) = last_scale {
        status["lastScaleTime"] = at;
    }
    if !outcome.metrics.is_empty() {
        status["currentMetrics"] = json!(outcome.metrics);
    }
    c.set_status_as(SERVICE_ACCOUNT, RESOURCE, hpa, status);
}
