//! Backends: each module exports one route fragment; `fragments` lists them all and the route table merges
//! them at startup (a duplicate method + path is a startup error naming both backends).

pub mod health;
pub mod hello;
pub mod items;
pub mod visits;

use std::sync::Arc;

use crate::AppState;
use crate::routes::Fragment;

pub fn fragments(state: &Arc<AppState>) -> Vec<Fragment> {
    vec![hello::routes(), items::routes(), health::routes(state.clone()), visits::routes()]
}
