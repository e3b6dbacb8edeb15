// W9 pool, the plain-goroutine peer (ants' BenchmarkGoroutines and
// BenchmarkGoroutinesThroughput, ants_benchmark_test.go): no pool, one
// goroutine per task. Same method as bench/src/workloads/w9_pool.rs.
//
//   - wait (W9): a root goroutine spawns n goroutines that each sleep 10 ms
//     and call wg.Done(), then waits on the sync.WaitGroup. Timed: from the
//     first spawn until wg.Wait returns.
//   - throughput (W9t): the root spawns n goroutines that each sleep 10 ms
//     (`go demoFunc()`). Timed: the spawn loop only; nothing waits for them
//     (ants' benchmark does not either).
//
// usage: GOMAXPROCS=procs w9_pool <n> wait|throughput    prints one JSON line
package main

import (
	"sync"
	"time"
)

// demoFunc is ants' task: sleep BenchParam = 10 ms.
func demoFunc() {
	time.Sleep(10 * time.Millisecond)
}

func main() {
	n, mode := sizeModeArgs("wait", "throughput")
	warmUp()
	type out struct {
		elapsed time.Duration
		count   int64
	}
	done := make(chan out)
	go func() {
		if mode == "throughput" {
			t := time.Now()
			for i := int64(0); i < n; i++ {
				go demoFunc()
			}
			done <- out{time.Since(t), n}
			return
		}
		var wg sync.WaitGroup
		t := time.Now()
		wg.Add(int(n))
		for i := int64(0); i < n; i++ {
			go func() {
				demoFunc()
				wg.Done()
			}()
		}
		wg.Wait()
		done <- out{time.Since(t), n}
	}()
	r := <-done
	workload := "w9"
	if mode == "throughput" {
		workload = "w9t"
	}
	reportImpl(workload, "go", n, r.elapsed, r.count)
}
