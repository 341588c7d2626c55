package router

import (
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/router/routerapi"
)

// measureRelease is the process's memory just after a release of its
// free heap (rib.go's tableHeld): its resident memory, from the kernel
// (/proc/self/statm), and its live heap, from the runtime (the heap its
// objects held at the last collection's end, which the release ran).
func measureRelease() routerapi.MemoryRelease {
	m := routerapi.MemoryRelease{PID: os.Getpid(), At: time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			m.ResidentKB = pages * int64(os.Getpagesize()) / 1024
		}
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if live[0].Value.Kind() == metrics.KindUint64 {
		m.HeapLiveKB = int64(live[0].Value.Uint64() / 1024)
	}
	return m
}
