package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/msr-router/msr/internal/cli"
)

// agent is what `msr lb` and `msr router` run: serve the local API, work
// until told to stop, release (never detach: pinned links keep forwarding).
type agent interface {
	Serve(ctx context.Context, socket string) error
	Run(ctx context.Context) error
	Close() error
}

// runAgent runs a until SIGINT or SIGTERM.
func runAgent(what, name, socket string, a agent, log *slog.Logger) error {
	defer a.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		if err := a.Serve(ctx, socket); err != nil {
			log.Error("API", "err", err)
		}
	}()
	log.Info(what+" running", "name", name, "socket", socket)
	return a.Run(ctx)
}

func newLogger() *slog.Logger { return slog.New(slog.NewTextHandler(os.Stderr, nil)) }

// agentSocket is the API socket of the agent kind named name, or socket.
func agentSocket(kind, name, socket string) (string, error) {
	switch {
	case socket != "":
		return socket, nil
	case name != "":
		return "/run/msr/" + kind + "-" + name + ".sock", nil
	}
	return "", cli.Usagef("name the %s with --name or --socket", kind)
}
