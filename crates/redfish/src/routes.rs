//! The resources a path names, and the methods each allows. Paths are matched after
//! `/redfish/v1`, with or without a trailing slash.

use http::Method;

/// A resource (or action) of the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/redfish`: the versions the service speaks.
    Versions,
    Root,
    /// `/redfish/v1/odata`: the OData service document.
    OData,
    /// `/redfish/v1/$metadata`: the CSDL naming the schemas the service uses.
    Metadata,
    Systems,
    System(String),
    Reset(String),
    Processors(String),
    Processor(String, String),
    Memories(String),
    Memory(String, String),
    Storages(String),
    Storage(String, String),
    Nics(String),
    Nic(String, String),
    Bios(String),
    BiosSettings(String),
    BiosReset(String),
    SecureBoot(String),
    Managers,
    Manager(String),
    ManagerReset(String),
    Medias(String),
    Media(String, String),
    InsertMedia(String, String),
    EjectMedia(String, String),
    Chassis,
    OneChassis(String),
    /// A chassis's drives (where DSP0266 places drives; a system's storage links to them).
    Drives(String),
    Drive(String, String),
    SessionService,
    Sessions,
    Session(String),
    AccountService,
    Accounts,
    Account(String),
    Roles,
    Role(String),
    UpdateService,
    Firmwares,
    Firmware(String),
    TaskService,
    Tasks,
}

impl Route {
    /// The route `path` names, if any.
    pub fn parse(path: &str) -> Option<Route> {
        let path = path.trim_end_matches('/');
        if path == "/redfish" {
            return Some(Route::Versions);
        }
        let rest = path.strip_prefix(crate::ROOT)?;
        if !rest.is_empty() && !rest.starts_with('/') {
            return None;
        }
        let segs: Vec<String> = rest
            .split('/')
            .filter(|s| !s.is_empty())
            .map(percent_decode)
            .collect();
        let s: Vec<&str> = segs.iter().map(String::as_str).collect();
        Some(match s.as_slice() {
            [] => Route::Root,
            ["odata"] => Route::OData,
            ["$metadata"] => Route::Metadata,
            ["Systems", ..] => system_route(&s[1..])?,
            ["Managers", ..] => manager_route(&s[1..])?,
            ["Chassis"] => Route::Chassis,
            ["Chassis", id] => Route::OneChassis(id.to_string()),
            ["Chassis", id, "Drives"] => Route::Drives(id.to_string()),
            ["Chassis", id, "Drives", d] => Route::Drive(id.to_string(), d.to_string()),
            ["SessionService"] => Route::SessionService,
            // DSP0266: a collection also takes a POST at its `Members` property's URI.
            ["SessionService", "Sessions"] | ["SessionService", "Sessions", "Members"] => {
                Route::Sessions
            }
            ["SessionService", "Sessions", id] => Route::Session(id.to_string()),
            ["AccountService"] => Route::AccountService,
            ["AccountService", "Accounts"] | ["AccountService", "Accounts", "Members"] => {
                Route::Accounts
            }
            ["AccountService", "Accounts", id] => Route::Account(id.to_string()),
            ["AccountService", "Roles"] => Route::Roles,
            ["AccountService", "Roles", id] => Route::Role(id.to_string()),
            ["UpdateService"] => Route::UpdateService,
            ["UpdateService", "FirmwareInventory"] => Route::Firmwares,
            ["UpdateService", "FirmwareInventory", id] => Route::Firmware(id.to_string()),
            ["TaskService"] => Route::TaskService,
            ["TaskService", "Tasks"] => Route::Tasks,
            _ => return None,
        })
    }

