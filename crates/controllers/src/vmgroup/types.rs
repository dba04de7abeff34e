//! `VmGroup` (`vm.codeconnect.vmworld.com/v1alpha1`, short name `vg`): N VMs of one shape
//! from one template on one vCenter. The Code Connect sample (`cpu`, `memory` in GiB,
//! `replicas`, `template`) applies as written; placement, the vCenter reference and the
//! status are ours, all optional.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use infrasim_controller_runtime::conditions::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "vm.codeconnect.vmworld.com";

/// The Secret a group uses when it names none.
pub const DEFAULT_SECRET: &str = "vcenter";

/// A group of identical VMs cloned from a template.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vm.codeconnect.vmworld.com",
    version = "v1alpha1",
    kind = "VmGroup",
    namespaced,
    shortname = "vg",
    status = "VmGroupStatus",
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}"#,
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(name = "Template", type_ = "string", json_path = ".spec.template"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VmGroupSpec {
    /// CPUs per VM.
    pub cpu: i64,
    /// Memory per VM: a number of GiB (the sample's `1`) or a quantity (`1536Mi`, `4Gi`).
    pub memory: IntOrString,
    pub replicas: i64,
    /// The name of the VM or template to clone.
    pub template: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// The vCenter: a Secret or a VCenterSimulator in the group's namespace; the Secret
    /// `vcenter` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcenter_ref: Option<VCenterRef>,
}

/// Where the VMs go (the runtime's, shared with the CAPV stand-in).
pub use infrasim_controller_runtime::placement::Placement;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VCenterRef {
    /// A Secret with the vCenter's `server`, `username`, `password` and `thumbprint` or
    /// `caBundle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// A VCenterSimulator (of the vcsim controller): its status says where and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulator: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmGroupStatus {
    /// VMs that exist for the group.
    #[serde(default)]
    pub replicas: i64,
    /// VMs powered on with an IP address.
    #[serde(default)]
    pub ready_replicas: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vms: Vec<VmStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmStatus {
    pub name: String,
    /// The VM's managed object id (`vm-42`).
    pub mo_ref: String,
    pub power_state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
}

impl VmGroupSpec {
    /// The memory per VM in MiB: a bare number is GiB (the sample's meaning); a quantity
    /// is read with its suffix and must be a whole number of MiB.
    pub fn memory_mb(&self) -> Result<i64, String> {
        match &self.memory {
            IntOrString::Int(gib) if *gib > 0 => Ok(i64::from(*gib) * 1024),
            IntOrString::Int(gib) => Err(format!("memory {gib}: must be at least 1 (GiB)")),
            IntOrString::String(q) => quantity_mb(q),
        }
    }
}

/// `4Gi`, `1536Mi`, `2G`, `1`: MiB.
fn quantity_mb(q: &str) -> Result<i64, String> {
    let q = q.trim();
    let split = q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len());
    let (digits, suffix) = q.split_at(split);
    let n: i64 = digits
        .parse()
        .map_err(|_| format!("memory {q:?} is not a quantity such as 4Gi or 1536Mi"))?;
    let bytes: i128 = match suffix {
        "" => return Ok(n * 1024),
        "Ki" => i128::from(n) << 10,
        "Mi" => i128::from(n) << 20,
        "Gi" => i128::from(n) << 30,
        "Ti" => i128::from(n) << 40,
        "k" => i128::from(n) * 1_000,
        "M" => i128::from(n) * 1_000_000,
        "G" => i128::from(n) * 1_000_000_000,
        "T" => i128::from(n) * 1_000_000_000_000,
        _ => return Err(format!("memory {q:?}: unknown suffix {suffix:?}")),
    };
    let mib = 1i128 << 20;
    if bytes <= 0 || bytes % mib != 0 {
        return Err(format!("memory {q:?} is not a whole number of MiB"));
    }
    i64::try_from(bytes / mib).map_err(|_| format!("memory {q:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(memory: IntOrString) -> VmGroupSpec {
        VmGroupSpec {
            memory,
            ..VmGroupSpec::default()
        }
    }

    #[test]
    fn memory_is_gib_as_a_number_and_read_with_its_suffix_as_a_quantity() {
        assert_eq!(spec(IntOrString::Int(1)).memory_mb(), Ok(1024));
        assert_eq!(
            spec(IntOrString::String("4Gi".into())).memory_mb(),
            Ok(4096)
        );
        assert_eq!(
            spec(IntOrString::String("1536Mi".into())).memory_mb(),
            Ok(1536)
        );
        assert_eq!(spec(IntOrString::String("2".into())).memory_mb(), Ok(2048));
        assert!(
            spec(IntOrString::String("1G".into())).memory_mb().is_err(),
            "not whole MiB"
        );
        assert!(spec(IntOrString::String("lots".into()))
            .memory_mb()
            .is_err());
        assert!(spec(IntOrString::Int(0)).memory_mb().is_err());
    }

    #[test]
    fn the_sample_reads_as_written() {
        let sample: VmGroup = serde_yaml::from_str(
            "apiVersion: vm.codeconnect.vmworld.com/v1alpha1\nkind: VmGroup\nmetadata:\n  name: vmgroup-sample\nspec:\n  cpu: 4\n  memory: 1\n  replicas: 3\n  template: vm-template\n",
        )
        .unwrap();
        assert_eq!(sample.spec.cpu, 4);
        assert_eq!(sample.spec.memory_mb(), Ok(1024));
        assert_eq!(sample.spec.template, "vm-template");
    }
}
