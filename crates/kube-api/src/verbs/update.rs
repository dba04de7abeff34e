//! PUT: replace an object (or its status) with the one sent.

use crate::codec::decode_body;
use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::object::name_of;
use crate::status::ApiError;
use crate::write::{self, input, Operation, Ownership, Write};
use serde_json::json;
use std::borrow::Cow;

pub(crate) async fn update(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    input::dry_run(ctx)?;
    let mut object = decode_body(ctx, body)?;
    input::check_identity(ctx, &mut object)?;
    let url_name = ctx.path.name.as_deref().unwrap_or("");
    let body_name = name_of(&object);
    if body_name.is_empty() {
        object["metadata"]["name"] = json!(url_name);
    } else if body_name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
        )));
    }
    let mut warnings = Vec::new();
    let object = input::normalize(ctx, object, &mut warnings)?;
    let expected = input::expected_version(&object)?;
    let (read, old) = ctx.stored()?;
    let written = write::persist(
        ctx,
        Write {
            operation: Operation::Update {
                read,
                old: Cow::Owned(old),
                expected,
            },
            object,
            ownership: Ownership::Record,
        },
    )
    .await
    .map_err(ApiError::from)?;
    write::respond(ctx, written, warnings).await
}
