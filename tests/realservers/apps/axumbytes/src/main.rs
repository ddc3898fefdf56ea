//! GET /bytes/N answers N bytes of the reference servers' pattern (byte i = 'a' + i % 26), with a checksum of
//! a 1 KiB block in a header: computed on the runtime's worker (`inline`) or handed to tokio's blocking pool
//! per request (`blocking`: `tokio::task::spawn_blocking`, the detour the verdict pair measures).
//!     axumbytes PORT inline|blocking     (prints "listening on 127.0.0.1:PORT" to stderr)
use axum::{extract::Path, http::header, response::IntoResponse, routing::get, Router};

const MAX_BYTES: usize = 16 << 20;

fn checksum(block: &[u8]) -> u64 {
    block.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| b'a' + (i % 26) as u8).collect()
}

async fn bytes(Path(n): Path<usize>, blocking: bool) -> impl IntoResponse {
    if n > MAX_BYTES {
        return (axum::http::StatusCode::NOT_FOUND, [(header::ETAG, String::new())], Vec::new());
    }
    let block = pattern(1024);
    let sum = if blocking {
        tokio::task::spawn_blocking(move || checksum(&block)).await.unwrap()
    } else {
        checksum(&block)
    };
    (axum::http::StatusCode::OK, [(header::ETAG, format!("\"{sum:x}\""))], pattern(n))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let blocking = args.get(2).map(String::as_str) == Some("blocking");
    let app = Router::new().route("/bytes/{n}", get(move |n| bytes(n, blocking)));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    eprintln!("listening on {}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}
