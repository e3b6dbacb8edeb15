// W5 mpmc: 4 producer and 4 consumer goroutines share one channel of
// capacity cap (1024, or 0 = unbuffered); n int64 in all.
// Same method as bench/src/workloads/w5_mpmc.rs: main (the root) makes the
// channel, spawns 4 consumers (each sums what it receives until the channel
// is closed and returns its sum on a buffered channel), then 4 producers
// (producer p sends p*n/4 .. (p+1)*n/4-1); a WaitGroup waits for the
// producers, then main closes the channel and adds the 4 sums (the check:
// n(n-1)/2). Timed: all of it.
//
// usage: GOMAXPROCS=procs w5_mpmc <n> <cap>    prints one JSON line
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintf(os.Stderr, "usage: GOMAXPROCS=procs %s <n> <cap>\n", os.Args[0])
		os.Exit(2)
	}
	n, err1 := strconv.ParseInt(os.Args[1], 10, 64)
	capacity, err2 := strconv.Atoi(os.Args[2])
	if err1 != nil || err2 != nil || n < 4 || n%4 != 0 || capacity < 0 {
		fmt.Fprintf(os.Stderr, "bad arguments %q\n", os.Args[1:])
		os.Exit(2)
	}
	warmUp()

	const producers, consumers = 4, 4
	per := n / producers
	t := time.Now()
	ch := make(chan int64, capacity)
	sums := make(chan int64, consumers)
	for c := 0; c < consumers; c++ {
		go func() {
			var sum int64
			for v := range ch {
				sum += v
			}
			sums <- sum
		}()
	}
	var wg sync.WaitGroup
	wg.Add(producers)
	for p := int64(0); p < producers; p++ {
		go func(p int64) {
			for v := p * per; v < (p+1)*per; v++ {
				ch <- v
			}
			wg.Done()
		}(p)
	}
	wg.Wait()
	close(ch)
	var total int64
	for c := 0; c < consumers; c++ {
		total += <-sums
	}
	elapsed := time.Since(t)

	report("w5", n, elapsed, total, 0, 0)
}
