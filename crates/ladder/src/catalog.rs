//! The `GET /ladder/json` document: about 1 KiB of JSON (1,043 bytes), the shape of HttpArena's json-tls test and
//! of the published ladder's "1 KB JSON" rung. It exists so the ladder has a GET rung whose per-request work is
//! building a value and serializing it, with no request body and no database: the step between `{"ok":true}` and
//! the POST rungs.
//!
//! The same content is `CATALOG` in bench/peers/ladder/ladder.mjs. Only integers, booleans and ASCII strings
//! that need no escaping, so serde_json and `JSON.stringify` print the same bytes by construction (no float
//! formatting, no escape rules); the cross-runtime test compares them byte for byte.

use serde::Serialize;

/// The whole document. Fields are serialized in declaration order, which is the peers' key order.
#[derive(Serialize)]
pub struct Catalog {
    pub ok: bool,
    pub total: usize,
    pub items: Vec<Item>,
}

/// One entry. `Copy` so [`build`] copies the constants into a fresh `Vec` by value, as the peers copy each
/// constant into a fresh object; the tags stay shared in both (a static slice here, the same array there).
#[derive(Serialize, Clone, Copy)]
pub struct Item {
    pub id: u32,
    pub name: &'static str,
    pub category: &'static str,
    pub tags: &'static [&'static str],
    pub active: bool,
    /// In cents: an integer, so no runtime prints a float.
    pub price: u32,
    pub counts: Counts,
}

#[derive(Serialize, Clone, Copy)]
pub struct Counts {
    pub stock: u32,
    pub sold: u32,
}

const fn item(
    id: u32,
    name: &'static str,
    category: &'static str,
    tags: &'static [&'static str],
    active: bool,
    price: u32,
    (stock, sold): (u32, u32),
) -> Item {
    Item { id, name, category, tags, active, price, counts: Counts { stock, sold } }
}

/// The content, defined once; [`build`] turns it into the document.
const ITEMS: [Item; 8] = [
    item(1, "Anvil", "tools", &["iron", "heavy"], true, 18900, (12, 340)),
    item(2, "Bellows", "tools", &["leather"], true, 4250, (4, 57)),
    item(3, "Chisel", "tools", &["steel", "small"], false, 1299, (0, 1210)),
    item(4, "Dowel", "parts", &["oak", "small", "bulk"], true, 15, (5000, 88123)),
    item(5, "Easel", "studio", &["pine"], true, 7600, (7, 19)),
    item(6, "Ferrule", "parts", &["brass", "small"], true, 85, (820, 4406)),
    item(7, "Gimlet", "tools", &["steel"], false, 950, (3, 95)),
    item(8, "Hinge", "parts", &["brass", "bulk"], true, 240, (1500, 23017)),
];

/// A fresh document, built on every request (the route serializes it with serde_json right after): building and
/// serializing is the work this rung compares, so it is not cached as bytes.
pub fn build() -> Catalog {
    Catalog { ok: true, total: ITEMS.len(), items: ITEMS.to_vec() }
}
