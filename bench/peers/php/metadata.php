<?php
// Video-metadata benchmark peer in PHP 8.2: one php-fpm request per HTTP request, behind nginx
// (serve.sh starts both and is what compare runs as the `php` runtime).
//
// Contract (byte-identical with metadata-rs: status, content-type, body; see bench/peers/metadata/metadata.mjs):
//   GET|HEAD /v1/metadata/{id}?region=R  200 {"id","channel","title","description","duration","views","trending"}
//                                        404 null (unknown id); 400 malformed id / bad region
//                                        500 stored row malformed; 503 any SQLite error (Retry-After: 1)
//   other methods on that route          405 {"error":"method not allowed"}, Allow: GET, HEAD
//   GET|HEAD /healthz                    200 {"status":"ok","sqlite":"ok","redis":"disabled"} or 503
//                                        {"status":"unavailable","sqlite":"down","redis":"disabled"}
//   anything else                        404 {"error":"not found"}
// Every response is `Content-Type: application/json` with a Content-Length (nginx then never chunks it).
// Where metadata-rs is stricter than the JavaScript peers, this follows metadata-rs: a row whose channel or
// locales is not TEXT (or NULL channel), whose views is not INTEGER or NULL, or whose duration is not
// INTEGER, finite REAL or NULL is malformed (500).
//
// No cache: METADATA_REDIS_URL is ignored and /healthz says "disabled", as metadata-rs does without one (this
// runtime serves compare's plain metadata workload only).
//
// Environment (read per request; serve.sh passes its own through, php-fpm's clear_env = no):
//   METADATA_DB   the SQLite file, opened read-only (serve.sh makes it an absolute path)
//
// Request lines nginx refuses itself (a path it cannot decode, a method not in upper case) are handed here by
// serve.sh's error_page with no REQUEST_URI; method and target are then read from REQUEST_LINE ($request).
//
// What still differs from metadata-rs on the wire is nginx's: a `Server: nginx` header, `Connection:
// keep-alive` on kept connections (metadata-rs sends no Connection header then), an HTTP/1.1 status line to
// HTTP/1.0 requests, header names in their usual capitals (Content-Type), nginx's HTML 400 for a request
// without Host or with a bad Content-Length; and PHP's: stored JSON nested deeper than PHP's parser follows
// (some thousands of levels) is 500 where metadata-rs answers 200, and so is a kept title holding a real
// U+FFFD in a row whose other text is not UTF-8 (crates/metadata/tests/php.rs pins each one).
//
// The request model differs from every other runtime's, and compare's "same work" line names it: php-fpm
// keeps no state between requests, so EVERY request opens the SQLite file, sets the pragmas and prepares
// the lookup statement; metadata-rs and the Bun/Node peers open and prepare once per worker. That is most
// of what a response costs here: in a PHP 8.2 CLI loop on the 2-core VM (2026-12-04), opening and closing the
// dataset took 52 µs, opening and preparing 260-320 µs, the mmap pragma on a fresh connection about 75 µs
// more, and the query with json_decode on an open connection 22 µs; PDO's persistent connections would skip
// the open, but that is not PHP's per-request model. A database
// that is missing or unusable is therefore seen (and, once back, used) at once, where metadata-rs keeps an
// open connection and retries a failed open at most every 250 ms.

declare(strict_types=1);

const LOOKUP_SQL = 'SELECT channel, duration_s, views, locales FROM videos WHERE id = ?';
const HEALTH_SQL = 'SELECT 1 FROM videos LIMIT 1';
// The peers' pragmas, set on every connection (here: every request).
const PRAGMAS = ['PRAGMA busy_timeout = 100', 'PRAGMA mmap_size = 268435456'];

const PREFIX = '/v1/metadata/';
const REGION_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-';
const MAX_REGION = 35;
const TRENDING_VIEWS = 500000;

// serde_json's (and JSON.stringify's) bytes: `/` as it is, non-ASCII as UTF-8 (U+2028/2029 included),
// `"` `\` \b \f \n \r \t short, other controls as lower-case \u00xx (PHP's escaper writes lower case too).
const JSON_FLAGS = JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_LINE_TERMINATORS;
// metadata-rs skips nested values without a depth limit; PHP's parser accepts a few thousand levels at most.
const JSON_DEPTH = 2147483647;

