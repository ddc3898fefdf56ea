//! GET /bytes/N answers N bytes of the reference servers' pattern (byte i = 'a' + i % 26), with a checksum of
//! a 1 KiB block in a header: computed on the runtime's worker (`inline`), handed to tokio's blocking pool
//! per request (`blocking`: `tokio::task::spawn_blocking`), or to one thread of its own over a channel of
//! Rust's standard library, its answer back over a tokio oneshot (`channel`): the detours the verdict pairs
//! measure.
//!     axumbytes PORT inline|blocking|channel     (prints "listening on 127.0.0.1:PORT" to stderr)
use std::sync::{mpsc, Mutex, OnceLock};

use axum::{extract::Path, http::header, response::IntoResponse, routing::get, Router};
use tokio::sync::oneshot;

const MAX_BYTES: usize = 16 << 20;

fn checksum(block: &[u8]) -> u64 {
    block.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

#[derive(Clone, Copy)]
enum Mode {
    Inline,
    Blocking,
    Channel,
}

type Job = (Vec<u8>, oneshot::Sender<u64>);
static WORKER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();

fn worker() -> mpsc::Sender<Job> {
    WORKER
        .get_or_init(|| {
            let (jobs, queue) = mpsc::channel::<Job>();
            std::thread::spawn(move || {
                for (block, answer) in queue {
                    let _ = answer.send(checksum(&block));
                }
            });
            Mutex::new(jobs)
        })
        .lock()
        .unwrap()
        .clone()
}

async fn bytes(Path(n): Path<usize>, mode: Mode) -> impl IntoResponse {
    if n > MAX_BYTES {
        return (axum::http::StatusCode::NOT_FOUND, [(header::ETAG, String::new())], Vec::new());
    }
    let block = pattern(1024);
    let sum = match mode {
        Mode::Inline => checksum(&block),
        Mode::Blocking => tokio::task::spawn_blocking(move || checksum(&block)).await.unwrap(),
        Mode::Channel => {
            let (answer, sum) = oneshot::channel();
            worker().send((block, answer)).unwrap();
            sum.await.unwrap()
        }
    };
    (axum::http::StatusCode::OK, [(header::ETAG, format!("\"{sum:x}\""))], pattern(n))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let mode = match args.get(2).map(String::as_str) {
        Some("blocking") => Mode::Blocking,
        Some("channel") => Mode::Channel,
        _ => Mode::Inline,
    };
    let app = Router::new().route("/bytes/{n}", get(move |n| bytes(n, mode)));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    eprintln!("listening on {}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}
