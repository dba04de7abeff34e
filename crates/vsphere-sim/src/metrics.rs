//! What the simulators report to Prometheus, per instance (label `vcenter`: the name it was
//! given, `<namespace>/<name>` for a VCenterSimulator's):
//!
//! - `infrasim_vsphere_requests_total{vcenter, method, fault}`: SOAP calls answered, by
//!   method, with the vim25 fault's type when the answer was one (`InvalidLogin`,
//!   `NotAuthenticated`; empty for a result);
//! - `infrasim_vsphere_sessions{vcenter}`: sessions logged in now;
//! - `infrasim_vsphere_tasks{vcenter, state}`: the tasks vCenter still lists
//!   (`recentTask`), by `queued`, `running`, `success`, `error`;
//! - `infrasim_vsphere_vms{vcenter, power_state}`: VMs by `poweredOn`, `poweredOff`,
//!   `suspended`;
//! - `infrasim_vsphere_injected_faults{vcenter, effect}`: fault injection rules in force
//!   (see `fault_injection`), by `fault` (calls fail) and `delay` (calls only wait).
//!
//! The gauges are read from each simulator's state at the scrape (under its lock, briefly)
//! rather than kept as calls change them: every call that logs in, clones or powers a VM
//! would otherwise have to update them, and a scrape every few seconds costs less. A
//! simulator is held weakly: one that is stopped and dropped leaves the scrape.

use crate::fault_injection::{InForce, Injections};
use crate::objects::Inventory;
use crate::state::State;
use crate::value::Val;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Requested {
    vcenter: Arc<str>,
    method: String,
    fault: &'static str,
}

/// What the scrape reads of one simulator, held weakly.
#[derive(Debug)]
struct Held {
    state: Weak<Mutex<State>>,
    injections: Weak<Mutex<Injections>>,
}

/// The simulators of a process whose state the scrape reads, by instance name.
type Watched = Arc<Mutex<BTreeMap<Arc<str>, Held>>>;

/// The simulators' families; clones share them.
#[derive(Clone, Debug)]
pub struct SimMetrics {
    requests: Family<Requested, Counter>,
    watched: Watched,
}

/// One simulator's handle on the families.
#[derive(Clone, Debug)]
pub(crate) struct Reporting {
    requests: Family<Requested, Counter>,
    vcenter: Arc<str>,
}

impl Reporting {
    /// A SOAP call of `method` was answered, with `fault` (its type) or a result.
    pub(crate) fn answered(&self, method: &str, fault: Option<&'static str>) {
        let requested = Requested {
            vcenter: self.vcenter.clone(),
            method: method.to_string(),
            fault: fault.unwrap_or(""),
        };
        self.requests.get_or_create(&requested).inc();
    }
}

impl SimMetrics {
    /// Registers the families in `metrics`, once per process.
    pub fn register(metrics: &infrasim_metrics::Metrics) -> Self {
        let requests = Family::default();
        metrics.register(
            "infrasim_vsphere_requests",
            "SOAP calls a simulated vCenter answered, by method and fault",
            requests.clone(),
        );
        let watched = Watched::default();
        metrics.register_collector(Box::new(Gauges(watched.clone())));
        SimMetrics { requests, watched }
    }

    /// Starts reporting for a simulator named `vcenter` whose state is `state` and whose
    /// fault injection rules are `injections`.
    pub(crate) fn watch(
        &self,
        vcenter: &str,
        state: &Arc<Mutex<State>>,
        injections: &Arc<Mutex<Injections>>,
    ) -> Reporting {
        let vcenter: Arc<str> = Arc::from(vcenter);
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        // Simulators dropped since are forgotten here, so the map stays as small as the
        // simulators alive.
        watched.retain(|_, held| held.state.strong_count() > 0);
        let held = Held {
            state: Arc::downgrade(state),
            injections: Arc::downgrade(injections),
        };
        watched.insert(vcenter.clone(), held);
        Reporting {
            requests: self.requests.clone(),
            vcenter,
        }
    }
}

