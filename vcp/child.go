package vcp

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is a daemon the VCP runs (BIRD, FRR's daemons, keepalived): its
// output in a log file, and dead when msr vcp dies (parent-death signal),
// so that a dead VCP's sessions and VRRP adverts die with it.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
}

// startChild starts argv with its stdout and stderr in logPath.
func startChild(logPath string, argv ...string) (*child, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); logFile.Close(); close(c.exited) }()
	return c, nil
}

// stop sends sig and waits for the process, killing it after grace.
func (c *child) stop(sig os.Signal, grace time.Duration) {
	c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(grace):
		c.cmd.Process.Kill()
		<-c.exited
	}
}
