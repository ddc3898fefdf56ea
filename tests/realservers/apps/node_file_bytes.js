// The verdict pairs' Node.js server: GET /bytes/N answers the file DOCROOT/bytes/N (the reference servers'
// pattern), read per request with fs.readFile (libuv's thread pool: each request goes event loop -> pool
// thread -> event loop) or fs.readFileSync (the same reads on the event loop, nothing handed over), kept in
// memory after its first read, or kept in memory by a worker thread (worker_threads) that each request asks
// for it over a message port (event loop -> worker -> event loop).
//   node node_file_bytes.js PORT DOCROOT readfile|sync|memory|worker   (prints "listening on 127.0.0.1:PORT" to stderr)
"use strict";
const fs = require("fs");
const http = require("http");
const path = require("path");
const { Worker, isMainThread, parentPort, workerData } = require("worker_threads");

if (!isMainThread) { // the worker: the files in memory, one answer per message
  const files = new Map();
  parentPort.on("message", ({ id, name }) => {
    if (!files.has(name)) {
      try {
        files.set(name, fs.readFileSync(path.join(workerData, "bytes", name)));
      } catch (err) {
        files.set(name, null);
      }
    }
    parentPort.postMessage({ id, data: files.get(name) });
  });
  return;
}

const [port, docroot, mode] = [Number(process.argv[2] || 0), process.argv[3], process.argv[4] || "readfile"];
const kept = new Map();
const worker = mode === "worker" ? new Worker(__filename, { workerData: docroot }) : null;
const waiting = new Map();
let asked = 0;
if (worker) worker.on("message", ({ id, data }) => {
  const res = waiting.get(id);
  waiting.delete(id);
  answer(res, data === null, data && Buffer.from(data));
});

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
  if (worker) {
    waiting.set(++asked, res);
    return worker.postMessage({ id: asked, name });
  }
  if (mode === "memory" && kept.has(name)) return answer(res, null, kept.get(name));
  if (mode === "sync") {
    let data = null;
    try {
      data = fs.readFileSync(path.join(docroot, "bytes", name));
    } catch (err) {
      return answer(res, err);
    }
    return answer(res, null, data);
  }
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
