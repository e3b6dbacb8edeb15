// W4 yield: 2*GOMAXPROCS goroutines each call runtime.Gosched() n times.
// Same method as bench/src/workloads/w4_yield.rs: the root (main) spawns the
// yielders, each hands back its loop count, main waits for all and sums them
// (the check). Timed: spawning until the last count is in.
//
// usage: GOMAXPROCS=procs w4_yield <n>    prints one JSON line
package main

import (
	"runtime"
	"time"
)

func main() {
	n := sizeArg()
	warmUp()

	units := 2 * runtime.GOMAXPROCS(0)
	counts := make(chan int64, units)
	t := time.Now()
	for u := 0; u < units; u++ {
		go func() {
			var i int64
			for i = 0; i < n; i++ {
				runtime.Gosched()
			}
			counts <- i
		}()
	}
	var total int64
	for u := 0; u < units; u++ {
		total += <-counts
	}
	elapsed := time.Since(t)

	report("w4", n, elapsed, total, 0, 0)
}
