//! Errors as a Redfish service answers them: an HTTP status and an `error` object whose
//! `@Message.ExtendedInfo` names a message of DMTF's Base registry, so that a client matching
//! on `MessageId` (sushy does, to retry an insert with the parameters a BMC asks for) finds
//! the id a BMC would send.

use serde_json::{json, Value};

/// The Base registry's version named in message ids.
const BASE: &str = "Base.1.16";

/// A request the service refuses.
#[derive(Debug, Clone, PartialEq)]
pub struct RedfishError {
    pub status: u16,
    /// The message's id in the Base registry (`ResourceNotFound`).
    pub id: &'static str,
    pub message: String,
    pub args: Vec<String>,
    pub resolution: &'static str,
}

impl std::fmt::Display for RedfishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.id, self.message)
    }
}

impl std::error::Error for RedfishError {}

impl RedfishError {
    fn new(
        status: u16,
        id: &'static str,
        message: String,
        args: &[&str],
        resolution: &'static str,
    ) -> Self {
        RedfishError {
            status,
            id,
            message,
            args: args.iter().map(|a| a.to_string()).collect(),
            resolution,
        }
    }

    /// The body: `error` with the general code and the message in its extended info.
    pub fn body(&self) -> Value {
        json!({"error": {
            "code": format!("{BASE}.GeneralError"),
            "message": "A general error has occurred. See ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [{
                "@odata.type": "#Message.v1_2_0.Message",
                "MessageId": format!("{BASE}.{}", self.id),
                "Message": self.message,
                "MessageArgs": self.args,
                "MessageSeverity": if self.status >= 500 { "Critical" } else { "Warning" },
                "Resolution": self.resolution,
            }],
        }})
    }

    pub fn not_found(uri: &str) -> Self {
        Self::new(
            404,
            "ResourceMissingAtURI",
            format!("No resource is at the URI '{uri}'."),
            &[uri],
            "Place a valid resource at the URI or correct the URI and resubmit the request.",
        )
    }

    pub fn no_session() -> Self {
        Self::new(
            401,
            "NoValidSession",
            "There is no valid session established with the service.".into(),
            &[],
            "Establish a session before attempting any operations.",
        )
    }

    pub fn unauthorized(uri: &str) -> Self {
        Self::new(
            401,
            "ResourceAtUriUnauthorized",
            format!("Accessing the resource at '{uri}' failed: the credentials were refused."),
            &[uri, "the credentials were refused"],
            "Ensure that the appropriate access is provided for the service in order for it to access the URI.",
        )
    }

    pub fn insufficient_privilege() -> Self {
        Self::new(
            403,
            "InsufficientPrivilege",
            "The account of this request lacks the privilege the operation needs.".into(),
            &[],
            "Either abandon the operation or change the associated access rights and resubmit the request if the operation failed.",
        )
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "OperationNotAllowed",
            "The HTTP method is not allowed on this resource.".into(),
            &[],
            "None.",
        )
    }

    pub fn malformed_json() -> Self {
        Self::new(
            400,
            "MalformedJSON",
            "The request body is malformed JSON and could not be parsed.".into(),
            &[],
            "Ensure that the request body is valid JSON and resubmit the request.",
        )
    }

    pub fn property_unknown(name: &str) -> Self {
        Self::new(
            400,
            "PropertyUnknown",
            format!("The property '{name}' is not a valid property of this resource."),
            &[name],
            "Remove the unknown property from the request body and resubmit the request if the operation failed.",
        )
    }

    pub fn property_not_writable(name: &str) -> Self {
        Self::new(
            400,
            "PropertyNotWritable",
            format!("The property '{name}' is read-only and cannot be assigned a value."),
            &[name],
            "Remove the property from the request body and resubmit the request if the operation failed.",
        )
    }

    pub fn value_not_in_list(value: &str, property: &str) -> Self {
        Self::new(
            400,
            "PropertyValueNotInList",
            format!("The value '{value}' for the property {property} is not an allowed value."),
            &[value, property],
            "Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.",
        )
    }

    pub fn value_type(value: &str, property: &str) -> Self {
        Self::new(
            400,
            "PropertyValueTypeError",
            format!("The value '{value}' for the property {property} is of a different type than the property accepts."),
            &[value, property],
            "Correct the value for the property in the request body and resubmit the request if the operation failed.",
        )
    }

    pub fn value_out_of_range(value: &str, property: &str) -> Self {
        Self::new(
            400,
            "PropertyValueOutOfRange",
            format!("The value '{value}' for the property {property} is not in the supported range."),
            &[value, property],
            "Correct the value for the property in the request body and resubmit the request if the operation failed.",
        )
    }

    pub fn parameter_missing(action: &str, parameter: &str) -> Self {
        Self::new(
            400,
            "ActionParameterMissing",
            format!("The action {action} requires the parameter {parameter} in the request body."),
            &[action, parameter],
            "Supply the action with the required parameter in the request body when the request is resubmitted.",
        )
    }

    pub fn parameter_not_in_list(value: &str, parameter: &str, action: &str) -> Self {
        Self::new(
            400,
            "ActionParameterValueNotInList",
            format!("The value '{value}' for the parameter {parameter} in the action {action} is not an allowed value."),
            &[value, parameter, action],
            "Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed.",
        )
    }

    pub fn parameter_format(value: &str, parameter: &str, action: &str) -> Self {
        Self::new(
            400,
            "ActionParameterValueFormatError",
            format!("The value '{value}' for the parameter {parameter} in the action {action} has the wrong format."),
            &[value, parameter, action],
            "Correct the value for the parameter in the request body and resubmit the request if the operation failed.",
        )
    }

    pub fn precondition_failed() -> Self {
        Self::new(
            412,
            "PreconditionFailed",
            "The ETag supplied does not match the resource's current ETag.".into(),
            &[],
            "Try the operation again using the appropriate ETag.",
        )
    }

    pub fn already_exists(property: &str, value: &str) -> Self {
        Self::new(
            409,
            "ResourceAlreadyExists",
            format!("A resource with the property {property} set to '{value}' already exists."),
            &["ManagerAccount", property, value],
            "Do not repeat the create operation as the resource has already been created.",
        )
    }

    pub fn conflict(why: &str) -> Self {
        Self::new(
            409,
            "ResourceInStandby",
            format!("The request could not be performed: {why}."),
            &[],
            "Ensure that the resource is in the correct power state and resubmit the request.",
        )
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "PayloadTooLarge",
            format!("The request body is larger than the {limit} bytes this service accepts."),
            &[],
            "Resubmit the request with a smaller request body.",
        )
    }

    pub fn query_not_supported(parameter: &str) -> Self {
        Self::new(
            501,
            "QueryNotSupported",
            format!("The query parameter '{parameter}' is not supported by this service."),
            &[parameter],
            "Remove the query parameters and resubmit the request if the operation failed.",
        )
    }

    pub fn internal(why: &str) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("The request failed due to an internal service error: {why}. The service is still operational."),
            &[],
            "Resubmit the request. If the problem persists, consider resetting the service.",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_its_message_in_the_base_registry() {
        let b = RedfishError::not_found("/redfish/v1/Systems/x").body();
        let info = &b["error"]["@Message.ExtendedInfo"][0];
        assert_eq!(info["MessageId"], "Base.1.16.ResourceMissingAtURI");
        assert_eq!(info["MessageArgs"][0], "/redfish/v1/Systems/x");
        assert_eq!(b["error"]["code"], "Base.1.16.GeneralError");
    }
}
