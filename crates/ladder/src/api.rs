//! The HTTP surface, as a per-worker tower service. GET routes answer inside `call` (no future boxed), but
//! `/ladder/upstream`, which awaits its call; the POST rungs read the body and so answer from a boxed future.
//!
//! `GET|HEAD /ladder/upstream` ([`crate::upstream`]): 200 `{"ok":true,"token":…}`; 503 `{"error":"upstream not
//! configured"}` without a URL; 502 `{"error":"upstream failed"}` for a refused connection, a non-2xx answer, or
//! one without a string `token`; 504 `{"error":"upstream timed out"}` past the timeout. No Retry-After on any;
//! the same bytes as the peers (bench/peers/ladder/ladder.mjs), which tests/peers.rs checks.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use serde::Serialize;
use serve::{Reply, Request, Response};

use crate::db::{Video, VideoError, Videos};
use crate::pg::{Item, Items, item_key};
use crate::upstream::{CallError, Upstream};
use crate::{Shared, catalog};

const OK: &[u8] = br#"{"ok":true}"#;
const HEALTH_OK: &[u8] = br#"{"status":"ok"}"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rung {
    Validate,
    Sqlite,
    Postgres,
}

/// One worker's service: the shared validator, its own SQLite connection, Postgres pool and upstream client.
#[derive(Clone)]
pub struct Ladder {
    shared: Arc<Shared>,
    videos: Rc<RefCell<Videos>>,
    items: Rc<Items>,
    upstream: Rc<Upstream>,
}

impl Ladder {
    pub fn new(shared: Arc<Shared>, videos: Videos, items: Items, upstream: Upstream) -> Ladder {
        Ladder { shared, videos: Rc::new(RefCell::new(videos)), items: Rc::new(items), upstream: Rc::new(upstream) }
    }
}

impl serve::Handler for Ladder {
    fn handle(&self, req: Request) -> Reply {
        let rung = match req.uri().path() {
            "/ladder/empty" => return Reply::now(read_only(req.method(), || fixed(OK))),
            "/ladder/json" => return Reply::now(read_only(req.method(), || render(&catalog::build()))),
            "/healthz" => return Reply::now(read_only(req.method(), || fixed(HEALTH_OK))),
            "/ladder/upstream" => return self.upstream(req.method()),
            "/ladder/validate" => Rung::Validate,
            "/ladder/sqlite" => Rung::Sqlite,
            "/ladder/postgres" => Rung::Postgres,
            _ => return Reply::now(serve::not_found()),
        };
        if req.method() != Method::POST {
            return Reply::now(serve::method_not_allowed(HeaderValue::from_static("POST")));
        }
        let this = self.clone();
        Reply::later(async move { this.climb(rung, req).await })
    }
}

impl Ladder {
    /// Every rung does what the one below it does, then its own step.
    async fn climb(self, rung: Rung, req: Request) -> Response {
        let body = match serve::read_body(req.into_body(), self.shared.body_limit).await {
            Ok(body) => body,
            Err(e) => return e.into_response(),
        };
        let id = match self.shared.validator.check(&body) {
            Ok(id) => id,
            Err(message) => return serve::error(StatusCode::BAD_REQUEST, &message),
        };
        if rung == Rung::Validate {
            return render(&Validated { ok: true, id: &id });
        }

        let looked_up = match self.videos.try_borrow_mut() {
            Ok(mut videos) => videos.get(&id),
            // Unreachable: nothing holds the borrow across an await. Still not a panic on a request path.
            Err(_) => Err(VideoError::Unavailable("busy".to_string())),
        };
        let video = match looked_up {
            Ok(Some(video)) => video,
            Ok(None) => return serve::not_found(),
            Err(VideoError::Unavailable(_)) => return serve::unavailable("database unavailable"), // logged once by Videos
            Err(e @ VideoError::Malformed { .. }) => {
                tracing::error!(error = %e, "stored video is malformed");
                return serve::error(StatusCode::INTERNAL_SERVER_ERROR, "stored video is malformed");
            }
        };
        if rung == Rung::Sqlite {
            return render(&WithVideo::new(&id, &video));
        }

        match self.items.get(item_key(&id)).await {
            Ok(Some(item)) => render(&WithItem::new(&id, &video, &item)),
            Ok(None) => serve::error(StatusCode::NOT_FOUND, "item not found"),
            Err(_) => serve::unavailable("database unavailable"), // logged once by Items
        }
    }
}

impl Ladder {
    /// GET and HEAD call the upstream (HEAD too, as the other GET rungs build their bodies for HEAD).
    fn upstream(&self, method: &Method) -> Reply {
        if method != Method::GET && method != Method::HEAD {
            return Reply::now(serve::method_not_allowed(HeaderValue::from_static("GET, HEAD")));
        }
        let upstream = self.upstream.clone();
        Reply::later(async move {
            match upstream.token().await {
                Ok(token) => render(&WithToken { ok: true, token: &token }),
                // No Retry-After: an unset URL does not come back by itself.
                Err(CallError::NotConfigured) => {
                    serve::error(StatusCode::SERVICE_UNAVAILABLE, "upstream not configured")
                }
                Err(CallError::Failed(_)) => serve::error(StatusCode::BAD_GATEWAY, "upstream failed"), // logged by Upstream
                Err(CallError::TimedOut(_)) => serve::error(StatusCode::GATEWAY_TIMEOUT, "upstream timed out"),
            }
        })
    }
}

// The bodies, field by field in the contract's order (serde keeps declaration order); serde_json escapes strings
// exactly as JSON.stringify does for well-formed text, and prints integers the same way.

#[derive(Serialize)]
struct Validated<'a> {
    ok: bool,
    id: &'a str,
}

#[derive(Serialize)]
struct WithToken<'a> {
    ok: bool,
    token: &'a str,
}

#[derive(Serialize)]
struct WithVideo<'a> {
    ok: bool,
    id: &'a str,
    channel: Option<&'a str>,
    duration_s: Option<i64>,
    views: Option<i64>,
}

impl<'a> WithVideo<'a> {
    fn new(id: &'a str, video: &'a Video) -> Self {
        WithVideo { ok: true, id, channel: video.channel.as_deref(), duration_s: video.duration_s, views: video.views }
    }
}

#[derive(Serialize)]
struct WithItem<'a> {
    ok: bool,
    id: &'a str,
    channel: Option<&'a str>,
    duration_s: Option<i64>,
    views: Option<i64>,
    item: ItemBody<'a>,
}

#[derive(Serialize)]
struct ItemBody<'a> {
    name: &'a str,
    score: i32,
}

impl<'a> WithItem<'a> {
    fn new(id: &'a str, video: &'a Video, item: &'a Item) -> Self {
        WithItem {
            ok: true,
            id,
            channel: video.channel.as_deref(),
            duration_s: video.duration_s,
            views: video.views,
            item: ItemBody { name: &item.name, score: item.score },
        }
    }
}

fn render<T: Serialize>(value: &T) -> Response {
    serve::json(StatusCode::OK, value)
}

fn fixed(body: &'static [u8]) -> Response {
    serve::json_bytes(StatusCode::OK, Bytes::from_static(body))
}

/// GET and HEAD get `answer()` (hyper drops the body for HEAD, keeping its length), anything else 405. HEAD
/// builds the body too, as the peers do: its content-length is the body's.
fn read_only(method: &Method, answer: impl FnOnce() -> Response) -> Response {
    if method == Method::GET || method == Method::HEAD {
        answer()
    } else {
        serve::method_not_allowed(HeaderValue::from_static("GET, HEAD"))
    }
}
