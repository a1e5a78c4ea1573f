//! Routing and handlers. Paths and JSON shapes are the original's: POST and PUT answer `[row]`, GET by id an
//! array (empty when absent), `/all` an array ordered by id (or an object of arrays with groupBy), DELETE `[]`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Map, Value};
use serve::{Request, Response};
use tokio_postgres::types::ToSql;

use crate::Shared;
use crate::error::ApiError;
use crate::query::{ListParams, Params, Where, get_path, where_clause};
use crate::schemas::SchemaError;
use crate::store::{Envelope, Store, Table};

/// Recursive parent/child walks stop here, so a cycle in the data cannot run away.
const MAX_DEPTH: i32 = 1000;

#[derive(Clone)]
pub struct Scribe {
    shared: Arc<Shared>,
    store: Rc<Store>,
}

impl Scribe {
    pub fn new(shared: Arc<Shared>, store: Rc<Store>) -> Self {
        Scribe { shared, store }
    }
}

impl tower::Service<Request> for Scribe {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>>>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let app = self.clone();
        Box::pin(async move { Ok(app.handle(req).await.unwrap_or_else(ApiError::into_response)) })
    }
}

fn ok_json(value: &Value) -> Response {
    serve::json(StatusCode::OK, value)
}

/// `[row, …]` from rows already in JSON text, as the API answers lists, reads and writes.
fn ok_rows(rows: &[String]) -> Response {
    let mut body = Vec::with_capacity(2 + rows.iter().map(|r| r.len() + 1).sum::<usize>());
    body.push(b'[');
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(row.as_bytes());
    }
    body.push(b']');
    serve::json_bytes(StatusCode::OK, body)
}

/// A row's JSON text as a value, for the answers that reshape rows (timeMachine, groupBy, history).
fn row_value(text: &str) -> Result<Value, ApiError> {
    serde_json::from_str(text).map_err(|e| ApiError::Internal(format!("row text: {e}")))
}

fn parse_id(raw: &str) -> Result<i32, ApiError> {
    raw.parse::<i32>().map_err(|_| ApiError::BadRequest(format!("id {raw:?} must be an integer")))
}

impl Scribe {
    async fn handle(&self, req: Request) -> Result<Response, ApiError> {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let query = req.uri().query().map(str::to_string);
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let segments: &[&str] = if segments == [""] { &[] } else { &segments };
        let limit = self.shared.settings.payload_limit;
        match (&method, segments) {
            (&Method::GET, []) => Ok(Response::new(serve::Body::Empty)),
            (&Method::GET, ["healthz"]) => Ok(self.health().await),
            (&Method::POST, ["sql"]) => self.raw_sql(req).await,
            (&Method::POST, [c, "all"]) => self.list(&[c], query, read_json(req, limit).await?).await,
            (&Method::POST, [c, s, "all"]) => self.list(&[c, s], query, read_json(req, limit).await?).await,
            (&Method::POST, [c]) => self.create(&[c], read_json(req, limit).await?).await,
            (&Method::POST, [c, s]) => self.create(&[c, s], read_json(req, limit).await?).await,
            (&Method::GET, [c, "all"]) => self.list(&[c], query, read_json(req, limit).await?).await,
            (&Method::GET, [c, s, "all"]) => self.list(&[c, s], query, read_json(req, limit).await?).await,
            (&Method::GET, [c, id, "history"]) => self.history(&[c], id).await,
            (&Method::GET, [c, s, id, "history"]) => self.history(&[c, s], id).await,
            (&Method::GET, [c, id]) => self.get_single(&[c], id, query, read_json(req, limit).await?).await,
            (&Method::GET, [c, s, id]) => self.get_single(&[c, s], id, query, read_json(req, limit).await?).await,
            (&Method::PUT, [c, id]) => self.update(&[c], id, read_json(req, limit).await?).await,
            (&Method::PUT, [c, s, id]) => self.update(&[c, s], id, read_json(req, limit).await?).await,
            (&Method::DELETE, [c, "all"]) => self.truncate(&[c]).await,
            (&Method::DELETE, [c, s, "all"]) => self.truncate(&[c, s]).await,
            (&Method::DELETE, [c, x]) if x.parse::<i64>().is_ok() => self.delete(&[c], x).await,
            (&Method::DELETE, [c, s]) => self.drop(&[c, s]).await,
            (&Method::DELETE, [c, s, id]) => self.delete(&[c, s], id).await,
            (&Method::DELETE, [c]) => self.drop(&[c]).await,
            _ => Err(ApiError::NotFound(format!("no route for {method} {path}"))),
        }
    }

