// T1 after-churn: one goroutine creates n time.After(1 h) channels and drops
// each at once (Go >= 1.23 frees an unreferenced timer at once; earlier
// versions keep it until it fires). Same method as
// bench/src/workloads/t1_after.rs. Timed: starting the goroutine until it
// returns its count.
//
// usage: GOMAXPROCS=procs t1_after <n>    prints one JSON line
package main

import "time"

func main() {
	n := sizeArg()
	warmUp()

	done := make(chan int64)
	t := time.Now()
	go func() {
		var i int64
		for i = 0; i < n; i++ {
			c := time.After(time.Hour)
			_ = c
		}
		done <- i
	}()
	count := <-done
	elapsed := time.Since(t)

	report("t1", n, elapsed, count, 0, 0)
}
