//! Go's `sync` package: [`Mutex`], [`RwLock`], [`WaitGroup`], [`Once`], [`Cond`]
//! and a weighted [`Semaphore`] — they park the goroutine, never its M.
//!
//! ```
//! use std::sync::Arc;
//! use gosched::sync::{Mutex, WaitGroup};
//!
//! let total = Arc::new(Mutex::new(0));
//! let wg = WaitGroup::new();
//! for i in 1..=10 {
//!     let total = total.clone();
//!     wg.go(move || *total.lock() += i);
//! }
//! wg.wait(); // every goroutine has finished
//! assert_eq!(*total.lock(), 55);
//! ```
//!
//! Every wait is written once, as a cancel-safe future whose waker sits in a wait
//! queue (`waitlist.rs`, Go's `semaRoot`). The blocking forms (`lock`, `wait`,
//! `acquire`, ...) run that future with [`crate::block_on`]: in a goroutine only
//! the goroutine parks and its M runs other Gs; on a plain thread the thread
//! parks. Async tasks `.await` the `*_async` forms (the blocking forms panic
//! inside an async task rather than block an M). A wake-up from a goroutine
//! readies the waiter into the waking P's `runnext`, as Go's `semrelease` does.
//!
//! Dropping a pending future always removes its waiter; if ownership, a read
//! lock, permits or a signal had already been handed to it, they are passed on —
//! never lost, never leaked.
//!
//! | type | Go | notes |
//! |---|---|---|
//! | [`Mutex<T>`] | `sync.Mutex` | guard-based; normal + starvation mode (`raw_mutex.rs`) |
//! | [`RwLock<T>`] | `sync.RWMutex` | writer-preferring, readers not starved |
//! | [`WaitGroup`] | `sync.WaitGroup` | cloneable handle; `go(f)` is Go 1.25's `wg.Go` |
//! | [`Once`] | `sync.Once` | a panicking `f` counts as done |
//! | [`Cond`] | `sync.Cond` | used with [`MutexGuard`] |
//! | [`Semaphore`] | `x/sync/semaphore.Weighted` | FIFO, weighted; RAII [`SemaphorePermit`] |

mod cond;
mod mutex;
mod once;
mod raw_mutex;
mod rwlock;
mod semaphore;
mod waitgroup;
pub(crate) mod waitlist;

pub use cond::{Cond, CondWaitFuture};
pub use mutex::{Mutex, MutexGuard, MutexLockFuture};
pub use once::Once;
pub use rwlock::{RwLock, RwLockReadFuture, RwLockReadGuard, RwLockWriteFuture, RwLockWriteGuard};
pub use semaphore::{Semaphore, SemaphoreAcquireFuture, SemaphorePermit};
pub use waitgroup::{WaitGroup, WaitGroupFuture};
