//! The one API error type of scribe-rs, and how each maps to a status and a JSON body. 5xx details are logged
//! once here and never sent.

use http::StatusCode;
use serve::Response;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    /// The record failed schema validation: the validator's messages.
    #[error("validation failed")]
    Invalid(Vec<String>),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Unauthorized(String),
    /// The body could not be read whole: too large, too slow, or cut short.
    #[error(transparent)]
    Body(serve::BodyError),
    /// A dependency is down or overloaded: retry later.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn into_response(self) -> Response {
        match self {
            ApiError::BadRequest(message) => serve::error(StatusCode::BAD_REQUEST, &message),
            ApiError::Invalid(errors) => serve::json(
                StatusCode::BAD_REQUEST,
                &serde_json::json!({ "error": "validation failed", "errors": errors }),
            ),
            ApiError::NotFound(message) => serve::error(StatusCode::NOT_FOUND, &message),
            ApiError::Unauthorized(message) => serve::error(StatusCode::UNAUTHORIZED, &message),
            ApiError::Body(e) => e.into_response(),
            ApiError::Unavailable(detail) => {
                tracing::warn!(%detail, "answering 503");
                serve::unavailable("service unavailable, retry shortly")
            }
            ApiError::Internal(detail) => {
                tracing::error!(%detail, "answering 500");
                serve::error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            }
        }
    }
}