const NOT_FOUND = '{"error":"not found"}';
const METHOD_NOT_ALLOWED = '{"error":"method not allowed"}';
const MALFORMED_ID = '{"error":"malformed id"}';
const BAD_REGION = '{"error":"region must be a language tag like en or zh-TW"}';
const MALFORMED_STORED = '{"error":"stored metadata is malformed"}';
const DB_UNAVAILABLE = '{"error":"database unavailable"}';
const HEALTH_OK = '{"status":"ok","sqlite":"ok","redis":"disabled"}';
const HEALTH_DOWN = '{"status":"unavailable","sqlite":"down","redis":"disabled"}';

// U+10FFFF (a noncharacter) marks, in the tolerant parse only, what PHP strings cannot hold: see mark().
const MARK = "\u{10FFFF}";

function reply(int $status, string $body, ?string $extra = null): void
{
    http_response_code($status);
    header('Content-Type: application/json');
    header('Content-Length: ' . strlen($body));
    if ($extra !== null) {
        header($extra);
    }
    echo $body; // php-fpm drops it for HEAD, keeping the headers
}

function is_read(string $method): bool
{
    return $method === 'GET' || $method === 'HEAD';
}

/** A read-only connection with the pragmas set; throws on any SQLite error. */
function open_db(): SQLite3
{
    $path = getenv('METADATA_DB');
    $db = new SQLite3($path === false || $path === '' ? 'metadata.db' : $path, SQLITE3_OPEN_READONLY);
    // Without exceptions a failed step reads as "no row": a locked database would answer 404, not 503.
    $db->enableExceptions(true);
    foreach (PRAGMAS as $pragma) {
        $db->exec($pragma);
    }
    return $db;
}

/** decodeURIComponent as metadata-rs does it: every % starts two hex digits, the bytes are UTF-8; else null. */
function decode_id(string $raw): ?string
{
    if (!str_contains($raw, '%')) {
        return $raw;
    }
    if (preg_match('/%(?![0-9A-Fa-f]{2})/', $raw)) {
        return null;
    }
    $id = rawurldecode($raw); // `+` stays `+`
    // PCRE's UTF-8 check refuses what Rust's does: overlong forms, surrogates, code points past U+10FFFF.
    return preg_match('//u', $id) === 1 ? $id : null;
}

/**
 * The first `region` parameter as URLSearchParams reads it (`+` is a space, a `%` without two hex digits
 * stays), en when absent or empty; null when it is not a plausible language tag.
 */
function region_of(string $query): ?string
{
    $value = null;
    foreach (explode('&', $query) as $pair) {
        $eq = strpos($pair, '=');
        $name = $eq === false ? $pair : substr($pair, 0, $eq);
        // urldecode is lenient on a bad `%` as the WHATWG parser is; invalid UTF-8 can never spell "region"
        // nor pass the check below, so the U+FFFD replacement is not needed.
        if (urldecode($name) === 'region') {
            $value = $eq === false ? '' : urldecode(substr($pair, $eq + 1));
            break;
        }
    }
    if ($value === null || $value === '') {
        return 'en';
    }
    $n = strlen($value);
    return $n <= MAX_REGION && strspn($value, REGION_CHARS) === $n ? $value : null;
}

/** M:SS, or H:MM:SS from an hour up; negative counts as 0. */
function duration_text(int $s): string
{
    if ($s < 0) {
        $s = 0;
    }
    $h = intdiv($s, 3600);
    $m = intdiv($s % 3600, 60);
    $sec = $s % 60;
    return $h > 0 ? sprintf('%d:%02d:%02d', $h, $m, $sec) : sprintf('%d:%02d', $m, $sec);
}

/**
 * The stored JSON with what PHP's decoder refuses made decodable: a lone UTF-16 surrogate escape (which
 * JavaScript strings hold and metadata-rs writes back as `\udxxx`) becomes MARK and its four hex digits in
 * lower case; an existing U+10FFFF (raw, or as its escaped pair) becomes MARK and "0", so the change can
 * be undone without ambiguity. Escapes are matched from the left, so `\\ud800` stays a backslash and text.
 */
