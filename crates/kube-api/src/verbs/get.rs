//! GET of one object.

use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::status::ApiError;

pub(crate) async fn get(ctx: &Ctx) -> HandlerResult {
    let name = ctx.path.name.as_deref().unwrap_or("");
    let object = ctx
        .state
        .group
        .get(&ctx.info.store_key, &ctx.key())
        .ok_or_else(|| ApiError::object_not_found(&ctx.info.group, &ctx.info.plural, name))?;
    let object = crate::conversion::served_one(ctx, object).await?;
    ctx.render(&object, 200)
}
