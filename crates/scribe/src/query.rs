//! List queries: `filter`, `filter2` (`contains`, `is one of`), `groupBy`, `timeMachine`, and the
//! parents/children/reference options of GET by id, from the query string (the bracket form the original's
//! clients send, or JSON-encoded values) or from a JSON body. Everything the client names becomes a bind
//! parameter or a validated, quoted identifier; nothing is interpolated.

use percent_encoding::percent_decode_str;
use serde_json::{Map, Value};
use tokio_postgres::types::ToSql;

use crate::error::ApiError;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct ListParams {
    pub filter: Option<Value>,
    pub filter2: Option<Value>,
    pub group_by: Option<String>,
    pub time_machine: Option<Value>,
    pub parents: Option<String>,
    pub children: Option<String>,
    pub reference_component: Option<String>,
    pub reference_path: Option<String>,
}

/// A parameter value from the query string: JSON when it parses as JSON, else the raw string (as the original).
fn loose(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

fn decode(raw: &str) -> String {
    percent_decode_str(&raw.replace('+', " ")).decode_utf8_lossy().into_owned()
}

impl ListParams {
    /// Query-string values win over body values, as in the original.
    pub fn parse(query: Option<&str>, body: Option<&Value>) -> Result<ListParams, ApiError> {
        let mut p = ListParams::default();
        let mut bracket_filter = Map::new();
        let mut bracket_filter2: Map<String, Value> = Map::new();
        let mut bracket_time = Map::new();
        for pair in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (key, value) = (decode(key), decode(value));
            let (base, sub) = match key.split_once('[') {
                Some((base, rest)) => (base.to_string(), Some(rest.trim_end_matches(']').to_string())),
                None => (key.clone(), None),
            };
            match (base.as_str(), sub) {
                ("filter", None) => p.filter = Some(parse_json_param("filter", &value)?),
                ("filter", Some(k)) => push_value(&mut bracket_filter, k, loose(&value)),
                ("filter2", None) => p.filter2 = Some(parse_json_param("filter2", &value)?),
                ("filter2", Some(k)) => push_value(&mut bracket_filter2, k, Value::String(value)),
                ("groupBy", None) => p.group_by = Some(value),
                ("timeMachine", None) => p.time_machine = Some(loose(&value)),
                ("timeMachine", Some(k)) => {
                    bracket_time.insert(k, Value::String(value));
                }
                ("parents", None) => p.parents = Some(value),
                ("children", None) => p.children = Some(value),
                ("referenceComponent", None) => p.reference_component = Some(value),
                ("referencePath", None) => p.reference_path = Some(value),
                _ => {} // unknown parameters are ignored, as by the original
            }
        }
        if !bracket_filter.is_empty() {
            p.filter = Some(Value::Object(bracket_filter));
        }
        if !bracket_filter2.is_empty() {
            p.filter2 = Some(Value::Object(bracket_filter2));
        }
        if !bracket_time.is_empty() {
            p.time_machine = Some(Value::Object(bracket_time));
        }
        if let Some(Value::Object(body)) = body {
            let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
            if p.filter.is_none()
                && let Some(filter) = body.get("filter")
            {
                p.filter = Some(stringly(filter.clone(), "filter")?);
            }
            p.filter2 = p.filter2.or_else(|| body.get("filter2").cloned());
            p.time_machine = p.time_machine.or_else(|| body.get("timeMachine").cloned());
            p.group_by = p.group_by.or_else(|| text("groupBy"));
            p.parents = p.parents.or_else(|| text("parents"));
            p.children = p.children.or_else(|| text("children"));
            p.reference_component = p.reference_component.or_else(|| text("referenceComponent"));
            p.reference_path = p.reference_path.or_else(|| text("referencePath"));
        }
        if let Some(Value::String(s)) = &p.time_machine {
            p.time_machine = Some(loose(s));
        }
        Ok(p)
    }
}

/// A body `filter` may itself be a JSON string (the original accepted both).
fn stringly(value: Value, name: &str) -> Result<Value, ApiError> {
    match value {
        Value::String(s) => parse_json_param(name, &s),
        other => Ok(other),
    }
}

fn parse_json_param(name: &str, raw: &str) -> Result<Value, ApiError> {
    serde_json::from_str(raw).map_err(|_| ApiError::BadRequest(format!("Failed to parse {name}: not JSON")))
}

/// Repeated bracket keys collect into an array (`filter2[k]=contains&filter2[k]=[3]`).
fn push_value(map: &mut Map<String, Value>, key: String, value: Value) {
    match map.get_mut(&key) {
        Some(Value::Array(list)) if list.len() > 1 || matches!(list.first(), Some(Value::String(_))) => {
            list.push(value)
        }
        Some(existing) => {
            let first = existing.take();
            *existing = Value::Array(vec![first, value]);
        }
        None => {
            map.insert(key, value);
        }
    }
}

/// Bind parameters, in order.
pub type Params = Vec<Box<dyn ToSql + Sync + Send>>;

/// The result of building a WHERE clause: SQL, or "this cannot match anything" (an empty value list).
pub enum Where {
    Sql(Option<String>),
    Nothing,
}

/// A column reference from a dotted key: the column (validated, quoted), then JSON keys as bind parameters.
/// `text`: end with `->>` (compare as text) rather than `->` (compare as JSON).
fn path_expr(key: &str, text: bool, params: &mut Params) -> Result<String, ApiError> {
    let mut parts = key.split('.');
    let column = parts.next().unwrap_or_default().to_ascii_lowercase();
    if column.is_empty() || !column.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(ApiError::BadRequest(format!("filter key {key:?} does not start with a column name")));
    }
    let keys: Vec<&str> = parts.collect();
    let mut expr = format!("\"{column}\"");
    if keys.is_empty() {
        return Ok(if text { format!("({expr})::text") } else { expr });
    }
    for (i, k) in keys.iter().enumerate() {
        params.push(Box::new(k.to_string()));
        let arrow = if text && i == keys.len() - 1 { "->>" } else { "->" };
        expr = format!("{expr} {arrow} ${}::text", params.len());
    }
    Ok(expr)
}

