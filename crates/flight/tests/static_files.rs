//! Static files and the SPA fallback: conditional GETs, precompressed siblings, traversal, symlinks.

mod common;

use flight::config::Profile;

use common::{
    APP_JS, APP_JS_BR, APP_JS_GZ, Dist, INDEX_HTML, SECRET_FILE_CONTENT, TestServer, int_header, settings, start,
};

fn serve(profile: Profile) -> (Dist, TestServer) {
    let dist = common::dist();
    let mut s = settings(profile);
    s.dist_path = Some(dist.root.clone());
    let server = start(s);
    (dist, server)
}

#[test]
fn asset_has_validators_and_revalidates() {
    let (_dist, server) = serve(Profile::Default);
    let res = server.get("/assets/app.js", &[]);
    assert_eq!(res.status, 200);
    assert_eq!(res.text(), APP_JS);
    assert!(res.header("content-type").is_some_and(|v| v.contains("javascript")), "{:?}", res.headers);
    assert_eq!(res.header("content-encoding"), None);
    let etag = res.header("etag").expect("ETag").to_string();
    let last_modified = res.header("last-modified").expect("Last-Modified").to_string();
    assert!(httpdate::parse_http_date(&last_modified).is_ok(), "{last_modified}");

    let not_modified = server.get("/assets/app.js", &[("If-None-Match", &etag)]);
    assert_eq!(not_modified.status, 304);
    assert!(not_modified.body.is_empty());
    assert_eq!(not_modified.header("etag"), Some(etag.as_str()));

    let listed = server.get("/assets/app.js", &[("If-None-Match", &format!("\"other\", {etag}"))]);
    assert_eq!(listed.status, 304);

    let since = server.get("/assets/app.js", &[("If-Modified-Since", &last_modified)]);
    assert_eq!(since.status, 304);

    let changed = server.get("/assets/app.js", &[("If-None-Match", "W/\"something-else\"")]);
    assert_eq!(changed.status, 200);
    assert_eq!(changed.text(), APP_JS);
}

#[test]
fn precompressed_siblings_are_served() {
    let (_dist, server) = serve(Profile::Default);
    let br = server.get("/assets/app.js", &[("Accept-Encoding", "br")]);
    assert_eq!(br.status, 200);
    assert_eq!(br.header("content-encoding"), Some("br"));
    assert_eq!(br.body, APP_JS_BR);
    assert!(br.header("content-type").is_some_and(|v| v.contains("javascript")));
    assert!(br.header_has_token("vary", "Accept-Encoding"));

    let gz = server.get("/assets/app.js", &[("Accept-Encoding", "gzip")]);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gz.body, APP_JS_GZ);

    let both = server.get("/assets/app.js", &[("Accept-Encoding", "gzip, br")]);
    assert_eq!(both.header("content-encoding"), Some("br"));

    let prefer_gzip = server.get("/assets/app.js", &[("Accept-Encoding", "br;q=0.2, gzip")]);
    assert_eq!(prefer_gzip.header("content-encoding"), Some("gzip"));

    // The same in bare, where no compression layer exists.
    let (_dist, bare) = serve(Profile::Bare);
    let br = bare.get("/assets/app.js", &[("Accept-Encoding", "br")]);
    assert_eq!(br.header("content-encoding"), Some("br"));
    assert_eq!(br.body, APP_JS_BR);
}

#[test]
fn spa_fallback_serves_index_for_pages_only() {
    let (_dist, server) = serve(Profile::Default);
    let page = server.get("/some/page", &[("Accept", "text/html,application/xhtml+xml")]);
    assert_eq!(page.status, 200);
    assert_eq!(page.text(), INDEX_HTML);
    assert!(page.header("content-type").is_some_and(|v| v.starts_with("text/html")));

    let root = server.get("/", &[]);
    assert_eq!(root.status, 200);
    assert_eq!(root.text(), INDEX_HTML);

    let missing = server.get("/missing.js", &[("Accept", "text/html")]);
    assert_eq!(missing.status, 404);
    assert!(missing.json()["error"].is_string());

    let api = server.get("/api/nope", &[("Accept", "text/html")]);
    assert_eq!(api.status, 404);
    assert!(api.header("content-type").is_some_and(|v| v.starts_with("application/json")));
    assert!(api.json()["error"].is_string());

    let not_html = server.get("/some/page", &[("Accept", "application/json")]);
    assert_eq!(not_html.status, 404);
}

