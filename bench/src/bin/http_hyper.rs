//! HTTP hello under wrk, the hyper peer: hyper 1.x HTTP/1.1 (keep-alive) on
//! a tokio multi-thread runtime with `worker_threads = PROCS`, one task per
//! connection, `GET /` answered with "Hello, World!" (hyper adds `Date`).
//!
//!     http_hyper PORT PROCS
//!
//! Serves on 127.0.0.1:PORT until killed (scripts/http.py drives it).

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE, SERVER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

const BODY: &[u8] = b"Hello, World!";

async fn hello(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut resp = Response::new(Full::new(Bytes::from_static(BODY)));
    let h = resp.headers_mut();
    h.insert(SERVER, HeaderValue::from_static("hyper"));
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(resp)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: http_hyper PORT PROCS";
    let port: u16 = args.next().and_then(|a| a.parse().ok()).expect(usage);
    let procs: usize = args.next().and_then(|a| a.parse().ok()).expect(usage);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(procs)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind");
        eprintln!(
            "http_hyper on http://{}/ ({procs} workers)",
            l.local_addr().expect("addr")
        );
        let mut backoff = std::time::Duration::ZERO;
        loop {
            let c = match l.accept().await {
                Ok((c, _)) => {
                    backoff = std::time::Duration::ZERO;
                    c
                }
                Err(e) => {
                    backoff = (backoff * 2).clamp(
                        std::time::Duration::from_millis(5),
                        std::time::Duration::from_secs(1),
                    );
                    eprintln!("accept: {e}; retrying in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            let _ = c.set_nodelay(true);
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(c), service_fn(hello))
                    .await;
            });
        }
    });
}