    async fn create(&self, segments: &[&str], body: Option<Value>) -> Result<Response, ApiError> {
        let table = Table::new(segments)?;
        let body = body.ok_or_else(|| ApiError::BadRequest("a JSON body is required".into()))?;
        let schema = self.schema(segments, &body).await?;
        let envelope = Envelope::from_body(&body)?;
        let row = self.store.create(&table, schema, &envelope).await?;
        Ok(ok_rows(&[row]))
    }

    async fn update(&self, segments: &[&str], id: &str, body: Option<Value>) -> Result<Response, ApiError> {
        let table = Table::new(segments)?;
        let id = parse_id(id)?;
        let body = body.ok_or_else(|| ApiError::BadRequest("a JSON body is required".into()))?;
        let schema = self.schema(segments, &body).await?;
        let envelope = Envelope::from_body(&body)?;
        match self.store.update(&table, schema, id, &envelope).await? {
            Some(row) => Ok(ok_rows(&[row])),
            None => Err(ApiError::NotFound(format!("{} {id} does not exist", table.name()))),
        }
    }

    /// Validates the record; returns the schema version (DDL is ensured once per version).
    async fn schema(&self, segments: &[&str], body: &Value) -> Result<u64, ApiError> {
        // Table names fold to lower case, so schema lookups must too: `/Notes` is `/notes`, schema included.
        let component = segments.join("/").to_ascii_lowercase();
        let schema = self.shared.schemas.get(&component).await.map_err(|e| match e {
            SchemaError::NotFound(m) => ApiError::BadRequest(m),
            SchemaError::Fetch(m) => ApiError::Unavailable(m),
            SchemaError::Invalid(m) => ApiError::Internal(m),
        })?;
        schema.validate(body).map_err(ApiError::Invalid)?;
        Ok(schema.hash())
    }

    async fn list(&self, segments: &[&str], query: Option<String>, body: Option<Value>) -> Result<Response, ApiError> {
        let table = Table::new(segments)?;
        let params = ListParams::parse(query.as_deref(), body.as_ref())?;
        let mut binds = Params::new();
        let sql = match where_clause(&params, &mut binds)? {
            Where::Nothing => return self.finish(&table, Vec::new(), &params).await,
            Where::Sql(Some(condition)) => format!("SELECT * FROM \"{}\" WHERE {condition} ORDER BY id", table.name()),
            Where::Sql(None) => format!("SELECT * FROM \"{}\" ORDER BY id", table.name()),
        };
        let rows = self.store.select(&sql, &refs(&binds)).await?;
        self.finish(&table, rows, &params).await
    }

