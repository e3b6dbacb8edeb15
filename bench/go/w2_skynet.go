// W2 skynet, the classic one: a 10-ary tree of goroutines with `leaves`
// leaves; a leaf sends its number, an inner node makes one unbuffered
// channel, spawns its 10 children on it and sends the sum of what they send.
// The result must be leaves*(leaves-1)/2. (gosched-go-chan mirrors this
// program; the other Rust implementations join their children's handles
// instead: bench/src/workloads/w2_skynet.rs.)
// Timed: spawning the root node until its sum is received.
//
// usage: GOMAXPROCS=procs w2_skynet <leaves>    prints one JSON line
package main

import "time"

func skynet(c chan<- int64, num, size int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64)
	sub := size / 10
	for i := int64(0); i < 10; i++ {
		go skynet(rc, num+i*sub, sub)
	}
	var sum int64
	for i := 0; i < 10; i++ {
		sum += <-rc
	}
	c <- sum
}

func main() {
	leaves := sizeArg()
	warmUp()

	t := time.Now()
	c := make(chan int64)
	go skynet(c, 0, leaves)
	sum := <-c
	elapsed := time.Since(t)

	report("w2", leaves, elapsed, sum, 0, 0)
}
