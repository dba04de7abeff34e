//! The Job controller: runs up to `parallelism` pods at a time until `completions` of them have
//! succeeded (or, without `completions`, until one has and none is left running), gives up
//! after `backoffLimit` failures or `activeDeadlineSeconds`, honours `suspend`, and reports
//! `active` / `ready` / `succeeded` / `failed` and the Complete or Failed condition that
//! `kubectl wait --for=condition=complete` waits for. (Pods of a Job finish on their own: see
//! the kubelet.)

use super::events;
use super::{
    condition, condition_true, controller_ref, pod_from_template, pod_ready, Cluster, Obj,
};
use chrono::{DateTime, Utc};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};

const RESOURCE: &str = "jobs.batch";

fn owned<'a>(job: &Obj, pods: &'a [Obj]) -> Vec<&'a Obj> {
    pods.iter()
        .filter(|p| p.namespace() == job.namespace() && p.controller_uid() == Some(job.uid()))
        .collect()
}

fn finished(job: &Obj) -> bool {
    condition_true(&job.value, "Complete") || condition_true(&job.value, "Failed")
}

pub(super) fn reconcile(c: &Cluster) {
    let jobs = c.list(RESOURCE);
    if jobs.is_empty() {
        return;
    }
    let pods = c.list("pods");
    let now = c.now();
    for job in jobs.iter() {
        if job.deleting() || finished(job) {
            continue;
        }
        reconcile_job(c, job, &pods, now);
    }
}

/// A Job's pods by where they stand.
struct Pods<'a> {
    succeeded: i64,
    failed: i64,
    /// Neither succeeded nor failed, and not going.
    active: Vec<&'a Obj>,
}

impl<'a> Pods<'a> {
    fn of(job: &Obj, pods: &'a [Obj]) -> Self {
        let owned = owned(job, pods);
        let phase = |p: &Obj, want: &str| p.str("/status/phase") == want;
        Pods {
            succeeded: owned.iter().filter(|p| phase(p, "Succeeded")).count() as i64,
            failed: owned.iter().filter(|p| phase(p, "Failed")).count() as i64,
            active: owned
                .into_iter()
                .filter(|p| !phase(p, "Succeeded") && !phase(p, "Failed") && !p.deleting())
                .collect(),
        }
    }

    fn delete_active(&self, c: &Cluster) {
        for p in &self.active {
            c.delete("pods", p.namespace(), p.name());
        }
    }
}

fn reconcile_job(c: &Cluster, job: &Obj, pods: &[Obj], now: DateTime<Utc>) {
    let now_text = infrasim_store::format_time(now);
    let pods = Pods::of(job, pods);
    let completions = job.int("/spec/completions");
    let start_time = job
        .value
        .at("/status/startTime")
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<DateTime<Utc>>().ok());
    let done = match completions {
        Some(n) => pods.succeeded >= n,
        None => pods.succeeded >= 1 && pods.active.is_empty(),
    };
    let mut status = job
        .value
        .get("status")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let previous = job.value.at("/status/conditions").cloned();
    let previous = previous.as_ref();
    if let Some((reason, message)) = failure(c, job, &pods, start_time, now) {
        pods.delete_active(c);
        status["conditions"] = json!([
            condition(
                previous,
                "FailureTarget",
                "True",
                reason,
                message,
                &now_text,
                false
            ),
            condition(previous, "Failed", "True", reason, message, &now_text, false),
        ]);
        status["active"] = json!(0);
        c.event(job, events::JOBS, true, reason, message);
    } else if done {
        // Work-queue Jobs stop the rest once one pod has succeeded.
        pods.delete_active(c);
        let (reason, message) = (
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        );
        status["conditions"] = json!([
            condition(
                previous,
                "SuccessCriteriaMet",
                "True",
                reason,
                message,
                &now_text,
                false
            ),
            condition(previous, "Complete", "True", reason, message, &now_text, false),
        ]);
        status["completionTime"] = json!(now_text);
        status["active"] = json!(0);
        c.event(job, events::JOBS, false, "Completed", "Job completed");
    } else if job.value.at("/spec/suspend") == Some(&json!(true)) {
        pods.delete_active(c);
        status["active"] = json!(0);
    } else {
        status["active"] = json!(run_pods(c, job, &pods, completions));
        if start_time.is_none() {
            status["startTime"] = json!(now_text);
        }
    }
    status["succeeded"] = json!(pods.succeeded);
    status["failed"] = json!(pods.failed);
    status["ready"] = json!(pods.active.iter().filter(|p| pod_ready(p)).count());
    status["terminating"] = json!(0);
    status["uncountedTerminatedPods"] = json!({});
    if let Some(s) = status.as_object_mut() {
        s.retain(|k, v| {
            matches!(
                k.as_str(),
                "ready" | "terminating" | "uncountedTerminatedPods"
            ) || v.as_i64() != Some(0)
        });
    }
    c.set_status(RESOURCE, job, status);
}

/// Why the Job has failed, if it has: too many failed pods, or past its deadline (a pass is
/// asked for at the deadline, as nothing else may happen in the cluster by then).
fn failure(
    c: &Cluster,
    job: &Obj,
    pods: &Pods,
    start_time: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<(&'static str, &'static str)> {
    let backoff_limit = job.int("/spec/backoffLimit").unwrap_or(6);
    let past_deadline = match (job.int("/spec/activeDeadlineSeconds"), start_time) {
        (Some(limit), Some(started)) => {
            let deadline = started + chrono::Duration::seconds(limit);
            c.wake_at(deadline);
            now >= deadline
        }
        _ => false,
    };
    if pods.failed > backoff_limit {
        Some((
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ))
    } else if past_deadline {
        Some((
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
        ))
    } else {
        None
    }
}

/// Starts pods up to `parallelism` (and no more than the completions still wanted); how
/// many are active after.
fn run_pods(c: &Cluster, job: &Obj, pods: &Pods, completions: Option<i64>) -> i64 {
    let parallelism = job.int("/spec/parallelism").unwrap_or(1).max(0);
    let remaining = completions.map_or(parallelism, |n| (n - pods.succeeded).max(0));
    let want = parallelism.min(remaining);
    let have = pods.active.len() as i64;
    if have < want {
        let template = job
            .value
            .at("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        for _ in 0..(want - have) {
            let pod = pod_from_template(
                &template,
                job.namespace(),
                &format!("{}-", job.name()),
                controller_ref(job, "batch/v1", "Job"),
                &[
                    ("batch.kubernetes.io/job-name", job.name().to_string()),
                    ("job-name", job.name().to_string()),
                    ("batch.kubernetes.io/controller-uid", job.uid().to_string()),
                    ("controller-uid", job.uid().to_string()),
                ],
            );
            if let Some(created) = c.create("pods", pod) {
                let note = format!("Created pod: {}", created.name());
                c.event(job, events::JOBS, false, "SuccessfulCreate", &note);
            }
        }
    }
    want.max(have)
}
