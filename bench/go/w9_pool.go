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
//   - parallel (W9p, the no-pool peer of BenchmarkParallelAntsPoolThroughput):
//     the root spawns submitters() = 4 × GOMAXPROCS goroutines that each
//     spawn their share of the n goroutines (`go demoFunc()`) and send their
//     count on a buffered channel. Timed: until the root has every count;
//     nothing waits for the tasks.
//
// usage: GOMAXPROCS=procs w9_pool <n> wait|throughput|parallel    prints one JSON line
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
	n, mode := sizeModeArgs("wait", "throughput", "parallel")
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
		if mode == "parallel" {
			units := submitters()
			counts := make(chan int64, units)
			t := time.Now()
			for u := 0; u < units; u++ {
				k := share(n, units, u)
				go func() {
					for i := int64(0); i < k; i++ {
						go demoFunc()
					}
					counts <- k
				}()
			}
			var total int64
			for u := 0; u < units; u++ {
				total += <-counts
			}
			done <- out{time.Since(t), total}
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
	switch mode {
	case "throughput":
		workload = "w9t"
	case "parallel":
		workload = "w9p"
	}
	reportImpl(workload, "go", n, r.elapsed, r.count)
}
