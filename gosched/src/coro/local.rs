//! Goroutine-local storage: `GoLocal<T>` and `goroutine_local!`: a value
//! per goroutine, not per OS thread, that no thread switch can confuse,
//! also where goroutines are not virtual threads (where they are, a
//! `thread_local!` is per goroutine too).
//!
//! Each goroutine owns a table of slots (`GoroutineCtx::locals`), indexed
//! by a key every `GoLocal` takes from a global counter on first use. A slot
//! is filled by the key's `init` on the goroutine's first `with`, lives as
//! long as the goroutine, and is dropped with it (on its own M). Slots are
//! only ever added, each value boxed, so a `&T` handed to `with` stays valid
//! while the closure runs — even if it blocks, or uses other keys (which may
//! grow the table: the boxes do not move).
//!
//! Outside a goroutine (a plain thread, an async task) `with` uses a slot of
//! the calling OS thread instead, like `thread_local!`: an async task that
//! needs per-task state should carry it in the task.

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering::*};

/// One goroutine's (or one thread's) values, by key.
#[derive(Default)]
pub(crate) struct Locals(RefCell<Vec<Option<Box<dyn Any>>>>);

impl Locals {
    /// The value of `key`, made by `init` if this table has none yet.
    fn get_or_init<T: 'static>(&self, key: usize, init: fn() -> T) -> *const T {
        if let Some(p) = self.peek::<T>(key) {
            return p;
        }
        // No borrow held while `init` runs: it may use other keys.
        let boxed: Box<dyn Any> = Box::new(init());
        let mut v = self.0.borrow_mut();
        if v.len() <= key {
            v.resize_with(key + 1, || None);
        }
        if v[key].is_none() {
            v[key] = Some(boxed);
        }
        drop(v);
        self.peek::<T>(key).expect("slot just filled")
    }

    fn peek<T: 'static>(&self, key: usize) -> Option<*const T> {
        let v = self.0.borrow();
        let b = v.get(key)?.as_ref()?;
        Some(b.downcast_ref::<T>().expect("a GoLocal key holds one type") as *const T)
    }
}

/// Keys handed out so far (0 is never used: it marks "no key yet").
static NEXT_KEY: AtomicUsize = AtomicUsize::new(1);

/// A goroutine-local value: each goroutine sees its own `T`, made by `init`
/// on its first use and dropped when the goroutine ends. Declare one with
/// [`goroutine_local!`](crate::goroutine_local).
///
/// ```
/// use std::cell::Cell;
/// gosched::goroutine_local! {
///     static REQUESTS: Cell<u32> = Cell::new(0);
/// }
/// let rt = gosched::Builder::new().procs(2).build().unwrap();
/// let h = rt.go(|| {
///     REQUESTS.with(|r| r.set(r.get() + 1));
///     gosched::yield_now(); // another goroutine may run here, on any thread
///     REQUESTS.with(|r| r.get())
/// });
/// assert_eq!(rt.block_on(h).unwrap(), 1);
/// ```
pub struct GoLocal<T: 'static> {
    init: fn() -> T,
    key: AtomicUsize,
}

impl<T: 'static> GoLocal<T> {
    /// A key whose values `init` makes (used by `goroutine_local!`).
    ///
    /// ```
    /// use std::cell::Cell;
    /// static HITS: gosched::GoLocal<Cell<u32>> = gosched::GoLocal::new(|| Cell::new(0));
    /// let h = gosched::go(|| {
    ///     HITS.with(|h| h.set(h.get() + 1));
    ///     HITS.with(|h| h.get())
    /// });
    /// assert_eq!(h.join().unwrap(), 1);
    /// ```
    pub const fn new(init: fn() -> T) -> Self {
        GoLocal {
            init,
            key: AtomicUsize::new(0),
        }
    }

    fn key(&self) -> usize {
        match self.key.load(Acquire) {
            0 => {
                let k = NEXT_KEY.fetch_add(1, Relaxed);
                match self.key.compare_exchange(0, k, AcqRel, Acquire) {
                    Ok(_) => k,
                    Err(other) => other, // lost the race: an unused key
                }
            }
            k => k,
        }
    }

    /// Run `f` with the calling goroutine's value (the calling thread's,
    /// outside goroutines).
    ///
    /// ```
    /// use std::cell::RefCell;
    /// gosched::goroutine_local! {
    ///     static LOG: RefCell<Vec<u32>> = RefCell::new(Vec::new());
    /// }
    /// let hs: Vec<_> = (0..4)
    ///     .map(|i| gosched::go(move || {
    ///         LOG.with(|l| l.borrow_mut().push(i));
    ///         gosched::yield_now();
    ///         LOG.with(|l| l.borrow().clone()) // only this goroutine's pushes
    ///     }))
    ///     .collect();
    /// for (i, h) in hs.into_iter().enumerate() {
    ///     assert_eq!(h.join().unwrap(), vec![i as u32]);
    /// }
    /// ```
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let key = self.key();
        if let Some(p) = super::with_goroutine_locals(|l| l.get_or_init(key, self.init)) {
            // SAFETY: the value is boxed in the calling goroutine's table,
            // which only grows and lives until the goroutine ends — not
            // before `f` returns, since `f` runs on the goroutine. Only this
            // goroutine reaches its table.
            return f(unsafe { &*p });
        }
        thread_local! {
            static THREAD: Locals = Locals::default();
        }
        let p = THREAD.with(|l| l.get_or_init(key, self.init));
        // SAFETY: the thread's table only grows and lives until the thread
        // exits, which cannot happen while `f` runs on it; only this thread
        // reaches it.
        f(unsafe { &*p })
    }
}

impl<T: 'static> std::fmt::Debug for GoLocal<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoLocal").finish_non_exhaustive()
    }
}

/// Declare goroutine-local statics ([`GoLocal`]), as `thread_local!` does
/// thread-locals:
///
/// ```
/// gosched::goroutine_local! {
///     static NAME: std::cell::RefCell<String> = std::cell::RefCell::new(String::new());
/// }
/// let h = gosched::go(|| {
///     NAME.with(|n| n.borrow_mut().push_str("fetcher"));
///     NAME.with(|n| n.borrow().clone())
/// });
/// assert_eq!(h.join().unwrap(), "fetcher");
/// NAME.with(|n| assert!(n.borrow().is_empty())); // this thread's own value
/// ```
#[macro_export]
macro_rules! goroutine_local {
    ($($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr;)+) => {
        $(
            $(#[$attr])*
            $vis static $name: $crate::GoLocal<$t> = $crate::GoLocal::new(|| $init);
        )+
    };
}
