package vcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a daemon the VCP runs (BIRD, FRR's daemons, keepalived): its
// output in a log file, and dead when msr vcp dies (parent-death signal),
// so that a dead VCP's sessions and VRRP adverts die with it.
//
// The log is appended to, never truncated: what a daemon said before it
// crashed is still there after it is restarted. A log past maxChildLog is
// moved to LOG.1 (the one before it dropped) when the daemon starts. The
// VCP writes a line of its own at each start and exit, with the exit
// status.
type child struct {
	cmd    *exec.Cmd
	name   string
	exited chan struct{} // closed once the process has been waited for
	// status is how it ended ("exit status 1", "signal: killed"), set
	// before exited closes.
	status string
}

// maxChildLog is the size past which a child's log is rotated at start.
const maxChildLog = 16 << 20

// startChild starts argv with its stdout and stderr appended to logPath.
func startChild(logPath string, argv ...string) (*child, error) {
	return startChildEnv(logPath, nil, argv...)
}

// startChildEnv is startChild with env added to the VCP's environment.
func startChildEnv(logPath string, env []string, argv ...string) (*child, error) {
	return startChildAs(logPath, env, nil, argv...)
}

// daemonCreds is who a child runs as instead of root: its owner, extra
// groups, and the capabilities it keeps (ambient: they survive the exec).
type daemonCreds struct {
	owner  *owner
	groups []uint32
	caps   []uintptr
}

// startChildAs is startChildEnv for a child run as u (root if u or its
// owner is nil). The VCP changes the user, not the daemon: a daemon that
// drops root itself (bird -u, snmpd -u) loses the parent-death signal
// with its old credentials and outlives a killed VCP.
func startChildAs(logPath string, env []string, u *daemonCreds, argv ...string) (*child, error) {
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxChildLog {
		os.Rename(logPath, logPath+".1")
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if os.Getenv("JOURNAL_STREAM") != "" {
		// Under systemd (stderr is the journal): the journal too, each
		// line prefixed with the daemon's name.
		w := io.MultiWriter(logFile, &linePrefixer{prefix: filepath.Base(argv[0]) + ": ", w: os.Stderr})
		cmd.Stdout, cmd.Stderr = w, w
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if u != nil && u.owner != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.owner.uid), Gid: uint32(u.owner.gid), Groups: u.groups}
		cmd.SysProcAttr.AmbientCaps = u.caps
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logFile, "%s msr vcp: could not start %s: %v\n", stamp(), strings.Join(argv, " "), err)
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	fmt.Fprintf(logFile, "%s msr vcp: started %s, pid %d\n", stamp(), strings.Join(argv, " "), cmd.Process.Pid)
	c := &child{cmd: cmd, name: argv[0], exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		c.status = "exit status 0"
		if err != nil {
			c.status = err.Error()
		}
		fmt.Fprintf(logFile, "%s msr vcp: %s (pid %d) ended: %s\n", stamp(), argv[0], cmd.Process.Pid, c.status)
		logFile.Close()
		close(c.exited)
	}()
	return c, nil
}

func stamp() string { return time.Now().Format("2006-01-02 15:04:05.000") }

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

// errSuiteStopped is a daemon's restart refused because the suite was
// stopped meanwhile: the new process is ended at once, not left running
// where Stop no longer looks.
var errSuiteStopped = errors.New("routing suite stopped")

// stopped says whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// supervisor keeps a suite's daemons running: one that dies is logged
// with how, counted, and started again at once (then every second until
// it starts), until stop closes. Past crashLimit deaths within
// crashWindow, across the suite's daemons, it calls failed: the agent
// gives up its mastership to the standby, whose suite is healthy.
type supervisor struct {
	stop   <-chan struct{}
	log    *slog.Logger
	failed func()

	mu      sync.Mutex
	crashes []time.Time // within crashWindow
}

const (
	crashLimit  = 3
	crashWindow = time.Minute
)

// watch keeps daemon running: proc is it now, restart starts it again,
// how says how ("restarting it in graceful-restart recovery").
func (s *supervisor) watch(daemon, how string, proc *child, restart func() (*child, error)) {
	for {
		select {
		case <-s.stop:
			return
		case <-proc.exited:
		}
		select {
		case <-s.stop:
			return
		default:
		}
		s.log.Error("routing suite died: "+how, "daemon", daemon, "pid", proc.cmd.Process.Pid, "status", proc.status)
		if s.crashed(time.Now()) {
			s.log.Error("routing suite died too often", "times", crashLimit, "within", crashWindow)
			if s.failed != nil {
				s.failed()
			}
		}
		for {
			next, err := restart()
			if err == nil {
				proc = next
				break
			}
			if errors.Is(err, errSuiteStopped) {
				return
			}
			s.log.Error("restart routing suite", "daemon", daemon, "err", err)
			select {
			case <-s.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// crashed records a death at now and says whether the limit is reached.
func (s *supervisor) crashed(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := s.crashes[:0]
	for _, t := range s.crashes {
		if now.Sub(t) < crashWindow {
			keep = append(keep, t)
		}
	}
	s.crashes = append(keep, now)
	return len(s.crashes) >= crashLimit
}

// linePrefixer writes whole lines to w, each with prefix.
type linePrefixer struct {
	prefix string
	w      io.Writer
	mu     sync.Mutex
	buf    []byte
}

func (l *linePrefixer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if _, err := fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf[:i]); err != nil {
			return len(p), nil // the journal gone: the file still has it
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 { // a line without end: flush it
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf)
		l.buf = l.buf[:0]
	}
	return len(p), nil
}
