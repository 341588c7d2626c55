package soak

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/msr-router/msr/demo"
	"github.com/msr-router/msr/lab"
)

// labProcesses counts the processes in the default lab's hosts'
// namespaces, by command (the routing suite moves between the VCPs with
// the mastership: counted together).
func labProcesses() (map[string]int, error) { return processesOf(demo.LabName) }

// processesOf counts the processes in a lab's hosts' namespaces, by
// command.
func processesOf(name string) (map[string]int, error) {
	st, err := lab.ReadState(name)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	var nss []string
	for _, n := range st.Nodes {
		nss = append(nss, n.Namespace)
	}
	for _, pid := range lab.PIDsIn(nss...) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil {
			counts[strings.TrimSpace(string(comm))]++
		}
	}
	return counts, nil
}

// diffCounts says which process counts changed.
func diffCounts(a, b map[string]int) string {
	var d []string
	for k, n := range b {
		if a[k] != n {
			d = append(d, fmt.Sprintf("%s %d → %d", k, a[k], n))
		}
	}
	for k, n := range a {
		if _, ok := b[k]; !ok {
			d = append(d, fmt.Sprintf("%s %d → 0", k, n))
		}
	}
	sort.Strings(d)
	return strings.Join(d, ", ")
}

// processAge is how long the process pid has run (0 if unknown).
func processAge(pid string) time.Duration {
	stat, err1 := os.ReadFile("/proc/" + pid + "/stat")
	up, err2 := os.ReadFile("/proc/uptime")
	if err1 != nil || err2 != nil {
		return 0
	}
	p, ok := parseProcStat(string(stat))
	if !ok {
		return 0
	}
	upS, _ := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	return time.Duration((upS - float64(p.start)/100) * float64(time.Second)) // USER_HZ is 100 on Linux
}
