//! Which objects a list, a watch or a collection delete selects: the request's namespace,
//! name, label selector and field selector.

use crate::context::Ctx;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use infrasim_store::StoredObject;

/// Which objects a list or watch selects: namespace, labels, fields.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn from_ctx(ctx: &Ctx) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(ctx.query.get("labelSelector").unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse_for(
            ctx.query.get("fieldSelector").unwrap_or(""),
            &ctx.info.kind,
            ctx.info.stored_as.map(|s| s.field_label),
        )
        .map_err(ApiError::bad_request)?;
        Ok(Filter {
            namespace: ctx.path.namespace.clone().filter(|_| ctx.info.namespaced),
            name: ctx.path.name.clone(),
            labels,
            fields,
        })
    }

    pub fn matches(&self, object: &StoredObject) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| *object.meta.namespace == *ns)
            && self.name.as_deref().is_none_or(|n| *object.meta.name == *n)
            && self.labels.matches(&object.meta.labels)
            && self.fields.matches(object)
    }

    pub fn has_selectors(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty()
    }
}
