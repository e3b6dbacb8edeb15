// W1 spawn: spawn n trivial goroutines that each bump a shared atomic; wait
// for all of them. Same method as the Rust implementations
// (bench/src/workloads/w1_spawn.rs): a root goroutine (here: main) spawns the
// n goroutines; each does one atomic add; the one that makes the count reach
// n closes `done`, which main waits on. (A sync.WaitGroup would add one more
// atomic per goroutine, its Done, on top of the bump.)
//
// usage: GOMAXPROCS=procs w1_spawn <n>    prints one JSON line
package main

import (
	"sync/atomic"
	"time"
)

func main() {
	n := sizeArg()
	warmUp()

	var count int64
	done := make(chan struct{})
	t := time.Now()
	for i := int64(0); i < n; i++ {
		go func() {
			if atomic.AddInt64(&count, 1) == n {
				close(done)
			}
		}()
	}
	<-done
	elapsed := time.Since(t)

	report("w1", n, elapsed, atomic.LoadInt64(&count), 0, 0)
}
