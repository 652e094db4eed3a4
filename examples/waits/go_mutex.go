// go_mutex: a Go sync.Mutex that four goroutines fight over, each taking it 50 times and
// holding it ~1 ms, busy. Go parks a goroutine that waits for a sync.Mutex in its own
// scheduler (a semaphore in the runtime, not a futex per lock): contend recognises the
// program as Go and says what it can and cannot see of these waits.
//
// Build (standard library only): go build -o go_mutex examples/waits/go_mutex.go
// Options: -g GOROUTINES (4), -n LOCKS_PER_GOROUTINE (50), -u HOLD_US (1000).
//
// Truth line (examples/README.md): hot.addr the Mutex's address, wait_ns the goroutines'
// wall time inside Lock() summed, slow the Lock() calls that took over 50 µs.
package main

import (
	"flag"
	"fmt"
	"sync"
	"time"
)

var hot sync.Mutex

func main() {
	goroutines := flag.Int("g", 4, "goroutines")
	n := flag.Int("n", 50, "locks per goroutine")
	holdUs := flag.Int("u", 1000, "hold, microseconds, busy")
	flag.Parse()
	hold := time.Duration(*holdUs) * time.Microsecond
	var start, done sync.WaitGroup
	start.Add(1)
	waits := make([]time.Duration, *goroutines)
	slow := make([]int, *goroutines)
	for g := 0; g < *goroutines; g++ {
		done.Add(1)
		go func(g int) {
			defer done.Done()
			start.Wait()
			for i := 0; i < *n; i++ {
				t0 := time.Now()
				hot.Lock()
				w := time.Since(t0)
				waits[g] += w
				if w > 50*time.Microsecond {
					slow[g]++
				}
				for until := time.Now().Add(hold); time.Now().Before(until); {
				}
				hot.Unlock()
			}
		}(g)
	}
	start.Done()
	done.Wait()
	var total time.Duration
	nslow := 0
	for g := range waits {
		total += waits[g]
		nslow += slow[g]
	}
	fmt.Printf("truth program=go_mutex goroutines=%d locks_per_goroutine=%d hold_ns=%d hot.addr=%p wait_ns=%d slow=%d\n",
		*goroutines, *n, hold.Nanoseconds(), &hot, total.Nanoseconds(), nslow)
}
