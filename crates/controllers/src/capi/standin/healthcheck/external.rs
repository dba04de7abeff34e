//! External remediation (`spec.remediation.templateRef`): a failed Machine is handed to a
//! controller outside Cluster API by creating a remediation request from the template, named
//! after the Machine and owned by it; the request goes once the Machine is healthy again.

use super::super::objects::{clone_template, owner_ref, plural, template_api, CloneSpec};
use super::super::{Error, Reconciler};
use crate::capi::core::{Machine, MachineHealthCheck, TemplateRef};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use kube::{Api, ResourceExt};
use std::collections::BTreeMap;

/// The check's remediation template, if it names one.
pub fn template_ref(mhc: &MachineHealthCheck) -> Option<TemplateRef> {
    let t = mhc.spec.remediation.as_ref()?.get("templateRef")?;
    serde_json::from_value::<TemplateRef>(t.clone())
        .ok()
        .filter(|t| !t.kind.is_empty() && !t.name.is_empty())
}

/// Creates `m`'s remediation request from `template` (left alone if it exists).
pub async fn request(
    r: &Reconciler<MachineHealthCheck>,
    m: &Machine,
    template: &TemplateRef,
) -> Result<(), Error> {
    let ns = m.namespace().unwrap_or_default();
    let client = r.core.ctx.client.clone();
    let source = template_api(&client, &ns, template)
        .get(&template.name)
        .await?;
    let labels = BTreeMap::from([(
        crate::capi::CLUSTER_NAME_LABEL.to_string(),
        m.spec.cluster_name.clone(),
    )]);
    let name = m.name_any();
    let spec = CloneSpec {
        name: &name,
        labels,
        annotations: BTreeMap::new(),
        owner: Some(owner_ref(m, false)),
        spec_overrides: None,
    };
    clone_template(&client, &ns, &source, spec).await?;
    Ok(())
}

/// Deletes `m`'s remediation request, if there is one.
pub async fn withdraw(
    r: &Reconciler<MachineHealthCheck>,
    m: &Machine,
    template: &TemplateRef,
) -> Result<(), Error> {
    let kind = template
        .kind
        .strip_suffix("Template")
        .unwrap_or(&template.kind);
    let (group, version) = template
        .api_version
        .split_once('/')
        .unwrap_or(("", &template.api_version));
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &plural(kind),
    );
    let ns = m.namespace().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(r.core.ctx.client.clone(), &ns, &resource);
    match api.delete(&m.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