    async fn get_single(
        &self,
        segments: &[&str],
        id: &str,
        query: Option<String>,
        body: Option<Value>,
    ) -> Result<Response, ApiError> {
        let table = Table::new(segments)?;
        let id = parse_id(id)?;
        let params = ListParams::parse(query.as_deref(), body.as_ref())?;
        let t = format!("\"{}\"", table.name());
        let walk = |field: &str, join: &str| -> Result<String, ApiError> {
            valid_field(field)?;
            Ok(format!(
                "WITH RECURSIVE c AS (SELECT *, 0 AS depth FROM {t} WHERE id = $1 \
                 UNION ALL SELECT {t}.*, c.depth + 1 FROM {t} JOIN c ON {join} WHERE c.depth < {MAX_DEPTH}) \
                 SELECT * FROM c ORDER BY depth"
            ))
        };
        let rows = match (&params.parents, &params.children, &params.reference_component) {
            (Some(_), Some(_), _) => {
                return Err(ApiError::BadRequest("Cannot query for parents and children at the same time.".into()));
            }
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                return Err(ApiError::BadRequest(
                    "Cannot query for parents/children and references at the same time.".into(),
                ));
            }
            (Some(field), None, None) => {
                let sql = walk(field, &format!("{t}.id = CAST(c.data ->> $2::text AS integer)"))?;
                self.store.select(&sql, &[&id, field]).await?
            }
            (None, Some(field), None) => {
                let sql = walk(field, &format!("CAST({t}.data ->> $2::text AS integer) = c.id"))?;
                self.store.select(&sql, &[&id, field]).await?
            }
            (None, None, Some(reference)) => {
                let referencing = Table::new(&[reference.as_str()])?;
                let path = params.reference_path.clone().unwrap_or_else(|| plural(table.name()));
                valid_field(&path)?;
                let sql = format!(
                    "SELECT a.* FROM \"{}\" a, jsonb_array_elements(a.data -> $2::text) b WHERE b = to_jsonb($1::integer) ORDER BY a.id",
                    referencing.name()
                );
                self.store.select(&sql, &[&id, &path]).await?
            }
            (None, None, None) => self.store.point(&format!("SELECT * FROM {t} WHERE id = $1"), &[&id]).await?,
        };
        self.finish(&table, rows, &params).await
    }

    /// timeMachine, then groupBy, as the original applies them.
    async fn finish(&self, table: &Table, texts: Vec<String>, params: &ListParams) -> Result<Response, ApiError> {
        if params.time_machine.is_none() && params.group_by.is_none() {
            return Ok(ok_rows(&texts));
        }
        let mut rows = texts.iter().map(|r| row_value(r)).collect::<Result<Vec<Value>, ApiError>>()?;
        if let Some(tm) = &params.time_machine {
            let key = tm.get("key").and_then(Value::as_str);
            let at = tm.get("timestamp").and_then(Value::as_str);
            if let (Some(key), Some(at)) = (key, at) {
                let at = parse_time(at)
                    .ok_or_else(|| ApiError::BadRequest(format!("timeMachine timestamp {at:?} is not ISO 8601")))?;
                let mut out = Vec::with_capacity(rows.len());
                for (text, row) in texts.iter().zip(&rows) {
                    let mut versions = self.versions(table, text, row).await?;
                    versions.sort_by_key(|v| {
                        std::cmp::Reverse(get_path(key, v).and_then(Value::as_str).and_then(parse_time))
                    });
                    let found = versions.into_iter().find(|v| {
                        get_path(key, v).and_then(Value::as_str).and_then(parse_time).is_some_and(|t| t <= at)
                    });
                    out.push(found.unwrap_or(Value::Null));
                }
                rows = out;
            }
        }
        if let Some(group_by) = &params.group_by {
            let mut grouped: Map<String, Value> = Map::new();
            for row in rows {
                let key = match get_path(group_by, &row) {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => "null".to_string(),
                };
                match grouped.get_mut(&key) {
                    Some(Value::Array(list)) => list.push(row),
                    _ => {
                        grouped.insert(key, Value::Array(vec![row]));
                    }
                }
            }
            return Ok(ok_json(&Value::Object(grouped)));
        }
        Ok(ok_json(&Value::Array(rows)))
    }

    /// A record's versions, newest first, rebuilt from its history patches: `text` is the row as stored
    /// text (what the patches were made from), `row` the same parsed.
    async fn versions(&self, table: &Table, text: &str, row: &Value) -> Result<Vec<Value>, ApiError> {
        let Some(id) = row.get("id").and_then(Value::as_i64).and_then(|i| i32::try_from(i).ok()) else {
            return Ok(vec![row.clone()]);
        };
        let patches = self.store.patches(table, id).await?;
        Ok(crate::history::versions(text, &patches).iter().filter_map(|v| serde_json::from_str(v).ok()).collect())
    }

    async fn history(&self, segments: &[&str], id: &str) -> Result<Response, ApiError> {
        let table = Table::new(segments)?;
        let id = parse_id(id)?;
        let rows = self.store.point(&format!("SELECT * FROM \"{}\" WHERE id = $1", table.name()), &[&id]).await?;
        let Some(row) = rows.first() else { return Ok(ok_rows(&[])) };
        Ok(ok_json(&Value::Array(self.versions(&table, row, &row_value(row)?).await?)))
    }

    async fn delete(&self, segments: &[&str], id: &str) -> Result<Response, ApiError> {
        let table = Table::new(segments)?;
        let id = parse_id(id)?;
        self.store.execute(&format!("DELETE FROM \"{}\" WHERE id = $1", table.name()), &[&id]).await?;
        Ok(ok_rows(&[]))
    }

    async fn truncate(&self, segments: &[&str]) -> Result<Response, ApiError> {
        self.store.truncate(&Table::new(segments)?).await?;
        Ok(ok_rows(&[]))
    }

    async fn drop(&self, segments: &[&str]) -> Result<Response, ApiError> {
        self.store.drop_tables(&Table::new(segments)?).await?;
        Ok(ok_rows(&[]))
    }

    /// 200 when Postgres answers a query and Redis a PING, each within a second; else 503 naming the failure.
    async fn health(&self) -> Response {
        let deadline = Duration::from_secs(1);
        let (postgres, redis) =
            tokio::join!(self.store.ping(deadline), tokio::time::timeout(deadline, self.shared.redis.ping()));
        let postgres_ok = postgres.is_ok();
        let redis_ok = matches!(redis, Ok(Ok(())));
        let status = if postgres_ok && redis_ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
        let word = |ok: bool| if ok { "ok" } else { "unavailable" };
        let mut res = serve::json(
            status,
            &serde_json::json!({
                "status": if status == StatusCode::OK { "ok" } else { "error" },
                "postgres": word(postgres_ok),
                "redis": word(redis_ok),
            }),
        );
        res.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
        res
    }

    /// POST /sql: off unless SCRIBE_APP_SQL_TOKEN is set, then only with `Authorization: Bearer <token>`.
    async fn raw_sql(&self, req: Request) -> Result<Response, ApiError> {
        let Some(token) = &self.shared.settings.sql_token else {
            return Err(ApiError::NotFound("POST /sql is disabled (set SCRIBE_APP_SQL_TOKEN to enable it)".into()));
        };
        let given = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), token.as_bytes()) {
            return Err(ApiError::Unauthorized("a valid bearer token is required".into()));
        }
        let body = read_json(req, self.shared.settings.payload_limit).await?.unwrap_or(Value::Null);
        let Some(sql) = body.get("query").and_then(Value::as_str) else {
            return Err(ApiError::BadRequest("Missing query property.".into()));
        };
        let client = self.store.pool().get().await.map_err(|e| ApiError::Unavailable(format!("postgres: {e}")))?;
        let messages =
            client.simple_query(sql).await.map_err(|e| ApiError::BadRequest(format!("query failed: {e}")))?;
        let rows: Vec<Value> = messages
            .iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(row) => Some(Value::Object(
                    row.columns()
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            (c.name().to_string(), row.get(i).map_or(Value::Null, |v| Value::String(v.to_string())))
                        })
                        .collect(),
                )),
                _ => None,
            })
            .collect();
        Ok(ok_json(&Value::Array(rows)))
    }
}