/// A value as the text Postgres would show for it: strings as they are, anything else as JSON.
fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn values_of(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(list) => list.clone(),
        other => vec![other.clone()],
    }
}

pub fn where_clause(p: &ListParams, params: &mut Params) -> Result<Where, ApiError> {
    let mut conditions = Vec::new();
    if let Some(filter) = &p.filter {
        let Value::Object(filter) = filter else {
            return Err(ApiError::BadRequest("filter must be an object of column → values".into()));
        };
        for (key, value) in filter {
            let values: Vec<String> = values_of(value).iter().map(as_text).collect();
            if values.is_empty() {
                return Ok(Where::Nothing);
            }
            conditions.push(any_of(key, values, params)?);
        }
    }
    if let Some(filter2) = &p.filter2 {
        let Value::Object(filter2) = filter2 else {
            return Err(ApiError::BadRequest("filter2 must be an object of key → [operator, value]".into()));
        };
        for (key, spec) in filter2 {
            let (operator, value) = match spec.as_array().map(Vec::as_slice) {
                Some([Value::String(op), value]) => (op.as_str(), value),
                _ => return Err(ApiError::BadRequest(format!("filter2 {key:?} must be [operator, value]"))),
            };
            let value = match value {
                Value::String(s) => loose(s),
                other => other.clone(),
            };
            match operator {
                "contains" => {
                    let list = values_of(&value);
                    if list.is_empty() {
                        return Ok(Where::Nothing);
                    }
                    let expr = path_expr(key, false, params)?;
                    params.push(Box::new(Value::Array(list)));
                    conditions.push(format!("{expr} @> ${}::jsonb", params.len()));
                }
                "is one of" => {
                    let values: Vec<String> = values_of(&value).iter().map(as_text).collect();
                    if values.is_empty() {
                        return Ok(Where::Nothing);
                    }
                    conditions.push(any_of(key, values, params)?);
                }
                other => {
                    return Err(ApiError::BadRequest(format!(
                        "filter2 operator {other:?} is not `contains` or `is one of`"
                    )));
                }
            }
        }
    }
    Ok(Where::Sql((!conditions.is_empty()).then(|| conditions.join(" AND "))))
}

/// `key IN values`. Values compare as text, except on the envelope's timestamp columns, where text would
/// compare Postgres's rendering (`2026-11-29 20:00:00+00`) with the ISO strings the API returns and never match.
fn any_of(key: &str, values: Vec<String>, params: &mut Params) -> Result<String, ApiError> {
    let column = key.to_ascii_lowercase();
    if column == "date_created" || column == "date_modified" {
        params.push(Box::new(values));
        return Ok(format!("\"{column}\" = ANY(${}::text[]::timestamptz[])", params.len()));
    }
    let expr = path_expr(key, true, params)?;
    params.push(Box::new(values));
    Ok(format!("{expr} = ANY(${}::text[])", params.len()))
}

/// `get("a.b", value)` as the original: the nested value, or null when missing or falsy.
pub fn get_path<'a>(path: &str, value: &'a Value) -> Option<&'a Value> {
    let mut at = value;
    for key in path.split('.') {
        at = at.get(key)?;
        let falsy =
            matches!(at, Value::Null | Value::Bool(false)) || at.as_f64() == Some(0.0) || at.as_str() == Some("");
        if falsy {
            return None;
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracket_and_json_forms_agree() {
        let bracket = ListParams::parse(
            Some("filter2%5Bdata.ids%5D=contains&filter2%5Bdata.ids%5D=%5B3%5D&filter[created_by]=2"),
            None,
        )
        .expect("parses");
        let json = ListParams::parse(
            Some("filter2=%7B%22data.ids%22%3A%5B%22contains%22%2C%5B3%5D%5D%7D&filter=%7B%22created_by%22%3A2%7D"),
            None,
        )
        .expect("parses");
        assert_eq!(bracket.filter, Some(serde_json::json!({"created_by": 2})));
        assert_eq!(json.filter, Some(serde_json::json!({"created_by": 2})));
        assert_eq!(bracket.filter2, Some(serde_json::json!({"data.ids": ["contains", "[3]"]})));
        assert_eq!(json.filter2, Some(serde_json::json!({"data.ids": ["contains", [3]]})));
        assert!(ListParams::parse(Some("filter=%7Bnot"), None).is_err());
    }

    #[test]
    fn where_clauses_bind_everything() {
        let p = ListParams::parse(Some("filter[data.owner.name]=x&filter2[id]=is%20one%20of&filter2[id]=[1,2]"), None)
            .expect("ok");
        let mut params = Params::new();
        let Ok(Where::Sql(Some(sql))) = where_clause(&p, &mut params) else { panic!("expected SQL") };
        assert_eq!(sql, "\"data\" -> $1::text ->> $2::text = ANY($3::text[]) AND (\"id\")::text = ANY($4::text[])");
        assert_eq!(params.len(), 4);
        let p = ListParams::parse(Some("filter[x;drop table y]=1"), None).expect("parses");
        assert!(where_clause(&p, &mut Params::new()).is_err());
        let p = ListParams::parse(Some("filter=%7B%22id%22%3A%5B%5D%7D"), None).expect("parses");
        assert!(matches!(where_clause(&p, &mut Params::new()), Ok(Where::Nothing)));
    }
}
