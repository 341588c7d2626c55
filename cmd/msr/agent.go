package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/cli"
	"github.com/msr-router/msr/internal/logging"
)

// agent is what `msr lb`, `msr router` and `msr vcp` run: answer the API,
// work until told to stop, release (never detach: pinned links keep
// forwarding).
type agent interface {
	Handler() http.Handler
	Run(ctx context.Context) error
	Close() error
}

// endpoints are where an agent's API answers: always its Unix socket, and
// on the management network when listen is set, with the token of the
// router's DIST key (internal/api/tcp.go).
type endpoints struct {
	socket, listen string
	keyFile        string
	keyID          uint8
	security       api.Security
}

func endpointsOf(socket string, listen netip.AddrPort, keyFile string, keyID uint8, security api.Security) endpoints {
	ep := endpoints{socket: socket, keyFile: keyFile, keyID: keyID, security: security}
	if listen.IsValid() {
		ep.listen = listen.String()
	}
	return ep
}

// rekeyOnHUP has an LB or a back-end read its DIST key files again at
// each SIGHUP: a step of a key rollover (docs/operations.md). The VCP's
// SIGHUP reloads its whole config, keys included.
func rekeyOnHUP(a interface{ Rekey() error }, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			if err := a.Rekey(); err != nil {
				log.Error("DIST keys", "err", err)
			} else {
				log.Info("DIST keys read again")
			}
		}
	}()
}

// checkConfig is --check: the file read and checked as the agent would,
// nothing started (as bird -p). It prints what it found good.
func checkConfig(file string, load func(string) error) error {
	if file == "" {
		return cli.Usagef("--check needs --config FILE.yaml")
	}
	if err := load(file); err != nil {
		return err
	}
	fmt.Printf("%s: good\n", file)
	return nil
}

// runAgent runs a until SIGINT or SIGTERM, its API with the log level
// (logging.PathLevel) beside a's paths, and Go's profiles on its local
// socket. With MSR_CPUPROFILE=DIR it writes a CPU profile of its whole run
// to DIR/WHAT-NAME.pprof.
func runAgent(what, name string, ep endpoints, a agent, log *slog.Logger, level *slog.LevelVar) error {
	closeAgent := sync.OnceValue(a.Close)
	defer closeAgent()
	if dir := os.Getenv("MSR_CPUPROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, what+"-"+name+".pprof"))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var ln net.Listener
	var access *api.Access
	var tc *tls.Config
	if ep.listen != "" {
		key, err := dist.ReadKeyFile(ep.keyFile, ep.keyID)
		if err != nil {
			return err
		}
		if access, err = ep.security.Access(api.Token(key.Secret)); err != nil {
			return err
		}
		if tc, err = ep.security.ServerTLS(); err != nil {
			return err
		}
		if access.Read == "" {
			log.Warn("management API without api_security tokens: anyone on the management network reads it", "api", ep.listen)
		}
		if ln, err = api.ListenTCP(ep.listen); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	up := &upgrader{kind: what, stop: cancel, started: time.Now()}
	mux := http.NewServeMux()
	mux.Handle(logging.PathLevel, logging.LevelHandler(level, log))
	up.register(mux)
	mux.Handle("/", a.Handler())
	var h http.Handler = mux
	// The local socket serves Go's profiles too, /debug/pprof/ (heap,
	// goroutine, profile?seconds=N): where an agent's memory and time go,
	// looked at where it runs; to root only (api.OwnerOnly: a heap profile
	// holds what the agent holds). The management API does not.
	prof := http.NewServeMux()
	prof.HandleFunc("/debug/pprof/", httppprof.Index)
	prof.HandleFunc("/debug/pprof/profile", httppprof.Profile)
	prof.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
	local := http.NewServeMux()
	local.Handle("/debug/pprof/", api.OwnerOnly(prof))
	local.Handle("/", h)
	go func() {
		if err := api.Serve(ctx, ep.socket, local); err != nil {
			log.Error("API", "err", err)
		}
	}()
	if ln != nil {
		go func() {
			if err := api.ServeTCP(ctx, ln, access, tc, h); err != nil {
				log.Error("management API", "err", err)
			}
		}()
	}
	log.Info(what+" running", "name", name, "socket", ep.socket, "api", ep.listen)
	err := a.Run(ctx)
	bin := up.pending()
	if bin == "" {
		return err
	}
	// As on SIGTERM: the data path stays pinned, forwarding. The API's
	// socket is gone with ctx; the new build makes it again.
	closeAgent()
	log.Info(what+" upgrading in place", "name", name, "binary", bin)
	return up.exec(bin)
}

// newLogger is an agent's logger, as its config's log: says (repeated
// warnings held back, internal/logging); it logs first what the agent's
// config file still says in words that are deprecated (config.Warnings).
func newLogger(c logging.Config, warnings []string) (*slog.Logger, *slog.LevelVar) {
	log, level := logging.New(os.Stderr, c, logging.RepeatWindow)
	for _, w := range warnings {
		log.Warn("config", "deprecated", w)
	}
	return log, level
}

// needAgent says which agent a command is for: by --name (its socket is
// api.SocketPath) or by --socket.
func needAgent(kind, name, socket string) error {
	if name == "" && socket == "" {
		return cli.Usagef("name the %s with --name or --socket", kind)
	}
	return nil
}
