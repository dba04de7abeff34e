//! Request bodies: JSON, YAML or Kubernetes protobuf, by content type, into one JSON value.

use crate::context::Ctx;
use crate::protobuf::{self, ProtoError};
use crate::status::ApiError;
use serde_json::{json, Value};

/// The request body as a JSON object, decoded by its content type.
pub(crate) fn decode_body(ctx: &Ctx, body: &[u8]) -> Result<Value, ApiError> {
    let content_type = ctx
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let value = decode_media(content_type, body)?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(value)
}

fn decode_media(content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    match media {
        "application/json" | "" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("error decoding request body as JSON: {e}"))
        }),
        "application/yaml" => serde_yaml::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("error decoding request body as YAML: {e}"))
        }),
        protobuf::MEDIA_TYPE => protobuf::decode(body).map_err(|e| match e {
            ProtoError::UnsupportedKind(_)
            | ProtoError::UnknownField { .. }
            | ProtoError::Encoding(_) => ApiError::unsupported_media_type(media).with_details(
                json!({"causes": [{"reason": "UnsupportedProtobuf", "message": e.to_string()}]}),
            ),
            other => {
                ApiError::bad_request(format!("error decoding protobuf request body: {other}"))
            }
        }),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}
