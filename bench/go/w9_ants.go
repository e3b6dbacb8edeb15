// W9 pool, the ants peers (github.com/panjf2000/ants/v2, vendored in
// bench/third_party/gopath; built with GOPATH pointing there). The method is
// ants' own benchmark (ants_benchmark_test.go): RunTimes = 1e6 tasks,
// PoolCap = 5e4, each task demoFunc = sleep 10 ms, the pool built with
// WithExpiryDuration(10 s) before the clock starts. Same method as
// bench/src/workloads/w9_pool.rs.
//
//   - pool (W9, BenchmarkAntsPool): NewPool(50000); a root goroutine submits
//     n closures that each sleep 10 ms and call wg.Done(), then waits on the
//     sync.WaitGroup. Timed: from the first Submit until wg.Wait returns.
//   - multi (W9, BenchmarkAntsMultiPool): the same through
//     NewMultiPool(10, 5000, RoundRobin).
//   - pool-throughput, multi-throughput (W9t, BenchmarkAntsPoolThroughput,
//     BenchmarkAntsMultiPoolThroughput): n Submit(demoFunc); timed: the
//     submit loop only (Submit blocks while all 50,000 workers are busy).
//   - pool-parallel (W9p, BenchmarkParallelAntsPoolThroughput): the same
//     NewPool(50000); the root spawns submitters() = 4 × GOMAXPROCS
//     goroutines that each Submit(demoFunc) their share of the n tasks and
//     send their count of nil errors on a buffered channel. Timed: until the
//     root has every count. (b.RunParallel runs GOMAXPROCS × parallelism
//     goroutines, parallelism 1 unless b.SetParallelism; here 4.)
//   - pool-saturated (W9s; no ants benchmark: the pool's own cost per task):
//     NewPool(2 × GOMAXPROCS); submitters() goroutines each Submit their
//     share of n empty tasks that mark a sync.WaitGroup done. Timed: until
//     every submitter has returned its count and wg.Wait returns.
//
// The result is the number of Submit calls that returned nil.
//
// usage: GOMAXPROCS=procs w9_ants <n> pool|multi|pool-throughput|multi-throughput|pool-parallel|pool-saturated
package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/panjf2000/ants/v2"
)

const (
	poolCap           = 50000
	defaultExpiryTime = 10 * time.Second
)

// demoFunc is ants' task: sleep BenchParam = 10 ms.
func demoFunc() {
	time.Sleep(10 * time.Millisecond)
}

// submitter is what Pool and MultiPool have in common here.
type submitter interface {
	Submit(task func()) error
}

func main() {
	n, mode := sizeModeArgs("pool", "multi", "pool-throughput", "multi-throughput", "pool-parallel", "pool-saturated")
	warmUp()

	var p submitter
	var err error
	impl := "ants"
	switch mode {
	case "pool", "pool-throughput", "pool-parallel":
		p, err = ants.NewPool(poolCap, ants.WithExpiryDuration(defaultExpiryTime))
	case "pool-saturated":
		p, err = ants.NewPool(2*runtime.GOMAXPROCS(0), ants.WithExpiryDuration(defaultExpiryTime))
	default:
		impl = "ants-multi"
		p, err = ants.NewMultiPool(10, poolCap/10, ants.RoundRobin, ants.WithExpiryDuration(defaultExpiryTime))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ants: %v\n", err)
		os.Exit(1)
	}

	type out struct {
		elapsed time.Duration
		ok      int64
	}
	done := make(chan out)
	go func() {
		var ok int64
		if mode == "pool-throughput" || mode == "multi-throughput" {
			t := time.Now()
			for i := int64(0); i < n; i++ {
				if p.Submit(demoFunc) == nil {
					ok++
				}
			}
			done <- out{time.Since(t), ok}
			return
		}
		if mode == "pool-saturated" {
			units := submitters()
			counts := make(chan int64, units)
			var wg sync.WaitGroup
			t := time.Now()
			wg.Add(int(n))
			for u := 0; u < units; u++ {
				k := share(n, units, u)
				go func() {
					var accepted int64
					for i := int64(0); i < k; i++ {
						if p.Submit(func() { wg.Done() }) == nil {
							accepted++
						} else {
							wg.Done()
						}
					}
					counts <- accepted
				}()
			}
			for u := 0; u < units; u++ {
				ok += <-counts
			}
			wg.Wait()
			done <- out{time.Since(t), ok}
			return
		}
		if mode == "pool-parallel" {
			units := submitters()
			counts := make(chan int64, units)
			t := time.Now()
			for u := 0; u < units; u++ {
				k := share(n, units, u)
				go func() {
					var accepted int64
					for i := int64(0); i < k; i++ {
						if p.Submit(demoFunc) == nil {
							accepted++
						}
					}
					counts <- accepted
				}()
			}
			for u := 0; u < units; u++ {
				ok += <-counts
			}
			done <- out{time.Since(t), ok}
			return
		}
		var wg sync.WaitGroup
		t := time.Now()
		wg.Add(int(n))
		for i := int64(0); i < n; i++ {
			if p.Submit(func() {
				demoFunc()
				wg.Done()
			}) == nil {
				ok++
			} else {
				wg.Done()
			}
		}
		wg.Wait()
		done <- out{time.Since(t), ok}
	}()
	r := <-done
	workload := "w9"
	switch mode {
	case "pool-throughput", "multi-throughput":
		workload = "w9t"
	case "pool-parallel":
		workload = "w9p"
	case "pool-saturated":
		workload = "w9s"
	}
	reportImpl(workload, impl, n, r.elapsed, r.ok)
}
