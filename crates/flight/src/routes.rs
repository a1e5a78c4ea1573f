//! The route table: path → method → handler, built once at startup from the fragments that backends export,
//! then shared read-only by every worker. Exact paths only (like Bun's static `routes`), so a lookup is one
//! hash probe.

use std::collections::HashMap;
use std::sync::Arc;

use http::header::ALLOW;
use http::{HeaderValue, Method, StatusCode};
use serve::{Reply, Request, Response};

use crate::static_files::StaticFiles;

/// A route's handler. It returns serve's [`Reply`]: most answer at once (no allocation for a future), some
/// need to await.
pub type Handler = Arc<dyn Fn(Request) -> Reply + Send + Sync>;

/// The routes one backend module exports.
pub struct Fragment {
    backend: &'static str,
    routes: Vec<(Method, &'static str, Handler)>,
}

impl Fragment {
    pub fn new(backend: &'static str) -> Self {
        Fragment { backend, routes: Vec::new() }
    }

    pub fn route(
        mut self,
        method: Method,
        path: &'static str,
        handler: impl Fn(Request) -> Reply + Send + Sync + 'static,
    ) -> Self {
        self.routes.push((method, path, Arc::new(handler)));
        self
    }

    pub fn get(self, path: &'static str, handler: impl Fn(Request) -> Reply + Send + Sync + 'static) -> Self {
        self.route(Method::GET, path, handler)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("duplicate route {method} {path}: registered by backend `{first}` and again by backend `{second}`")]
pub struct DuplicateRoute {
    pub method: Method,
    pub path: String,
    pub first: String,
    pub second: String,
}

struct PathEntry {
    methods: Vec<(Method, Handler, &'static str)>,
    /// Precomputed for 405 and OPTIONS answers.
    allow: HeaderValue,
}

/// The table's hasher: foldhash hashes a short path in a fraction of SipHash's instructions (the route lookup's
/// hash was about 100 instructions of a hello response's 7,000, bench/results/20261204T1615Z/20261204T1615Z-write-path.md).
/// The table is built once at start-up and only read, so a request cannot grow a chain the way HashDoS does.
type PathHasher = foldhash::fast::RandomState;

/// The merged table. Unknown paths go to the fallback (static files / SPA, or a JSON 404).
pub struct RouteTable {
    paths: HashMap<Box<str>, PathEntry, PathHasher>,
    answer_options: bool,
}

impl RouteTable {
    /// Merges fragments; the same method and path from two fragments (or twice from one) is an error naming
    /// both backends. `answer_options` makes OPTIONS on any registered path a 204 with Allow (CORS is on).
    pub fn merge(fragments: Vec<Fragment>, answer_options: bool) -> Result<RouteTable, DuplicateRoute> {
        let mut paths: HashMap<Box<str>, PathEntry, PathHasher> = HashMap::default();
        for fragment in fragments {
            for (method, path, handler) in fragment.routes {
                let entry = paths
                    .entry(path.into())
                    .or_insert_with(|| PathEntry { methods: Vec::new(), allow: HeaderValue::from_static("") });
                if let Some((_, _, first)) = entry.methods.iter().find(|(m, _, _)| *m == method) {
                    return Err(DuplicateRoute {
                        method,
                        path: path.to_string(),
                        first: first.to_string(),
                        second: fragment.backend.to_string(),
                    });
                }
                entry.methods.push((method, handler, fragment.backend));
            }
        }
        for entry in paths.values_mut() {
            let mut names: Vec<&str> = entry.methods.iter().map(|(m, _, _)| m.as_str()).collect();
            if names.contains(&"GET") && !names.contains(&"HEAD") {
                names.push("HEAD");
            }
            if answer_options && !names.contains(&"OPTIONS") {
                names.push("OPTIONS");
            }
            entry.allow = HeaderValue::from_str(&names.join(", ")).unwrap_or(HeaderValue::from_static("GET"));
        }
        Ok(RouteTable { paths, answer_options })
    }

    pub fn len(&self) -> usize {
        self.paths.values().map(|e| e.methods.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Routes a request; `None` when the path is not in the table (the caller falls back).
    #[allow(clippy::result_large_err)] // the request goes back to the caller by value; boxing it costs a malloc
    fn dispatch(&self, req: Request) -> Result<Reply, Request> {
        let Some(entry) = self.paths.get(req.uri().path()) else { return Err(req) };
        let method = req.method();
        let found = entry.methods.iter().find(|(m, _, _)| m == method).or_else(|| {
            (method == Method::HEAD).then(|| entry.methods.iter().find(|(m, _, _)| m == Method::GET)).flatten()
        });
        if let Some((_, handler, _)) = found {
            return Ok(handler(req));
        }
        if method != Method::OPTIONS || !self.answer_options {
            return Ok(Reply::now(serve::method_not_allowed(entry.allow.clone())));
        }
        let mut res = Response::new(serve::Body::Empty);
        *res.status_mut() = StatusCode::NO_CONTENT;
        res.headers_mut().insert(ALLOW, entry.allow.clone());
        Ok(Reply::now(res))
    }
}

/// The route table as the innermost tower service, with the fallback for unknown paths.
#[derive(Clone)]
pub struct Router {
    table: Arc<RouteTable>,
    fallback: Option<Arc<StaticFiles>>,
}

impl Router {
    pub fn new(table: Arc<RouteTable>, fallback: Option<Arc<StaticFiles>>) -> Self {
        Router { table, fallback }
    }
}

impl serve::Handler for Router {
    fn handle(&self, req: Request) -> Reply {
        match self.table.dispatch(req) {
            Ok(reply) => reply,
            Err(req) => match &self.fallback {
                Some(files) => {
                    let files = files.clone();
                    Reply::later(async move { files.serve(req).await })
                }
                None => Reply::now(serve::not_found()),
            },
        }
    }
}
