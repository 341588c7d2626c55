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
// (/proc/self/statm), and from the runtime its live heap (what its
// objects held at the last collection's end, which the release ran), its
// heap's fragmentation and all it holds.
func measureRelease() routerapi.MemoryRelease {
	m := routerapi.MemoryRelease{PID: os.Getpid(), At: time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			m.ResidentKB = pages * int64(os.Getpagesize()) / 1024
		}
	}
	ms := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(ms)
	kB := func(i int) int64 {
		if ms[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(ms[i].Value.Uint64() / 1024)
	}
	m.HeapLiveKB, m.HeapUnusedKB, m.GoKB = kB(0), kB(1), kB(2)-kB(3)
	return m
}
