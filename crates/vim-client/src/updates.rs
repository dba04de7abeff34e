//! Change notification: a PropertyCollector filter over every object of a type (through a
//! container view) and WaitForUpdatesEx, so a controller keeps a copy of what it watches
//! and hears of changes instead of listing again.

use crate::xml::{escape, Moref, ObjectContent, Val};
use crate::{Client, Error, Result};

/// What one object's update says.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectUpdate {
    /// The object is new to the filter (or the filter is new): all its watched properties.
    Enter(ObjectContent),
    /// Properties that changed: assigned values, and removed ones as `None`.
    Modify(Moref, Vec<(String, Option<Val>)>),
    /// The object left (was destroyed, or moved out of the view).
    Leave(Moref),
}

/// One WaitForUpdatesEx answer.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateSet {
    /// Where the next wait starts.
    pub version: String,
    pub objects: Vec<ObjectUpdate>,
}

/// A filter watching every object of a type; destroyed with its session.
#[derive(Debug, Clone)]
pub struct Watch {
    pub view: Moref,
    pub filter: Moref,
}

impl Client {
    /// Watches `paths` of every object of type `ty` under the root folder.
    pub async fn watch(&self, ty: &str, paths: &[&str]) -> Result<Watch> {
        let c = self.content();
        let view = self.container_view(ty).await?;
        let filter = self
            .call(&format!(
                r#"<CreateFilter xmlns="urn:vim25">{}<spec><propSet><type>{}</type>{}</propSet>{}</spec><partialUpdates>false</partialUpdates></CreateFilter>"#,
                c.property_collector.element("_this"),
                escape(ty),
                crate::ops::path_set(paths),
                crate::ops::through_view(&view)
            ))
            .await?
            .returnval("CreateFilter")?
            .moref()
            .cloned()
            .ok_or_else(|| Error::Answer("CreateFilter returned no filter".into()))?;
        Ok(Watch { view, filter })
    }

    /// The changes after `version` ("" for everything), waiting up to `max_wait_seconds` for
    /// one; `None` when none came in that time.
    pub async fn wait_for_updates(
        &self,
        version: &str,
        max_wait_seconds: u32,
    ) -> Result<Option<UpdateSet>> {
        let answer = self
            .call(&format!(
                r#"<WaitForUpdatesEx xmlns="urn:vim25">{}<version>{}</version><options><maxWaitSeconds>{max_wait_seconds}</maxWaitSeconds></options></WaitForUpdatesEx>"#,
                self.content().property_collector.element("_this"),
                escape(version)
            ))
            .await?;
        Ok(answer.returnvals().first().map(update_set))
    }
}

fn update_set(set: &Val) -> UpdateSet {
    let version = set
        .field("version")
        .and_then(Val::text)
        .unwrap_or("")
        .to_string();
    let mut objects = Vec::new();
    for filter_set in fields(set, "filterSet") {
        for update in fields(filter_set, "objectSet") {
            if let Some(u) = object_update(update) {
                objects.push(u);
            }
        }
    }
    UpdateSet { version, objects }
}

/// Every field of `val` named `name` (repeated fields are how arrays come in data objects).
fn fields<'a>(val: &'a Val, name: &'a str) -> impl Iterator<Item = &'a Val> + 'a {
    let all = match val {
        Val::Object(fields) => fields.as_slice(),
        _ => &[],
    };
    all.iter().filter(move |(n, _)| n == name).map(|(_, v)| v)
}

fn object_update(update: &Val) -> Option<ObjectUpdate> {
    let obj = update.field("obj")?.moref()?.clone();
    let changes: Vec<(String, Option<Val>)> = fields(update, "changeSet")
        .filter_map(|c| {
            let name = c.field("name")?.text()?.to_string();
            let value = match c.field("op").and_then(Val::text) {
                Some("remove") | Some("indirectRemove") => None,
                _ => Some(c.field("val").cloned().unwrap_or(Val::Text(String::new()))),
            };
            Some((name, value))
        })
        .collect();
    match update.field("kind")?.text()? {
        "enter" => Some(ObjectUpdate::Enter(ObjectContent {
            obj,
            props: changes
                .into_iter()
                .filter_map(|(n, v)| Some((n, v?)))
                .collect(),
        })),
        "leave" => Some(ObjectUpdate::Leave(obj)),
        _ => Some(ObjectUpdate::Modify(obj, changes)),
    }
}

impl ObjectContent {
    /// Applies a modification: assigned properties replace, removed ones go.
    pub fn apply(&mut self, changes: &[(String, Option<Val>)]) {
        for (name, value) in changes {
            self.props.retain(|(n, _)| n != name);
            if let Some(v) = value {
                self.props.push((name.clone(), v.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modifications_replace_and_remove_properties() {
        let mut vm = ObjectContent {
            obj: Moref::new("VirtualMachine", "vm-1"),
            props: vec![
                ("name".into(), Val::Text("a".into())),
                ("guest.ipAddress".into(), Val::Text("10.0.0.1".into())),
            ],
        };
        vm.apply(&[
            ("name".into(), Some(Val::Text("b".into()))),
            ("guest.ipAddress".into(), None),
        ]);
        assert_eq!(vm.text("name"), "b");
        assert_eq!(vm.prop("guest.ipAddress"), None);
    }
}