function mark(string $json): string
{
    $pattern = '/\\\\u([dD][89abAB][0-9a-fA-F]{2})\\\\u([dD][c-fC-F][0-9a-fA-F]{2})'
        . '|\\\\u([dD][89a-fA-F][0-9a-fA-F]{2})|\\\\.|' . MARK . '/s';
    return preg_replace_callback($pattern, static function (array $m): string {
        if ($m[1] !== null) {
            return strtolower($m[1] . $m[2]) === 'dbffdfff' ? MARK . '0' : $m[0];
        }
        if ($m[3] !== null) {
            return MARK . strtolower($m[3]);
        }
        return $m[0] === MARK ? MARK . '0' : $m[0];
    }, $json, -1, $count, PREG_UNMATCHED_AS_NULL);
}

/** A string json_encode wrote from mark()ed text, as JSON.stringify writes the original. */
function unmark(string $encoded): string
{
    return preg_replace_callback('/' . MARK . '(0|d[0-9a-f]{3})/', static function (array $m): string {
        return $m[1] === '0' ? MARK : '\\u' . $m[1];
    }, $encoded);
}

/** The 200 body for a row, or null when the row is malformed (the caller answers 500). */
function render(string $id, string $region, array $row, SQLite3Result $result): ?string
{
    [$channel, $seconds, $views, $locales] = $row;
    // The column types metadata-rs accepts (a BLOB reads as a string too, so the type is asked).
    if ($channel !== null && $result->columnType(0) !== SQLITE3_TEXT) {
        return null;
    }
    if (is_float($seconds)) {
        if (!is_finite($seconds)) {
            return null;
        }
        // Truncated toward zero and saturated, as Rust's `f.trunc() as i64`; negatives end at 0 anyway.
        $seconds = $seconds >= 9.2233720368547758E18 ? PHP_INT_MAX : ($seconds < 0 ? 0 : (int) $seconds);
    } elseif ($seconds === null) {
        $seconds = 0;
    } elseif (!is_int($seconds)) {
        return null;
    }
    if ($views !== null && !is_int($views)) {
        return null;
    }
    if (!is_string($locales) || $result->columnType(3) !== SQLITE3_TEXT) {
        return null; // NULL too: JSON.parse(null) is no object
    }
    // An object, not an array: json_decode's associative form cannot tell `[]` from `{}`.
    if (($locales[strspn($locales, " \t\n\r")] ?? '') !== '{') {
        return null;
    }
    // What PHP's decoder refuses and metadata-rs takes is retried: lone surrogates (mark()), and text that is
    // not UTF-8 where metadata-rs never reads it (a region not asked for), with such bytes as U+FFFD.
    [$marked, $lax] = [false, false];
    while (!is_array($parsed = json_decode($locales, true, JSON_DEPTH, $lax ? JSON_INVALID_UTF8_SUBSTITUTE : 0))) {
        $error = json_last_error();
        if ($error === JSON_ERROR_UTF16 && !$marked) {
            $locales = mark($locales);
            $marked = true;
        } elseif ($error === JSON_ERROR_UTF8 && !$lax) {
            $lax = true;
        } else {
            return null;
        }
    }
    // Keys as JSON.parse keeps them: the last duplicate wins; "123" becomes an int key here, and so does the
    // region looked up with it.
    $has = array_key_exists($region, $parsed);
    $locale = $has ? $parsed[$region] : ($parsed['en'] ?? null);
    $title = is_array($locale) && is_string($locale['title'] ?? null) ? $locale['title'] : null;
    $description = is_array($locale) && is_string($locale['description'] ?? null) ? $locale['description'] : null;
    // A kept string that was not UTF-8 is a malformed row in metadata-rs. One holding U+FFFD after the lax
    // parse may have been (or may hold a real U+FFFD, which then answers 500 where metadata-rs answers 200).
    if ($lax && (str_contains($title ?? '', "\u{FFFD}") || str_contains($description ?? '', "\u{FFFD}"))) {
        return null;
    }
    $trending = $has && $views !== null && $views > TRENDING_VIEWS;
    if (!$marked) {
        // false on invalid UTF-8 (a channel, or a kept string): metadata-rs calls that row malformed too.
        $body = json_encode([
            'id' => $id,
            'channel' => $channel,
            'title' => $title,
            'description' => $description,
            'duration' => duration_text($seconds),
            'views' => $views,
            'trending' => $trending,
        ], JSON_FLAGS);
        return $body === false ? null : $body;
    }
    $parts = [json_encode($id, JSON_FLAGS), json_encode($channel, JSON_FLAGS),
        json_encode($title, JSON_FLAGS), json_encode($description, JSON_FLAGS)];
    if (in_array(false, $parts, true)) {
        return null;
    }
    return '{"id":' . $parts[0] . ',"channel":' . $parts[1] . ',"title":' . unmark($parts[2])
        . ',"description":' . unmark($parts[3]) . ',"duration":"' . duration_text($seconds)
        . '","views":' . ($views === null ? 'null' : (string) $views)
        . ',"trending":' . ($trending ? 'true' : 'false') . '}';
}

