// HTTP hello under wrk, the Go net/http peer: keep-alive HTTP/1.1, GET /
// answered with "Hello, World!" (net/http adds Date), GOMAXPROCS = PROCS.
//
//	nethttp PORT PROCS
//
// Built by bench/scripts/http.py (GO111MODULE=off), apart from bench/go/*.go.
package main

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
)

var (
	body        = []byte("Hello, World!")
	server      = []string{"net/http"}
	contentType = []string{"text/plain"}
	contentLen  = []string{strconv.Itoa(len(body))}
)

func hello(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["Server"] = server
	h["Content-Type"] = contentType
	h["Content-Length"] = contentLen
	w.Write(body)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: nethttp PORT PROCS")
		os.Exit(2)
	}
	procs, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: nethttp PORT PROCS")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(procs)
	addr := "127.0.0.1:" + os.Args[1]
	fmt.Fprintf(os.Stderr, "nethttp on http://%s/ (GOMAXPROCS %d, %s)\n", addr, runtime.GOMAXPROCS(0), runtime.Version())
	http.HandleFunc("/", hello)
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
