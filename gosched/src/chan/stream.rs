//! Channels as `futures` streams and sinks (feature `stream`), so that
//! `StreamExt`/`SinkExt` combinators (`map`, `forward`, `buffer_unordered`,
//! …) work on them.
//!
//! [`RecvStream`] and [`SendSink`] own their channel handle. An operation that
//! has to wait lives in a boxed future that owns a clone of the handle (a
//! `Stream` cannot hold a future that borrows the stream itself). Values that
//! are ready go through `try_recv`/`try_send` with no allocation. Both are
//! cancel-safe, as the channel's own futures are: dropping a `RecvStream`
//! mid-wait loses no value, and dropping a `SendSink` mid-send withdraws the
//! value it held.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use futures_sink::Sink;

use super::{Receiver, SendError, Sender, TryRecvError, TrySendError};

type Pending<O> = Option<Pin<Box<dyn Future<Output = O> + Send>>>;

/// A [`Receiver`] as a [`Stream`]: yields every value until the channel is
/// closed and drained. `Receiver::into_stream` makes one.
///
/// ```
/// # gosched::Runtime::new().unwrap().block_on(async {
/// use futures::StreamExt;
/// let (tx, rx) = gosched::chan::<i32>(4).split();
/// gosched::spawn(async move {
///     for i in 1..=3 {
///         tx.send_async(i).await.unwrap();
///     } // `tx` is dropped: the channel closes, the stream ends
/// });
/// let doubled: Vec<i32> = rx.into_stream().map(|n| n * 2).collect().await;
/// assert_eq!(doubled, [2, 4, 6]);
/// # });
/// ```
pub struct RecvStream<T> {
    rx: Receiver<T>,
    wait: Pending<Option<T>>,
}

impl<T> fmt::Debug for RecvStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvStream")
            .field("waiting", &self.wait.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> RecvStream<T> {
    /// The receiving handle back (a wait in progress is cancelled).
    ///
    /// ```
    /// use futures::StreamExt;
    /// let (tx, rx) = gosched::chan::<i32>(2).split();
    /// tx.send(1).unwrap();
    /// tx.send(2).unwrap();
    /// let mut stream = rx.into_stream();
    /// assert_eq!(gosched::block_on(stream.next()), Some(1));
    /// let rx = stream.into_inner();
    /// assert_eq!(rx.recv(), Some(2));
    /// ```
    pub fn into_inner(self) -> Receiver<T> {
        self.rx
    }
}

impl<T: Send + 'static> Receiver<T> {
    /// This receiver as a `futures` [`Stream`] (feature `stream`).
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// let (tx, rx) = gosched::chan::<u32>(8).split();
    /// for i in 1..=4 {
    ///     tx.send_async(i).await.unwrap();
    /// }
    /// drop(tx);
    /// let sum = rx.into_stream().fold(0, |acc, n| async move { acc + n }).await;
    /// assert_eq!(sum, 10);
    /// # });
    /// ```
    pub fn into_stream(self) -> RecvStream<T> {
        RecvStream {
            rx: self,
            wait: None,
        }
    }
}

impl<T: Send + 'static> Stream for RecvStream<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        if this.wait.is_none() {
            match this.rx.try_recv() {
                Ok(v) => return Poll::Ready(Some(v)),
                Err(TryRecvError::Closed) => return Poll::Ready(None),
                Err(TryRecvError::Empty) => {
                    let rx = this.rx.clone();
                    this.wait = Some(Box::pin(async move { rx.recv_async().await }));
                }
            }
        }
        let wait = this.wait.as_mut().expect("set above");
        let r = wait.as_mut().poll(cx);
        if r.is_ready() {
            this.wait = None;
        }
        r
    }
}

/// A [`Sender`] as a [`Sink`]: `send` waits while the channel is full, and
/// fails with the value once it is closed. `poll_close` only flushes: closing
/// the channel is [`Sender::close`]'s job (other senders may share it).
/// `Sender::into_sink` makes one.
///
/// ```
/// # gosched::Runtime::new().unwrap().block_on(async {
/// use futures::{SinkExt, StreamExt};
/// let (tx, rx) = gosched::chan::<i32>(1).split();
/// let collector = gosched::spawn(rx.into_stream().collect::<Vec<_>>());
/// let mut sink = tx.into_sink();
/// // Waits whenever the one-slot buffer is full.
/// sink.send_all(&mut futures::stream::iter([1, 2, 3]).map(Ok)).await.unwrap();
/// drop(sink); // the last sender: the channel closes
/// assert_eq!(collector.await.unwrap(), [1, 2, 3]);
/// # });
/// ```
pub struct SendSink<T> {
    tx: Sender<T>,
    wait: Pending<Result<(), SendError<T>>>,
}

impl<T> fmt::Debug for SendSink<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendSink")
            .field("sending", &self.wait.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> SendSink<T> {
    /// The sending handle back (a send in progress is withdrawn).
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use futures::SinkExt;
    /// let (tx, rx) = gosched::chan::<i32>(2).split();
    /// let mut sink = tx.into_sink();
    /// sink.send(1).await.unwrap();
    /// let tx = sink.into_inner();
    /// tx.send_async(2).await.unwrap();
    /// assert_eq!((rx.recv_async().await, rx.recv_async().await), (Some(1), Some(2)));
    /// # });
    /// ```
    pub fn into_inner(self) -> Sender<T> {
        self.tx
    }
}

impl<T: Send + 'static> Sender<T> {
    /// This sender as a `futures` [`Sink`] (feature `stream`).
    ///
    /// ```
    /// # gosched::Runtime::new().unwrap().block_on(async {
    /// use futures::SinkExt;
    /// let (tx, rx) = gosched::chan::<&str>(1).split();
    /// let mut sink = tx.into_sink();
    /// sink.send("a").await.unwrap();
    /// assert_eq!(rx.try_recv(), Ok("a"));
    /// rx.close().unwrap();
    /// assert!(sink.send("b").await.is_err()); // closed: the value comes back
    /// # });
    /// ```
    pub fn into_sink(self) -> SendSink<T> {
        SendSink {
            tx: self,
            wait: None,
        }
    }
}

impl<T: Send + 'static> Sink<T> for SendSink<T> {
    type Error = SendError<T>;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // One value at a time: the previous send must be done.
        self.poll_flush(cx)
    }

    fn start_send(mut self: Pin<&mut Self>, item: T) -> Result<(), Self::Error> {
        let this = &mut *self;
        debug_assert!(this.wait.is_none(), "start_send without poll_ready");
        match this.tx.try_send(item) {
            Ok(()) => Ok(()),
            Err(TrySendError::Closed(v)) => Err(SendError(v)),
            Err(TrySendError::Full(v)) => {
                let tx = this.tx.clone();
                this.wait = Some(Box::pin(async move { tx.send_async(v).await }));
                Ok(())
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = &mut *self;
        let Some(wait) = this.wait.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let r = wait.as_mut().poll(cx);
        if r.is_ready() {
            this.wait = None;
        }
        r
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.poll_flush(cx)
    }
}
