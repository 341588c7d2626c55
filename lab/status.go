package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// Status is what `msr lab status` reports of one lab.
type Status struct {
	Name      string       `json:"name"`
	Nodes     []NodeStatus `json:"nodes"`
	Processes []ProcStatus `json:"processes"`
}

// NodeStatus is one host or switch as the kernel sees it now.
type NodeStatus struct {
	NodeState
	Present    bool          `json:"present"`
	Interfaces []IfaceStatus `json:"interfaces"`
}

// IfaceStatus is one interface of a node, from `ip -j addr`.
type IfaceStatus struct {
	Name      string   `json:"name"`
	State     string   `json:"state"`
	MAC       string   `json:"mac"`
	MTU       int      `json:"mtu"`
	Master    string   `json:"master,omitempty"`
	Addresses []string `json:"addresses"`
}

// ProcStatus is a process the lab started and whether it still runs.
type ProcStatus struct {
	ProcState
	Running bool `json:"running"`
}

// GetStatus reads the state of a lab that is up and checks it against the
// kernel: namespaces present, interfaces, addresses, processes alive.
func GetStatus(name string) (*Status, error) {
	st, err := ReadState(name)
	if err != nil {
		return nil, err
	}
	out := &Status{Name: st.Name, Processes: []ProcStatus{}}
	for _, n := range st.Nodes {
		ns := NodeStatus{NodeState: n, Interfaces: []IfaceStatus{}}
		if _, err := os.Stat("/var/run/netns/" + n.Namespace); err == nil {
			ns.Present = true
			if ns.Interfaces, err = interfaces(n.Namespace); err != nil {
				return nil, err
			}
		}
		out.Nodes = append(out.Nodes, ns)
	}
	for _, p := range st.Processes {
		out.Processes = append(out.Processes, ProcStatus{ProcState: p, Running: p.Running()})
	}
	return out, nil
}

func interfaces(ns string) ([]IfaceStatus, error) {
	raw, err := exec.Command("ip", "-n", ns, "-j", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("list interfaces of %s: %w", ns, err)
	}
	var links []struct {
		Ifname    string `json:"ifname"`
		Operstate string `json:"operstate"`
		Address   string `json:"address"`
		MTU       int    `json:"mtu"`
		Master    string `json:"master"`
		AddrInfo  []struct {
			Family    string `json:"family"`
			Local     string `json:"local"`
			Prefixlen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(raw, &links); err != nil {
		return nil, fmt.Errorf("parse ip -j addr of %s: %w", ns, err)
	}
	var out []IfaceStatus
	for _, l := range links {
		if l.Ifname == "lo" {
			continue
		}
		s := IfaceStatus{Name: l.Ifname, State: l.Operstate, MAC: l.Address, MTU: l.MTU, Master: l.Master, Addresses: []string{}}
		for _, a := range l.AddrInfo {
			if a.Family == "inet" {
				s.Addresses = append(s.Addresses, fmt.Sprintf("%s/%d", a.Local, a.Prefixlen))
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// WriteText prints a status as a table for people.
func (s *Status) WriteText(w io.Writer) {
	fmt.Fprintf(w, "lab %s\n", s.Name)
	for _, n := range s.Nodes {
		state := "up"
		if !n.Present {
			state = "MISSING"
		}
		fmt.Fprintf(w, "  %-7s %-10s %s (%s)\n", n.Role, n.Name, state, n.Namespace)
		for _, i := range n.Interfaces {
			extra := strings.Join(i.Addresses, " ")
			if i.Master != "" {
				extra = "bridge " + i.Master
			}
			fmt.Fprintf(w, "          %-15s %-7s %s mtu %d %s\n", i.Name, i.State, i.MAC, i.MTU, extra)
		}
	}
	for _, p := range s.Processes {
		state := "running"
		if !p.Running {
			state = "exited"
		}
		fmt.Fprintf(w, "  process %s/%s pid %d %s: %s (log %s)\n", p.Host, p.Name, p.PID, state, strings.Join(p.Command, " "), p.Log)
	}
}

// Exec runs argv inside host of lab, connected to the given streams, and
// returns the command's exit status.
func Exec(labName, host string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	st, err := ReadState(labName)
	if err != nil {
		return 0, err
	}
	found := false
	for _, n := range st.Nodes {
		found = found || n.Name == host
	}
	if !found {
		return 0, fmt.Errorf("lab %s has no host %q", labName, host)
	}
	if len(argv) == 0 {
		return 0, errors.New("no command to run: give one after --")
	}
	cmd := nsCommand(Namespace(labName, host), argv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("run %s on %s: %w", argv[0], host, err)
	}
	return 0, nil
}
