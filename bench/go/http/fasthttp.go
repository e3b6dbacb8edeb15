// HTTP hello under wrk, the fasthttp peer: keep-alive HTTP/1.1, GET /
// answered with "Hello, World!" (fasthttp adds Server and Date),
// GOMAXPROCS = PROCS.
//
//	fasthttp PORT PROCS
//
// Built by bench/scripts/http.py against Debian's
// golang-github-valyala-fasthttp-dev (GOPATH=/usr/share/gocode
// GO111MODULE=off), apart from bench/go/*.go.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/valyala/fasthttp"
)

var body = []byte("Hello, World!")

func hello(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain")
	ctx.SetBody(body)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: fasthttp PORT PROCS")
		os.Exit(2)
	}
	procs, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: fasthttp PORT PROCS")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(procs)
	addr := "127.0.0.1:" + os.Args[1]
	fmt.Fprintf(os.Stderr, "fasthttp on http://%s/ (GOMAXPROCS %d, %s)\n", addr, runtime.GOMAXPROCS(0), runtime.Version())
	s := &fasthttp.Server{Handler: hello, Name: "fasthttp"}
	if err := s.ListenAndServe(addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
