// Package logging makes the agents' loggers: log/slog at the level and in
// the format (text or JSON) their config asks, with a warning or error
// that repeats — the same message and attributes, such as a send failing
// every hello interval — logged once, then counted: the next time it is
// logged after the window, it carries "repeated", how many were held back.
package logging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Config is how an agent logs (every element's file: `log:`).
type Config struct {
	Level  string `yaml:"level"`  // debug, info (default), warn, error
	Format string `yaml:"format"` // text (default) or json
}

// ParseLevel reads a level's name.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if s == "" {
		return slog.LevelInfo, nil
	}
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: debug, info, warn or error", s)
	}
	return l, nil
}

// Check says what is wrong with c, if anything.
func (c Config) Check() error {
	if _, err := ParseLevel(c.Level); err != nil {
		return err
	}
	if c.Format != "" && c.Format != "text" && c.Format != "json" {
		return fmt.Errorf("log format %q: text or json", c.Format)
	}
	return nil
}

// RepeatWindow is how long a repeated warning or error is held back.
const RepeatWindow = 10 * time.Second

// New is a logger writing to w as c says, repeats held back for window,
// at a level the agent can change while it runs (LevelHandler).
func New(w io.Writer, c Config, window time.Duration) (*slog.Logger, *slog.LevelVar) {
	level := new(slog.LevelVar)
	l, _ := ParseLevel(c.Level)
	level.Set(l)
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(&dedup{next: h, window: window, seen: &repeats{m: map[string]*repeat{}}}), level
}

// PathLevel is every agent's API path of its log level: GET it, PUT
// ?level=debug|info|warn|error to change it until the agent stops (the
// config's log: level is the one it starts with).
const PathLevel = "/log"

// LevelView is what PathLevel answers.
type LevelView struct {
	Level string `json:"level"`
}

// LevelHandler serves PathLevel for level; log records each change.
func LevelHandler(level *slog.LevelVar, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPut:
			q := r.URL.Query().Get("level")
			l, err := ParseLevel(q)
			if q == "" || err != nil {
				if err == nil {
					err = errors.New("PUT /log?level=debug|info|warn|error")
				}
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
				return
			}
			if old := level.Level(); old != l {
				level.Set(l)
				log.Log(r.Context(), max(l, slog.LevelInfo), "log level changed", "from", old.String(), "to", l.String())
			}
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
			json.NewEncoder(w).Encode(map[string]string{"error": "GET or PUT ?level="})
			return
		}
		json.NewEncoder(w).Encode(LevelView{Level: strings.ToLower(level.Level().String())})
	})
}

// dedup is the handler that holds repeats back.
type dedup struct {
	next   slog.Handler
	window time.Duration
	seen   *repeats
	prefix string // the logger's own attributes and groups, part of the key
}

type repeats struct {
	mu sync.Mutex
	m  map[string]*repeat
}

type repeat struct {
	logged time.Time // when it was last logged
	held   int       // how many since were not
}

func (d *dedup) Enabled(ctx context.Context, l slog.Level) bool { return d.next.Enabled(ctx, l) }

func (d *dedup) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return d.next.Handle(ctx, r)
	}
	var key strings.Builder
	key.WriteString(d.prefix + "\x00" + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		key.WriteString("\x00" + a.String())
		return true
	})
	d.seen.mu.Lock()
	rep := d.seen.m[key.String()]
	if rep != nil && r.Time.Sub(rep.logged) < d.window {
		rep.held++
		d.seen.mu.Unlock()
		return nil
	}
	held := 0
	if rep != nil {
		held = rep.held
	}
	d.seen.m[key.String()] = &repeat{logged: r.Time}
	if len(d.seen.m) > 4096 { // bounded: forget what is past its window
		for k, v := range d.seen.m {
			if r.Time.Sub(v.logged) >= d.window {
				delete(d.seen.m, k)
			}
		}
	}
	d.seen.mu.Unlock()
	if held > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("repeated", held))
	}
	return d.next.Handle(ctx, r)
}

func (d *dedup) WithAttrs(as []slog.Attr) slog.Handler {
	p := d.prefix
	for _, a := range as {
		p += "\x00" + a.String()
	}
	return &dedup{next: d.next.WithAttrs(as), window: d.window, seen: d.seen, prefix: p}
}

func (d *dedup) WithGroup(name string) slog.Handler {
	return &dedup{next: d.next.WithGroup(name), window: d.window, seen: d.seen, prefix: d.prefix + "\x00group " + name}
}
