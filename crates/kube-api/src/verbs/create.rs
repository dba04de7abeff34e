//! POST of a new object.

use crate::codec::decode_body;
use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::status::ApiError;
use crate::write::{self, input, Operation, Ownership, Write};

pub(crate) async fn create(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    input::dry_run(ctx)?;
    let mut object = decode_body(ctx, body)?;
    input::check_identity(ctx, &mut object)?;
    let mut warnings = Vec::new();
    let object = input::normalize(ctx, object, &mut warnings)?;
    let written = write::persist(
        ctx,
        Write {
            operation: Operation::Create,
            object,
            ownership: Ownership::Record,
        },
    )
    .await
    .map_err(ApiError::from)?;
    write::respond(ctx, written, warnings).await
}