#[test]
fn traversal_never_reaches_outside_dist() {
    let (dist, server) = serve(Profile::Default);
    assert!(dist.dir.path().join("secret.txt").is_file());
    let paths = [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/..%2fsecret.txt",
        "/%2e%2e%2fsecret.txt",
        "/%252e%252e/secret.txt",
        "/..%5csecret.txt",
        "/..\\secret.txt",
        "/a%00b",
        "/assets/../../secret.txt",
        "/assets/%2e%2e/%2e%2e/secret.txt",
        "//secret.txt",
        "/./../secret.txt",
    ];
    for path in paths {
        for accept in ["*/*", "text/html"] {
            let raw = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\nConnection: close\r\n\r\n");
            // A refused request line may also just close the connection.
            let Ok(res) = testkit::http::send_raw(server.addr, raw.as_bytes()) else { continue };
            assert!(!res.text().contains(SECRET_FILE_CONTENT), "{path} leaked the secret (status {})", res.status);
            assert!(res.status != 200 || accept == "text/html", "{path} answered 200 to a non-page request");
            if res.status == 200 {
                assert_eq!(res.text(), INDEX_HTML, "{path}");
            }
        }
    }
    // An absolute-form target cannot leave the folder either.
    let raw = b"GET http://x/../secret.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if let Ok(res) = testkit::http::send_raw(server.addr, raw) {
        assert!(!res.text().contains(SECRET_FILE_CONTENT));
    }
}

#[test]
fn symlinks_out_of_dist_are_404() {
    let (dist, server) = serve(Profile::Default);
    let outside = dist.dir.path().join("secret.txt");
    std::os::unix::fs::symlink(&outside, dist.root.join("link.txt")).expect("file symlink");
    std::os::unix::fs::symlink(dist.dir.path(), dist.root.join("up")).expect("dir symlink");
    // A symlink that stays inside is fine.
    std::os::unix::fs::symlink(dist.root.join("small.txt"), dist.root.join("inside.txt")).expect("inner symlink");

    for path in ["/link.txt", "/up/secret.txt"] {
        let res = server.get(path, &[]);
        assert_eq!(res.status, 404, "{path}");
        assert!(!res.text().contains(SECRET_FILE_CONTENT), "{path}");
    }
    let res = server.get("/up/secret.txt", &[("Accept", "text/html")]);
    assert!(!res.text().contains(SECRET_FILE_CONTENT));
    let inside = server.get("/inside.txt", &[]);
    assert_eq!(inside.status, 200);
    assert_eq!(inside.text(), common::SMALL_TXT);
}

#[test]
fn only_get_and_head_reach_files() {
    let (_dist, server) = serve(Profile::Default);
    let head = server.request("HEAD", "/assets/app.js", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(int_header(&head, "content-length"), APP_JS.len() as u64);
    let post = server.request("POST", "/assets/app.js", &[]);
    assert_eq!(post.status, 404);
}

/// Files over 256 KiB stream from disk instead of being read whole; both paths must deliver the same bytes,
/// with and without compression.
#[test]
fn large_files_stream_intact() {
    let (dist, server) = serve(Profile::Production);
    let content: Vec<u8> =
        (0..300_000u32).flat_map(|i| format!("{:08x}\n", i.wrapping_mul(2_654_435_761)).into_bytes()).collect();
    std::fs::write(dist.root.join("large.txt"), &content).expect("write large file");
    let plain = server.get("/large.txt", &[]);
    assert_eq!(plain.status, 200);
    assert_eq!(plain.body.len(), content.len());
    assert!(plain.body == content, "identity body differs");
    for encoding in ["gzip", "br", "zstd"] {
        let res = server.get("/large.txt", &[("Accept-Encoding", encoding)]);
        assert_eq!(res.status, 200);
        assert_eq!(res.header("content-encoding"), Some(encoding));
        assert!(common::decode(encoding, &res.body) == content, "{encoding} body differs");
    }
    // Streamed bodies are not kept by the response cache.
    assert_ne!(server.get("/large.txt", &[]).header("x-cache"), Some("hit"));
}
