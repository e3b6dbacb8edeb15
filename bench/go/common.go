// Helpers shared by every Go peer; built together with each program:
// GO111MODULE=off go build -o <bin> <program>.go common.go
// Kept to Go 1.19 (Debian's golang-go) so that either toolchain builds it.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// warmUp spawns and waits for one goroutine, as the Rust runtimes are warmed.
func warmUp() {
	c := make(chan struct{})
	go func() { close(c) }()
	<-c
}

// report prints the JSON line that gosched-bench reads.
func report(workload string, size int64, elapsed time.Duration, result int64, rssBeforeKB, rssAfterKB int64) {
	fmt.Printf("{\"workload\":%q,\"impl\":\"go\",\"procs\":%d,\"size\":%d,\"elapsed_ns\":%d,\"result\":%d,\"rss_before_kb\":%d,\"rss_after_kb\":%d,\"vmhwm_kb\":%d}\n",
		workload, runtime.GOMAXPROCS(0), size, elapsed.Nanoseconds(), result, rssBeforeKB, rssAfterKB, statusKB("VmHWM"))
}

// statusKB reads a kB field of /proc/self/status (VmRSS, VmHWM).
func statusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			v := strings.TrimSpace(strings.TrimPrefix(line, field+":"))
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// sizeArg is the one argument every program takes.
func sizeArg() int64 {
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: GOMAXPROCS=procs %s <size>\n", os.Args[0])
		os.Exit(2)
	}
	n, err := strconv.ParseInt(os.Args[1], 10, 64)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "bad size %q\n", os.Args[1])
		os.Exit(2)
	}
	return n
}

// runCalls (S1/S2) spreads n calls of call over 100 goroutines and returns
// the wall time and the sum of call's results.
func runCalls(n int64, call func() int64) (time.Duration, int64) {
	const units = 100
	per := n / units
	results := make(chan int64, units)
	t := time.Now()
	for u := 0; u < units; u++ {
		go func() {
			var s int64
			for i := int64(0); i < per; i++ {
				s += call()
			}
			results <- s
		}()
	}
	var total int64
	for u := 0; u < units; u++ {
		total += <-results
	}
	return time.Since(t), total
}

// reportExtra is report with the three workload-specific figures (W6: ticker
// lateness p50, p99, max in ns; W10: baseline and beside-the-callers chunk
// counts).
func reportExtra(workload string, size int64, elapsed time.Duration, result int64, x0, x1, x2 int64) {
	fmt.Printf("{\"workload\":%q,\"impl\":\"go\",\"procs\":%d,\"size\":%d,\"elapsed_ns\":%d,\"result\":%d,\"rss_before_kb\":0,\"rss_after_kb\":0,\"vmhwm_kb\":%d,\"x0\":%d,\"x1\":%d,\"x2\":%d}\n",
		workload, runtime.GOMAXPROCS(0), size, elapsed.Nanoseconds(), result, statusKB("VmHWM"), x0, x1, x2)
}

// reportImpl is report for programs that serve several rows (W9: go, ants,
// ants-multi): impl names the row.
func reportImpl(workload, impl string, size int64, elapsed time.Duration, result int64) {
	fmt.Printf("{\"workload\":%q,\"impl\":%q,\"procs\":%d,\"size\":%d,\"elapsed_ns\":%d,\"result\":%d,\"rss_before_kb\":0,\"rss_after_kb\":0,\"vmhwm_kb\":%d}\n",
		workload, impl, runtime.GOMAXPROCS(0), size, elapsed.Nanoseconds(), result, statusKB("VmHWM"))
}

// sizeModeArgs reads `<size> <mode>` (W9's programs).
func sizeModeArgs(modes ...string) (int64, string) {
	if len(os.Args) == 3 {
		n, err := strconv.ParseInt(os.Args[1], 10, 64)
		for _, m := range modes {
			if err == nil && n >= 1 && os.Args[2] == m {
				return n, m
			}
		}
	}
	fmt.Fprintf(os.Stderr, "usage: GOMAXPROCS=procs %s <size> %s\n", os.Args[0], strings.Join(modes, "|"))
	os.Exit(2)
	return 0, ""
}

// submitters is W9p's number of goroutines submitting at once: 4 per P
// (SUBMITTERS_PER_PROC in bench/src/workloads/w9_pool.rs).
func submitters() int {
	return 4 * runtime.GOMAXPROCS(0)
}

// share is W9p's submits of submitter i of units, n in all: the first
// n % units take one more.
func share(n int64, units, i int) int64 {
	s := n / int64(units)
	if int64(i) < n%int64(units) {
		s++
	}
	return s
}