    /// The methods the resource allows (HEAD with every GET).
    pub fn allows(&self) -> &'static [Method] {
        use Route::*;
        const GET: &[Method] = &[Method::GET, Method::HEAD];
        const PATCH: &[Method] = &[Method::GET, Method::HEAD, Method::PATCH];
        const POST: &[Method] = &[Method::GET, Method::HEAD, Method::POST];
        const DELETE: &[Method] = &[Method::GET, Method::HEAD, Method::DELETE];
        const ACCOUNT: &[Method] = &[Method::GET, Method::HEAD, Method::PATCH, Method::DELETE];
        const ACTION: &[Method] = &[Method::POST];
        match self {
            Reset(_) | BiosReset(_) | ManagerReset(_) | InsertMedia(..) | EjectMedia(..) => ACTION,
            System(_) | BiosSettings(_) | SecureBoot(_) | Media(..) | SessionService
            | AccountService => PATCH,
            Sessions | Accounts => POST,
            Session(_) => DELETE,
            Account(_) => ACCOUNT,
            _ => GET,
        }
    }

    /// Whether a request may reach the resource without credentials (DSP0266: the service
    /// root, the OData documents and the login itself).
    pub fn is_open(&self, method: &Method) -> bool {
        matches!(
            self,
            Route::Versions | Route::Root | Route::OData | Route::Metadata
        ) || (*self == Route::Sessions && method == Method::POST)
    }
}

fn system_route(s: &[&str]) -> Option<Route> {
    let own = |x: &&str| x.to_string();
    Some(match s {
        [] => Route::Systems,
        [id] => Route::System(own(id)),
        [id, "Actions", "ComputerSystem.Reset"] => Route::Reset(own(id)),
        [id, "Processors"] => Route::Processors(own(id)),
        [id, "Processors", p] => Route::Processor(own(id), own(p)),
        [id, "Memory"] => Route::Memories(own(id)),
        [id, "Memory", m] => Route::Memory(own(id), own(m)),
        [id, "Storage"] => Route::Storages(own(id)),
        [id, "Storage", st] => Route::Storage(own(id), own(st)),
        [id, "EthernetInterfaces"] => Route::Nics(own(id)),
        [id, "EthernetInterfaces", n] => Route::Nic(own(id), own(n)),
        [id, "Bios"] => Route::Bios(own(id)),
        [id, "Bios", "Settings"] => Route::BiosSettings(own(id)),
        [id, "Bios", "Actions", "Bios.ResetBios"] => Route::BiosReset(own(id)),
        [id, "SecureBoot"] => Route::SecureBoot(own(id)),
        _ => return None,
    })
}

fn manager_route(s: &[&str]) -> Option<Route> {
    let own = |x: &&str| x.to_string();
    Some(match s {
        [] => Route::Managers,
        [id] => Route::Manager(own(id)),
        [id, "Actions", "Manager.Reset"] => Route::ManagerReset(own(id)),
        [id, "VirtualMedia"] => Route::Medias(own(id)),
        [id, "VirtualMedia", m] => Route::Media(own(id), own(m)),
        [id, "VirtualMedia", m, "Actions", "VirtualMedia.InsertMedia"] => {
            Route::InsertMedia(own(id), own(m))
        }
        [id, "VirtualMedia", m, "Actions", "VirtualMedia.EjectMedia"] => {
            Route::EjectMedia(own(id), own(m))
        }
        _ => return None,
    })
}

/// A path segment with its `%XX` escapes decoded (a system named with a space).
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_resources_with_or_without_a_slash() {
        assert_eq!(Route::parse("/redfish/v1/"), Some(Route::Root));
        assert_eq!(Route::parse("/redfish/v1"), Some(Route::Root));
        assert_eq!(Route::parse("/redfish"), Some(Route::Versions));
        assert_eq!(
            Route::parse("/redfish/v1/Systems/abc/Actions/ComputerSystem.Reset"),
            Some(Route::Reset("abc".into()))
        );
        assert_eq!(
            Route::parse("/redfish/v1/Managers/m/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia/"),
            Some(Route::EjectMedia("m".into(), "Cd".into()))
        );
        assert_eq!(
            Route::parse("/redfish/v1/Systems/a%20b"),
            Some(Route::System("a b".into()))
        );
        assert_eq!(Route::parse("/redfish/v1/Nothing"), None);
        assert_eq!(Route::parse("/redfish/v2"), None);
        assert_eq!(Route::parse("/redfish/v1x"), None);
        assert_eq!(Route::parse("/redfish/v1Systems"), None);
    }

    #[test]
    fn only_the_root_documents_and_the_login_are_open() {
        assert!(Route::Root.is_open(&Method::GET));
        assert!(Route::Sessions.is_open(&Method::POST));
        assert!(!Route::Sessions.is_open(&Method::GET));
        assert!(!Route::Systems.is_open(&Method::GET));
    }
}
