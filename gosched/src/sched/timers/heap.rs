//! A 4-ary min-heap of timers keyed by deadline (Go's per-P timer heap: parent of
//! `i` is `(i - 1) / 4`). Four children per node keep the tree shallow and the
//! sift-down scan within one or two cache lines.
//!
//! Removal is lazy, as in Go: a stopped timer stays in the heap, marked, until it
//! reaches the top and is popped (its entry is then skipped by `Timers::run_due`),
//! or until `Timers::add` compacts the heap with `retain`.

pub(crate) struct Heap<T> {
    items: Vec<(u64, T)>,
}

impl<T> Heap<T> {
    pub(crate) const fn new() -> Self {
        Heap { items: Vec::new() }
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Earliest deadline, if any.
    pub(crate) fn peek_when(&self) -> Option<u64> {
        self.items.first().map(|e| e.0)
    }

    pub(crate) fn push(&mut self, when: u64, item: T) {
        self.items.push((when, item));
        self.sift_up(self.items.len() - 1);
    }

    /// Remove and return the earliest item if its deadline is `<= now`.
    pub(crate) fn pop_if_due(&mut self, now: u64) -> Option<(u64, T)> {
        if self.items.first()?.0 > now {
            return None;
        }
        let last = self.items.len() - 1;
        self.items.swap(0, last);
        let top = self.items.pop();
        if !self.items.is_empty() {
            self.sift_down(0);
        }
        top
    }

    /// Keep only the items for which `keep` holds, then rebuild (used when most of
    /// the heap is stopped timers).
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.items.retain(|e| keep(&e.1));
        for i in (0..self.items.len()).rev() {
            self.sift_down(i);
        }
        // Give back the memory of a heap that shrank a lot (a million timers
        // stopped at once must not keep a million slots).
        if self.items.capacity() > 4 * self.items.len() + 64 {
            self.items.shrink_to(2 * self.items.len() + 16);
        }
    }

    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (u64, T)> + '_ {
        self.items.drain(..)
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 4;
            if self.items[i].0 >= self.items[parent].0 {
                break;
            }
            self.items.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.items.len();
        loop {
            let first = 4 * i + 1;
            if first >= n {
                return;
            }
            let mut min = first;
            for c in first + 1..(first + 4).min(n) {
                if self.items[c].0 < self.items[min].0 {
                    min = c;
                }
            }
            if self.items[min].0 >= self.items[i].0 {
                return;
            }
            self.items.swap(i, min);
            i = min;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_deadline_order() {
        let mut h = Heap::new();
        let mut x: u64 = 12345;
        let mut all = Vec::new();
        for i in 0..10_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let when = x % 1000;
            h.push(when, i);
            all.push(when);
        }
        all.sort_unstable();
        let mut out = Vec::new();
        while let Some((w, _)) = h.pop_if_due(u64::MAX) {
            out.push(w);
        }
        assert_eq!(out, all);
    }

    #[test]
    fn only_due_items_pop() {
        let mut h = Heap::new();
        for w in [50, 10, 30, 20, 40] {
            h.push(w, w);
        }
        let mut got = Vec::new();
        while let Some((_, v)) = h.pop_if_due(30) {
            got.push(v);
        }
        assert_eq!(got, vec![10, 20, 30]);
        assert_eq!(h.peek_when(), Some(40));
        h.retain(|v| *v != 40);
        assert_eq!(h.peek_when(), Some(50));
        assert_eq!(h.len(), 1);
    }
}
