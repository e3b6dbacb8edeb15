//! Channels as `futures` streams and sinks (feature `stream`): combinators
//! see every value once and in order, a closed channel ends the stream, a
//! send into a closed channel gives the value back, and a full channel makes
//! the sink wait (back-pressure) without losing anything.

use futures::{SinkExt, StreamExt};
use gosched::chan::SendError;

#[gosched::test]
async fn a_receiver_is_a_stream_until_the_channel_closes() {
    let (tx, rx) = gosched::chan::<u32>(4).split();
    gosched::go(move || {
        for i in 0..1_000 {
            tx.send(i).unwrap();
        }
        // `tx` dropped: the channel closes once drained.
    });
    let doubled: Vec<u32> = rx.into_stream().map(|x| x * 2).collect().await;
    assert_eq!(doubled, (0..1_000).map(|x| x * 2).collect::<Vec<_>>());
}

#[gosched::test]
async fn a_sender_is_a_sink_with_back_pressure() {
    // Capacity 1: most sends have to wait for the receiver.
    let (tx, rx) = gosched::chan::<u32>(1).split();
    let producer = gosched::spawn(async move {
        let mut sink = tx.into_sink();
        let mut values = futures::stream::iter((0..500).map(Ok));
        sink.send_all(&mut values).await.unwrap();
        sink.close().await.unwrap();
        // Dropping the sink drops the last sender: the channel closes.
    });
    let mut got = Vec::new();
    while let Some(v) = rx.recv_async().await {
        got.push(v);
    }
    producer.await.unwrap();
    assert_eq!(got, (0..500).collect::<Vec<_>>());
}

#[gosched::test]
async fn forward_moves_a_stream_into_a_sink() {
    let (tx1, rx1) = gosched::chan::<String>(2).split();
    let (tx2, rx2) = gosched::chan::<String>(2).split();
    let fwd = gosched::spawn(async move {
        rx1.into_stream()
            .map(|s| Ok(s.to_uppercase()))
            .forward(tx2.into_sink())
            .await
    });
    let feeder = gosched::go(move || {
        for w in ["go", "sched", "rust"] {
            tx1.send(w.to_string()).unwrap();
        }
    });
    let out: Vec<String> = rx2.into_stream().collect().await;
    feeder.await.unwrap();
    fwd.await.unwrap().unwrap();
    assert_eq!(out, ["GO", "SCHED", "RUST"]);
}

#[gosched::test]
async fn a_closed_channel_gives_the_value_back() {
    let ch = gosched::chan::<u8>(1);
    let (tx, _rx) = ch.clone().split();
    ch.close().unwrap();
    let mut sink = tx.into_sink();
    assert_eq!(sink.send(7).await, Err(SendError(7)));
    // And a stream on a closed, empty channel ends at once.
    let (_tx, rx) = ch.split();
    assert_eq!(rx.into_stream().next().await, None);
}

#[gosched::test]
async fn a_dropped_stream_loses_no_value() {
    let (tx, rx) = gosched::chan::<u32>(0).split();
    let mut s = rx.clone().into_stream();
    // Poll once: the stream starts waiting, then is dropped mid-wait.
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(s.poll_next_unpin(&mut cx).is_pending());
    drop(s);
    // The next value goes to the receiver that is still there.
    let h = gosched::go(move || tx.send(42).unwrap());
    assert_eq!(rx.recv_async().await, Some(42));
    h.await.unwrap();
}
