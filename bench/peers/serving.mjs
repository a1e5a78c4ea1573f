// The peers' serving around their shared handlers, the same for the metadata and ladder servers (Bun and
// Node). A handler's answer `r` is { status, body (a string), headers? (extra headers, after content-type) }.

/**
 * Bun. Bun.serve on cfg.host:cfg.port with `fetch` as the handler; `reusePort` is what bunProcesses()
 * returned; `tlsOptions` is bunTls() of ../tls.mjs ({} for plain HTTP), with bunHttp2() of ../http2.mjs
 * spread in ({} with HTTP2 off).
 */
export function bunServe(cfg, reusePort, fetch, tlsOptions = {}) {
  return Bun.serve({
    port: cfg.port,
    hostname: cfg.host,
    // Development mode adds error pages and checks; a benchmark peer runs as in production.
    development: false,
    reusePort,
    fetch,
    ...tlsOptions,
  });
}

/** Bun. The Response for `r`, with `contentType` as its content-type. */
export function bunResponse(r, contentType) {
  // content-type set explicitly: Response.json() would add ";charset=utf-8". Bun sets the content-length of
  // a string body itself, and leaves the body off for HEAD.
  const headers = r.headers ? { "content-type": contentType, ...r.headers } : { "content-type": contentType };
  return new Response(r.body, { status: r.status, headers });
}

/**
 * Node. Writes `r` to the node:http response `res` (or node:http2's compat response, HTTP2=on), with
 * `contentType` as its content-type.
 */
export function nodeSend(res, r, contentType) {
  const headers = {
    "content-type": contentType,
    // Explicit content-length: otherwise node:http would fall back to chunked encoding.
    "content-length": Buffer.byteLength(r.body),
  };
  if (r.headers) Object.assign(headers, r.headers);
  res.writeHead(r.status, headers);
  // node:http writes no body for HEAD by itself.
  res.end(r.body);
}

/**
 * Node, HTTP2=on. Writes `r` on the node:http2 server stream `stream` (its core API, see ../http2.mjs), with
 * `contentType` as its content-type: the same status, headers and body bytes as nodeSend, but for a
 * `connection` header (the 413's `connection: close`), which HTTP/2 forbids and respond() throws on (Bun.serve
 * and node's compat API drop it too). Nothing is written on a stream the client has reset meanwhile
 * (respond() would throw), which an answer that waited on a body or a database can meet.
 */
export function nodeStreamSend(stream, r, contentType) {
  if (stream.destroyed) return;
  const headers = { ":status": r.status, "content-type": contentType, "content-length": Buffer.byteLength(r.body) };
  if (r.headers) {
    for (const name in r.headers) if (name !== "connection") headers[name] = r.headers[name];
  }
  stream.respond(headers);
  // node:http2 ends a HEAD stream with the headers (stream.headRequest) and writes no body.
  stream.end(r.body);
}
