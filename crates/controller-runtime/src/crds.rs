//! How a controller installs its CustomResourceDefinitions into a management plane: applied
//! server-side as their owner, then awaited until Established; a definition marked
//! [`ONLY_IF_ABSENT`] yields to one the plane already has from someone else.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use std::time::Duration;

/// Marks a CRD installed only where the plane lacks one of its name: metal3's own
/// BareMetalHost CRD, where metal3 runs, is kept as it is.
pub const ONLY_IF_ABSENT: &str = "infrasim.dev/only-if-absent";

/// Why CRDs could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("applying CRD {name}: {source}")]
    Apply { name: String, source: kube::Error },
    #[error("CRD {0} did not become Established")]
    NotEstablished(String),
}

/// Applies `crds` (server-side, as their owner) and waits until each is Established.
pub async fn install(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> Result<(), InstallError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        if another_owns(&api, crd).await {
            tracing::info!(crd = %name, "kept the plane's own definition");
            continue;
        }
        api.patch(
            &name,
            &PatchParams::apply("infrasim-crds").force(),
            &Patch::Apply(crd),
        )
        .await
        .map_err(|source| InstallError::Apply {
            name: name.clone(),
            source,
        })?;
    }
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut established = false;
        for _ in 0..200 {
            let current = api.get_opt(&name).await.ok().flatten();
            established = current
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if !established {
            return Err(InstallError::NotEstablished(name));
        }
    }
    Ok(())
}

/// Whether `crd` is installed only where absent and the plane has another definition of it
/// (one without our mark).
async fn another_owns(api: &Api<CustomResourceDefinition>, crd: &CustomResourceDefinition) -> bool {
    let marked = |c: &CustomResourceDefinition| {
        c.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ONLY_IF_ABSENT))
    };
    if !marked(crd) {
        return false;
    }
    let name = crd.metadata.name.clone().unwrap_or_default();
    matches!(api.get_opt(&name).await, Ok(Some(existing)) if !marked(&existing))
}
