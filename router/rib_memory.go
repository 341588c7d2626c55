package router

import (
	"context"
	"runtime/debug"
	"time"
)

// The feed's memory upkeep. A table's arrival (a first load, or a
// graceful restart's refresh after a takeover) makes garbage: the UPDATEs
// parsed, the stale paths beside the new ones. Go keeps the heap it grew
// to, up to twice the live heap at GOGC=100, so a back-end's resident
// memory climbed with each takeover. So while a table arrives the runtime
// collects as usual (the load is not slowed); at the End-of-RIB that ends
// a big table's arrival, once for every arrival, it collects and returns
// the memory; then it holds the table at heldGCPercent, returning memory
// every heldRelease too. The measurements are in docs/reliability.md
// ("Over a full table", and finding 22).

// releaseMin is the paths a table holds to count as big; heldGCPercent
// the GOGC a held table runs at (the heap grows a quarter of the live
// heap between collections); heldRelease how often a held table's memory
// goes back to the system.
const (
	releaseMin    = 50_000
	heldGCPercent = 25
	heldRelease   = time.Minute
)

// tableArriving and tableHeld are ribFeed's arriving and release.
func tableArriving() { debug.SetGCPercent(100) }

func tableHeld() {
	debug.SetGCPercent(heldGCPercent)
	debug.FreeOSMemory()
}

// holdsBigTable says (f.mu held) whether the feed, with a release, holds
// a table that has arrived whole (nothing stale) and is big enough to
// release: releaseMin paths or more.
func (f *ribFeed) holdsBigTable() bool {
	return f.release != nil && f.nStale == 0 && f.nPaths >= f.releaseMin
}

// keepReleased calls release every releaseEvery (heldRelease) while the
// feed holds a big table that has arrived (nothing stale, releaseMin
// paths or more), counted from the last release, whichever made it. It
// looks six times a period: looking once a period, an End-of-RIB's
// release between two looks made the next one skipped, and releases came
// up to two periods apart.
func (f *ribFeed) keepReleased(ctx context.Context) {
	t := time.NewTicker(f.releaseEvery / 6)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		held := f.synced.Load() && f.holdsBigTable() && time.Since(f.lastRelease) >= f.releaseEvery
		if held {
			f.lastRelease = time.Now()
		}
		f.mu.Unlock()
		if held {
			f.releaseNow()
		}
	}
}

// releaseNow calls release, and records the memory the agent holds just
// after it (Status's Release).
func (f *ribFeed) releaseNow() {
	f.release()
	m := measureRelease()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases++
	m.Releases = f.releases
	f.st.Release = &m
}
