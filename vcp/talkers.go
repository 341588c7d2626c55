package vcp

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/msr-router/msr/lb/lbapi"
)

// The web view's top talkers: each LB's, from its sFlow samples (its
// status), summed over the LBs. Asked at most every talkersEvery: the
// view is drawn every second by every browser that has it open.

const (
	talkersEvery = 5 * time.Second
	talkersTop   = 10
)

type talkersCache struct {
	mu  sync.Mutex
	at  time.Time
	top []lbapi.Talker
}

// topTalkers are the LBs' top talkers summed, asked again if the last
// answer is older than talkersEvery. Call without a.mu.
func (a *Agent) topTalkers() []lbapi.Talker {
	c := &a.talkers
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < talkersEvery {
		return c.top
	}
	lbs, _ := a.traceElements()
	type key struct{ src, dst, proto string }
	sum := map[key]lbapi.Talker{}
	for _, name := range lbs {
		status, body, err := a.Relay(name, "GET", lbapi.PathStatus, nil)
		var s struct {
			SFlow *struct {
				Top []lbapi.Talker `json:"top"`
			} `json:"sflow"`
		}
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &s) != nil || s.SFlow == nil {
			continue
		}
		for _, t := range s.SFlow.Top {
			k := key{t.Src, t.Dst, t.Proto}
			o := sum[k]
			t.Bytes, t.Frames, t.Seconds = t.Bytes+o.Bytes, t.Frames+o.Frames, max(t.Seconds, o.Seconds)
			sum[k] = t
		}
	}
	top := make([]lbapi.Talker, 0, len(sum))
	for _, t := range sum {
		top = append(top, t)
	}
	lbapi.SortTalkers(top)
	c.at, c.top = time.Now(), top[:min(len(top), talkersTop)]
	return c.top
}
