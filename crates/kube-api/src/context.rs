//! What every resource verb gets: the request's [`Ctx`], and how one stored object becomes
//! the response (JSON, a one-row Table, or PartialObjectMetadata, as the client asked).

use crate::auth::Identity;
use crate::http::{json_bytes, json_value, Format, HandlerResult};
use crate::request::{Query, ResourcePath};
use crate::resources::ResourceInfo;
use crate::state::State;
use crate::status::ApiError;
use crate::table::{self, IncludeObject};
use infrasim_store::{ObjectKey, StoredObject};
use serde_json::json;
use std::sync::Arc;

/// Everything a resource handler needs about one request.
pub(crate) struct Ctx {
    pub state: Arc<State>,
    pub info: Arc<ResourceInfo>,
    pub path: ResourcePath,
    pub query: Query,
    pub format: Format,
    pub headers: http::HeaderMap,
    /// Who is asking (after impersonation).
    pub identity: Identity,
}

impl Ctx {
    /// The namespace of the request (empty for cluster-scoped resources).
    pub fn namespace(&self) -> &str {
        self.path.namespace.as_deref().unwrap_or("")
    }

    /// This request's context for one object of the collection it names (each object of a
    /// DeleteCollection is admitted as its own delete).
    pub fn naming(&self, name: &str) -> Ctx {
        let mut path = self.path.clone();
        path.name = Some(name.to_string());
        Ctx {
            state: self.state.clone(),
            info: self.info.clone(),
            path,
            query: self.query.clone(),
            format: self.format,
            headers: self.headers.clone(),
            identity: self.identity.clone(),
        }
    }

    /// The key of the object the path names.
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(self.namespace(), self.path.name.as_deref().unwrap_or(""))
    }

    /// The object the path names, stored and decoded; 404 if there is none.
    pub fn stored(&self) -> Result<(Arc<StoredObject>, serde_json::Value), ApiError> {
        let name = self.path.name.as_deref().unwrap_or("");
        let current = self
            .state
            .group
            .get(&self.info.store_key, &self.key())
            .ok_or_else(|| ApiError::object_not_found(&self.info.group, &self.info.plural, name))?;
        let value = current
            .to_value()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok((current, value))
    }

    /// A store error as the API reports it for this resource.
    pub fn store_error(&self, e: infrasim_store::StoreError) -> ApiError {
        ApiError::from_store(e, &self.info.group, &self.info.plural)
    }

    /// Objects computed for this request rather than stored (ComponentStatuses, resource
    /// metrics) as a Table, when the client asked for one; `None` otherwise.
    pub fn computed_table(&self, items: &[serde_json::Value]) -> Option<HandlerResult> {
        let Format::Table(api_version) = self.format else {
            return None;
        };
        let include = match IncludeObject::parse(self.query.get("includeObject")) {
            Ok(include) => include,
            Err(e) => return Some(Err(ApiError::bad_request(e))),
        };
        let now = self.state.clock.now();
        let rows = items
            .iter()
            .map(|v| table::row(&self.info, v, include, now))
            .collect();
        let mut t = table::table(&self.info, rows, json!({}), true);
        t["apiVersion"] = json!(api_version);
        Some(Ok(json_value(200, &t)))
    }

    /// One object as the response, with status `code`.
    pub fn render(&self, object: &StoredObject, code: u16) -> HandlerResult {
        match &self.format {
            Format::Table(api_version) => {
                let include = IncludeObject::parse(self.query.get("includeObject"))
                    .map_err(ApiError::bad_request)?;
                let value = object
                    .to_value()
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                let row = table::row(&self.info, &value, include, self.state.clock.now());
                let mut t = table::table(
                    &self.info,
                    vec![row],
                    json!({"resourceVersion": object.meta.resource_version.to_string()}),
                    true,
                );
                t["apiVersion"] = json!(api_version);
                Ok(json_value(code, &t))
            }
            Format::Metadata(api_version) => {
                let value = object
                    .to_value()
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                Ok(json_value(
                    code,
                    &crate::http::partial_metadata(&value, api_version),
                ))
            }
            _ => Ok(json_bytes(code, self.info.served_bytes(&object.bytes()))),
        }
    }
}
