// W3 pingpong: two goroutines, two unbuffered channels, n round trips.
// Same method as bench/src/workloads/w3_pingpong.rs: main (the root) makes
// ping and pong, spawns the ponger (answers every v on ping with v+1 on
// pong until ping is closed), sends 0..n-1 on ping waiting for each answer,
// sums the answers (the check: n(n+1)/2), closes ping and waits for the
// ponger to end. Timed: all of it.
//
// usage: GOMAXPROCS=procs w3_pingpong <n>    prints one JSON line
package main

import "time"

func main() {
	n := sizeArg()
	warmUp()

	t := time.Now()
	ping := make(chan int64)
	pong := make(chan int64)
	done := make(chan struct{})
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(done)
	}()
	var sum int64
	for i := int64(0); i < n; i++ {
		ping <- i
		sum += <-pong
	}
	close(ping)
	<-done
	elapsed := time.Since(t)

	report("w3", n, elapsed, sum, 0, 0)
}
