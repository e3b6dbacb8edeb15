//! Interop: hyper 1.x, a tokio-ecosystem HTTP library, serving and calling
//! over gosched's sockets through the `tokio-io` feature (the tokio io
//! traits) and `hyper_util::rt::TokioIo` — no tokio runtime anywhere.
//!
//! The server runs a connection per goroutine (`gosched::block_on` of
//! hyper's connection future, parking the goroutine) and per async task;
//! the clients are async tasks on hyper's client connection API, each
//! making keep-alive requests whose bodies are checked.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

const CLIENTS: usize = 16;
const REQUESTS: usize = 50;

/// Echoes the request path and body back: "<path>:<body>".
async fn echo_path(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let path = req.uri().path().to_string();
    let body = req.into_body().collect().await?.to_bytes();
    let mut out = path.into_bytes();
    out.push(b':');
    out.extend_from_slice(&body);
    Ok(Response::new(Full::new(Bytes::from(out))))
}

/// How the server runs each connection.
#[derive(Clone, Copy)]
enum PerConnection {
    Goroutine,
    Task,
}

/// A hyper server on `rt` accepting `CLIENTS` connections, and `CLIENTS`
/// hyper clients (async tasks) each making `REQUESTS` requests on one
/// keep-alive connection.
fn serve_and_call(per: PerConnection) {
    let rt = gosched::Builder::new().procs(2).build().unwrap();
    let listener = rt.block_on(async { gosched::net::TcpListener::bind("127.0.0.1:0") });
    let listener = listener.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = Arc::new(AtomicUsize::new(0));

    let server = {
        let served = served.clone();
        rt.go(move || {
            let mut conns = Vec::new();
            for _ in 0..CLIENTS {
                let (stream, _) = listener.accept().unwrap();
                let served = served.clone();
                let conn = async move {
                    let service = service_fn(move |req| {
                        served.fetch_add(1, SeqCst);
                        echo_path(req)
                    });
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                };
                conns.push(match per {
                    PerConnection::Goroutine => gosched::go(move || gosched::block_on(conn)),
                    PerConnection::Task => gosched::spawn(conn),
                });
            }
            for c in conns {
                c.join().unwrap().expect("a server connection failed");
            }
        })
    };

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
                    let req = Request::post(format!("/c{c}/r{i}"))
                        .header(hyper::header::HOST, "localhost")
                        .body(Full::new(Bytes::from(format!("body {c} {i}"))))
                        .unwrap();
                    // hyper's rule: wait until the connection can take the
                    // next request (its driver may still be finishing the
                    // last response: "connection was not ready").
                    sender.ready().await.unwrap();
                    let resp = sender.send_request(req).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    let body = resp.into_body().collect().await.unwrap().to_bytes();
                    assert_eq!(body, format!("/c{c}/r{i}:body {c} {i}").as_bytes());
                }
                // Dropping the sender ends the connection: the driver and
                // the server side both finish cleanly.
                drop(sender);
                driver.await.unwrap().unwrap();
            })
        })
        .collect();
    for c in clients {
        rt.block_on(c).unwrap();
    }
    rt.block_on(server).unwrap();
    assert_eq!(served.load(SeqCst), CLIENTS * REQUESTS);
}

#[test]
fn hyper_server_goroutine_per_connection() {
    serve_and_call(PerConnection::Goroutine);
}

#[test]
fn hyper_server_task_per_connection() {
    serve_and_call(PerConnection::Task);
}
