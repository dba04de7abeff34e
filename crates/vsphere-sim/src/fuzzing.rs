//! The SOAP decoding surface in one function, for the fuzz target (`fuzz/`) and for a test
//! that runs it over seeds and mutations in every CI run: the envelope parser, then the full
//! dispatch of a logged-in session. Nothing may panic.

use crate::{SimConfig, Simulator};
use std::sync::OnceLock;

struct Harness {
    runtime: tokio::runtime::Runtime,
    sim: Simulator,
    cookie: String,
}

fn harness() -> Option<&'static Harness> {
    static HARNESS: OnceLock<Option<Harness>> = OnceLock::new();
    HARNESS
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
            let sim = Simulator::new(
                SimConfig {
                    password: "fuzz".into(),
                    ..SimConfig::default()
                },
                infrasim_clock::SystemClock::shared(),
            );
            let login = r#"<Envelope><Body><Login><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>fuzz</password></Login></Body></Envelope>"#;
            let reply = runtime.block_on(sim.handle(login, None, "fuzz"));
            let cookie = reply.set_cookie?;
            Some(Harness { runtime, sim, cookie })
        })
        .as_ref()
}

/// Feeds one input through the SOAP parser and the simulator.
pub fn exercise(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = crate::soap::parse(&text);
    let Some(h) = harness() else { return };
    h.runtime.block_on(async {
        // WaitForUpdates may wait: bound it, the fuzzer only cares that nothing panics.
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(20),
            h.sim.handle(&text, Some(&h.cookie), "fuzz"),
        )
        .await;
    });
}

#[cfg(test)]
mod tests {
    use super::exercise;

    fn call(method: &str, this: &str, args: &str) -> Vec<u8> {
        format!(r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><{method} xmlns="urn:vim25">{this}{args}</{method}></soapenv:Body></soapenv:Envelope>"#).into_bytes()
    }

    #[test]
    fn seeds_and_mutations_do_not_panic() {
        assert!(super::harness().is_some(), "the harness logs in");
        let vm = r#"<_this type="VirtualMachine">vm-13</_this>"#;
        let pc = r#"<_this type="PropertyCollector">propertyCollector</_this>"#;
        let seeds = vec![
            call(
                "RetrieveServiceContent",
                r#"<_this type="ServiceInstance">ServiceInstance</_this>"#,
                "",
            ),
            call("Fetch", vm, "<prop>config.hardware.device</prop>"),
            call(
                "RetrievePropertiesEx",
                pc,
                r#"<specSet><propSet><type>ManagedEntity</type><all>true</all></propSet><objectSet><obj type="Folder">group-d1</obj><selectSet xsi:type="TraversalSpec"><name>t</name><type>Folder</type><path>childEntity</path><selectSet><name>t</name></selectSet></selectSet></objectSet></specSet><options><maxObjects>2</maxObjects></options>"#,
            ),
            call(
                "CloneVM_Task",
                vm,
                r#"<folder type="Folder">group-v3</folder><name>x</name><spec><location><pool type="ResourcePool">resgroup-99</pool></location><powerOn>true</powerOn><config><numCPUs>-1</numCPUs><extraConfig><key>a</key><value xsi:type="xsd:string">b</value></extraConfig><deviceChange><operation>add</operation><device xsi:type="VirtualVmxnet3"><key>-1</key><backing xsi:type="VirtualEthernetCardNetworkBackingInfo"><deviceName>VM Network</deviceName></backing></device></deviceChange></config></spec>"#,
            ),
            call(
                "ReconfigVM_Task",
                vm,
                "<spec><memoryMB>abc</memoryMB></spec>",
            ),
            call(
                "CreateSnapshot_Task",
                vm,
                "<name>s</name><memory>false</memory><quiesce>false</quiesce>",
            ),
            call("PowerOffVM_Task", vm, ""),
            call("Destroy_Task", vm, ""),
            call(
                "WaitForUpdatesEx",
                pc,
                "<version>zz</version><options><maxWaitSeconds>0</maxWaitSeconds></options>",
            ),
            call(
                "QueryEvents",
                r#"<_this type="EventManager">EventManager</_this>"#,
                "<filter><maxCount>1</maxCount></filter>",
            ),
            b"<?xml version='1.0'?><!DOCTYPE x [<!ENTITY a 'aaaa'>]><x>&a;</x>".to_vec(),
        ];
        for seed in &seeds {
            exercise(seed);
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..300 {
            let mut input = seeds[(next() % seeds.len() as u64) as usize].clone();
            for _ in 0..(next() % 6) {
                if input.is_empty() {
                    break;
                }
                let i = (next() % input.len() as u64) as usize;
                match next() % 3 {
                    0 => input[i] = next() as u8,
                    1 => input.truncate(i),
                    _ => input.insert(i, b"<>/\"= "[(next() % 6) as usize]),
                }
            }
            exercise(&input);
        }
    }
}
