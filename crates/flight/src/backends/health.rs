//! GET /healthz: 200 while the process serves. Redis is reported but does not fail the check: flight-rs
//! keeps serving from memory without it, so taking the instance out of rotation would be wrong.

use std::sync::Arc;

use http::StatusCode;

use crate::AppState;
use crate::routes::{Fragment, Reply};

pub fn routes(state: Arc<AppState>) -> Fragment {
    Fragment::new("health").get("/healthz", move |_req| {
        let state = state.clone();
        Reply::Later(Box::pin(async move {
            let redis = match &state.redis {
                None => "disabled",
                Some(store) => match store.ping().await {
                    Ok(()) => "ok",
                    Err(_) => "unavailable",
                },
            };
            serve::json(
                StatusCode::OK,
                &serde_json::json!({ "status": "ok", "profile": state.settings.profile.as_str(), "redis": redis }),
            )
        }))
    })
}
