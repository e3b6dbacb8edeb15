//! `select!` and `select_async!`: the static front end of `select.rs`.
//!
//! The macros parse the arms with a token muncher into an accumulator, then emit
//! one `RecvArm`/`SendArm` local per channel arm (each munching step introduces
//! its own hygienic `__arm` identifier, so 64 arms give 64 distinct locals), run
//! the select over `&mut [&mut dyn SelectArm]`, and dispatch on the arm that
//! reports `is_selected()`.

/// Go's `select`: wait until one of several channel operations can proceed and
/// run exactly that one.
///
/// ```
/// use gosched::{chan, select};
/// use std::time::Duration;
///
/// let (a, b) = (chan::<i32>(1), chan::<&str>(0));
/// a.send(7).unwrap();
/// let got = select! {
///     recv(a) -> v => v.map(|n| n * 6),
///     recv(b) -> s => s.map(|s| s.len() as i32),
///     after(Duration::from_secs(1)) => None,
/// };
/// assert_eq!(got, Some(42));
/// ```
///
/// Arms (any number, any order, comma-separated; a block body needs no comma):
/// - `recv(ch) -> v => body`: `v: Option<T>`, `None` once `ch` is closed and
///   drained (a closed channel is always ready, as in Go);
/// - `send(ch, value) -> res => body`: `res: Result<(), SendError<T>>`, `Err`
///   with the value when `ch` is closed (Go panics there). The value is evaluated
///   before the select starts and dropped if another arm wins;
/// - `default => body`: taken at once when no arm is ready (a non-blocking select);
/// - `after(duration) => body`: taken if nothing is ready within `duration`.
///
/// When several arms are ready one is chosen uniformly at random. With none
/// ready and no `default`, the goroutine parks (on a plain thread, the thread
/// parks) until one is, and exactly one arm completes: no other channel gives
/// up a value or takes one. `ch` may be a `Chan`, `Sender`/`Receiver` (or a
/// reference to one). An empty `select! {}` blocks forever.
///
/// A `send` arm, and `default` for a select that never waits:
///
/// ```
/// use gosched::{chan, select};
///
/// let jobs = chan::<u32>(1);
/// let mut dropped = 0;
/// for job in 1..=3 {
///     select! {
///         send(jobs, job) -> res => res.unwrap(),
///         default => dropped += 1, // full: shed the load
///     }
/// }
/// assert_eq!((jobs.recv(), dropped), (Some(1), 2));
/// ```
///
/// # Panics
/// Inside an async task: use [`select_async!`](crate::select_async) there.
#[macro_export]
macro_rules! select {
    ($($tokens:tt)*) => {
        $crate::__select_parse!(@blocking [] [] [] $($tokens)*)
    };
}