function metadata(string $id, string $region): void
{
    try {
        $db = open_db();
        $stmt = $db->prepare(LOOKUP_SQL);
        $stmt->bindValue(1, $id, SQLITE3_TEXT);
        $result = $stmt->execute();
        $row = $result->fetchArray(SQLITE3_NUM);
        if ($row === false) {
            reply(404, 'null');
            return;
        }
        $body = render($id, $region, $row, $result);
    } catch (Exception) {
        // SQLite3 throws Exception (its own class comes in PHP 8.3); PHP's Errors are bugs and stay 500s.
        // No "logged once" here as in metadata-rs: nothing survives the request to remember it by.
        reply(503, DB_UNAVAILABLE, 'Retry-After: 1');
        return;
    }
    if ($body === null) {
        error_log('metadata peer: row ' . json_encode($id, JSON_FLAGS | JSON_INVALID_UTF8_SUBSTITUTE)
            . ': stored metadata is malformed');
        reply(500, MALFORMED_STORED);
        return;
    }
    reply(200, $body);
}

function health(): void
{
    try {
        $db = open_db();
        // metadata-rs compiles the lookup when it opens: a `videos` without its columns is down there too.
        $db->prepare(LOOKUP_SQL);
        $db->query(HEALTH_SQL)->fetchArray(SQLITE3_NUM);
        $ok = true;
    } catch (Exception) {
        $ok = false;
    }
    reply($ok ? 200 : 503, $ok ? HEALTH_OK : HEALTH_DOWN);
}

function main(): void
{
    $method = $_SERVER['REQUEST_METHOD'] ?? 'GET';
    // The target as sent on the request line (nginx's $request_uri), not nginx's decoded, normalized $uri.
    $target = $_SERVER['REQUEST_URI'] ?? '';
    if ($target === '') {
        // A request line nginx refused (a path it cannot decode, a method not in upper case; serve.sh sends
        // those here): method and target come from the line itself. Not a request line at all: 400 with no
        // body and no content type, as metadata-rs answers it.
        if (!preg_match('#^([!-~]+) (/\S*) HTTP/[0-9]\.[0-9]$#D', $_SERVER['REQUEST_LINE'] ?? '', $m)) {
            http_response_code(400);
            header('Content-Length: 0');
            return;
        }
        [, $method, $target] = $m;
    }
    $q = strpos($target, '?');
    $path = $q === false ? $target : substr($target, 0, $q);
    if ($path === '/healthz') {
        is_read($method) ? health() : reply(405, METHOD_NOT_ALLOWED, 'Allow: GET, HEAD');
        return;
    }
    $raw = strncmp($path, PREFIX, strlen(PREFIX)) === 0 ? substr($path, strlen(PREFIX)) : '';
    if ($raw === '' || str_contains($raw, '/')) {
        reply(404, NOT_FOUND);
        return;
    }
    if (!is_read($method)) {
        reply(405, METHOD_NOT_ALLOWED, 'Allow: GET, HEAD');
        return;
    }
    $id = decode_id($raw);
    if ($id === null) {
        reply(400, MALFORMED_ID);
        return;
    }
    $region = region_of($q === false ? '' : substr($target, $q + 1));
    if ($region === null) {
        reply(400, BAD_REGION);
        return;
    }
    metadata($id, $region);
}

main();
