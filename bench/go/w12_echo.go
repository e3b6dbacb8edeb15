// W12 echo: 100 connections over loopback, each sending n 64-byte messages
// to an echo server and reading each echo (timed per round trip). Same
// method as bench/src/workloads/w12_echo.rs: one goroutine accepts and starts
// a goroutine per connection (ReadFull 64 bytes, write them back, until EOF);
// 100 client goroutines connect, then n times write a message and ReadFull
// its echo, comparing it byte for byte. TCP_NODELAY is Go's default.
// Timed: first connect to the last client's end. Reports the message count,
// and p50 / p99 / max round-trip latency in ns as x0 / x1 / x2.
//
// usage: GOMAXPROCS=procs w12_echo <n>    prints one JSON line
package main

import (
	"bytes"
	"io"
	"net"
	"sort"
	"time"
)

const conns = 100
const msg = 64

func message(conn, i int64) []byte {
	m := make([]byte, msg)
	for k := range m {
		m[k] = byte(conn*31 + i*7 + int64(k))
	}
	return m
}

func main() {
	n := sizeArg()
	warmUp()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := l.Addr().String()
	serverDone := make(chan struct{})
	go func() {
		done := make(chan struct{}, conns)
		for c := 0; c < conns; c++ {
			conn, err := l.Accept()
			if err != nil {
				panic(err)
			}
			go func(c net.Conn) {
				buf := make([]byte, msg)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						break
					}
					if _, err := c.Write(buf); err != nil {
						panic(err)
					}
				}
				done <- struct{}{}
			}(conn)
		}
		for c := 0; c < conns; c++ {
			<-done
		}
		close(serverDone)
	}()

	t := time.Now()
	lats := make(chan []int64, conns)
	for c := int64(0); c < conns; c++ {
		go func(c int64) {
			s, err := net.Dial("tcp", addr)
			if err != nil {
				panic(err)
			}
			lat := make([]int64, 0, n)
			back := make([]byte, msg)
			for i := int64(0); i < n; i++ {
				m := message(c, i)
				t0 := time.Now()
				if _, err := s.Write(m); err != nil {
					panic(err)
				}
				if _, err := io.ReadFull(s, back); err != nil {
					panic(err)
				}
				lat = append(lat, time.Since(t0).Nanoseconds())
				if !bytes.Equal(back, m) {
					panic("echo mismatch")
				}
			}
			s.Close()
			lats <- lat
		}(c)
	}
	var all []int64
	for c := 0; c < conns; c++ {
		all = append(all, <-lats...)
	}
	elapsed := time.Since(t)
	<-serverDone
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	at := func(q float64) int64 {
		if len(all) == 0 {
			return 0
		}
		return all[int(float64(len(all)-1)*q+0.5)]
	}
	reportExtra("w12", n, elapsed, int64(len(all)), at(0.5), at(0.99), at(1.0))
}
