//! GET /healthz: 200 while the process serves. Redis is reported but does not fail the check: flight-rs
//! keeps serving from memory without it, so taking the instance out of rotation would be wrong.

use std::sync::Arc;

use http::StatusCode;
use serve::Reply;

use crate::AppState;
use crate::routes::Fragment;

pub fn routes(state: Arc<AppState>) -> Fragment {
    Fragment::new("health").get("/healthz", move |_req| {
        let state = state.clone();
        Reply::later(async move {
            let redis = match &state.redis {
                None => "disabled",
                Some(store) => match store.ping().await {
                    Ok(()) => "ok",
                    Err(_) => "unavailable",
                },
            };
            let mut res = serve::json(
                StatusCode::OK,
                &serde_json::json!({ "status": "ok", "profile": state.settings.profile.as_str(), "redis": redis }),
            );
            // A health answer is about now: no cache (ours or any in between) may keep it.
            res.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
            res
        })
    })
}