fn refs(params: &Params) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync)).collect()
}

/// JSON-path fields in parents/children/referencePath: plain keys only.
fn valid_field(field: &str) -> Result<(), ApiError> {
    if field.is_empty()
        || field.len() > 63
        || !field.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(ApiError::BadRequest(format!("field {field:?} must be letters, digits, _ or -")));
    }
    Ok(())
}

/// The original used the `pluralize` package for the default reference path; this covers the regular cases.
/// Like pluralize, a word that already ends in `s` is taken as plural and left alone.
fn plural(word: &str) -> String {
    if word.ends_with('s') {
        word.to_string()
    } else if word.ends_with('x') || word.ends_with("ch") || word.ends_with("sh") {
        format!("{word}es")
    } else if let Some(stem) = word.strip_suffix('y').filter(|s| !s.ends_with(['a', 'e', 'i', 'o', 'u'])) {
        format!("{stem}ies")
    } else {
        format!("{word}s")
    }
}

fn parse_time(raw: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(raw).ok().map(|d| d.with_timezone(&chrono::Utc))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The request body as JSON: `None` when empty; 413 past the limit, 408 when it arrives too slowly; 400 when
/// not JSON (serde_json also caps nesting depth, so deeply nested bodies are a 400, not a stack overflow).
async fn read_json(req: Request, limit: u64) -> Result<Option<Value>, ApiError> {
    let body = serve::read_body(req.into_body(), limit).await.map_err(ApiError::Body)?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(&body).map(Some).map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_cover_the_regular_cases() {
        assert_eq!(plural("note"), "notes");
        assert_eq!(plural("category"), "categories");
        assert_eq!(plural("box"), "boxes");
        assert_eq!(plural("notes"), "notes");
        assert_eq!(plural("day"), "days");
    }
}
