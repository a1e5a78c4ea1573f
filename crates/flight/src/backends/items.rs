//! GET /api/items: a 2,005-byte catalogue of 20 items, the body the `json-2k` comparison loads so that
//! compression really runs (the hello body is under every compression threshold). Every runtime sends these
//! exact bytes (bench/peers/flight/edge.mjs builds the same with JSON.stringify).

use std::sync::LazyLock;

use bytes::Bytes;
use http::StatusCode;
use serve::Reply;

use crate::routes::Fragment;

/// Built once: keys in this order and integers only, so the bytes match JSON.stringify's on the peers.
static ITEMS: LazyLock<Bytes> = LazyLock::new(|| {
    let items: Vec<String> = (1..=20)
        .map(|i| {
            let parity = if i % 2 == 0 { "even" } else { "odd" };
            format!(
                r#"{{"id":{i},"name":"item-{i}","description":"Item {i} of 20","price_cents":{},"tags":["{parity}","group-{}"]}}"#,
                (i * 379) % 2000 + 99,
                i % 4
            )
        })
        .collect();
    Bytes::from(format!(r#"{{"items":[{}]}}"#, items.join(",")))
});

pub fn routes() -> Fragment {
    Fragment::new("items").get("/api/items", |_req| Reply::now(serve::json_bytes(StatusCode::OK, ITEMS.clone())))
}

#[cfg(test)]
mod tests {
    use sha2::Digest;

    #[test]
    fn the_body_is_the_peers_bytes() {
        let body = &*super::ITEMS;
        assert_eq!(body.len(), 2005);
        let digest = sha2::Sha256::digest(body);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "238b179a577f4f2afde4652ca27dacf4b3625b4c531dbc95626027b7bce78975");
    }
}
