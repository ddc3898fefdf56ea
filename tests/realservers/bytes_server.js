// A minimal Node.js HTTP server for the real-server tests: GET /bytes/N answers N bytes of the
// reference servers' pattern (byte i = 'a' + i % 26), keep-alive as Node does by default.
//   node bytes_server.js PORT     (0: any free port; prints "listening on 127.0.0.1:PORT" to stderr)
//   node bytes_server.js PORT N   the same with the cluster module: a primary and N workers. On Linux the
//                                 primary accepts every connection and hands it to a worker over the
//                                 worker's IPC channel (a socket pair), round robin (SCHED_RR)
"use strict";
const cluster = require("cluster");
const http = require("http");

const WORKERS = Number(process.argv[3] || 0);
if (WORKERS > 0 && cluster.isPrimary) {
  cluster.schedulingPolicy = cluster.SCHED_RR; // the default but on Windows: said, not assumed
  for (let i = 0; i < WORKERS; i++) cluster.fork();
  let listening = 0;
  cluster.on("listening", (worker, address) => {
    if (++listening === WORKERS) process.stderr.write(`listening on ${address.address}:${address.port}\n`);
  });
  for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => {
    for (const worker of Object.values(cluster.workers)) worker.process.kill("SIGTERM");
    process.exit(0);
  });
  return;
}

const MAX_BYTES = 16 << 20;
const bodies = new Map();

function body(n) {
  let b = bodies.get(n);
  if (!b) {
    b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = 97 + (i % 26);
    bodies.set(n, b);
  }
  return b;
}

const server = http.createServer((req, res) => {
  const m = /^\/bytes\/(\d+)$/.exec(req.url);
  const n = m ? Number(m[1]) : -1;
  if (req.method !== "GET" || n < 0 || n > MAX_BYTES) {
    res.writeHead(404, { "Content-Length": 0 });
    res.end();
    return;
  }
  res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": n });
  res.end(body(n));
});

server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  const { address, port } = server.address();
  process.stderr.write(`listening on ${address}:${port}\n`);
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
