// W10 blocking calls beside CPU work: GOMAXPROCS CPU goroutines do work in
// chunks (about 20 µs each, then runtime.Gosched) for <size> ms, first alone
// (the baseline), then beside 4 goroutines looping on a blocking 50 ms
// syscall.Nanosleep (entersyscall: sysmon hands their P off). Reported: the
// chunks done beside the callers as a percentage of the baseline, in
// hundredths (result), and both counts. Same method as
// bench/src/workloads/w10_syscall.rs.
//
// usage: GOMAXPROCS=procs w10_syscall <ms>    prints one JSON line
package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const callers = 4

func chunk(seed uint64) uint64 {
	x := seed | 1
	for i := 0; i < 20000; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

var sink uint64

func phase(d time.Duration, withCallers bool) int64 {
	var chunks int64
	var stop int32
	var wg sync.WaitGroup
	if withCallers {
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for atomic.LoadInt32(&stop) == 0 {
					ts := syscall.Timespec{Nsec: 50 * 1000 * 1000}
					syscall.Nanosleep(&ts, nil)
				}
			}()
		}
	}
	for i := 0; i < runtime.GOMAXPROCS(0); i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			x := uint64(i)
			for atomic.LoadInt32(&stop) == 0 {
				x = chunk(x)
				atomic.AddInt64(&chunks, 1)
				runtime.Gosched()
			}
			atomic.AddUint64(&sink, x)
		}(i)
	}
	t := time.Now()
	time.Sleep(d)
	n := atomic.LoadInt64(&chunks)
	atomic.StoreInt32(&stop, 1)
	el := time.Since(t)
	wg.Wait()
	return int64(float64(n) * d.Seconds() / el.Seconds())
}

func main() {
	ms := sizeArg()
	warmUp()
	d := time.Duration(ms) * time.Millisecond
	base := phase(d, false)
	beside := phase(d, true)
	b := base
	if b < 1 {
		b = 1
	}
	kept := int64(float64(beside)*10000/float64(b) + 0.5)
	reportExtra("w10", ms, 2*d, kept, base, beside, 0)
}
