package vcp

import (
	"bufio"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/msr-router/msr/vcp/vcpapi"
)

// What the console reads from BIRD, parsed from birdc's answers (BIRD 2).

// parseProtocols reads `show protocols all`.
func parseProtocols(out string) []vcpapi.Protocol {
	var ps []vcpapi.Protocol
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(line, "BIRD ") || f[0] == "Name":
		case line[0] != ' ' && line[0] != '\t' && len(f) >= 5:
			p := vcpapi.Protocol{Name: f[0], Proto: f[1], State: f[3], Since: f[4]}
			if len(f) > 5 {
				p.Info = strings.Join(f[5:], " ")
			}
			// "Since" may be a date and a time.
			if len(f) > 6 && strings.Contains(f[5], ":") && !strings.Contains(f[4], ":") {
				p.Since, p.Info = f[4]+" "+f[5], strings.Join(f[6:], " ")
			}
			// Shut for its import limit: "Error: Route limit exceeded".
			p.LimitHit = strings.Contains(p.Info, "limit exceeded")
			ps = append(ps, p)
		case len(ps) > 0 && strings.Contains(line, " limit:") && strings.HasSuffix(line, "[HIT]"):
			// "    Import limit:   1 [HIT]": a limit whose action is to
			// warn or block leaves the session up.
			ps[len(ps)-1].LimitHit = true
		case len(ps) > 0 && strings.HasPrefix(strings.TrimSpace(line), "Neighbor address:"):
			ps[len(ps)-1].Neighbor, _ = netip.ParseAddr(f[len(f)-1])
		case len(ps) > 0 && f[0] == "Routes:":
			// Routes:         3 imported, 5 exported, 3 preferred
			for i := 1; i+1 < len(f); i++ {
				n, err := strconv.Atoi(f[i])
				if err != nil {
					continue
				}
				switch strings.TrimSuffix(f[i+1], ",") {
				case "imported":
					ps[len(ps)-1].Imported += n
				case "exported":
					ps[len(ps)-1].Exported += n
				}
			}
		}
	}
	return ps
}

// restartingPeers reads `show protocols all`: the BGP sessions whose
// neighbour announced the Restart State bit in its graceful-restart
// capability (RFC 4724 §3: it restarted itself, and waits for our
// End-of-RIB before it sends its routes), which BIRD shows as "Restart
// recovery" under "Neighbor capabilities". BIRD's own recovery does not
// wait for such a peer's End-of-RIB (to avoid the deadlock the bit is
// for), so its routes may come well after its session is up.
func restartingPeers(out string) map[string]bool {
	peers := map[string]bool{}
	var name string
	var neighbor bool // in the "Neighbor capabilities" block
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case line[0] != ' ' && line[0] != '\t':
			name, neighbor = f[0], false
		case strings.TrimSpace(line) == "Neighbor capabilities":
			neighbor = true
		case strings.TrimSpace(line) == "Local capabilities" || f[0] == "Session:" || f[0] == "Channel":
			neighbor = false
		case neighbor && strings.TrimSpace(line) == "Restart recovery":
			peers[name] = true
		}
	}
	return peers
}

// parseRoutes reads `show route ...`: blocks of a route line
//
//	10.1.0.0/16          unicast [peer0 10:00:01.000] * (100) [AS65010i]
//		via 192.0.2.10 on x10
//
// where a prefix with several routes writes the prefix only on the first.
func parseRoutes(out string) []vcpapi.SuiteRoute {
	var rs []vcpapi.SuiteRoute
	var prefix string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(line, "BIRD ") || strings.HasPrefix(line, "Table ") {
			continue
		}
		indented := line[0] == ' ' || line[0] == '\t'
		switch {
		case indented && f[0] == "via" && len(f) > 1 && len(rs) > 0:
			rs[len(rs)-1].Via = append(rs[len(rs)-1].Via, f[1])
		case indented && f[0] == "dev" && len(f) > 1 && len(rs) > 0:
			rs[len(rs)-1].Dev = f[1]
		case strings.Contains(line, "["):
			r := vcpapi.SuiteRoute{}
			rest := f
			if !indented {
				if _, err := netip.ParsePrefix(f[0]); err != nil {
					continue
				}
				prefix, rest = f[0], f[1:]
			}
			r.Prefix = prefix
			for i, w := range rest {
				switch {
				case strings.HasPrefix(w, "[") && r.Protocol == "":
					r.Protocol = strings.TrimPrefix(w, "[")
				case w == "*":
					r.Best = true
				case w == "via" && i+1 < len(rest): // single-line form
					r.Via = append(r.Via, rest[i+1])
				}
			}
			if prefix != "" {
				rs = append(rs, r)
			}
		}
	}
	return rs
}

// parseRouteCount reads `show route count`: "12 of 12 routes for 12
// networks in table master4", or with both families the "Total: ..."
// line after each table's.
func parseRouteCount(out string) (routes, networks int, err error) {
	found := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		// With IPv6 there is a line per table (master4, master6) and a
		// total: the total counts both families.
		if _, err := fmt.Sscanf(line, "Total: %d of %d routes for %d networks", new(int), &routes, &networks); err == nil {
			return routes, networks, nil
		}
		if found {
			continue
		}
		if _, err := fmt.Sscanf(line, "%d of %d routes for %d networks", new(int), &routes, &networks); err == nil {
			found = true
		}
	}
	if !found {
		return 0, 0, fmt.Errorf("no route count in %q", out)
	}
	return routes, networks, nil
}

// parseIGPNeighbors reads `show ospf neighbors` (rip false: "Router ID
// Pri State DTime Interface Router IP", the address last) or `show rip
// neighbors` ("IP address Interface Metric Routes Seen", the address
// first): the neighbours on the mirrors.
func parseIGPNeighbors(out string, rip bool) []IGPNeighbor {
	var ns []IGPNeighbor
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		at, iface := len(f)-1, len(f)-2
		if rip {
			at, iface = 0, 1
		}
		a, err := netip.ParseAddr(f[at])
		if v := mirrorVLAN(f[iface]); err == nil && v != 0 {
			ns = append(ns, IGPNeighbor{Addr: a.WithZone(""), VLAN: v})
		}
	}
	return ns
}
