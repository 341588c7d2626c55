package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/msr-router/msr/dist"
	"github.com/msr-router/msr/internal/api"
	"github.com/msr-router/msr/internal/cli"
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
}

func endpointsOf(socket string, listen netip.AddrPort, keyFile string, keyID uint8) endpoints {
	ep := endpoints{socket: socket, keyFile: keyFile, keyID: keyID}
	if listen.IsValid() {
		ep.listen = listen.String()
	}
	return ep
}

// runAgent runs a until SIGINT or SIGTERM. With MSR_CPUPROFILE=DIR it
// writes a CPU profile of its whole run to DIR/WHAT-NAME.pprof.
func runAgent(what, name string, ep endpoints, a agent, log *slog.Logger) error {
	defer a.Close()
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
	var token string
	if ep.listen != "" {
		key, err := dist.ReadKeyFile(ep.keyFile, ep.keyID)
		if err != nil {
			return err
		}
		token = api.Token(key.Secret)
		if ln, err = api.ListenTCP(ep.listen); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	h := a.Handler()
	go func() {
		if err := api.Serve(ctx, ep.socket, h); err != nil {
			log.Error("API", "err", err)
		}
	}()
	if ln != nil {
		go func() {
			if err := api.ServeTCP(ctx, ln, token, h); err != nil {
				log.Error("management API", "err", err)
			}
		}()
	}
	log.Info(what+" running", "name", name, "socket", ep.socket, "api", ep.listen)
	return a.Run(ctx)
}

// newLogger is an agent's logger; it logs first what the agent's config
// file still says in words that are deprecated (config.Warnings).
func newLogger(warnings []string) *slog.Logger {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	for _, w := range warnings {
		log.Warn("config", "deprecated", w)
	}
	return log
}

// needAgent says which agent a command is for: by --name (its socket is
// api.SocketPath) or by --socket.
func needAgent(kind, name, socket string) error {
	if name == "" && socket == "" {
		return cli.Usagef("name the %s with --name or --socket", kind)
	}
	return nil
}
