// W6 fairness: 4 goroutines spin without a function call that could yield
// (Go preempts them asynchronously, by signal), and one goroutine sleeps 1 ms
// at a time for <size> ms. Reported: the ticker's lateness (each sleep's
// length minus 1 ms), p50/p99/max, and its tick count. Same method as
// bench/src/workloads/w6_fairness.rs: hogs first, then the ticker, whose
// window starts when it is started (not at its first run); the main
// goroutine waits for the ticker's report for <size> ms + 1 s, then stops
// the hogs (a starved ticker counts only its ticks within the window).
// Lateness: a tick is late by the time since the previous tick (or, for the
// first, since the start) beyond 1 ms.
//
// usage: GOMAXPROCS=procs w6_fairness <ms>    prints one JSON line
package main

import (
	"sort"
	"sync/atomic"
	"time"
)

const hogs = 4

func hog(stop *int32) uint64 {
	x := uint64(0x9E3779B97F4A7C15)
	for atomic.LoadInt32(stop) == 0 {
		for i := 0; i < 64; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	return x
}

func main() {
	ms := sizeArg()
	warmUp()
	window := time.Duration(ms) * time.Millisecond
	var stop int32
	done := make(chan uint64, hogs)
	for i := 0; i < hogs; i++ {
		go func() { done <- hog(&stop) }()
	}
	report := make(chan []int64, 1)
	start := time.Now()
	go func() {
		late := make([]int64, 0, ms+1)
		last := start
		for time.Since(start) < window {
			time.Sleep(time.Millisecond)
			now := time.Now()
			l := now.Sub(last) - time.Millisecond
			last = now
			if l < 0 {
				l = 0
			}
			late = append(late, int64(l))
		}
		report <- late
	}()
	var late []int64
	var ticks int64
	select {
	case late = <-report:
		ticks = int64(len(late))
		atomic.StoreInt32(&stop, 1)
	case <-time.After(window + time.Second):
		atomic.StoreInt32(&stop, 1)
		late = <-report
		ticks = int64(len(late))
		late = append(late, int64(window+time.Second))
	}
	for i := 0; i < hogs; i++ {
		<-done
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	at := func(q float64) int64 {
		if len(late) == 0 {
			return 0
		}
		return late[int(float64(len(late)-1)*q+0.5)]
	}
	reportExtra("w6", ms, window, ticks, at(0.5), at(0.99), at(1.0))
}

