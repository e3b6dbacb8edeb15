// W8 timers: n goroutines each sleep 10 ms (time.Sleep), joined with a
// sync.WaitGroup; wall time from the first spawn (ideal: 10 ms). Same method
// as bench/src/workloads/w13_churn.rs (`run_sleep`).
//
// usage: GOMAXPROCS=procs w8_sleep <n>    prints one JSON line
package main

import (
	"sync"
	"time"
)

func main() {
	n := sizeArg()
	warmUp()
	done := make(chan int64)
	t := time.Now()
	go func() {
		var wg sync.WaitGroup
		for i := int64(0); i < n; i++ {
			wg.Add(1)
			go func() {
				time.Sleep(10 * time.Millisecond)
				wg.Done()
			}()
		}
		wg.Wait()
		done <- n
	}()
	count := <-done
	report("w8", n, time.Since(t), count, 0, 0)
}
