//! Storage policies (vCenter's Storage Policy Based Management, `/pbm/sdk`), as CAPV's clone
//! reads them through govmomi's `pbm` client: a policy's ID by its name, and which datastores
//! satisfy it. PBM is a SOAP service of its own (namespace `urn:pbm`) that takes the vim
//! session: its key goes in the SOAP header (`vcSessionCookie`), as govmomi sends it.

use crate::xml::{escape, Answer, Val};
use crate::{Client, Error, Moref, Result};
use bytes::Bytes;
use http_body_util::Full;

impl Client {
    /// The ID of the storage policy (a requirement profile) named `name`; `None` when the
    /// vCenter has none of that name.
    pub async fn storage_policy_id(&self, name: &str) -> Result<Option<String>> {
        let manager = r#"<_this type="PbmProfileProfileManager">ProfileManager</_this>"#;
        let ids = self
            .pbm(&format!(
                r#"<PbmQueryProfile xmlns="urn:pbm">{manager}<resourceType><resourceType>STORAGE</resourceType></resourceType><profileCategory>REQUIREMENT</profileCategory></PbmQueryProfile>"#
            ))
            .await?;
        let ids: Vec<String> = ids
            .returnvals()
            .iter()
            .filter_map(|v| v.field("uniqueId").and_then(Val::text).map(str::to_string))
            .collect();
        if ids.is_empty() {
            return Ok(None);
        }
        let wanted: String = ids
            .iter()
            .map(|id| {
                format!(
                    "<profileIds><uniqueId>{}</uniqueId></profileIds>",
                    escape(id)
                )
            })
            .collect();
        let profiles = self
            .pbm(&format!(
                r#"<PbmRetrieveContent xmlns="urn:pbm">{manager}{wanted}</PbmRetrieveContent>"#
            ))
            .await?;
        Ok(profiles
            .returnvals()
            .iter()
            .find(|p| p.field("name").and_then(Val::text) == Some(name))
            .and_then(|p| p.field("profileId"))
            .and_then(|id| id.field("uniqueId"))
            .and_then(Val::text)
            .map(str::to_string))
    }

    /// The datastores among `hubs` that satisfy the storage policy `policy` (PBM's placement
    /// solver: a hub without an error in its result is compatible).
    pub async fn compatible_datastores(&self, policy: &str, hubs: &[Moref]) -> Result<Vec<Moref>> {
        let searched: String = hubs
            .iter()
            .map(|h| {
                format!(
                    "<hubsToSearch><hubType>{}</hubType><hubId>{}</hubId></hubsToSearch>",
                    escape(&h.ty),
                    escape(&h.value)
                )
            })
            .collect();
        let answer = self
            .pbm(&format!(
                r#"<PbmCheckRequirements xmlns="urn:pbm"><_this type="PbmPlacementSolver">placementSolver</_this>{searched}<placementSubjectRequirement xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="PbmPlacementCapabilityProfileRequirement"><profileId><uniqueId>{}</uniqueId></profileId></placementSubjectRequirement></PbmCheckRequirements>"#,
                escape(policy)
            ))
            .await?;
        Ok(answer
            .returnvals()
            .iter()
            .filter(|r| r.field("error").is_none())
            .filter_map(|r| {
                let hub = r.field("hub")?;
                let ty = hub.field("hubType")?.text()?;
                let id = hub.field("hubId")?.text()?;
                Some(Moref::new(ty, id))
            })
            .collect())
    }

    /// One PBM call with the vim session, logging in again once if the vCenter forgot it.
    async fn pbm(&self, body: &str) -> Result<Answer> {
        match self.pbm_post(body).await {
            Err(e) if e.fault_kind() == Some("NotAuthenticated") => {
                // A vim call that needs the session logs in again when it is gone (the
                // root folder's name: the cheapest such read); then PBM once more.
                let root = self.content().root_folder.clone();
                self.properties(&root, &["name"]).await?;
                self.pbm_post(body).await
            }
            other => other,
        }
    }

    async fn pbm_post(&self, body: &str) -> Result<Answer> {
        let cookie = self.session_cookie();
        // The header carries the session key (the cookie's value, unquoted).
        let key = cookie
            .as_deref()
            .and_then(|c| c.split_once('='))
            .map(|(_, v)| v.trim_matches('"').to_string())
            .unwrap_or_default();
        let vc_session = format!("<vcSessionCookie>{}</vcSessionCookie>", escape(&key));
        let envelope = crate::client::envelope(&vc_session, body);
        let mut request = http::Request::post(format!("{}/pbm/sdk", self.base()))
            .header(http::header::CONTENT_TYPE, "text/xml; charset=utf-8")
            .header("SOAPAction", "\"urn:pbm/2.0\"");
        if let Some(cookie) = cookie {
            request = request.header(http::header::COOKIE, cookie);
        }
        let request = request
            .body(Full::new(Bytes::from(envelope)))
            .map_err(|e| Error::Config(e.to_string()))?;
        let (status, _, bytes) = self.send(request).await?;
        crate::client::answer(&format!("{}/pbm/sdk", self.base()), status, &bytes)
    }
}
