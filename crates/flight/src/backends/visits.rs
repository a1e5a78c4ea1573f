//! GET /api/session: counts this client's visits in its session, the smallest route that exercises the
//! session middleware end to end (cookie issued, signed, loaded, saved).

use http::StatusCode;
use serve::Reply;

use crate::middleware::session::{Session, SessionUnavailable};
use crate::routes::Fragment;

pub fn routes() -> Fragment {
    Fragment::new("visits").get("/api/session", |req| {
        let Some(session) = req.extensions().get::<Session>().cloned() else {
            return Reply::now(serve::error(
                StatusCode::NOT_FOUND,
                "sessions are off in this profile (FLIGHT_MIDDLEWARE=production turns them on)",
            ));
        };
        Reply::later(async move {
            let visits = match session.get("visits").await {
                Ok(v) => v.and_then(|v| v.as_u64()).unwrap_or(0) + 1,
                Err(SessionUnavailable) => return SessionUnavailable::response(),
            };
            if session.insert("visits", visits.into()).await.is_err() {
                return SessionUnavailable::response();
            }
            serve::json(StatusCode::OK, &serde_json::json!({ "visits": visits }))
        })
    })
}
