// The verdict pairs' Node.js server: GET /bytes/N answers the file DOCROOT/bytes/N (the reference servers'
// pattern), read per request with fs.readFile (libuv's thread pool: each request goes event loop -> pool
// thread -> event loop) or kept in memory after its first read.
//   node node_file_bytes.js PORT DOCROOT readfile|memory   (prints "listening on 127.0.0.1:PORT" to stderr)
"use strict";
const fs = require("fs");
const http = require("http");
const path = require("path");

const [port, docroot, mode] = [Number(process.argv[2] || 0), process.argv[3], process.argv[4] || "readfile"];
const kept = new Map();

function answer(res, err, data) {
  if (err) {
    res.writeHead(404, { "Content-Length": 0 });
    res.end();
    return;
  }
  res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": data.length });
  res.end(data);
}

function serveFile(name, res) {
  if (mode === "memory" && kept.has(name)) return answer(res, null, kept.get(name));
  fs.readFile(path.join(docroot, "bytes", name), (err, data) => {
    if (!err && mode === "memory") kept.set(name, data);
    answer(res, err, data);
  });
}

const server = http.createServer((req, res) => {
  const m = /^\/bytes\/(\d+)$/.exec(req.url);
  if (req.method !== "GET" || !m) return answer(res, true);
  serveFile(m[1], res);
});

server.listen(port, "127.0.0.1", () => {
  const { address, port } = server.address();
  process.stderr.write(`listening on ${address}:${port}\n`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
