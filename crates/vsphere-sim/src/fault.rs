//! vim25 faults: the type, its fields, and the message vCenter gives.

use crate::value::{Data, Moref};

/// A fault to return in a SOAP Fault's detail.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// The vim25 fault type (`InvalidLogin`).
    pub ty: &'static str,
    pub message: String,
    /// The fault's fields, as a data object body.
    pub fields: Data,
    /// A client fault (the request itself was wrong) rather than a server one.
    pub client: bool,
}

impl Fault {
    fn new(ty: &'static str, message: impl Into<String>) -> Self {
        Fault {
            ty,
            message: message.into(),
            fields: Data::new(ty),
            client: false,
        }
    }

    /// A fault of any vim25 type, fields to be added by the caller.
    pub fn new_pub(ty: &'static str, message: impl Into<String>) -> Self {
        Fault::new(ty, message)
    }

    /// `SystemError`: the server could not do what it was asked, `reason` saying why.
    pub fn system_error(reason: &str) -> Self {
        let mut f = Fault::new("SystemError", reason);
        f.fields.set("reason", reason);
        f
    }

    pub fn not_authenticated(object: &Moref) -> Self {
        let mut f = Fault::new("NotAuthenticated", "The session is not authenticated.");
        f.fields = f
            .fields
            .with("object", object.clone())
            .with("privilegeId", "System.View");
        f
    }

    pub fn invalid_login() -> Self {
        Fault::new(
            "InvalidLogin",
            "Cannot complete login due to an incorrect user name or password.",
        )
    }

    pub fn not_found(object: &Moref) -> Self {
        let mut f = Fault::new(
            "ManagedObjectNotFound",
            format!(
                "The object '{}:{}' has already been deleted or has not been completely created",
                object.ty, object.value
            ),
        );
        f.fields = f.fields.with("obj", object.clone());
        f
    }

    pub fn invalid_argument(property: &str) -> Self {
        let mut f = Fault::new(
            "InvalidArgument",
            format!("A specified parameter was not correct: {property}"),
        );
        f.fields = f.fields.with("invalidProperty", property);
        f
    }

    pub fn invalid_property(name: &str) -> Self {
        let mut f = Fault::new(
            "InvalidProperty",
            format!("The property name '{name}' is not valid"),
        );
        f.fields = f.fields.with("name", name);
        f
    }

    pub fn method_not_found(receiver: &Moref, method: &str) -> Self {
        let mut f = Fault::new(
            "MethodNotFound",
            format!("The method '{method}' is not supported on {}", receiver.ty),
        );
        f.fields = f
            .fields
            .with("receiver", receiver.clone())
            .with("method", method);
        f
    }

    pub fn not_supported(message: &str) -> Self {
        Fault::new("NotSupported", message)
    }

    pub fn invalid_request(message: &str) -> Self {
        let mut f = Fault::new("InvalidRequest", message);
        f.client = true;
        f
    }
}

/// DuplicateName: `name` is taken among the children of `parent` (create, clone, move,
/// rename).
pub(crate) fn duplicate_name(name: &str, parent: &Moref) -> Fault {
    let mut f = Fault::new_pub(
        "DuplicateName",
        format!("The name '{name}' already exists."),
    );
    f.fields = f.fields.with("name", name).with("object", parent.clone());
    f
}