/// The async form of [`select!`](crate::select): same arms, `.await`s instead of
/// blocking. Dropping the enclosing future while it waits loses nothing: a value
/// already handed to a receive arm goes back into its channel.
///
/// ```
/// # gosched::Runtime::new().unwrap().block_on(async {
/// use gosched::{chan, select_async};
/// let (a, b) = (chan::<u8>(1), chan::<u8>(1));
/// b.send_async(2).await.unwrap();
/// let n = select_async! {
///     recv(a) -> v => v.unwrap(),
///     recv(b) -> v => v.unwrap() * 10,
/// };
/// assert_eq!(n, 20);
/// # });
/// ```
#[macro_export]
macro_rules! select_async {
    ($($tokens:tt)*) => {
        $crate::__select_parse!(@async [] [] [] $($tokens)*)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_parse {
    // Done.
    (@$mode:ident $arms:tt $def:tt $aft:tt) => {
        $crate::__select_emit!(@$mode $arms $def $aft)
    };
    // Separator.
    (@$mode:ident $arms:tt $def:tt $aft:tt , $($rest:tt)*) => {
        $crate::__select_parse!(@$mode $arms $def $aft $($rest)*)
    };

    // recv(ch) -> v => body
    (@$mode:ident [$($arms:tt)*] $def:tt $aft:tt
        recv($ch:expr) -> $v:pat => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(@$mode [$($arms)* (__arm recv ($ch) ($v) $body)] $def $aft $($rest)*)
    };
    (@$mode:ident [$($arms:tt)*] $def:tt $aft:tt
        recv($ch:expr) -> $v:pat => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@$mode [$($arms)* (__arm recv ($ch) ($v) { $body })] $def $aft $($($rest)*)?)
    };

    // send(ch, value) -> res => body
    (@$mode:ident [$($arms:tt)*] $def:tt $aft:tt
        send($ch:expr, $val:expr) -> $r:pat => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(@$mode [$($arms)* (__arm send ($ch, $val) ($r) $body)] $def $aft $($rest)*)
    };
    (@$mode:ident [$($arms:tt)*] $def:tt $aft:tt
        send($ch:expr, $val:expr) -> $r:pat => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@$mode [$($arms)* (__arm send ($ch, $val) ($r) { $body })] $def $aft $($($rest)*)?)
    };

    // default => body
    (@$mode:ident $arms:tt [] $aft:tt default => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(@$mode $arms [$body] $aft $($rest)*)
    };
    (@$mode:ident $arms:tt [] $aft:tt default => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@$mode $arms [{ $body }] $aft $($($rest)*)?)
    };
    (@$mode:ident $arms:tt [$($def:tt)+] $aft:tt default $($rest:tt)*) => {
        ::core::compile_error!("select!: more than one `default` arm")
    };

    // after(duration) => body
    (@$mode:ident $arms:tt $def:tt [] after($d:expr) => $body:block $($rest:tt)*) => {
        $crate::__select_parse!(@$mode $arms $def [($d) $body] $($rest)*)
    };
    (@$mode:ident $arms:tt $def:tt [] after($d:expr) => $body:expr $(, $($rest:tt)*)?) => {
        $crate::__select_parse!(@$mode $arms $def [($d) { $body }] $($($rest)*)?)
    };
    (@$mode:ident $arms:tt $def:tt [$($aft:tt)+] after $($rest:tt)*) => {
        ::core::compile_error!("select!: more than one `after` arm")
    };

    (@$mode:ident $arms:tt $def:tt $aft:tt $($rest:tt)+) => {
        ::core::compile_error!(::core::concat!(
            "select!: expected `recv(ch) -> v => ..`, `send(ch, value) -> res => ..`, ",
            "`default => ..` or `after(duration) => ..`, found: ",
            ::core::stringify!($($rest)+)
        ))
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_emit {
    (@$mode:ident
        [$(($arm:ident $kind:ident ($($args:tt)*) ($v:pat) $body:block))*]
        [$($def:block)?]
        [$(($d:expr) $abody:block)?]) => {{
        // `let x = &<channel expr>` extends the life of a temporary channel (a
        // Go user writes `recv(time::after(d))`) to the whole select; the arm,
        // which borrows it, then shadows the name.
        $(
            let $arm = $crate::__select_chan!($kind ($($args)*));
            let mut $arm = $crate::__select_arm!($kind $arm ($($args)*));
        )*
        let __selected = $crate::__select_run!(
            @$mode
            [$( &mut $arm as &mut dyn $crate::chan::SelectArm ),*]
            $crate::__select_flag!($($def)?),
            $crate::__select_after!($($d)?)
        );
        match __selected {
            $crate::chan::Selected::Arm(_) => {
                $( if $arm.is_selected() {
                    #[allow(unused_variables)]
                    let $v = $arm.take();
                    $body
                } else )* {
                    ::core::unreachable!("select!: the chosen arm reports no result")
                }
            }
            $crate::chan::Selected::Default => {
                $crate::__select_or_unreachable!($($def)?)
            }
            $crate::chan::Selected::Timeout => {
                $crate::__select_or_unreachable!($($abody)?)
            }
        }
    }};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_run {
    (@blocking [$($arms:expr),*] $def:expr, $after:expr) => {
        $crate::chan::__select_blocking(&mut [$($arms),*], $def, $after)
    };
    (@async [$($arms:expr),*] $def:expr, $after:expr) => {
        $crate::chan::__select_future(&mut [$($arms),*], $def, $after).await
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_chan {
    (recv ($ch:expr)) => {
        &$ch
    };
    (send ($ch:expr, $val:expr)) => {
        &$ch
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_arm {
    (recv $chan:ident ($ch:expr)) => {
        $chan.recv_arm()
    };
    (send $chan:ident ($ch:expr, $val:expr)) => {
        $chan.send_arm($val)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_flag {
    () => {
        false
    };
    ($($t:tt)+) => {
        true
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_after {
    () => {
        ::core::option::Option::None
    };
    ($d:expr) => {
        ::core::option::Option::Some($d)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_or_unreachable {
    () => {
        ::core::unreachable!("select!: outcome without a matching arm")
    };
    ($b:block) => {
        $b
    };
}
