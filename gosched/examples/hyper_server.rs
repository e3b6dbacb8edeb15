//! hyper 1.x on gosched: an HTTP server with a goroutine per connection
//! (hyper's connection future driven by `gosched::block_on`, parking the
//! goroutine), through the `tokio-io` feature — no tokio runtime.
//!
//!     cargo run --release --features tokio-io --example hyper_server [addr]
//!
//! With an address it serves until killed (`curl http://ADDR/hello`).
//! Without one it serves on a free port, calls itself with 8 hyper clients
//! (async tasks) × 100 keep-alive requests, and checks every response.

use std::convert::Infallible;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

async fn hello(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = format!("hello from gosched, you asked for {}\n", req.uri().path());
    Ok(Response::new(Full::new(Bytes::from(body))))
}

fn serve(l: gosched::net::TcpListener) {
    while let Ok((stream, _)) = l.accept() {
        gosched::go(move || {
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(hello));
            if let Err(e) = gosched::block_on(conn) {
                eprintln!("connection: {e}");
            }
        });
    }
}

const CLIENTS: usize = 8;
const REQUESTS: usize = 100;

fn main() {
    let arg = std::env::args().nth(1);
    let rt = gosched::Builder::new().build().expect("runtime");
    let l = rt
        .block_on(async {
            gosched::net::TcpListener::bind(arg.as_deref().unwrap_or("127.0.0.1:0"))
        })
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    println!("hyper on gosched at http://{addr}/");
    let server = rt.go(move || serve(l));
    if arg.is_some() {
        rt.block_on(server).unwrap();
        return;
    }
    let t = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            rt.spawn(async move {
                let stream = gosched::net::TcpStream::connect_async(addr).await.unwrap();
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
                        .await
                        .unwrap();
                let driver = gosched::spawn(conn);
                for i in 0..REQUESTS {
                    let req = Request::get(format!("/c{c}/r{i}"))
                        .header(hyper::header::HOST, "localhost")
                        .body(Full::new(Bytes::new()))
                        .unwrap();
                    sender.ready().await.unwrap();
                    let resp = sender.send_request(req).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    let body = resp.into_body().collect().await.unwrap().to_bytes();
                    let want = format!("hello from gosched, you asked for /c{c}/r{i}\n");
                    assert_eq!(body, want.as_bytes());
                }
                drop(sender);
                driver.await.unwrap().unwrap();
            })
        })
        .collect();
    for c in clients {
        rt.block_on(c).unwrap();
    }
    println!(
        "{CLIENTS} hyper clients x {REQUESTS} keep-alive requests answered in {:?}",
        t.elapsed()
    );
}
