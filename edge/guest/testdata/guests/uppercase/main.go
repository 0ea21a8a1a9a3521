// Command uppercase is the test and demonstration guest: it writes its
// standard input to standard output in upper case. An input that starts
// with one of these words makes it misbehave instead, so that one module
// (compiled once) shows every way a guest can end:
//
//	!exit N   writes "declared error N" and exits with status N
//	!loop     runs forever, until its deadline or fuel stops it
//	!alloc    grows its memory without bound, until the grant refuses
//	!flood    writes to standard output without end, ignoring errors
//	!sleep    sleeps for an hour
package main

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"time"
)

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		os.Exit(1)
	}
	switch command, arg, _ := bytes.Cut(bytes.TrimSpace(in), []byte(" ")); string(command) {
	case "!exit":
		code, err := strconv.Atoi(string(arg))
		if err != nil {
			code = 1
		}
		_, _ = os.Stdout.WriteString("declared error " + strconv.Itoa(code) + "\n")
		os.Exit(code)
	case "!loop":
		loop()
	case "!alloc":
		alloc()
	case "!flood":
		flood()
	case "!sleep":
		time.Sleep(time.Hour)
	}
	if _, err := os.Stdout.Write(bytes.ToUpper(in)); err != nil {
		os.Exit(1)
	}
}

var spin uint64

func loop() {
	for {
		spin++
	}
}

var kept [][]byte

// alloc keeps every block reachable and touched, so the runtime must grow
// linear memory for each.
func alloc() {
	for {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = byte(i)
		}
		kept = append(kept, b)
	}
}

func flood() {
	line := bytes.Repeat([]byte("flood "), 1024)
	for {
		_, _ = os.Stdout.Write(line)
	}
}
