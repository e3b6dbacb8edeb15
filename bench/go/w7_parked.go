// W7 parked: n goroutines each parked on its own chan struct{}; reported as
// (VmRSS once all are parked - VmRSS before spawning) / n bytes per goroutine.
// Same method as bench/src/workloads/w7_parked.rs: read VmRSS; make n
// channels (kept in a slice, as the Rust side keeps its senders) and spawn
// one goroutine per channel that bumps `parked` right before `<-ch`; poll
// `parked` until it is n, sleep 100 ms, read VmRSS; then close every channel,
// each goroutine bumps `finished` on wake and the last one closes `done`.
// The elapsed time reported is spawning until all are parked.
//
// usage: GOMAXPROCS=procs w7_parked <n>    prints one JSON line
package main

import (
	"sync/atomic"
	"time"
)

func main() {
	n := sizeArg()
	warmUp()

	var parked, finished int64
	done := make(chan struct{})

	before := statusKB("VmRSS")
	t := time.Now()
	chans := make([]chan struct{}, n)
	for i := range chans {
		ch := make(chan struct{})
		chans[i] = ch
		go func() {
			atomic.AddInt64(&parked, 1)
			<-ch
			if atomic.AddInt64(&finished, 1) == n {
				close(done)
			}
		}()
	}
	for atomic.LoadInt64(&parked) < n {
		time.Sleep(200 * time.Microsecond)
	}
	elapsed := time.Since(t)
	time.Sleep(100 * time.Millisecond)
	after := statusKB("VmRSS")

	for _, ch := range chans {
		close(ch)
	}
	<-done

	report("w7", n, elapsed, atomic.LoadInt64(&finished), before, after)
}
