package vcp

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
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
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxChildLog {
		os.Rename(logPath, logPath+".1")
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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

// crashes counts a suite's unexpected exits within crashWindow: the
// suite restarts a daemon that died, and past crashLimit exits in the
// window it gives up the VCP's mastership (Suite.Failed), so that the
// standby, whose suite is healthy, takes over.
type crashes struct {
	at []time.Time
}

const (
	crashLimit  = 3
	crashWindow = time.Minute
)

// add records a crash at now and says whether the limit is reached.
func (c *crashes) add(now time.Time) bool {
	keep := c.at[:0]
	for _, t := range c.at {
		if now.Sub(t) < crashWindow {
			keep = append(keep, t)
		}
	}
	c.at = append(keep, now)
	return len(c.at) >= crashLimit
}
