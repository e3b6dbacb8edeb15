// W13 churn: n goroutines each park on a chan struct{} of their own, all are
// released (closed), all joined with a sync.WaitGroup — one round. One
// warm-up round, then 3 timed rounds. Same method as
// bench/src/workloads/w13_churn.rs.
//
// usage: GOMAXPROCS=procs w13_churn <n>    prints one JSON line
package main

import (
	"sync"
	"time"
)

func round(n int64) int64 {
	var wg sync.WaitGroup
	chans := make([]chan struct{}, n)
	for i := range chans {
		c := make(chan struct{})
		chans[i] = c
		wg.Add(1)
		go func() {
			<-c
			wg.Done()
		}()
	}
	for _, c := range chans {
		close(c)
	}
	wg.Wait()
	return n
}

func main() {
	n := sizeArg()
	warmUp()
	done := make(chan int64)
	go func() { done <- round(n) }()
	<-done
	t := time.Now()
	var total int64
	for r := 0; r < 3; r++ {
		go func() { done <- round(n) }()
		total += <-done
	}
	report("w13", n, time.Since(t), total, 0, 0)
}