/// Computes the gauges at each scrape.
#[derive(Debug)]
struct Gauges(Watched);

/// What one simulator holds now.
#[derive(Debug, Default)]
struct Counts {
    sessions: i64,
    tasks: BTreeMap<String, i64>,
    vms: BTreeMap<String, i64>,
    injected: InForce,
}

fn count(state: &State) -> Counts {
    let mut counts = Counts {
        sessions: i64::try_from(state.sessions.iter().count()).unwrap_or(i64::MAX),
        ..Counts::default()
    };
    for state_name in ["queued", "running", "success", "error"] {
        counts.tasks.insert(state_name.to_string(), 0);
    }
    for power in ["poweredOn", "poweredOff", "suspended"] {
        counts.vms.insert(power.to_string(), 0);
    }
    count_objects(&state.inventory, &mut counts);
    counts
}

fn count_objects(inventory: &Inventory, counts: &mut Counts) {
    for object in inventory.iter() {
        let (path, into) = match &*object.moref.ty {
            // Templates are VMs that never power on; vCenter counts them among its VMs.
            "VirtualMachine" => ("runtime.powerState", &mut counts.vms),
            "Task" => ("info.state", &mut counts.tasks),
            _ => continue,
        };
        if let Some(value) = object.path(path).and_then(Val::as_str) {
            *into.entry(value.to_string()).or_insert(0) += 1;
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Instance {
    vcenter: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskState {
    vcenter: Arc<str>,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PowerState {
    vcenter: Arc<str>,
    power_state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Effect {
    vcenter: Arc<str>,
    effect: &'static str,
}

impl Collector for Gauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        type Alive = (Arc<str>, Arc<Mutex<State>>, Option<Arc<Mutex<Injections>>>);
        let alive: Vec<Alive> = {
            let watched = self.0.lock().unwrap_or_else(|p| p.into_inner());
            watched
                .iter()
                .filter_map(|(name, held)| {
                    Some((
                        name.clone(),
                        held.state.upgrade()?,
                        held.injections.upgrade(),
                    ))
                })
                .collect()
        };
        let counted: Vec<(Arc<str>, Counts)> = alive
            .iter()
            .map(|(name, state, injections)| {
                let mut counts = count(&state.lock().unwrap_or_else(|p| p.into_inner()));
                if let Some(injections) = injections {
                    let injections = injections.lock().unwrap_or_else(|p| p.into_inner());
                    counts.injected = injections.in_force();
                }
                (name.clone(), counts)
            })
            .collect();
        let gauge = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(
            "infrasim_vsphere_sessions",
            "Sessions logged in to a simulated vCenter now.",
            None,
            gauge.metric_type(),
        )?;
        for (name, c) in &counted {
            let labels = Instance {
                vcenter: name.clone(),
            };
            ConstGauge::new(c.sessions).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "infrasim_vsphere_tasks",
            "Tasks a simulated vCenter lists, by state.",
            None,
            gauge.metric_type(),
        )?;
        for (name, c) in &counted {
            for (state, n) in &c.tasks {
                let labels = TaskState {
                    vcenter: name.clone(),
                    state: state.clone(),
                };
                ConstGauge::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "infrasim_vsphere_vms",
            "Virtual machines of a simulated vCenter, by power state.",
            None,
            gauge.metric_type(),
        )?;
        for (name, c) in &counted {
            for (power_state, n) in &c.vms {
                let labels = PowerState {
                    vcenter: name.clone(),
                    power_state: power_state.clone(),
                };
                ConstGauge::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "infrasim_vsphere_injected_faults",
            "Fault injection rules in force on a simulated vCenter, by whether they fail calls or only delay them.",
            None,
            gauge.metric_type(),
        )?;
        for (name, c) in &counted {
            for (effect, n) in [("fault", c.injected.faults), ("delay", c.injected.delays)] {
                let labels = Effect {
                    vcenter: name.clone(),
                    effect,
                };
                let n = i64::try_from(n).unwrap_or(i64::MAX);
                ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulator::{SimConfig, Simulator};
    use infrasim_clock::FakeClock;
    use infrasim_metrics::{Format, Metrics};

    fn login(password: &str) -> String {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>{password}</password></Login></soapenv:Body></soapenv:Envelope>"#
        )
    }

    fn line<'a>(text: &'a str, start: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(start))
    }

    #[tokio::test]
    async fn calls_faults_sessions_and_vms_are_reported_per_simulator() {
        let metrics = Metrics::new();
        let sims = SimMetrics::register(&metrics);
        let clock = Arc::new(FakeClock::new(
            "2030-01-01T00:00:00Z".parse().expect("a time"),
        ));
        let config = SimConfig {
            password: "pw".into(),
            ..SimConfig::default()
        };
        let sim = Simulator::new(config, clock);
        sim.report_to(&sims, "ns/vc1");
        assert_eq!(sim.handle(&login("pw"), None, "test").await.status, 200);
        assert_eq!(sim.handle(&login("bad"), None, "test").await.status, 500);
        assert_eq!(sim.handle("not xml", None, "test").await.status, 500);
        let text = metrics.render(Format::Classic);
        let ok = r#"infrasim_vsphere_requests_total{vcenter="ns/vc1",method="Login",fault=""} 1"#;
        assert!(text.contains(ok), "{text}");
        let refused = r#"infrasim_vsphere_requests_total{vcenter="ns/vc1",method="Login",fault="InvalidLogin"} 1"#;
        assert!(text.contains(refused), "{text}");
        assert!(text.contains(r#"method="",fault=""#), "{text}");
        assert_eq!(
            line(&text, r#"infrasim_vsphere_sessions{vcenter="ns/vc1"}"#),
            Some(r#"infrasim_vsphere_sessions{vcenter="ns/vc1"} 1"#)
        );
        // The default inventory's four VMs, powered on.
        assert_eq!(
            line(
                &text,
                r#"infrasim_vsphere_vms{vcenter="ns/vc1",power_state="poweredOn"}"#
            ),
            Some(r#"infrasim_vsphere_vms{vcenter="ns/vc1",power_state="poweredOn"} 4"#)
        );
        assert!(text.contains(r#"infrasim_vsphere_tasks{vcenter="ns/vc1",state="running"} 0"#));
        let none = r#"infrasim_vsphere_injected_faults{vcenter="ns/vc1",effect="fault"} 0"#;
        assert!(text.contains(none), "{text}");
        // Rules in force show, by what they do, until they are taken back.
        let rules = crate::fault_injection::Injection::parse_rules(
            r#"[{"method": "PowerOnVM_Task", "fault": "SystemError"},
                {"method": "*", "type": "HostSystem", "delayMs": 250},
                {"method": "Destroy_Task", "fault": "InvalidState", "delayMs": 10}]"#,
        )
        .expect("rules");
        sim.set_injections(rules);
        let text = metrics.render(Format::Classic);
        let faults = r#"infrasim_vsphere_injected_faults{vcenter="ns/vc1",effect="fault"} 2"#;
        assert!(text.contains(faults), "{text}");
        let delays = r#"infrasim_vsphere_injected_faults{vcenter="ns/vc1",effect="delay"} 1"#;
        assert!(text.contains(delays), "{text}");
        sim.set_injections(Vec::new());
        let text = metrics.render(Format::Classic);
        assert!(text.contains(none), "{text}");
        // A simulator that is gone leaves the scrape.
        drop(sim);
        let text = metrics.render(Format::Classic);
        assert!(!text.contains("infrasim_vsphere_sessions{"), "{text}");
    }
}
