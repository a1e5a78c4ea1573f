// The peers' serving around their shared handlers, the same for the metadata and ladder servers (Bun and
// Node). A handler's answer `r` is { status, body (a string), headers? (extra headers, after content-type) }.

/**
 * Bun. Bun.serve on cfg.host:cfg.port with `fetch` as the handler; `reusePort` is what bunProcesses()
 * returned; `tlsOptions` is bunTls() of ../tls.mjs ({} for plain HTTP).
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

/** Node. Writes `r` to the node:http response `res`, with `contentType` as its content-type. */
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
