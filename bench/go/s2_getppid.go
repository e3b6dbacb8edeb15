// S2 fast calls: 100 goroutines share n getppid system calls (the fixed cost
// of entersyscall/exitsyscall). See bench/go/s1_syscall.go.
//
// The call is syscall.Syscall(SYS_GETPPID), not syscall.Getppid: the
// package's Getppid is generated as a raw call (`//sysnb`,
// rawSyscallNoError), which skips entersyscall/exitsyscall altogether, so it
// would time a bare system call against gosched's `syscall(getppid)` and
// Java's Blocker.begin/end around the same call. Syscall is what Go's own
// blocking calls (read, write, nanosleep) go through.
//
// usage: GOMAXPROCS=procs s2_getppid <n>    prints one JSON line
package main

import "syscall"

func main() {
	n := sizeArg()
	warmUp()
	elapsed, total := runCalls(n, func() int64 {
		if ppid, _, _ := syscall.Syscall(syscall.SYS_GETPPID, 0, 0, 0); ppid > 0 {
			return 1
		}
		return 0
	})
	report("s2", n, elapsed, total, 0, 0)
}
